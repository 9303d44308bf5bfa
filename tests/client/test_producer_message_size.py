"""message.max.bytes and the topic's max.message.bytes, as librdkafka applies them
(docs/api.md "librdkafka keys"): produce() refuses a record larger than message.max.bytes at
the call; a record up to it gets a batch of its own past batch.size; the topic's
max.message.bytes refuses the batch at the append, in the delivery report."""

from __future__ import annotations

from typing import Any

import pytest

from eoslog.errors import KafkaError, KafkaException
from tests.client.producer_spellings import MakeProducer, make_producer

__all__ = ["make_producer"]

MIB = 1024 * 1024


def reports_of(producer: Any) -> tuple[list[Any], Any]:
    got: list[Any] = []

    def on_delivery(error: Any, message: Any) -> None:
        got.append((error, message))

    return got, on_delivery


def test_a_5_mib_record_reaches_a_topic_of_8_mib_messages(make_producer: MakeProducer) -> None:
    producer, broker = make_producer({"message.max.bytes": 10_000_000, "linger.ms": 0})
    broker.create_topic("big", 1, config={"max.message.bytes": 8 * MIB})
    got, on_delivery = reports_of(producer)
    value = bytes(range(256)) * (5 * MIB // 256)
    producer.produce("big", value, on_delivery=on_delivery)
    assert producer.flush() == 0
    [(error, message)] = got
    assert error is None and message.offset() == 0
    assert bytes(broker.log("big", 0).read(0, max_bytes=16 * MIB).records).count(value) == 1


@pytest.mark.parametrize("linger_ms", [0, 600_000])
def test_a_record_larger_than_message_max_bytes_is_refused_at_produce(
    make_producer: MakeProducer, linger_ms: int
) -> None:
    # librdkafka weighs key, value and headers plus 36 bytes of framing: at 2000 a 1964-byte
    # value is taken and a 1965-byte one refused (confluent-kafka 2.16 on its mock cluster).
    producer, broker = make_producer(
        {"message.max.bytes": 2000, "batch.size": 100_000, "linger.ms": linger_ms}
    )
    broker.create_topic("t", 1)
    producer.produce("t", b"a")  # an open batch: the next records could take the fast path
    producer.produce("t", b"x" * 1964)
    producer.produce("t", b"x" * 1954, key=b"k" * 10)
    producer.produce("t", b"x" * 1951, headers=[("h", b"v" * 10)])
    for value, key, headers in [
        (b"x" * 1965, None, None),
        (b"x" * 1955, b"k" * 10, None),
        (b"x" * 1952, None, [("h", b"v" * 10)]),
    ]:
        with pytest.raises(KafkaException) as refused:
            producer.produce("t", value, key=key, headers=headers)
        assert refused.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert len(producer) == 4
    assert producer.flush() == 0
    assert broker.log("t", 0).log_end_offset == 4


def test_a_5_mib_record_is_refused_at_produce_under_the_default_message_max_bytes(
    make_producer: MakeProducer,
) -> None:
    producer, broker = make_producer()
    broker.create_topic("big", 1, config={"max.message.bytes": 8 * MIB})
    with pytest.raises(KafkaException) as refused:
        producer.produce("big", b"x" * (5 * MIB))
    assert refused.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert len(producer) == 0
    assert producer.flush() == 0


def test_a_batch_larger_than_the_topics_max_message_bytes_fails_in_its_report(
    make_producer: MakeProducer,
) -> None:
    producer, broker = make_producer({"message.max.bytes": 10_000_000, "linger.ms": 0})
    broker.create_topic("small", 1)  # the broker's default max.message.bytes, about 1 MiB
    got, on_delivery = reports_of(producer)
    producer.produce("small", b"x" * (5 * MIB), key=b"k", on_delivery=on_delivery)
    producer.produce("small", b"after", on_delivery=on_delivery)
    assert producer.flush() == 0
    (error, message), (after_error, after) = got
    assert error.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert (message.offset(), message.key(), message.topic()) == (None, b"k", "small")
    assert after_error is None and after.offset() == 0  # the next batch takes its sequence
