"""A Fetch with nothing to return waits for data up to its max_wait_ms (docs/design.md "Fetch"):
an append by any writer answers it at once, and with nothing appended it answers empty when
max_wait_ms has passed."""

from __future__ import annotations

import threading
from typing import Any

from eoslog.broker import Broker
from eoslog.serve.server import Server
from tests.serve import wire
from tests.serve.clients import wait_until

# Longer than the test's deadline: a fetch answered with a record was woken by the append.
WAIT_LONGER_THAN_THE_TEST_MS = 600_000


def test_a_waiting_fetch_is_answered_by_an_append_from_an_in_process_producer(
    broker: Broker, server: Server
) -> None:
    broker.create_topic("t", 1)
    sock = wire.connect(server.address)
    answers: list[Any] = []
    asked = threading.Thread(
        target=lambda: answers.append(
            wire.call(sock, wire.fetch_request("t", 0, WAIT_LONGER_THAN_THE_TEST_MS))
        )
    )
    asked.start()
    wait_until(lambda: server.fetches_waiting() == 1, "the fetch waits")
    producer = broker.producer()
    producer.produce("t", value=b"woke it")
    producer.flush()
    asked.join(wire.DEADLINE_S)
    assert answers, "the fetch was not answered by the append"
    (partition,) = answers[0].responses[0].partitions
    assert partition.error_code == 0
    assert partition.high_watermark == 1
    assert b"woke it" in bytes(partition.records)
    sock.close()


def test_a_fetch_with_nothing_to_return_is_answered_empty_after_max_wait(
    broker: Broker, server: Server
) -> None:
    broker.create_topic("t", 1)
    with wire.connect(server.address) as sock:
        sock.settimeout(wire.DEADLINE_S)
        try:
            response = wire.call(sock, wire.fetch_request("t", 0, max_wait_ms=50))
        except TimeoutError as timeout:
            raise AssertionError("the fetch was not answered after its max_wait") from timeout
    (partition,) = response.responses[0].partitions
    assert partition.error_code == 0
    assert partition.high_watermark == 0
    assert not partition.records
    assert server.fetches_waiting() == 0
