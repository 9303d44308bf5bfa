"""Consumer.offsets_for_times (docs/api.md "Consumer"): Kafka's ListOffsets by timestamp, as a
partition leader answers it under the consumer's isolation level, with librdkafka's errors."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import eoslog
from eoslog import TopicPartition
from eoslog.errors import KafkaError, KafkaException

TOPIC = "t"
# Timestamps of the records at offsets 0..4 of partition 0.
STAMPS = (1_000, 1_100, 1_100, 1_300, 1_400)


@pytest.fixture
def broker(tmp_path: os.PathLike[str]) -> Iterator[eoslog.Broker]:
    opened = eoslog.open(os.path.join(tmp_path, "data"), durability="none", background=False)
    opened.create_topic(TOPIC, 2)
    producer = opened.producer({})
    for stamp in STAMPS:
        producer.produce(TOPIC, b"v", partition=0, timestamp=stamp)
    producer.flush()
    producer.close()
    yield opened
    opened.close()


def times(consumer: eoslog.Consumer, *stamps: int, partition: int = 0) -> list[int]:
    asked = [TopicPartition(TOPIC, partition, stamp) for stamp in stamps]
    return [tp.offset for tp in consumer.offsets_for_times(asked, timeout=1)]


def code_of(raised: pytest.ExceptionInfo[KafkaException]) -> int:
    return int(raised.value.args[0].code())


def test_each_timestamp_gives_the_earliest_offset_at_or_after_it(broker: eoslog.Broker) -> None:
    consumer = broker.consumer({})
    assert times(consumer, 1_000, 1_050, 1_100, 1_200, 1_400) == [0, 1, 1, 3, 4]
    assert times(consumer, 0) == [0]


def test_a_timestamp_after_every_record_gives_offset_end(broker: eoslog.Broker) -> None:
    consumer = broker.consumer({})
    assert times(consumer, 1_401) == [eoslog.OFFSET_END]
    assert times(consumer, 5, partition=1) == [eoslog.OFFSET_END]  # an empty partition


def test_the_special_timestamps_give_the_end_and_the_start(broker: eoslog.Broker) -> None:
    consumer = broker.consumer({})
    assert times(consumer, eoslog.OFFSET_END, eoslog.OFFSET_BEGINNING) == [5, 0]


def test_records_of_an_open_transaction_are_not_found_under_read_committed(
    broker: eoslog.Broker,
) -> None:
    producer = broker.producer({"transactional.id": "tx"})
    producer.init_transactions()
    producer.begin_transaction()
    producer.produce(TOPIC, b"open", partition=0, timestamp=2_000)
    producer.flush()
    committed = broker.consumer({"isolation.level": "read_committed"})
    uncommitted = broker.consumer({"isolation.level": "read_uncommitted"})
    # Kafka's Partition.fetchOffsetForTimestamp: only an offset below the LSO / high watermark.
    assert times(committed, 2_000) == [eoslog.OFFSET_END]
    assert times(uncommitted, 2_000) == [5]
    assert times(committed, eoslog.OFFSET_END) == [5] and times(uncommitted, -1) == [6]
    producer.commit_transaction()
    assert times(committed, 2_000) == [5]
    producer.close()


def test_the_answer_is_new_topic_partitions_and_positions_do_not_move(
    broker: eoslog.Broker,
) -> None:
    consumer = broker.consumer({})
    consumer.assign([TopicPartition(TOPIC, 0, 2)])
    asked = [TopicPartition(TOPIC, 0, 1_300), TopicPartition(TOPIC, 1, 7)]
    found = consumer.offsets_for_times(asked)
    assert [(tp.topic, tp.partition, tp.offset) for tp in found] == [(TOPIC, 0, 3), (TOPIC, 1, -1)]
    assert [tp.offset for tp in asked] == [1_300, 7]
    assert consumer.position([TopicPartition(TOPIC, 0)])[0].offset == 2


def test_errors_are_librdkafka_s(broker: eoslog.Broker) -> None:
    consumer = broker.consumer({})
    with pytest.raises(KafkaException) as raised:
        consumer.offsets_for_times([])
    assert code_of(raised) == KafkaError._INVALID_ARG
    for missing in (TopicPartition("missing", 0, 5), TopicPartition(TOPIC, 9, 5)):
        with pytest.raises(KafkaException) as raised:
            consumer.offsets_for_times([missing])
        assert code_of(raised) == KafkaError._UNKNOWN_PARTITION
    with pytest.raises(KafkaException, match="not supported") as raised:
        consumer.offsets_for_times([TopicPartition(TOPIC, 0, -3)])  # KIP-734's max timestamp
    assert code_of(raised) == KafkaError._INVALID_ARG


def test_arguments_are_type_checked_as_confluent_does(broker: eoslog.Broker) -> None:
    consumer = broker.consumer({})
    with pytest.raises(TypeError, match="must be a list of TopicPartition"):
        consumer.offsets_for_times(TopicPartition(TOPIC, 0, 5))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="timeout must be a number of seconds"):
        consumer.offsets_for_times([TopicPartition(TOPIC, 0, 5)], timeout="1")  # type: ignore[arg-type]
    consumer.close()
    with pytest.raises(RuntimeError):
        consumer.offsets_for_times([TopicPartition(TOPIC, 0, 5)])
