"""A read-only, lock-free view of one partition directory, for readers outside the owner
process (eoslog.offline, the Spark data source) while the owner keeps writing (docs/api.md
"Offline scans").

Taking the view opens every segment's .log once and captures its size, so the view is a fixed
prefix of the log: retention unlinking a segment does not take its bytes away (the open file
keeps its inode), appends past the captured size are not seen, and a torn or growing tail is
cut at the last whole batch. Nothing is mapped: every read is a pread, since the owner may
truncate or delete any file, and touching a mapped page past the end of its file kills the
process (SIGBUS). Nothing is written, and no lock is taken.

read_committed from the files alone (docs/format.md §6, §7). The aborted transactions come from the
segments' .txnindex files, each entry checked against the log first (entry_disagreement: a
wrong one, or a file that does not read whole, makes the view derive every aborted transaction
from the batch headers instead), except
past the newest producer-state snapshot the log agrees with, where the view replays the batch
headers itself (the owner writes a .txnindex entry just after its ABORT
marker, so a reader may see the marker before the entry). The replay also yields the open
transactions: the view's last stable offset is the first offset of the oldest transaction with
no marker in the view, or its end.

Thread safety: a view is used by one thread at a time. It holds open files until close().
"""

from __future__ import annotations

import bisect
import contextlib
import os
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from eoslog import limits
from eoslog._ext import index as _index
from eoslog._ext import readcommitted
from eoslog.errors import (
    CorruptIndexError,
    CorruptRecordError,
    CorruptSnapshotError,
    KafkaException,
)
from eoslog.fs import FileHandle, FileSystem
from eoslog.log import checkpoint_checks, checkpoints, recovery, view_open
from eoslog.log.offset_index import OffsetIndex
from eoslog.log.producer_state import ProducerStateManager, snapshot_disagreement
from eoslog.log.segment import LogSegment
from eoslog.log.segment_reads import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    SegmentReads,
)
from eoslog.log.time_index import TimeIndex
from eoslog.log.txn_index import (
    AbortedTxn,
    LoggedBatch,
    entry_disagreement,
    outcome_conflict,
    read_entries,
)
from eoslog.record import codec, layout
from eoslog.record.columns import ColumnarRecords


class _HeaderOnly(NamedTuple):
    """What LogSegment.first_batch_problem reads of a segment."""

    base_offset: int
    log: FileHandle
    size: int
    compacted: bool


class SegmentFiles(SegmentReads):
    """One segment seen read-only: its .log handle, opened when the view was taken, the size
    captured then (cut to whole batches for the last segment), and its indexes read once by
    pread on first use (a missing index reads as empty: lookups then scan)."""

    def __init__(
        self, fs: FileSystem, directory: str, base_offset: int, handle: FileHandle, size: int
    ) -> None:
        self.fs = fs
        self.directory = directory
        self.base_offset = base_offset
        self.size = size
        self.index_suspect = False
        self.compacted = False  # below the cleaner-offset-checkpoint: gaps are legal
        self._handle = handle
        self._offset_index = OffsetIndex(
            fs, self.path(INDEX_SUFFIX), base_offset, writable=False, missing_ok=True
        )
        self._time_index = TimeIndex(
            fs, self.path(TIME_INDEX_SUFFIX), base_offset, writable=False, missing_ok=True
        )

    @property
    def log(self) -> FileHandle:
        return self._handle

    @property
    def offset_index(self) -> OffsetIndex:
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        return self._time_index

    def aborted_transactions(self) -> list[AbortedTxn] | None:
        """The entries of this segment's .txnindex, read in bounded chunks (txn_index.
        read_entries), or None when they cannot be believed: a malformed entry (an unknown
        version too), a partial one at the end or an empty file (the owner writes a segment's
        entries before a snapshot past it, and creates the file with its first entry), or a
        directory in its place. The caller then derives the aborted transactions from the
        batch headers; trusting what precedes the damage could show aborted records."""
        path = self.path(TXN_INDEX_SUFFIX)
        try:
            handle = self.fs.open(path, read_only=True)
        except FileNotFoundError:
            return []  # created with the first abort; removed with the segment
        except IsADirectoryError:
            return None
        try:
            size = handle.size()
            image, damaged_at = read_entries(handle)
        finally:
            handle.close()
        if damaged_at is not None or size == 0 or len(image) != size:
            return None
        try:
            return _index.decode_aborted_txns(image, AbortedTxn)
        except CorruptIndexError:
            return None  # an entry of a version no reader knows (docs/format.md §6.1)


class PartitionView:
    """The log of one partition as it stood when the view was taken (module doc)."""

    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        topic: str,
        partition: int,
        log_start_offset: checkpoints.LogStart | None = None,
    ) -> None:
        """Open the segments of `directory`. log_start_offset: the owner's checkpointed log
        start, if known; judged as the owner judges it (checkpoint_checks.believed_log_start:
        a value inside the segments is believed when eoslog's checksummed checkpoint confirms
        it, one past the log end is refused).
        UnknownTopicOrPartitionError-like FileNotFoundError if the directory is missing;
        KafkaStorageError if the files keep changing under the listing; CorruptRecordError
        where a segment does not start where its name says, or where the tail is damaged in a
        way the owner's recovery would refuse to cut (_cut_tail); CorruptCheckpointError for
        a checkpoint the segments contradict."""
        self.fs = fs
        self.directory = directory
        self.topic = topic
        self.partition = partition
        root = os.path.dirname(directory)
        marker = os.path.join(root, checkpoints.CLEAN_SHUTDOWN_FILE)
        # Read before the sizes are captured: the owner writes a recovery point only after
        # everything below it was synced, so the captured log must reach it.
        recovery_point = view_open.recovery_point(fs, root, topic, partition)
        self._aborted_counts = view_open.aborted_counts(fs, root, topic, partition)
        self._looked_up: dict[int, LoggedBatch | None] = {}  # _logged_batch's answers
        marked_before = fs.exists(marker)
        handles = view_open.open_segments(fs, directory)
        sizes = [handle.size() for _, handle in handles]
        bases = [base for base, _ in handles]
        cleaned_end = view_open.cleaned_end(fs, root, topic, partition)  # after the opens
        self._compacted = [following <= cleaned_end for following in bases[1:]] + [False]
        # The owner takes the marker when it opens and writes it back when it has closed:
        # there before and after the sizes were captured, no owner was appending meanwhile,
        # so everything captured was closed cleanly (durable).
        clean = marked_before and fs.exists(marker)
        self._handles = handles
        self._sizes = sizes
        self._bases = bases
        self._segments: dict[int, SegmentFiles] = {}
        self._replayed: tuple[int, list[AbortedTxn], int | None] | None = None
        try:
            self._check_segment_starts()
            self.log_end_offset = self._cut_tail(clean, recovery_point)
            checkpoint_checks.check_recovery_point(directory, recovery_point, self.log_end_offset)
            self.log_start_offset = (
                checkpoint_checks.believed_log_start(
                    directory, self._bases[0], log_start_offset, self.log_end_offset
                )[0]
                if handles
                else 0
            )
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for _, handle in self._handles:
            handle.close()
        self._handles = []

    def __enter__(self) -> PartitionView:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def segment_bases(self) -> list[int]:
        """The base offsets of the view's segments, oldest first (segment(n) is the n-th)."""
        return list(self._bases)

    def segment(self, number: int) -> SegmentFiles:
        found = self._segments.get(number)
        if found is None:
            base, handle = self._handles[number]
            found = SegmentFiles(self.fs, self.directory, base, handle, self._sizes[number])
            found.compacted = self._compacted[number]
            self._segments[number] = found
        return found

    def _check_segment_starts(self) -> None:
        """The owner's check of every segment at open (LogSegment.first_batch_problem, one
        header read each): the first batch starts at the base offset in the file name, and
        only the last segment may be empty. A copy of a segment under another name, or a
        flipped base offset, would otherwise place records at offsets they do not have."""
        for number, (base, handle) in enumerate(self._handles):
            size = self._sizes[number]
            # It reads only these three attributes; a SegmentFiles would read the indexes.
            compacted = self._compacted[number]  # the cleaner may empty a segment
            header_only = _HeaderOnly(base, handle, size, compacted)
            problem = LogSegment.first_batch_problem(header_only)  # type: ignore[arg-type]
            if problem is None and size == 0 and number < len(self._handles) - 1 and not compacted:
                next_base = self._bases[number + 1]
                problem = 0, f"it is empty, but the next segment starts at {next_base}"
            if problem is not None:
                raise self.segment(number).corruption(*problem)

    def _cut_tail(self, clean: bool, recovery_point: int | None) -> int:
        """The view's log end: one past the last valid batch of the last segment (framing,
        CRC and offsets continuing each other), whose size is cut there. What follows is
        judged as the owner's recovery judges it (recovery.may_cut): a torn tail (a batch the
        owner is still writing, or a crash's partial write) is left out of the view; damage
        after a clean shutdown, below the recovery point, or followed by a valid batch is a
        CorruptRecordError naming the file and the byte, never records silently missing."""
        if not self._handles:
            return 0
        last = self.segment(len(self._handles) - 1)
        # An index entry was checked against its batch's last offset (the walk takes that
        # batch's base offset from it); when that batch is not valid, the entry says nothing
        # about where the valid batches end, and the walk starts at the segment start, whose
        # first batch must begin at the base offset.
        position = last.scan_position(1 << 62)
        end, next_offset, broken = view_open.valid_prefix(last, position, None)
        if end == position:
            end, next_offset, broken = view_open.valid_prefix(last, 0, last.base_offset)
        if end < last.size:
            valid_after = broken or last.valid_batch_after(end, last.size)
            if clean or not recovery.may_cut(recovery_point, next_offset, valid_after):
                raise last.corruption(
                    end, view_open.why_not_torn(clean, recovery_point, next_offset)
                )
        last.size = end
        return next_offset

    # --- read_committed ------------------------------------------------------------------

    def _replay(self, *, from_start: bool = False) -> tuple[int, list[AbortedTxn], int | None]:
        """(replay start, ABORTs met replaying, first unstable offset): the newest readable
        snapshot at or below the view's end, then the batch headers after it, replayed into a
        producer-state table (docs/format.md §8.4). With no snapshot (or from_start) the whole
        partition is walked."""
        if self._replayed is not None and not from_start:
            return self._replayed
        manager = ProducerStateManager(self.fs, self.directory, expiration_ms=-1)
        if from_start:
            start = self._bases[0] if self._bases else 0
            manager.table.clear(start)
        else:
            start = self._load_snapshot(manager)
        collected: list[AbortedTxn] = []
        first = max(bisect.bisect_right(self._bases, start) - 1, 0)
        for number in range(first, len(self._handles)):
            segment = self.segment(number)
            # Headers only: the records are never needed, only control batches' markers.
            rows = segment.scan_headers_from(
                segment.scan_position(start), chunk_bytes=limits.offline_read_chunk_bytes
            )
            rows = rows[rows["base_offset"] >= start]
            controls = rows[(rows["attributes"] & layout.CONTROL_MASK) != 0]
            batches = {
                int(row["base_offset"]): segment.read_bytes(int(row["position"]), int(row["size"]))
                for row in controls
            }
            with _naming_the_file(segment):  # the replay knows offsets only
                manager.replay(rows, batches, collected, compacted=segment.compacted)
        manager.end_transactions_with_orphan_commits()
        self._replayed = (start, collected, manager.table.first_unstable_offset())
        return self._replayed

    def _load_snapshot(self, manager: ProducerStateManager) -> int:
        """Load the newest snapshot that reads whole, within the view, into manager.table;
        the offset replay starts from. Snapshots are only read: a corrupt or vanished one is
        passed over, never deleted (the owner judges them)."""
        for offset in reversed(manager.snapshot_offsets()):
            if not self.log_start_offset <= offset <= self.log_end_offset:
                continue
            if not self._bases or offset < self._bases[0]:
                continue
            try:
                manager.table.load_snapshot(manager.read_snapshot_file(offset), offset)
            except (FileNotFoundError, CorruptSnapshotError):
                continue
            if (
                snapshot_disagreement(manager.table, offset, self._logged_batch, self._bases[0])
                is not None
            ):
                continue  # the log contradicts it: an older one, or the whole log, serves
            return offset
        start = self._bases[0] if self._bases else 0
        manager.table.clear(start)
        return start

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest transaction open in the view, else its end; never
        below the log start (docs/format.md §7)."""
        first_unstable = self._replay()[2]
        if first_unstable is None:
            return self.log_end_offset
        return min(max(first_unstable, self.log_start_offset), self.log_end_offset)

    def aborted_transactions(self) -> list[AbortedTxn]:
        """Every aborted transaction whose ABORT marker is in the view, by marker offset:
        from the .txnindex files below the replay start, from the replay after it."""
        start, replayed, _ = self._replay()
        found: list[AbortedTxn] = []
        for number in range(len(self._handles)):
            if self._bases[number] >= start:
                break
            entries = self.segment(number).aborted_transactions()
            if entries is None or not view_open.as_counted(
                self._bases[number], entries, self._aborted_counts
            ):
                # A derived file is never believed over the log (above), nor one holding
                # fewer or more entries than the owner counted (a lost .txnindex reads as
                # none; eoslog.log.checkpoints).
                return self._replay(from_start=True)[1]
            for entry in entries:
                if entry.last_offset >= self.log_end_offset and self._log_grew():
                    continue  # the owner appended its marker after the view was taken
                # Every entry is checked, those the replay covers too: a damaged last
                # offset would otherwise move an entry below the replay start out of sight.
                if outcome_conflict(entry, self._logged_batch, self._bases[0]):
                    # The files disagree only on whether the transaction committed, and
                    # either may be the forged one: refused, as the owner's open refuses.
                    raise CorruptRecordError(
                        f"{self.segment(number).path(TXN_INDEX_SUFFIX)} says producer "
                        f"{entry.producer_id}'s transaction ending at offset {entry.last_offset} "
                        f"aborted, but the marker at that offset in "
                        f"{self.segment(number).path(LOG_SUFFIX)} is a COMMIT: one of the two "
                        "files is damaged, and the log alone cannot tell which"
                    )
                if entry_disagreement(entry, self._logged_batch, self._bases[0]) is not None:
                    # A derived file is never believed over the log: every aborted
                    # transaction is derived from the batch headers instead.
                    return self._replay(from_start=True)[1]
                if entry.last_offset < start:
                    found.append(entry)
        found.extend(replayed)
        return found

    def _log_grew(self) -> bool:
        """Whether the last segment's .log holds more now than when the view was taken: only
        then may a .txnindex hold an entry past the view's end. It is longer, or a batch
        length now stands where the view's log ended: an owner under "commit" or "always"
        appends inside the zeros it extended the file by (docs/design.md "Durability")."""
        if not self._handles:
            return False
        handle = self._handles[-1][1]
        if handle.size() > self._sizes[-1]:
            return True
        end = self.segment(len(self._handles) - 1).size
        length = handle.pread(4, end + layout.BATCH_LENGTH_OFFSET)
        return len(length) == 4 and length != bytes(4)

    def _logged_batch(self, offset: int) -> LoggedBatch | None:
        """The batch holding `offset` in the view, as entry checks read it; each looked up once
        (an entry's checks ask twice, a request each on object storage)."""
        number = bisect.bisect_right(self._bases, offset) - 1
        if number >= 0 and offset not in self._looked_up:
            with _naming_the_file(segment := self.segment(number)):
                self._looked_up[offset] = segment.logged_batch(offset)
        return self._looked_up.get(offset)

    # --- lookups ----------------------------------------------------------------------------

    def _number_of(self, offset: int) -> int:
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    def offset_for_timestamp(self, timestamp_ms: int) -> int:
        """The offset of the first record with timestamp >= timestamp_ms, through the time
        indexes (docs/format.md §5.9); the view's end when there is none."""
        last = len(self._handles) - 1
        for number in range(len(self._handles)):
            segment = self.segment(number)
            if number < last and segment.scan_largest_timestamp()[0] < timestamp_ms:
                continue
            found = segment.find_offset_by_timestamp(timestamp_ms, self.log_start_offset)
            if found is not None:
                return found[0]
        return self.log_end_offset

    def split_offsets(self, start: int, stop: int, records_max: int) -> list[int]:
        """Offsets in (start, stop) that cut [start, stop) into pieces of about records_max
        records, taken from the offset indexes' entries (each the last offset of a batch, so
        a cut + 1 starts a batch). No log bytes are read."""
        cuts: list[int] = []
        previous = start
        for number in range(self._number_of(start), len(self._handles)):
            segment = self.segment(number)
            if segment.base_offset >= stop:
                break
            index = segment.offset_index
            for slot in range(index.entries):
                cut = index.entry(slot)[0] + 1
                if cut - previous >= records_max and start < cut < stop:
                    cuts.append(cut)
                    previous = cut
        return cuts

    # --- reading ----------------------------------------------------------------------------

    def read_batches(
        self, start: int, stop: int, chunk_bytes: int = limits.offline_read_chunk_bytes
    ) -> Iterator[tuple[memoryview, int, SegmentFiles, int, np.ndarray]]:
        """(bytes, first offset, segment, byte in its .log, the bytes' scan.BATCH_INFO rows) of
        runs of whole batches holding the offsets [start, stop):
        the first run begins with the batch holding `start`; batches beginning at or past
        `stop` are left out. CorruptRecordError where the bytes below a segment's captured
        size are not whole batches, or where their offsets do not follow each other
        (_check_continuity)."""
        start = max(start, self.log_start_offset)
        stop = min(stop, self.log_end_offset)
        if start >= stop:
            return
        number = self._number_of(start)
        segment = self.segment(number)
        position = segment.scan_position(start)
        offset = start
        # The offset the next batch must begin at; None before the first, which must hold
        # `start` (batches before it in the first read only have to continue each other).
        expected: int | None = None
        while offset < stop:
            if position >= segment.size:
                number += 1
                if number >= len(self._handles):
                    return
                if segment.compacted:  # the gap after its last batch is the cleaner's
                    expected = self._bases[number]
                segment, position = self.segment(number), 0
                continue
            data, infos = _batches_read_at(segment, position, chunk_bytes)
            view_open.check_continuity(segment, position, infos, expected, start)
            expected = int(infos["last_offset"][-1]) + 1
            # The batches before the one holding `start` (the offset index points at or
            # below it) are not part of the read.
            skip = int(np.count_nonzero(infos["last_offset"] < offset))
            if skip:
                cut = int(infos["position"][skip]) if skip < len(infos) else len(data)
                position += cut
                if skip == len(infos):
                    continue
                data, infos = data[cut:], infos[skip:].copy()
                infos["position"] -= cut
            below = infos["base_offset"] < stop
            keep = int(np.count_nonzero(below))
            if keep:
                end = int(infos["position"][keep - 1]) + int(infos["size"][keep - 1])
                yield data[:end], offset, segment, position, infos[:keep]
                offset = int(infos["last_offset"][keep - 1]) + 1
                position += end
            if keep < len(infos):
                return

    def read_arrow(
        self,
        start: int,
        stop: int,
        aborted: list[AbortedTxn] | None,
        *,
        include_headers: bool = False,
        verify_crc: bool = True,
        chunk_bytes: int = limits.offline_read_chunk_bytes,
        decompressed_bytes_max: int = limits.decompressed_batch_bytes_max,
    ) -> Iterator[ColumnarRecords]:
        """The records [start, stop) as columns, decoded in C with no Python object per
        record. aborted: the aborted transactions (read_committed; stop must then be at or
        below the last stable offset) or None (read_uncommitted). Control records never
        appear; aborted transactional batches are dropped whole (docs/format.md §6.4). A batch
        decompressing past decompressed_bytes_max raises CorruptRecordError (decode_columns)."""
        returned = start - 1  # the last offset yielded
        for data, offset, segment, file_position, batches in self.read_batches(
            start, stop, chunk_bytes
        ):
            skips = None
            if aborted is not None:
                # Kafka's rule for the aborted transactions a fetch from `offset` is told
                # about (docs/format.md §6.3): those not ended before it, begun before its end.
                pending = [
                    (txn.producer_id, txn.first_offset)
                    for txn in aborted
                    if txn.last_offset >= offset and txn.first_offset < stop
                ]
                with _naming_the_file(segment, file_position):
                    runs = readcommitted.plan_fetch(data, offset, pending, None, batches)[0]
                skips = _gaps(runs, len(data))
            # One call decodes the whole read around the dropped batches, so a read yields
            # one batch of columns, not one per run between aborted batches.
            position = 0
            while position < len(data):
                with _naming_the_file(segment, file_position):
                    columns = codec.decode_columns(
                        data,
                        position,
                        include_headers=include_headers,
                        verify_crc=verify_crc,
                        offset_min=offset,
                        offset_end=stop,
                        skips=skips,
                        decompressed_bytes_max=decompressed_bytes_max,
                        # One piece holds at most one decompressed limit plus a batch,
                        # however many batches each just under that limit the read holds.
                        held_bytes_max=decompressed_bytes_max,
                    )
                if columns.end_position <= position:
                    raise AssertionError("a column limit stopped the first batch")
                if columns.count:
                    returned = view_open.checked_record_offsets(
                        columns.offset, returned, segment, file_position + position
                    )
                    yield columns
                position = columns.end_position


@contextlib.contextmanager
def _naming_the_file(segment: SegmentFiles, position: int | None = None) -> Iterator[None]:
    """Typed errors of the decoders name bytes of the read they were given; a reader of a
    directory needs the file too, and where in it the read began (when known)."""
    try:
        yield
    except KafkaException as error:
        where = segment.path(LOG_SUFFIX)
        if position is not None:
            where += (
                f", in the batches read from byte {position} (the positions below count from there)"
            )
        raise type(error)(f"{where}: {error}") from None


def _gaps(runs: list[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """The byte ranges of [0, size) outside the ascending runs."""
    gaps = []
    position = 0
    for run_start, run_end in runs:
        if run_start > position:
            gaps.append((position, run_start))
        position = run_end
    if position < size:
        gaps.append((position, size))
    return gaps


def _batches_read_at(
    segment: SegmentFiles, position: int, chunk_bytes: int
) -> tuple[memoryview, np.ndarray]:
    """The whole batches of one pread at `position` (at least one batch, read exactly when it
    is larger than a chunk) and their rows, positions relative to the read."""
    infos, stop, _, data = segment.scan_chunk(position, segment.size, chunk_bytes, verify_crc=False)
    if len(infos) == 0:
        # Below the captured size everything was written as whole batches.
        raise segment.corruption(position + stop, "no whole batch starts there")
    return memoryview(data), infos
