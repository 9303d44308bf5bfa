"""A consumer's side of its group (docs/api.md "Consumer"; Kafka's ConsumerCoordinator, run in
this process): the subscription (topic names, or patterns starting with "^"), joining and
rejoining the group, the rebalance callbacks, the member id and generation that
consumer_group_metadata() reports, and auto-commit.

Every poll/consume of the consumer calls step() first. A step heartbeats (which also tells the
coordinator the member is alive, for max.poll.interval.ms), and when the group is
rebalancing, or the member was removed, it gives up its partitions: auto-commit of the
positions (if enabled and still a member), then on_revoke (on_lost when removed, or on_revoke
if no on_lost was given), then unassign. It then joins; once every member has rejoined it
gets its partitions, calls on_assign(consumer, partitions) and, unless the callback assigned
itself, assigns them, each starting at the group's committed offset (or auto.offset.reset).
A rebalance is eager: a member gives up every partition and gets its new set, as Kafka's
range and roundrobin strategies do. poll() returns nothing while the rebalance is in
progress.

Thread safety: like the Consumer, used from the consumer's thread only.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from eoslog.client.message import TopicPartition
from eoslog.coordinator.group_coordinator import (
    NO_GENERATION,
    NO_MEMBER,
    ConsumerGroupMetadata,
    GroupCoordinator,
    OffsetToCommit,
)
from eoslog.errors import CommitFailedError, UnknownMemberIdError

if TYPE_CHECKING:
    from eoslog.client.consumer import Consumer

RebalanceCallback = Callable[[Any, list[TopicPartition]], object]


class GroupMember:
    """See the module docstring."""

    def __init__(
        self,
        consumer: Consumer,
        coordinator: GroupCoordinator,
        topic_names: Callable[[], Sequence[str]],
        clock_ms: Callable[[], int],
    ) -> None:
        config = consumer.config
        assert config.group_id is not None
        self.group_id = config.group_id
        self._consumer = consumer
        self._coordinator = coordinator
        self._topic_names = topic_names
        self._clock_ms = clock_ms
        self._strategies = config.assignment_strategies
        self._rebalance_timeout_ms = config.max_poll_interval_ms
        self._auto_commit = config.enable_auto_commit
        self._auto_commit_interval_ms = config.auto_commit_interval_ms
        self._last_auto_commit_ms = clock_ms()
        self._last_committed: dict[tuple[str, int], int] = {}
        self.member_id = NO_MEMBER
        self.generation_id = NO_GENERATION
        self._subscription: list[str] | None = None
        self._topics: frozenset[str] = frozenset()
        self._owned: list[TopicPartition] = []
        self._joining = False
        self._on_assign: RebalanceCallback | None = None
        self._on_revoke: RebalanceCallback | None = None
        self._on_lost: RebalanceCallback | None = None

    # --- subscription ----------------------------------------------------------------------

    @property
    def subscribed(self) -> bool:
        return self._subscription is not None

    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: RebalanceCallback | None,
        on_revoke: RebalanceCallback | None,
        on_lost: RebalanceCallback | None,
    ) -> None:
        """Replace the subscription; the group rebalances at the next poll."""
        if isinstance(topics, str) or not all(isinstance(t, str) and t for t in topics):
            raise TypeError("subscribe() takes a list of topic names or ^patterns")
        for topic in topics:
            if topic.startswith("^"):
                re.compile(topic)  # re.error for a bad pattern, before anything changes
        self._subscription = list(topics)
        self._on_assign, self._on_revoke, self._on_lost = on_assign, on_revoke, on_lost
        self._joining = True

    def unsubscribe(self) -> None:
        """Give up the partitions (on_revoke) and leave the group."""
        if self._subscription is None:
            return
        self._revoke(lost=False)
        self.leave()
        self._subscription = None

    def leave(self) -> None:
        if self.member_id:
            self._coordinator.leave_group(self.group_id, self.member_id)
        self.member_id, self.generation_id = NO_MEMBER, NO_GENERATION

    def close(self) -> None:
        """The consumer closes: auto-commit what it consumed, give up the partitions, and
        leave the group, so the other members rebalance at once."""
        if self._subscription is not None:
            self._revoke(lost=False)
            self.leave()
            self._subscription = None
        elif self._auto_commit:
            self._commit_positions()

    def metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(self.group_id, self.generation_id, self.member_id)

    # --- the step every poll makes -----------------------------------------------------------

    def step(self) -> bool:
        """Heartbeat, rebalance if needed, auto-commit when due. True when the member has its
        partitions (False: a rebalance is in progress; poll returns nothing yet)."""
        if self._subscription is not None and not self._step_membership():
            return False
        if self._auto_commit and (
            self._clock_ms() - self._last_auto_commit_ms >= self._auto_commit_interval_ms
        ):
            self._commit_positions()
        return True

    def _step_membership(self) -> bool:
        topics = self._resolve_topics()
        if topics != self._topics:
            self._topics = topics
            self._joining = True
        if not self._joining:
            try:
                self._joining = self._coordinator.heartbeat(
                    self.group_id, self.member_id, self.generation_id
                )
            except UnknownMemberIdError:
                self._revoke(lost=True)
                self.member_id, self.generation_id = NO_MEMBER, NO_GENERATION
                self._joining = True
            if not self._joining:
                return True
            self._revoke(lost=False)
        return self._join()

    def _join(self) -> bool:
        try:
            result = self._coordinator.join_group(
                self.group_id,
                self.member_id,
                topics=self._topics,
                strategies=self._strategies,
                rebalance_timeout_ms=self._rebalance_timeout_ms,
            )
        except UnknownMemberIdError:
            # Removed meanwhile: whatever it still held is lost; join as a new member.
            self._revoke(lost=True)
            self.member_id = NO_MEMBER
            return False
        self.member_id = result.member_id
        if result.generation_id == NO_GENERATION:
            return False
        self.generation_id = result.generation_id
        self._joining = False
        partitions = [TopicPartition(topic, partition) for topic, partition in result.assignment]
        self._owned = partitions
        before = self._consumer.assignment_generation
        if self._on_assign is not None:
            self._on_assign(self._consumer, list(partitions))
        if self._consumer.assignment_generation == before:
            # The callback did not assign: start each partition at its committed offset.
            self._consumer.assign(partitions)
        return True

    def _revoke(self, *, lost: bool) -> None:
        """Give up the owned partitions: auto-commit first (not when lost: the commit would
        be refused), then the callback, then unassign."""
        owned, self._owned = self._owned, []
        if not owned:
            return
        if self._auto_commit and not lost:
            self._commit_positions()
        callback = self._on_lost if lost and self._on_lost is not None else self._on_revoke
        if callback is not None:
            callback(self._consumer, list(owned))
        self._consumer.unassign()

    def _resolve_topics(self) -> frozenset[str]:
        assert self._subscription is not None
        names = [t for t in self._subscription if not t.startswith("^")]
        patterns = [re.compile(t) for t in self._subscription if t.startswith("^")]
        if patterns:
            names += [n for n in self._topic_names() if any(p.search(n) for p in patterns)]
        return frozenset(names)

    # --- auto-commit -----------------------------------------------------------------------

    def _commit_positions(self) -> None:
        """Commit the positions that moved since the last commit; a refused commit (a member
        the group fenced) is dropped, as librdkafka's auto-commit reports and goes on."""
        self._last_auto_commit_ms = self._clock_ms()
        positions = self._consumer.position(self._consumer.assignment())
        moved = [
            OffsetToCommit(tp.topic, tp.partition, tp.offset)
            for tp in positions
            if tp.offset >= 0 and self._last_committed.get((tp.topic, tp.partition)) != tp.offset
        ]
        if not moved:
            return
        # A refused commit: the next step rejoins; the next owner starts from the last commit.
        with contextlib.suppress(CommitFailedError):
            self.commit(moved)

    def commit(self, offsets: list[OffsetToCommit]) -> None:
        self._coordinator.commit_offsets(self.metadata(), offsets)
        for item in offsets:
            self._last_committed[(item.topic, item.partition)] = item.offset
