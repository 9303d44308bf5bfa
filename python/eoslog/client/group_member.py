"""A consumer's side of its group (docs/api.md "Consumer"; Kafka's ConsumerCoordinator, run in
this process): the subscription (topic names, or patterns starting with "^"), joining and
rejoining the group, the rebalance callbacks, the member id and generation that
consumer_group_metadata() reports, and auto-commit.

Every poll/consume of the consumer first makes a step of its member (Consumer._step_group). A
step heartbeats (which also tells the coordinator the member is alive, for
max.poll.interval.ms), and when the group is rebalancing, or the member was removed, it gives
up its partitions: auto-commit of the stored offsets (if enabled and still a member;
eoslog.client.offset_store), then on_revoke
(on_lost when removed, or on_revoke if no on_lost was given), then unassign. It then joins;
once every member has rejoined it gets its partitions, calls on_assign(consumer, partitions)
and, unless the callback assigned itself, assigns them, each starting at the group's committed
offset (or auto.offset.reset). A rebalance is eager: a member gives up every partition and gets
its new set, as Kafka's range and roundrobin strategies do. poll() returns nothing while the
rebalance is in progress.

The member knows nothing of the Consumer: heartbeat(), join() and leaving() return a Rebalance,
the partitions to give up and to take with their callbacks, which the consumer applies in
order (Consumer._apply_rebalance) and then reports with revoked(); the consumer passes the
stored offsets that moved to auto_commit_offsets().

Thread safety: like the Consumer, used from the consumer's thread only.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from eoslog.client.message import OFFSET_INVALID, Message, TopicPartition, error_message
from eoslog.coordinator.group_coordinator import (
    NO_GENERATION,
    NO_MEMBER,
    ConsumerGroupMetadata,
    GroupCoordinator,
    OffsetToCommit,
)
from eoslog.errors import CommitFailedError, KafkaError, UnknownMemberIdError

if TYPE_CHECKING:
    from eoslog.client.consumer_config import ConsumerConfig

RebalanceCallback = Callable[[Any, list[TopicPartition]], object]


@dataclasses.dataclass(frozen=True)
class Rebalance:
    """What a step of the member decided, for the consumer to apply in this order:

    1. give up `revoked` (nothing when empty): first, if `commit_first`, auto-commit the
       stored offsets (GroupMember.auto_commit_offsets), then `on_revoke(consumer, revoked)`
       if set, then unassign();
    2. take `assigned` (nothing when None): `on_assign(consumer, assigned)` if set, then
       assign(assigned) unless the callback assigned itself."""

    revoked: tuple[TopicPartition, ...] = ()
    commit_first: bool = False
    on_revoke: RebalanceCallback | None = None
    assigned: tuple[TopicPartition, ...] | None = None
    on_assign: RebalanceCallback | None = None


NO_CHANGE: Final = Rebalance()
# What revoked() forgets of a membership the coordinator dropped, once the callbacks that
# still saw it have run: the member id and the generation, then rejoins (a failed heartbeat),
# or the member id only (a failed join).
_FORGET_MEMBERSHIP: Final = "membership"
_FORGET_MEMBER: Final = "member"


class GroupMember:
    """See the module docstring."""

    def __init__(
        self,
        config: ConsumerConfig,
        coordinator: GroupCoordinator,
        partition_counts: Callable[[], Mapping[str, int]],
        clock_ms: Callable[[], int],
    ) -> None:
        assert config.group_id is not None
        self.group_id = config.group_id
        self._coordinator = coordinator
        self._partition_counts = partition_counts
        self._clock_ms = clock_ms
        self._strategies = config.assignment_strategies
        self._rebalance_timeout_ms = config.max_poll_interval_ms
        self.auto_commit = config.enable_auto_commit
        self._auto_commit_interval_ms = config.auto_commit_interval_ms
        self._last_auto_commit_ms = clock_ms()
        self._on_commit = config.on_commit
        self.member_id = NO_MEMBER
        self.generation_id = NO_GENERATION
        self._subscription: list[str] | None = None
        self._topics: frozenset[str] = frozenset()
        # The partition count of each subscribed topic when the member last joined: a topic
        # created, deleted or re-created with another count since makes it join again.
        self._counts: dict[str, int] = {}
        self._owned: list[TopicPartition] = []
        self._joining = False
        self._on_assign: RebalanceCallback | None = None
        self._on_revoke: RebalanceCallback | None = None
        self._on_lost: RebalanceCallback | None = None
        self._forget: str | None = None  # see revoked()
        # The subscribed names (and patterns) that matched no topic at the last step, and
        # those not yet reported (take_errors): librdkafka reports each once while it
        # stays missing, and again if it goes missing again.
        self._unavailable: frozenset[str] = frozenset()
        self._unreported: list[str] = []

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
        self._unavailable, self._unreported = frozenset(), []

    def leaving(self) -> Rebalance | None:
        """Before unsubscribe() or close(): the partitions to give up (auto-commit first), or
        None when not subscribed. leave() follows once the consumer has applied it."""
        self._forget = None
        if self._subscription is None:
            return None
        return self._revoke(lost=False)

    def leave(self) -> None:
        """Leave the group, so that the other members rebalance at once, and drop the
        subscription."""
        if self.member_id:
            self._coordinator.leave_group(self.group_id, self.member_id)
        self.member_id, self.generation_id = NO_MEMBER, NO_GENERATION
        self._subscription = None
        self._unavailable, self._unreported = frozenset(), []

    def metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(self.group_id, self.generation_id, self.member_id)

    # --- the step every poll makes (subscribed members) -----------------------------------

    def heartbeat(self) -> Rebalance | None:
        """The first half of a step: resolve the subscription's topics and heartbeat. None
        while the member keeps its partitions; otherwise what to give up (maybe nothing)
        before join()."""
        self._forget = None  # a callback of the last Rebalance raised: nothing is forgotten
        counts = self._partition_counts()
        topics = self._resolve_topics(counts)
        self._note_unavailable(counts)
        seen = {topic: counts[topic] for topic in topics}
        if topics != self._topics or seen != self._counts:
            # Eager rebalancing: what the member owns goes first (auto-committed, on_revoke),
            # so that the next owner of each partition starts at its position.
            self._topics, self._counts = topics, seen
            self._joining = True
            return self._revoke(lost=False)
        if self._joining:
            return NO_CHANGE
        try:
            self._joining = self._coordinator.heartbeat(
                self.group_id, self.member_id, self.generation_id
            )
        except UnknownMemberIdError:
            self._forget = _FORGET_MEMBERSHIP  # and rejoin, once the callbacks have run
            return self._revoke(lost=True)
        if not self._joining:
            return None
        return self._revoke(lost=False)

    def join(self) -> Rebalance:
        """The second half: JoinGroup. The partitions to take once every member has
        rejoined; a Rebalance with assigned None while the rebalance goes on, or when the
        member was removed meanwhile (then what it still held is lost, and it joins as a new
        member at the next step)."""
        self._forget = None
        try:
            result = self._coordinator.join_group(
                self.group_id,
                self.member_id,
                topics=self._topics,
                strategies=self._strategies,
                rebalance_timeout_ms=self._rebalance_timeout_ms,
            )
        except UnknownMemberIdError:
            self._forget = _FORGET_MEMBER
            return self._revoke(lost=True)
        self.member_id = result.member_id
        if result.generation_id == NO_GENERATION:
            return NO_CHANGE
        self.generation_id = result.generation_id
        self._joining = False
        partitions = [TopicPartition(topic, partition) for topic, partition in result.assignment]
        self._owned = partitions
        return Rebalance(assigned=tuple(partitions), on_assign=self._on_assign)

    def revoked(self) -> None:
        """The consumer has given up what a Rebalance revoked (its callback saw the membership
        as it was): forget a membership the coordinator dropped. Not called when a callback
        raised: then nothing is forgotten, and the next step asks the coordinator again."""
        forget, self._forget = self._forget, None
        if forget == _FORGET_MEMBERSHIP:
            self.member_id, self.generation_id = NO_MEMBER, NO_GENERATION
            self._joining = True
        elif forget == _FORGET_MEMBER:
            self.member_id = NO_MEMBER

    def _revoke(self, *, lost: bool) -> Rebalance:
        """Give up the owned partitions: auto-commit first (not when lost: the commit would
        be refused), then the callback, then unassign."""
        owned, self._owned = self._owned, []
        if not owned:
            return NO_CHANGE
        callback = self._on_lost if lost and self._on_lost is not None else self._on_revoke
        return Rebalance(
            revoked=tuple(owned), commit_first=self.auto_commit and not lost, on_revoke=callback
        )

    def _resolve_topics(self, counts: Mapping[str, int]) -> frozenset[str]:
        """The subscribed topics that exist now: the names (a name subscribed before its
        topic exists joins once it is created, and leaves when it is deleted, as Kafka's
        metadata refresh does) and the topics the patterns match."""
        assert self._subscription is not None
        names = [t for t in self._subscription if not t.startswith("^") and t in counts]
        patterns = [re.compile(t) for t in self._subscription if t.startswith("^")]
        if patterns:
            names += [n for n in counts if any(p.search(n) for p in patterns)]
        return frozenset(names)

    def _note_unavailable(self, counts: Mapping[str, int]) -> None:
        """Queue for take_unavailable() each subscribed name, or pattern, that matches no
        topic now and did not at the last step either."""
        assert self._subscription is not None
        missing = []
        for entry in self._subscription:
            if entry.startswith("^"):
                pattern = re.compile(entry)
                if not any(pattern.search(name) for name in counts):
                    missing.append(entry)
            elif entry not in counts:
                missing.append(entry)
        self._unreported += [entry for entry in missing if entry not in self._unavailable]
        self._unavailable = frozenset(missing)

    def take_errors(self, count_max: int) -> list[Message]:
        """Up to count_max error messages, taken: UNKNOWN_TOPIC_OR_PART for each subscribed
        name or pattern newly found to match no topic, as librdkafka reports a subscribed
        topic that is not available (topic() the name, partition() 0, offset() None)."""
        taken, self._unreported = self._unreported[:count_max], self._unreported[count_max:]
        found = []
        for name in taken:
            error = KafkaError(
                KafkaError.UNKNOWN_TOPIC_OR_PART,
                f"Subscribed topic not available: {name}: Broker: Unknown topic or partition",
            )
            found.append(error_message(name, 0, OFFSET_INVALID, error, error.str().encode()))
        return found

    # --- auto-commit -----------------------------------------------------------------------

    def auto_commit_due(self) -> bool:
        # An interval of 0 turns the periodic commit off (librdkafka's auto.commit.interval.ms).
        return (
            self.auto_commit
            and self._auto_commit_interval_ms > 0
            and self._clock_ms() - self._last_auto_commit_ms >= self._auto_commit_interval_ms
        )

    def auto_commit_offsets(self, offsets: list[OffsetToCommit]) -> bool:
        """Auto-commit: commit these offsets (the stored ones that moved) and restart the
        interval. A refused commit (a member the group fenced) is dropped, as librdkafka's
        auto-commit reports and goes on; False then, or when there was nothing to commit.
        on_commit(err, partitions) hears of either, as confluent's does; a commit with
        nothing moved is no commit and is not reported."""
        self._last_auto_commit_ms = self._clock_ms()
        if not offsets:
            return False
        partitions = [TopicPartition(item.topic, item.partition, item.offset) for item in offsets]
        try:
            self.commit(offsets)
        except CommitFailedError as refused:
            # The next step rejoins; the next owner starts from the last commit.
            self.report_commit(partitions, refused.error)
            return False
        self.report_commit(partitions)
        return True

    def report_commit(self, partitions: list[TopicPartition], error: object = None) -> None:
        """Call on_commit(error, partitions), if the config gave one: after an automatic or
        an asynchronous commit, as confluent-kafka calls it (never after a synchronous one)."""
        if self._on_commit is not None:
            self._on_commit(error, list(partitions))

    def commit(self, offsets: list[OffsetToCommit]) -> None:
        self._coordinator.commit_offsets(self.metadata(), offsets)
