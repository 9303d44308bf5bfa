"""Clients follow topics being created, deleted and created again (docs/api.md "Producer",
"Consumer"), as a Kafka client follows them through its metadata: a group assigns a subscribed
topic once it exists and gives up a deleted one; a producer fails at once for a deleted topic
and spreads keys over a re-created topic's new partition count."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import eoslog
from eoslog.client.partitioner import partition_for_key
from eoslog.errors import KafkaError

NO_AUTO_CREATE = {"auto.create.topics.enable": False}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[eoslog.Broker]:
    with eoslog.open(str(tmp_path), durability="none", config=NO_AUTO_CREATE) as opened:
        yield opened


def fill(broker: eoslog.Broker, topic: str, count: int) -> None:
    producer = broker.producer({"linger.ms": 0})
    for number in range(count):
        producer.produce(topic, b"%d" % number)
    assert producer.flush(10) == 0
    producer.close()


def drain(consumer: eoslog.Consumer, timeout: float = 0.5) -> list[tuple[str, int]]:
    out = []
    while messages := consumer.consume(100, timeout=timeout):
        out += [(message.topic(), message.offset()) for message in messages]  # type: ignore[misc]
    return out


def test_a_topic_subscribed_by_name_before_it_exists_is_assigned_once_created(
    broker: eoslog.Broker,
) -> None:
    broker.create_topic("a", 1)
    fill(broker, "a", 3)
    consumer = broker.consumer({"group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["a", "later"])
    # The missing topic is reported once as an error message (offset None), as librdkafka's
    # "Subscribed topic not available" (was: nothing reported).
    assert sorted(drain(consumer), key=repr) == [("a", 0), ("a", 1), ("a", 2), ("later", None)]
    broker.create_topic("later", 1)
    fill(broker, "later", 2)
    assert drain(consumer) == [("later", 0), ("later", 1)]
    assert {tp.topic for tp in consumer.assignment()} == {"a", "later"}
    consumer.close()


def test_a_deleted_topic_leaves_the_assignment_and_the_rest_keeps_committing(
    broker: eoslog.Broker,
) -> None:
    broker.create_topic("a", 1)
    broker.create_topic("b", 1)
    fill(broker, "a", 3)
    fill(broker, "b", 3)
    consumer = broker.consumer(
        {"group.id": "g", "auto.offset.reset": "earliest", "auto.commit.interval.ms": 1}
    )
    consumer.subscribe(["a", "b"])
    assert len(drain(consumer)) == 6
    broker.delete_topic("b")
    fill(broker, "a", 2)
    # The deleted subscribed topic is reported once as an error message (was: not reported).
    assert drain(consumer) == [("b", None), ("a", 3), ("a", 4)]
    assert [tp.topic for tp in consumer.assignment()] == ["a"]
    consumer.close()  # auto-commits; never raises for the deleted topic
    again = broker.consumer({"group.id": "g"})
    assert again.committed([eoslog.TopicPartition("a", 0)])[0].offset == 5
    again.close()


def test_produce_to_a_deleted_topic_fails_at_once_instead_of_retrying(
    broker: eoslog.Broker,
) -> None:
    # Regression: the append retried UNKNOWN_TOPIC_OR_PART for delivery.timeout.ms, blocking
    # produce() or flush() (120 s by default; here it would be 10 minutes).
    broker.create_topic("t", 1)
    reports: list[tuple[Any, Any]] = []
    producer = broker.producer({"linger.ms": 900_000, "delivery.timeout.ms": 600_000})
    producer.produce("t", b"queued", on_delivery=lambda e, m: reports.append((e, m)))
    broker.delete_topic("t")
    worker = threading.Thread(target=producer.flush, args=(10,))
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "flush blocked on a deleted topic"
    assert [error.code() for error, _ in reports] == [KafkaError.UNKNOWN_TOPIC_OR_PART]
    # The producer has learnt the deletion: the next record is refused at the call.
    with pytest.raises(eoslog.UnknownTopicOrPartitionError):
        producer.produce("t", b"after")
    producer.close()


def test_a_producer_learns_a_recreated_topics_partition_count(broker: eoslog.Broker) -> None:
    broker.create_topic("t", 8)
    producer = broker.producer({"linger.ms": 0})
    keys = [b"key-%d" % number for number in range(40)]
    for key in keys:
        producer.produce("t", b"v", key=key)
    assert producer.flush(10) == 0
    broker.delete_topic("t")
    broker.create_topic("t", 2)
    errors: list[Any] = []
    for key in keys:
        producer.produce("t", b"v", key=key, on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(10) == 0
    assert errors == [None] * len(keys)
    counts = [broker.log("t", partition).log_end_offset for partition in range(2)]
    expected = [sum(partition_for_key(key, 2) == p for key in keys) for p in range(2)]
    assert counts == expected
    producer.close()


def test_produce_to_a_deleted_topic_creates_it_again_when_auto_creation_is_on(
    tmp_path: Path,
) -> None:
    with eoslog.open(str(tmp_path), durability="none", config={"num.partitions": 1}) as broker:
        producer = broker.producer({"linger.ms": 0})
        producer.produce("t", b"first")
        assert producer.flush(10) == 0
        broker.delete_topic("t")
        producer.produce("t", b"second")
        assert producer.flush(10) == 0
        assert broker.log("t", 0).log_end_offset == 1
        producer.close()
