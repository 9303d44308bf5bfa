"""The group coordinator of one Broker (docs/coordinator.md §3.5, §6; docs/design.md
"Transactions"): consumer-group membership inside this process, and the offsets groups commit, kept
in `__consumer_offsets` in Kafka's record format (eoslog.coordinator.offsets_log).

Offsets. A plain commit appends a non-transactional batch of OffsetCommit records to the
group's partition `__consumer_offsets-p(group)`, waits under durability="commit" (and
"always") until it is durable, then applies it: commit() returns only after its record is
fsynced. A transactional commit (send_offsets_to_transaction) appends a transactional batch
carrying the producer's id and epoch; the partition must already be in the producer's
transaction (the producer adds it, as AddOffsetsToTxn does), which the partition log checks
with the transaction coordinator. Those offsets are pending (eoslog.coordinator.offset_store)
until the transaction coordinator's COMMIT or ABORT marker lands in the partition and
on_marker hears of it. At open the state is rebuilt by replaying every partition of
`__consumer_offsets` in log order, markers included, so it is what it was before a crash.

Membership (eoslog.coordinator.group_membership): members join with their subscription and
strategies, and every change of membership starts a rebalance that completes once every member
has rejoined. In-process members (eoslog's Consumer) use the methods here and are removed after
max.poll.interval.ms without a poll; Kafka clients of `eoslog serve` use `classic`
(eoslog.coordinator.classic_groups) and are removed after session.timeout.ms without a request.
Both kinds may share a group (docs/coordinator.md §13). Membership lives in memory only: a new
process starts every group at generation 0 with no members (a remote member then gets
UNKNOWN_MEMBER_ID and joins again).

Fencing (KIP-447, §3.5 step 4, §6.3): a commit naming a member id or a generation >= 0 must
come from a current member at the current generation (else UnknownMemberIdError or
IllegalGenerationError), and not while a remote leader is assigning (RebalanceInProgressError);
a commit naming a static member's instance id must come from the member id that instance has
now (else FencedInstanceIdError, §13.4); a commit naming neither is accepted for a group with
no members, and, when transactional, for any group (Kafka's backward-compatible rule).

Thread safety: every public method may be called from any thread; state changes serialize
on one lock, held across an append and its replay so the replay order is the log order (a
plain commit's fsync is waited for outside it).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, NamedTuple

from eoslog import crashpoints, limits
from eoslog.coordinator import log_replay, offset_expiry
from eoslog.coordinator.assignors import ASSIGNORS, Partition
from eoslog.coordinator.classic_groups import ClassicGroups, GroupSettings
from eoslog.coordinator.group_membership import NO_GENERATION as NO_GENERATION
from eoslog.coordinator.group_membership import Group, GroupState, Member
from eoslog.coordinator.offset_store import OffsetStore, StoredOffset
from eoslog.coordinator.offsets_log import (
    CONSUMER_OFFSETS_TOPIC,
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_offset_key,
    encode_offset_value,
    group_partition,
)
from eoslog.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidConfigError,
    InvalidGroupIdError,
    KafkaError,
    KafkaException,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnstableOffsetCommitError,
)
from eoslog.log.producer_state import marker_type
from eoslog.record import codec, layout

if TYPE_CHECKING:
    from eoslog.log.partition import PartitionLog

NO_MEMBER: Final = ""
# offsets.retention.minutes: Kafka's default, 7 days (GroupCoordinatorConfig).
OFFSETS_RETENTION_MS_DEFAULT: Final = 7 * 24 * 60 * 60 * 1000
# How often a waiter for stable offsets looks again if no marker wakes it (a transaction
# can also end by a timeout abort, which wakes it too; this only bounds a missed wake-up).
_STABLE_WAIT_S_MAX: Final = 0.05


class ConsumerGroupMetadata(NamedTuple):
    """What Consumer.consumer_group_metadata() returns and send_offsets_to_transaction
    takes (Kafka's ConsumerGroupMetadata): the group, and the member and generation that
    consumed the offsets, so the coordinator can fence a zombie (KIP-447)."""

    group_id: str
    generation_id: int = NO_GENERATION
    member_id: str = NO_MEMBER
    group_instance_id: str | None = None


class OffsetToCommit(NamedTuple):
    topic: str
    partition: int
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class JoinResult:
    """The answer to a join: the member id, and once the rebalance is complete the
    generation and this member's partitions (generation NO_GENERATION while it is not)."""

    member_id: str
    generation_id: int
    protocol: str | None
    assignment: tuple[Partition, ...]


LogOf = Callable[[str, int], "PartitionLog"]


class GroupCoordinator:
    """Groups and their offsets for one broker (see the module doc)."""

    def __init__(
        self,
        *,
        offsets_logs: list[PartitionLog],
        log_of: LogOf,
        partition_counts: Callable[[], Mapping[str, int]],
        clock_ms: Callable[[], int],
        durability: str,
        settings: GroupSettings | None = None,
        offsets_retention_ms: int = OFFSETS_RETENTION_MS_DEFAULT,
    ) -> None:
        self._offsets_logs = offsets_logs
        self._log_of = log_of
        self._partition_counts = partition_counts
        self._clock_ms = clock_ms
        self._durability = durability
        self._offsets_retention_ms = offsets_retention_ms
        self._opened_ms = clock_ms()  # the floor of a membership-less group's retention
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)  # a marker or a commit applied
        self._store = OffsetStore()
        self._groups: dict[str, Group] = {}
        # producer id -> (epoch, next sequence) of its transactional offset batches here.
        self._sequences: dict[int, tuple[int, int]] = {}
        self._loaded = False
        # Kafka clients of `eoslog serve` in these groups (the classic protocol over the wire).
        self.classic = ClassicGroups(
            self._lock, self._groups, partition_counts, clock_ms, settings or GroupSettings()
        )

    # --- loading ---------------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild the offsets by replaying `__consumer_offsets` (markers included)."""
        with self._lock:
            # A key's bytes are decoded once: a log holds few keys and many records of each.
            keys: dict[bytes, OffsetCommitKey | GroupMetadataKey] = {}
            for offsets_log in self._offsets_logs:
                for chunk in log_replay.chunks(offsets_log):
                    self._replay_chunk(chunk, keys)
            self._loaded = True

    def _replay_chunk(
        self, chunk: log_replay.Chunk, keys: dict[bytes, OffsetCommitKey | GroupMetadataKey]
    ) -> None:
        for index, key in enumerate(chunk.keys):
            try:
                if chunk.control[index]:
                    if key is not None:
                        commit = marker_type(key) == layout.CONTROL_COMMIT
                        self._store.replay_marker(chunk.producer_ids[index], commit)
                    continue
                self._replay(
                    chunk.producer_ids[index],
                    chunk.transactional[index],
                    key,
                    chunk.values[index],
                    chunk.offsets[index],
                    keys,
                )
            except KafkaException as error:
                raise log_replay.in_place(error, chunk.place(index)) from error

    def _replay(
        self,
        producer_id: int,
        transactional: bool,
        record_key: bytes | None,
        record_value: bytes | None,
        record_offset: int,
        keys: dict[bytes, OffsetCommitKey | GroupMetadataKey] | None = None,
    ) -> None:
        if record_key is None:
            return  # not a coordinator record; Kafka's loader skips it likewise
        key = None if keys is None else keys.get(record_key)
        if key is None:
            key = decode_key(record_key)
            if keys is not None:
                keys[record_key] = key
        if isinstance(key, OffsetCommitKey):
            value = decode_offset_value(record_value)
            self._store.replay_offset(producer_id, transactional, key, value, record_offset)
        # Group metadata records (key version 2) come only from Kafka-written logs: the
        # membership they describe ended with the process that wrote them.

    # --- transaction markers -----------------------------------------------------------------

    def on_marker(
        self, topic: str, partition: int, producer_id: int, commit: bool, marker_offset: int
    ) -> None:
        """The transaction coordinator wrote a COMMIT or ABORT marker at marker_offset: make
        the producer's pending offsets visible, or drop them. Called for every partition a
        marker lands in; only `__consumer_offsets` matters here."""
        if topic != CONSUMER_OFFSETS_TOPIC:
            return
        with self._changed:
            if not self._loaded:
                return  # load() replays the marker from the log
            self._store.replay_marker(producer_id, commit)
            self._changed.notify_all()

    # --- offsets ---------------------------------------------------------------------------

    def commit_offsets(
        self, metadata: ConsumerGroupMetadata, offsets: Iterable[OffsetToCommit]
    ) -> None:
        """A plain OffsetCommit: validated (group, member, generation, topics, metadata
        size), appended, durable per the broker's durability, then visible to committed().
        Raises, writing nothing, InvalidGroupIdError, UnknownMemberIdError,
        IllegalGenerationError, UnknownTopicOrPartitionError, OffsetMetadataTooLargeError."""
        builder = self._offset_batch(metadata, list(offsets), codec.BatchBuilder())
        if builder is None:
            return
        batch = builder.build()
        offsets_log = self._offsets_log(metadata.group_id)
        with self._lock:
            self._validate_member(metadata, transactional=False)
            info = offsets_log.append_batch(batch)
        crashpoints.hit("offsets.commit.after")
        if self._durability != "none":
            offsets_log.flush_through(info.last_offset + 1)
        with self._changed:
            self._replay_appended(batch, info.base_offset, -1, transactional=False)
            self._changed.notify_all()

    def commit_transactional_offsets(
        self,
        producer_id: int,
        producer_epoch: int,
        metadata: ConsumerGroupMetadata,
        offsets: Iterable[OffsetToCommit],
    ) -> None:
        """TxnOffsetCommit (§3.5): the offsets held pending for the producer's open
        transaction, whose partition set must already hold this group's partition. Raises,
        writing nothing, what commit_offsets raises, InvalidTxnStateError for a partition not
        in the transaction and InvalidProducerEpochError for a stale epoch."""
        offsets_log = self._offsets_log(metadata.group_id)
        with self._lock:
            known_epoch, sequence = self._sequences.get(producer_id, (producer_epoch, 0))
            if known_epoch != producer_epoch:
                sequence = 0  # every epoch starts its sequences at 0
            builder = self._offset_batch(
                metadata,
                list(offsets),
                codec.BatchBuilder(
                    is_transactional=True,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    base_sequence=sequence,
                ),
            )
            if builder is None:
                return
            self._validate_member(metadata, transactional=True)
            count = builder.record_count()
            batch = builder.build()
            info = offsets_log.append_batch(batch)
            crashpoints.hit("offsets.commit.after")
            self._sequences[producer_id] = (producer_epoch, sequence + count)
            self._replay_appended(batch, info.base_offset, producer_id, transactional=True)

    def offsets_partition(self, group_id: str) -> tuple[str, int]:
        """The `__consumer_offsets` partition holding the group's offsets."""
        return CONSUMER_OFFSETS_TOPIC, group_partition(group_id, len(self._offsets_logs))

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[Partition], *, require_stable: bool
    ) -> dict[Partition, StoredOffset | None]:
        """OffsetFetch: the committed offset of each partition (None if there is none).
        With require_stable, UnstableOffsetCommitError if an open transaction holds an
        offset for any of them (§6.2); without, pending offsets are simply not seen."""
        _check_group_id(group_id)
        with self._lock:
            wanted = list(partitions)
            if require_stable:
                unstable = [p for p in wanted if self._store.is_unstable(group_id, p)]
                if unstable:
                    raise UnstableOffsetCommitError(
                        f"group {group_id}: a transaction holds offsets for {sorted(unstable)} "
                        "that it has not committed or aborted yet"
                    )
            return {p: self._store.committed(group_id, p) for p in wanted}

    def fetch_offsets_marking_unstable(
        self, group_id: str, partitions: Iterable[Partition] | None
    ) -> tuple[dict[Partition, StoredOffset | None], frozenset[Partition]]:
        """OffsetFetch with require_stable as the wire answers it (§6.2): the committed offset
        of each partition (None: all the group has), and, atomically with them, those of the
        partitions an open transaction holds offsets for (UNSTABLE_OFFSET_COMMIT each)."""
        _check_group_id(group_id)
        with self._lock:
            if partitions is None:
                found = self._store.committed_partitions(group_id)
                offsets: dict[Partition, StoredOffset | None] = dict(found)
            else:
                offsets = {p: self._store.committed(group_id, p) for p in partitions}
            unstable = frozenset(p for p in offsets if self._store.is_unstable(group_id, p))
            return offsets, unstable

    def fetch_stable_offsets(
        self, group_id: str, partitions: Iterable[Partition], timeout_s: float | None
    ) -> dict[Partition, StoredOffset | None]:
        """fetch_offsets(require_stable=True), waiting up to timeout_s seconds (None:
        indefinitely) while a transaction holds offsets; then UnstableOffsetCommitError."""
        wanted = list(partitions)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._changed:
            while True:
                try:
                    return self.fetch_offsets(group_id, wanted, require_stable=True)
                except UnstableOffsetCommitError:
                    left = _STABLE_WAIT_S_MAX if deadline is None else deadline - time.monotonic()
                    if left <= 0:
                        raise
                    self._changed.wait(min(left, _STABLE_WAIT_S_MAX))

    def committed_partitions(self, group_id: str) -> dict[Partition, StoredOffset]:
        with self._lock:
            return self._store.committed_partitions(group_id)

    def pending_producers(self, group_id: str) -> frozenset[int]:
        """Producer ids with offsets pending for the group (for inspection and tests)."""
        with self._lock:
            return self._store.pending_producers(group_id)

    # --- membership ------------------------------------------------------------------------

    def join_group(
        self,
        group_id: str,
        member_id: str,
        *,
        topics: Iterable[str],
        strategies: tuple[str, ...],
        rebalance_timeout_ms: int,
        client_id: str = "eoslog",
    ) -> JoinResult:
        """Join (member_id "") or rejoin. Returns the member id and, once every member has
        rejoined, the generation and this member's assignment; until then generation
        NO_GENERATION (call again at the next poll). UnknownMemberIdError for a member id
        the group does not have (removed: join again with ""); InconsistentGroupProtocolError
        when no strategy is shared with the members."""
        _check_group_id(group_id)
        unknown = [s for s in strategies if s not in ASSIGNORS]
        if not strategies or unknown:
            raise InvalidConfigError(
                f"partition.assignment.strategy: {unknown or 'none'} not among {sorted(ASSIGNORS)}"
            )
        now = self._clock_ms()
        with self._lock:
            group = self._groups.setdefault(group_id, Group(group_id))
            self._expire(group, now)
            if member_id and member_id not in group.members:
                raise UnknownMemberIdError(f"group {group_id} has no member {member_id}")
            member_id = member_id or f"{client_id}-{uuid.uuid4()}"
            member = Member(member_id, frozenset(topics), strategies, rebalance_timeout_ms, now)
            if not group.accepts(member):
                raise InconsistentGroupProtocolError(
                    f"group {group_id}: strategies {list(strategies)} share nothing with its "
                    "members' (or its members are Kafka clients of another protocol type)"
                )
            counts = self._partition_counts()
            group.join(member, now, counts)
            group.maybe_complete_rebalance(counts, now)
            return self._join_result(group, member_id)

    def heartbeat(self, group_id: str, member_id: str, generation_id: int) -> bool:
        """A member's poll: True if it must rejoin (a rebalance began, or a newer generation
        exists). UnknownMemberIdError if it is no longer a member. Also removes the group's
        members that stopped polling."""
        now = self._clock_ms()
        with self._lock:
            group = self._group_with(group_id, member_id)
            group.members[member_id].last_seen_ms = now
            self._expire(group, now)
            return group.needs_rejoin(member_id, generation_id)

    def leave_group(self, group_id: str, member_id: str) -> None:
        """LeaveGroup: the member goes, the others rebalance. Unknown members are ignored."""
        with self._lock:
            group = self._groups.get(group_id)
            if group is None or member_id not in group.members:
                return
            now = self._clock_ms()
            group.remove(member_id, now)
            group.maybe_complete_rebalance(self._partition_counts(), now)

    def expire_members(self) -> int:
        """Remove, in every group, the members past their max.poll.interval.ms (the broker's
        maintenance calls it). Returns how many were removed."""
        now = self._clock_ms()
        with self._lock:
            return sum(self._expire(group, now) for group in self._groups.values())

    def describe_group(
        self, group_id: str
    ) -> tuple[GroupState, int, str | None, dict[str, tuple[Partition, ...]]]:
        """(state, generation, strategy, member id -> assignment), for inspection."""
        with self._lock:
            group = self._groups.get(group_id) or Group(group_id)
            members = {m.member_id: m.assignment for m in group.members.values()}
            return group.state, group.generation_id, group.protocol, members

    def group_ids(self) -> list[str]:
        """Every group this broker knows (ListGroups): those with members now and those with
        committed offsets, sorted."""
        with self._lock:
            known = set(self._groups) | self._store.groups()
            return sorted(known)

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups for one group, as Kafka's GroupCoordinator deletes it: a tombstone for
        each committed offset and one for the group's metadata, appended to the group's
        `__consumer_offsets` partition and durable per the broker's durability before the
        offsets are forgotten, so a crash afterwards replays the deletion. Offsets a
        transaction holds pending are not touched (they appear or go with its marker, as in
        Kafka). Raises, writing nothing,
        InvalidGroupIdError, and KafkaException NON_EMPTY_GROUP while the group has members or
        GROUP_ID_NOT_FOUND for a group with neither members nor committed offsets."""
        _check_group_id(group_id)
        with self._lock:
            group = self._groups.get(group_id)
            if group is not None and group.members:
                raise KafkaException(
                    KafkaError(KafkaError.NON_EMPTY_GROUP, f"group {group_id} has members")
                )
            committed = self._store.committed_partitions(group_id)
            if group is None and not committed:
                raise KafkaException(
                    KafkaError(KafkaError.GROUP_ID_NOT_FOUND, f"no group {group_id}")
                )
            self._groups.pop(group_id, None)
            self._append_tombstones(group_id, sorted(committed), group_too=True)

    def expire_offsets(self) -> int:
        """Tombstone the committed offsets past offsets.retention.minutes, by Kafka's rule
        (coordinator/offset_expiry.py), and remove the groups left with nothing, a group
        tombstone written for each. The broker's maintenance calls it every
        offsets.retention.check.interval.ms. Returns how many offsets expired."""
        expired_count = 0
        with self._lock:
            now = self._clock_ms()
            for group_id in sorted(set(self._groups) | self._store.groups()):
                group = self._groups.get(group_id)
                expired = offset_expiry.expired_partitions(
                    group_id,
                    group,
                    self._store,
                    now_ms=now,
                    retention_ms=self._offsets_retention_ms,
                    opened_ms=self._opened_ms,
                )
                removable = offset_expiry.group_removable(group_id, group, self._store, expired)
                if not expired and not removable:
                    continue
                self._append_tombstones(group_id, expired, group_too=removable)
                if removable:
                    self._groups.pop(group_id, None)
                expired_count += len(expired)
        return expired_count

    # --- internals -------------------------------------------------------------------------

    def _append_tombstones(
        self, group_id: str, partitions: list[Partition], *, group_too: bool
    ) -> None:
        """Append a tombstone for each of the group's offsets in `partitions` (and for its
        group metadata with group_too, as Kafka deletes a group) to its `__consumer_offsets`
        partition, durable per the broker's durability, then forget them (lock held: the
        plain commit's fsync is the only wait under it, as a deletion is rare)."""
        if not partitions and not group_too:
            return
        now = self._clock_ms()
        builder = codec.BatchBuilder()
        for topic, partition in partitions:
            key = OffsetCommitKey(group_id, topic, partition)
            builder.append(now, encode_offset_key(key), None)
        if group_too:
            builder.append(now, encode_group_key(GroupMetadataKey(group_id)), None)
        batch = builder.build()
        offsets_log = self._offsets_log(group_id)
        info = offsets_log.append_batch(batch)
        if self._durability != "none":
            offsets_log.flush_through(info.last_offset + 1)
        self._replay_appended(batch, info.base_offset, -1, transactional=False)
        self._changed.notify_all()

    def _expire(self, group: Group, now: int) -> int:
        return group.expire(now, self._partition_counts())

    def _group_with(self, group_id: str, member_id: str) -> Group:
        group = self._groups.get(group_id)
        if group is None or member_id not in group.members:
            raise UnknownMemberIdError(f"group {group_id} has no member {member_id!r}")
        return group

    def _join_result(self, group: Group, member_id: str) -> JoinResult:
        member = group.members[member_id]
        if group.state is not GroupState.STABLE:
            return JoinResult(member_id, NO_GENERATION, None, ())
        return JoinResult(member_id, group.generation_id, group.protocol, member.assignment)

    def _validate_member(self, metadata: ConsumerGroupMetadata, *, transactional: bool) -> None:
        """Kafka's validateOffsetCommit (§3.5 step 4), lock held."""
        group = self._groups.get(metadata.group_id)
        if group is None:
            if metadata.generation_id >= 0:
                raise IllegalGenerationError(
                    f"group {metadata.group_id} has no generation {metadata.generation_id}"
                )
            return  # a simple group: offsets without membership (assign() consumers, admin)
        if group.fenced(metadata.group_instance_id, metadata.member_id):
            raise FencedInstanceIdError(
                f"group {metadata.group_id}: instance {metadata.group_instance_id} has another "
                f"member than {metadata.member_id!r} now"
            )
        if metadata.generation_id >= 0 or metadata.member_id:
            if metadata.member_id not in group.members:
                raise UnknownMemberIdError(
                    f"group {metadata.group_id} has no member {metadata.member_id!r}"
                )
            if metadata.generation_id != group.generation_id:
                raise IllegalGenerationError(
                    f"group {metadata.group_id} is at generation {group.generation_id}, not "
                    f"{metadata.generation_id}"
                )
            if group.state is GroupState.COMPLETING_REBALANCE:
                raise RebalanceInProgressError(
                    f"group {metadata.group_id} waits for its leader's assignment"
                )
            # A commit from a member is a sign of life, as in Kafka.
            group.members[metadata.member_id].last_seen_ms = self._clock_ms()
        elif group.members and not transactional:
            raise UnknownMemberIdError(
                f"group {metadata.group_id} has members: a commit must name one of them"
            )

    def _offset_batch(
        self,
        metadata: ConsumerGroupMetadata,
        offsets: list[OffsetToCommit],
        builder: codec.BatchBuilder,
    ) -> codec.BatchBuilder | None:
        """The OffsetCommit records appended to `builder`, after checking the request;
        None for nothing to commit."""
        _check_group_id(metadata.group_id)
        if not offsets:
            return None
        now = self._clock_ms()
        for item in offsets:
            self.check_offset(item)
            key = OffsetCommitKey(metadata.group_id, item.topic, item.partition)
            value = OffsetCommitValue(item.offset, item.metadata, now, item.leader_epoch)
            builder.append(now, encode_offset_key(key), encode_offset_value(value))
        return builder

    def check_offset(self, item: OffsetToCommit) -> None:
        """Raise what committing `item` would raise for its own sake:
        UnknownTopicOrPartitionError, OffsetMetadataTooLargeError, ValueError (offset < 0)."""
        self._log_of(item.topic, item.partition)  # UnknownTopicOrPartitionError
        if item.offset < 0:
            raise ValueError(f"{item.topic}-{item.partition}: offset {item.offset} < 0")
        if len(item.metadata.encode()) > limits.offset_metadata_bytes_max:
            raise OffsetMetadataTooLargeError(
                f"{item.topic}-{item.partition}: metadata longer than "
                f"{limits.offset_metadata_bytes_max} bytes"
            )

    def _replay_appended(
        self, batch: bytes, base_offset: int, producer_id: int, *, transactional: bool
    ) -> None:
        """Apply the records of a batch just appended at base_offset (lock held)."""
        for record in codec.batch_records(_stamped(batch, base_offset)):
            self._replay(producer_id, transactional, record.key, record.value, record.offset)

    def _offsets_log(self, group_id: str) -> PartitionLog:
        return self._offsets_logs[group_partition(group_id, len(self._offsets_logs))]


def _check_group_id(group_id: object) -> None:
    if not isinstance(group_id, str) or not group_id:
        raise InvalidGroupIdError(f"invalid group id {group_id!r}")


def _stamped(batch: bytes | bytearray, base_offset: int) -> bytearray:
    """The batch with the offsets the log gave it, so its records carry their offsets."""
    stamped = bytearray(batch)
    codec.stamp_batch(stamped, base_offset=base_offset, partition_leader_epoch=0)
    return stamped
