"""Offline repair of a partition that an open refused for damage in the middle of its log
(`eoslog repair FILE --truncate-at POSITION`, eoslog.repair_truncate).

Repair is the one deliberate way to discard records, so it is careful about two things:
- it runs only on a directory no process owns: it takes the log directory's `.lock` with the
  fs seam's lock, as the broker does, and refuses a live directory naming the owner's pid
  (cutting a file the owner has mapped kills the owner with SIGBUS);
- it cuts only at a batch boundary it has validated: the start of a batch (or the end of the
  valid batches) reached by walking valid batches from the segment start, with the checks
  recovery makes (eoslog.log.segment_check). Any other position would leave a partial batch
  the next open could not read, or cut a batch in two; it is refused with the nearest valid
  boundary at or below it, and nothing is changed.

After the cut, the segment's index files and every later segment, and the producer-state
snapshots past the cut are deleted (the next open rebuilds indexes and producer state from
the log), and the recovery-point and log-start checkpoints are lowered to the cut offset if
they lie past it, so that the directory opens with every record before the cut.
"""

from __future__ import annotations

import os
import re
from typing import Final

import numpy as np

from eoslog.errors import NotASegmentFileError, RepairRefusedError
from eoslog.fs import FileSystem, PosixFileSystem
from eoslog.log import checkpoints
from eoslog.log.dir_lock import lock_log_directory
from eoslog.log.segment_check import SEGMENT_LOG_NAME, SegmentWalk
from eoslog.log.segment_reads import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_from_file_name,
)

# A partition directory is `<topic>-<partition>` (docs/format.md §5.1).
_PARTITION_DIRECTORY: Final = re.compile(r"(.+)-(\d+)")
# The files of a segment other than its .log, and the producer-state snapshots, by name.
_SEGMENT_FILE: Final = re.compile(r"(\d{20})(\.log|\.index|\.timeindex|\.txnindex|\.snapshot)")
_INDEX_SUFFIXES: Final = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def repair_truncate(log_file: str, position: int, fs: FileSystem | None = None) -> int:
    """Cut a damaged segment's .log at `position` and delete every later segment of the
    partition, so that the next open keeps every record before `position`. Returns the bytes
    of .log discarded.

    Raises NotASegmentFileError for a path not named like a segment's .log, LogDirLockedError
    (naming the owner's pid) while a process owns the log directory (the partition
    directory's parent), and RepairRefusedError when `position` is not a validated batch
    boundary; in each case nothing is changed. Any caller may call it; it holds the directory
    lock for its duration."""
    fs = fs or PosixFileSystem()
    log_file = os.path.abspath(log_file)
    directory, name = os.path.split(log_file)
    if not SEGMENT_LOG_NAME.fullmatch(name):
        raise NotASegmentFileError(
            f"{log_file} is not a segment's .log (its name must be 20 digits and .log)"
        )
    root = os.path.dirname(directory)
    lock = lock_log_directory(fs, root, "stop it before repairing")
    try:
        base = offset_from_file_name(name)
        cut_offset = validated_cut(fs, log_file, base, position)
        discarded = _cut(fs, log_file, position)
        # A segment cut to nothing goes, unless it is the first: the log then ends where the
        # previous segment ends, whatever this one's name said.
        previous_base = _previous_segment_base(fs, directory, base)
        drop_segment = position == 0 and previous_base is not None
        if drop_segment and previous_base is not None:
            # The log now ends inside the previous segment, at or above its base (whatever
            # this segment's name said): the checkpoints and snapshots go down to that base,
            # which the next open rescans from.
            cut_offset = previous_base
        discarded += _drop_later_files(fs, directory, base, cut_offset, drop_segment)
        fs.sync_dir(directory)
        _lower_checkpoints(fs, root, directory, cut_offset)
    finally:
        lock.release()
    return discarded


def validated_cut(fs: FileSystem, log_file: str, base_offset: int, position: int) -> int:
    """The offset the log would end at if cut at `position`: the offset after the last valid
    batch below it. RepairRefusedError unless `position` is 0 or the end of a batch reached
    by walking valid batches from the start (the walk reads only up to `position`)."""
    if position < 0:
        raise RepairRefusedError(f"{log_file}: a cut position cannot be negative", 0)
    boundary, next_offset = 0, base_offset
    damage = ""
    handle = fs.open(log_file, read_only=True)
    try:
        walk = SegmentWalk(handle, handle.size(), base_offset)
        for chunk_position, _, infos in walk if position > 0 else ():
            ends = chunk_position + infos["position"] + infos["size"]
            reached = int(np.searchsorted(ends, position, side="right"))
            if reached:
                boundary = int(ends[reached - 1])
                next_offset = int(infos["last_offset"][reached - 1]) + 1
            if reached < len(infos) or boundary >= position:
                break
        if walk.stop is not None and walk.stop.position == boundary < position:
            damage = f" (valid batches end there: {walk.stop.description})"
    finally:
        handle.close()
    if boundary != position:
        raise RepairRefusedError(
            f"{log_file}: will not cut at byte {position}: it is not a batch boundary reached "
            f"by walking valid batches (framing, CRC, offsets) from the segment start. The "
            f"nearest valid boundary at or below it is byte {boundary}{damage}, where the log "
            f"would end at offset {next_offset}; nothing was changed",
            boundary,
        )
    return next_offset


def _cut(fs: FileSystem, log_file: str, position: int) -> int:
    """Truncate the .log at `position`, durably; the bytes removed."""
    handle = fs.open(log_file)
    try:
        discarded = max(handle.size() - position, 0)
        handle.truncate(position)
        handle.sync()
    finally:
        handle.close()
    return discarded


def _previous_segment_base(fs: FileSystem, directory: str, base_offset: int) -> int | None:
    """The base offset of the segment before the one at base_offset, or None for the first."""
    earlier = [
        offset_from_file_name(name)
        for name in fs.listdir(directory)
        if SEGMENT_LOG_NAME.fullmatch(name) and offset_from_file_name(name) < base_offset
    ]
    return max(earlier, default=None)


def _drop_later_files(
    fs: FileSystem, directory: str, base_offset: int, cut_offset: int, drop_segment: bool
) -> int:
    """Delete the cut segment's index files (rebuilt at the next open; with drop_segment its
    emptied .log too), every later segment, and the producer snapshots past the cut offset
    (they describe records that are gone). Returns the bytes of later .log files deleted.
    Other names are left alone."""
    discarded = 0
    for name in fs.listdir(directory):
        match = _SEGMENT_FILE.fullmatch(name)
        if match is None:
            continue
        offset, suffix = int(match.group(1)), match.group(2)
        path = os.path.join(directory, name)
        if suffix == SNAPSHOT_SUFFIX:
            doomed = offset > cut_offset
        elif offset == base_offset:
            doomed = suffix in _INDEX_SUFFIXES or (drop_segment and suffix == LOG_SUFFIX)
        else:
            doomed = offset > base_offset
        if doomed:
            if suffix == LOG_SUFFIX and offset > base_offset:
                discarded += fs.file_size(path)
            fs.unlink(path)
    return discarded


def _lower_checkpoints(fs: FileSystem, root: str, directory: str, cut_offset: int) -> None:
    """Lower the partition's recovery point and log start offset to the cut offset where
    they lie past it (and drop its aborted-transaction counts): the log now ends there, and a
    checkpoint past the log end is an error at open. (A log start above the cut means every record
    kept was deleted already: the log is then empty from the cut offset on, as it was visible
    before.)"""
    match = _PARTITION_DIRECTORY.fullmatch(os.path.basename(directory))
    if match is None:
        return  # not inside a broker's log directory: no checkpoint names it
    key = (match.group(1), int(match.group(2)))
    path = os.path.join(root, checkpoints.RECOVERY_POINT_FILE)
    offsets, unreadable = checkpoints.read_believed_offsets(fs, path)
    # An open believes none of a garbled file's entries: nothing to lower then.
    if unreadable is None and offsets.get(key, cut_offset) > cut_offset:
        offsets[key] = cut_offset
        checkpoints.write_offsets(fs, path, offsets)
    starts, _ = checkpoints.read_believed_log_starts(fs, root)
    if key in starts and starts[key].offset > cut_offset:
        # Both files rewritten with what an open believes of them, this partition lowered;
        # a value the checksummed copy did not confirm stays unconfirmed.
        lowered = {
            k: min(start.offset, cut_offset) if k == key else start.offset
            for k, start in starts.items()
        }
        confirmed = {k: lowered[k] for k, start in starts.items() if start.confirmed}
        checkpoints.write_log_starts(fs, root, lowered, confirmed)
    # The aborted-transaction counts past the cut no longer hold, and the kept ones are not
    # known without reading the .txnindex files: the partition's line goes, so the next open
    # rebuilds its .txnindex files from the log (eoslog.log.recovery).
    counts, unreadable = checkpoints.read_believed_aborted_counts(fs, root)
    if unreadable is None and key in counts and counts[key].covered_to > cut_offset:
        del counts[key]
        checkpoints.write_aborted_counts(fs, root, counts)
