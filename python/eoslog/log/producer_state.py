"""Producer state of one partition and its snapshot files (FORMAT.md §8.3-§8.5; Kafka's
ProducerStateManager).

The table itself (eoslog._ext.producer_state) checks and records appends. This module owns
the `<20-digit offset>.snapshot` files beside the segments: it writes them (on roll, on close,
after a rebuild), loads the newest valid one at open (a corrupt one is deleted and the next
older tried), deletes those outside the log, and replays the batches after a snapshot into the
table. Snapshots are an optimization, never a source of truth: a missing or corrupt snapshot
only makes the replay longer, so they are written without fsync (a torn one fails its CRC).

Thread safety: the partition's writer calls everything, under the partition lock.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from typing import Protocol

import numpy as np

from eoslog._ext.producer_state import ProducerStateTable
from eoslog.errors import CorruptSnapshotError
from eoslog.fs import FileSystem, create_temporary
from eoslog.log.segment import LogSegment
from eoslog.log.segment_reads import SNAPSHOT_SUFFIX, file_name, parse_file_name
from eoslog.log.txn_index import AbortedTxn
from eoslog.record import codec, layout

_CONTROL_VALUE = struct.Struct(">hi")  # version int16, coordinator epoch int32 (FORMAT.md §3)
_CONTROL_KEY = struct.Struct(">hh")  # version int16, type int16: ABORT 0, COMMIT 1
CONTROL_ABORT = layout.CONTROL_ABORT


def marker_type(key: bytes) -> int:
    """The type of a control record (its key): CONTROL_ABORT (0) or CONTROL_COMMIT (1)."""
    found: int = _CONTROL_KEY.unpack_from(key)[1]
    return found


def aborted_txn(
    table: ProducerStateTable, producer_id: int, first_offset: int, marker_offset: int
) -> AbortedTxn:
    """The .txnindex entry of a transaction an ABORT marker at marker_offset just ended
    (FORMAT.md §6.1): its last stable offset is the first offset of the oldest transaction
    still open, or the marker's offset + 1."""
    first_unstable = table.first_unstable_offset()
    stable = marker_offset + 1 if first_unstable is None else first_unstable
    return AbortedTxn(producer_id, first_offset, marker_offset, stable)


class AbortedTxnSink(Protocol):
    """Where replay puts the entries of the ABORT markers it passes: a TransactionIndex (a
    rebuild), or a list (an offline reader collecting them; eoslog.log.partition_view)."""

    def append(self, txn: AbortedTxn, /) -> None: ...


class ProducerStateManager:
    """The producer-state table of a partition directory and its snapshot files."""

    def __init__(self, fs: FileSystem, directory: str, expiration_ms: int) -> None:
        self.fs = fs
        self.directory = directory
        self.expiration_ms = expiration_ms
        self.table = ProducerStateTable()

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

    def load_newest_snapshot(
        self, log_start_offset: int, log_end_offset: int, at_most: int | None = None
    ) -> int:
        """Load the newest valid snapshot at or below the log end (and at_most, if given)
        into the table (corrupt ones are deleted, then the next older is tried); with none,
        start empty at the log start. Returns the offset replay must start from (the
        table's map end offset)."""
        self.delete_snapshots_outside(log_start_offset, log_end_offset)
        bound = log_end_offset if at_most is None else min(at_most, log_end_offset)
        for offset in reversed(self.snapshot_offsets()):
            if offset > bound:
                continue
            handle = self.fs.open(self.snapshot_path(offset), read_only=True)
            try:
                data = handle.pread(handle.size(), 0)
            finally:
                handle.close()
            try:
                self.table.load_snapshot(data, offset)
            except CorruptSnapshotError:
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
    ) -> None:
        """Bring the table to the log end (FORMAT.md §8.4): the newest valid snapshot, then
        the batches after it, replayed; expired producers dropped; a snapshot at the end
        when anything was replayed. txn_index_from: the base of the first segment whose
        transaction index recovery reset; the replay then starts at or below it and writes
        the ABORT entries of those segments again (Kafka's recoverSegment does the same)."""
        start = self.load_newest_snapshot(log_start_offset, log_end_offset, txn_index_from)
        self.remove_expired(now_ms)
        if start >= log_end_offset:
            return  # the snapshot is at the log end (a clean close wrote it), or the log is empty
        for index, segment in enumerate(segments):
            following = segments[index + 1].base_offset if index + 1 < len(segments) else None
            if following is not None and following <= start:
                continue
            rows = segment.scan_from(segment.scan_position(start))
            rows = rows[rows["base_offset"] >= start]
            controls = rows[(rows["attributes"] & layout.CONTROL_MASK) != 0]
            batches = {
                int(row["base_offset"]): segment.read_bytes(int(row["position"]), int(row["size"]))
                for row in controls
            }
            rebuilding = txn_index_from is not None and segment.base_offset >= txn_index_from
            self.replay(rows, batches, segment.txn_index if rebuilding else None)
        self.table.map_end_offset = log_end_offset
        self.take_snapshot()

    def replay(
        self, rows: np.ndarray, batches: dict[int, bytes], txn_index: AbortedTxnSink | None
    ) -> None:
        """Apply batches already in the log to the table without checks (FORMAT.md §8.4,
        REPLICATION origin). rows: scan.BATCH_INFO rows in log order; batches: the bytes of
        each control batch, by its base offset (a marker's coordinator epoch and type are in
        its record); txn_index: where to write the entries of ABORT markers that end a
        transaction (a segment whose index recovery reset), or None."""
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
                _, coordinator_epoch = _CONTROL_VALUE.unpack_from(record.value)
                first = table.apply_marker(
                    producer_id,
                    int(row["producer_epoch"]),
                    coordinator_epoch,
                    record.timestamp,
                    last_offset,
                )
                aborted = record.key is not None and marker_type(record.key) == CONTROL_ABORT
                if txn_index is not None and first is not None and aborted:
                    txn_index.append(aborted_txn(table, producer_id, first, last_offset))
                continue
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

    def remove_expired(self, now_ms: int) -> int:
        return self.table.remove_expired(now_ms, self.expiration_ms)
