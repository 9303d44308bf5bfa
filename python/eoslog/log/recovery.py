"""Loading a partition directory and recovering it after an unclean stop (FORMAT.md §9.2, §9.3).

The three failure classes (STYLE.md rule 3) are handled differently here:
- a torn tail (a partial or garbled last write after a crash, with nothing valid behind it)
  is cut at the last valid batch and reported as a byte count;
- damage in the middle of the log (a bad batch with valid data after it) is never truncated
  silently: loading fails with CorruptRecordError naming the file, the position and the
  repair call that would cut the log there;
- missing or corrupt index files are rebuilt from the log.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from eoslog._ext import scan
from eoslog.errors import CorruptIndexError, CorruptRecordError
from eoslog.fs import FileSystem, PosixFileSystem
from eoslog.log.config import LogConfig
from eoslog.log.segment import LogSegment, first_offset_violation
from eoslog.log.segment_reads import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    file_name,
    offset_from_file_name,
    parse_file_name,
)

_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


@dataclass
class RecoveryReport:
    """What loading did: segments rescanned, and the torn tail cut (if any)."""

    clean_shutdown: bool
    segments_recovered: int = 0
    bytes_truncated: int = 0
    truncated_file: str | None = None
    truncated_at: int | None = None
    indexes_rebuilt: list[str] = field(default_factory=list)
    stray_files: list[str] = field(default_factory=list)  # ignored, kept: _clean_directory


@dataclass
class LoadedLog:
    segments: list[LogSegment]
    log_end_offset: int
    log_start_offset: int
    recovery_point: int
    report: RecoveryReport
    # The base offset of the first segment rescanned (its transaction index was reset and
    # must be rebuilt by a producer-state replay from at most there), or None.
    rescanned_from: int | None = None


def load(
    fs: FileSystem,
    directory: str,
    config: LogConfig,
    *,
    clean_shutdown: bool,
    recovery_point: int,
    log_start_offset: int,
    now_ms: int,
) -> LoadedLog:
    """Open every segment of the partition directory, recovering from the recovery point
    when the last stop was not clean."""
    report = RecoveryReport(clean_shutdown=clean_shutdown)
    bases, names = _clean_directory(fs, directory, report)
    # A missing index file would be created empty (and so look sane): rebuild those.
    missing_indexes = {
        base
        for base in bases
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
        if file_name(base, suffix) not in names
    }
    segments = [LogSegment(fs, directory, base, config, created_ms=now_ms) for base in bases]
    rescanned_from: int | None = None
    # Rescan each segment at most once: those whose index files fail their sanity check, and
    # after an unclean stop every segment from the one holding the recovery point on.
    for segment in segments:
        needs_rescan = not clean_shutdown and (
            segment is segments[-1] or _next_base(segments, segment) > recovery_point
        )
        # After a clean shutdown the offset and time indexes were trimmed and synced by close:
        # like Kafka, check only the transaction index then (a clean open stays cheap).
        if (
            segment.base_offset in missing_indexes
            or not _indexes_sane(segment, clean_shutdown, _next_base(segments, segment))
            or (segment is not segments[-1] and _untrimmed(segment))
        ):
            report.indexes_rebuilt.append(segment.path(INDEX_SUFFIX))
            needs_rescan = True
        if needs_rescan:
            if rescanned_from is None:
                rescanned_from = segment.base_offset
            cut = _recover_segment(segment, segments, report, recovery_point)
            if cut:
                # Everything after a cut is gone: later segments hold only writes that were
                # never durable (Kafka deletes them too), and keeping them would leave a hole.
                for later in segments[segments.index(segment) + 1 :]:
                    later.delete()
                del segments[segments.index(segment) + 1 :]
                fs.sync_dir(directory)
                break
    if not segments:
        segments = [LogSegment(fs, directory, log_start_offset, config, created_ms=now_ms)]
        fs.sync_dir(directory)
    log_end_offset = segments[-1].next_offset()
    if log_end_offset < log_start_offset:
        # Everything on disk lies below the checkpointed log start: start over empty there.
        for segment in segments:
            segment.delete()
        segments = [LogSegment(fs, directory, log_start_offset, config, created_ms=now_ms)]
        fs.sync_dir(directory)
        log_end_offset = log_start_offset
    log_start_offset = max(log_start_offset, segments[0].base_offset)
    for inactive in segments[:-1]:
        inactive.active = False
    active = segments[-1]
    active.active = True
    active.offset_index.resize(config.segment_index_bytes)
    active.time_index.resize(config.segment_index_bytes)
    recovered_to = log_end_offset if clean_shutdown else min(recovery_point, log_end_offset)
    if rescanned_from is not None and rescanned_from > log_end_offset:
        rescanned_from = None  # the rescanned segments were all cut away
    return LoadedLog(
        segments, log_end_offset, log_start_offset, recovered_to, report, rescanned_from
    )


def _next_base(segments: list[LogSegment], segment: LogSegment) -> int:
    index = segments.index(segment)
    return segments[index + 1].base_offset if index + 1 < len(segments) else 1 << 63


def _clean_directory(
    fs: FileSystem, directory: str, report: RecoveryReport
) -> tuple[list[int], set[str]]:
    """Delete leftovers (`.deleted` and `.tmp` files of segment files, index files without a
    .log); return the base offsets of the segments, sorted, and the names left in the
    directory. Only a file named by 20 decimal digits and a known suffix is a segment file
    (segment_reads.parse_file_name); any other entry (`junk.log`, `-5.log`, a 23-digit name,
    `...log.bak`, a directory) is a stray: listed in report.stray_files and left alone,
    never read as a segment and never deleted, since it is not ours to judge."""
    names = fs.listdir(directory)
    subdirectories = set(fs.list_directories(directory))
    parsed = {name: parse_file_name(name) for name in names if name not in subdirectories}
    logs = {name for name, found in parsed.items() if found is not None and found[1] == LOG_SUFFIX}
    removed = False
    for name in names:
        if name in parsed and _is_leftover(name, parsed[name], logs):
            fs.unlink(os.path.join(directory, name))
            removed = True
        elif parsed.get(name) is None:
            report.stray_files.append(os.path.join(directory, name))
    if removed:
        fs.sync_dir(directory)
        names = fs.listdir(directory)
    return sorted(offset_from_file_name(name) for name in logs), set(names)


def _is_leftover(name: str, parsed: tuple[int, str] | None, logs: set[str]) -> bool:
    """Whether a file is what an interrupted operation of ours left: a segment file renamed
    for deletion, a temp file, or an index whose .log is gone."""
    if parsed is not None:
        base_offset, suffix = parsed
        return suffix in _INDEX_SUFFIXES and file_name(base_offset, LOG_SUFFIX) not in logs
    stem, _, ending = name.rpartition(".")
    return f".{ending}" in (DELETED_SUFFIX, ".tmp") and parse_file_name(stem) is not None


def _untrimmed(segment: LogSegment) -> bool:
    """Whether an inactive segment's index files still have their preallocated size. A roll
    trims them, but a crash can undo a trim that was not yet synced while the recovery point
    already covers the segment's data; the zero-filled tail would then read as entries.
    Such a segment is rescanned. (A trimmed index never keeps the full preallocated length
    unless it is exactly full, and then rebuilding it costs one scan.)"""
    return any(
        index.length == index.max_index_bytes // index.ENTRY_BYTES * index.ENTRY_BYTES
        for index in (segment.offset_index, segment.time_index)
    )


def _indexes_sane(segment: LogSegment, clean_shutdown: bool, next_base: int) -> bool:
    """Kafka's sanity checks after an unclean stop, and more: every entry in order and in
    range, which costs one pass over the (small) index files. After a clean stop only the
    transaction index is checked, as Kafka does; wrong entries met later are never believed
    (each lookup checks the entry it uses against the .log) and get rebuilt then."""
    try:
        if not clean_shutdown:
            segment.offset_index.sanity_check()
            segment.time_index.sanity_check()
            segment.offset_index.check_entries(segment.log.size(), next_base)
            segment.time_index.check_entries(next_base)
        segment.txn_index.sanity_check()
    except CorruptIndexError:
        return False
    return True


def _recover_segment(
    segment: LogSegment, segments: list[LogSegment], report: RecoveryReport, recovery_point: int
) -> bool:
    """Rescan one segment (FORMAT.md §9.3): check every batch's framing, CRC and offsets,
    rebuild its indexes, and cut a torn tail. Raises CorruptRecordError for damage with
    valid data after it."""
    report.segments_recovered += 1
    segment.reset_indexes()
    segment.txn_index.reset()
    segment.index_suspect = False
    file_size = segment.log.size()
    position = 0
    next_offset = segment.base_offset
    while position < file_size:
        infos, stop, status = segment.scan_chunk_checked(position, file_size)
        if len(infos):
            bad = first_offset_violation(infos, next_offset)
            if bad is not None:
                infos, stop, status = infos[:bad], int(infos["position"][bad]), -1
        for row in infos:
            segment.index_batch(position, row)
        if len(infos):
            next_offset = int(infos["last_offset"][-1]) + 1
        position += stop
        if status != 0 or len(infos) == 0:
            break
    segment.size = file_size
    past_recovery_point = next_offset >= recovery_point
    cut = position < file_size
    if cut:
        _cut_torn_tail(segment, segments, position, file_size, report, past_recovery_point)
    elif next_offset < _next_base(segments, segment) < 1 << 63:
        # The segment ends before the next one begins: a power loss dropped the end of its
        # data but kept a later segment's. Past the recovery point that is a torn tail too
        # (the later segments go); below it, durable data is missing: refuse.
        if not past_recovery_point and segment.size > 0:
            raise CorruptRecordError(
                f"{segment.path(LOG_SUFFIX)} ends at offset {next_offset} but the next segment "
                f"starts at {_next_base(segments, segment)}: durable records are missing"
            )
        cut = True
    segment.on_become_inactive()
    return cut


def _cut_torn_tail(
    segment: LogSegment,
    segments: list[LogSegment],
    position: int,
    file_size: int,
    report: RecoveryReport,
    past_recovery_point: bool,
) -> None:
    """Truncate at `position`, where the first bad batch starts, when that is a torn tail:
    nothing valid follows, or the damage lies past the recovery point, in data never known
    durable, where a power loss may leave any mix of written and lost chunks (and so valid
    unsynced batches after a hole; cutting there drops nothing that was acknowledged as
    durable; Kafka cuts there too). Damage below the recovery point with valid data after
    it is refused (middle damage) rather than dropping durable records. The recovery point
    comes from the checkpoint: without one (deleted, unreadable) nothing is known durable."""
    rest = segment.log.pread(file_size - position, position)
    later_data = any(s.log.size() > 0 for s in segments if s.base_offset > segment.base_offset)
    valid_after = scan.find_valid_batch(rest, 1) < len(rest) if len(rest) > 1 else False
    if (valid_after or later_data) and not past_recovery_point:
        path = segment.path(LOG_SUFFIX)
        raise CorruptRecordError(
            f"{path} is damaged at byte {position} and valid data follows, so it is not a "
            f"torn tail and will not be cut silently. To discard everything from there on, "
            f"run: eoslog.repair_truncate({path!r}, {position}) "
            f"(or `eoslog repair {path} --truncate-at {position}`)"
        )
    segment.log.truncate(position)
    segment.size = position
    report.bytes_truncated += file_size - position
    report.truncated_file = segment.path(LOG_SUFFIX)
    report.truncated_at = position


def repair_truncate(log_file: str, position: int, fs: FileSystem | None = None) -> int:
    """Cut a damaged segment's .log at `position` and delete every later segment of the
    partition, so the next open recovers to the last valid batch before the damage. Returns
    the bytes discarded. Run it only on a directory no process has open."""
    fs = fs or PosixFileSystem()
    directory, name = os.path.split(log_file)
    base = offset_from_file_name(name)
    discarded = 0
    handle = fs.open(log_file)
    try:
        discarded += max(handle.size() - position, 0)
        handle.truncate(position)
        handle.sync()
    finally:
        handle.close()
    for other in fs.listdir(directory):
        path = os.path.join(directory, other)
        if other.endswith(_INDEX_SUFFIXES) and offset_from_file_name(other) == base:
            fs.unlink(path)  # rebuilt at the next open
        elif other.endswith((LOG_SUFFIX, *_INDEX_SUFFIXES)) and offset_from_file_name(other) > base:
            if other.endswith(LOG_SUFFIX):
                discarded += fs.file_size(path)
            fs.unlink(path)
    fs.sync_dir(directory)
    return discarded
