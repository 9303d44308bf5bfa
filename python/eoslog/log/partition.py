"""The partition log (docs/api.md "Partition log"): validated appends with offset assignment, reads
of whole batches, roll, retention, truncation and durability, over a list of segments.

Thread safety: appends, roll, retention, truncation, flush and close serialize on the
partition lock. Reads take no lock: they work from the segment list and sizes published
before the read began, so a read never sees a batch that is not whole.

Memory safety: a read returns a read-only memoryview into the segment's mapped .log (no copy);
it stays readable, with the same bytes, for as long as the caller keeps it, through appends,
roll, retention, truncation and close (eoslog.log.mapped_log says how).
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from eoslog import crashpoints, limits
from eoslog._ext.producer_state import APPEND_DUPLICATE, NO_OFFSET, ProducerStateTable
from eoslog._ext.segment_core import ROLL_FIRST
from eoslog.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    TooManyProducersError,
)
from eoslog.fs import FileSystem
from eoslog.log import recovery
from eoslog.log.append_signal import AppendSignal
from eoslog.log.checkpoints import AbortedCounts
from eoslog.log.compacted import check_keyed
from eoslog.log.config import LogConfig
from eoslog.log.partition_reads import (
    ISOLATION_LEVELS,
    FetchResult,
    Published,
    read_published,
)
from eoslog.log.producer_state import (
    ActiveProducer,
    ProducerStateManager,
    aborted_txn,
    active_producers,
)
from eoslog.log.segment import LogSegment, mark_compacted
from eoslog.log.sync import GroupSync
from eoslog.log.timestamps import check_client_timestamps
from eoslog.record import codec, layout

if TYPE_CHECKING:
    # Only for annotations: typing_extensions is not a run-time dependency.
    from typing_extensions import Buffer

    from eoslog.record.types import BatchHeader


def _restamped(batch: Buffer, base_offset: int, append_time: int, max_timestamp: int) -> bytearray:
    """A copy of the batch with the leader's fields and a new CRC: LogAppendTime (append_time
    >= 0: the attribute and the max timestamp), or a CreateTime batch whose header max
    timestamp is not its records' largest, `max_timestamp` (Kafka writes the largest there).
    A batch that needs neither is written as given, only its base offset and leader epoch
    stamped (outside the CRC) on the way (LogSegment.append_stamped)."""
    copy = bytearray(batch)
    codec.stamp_batch(
        copy,
        base_offset=base_offset,
        partition_leader_epoch=0,
        log_append_time_ms=append_time,
        max_timestamp=None if append_time >= 0 else max_timestamp,
    )
    return copy


class AppendInfo(NamedTuple):
    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 for CreateTime topics
    duplicate: bool


# tuple.__new__ builds an AppendInfo without the NamedTuple's Python-level __new__ (a frame
# per append).
_new_tuple = tuple.__new__


class _StorageGuard:
    """PartitionLog._storage: a reusable context manager (a generator-based one cost a few
    microseconds per append). Turns an OSError into KafkaStorageError; when writing, the
    failure also stops the partition (fail-stop). Stateless, so threads may share it."""

    __slots__ = ("_log", "_writing")

    def __init__(self, log: PartitionLog, *, writing: bool) -> None:
        self._log = log
        self._writing = writing

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: object
    ) -> None:
        # KafkaStorageError is an OSError too: it passes through unwrapped.
        if isinstance(error, OSError) and not isinstance(error, KafkaStorageError):
            raise self._log._storage_failure(error, writing=self._writing) from error


class PartitionLog:
    """One partition's log in its directory `<topic>-<partition>`.

    I/O errors surface as KafkaStorageError from every public method; one raised while
    writing stops the partition (fail-stop): nothing is acknowledged after it."""

    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        clock_ms: Callable[[], int],
        durability: str,
        loaded: recovery.LoadedLog,
        persist_recovery_point: Callable[[], None] | None = None,
        persist_log_start: Callable[[], None] | None = None,
        persist_cleaned_end: Callable[[], None] | None = None,
        producer_expiration_ms: int = 86_400_000,
        verify_transaction: Callable[[int, int, str, int], None] | None = None,
        append_signal: AppendSignal | None = None,
    ) -> None:
        self.fs = fs
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self._clock_ms = clock_ms
        self._durability = durability
        self._lock = threading.RLock()
        self._segments: list[LogSegment] = loaded.segments
        self._bases = [segment.base_offset for segment in self._segments]
        # For a tiered topic (config.remote_storage_enable): the end of what the archive holds
        # (eoslog.tiering sets it); local retention deletes no segment past it.
        self.archived_end = 0
        self._log_end_offset = loaded.log_end_offset
        self._log_start_offset = loaded.log_start_offset
        self.recovery_report = loaded.report
        self._unsynced: set[LogSegment] = {self._takes_appends(self._segments[-1])}
        self._retired: list[tuple[LogSegment, int]] = []
        self._group_sync = GroupSync(
            lambda: self._log_end_offset, self._sync_unsynced, loaded.recovery_point
        )
        # Writes the broker's recovery-point checkpoint (with this log's current value): a
        # truncation calls it before cutting any file (see truncate_to).
        self._persist_recovery_point = persist_recovery_point
        # Writes the broker's log-start checkpoint: delete_records calls it before answering.
        self._persist_log_start = persist_log_start
        # Below this offset the cleaner may have left gaps (the partition's entry in the
        # cleaner-offset-checkpoint); the cleaner raises it, and writes the checkpoint holding
        # it (persist_cleaned_end) before it swaps anything in above the old value.
        self.cleaned_end = loaded.cleaned_end
        self._persist_cleaned_end = persist_cleaned_end
        # Asks the transaction coordinator whether a producer's first transactional batch
        # here belongs to its open transaction (KIP-890 part 1); raises if not.
        self._verify_transaction = verify_transaction
        # Bumped after every publication of a new log end or LSO: readers waiting in this
        # process wake on it (the broker shares one among its logs).
        self._append_signal = append_signal or AppendSignal()
        # Counts truncations begun: a read that meets bytes a truncation cut under it reads
        # again instead of reporting damage.
        self._truncations = 0
        # The first offset of a transaction an ABORT marker is ending, from the moment the
        # producer state closes it until its .txnindex entry is written: the LSO stays below
        # it meanwhile, so no read_committed fetch sees its data without the entry.
        self._aborting_first_offset: int | None = None
        self._producers = ProducerStateManager(fs, directory, producer_expiration_ms)
        self._producers.remove_stray_snapshots(self._bases)
        self._producers.rebuild(
            self._segments,
            self._log_start_offset,
            self._log_end_offset,
            clock_ms(),
            txn_index_from=loaded.rescanned_from,
            crc_checked_from=loaded.rescanned_from,
        )
        self._write_guard = _StorageGuard(self, writing=True)
        self._read_guard = _StorageGuard(self, writing=False)
        self._closed = False

    # --- offsets ---------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        """One node is its own ISR: everything appended is replicated (docs/format.md §7)."""
        return self._log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, else the high watermark (docs/format.md
        §7; a single node is its own ISR, so a decided transaction is stable at once). Never
        below the log start offset."""
        first_unstable = self._producers.table.first_unstable_offset()
        # Read after the table: append_marker sets it before the table forgets the
        # transaction and clears it only once the .txnindex entry is written.
        aborting = self._aborting_first_offset
        if aborting is not None:
            first_unstable = aborting if first_unstable is None else min(first_unstable, aborting)
        if first_unstable is None:
            return self.high_watermark
        return min(max(first_unstable, self._log_start_offset), self.high_watermark)

    @property
    def durability(self) -> str:
        """The broker's durability mode ("commit", "always" or "none")."""
        return self._durability

    @property
    def recovery_point(self) -> int:
        """Everything below this offset is durable on disk."""
        return self._group_sync.durable

    def aborted_counts(self) -> AbortedCounts:
        """The partition's line of the aborted-transaction checkpoint (eoslog.log.checkpoints):
        per segment, its .txnindex entries ending below the recovery point. Any thread: the
        point is read first, and the entries below it are durable and change only by
        truncate_to, which lowers the point and rewrites the checkpoint after."""
        covered_to = self.recovery_point
        by_segment: dict[int, int] = {}
        for segment in self.segments:
            if segment.base_offset >= covered_to:
                break
            entries = segment.txn_index.entries_ending_below(covered_to)
            if entries:
                by_segment[segment.base_offset] = entries
        return AbortedCounts(covered_to, by_segment)

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    # --- append ----------------------------------------------------------------------------

    def append_batch(self, raw: bytes | bytearray | memoryview) -> AppendInfo:
        """Append one v2 batch exactly as a client sends it, validated as a Kafka leader
        validates it (docs/format.md §8.2, §10): a retry of any of the producer's last 5 batches
        returns the original offsets with duplicate=True and writes nothing;
        InvalidProducerEpochError, OutOfOrderSequenceError, InvalidTxnStateError for a
        batch its producer's state rejects. Nothing is written when it raises. Thread-safe.

        A duplicate's log_append_time_ms is what the original append returned: the
        append time on a LogAppendTime topic, else -1. (Kafka returns the original batch's
        max timestamp either way.)"""
        # What _storage(writing=True) does, spelled out: the hot path saves entering and
        # leaving a context manager.
        try:
            config = self.config
            validated = codec.validate_batch(raw, batch_bytes_max=config.max_message_bytes)
            if len(raw) > config.segment_bytes:
                raise RecordBatchTooLargeError(
                    f"batch of {len(raw)} bytes is larger than segment.bytes {config.segment_bytes}"
                )
            header = validated.header
            if config.compact:
                check_keyed(raw, self.topic, self.partition)
            with self._lock:
                now = self._clock_ms()
                if config.timestamp_range_checked or header.attributes & layout.TIMESTAMP_TYPE_MASK:
                    check_client_timestamps(raw, validated, config, now)
                if self._closed or self._group_sync.failure is not None:
                    self._check_writable()  # raises
                producers = self._producers.table
                if header.producer_id >= 0:
                    transactional = header.is_transactional
                    original = self._check_producer_append(header, transactional)
                    if original is not None:
                        return self._duplicate(*original)
                base_offset = self._log_end_offset
                append_time = now if config.log_append_time else -1
                last_offset = base_offset + header.last_offset_delta
                max_timestamp = append_time if append_time >= 0 else validated.max_timestamp
                batch = raw
                # Kafka's LogValidator writes a CreateTime batch's largest record timestamp
                # into its header; a producer that put another value there gets it corrected.
                if append_time >= 0 or validated.max_timestamp != header.max_timestamp:
                    batch = _restamped(raw, base_offset, append_time, validated.max_timestamp)
                self._write(batch, base_offset, last_offset, max_timestamp, now)
                # Staged above, applied now that the bytes are written (docs/style.md rule 9).
                if header.producer_id >= 0:
                    producers.apply_append(
                        header.producer_id,
                        header.producer_epoch,
                        header.base_sequence,
                        header.last_offset_delta,
                        base_offset,
                        last_offset,
                        max_timestamp,
                        transactional,
                    )
                else:
                    producers.map_end_offset = last_offset + 1
                # Published last: a reader that sees the new log end sees the batch's open
                # transaction too, so the LSO never passes it.
                self._log_end_offset = last_offset + 1
                self._append_signal.bump()
            if self._durability == "always":
                self._group_sync.sync_through(last_offset + 1)
            return _new_tuple(AppendInfo, (base_offset, last_offset, append_time, False))
        except KafkaStorageError:
            raise
        except OSError as error:
            raise self._storage_failure(error, writing=True) from error

    def _check_producer_append(
        self, header: BatchHeader, transactional: bool
    ) -> tuple[int, int, int] | None:
        """Check a client's batch against its producer's state, changing nothing (docs/format.md
        §8.2, in Kafka's order): the original's (first offset, last offset, timestamp) for a
        retry of one of the producer's last 5 batches, else None once the batch may be
        written. Raises what check_append raises, TooManyProducersError for a producer new
        here when the state is full, and what verify_transaction raises for a batch that
        would open a transaction. `transactional`: header.is_transactional, read once by
        the caller. Under self._lock."""
        producers = self._producers.table
        verdict, original = producers.check_append(
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            header.last_offset_delta,
            transactional,
        )
        if verdict == APPEND_DUPLICATE and original is not None:
            return original
        entry = producers.entry(header.producer_id)
        if entry is None:
            self._check_room_for_producer(header.producer_id)
        opens_transaction = entry is None or entry.current_txn_first_offset == NO_OFFSET
        if transactional and self._verify_transaction is not None and opens_transaction:
            # The batch would open a transaction here: only the producer's current, ongoing
            # transaction that holds this partition may.
            self._verify_transaction(
                header.producer_id, header.producer_epoch, self.topic, self.partition
            )
        return None

    def _check_room_for_producer(self, producer_id: int) -> None:
        """TooManyProducersError when the producer state already keeps
        limits.producers_per_partition_max producers, so that a batch from one more producer
        is refused before anything is written (docs/style.md rule 6; markers and replay are
        never refused: the coordinator and the log decide those). Under self._lock."""
        kept = len(self._producers.table)
        if kept >= limits.producers_per_partition_max:
            raise TooManyProducersError(
                f"{self.topic}-{self.partition} keeps the state of {kept} producers "
                "(limits.producers_per_partition_max): a batch of producer "
                f"{producer_id}, new here, is refused until idle producers expire "
                "(producer.id.expiration.ms)"
            )

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        *,
        sync: bool = True,
        epoch_bumped: bool = True,
    ) -> int:
        """Write a COMMIT or ABORT marker ending the producer's transaction here, as the
        transaction coordinator does (docs/format.md §3; §8.2 item 7, COORDINATOR origin). Returns
        the marker's offset. An ABORT that ends a transaction with data adds its .txnindex
        entry (§6.2). Under transactions v2 (`epoch_bumped`) a marker must carry a newer epoch
        than the transaction's data; the same epoch is accepted only when no transaction is
        open (a marker sent again after a crash; Kafka's KAFKA-19999). A transaction of a
        transactions-v1 client (a Kafka client over the wire, docs/coordinator.md §9.4) ends
        at its data's epoch: `epoch_bumped` false accepts that. InvalidProducerEpochError or
        TransactionCoordinatorFencedError, writing nothing, for a stale marker. Thread-safe;
        durable before it returns under durability "always", and under "commit" unless
        `sync` is false (the coordinator then syncs it before anything that depends on it:
        flush_through(offset + 1))."""
        # As in append_batch: _storage(writing=True) spelled out.
        try:
            with self._lock:
                if self._closed or self._group_sync.failure is not None:
                    self._check_writable()  # raises
                producers = self._producers.table
                producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
                entry = producers.entry(producer_id)
                if (
                    epoch_bumped
                    and entry is not None
                    and entry.epoch == producer_epoch
                    and entry.current_txn_first_offset != NO_OFFSET
                ):
                    raise InvalidProducerEpochError(
                        f"producer {producer_id}: a marker for its open transaction must carry "
                        f"an epoch above {producer_epoch}"
                    )
                offset = self._log_end_offset
                now = self._clock_ms()
                marker: Buffer = codec.build_control_batch(
                    1 if commit else 0,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    coordinator_epoch=coordinator_epoch,
                    timestamp=now,
                )
                if self.config.log_append_time:
                    marker = _restamped(marker, offset, now, now)
                self._write(marker, offset, offset, now, now)
                if not commit and entry is not None and entry.current_txn_first_offset != NO_OFFSET:
                    self._aborting_first_offset = entry.current_txn_first_offset
                try:
                    first = producers.apply_marker(
                        producer_id, producer_epoch, coordinator_epoch, now, offset
                    )
                    if first is not None and not commit:
                        try:
                            self._segments[-1].txn_index.append(
                                aborted_txn(producers, producer_id, first, offset)
                            )
                        except OSError as error:
                            self._fail(error)
                    self._log_end_offset = offset + 1
                finally:
                    self._aborting_first_offset = None
                # The new log end, and the LSO past the transaction the marker ends.
                self._append_signal.bump()
            if self._durability == "always" or (sync and self._durability == "commit"):
                self._group_sync.sync_through(offset + 1)
            return offset
        except KafkaStorageError:
            raise
        except OSError as error:
            raise self._storage_failure(error, writing=True) from error

    def _duplicate(self, first_offset: int, last_offset: int, timestamp: int) -> AppendInfo:
        """The answer to a retried batch: its original offsets. Under durability="always" the
        retry returns only once the original is durable, as its first append would have."""
        if self._durability == "always":
            self._group_sync.sync_through(last_offset + 1)
        append_time = timestamp if self.config.log_append_time else -1
        return AppendInfo(first_offset, last_offset, append_time, True)

    def active_producers(self) -> list[ActiveProducer]:
        """A copy of every producer this partition keeps state for (Kafka's DescribeProducers),
        taken under the partition lock: one consistent moment. Any thread."""
        with self._lock:
            return active_producers(self._producers.table)

    @property
    def producer_state(self) -> ProducerStateTable:
        """The producer-state table (read it under no lock only in tests)."""
        return self._producers.table

    def _write(
        self, batch: Buffer, base_offset: int, last_offset: int, max_timestamp: int, now: int
    ) -> None:
        """Write a batch whose offsets are assigned (under the lock) as the active segment's
        next batch, its base offset and leader epoch stamped on the way (LogSegment's
        append_stamped), rolling first if the active segment cannot take it. The caller
        publishes the new log end once the producer state knows the batch (a reader's LSO
        must not pass an open transaction's first batch). The active segment is always in
        _unsynced (every roll and sync keeps it there), so nothing is added to it here."""
        hook = crashpoints.HOOK
        try:
            position = self._segments[-1].append_stamped(
                batch, base_offset, last_offset, max_timestamp, now, hook
            )
            if position == ROLL_FIRST:
                self._roll(self._log_end_offset).append_stamped(
                    batch, base_offset, last_offset, max_timestamp, now, hook, False
                )
        except KafkaStorageError:
            raise  # a failed roll, stopped already
        except OSError as error:
            # The bytes may be half written: stop accepting writes (docs/design.md fail-stop);
            # recovery at the next open cuts the torn batch.
            self._fail(error)

    def _roll(self, base_offset: int) -> LogSegment:
        active = self._segments[-1]
        try:
            active.on_become_inactive()
            if self._durability != "none":
                # The trimmed indexes must be durable before any recovery point covers this
                # segment: a segment below the recovery point is never rescanned. ("none"
                # syncs only at close, and its recovery point never moves before that.)
                active.offset_index.flush()
                active.time_index.flush()
                active.txn_index.flush()
                # Synced, so closed: a cold segment keeps one descriptor, its .log's
                # (docs/design.md "Files and file descriptors"). Under "none" they stay
                # open until close syncs them, or the next open.
                active.release_indexes()
            segment = LogSegment(
                self.fs, self.directory, base_offset, self.config, created_ms=self._clock_ms()
            )
            # Kafka snapshots producer state at every roll, at the new segment's base: a
            # later open replays at most the segments after it.
            self._producers.table.map_end_offset = base_offset
            self._producers.take_snapshot()
            crashpoints.hit("snapshot.after")
            self.fs.sync_dir(self.directory)
            crashpoints.hit("roll.after")
        except OSError as error:
            self._fail(error)
        self._segments = [*self._segments, segment]
        self._bases = [*self._bases, base_offset]
        self._unsynced.add(self._takes_appends(segment))
        return segment

    def _takes_appends(self, segment: LogSegment) -> LogSegment:
        """`segment`, which appends now go to. Under "commit" and "always", where appends
        are fsynced as they come, they extend its .log ahead in limits.preallocate_bytes
        steps, so those fsyncs need not make a new file length durable; the roll and close
        cut it back (LogSegment.cut_preallocation)."""
        if self._durability != "none":
            segment.preallocate_bytes = limits.preallocate_bytes
        return segment

    def roll(self) -> None:
        """Start a new segment at the log end (no-op if the active segment is empty)."""
        with self._storage(writing=True), self._lock:
            self._check_writable()
            if self._segments[-1].size > 0:
                self._roll(self._log_end_offset)

        # --- durability ------------------------------------------------------------------------

    def flush_through(self, offset: int) -> None:
        """Return once everything below `offset` is durable (group commit): what a writer
        that needs only its own appends durable waits for."""
        with self._storage(writing=True):
            self._group_sync.sync_through(offset)

    def flush(self) -> None:
        """Return once everything appended so far is durable (group commit)."""
        with self._storage(writing=True):
            self._group_sync.sync_through(self._log_end_offset)

    def _sync_unsynced(self) -> None:
        with self._lock:
            active = self._segments[-1]
            segments = None  # the active segment alone: a commit's usual case
            if len(self._unsynced) > 1 or active not in self._unsynced:
                segments, self._unsynced = list(self._unsynced), {active}
        if crashpoints.ARMED:  # two calls saved per sync when no point is armed
            crashpoints.hit("fsync.before")
        if segments is None:
            active.flush(indexes=False)
        else:
            for segment in sorted(segments, key=lambda s: s.base_offset):
                # The active segment's indexes are rebuilt by recovery (LogSegment.flush);
                # one rolled meanwhile had them synced by the roll.
                segment.flush(indexes=segment is not active)
        if crashpoints.ARMED:
            crashpoints.hit("fsync.after")

    def _storage(self, writing: bool) -> _StorageGuard:
        """Turn an I/O error into KafkaStorageError; a write error also stops the partition."""
        return self._write_guard if writing else self._read_guard

    def _storage_failure(self, error: OSError, *, writing: bool) -> KafkaStorageError:
        """The KafkaStorageError a public method raises for an I/O error (other than a
        KafkaStorageError, which passes unwrapped); when writing, the failure also stops the
        partition (fail-stop)."""
        failure = KafkaStorageError(f"{self.topic}-{self.partition}: {error}")
        if writing:
            self._group_sync.fail(failure)
        return failure

    def fail_stop(self, failure: KafkaStorageError) -> None:
        """Stop accepting writes (a storage failure elsewhere in the broker)."""
        self._group_sync.fail(failure)

    def _fail(self, error: OSError) -> None:
        failure = KafkaStorageError(f"write to {self.topic}-{self.partition} failed: {error}")
        self._group_sync.fail(failure)
        raise failure from error

    def _check_writable(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"{self.topic}-{self.partition} is closed")
        self._group_sync.check()

    # --- read ------------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int = 1 << 20,
        isolation_level: str = "read_committed",
    ) -> FetchResult:
        """Whole batches from the one holding `offset`, up to the high watermark
        (read_uncommitted) or the last stable offset (read_committed), at most max_bytes but
        at least one batch. OffsetOutOfRangeError outside [log start, log end];
        CorruptRecordError where the segment bytes cannot be the batches they must be.
        The records are a read-only view into the mapped segment, not a copy, and stay
        readable for as long as the caller keeps them (module docstring). Thread-safe."""
        if isolation_level not in ISOLATION_LEVELS:
            raise ValueError(f"isolation_level must be one of {ISOLATION_LEVELS}")
        # What _storage(writing=False) does, spelled out: a read's hot path saves entering
        # and leaving a context manager.
        try:
            while True:
                truncations = self._truncations
                try:
                    return self._read(offset, max_bytes, isolation_level)
                except CorruptRecordError:
                    if self._truncations == truncations:
                        raise
                    # A truncation cut the bytes this read was looking at: read again.
        except KafkaStorageError:
            raise
        except OSError as error:
            raise KafkaStorageError(f"{self.topic}-{self.partition}: {error}") from error

    def _read(self, offset: int, max_bytes: int, isolation_level: str) -> FetchResult:
        # The log end first: segments and sizes are published before the log end moves past
        # them, so everything below `end` lies in the segments captured after it. The LSO is
        # read before the log end too: it never passes the end read after it.
        start = self._log_start_offset
        stable = self.last_stable_offset
        end = self._log_end_offset
        published = Published(start, stable, end, self._segments, self._bases)
        if not start <= offset <= end:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{start}, {end}] of {self.topic}-{self.partition}"
            )
        return read_published(published, offset, max_bytes, isolation_level == "read_committed")

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """The first record with timestamp >= timestamp_ms: (offset, timestamp), or None."""
        with self._storage(writing=False):
            for segment in self._segments:
                if segment.max_timestamp < timestamp_ms and segment is not self._segments[-1]:
                    continue
                found = segment.find_offset_by_timestamp(timestamp_ms, self._log_start_offset)
                if found is not None:
                    return found
            return None

    def largest_timestamp(self) -> tuple[int, int] | None:
        """The largest record timestamp and the offset it is stamped at (the last offset of
        the first batch holding it, as the segment's time index records it; Kafka's
        ListOffsets MAX_TIMESTAMP, KIP-734), or None when no record has a timestamp."""
        with self._storage(writing=False):
            found: tuple[int, int] | None = None
            for segment in self._segments:
                if segment.max_timestamp >= 0 and (
                    found is None or segment.max_timestamp > found[0]
                ):
                    found = (segment.max_timestamp, segment.offset_of_max_timestamp)
            return found

        # --- retention, truncation, lifecycle --------------------------------------------------

    def delete_retained_segments(self) -> int:
        """Delete whole segments past retention.ms or beyond retention.bytes (never the only
        one); the log start offset moves to the next segment's base. Returns segments
        deleted."""
        with self._storage(writing=True), self._lock:
            self._check_writable()
            now = self._clock_ms()
            self._close_retired(now)
            doomed = self._expired_segments(now)
            if doomed and doomed[-1] is self._segments[-1]:
                self._roll(self._log_end_offset)
            for segment in doomed:
                self._retire(segment, now)
            if doomed:
                self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
            return len(doomed)

    def delete_records(self, offset: int) -> int:
        """Kafka's DeleteRecords: move the log start up to `offset` (-1, Kafka's OFFSET_END:
        the high watermark); an offset at or below it changes nothing. The log start is
        durable (the broker's log-start checkpoint) before this returns; the whole segments
        below it are deleted now, or, after a crash, by the next retention pass (the open
        believes the checkpoint, docs/format.md §9.1). Readers below it then meet
        OffsetOutOfRangeError (a consumer resets by auto.offset.reset); read_committed
        readers keep the LSO rule (never below the log start). Returns the log start.
        OffsetOutOfRangeError for an offset past the high watermark or below -1, nothing
        changed; KafkaStorageError (fail-stop) when the checkpoint cannot be written."""
        with self._storage(writing=True), self._lock:
            self._check_writable()
            target = self.high_watermark if offset == -1 else offset
            if not 0 <= target <= self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records of {self.topic}-{self.partition} below offset "
                    f"{offset}: outside [0, {self.high_watermark}] (the high watermark)"
                )
            if target <= self._log_start_offset:
                return self._log_start_offset
            self._log_start_offset = target
            if self._persist_log_start is not None:
                try:
                    self._persist_log_start()
                except OSError as error:
                    self._fail(error)
            crashpoints.hit("records.deleted")
            self.delete_retained_segments()
            return self._log_start_offset

    def reconfigure(self, config: LogConfig) -> None:
        """Take the topic's changed config (Broker.alter_topic_config): the next append checks
        max.message.bytes and the timestamp bounds against it, the active segment rolls by
        its segment.bytes and segment.ms and indexes by index.interval.bytes from its next
        append, retention applies it at its next pass. The active segment keeps the index
        size it was made with (segment.index.bytes sizes the next segments' indexes)."""
        with self._lock:
            self.config = config
            active = self._segments[-1]
            active.config = dataclasses.replace(
                config, segment_index_bytes=active.config.segment_index_bytes
            )

    def _expired_segments(self, now: int) -> list[LogSegment]:
        # First the segments wholly below the log start (delete_records moved it, maybe
        # before a crash): never the active one.
        doomed = [
            segment
            for segment, following in zip(self._segments, self._bases[1:], strict=False)
            if following <= self._log_start_offset
        ]
        retention_ms, retention_bytes = self.config.local_retention()
        for segment in self._segments[len(doomed) :]:
            if segment.size == 0 or retention_ms < 0:
                break
            if now - segment.largest_timestamp <= retention_ms:
                break
            doomed.append(segment)
        if retention_bytes >= 0:
            total = sum(segment.size for segment in self._segments)
            for segment in self._segments[len(doomed) : -1]:
                if total - sum(s.size for s in doomed) - segment.size < retention_bytes:
                    break
                doomed.append(segment)
        if self.config.remote_storage_enable:
            # Never a segment the archive does not hold whole (its end past the archived end),
            # but those wholly below the log start, whose records are deleted anyway.
            bases = [*self._bases[1:], self._log_end_offset]
            doomed = [
                segment
                for segment, end in zip(doomed, bases, strict=False)
                if end <= max(self.archived_end, self._log_start_offset)
            ]
        return doomed

    def _retire(self, segment: LogSegment, now: int) -> None:
        self._segments = [s for s in self._segments if s is not segment]
        self._bases = [s.base_offset for s in self._segments]
        self._unsynced.discard(segment)
        try:
            segment.unlink_files()
            # Kafka deletes a segment's producer snapshot with it. The table keeps the
            # producers (until they expire), so a retry of a batch retention deleted is still
            # recognized.
            self._producers.delete_snapshot(segment.base_offset)
            self.fs.sync_dir(self.directory)
            crashpoints.hit("retention.after")
        except OSError as error:
            self._fail(error)
        self._retired.append((segment, now))

    def _close_retired(self, now: int) -> None:
        keep = []
        for segment, retired_at in self._retired:
            if now - retired_at >= limits.retired_segment_grace_ms or self._closed:
                segment.close_files()
            else:
                keep.append((segment, retired_at))
        self._retired = keep

    # --- compaction (eoslog.log.compactor) ----------------------------------------------------

    def raise_cleaned_end(self, offset: int) -> None:
        """Let gaps lie below `offset` (segments wholly below it are `compacted`), and make
        that durable (the cleaner-offset-checkpoint) before returning: the cleaner calls it
        before it swaps in a cleaned segment ending at or below `offset`. Lower values
        change nothing. KafkaStorageError (fail-stop) when the checkpoint cannot be written."""
        with self._storage(writing=True), self._lock:
            self._check_writable()
            if offset <= self.cleaned_end:
                return
            self.cleaned_end = offset
            mark_compacted(self._segments, offset)
            if self._persist_cleaned_end is not None:
                try:
                    self._persist_cleaned_end()
                except OSError as error:
                    self._fail(error)
            crashpoints.hit("cleaner.checkpoint.after")

    def swap_segment(
        self, old: LogSegment, replace_files: Callable[[], None], open_new: Callable[[], LogSegment]
    ) -> bool:
        """Replace the inactive segment `old` with the files the cleaner wrote: under the
        partition lock, if `old` is still here, `replace_files` (the renames); then, off the
        lock, `open_new` (the new segment and its indexes, published to nobody yet); then,
        under the lock again, the new segment takes the old one's place, which keeps its open
        files for reads in flight (limits.retired_segment_grace_ms). Readers meanwhile read
        the old segment's files. False when retention took `old` before either step (nothing
        published; a truncation below cleaned_end is refused). An OSError stops the
        partition."""
        with self._storage(writing=True), self._lock:
            self._check_writable()
            if old not in self._segments[:-1]:
                return False
            try:
                replace_files()
            except OSError as error:
                self._fail(error)
        try:
            new = open_new()
        except OSError as error:
            with self._lock:
                self._fail(error)
        with self._storage(writing=True), self._lock:
            if old not in self._segments[:-1] or self._closed:
                # Retention took `old` (and unlinked its names) meanwhile: what open_new made
                # under them goes too, or a reopen would find a segment below the log start.
                new.delete()
                return False
            now = self._clock_ms()
            self._segments = [new if s is old else s for s in self._segments]
            self._unsynced.discard(old)
            self._retired.append((old, now))
            self._close_retired(now)
            return True

    def drop_emptied_segment(self, segment: LogSegment) -> bool:
        """Delete `segment` if cleaning left it empty, it lies wholly below cleaned_end and is
        neither the first segment (its base is the log start) nor the active one; whether it
        was deleted. Its offsets become a gap between its neighbours, legal below cleaned_end
        as any other the cleaner leaves, so a crash before, during or after the unlinks reads
        the same log (the unlinks are retention's: the derived files, then the .log, then
        the directory synced). An OSError stops the partition."""
        with self._storage(writing=True), self._lock:
            self._check_writable()
            inactive = self._segments[1:-1]
            following = self._bases[self._segments.index(segment) + 1] if segment in inactive else 0
            if segment not in inactive or segment.size != 0 or following > self.cleaned_end:
                return False
            self._retire(segment, self._clock_ms())
            return True

    def producer_last_offsets(self) -> dict[int, int]:
        """The last offset of each known producer's last data batch (the batches the cleaner
        keeps, emptied if need be, so that a reopen finds the producer again)."""
        with self._lock:
            table = self._producers.table
            found = {}
            for producer_id in table.producer_ids():
                entry = table.entry(producer_id)
                if entry is not None and entry.last_data_offset >= 0:
                    found[producer_id] = entry.last_data_offset
            return found

    def remove_expired_producers(self) -> int:
        """Forget producers idle past producer.id.expiration.ms without an open transaction
        (docs/format.md §8.5); the maintenance pass calls it. Returns how many."""
        with self._lock:
            return self._producers.remove_expired(self._clock_ms())

    def rebuild_suspect_indexes(self) -> int:
        """Rebuild the indexes of segments where a lookup met an entry that contradicts the
        .log (LogSegment.index_suspect); the maintenance pass calls it. Returns how many."""
        with self._storage(writing=True), self._lock:
            self._check_writable()
            suspects = [segment for segment in self._segments if segment.index_suspect]
            for segment in suspects:
                try:
                    segment.rebuild_indexes()
                except OSError as error:
                    self._fail(error)
            return len(suspects)

    def truncate_to(self, offset: int) -> None:
        """Remove everything at and after offset (a batch straddling it goes entirely).

        Crash safety: before any file is cut, the recovery point is lowered to the new log end
        and the checkpoint holding it is made durable. A power loss midway then leaves a
        segment that ends early, or later segments still present, all past the recovery
        point, where recovery cuts them as a torn tail. With the old recovery point still on
        disk, the same image would read as durable records missing and refuse to open.
        (While a view a read returned is alive, the active segment's .log is replaced by a
        synced, renamed copy of its kept prefix instead of cut in place: a crash then leaves
        the old or the new file whole, both past the lowered recovery point, and at most a
        stray temp file, which open deletes.)

        OffsetOutOfRangeError, changing nothing, for an offset below the cleaner's range end
        (cleaned_end): a segment with the cleaner's gaps would become the active one, where
        gaps are damage."""
        with self._storage(writing=True), self._lock:
            self._check_writable()
            if offset >= self._log_end_offset:
                return
            if offset < self.cleaned_end:
                raise OffsetOutOfRangeError(
                    f"cannot truncate {self.topic}-{self.partition} to offset {offset}: below "
                    f"{self.cleaned_end}, where the log cleaner has cleaned"
                )
            now = self._clock_ms()
            self._truncations += 1
            index = max(bisect.bisect_right(self._bases, offset) - 1, 0)
            straddling = self._segments[index].translate_offset(offset)
            new_end = offset if straddling is None else min(offset, straddling.base_offset)
            self._group_sync.lower(max(new_end, self._log_start_offset))
            if self._persist_recovery_point is not None:
                try:
                    self._persist_recovery_point()
                except OSError as error:
                    self._fail(error)
            # Highest first: a crash midway leaves a shorter log, never a later segment
            # without the one before it.
            doomed = [s for s in self._segments[1:] if s.base_offset >= offset]
            for segment in reversed(doomed):
                self._retire(segment, now)
            try:
                self._segments[-1].truncate_to(offset, now)
                self._segments[-1].flush()
            except OSError as error:
                self._fail(error)
            self._unsynced.add(self._takes_appends(self._segments[-1]))
            # The log now ends where its data ends: a batch straddling `offset` went entirely.
            self._log_end_offset = max(self._segments[-1].next_offset(), self._log_start_offset)
            # Offsets at and past the new end will be written again: they are not durable.
            self._group_sync.lower(self._log_end_offset)
            try:
                # Producer state back to the new end: the newest snapshot at or below it,
                # then a replay (Kafka's truncateAndReload).
                self._producers.rebuild(
                    self._segments, self._log_start_offset, self._log_end_offset, now
                )
            except OSError as error:
                self._fail(error)

    def close(self) -> None:
        """Flush, add final index entries, trim indexes and close the files. A partition
        whose storage failed closes its files without writing and raises the failure, so
        the broker does not mark the directory cleanly shut down (recovery runs next time)."""
        with self._storage(writing=True), self._lock:
            if self._closed:
                return
            self._closed = True
            failure = self._group_sync.failure
            if failure is None:
                try:
                    self.flush()
                    self._close_retired(self._clock_ms())
                    # The snapshot at the log end: the next open loads it and replays nothing.
                    self._producers.table.map_end_offset = self._log_end_offset
                    self._producers.take_snapshot()
                    for segment in self._segments:
                        segment.close()
                    return
                except (OSError, KafkaStorageError) as error:
                    failure = self._group_sync.failure or KafkaStorageError(str(error))
            self._retired.extend((segment, 0) for segment in self._segments)
            for segment, _ in self._retired:
                with contextlib.suppress(OSError, ValueError):
                    segment.close_files()
            raise failure
