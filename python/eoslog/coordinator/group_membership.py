"""One consumer group's membership (Kafka's classic group protocol): its members, their
subscriptions, the generation, and the state machine of a rebalance.

Kafka's classic protocol has each member JoinGroup, waits until every known member has
rejoined (the join barrier), then names a leader that computes the assignment and hands it
out with SyncGroup. A group here mixes two kinds of member:

* in-process members (eoslog's Consumer, client/group_member.py), which poll: each poll
  heartbeats, and a join answers "not yet" until the barrier is passed;
* remote members (Kafka clients of `eoslog serve`, coordinator/classic_groups.py), whose
  JoinGroup and SyncGroup wait for the barrier: each leaves a callback (`Remote.on_join`,
  `Remote.on_sync`) that the coordinator calls, under its lock, when the answer is known.

Who computes the assignment (docs/coordinator.md §13): when the strategy the members vote
for is one eoslog implements (eoslog.coordinator.assignors: range, roundrobin) and every
member speaks the "consumer" protocol, the coordinator computes it from the subscriptions as
soon as the barrier is passed; the group goes straight to Stable and the leader it names is
COORDINATOR_LEADER, an id no member has, so every Kafka client acts as a follower (librdkafka,
kafka-python and aiokafka each lead only when the JoinGroup answer's leader equals their own
member id) and takes its assignment from SyncGroup. Otherwise (a strategy only the clients
know, such as cooperative-sticky, or another protocol type) the classic protocol runs: a
remote member leads, the group waits in CompletingRebalance for the leader's SyncGroup, and
an in-process member cannot join (InconsistentGroupProtocolError: its strategies are
eoslog's). The states and their legal transitions are a table (docs/style.md rule 10):

| from                | to                  | when                                                 |
|---------------------|---------------------|------------------------------------------------------|
| Empty               | PreparingRebalance  | a member joins                                       |
| PreparingRebalance  | Empty               | the last member left                                 |
| PreparingRebalance  | Stable              | barrier passed, the coordinator assigns              |
| PreparingRebalance  | CompletingRebalance | barrier passed, a remote leader assigns              |
| CompletingRebalance | Stable              | the leader's SyncGroup                               |
| CompletingRebalance | PreparingRebalance  | a member joins, leaves, changes or expires           |
| Stable              | PreparingRebalance  | a member joins, leaves, changes or expires           |

A member rejoining after a subscribed topic's partition count changed starts a rebalance too
(when the coordinator assigns), and so does the leader rejoining (when a client leads).

Expiry: an in-process member that does not poll for max.poll.interval.ms (its rebalance
timeout) is removed; a remote member is removed once it sends nothing for its
session.timeout.ms, except while its JoinGroup or SyncGroup waits here. Either kind is
removed when it does not rejoin within its rebalance timeout once a rebalance began. A group
that a remote member starts from Empty waits group.initial.rebalance.delay.ms (extended by
each new member, up to the rebalance timeout) before the first barrier passes, so members
starting together land in one generation.

Thread safety: none of its own; the group coordinator calls it under its lock.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from eoslog.coordinator.assignors import ASSIGNORS, Partition
from eoslog.coordinator.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from eoslog.error_codes import ErrorCodes
from eoslog.errors import InconsistentGroupProtocolError

# The leader a JoinGroup answer names when the coordinator computes the assignment: no member
# has this id (the coordinator makes every member id, as "<client id>-<uuid>").
COORDINATOR_LEADER: Final = "eoslog-coordinator"
NO_GENERATION: Final = -1


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


G = GroupState
# target -> the states it may be entered from.
ALLOWED_FROM: Final[Mapping[GroupState, frozenset[GroupState]]] = {
    G.EMPTY: frozenset({G.PREPARING_REBALANCE}),
    G.PREPARING_REBALANCE: frozenset({G.EMPTY, G.STABLE, G.COMPLETING_REBALANCE}),
    G.COMPLETING_REBALANCE: frozenset({G.PREPARING_REBALANCE}),
    G.STABLE: frozenset({G.PREPARING_REBALANCE, G.COMPLETING_REBALANCE}),
}


@dataclass(frozen=True, slots=True)
class JoinAnswer:
    """A JoinGroup's answer (Kafka error code 0 or the error). `members` (member id, its
    group instance id, its metadata for the chosen protocol) goes to the leader only."""

    error: int
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncAnswer:
    """A SyncGroup's answer: the member's assignment bytes, or the error."""

    error: int
    protocol_type: str | None = None
    protocol: str | None = None
    assignment: bytes = b""


@dataclass(slots=True)
class Remote:
    """What the coordinator keeps of a member in another process (JoinGroup over the wire).
    `protocols` are the (strategy, metadata) pairs it offered, in its order of preference;
    `subscriptions` the topics each consumer-protocol metadata names; `assignment` the bytes
    SyncGroup hands it in the current generation; `instance_id` its group.instance.id (a
    static member, KIP-345)."""

    client_id: str
    client_host: str
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    subscriptions: Mapping[str, frozenset[str]] = field(default_factory=dict)
    on_join: Callable[[JoinAnswer], None] | None = None
    on_sync: Callable[[SyncAnswer], None] | None = None
    assignment: bytes = b""
    instance_id: str | None = None

    @property
    def waiting(self) -> bool:
        return self.on_join is not None or self.on_sync is not None


@dataclass(slots=True)
class Member:
    member_id: str
    topics: frozenset[str]
    strategies: tuple[str, ...]
    rebalance_timeout_ms: int  # max.poll.interval.ms
    last_seen_ms: int  # the last poll (in-process) or request (remote)
    joined: bool = True  # has (re)joined the rebalance in progress
    assignment: tuple[Partition, ...] = field(default_factory=tuple)
    remote: Remote | None = None  # None for an in-process member

    @property
    def instance_id(self) -> str | None:
        return None if self.remote is None else self.remote.instance_id

    @property
    def protocol_type(self) -> str:
        return CONSUMER_PROTOCOL_TYPE if self.remote is None else self.remote.protocol_type

    def metadata(self, protocol: str) -> bytes:
        """The member's metadata for `protocol` (an in-process member's, encoded)."""
        if self.remote is None:
            return encode_subscription(self.topics)
        return dict(self.remote.protocols).get(protocol, b"")

    def topics_for(self, protocol: str) -> frozenset[str]:
        if self.remote is None:
            return self.topics
        return self.remote.subscriptions.get(protocol, self.topics)


E = ErrorCodes


class Group:
    """See the module docstring. `generation_id` counts completed rebalances (0 before the
    first); `protocol` is the assignment strategy of the current generation, `leader_id` its
    leader (COORDINATOR_LEADER when the coordinator assigned, None before the first)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.state = G.EMPTY
        self.generation_id = 0
        self.protocol: str | None = None
        self.protocol_type: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        # Member ids handed out with MEMBER_ID_REQUIRED (JoinGroup v4+), each until its
        # deadline (ms): a join naming one is a new member, not an unknown one.
        self.pending_members: dict[str, int] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> its member id now
        self.rebalance_started_ms = 0
        self.complete_not_before_ms = 0  # group.initial.rebalance.delay.ms, see the module doc
        # The partition counts the current generation's assignment was computed from: a
        # member rejoining after a count changed (partitions added) starts a rebalance, as
        # Kafka's leader does when its metadata refresh sees the change.
        self.assigned_counts: dict[str, int] = {}
        # When the last member left (Kafka's currentStateTimestamp for Empty), the base of
        # its offsets' retention (coordinator/offset_expiry.py); None while it has members.
        self.empty_since_ms: int | None = None

    @property
    def coordinator_assigns(self) -> bool:
        return self.leader_id == COORDINATOR_LEADER

    def transition(self, target: GroupState) -> None:
        """Move to `target`; an illegal transition is a coordinator bug and fails loudly."""
        if self.state not in ALLOWED_FROM[target]:
            raise AssertionError(f"group {self.group_id}: {self.state.value} -> {target.value}")
        self.state = target

    def accepts(self, joiner: Member) -> bool:
        """Whether `joiner` may join: a strategy in common with the other members and the
        same protocol type (a group alone with itself always accepts)."""
        others = [m for m in self.members.values() if m.member_id != joiner.member_id]
        if not others:
            return True
        if any(m.protocol_type != joiner.protocol_type for m in others):
            return False
        common = set(joiner.strategies)
        for member in others:
            common &= set(member.strategies)
        return bool(common)

    def join(
        self, member: Member, now_ms: int, counts: Mapping[str, int], delay_ms: int = 0
    ) -> None:
        """Add a member, or record that an existing one rejoined with `member`'s
        subscription. A new member, a changed subscription, the leader's rejoin or a partition
        count of a subscribed topic other than the assignment's (`counts`: now) starts a
        rebalance. delay_ms: group.initial.rebalance.delay.ms, for a remote joiner."""
        existing = self.members.get(member.member_id)
        changed = existing is None or self._rejoin_changes(existing, member, counts)
        if existing is not None:
            member.assignment = existing.assignment
            if existing.remote is not None and member.remote is not None:
                member.remote.assignment = existing.remote.assignment
                self._answer_join(existing, E.REBALANCE_IN_PROGRESS)  # a duplicate join
        member.joined = True
        self.pending_members.pop(member.member_id, None)
        self.members[member.member_id] = member
        if self.state is G.EMPTY and delay_ms > 0:
            self.complete_not_before_ms = now_ms + delay_ms
        elif existing is None and delay_ms > 0 and self.complete_not_before_ms > now_ms:
            limit = self.rebalance_started_ms + member.rebalance_timeout_ms
            self.complete_not_before_ms = min(now_ms + delay_ms, limit)
        if changed and self.state is not G.PREPARING_REBALANCE:
            self.prepare_rebalance(now_ms, except_member=member.member_id)

    def _rejoin_changes(self, existing: Member, member: Member, counts: Mapping[str, int]) -> bool:
        if existing.topics != member.topics or existing.strategies != member.strategies:
            return True
        if (
            existing.remote is not None
            and member.remote is not None
            and existing.remote.protocols != member.remote.protocols
        ):
            return True
        if not self.coordinator_assigns:
            return self.leader_id == member.member_id and self.state is G.STABLE
        return any(counts.get(t, 0) != self.assigned_counts.get(t, 0) for t in member.topics)

    def remove(self, member_id: str, now_ms: int) -> None:
        """Drop a member (left, or expired); the others rebalance. A join or sync of its
        still waiting is answered UNKNOWN_MEMBER_ID."""
        member = self.members.pop(member_id, None)
        if member is None:
            return
        instance_id = None if member.remote is None else member.remote.instance_id
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]
        self._answer_join(member, E.UNKNOWN_MEMBER_ID)
        self._answer_sync(member, SyncAnswer(E.UNKNOWN_MEMBER_ID))
        if self.state in (G.STABLE, G.COMPLETING_REBALANCE):
            self.prepare_rebalance(now_ms)
        elif self.state is G.EMPTY:
            raise AssertionError(f"group {self.group_id} is Empty yet had member {member_id}")

    def prepare_rebalance(self, now_ms: int, except_member: str | None = None) -> None:
        """Start a rebalance: every member (but `except_member`, who just joined) must rejoin;
        a SyncGroup still waiting for the leader is answered REBALANCE_IN_PROGRESS."""
        if self.state is not G.PREPARING_REBALANCE:
            self.transition(G.PREPARING_REBALANCE)
            self.rebalance_started_ms = now_ms
        for member in self.members.values():
            member.joined = member.member_id == except_member
            self._answer_sync(member, SyncAnswer(E.REBALANCE_IN_PROGRESS))

    def fenced(self, instance_id: str | None, member_id: str) -> bool:
        """Whether a request naming `instance_id` comes from a member id that instance no
        longer has (another process took the static membership over: FENCED_INSTANCE_ID)."""
        if instance_id is None or instance_id not in self.static_members:
            return False
        return self.static_members[instance_id] != member_id

    def replace_static(self, old_id: str, new_id: str) -> None:
        """A static member joined again under a new member id (KIP-345): the member is moved
        to it, keeping its place in the generation; whatever the old id still waited for is
        answered FENCED_INSTANCE_ID."""
        member = self.members.pop(old_id)
        assert member.remote is not None and member.remote.instance_id is not None
        self._answer_join(member, E.FENCED_INSTANCE_ID)
        self._answer_sync(member, SyncAnswer(E.FENCED_INSTANCE_ID))
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[member.remote.instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id

    def counts_changed(self, counts: Mapping[str, int]) -> bool:
        """Whether a topic of the coordinator's assignment has another partition count now
        (the coordinator then rebalances, as Kafka's leader does on a metadata change)."""
        return self.coordinator_assigns and any(
            counts.get(topic, 0) != count for topic, count in self.assigned_counts.items()
        )

    def needs_rejoin(self, member_id: str, generation_id: int) -> bool:
        """Whether the member must rejoin: a rebalance it has not joined, or a generation
        newer than the one it knows."""
        member = self.members[member_id]
        if self.state is G.PREPARING_REBALANCE:
            return not member.joined
        return generation_id != self.generation_id

    def expired_members(self, now_ms: int) -> list[str]:
        """Members silent past their timeout (see the module doc), or not rejoined within
        their rebalance timeout since the rebalance began."""
        expired = []
        for member in self.members.values():
            if member.remote is None:
                silent = now_ms - member.last_seen_ms > member.rebalance_timeout_ms
            else:
                silent = (
                    not member.remote.waiting
                    and now_ms - member.last_seen_ms > member.remote.session_timeout_ms
                )
            late = (
                self.state is G.PREPARING_REBALANCE
                and not member.joined
                and now_ms - self.rebalance_started_ms > member.rebalance_timeout_ms
            )
            if silent or late:
                expired.append(member.member_id)
        return expired

    def expire(self, now_ms: int, partition_counts: Mapping[str, int]) -> int:
        """Remove the expired members and the pending member ids past their deadline, then
        pass the barrier if it now can. Returns how many members were removed."""
        self.pending_members = {m: d for m, d in self.pending_members.items() if d > now_ms}
        expired = self.expired_members(now_ms)
        for member_id in expired:
            self.remove(member_id, now_ms)
        self.maybe_complete_rebalance(partition_counts, now_ms)
        return len(expired)

    def maybe_complete_rebalance(self, partition_counts: Mapping[str, int], now_ms: int) -> bool:
        """Pass the join barrier once every member has rejoined (and the initial delay is
        over): the next generation, its strategy and leader, and, when the coordinator
        assigns, every member's assignment (Empty when no member is left). Waiting joins are
        answered. True if it passed."""
        if self.state is not G.PREPARING_REBALANCE:
            return False
        if any(not member.joined for member in self.members.values()):
            return False
        if self.members and now_ms < self.complete_not_before_ms:
            return False
        self.generation_id += 1
        if not self.members:
            self.protocol = self.protocol_type = self.leader_id = None
            self.transition(G.EMPTY)
            self.empty_since_ms = now_ms
            return True
        self.protocol = self._choose_protocol()
        self.protocol_type = next(iter(self.members.values())).protocol_type
        if self.protocol in ASSIGNORS and self.protocol_type == CONSUMER_PROTOCOL_TYPE:
            self._assign(partition_counts)
            self.transition(G.STABLE)
        else:
            self._elect_leader()
            self.transition(G.COMPLETING_REBALANCE)
        for member in self.members.values():
            if member.remote is not None and member.remote.on_join is not None:
                member.last_seen_ms = now_ms  # its session starts again from its answer
                self._answer_join(member, E.NO_ERROR)
        return True

    def _assign(self, partition_counts: Mapping[str, int]) -> None:
        assert self.protocol is not None
        self.leader_id = COORDINATOR_LEADER
        subscriptions = {m.member_id: m.topics_for(self.protocol) for m in self.members.values()}
        subscribed = frozenset().union(*subscriptions.values())
        self.assigned_counts = {topic: partition_counts.get(topic, 0) for topic in subscribed}
        assignment = ASSIGNORS[self.protocol](subscriptions, partition_counts)
        for member_id, partitions in assignment.items():
            member = self.members[member_id]
            member.assignment = tuple(sorted(partitions))
            if member.remote is not None:
                member.remote.assignment = encode_assignment(member.assignment)

    def _elect_leader(self) -> None:
        """A remote leader: the current one if it is still a member, else the first member
        (every member is remote here: an in-process one only joins a group it can assign)."""
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members))
        for member in self.members.values():
            assert member.remote is not None, f"group {self.group_id}: in-process {member}"
            member.remote.assignment = b""
            member.assignment = ()

    def join_answer(self, member_id: str) -> JoinAnswer:
        """The current generation's JoinGroup answer for a member (members for the leader)."""
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if member_id == self.leader_id and self.protocol is not None:
            members = tuple(
                (m.member_id, m.instance_id, m.metadata(self.protocol))
                for m in self.members.values()
            )
        return JoinAnswer(
            E.NO_ERROR,
            member_id,
            self.generation_id,
            self.protocol_type,
            self.protocol,
            self.leader_id or "",
            members,
        )

    def sync_answer(self, member_id: str) -> SyncAnswer:
        remote = self.members[member_id].remote
        assignment = b"" if remote is None else remote.assignment
        return SyncAnswer(E.NO_ERROR, self.protocol_type, self.protocol, assignment)

    def _answer_join(self, member: Member, error: int) -> None:
        if member.remote is None or member.remote.on_join is None:
            return
        on_join, member.remote.on_join = member.remote.on_join, None
        if error == E.NO_ERROR:
            on_join(self.join_answer(member.member_id))
        else:
            on_join(JoinAnswer(error, member.member_id))

    def _answer_sync(self, member: Member, answer: SyncAnswer) -> None:
        if member.remote is None or member.remote.on_sync is None:
            return
        on_sync, member.remote.on_sync = member.remote.on_sync, None
        on_sync(answer)

    def complete_sync(self, assignments: Mapping[str, bytes]) -> None:
        """The leader's SyncGroup in CompletingRebalance: every member's assignment bytes (a
        member the leader left out gets none), the group Stable, waiting syncs answered. The
        partitions of a consumer-protocol assignment are kept too, for describe_group."""
        self.transition(G.STABLE)
        for member in self.members.values():
            assert member.remote is not None
            member.remote.assignment = assignments.get(member.member_id, b"")
            if self.protocol_type == CONSUMER_PROTOCOL_TYPE:
                # The leader's bytes are the clients' business: unreadable ones show none.
                with contextlib.suppress(InconsistentGroupProtocolError):
                    member.assignment = decode_assignment(member.remote.assignment)
            self._answer_sync(member, self.sync_answer(member.member_id))

    def _choose_protocol(self) -> str:
        """Kafka's vote: each member votes for its most preferred strategy among those every
        member supports; the most votes win (ties to the name first in order)."""
        candidates: set[str] | None = None
        for member in self.members.values():
            offered = set(member.strategies)
            candidates = offered if candidates is None else candidates & offered
        assert candidates, f"group {self.group_id}: members share no strategy"
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next(s for s in member.strategies if s in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return min(votes, key=lambda name: (-votes[name], name))
