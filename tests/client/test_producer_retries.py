"""produce() never waits for a retry (docs/api.md "Producer"): a batch whose append fails with
a retriable error is retried after retry.backoff.ms by poll(), flush() or the linger thread,
in order, with its sequence, while produce() returns at once, as librdkafka's does."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import eoslog
from eoslog.client.producer import Producer
from eoslog.errors import UnknownTopicOrPartitionError

DEADLINE_S = 30  # a hung produce() fails the test after this long


class FlakyLog:
    """A partition log whose appends fail with a retriable error while `failing` is set."""

    def __init__(self, log: Any, failing: threading.Event, failed: list[int]) -> None:
        self._log, self._failing, self._failed = log, failing, failed

    def append_batch(self, raw: Any) -> Any:
        if self._failing.is_set():
            self._failed.append(1)
            raise UnknownTopicOrPartitionError("injected: the partition is not available")
        return self._log.append_batch(raw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)


class FlakyBroker:
    """The broker, with FlakyLogs (the producer's seam to the log: its ProducerBroker)."""

    def __init__(self, broker: eoslog.Broker) -> None:
        self._broker = broker
        self.failing = threading.Event()
        self.failed: list[int] = []

    def log(self, topic: str, partition: int) -> FlakyLog:
        return FlakyLog(self._broker.log(topic, partition), self.failing, self.failed)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._broker, name)


@pytest.fixture
def flaky(tmp_path: Any) -> Iterator[FlakyBroker]:
    with eoslog.open(str(tmp_path / "log"), durability="none", background=False) as broker:
        broker.create_topic("t", 1)
        yield FlakyBroker(broker)


def produce_in_thread(producer: Producer, values: list[bytes], reports: list[Any]) -> None:
    done = threading.Event()

    def run() -> None:
        for value in values:
            producer.produce("t", value, on_delivery=lambda e, m: reports.append((e, m)))
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(DEADLINE_S), "produce() blocked on a retriable append error"


@pytest.mark.parametrize("linger_ms", [0, 1])
def test_produce_returns_during_a_retriable_fault_and_flush_delivers_after_it_clears(
    flaky: FlakyBroker, linger_ms: int
) -> None:
    producer = Producer(flaky, {"linger.ms": linger_ms, "retry.backoff.ms": 1})  # type: ignore[arg-type]
    reports: list[Any] = []
    flaky.failing.set()
    produce_in_thread(producer, [b"first", b"second", b"third"], reports)
    if linger_ms == 0:
        assert flaky.failed  # the append was tried in produce() and failed
    assert len(producer) == 3 and flaky._broker.log("t", 0).log_end_offset == 0
    flaky.failing.clear()
    assert producer.flush(DEADLINE_S) == 0
    assert [(error, m.value(), m.offset()) for error, m in reports] == [
        (None, b"first", 0),
        (None, b"second", 1),
        (None, b"third", 2),
    ]
    sequences = [
        header.base_sequence
        for _, header in eoslog.record.codec.iter_headers(
            bytes(flaky._broker.log("t", 0).read(0).records)
        )
    ]
    assert sequences == sorted(sequences) and sequences[0] == 0
    producer.close()


def test_a_batch_retried_past_delivery_timeout_fails_in_its_report(flaky: FlakyBroker) -> None:
    producer = Producer(
        flaky,  # type: ignore[arg-type]
        {"linger.ms": 0, "retry.backoff.ms": 1, "delivery.timeout.ms": 1},
    )
    reports: list[Any] = []
    flaky.failing.set()
    produce_in_thread(producer, [b"lost"], reports)
    assert producer.flush(DEADLINE_S) == 0
    [(error, message)] = reports
    assert error.code() == UnknownTopicOrPartitionError.code and message.value() == b"lost"
    producer.close()
