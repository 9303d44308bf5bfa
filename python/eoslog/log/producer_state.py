"""Producer state of one partition and its snapshot files (docs/format.md §8.3-§8.5; Kafka's
ProducerStateManager).

The table itself (eoslog._ext.producer_state) checks and records appends. This module owns
the `<20-digit offset>.snapshot` files beside the segments: it writes them (on roll, on close,
after a rebuild), loads the newest valid one at open (a corrupt one is deleted and the next
older tried), deletes those outside the log, and replays the batches after a snapshot into the
table. Snapshots are an optimization, never a source of truth: a missing or corrupt snapshot
only makes the replay longer, so they are written without fsync (a torn one fails its CRC).
A snapshot whose entries the batch headers contradict (snapshot_disagreement) is discarded
like a corrupt one. A replay that meets a transaction marker naming the wrong producer
(damaged or forged under a valid CRC) never lets it turn committed records into aborted ones
(_end_unmarked_transaction).

Thread safety: the partition's writer calls everything, under the partition lock.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Iterable
from typing import NamedTuple, Protocol

import numpy as np

from eoslog import limits
from eoslog._ext.producer_state import (
    NO_OFFSET,
    SNAPSHOT_ENTRY_BYTES,
    SNAPSHOT_HEADER_BYTES,
    SNAPSHOT_VERSION,
    ProducerStateTable,
    last_sequence_of,
)
from eoslog.errors import CorruptRecordError, CorruptSnapshotError
from eoslog.fs import FileHandle, FileSystem, create_temporary
from eoslog.log.segment import LogSegment
from eoslog.log.segment_reads import (
    SNAPSHOT_SUFFIX,
    batch_lookup,
    file_name,
    parse_file_name,
)
from eoslog.log.txn_index import AbortedTxn, BatchAt, TransactionIndex
from eoslog.record import codec, control, layout

_log = logging.getLogger(__name__)


def marker_type(key: bytes | None) -> int:
    """The type of a control record (its key): control.ABORT (0) or control.COMMIT (1).
    CorruptRecordError for a key too short to hold version and type (bad bytes, which a CRC
    recomputed by a forger does not make ours)."""
    found = control.read_type(key)
    if found is None:
        raise CorruptRecordError(
            f"a control record's key holds {0 if key is None else len(key)} bytes, "
            f"fewer than the {control.KEY.size} of its version and type"
        )
    return found


def aborted_txn(
    table: ProducerStateTable, producer_id: int, first_offset: int, marker_offset: int
) -> AbortedTxn:
    """The .txnindex entry of a transaction an ABORT marker at marker_offset just ended
    (docs/format.md §6.1): its last stable offset is the first offset of the oldest transaction
    still open, or the marker's offset + 1."""
    first_unstable = table.first_unstable_offset()
    stable = marker_offset + 1 if first_unstable is None else first_unstable
    return AbortedTxn(producer_id, first_offset, marker_offset, stable)


class ActiveProducer(NamedTuple):
    """One producer a partition keeps state for, copied out of the table (Kafka's
    DescribeProducers answer for a partition): its epoch, the sequence of its last batch
    (NO_SEQUENCE, -1, if it wrote only markers here), the timestamp of its last batch or
    marker, the coordinator epoch of its last marker (-1 before any) and the first offset of
    its open transaction (NO_OFFSET, -1, when none is open)."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


def active_producers(table: ProducerStateTable) -> list[ActiveProducer]:
    """Every producer the table keeps, by producer id (the caller holds the partition lock,
    so the copies are one consistent moment)."""
    found = []
    for producer_id in sorted(table.producer_ids()):
        entry = table.entry(producer_id)
        assert entry is not None, "producer_ids lists only entries"
        found.append(
            ActiveProducer(
                producer_id,
                entry.epoch,
                entry.last_sequence,
                entry.last_timestamp,
                entry.coordinator_epoch,
                entry.current_txn_first_offset,
            )
        )
    return found


# The snapshot header (docs/format.md §8.3): version int16, CRC-32C uint32, entry count int32.
_SNAPSHOT_HEADER = struct.Struct(">hIi")
# Whole entries per read of a snapshot after its header.
_SNAPSHOT_CHUNK_ENTRIES = limits.file_read_chunk_bytes // SNAPSHOT_ENTRY_BYTES


def _snapshot_corrupt(path: str, position: int, reason: str) -> CorruptSnapshotError:
    return CorruptSnapshotError(
        f"snapshot {path} at byte {position}: {reason}", position=position, reason=reason
    )


def read_snapshot(handle: FileHandle, path: str) -> bytes:
    """The bytes of the snapshot file open as `handle`, for ProducerStateTable.load_snapshot
    (which checks the CRC), read so that a sparse or lying file costs at most one chunk over
    its real contents: the header first, whose version and entry count must agree with the
    file's size before anything else is read; then the entries limits.file_read_chunk_bytes
    at a time, each chunk refused if it names a producer twice (a run of zeros, what a sparse
    file reads as, names producer 0 again and again). CorruptSnapshotError, naming the file and
    the byte, for anything wrong; OSError from the file system."""
    size = handle.size()
    header = handle.pread(SNAPSHOT_HEADER_BYTES, 0)
    if len(header) < SNAPSHOT_HEADER_BYTES:
        raise _snapshot_corrupt(path, len(header), f"a snapshot of {size} bytes is truncated")
    version, _, count = _SNAPSHOT_HEADER.unpack(header)
    if version != SNAPSHOT_VERSION:
        raise _snapshot_corrupt(path, 0, f"snapshot version {version} is not supported")
    if count < 0 or size != SNAPSHOT_HEADER_BYTES + count * SNAPSHOT_ENTRY_BYTES:
        raise _snapshot_corrupt(
            path, 6, f"a snapshot of {size} bytes cannot hold the {count} entries it claims"
        )
    pieces = [header]
    position = SNAPSHOT_HEADER_BYTES
    while position < size:
        want = min(_SNAPSHOT_CHUNK_ENTRIES * SNAPSHOT_ENTRY_BYTES, size - position)
        chunk = handle.pread(want, position)
        if len(chunk) < want:
            raise _snapshot_corrupt(path, position + len(chunk), "the file ends early")
        producer_ids = np.ndarray(
            (want // SNAPSHOT_ENTRY_BYTES,),
            dtype=">i8",
            buffer=chunk,
            strides=(SNAPSHOT_ENTRY_BYTES,),
        )
        if len(np.unique(producer_ids)) != len(producer_ids):
            raise _snapshot_corrupt(path, position, "a producer appears twice in these entries")
        pieces.append(chunk)
        position += want
    return b"".join(pieces)


class AbortedTxnSink(Protocol):
    """Where replay puts the entries of the ABORT markers it passes: a TransactionIndex (a
    rebuild), or a list (an offline reader collecting them; eoslog.log.partition_view)."""

    def append(self, txn: AbortedTxn, /) -> None: ...


class OrphanMarker(NamedTuple):
    """A COMMIT or ABORT marker a replay met for a producer with no transaction open in the
    partition: harmless when its transaction had no data here, a sign of damage otherwise."""

    offset: int
    producer_id: int
    epoch: int
    control_type: int


def snapshot_disagreement(
    table: ProducerStateTable, snapshot_offset: int, batch_at: BatchAt, log_start_offset: int
) -> str | None:
    """Why the log contradicts a snapshot loaded into `table` (taken at snapshot_offset), or
    None when it agrees. The one check the owner and offline readers make before believing
    a snapshot: it must be taken at a batch boundary, and each producer's newest batch and
    open transaction must be the batches the log holds at those offsets, with the same
    producer, last sequence and an epoch at most one marker above (every TV2 end bumps the
    epoch once). Entries below the log start (retention removed their batch) are not
    compared. One batch lookup per producer."""
    boundary = batch_at(snapshot_offset)
    if boundary is not None and boundary.base_offset != snapshot_offset:
        return f"offset {snapshot_offset} is inside the batch at {boundary.base_offset}"
    for producer_id in table.producer_ids():
        entry = table.entry(producer_id)
        assert entry is not None, "producer_ids lists only entries"
        last = entry.last_data_offset
        if last >= snapshot_offset or entry.current_txn_first_offset >= snapshot_offset:
            return f"producer {producer_id} has a batch at or past the snapshot's offset"
        if last != NO_OFFSET and last >= log_start_offset:
            found = batch_at(last)
            if (
                found is None
                or found.last_offset != last
                or found.producer_id != producer_id
                or found.control_type is not None
                or last_sequence_of(found.base_sequence, last - found.base_offset)
                != entry.last_sequence
                or not found.producer_epoch <= entry.epoch <= found.producer_epoch + 1
            ):
                return (
                    f"producer {producer_id}: the batch ending at offset {last} is not its "
                    f"batch with last sequence {entry.last_sequence} at epoch {entry.epoch}"
                )
        first = entry.current_txn_first_offset
        if first != NO_OFFSET and first >= log_start_offset:
            found = batch_at(first)
            if (
                found is None
                or found.base_offset != first
                or found.producer_id != producer_id
                or not found.transactional
                or found.control_type is not None
                or found.producer_epoch != entry.epoch
            ):
                return f"producer {producer_id}: offset {first} starts no transaction of it"
    return None


class _KeptIndexSink:
    """A rebuild's sink for a segment's ABORT entries: a kept index already holds some."""

    def __init__(self, index: TransactionIndex) -> None:
        self.append = index.append_replayed


class ProducerStateManager:
    """The producer-state table of a partition directory and its snapshot files."""

    def __init__(self, fs: FileSystem, directory: str, expiration_ms: int) -> None:
        self.fs = fs
        self.directory = directory
        self.expiration_ms = expiration_ms
        self.table = ProducerStateTable()
        # Markers the replays met for producers with no open transaction here (reported),
        # the newest limits.orphan_markers_kept_max.
        self.orphan_markers: deque[OrphanMarker] = deque(maxlen=limits.orphan_markers_kept_max)

    # --- snapshot files --------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        """The offsets of the snapshot files, sorted. Only `<20 digits>.snapshot` names count
        (segment_reads.parse_file_name): a stray such as `abc.snapshot` is neither loaded nor
        deleted (recovery reports it)."""
        offsets = []
        for name in self.fs.listdir(self.directory):
            parsed = parse_file_name(name) if name.endswith(SNAPSHOT_SUFFIX) else None
            if parsed is not None and parsed[1] == SNAPSHOT_SUFFIX:
                offsets.append(parsed[0])
        return sorted(offsets)

    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.directory, file_name(offset, SNAPSHOT_SUFFIX))

    def take_snapshot(self) -> None:
        """Write the table at its map end offset, unless that snapshot exists (Kafka's
        takeSnapshot skips an unchanged offset). Temp file then rename: a crash leaves the
        old set of files or the new one, and at worst a torn file its CRC rejects."""
        offset = self.table.map_end_offset
        path = self.snapshot_path(offset)
        if self.fs.exists(path):
            return
        temporary = path + ".tmp"
        handle = create_temporary(self.fs, temporary)
        try:
            handle.pwrite(self.table.snapshot(), 0)
        finally:
            handle.close()
        self.fs.rename(temporary, path)

    def delete_snapshot(self, offset: int) -> None:
        if self.fs.exists(self.snapshot_path(offset)):
            self.fs.unlink(self.snapshot_path(offset))

    def delete_snapshots_outside(self, log_start_offset: int, log_end_offset: int) -> None:
        """Kafka's truncateAndReload keeps snapshots in (log start, log end] only."""
        for offset in self.snapshot_offsets():
            if offset <= log_start_offset or offset > log_end_offset:
                self.delete_snapshot(offset)

    def remove_stray_snapshots(self, segment_bases: Iterable[int]) -> None:
        """Delete snapshots that match no segment base, except the largest if it lies above
        every base: the snapshot a clean shutdown wrote at the log end (Kafka's
        removeStraySnapshots)."""
        bases = set(segment_bases)
        offsets = self.snapshot_offsets()
        keep_largest = bool(offsets) and offsets[-1] > max(bases, default=-1)
        for offset in offsets[:-1] if keep_largest else offsets:
            if offset not in bases:
                self.delete_snapshot(offset)

    def read_snapshot_file(self, offset: int) -> bytes:
        """The bytes of the snapshot at offset, read in bounded chunks (read_snapshot).
        FileNotFoundError if it is missing; CorruptSnapshotError; OSError."""
        path = self.snapshot_path(offset)
        handle = self.fs.open(path, read_only=True)
        try:
            return read_snapshot(handle, path)
        finally:
            handle.close()

    def load_newest_snapshot(
        self,
        log_start_offset: int,
        log_end_offset: int,
        at_most: int | None = None,
        batch_at: BatchAt | None = None,
    ) -> int:
        """Load the newest valid snapshot at or below the log end (and at_most, if given)
        into the table (corrupt ones, and with batch_at those the log contradicts
        (snapshot_disagreement), are deleted, then the next older is tried); with none,
        start empty at the log start. Returns the offset replay must start from (the
        table's map end offset)."""
        self.delete_snapshots_outside(log_start_offset, log_end_offset)
        bound = log_end_offset if at_most is None else min(at_most, log_end_offset)
        for offset in reversed(self.snapshot_offsets()):
            if offset > bound:
                continue
            try:
                self.table.load_snapshot(self.read_snapshot_file(offset), offset)
            except CorruptSnapshotError:
                self.delete_snapshot(offset)
                continue
            why = None
            if batch_at is not None:
                try:
                    why = snapshot_disagreement(self.table, offset, batch_at, log_start_offset)
                except CorruptRecordError as error:
                    why = str(error)
            if why is not None:
                # A derived file is never trusted over the log: rebuild from an older one.
                _log.warning(
                    "%s disagrees with the log (%s): discarded, state rebuilt by replay",
                    self.snapshot_path(offset),
                    why,
                )
                self.delete_snapshot(offset)
                continue
            return offset
        self.table.clear(log_start_offset)
        return log_start_offset

    # --- replay ----------------------------------------------------------------------------

    def rebuild(
        self,
        segments: list[LogSegment],
        log_start_offset: int,
        log_end_offset: int,
        now_ms: int,
        txn_index_from: int | None = None,
        crc_checked_from: int | None = None,
    ) -> None:
        """Bring the table to the log end (docs/format.md §8.4): the newest valid snapshot, then
        the batches after it, replayed; expired producers dropped; a snapshot at the end
        when anything was replayed. txn_index_from: the base of the first segment whose
        transaction index recovery reset; the replay then starts at or below it and writes
        the ABORT entries of those segments again (Kafka's recoverSegment does the same).

        A replayed batch below crc_checked_from (where recovery checked every batch; None:
        nowhere) has its CRC checked first: the replay believes header fields, and a damaged
        one (a producer id, say) would make a transaction that never was, holding the LSO
        and every read_committed reader at it without an error. CorruptRecordError then,
        naming the file and byte."""
        start = self.load_newest_snapshot(
            log_start_offset, log_end_offset, txn_index_from, batch_lookup(segments)
        )
        self.remove_expired(now_ms)
        if start >= log_end_offset:
            return  # the snapshot is at the log end (a clean close wrote it), or the log is empty
        for index, segment in enumerate(segments):
            following = segments[index + 1].base_offset if index + 1 < len(segments) else None
            if following is not None and following <= start:
                continue
            rows = segment.scan_from(segment.scan_position(start))
            rows = rows[rows["base_offset"] >= start]
            unchecked = (
                rows if crc_checked_from is None else rows[rows["base_offset"] < crc_checked_from]
            )
            for row in unchecked:
                if not segment.batch_crc_matches(int(row["position"]), int(row["size"])):
                    raise segment.corruption(int(row["position"]), "its CRC does not match")
            controls = rows[(rows["attributes"] & layout.CONTROL_MASK) != 0]
            batches = {
                int(row["base_offset"]): segment.read_bytes(int(row["position"]), int(row["size"]))
                for row in controls
            }
            rebuilding = txn_index_from is not None and segment.base_offset >= txn_index_from
            sink = _KeptIndexSink(segment.txn_index) if rebuilding else None
            self.replay(rows, batches, sink, compacted=segment.compacted)
        self.table.map_end_offset = log_end_offset
        self.take_snapshot()

    def replay(
        self,
        rows: np.ndarray,
        batches: dict[int, bytes],
        txn_index: AbortedTxnSink | None,
        *,
        compacted: bool = False,
    ) -> None:
        """Apply batches already in the log to the table without checks (docs/format.md §8.4,
        REPLICATION origin). rows: scan.BATCH_INFO rows in log order; batches: the bytes of
        each control batch, by its base offset (a marker's coordinator epoch and type are in
        its record); txn_index: where to write the entries of ABORT markers that end a
        transaction (a segment whose index recovery reset), or None. compacted: the rows are
        of a segment the cleaner cleaned, where a marker whose data it removed is expected."""
        table = self.table
        for row in rows:
            producer_id = int(row["producer_id"])
            last_offset = int(row["last_offset"])
            if producer_id < 0:
                table.map_end_offset = last_offset + 1
                continue
            attributes = int(row["attributes"])
            if attributes & layout.CONTROL_MASK:
                batch = batches[int(row["base_offset"])]
                record = next(iter(codec.batch_records(batch)), None)
                if record is None or record.value is None:
                    table.map_end_offset = last_offset + 1
                    continue  # an empty control batch changes no producer (testAppendEmpty…)
                coordinator_epoch = control.read_coordinator_epoch(record.value)
                if coordinator_epoch is None:
                    raise CorruptRecordError(
                        f"the control batch at offset {int(row['base_offset'])} holds a value of "
                        f"{len(record.value)} bytes, shorter than a marker's "
                        f"{control.MARKER_VALUE.size}"
                    )
                known = table.entry(producer_id) is not None
                first = table.apply_marker(
                    producer_id,
                    int(row["producer_epoch"]),
                    coordinator_epoch,
                    record.timestamp,
                    last_offset,
                )
                aborted = record.key is not None and marker_type(record.key) == control.ABORT
                if first is None:
                    self._orphan_marker(last_offset, producer_id, row, aborted, known or compacted)
                if txn_index is not None and first is not None and aborted:
                    txn_index.append(aborted_txn(table, producer_id, first, last_offset))
                continue
            if attributes & layout.TRANSACTIONAL_MASK:
                self._end_unmarked_transaction(producer_id, row)
            table.apply_append(
                producer_id,
                int(row["producer_epoch"]),
                int(row["base_sequence"]),
                last_offset - int(row["base_offset"]),
                int(row["base_offset"]),
                last_offset,
                int(row["max_timestamp"]),
                bool(attributes & layout.TRANSACTIONAL_MASK),
            )

    def _orphan_marker(
        self, offset: int, producer_id: int, row: np.void, aborted: bool, known: bool
    ) -> None:
        """Keep and report a marker that ended no transaction. One for a producer this
        partition knows is usually a marker the coordinator sent again after a crash, and one
        in a segment the cleaner cleaned ends data it removed (info); one naming a producer
        never seen here is a sign of damage (warning)."""
        marker = OrphanMarker(
            offset,
            producer_id,
            int(row["producer_epoch"]),
            control.ABORT if aborted else control.COMMIT,
        )
        self.orphan_markers.append(marker)
        _log.log(
            logging.INFO if known else logging.WARNING,
            "%s: a marker ends no open transaction in the partition: %s",
            self.directory,
            marker,
        )

    def _end_unmarked_transaction(self, producer_id: int, row: np.void) -> None:
        """A transactional batch of a producer whose open transaction began at a lower epoch:
        that transaction's marker is missing (every TV2 end bumps the epoch, and the
        coordinator writes all markers of an end before the producer may use the new epoch,
        so the marker was damaged or forged). Left alone, the producer's next ABORT would
        end both transactions as one aborted range and hide committed records. The marker
        is looked for among the orphans since the transaction's last batch: one at the new
        epoch is the damaged marker, and a COMMIT closes the transaction as committed. An
        ABORT, or no marker at all, cannot be represented safely: CorruptRecordError."""
        entry = self.table.entry(producer_id)
        epoch = int(row["producer_epoch"])
        if entry is None or entry.current_txn_first_offset == NO_OFFSET or epoch <= entry.epoch:
            return
        first = entry.current_txn_first_offset
        found = [
            marker
            for marker in self.orphan_markers
            if marker.epoch == epoch and entry.last_data_offset < marker.offset
        ]
        if len(found) != 1 or found[0].control_type != control.COMMIT:
            raise CorruptRecordError(
                f"{self.directory}: the transaction of producer {producer_id} from offset "
                f"{first} (epoch {entry.epoch}) has no marker before its next transaction's "
                f"batch at offset {int(row['base_offset'])} (epoch {epoch}); candidate "
                f"markers naming other producers: {found}"
            )
        marker = found[0]
        self.orphan_markers.remove(marker)
        _log.warning(
            "%s: the COMMIT marker at offset %d names producer %d, but ends the transaction "
            "of producer %d from offset %d: treated as that transaction's COMMIT",
            self.directory,
            marker.offset,
            marker.producer_id,
            producer_id,
            first,
        )
        self.table.apply_marker(
            producer_id, epoch, entry.coordinator_epoch, entry.last_timestamp, marker.offset
        )
        self.table.map_end_offset = int(row["base_offset"])

    def end_transactions_with_orphan_commits(self) -> None:
        """After a replay, for a reader that cannot ask the transaction coordinator (the
        owner's coordinator rewrites a lost marker from `__transaction_state`): a transaction
        still open whose COMMIT marker names another producer (an orphan at the epoch its end
        bumped to, after its last batch) is closed as committed, with a warning; otherwise
        its records would stay hidden behind it."""
        table = self.table
        map_end_offset = table.map_end_offset
        for producer_id in sorted(set(table.open_transactions().values())):
            entry = table.entry(producer_id)
            assert entry is not None, "an open transaction has a producer entry"
            found = [
                marker
                for marker in self.orphan_markers
                if marker.epoch == entry.epoch + 1 and marker.offset > entry.last_data_offset
            ]
            if len(found) != 1 or found[0].control_type != control.COMMIT:
                continue
            marker = found[0]
            self.orphan_markers.remove(marker)
            _log.warning(
                "%s: the COMMIT marker at offset %d names producer %d, but ends the open "
                "transaction of producer %d from offset %d: treated as its COMMIT",
                self.directory,
                marker.offset,
                marker.producer_id,
                producer_id,
                entry.current_txn_first_offset,
            )
            table.apply_marker(
                producer_id,
                marker.epoch,
                entry.coordinator_epoch,
                entry.last_timestamp,
                marker.offset,
            )
        table.map_end_offset = map_end_offset

    def remove_expired(self, now_ms: int) -> int:
        return self.table.remove_expired(now_ms, self.expiration_ms)
