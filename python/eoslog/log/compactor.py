"""Running the log cleaner on a live partition log (docs/design.md "Compaction"): choosing
when and how far to clean (Kafka's LogCleanerManager rules), reading the segments under a
throughput limit, and swapping the cleaned segments in crash-safely. The decisions about
records are eoslog.log.cleaner's.

The order of a pass, and what a crash at each step leaves (the open's rules in
eoslog.log.recovery):

1. the segments wholly below the cleanable end are read, one at a time, and every decision
   is made (eoslog.log.cleaner.iter_cleaned: the keys of the whole range, 32 bytes a record,
   are held; segment bytes only one at a time), off the partition lock (they are inactive:
   nothing appends to them);
2. the partition's cleaner-offset-checkpoint entry is raised to the cleanable end and made
   durable (PartitionLog.raise_cleaned_end): from here gaps below it are legal; nothing has
   changed yet, and a log without gaps is one the looser rule accepts too;
3. per segment whose bytes change (read again and rewritten): `<base>.log.cleaned` is
   written and synced (a crash leaves a `.cleaned` file, which the next open deletes);
   then, under the partition lock,
   the segment's index files are removed (a crash leaves the old .log without indexes,
   which the open rebuilds), the `.cleaned` file is renamed over the `.log` (one atomic
   rename: the directory holds the old or the new file, never neither) and the directory
   synced; off the lock again the new indexes are built from the new file and flushed (a
   crash before leaves the new .log without indexes, rebuilt at open), and under the lock
   the new segment takes the old one's place (readers meanwhile read the old one's files).

Kafka writes `.cleaned`, renames it `.swap`, renames the originals `.deleted`, then renames
the swap in, because one cleaned segment replaces several originals with other names; eoslog
cleans each segment into itself under its own name, so the one rename replaces it.

Thread safety: a pass runs on the broker's maintenance thread; appends continue meanwhile
except during each swap's renames.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import overload

from eoslog import crashpoints, limits
from eoslog.fs import create_temporary
from eoslog.log.cleaner import CleaningRules, iter_cleaned
from eoslog.log.config import COMPACTION_LAG_OFF_MS
from eoslog.log.partition import PartitionLog
from eoslog.log.segment import LogSegment
from eoslog.log.segment_reads import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
)
from eoslog.record import codec, layout


@dataclass(frozen=True)
class CleanPass:
    """What one pass over a log did."""

    segments_read: int
    segments_swapped: int
    bytes_read: int
    bytes_written: int
    cleaned_end: int
    # Inactive segments the cleaning left empty, deleted (never the first: PartitionLog.
    # drop_emptied_segment), so a long history leaves no trail of empty files.
    segments_dropped: int = 0


class Throttle:
    """log.cleaner.io.max.bytes.per.second: after each piece of I/O the cleaner waits until
    its bytes so far fit under the rate since it started (Kafka's Throttler). `wait` sleeps
    (the maintenance thread passes its stop event's wait, so a close is not held up)."""

    def __init__(
        self,
        bytes_per_second: int,
        wait: Callable[[float], object] = time.sleep,
        clock_s: Callable[[], float] = time.monotonic,
    ) -> None:
        assert bytes_per_second >= 1, bytes_per_second
        self.bytes_per_second = bytes_per_second
        self._wait = wait
        self._clock_s = clock_s
        self._start = clock_s()
        self._spent = 0

    def spend(self, size: int) -> None:
        if self.bytes_per_second >= limits.cleaner_bytes_per_second_off:
            return
        self._spent += size
        due_s = self._spent / self.bytes_per_second - (self._clock_s() - self._start)
        if due_s > 0:
            self._wait(due_s)


def cleanable_end(log: PartitionLog, now_ms: int) -> int:
    """Where cleaning must stop (Kafka's firstUncleanableDirtyOffset): the LSO, the active
    segment's base, and the base of the first segment holding a record newer than
    min.compaction.lag.ms, whichever comes first; rounded down to a segment boundary."""
    segments = log.segments
    end = min(log.last_stable_offset, segments[-1].base_offset)
    lag_ms = log.config.min_compaction_lag_ms
    for segment in segments[:-1]:
        if lag_ms > 0 and segment.size and now_ms - segment.largest_timestamp < lag_ms:
            end = min(end, segment.base_offset)
            break
    bases = [segment.base_offset for segment in segments]
    return max((base for base in bases if base <= end), default=0)


def should_clean(log: PartitionLog, end: int, now_ms: int) -> bool:
    """Whether the dirty part (from the cleaner-offset-checkpoint entry to `end`) is at least
    min.cleanable.dirty.ratio of the cleanable bytes, or holds a record older than
    max.compaction.lag.ms (Kafka's LogCleanerManager.grabFilthiestCompactedLog)."""
    config = log.config
    below = [s for s, following in _with_next_base(log) if following <= end]
    total = sum(segment.size for segment in below)
    dirty = [segment for segment in below if segment.base_offset >= log.cleaned_end]
    dirty_bytes = sum(segment.size for segment in dirty)
    if total == 0 or dirty_bytes == 0:
        return False
    if dirty_bytes / total >= config.min_cleanable_dirty_ratio:
        return True
    # Kafka's LogCleanerManager.maxCompactionDelay: the first dirty segment's first batch
    # timestamp against max.compaction.lag.ms.
    first = next((segment for segment in dirty if segment.size), None)
    if first is None or config.max_compaction_lag_ms >= COMPACTION_LAG_OFF_MS:
        return False
    header = codec.read_header(first.log.pread(layout.HEADER_SIZE, 0))
    return 0 <= header.max_timestamp < now_ms - config.max_compaction_lag_ms


def clean_log(log: PartitionLog, now_ms: int, throttle: Throttle) -> CleanPass | None:
    """One cleaning pass over a compacted log when should_clean says so (None otherwise):
    the module docstring's steps. KafkaStorageError (fail-stop) for an I/O error;
    ValueError, changing nothing, when a segment to clean holds damage."""
    if not log.config.compact:
        return None
    end = cleanable_end(log, now_ms)
    if end <= log.log_start_offset or not should_clean(log, end, now_ms):
        return None
    chosen = [segment for segment, following in _with_next_base(log) if following <= end]
    if not chosen:
        return None
    contents = _SegmentBytes(chosen, throttle)
    rules = CleaningRules(
        now_ms=now_ms,
        delete_retention_ms=log.config.delete_retention_ms,
        producer_last_offsets=log.producer_last_offsets(),
    )
    cleaned = iter_cleaned(contents, rules)
    first = next(cleaned)  # every decision is made before the first result
    log.raise_cleaned_end(end)
    swapped = written = 0
    for segment, after in zip(chosen, itertools.chain([first], cleaned), strict=True):
        if after is None:
            continue
        _write_cleaned(log, segment, after)
        throttle.spend(len(after))
        written += len(after)
        replace = functools.partial(_replace_files, log, segment)
        if log.swap_segment(segment, replace, functools.partial(_indexed, log, segment)):
            swapped += 1
        else:
            log.fs.unlink(segment.path(LOG_SUFFIX + CLEANED_SUFFIX))
    dropped = sum(
        log.drop_emptied_segment(segment)
        for segment in log.segments[1:-1]
        if segment.size == 0 and segment.base_offset < end
    )
    return CleanPass(len(chosen), swapped, contents.bytes_read, written, end, dropped)


class _SegmentBytes(Sequence[bytes]):
    """The segments' .log bytes, read when asked (so a pass holds one segment's bytes at a
    time, not the whole range), each read spent on the throttle."""

    def __init__(self, segments: list[LogSegment], throttle: Throttle) -> None:
        self._segments = segments
        self._throttle = throttle
        self.bytes_read = 0

    def __len__(self) -> int:
        return len(self._segments)

    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[bytes]: ...
    def __getitem__(self, index: int | slice) -> bytes | Sequence[bytes]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        segment = self._segments[index]
        data = segment.log.pread(segment.size, 0)
        self.bytes_read += len(data)
        self._throttle.spend(len(data))
        return data


def _with_next_base(log: PartitionLog) -> list[tuple[LogSegment, int]]:
    segments = log.segments
    return list(zip(segments, [s.base_offset for s in segments[1:]] + [1 << 63], strict=True))


def _write_cleaned(log: PartitionLog, segment: LogSegment, data: bytes) -> None:
    """Step 3's first part: the cleaned bytes beside the segment, durable."""
    handle = create_temporary(log.fs, segment.path(LOG_SUFFIX + CLEANED_SUFFIX))
    try:
        handle.pwrite(data, 0)
        if log.durability != "none":
            handle.sync()
    finally:
        handle.close()
    crashpoints.hit("cleaner.cleaned.after")


def _replace_files(log: PartitionLog, old: LogSegment) -> None:
    """Step 3's second part, under the partition lock: the old segment keeps its open files
    (readers holding it finish on them); the cleaned file takes its names."""
    fs, directory = log.fs, log.directory
    # Under durability "none" nothing is synced before close (docs/design.md "Durability"):
    # the order of the renames and unlinks alone keeps a process crash safe.
    sync_dir = fs.sync_dir if log.durability != "none" else _no_sync
    # Opened first, so that a reader of the old segment keeps its index mappings rather than
    # opening the new segment's files under the old name.
    _ = old.offset_index, old.time_index
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        if fs.exists(old.path(suffix)):
            fs.unlink(old.path(suffix))
    sync_dir(directory)
    crashpoints.hit("cleaner.unindexed.after")
    fs.rename(old.path(LOG_SUFFIX + CLEANED_SUFFIX), old.path(LOG_SUFFIX))
    sync_dir(directory)
    crashpoints.hit("cleaner.swapped.after")


def _indexed(log: PartitionLog, old: LogSegment) -> LogSegment:
    """Step 3's last part, off the partition lock: the new segment on the renamed file,
    with its indexes built and flushed. Their names need no directory sync: an index a
    crash loses is rebuilt at the next open."""
    new = LogSegment(log.fs, log.directory, old.base_offset, log.config, created_ms=old.created_ms)
    new.compacted = True
    new.active = False
    new.rebuild_indexes()
    new.release_indexes()
    crashpoints.hit("cleaner.indexed.after")
    return new


def _no_sync(directory: str) -> None:
    pass
