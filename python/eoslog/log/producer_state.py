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

import numpy as np

from eoslog._ext.producer_state import ProducerStateTable
from eoslog.errors import CorruptSnapshotError
from eoslog.fs import FileSystem
from eoslog.log.segment import SNAPSHOT_SUFFIX, LogSegment, file_name, offset_from_file_name
from eoslog.record import codec, layout

_CONTROL_VALUE = struct.Struct(">hi")  # version int16, coordinator epoch int32 (FORMAT.md §3)


class ProducerStateManager:
    """The producer-state table of a partition directory and its snapshot files."""

    def __init__(self, fs: FileSystem, directory: str, expiration_ms: int) -> None:
        self.fs = fs
        self.directory = directory
        self.expiration_ms = expiration_ms
        self.table = ProducerStateTable()

    # --- snapshot files --------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        return sorted(
            offset_from_file_name(name)
            for name in self.fs.listdir(self.directory)
            if name.endswith(SNAPSHOT_SUFFIX)
        )

    def _path(self, offset: int) -> str:
        return os.path.join(self.directory, file_name(offset, SNAPSHOT_SUFFIX))

    def take_snapshot(self) -> None:
        """Write the table at its map end offset, unless that snapshot exists (Kafka's
        takeSnapshot skips an unchanged offset). Temp file then rename: a crash leaves the
        old set of files or the new one, and at worst a torn file its CRC rejects."""
        offset = self.table.map_end_offset
        path = self._path(offset)
        if self.fs.exists(path):
            return
        temporary = path + ".tmp"
        handle = self.fs.open(temporary, create=True)
        try:
            handle.truncate(0)
            handle.pwrite(self.table.snapshot(), 0)
        finally:
            handle.close()
        self.fs.rename(temporary, path)

    def delete_snapshot(self, offset: int) -> None:
        if self.fs.exists(self._path(offset)):
            self.fs.unlink(self._path(offset))

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

    def load_newest_snapshot(self, log_start_offset: int, log_end_offset: int) -> int:
        """Load the newest valid snapshot at or below the log end into the table (corrupt
        ones are deleted, then the next older is tried); with none, start empty at the log
        start. Returns the offset replay must start from (the table's map end offset)."""
        self.delete_snapshots_outside(log_start_offset, log_end_offset)
        for offset in reversed(self.snapshot_offsets()):
            handle = self.fs.open(self._path(offset), read_only=True)
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
        self, segments: list[LogSegment], log_start_offset: int, log_end_offset: int, now_ms: int
    ) -> None:
        """Bring the table to the log end (FORMAT.md §8.4): the newest valid snapshot, then
        the batches after it, replayed; expired producers dropped; a snapshot at the end
        when anything was replayed."""
        start = self.load_newest_snapshot(log_start_offset, log_end_offset)
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
            self.replay(rows, batches)
        self.table.map_end_offset = log_end_offset
        self.take_snapshot()

    def replay(self, rows: np.ndarray, batches: dict[int, bytes]) -> None:
        """Apply batches already in the log to the table without checks (FORMAT.md §8.4,
        REPLICATION origin). rows: scan.BATCH_INFO rows in log order; batches: the bytes of
        each control batch, by its base offset (a marker's coordinator epoch is in its
        record)."""
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
                table.apply_marker(
                    producer_id,
                    int(row["producer_epoch"]),
                    coordinator_epoch,
                    record.timestamp,
                    last_offset,
                )
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
