"""What a PartitionView trusts when it opens a partition directory it does not own
(docs/format.md §9, recovery's table, read-only): the segment files as listed, the owner's
recovery point and aborted-transaction counts, and how far the last segment holds whole
valid batches (a torn tail is left out; damage recovery would refuse is reported)."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Final

import numpy as np

from eoslog import limits
from eoslog.errors import KafkaStorageError
from eoslog.fs import FileHandle, FileSystem
from eoslog.log import checkpoints
from eoslog.log.segment import first_offset_violation
from eoslog.log.segment_reads import LOG_SUFFIX, file_name, parse_file_name

if TYPE_CHECKING:
    from eoslog.log.partition_view import SegmentFiles
    from eoslog.log.txn_index import AbortedTxn

# A partition directory's name: `<topic>-<partition>` (docs/format.md §5.1).
_PARTITION_DIRECTORY: Final = re.compile(r"(.+)-([0-9]+)")
# An offset past this leaves no log end offset an int64 can hold (Kafka's offsets are int64):
# a batch claiming one is damage.
OFFSET_LIMIT: Final = (1 << 63) - 1


def why_not_torn(clean: bool, recovery_point: int | None, next_offset: int) -> str:
    """Why damage at the end of the log (at next_offset) is not a torn tail the view may
    leave out (recovery's table)."""
    if clean:
        return (
            f"the bytes from offset {next_offset} on are not whole valid batches, but the "
            f"directory was shut down cleanly ({checkpoints.CLEAN_SHUTDOWN_FILE}), so "
            "everything in it was durable"
        )
    if recovery_point is not None:
        return (
            f"the bytes from offset {next_offset} on are not whole valid batches, but offsets "
            f"below the recovery point {recovery_point} were durable"
        )
    return (
        f"the bytes from offset {next_offset} on are not whole valid batches, and a valid "
        "batch follows them: this is not a torn tail"
    )


def recovery_point(fs: FileSystem, root: str, topic: str, partition: int) -> int | None:
    """The partition's entry in the owner's recovery-point checkpoint, or None when the file
    or the entry is missing or unreadable (then nothing is known durable: the owner's rule)."""
    path = os.path.join(root, checkpoints.RECOVERY_POINT_FILE)
    try:
        offsets, _ = checkpoints.read_believed_offsets(fs, path)
    except OSError:
        return None  # replaced or made unreadable under us: nothing is known durable
    return offsets.get((topic, partition))


def cleaned_end(fs: FileSystem, root: str, topic: str, partition: int) -> int:
    """The partition's entry in the owner's cleaner-offset-checkpoint (0 when missing or
    unreadable: then no gap is believed to be the cleaner's). Read after the segments are
    opened: the owner raises it before it swaps a segment with gaps in, so a value read then
    covers every segment the view holds."""
    try:
        offsets, _ = checkpoints.read_believed_offsets(
            fs, os.path.join(root, checkpoints.CLEANER_OFFSET_FILE)
        )
    except OSError:
        return 0
    return offsets.get((topic, partition), 0)


def segment_compacted(fs: FileSystem, log_path: str) -> bool:
    """Whether the segment at log_path lies wholly below its partition's entry in the
    cleaner-offset-checkpoint of the log directory holding it (so the cleaner may have left
    gaps in it): a later segment starts at or below that entry. False for a file outside a
    `<topic>-<partition>` directory or without such an entry. Read when asked, after the
    segment was opened: the owner raises the entry before it swaps a segment in."""
    directory, name = os.path.split(os.path.abspath(log_path))
    parsed = parse_file_name(name)
    found = _PARTITION_DIRECTORY.fullmatch(os.path.basename(directory))
    if parsed is None or found is None:
        return False
    root = os.path.dirname(directory)
    end = cleaned_end(fs, root, found.group(1), int(found.group(2)))
    if end <= parsed[0]:
        return False
    later = [
        base
        for base, suffix in filter(None, map(parse_file_name, fs.listdir(directory)))
        if suffix == LOG_SUFFIX and base > parsed[0]
    ]
    return bool(later) and min(later) <= end


def aborted_counts(
    fs: FileSystem, root: str, topic: str, partition: int
) -> checkpoints.AbortedCounts | None:
    """The partition's line in the owner's aborted-transaction checkpoint, or None when the
    file or the line is missing or unreadable (then no .txnindex is believed: every aborted
    transaction is derived from the batch headers, as the owner's open rescans)."""
    try:
        counts, _ = checkpoints.read_believed_aborted_counts(fs, root)
    except OSError:
        return None
    return counts.get((topic, partition))


def as_counted(
    base_offset: int, entries: list[AbortedTxn], counted: checkpoints.AbortedCounts | None
) -> bool:
    """Whether a segment's .txnindex entries agree with the owner's count
    (AbortedCounts.agrees); without a count nothing is known: False."""
    return counted is not None and counted.agrees(
        base_offset, lambda below: sum(1 for entry in entries if entry.last_offset < below)
    )


def valid_prefix(
    segment: SegmentFiles, position: int, expected: int | None
) -> tuple[int, int, bool]:
    """Walk the .log from `position` (a batch boundary) to its captured size, checking each
    batch's framing, CRC and offsets (each batch continues the previous one; the first
    begins at `expected`, if given). Returns (where the valid batches end, the offset after
    them, whether they end at a whole batch with a valid CRC whose offsets break the order:
    valid data after the damage)."""
    next_offset = expected
    while position < segment.size:
        infos, stop, status, _ = segment.scan_chunk(
            position, segment.size, limits.tail_check_chunk_bytes, verify_crc=True
        )
        if len(infos) == 0:
            break
        if next_offset is None:
            next_offset = int(infos["base_offset"][0])
        bad = first_offset_violation(infos, next_offset)
        beyond = np.flatnonzero(infos["last_offset"] >= OFFSET_LIMIT)
        if len(beyond) and (bad is None or int(beyond[0]) < bad):
            bad = int(beyond[0])
        if bad is not None:
            if bad:
                next_offset = int(infos["last_offset"][bad - 1]) + 1
            return position + int(infos["position"][bad]), next_offset, True
        next_offset = int(infos["last_offset"][-1]) + 1
        position += stop
        if status != 0:
            break
    return position, segment.base_offset if next_offset is None else next_offset, False


def open_segments(fs: FileSystem, directory: str) -> list[tuple[int, FileHandle]]:
    """(base offset, read-only handle) of each segment, oldest first. A segment that vanishes
    before it is opened is skipped when it is the oldest (retention); anywhere else the
    listing is taken again."""
    for _ in range(limits.view_open_attempts_max):
        # Only `<20 ASCII digits, within int64>.log` is a segment (segment_reads.
        # parse_file_name): `.log.deleted`, `.log.swap` and stray names are not.
        # A directory under a segment's name is a stray too (the owner ignores it).
        subdirectories = set(fs.list_directories(directory))
        parsed = [
            parse_file_name(name) for name in fs.listdir(directory) if name not in subdirectories
        ]
        bases = sorted(found[0] for found in parsed if found is not None and found[1] == LOG_SUFFIX)
        opened: list[tuple[int, FileHandle]] = []
        complete = True
        for base in bases:
            try:
                handle = fs.open(
                    os.path.join(directory, file_name(base, LOG_SUFFIX)), read_only=True
                )
            except FileNotFoundError:
                if opened:
                    complete = False
                    break
                continue
            opened.append((base, handle))
        if complete:
            return opened
        for _, handle in opened:
            handle.close()
    raise KafkaStorageError(f"{directory}: the segment files kept changing while being opened")


def checked_record_offsets(
    offsets: np.ndarray, returned: int, segment: SegmentFiles, position: int
) -> int:
    """The last of `offsets` (the records of one decoded run of batches, read at `position`
    of the segment's .log), after checking that they continue `returned` (the last offset a
    read yielded) in strictly increasing order. A record's offset delta is inside the CRC
    but only the writer checks it: a forged batch repeating one would make a reader return a
    record twice or move backwards. CorruptRecordError naming the file and the run's byte."""
    steps = np.diff(offsets, prepend=np.int64(returned))
    bad = np.flatnonzero(steps <= 0)
    if len(bad):
        at = int(bad[0])
        previous = returned if at == 0 else int(offsets[at - 1])
        raise segment.corruption(
            position,
            f"a record of offset {int(offsets[at])} follows offset {previous} in the batches "
            "read from there: record offsets must increase",
        )
    return int(offsets[-1])


def check_continuity(
    segment: SegmentFiles, position: int, infos: np.ndarray, expected: int | None, start: int
) -> None:
    """CorruptRecordError (naming the file and byte) unless the batches of a read (rows,
    positions relative to `position`) continue each other and the batch before them
    (`expected`; the first read must begin at or below `start`): base offsets and lengths
    are outside the CRC, and a read trusting a damaged one would return records twice or
    out of order. The log is contiguous except in segments the cleaner cleaned."""
    first = int(infos["base_offset"][0])
    bad = first_offset_violation(infos, first if expected is None else expected, segment.compacted)
    if bad is None and expected is None and first > start and not segment.compacted:
        bad = 0
    if bad is not None:
        row = infos[bad]
        raise segment.corruption(
            position + int(row["position"]),
            f"a batch of offsets {int(row['base_offset'])}-{int(row['last_offset'])} breaks the "
            "order of offsets",
        )
