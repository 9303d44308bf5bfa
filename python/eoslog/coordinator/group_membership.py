"""One consumer group's membership (Kafka's classic group protocol, run inside one process):
its members, their subscriptions, the generation, and the state machine of a rebalance.

Kafka's classic protocol has each member JoinGroup, waits for every member to join, then
lets the leader compute the assignment and hand it out with SyncGroup. In one process the
coordinator computes the assignment itself (eoslog.coordinator.assignors), so there is no
CompletingRebalance state: once every member has rejoined, the generation goes up by one and
every member's assignment is ready. The states and their legal transitions are a table
(docs/style.md rule 10):

| from \\ to          | Empty | PreparingRebalance | Stable |
|--------------------|-------|--------------------|--------|
| Empty              |       | a member joins     |        |
| PreparingRebalance | the last member left | | every member rejoined |
| Stable             |       | a member joins, leaves, changes its subscription or is removed | |

A member rejoining after a subscribed topic's partition count changed starts a rebalance too.

A member that does not poll for max.poll.interval.ms (its rebalance timeout) is removed, and
so is one that does not rejoin within it once a rebalance began (expired_members).

Thread safety: none of its own; the group coordinator calls it under its lock.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from eoslog.coordinator.assignors import ASSIGNORS, Partition


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    STABLE = "Stable"


G = GroupState
# target -> the states it may be entered from.
ALLOWED_FROM: Final[Mapping[GroupState, frozenset[GroupState]]] = {
    G.EMPTY: frozenset({G.PREPARING_REBALANCE}),
    G.PREPARING_REBALANCE: frozenset({G.EMPTY, G.STABLE}),
    G.STABLE: frozenset({G.PREPARING_REBALANCE}),
}


@dataclass(slots=True)
class Member:
    member_id: str
    topics: frozenset[str]
    strategies: tuple[str, ...]
    rebalance_timeout_ms: int  # the member's max.poll.interval.ms
    last_poll_ms: int
    joined: bool = True  # has (re)joined the rebalance in progress
    assignment: tuple[Partition, ...] = field(default_factory=tuple)


class Group:
    """See the module docstring. `generation_id` counts completed rebalances (0 before the
    first); `protocol` is the assignment strategy of the current generation."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.state = G.EMPTY
        self.generation_id = 0
        self.protocol: str | None = None
        self.members: dict[str, Member] = {}
        self.rebalance_started_ms = 0
        # The partition counts the current generation's assignment was computed from: a
        # member rejoining after a count changed (partitions added) starts a rebalance, as
        # Kafka's leader does when its metadata refresh sees the change.
        self.assigned_counts: dict[str, int] = {}

    def transition(self, target: GroupState) -> None:
        """Move to `target`; an illegal transition is a coordinator bug and fails loudly."""
        if self.state not in ALLOWED_FROM[target]:
            raise AssertionError(f"group {self.group_id}: {self.state.value} -> {target.value}")
        self.state = target

    def common_strategies(self, strategies: tuple[str, ...]) -> set[str]:
        """The strategies every member and a joiner offering `strategies` share."""
        common = set(strategies)
        for member in self.members.values():
            common &= set(member.strategies)
        return common

    def join(self, member: Member, now_ms: int, counts: Mapping[str, int]) -> None:
        """Add a member, or record that an existing one rejoined with `member`'s
        subscription. A new member, a changed subscription or a partition count of a
        subscribed topic other than the assignment's (`counts`: now) starts a rebalance."""
        existing = self.members.get(member.member_id)
        changed = (
            existing is None
            or existing.topics != member.topics
            or any(counts.get(t, 0) != self.assigned_counts.get(t, 0) for t in member.topics)
        )
        if existing is not None:
            member.assignment = existing.assignment
        member.joined = True
        self.members[member.member_id] = member
        if changed and self.state is not G.PREPARING_REBALANCE:
            self.prepare_rebalance(now_ms, except_member=member.member_id)

    def remove(self, member_id: str, now_ms: int) -> None:
        """Drop a member (left, or expired); the others rebalance."""
        if self.members.pop(member_id, None) is None:
            return
        if self.state is G.STABLE:
            self.prepare_rebalance(now_ms)
        elif self.state is G.EMPTY:
            raise AssertionError(f"group {self.group_id} is Empty yet had member {member_id}")

    def prepare_rebalance(self, now_ms: int, except_member: str | None = None) -> None:
        if self.state is not G.PREPARING_REBALANCE:
            self.transition(G.PREPARING_REBALANCE)
            self.rebalance_started_ms = now_ms
        for member in self.members.values():
            member.joined = member.member_id == except_member

    def needs_rejoin(self, member_id: str, generation_id: int) -> bool:
        """Whether the member must rejoin: a rebalance it has not joined, or a generation
        newer than the one it knows."""
        member = self.members[member_id]
        if self.state is G.PREPARING_REBALANCE:
            return not member.joined
        return generation_id != self.generation_id

    def expired_members(self, now_ms: int) -> list[str]:
        """Members silent past their max.poll.interval.ms, or not rejoined within it since
        the rebalance began."""
        expired = []
        for member in self.members.values():
            silent = now_ms - member.last_poll_ms > member.rebalance_timeout_ms
            late = (
                self.state is G.PREPARING_REBALANCE
                and not member.joined
                and now_ms - self.rebalance_started_ms > member.rebalance_timeout_ms
            )
            if silent or late:
                expired.append(member.member_id)
        return expired

    def maybe_complete_rebalance(self, partition_counts: Mapping[str, int]) -> bool:
        """Finish the rebalance in progress once every member has rejoined: the next
        generation, its strategy and every member's assignment (Empty when no member is
        left). True if it finished."""
        if self.state is not G.PREPARING_REBALANCE:
            return False
        if any(not member.joined for member in self.members.values()):
            return False
        self.generation_id += 1
        if not self.members:
            self.protocol = None
            self.transition(G.EMPTY)
            return True
        self.protocol = self._choose_protocol()
        subscriptions = {m.member_id: m.topics for m in self.members.values()}
        subscribed = frozenset().union(*subscriptions.values())
        self.assigned_counts = {topic: partition_counts.get(topic, 0) for topic in subscribed}
        assignment = ASSIGNORS[self.protocol](subscriptions, partition_counts)
        for member_id, partitions in assignment.items():
            self.members[member_id].assignment = tuple(sorted(partitions))
        self.transition(G.STABLE)
        return True

    def _choose_protocol(self) -> str:
        """Kafka's vote: each member votes for its most preferred strategy among those every
        member supports; the most votes win (ties to the name first in order)."""
        candidates = set(ASSIGNORS)
        for member in self.members.values():
            candidates &= set(member.strategies)
        assert candidates, f"group {self.group_id}: members share no strategy"
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next(s for s in member.strategies if s in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return min(votes, key=lambda name: (-votes[name], name))
