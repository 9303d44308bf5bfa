"""Offline checks of segment files: `eoslog verify` (`eoslog dump-log` is eoslog.dump_files).

It is read-only and takes no lock, so it may run while the owner writes (a last segment
being appended to may then show a torn tail). It reads a .log in bounded pieces with
eoslog.log.segment_check's walk, the one `eoslog repair` validates its cut with, which checks
framing, CRC and offset continuity as recovery does: a multi-GiB segment costs a chunk of
memory (or one batch, when a batch is larger), never the file.

verify reports every problem it finds with its byte position, carrying on past damage to the
next valid batch, and exits 1 if there is any; a torn tail (a partial last batch, what a crash
mid-write leaves and the next unclean open cuts) is a warning.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from typing import Final

import numpy as np

from eoslog import limits
from eoslog.errors import KafkaException, NotASegmentFileError
from eoslog.fs import FileHandle, FileSystem, PosixFileSystem
from eoslog.log.segment_check import (
    SEGMENT_LOG_NAME,
    SegmentWalk,
    WalkStop,
    continuity_problem,
    find_resumption,
)
from eoslog.log.segment_reads import LOG_SUFFIX, offset_from_file_name
from eoslog.progress import Advance, byte_progress, no_progress
from eoslog.record import codec

# A partition directory is `<topic>-<partition>` (docs/format.md §5.1); a topic being deleted has a
# longer suffix and is not verified.
_PARTITION_DIRECTORY: Final = re.compile(r".+-\d+")


def check_segment_file(path: str, *, segment_name: bool = True) -> None:
    """NotASegmentFileError unless `path` is a regular file named like a segment's .log (any
    name when not segment_name); FileNotFoundError if it is missing. The kind is checked
    before anything opens it: opening a FIFO would block. (The fs seam has no stat; these
    command-line tools read real files only.)"""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise NotASegmentFileError(f"{path} is not a regular file")
    if segment_name and not SEGMENT_LOG_NAME.fullmatch(os.path.basename(path)):
        raise NotASegmentFileError(
            f"{path} is not a segment's .log (its name must be 20 digits and .log)"
        )


@dataclass
class _Tally:
    """What a verification found so far; problems are printed as they are found."""

    batches: int = 0
    records: int = 0
    errors: int = 0
    warnings: int = 0
    # Called with the bytes of each piece walked: the progress bar's (eoslog.progress).
    advance: Advance = no_progress

    def problem(self, path: str, position: int, text: str, *, error: bool = True) -> None:
        print(f"{path}: {'error' if error else 'warning'} at byte {position}: {text}")
        if error:
            self.errors += 1
        else:
            self.warnings += 1

    def summary(self, what: str) -> str:
        if self.errors:
            return (
                f"{what}: {self.batches} valid batches, {self.records} records, "
                f"{self.errors} problems found"
            )
        warnings = f"; {self.warnings} warnings" if self.warnings else ""
        return f"{what}: {self.batches} batches, {self.records} records, all valid{warnings}"


def verify(path: str) -> int:
    """`eoslog verify PATH`: a segment's .log, a partition directory or a log directory.
    Exit status 0 when every batch is valid (warnings allowed), 1 when a problem was found."""
    if os.path.isdir(path):
        return verify_directory(path)
    return verify_log(path)


def verify_log(path: str) -> int:
    """Check every batch of one segment's .log: framing, CRC, offsets continuing from the
    file name's base offset, and every record (as a Kafka leader validates an append)."""
    check_segment_file(path)
    tally = _Tally()
    with byte_progress(f"verify {os.path.basename(path)}", os.path.getsize(path)) as advance:
        tally.advance = advance
        _verify_segment(PosixFileSystem(), path, tally)
    print(tally.summary(path))
    return 1 if tally.errors else 0


def verify_directory(path: str) -> int:
    """Check every segment of a partition directory, or of every partition of a log
    directory, and that each segment starts where the previous one ends.
    NotASegmentFileError for a directory holding neither."""
    fs = PosixFileSystem()
    tally = _Tally()
    names = fs.listdir(path)
    if any(SEGMENT_LOG_NAME.fullmatch(name) for name in names):
        partitions = [path]
    else:
        partitions = [
            os.path.join(path, name)
            for name in names
            if _PARTITION_DIRECTORY.fullmatch(name) and os.path.isdir(os.path.join(path, name))
        ]
    if not partitions:
        raise NotASegmentFileError(
            f"{path} holds neither segment .log files nor partition directories (topic-N)"
        )
    total = sum(_segment_bytes(directory) for directory in partitions)
    with byte_progress(f"verify {os.path.basename(path)}", total) as advance:
        tally.advance = advance
        segments = sum(_verify_partition(fs, directory, tally) for directory in partitions)
    print(tally.summary(f"{path}: {segments} segments in {len(partitions)} partitions"))
    return 1 if tally.errors else 0


def _segment_bytes(directory: str) -> int:
    """The bytes of the partition directory's segment .logs, for the progress bar."""
    with os.scandir(directory) as entries:
        return sum(
            entry.stat(follow_symlinks=False).st_size
            for entry in entries
            if SEGMENT_LOG_NAME.fullmatch(entry.name) and entry.is_file(follow_symlinks=False)
        )


def _verify_partition(fs: FileSystem, directory: str, tally: _Tally) -> int:
    """Verify a partition's segments in order; returns how many there are."""
    names = fs.listdir(directory)
    for name in names:
        if name.endswith(LOG_SUFFIX) and not SEGMENT_LOG_NAME.fullmatch(name):
            text = "not a segment name (20 digits and .log): not verified"
            tally.problem(os.path.join(directory, name), 0, text, error=False)
    segments = [name for name in names if SEGMENT_LOG_NAME.fullmatch(name)]
    previous_end: int | None = None
    for name in segments:
        path = os.path.join(directory, name)
        problem = None if previous_end is None else continuity_problem(previous_end, int(name[:20]))
        if problem is not None:
            tally.problem(path, 0, f"the segment's {problem}, where the previous segment ends")
        try:
            check_segment_file(path)
        except NotASegmentFileError as error:
            tally.problem(path, 0, str(error))
            previous_end = None
            continue
        previous_end = _verify_segment(fs, path, tally)
    return len(segments)


def _verify_segment(fs: FileSystem, path: str, tally: _Tally) -> int | None:
    """Walk one segment, reporting each problem; returns the offset after its last batch,
    or None if it has damage (its end is then unknown)."""
    handle = fs.open(path, read_only=True)
    try:
        return _walk_reporting(handle, path, offset_from_file_name(os.path.basename(path)), tally)
    finally:
        handle.close()


def _walk_reporting(handle: FileHandle, path: str, base: int, tally: _Tally) -> int | None:
    """The valid batches from the segment start, then after each damage from the next valid
    batch on (the offsets there must not go back), until the end."""
    size = handle.size()
    errors_before = tally.errors
    walk = SegmentWalk(handle, size, base)
    floor: int | None = None  # after damage: the offsets must resume at or above this
    epoch: tuple[int, int] | None = None  # the last batch's leader epoch and position
    while True:
        for chunk_position, chunk, infos in walk:
            first = int(infos["base_offset"][0])
            if floor is not None and first < floor:
                where = chunk_position + int(infos["position"][0])
                tally.problem(path, where, continuity_problem(floor, first) or "")
            floor = None
            epoch = _check_leader_epochs(path, chunk_position, infos, epoch, tally)
            _validate_records(path, chunk_position, chunk, infos, tally)
            tally.advance(int(infos["position"][-1]) + int(infos["size"][-1]))
        if walk.stop is None:
            break
        resume = find_resumption(handle, walk.stop.position, size)
        _report_stop(path, size, walk.stop, resume, tally)
        if resume is None:
            break
        floor = walk.next_offset
        walk = SegmentWalk(handle, size, None, start=resume)
    return walk.next_offset if tally.errors == errors_before else None


def _report_stop(path: str, size: int, stop: WalkStop, resume: int | None, tally: _Tally) -> None:
    if resume is not None:
        text = (
            f"{stop.description}; valid batches resume at byte {resume}: damage in the middle "
            f"of the log, which an open refuses (and `eoslog repair` can cut)"
        )
        tally.problem(path, stop.position, text)
    elif stop.torn:
        text = (
            f"{size - stop.position} trailing bytes do not form a whole batch "
            f"({stop.description}): a torn tail, which the next unclean open cuts"
        )
        tally.problem(path, stop.position, text, error=False)
    else:
        tally.problem(path, stop.position, stop.description)


def _check_leader_epochs(
    path: str,
    chunk_position: int,
    infos: np.ndarray,
    previous: tuple[int, int] | None,
    tally: _Tally,
) -> tuple[int, int]:
    """Report every batch whose partition leader epoch is below the previous batch's: epochs
    never decrease along a Kafka log, and the field is outside the CRC, so a drop means one
    of the two was damaged (eoslog writes 0 and reads nothing from it, so no record read
    changes). Returns the last batch's (epoch, position) for the next chunk."""
    epochs = infos["partition_leader_epoch"].astype(np.int64)
    positions = chunk_position + infos["position"]
    if previous is not None:
        epochs = np.concatenate(([previous[0]], epochs))
        positions = np.concatenate(([previous[1]], positions))
    for index in (np.flatnonzero(epochs[1:] < epochs[:-1]) + 1).tolist():
        tally.problem(
            path,
            int(positions[index]),
            f"partition leader epoch {epochs[index]} is below the previous batch's "
            f"({epochs[index - 1]}, at byte {positions[index - 1]}): epochs never decrease "
            f"along a log, so one of the two is damaged",
        )
    return int(epochs[-1]), int(positions[-1])


def _validate_records(
    path: str, chunk_position: int, chunk: bytes, infos: np.ndarray, tally: _Tally
) -> None:
    """Every record of each batch, as a Kafka leader checks an append (the walk checked the
    framing, CRC and offsets already)."""
    view = memoryview(chunk)
    for position, size in zip(infos["position"].tolist(), infos["size"].tolist(), strict=True):
        try:
            codec.validate_batch(
                view[position : position + size],
                batch_bytes_max=limits.batch_bytes_max,
                from_client=False,
            )
        except KafkaException as error:
            # The codec names the batch's position in the bytes given, here always 0.
            text = str(error).removesuffix(" (batch at byte 0)")
            tally.problem(path, chunk_position + position, f"{type(error).__name__}: {text}")
    tally.batches += len(infos)
    tally.records += int(infos["records_count"].sum())
