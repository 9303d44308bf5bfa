"""`eoslog verify PATH...`: offline checks of a log directory, a partition directory or one
segment file (`eoslog dump-log` is eoslog.dump_files), with every check an open makes and
more (docs/api.md "Command line"):

- a log directory: eoslog.meta and the checkpoint files, which partition directories the
  topics have, then each partition (eoslog.verify.directory);
- a partition directory: every segment's .log (framing, CRC, offset continuity within and
  between segments, leader epochs, records: eoslog.verify.log), the partition's checkpoint
  entries against its log, each segment's .index, .timeindex and .txnindex and the
  producer-state snapshots against the log (eoslog.verify.derived);
- a segment file: a .log alone, or an .index, .timeindex, .txnindex or .snapshot against the
  .log files beside it.

Every problem is a line naming the file and the byte, and for an error how to repair it
(eoslog.verify.report); each path ends with a summary line. Exit status: 1 when any path
has an error, else 0 (warnings allowed: a torn tail an open cuts, a derived file it rebuilds).
Every path is checked before anything is read: a missing one, or one that is neither a
segment file nor a directory holding segments or partitions, raises (OSError,
NotASegmentFileError) before anything is printed.

Read-only and lock-free, in bounded memory (a chunk of a file at a time, or one batch when a
batch is larger): it may run while the owner writes, and judges what it sees as the owner's
recovery would (eoslog.verify.facts).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Sequence

from eoslog.errors import CorruptCheckpointError, NotASegmentFileError
from eoslog.fs import FileSystem, PosixFileSystem
from eoslog.log import checkpoint_checks
from eoslog.log.meta_file import META_FILE
from eoslog.log.segment_check import SEGMENT_LOG_NAME
from eoslog.log.segment_reads import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    parse_file_name,
)
from eoslog.progress import byte_progress
from eoslog.verify.derived import (
    SegmentLookups,
    WalkedPartition,
    check_offset_index,
    check_snapshot,
    check_time_index,
    check_txn_index,
)
from eoslog.verify.directory import segment_bytes, verify_log_directory, verify_partition
from eoslog.verify.facts import ALL_DURABLE, PARTITION_DIRECTORY, partition_facts
from eoslog.verify.log import PartitionWalk, WalkedSegment, segment_end
from eoslog.verify.log import check_segment_file as check_segment_file
from eoslog.verify.report import COLLECTED, Report

# Verifies one path, printing its problems and a summary line; returns its exit status.
Verifier = Callable[[FileSystem, str], int]


def verify(paths: Sequence[str], *, as_json: bool = False) -> int:
    """`eoslog verify PATH... [--json]`: each path in turn; the exit status is the worst of
    theirs. With as_json one JSON object at the end: "status", "problems" (file, byte,
    severity, text) and "paths" (each path's summary, errors, warnings, batches, records).
    OSError or NotASegmentFileError for a path that cannot be verified, before any is."""
    verifiers = [(os.path.normpath(path), _verifier(path)) for path in paths]
    fs = PosixFileSystem()
    if not as_json:
        return max(verifier(fs, path) for path, verifier in verifiers)
    collected: list[dict[str, object]] = []
    token = COLLECTED.set(collected)
    try:
        status = max(verifier(fs, path) for path, verifier in verifiers)
    finally:
        COLLECTED.reset(token)
    document = {
        "status": status,
        "problems": [entry for entry in collected if "severity" in entry],
        "paths": [entry for entry in collected if "summary" in entry],
    }
    print(json.dumps(document, indent=2))
    return status


def _verifier(path: str) -> Verifier:
    """What verifies `path`, chosen by what it is. OSError for a missing path;
    NotASegmentFileError for anything else that is not a segment file or a directory of
    segments or partitions (checked before anything opens it: opening a FIFO blocks)."""
    if os.path.isdir(path):
        names = os.listdir(path)
        if any(SEGMENT_LOG_NAME.fullmatch(name) for name in names):
            return _verify_partition
        if META_FILE in names or any(
            PARTITION_DIRECTORY.fullmatch(name) and os.path.isdir(os.path.join(path, name))
            for name in names
        ):
            return _verify_log_directory
        raise NotASegmentFileError(
            f"{path} holds neither segment .log files nor partition directories (topic-N)"
        )
    check_segment_file(path, segment_name=False)
    parsed = parse_file_name(os.path.basename(path))
    verifier = None if parsed is None else _FILE_VERIFIERS.get(parsed[1])
    if verifier is None:
        raise NotASegmentFileError(
            f"{path} is not a segment file (its name must be 20 digits and .log, .index, "
            f".timeindex, .txnindex or .snapshot)"
        )
    return verifier


def _verify_log_directory(fs: FileSystem, path: str) -> int:
    report = Report()
    total = sum(
        segment_bytes(os.path.join(path, name))
        for name in fs.list_directories(path)
        if PARTITION_DIRECTORY.fullmatch(name)
    )
    with byte_progress(f"verify {os.path.basename(path)}", total) as advance:
        report.advance = advance
        segments, partitions = verify_log_directory(fs, report, path)
    report.finish(path, f"{path}: {segments} segments in {partitions} partitions")
    return report.status()


def _verify_partition(fs: FileSystem, path: str) -> int:
    report = Report()
    with byte_progress(f"verify {os.path.basename(path)}", segment_bytes(path)) as advance:
        report.advance = advance
        segments = verify_partition(fs, report, path, partition_facts(fs, path))
    report.finish(path, f"{path}: {segments} segments in 1 partitions")
    return report.status()


def _verify_log(fs: FileSystem, path: str) -> int:
    """One segment's .log: its batches, judged with what its partition and log directory
    say (the later segments, the recovery point, the clean-shutdown marker)."""
    check_segment_file(path)
    directory = os.path.dirname(path) or "."
    report = Report()
    walk = PartitionWalk(fs, report, directory, partition_facts(fs, directory))
    number = walk.bases.index(int(os.path.basename(path)[:20]))
    with byte_progress(f"verify {os.path.basename(path)}", os.path.getsize(path)) as advance:
        report.advance = advance
        walk.walk(number)
    report.finish(path, path)
    return report.status()


def _verify_derived_file(fs: FileSystem, path: str) -> int:
    """An index, time index, .txnindex or snapshot against the .log files beside it."""
    directory = os.path.dirname(path) or "."
    parsed = parse_file_name(os.path.basename(path))
    assert parsed is not None, "_verifier chose this by the name"
    offset, suffix = parsed
    report = Report()
    partition = _partition_around(fs, directory, offset if suffix != SNAPSHOT_SUFFIX else None)
    bases = [segment.base_offset for segment in partition.segments]
    if suffix == SNAPSHOT_SUFFIX:
        _verify_snapshot_file(fs, report, partition, path, offset)
    elif offset not in bases:
        report.warning(path, 0, "no .log of its segment is beside it: the next open deletes it")
    else:
        number = bases.index(offset)
        next_base = bases[number + 1] if number + 1 < len(bases) else None
        if suffix == INDEX_SUFFIX:
            check_offset_index(fs, report, partition, number, next_base)
        elif suffix == TIME_INDEX_SUFFIX:
            check_time_index(fs, report, partition, number)
        else:
            lookups = SegmentLookups(fs, partition)
            try:
                check_txn_index(fs, report, partition, number, lookups)
            finally:
                lookups.close()
    report.finish(path, path, batches=False)
    return report.status()


def _verify_snapshot_file(
    fs: FileSystem, report: Report, partition: WalkedPartition, path: str, offset: int
) -> None:
    if partition.log_end is None or not partition.log_start < offset <= partition.log_end:
        text = (
            f"its offset lies outside the log (log start {partition.log_start}, end "
            f"{partition.log_end}): the next open deletes it"
        )
        report.warning(path, 0, text)
        return
    lookups = SegmentLookups(fs, partition)
    try:
        check_snapshot(fs, report, partition, lookups, offset)
    finally:
        lookups.close()


def _partition_around(fs: FileSystem, directory: str, segment: int | None) -> WalkedPartition:
    """The partition a derived file belongs to, as far as checking that file needs it: its
    segments' sizes, where the log ends (a quiet walk of the last segment) and where the
    segment at base offset `segment` ends; the log start an open would believe."""
    facts = partition_facts(fs, directory)
    found = [parse_file_name(name) for name in fs.listdir(directory)]
    bases = sorted(name[0] for name in found if name is not None and name[1] == LOG_SUFFIX)
    segments = []
    for base in bases:
        log_path = os.path.join(directory, f"{base:020d}{LOG_SUFFIX}")
        size = fs.file_size(log_path)
        end = None
        if base in (segment, bases[-1]):
            end = segment_end(fs, log_path, base, size)
        segments.append(WalkedSegment(base, log_path, size, end))
    log_end = segments[-1].end_offset if segments else None
    log_start = bases[0] if bases else 0
    if log_end is not None:
        # A log start past the end is refused by an open (verifying the directory says so).
        with contextlib.suppress(CorruptCheckpointError):
            log_start, _ = checkpoint_checks.believed_log_start(
                directory, log_start, facts.log_start, log_end
            )
    settled = facts.durable_to(fs) == ALL_DURABLE
    return WalkedPartition(
        directory, segments, log_start, log_end, settled, aborted_counts=facts.aborted_counts
    )


_FILE_VERIFIERS: dict[str, Verifier] = {
    LOG_SUFFIX: _verify_log,
    INDEX_SUFFIX: _verify_derived_file,
    TIME_INDEX_SUFFIX: _verify_derived_file,
    TXN_INDEX_SUFFIX: _verify_derived_file,
    SNAPSHOT_SUFFIX: _verify_derived_file,
}
