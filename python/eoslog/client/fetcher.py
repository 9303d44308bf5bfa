"""The consumer's fetcher (Kafka's Fetcher; docs/design.md "Fetch"): the partitions a Consumer
is assigned, each with its position and the records fetched but not yet delivered, and the
reads that fill them.

PartitionLog.read returns whole v2 batches up to the last stable offset (read_committed) or
the high watermark (read_uncommitted) with the aborted transactions, as a view of the mapped
segment; eoslog.client.fetch.plan_fetch picks the batches to deliver. consume() and poll()
index those batches in C (message.index_records: CRC and record checks, one reference per
record into the fetched bytes, nothing copied) and make exactly one Message per record;
consume_arrow() decodes them with one codec.ColumnDecoder per partition and call, one decode
per read over the plan's runs (aborted batches skipped in C, columns sized once, cut at the
records wanted), into Arrow-layout columns, with no Python object per record or per batch.

A position not known yet (OFFSET_STORED, OFFSET_INVALID) is resolved at the first fetch: the
group's committed offset, else the auto.offset.reset policy. The fetcher also answers
offsets_for_times as a partition leader answers Kafka's ListOffsets, under the consumer's
isolation level.

Thread safety: used from the consumer's thread only, as the Consumer is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Protocol

import pyarrow as pa

from eoslog import limits
from eoslog.client.fetch import FetchPlan, plan_fetch
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
    error_message,
    index_records,
    make_messages,
)
from eoslog.client.metadata import NODE_ID
from eoslog.errors import (
    KafkaError,
    KafkaException,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
)
from eoslog.record import codec

if TYPE_CHECKING:
    from eoslog.client.consumer_config import ConsumerConfig
    from eoslog.coordinator.group_coordinator import GroupCoordinator
    from eoslog.log.partition import PartitionLog
    from eoslog.log.partition_reads import FetchResult

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


class OffsetSource(Protocol):
    """What the fetcher needs of the Broker: the group coordinator, for committed offsets,
    and the partition logs, for offsets_for_times."""

    groups: GroupCoordinator

    def log(self, topic: str, partition: int) -> PartitionLog: ...


class AssignedPartition:
    """One assigned partition: its log, the consumer's position in it, the decoded records
    fetched but not yet delivered, and its offset store (eoslog.client.offset_store): the
    offset stored for the next commit, with its metadata, and the offset this consumer last
    committed for it (OFFSET_INVALID: none)."""

    __slots__ = (
        "bytes_per_record",
        "committed",
        "eof_offset",
        "error",
        "fetched",
        "halted",
        "index",
        "log",
        "partition",
        "position",
        "stored",
        "stored_metadata",
        "topic",
    )

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
        self.stored = OFFSET_INVALID
        self.stored_metadata: str | None = None
        self.committed = OFFSET_INVALID
        # The end offset last reported as _PARTITION_EOF (librdkafka's eof_offset): the end
        # is reported once each time the position reaches it, again only at a new end, or
        # after a seek, assign or resume (OFFSET_INVALID: not reported since).
        self.eof_offset = OFFSET_INVALID
        # An error librdkafka delivers as a message (auto.offset.reset=error's
        # _AUTO_OFFSET_RESET) until it is reported, with the offset it names; the partition
        # is halted from then on, fetching nothing until assign() restarts it.
        self.error: tuple[KafkaError, int] | None = None
        self.halted = False

    def restart(self) -> None:
        """A seek or assign moved the position: fetch again, and report the end again."""
        self.drop_fetched()
        self.eof_offset = OFFSET_INVALID
        self.error = None
        self.halted = False

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


class Fetcher:
    """Fills a Consumer's AssignedPartitions from their logs under the consumer's config.
    `group_id()` is the consumer's group id while it has a group (its committed offsets
    start a partition whose position is OFFSET_STORED), else None."""

    def __init__(
        self,
        broker: OffsetSource,
        config: ConsumerConfig,
        group_id: Callable[[], str | None],
    ) -> None:
        self._broker = broker
        self._config = config
        self._group_id = group_id

    def bound(self, log: PartitionLog) -> int:
        """How far this consumer may read: the LSO or the high watermark."""
        if self._config.isolation_level == "read_committed":
            return log.last_stable_offset
        return log.high_watermark

    def offsets_for_times(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Consumer.offsets_for_times: offset_for_time of each partition, as new
        TopicPartitions. KafkaException, as librdkafka's: _INVALID_ARG for an empty list,
        _UNKNOWN_PARTITION for a partition that does not exist."""
        if not partitions:
            raise KafkaException(
                KafkaError(KafkaError._INVALID_ARG, "Failed to get offsets: no partitions")
            )
        found = []
        for tp in partitions:
            try:
                log = self._broker.log(tp.topic, tp.partition)
            except UnknownTopicOrPartitionError:
                raise KafkaException(
                    KafkaError(
                        KafkaError._UNKNOWN_PARTITION,
                        f"Failed to get offsets: {tp.topic} [{tp.partition}] is unknown",
                    )
                ) from None
            found.append(
                TopicPartition(tp.topic, tp.partition, self.offset_for_time(log, tp.offset))
            )
        return found

    def offset_for_time(self, log: PartitionLog, timestamp_ms: int) -> int:
        """Kafka's ListOffsets for one partition, as a leader answers it under this consumer's
        isolation level: OFFSET_END (Kafka's LATEST_TIMESTAMP, -1) asks for the bound (LSO
        or high watermark), OFFSET_BEGINNING (EARLIEST_TIMESTAMP, -2) for the log start;
        any other timestamp for the earliest offset whose record's timestamp is at or after
        it, through the time index (PartitionLog.offset_for_timestamp), if that offset is
        below the bound (Kafka's Partition.fetchOffsetForTimestamp), else -1, as librdkafka
        reports none. KafkaException _INVALID_ARG for Kafka's other special timestamps
        (-3, the largest timestamp, KIP-734, and below), which eoslog does not answer."""
        bound = self.bound(log)
        if timestamp_ms == OFFSET_END:
            return bound
        if timestamp_ms == OFFSET_BEGINNING:
            return log.log_start_offset
        if timestamp_ms < 0:
            raise KafkaException(
                KafkaError(
                    KafkaError._INVALID_ARG,
                    f"Failed to get offsets: special timestamp {timestamp_ms} is not supported",
                )
            )
        found = log.offset_for_timestamp(timestamp_ms)
        if found is None or found[0] >= bound:
            return OFFSET_END
        return found[0]

    def seek_to(self, assigned: AssignedPartition, offset: int) -> None:
        """Move the partition to `offset` or a special offset (Consumer.assign's), dropping
        what was fetched. KafkaException _STATE for a partition halted by
        auto.offset.reset=error, as librdkafka refuses to seek it (assign() restarts it)."""
        if assigned.halted:
            raise KafkaException(
                KafkaError(
                    KafkaError._STATE,
                    f"Failed to seek to offset {offset}: Local: Erroneous state "
                    f"({assigned.topic}-{assigned.partition} halted by auto.offset.reset=error)",
                )
            )
        assigned.restart()
        if offset >= 0:
            assigned.position = offset
        elif offset == OFFSET_BEGINNING:
            assigned.position = assigned.log.log_start_offset
        elif offset == OFFSET_END:
            assigned.position = self.bound(assigned.log)
        elif offset in (OFFSET_STORED, OFFSET_INVALID) and self._group_id() is not None:
            assigned.position = OFFSET_STORED  # the group's committed offset, at first fetch
        elif offset in (OFFSET_STORED, OFFSET_INVALID):
            # No stored offsets without a group: the reset policy decides (at the first fetch
            # for "error", so the error surfaces from poll/consume, as in librdkafka).
            assigned.position = OFFSET_INVALID
            if self._config.auto_offset_reset != "error":
                self._reset(assigned)
        else:
            raise ValueError(f"offset {offset} is neither an offset nor a special offset")

    def _start_position(self, assigned: AssignedPartition) -> bool:
        """Resolve a position not known yet: the group's committed offset, else the reset
        policy. False while a transaction holds offsets for the partition under
        read_committed: the fetch waits for its end (KIP-447), never reading from a stale
        offset."""
        group_id = self._group_id()
        if assigned.position == OFFSET_STORED and group_id is not None:
            key = (assigned.topic, assigned.partition)
            try:
                found = self._broker.groups.fetch_offsets(
                    group_id,
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

    def _reset(self, assigned: AssignedPartition, cause: Exception | None = None) -> None:
        """Apply auto.offset.reset to a position that is unknown or (with `cause`) out of
        range. Under "error" the partition halts with _AUTO_OFFSET_RESET to report, as
        librdkafka's does: poll() and consume() deliver it as an error message naming the
        offset (None when there was none), consume_arrow() raises it."""
        policy = self._config.auto_offset_reset
        log = assigned.log
        if policy == "earliest":
            assigned.position = log.log_start_offset
        elif policy == "latest":
            assigned.position = self.bound(log)
        else:
            if cause is not None:
                reason = f"fetch failed due to requested offset not available: {cause}"
            else:
                reason = "no previously committed offset available: Local: No offset stored"
            error = KafkaError(KafkaError._AUTO_OFFSET_RESET, reason)
            assigned.error = (error, assigned.position if cause is not None else OFFSET_INVALID)
            assigned.halted = True

    def fill(
        self, assigned: AssignedPartition, records_wanted: int | None = None, kind: str = MESSAGES
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
            if assigned.halted:
                return False  # until assign(): the error is reported once
            if assigned.position < 0 and not self._start_position(assigned):
                return False
            if assigned.halted:
                return False
            offset = assigned.position
            # Nothing to read at or past the bound; past the log end is out of range (the log
            # may have been truncated), which the read below raises and the policy resets.
            if self.bound(assigned.log) <= offset <= assigned.log.log_end_offset:
                return False
            try:
                if records_wanted is not None and not assigned.bytes_per_record:
                    self._probe_record_size(assigned, offset)
                result = assigned.log.read(
                    offset, self._read_bytes(assigned, records_wanted), self._config.isolation_level
                )
            except OffsetOutOfRangeError as error:
                self._reset(assigned, error)
                continue  # halted under "error": the loop's test above returns
            if not len(result.records):
                return False
            self._decode(assigned, result, offset, records_wanted, kind)
        return True

    def _probe_record_size(self, assigned: AssignedPartition, offset: int) -> None:
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

    def _read_bytes(self, assigned: AssignedPartition, records_wanted: int | None) -> int:
        config = self._config
        if records_wanted is None or not assigned.bytes_per_record:
            return config.partition_fetch_bytes_max
        # Enough for the records wanted at the size seen so far, plus slack for one batch
        # more, within [max.partition.fetch.bytes, fetch.max.bytes].
        wanted = int(records_wanted * assigned.bytes_per_record * 1.05)
        return max(config.partition_fetch_bytes_max, min(wanted, config.fetch_bytes_max))

    def _decode(
        self,
        assigned: AssignedPartition,
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
        self, assigned: AssignedPartition, result: FetchResult, offset: int, plan: FetchPlan
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
        assigned: AssignedPartition,
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
        self, assigned: AssignedPartition, offset: int, records_wanted: int
    ) -> tuple[FetchResult, FetchPlan] | None:
        """The next read of a consume_arrow() fetch, from `offset`, and its plan; None when
        nothing more is readable now or the read fails (the next fill reads there again,
        and resets the position or raises)."""
        log = assigned.log
        if offset >= self.bound(log):
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

    def take_messages(
        self, assigned: AssignedPartition, out: list[Message], limit: int, held: list[int]
    ) -> int:
        """Messages from `assigned` into `out` up to limit, or until held[0] (the decompressed
        bytes the messages taken keep alive, counted once per fetch) reaches the limit; once
        nothing more is readable, an error message after them (report()). Returns the number
        of error messages appended (0 or 1)."""
        budget = limits.decompressed_batch_bytes_max
        while len(out) < limit and held[0] < budget:
            if not self.fill(assigned):
                return self.report(assigned, out)
            fetched = assigned.fetched[0]
            assert isinstance(fetched, MessageBatch)
            start = assigned.index
            if start == 0:
                held[0] += fetched.decompressed_bytes
            count = min(limit - len(out), fetched.count - start)
            # One Message per record, made in C: no Python code per record.
            make_messages(out, fetched, start, start + count)
            assigned.advance(count)
        return 0

    def report(self, assigned: AssignedPartition, out: list[Message]) -> int:
        """After fill() found nothing more to read: append to `out` the error message
        librdkafka would deliver now, if any, and return how many were appended (0 or 1).
        Either the halted partition's pending error (once), or, with enable.partition.eof,
        _PARTITION_EOF when the position has reached the bound (the high watermark, the LSO
        under read_committed) and that end was not reported yet."""
        if assigned.error is not None:
            (error, offset), assigned.error = assigned.error, None
        elif not self._config.enable_partition_eof or assigned.halted:
            return 0
        else:
            log = assigned.log
            offset = assigned.position
            if offset < 0 or offset == assigned.eof_offset or offset != self.bound(log):
                return 0
            assigned.eof_offset = offset
            error = KafkaError(
                KafkaError._PARTITION_EOF,
                f"Fetch from broker {NODE_ID} reached end of partition at offset {offset} "
                f"(HighwaterMark {log.high_watermark})",
            )
        reason = error.str().encode()
        out.append(error_message(assigned.topic, assigned.partition, offset, error, reason))
        return 1

    def take_error(self, assigned: AssignedPartition) -> KafkaError | None:
        """The halted partition's pending error, taken (consume_arrow raises it)."""
        if assigned.error is None:
            return None
        (error, _), assigned.error = assigned.error, None
        return error

    def take_arrow(
        self, assigned: AssignedPartition, limit: int, include_headers: bool
    ) -> pa.RecordBatch:
        fetched = assigned.fetched[0]
        assert isinstance(fetched, FetchedRecords)
        start = assigned.index
        count = min(limit, fetched.count - start)
        piece = fetched.to_arrow(start, start + count, include_headers)
        assigned.advance(count)
        return piece


def _planned(result: FetchResult, offset: int, records_wanted: int | None = None) -> FetchPlan:
    """plan_fetch of a read from `offset`; its errors (a bad batch header, batches out of
    offset order: the position would move backwards or loop) name the segment file and the
    byte of it (FetchResult.in_file)."""
    try:
        return plan_fetch(
            result.records, offset, result.aborted_transactions, records_wanted, result.batches
        )
    except KafkaException as error:
        raise result.in_file(error) from error
