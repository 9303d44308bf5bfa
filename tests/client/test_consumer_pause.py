"""Consumer.pause / resume and incremental_assign / incremental_unassign (docs/api.md
"Consumer"), with librdkafka's semantics: a paused partition is not delivered from but keeps
its position, and its pause outlives the assignment; incremental changes add to or take from
the assignment and are refused as librdkafka refuses them."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import eoslog
from eoslog import TopicPartition
from eoslog.errors import KafkaError, KafkaException, UnknownTopicOrPartitionError

TOPIC = "t"
LIST_METHODS = ("pause", "resume", "incremental_assign", "incremental_unassign")
SETTINGS = {"group.id": "g", "enable.auto.commit": False, "auto.offset.reset": "earliest"}


@pytest.fixture
def broker(tmp_path: os.PathLike[str]) -> Iterator[eoslog.Broker]:
    opened = eoslog.open(os.path.join(tmp_path, "data"), durability="none", background=False)
    opened.create_topic(TOPIC, 2)
    producer = opened.producer({})
    for i in range(6):
        for partition in (0, 1):
            producer.produce(TOPIC, b"%d-%d" % (partition, i), partition=partition)
    producer.flush()
    producer.close()
    yield opened
    opened.close()


@pytest.fixture
def consumer(broker: eoslog.Broker) -> Iterator[eoslog.Consumer]:
    made = broker.consumer(SETTINGS)
    yield made
    made.close()


def tp(partition: int, offset: int = eoslog.OFFSET_INVALID) -> TopicPartition:
    return TopicPartition(TOPIC, partition, offset)


def delivered(consumer: eoslog.Consumer, count: int = 100) -> list[tuple[int, int]]:
    return [(m.partition(), m.offset()) for m in consumer.consume(count, timeout=0)]


def code_of(raised: pytest.ExceptionInfo[KafkaException]) -> int:
    return int(raised.value.args[0].code())


# --- pause / resume ----------------------------------------------------------------------------


def test_paused_partition_is_not_fetched_and_keeps_its_position(
    consumer: eoslog.Consumer,
) -> None:
    consumer.assign([tp(0, 2), tp(1, 0)])
    consumer.pause([tp(0)])
    assert delivered(consumer) == [(1, i) for i in range(6)]
    assert consumer.position([tp(0)])[0].offset == 2
    assert consumer.consume_arrow(100, timeout=0).num_rows == 0
    assert consumer.poll(0) is None


def test_resume_delivers_from_where_the_partition_stopped(consumer: eoslog.Consumer) -> None:
    consumer.assign([tp(0, 0)])
    assert [m.offset() for m in consumer.consume(2, timeout=0)] == [0, 1]
    consumer.pause([tp(0)])
    assert delivered(consumer) == []
    consumer.resume([tp(0)])
    assert delivered(consumer) == [(0, i) for i in range(2, 6)]


def test_records_fetched_before_the_pause_wait_for_the_resume(consumer: eoslog.Consumer) -> None:
    consumer.assign([tp(0, 0)])
    assert consumer.poll(0) is not None  # the fetch buffered all six records
    consumer.pause([tp(0)])
    assert delivered(consumer) == []
    consumer.resume([tp(0)])
    assert delivered(consumer) == [(0, i) for i in range(1, 6)]


def test_a_pause_outlives_unassign_and_assign_as_in_librdkafka(
    consumer: eoslog.Consumer,
) -> None:
    consumer.assign([tp(0, 0)])
    consumer.pause([tp(0)])
    consumer.unassign()
    consumer.assign([tp(0, 0)])
    assert delivered(consumer) == []
    consumer.resume([tp(0)])
    assert len(delivered(consumer)) == 6


def test_a_partition_paused_before_it_is_assigned_starts_paused(
    consumer: eoslog.Consumer,
) -> None:
    consumer.pause([tp(1)])
    consumer.assign([tp(0, 0), tp(1, 0)])
    assert {partition for partition, _ in delivered(consumer)} == {0}


def test_a_pause_outlives_a_rebalance(broker: eoslog.Broker, consumer: eoslog.Consumer) -> None:
    consumer.subscribe([TOPIC])
    consumer.pause([tp(0), tp(1)])
    assert consumer.consume(100, timeout=0.2) == []  # joined: both assigned, both paused
    assert len(consumer.assignment()) == 2
    other = broker.consumer(SETTINGS)
    other.subscribe([TOPIC])
    other.poll(0.2)
    consumer.poll(0.2)
    other.close()  # the group rebalances again: both partitions come back
    assert consumer.consume(100, timeout=0.2) == [] and len(consumer.assignment()) == 2
    consumer.resume(consumer.assignment())
    assert len(consumer.consume(100, timeout=0.5)) == 12


def test_pausing_a_partition_the_broker_does_not_have_is_ignored(
    consumer: eoslog.Consumer,
) -> None:
    consumer.pause([TopicPartition("missing", 0), tp(7)])
    consumer.resume([TopicPartition("missing", 0)])
    consumer.assign([tp(0, 0)])
    assert len(delivered(consumer)) == 6


def test_resuming_a_partition_that_is_not_paused_changes_nothing(
    consumer: eoslog.Consumer,
) -> None:
    consumer.assign([tp(0, 0)])
    consumer.resume([tp(0), tp(1)])
    assert len(delivered(consumer)) == 6


@pytest.mark.parametrize("method", LIST_METHODS)
def test_partition_list_arguments_are_type_checked_as_confluent_does(
    consumer: eoslog.Consumer, method: str
) -> None:
    call = getattr(consumer, method)
    with pytest.raises(TypeError, match="must be a list of TopicPartition"):
        call(tp(0))
    with pytest.raises(TypeError, match="must be a list of TopicPartition"):
        call([(TOPIC, 0)])


@pytest.mark.parametrize("method", LIST_METHODS)
def test_a_closed_consumer_refuses_them(consumer: eoslog.Consumer, method: str) -> None:
    consumer.close()
    with pytest.raises(RuntimeError, match="Consumer closed"):
        getattr(consumer, method)([tp(0)])


# --- incremental_assign / incremental_unassign -------------------------------------------------


def test_incremental_assign_adds_partitions_and_leaves_the_others_where_they_are(
    consumer: eoslog.Consumer,
) -> None:
    consumer.assign([tp(0, 0)])
    assert [m.offset() for m in consumer.consume(2, timeout=0)] == [0, 1]
    consumer.incremental_assign([tp(1, 4)])
    assert consumer.assignment() == [tp(0), tp(1)]
    assert sorted(delivered(consumer)) == [(0, 2), (0, 3), (0, 4), (0, 5), (1, 4), (1, 5)]


def test_incremental_assign_starts_at_the_committed_offset_like_assign(
    consumer: eoslog.Consumer,
) -> None:
    consumer.commit(offsets=[tp(1, 5)])
    consumer.incremental_assign([tp(1)])
    assert delivered(consumer) == [(1, 5)]


def test_incremental_unassign_removes_only_the_partitions_given(
    consumer: eoslog.Consumer,
) -> None:
    consumer.assign([tp(0, 3), tp(1, 0)])
    consumer.incremental_unassign([tp(1)])
    assert consumer.assignment() == [tp(0)]
    assert delivered(consumer) == [(0, 3), (0, 4), (0, 5)]
    consumer.incremental_unassign([tp(0)])
    assert consumer.assignment() == []


def test_incremental_assign_of_an_assigned_partition_is_a_conflict_and_changes_nothing(
    consumer: eoslog.Consumer,
) -> None:
    consumer.assign([tp(0, 0)])
    with pytest.raises(KafkaException, match=r"t \[0\] is already part of") as raised:
        consumer.incremental_assign([tp(1), tp(0)])
    assert code_of(raised) == KafkaError._CONFLICT
    assert consumer.assignment() == [tp(0)]


def test_a_partition_given_twice_is_an_invalid_argument(consumer: eoslog.Consumer) -> None:
    for method in (consumer.incremental_assign, consumer.incremental_unassign):
        with pytest.raises(KafkaException, match=r"Duplicate t \[1\] in input list") as raised:
            method([tp(1), tp(1)])
        assert code_of(raised) == KafkaError._INVALID_ARG
    assert consumer.assignment() == []


def test_incremental_unassign_of_a_partition_not_assigned_changes_nothing(
    consumer: eoslog.Consumer,
) -> None:
    consumer.assign([tp(0, 0)])
    with pytest.raises(KafkaException, match="not in the current assignment") as raised:
        consumer.incremental_unassign([tp(0), tp(1)])
    assert code_of(raised) == KafkaError._INVALID_ARG
    assert consumer.assignment() == [tp(0)]


def test_incremental_assign_of_an_unknown_partition_raises_as_assign_does(
    consumer: eoslog.Consumer,
) -> None:
    with pytest.raises(UnknownTopicOrPartitionError):
        consumer.incremental_assign([tp(5)])
    assert consumer.assignment() == []


def test_a_subscribed_consumer_changes_its_assignment_with_assign_only(
    consumer: eoslog.Consumer,
) -> None:
    # The group's strategies (range, roundrobin) are eager, as librdkafka names them.
    consumer.subscribe([TOPIC])
    consumer.poll(0.2)
    for method in (consumer.incremental_assign, consumer.incremental_unassign):
        with pytest.raises(KafkaException, match="must be made using assign") as raised:
            method([tp(0)])
        assert code_of(raised) == KafkaError._STATE
    assert len(consumer.assignment()) == 2


def test_an_empty_incremental_change_is_accepted(consumer: eoslog.Consumer) -> None:
    consumer.incremental_assign([])
    consumer.incremental_unassign([])
    assert consumer.assignment() == []
