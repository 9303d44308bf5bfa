"""Fixtures of the transaction coordinator's tests: a broker over a fresh directory (`root`)
with topics "a" and "b" of two partitions each, on the test's clock."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import eoslog
from tests.support import logtools


@pytest.fixture
def root(tmp_path: os.PathLike[str]) -> str:
    return os.path.join(tmp_path, "data")


@pytest.fixture
def broker(root: str, clock: logtools.Clock) -> Iterator[eoslog.Broker]:
    opened = eoslog.open(root, background=False, clock_ms=clock)
    for topic in ("a", "b"):
        opened.create_topic(topic, 2)
    yield opened
    opened.close()
