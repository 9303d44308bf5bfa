"""`eoslog verify` over the files derived from a partition's log: each segment's offset index
and time index (eoslog.log.index_checks, the checks `eoslog dump-log` makes), its transaction
index (txn_index.entry_disagreement and outcome_conflict, the checks an open makes), and the
producer-state snapshots (producer_state.read_snapshot and snapshot_disagreement, likewise).

An open never believes a derived file over the log: it rebuilds a wrong index or `.txnindex`,
and discards a wrong snapshot (eoslog.log.recovery, producer_state). What is wrong with one is
reported naming the file and the byte of the first wrong entry (and how many more are wrong),
with how it is mended: as an error (exit status 1) in a partition shut down cleanly, where
close synced every derived file and a wrong byte is damage; as a warning otherwise, since a
crash or a live owner leaves such files behind the log for the next open to mend (and damage
in the .log, itself an error, explains what its derived files then disagree with). A
`.txnindex` entry the log contradicts only in the transaction's outcome is always an error:
an open refuses it.

The files are read in bounded pieces (a chunk of index entries; a .txnindex by
txn_index.read_entries; a snapshot by read_snapshot), and batches are looked up through at
most SEGMENTS_OPEN_MAX segments' offset indexes at a time. In a directory an owner may be
writing (no clean-shutdown marker), the last segment's entries past what the walk of its .log
saw are left alone: the owner writes an entry after the batch it names.
"""

from __future__ import annotations

import bisect
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

import numpy as np

from eoslog._ext import index as _index
from eoslog._ext.producer_state import ProducerStateTable
from eoslog.errors import CorruptIndexError, CorruptSnapshotError, KafkaException
from eoslog.fs import FileHandle, FileSystem
from eoslog.log.checkpoints import ABORTED_TXNS_FILE, AbortedCounts
from eoslog.log.index_checks import (
    BatchCursor,
    index_entries,
    last_offset_at,
    time_entry_problems,
)
from eoslog.log.partition_view import SegmentFiles
from eoslog.log.producer_state import read_snapshot, snapshot_disagreement
from eoslog.log.recovery import outcome_conflict_text
from eoslog.log.segment_reads import (
    INDEX_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    file_name,
    parse_file_name,
)
from eoslog.log.time_index import NO_TIMESTAMP
from eoslog.log.txn_index import ENTRY_BYTES as TXN_ENTRY_BYTES
from eoslog.log.txn_index import (
    AbortedTxn,
    LoggedBatch,
    entry_disagreement,
    outcome_conflict,
    read_entries,
)
from eoslog.verify.log import WalkedSegment
from eoslog.verify.report import INDEX_REPAIR, SNAPSHOT_REPAIR, TXN_INDEX_REPAIR, Report

# Segments whose .log and offset index are held open at once for batch lookups (each index up
# to segment.index.bytes, 10 MiB by default, in memory): .txnindex entries and snapshots
# name batches of a few neighbouring segments at a time.
SEGMENTS_OPEN_MAX: Final = 2


@dataclass(frozen=True)
class WalkedPartition:
    """A partition after the walk of its .log files: its segments, where its log starts (as
    an open believes it) and ends (None when damage hides it), whether it is settled (shut
    down cleanly, so no owner writes to it), and its aborted-transaction counts."""

    directory: str
    segments: list[WalkedSegment]
    log_start: int
    log_end: int | None
    settled: bool
    aborted_counts: AbortedCounts | None = None

    def live_tail(self, number: int) -> bool:
        """Whether segment `number` is the last of a partition an owner may be appending to."""
        return number == len(self.segments) - 1 and not self.settled


class SegmentLookups:
    """The batch holding an offset, over the walked segments (oldest first), each seen up to
    the size its walk saw, through the checked offset-index lookups readers use
    (SegmentFiles.logged_batch). Used by one thread; close() releases the files."""

    def __init__(self, fs: FileSystem, partition: WalkedPartition) -> None:
        self._fs = fs
        self._partition = partition
        self._bases = [segment.base_offset for segment in partition.segments]
        self._open: OrderedDict[int, tuple[SegmentFiles, FileHandle]] = OrderedDict()

    def _segment(self, offset: int) -> SegmentFiles | None:
        number = bisect.bisect_right(self._bases, offset) - 1
        if number < 0:
            return None
        if number in self._open:
            self._open.move_to_end(number)
            return self._open[number][0]
        walked = self._partition.segments[number]
        handle = self._fs.open(walked.log_path, read_only=True)
        found = SegmentFiles(
            self._fs, self._partition.directory, walked.base_offset, handle, walked.size
        )
        self._open[number] = (found, handle)
        while len(self._open) > SEGMENTS_OPEN_MAX:
            self._open.popitem(last=False)[1][1].close()
        return found

    def batch_at(self, offset: int) -> LoggedBatch | None:
        """txn_index.BatchAt over the partition. CorruptRecordError where the .log is damaged
        (the walk reported that already); OSError."""
        segment = self._segment(offset)
        return None if segment is None else segment.logged_batch(offset)

    def position_of(self, offset: int) -> tuple[str, int | None]:
        """The .log holding the batch with `offset`, and the batch's byte (None if none)."""
        segment = self._segment(offset)
        if segment is None:
            return self._partition.segments[0].log_path, None
        found = segment.translate_offset(offset)
        return segment.log_path, None if found is None else found.position

    def close(self) -> None:
        for _, handle in self._open.values():
            handle.close()
        self._open.clear()


class _FileProblems:
    """What is wrong with one derived file: the first problem (its byte and what) and how
    many more, reported as one line (the file is mended whole)."""

    def __init__(self) -> None:
        self.first: tuple[int, str] | None = None
        self.more = 0

    def add(self, position: int, text: str) -> None:
        if self.first is None:
            self.first = (position, text)
        else:
            self.more += 1

    def report(self, report: Report, path: str, repair: str, *, settled: bool) -> None:
        """One line: an error in a partition shut down cleanly (close synced every derived
        file, so a wrong byte there is damage), else a warning (a crash or a live owner
        leaves such files behind the log, and the next open mends them)."""
        if self.first is None:
            return
        position, text = self.first
        more = f" (and {self.more} more problems in the file)" if self.more else ""
        line = f"{text}{more}: {repair.format(path=path)}"
        report.problem(path, position, line, error=settled)


def check_derived_files(fs: FileSystem, report: Report, partition: WalkedPartition) -> None:
    """Each segment's indexes and .txnindex, then the snapshots, against the log."""
    lookups = SegmentLookups(fs, partition)
    try:
        for number, segment in enumerate(partition.segments):
            following = partition.segments[number + 1 :]
            next_base = following[0].base_offset if following else None
            try:
                if segment.end_offset is not None:  # a damaged .log is checked after its repair
                    check_offset_index(fs, report, partition, number, next_base)
                    check_time_index(fs, report, partition, number)
                check_txn_index(fs, report, partition, number, lookups)
            except FileNotFoundError:
                continue  # retention removed the segment since the walk (a live owner)
        _check_snapshots(fs, report, partition, lookups)
    finally:
        lookups.close()


def _open_derived(fs: FileSystem, report: Report, path: str) -> FileHandle | None:
    """The derived file at path, open read-only; None if it is missing (an open rebuilds a
    missing index, and a segment without aborted transactions has no .txnindex) or not a
    regular file (a warning)."""
    try:
        return fs.open(path, read_only=True)
    except FileNotFoundError:
        return None
    except (IsADirectoryError, OSError) as error:
        report.warning(path, 0, f"cannot be read ({error}): the next open rebuilds it")
        return None


def _slots(handle: FileHandle, dtype: np.dtype[np.void]) -> Iterator[tuple[int, tuple[int, int]]]:
    """(slot, its two fields) of each entry of an index file (index_checks.index_entries)."""
    slot = 0
    for entries in index_entries(handle, dtype):
        for values in entries.tolist():
            yield slot, values
            slot += 1


def _tail_problems(
    handle: FileHandle, entry_bytes: int, entries_read: int, problems: _FileProblems
) -> None:
    """What lies after the entries of a closed segment's index: nothing, since a roll trims
    the file to its entries. A zero slot with bytes after it is a trim a crash undid (then
    the next open rescans the segment) or damage hiding later entries; a partial entry at
    the end is damage."""
    size = handle.size()
    used = entries_read * entry_bytes
    if used < size - size % entry_bytes:
        problems.add(
            used,
            f"slot {entries_read} is zero and {size - used} bytes follow it, but a closed "
            f"segment's index holds only its entries (a roll trims it)",
        )
    elif size % entry_bytes:
        problems.add(
            used,
            f"{size % entry_bytes} bytes at the end are a partial entry ({size} bytes is not a "
            f"multiple of the {entry_bytes}-byte entry)",
        )


# Checks one index entry, given its two fields: the problems with it, or None to stop (an entry
# a live owner wrote after the walk).
EntryCheck = Callable[[int, int], list[str] | None]


def _check_index(
    fs: FileSystem,
    report: Report,
    partition: WalkedPartition,
    number: int,
    suffix: str,
    check_with: Callable[[FileHandle], EntryCheck],
) -> None:
    """Every entry of segment `number`'s index with `suffix`, by the check check_with makes
    over the segment's open .log; then what follows the entries (_tail_problems)."""
    segment = partition.segments[number]
    path = os.path.join(partition.directory, file_name(segment.base_offset, suffix))
    index = _open_derived(fs, report, path)
    if index is None:
        return
    dtype = _index.OFFSET_ENTRY_DTYPE if suffix == INDEX_SUFFIX else _index.TIME_ENTRY_DTYPE
    problems = _FileProblems()
    log = fs.open(segment.log_path, read_only=True)
    live = partition.live_tail(number)
    try:
        check = check_with(log)
        read = 0
        for slot, (first, second) in _slots(index, dtype):
            if live and first == second == 0:
                break  # the unused, zeroed slots of the index an owner keeps preallocated
            found = check(first, second)
            if found is None:
                break
            for text in found:
                problems.add(slot * dtype.itemsize, f"entry {slot} {text}")
            read = slot + 1
        else:
            if not live:
                _tail_problems(index, dtype.itemsize, read, problems)
    finally:
        log.close()
        index.close()
    problems.report(
        report, path, INDEX_REPAIR, settled=partition.settled and partition.log_end is not None
    )


def check_offset_index(
    fs: FileSystem, report: Report, partition: WalkedPartition, number: int, next_base: int | None
) -> None:
    """Every entry (o, p): offsets and positions strictly increase, o below the next
    segment's base, and the batch at byte p ends at offset o (index_checks.last_offset_at)."""
    segment = partition.segments[number]
    live = partition.live_tail(number)

    def check_with(log: FileHandle) -> EntryCheck:
        previous = (segment.base_offset - 1, 0)  # the last entry found right

        def check(relative: int, position: int) -> list[str] | None:
            nonlocal previous
            offset = segment.base_offset + relative
            if live and position >= segment.size:
                return None  # an entry for a batch appended after the walk
            text = _offset_entry_problem(log, segment, (offset, position), previous, next_base)
            if text is not None:
                return [f"(offset {offset}) {text}"]
            previous = (offset, position)
            return []

        return check

    _check_index(fs, report, partition, number, INDEX_SUFFIX, check_with)


def _offset_entry_problem(
    log: FileHandle,
    segment: WalkedSegment,
    entry: tuple[int, int],
    previous: tuple[int, int],
    next_base: int | None,
) -> str | None:
    """What is wrong with the offset-index entry (offset, position), or None."""
    offset, position = entry
    if offset <= previous[0] or position <= previous[1]:
        return (
            f"at .log byte {position} does not follow the entry before it (offset "
            f"{previous[0]} at .log byte {previous[1]}): both increase, and none is at byte 0"
        )
    if next_base is not None and offset >= next_base:
        return f"is past the segment's offsets (the next segment starts at {next_base})"
    if position >= segment.size:
        return f"points at .log byte {position}, past its end ({segment.size} bytes)"
    found = last_offset_at(log, position)
    if found != offset:
        what = "no batch starts" if found is None else f"the batch ends at offset {found}"
        return f"says a batch ending at it starts at .log byte {position}, but {what} there"
    return None


def check_time_index(
    fs: FileSystem, report: Report, partition: WalkedPartition, number: int
) -> None:
    """Every entry (t, o) against the batches of the .log, in one forward pass
    (index_checks.BatchCursor and time_entry_problems: Kafka's dump tool's checks)."""
    segment = partition.segments[number]
    live = partition.live_tail(number)
    end_offset = segment.end_offset
    assert end_offset is not None, "the indexes of a damaged segment are not checked"

    def check_with(log: FileHandle) -> EntryCheck:
        cursor = BatchCursor(log, segment.size)
        previous = NO_TIMESTAMP  # the timestamp of the last entry found right

        def check(timestamp: int, relative: int) -> list[str] | None:
            nonlocal previous
            offset = segment.base_offset + relative
            if live and offset >= end_offset:
                return None  # an entry for a batch appended after the walk
            batch = cursor.batch_ending_at(offset)
            found = time_entry_problems(offset, timestamp, batch, previous)
            if not found:
                previous = timestamp
            return [problem.describe() for problem in found]

        return check

    _check_index(fs, report, partition, number, TIME_INDEX_SUFFIX, check_with)


def check_txn_index(
    fs: FileSystem, report: Report, partition: WalkedPartition, number: int, lookups: SegmentLookups
) -> None:
    """The file as an open reads it (txn_index.read_entries, and what sanity_check refuses),
    each entry against the log (entry_disagreement; outcome_conflict is an error), and its
    count against the aborted-transaction checkpoint (AbortedCounts.agrees)."""
    segment = partition.segments[number]
    path = os.path.join(partition.directory, file_name(segment.base_offset, TXN_INDEX_SUFFIX))
    handle = _open_derived(fs, report, path)
    problems = _FileProblems()
    entries: list[AbortedTxn] = []
    if handle is not None:
        try:
            size = handle.size()
            image, damaged_at = read_entries(handle)
        finally:
            handle.close()
        if size == 0:
            problems.add(
                0,
                "the file is empty, which eoslog never leaves (a segment without aborted "
                "transactions has no .txnindex)",
            )
        elif damaged_at is not None:
            problems.add(damaged_at, "the entry there is malformed or out of order")
        elif len(image) < size and not partition.live_tail(number):
            problems.add(len(image), "the file ends in a partial entry")
        try:
            entries = _index.decode_aborted_txns(image, AbortedTxn)
        except CorruptIndexError as error:
            problems.add(0, f"{error}")
    for slot, entry in enumerate(entries):
        if (
            partition.live_tail(number)
            and partition.log_end is not None
            and entry.last_offset >= partition.log_end
        ):
            break  # the owner wrote it after the walk read the marker's segment
        if entry.last_offset < segment.base_offset:  # what sanity_check refuses
            text = f"entry {slot} ends at offset {entry.last_offset}, below the segment's base"
            problems.add(slot * TXN_ENTRY_BYTES, text)
            continue
        _check_txn_entry(report, partition, path, slot, entry, lookups, problems)
    _check_count(partition, segment, entries, problems)
    problems.report(
        report, path, TXN_INDEX_REPAIR, settled=partition.settled and partition.log_end is not None
    )


def _check_txn_entry(
    report: Report,
    partition: WalkedPartition,
    path: str,
    slot: int,
    entry: AbortedTxn,
    lookups: SegmentLookups,
    problems: _FileProblems,
) -> None:
    """One .txnindex entry against the batches it names, as an open checks it."""
    position = slot * TXN_ENTRY_BYTES
    try:
        if outcome_conflict(entry, lookups.batch_at, partition.log_start):
            log_path, batch_position = lookups.position_of(entry.last_offset)
            text = outcome_conflict_text(entry, log_path, batch_position)
            report.problem(path, position, f"entry {slot} {text}; an open refuses the directory")
            return
        why = entry_disagreement(entry, lookups.batch_at, partition.log_start)
    except (KafkaException, OSError):
        return  # the .log is damaged where the entry points: the walk reported it
    if why is not None:
        named = (
            f"producer {entry.producer_id}, offsets {entry.first_offset}..{entry.last_offset}, "
            f"last stable offset {entry.last_stable_offset}"
        )
        problems.add(position, f"entry {slot} ({named}) disagrees with the log: {why}")


def _check_count(
    partition: WalkedPartition,
    segment: WalkedSegment,
    entries: list[AbortedTxn],
    problems: _FileProblems,
) -> None:
    """The entries ending below the checkpoint's covered offset must be as many as it
    counted (AbortedCounts.agrees): a .txnindex lost, emptied or cut reads like a segment
    with fewer aborts otherwise. Without a line for the partition an open rebuilds every
    .txnindex, and there is nothing to compare."""
    counted = partition.aborted_counts
    if counted is None:
        return
    held = [entry for entry in entries if entry.last_offset < counted.covered_to]
    if counted.agrees(segment.base_offset, lambda below: len(held)):
        return
    expected = counted.by_segment.get(segment.base_offset, 0)
    problems.add(
        min(len(held), expected) * TXN_ENTRY_BYTES,
        f"it holds {len(held)} entries ending below offset {counted.covered_to}, but "
        f"{ABORTED_TXNS_FILE} counted {expected} (entries lost or added)",
    )


def _check_snapshots(
    fs: FileSystem, report: Report, partition: WalkedPartition, lookups: SegmentLookups
) -> None:
    """Each snapshot an open would load (its offset in (log start, log end]; an open deletes
    the others)."""
    if partition.log_end is None:
        return  # the log is damaged: its snapshots are judged after the repair
    for name in fs.listdir(partition.directory):
        parsed = parse_file_name(name)
        if parsed is None or parsed[1] != SNAPSHOT_SUFFIX:
            continue
        if partition.log_start < parsed[0] <= partition.log_end:
            check_snapshot(fs, report, partition, lookups, parsed[0])


def check_snapshot(
    fs: FileSystem,
    report: Report,
    partition: WalkedPartition,
    lookups: SegmentLookups,
    offset: int,
) -> None:
    """The snapshot at `offset`, read as an open reads it (read_snapshot, then the CRC as it
    loads) and checked against the log (snapshot_disagreement)."""
    path = os.path.join(partition.directory, file_name(offset, SNAPSHOT_SUFFIX))
    try:
        handle = fs.open(path, read_only=True)
    except FileNotFoundError:
        return  # the owner replaced or deleted it since the listing
    problems = _FileProblems()
    table = ProducerStateTable()
    try:
        table.load_snapshot(read_snapshot(handle, path), offset)
        why = snapshot_disagreement(table, offset, lookups.batch_at, partition.log_start)
        if why is not None:
            problems.add(0, f"disagrees with the log: {why}")
    except CorruptSnapshotError as error:
        problems.add(error.position or 0, error.reason or str(error))
    except (KafkaException, OSError):
        pass  # the .log is damaged where the snapshot points: the walk reported it
    finally:
        handle.close()
    problems.report(
        report, path, SNAPSHOT_REPAIR, settled=partition.settled and partition.log_end is not None
    )
