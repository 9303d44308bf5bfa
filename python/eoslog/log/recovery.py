"""Loading a partition directory and recovering it after an unclean stop (docs/format.md §9.2,
§9.3).

The three failure classes (docs/style.md rule 3) are handled differently here:
- a torn tail (a partial or garbled last write after a crash) is cut at the last valid batch
  and reported as a byte count, but only where a crash can leave one (the table below);
- damage anywhere else (bad bytes in data known durable, or with valid data after them) is
  never truncated silently: loading fails with CorruptRecordError naming the file, the byte
  and the repair call that would cut the log there;
- missing or corrupt index files are rebuilt from the log, and so is a `.txnindex` holding
  fewer or more entries below the aborted-transaction checkpoint's recovery point than that
  checkpoint counted (eoslog.log.checkpoints; a lost or emptied `.txnindex` reads like a
  segment without aborts otherwise). Without a readable line for the partition there, every
  segment is rescanned, as without a trusted recovery point.

What a rescan does with bad bytes (a failed frame or CRC, or a batch whose offsets do not
continue the previous one) depends on where they lie relative to the recovery point, the offset
below which everything was fsynced before the checkpoint holding it was written:

| first offset a cut would lose    | valid data after the damage  | outcome                |
|----------------------------------|------------------------------|------------------------|
| at or past a trusted recovery pt | any                          | cut (1)                |
| below a trusted recovery point   | any                          | CorruptRecordError (2) |
| (no trusted recovery point)      | none: a torn tail            | cut                    |
| (no trusted recovery point)      | a valid batch, a batch whose | CorruptRecordError     |
|                                  | offsets break continuity, or |                        |
|                                  | a later segment with data    |                        |

(1) A power loss leaves any mix of written and lost unsynced writes, holes included; nothing
there was acknowledged as durable (Kafka cuts there too). (2) Durable data is damaged.

"Trusted" means read from a readable recovery-point checkpoint entry. The broker writes one
for a partition when it creates it, so a missing entry for a partition with data means the
checkpoint was lost or damaged, not that the partition is young. After a clean shutdown
everything is durable: the active segment's tail is checked (CRC and offsets, from its last
offset-index entry) and any damage is refused. Every open also checks each segment it does
not rescan with one header read (its first batch starts at the base offset in its name), and
checks the checkpoints against the segments: a recovery point or log start past the log end
is a CorruptCheckpointError, and a log start inside the segments is believed only when
eoslog's checksummed log-start checkpoint confirms it (delete_records writes it, with Kafka's,
before it answers); one it does not confirm is ignored and reported. No checkpoint value ever
causes a deletion at open, and every check runs before recovery cuts anything.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from eoslog.errors import CorruptIndexError, CorruptRecordError
from eoslog.fs import FileSystem
from eoslog.log import checkpoint_checks
from eoslog.log.checkpoints import AbortedCounts, LogStart
from eoslog.log.config import LogConfig
from eoslog.log.repair import repair_truncate as repair_truncate  # the call refusals name
from eoslog.log.segment import LogSegment, first_offset_violation, mark_compacted
from eoslog.log.segment_check import zero_tail
from eoslog.log.segment_reads import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    batch_lookup,
    file_name,
    offset_from_file_name,
    parse_file_name,
)
from eoslog.log.txn_index import ENTRY_BYTES as TXN_ENTRY_BYTES
from eoslog.log.txn_index import AbortedTxn

_INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
# The recovery point of a log closed cleanly: every byte of it is durable.
_ALL_DURABLE: Final = 1 << 63
# Told the bytes of each segment a rescan walked, if set: the command line's progress while an
# open recovers (eoslog.cli.output). A context variable: an open runs in its caller's thread.
RESCANNED_BYTES: Final[ContextVar[Callable[[int], None] | None]] = ContextVar(
    "eoslog_rescanned_bytes", default=None
)


@dataclass
class RecoveryReport:
    """What loading did: segments rescanned, and the torn tail cut (if any)."""

    clean_shutdown: bool
    segments_recovered: int = 0
    bytes_truncated: int = 0
    zeros_cut: int = 0  # of those, zeros alone past the log end (design.md "Durability")
    truncated_file: str | None = None
    truncated_at: int | None = None
    indexes_rebuilt: list[str] = field(default_factory=list)
    # Whether the recovery point came from a readable checkpoint entry. Without one nothing is
    # known durable, and recovery cuts only a torn tail (module docstring).
    stray_files: list[str] = field(default_factory=list)  # ignored, kept: _clean_directory
    recovery_point_trusted: bool = True
    # Checkpoint files or entries not believed, each with the reason.
    checkpoints_ignored: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Cut:
    """A cut a rescan decided on; applied once the checkpoints were checked, so an open that
    refuses has cut nothing."""

    segment: LogSegment
    position: int  # where its .log is cut (its size when only the later segments go)
    next_offset: int  # the log end after the cut


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
    # The partition's cleaner-offset-checkpoint entry (0: none): segments wholly below it
    # may hold the cleaner's gaps (LogSegment.compacted).
    cleaned_end: int = 0


def load(
    fs: FileSystem,
    directory: str,
    config: LogConfig,
    *,
    clean_shutdown: bool,
    recovery_point: int | None,
    log_start_offset: LogStart | None,
    now_ms: int,
    aborted_counts: AbortedCounts | None,
    checkpoint_problems: Sequence[str] = (),
    cleaned_end: int = 0,
) -> LoadedLog:
    """Open every segment of the partition directory, recovering from the recovery point
    when the last stop was not clean (module docstring). recovery_point, log_start_offset
    and aborted_counts are the checkpoints' entries (None: no readable entry);
    checkpoint_problems are the reasons checkpoint files were not read, copied into the
    report; below cleaned_end (cleaner-offset-checkpoint) gaps are no damage. CorruptRecordError
    for damage recovery may not cut, CorruptCheckpointError for a checkpoint past the log end."""
    report = RecoveryReport(
        clean_shutdown=clean_shutdown,
        recovery_point_trusted=recovery_point is not None,
        checkpoints_ignored=list(checkpoint_problems),
    )
    bases, names = _clean_directory(fs, directory, report)
    # A missing index file would be created empty (and so look sane): rebuild those.
    missing_indexes = {
        base
        for base in bases
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
        if file_name(base, suffix) not in names
    }
    segments = [LogSegment(fs, directory, base, config, created_ms=now_ms) for base in bases]
    mark_compacted(segments, cleaned_end)
    try:
        rescanned, cut, log_end_offset = _recover_and_check(
            directory,
            segments,
            report,
            clean_shutdown,
            recovery_point,
            missing_indexes,
            aborted_counts,
        )
        first_base = segments[0].base_offset if segments else 0
        log_start, note = checkpoint_checks.believed_log_start(
            directory, first_base, log_start_offset, log_end_offset
        )
        report.checkpoints_ignored.extend([note] if note else [])
        # The producer-state replay rewrites the ABORT entries of every segment from the
        # first one rescanned on (rescanned_from), rescanned or not (after a clean stop an
        # index problem rescans single segments): reset them all, or entries double. Reset
        # only now: a refused open must leave every .txnindex as it was, since the next
        # open may not rescan that segment again.
        _refuse_outcome_conflicts(rescanned, segments, recovery_point)
        for segment in segments[segments.index(rescanned[0]) :] if rescanned else ():
            segment.txn_index.reset()
        if cut is not None:
            _apply_cut(fs, directory, segments, cut, report)
    except BaseException:
        # A refused open keeps no file open: the caller may repair and open again.
        for segment in segments:
            with contextlib.suppress(OSError, ValueError):
                segment.close_files()
        raise
    if not segments:
        segments = [LogSegment(fs, directory, 0, config, created_ms=now_ms)]
        fs.sync_dir(directory)
    rescanned_from = rescanned[0].base_offset if rescanned else None
    _set_active(segments, config)
    recovered_to = _recovered_to(segments, clean_shutdown, recovery_point, log_end_offset)
    if rescanned_from is not None and rescanned_from > log_end_offset:
        rescanned_from = None  # the rescanned segments were all cut away
    loaded = LoadedLog(segments, log_end_offset, log_start, recovered_to, report, rescanned_from)
    loaded.cleaned_end = cleaned_end
    return loaded


def _set_active(segments: list[LogSegment], config: LogConfig) -> None:
    """The last segment takes appends: its indexes get back their preallocated size."""
    for inactive in segments[:-1]:
        inactive.active = False
        # Checked (or believed, after a clean stop): closed until a lookup needs them.
        inactive.release_indexes()
    active = segments[-1]
    active.active = True
    active.offset_index.resize(config.segment_index_bytes)
    active.time_index.resize(config.segment_index_bytes)


def _recovered_to(
    segments: list[LogSegment], clean_shutdown: bool, recovery_point: int | None, log_end: int
) -> int:
    """Where the loaded log is durable to: its end after a clean stop, else the recovery
    point. Without a trusted one every segment was rescanned and found whole: made durable
    now, the log end is a recovery point the next checkpoint can carry. (A 0 there would be
    a trusted "nothing durable", under which later damage anywhere could be cut.)"""
    if clean_shutdown:
        return log_end
    if recovery_point is None:
        for segment in segments:
            segment.flush()
        return log_end
    return min(recovery_point, log_end)


def _recover_and_check(
    directory: str,
    segments: list[LogSegment],
    report: RecoveryReport,
    clean_shutdown: bool,
    recovery_point: int | None,
    missing_indexes: set[int],
    aborted_counts: AbortedCounts | None,
) -> tuple[list[LogSegment], _Cut | None, int]:
    """Rescan what needs it, check the tail of a clean log and the recovery point against
    the log end. Returns the segments rescanned, the cut decided (not yet made) and the log
    end after it."""
    durable_to = _ALL_DURABLE if clean_shutdown else recovery_point
    rescanned, cut = _rescan(segments, report, durable_to, missing_indexes, aborted_counts)
    if clean_shutdown and segments and segments[-1] not in rescanned:
        _check_clean_tail(segments[-1])
    log_end_offset = cut.next_offset if cut else segments[-1].next_offset() if segments else 0
    checkpoint_checks.check_recovery_point(directory, recovery_point, log_end_offset)
    return rescanned, cut, log_end_offset


def _rescan(
    segments: list[LogSegment],
    report: RecoveryReport,
    durable_to: int | None,
    missing_indexes: set[int],
    aborted_counts: AbortedCounts | None,
) -> tuple[list[LogSegment], _Cut | None]:
    """Rescan each segment at most once: those whose index files fail their sanity check or
    whose .txnindex disagrees with the aborted-transaction checkpoint, and after an unclean
    stop every segment from the one holding the recovery point on (all of them without a
    trusted one). The others get first_batch_problem's one header read. Returns the segments
    rescanned and the cut decided, stopping at it."""
    clean_shutdown = durable_to == _ALL_DURABLE
    rescan_from = durable_to or 0
    rescanned: list[LogSegment] = []
    for segment in segments:
        needs_rescan = not clean_shutdown and (
            segment is segments[-1] or _next_base(segments, segment) > rescan_from
        )
        # After a clean shutdown the offset and time indexes were trimmed and synced by close:
        # like Kafka, check only the transaction index then (a clean open stays cheap).
        if (
            segment.base_offset in missing_indexes
            or not _indexes_sane(segment, clean_shutdown, _next_base(segments, segment), segments)
            or (segment is not segments[-1] and segment.indexes_untrimmed())
        ):
            report.indexes_rebuilt.append(segment.path(INDEX_SUFFIX))
            needs_rescan = True
        elif not needs_rescan and not _txn_entries_as_counted(segment, aborted_counts):
            report.indexes_rebuilt.append(segment.path(TXN_INDEX_SUFFIX))
            needs_rescan = True
        if not needs_rescan:
            _check_segment_start(segment, segments)
            continue
        rescanned.append(segment)
        cut = _recover_segment(segment, segments, report, durable_to)
        if cut is not None:
            return rescanned, cut
    return rescanned, None


def _check_segment_start(segment: LogSegment, segments: list[LogSegment]) -> None:
    """The check of a segment not rescanned (its data is durable): its first batch starts
    at its base offset (one header read), and unless it is the last or compacted (the
    cleaner may empty one) it is not empty (eoslog rolls only a segment with data)."""
    problem = segment.first_batch_problem()
    emptied = segment.compacted or segment is segments[-1]
    if problem is None and segment.size == 0 and not emptied:
        problem = 0, f"it is empty, but the next segment starts at {_next_base(segments, segment)}"
    if problem is not None:
        raise segment.corruption(*problem)


def _next_base(segments: list[LogSegment], segment: LogSegment) -> int:
    index = segments.index(segment)
    return segments[index + 1].base_offset if index + 1 < len(segments) else 1 << 63


def _clean_directory(
    fs: FileSystem, directory: str, report: RecoveryReport
) -> tuple[list[int], set[str]]:
    """Delete leftovers (`.deleted`, `.tmp` and `.cleaned` files of segment files, index
    files without a .log); return the sorted base offsets of the segments and the names left.
    Only a file named by 20 decimal digits and a known suffix is a segment file
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
    leftovers = (DELETED_SUFFIX, ".tmp", CLEANED_SUFFIX)
    return f".{ending}" in leftovers and parse_file_name(stem) is not None


def _indexes_sane(
    segment: LogSegment, clean_shutdown: bool, next_base: int, segments: list[LogSegment]
) -> bool:
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
    except (CorruptIndexError, CorruptRecordError):
        return False
    return _txn_index_sane(segment, segments)


def _txn_entries_as_counted(segment: LogSegment, counted: AbortedCounts | None) -> bool:
    """Whether the segment's .txnindex agrees with the aborted-transaction checkpoint's count
    (AbortedCounts.agrees). Without a count nothing is known: False."""
    if counted is None:
        return False
    try:
        return counted.agrees(segment.base_offset, segment.txn_index.entries_ending_below)
    except CorruptIndexError:
        return False


def _txn_index_sane(segment: LogSegment, segments: list[LogSegment]) -> bool:
    """Whether the transaction index agrees with the log (TransactionIndex.check_against_log);
    an index that does not is rebuilt from the log, unless an entry and the log disagree
    only on whether the transaction committed (txn_index.outcome_conflict): rebuilding would
    then believe the marker, which may be the forged file, so that is a CorruptRecordError."""
    batch_at = batch_lookup(segments)
    log_start = segments[0].base_offset
    try:
        segment.txn_index.check_against_log(batch_at, log_start)
        return True
    except (CorruptIndexError, CorruptRecordError):
        pass
    try:
        slot = segment.txn_index.first_outcome_conflict(batch_at, log_start)
    except (CorruptIndexError, CorruptRecordError):
        return False  # damage a rescan finds and judges
    if slot is None:
        return False
    raise _outcome_conflict_error(segment, segments, slot)


def _refuse_outcome_conflicts(
    rescanned: list[LogSegment], segments: list[LogSegment], recovery_point: int | None
) -> None:
    """_txn_index_sane's refusal, for the segments a rescan rebuilds (their index is reset
    unchecked): an entry below the trusted recovery point names a marker that was durable
    before the entry's last sync and was never cut since, so a marker there of the entry's
    producer with the other outcome is one of the two files forged, as after a clean stop.
    Without this, an open refused for that reason after a clean stop (which takes the
    clean-shutdown marker) would believe the forged marker on the next try."""
    if recovery_point is None:
        return
    batch_at = batch_lookup(segments)
    for segment in rescanned:
        try:
            slot = segment.txn_index.first_outcome_conflict(
                batch_at, segments[0].base_offset, below=recovery_point
            )
        except (CorruptIndexError, CorruptRecordError):
            continue  # a malformed index, or damage the rescan judged: rebuilt anyway
        if slot is not None:
            raise _outcome_conflict_error(segment, segments, slot)


def _outcome_conflict_error(
    segment: LogSegment, segments: list[LogSegment], slot: int
) -> CorruptRecordError:
    entry = segment.txn_index.all_entries()[slot]
    holder = max((s for s in segments if s.base_offset <= entry.last_offset), key=_base)
    found = holder.translate_offset(entry.last_offset)
    position = found.position if found else None
    return CorruptRecordError(
        f"transaction index {segment.txn_index.path} entry {slot} (byte "
        f"{slot * TXN_ENTRY_BYTES}) "
        + outcome_conflict_text(entry, holder.path(LOG_SUFFIX), position)
    )


def outcome_conflict_text(entry: AbortedTxn, log_path: str, position: int | None) -> str:
    """Why an open refuses a .txnindex entry that the log contradicts only in the
    transaction's outcome (txn_index.outcome_conflict: the marker at its last offset, at byte
    `position` of log_path, is a COMMIT), and how to repair it; `eoslog verify` says the
    same."""
    return (
        f"says producer {entry.producer_id}'s transaction from offset {entry.first_offset} "
        f"was aborted by the marker at offset {entry.last_offset}, but {log_path} holds a "
        f"COMMIT marker of that producer there (batch at byte "
        f"{'?' if position is None else position}): one of the two files was forged or "
        f"damaged and the log alone cannot tell which, so neither is believed. Check the "
        f"transaction's outcome in __transaction_state: if the marker is right, delete this "
        f".txnindex and the segment's .index (the next open rescans the segment and rebuilds "
        f"both from the log); if not, restore the .log"
    )


def _base(segment: LogSegment) -> int:
    return segment.base_offset


def _recover_segment(
    segment: LogSegment,
    segments: list[LogSegment],
    report: RecoveryReport,
    durable_to: int | None,
) -> _Cut | None:
    """Rescan one segment (docs/format.md §9.3): check every batch's framing, CRC and offsets and
    rebuild its indexes. Returns the cut to make if its end is a torn tail (or a hole a power
    loss may leave), None if it is whole; raises CorruptRecordError for damage that may not
    be cut (module docstring). durable_to: the trusted recovery point, or None."""
    report.segments_recovered += 1
    segment.reset_indexes()
    segment.index_suspect = False
    file_size = segment.log.size()
    next_base = _next_base(segments, segment)
    position, next_offset, discontinuous = _valid_prefix(
        segment, 0, file_size, index=True, offset_end=next_base
    )
    observer = RESCANNED_BYTES.get()
    if observer is not None:
        observer(file_size)
    segment.size = file_size
    later_data = any(s.log.size() > 0 for s in segments if s.base_offset > segment.base_offset)
    cut: _Cut | None = None
    if position < file_size:
        valid_after = durable_to is None and (
            discontinuous or later_data or segment.valid_batch_after(position, segment.log.size())
        )
        if not may_cut(durable_to, next_offset, valid_after):
            raise _refusal(segment, position, "is damaged", durable_to, next_offset)
        cut = _Cut(segment, position, next_offset)
    elif next_offset < next_base < 1 << 63 and not segment.compacted:
        # The segment ends before the next one begins: a power loss dropped the end of its
        # data but kept a later segment's. Past the recovery point that is a torn tail too
        # (the later segments go); anywhere else durable records are missing.
        if not may_cut(durable_to, next_offset, later_data):
            what = f"ends at offset {next_offset} but the next segment starts at {next_base}"
            raise _refusal(segment, position, what, durable_to, next_offset)
        cut = _Cut(segment, position, next_offset)
    segment.on_become_inactive()
    return cut


def may_cut(durable_to: int | None, first_lost_offset: int, valid_after: bool) -> bool:
    """The module docstring's table: whether bad bytes (or a missing end) may be cut. The
    offline reader (eoslog.log.partition_view) applies the same rule to the tail it sees."""
    if durable_to is not None:
        return first_lost_offset >= durable_to
    return not valid_after


def _refusal(
    segment: LogSegment, position: int, what: str, durable_to: int | None, next_offset: int
) -> CorruptRecordError:
    path = segment.path(LOG_SUFFIX)
    if durable_to is None:
        why = "valid data follows and no recovery point is known (checkpoint missing or unreadable)"
    elif durable_to == _ALL_DURABLE:
        why = "the log was closed cleanly, so everything in it was durable"
    else:
        why = f"offsets below the recovery point {durable_to} were durable"
    return CorruptRecordError(
        f"{path} {what} at byte {position} (offset {next_offset}): {why}, so this is not a "
        f"torn tail and will not be cut silently. To discard everything from there on, "
        f"close the log and run: eoslog.repair_truncate({path!r}, {position}) "
        f"(or `eoslog repair {path} --truncate-at {position}`)"
    )


def _valid_prefix(
    segment: LogSegment,
    position: int,
    end: int,
    *,
    index: bool,
    first_last_offset: int | None = None,
    offset_end: int = 1 << 63,
) -> tuple[int, int, bool]:
    """Walk the .log from `position` (a batch boundary) to `end`: framing, CRC and offset
    continuity, the first batch starting at the segment's base offset, or, when
    first_last_offset is given (a walk from an offset-index entry), ending at that offset;
    every offset below offset_end (where the next segment begins). index: add each batch to
    the indexes (a rescan). Returns (where the valid batches end, the offset after them,
    whether they end at a batch whose offsets break continuity)."""
    next_offset: int | None = segment.base_offset if first_last_offset is None else None
    discontinuous = False
    while position < end and not discontinuous:
        infos, stop, status = segment.scan_chunk_checked(position, end)
        if len(infos) and next_offset is None:
            # From an index entry only the entry's own batch is pinned, by its last offset.
            if int(infos["last_offset"][0]) != first_last_offset:
                return position, segment.base_offset, True
            next_offset = int(infos["base_offset"][0])
        if len(infos) and next_offset is not None:
            bad = first_offset_violation(infos, next_offset, segment.compacted)
            overlapping = np.flatnonzero(infos["last_offset"] >= offset_end)
            if len(overlapping) and (bad is None or overlapping[0] < bad):
                bad = int(overlapping[0])
            if bad is not None:
                infos, stop, discontinuous = infos[:bad], int(infos["position"][bad]), True
        if index:
            for row in infos:
                segment.index_batch(position, row)
        if len(infos):
            next_offset = int(infos["last_offset"][-1]) + 1
        position += stop
        if status != 0 or len(infos) == 0:
            break
    return position, segment.base_offset if next_offset is None else next_offset, discontinuous


def _check_clean_tail(active: LogSegment) -> None:
    """After a clean shutdown, the last batches of the log: from the active segment's last
    offset-index entry (about index.interval.bytes from the end) to its end, every batch's
    framing, CRC and offsets. A clean shutdown leaves everything durable, so damage here is
    never a torn tail; and the base offset and length are outside the CRC: a flip there would
    otherwise move the log end (new appends reusing offsets) or send a reader backwards. An
    entry whose batch does not check out is not believed (the index may be the damaged
    file): the walk starts at the segment start instead, and the real damage, if any, is
    found there."""
    end = active.log.size()
    entry_offset, position = active.offset_index.lookup(1 << 62)
    if position > 0:
        stop, next_offset, _ = _valid_prefix(
            active, position, end, index=False, first_last_offset=entry_offset
        )
        if stop == position:
            active.index_suspect = True  # lookups scan past it; maintenance rebuilds
            position = 0
    elif position < 0:
        active.index_suspect = True  # a damaged entry points before the file: not believed
        position = 0
    if position == 0:
        stop, next_offset, _ = _valid_prefix(active, 0, end, index=False)
    if stop < end:
        raise _refusal(active, stop, "is damaged", _ALL_DURABLE, next_offset)


def _apply_cut(
    fs: FileSystem, directory: str, segments: list[LogSegment], cut: _Cut, report: RecoveryReport
) -> None:
    """Truncate the segment at the cut and delete every later segment: they hold only writes
    that were never durable (Kafka deletes them too), and keeping them would leave a hole."""
    segment = cut.segment
    file_size = segment.log.size()
    if cut.position < file_size:
        if zero_tail(segment.log, cut.position, file_size):  # not data: preallocated space
            report.zeros_cut += file_size - cut.position
        segment.log.truncate(cut.position)
        report.bytes_truncated += file_size - cut.position
        report.truncated_file = segment.path(LOG_SUFFIX)
        report.truncated_at = cut.position
    segment.size = segment.allocated = cut.position
    index = segments.index(segment)
    for later in segments[index + 1 :]:
        later.delete()
    del segments[index + 1 :]
    fs.sync_dir(directory)
