"""Errors a Consumer delivers as messages, as librdkafka delivers them (docs/api.md "Consumer"):
poll() and consume() return a Message whose error() is set, instead of raising, for
_PARTITION_EOF (with enable.partition.eof), _AUTO_OFFSET_RESET (auto.offset.reset=error) and
UNKNOWN_TOPIC_OR_PART (a subscribed topic that does not exist); consume_arrow() has no row for
them. tests/client/test_confluent_parity_consumer.py holds the same against confluent-kafka."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import eoslog
from eoslog import TopicPartition
from eoslog.errors import KafkaError, KafkaException

TOPIC = "t"
EOF = KafkaError._PARTITION_EOF


@pytest.fixture
def broker(tmp_path: os.PathLike[str]) -> Iterator[eoslog.Broker]:
    opened = eoslog.open(os.path.join(tmp_path, "data"), durability="none", background=False)
    opened.create_topic(TOPIC, 2)
    produce(opened, 3)
    yield opened
    opened.close()


def produce(broker: eoslog.Broker, count: int, partition: int = 0) -> None:
    producer = broker.producer({})
    for i in range(count):
        producer.produce(TOPIC, b"v%d" % i, partition=partition)
    producer.flush()
    producer.close()


def eof_consumer(broker: eoslog.Broker, **config: object) -> eoslog.Consumer:
    settings: dict[str, object] = {"enable.partition.eof": True, "auto.offset.reset": "earliest"}
    settings.update({key.replace("_", "."): value for key, value in config.items()})
    return broker.consumer(settings)


def seen(consumer: eoslog.Consumer) -> list[tuple[int, int | None, int | None]]:
    """(partition, offset, error code or None) of what one consume() returns now."""
    found = []
    for message in consumer.consume(100, timeout=0):
        error = message.error()
        found.append((message.partition(), message.offset(), None if error is None else error))
    return found


def tp(partition: int, offset: int = eoslog.OFFSET_INVALID) -> TopicPartition:
    return TopicPartition(TOPIC, partition, offset)


# --- _PARTITION_EOF -----------------------------------------------------------------------------


def test_partition_eof_follows_the_last_record_once(broker: eoslog.Broker) -> None:
    consumer = eof_consumer(broker)
    consumer.assign([tp(0, 0)])
    assert seen(consumer) == [(0, 0, None), (0, 1, None), (0, 2, None), (0, 3, EOF)]
    assert seen(consumer) == []


def test_partition_eof_message_has_confluent_s_fields(broker: eoslog.Broker) -> None:
    consumer = eof_consumer(broker)
    consumer.assign([tp(0, 3)])
    message = consumer.poll(0)
    assert message is not None
    error = message.error()
    assert error is not None and error.code() == KafkaError._PARTITION_EOF
    assert (message.topic(), message.partition(), message.offset()) == (TOPIC, 0, 3)
    assert (
        error.str() == "Fetch from broker 0 reached end of partition at offset 3 (HighwaterMark 3)"
    )
    # confluent's value() of an error message is the error string; the rest is empty.
    assert message.value() == error.str().encode() and len(message) == len(message.value())
    assert (message.key(), message.headers(), message.leader_epoch()) == (None, None, None)
    assert message.timestamp() == (eoslog.TIMESTAMP_NOT_AVAILABLE, -1)


def test_partition_eof_comes_again_only_at_a_new_end(broker: eoslog.Broker) -> None:
    consumer = eof_consumer(broker)
    consumer.assign([tp(0, 0)])
    seen(consumer)
    produce(broker, 2)
    assert seen(consumer) == [(0, 3, None), (0, 4, None), (0, 5, EOF)]
    assert seen(consumer) == []


def test_empty_partition_reports_its_end_at_assign(broker: eoslog.Broker) -> None:
    consumer = eof_consumer(broker)
    consumer.assign([tp(1, eoslog.OFFSET_BEGINNING)])
    assert seen(consumer) == [(1, 0, EOF)]


def test_seek_assign_and_resume_report_the_end_again(broker: eoslog.Broker) -> None:
    consumer = eof_consumer(broker)
    consumer.assign([tp(0, eoslog.OFFSET_END)])
    assert seen(consumer) == [(0, 3, EOF)]
    consumer.seek(tp(0, 3))
    assert seen(consumer) == [(0, 3, EOF)]
    consumer.pause([tp(0)])
    assert seen(consumer) == []
    consumer.resume([tp(0)])
    assert seen(consumer) == [(0, 3, EOF)]
    consumer.resume([tp(0)])  # not paused: nothing to report again
    assert seen(consumer) == []
    consumer.assign([tp(0, 3)])
    assert seen(consumer) == [(0, 3, EOF)]


def test_partition_eof_is_off_by_default(broker: eoslog.Broker) -> None:
    consumer = broker.consumer({"auto.offset.reset": "earliest"})
    consumer.assign([tp(0, 0), tp(1, 0)])
    assert [offset for _, offset, _ in seen(consumer)] == [0, 1, 2]


def test_partition_eof_counts_as_one_of_num_messages(broker: eoslog.Broker) -> None:
    consumer = eof_consumer(broker)
    consumer.assign([tp(0, 2)])
    assert [m.offset() for m in consumer.consume(1, timeout=0)] == [2]
    assert [m.error() for m in consumer.consume(1, timeout=0)] == [EOF]


def test_partition_eof_under_read_committed_is_at_the_last_stable_offset(
    broker: eoslog.Broker,
) -> None:
    producer = broker.producer({"transactional.id": "tx"})
    producer.init_transactions()
    producer.begin_transaction()
    producer.produce(TOPIC, b"open", partition=0)
    producer.flush()
    consumer = eof_consumer(broker)
    consumer.assign([tp(0, 0)])
    assert seen(consumer)[-1] == (0, 3, EOF)
    producer.commit_transaction()
    # The record, then the end past the commit marker.
    assert seen(consumer) == [(0, 3, None), (0, 5, EOF)]
    producer.close()


def test_partition_eof_does_not_store_an_offset(broker: eoslog.Broker) -> None:
    consumer = eof_consumer(broker, group_id="g", enable_auto_commit=False)
    consumer.assign([tp(1, eoslog.OFFSET_END)])
    assert seen(consumer) == [(1, 0, EOF)]
    with pytest.raises(KafkaException) as raised:
        consumer.commit(asynchronous=False)
    assert raised.value.args[0].code() == KafkaError._NO_OFFSET


def test_partition_eof_is_reported_after_a_rebalance_assigns(broker: eoslog.Broker) -> None:
    consumer = eof_consumer(broker, group_id="g")
    consumer.subscribe([TOPIC])
    found = []
    while len(found) < 5:
        found += seen(consumer)
    assert sorted(found, key=lambda item: (item[0], item[1] or 0)) == [
        (0, 0, None),
        (0, 1, None),
        (0, 2, None),
        (0, 3, EOF),
        (1, 0, EOF),
    ]


def test_consume_arrow_does_not_report_partition_eof(broker: eoslog.Broker) -> None:
    consumer = eof_consumer(broker)
    consumer.assign([tp(0, 0)])
    assert consumer.consume_arrow(100, timeout=0).num_rows == 3
    assert consumer.consume_arrow(100, timeout=0).num_rows == 0
    assert seen(consumer) == [(0, 3, EOF)]  # poll() still reports the end it reached


# --- _AUTO_OFFSET_RESET -------------------------------------------------------------------------


def test_consume_arrow_raises_auto_offset_reset_once(broker: eoslog.Broker) -> None:
    consumer = broker.consumer({"auto.offset.reset": "error"})
    consumer.assign([tp(0, 50)])
    with pytest.raises(KafkaException) as raised:
        consumer.consume_arrow(10, timeout=0)
    assert raised.value.args[0].code() == KafkaError._AUTO_OFFSET_RESET
    assert consumer.consume_arrow(10, timeout=0).num_rows == 0


def test_error_message_cannot_be_stored_or_committed_without_an_offset(
    broker: eoslog.Broker,
) -> None:
    consumer = broker.consumer(
        {"group.id": "g", "auto.offset.reset": "error", "enable.auto.offset.store": False}
    )
    consumer.assign([tp(0)])
    (message,) = consumer.consume(5, timeout=0)
    assert message.offset() is None
    for call in (consumer.store_offsets, consumer.commit):
        with pytest.raises(KafkaException) as raised:
            call(message=message)
        assert raised.value.args[0].code() == KafkaError._INVALID_ARG


# --- UNKNOWN_TOPIC_OR_PART ----------------------------------------------------------------------


def test_subscribed_missing_topic_is_reported_once_as_a_message(broker: eoslog.Broker) -> None:
    consumer = broker.consumer({"group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["missing", "^nomatch.*", TOPIC])
    found = []
    while len([m for m in found if m.error() is None]) < 3:
        found += consumer.consume(10, timeout=0)
    errors = [m for m in found if m.error() is not None]
    assert [(m.topic(), m.partition(), m.offset(), m.error()) for m in errors] == [
        ("missing", 0, None, KafkaError.UNKNOWN_TOPIC_OR_PART),
        ("^nomatch.*", 0, None, KafkaError.UNKNOWN_TOPIC_OR_PART),
    ]
    assert errors[0].error().str() == (
        "Subscribed topic not available: missing: Broker: Unknown topic or partition"
    )
    assert consumer.consume(10, timeout=0) == []


def test_missing_topic_is_reported_again_after_a_new_subscribe(broker: eoslog.Broker) -> None:
    consumer = broker.consumer({"group.id": "g"})
    consumer.subscribe(["missing"])
    assert [m.topic() for m in consumer.consume(10, timeout=0)] == ["missing"]
    consumer.subscribe(["missing"])
    assert [m.topic() for m in consumer.consume(10, timeout=0)] == ["missing"]
