"""What a producer's delivery reports hold and when they come, as confluent-kafka's
(docs/api.md "Producer"): latency(), delivery.report.only.error, and the fields of a
failed report (checked against confluent-kafka 2.16 on librdkafka's mock cluster)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from eoslog.errors import KafkaError
from tests.client.producer_spellings import MakeProducer, make_producer

__all__ = ["make_producer"]


def collect() -> tuple[list[tuple[Any, Any]], Any]:
    got: list[tuple[Any, Any]] = []
    return got, lambda error, message: got.append((error, message))


@pytest.mark.parametrize("linger_ms", [0, 600_000])
def test_latency_is_the_seconds_from_produce_to_the_report(
    make_producer: MakeProducer, linger_ms: int
) -> None:
    producer, broker = make_producer({"linger.ms": linger_ms})
    broker.create_topic("t", 1)
    got, on_delivery = collect()
    before = time.monotonic()
    for _ in range(3):  # the first opens the batch, the next two take the native path
        producer.produce("t", b"v", on_delivery=on_delivery)
    assert producer.flush() == 0
    waited = time.monotonic() - before
    assert len(got) == 3
    for error, message in got:
        assert error is None
        latency = message.latency()
        assert isinstance(latency, float) and 0 <= latency <= waited


def test_delivery_report_only_error_serves_only_failures(make_producer: MakeProducer) -> None:
    producer, broker = make_producer(
        {"delivery.report.only.error": True, "linger.ms": 600_000, "message.max.bytes": 5_000_000}
    )
    broker.create_topic("t", 1)
    got, on_delivery = collect()
    producer.produce("t", b"fine", on_delivery=on_delivery)
    producer.produce("t", b"fine too", on_delivery=on_delivery)
    producer.produce("t", b"x" * 2_000_000, on_delivery=on_delivery)  # past the topic's 1 MiB
    assert producer.flush() == 0
    assert len(producer) == 0
    [(error, message)] = got
    assert message.value() == b"x" * 2_000_000
    assert error.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert broker.log("t", 0).log_end_offset == 2


def test_a_purged_message_reports_no_offset_and_its_latency(make_producer: MakeProducer) -> None:
    producer, broker = make_producer({"linger.ms": 600_000})
    broker.create_topic("t", 1)
    got, on_delivery = collect()
    producer.produce("t", b"v", key=b"k", on_delivery=on_delivery)
    producer.purge()
    assert producer.flush() == 0
    [(error, message)] = got
    assert error.code() == KafkaError._PURGE_QUEUE
    assert message.error() == error
    assert (message.topic(), message.key(), message.value()) == ("t", b"k", b"v")
    assert message.offset() is None  # confluent's offset() for OFFSET_INVALID
    assert message.leader_epoch() is None
    assert isinstance(message.latency(), float) and message.latency() >= 0
