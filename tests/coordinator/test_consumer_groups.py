"""Consumer groups inside one process (eoslog.coordinator.group_membership, assignors,
group_coordinator; eoslog.client.group_member): assignment strategies, joins and rebalances
with their callbacks, removal after max.poll.interval.ms on the broker's clock, generation
fencing of zombies (KIP-447), pattern subscriptions and auto-commit."""

from __future__ import annotations

from typing import Any

import pytest

import eoslog
from eoslog import ConsumerGroupMetadata, TopicPartition
from eoslog.client.consumer_config import ConsumerConfig
from eoslog.client.group_member import NO_CHANGE, GroupMember
from eoslog.coordinator.assignors import range_assign, round_robin_assign
from eoslog.coordinator.group_coordinator import OffsetToCommit
from eoslog.coordinator.group_membership import ALLOWED_FROM, Group, GroupState
from tests.support import logtools
from tests.support.logtools import OpenBroker

GROUP = "g1"


def _fill(broker: eoslog.Broker, topic: str, records: int) -> None:
    """`records` records in partition 0 of `topic`, values b"0", b"1", ..."""
    writer = broker.producer({"linger.ms": 0})
    for number in range(records):
        writer.produce(topic, b"%d" % number, partition=0)
    writer.flush()


def _members(consumers: list[eoslog.Consumer]) -> None:
    """Poll every consumer (without waiting) until none is in a rebalance."""
    for _ in range(10):
        for consumer in consumers:
            consumer.consume(1, timeout=0)
    generations = {c.consumer_group_metadata().generation_id for c in consumers}
    assert len(generations) == 1 and min(generations) > 0, generations


def _consumer(broker: eoslog.Broker, **config: Any) -> eoslog.Consumer:
    settings = {"group.id": GROUP, "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    settings.update({key.replace("_", "."): value for key, value in config.items()})
    return broker.consumer(settings)


def _subscribed(broker: eoslog.Broker, topics: list[str]) -> eoslog.Consumer:
    """A consumer of the group, subscribed to `topics`, past its first rebalance."""
    consumer = _consumer(broker)
    consumer.subscribe(topics)
    _members([consumer])
    return consumer


def _owned(consumer: eoslog.Consumer) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in consumer.assignment()}


class Recorder:
    """Rebalance callbacks that record (event, partitions)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, list[tuple[str, int]]]] = []

    def callbacks(self) -> dict[str, Any]:
        return {
            "on_assign": lambda c, ps: self._record("assign", ps),
            "on_revoke": lambda c, ps: self._record("revoke", ps),
            "on_lost": lambda c, ps: self._record("lost", ps),
        }

    def _record(self, event: str, partitions: list[TopicPartition]) -> None:
        self.events.append((event, sorted((tp.topic, tp.partition) for tp in partitions)))


# --- assignment strategies -------------------------------------------------------------------


def test_range_gives_each_member_a_run_of_each_topic_the_first_ones_one_more() -> None:
    subscriptions = {"a": frozenset({"t", "u"}), "b": frozenset({"t", "u"})}
    assignment = range_assign(subscriptions, {"t": 3, "u": 2})
    assert assignment == {"a": [("t", 0), ("t", 1), ("u", 0)], "b": [("t", 2), ("u", 1)]}


def test_round_robin_deals_sorted_partitions_in_member_order() -> None:
    subscriptions = {"a": frozenset({"t", "u"}), "b": frozenset({"t", "u"})}
    assignment = round_robin_assign(subscriptions, {"t": 3, "u": 2})
    assert assignment == {"a": [("t", 0), ("t", 2), ("u", 1)], "b": [("t", 1), ("u", 0)]}


def test_round_robin_skips_members_not_subscribed_to_the_topic() -> None:
    subscriptions = {"a": frozenset({"t"}), "b": frozenset({"t", "u"})}
    assignment = round_robin_assign(subscriptions, {"t": 2, "u": 2})
    assert assignment == {"a": [("t", 0)], "b": [("t", 1), ("u", 0), ("u", 1)]}


@pytest.mark.parametrize("assign", [range_assign, round_robin_assign])
def test_every_partition_goes_to_exactly_one_subscribed_member(assign: Any) -> None:
    rng = logtools.seeded(5)
    for _ in range(200):
        topics = [f"t{n}" for n in range(rng.randint(1, 4))]
        counts = {t: rng.randint(0, 7) for t in topics}
        subscriptions = {
            f"m{n}": frozenset(rng.sample(topics, rng.randint(1, len(topics))))
            for n in range(rng.randint(1, 5))
        }
        assignment = assign(subscriptions, counts)
        owned = [p for partitions in assignment.values() for p in partitions]
        subscribed = {t for s in subscriptions.values() for t in s}
        assert sorted(owned) == sorted((t, p) for t in subscribed for p in range(counts[t]))
        for member, partitions in assignment.items():
            assert all(topic in subscriptions[member] for topic, _ in partitions)


def test_every_group_state_transition_is_legal_or_refused_loudly() -> None:
    for source in GroupState:
        for target in GroupState:
            group = Group(GROUP)
            group.state = source
            if source in ALLOWED_FROM[target]:
                group.transition(target)
                assert group.state is target
            else:
                with pytest.raises(AssertionError):
                    group.transition(target)
                assert group.state is source


# --- joining and rebalancing -------------------------------------------------------------------


def test_a_lone_member_gets_every_partition_at_generation_1(open_broker: OpenBroker) -> None:
    broker = open_broker()
    broker.create_topic("t", 3)
    recorder = Recorder()
    consumer = _consumer(broker)
    consumer.subscribe(["t"], **recorder.callbacks())
    _members([consumer])
    metadata = consumer.consumer_group_metadata()
    assert metadata.group_id == GROUP and metadata.generation_id == 1 and metadata.member_id
    assert _owned(consumer) == {("t", 0), ("t", 1), ("t", 2)}
    assert recorder.events == [("assign", [("t", 0), ("t", 1), ("t", 2)])]


def test_a_second_member_makes_the_group_rebalance_and_split_the_partitions(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    broker.create_topic("t", 4)
    first, second = Recorder(), Recorder()
    one = _consumer(broker)
    one.subscribe(["t"], **first.callbacks())
    _members([one])
    two = _consumer(broker)
    two.subscribe(["t"], **second.callbacks())
    assert two.consume(1, timeout=0) == []  # the rebalance waits for the first to rejoin
    _members([one, two])
    assert one.consumer_group_metadata().generation_id == 2
    assert _owned(one) | _owned(two) == {("t", p) for p in range(4)}
    assert len(_owned(one)) == len(_owned(two)) == 2 and not _owned(one) & _owned(two)
    all_four = [("t", p) for p in range(4)]
    assert first.events == [
        ("assign", all_four),
        ("revoke", all_four),
        ("assign", sorted(_owned(one))),
    ]
    assert second.events == [("assign", sorted(_owned(two)))]


def test_a_member_that_closes_leaves_and_the_rest_take_its_partitions(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    broker.create_topic("t", 2)
    one, two = _consumer(broker), _consumer(broker)
    one.subscribe(["t"])
    two.subscribe(["t"])
    _members([one, two])
    two.close()
    _members([one])
    assert _owned(one) == {("t", 0), ("t", 1)}
    assert one.consumer_group_metadata().generation_id == 3


def test_the_strategy_is_the_one_the_members_vote_for(open_broker: OpenBroker) -> None:
    broker = open_broker()
    broker.create_topic("t", 3)
    broker.create_topic("u", 2)
    one = _consumer(broker, partition_assignment_strategy="roundrobin,range")
    two = _consumer(broker, partition_assignment_strategy="roundrobin")
    one.subscribe(["t", "u"])
    two.subscribe(["t", "u"])
    _members([one, two])
    state, _, protocol, members = broker.groups.describe_group(GROUP)
    assert state is GroupState.STABLE and protocol == "roundrobin"
    assert sorted(map(len, members.values())) == [2, 3]


def test_a_member_sharing_no_strategy_is_refused(open_broker: OpenBroker) -> None:
    broker = open_broker()
    broker.create_topic("t", 1)
    one = _consumer(broker, partition_assignment_strategy="range")
    one.subscribe(["t"])
    _members([one])
    two = _consumer(broker, partition_assignment_strategy="roundrobin")
    two.subscribe(["t"])
    with pytest.raises(eoslog.KafkaException) as raised:
        two.consume(1, timeout=0)
    assert raised.value.error.code() == 23  # INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "", "range,sticky"])
def test_unknown_assignment_strategies_are_refused_in_the_config(
    open_broker: OpenBroker, strategy: str
) -> None:
    broker = open_broker()
    with pytest.raises(eoslog.KafkaException) as raised:
        _consumer(broker, partition_assignment_strategy=strategy)
    assert raised.value.error.code() == 40  # INVALID_CONFIG


def test_a_pattern_subscription_picks_up_a_topic_created_later(open_broker: OpenBroker) -> None:
    broker = open_broker()
    broker.create_topic("audit-1", 1)
    broker.create_topic("other", 1)
    consumer = _subscribed(broker, ["^audit-.*"])
    assert _owned(consumer) == {("audit-1", 0)}
    broker.create_topic("audit-2", 1)
    _members([consumer])
    assert _owned(consumer) == {("audit-1", 0), ("audit-2", 0)}
    assert consumer.consumer_group_metadata().generation_id == 2


def test_consumer_does_not_create_a_subscribed_topic_by_default(open_broker: OpenBroker) -> None:
    """librdkafka's allow.auto.create.topics defaults to false for consumers."""
    broker = open_broker()
    consumer = _subscribed(broker, ["missing"])
    assert _owned(consumer) == set() and "missing" not in broker.list_topics()


def test_a_consumer_allowing_auto_create_creates_its_named_topics_at_subscribe(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    consumer = _consumer(broker, allow_auto_create_topics=True)
    consumer.subscribe(["made", "^pattern-.*"])
    _members([consumer])
    assert set(broker.partition_counts()) == {"made"}  # a pattern names no topic to create
    assert _owned(consumer) == {("made", 0)}


def test_a_subscribed_member_resumes_from_the_group_committed_offsets(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    broker.create_topic("t", 1)
    _fill(broker, "t", 10)
    one = _consumer(broker)
    one.subscribe(["t"])
    assert [m.offset() for m in one.consume(4, timeout=1)] == [0, 1, 2, 3]
    one.commit()
    one.close()
    two = _consumer(broker)
    two.subscribe(["t"])
    assert [m.offset() for m in two.consume(2, timeout=1)] == [4, 5]


# --- max.poll.interval.ms and fencing ----------------------------------------------------------


def test_a_member_that_stops_polling_is_removed_and_its_partitions_move(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    broker.create_topic("t", 2)
    slow_events = Recorder()
    slow = _consumer(broker, max_poll_interval_ms=10_000)
    fast = _consumer(broker, max_poll_interval_ms=10_000)
    slow.subscribe(["t"], **slow_events.callbacks())
    fast.subscribe(["t"])
    _members([slow, fast])
    zombie = slow.consumer_group_metadata()
    clock.advance(6_000)
    fast.consume(1, timeout=0)
    clock.advance(6_000)  # slow is now 12 s silent; fast 6 s
    broker.run_transaction_maintenance()
    _members([fast])
    assert _owned(fast) == {("t", 0), ("t", 1)}
    assert zombie.member_id not in broker.groups.describe_group(GROUP)[3]
    # The zombie's commits are refused; at its next poll it learns it was removed.
    with pytest.raises(eoslog.UnknownMemberIdError):
        slow.commit(offsets=[TopicPartition("t", 0, 1)])
    slow.consume(1, timeout=0)
    assert slow_events.events[-1][0] == "lost"
    _members([slow, fast])
    assert slow.consumer_group_metadata().member_id != zombie.member_id


def test_offsets_sent_with_an_older_generation_are_refused_and_the_transaction_aborts(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    broker.create_topic("t", 2)
    broker.create_topic("out", 1)
    one = _subscribed(broker, ["t"])
    stale = one.consumer_group_metadata()
    two = _consumer(broker)
    two.subscribe(["t"])
    _members([one, two])  # generation 2: `stale` is a zombie's metadata now
    producer = broker.producer({"transactional.id": "zombie"})
    producer.init_transactions()
    producer.begin_transaction()
    producer.produce("out", b"v", partition=0)
    with pytest.raises(eoslog.IllegalGenerationError) as raised:
        producer.send_offsets_to_transaction([TopicPartition("t", 0, 5)], stale)
    assert raised.value.error.code() == 22 and raised.value.error.txn_requires_abort()
    assert producer.transaction_state == "ABORTABLE_ERROR"
    producer.abort_transaction()
    assert one.committed([TopicPartition("t", 0)], timeout=0)[0].offset < 0
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition("t", 0, 5)], one.consumer_group_metadata())
    producer.commit_transaction()
    assert one.committed([TopicPartition("t", 0)], timeout=0)[0].offset == 5


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        (ConsumerGroupMetadata(GROUP, 1, "nobody"), eoslog.UnknownMemberIdError),
        (ConsumerGroupMetadata("never-joined", 3, ""), eoslog.IllegalGenerationError),
    ],
)
def test_offsets_from_an_unknown_member_or_generation_are_refused(
    open_broker: OpenBroker, metadata: ConsumerGroupMetadata, error: type[Exception]
) -> None:
    broker = open_broker()
    broker.create_topic("t", 1)
    assert _subscribed(broker, ["t"]).assignment() == [TopicPartition("t", 0)]
    with pytest.raises(error):
        broker.groups.commit_offsets(metadata, [OffsetToCommit("t", 0, 1)])
    producer = broker.producer({"transactional.id": "x"})
    producer.init_transactions()
    producer.begin_transaction()
    with pytest.raises(eoslog.CommitFailedError):
        producer.send_offsets_to_transaction([TopicPartition("t", 0, 1)], metadata)


def test_a_plain_commit_from_outside_a_group_with_members_is_refused(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    broker.create_topic("t", 1)
    member = _subscribed(broker, ["t"])
    outsider = _consumer(broker)  # assign()-only: generation -1, no member id
    with pytest.raises(eoslog.UnknownMemberIdError):
        outsider.commit(offsets=[TopicPartition("t", 0, 1)])
    # A transactional commit from outside is allowed (Kafka's backward-compatible rule).
    producer = broker.producer({"transactional.id": "outside"})
    producer.init_transactions()
    producer.begin_transaction()
    producer.send_offsets_to_transaction(
        [TopicPartition("t", 0, 1)], outsider.consumer_group_metadata()
    )
    producer.commit_transaction()
    assert member.committed([TopicPartition("t", 0)], timeout=0)[0].offset == 1


# --- auto-commit -------------------------------------------------------------------------------


def test_auto_commit_commits_the_positions_every_interval_and_at_close(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    broker.create_topic("t", 1)
    _fill(broker, "t", 10)
    consumer = _consumer(broker, enable_auto_commit=True, auto_commit_interval_ms=1_000)
    consumer.subscribe(["t"])
    assert len(consumer.consume(3, timeout=1)) == 3
    assert consumer.committed([TopicPartition("t", 0)])[0].offset < 0  # not due yet
    clock.advance(1_000)
    consumer.consume(2, timeout=1)
    assert consumer.committed([TopicPartition("t", 0)])[0].offset == 3
    consumer.close()
    reader = _consumer(broker)
    assert reader.committed([TopicPartition("t", 0)])[0].offset == 5


# --- the member alone: it decides, the consumer applies (issue 13's Rebalance) -----------------


def test_a_group_member_alone_returns_each_rebalance_as_a_value_to_apply(
    open_broker: OpenBroker,
) -> None:
    # The member knows nothing of a Consumer: each step returns a Rebalance naming what to
    # give up and take, with the callbacks; the caller applies it and reports revoked().
    broker = open_broker()
    broker.create_topic("t", 2)

    def on_assign(consumer: object, partitions: list[TopicPartition]) -> None: ...

    def on_revoke(consumer: object, partitions: list[TopicPartition]) -> None: ...

    member = GroupMember(
        ConsumerConfig({"group.id": "alone"}),
        broker.groups,
        broker.partition_counts,
        broker.clock_ms,
    )
    assert not member.subscribed and member.leaving() is None  # nothing to give up yet
    member.subscribe(["t"], on_assign, on_revoke, None)
    assert member.heartbeat() == NO_CHANGE  # a new subscription: join before anything else
    joined = member.join()
    assert joined.on_assign is on_assign and joined.revoked == ()
    assert sorted(joined.assigned or ()) == [TopicPartition("t", 0), TopicPartition("t", 1)]
    assert member.metadata() == ConsumerGroupMetadata(
        "alone", member.generation_id, member.member_id
    )
    assert member.heartbeat() is None  # a settled member keeps its partitions
    leaving = member.leaving()
    assert leaving is not None and leaving.on_revoke is on_revoke
    assert sorted(leaving.revoked) == sorted(joined.assigned or ())
    member.revoked()
    member.leave()
    assert not member.subscribed and member.metadata().member_id == ""
