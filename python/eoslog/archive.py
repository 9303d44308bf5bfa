"""`eoslog archive DIR URL`: copy each archivable segment's file set from a log directory to an
archive (a local directory or object storage: eoslog.archive_store), under Kafka's names, so
that the archive is itself a log directory (`<topic>-<partition>/<base>.log`, `.index`, ...):
`eoslog.scan(url)` reads it alone, and `eoslog.scan(dir, archive=url)` reads the live directory
and the archive as one log (eoslog.archive_view). docs/design.md "Tiered storage".

The source is only read (PartitionView, lock-free, as offline scans read it), so it may be live
(another process appending) or stopped.

Which segments. A segment is archived once it is closed (not the last, which the owner may
append to) and wholly below the partition's last stable offset (its end, the next segment's
base, at or below the LSO), and not wholly below the log start. Below the LSO every
transaction with data in the segment is decided, so its bytes, its .txnindex and the snapshot
at its end never change again; its ABORT marker (and the .txnindex entry) may lie in a later
segment, which a reader of the split log collects on whichever side it lies.

The file set: `.index`, `.timeindex`, `.txnindex` (when the segment has one) and the producer
snapshot at the segment's end (`<next base>.snapshot`, as Kafka's tiered storage keeps the
snapshot with the segment), each published whole (archive_store), then the `.log` last: a
segment exists for a reader only once its `.log` does, and then its whole file set does.

Idempotence and crashes. A run lists the archive's partition directory and skips a segment
whose `.log` is there with the length the source has (objects are published whole, only after
their length was checked, and a closed segment's `.log` never changes, so an object with that
name and length is the complete copy; its bytes are checked by every reader, batch CRCs and
offsets). A `.log` there with another length is refused (KafkaStorageError): the archive holds
another log under that name, and the run stops there (nothing more is copied, the checkpoints
are not rewritten: what the run copied before is whole, and found by the next run). A run
killed mid-copy leaves some objects of the segment without its `.log`, or only a temporary
object; the next run copies the segment again. Files of the set already there with the
source's length are kept.

The archive's checkpoints, written after the segments of a run (its root, as in a log
directory): `recovery-point-offset-checkpoint` holds each partition's archived end (so damage
in the last archived segment is reported, never cut as a torn tail), the log-start checkpoints
(Kafka's and eoslog's) the source's log start where delete_records moved it inside the
segments, and `eoslog-aborted-txn-checkpoint` the owner's count of each archived segment's
.txnindex entries, so that a reader believes the archived .txnindex files. A segment deleted
from the source before it was archived would leave a hole in the archive: the run refuses it.

One archiver at a time per archive (the checkpoints are rewritten whole).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from eoslog import crashpoints, limits, offline
from eoslog.archive_store import Store, open_store
from eoslog.errors import KafkaStorageError
from eoslog.fs import FileHandle, FileSystem
from eoslog.log import checkpoints
from eoslog.log.partition_view import PartitionView
from eoslog.log.segment_reads import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    file_name,
    parse_file_name,
)

PartitionKey = checkpoints.PartitionKey


class ArchiveReport(NamedTuple):
    """What one run did: segments copied, segments found already archived, objects written
    and their bytes."""

    segments_copied: int
    segments_present: int
    objects: int
    bytes: int


class _Archived(NamedTuple):
    """One partition's state in the archive after a run."""

    end: int  # the end of the last segment archived (the next segment's base)
    log_start: int | None  # delete_records' log start inside the segments, if any
    counts: checkpoints.AbortedCounts | None


class _Checkpoints(NamedTuple):
    ends: dict[PartitionKey, int]
    log_starts: dict[PartitionKey, int]
    counts: dict[PartitionKey, checkpoints.AbortedCounts]


def archive(directory: str, url: str, topics: Iterable[str] | None = None) -> ArchiveReport:
    """Copy the archivable segments of `directory` (its user topics, or `topics`) to the archive
    at `url` (a local path, `file://`, or a URL as eoslog.scan takes; module doc). Returns what
    was done. KafkaStorageError when the archive holds another log under a segment's name or
    would get a hole, or the store fails; UnknownTopicOrPartitionError for a topic not there;
    ValueError for a URL that cannot be opened."""
    store = open_store(url)
    source, root = offline.located(directory)
    chosen = list(topics) if topics else None
    pairs = offline.list_partitions(directory, chosen, pattern=None if chosen else ".*", fs=source)
    log_starts, _ = checkpoints.read_believed_log_starts(source, root)
    live_counts, _ = checkpoints.read_believed_aborted_counts(source, root)
    before = _read_checkpoints(url)
    after = _Checkpoints(dict(before.ends), dict(before.log_starts), dict(before.counts))
    report = ArchiveReport(0, 0, 0, 0)
    for key in pairs:
        topic, partition = key
        with PartitionView(
            source,
            os.path.join(root, f"{topic}-{partition}"),
            topic,
            partition,
            log_starts.get(key),
        ) as view:
            done, archived = _archive_partition(view, store, before, live_counts.get(key))
        report = ArchiveReport(*(a + b for a, b in zip(report, done, strict=True)))
        if archived is not None:
            after.ends[key] = archived.end
            if archived.log_start is not None:
                after.log_starts[key] = archived.log_start
            if archived.counts is None:
                after.counts.pop(key, None)
            else:
                after.counts[key] = archived.counts
    if after != before:
        _write_checkpoints(store, after)
    return report


def _archive_partition(
    view: PartitionView,
    store: Store,
    before: _Checkpoints,
    live_counts: checkpoints.AbortedCounts | None,
) -> tuple[ArchiveReport, _Archived | None]:
    key = (view.topic, view.partition)
    bases = view.segment_bases
    lso = view.last_stable_offset
    target = os.path.join(store.root, f"{view.topic}-{view.partition}")
    present = store.sizes(target)
    archivable = [
        number
        for number in range(len(bases) - 1)
        if bases[number + 1] <= lso and bases[number + 1] > view.log_start_offset
    ]
    if not archivable:
        return ArchiveReport(0, 0, 0, 0), None
    archived_end = before.ends.get(key)
    if archived_end is not None and archived_end < bases[0] <= view.log_start_offset:
        raise KafkaStorageError(
            f"{view.directory}: the archive ends at offset {archived_end} but the log now "
            f"starts at {bases[0]}: the segments between were deleted before they were "
            "archived, and archiving the rest would leave a hole in the archive; nothing was "
            "copied"
        )
    copied = objects = written = 0
    for number in archivable:
        base, end = bases[number], bases[number + 1]
        segment = view.segment(number)
        log_name = file_name(base, LOG_SUFFIX)
        if log_name in present:
            if present[log_name] != segment.size:
                raise KafkaStorageError(
                    f"{target}/{log_name} is {present[log_name]} bytes but "
                    f"{segment.path(LOG_SUFFIX)} is {segment.size}: the archive holds another "
                    "log under this name; nothing more was copied"
                )
            continue
        files = [
            (file_name(base, suffix), os.path.join(view.directory, file_name(base, suffix)))
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
        ]
        files.append(
            (
                file_name(end, SNAPSHOT_SUFFIX),
                os.path.join(view.directory, file_name(end, SNAPSHOT_SUFFIX)),
            )
        )
        for name, path in files:
            size = _copy_file(view.fs, path, store, os.path.join(target, name), present)
            objects += size is not None
            written += size or 0
        written += store.put(os.path.join(target, log_name), _chunks(segment.log, segment.size))
        objects += 1
        copied += 1
    end = bases[archivable[-1] + 1]
    # delete_records' log start inside the segments (retention's is a segment's base); never
    # past the archive's end, which a reader of the archive alone would refuse.
    log_start = min(view.log_start_offset, end) if view.log_start_offset > bases[0] else None
    done = ArchiveReport(copied, len(archivable) - copied, objects, written)
    older = any(
        parsed is not None and parsed[1] == LOG_SUFFIX and parsed[0] < bases[0]
        for parsed in map(parse_file_name, present)
    )
    counts = _archived_counts(bases[0], end, live_counts, before.counts.get(key), older)
    return done, _Archived(end, log_start, counts)


def _copy_file(
    fs: FileSystem, path: str, store: Store, target: str, present: dict[str, int]
) -> int | None:
    """Publish the source file `path` as `target` unless the archive has it with its length;
    the bytes written, or None when nothing was (already there, or no such file)."""
    try:
        handle = fs.open(path, read_only=True)
    except FileNotFoundError:
        return None  # an optional file (.txnindex, a snapshot), or retention took it
    try:
        size = handle.size()
        if present.get(os.path.basename(target)) == size:
            return None
        return store.put(target, _chunks(handle, size))
    finally:
        handle.close()


def _chunks(handle: FileHandle, size: int) -> Iterator[bytes]:
    """The first `size` bytes of the file, a read chunk at a time (a crash point before each:
    eoslog.crashpoints.ARCHIVE_POINTS). KafkaStorageError if the file is shorter."""
    position = 0
    while position < size:
        data = handle.pread(min(limits.offline_read_chunk_bytes, size - position), position)
        if not data:
            raise KafkaStorageError(
                f"{handle.path}: ends at byte {position}, not {size}, while being archived"
            )
        crashpoints.hit("archive.copy")
        yield data
        position += len(data)


def _archived_counts(
    first_base: int,
    end: int,
    live: checkpoints.AbortedCounts | None,
    before: checkpoints.AbortedCounts | None,
    older: bool,
) -> checkpoints.AbortedCounts | None:
    """The count of .txnindex entries of the archived segments (those below `end`): the
    owner's count for the segments still in the source (from first_base on), the archive's
    earlier count for those archived before and gone from the source since (`older`: there
    are some); None where neither counts a segment (readers then derive the aborted
    transactions from the batch headers)."""
    if live is None:
        return None
    covered_to = min(live.covered_to, end)
    by_segment = {base: n for base, n in live.by_segment.items() if first_base <= base < covered_to}
    if older:
        if before is None or before.covered_to < first_base:
            return None
        by_segment.update(
            {base: n for base, n in before.by_segment.items() if base < min(first_base, covered_to)}
        )
    return checkpoints.AbortedCounts(covered_to, by_segment)


def archived_ends(url: str) -> dict[PartitionKey, int]:
    """Where the archive at `url` ends, by partition: its recovery-point checkpoint, written
    after the segments below it (eoslog.tiering)."""
    return _read_checkpoints(url).ends


def _read_checkpoints(url: str) -> _Checkpoints:
    """The archive's checkpoints as the last run wrote them (none for a new archive)."""
    fs, root = offline.located(url)
    try:
        ends, _ = checkpoints.read_believed_offsets(
            fs, os.path.join(root, checkpoints.RECOVERY_POINT_FILE)
        )
        starts, _ = checkpoints.read_believed_log_starts(fs, root)
        counts, _ = checkpoints.read_believed_aborted_counts(fs, root)
    except (FileNotFoundError, NotADirectoryError):
        return _Checkpoints({}, {}, {})
    return _Checkpoints(ends, {key: start.offset for key, start in starts.items()}, counts)


def _write_checkpoints(store: Store, written: _Checkpoints) -> None:
    """The archive's checkpoints (module doc), each published whole; eoslog's log start
    before Kafka's, as the owner writes them."""
    for name, data in (
        (
            checkpoints.CONFIRMED_LOG_START_FILE,
            checkpoints.encode_confirmed_log_starts(written.log_starts),
        ),
        (checkpoints.LOG_START_OFFSET_FILE, checkpoints.encode_offsets(written.log_starts)),
        (checkpoints.ABORTED_TXNS_FILE, checkpoints.encode_aborted_counts(written.counts)),
        (checkpoints.RECOVERY_POINT_FILE, checkpoints.encode_offsets(written.ends)),
    ):
        store.put(os.path.join(store.root, name), [data])
