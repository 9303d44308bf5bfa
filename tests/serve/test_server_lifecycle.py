"""Broker.serve's life: where it binds, what it refuses, and that closing it (or the broker)
answers the request being served before the connection ends."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import eoslog
from eoslog.broker import Broker
from eoslog.errors import KafkaStorageError
from eoslog.serve.server import Server
from tests.serve import wire
from tests.serve.clients import wait_until


def test_serve_binds_loopback_on_a_free_port_and_says_which(server: Server) -> None:
    host, port = server.address.rsplit(":", 1)
    assert host == "127.0.0.1"
    assert int(port) == server.port > 0


@pytest.mark.parametrize("address", ["9092", "127.0.0.1:", ":9092", "127.0.0.1:http"])
def test_serve_with_a_malformed_address_raises_value_error(broker: Broker, address: str) -> None:
    with pytest.raises(ValueError, match=r"HOST:PORT|name a host"):
        broker.serve(address)


def test_serve_on_a_port_in_use_raises_os_error(broker: Broker, server: Server) -> None:
    with pytest.raises(OSError):
        broker.serve(server.address)


def test_broker_close_closes_its_server(tmp_path: Path) -> None:
    broker = eoslog.open(str(tmp_path / "log"))
    address = broker.serve("127.0.0.1:0").address
    broker.close()
    with pytest.raises(ConnectionRefusedError):
        wire.connect(address)


def test_closing_the_server_answers_a_waiting_fetch_before_the_connection_ends(
    broker: Broker, server: Server
) -> None:
    broker.create_topic("t", 1)
    answers: list[Any] = []
    with wire.connect(server.address) as sock:
        asked = threading.Thread(
            target=lambda: answers.append(
                wire.call(sock, wire.fetch_request("t", 0, max_wait_ms=600_000))
            )
        )
        asked.start()
        wait_until(lambda: server.fetches_waiting() == 1, "the fetch waits")
        server.close()
        asked.join(wire.DEADLINE_S)
        assert answers, "the waiting fetch was dropped, not answered"
        (partition,) = answers[0].responses[0].partitions
        assert (partition.error_code, partition.records) == (0, b"")
        assert wire.closed_by_server(sock)


def test_a_closed_broker_cannot_serve(tmp_path: Path) -> None:
    broker = eoslog.open(str(tmp_path / "log"))
    broker.close()
    with pytest.raises(KafkaStorageError):
        broker.serve("127.0.0.1:0")
