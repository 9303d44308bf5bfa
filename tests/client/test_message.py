"""Message's accessors and setters beyond the record's fields (docs/api.md "Consumer": Message
accessors): leader_epoch(), latency() and confluent's set_topic / set_key / set_value /
set_headers / set_error, on a consumed Message and on a producer's DeliveryReport."""

from __future__ import annotations

import gc
import os
import weakref
from collections.abc import Iterator

import pytest

import eoslog
from eoslog import TopicPartition
from eoslog.client.delivery import DeliveryReport
from eoslog.client.message import MessageBatch, RecordRefs, index_records, make_messages
from eoslog.errors import KafkaError
from eoslog.record import codec

TOPIC = "t"
SETTERS = ("set_topic", "set_key", "set_value", "set_headers", "set_error")


@pytest.fixture
def broker(tmp_path: os.PathLike[str]) -> Iterator[eoslog.Broker]:
    opened = eoslog.open(os.path.join(tmp_path, "data"), durability="none", background=False)
    opened.create_topic(TOPIC, 1)
    yield opened
    opened.close()


def consumed(broker: eoslog.Broker, count: int = 2) -> list[eoslog.Message]:
    producer = broker.producer({})
    for i in range(count):
        producer.produce(TOPIC, b"v%d" % i, key=b"k%d" % i, headers=[("h", b"%d" % i)])
    producer.flush()
    producer.close()
    consumer = broker.consumer({"auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    messages = consumer.consume(count, timeout=1)
    consumer.close()
    assert len(messages) == count
    return messages


def messages_of(batch: bytes) -> list[eoslog.Message]:
    refs = RecordRefs(4)
    owners: list[object] = [batch]
    index_records(batch, 0, len(batch), refs, owners)
    out: list[eoslog.Message] = []
    fetched = MessageBatch(TOPIC, 0, refs, owners, refs.count)
    make_messages(out, fetched, 0, fetched.count)
    return out


def test_leader_epoch_is_the_batch_epoch_the_log_stamped(broker: eoslog.Broker) -> None:
    # One broker, never re-elected: PartitionLog stamps epoch 0 on every batch it appends.
    assert [m.leader_epoch() for m in consumed(broker)] == [0, 0]


def test_leader_epoch_is_none_for_a_batch_without_one() -> None:
    builder = codec.BatchBuilder(partition_leader_epoch=-1)
    builder.append(0, None, b"v", None)
    (message,) = messages_of(builder.build())
    assert message.leader_epoch() is None


def test_leader_epoch_comes_from_each_record_s_own_batch() -> None:
    batches = b""
    for base_offset, epoch in ((0, 3), (1, 7)):
        builder = codec.BatchBuilder(partition_leader_epoch=epoch, base_offset=base_offset)
        builder.append(0, None, b"v", None)
        batches += builder.build()
    assert [m.leader_epoch() for m in messages_of(batches)] == [3, 7]


def test_a_consumed_message_has_no_latency(broker: eoslog.Broker) -> None:
    assert [m.latency() for m in consumed(broker)] == [None, None]


def test_setters_replace_one_field_with_any_object_as_given(broker: eoslog.Broker) -> None:
    message, _ = consumed(broker)
    decoded = {"order": 1}
    message.set_value(decoded)
    message.set_key(42)
    message.set_topic("renamed")
    message.set_headers([("h", None)])
    error = KafkaError(KafkaError._PARTITION_EOF)
    message.set_error(error)
    assert message.value() is decoded and message.key() == 42
    assert message.topic() == "renamed" and message.headers() == [("h", None)]
    assert message.error() is error
    # The record's other fields stay: offset, partition, timestamp, leader epoch.
    assert (message.offset(), message.partition(), message.leader_epoch()) == (0, 0, 0)
    assert message.timestamp()[0] == eoslog.TIMESTAMP_CREATE_TIME


def test_a_setter_changes_only_its_own_message(broker: eoslog.Broker) -> None:
    first, second = consumed(broker)
    first.set_value(b"changed")
    first.set_key(None)
    assert (second.value(), second.key(), second.topic()) == (b"v1", b"k1", TOPIC)
    assert second.headers() == [("h", b"1")] and second.error() is None


def test_unset_fields_still_read_the_record_after_a_setter(broker: eoslog.Broker) -> None:
    message, _ = consumed(broker)
    message.set_topic("other")
    assert (message.key(), message.value(), message.headers()) == (b"k0", b"v0", [("h", b"0")])
    assert message.error() is None


def test_len_follows_set_value_as_confluent_s_does(broker: eoslog.Broker) -> None:
    message, other = consumed(broker)
    message.set_value(b"four")
    assert len(message) == message.len() == 4
    message.set_value(None)
    assert len(message) == 0
    other.set_value(7)  # confluent takes the len() of what was set: an int has none
    with pytest.raises(TypeError):
        len(other)


def test_setters_take_one_positional_argument_as_confluent_s_do(broker: eoslog.Broker) -> None:
    message, _ = consumed(broker)
    for name in SETTERS:
        with pytest.raises(TypeError):
            getattr(message, name)()
        with pytest.raises(TypeError):
            getattr(message, name)(value=b"x")


def test_a_changed_message_keeps_its_fetch_alive(broker: eoslog.Broker) -> None:
    message, _ = consumed(broker)
    message.set_value(b"x")
    gc.collect()
    assert message.key() == b"k0" and message.headers() == [("h", b"0")]


def test_a_message_made_by_the_consumer_still_cannot_be_made_by_hand() -> None:
    with pytest.raises(TypeError):
        eoslog.Message()


def test_a_changed_message_is_freed_with_its_value(broker: eoslog.Broker) -> None:
    class Value:
        pass

    message, _ = consumed(broker)
    value = Value()
    message.set_value(value)
    alive = weakref.ref(value)
    del value, message
    assert alive() is None


def delivery_report() -> DeliveryReport:
    return DeliveryReport(TOPIC, 0, 5, b"k", b"v", None, (1, 10), None)


def test_a_delivery_report_has_the_consumed_message_s_accessors_and_setters() -> None:
    report = delivery_report()
    # librdkafka reports no leader epoch for a delivered message; eoslog measures no latency.
    assert report.leader_epoch() is None and report.latency() is None
    report.set_value({"v": 1})
    report.set_key(None)
    report.set_topic("other")
    report.set_headers([("h", b"x")])
    report.set_error(KafkaError(KafkaError._MSG_TIMED_OUT))
    assert report.value() == {"v": 1} and report.key() is None and report.topic() == "other"
    assert report.headers() == [("h", b"x")] and report.error() == KafkaError._MSG_TIMED_OUT


def test_message_and_delivery_report_have_confluent_s_setters() -> None:
    for name in (*SETTERS, "latency", "leader_epoch"):
        assert callable(getattr(eoslog.Message, name)), name
        assert callable(getattr(DeliveryReport, name)), name
