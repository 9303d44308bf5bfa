"""Fixtures of the wire-protocol tests: a broker in a temporary directory served on a free
loopback port (Broker.serve), and the clients pointed at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import eoslog
from eoslog.broker import Broker
from eoslog.serve.server import Server


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    opened = eoslog.open(str(tmp_path / "log"))
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def server(broker: Broker) -> Server:
    """The broker served on a free port; the broker's close closes it."""
    return broker.serve("127.0.0.1:0")
