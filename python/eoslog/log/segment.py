"""One log segment: its `.log` file and the offset, time and transaction indexes beside it
(docs/format.md §5). Files are named by the segment's base offset, 20 digits, as Kafka names them.

Thread safety: append, truncate_to, recover, roll-time calls and close are made by the
partition's writer (under the partition lock). read, translate_offset, find_offset_by_timestamp
and next_offset may run in any thread concurrently with appends: they read only bytes below a
size they captured, and index lookups only see published entries.

Memory safety: read returns a memoryview into a read-only shared mapping of the .log (no copy),
which stays readable for as long as its caller keeps it: through appends and roll (the file
only grows), retention (the file is unlinked, its inode lives on), truncate_to (which never
shrinks a file under a live view: it replaces the file instead) and close. The rules that make
this safe are in eoslog.log.mapped_log. Every other read here (lookups for the writer,
recovery, index rebuilds) preads, and maps nothing.
"""

from __future__ import annotations

import itertools
import threading
from typing import NamedTuple, TypeVar

import numpy as np

from eoslog import limits
from eoslog._ext import scan
from eoslog._ext.segment_core import SegmentCore
from eoslog.errors import CorruptRecordError
from eoslog.fs import FileHandle, FileSystem
from eoslog.log import cold_mappings
from eoslog.log.config import LogConfig
from eoslog.log.mapped_log import MappedLog
from eoslog.log.offset_index import OffsetIndex
from eoslog.log.segment_reads import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    SegmentReads,
    _base_offset,
    last_offset_at,
)
from eoslog.log.time_index import TimeIndex
from eoslog.log.txn_index import TransactionIndex
from eoslog.record import codec, layout
from eoslog.record.status import TRUNCATED_BATCH

# Held while a segment's indexes are opened on first use (LogSegment._open_indexes): opens
# are rare (once per segment and process), so one lock for all segments costs nothing.
_INDEX_OPEN_LOCK = threading.Lock()
_Index = TypeVar("_Index", OffsetIndex, TimeIndex)


class SegmentRead(NamedTuple):
    """What LogSegment.read returns."""

    # Whole batches: a read-only view into the mapped .log (or a copy of its unmapped tail).
    records: memoryview
    # The byte of the .log where they begin.
    position: int
    # Their scan.BATCH_INFO rows (positions relative to `records`) when the read scanned
    # them, so that a fetch plans without scanning again; None for a read of one batch.
    batches: np.ndarray | None = None


def first_offset_violation(infos: np.ndarray, next_offset: int, gaps: bool = False) -> int | None:
    """Index of the first batch whose offsets do not continue the previous batch's (the first
    must start at next_offset), or None (scan.first_offset_violation: eoslog's own logs are
    contiguous, so a jump means a damaged base offset, which the CRC does not cover; with
    `gaps`, for a segment the cleaner cleaned, a batch may start past next_offset)."""
    bad = scan.first_offset_violation(infos, next_offset, gaps)
    return None if bad < 0 else bad


def mark_compacted(segments: list[LogSegment], cleaned_end: int) -> None:
    """Set `compacted` on each of a log's segments (oldest first) that lies wholly below
    cleaned_end, the partition's cleaner-offset-checkpoint entry."""
    for segment, following in itertools.pairwise(segments):
        segment.compacted = following.base_offset <= cleaned_end


class LogSegment(SegmentReads, SegmentCore):
    """A segment's files. `size` is the logical end of the .log: everything below it is
    whole batches appended (or recovered), everything at or above it is not part of the log.

    The state an append changes (size, the largest and first batch timestamps, the bytes
    since the last index entry, created_ms and last_modified_ms), the roll rule
    (should_roll) and the append itself (append, append_stamped) are the native
    SegmentCore's (eoslog._ext.segment_core); the largest timestamp and the first batch's
    are read from the files on first use, by scan_largest_timestamp and
    _load_first_batch_timestamp below."""

    _log_file: MappedLog

    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        base_offset: int,
        config: LogConfig,
        *,
        created_ms: int,
    ) -> None:
        self.fs = fs
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.created_ms = created_ms
        self._log_file = MappedLog(fs, self.path(LOG_SUFFIX))
        self.size = self.allocated = self.log.size()
        # The offset and time indexes are opened (and mapped) on first use, so a cold
        # segment holds one file descriptor, its .log's (docs/design.md "Files and file
        # descriptors"): see offset_index and time_index below.
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        # Set by unlink_files: an index opened after that reads what is left, creating nothing.
        self._unlinked = False
        self.txn_index = TransactionIndex(fs, self.path(TXN_INDEX_SUFFIX), base_offset)
        self.bytes_since_last_index_entry = 0
        # The largest batch max timestamp and the last offset of its batch (the time index's
        # "shallow" offset), and the first batch's max timestamp, which segment.ms counts
        # from, are loaded on first use (a clean open of many segments reads none of them).
        # When data last reached this segment, as far as this process knows: what retention
        # falls back on for batches without timestamps (Kafka uses the file's mtime; the open
        # time is never earlier, so retention never deletes sooner than Kafka would).
        self.last_modified_ms = created_ms
        # Set when a lookup found an index entry that its batch contradicts (damage in a
        # segment not rescanned at open); lookups then scan from the segment start.
        self.index_suspect = False
        # True for a segment wholly below the partition's cleaner checkpoint (the cleaner has
        # cleaned it, or may have: docs/design.md "Compaction"): its batches may leave gaps
        # between them and after its base offset. Everywhere else a gap is damage.
        self.compacted = False
        # False once rolled (or loaded behind another segment): its indexes are trimmed and
        # final, and close() adds nothing to them.
        self.active = True

    @property
    def offset_index(self) -> OffsetIndex:
        """The .index, opened and mapped on first use (a lookup, an append, a check)."""
        index = self._offset_index
        if index is None:
            index = self._open_indexes()[0]
        return index

    @property
    def time_index(self) -> TimeIndex:
        """The .timeindex, opened and mapped on first use, as offset_index."""
        index = self._time_index
        if index is None:
            index = self._open_indexes()[1]
        return index

    def _open_indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        """Open both indexes (Kafka's LazyIndex opens each alone; the roll rule watches both
        tables together). Lookups may race here from any thread: one lock makes the first
        open the only one. After unlink_files an index is read from what is left, read-only
        (a missing file reads as no entries, and lookups scan the .log)."""
        with _INDEX_OPEN_LOCK:
            if self._offset_index is None or self._time_index is None:
                offsets = self._open_index(OffsetIndex, INDEX_SUFFIX)
                try:
                    times = self._open_index(TimeIndex, TIME_INDEX_SUFFIX)
                except BaseException:
                    offsets.close()
                    raise
                self.watch_indexes(
                    offsets.entry_table,
                    OffsetIndex.RESERVED_SLOTS,
                    times.entry_table,
                    TimeIndex.RESERVED_SLOTS,
                )
                self._offset_index, self._time_index = offsets, times
            return self._offset_index, self._time_index

    def _open_index(self, kind: type[_Index], suffix: str) -> _Index:
        return kind(
            self.fs,
            self.path(suffix),
            self.base_offset,
            max_index_bytes=self.config.segment_index_bytes,
            writable=not self._unlinked,
            missing_ok=self._unlinked,
            hold_handle=self.active,
        )

    def indexes_untrimmed(self) -> bool:
        """Whether this inactive segment's index files still have their preallocated size
        (recovery asks, without opening them). A roll trims them, but a crash can undo a
        trim that was not yet synced while the recovery point already covers the segment's
        data; the zero-filled tail would then read as entries, so recovery rescans such a
        segment. (A trimmed index never keeps the full preallocated length unless it is
        exactly full, and then rebuilding it costs one scan.)"""
        size = self.config.segment_index_bytes
        return any(
            self.fs.file_size(self.path(suffix)) == size - size % kind.ENTRY_BYTES
            for suffix, kind in ((INDEX_SUFFIX, OffsetIndex), (TIME_INDEX_SUFFIX, TimeIndex))
        )

    def release_indexes(self) -> None:
        """Make this inactive segment's opened indexes durable and let go of their files
        (recovery once it has checked them, a roll): the next use opens them again. A
        lookup still holding one answers from a copy of its entries (release_file), so a
        reader racing with the roll never meets a closed index. Nothing for the active
        segment, whose indexes every append may touch."""
        if self.active:
            return
        with _INDEX_OPEN_LOCK:
            indexes = self._opened_indexes()
            for index in indexes:
                index.trim_to_valid_size()
                index.flush()
            self._offset_index = self._time_index = None
            self.watch_indexes(None, 0, None, 0)
        for index in indexes:
            index.release_file()

    def _opened_indexes(self) -> list[OffsetIndex | TimeIndex]:
        """The indexes opened so far: what close and flush have to handle."""
        return [index for index in (self._offset_index, self._time_index) if index is not None]

    @property
    def log(self) -> FileHandle:
        """The .log's open handle (truncate_to may replace it: see mapped_log)."""
        return self._log_file.handle

    def _load_first_batch_timestamp(self) -> int | None:
        if self.size < layout.HEADER_SIZE:
            return None
        return codec.read_header(self.log.pread(layout.HEADER_SIZE, 0)).max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """What retention.ms compares: the largest record time, or for a segment whose
        batches carry none, when it was last written (docs/format.md §5.10, Kafka's
        LogSegment.largestTimestamp)."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms

    # --- roll ------------------------------------------------------------------------------

    def on_become_inactive(self) -> None:
        """On roll: the .log cut back to its end (cut_preallocation), the final time-index
        entry, then trim the indexes to their entries."""
        self.active = False
        self.cut_preallocation()
        self._append_final_time_entry()
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def cut_preallocation(self) -> None:
        """Cut the .log back to `size` where appends extended it ahead with zeros (the
        native core's _make_room), and make that durable. The roll calls it before a later
        segment exists and close before the clean-shutdown marker is written, so only the
        last segment of a log that was not closed cleanly ever ends in zeros: recovery cuts
        them as it cuts a torn tail, while anywhere else they would read as damage. No view
        a read returned reaches past `size`, so the cut is made in place."""
        if self.allocated > self.size:
            self.log.truncate(self.size)
            self.allocated = self.size
            self.log.sync()

    def _append_final_time_entry(self) -> None:
        """The time-index entry for the largest timestamp (roll, close). Finding that largest
        timestamp may reveal a wrong time-index entry (see _checked_time_entry): the indexes
        are rebuilt first then, so the entry follows right ones."""
        largest = self.max_timestamp, self.offset_of_max_timestamp
        last_timestamp, last_offset = self.time_index.last_entry
        # A sound index never holds an entry above the segment's largest timestamp or past its
        # offset; one does after a clean shutdown, whose open does not check the time index
        # (Kafka's rule), if the file was damaged: rebuilt here, not believed.
        if self.index_suspect or (
            self.time_index.entries
            and (last_timestamp > largest[0] or last_offset > max(largest[1], self.base_offset))
        ):
            self.rebuild_indexes()
            largest = self.max_timestamp, self.offset_of_max_timestamp
        self.time_index.maybe_append(*largest, skip_full_check=True)

    # --- reading ---------------------------------------------------------------------------

    def _locate_mapped(self, view: memoryview, offset: int, end: int) -> tuple[int, int] | None:
        """_locate on the mapped .log (`view`, at least `end` bytes): (position, size) of the
        first batch whose last offset is >= offset, or None. The index entry is checked
        against its batch's header as _indexed_position checks it, and one header walk from
        there finds the batch, touching only headers. CorruptRecordError as _locate."""
        entry_offset, position = self.index_lookup(offset)
        if position != 0 and not (
            position + layout.HEADER_SIZE <= end and last_offset_at(view, position) == entry_offset
        ):
            self.index_suspect = True
            position = 0  # a wrong entry: scan the segment from its start instead
        status, at, size = scan.find_batch(view, offset, position, end)
        if status == TRUNCATED_BATCH and at >= end:
            return None  # every batch below `end` ends below the offset
        if status != 0 or at + size > end:
            raise self.corruption(at, "no whole batch starts there")
        return at, size

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_position: int | None = None,
        *,
        contiguous: bool = False,
        offset_end: int | None = None,
    ) -> SegmentRead | None:
        """Whole batches from the first whose last offset is >= start_offset (Kafka's rule: in
        a log with gaps that is the next batch after the gap), at most max_bytes (but at least
        that first batch) and never past max_position: a SegmentRead, or None.

        offset_end: batches beginning at or past this offset are left out (None when the first
        one does). A partition passes its log end or last stable offset: the segment's size is
        published before the log end moves past a new batch, so bytes below `max_position`
        may hold a batch the log end does not cover yet.

        records is a read-only memoryview into a mapping of the .log, not a copy: it stays
        readable, with the same bytes, for as long as the caller keeps it, whatever happens to
        the segment meanwhile (module docstring). Any thread.

        contiguous: the log has no gaps (eoslog's partitions; no compaction), so every batch
        returned must begin where the one before it ended, and the first must hold
        start_offset. The base offset and length of a batch are outside its CRC, so a
        reader's CRC check cannot catch damage there; this can: batches after a break are
        left out, and a first batch that breaks the rule raises CorruptRecordError."""
        end = self.size if max_position is None else min(max_position, self.size)
        if end <= 0:
            return None
        view = self._log_file.view_unless_tail(end)
        if view is None:
            return self._read_copied(start_offset, max_bytes, end, contiguous, offset_end)
        if not self.active:
            cold_mappings.touched(self._log_file)
        found = self._locate_mapped(view, start_offset, end)
        if found is None:
            return None
        position, size = found
        base_offset = _base_offset(view, position)
        if contiguous and base_offset > start_offset:
            raise self.corruption(position, f"its batch starts past offset {start_offset}")
        if offset_end is not None and base_offset >= offset_end:
            return None
        if max_bytes <= size or position + size >= end:
            self._check_below_end(view, position, offset_end)
            return SegmentRead(view[position : position + size], position)  # the first batch
        return self._readable_batches(
            view[position : min(position + max_bytes, end)], size, contiguous, offset_end, position
        )

    def _read_copied(
        self, start_offset: int, max_bytes: int, end: int, contiguous: bool, offset_end: int | None
    ) -> SegmentRead | None:
        """read() by pread, for the few MiB at the growing end of the active segment that
        are not mapped yet (a copy costs less there than a new mapping: mapped_log)."""
        found = self._locate(start_offset, end)
        if found is None:
            return None
        position, buffer, at, size = found
        base_offset = _base_offset(buffer, at)
        if contiguous and base_offset > start_offset:
            raise self.corruption(position, f"its batch starts past offset {start_offset}")
        if offset_end is not None and base_offset >= offset_end:
            return None
        if max_bytes <= size or position + size >= end:
            self._check_below_end(buffer, at, offset_end, position)
            return SegmentRead(memoryview(buffer)[at : at + size], position)
        data = memoryview(self.log.pread(min(max_bytes, end - position), position))
        if len(data) < size:  # the file is shorter than the log's end: cut under us
            raise self.corruption(position + len(data), "the file ends in a batch")
        return self._readable_batches(data, size, contiguous, offset_end, position)

    def _check_below_end(
        self, buffer: bytes | memoryview, at: int, offset_end: int | None, position: int = -1
    ) -> None:
        """CorruptRecordError unless the batch at `at` of buffer (at `position` of the .log;
        `at` when buffer is the mapped .log) ends below offset_end. The log end and the LSO
        are batch boundaries, so a batch that begins below one ends below it; one that does
        not has a damaged base offset or length (outside the CRC), and a reader trusting it
        would move past the end, be reset, and read the same batch again forever."""
        if offset_end is not None and last_offset_at(buffer, at) >= offset_end:
            where = at if position < 0 else position
            # No repair hint: the damaged bytes may be this batch's or those of the batch the
            # log end was taken from; `eoslog verify` tells which.
            raise CorruptRecordError(
                f"{self.path(LOG_SUFFIX)}: the batch at byte {where} ends at offset "
                f"{last_offset_at(buffer, at)}, past the readable end {offset_end}: a base offset "
                "or length (outside the CRC) is damaged here or in the batch the log end comes "
                "from. Close the log and run `eoslog verify` on the directory"
            )

    def _readable_batches(
        self,
        data: memoryview,
        size: int,
        contiguous: bool,
        offset_end: int | None,
        position: int,
    ) -> SegmentRead:
        """The whole batches at the start of `data` (at `position` of the .log), whose first
        batch is `size` bytes, up to the first beginning at or past offset_end (the first
        batch is below it), with the rows the scan found for them. The last batch kept must
        end below offset_end (_check_below_end)."""
        infos, stop, _ = scan.scan_batches(data, verify_crc=False)
        keep = len(infos)
        if contiguous and len(infos) > 1:
            bad = first_offset_violation(infos, int(infos["base_offset"][0]), self.compacted)
            if bad is not None:
                stop, keep = int(infos["position"][bad]), bad
                row = infos[bad]
                if row["base_offset"] <= infos["last_offset"][bad - 1] or (
                    row["last_offset"] < row["base_offset"]
                ):
                    # A batch going backwards may lie below every offset a later read asks
                    # for (the log end may even come from it): no later read would reach
                    # it, so this one raises.
                    raise self.corruption(
                        position + stop,
                        f"its batch of offsets {int(row['base_offset'])}-"
                        f"{int(row['last_offset'])} does not follow offset "
                        f"{int(infos['last_offset'][bad - 1])}",
                    )
        if offset_end is not None and len(infos) > 1:
            past = scan.first_starting_at_or_past(infos, offset_end)
            if 0 <= past < keep:
                stop, keep = int(infos["position"][past]), past
        if keep > 0:
            last = int(infos["position"][keep - 1])
            self._check_below_end(data, last, offset_end, position + last)
        # A bad header or a partial batch at `stop` is left out here; the next read starts
        # there and raises.
        records = data[: max(stop, size)]
        # The rows go with the records when they describe exactly them (always, unless the
        # first batch alone is kept past a bad header): the fetch plans from them unscanned.
        tiled = keep > 0 and int(infos["position"][keep - 1]) + int(infos["size"][keep - 1]) == len(
            records
        )
        return SegmentRead(records, position, infos[:keep] if tiled else None)

    # --- truncation, recovery support, lifecycle --------------------------------------------

    def truncate_to(self, offset: int, now_ms: int | None = None) -> int:
        """Remove every batch whose last offset is >= offset (a batch straddling it goes
        entirely), and re-expand the indexes so the segment is not full. An emptied segment
        restarts its segment.ms clock at now_ms. Returns the bytes removed (docs/format.md §5.11).
        The .log is cut in place, or, while a view returned by read is alive, replaced by a
        synced copy of the bytes kept (eoslog.log.mapped_log), so the view stays readable."""
        found = self.translate_offset(offset)
        position = self.size if found is None else found.position
        removed = self.size - position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        if removed:
            # Never cuts under a view a read returned: the file may be replaced instead.
            self._log_file.shrink(position)
            self.size = self.allocated = position
        self.offset_index.resize(self.config.segment_index_bytes)
        self.time_index.resize(self.config.segment_index_bytes)
        self.bytes_since_last_index_entry = 0
        self.set_largest_timestamp(*self.scan_largest_timestamp())
        if self.size == 0:
            self.first_batch_timestamp = None
            if now_ms is not None:
                self.created_ms = now_ms
        return removed

    # --- index rebuilding (recovery, and entries a lookup found wrong) -------------------------

    def scan_chunk_checked(self, position: int, end: int) -> tuple[np.ndarray, int, int]:
        """scan.scan_batches (CRCs checked) over the next piece of the .log from `position`:
        a chunk, or exactly the next batch when it is larger than a chunk (no batch when its
        length claims more than limits.batch_bytes_max)."""
        infos, stop, status, _ = self.scan_chunk(
            position, end, limits.recovery_chunk_bytes, verify_crc=True
        )
        return infos, stop, status

    def first_batch_problem(self) -> tuple[int, str] | None:
        """What is wrong with the first batch's header, cheaply (one 61-byte read), or None:
        the check every open makes of a segment it does not rescan. eoslog's logs are
        contiguous, so the first batch starts exactly at the base offset in the file name,
        which is where the previous segment ended (a roll happens at the log end). The base
        offset is outside the CRC, so only this check catches a flip there before a reader
        meets it. (byte, what) for CorruptRecordError; the byte is 0, the batch's start, where
        a repair would cut."""
        if self.size == 0:
            return None
        header = self.log.pread(layout.HEADER_SIZE, 0)
        if len(header) < layout.HEADER_SIZE:
            return 0, f"the file ends inside the first batch header ({self.size} bytes)"
        if header[layout.MAGIC_OFFSET] != layout.MAGIC_V2:
            return 0, f"the first batch's magic byte is {header[layout.MAGIC_OFFSET]}, not 2"
        base_offset, last_offset = _base_offset(header, 0), last_offset_at(header, 0)
        starts_late = self.compacted and base_offset > self.base_offset  # the cleaner's gap
        if (base_offset != self.base_offset and not starts_late) or last_offset < base_offset:
            return 0, (
                f"the first batch holds offsets {base_offset}..{last_offset}, but the segment "
                f"(and so the log) continues at offset {self.base_offset}"
            )
        return None

    def reset_indexes(self) -> None:
        """Drop every index entry and re-expand the (possibly trimmed) files to full size, so
        a rebuild has room for all the entries its scan adds."""
        self.offset_index.truncate()
        self.offset_index.resize(self.config.segment_index_bytes)
        self.time_index.truncate()
        self.time_index.resize(self.config.segment_index_bytes)
        self.bytes_since_last_index_entry = 0
        self.set_largest_timestamp(-1, self.base_offset)
        self.first_batch_timestamp = None

    def index_batch(self, chunk_position: int, row: np.void) -> None:
        """Account one scanned batch (a scan.BATCH_INFO row at chunk_position + its position)
        as append() does: timestamps, and an index entry every index.interval.bytes."""
        position = chunk_position + int(row["position"])
        last_offset = int(row["last_offset"])
        max_timestamp = int(row["max_timestamp"])
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.set_largest_timestamp(max_timestamp, last_offset)
        if self.bytes_since_last_index_entry > self.config.index_interval_bytes:
            # A rebuilt index is as sparse as the appends made it; if a small
            # segment.index.bytes fills it first, later batches go unindexed, which lookups
            # tolerate (they scan on).
            if not self.offset_index.is_full:
                self.offset_index.append(last_offset, position)
            if not self.time_index.is_full:
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += int(row["size"])

    def rebuild_indexes(self) -> None:
        """Rebuild the offset and time indexes from the .log, for a segment whose entries a
        lookup found wrong (index_suspect). The .log is not changed: a scan that meets damage
        stops there, leaving the later batches unindexed (lookups scan on past the last
        entry), and reads report the damage. An inactive segment's rebuilt indexes are
        trimmed and synced, as a roll leaves them."""
        self.index_suspect = False
        self.reset_indexes()
        position = 0
        next_offset = self.base_offset
        while position < self.size:
            infos, stop, status = self.scan_chunk_checked(position, self.size)
            if len(infos):
                bad = first_offset_violation(infos, next_offset, self.compacted)
                if bad is not None:
                    infos, status = infos[:bad], -1
                else:
                    next_offset = int(infos["last_offset"][-1]) + 1
            for row in infos:
                self.index_batch(position, row)
            position += stop
            if status != 0 or len(infos) == 0:
                break
        if not self.active:
            self.active = True  # on_become_inactive adds the closing entry and trims
            self.on_become_inactive()
            self.offset_index.flush()
            self.time_index.flush()

    def flush(self, *, indexes: bool = True) -> None:
        """fsync the .log and (indexes) the index files that changed. The active segment's
        group commits pass indexes=False: after an unclean stop recovery rescans the last
        segment whole and rebuilds its indexes (eoslog.log.recovery), so only the .log
        must be durable; a roll makes the indexes durable before the segment stops being
        the last (PartitionLog._roll). That halves a small commit's fsyncs."""
        self.log.sync()
        if indexes:
            for index in self._opened_indexes():
                index.flush()
            self.txn_index.flush()

    def close(self) -> None:
        """Final time-index entry (active segment), then trim the indexes and make the trim
        durable: a clean-shutdown marker written after close vouches for these files, and
        a clean open believes their lengths."""
        self.cut_preallocation()
        if self.active:
            self._append_final_time_entry()
        indexes = self._opened_indexes()
        for index in indexes:
            index.trim_to_valid_size()
            index.flush()
        self.txn_index.flush()
        for index in indexes:
            index.close()
        self.txn_index.close()
        cold_mappings.forget(self._log_file)
        self._log_file.close()

    def unlink_files(self) -> None:
        """Remove the segment's files from the directory but keep them open: reads that
        captured this segment just before finish on it (retention, truncation). An index not
        opened yet is then opened read-only from whatever is left, if a read needs it (set
        under the open lock: an open racing with this one finishes first, and none creates
        the file again after it is gone)."""
        with _INDEX_OPEN_LOCK:
            self._unlinked = True
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX):
            if self.fs.exists(self.path(suffix)):
                self.fs.unlink(self.path(suffix))

    def close_files(self) -> None:
        """Close an unlinked segment's files without writing to them."""
        for index in self._opened_indexes():
            index.close()
        self.txn_index.close()
        cold_mappings.forget(self._log_file)
        self._log_file.close()

    def delete(self) -> None:
        """Unlink and close the segment's files."""
        self.unlink_files()
        self.close_files()
