"""The Consumer (docs/api.md "Consumer"): confluent-kafka-python's assign / poll / consume / seek /
position / get_watermark_offsets over one Broker's partition logs, consume_arrow for columnar
reads in the Spark Kafka source's schema, and consumer groups: subscribe / commit / committed
/ consumer_group_metadata (membership in eoslog.client.group_member, offsets in the broker's
group coordinator).

Data path (docs/design.md "Fetch"): PartitionLog.read returns whole v2 batches up to the last
stable offset (read_committed) or the high watermark (read_uncommitted) with the aborted
transactions, as a view of the mapped segment; fetch.plan_fetch picks the batches to deliver.
consume() and poll() index those batches in C (message.index_records: CRC and record checks,
one reference per record into the fetched bytes, nothing copied) and make exactly one Message
per record; consume_arrow() decodes them with one codec.ColumnDecoder per partition and call,
one decode per read over the plan's runs (aborted batches skipped in C, columns sized once,
cut at the records wanted), into Arrow-layout columns, with no Python object per record or
per batch.

Thread safety: like confluent's, a Consumer is used from one thread. Appends from other
threads (or the same one) are safe: reads take no lock and see only whole batches.

Waiting: poll() and consume() with a timeout sleep while nothing new is readable, checking the
assigned logs' high watermark / LSO after sleeps that grow from 0.5 ms to 10 ms (no busy spin;
new data is seen at most ~10 ms late). The partition log has no append notification yet.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Final, Protocol

import pyarrow as pa

from eoslog import limits
from eoslog.client.fetch import FetchPlan, plan_fetch
from eoslog.client.group_member import GroupMember, RebalanceCallback
from eoslog.client.message import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    FetchedRecords,
    Message,
    MessageBatch,
    RecordRefs,
    TopicPartition,
    index_records,
    make_messages,
)
from eoslog.coordinator.assignors import ASSIGNORS
from eoslog.coordinator.group_coordinator import ConsumerGroupMetadata, OffsetToCommit
from eoslog.errors import (
    InvalidConfigError,
    InvalidGroupIdError,
    KafkaError,
    KafkaException,
    OffsetOutOfRangeError,
    UnstableOffsetCommitError,
)
from eoslog.record import codec
from eoslog.record.columns import SPARK_SCHEMA, SPARK_SCHEMA_WITH_HEADERS

if TYPE_CHECKING:
    from eoslog.coordinator.group_coordinator import GroupCoordinator
    from eoslog.log.partition import FetchResult, PartitionLog


class LogSource(Protocol):
    """What the consumer needs of the Broker."""

    groups: GroupCoordinator

    def log(self, topic: str, partition: int) -> PartitionLog: ...

    def partition_counts(self) -> dict[str, int]: ...

    def clock_ms(self) -> int: ...


# What a partition's buffered records are held as: MessageBatch for consume() and poll(),
# FetchedRecords (Arrow-layout columns) for consume_arrow(), with or without headers. A
# buffered fetch serves the kinds in _SERVES, else it is fetched again as the kind wanted.
MESSAGES: Final = "messages"
ARROW: Final = "arrow"
ARROW_HEADERS: Final = "arrow with headers"
_SERVES: Final = {
    MESSAGES: (MESSAGES,),
    ARROW: (ARROW, ARROW_HEADERS),
    ARROW_HEADERS: (ARROW_HEADERS,),
}


def _kind_of(fetched: FetchedRecords | MessageBatch) -> str:
    if isinstance(fetched, MessageBatch):
        return MESSAGES
    return ARROW if fetched.columns.headers is None else ARROW_HEADERS


# librdkafka's local error codes (rdkafka.h RD_KAFKA_RESP_ERR__*), as confluent reports them.
ERR_STATE: Final = -172
ERR_NO_OFFSET: Final = -168
ERR_AUTO_OFFSET_RESET: Final = -140

# Kafka's consumer defaults (ConsumerConfig): fetch.max.bytes 50 MiB,
# max.partition.fetch.bytes 1 MiB.
FETCH_MAX_BYTES_DEFAULT: Final = 52_428_800
PARTITION_FETCH_BYTES_DEFAULT: Final = 1_048_576
# confluent's consume() refuses more than this many messages per call.
CONSUME_MESSAGES_MAX: Final = 1_000_000
# Sleeps while waiting for data: start short for latency, grow to bound the wake-ups.
WAIT_SLEEP_S_MIN: Final = 0.0005
WAIT_SLEEP_S_MAX: Final = 0.010

RESET_POLICIES: Final = {
    "earliest": "earliest",
    "smallest": "earliest",
    "beginning": "earliest",
    "latest": "latest",
    "largest": "latest",
    "end": "latest",
    "error": "error",
}
ISOLATION_LEVELS: Final = ("read_committed", "read_uncommitted")
# librdkafka's default partition.assignment.strategy; the strategies eoslog has are
# eoslog.coordinator.assignors.ASSIGNORS.
ASSIGNMENT_STRATEGIES_DEFAULT: Final = ("range", "roundrobin")
# Kafka's defaults (ConsumerConfig): max.poll.interval.ms 5 minutes, auto-commit every 5 s.
MAX_POLL_INTERVAL_MS_DEFAULT: Final = 300_000
AUTO_COMMIT_INTERVAL_MS_DEFAULT: Final = 5_000
# Common confluent/librdkafka consumer keys accepted so that configs carry over unchanged,
# with no effect here: there is no network and no background thread.
IGNORED_KEYS: Final = frozenset(
    {
        "bootstrap.servers",
        "client.id",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "enable.auto.offset.store",
        "socket.timeout.ms",
        "request.timeout.ms",
        "fetch.wait.max.ms",
        "fetch.min.bytes",
    }
)


class ConsumerConfig:
    """The parsed consumer properties. InvalidConfigError names the first bad key."""

    __slots__ = (
        "assignment_strategies",
        "auto_commit_interval_ms",
        "auto_offset_reset",
        "check_crcs",
        "enable_auto_commit",
        "fetch_bytes_max",
        "group_id",
        "isolation_level",
        "max_poll_interval_ms",
        "partition_fetch_bytes_max",
    )

    def __init__(self, config: Mapping[str, object]) -> None:
        self.group_id: str | None = None
        self.isolation_level = "read_committed"
        # Kafka's default (ConsumerConfig auto.offset.reset = latest).
        self.auto_offset_reset = "latest"
        self.enable_auto_commit = True
        self.auto_commit_interval_ms = AUTO_COMMIT_INTERVAL_MS_DEFAULT
        self.max_poll_interval_ms = MAX_POLL_INTERVAL_MS_DEFAULT
        self.assignment_strategies: tuple[str, ...] = ASSIGNMENT_STRATEGIES_DEFAULT
        self.check_crcs = True
        self.fetch_bytes_max = FETCH_MAX_BYTES_DEFAULT
        self.partition_fetch_bytes_max = PARTITION_FETCH_BYTES_DEFAULT
        for key, value in config.items():
            self._set(key, value)

    def _set(self, key: str, value: object) -> None:
        if key == "group.id":
            if not isinstance(value, str) or not value:
                raise InvalidConfigError(f"group.id must be a non-empty string, not {value!r}")
            self.group_id = value
        elif key == "isolation.level":
            if value not in ISOLATION_LEVELS:
                raise InvalidConfigError(f"isolation.level must be one of {ISOLATION_LEVELS}")
            self.isolation_level = str(value)
        elif key == "auto.offset.reset":
            if not isinstance(value, str) or value not in RESET_POLICIES:
                raise InvalidConfigError(
                    f"auto.offset.reset must be one of {sorted(RESET_POLICIES)}, not {value!r}"
                )
            self.auto_offset_reset = RESET_POLICIES[value]
        elif key == "enable.auto.commit":
            self.enable_auto_commit = _boolean(key, value)
        elif key == "auto.commit.interval.ms":
            self.auto_commit_interval_ms = _positive(key, value)
        elif key == "max.poll.interval.ms":
            self.max_poll_interval_ms = _positive(key, value)
        elif key == "partition.assignment.strategy":
            self.assignment_strategies = _strategies(value)
        elif key == "check.crcs":
            self.check_crcs = _boolean(key, value)
        elif key == "fetch.max.bytes":
            self.fetch_bytes_max = _positive(key, value)
        elif key == "max.partition.fetch.bytes":
            self.partition_fetch_bytes_max = _positive(key, value)
        elif key not in IGNORED_KEYS:
            raise InvalidConfigError(f"unknown consumer configuration {key!r}")


def _boolean(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise InvalidConfigError(f"{key} must be a boolean, not {value!r}")


def _strategies(value: object) -> tuple[str, ...]:
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not names:
        raise InvalidConfigError(
            f"partition.assignment.strategy must be a comma-separated list, not {value!r}"
        )
    strategies = tuple(str(name).strip() for name in names)
    unknown = [name for name in strategies if name not in ASSIGNORS]
    if unknown:
        raise InvalidConfigError(
            f"partition.assignment.strategy: {unknown} not supported; use {sorted(ASSIGNORS)}"
            " (cooperative-sticky is not implemented)"
        )
    return strategies


def _positive(key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidConfigError(f"{key} must be a positive integer, not {value!r}")
    return value


class _Assigned:
    """One assigned partition: its log, the consumer's position in it, and the decoded
    records fetched but not yet delivered."""

    __slots__ = ("bytes_per_record", "fetched", "index", "log", "partition", "position", "topic")

    def __init__(self, log: PartitionLog, position: int) -> None:
        self.log = log
        self.topic = log.topic
        self.partition = log.partition
        # The next offset to fetch when nothing is buffered; OFFSET_STORED/OFFSET_INVALID
        # until the reset policy resolves it (it raises under auto.offset.reset=error).
        self.position = position
        self.fetched: list[FetchedRecords | MessageBatch] = []
        self.index = 0  # next record of fetched[0] to deliver
        # Bytes of log per record delivered, seen so far: sizes consume_arrow's reads.
        self.bytes_per_record = 0.0

    def drop_fetched(self) -> None:
        self.fetched = []
        self.index = 0

    def current_position(self) -> int:
        """The offset of the next record to deliver (Kafka's position), or OFFSET_INVALID
        while the reset policy has not resolved it."""
        if self.fetched and self.index > 0:
            return self.fetched[0].offset_at(self.index - 1) + 1
        return self.position

    def advance(self, count: int) -> None:
        """Mark `count` records of fetched[0] delivered."""
        fetched = self.fetched[0]
        self.index += count
        assert count > 0 and self.index <= fetched.count
        if self.index == fetched.count:
            self.position = fetched.next_offset
            self.fetched.pop(0)
            self.index = 0


class Consumer:
    """Reads records from assigned or subscribed partitions (confluent_kafka.Consumer).

    Create with Broker.consumer(config). Config keys: `group.id` (needed by subscribe,
    commit, committed and consumer_group_metadata), `isolation.level` (read_committed, the
    default, or read_uncommitted), `auto.offset.reset` (earliest | latest | error, and Kafka's
    aliases smallest, beginning, largest, end; default latest as in Kafka; used where the group
    has no committed offset), `enable.auto.commit` (default true: the positions are committed
    every `auto.commit.interval.ms`, default 5000, at a poll, before partitions are revoked
    and at close), `max.poll.interval.ms` (default 300000: a member that does not poll for
    that long is removed from its group), `partition.assignment.strategy` ("range",
    "roundrobin" or a comma-separated preference list; default "range,roundrobin"),
    `check.crcs` (default true), `fetch.max.bytes`, `max.partition.fetch.bytes`. A few common
    client keys with no meaning here (bootstrap.servers, client.id, session.timeout.ms, ...)
    are accepted and ignored; any other key raises InvalidConfigError.

    Under read_committed a partition that starts at the group's committed offset waits while
    a transaction holds offsets for it (KIP-447: never a stale offset); committed() likewise
    waits up to its timeout, then raises UnstableOffsetCommitError.

    Used from one thread. After close() every method raises RuntimeError."""

    def __init__(self, broker: LogSource, config: Mapping[str, object] | None = None) -> None:
        self._broker = broker
        self._config = ConsumerConfig(config or {})
        self._assigned: dict[tuple[str, int], _Assigned] = {}
        self._order: list[_Assigned] = []
        self._turn = 0  # where the next round over the partitions starts (fairness)
        self._closed = False
        # Counts assign()/unassign() calls: tells the group whether on_assign assigned.
        self.assignment_generation = 0
        self._group: GroupMember | None = None
        if self._config.group_id is not None:
            self._group = GroupMember(
                self,
                broker.groups,
                lambda: list(broker.partition_counts()),
                broker.clock_ms,
            )

    @property
    def config(self) -> ConsumerConfig:
        return self._config

    # --- assignment -------------------------------------------------------------------------

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        """Replace the assignment. Each partition starts at its offset: a real offset,
        OFFSET_BEGINNING (the log start), OFFSET_END (the LSO under read_committed, the high
        watermark under read_uncommitted), or OFFSET_STORED / OFFSET_INVALID (the group's
        committed offset, looked up at the first fetch; without one, or without a group.id,
        the auto.offset.reset policy). An offset outside the log is reset by the policy at
        the first fetch. UnknownTopicOrPartitionError for a partition that does
        not exist (nothing changes then); ValueError for a partition given twice."""
        self._check_open()
        assigned: dict[tuple[str, int], _Assigned] = {}
        for tp in partitions:
            key = (tp.topic, tp.partition)
            if key in assigned:
                raise ValueError(f"partition {tp.topic}-{tp.partition} is assigned twice")
            log = self._broker.log(tp.topic, tp.partition)
            assigned[key] = _Assigned(log, OFFSET_INVALID)
        for key, tp in zip(assigned, partitions, strict=True):
            self._seek_to(assigned[key], tp.offset)
        self._assigned = assigned
        self._order = list(assigned.values())
        self._turn = 0
        self.assignment_generation += 1

    def unassign(self) -> None:
        """Drop the whole assignment (buffered records are discarded)."""
        self._check_open()
        self._assigned = {}
        self._order = []
        self.assignment_generation += 1

    def assignment(self) -> list[TopicPartition]:
        """The assigned partitions (offsets are not reported here, as in confluent)."""
        self._check_open()
        return [TopicPartition(p.topic, p.partition) for p in self._order]

    def seek(self, partition: TopicPartition) -> None:
        """Move an assigned partition's position to partition.offset (special offsets as in
        assign()); the next poll/consume starts there. Records already fetched past it are
        discarded. KafkaException (_STATE) if the partition is not assigned."""
        self._check_open()
        assigned = self._assigned.get((partition.topic, partition.partition))
        if assigned is None:
            raise KafkaException(
                KafkaError(
                    ERR_STATE,
                    "_STATE",
                    f"seek: {partition.topic}-{partition.partition} is not assigned",
                )
            )
        self._seek_to(assigned, partition.offset)

    def position(self, partitions: Sequence[TopicPartition]) -> list[TopicPartition]:
        """For each partition, a TopicPartition whose offset is the offset of the next record
        to deliver (the last consumed record's offset + 1, or past skipped control batches);
        OFFSET_INVALID for a partition not assigned or not yet resolved."""
        self._check_open()
        out = []
        for tp in partitions:
            assigned = self._assigned.get((tp.topic, tp.partition))
            offset = OFFSET_INVALID if assigned is None else assigned.current_position()
            known = offset if offset >= 0 else OFFSET_INVALID
            out.append(TopicPartition(tp.topic, tp.partition, known))
        return out

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        """(low, high): the log start offset and, under read_committed, the last stable
        offset (the high watermark under read_uncommitted). Any partition of the broker may be
        asked, assigned or not; timeout and cached are accepted for confluent compatibility
        (the answer is always current). UnknownTopicOrPartitionError if it does not exist."""
        self._check_open()
        log = self._broker.log(partition.topic, partition.partition)
        return log.log_start_offset, self._bound(log)

    # --- reading ----------------------------------------------------------------------------

    def poll(self, timeout: float | None = None) -> Message | None:
        """The next record of the assigned partitions, or None if none arrives within
        `timeout` seconds (None or a negative value: wait indefinitely; 0: do not wait).
        Raises KafkaException for errors (OffsetOutOfRangeError under
        auto.offset.reset=error, CorruptRecordError for damaged batches, ...)."""
        found = self.consume(1, -1 if timeout is None else timeout)
        return found[0] if found else None

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        """Up to num_messages records (1 .. 1,000,000). Like confluent's, it returns once
        num_messages are collected or the timeout expires (negative: wait indefinitely; 0:
        return what is readable now), so the list may be short or empty; it also returns once
        the records taken keep limits.decompressed_batch_bytes_max of decompressed data alive
        (so batches that each decompress to just under the limit cannot add up). Partitions
        are served in turn, each delivering in offset order. A fetch that fails after records
        were collected ends the call with those records; the next call raises the error."""
        self._check_open()
        if not 1 <= num_messages <= CONSUME_MESSAGES_MAX:
            raise ValueError(f"num_messages must be in 1..{CONSUME_MESSAGES_MAX}")
        deadline = _deadline(timeout)
        out: list[Message] = []
        held = [0]  # decompressed bytes the messages taken keep alive
        sleep_s = WAIT_SLEEP_S_MIN
        while True:
            if self._group is not None and not self._group.step():
                if not self._wait(deadline, sleep_s):
                    return out
                sleep_s = min(sleep_s * 2, WAIT_SLEEP_S_MAX)
                continue
            for assigned in self._rotation():
                if len(out) >= num_messages or held[0] >= limits.decompressed_batch_bytes_max:
                    break
                try:
                    self._take_messages(assigned, out, num_messages, held)
                except KafkaException:
                    if not out:
                        raise
                    # The records taken have moved their positions: deliver them. The failing
                    # fetch is at its partition's position, so the next call raises it.
                    return out
            if len(out) >= num_messages or held[0] >= limits.decompressed_batch_bytes_max:
                return out
            if not self._wait(deadline, sleep_s):
                return out
            sleep_s = min(sleep_s * 2, WAIT_SLEEP_S_MAX)

    def consume_arrow(
        self, max_records: int = 100_000, timeout: float = -1, *, include_headers: bool = False
    ) -> pa.RecordBatch:
        """Up to max_records records as one pyarrow.RecordBatch in the Spark Kafka source's
        schema (docs/api.md "Spark"; with a `headers` column when include_headers), made without
        a Python object per record. Waits like consume(): until max_records are collected or
        the timeout expires; returns earlier once the pieces collected hold
        limits.decompressed_batch_bytes_max bytes, as consume() does. Moves the same positions
        poll() and consume() move."""
        self._check_open()
        if max_records < 1:
            raise ValueError("max_records must be at least 1")
        deadline = _deadline(timeout)
        pieces: list[pa.RecordBatch] = []
        total = held = 0
        budget = limits.decompressed_batch_bytes_max
        sleep_s = WAIT_SLEEP_S_MIN
        while True:
            if self._group is not None and not self._group.step():
                if not self._wait(deadline, sleep_s):
                    return _one_batch(pieces, include_headers)
                sleep_s = min(sleep_s * 2, WAIT_SLEEP_S_MAX)
                continue
            for assigned in self._rotation():
                try:
                    while (
                        total < max_records
                        and held < budget
                        and self._fill(
                            assigned,
                            max_records - total,
                            ARROW_HEADERS if include_headers else ARROW,
                        )
                    ):
                        piece = self._take_arrow(assigned, max_records - total, include_headers)
                        pieces.append(piece)
                        total += piece.num_rows
                        held += piece.nbytes
                except KafkaException:
                    if not total:
                        raise
                    return _one_batch(pieces, include_headers)  # as in consume()
            if total >= max_records or held >= budget or not self._wait(deadline, sleep_s):
                return _one_batch(pieces, include_headers)
            sleep_s = min(sleep_s * 2, WAIT_SLEEP_S_MAX)

    # --- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Auto-commit the positions (if enabled), leave the group (its other members
        rebalance), drop the assignment and release the buffered records. Idempotent; any
        other call afterwards raises RuntimeError."""
        if self._group is not None and not self._closed:
            group, self._group = self._group, None
            group.close()
        self._assigned = {}
        self._order = []
        self._closed = True

    def __enter__(self) -> Consumer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # --- groups -----------------------------------------------------------------------------

    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Join the group (group.id) with these topics: names, or regular expressions
        starting with "^" matched against the broker's topics (new matching topics join the
        subscription at a later poll). Partitions are assigned at the next poll, once every
        member has rejoined: on_assign(consumer, partitions) is called then, and
        on_revoke(consumer, partitions) before partitions are taken away (on_lost, if given,
        instead when the member was removed for not polling within max.poll.interval.ms).
        An on_assign that does not call assign() gets the partitions assigned after it
        returns, each at the group's committed offset. Replaces an earlier subscription or
        assign(). InvalidGroupIdError without a group.id; re.error for a bad pattern."""
        group = self._require_group("subscribe")
        group.subscribe(topics, on_assign, on_revoke, on_lost)
        if self._order:
            self.unassign()

    def unsubscribe(self) -> None:
        """Give up the partitions (on_revoke) and leave the group."""
        self._check_open()
        if self._group is not None:
            self._group.unsubscribe()
        if self._order:
            self.unassign()

    def commit(
        self,
        message: Message | None = None,
        offsets: Sequence[TopicPartition] | None = None,
        asynchronous: bool = False,
    ) -> list[TopicPartition] | None:
        """Commit offsets for the group: `offsets` as given (each the offset of the next
        record to read), or `message`'s offset + 1, or by default the position of every
        assigned partition. Returns once the commit is durable (durability "commit" and
        "always": fsynced), with the committed list; None when asynchronous (the commit is
        made before it returns all the same). Raises InvalidGroupIdError without a
        group.id; KafkaException _NO_OFFSET when there is nothing to commit;
        CommitFailedError (UnknownMemberIdError, IllegalGenerationError) when the group
        has moved on without this member (it rejoins at the next poll)."""
        group = self._require_group("commit")
        if message is not None:
            targets = [TopicPartition(message.topic(), message.partition(), message.offset() + 1)]
        elif offsets is not None:
            targets = list(offsets)
        else:
            targets = [tp for tp in self.position(self.assignment()) if tp.offset >= 0]
        if not targets:
            raise KafkaException(KafkaError(ERR_NO_OFFSET, "_NO_OFFSET", "no offset to commit"))
        group.commit(
            [OffsetToCommit(tp.topic, tp.partition, tp.offset, tp.metadata or "") for tp in targets]
        )
        return None if asynchronous else targets

    def committed(
        self, partitions: Sequence[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        """The group's committed offset of each partition (OFFSET_INVALID where none was
        committed), with its metadata. Under read_committed (require_stable, KIP-447) this
        waits up to `timeout` seconds (None: as long as it takes) while a transaction holds
        offsets for one of them, then raises UnstableOffsetCommitError; under
        read_uncommitted pending offsets are not seen and it never waits."""
        group = self._require_group("committed")
        wanted = [(tp.topic, tp.partition) for tp in partitions]
        coordinator = self._broker.groups
        if self._config.isolation_level == "read_committed":
            found = coordinator.fetch_stable_offsets(group.group_id, wanted, timeout)
        else:
            found = coordinator.fetch_offsets(group.group_id, wanted, require_stable=False)
        out = []
        for topic, partition in wanted:
            stored = found[(topic, partition)]
            if stored is None:
                out.append(TopicPartition(topic, partition, OFFSET_INVALID))
            else:
                out.append(TopicPartition(topic, partition, stored.offset, stored.metadata))
        return out

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """The group, member id and generation this consumer reads under, for
        Producer.send_offsets_to_transaction: the coordinator refuses offsets sent with it
        once the group has moved to a newer generation or dropped the member (zombie
        fencing, KIP-447). A consumer that only assign()s reports generation -1, no member.
        InvalidGroupIdError without a group.id."""
        return self._require_group("consumer_group_metadata").metadata()

    # --- internals --------------------------------------------------------------------------

    def _require_group(self, name: str) -> GroupMember:
        self._check_open()
        if self._group is None:
            raise InvalidGroupIdError(f"Consumer.{name} needs a group.id in the configuration")
        return self._group

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Consumer closed")

    def _bound(self, log: PartitionLog) -> int:
        """How far this consumer may read: the LSO or the high watermark."""
        if self._config.isolation_level == "read_committed":
            return log.last_stable_offset
        return log.high_watermark

    def _rotation(self) -> list[_Assigned]:
        order = self._order
        if not order:
            return []
        turn = self._turn % len(order)
        self._turn = turn + 1
        return order[turn:] + order[:turn]

    def _seek_to(self, assigned: _Assigned, offset: int) -> None:
        assigned.drop_fetched()
        if offset >= 0:
            assigned.position = offset
        elif offset == OFFSET_BEGINNING:
            assigned.position = assigned.log.log_start_offset
        elif offset == OFFSET_END:
            assigned.position = self._bound(assigned.log)
        elif offset in (OFFSET_STORED, OFFSET_INVALID) and self._group is not None:
            assigned.position = OFFSET_STORED  # the group's committed offset, at first fetch
        elif offset in (OFFSET_STORED, OFFSET_INVALID):
            # No stored offsets without a group: the reset policy decides (at the first fetch
            # for "error", so the error surfaces from poll/consume, as in librdkafka).
            assigned.position = OFFSET_INVALID
            if self._config.auto_offset_reset != "error":
                self._reset(assigned)
        else:
            raise ValueError(f"offset {offset} is neither an offset nor a special offset")

    def _start_position(self, assigned: _Assigned) -> bool:
        """Resolve a position not known yet: the group's committed offset, else the reset
        policy. False while a transaction holds offsets for the partition under
        read_committed: the fetch waits for its end (KIP-447), never reading from a stale
        offset."""
        if assigned.position == OFFSET_STORED and self._group is not None:
            key = (assigned.topic, assigned.partition)
            try:
                found = self._broker.groups.fetch_offsets(
                    self._group.group_id,
                    [key],
                    require_stable=self._config.isolation_level == "read_committed",
                )
            except UnstableOffsetCommitError:
                return False
            stored = found[key]
            if stored is not None:
                assigned.position = stored.offset
                return True
        self._reset(assigned)
        return True

    def _reset(self, assigned: _Assigned, cause: Exception | None = None) -> None:
        policy = self._config.auto_offset_reset
        log = assigned.log
        if policy == "earliest":
            assigned.position = log.log_start_offset
        elif policy == "latest":
            assigned.position = self._bound(log)
        elif isinstance(cause, OffsetOutOfRangeError):
            raise cause
        else:
            raise KafkaException(
                KafkaError(
                    ERR_AUTO_OFFSET_RESET,
                    "_AUTO_OFFSET_RESET",
                    f"{assigned.topic}-{assigned.partition}: no offset to start from and "
                    "auto.offset.reset is error",
                )
            )

    def _fill(
        self, assigned: _Assigned, records_wanted: int | None = None, kind: str = MESSAGES
    ) -> bool:
        """Make sure records are buffered for this partition, fetching as needed; False when
        nothing is readable below the bound. records_wanted (consume_arrow) sizes the read and
        stops planning once that many records are covered. kind: what the records must be
        buffered as, MESSAGES (consume, poll), ARROW or ARROW_HEADERS (consume_arrow, which
        decodes headers only when asked, since that costs time). Buffered records of another
        kind are fetched again from the current position."""
        if assigned.fetched and _kind_of(assigned.fetched[0]) not in _SERVES[kind]:
            assigned.position = assigned.current_position()
            assigned.drop_fetched()
        while not assigned.fetched:
            if assigned.position < 0 and not self._start_position(assigned):
                return False
            offset = assigned.position
            # Nothing to read at or past the bound; past the log end is out of range (the log
            # may have been truncated), which the read below raises and the policy resets.
            if self._bound(assigned.log) <= offset <= assigned.log.log_end_offset:
                return False
            try:
                if records_wanted is not None and not assigned.bytes_per_record:
                    self._probe_record_size(assigned, offset)
                result = assigned.log.read(
                    offset, self._read_bytes(assigned, records_wanted), self._config.isolation_level
                )
            except OffsetOutOfRangeError as error:
                self._reset(assigned, error)
                continue
            if not len(result.records):
                return False
            self._decode(assigned, result, offset, records_wanted, kind)
        return True

    def _probe_record_size(self, assigned: _Assigned, offset: int) -> None:
        """Size a partition's first consume_arrow read from a plan of the usual first read
        (max.partition.fetch.bytes, a view: nothing is copied or decoded), dropped batches
        counted in the bytes per record: decoding that read would bring a fraction of the
        records wanted, and the fetch after it a second piece to concatenate."""
        result = assigned.log.read(
            offset, self._config.partition_fetch_bytes_max, self._config.isolation_level
        )
        plan = _planned(result, offset)
        if plan.records:
            assigned.bytes_per_record = plan.planned_bytes / plan.records

    def _read_bytes(self, assigned: _Assigned, records_wanted: int | None) -> int:
        config = self._config
        if records_wanted is None or not assigned.bytes_per_record:
            return config.partition_fetch_bytes_max
        # Enough for the records wanted at the size seen so far, plus slack for one batch
        # more, within [max.partition.fetch.bytes, fetch.max.bytes].
        wanted = int(records_wanted * assigned.bytes_per_record * 1.05)
        return max(config.partition_fetch_bytes_max, min(wanted, config.fetch_bytes_max))

    def _decode(
        self,
        assigned: _Assigned,
        result: FetchResult,
        offset: int,
        records_wanted: int | None,
        kind: str,
    ) -> None:
        plan = _planned(result, offset, records_wanted)
        if kind == MESSAGES:
            fetched, next_offset = self._index_messages(assigned, result, offset, plan)
        else:
            fetched, next_offset = self._decode_columns(
                assigned, result, offset, plan, kind == ARROW_HEADERS, records_wanted
            )
        assigned.fetched = fetched
        assigned.index = 0
        assigned.position = offset if fetched else next_offset
        if plan.records:
            assigned.bytes_per_record = plan.planned_bytes / plan.records

    def _index_messages(
        self, assigned: _Assigned, result: FetchResult, offset: int, plan: FetchPlan
    ) -> tuple[list[FetchedRecords | MessageBatch], int]:
        """The planned records as one MessageBatch of references into `records` (no copy),
        and the offset past them: the plan's, unless the decompressed sections reached
        limits.decompressed_batch_bytes_max first (the rest is fetched next time)."""
        # plan.records counts the offsets the batch headers claim at or after offset (more
        # than the records when compaction left gaps), so the references usually fit without
        # growing. The headers are not the bytes, though: a record takes at least
        # limits.record_bytes_min of them, which bounds the room reserved before a record is
        # read (a forged header claims 2**31 offsets in 61 bytes); index_records grows it for
        # the records decompressed sections hold beyond.
        records = result.records
        refs = RecordRefs(min(plan.records, plan.planned_bytes // limits.record_bytes_min + 1))
        owners: list[object] = [records]
        next_offset = plan.next_offset
        for start, end in plan.runs:
            try:
                stopped = index_records(
                    records,
                    start,
                    end,
                    refs,
                    owners,
                    verify_crc=self._config.check_crcs,
                    offset_min=offset,
                    held_bytes_max=limits.decompressed_batch_bytes_max,
                )
            except KafkaException as error:
                raise result.in_file(error) from error
            if stopped >= 0:
                next_offset = stopped
                break
        if not refs.count:
            return [], next_offset
        batch = MessageBatch(assigned.topic, assigned.partition, refs, owners, next_offset)
        return [batch], next_offset

    def _decode_columns(
        self,
        assigned: _Assigned,
        result: FetchResult,
        offset: int,
        plan: FetchPlan,
        headers: bool,
        records_wanted: int | None,
    ) -> tuple[list[FetchedRecords | MessageBatch], int]:
        """The planned records, at most records_wanted, as one FetchedRecords, and the offset
        past them. One decode in C per read, over every run of its plan (aborted batches
        between runs skipped there), into columns sized once; when a read ends (at a segment's
        end, usually) short of records_wanted, the next read is decoded into the same
        columns. So a consume_arrow() of one partition copies each value once and slices and
        concatenates nothing."""
        decoder = codec.ColumnDecoder(headers)
        first = True
        while True:
            try:
                end = decoder.decode(
                    result.records,
                    verify_crc=self._config.check_crcs,
                    offset_min=offset,
                    runs=plan.runs,
                    records_max=records_wanted,
                    # Batches each just under the decompressed limit must not add up.
                    held_bytes_max=limits.decompressed_batch_bytes_max,
                )
            except KafkaException as error:
                if first or not decoder.count:
                    raise result.in_file(error) from error
                # Damage in a later read: deliver what came before it; the next fetch starts
                # at the bad batch and raises there.
                cut = True
                break
            # Stopped inside the plan: records_wanted cut a batch, or a column is full.
            cut = bool(plan.runs) and end < plan.runs[-1][1]
            offset = plan.next_offset
            if cut or records_wanted is None or decoder.count >= records_wanted:
                break
            found = self._read_on(assigned, offset, records_wanted - decoder.count)
            if found is None:
                break
            result, plan = found
            first = False
        columns = decoder.finish()
        if not columns.count:
            return [], offset
        # Past every batch planned when all were decoded (control and dropped batches after
        # the last record included); else just past the last record, where the next fetch
        # goes on.
        next_offset = int(columns.offset[-1]) + 1 if cut else offset
        fetched = FetchedRecords(assigned.topic, assigned.partition, columns, next_offset)
        return [fetched], next_offset

    def _read_on(
        self, assigned: _Assigned, offset: int, records_wanted: int
    ) -> tuple[FetchResult, FetchPlan] | None:
        """The next read of a consume_arrow() fetch, from `offset`, and its plan; None when
        nothing more is readable now or the read fails (the next _fill reads there again,
        and resets the position or raises)."""
        log = assigned.log
        if offset >= self._bound(log):
            return None
        try:
            result = log.read(
                offset, self._read_bytes(assigned, records_wanted), self._config.isolation_level
            )
            if not len(result.records):
                return None
            plan = _planned(result, offset, records_wanted)
        except KafkaException:
            # Out of range (truncated meanwhile) or damaged: the records decoded so far are
            # delivered, and the next fetch, from here, resets or raises.
            return None
        return result, plan

    def _take_messages(
        self, assigned: _Assigned, out: list[Message], limit: int, held: list[int]
    ) -> None:
        """Messages from `assigned` into `out` up to limit, or until held[0] (the decompressed
        bytes the messages taken keep alive, counted once per fetch) reaches the limit."""
        budget = limits.decompressed_batch_bytes_max
        while len(out) < limit and held[0] < budget and self._fill(assigned):
            fetched = assigned.fetched[0]
            assert isinstance(fetched, MessageBatch)
            start = assigned.index
            if start == 0:
                held[0] += fetched.decompressed_bytes
            count = min(limit - len(out), fetched.count - start)
            # One Message per record, made in C: no Python code per record.
            make_messages(out, fetched, start, start + count)
            assigned.advance(count)

    def _take_arrow(self, assigned: _Assigned, limit: int, include_headers: bool) -> pa.RecordBatch:
        fetched = assigned.fetched[0]
        assert isinstance(fetched, FetchedRecords)
        start = assigned.index
        count = min(limit, fetched.count - start)
        piece = fetched.to_arrow(start, start + count, include_headers)
        assigned.advance(count)
        return piece

    def _wait(self, deadline: float | None, sleep_s: float) -> bool:
        """Sleep a little if there is time left; False once the deadline has passed."""
        if deadline is None:
            time.sleep(sleep_s)
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(sleep_s, left))
        return True


def _planned(result: FetchResult, offset: int, records_wanted: int | None = None) -> FetchPlan:
    """plan_fetch of a read from `offset`; its errors (a bad batch header, batches out of
    offset order: the position would move backwards or loop) name the segment file and the
    byte of it (FetchResult.in_file)."""
    try:
        return plan_fetch(result.records, offset, result.aborted_transactions, records_wanted)
    except KafkaException as error:
        raise result.in_file(error) from error


def _deadline(timeout: float) -> float | None:
    return None if timeout < 0 else time.monotonic() + timeout


def _one_batch(pieces: list[pa.RecordBatch], include_headers: bool) -> pa.RecordBatch:
    if len(pieces) == 1:
        return pieces[0]
    schema = SPARK_SCHEMA_WITH_HEADERS if include_headers else SPARK_SCHEMA
    if not pieces:
        return pa.RecordBatch.from_arrays(
            [pa.array([], type=f.type) for f in schema], schema=schema
        )
    combined = pa.Table.from_batches(pieces, schema=schema).combine_chunks()
    return combined.to_batches()[0]
