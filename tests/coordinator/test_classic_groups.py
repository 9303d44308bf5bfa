"""Remote members of consumer groups (eoslog.coordinator.classic_groups): Kafka's classic
protocol as `eoslog serve` runs it for Kafka clients: member ids (MEMBER_ID_REQUIRED), the
join barrier and the initial delay, the coordinator's assignment handed out by SyncGroup,
a remote leader for strategies eoslog does not implement, heartbeats, session timeouts,
LeaveGroup, fencing of offsets by generation and member, and groups mixing in-process
consumers with remote members. Driven on the broker's clock, answers collected from the
callbacks the coordinator calls."""

from __future__ import annotations

from typing import Any

import pytest

import eoslog
from eoslog import ConsumerGroupMetadata
from eoslog.coordinator.classic_groups import JoinRequest
from eoslog.coordinator.consumer_protocol import (
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from eoslog.coordinator.group_coordinator import OffsetToCommit
from eoslog.coordinator.group_membership import COORDINATOR_LEADER, JoinAnswer, SyncAnswer
from eoslog.error_codes import ErrorCodes as E
from eoslog.errors import (
    FencedInstanceIdError,
    InconsistentGroupProtocolError,
    RebalanceInProgressError,
)
from tests.support import logtools
from tests.support.logtools import OpenBroker

GROUP = "g"
DELAY_MS = 3000  # group.initial.rebalance.delay.ms, Kafka's default
SESSION_MS = 10_000
REBALANCE_MS = 30_000


class Answers:
    """Collects what the coordinator hands the callbacks of waiting joins and syncs."""

    def __init__(self) -> None:
        self.joins: list[JoinAnswer] = []
        self.syncs: list[SyncAnswer] = []


def _request(member_id: str = "", **fields: Any) -> JoinRequest:
    topics = fields.pop("topics", ["t"])
    values: dict[str, Any] = {
        "group_id": GROUP,
        "member_id": member_id,
        "client_id": "rdkafka",
        "client_host": "/127.0.0.1",
        "session_timeout_ms": SESSION_MS,
        "rebalance_timeout_ms": REBALANCE_MS,
        "protocol_type": "consumer",
        "protocols": (
            ("range", encode_subscription(topics)),
            ("roundrobin", encode_subscription(topics)),
        ),
    }
    values.update(fields)
    return JoinRequest(**values)


def _join(broker: eoslog.Broker, answers: Answers, member_id: str = "", **fields: Any) -> Any:
    """A JoinGroup: its answer now, or None (it waits; answers.joins gets it)."""
    return broker.groups.classic.join(_request(member_id, **fields), answers.joins.append)


def _new_member(broker: eoslog.Broker, answers: Answers, **fields: Any) -> str:
    """A member id, got as a v4+ client gets it: MEMBER_ID_REQUIRED, then join with it."""
    required = _join(broker, answers, **fields)
    assert required.error == E.MEMBER_ID_REQUIRED and required.member_id.startswith("rdkafka-")
    assert _join(broker, answers, required.member_id, **fields) is None
    return str(required.member_id)


def _sync(broker: eoslog.Broker, answers: Answers, member_id: str, generation: int) -> Any:
    return broker.groups.classic.sync(GROUP, member_id, generation, {}, answers.syncs.append)


def _two_members(broker: eoslog.Broker, clock: logtools.Clock) -> tuple[str, str, int]:
    """Two remote members in the first generation, each synced: (a, b, generation)."""
    answers = Answers()
    a = _new_member(broker, answers)
    b = _new_member(broker, answers)
    clock.advance(DELAY_MS)
    broker.groups.classic.tick(GROUP)
    generation = answers.joins[0].generation_id
    for member_id in (a, b):
        assert _sync(broker, answers, member_id, generation).error == E.NO_ERROR
    return a, b, generation


def test_a_join_without_member_id_is_given_one_and_an_unknown_id_is_refused(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    answers = Answers()
    required = _join(broker, answers)
    assert required.error == E.MEMBER_ID_REQUIRED
    assert _join(broker, answers, "rdkafka-made-up").error == E.UNKNOWN_MEMBER_ID
    assert _join(broker, answers, required.member_id) is None  # waits for the barrier
    # A client before JoinGroup v4 joins at once with an id the coordinator makes.
    assert _join(broker, answers, require_known_member_id=False) is None


def test_members_starting_together_share_the_first_generation_after_the_initial_delay(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    broker.create_topic("t", 4)
    answers = Answers()
    a = _new_member(broker, answers)
    clock.advance(DELAY_MS - 1)
    b = _new_member(broker, answers)
    broker.groups.classic.tick(GROUP)
    assert answers.joins == []  # the second member extended the delay
    clock.advance(DELAY_MS)
    broker.groups.classic.tick(GROUP)
    assert sorted(j.member_id for j in answers.joins) == sorted([a, b])
    for answer in answers.joins:
        # The coordinator assigns: every client is a follower and sends no assignment.
        assert answer.error == E.NO_ERROR and answer.generation_id == 1
        assert answer.leader == COORDINATOR_LEADER and answer.members == ()
        assert (answer.protocol_type, answer.protocol) == ("consumer", "range")
    owned = {m: decode_assignment(_sync(broker, answers, m, 1).assignment) for m in (a, b)}
    first, second = sorted([a, b])
    assert owned == {first: (("t", 0), ("t", 1)), second: (("t", 2), ("t", 3))}


def test_a_new_member_makes_the_others_rejoin_and_older_generations_are_fenced(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    broker.create_topic("t", 3)
    a, b, generation = _two_members(broker, clock)
    classic = broker.groups.classic
    answers = Answers()
    c = _new_member(broker, answers)
    assert classic.heartbeat(GROUP, a, generation) == E.REBALANCE_IN_PROGRESS
    assert _join(broker, answers, a) is None
    assert answers.joins == []  # b has not rejoined yet
    # b's commit at the generation that is ending is still accepted, as Kafka accepts it.
    broker.groups.commit_offsets(
        ConsumerGroupMetadata(GROUP, generation, b), [OffsetToCommit("t", 0, 5)]
    )
    assert _join(broker, answers, b) is None
    assert {j.member_id for j in answers.joins} == {a, b, c}
    assert {j.generation_id for j in answers.joins} == {generation + 1}
    assert classic.heartbeat(GROUP, a, generation) == E.ILLEGAL_GENERATION
    assert _sync(broker, answers, a, generation).error == E.ILLEGAL_GENERATION
    with pytest.raises(eoslog.IllegalGenerationError):
        broker.groups.commit_offsets(
            ConsumerGroupMetadata(GROUP, generation, a), [OffsetToCommit("t", 0, 6)]
        )
    with pytest.raises(eoslog.IllegalGenerationError):  # TxnOffsetCommit too (KIP-447)
        broker.groups.commit_transactional_offsets(
            1000, 0, ConsumerGroupMetadata(GROUP, generation, a), [OffsetToCommit("t", 0, 6)]
        )
    partitions = [
        decode_assignment(_sync(broker, answers, m, generation + 1).assignment) for m in (a, b, c)
    ]
    assert sorted(p for owned in partitions for p in owned) == [("t", 0), ("t", 1), ("t", 2)]
    assert classic.heartbeat(GROUP, c, generation + 1) == E.NO_ERROR


def test_a_member_silent_past_its_session_timeout_is_removed_and_the_other_takes_over(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    broker.create_topic("t", 2)
    survivor, silent, generation = _two_members(broker, clock)
    classic = broker.groups.classic
    clock.advance(SESSION_MS // 2)
    assert classic.heartbeat(GROUP, survivor, generation) == E.NO_ERROR
    clock.advance(SESSION_MS // 2 + 1)  # silent has said nothing for one session and 1 ms
    assert classic.heartbeat(GROUP, survivor, generation) == E.REBALANCE_IN_PROGRESS
    assert classic.heartbeat(GROUP, silent, generation) == E.UNKNOWN_MEMBER_ID
    with pytest.raises(eoslog.UnknownMemberIdError):
        broker.groups.commit_offsets(
            ConsumerGroupMetadata(GROUP, generation, silent), [OffsetToCommit("t", 1, 1)]
        )
    answers = Answers()
    answer = _join(broker, answers, survivor)  # the only member: the barrier passes at once
    assert answer is None and answers.joins[0].generation_id == generation + 1
    synced = _sync(broker, answers, survivor, generation + 1)
    assert decode_assignment(synced.assignment) == (("t", 0), ("t", 1))


def test_a_waiting_join_outlives_its_session_and_a_member_late_to_rejoin_is_removed(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    broker.create_topic("t", 2)
    punctual, late, generation = _two_members(broker, clock)
    answers = Answers()
    broker.groups.leave_group(GROUP, "nobody")  # no effect
    third = _new_member(broker, answers, rebalance_timeout_ms=REBALANCE_MS)
    assert _join(broker, answers, punctual) is None
    clock.advance(REBALANCE_MS + 1)  # longer than every session: the joins still wait
    broker.groups.classic.tick(GROUP)
    assert {j.member_id for j in answers.joins} == {punctual, third}
    assert broker.groups.classic.heartbeat(GROUP, late, generation) == E.UNKNOWN_MEMBER_ID


def test_leave_group_answers_each_member_and_the_others_rebalance(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    broker.create_topic("t", 2)
    a, b, generation = _two_members(broker, clock)
    classic = broker.groups.classic
    assert classic.leave(GROUP, [(b, None), ("stranger", None)]) == [
        E.NO_ERROR,
        E.UNKNOWN_MEMBER_ID,
    ]
    assert classic.heartbeat(GROUP, a, generation) == E.REBALANCE_IN_PROGRESS
    assert classic.leave(GROUP, [(a, None)]) == [E.NO_ERROR]
    state, _, _, members = broker.groups.describe_group(GROUP)
    assert state.value == "Empty" and members == {}


def test_joins_that_cannot_be_served_are_refused_with_their_codes(
    open_broker: OpenBroker,
) -> None:
    broker = open_broker()
    answers = Answers()
    refused = [
        _join(broker, answers, session_timeout_ms=10),
        _join(broker, answers, group_id=""),
        _join(broker, answers, protocols=(("range", b"\x00"),)),
        _join(broker, answers, protocols=()),
    ]
    assert [r.error for r in refused] == [
        E.INVALID_SESSION_TIMEOUT,
        E.INVALID_GROUP_ID,
        E.INCONSISTENT_GROUP_PROTOCOL,
        E.INCONSISTENT_GROUP_PROTOCOL,
    ]
    assert broker.groups.group_ids() == []  # nothing was created
    _new_member(broker, answers)
    other_type = (("range", encode_subscription(["t"])),)
    assert (
        _join(broker, answers, protocol_type="connect", protocols=other_type).error
        == E.MEMBER_ID_REQUIRED
    )
    member = _join(broker, answers, protocol_type="connect", protocols=other_type).member_id
    answer = _join(broker, answers, member, protocol_type="connect", protocols=other_type)
    assert answer.error == E.INCONSISTENT_GROUP_PROTOCOL


def test_a_strategy_eoslog_lacks_runs_with_a_remote_leader_that_assigns(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    broker.create_topic("t", 2)
    answers = Answers()
    sticky = (("cooperative-sticky", encode_subscription(["t"])),)
    first = _new_member(broker, answers, protocols=sticky)
    second = _new_member(broker, answers, protocols=sticky)
    clock.advance(DELAY_MS)
    broker.groups.classic.tick(GROUP)
    leader = answers.joins[0].leader
    assert leader == first and {j.leader for j in answers.joins} == {first}
    by_member = {j.member_id: j for j in answers.joins}
    assert [m for m, _, _ in by_member[first].members] == [first, second]
    assert by_member[second].members == ()
    # The follower's SyncGroup waits for the leader's; a commit meanwhile must wait too.
    assert _sync(broker, answers, second, 1) is None
    with pytest.raises(RebalanceInProgressError):
        broker.groups.commit_offsets(
            ConsumerGroupMetadata(GROUP, 1, second), [OffsetToCommit("t", 1, 1)]
        )
    plan = {first: encode_assignment([("t", 0)]), second: encode_assignment([("t", 1)])}
    synced = broker.groups.classic.sync(GROUP, first, 1, plan, answers.syncs.append)
    assert decode_assignment(synced.assignment) == (("t", 0),)
    assert [decode_assignment(s.assignment) for s in answers.syncs] == [(("t", 1),)]
    assert broker.groups.describe_group(GROUP)[3] == {first: (("t", 0),), second: (("t", 1),)}
    # An in-process consumer speaks only eoslog's strategies: it cannot join this group.
    consumer = broker.consumer({"group.id": GROUP})
    consumer.subscribe(["t"])
    with pytest.raises(InconsistentGroupProtocolError):
        consumer.consume(1, timeout=0)
    consumer.close()


def test_an_in_process_consumer_and_a_remote_member_split_a_topic(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    broker.create_topic("t", 4)
    answers = Answers()
    remote = _new_member(broker, answers)
    consumer = broker.consumer({"group.id": GROUP, "partition.assignment.strategy": "range"})
    consumer.subscribe(["t"])
    consumer.consume(1, timeout=0)  # joins; the barrier still waits for the initial delay
    clock.advance(DELAY_MS)
    consumer.consume(1, timeout=0)
    consumer.consume(1, timeout=0)
    assert answers.joins and answers.joins[0].generation_id == 1
    mine = {(tp.topic, tp.partition) for tp in consumer.assignment()}
    theirs = set(decode_assignment(_sync(broker, answers, remote, 1).assignment))
    assert len(mine) == len(theirs) == 2 and mine | theirs == {("t", p) for p in range(4)}
    summary = broker.groups.classic.summary(GROUP)
    assert summary is not None and summary.state == "Stable" and summary.protocol == "range"
    assert {m.client_host for m in summary.members} == {"/127.0.0.1", "in-process"}
    consumer.close()  # leaves: the remote member is told to rejoin, and gets everything
    assert broker.groups.classic.heartbeat(GROUP, remote, 1) == E.REBALANCE_IN_PROGRESS
    assert _join(broker, answers, remote) is None
    assert len(decode_assignment(_sync(broker, answers, remote, 2).assignment)) == 4


def test_a_static_member_restarting_takes_its_place_back_and_fences_its_old_self(
    open_broker: OpenBroker, clock: logtools.Clock
) -> None:
    broker = open_broker()
    broker.create_topic("t", 2)
    classic = broker.groups.classic
    answers = Answers()
    assert _join(broker, answers, instance_id="worker-1") is None  # no MEMBER_ID_REQUIRED
    other = _new_member(broker, answers)
    clock.advance(DELAY_MS)
    classic.tick(GROUP)
    old = next(j.member_id for j in answers.joins if j.member_id != other)
    owned = decode_assignment(_sync(broker, answers, old, 1).assignment)
    # The process restarts: same instance, no member id. The coordinator assigns and nothing
    # changed, so the group does not rebalance and the new id gets the old one's partitions.
    again = _join(broker, answers, instance_id="worker-1")
    assert again.error == E.NO_ERROR and again.generation_id == 1 and again.member_id != old
    assert decode_assignment(_sync(broker, answers, again.member_id, 1).assignment) == owned
    assert classic.heartbeat(GROUP, other, 1) == E.NO_ERROR
    assert classic.heartbeat(GROUP, old, 1, "worker-1") == E.FENCED_INSTANCE_ID
    with pytest.raises(FencedInstanceIdError):
        broker.groups.commit_offsets(
            ConsumerGroupMetadata(GROUP, 1, old, "worker-1"), [OffsetToCommit("t", 0, 1)]
        )
    assert classic.leave(GROUP, [(old, "worker-1")]) == [E.FENCED_INSTANCE_ID]
    assert classic.leave(GROUP, [("", "worker-1")]) == [E.NO_ERROR]
    assert classic.heartbeat(GROUP, other, 1) == E.REBALANCE_IN_PROGRESS
