"""The Consumer and Message methods issue 16 adds, run side by side on confluent-kafka (librdkafka's
mock cluster, in this process, no network) and on eoslog, comparing what a user observes:
return values and their shapes, exception types and KafkaError codes (docs/api.md "Consumer").

Each scenario is one function of a Side; a test runs it on both and compares the results.
Messages of exceptions are not compared (confluent's name cimpl types). The mock cluster
auto-creates the topic with 4 partitions at the first produce; eoslog's is created with 4.
The mock does not search by timestamp (it answers -1 for any timestamp), so offsets_for_times is
compared on its special timestamps, errors and shapes only; tests/client/
test_consumer_offsets_for_times.py holds the search to Kafka's rule.

Differences eoslog keeps on purpose are tests too (test_known_difference_*), with the reason.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import eoslog

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "t"
PARTITIONS = 4
RECORDS = 6  # in each of partitions 0 and 1, at timestamps 1000, 1100, ...
_groups = itertools.count()


class Side:
    """One implementation: how to make a consumer and what its exceptions are."""

    def __init__(
        self,
        name: str,
        make: Callable[[dict[str, object]], Any],
        module: Any,
        quiet_s: float,
    ) -> None:
        self.name = name
        self._make = make
        self.TopicPartition = module.TopicPartition
        self.KafkaException = module.KafkaException
        self.KafkaError = module.KafkaError
        # How long "nothing more is delivered" is watched: librdkafka fetches in the background.
        self.quiet_s = quiet_s

    def consumer(self, **config: object) -> Any:
        settings: dict[str, object] = {
            "group.id": f"parity-{next(_groups)}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        settings.update({key.replace("_", "."): value for key, value in config.items()})
        return self._make(settings)

    def tp(self, partition: int, offset: int = eoslog.OFFSET_INVALID, *rest: Any) -> Any:
        return self.TopicPartition(TOPIC, partition, offset, *rest)

    def outcome(self, call: Callable[[], Any]) -> tuple[object, ...]:
        """("ok", the result made comparable), or the exception's type and KafkaError code."""
        try:
            return ("ok", comparable(call()))
        except self.KafkaException as error:
            return ("KafkaException", error.args[0].code())
        except (TypeError, ValueError, RuntimeError) as error:
            return (type(error).__name__,)

    def take(self, consumer: Any, count: int) -> list[tuple[int, int]]:
        """(partition, offset) of `count` messages, waiting up to 15 s for them."""
        found: list[tuple[int, int]] = []
        deadline = time.monotonic() + 15
        while len(found) < count and time.monotonic() < deadline:
            found += [
                (m.partition(), m.offset()) for m in consumer.consume(count - len(found), 0.5)
            ]
        return found

    def quiet(self, consumer: Any) -> list[tuple[int, int]]:
        """What is delivered while watching for quiet_s: nothing, when all is consumed or
        paused."""
        return [(m.partition(), m.offset()) for m in consumer.consume(100, self.quiet_s)]


def comparable(value: Any) -> Any:
    """TopicPartitions (of either library) as (topic, partition, offset) tuples."""
    if isinstance(value, list):
        return [comparable(item) for item in value]
    if hasattr(value, "topic") and hasattr(value, "partition") and hasattr(value, "offset"):
        return (value.topic, value.partition, value.offset)
    return value


@pytest.fixture(scope="module")
def mock_servers() -> Iterator[str]:
    """A librdkafka mock cluster with the topic filled; its bootstrap address."""
    producer = confluent_kafka.Producer({"bootstrap.servers": "", "test.mock.num.brokers": 1})
    fill(producer)
    producer.flush(15)
    metadata = producer.list_topics(timeout=15)
    assert len(metadata.topics[TOPIC].partitions) == PARTITIONS
    (node,) = metadata.brokers.values()
    # The cluster lives as long as the producer that made it.
    yield f"{node.host}:{node.port}"
    del producer


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[eoslog.Broker]:
    path = os.path.join(tmp_path_factory.mktemp("parity"), "data")
    opened = eoslog.open(path, durability="none", background=False)
    opened.create_topic(TOPIC, PARTITIONS)
    producer = opened.producer({})
    fill(producer)
    producer.flush()
    producer.close()
    yield opened
    opened.close()


def fill(producer: Any) -> None:
    for i in range(RECORDS):
        for partition in (0, 1):
            producer.produce(
                TOPIC,
                b"v%d" % i,
                key=b"k%d" % i,
                partition=partition,
                timestamp=1_000 + 100 * i,
                headers=[("h", b"%d" % i)],
            )


@pytest.fixture(scope="module")
def sides(mock_servers: str, broker: eoslog.Broker) -> tuple[Side, Side]:
    def confluent(settings: dict[str, object]) -> Any:
        return confluent_kafka.Consumer({**settings, "bootstrap.servers": mock_servers})

    return (
        Side("confluent", confluent, confluent_kafka, quiet_s=1.5),
        Side("eoslog", broker.consumer, eoslog, quiet_s=0),
    )


def same_on_both(sides: tuple[Side, Side], scenario: Callable[[Side], Any]) -> None:
    confluent, ours = sides
    assert scenario(ours) == scenario(confluent)


# --- pause / resume ----------------------------------------------------------------------------


def paused_partition_keeps_its_position(side: Side) -> object:
    consumer = side.consumer()
    consumer.assign([side.tp(0, 0)])
    first = side.take(consumer, 2)
    consumer.pause([side.tp(0)])
    observed = [first, side.quiet(consumer), comparable(consumer.position([side.tp(0)]))]
    consumer.resume([side.tp(0)])
    observed.append(side.take(consumer, RECORDS - 2))
    consumer.close()
    return observed


def pause_outlives_the_assignment(side: Side) -> object:
    # librdkafka keeps the pause on its per-partition object, which exists once the client
    # knows the topic: here, once partition 0 was read. (A pause issued before the client has
    # the topic's metadata, or racing an assign() it has not carried out yet, can be lost
    # there; eoslog's broker always knows its topics, so a pause always holds.)
    consumer = side.consumer()
    consumer.assign([side.tp(0, 0)])
    first = side.take(consumer, 1)
    consumer.pause([side.tp(0)])
    consumer.unassign()
    consumer.pause([side.tp(1)])  # never assigned
    consumer.assign([side.tp(0, 0), side.tp(1, 0)])
    observed = [first, side.quiet(consumer)]
    consumer.resume([side.tp(0), side.tp(1)])
    observed.append(sorted(side.take(consumer, 2 * RECORDS)))
    consumer.close()
    return observed


def pause_outlives_a_rebalance(side: Side) -> object:
    consumer = side.consumer()
    consumer.subscribe([TOPIC])
    joined = wait_for_assignment(consumer)
    consumer.pause(consumer.assignment())
    consumer.unsubscribe()
    consumer.subscribe([TOPIC])
    rejoined = wait_for_assignment(consumer)
    observed = [joined, rejoined, side.quiet(consumer)]
    consumer.close()
    return observed


def wait_for_assignment(consumer: Any) -> int:
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    return len(consumer.assignment())


def pause_arguments(side: Side) -> object:
    consumer = side.consumer()
    observed = [
        side.outcome(lambda: consumer.pause(side.tp(0))),
        side.outcome(lambda: consumer.pause([(TOPIC, 0)])),
        side.outcome(lambda: consumer.pause([side.TopicPartition("missing", 0)])),
        side.outcome(lambda: consumer.resume([side.tp(3)])),
    ]
    consumer.close()
    observed.append(side.outcome(lambda: consumer.pause([side.tp(0)])))
    return observed


def test_paused_partition_is_not_fetched_and_keeps_its_position(
    sides: tuple[Side, Side],
) -> None:
    same_on_both(sides, paused_partition_keeps_its_position)


def test_a_pause_outlives_unassign_and_assign_and_applies_before_assign(
    sides: tuple[Side, Side],
) -> None:
    same_on_both(sides, pause_outlives_the_assignment)


def test_a_pause_outlives_a_rebalance(sides: tuple[Side, Side]) -> None:
    same_on_both(sides, pause_outlives_a_rebalance)


def test_pause_and_resume_check_their_arguments_alike(sides: tuple[Side, Side]) -> None:
    same_on_both(sides, pause_arguments)


# --- incremental_assign / incremental_unassign, memberid ---------------------------------------


def incremental_changes(side: Side) -> object:
    consumer = side.consumer()
    consumer.assign([side.tp(0, 0)])
    observed: list[object] = [
        side.outcome(lambda: consumer.incremental_assign([side.tp(1, 4)])),
        sorted((tp.topic, tp.partition) for tp in consumer.assignment()),
        sorted(side.take(consumer, RECORDS + 2)),
        side.outcome(lambda: consumer.incremental_assign([side.tp(1)])),
        side.outcome(lambda: consumer.incremental_assign([side.tp(2), side.tp(2)])),
        side.outcome(lambda: consumer.incremental_unassign([side.tp(3)])),
        side.outcome(lambda: consumer.incremental_unassign([side.tp(1)])),
        sorted((tp.topic, tp.partition) for tp in consumer.assignment()),
        side.outcome(lambda: consumer.incremental_assign(side.tp(1))),
        side.outcome(lambda: consumer.incremental_assign([])),
    ]
    consumer.close()
    return observed


def subscribed_member(side: Side) -> object:
    consumer = side.consumer()
    before = consumer.memberid()
    consumer.subscribe([TOPIC])
    assigned = wait_for_assignment(consumer)
    member = consumer.memberid()
    observed = [
        before,
        assigned,
        type(member).__name__,
        bool(member),
        side.outcome(lambda: consumer.incremental_assign([side.tp(0)])),
        side.outcome(lambda: consumer.incremental_unassign([side.tp(0)])),
    ]
    consumer.close()
    observed.append(side.outcome(consumer.memberid))
    return observed


def test_incremental_assign_and_unassign_change_the_assignment_alike(
    sides: tuple[Side, Side],
) -> None:
    same_on_both(sides, incremental_changes)


def test_a_subscribed_member_has_an_id_and_refuses_incremental_changes(
    sides: tuple[Side, Side],
) -> None:
    same_on_both(sides, subscribed_member)


# --- store_offsets and commit ------------------------------------------------------------------


def stored_offsets_by_hand(side: Side) -> object:
    consumer = side.consumer(enable_auto_offset_store=False)
    consumer.assign([side.tp(0, 0)])
    first = consumer.consume(1, 10)[0]
    observed = [
        side.outcome(lambda: consumer.commit(asynchronous=False)),
        side.outcome(lambda: consumer.store_offsets(message=first)),
        side.outcome(lambda: consumer.commit(asynchronous=False)),
        side.outcome(lambda: consumer.store_offsets(offsets=[side.tp(0, 4, "md")])),
        side.outcome(lambda: consumer.commit(asynchronous=False)),
        [(tp.offset, tp.metadata) for tp in consumer.committed([side.tp(0)], timeout=10)],
        side.outcome(lambda: consumer.store_offsets(offsets=[side.tp(1, 3)])),
        side.outcome(
            lambda: consumer.store_offsets(offsets=[side.TopicPartition("missing", 0, 1)])
        ),
        side.outcome(lambda: consumer.store_offsets(offsets=[side.tp(1, 3), side.tp(0, 5)])),
        side.outcome(lambda: consumer.store_offsets(offsets=[side.tp(1, -2)])),
        side.outcome(lambda: consumer.store_offsets()),
        side.outcome(lambda: consumer.store_offsets(message=first, offsets=[side.tp(0, 1)])),
        side.outcome(lambda: consumer.store_offsets(message="m")),
        side.outcome(lambda: consumer.store_offsets(offsets=side.tp(0, 1))),
        side.outcome(lambda: consumer.commit(message=first, offsets=[side.tp(0, 1)])),
    ]
    consumer.close()
    observed.append(side.outcome(lambda: consumer.store_offsets(offsets=[side.tp(0, 1)])))
    return observed


def stored_offsets_automatically(side: Side) -> object:
    consumer = side.consumer()
    consumer.assign([side.tp(0, 0)])
    observed: list[object] = [side.outcome(lambda: consumer.commit(asynchronous=False))]
    taken = consumer.consume(2, 10)
    while len(taken) < 2:
        taken += consumer.consume(2 - len(taken), 1)
    consumer.seek(side.tp(0, 5))
    observed += [
        side.outcome(lambda: consumer.store_offsets(message=taken[0])),
        side.outcome(lambda: consumer.commit(asynchronous=False)),
        [tp.offset for tp in consumer.committed([side.tp(0)], timeout=10)],
        side.outcome(lambda: consumer.commit(asynchronous=True)),
    ]
    consumer.close()
    return observed


def test_store_offsets_and_commit_follow_librdkafka_without_auto_store(
    sides: tuple[Side, Side],
) -> None:
    same_on_both(sides, stored_offsets_by_hand)


def test_auto_store_commits_what_was_delivered_not_a_seek_target(
    sides: tuple[Side, Side],
) -> None:
    same_on_both(sides, stored_offsets_automatically)


def commit_with_nothing_new(side: Side) -> object:
    consumer = side.consumer()
    consumer.assign([side.tp(0, 0)])
    side.take(consumer, 2)
    first = side.outcome(lambda: consumer.commit(asynchronous=False))
    again = side.outcome(lambda: consumer.commit(asynchronous=False))
    consumer.close()
    return first, again


def test_known_difference_a_commit_with_nothing_new_succeeds_on_eoslog(
    sides: tuple[Side, Side],
) -> None:
    # librdkafka raises _NO_OFFSET; eoslog returns the stored offsets without writing, because
    # its commit() is synchronous by default and an idle consume/commit loop would raise.
    confluent, ours = sides
    committed = ("ok", [(TOPIC, 0, 2)])
    assert commit_with_nothing_new(confluent) == (
        committed,
        ("KafkaException", confluent.KafkaError._NO_OFFSET),
    )
    assert commit_with_nothing_new(ours) == (committed, committed)


# --- error messages: _PARTITION_EOF, _AUTO_OFFSET_RESET, UNKNOWN_TOPIC_OR_PART -----------------


def observed_messages(side: Side, consumer: Any, count: int) -> list[tuple[object, ...]]:
    """What the user sees of `count` messages (records or error messages), waiting up to
    15 s for them, then of any that follow within quiet_s."""
    found: list[Any] = []
    deadline = time.monotonic() + 15
    while len(found) < count and time.monotonic() < deadline:
        found += consumer.consume(count - len(found), 0.5)
    found += consumer.consume(100, side.quiet_s)
    return [described(message) for message in found]


def described(message: Any) -> tuple[object, ...]:
    error = message.error()
    if error is None:
        return (message.topic(), message.partition(), message.offset(), message.value())
    # The error's text names the broker, which differs (librdkafka's mock is broker 1).
    return (
        message.topic(),
        message.partition(),
        message.offset(),
        error.code(),
        error.name(),
        (error.fatal(), error.retriable()),
        message.key(),
        message.headers(),
        message.timestamp(),
        message.value() == error.str().encode(),
        len(message) == len(error.str()),
    )


def partition_eof(side: Side) -> object:
    consumer = side.consumer(enable_partition_eof=True)
    consumer.assign([side.tp(0, RECORDS - 2), side.tp(3, eoslog.OFFSET_BEGINNING)])
    observed: list[object] = [sorted(observed_messages(side, consumer, 4), key=repr)]
    consumer.seek(side.tp(0, RECORDS))
    observed.append(observed_messages(side, consumer, 1))
    consumer.pause([side.tp(0)])
    consumer.resume([side.tp(0)])
    observed.append(observed_messages(side, consumer, 1))
    consumer.assign([side.tp(0, eoslog.OFFSET_END)])
    observed.append(observed_messages(side, consumer, 1))
    consumer.close()
    return observed


def partition_eof_when_subscribed(side: Side) -> object:
    consumer = side.consumer(enable_partition_eof=True, auto_offset_reset="latest")
    consumer.subscribe([TOPIC])
    observed = sorted(observed_messages(side, consumer, PARTITIONS), key=repr)
    consumer.close()
    return observed


def auto_offset_reset_error(side: Side) -> object:
    consumer = side.consumer(auto_offset_reset="error")
    consumer.assign([side.tp(0, 100)])
    observed = [observed_messages(side, consumer, 1)]
    observed.append(side.outcome(lambda: consumer.seek(side.tp(0, RECORDS - 1))))
    consumer.assign([side.tp(0, RECORDS - 1)])
    observed.append(observed_messages(side, consumer, 1))
    consumer.assign([side.tp(1)])  # no committed offset
    observed.append(observed_messages(side, consumer, 1))
    consumer.close()
    return observed


def missing_subscribed_topic(side: Side) -> object:
    consumer = side.consumer()
    consumer.subscribe(["missing-topic"])
    observed = observed_messages(side, consumer, 1)
    consumer.close()
    return observed


def test_partition_eof_is_delivered_once_per_end_and_again_after_seek_resume_assign(
    sides: tuple[Side, Side],
) -> None:
    same_on_both(sides, partition_eof)


def test_partition_eof_is_delivered_for_each_partition_a_rebalance_assigns(
    sides: tuple[Side, Side],
) -> None:
    same_on_both(sides, partition_eof_when_subscribed)


def test_auto_offset_reset_error_is_a_message_and_halts_the_partition(
    sides: tuple[Side, Side],
) -> None:
    same_on_both(sides, auto_offset_reset_error)


def test_a_subscribed_topic_that_does_not_exist_is_an_error_message(
    sides: tuple[Side, Side],
) -> None:
    same_on_both(sides, missing_subscribed_topic)


# --- offsets_for_times -------------------------------------------------------------------------


def offsets_for_times(side: Side) -> object:
    consumer = side.consumer()
    ask = consumer.offsets_for_times
    observed = [
        # One partition once: librdkafka answers a partition asked twice only once.
        side.outcome(lambda: ask([side.tp(0, -1), side.tp(1, -2), side.tp(2, -1)], timeout=10)),
        side.outcome(lambda: ask([])),
        side.outcome(lambda: ask([side.TopicPartition("missing", 0, 5)], timeout=10)),
        side.outcome(lambda: ask([side.tp(9, 5)], timeout=10)),
        side.outcome(lambda: ask(side.tp(0, 5))),
        side.outcome(lambda: ask([side.tp(0, 5)], timeout="x")),
        type(ask([side.tp(0, 1_000)], timeout=10)[0]).__name__,
    ]
    consumer.close()
    return observed


def test_offsets_for_times_answers_and_refuses_alike(sides: tuple[Side, Side]) -> None:
    same_on_both(sides, offsets_for_times)


# --- list_topics -------------------------------------------------------------------------------


def public(value: object) -> list[str]:
    return sorted(name for name in vars(value) if not name.startswith("_"))


def cluster_metadata(side: Side) -> object:
    consumer = side.consumer()
    metadata = consumer.list_topics(timeout=10)
    topic = metadata.topics[TOPIC]
    partition = topic.partitions[0]
    node = metadata.brokers[partition.leader]
    missing = consumer.list_topics("missing", timeout=10).topics["missing"]
    observed = [
        [type(item).__name__ for item in (metadata, topic, partition, node)],
        [public(item) for item in (metadata, topic, partition, node)],
        # librdkafka's mock reports controller 0 and no broker 0; only the types compare.
        [type(metadata.cluster_id).__name__, type(metadata.controller_id).__name__],
        [type(metadata.orig_broker_id).__name__, type(metadata.orig_broker_name).__name__],
        repr(topic),
        sorted(topic.partitions),
        (partition.id, partition.replicas == partition.isrs == [partition.leader]),
        partition.error,
        (missing.topic, missing.partitions, missing.error.code()),
        list(consumer.list_topics(TOPIC, timeout=10).topics),
        side.outcome(lambda: consumer.list_topics(5)),
        side.outcome(lambda: consumer.list_topics(timeout="x")),
    ]
    consumer.close()
    return observed


def test_list_topics_answers_in_the_same_shapes(sides: tuple[Side, Side]) -> None:
    same_on_both(sides, cluster_metadata)


# --- Message -----------------------------------------------------------------------------------


def message_fields(side: Side) -> object:
    consumer = side.consumer()
    consumer.assign([side.tp(0, 0)])
    message = consumer.consume(1, 10)[0]
    other = consumer.consume(1, 10)[0]
    observed: list[object] = [message.latency(), message.leader_epoch(), len(message)]
    decoded = {"decoded": 1}
    message.set_value(decoded)
    message.set_key(3)
    message.set_topic("renamed")
    message.set_headers("h")
    message.set_error("e")
    observed += [
        message.value() is decoded,
        (message.key(), message.topic(), message.headers(), message.error(), len(message)),
        (message.offset(), message.partition(), message.timestamp()),
        (other.value(), other.key(), other.topic(), other.headers(), other.error()),
        side.outcome(lambda: message.set_key()),
        side.outcome(lambda: message.set_key(key=1)),
    ]
    message.set_value(7)
    observed.append(side.outcome(lambda: len(message)))
    consumer.close()
    return observed


def test_messages_report_and_change_their_fields_alike(sides: tuple[Side, Side]) -> None:
    same_on_both(sides, message_fields)


def test_message_has_confluent_s_methods() -> None:
    theirs = {name for name in dir(confluent_kafka.Message) if not name.startswith("_")}
    ours = {name for name in dir(eoslog.Message) if not name.startswith("_")}
    # Not built yet: the serializing clients' deserialized_* and KIP-932's delivery_count.
    assert theirs - ours == {"delivery_count", "deserialized_key", "deserialized_value"}


def delivery_report(producer: Any) -> Any:
    reports: list[Any] = []
    producer.produce(TOPIC, b"r", partition=3, on_delivery=lambda error, m: reports.append(m))
    producer.flush(15)
    (report,) = reports
    return report


def test_a_delivery_report_has_a_latency_and_no_leader_epoch_as_confluents(
    mock_servers: str, broker: eoslog.Broker
) -> None:
    # latency(): seconds from produce() to the report; leader_epoch() is None on both.
    theirs = delivery_report(confluent_kafka.Producer({"bootstrap.servers": mock_servers}))
    producer = broker.producer({})
    ours = delivery_report(producer)
    producer.close()
    assert isinstance(theirs.latency(), float) and isinstance(ours.latency(), float)
    assert ours.latency() >= 0
    assert theirs.leader_epoch() is None and ours.leader_epoch() is None
