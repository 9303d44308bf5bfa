"""Offline scans of a log directory (docs/api.md "Offline scans"): read-only, no lock, safe from any
process while the owner writes. eoslog.scan is the public entry; the Spark data source
(eoslog_spark) plans with plan_ranges on the driver and reads each ScanRange in a task.

A scan is planned partition by partition: a PartitionView (eoslog.log.partition_view) fixes
what the partition holds, the start and end offsets are resolved against it (earliest,
latest, explicit offsets, timestamps through the time index), and under read_committed the
end is capped at the view's last stable offset and the aborted transactions in the range are
attached. A ScanRange is a small picklable descriptor: reading it opens a fresh view, whose
log is a longer prefix of the same log, and decodes [start, stop) from it, so every reader of
one plan sees the same records.

The directory is a local path or a URL (located): `file://` is the local file system, any other
scheme (`s3://`, `gs://`, `hdfs://`) is opened read-only through pyarrow (eoslog.fs_arrow), and
everything above reads it exactly as a local directory. A ScanRange keeps the path as given, so
a Spark task opens the same store itself.

A log whose older segments `eoslog archive` copied elsewhere (eoslog.archive) is read as one
log with `archive=URL`: the live directory over the archive (eoslog.archive_view), planned and
read exactly as one directory. A ScanRange keeps the archive's URL too.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import os
import re
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Final, NamedTuple, TypeVar

import pyarrow as pa

from eoslog import fs_arrow, limits
from eoslog.archive_view import ArchivedLogFileSystem
from eoslog.arguments import names
from eoslog.errors import (
    KafkaException,
    KafkaStorageError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
    UnsafePathError,
)
from eoslog.fs import FileSystem, PosixFileSystem
from eoslog.log import checkpoints
from eoslog.log.partition_reads import ISOLATION_LEVELS
from eoslog.log.partition_view import PartitionView
from eoslog.log.txn_index import AbortedTxn
from eoslog.record.columns import spark_schema

T = TypeVar("T")

# Spark's Kafka source spells these as offsets in its JSON (KafkaSourceProvider): -2 the
# earliest offset, -1 the latest.
EARLIEST: Final = -2
LATEST: Final = -1
# `<topic>-<partition>` (docs/format.md §5.1); a directory being deleted has a longer suffix.
_PARTITION_DIRECTORY: Final = re.compile(r"(.+)-(\d+)")
_INTERNAL_TOPICS: Final = ("__transaction_state", "__consumer_offsets")
# A read yields RecordBatches of at least this many rows (but the last), gathered from the
# view's decoded reads (one per read chunk, and a short one at every segment's end): each
# batch a Spark task yields costs an Arrow IPC message and a JVM-side batch.
YIELD_ROWS_MIN: Final = 65_536
# ... and of at most about this many bytes, so a gathered batch stays well inside Arrow's
# 2 GiB binary-column limit and a reader's memory flat.
YIELD_BYTES_MAX: Final = 64 * 1024 * 1024

OffsetSpec = str | int | Mapping[str, Mapping[int | str, int]] | None


class ScanRange(NamedTuple):
    """The records [start, stop) of one partition of the log directory `path` (a local path or
    a URL, as given to the planner: see located). aborted: the aborted transactions overlapping
    the range (read_committed), or None (read_uncommitted). archive: the URL of the archive the
    log's older segments were copied to (read over the directory: located), or None."""

    path: str
    topic: str
    partition: int
    start: int
    stop: int
    aborted: tuple[AbortedTxn, ...] | None
    archive: str | None = None

    @property
    def records_max(self) -> int:
        """At most this many records (offsets have gaps: markers, aborted batches)."""
        return self.stop - self.start


def located(
    path: str, fs: FileSystem | None = None, archive: str | None = None
) -> tuple[FileSystem, str]:
    """(the file system, the directory's path in it) of a log directory named by a local path
    or a URL. `file://` URLs are local paths; a URL of another scheme is opened with pyarrow
    (fs_arrow.open_url, its options and credentials in the URL) unless `fs` is given, which then
    reads the URL's display path (no credentials, no options). With `archive` (a path or URL
    located the same way) and no `fs`, the file system is the directory over that archive
    (eoslog.archive_view). ValueError for a URL that cannot be opened, or a `file://` URL
    naming another host."""
    if archive is not None and fs is None:
        live, root = located(path)
        stored, stored_root = located(archive)
        return ArchivedLogFileSystem(live, root, stored, stored_root), root
    if not fs_arrow.is_url(path):
        return fs or PosixFileSystem(), path
    parts = urllib.parse.urlsplit(path)
    if parts.scheme.lower() == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"{path} names a file on another host ({parts.netloc})")
        return fs or PosixFileSystem(), urllib.parse.unquote(parts.path)
    if fs is not None:
        return fs, fs_arrow.display_path(path)
    return fs_arrow.open_url(path)


def list_partitions(
    path: str,
    topics: Iterable[str] | None = None,
    *,
    pattern: str | None = None,
    partitions: Iterable[tuple[str, int]] | None = None,
    fs: FileSystem | None = None,
    archive: str | None = None,
) -> list[tuple[str, int]]:
    """The (topic, partition) pairs to scan, sorted: the partitions of `topics`, of the
    topics whose whole name matches the regular expression `pattern` (internal topics
    excepted), or exactly `partitions`. UnknownTopicOrPartitionError for a named topic or
    partition with no directory; KafkaStorageError when `path` is no directory; ValueError
    unless exactly one of the three is given. Only `path` itself is listed (and the archive's
    root, with `archive`)."""
    if sum(choice is not None for choice in (topics, pattern, partitions)) != 1:
        raise ValueError("give exactly one of topics, pattern and partitions")
    fs, path = located(path, fs, archive)
    found: set[tuple[str, int]] = set()
    try:
        names = fs.list_directories(path)
    except (FileNotFoundError, NotADirectoryError) as error:
        # A path with no log directory behind it: a typed error naming it, as for a topic.
        raise KafkaStorageError(f"no log directory at {path}: {error.strerror}") from None
    for name in names:
        match = _PARTITION_DIRECTORY.fullmatch(name)
        if match:
            found.add((match.group(1), int(match.group(2))))
    unsafe = _symlinked_partitions(fs, path, set(names))
    found |= set(unsafe)
    if partitions is not None:
        wanted = sorted(set(partitions))
        missing = [pair for pair in wanted if pair not in found]
        if missing:
            raise UnknownTopicOrPartitionError(f"no such partitions in {path}: {missing}")
        return _refusing(wanted, unsafe)
    if pattern is not None:
        regex = re.compile(pattern)
        return _refusing(
            sorted(
                pair
                for pair in found
                if regex.fullmatch(pair[0]) and pair[0] not in _INTERNAL_TOPICS
            ),
            unsafe,
        )
    selected = []
    for topic in topics or ():
        mine = sorted(pair for pair in found if pair[0] == topic)
        if not mine:
            raise UnknownTopicOrPartitionError(f"no topic {topic!r} in {path}")
        selected.extend(mine)
    return _refusing(sorted(selected), unsafe)


def _symlinked_partitions(
    fs: FileSystem, path: str, directories: set[str]
) -> dict[tuple[str, int], UnsafePathError]:
    """The partitions whose directory name is taken by a symbolic link (the fs seam refuses
    to follow one: eoslog.fs), each with the error reading it raises. A stray regular file
    with a partition's name is no partition and is passed over, as the owner passes it."""
    unsafe = {}
    for name in fs.listdir(path):
        match = _PARTITION_DIRECTORY.fullmatch(name)
        if match is None or name in directories:
            continue
        try:
            fs.file_size(os.path.join(path, name))
        except UnsafePathError as error:
            unsafe[(match.group(1), int(match.group(2)))] = error
        except OSError:
            continue  # gone since the listing, or not a file: not a partition either
    return unsafe


def _refusing(
    selected: list[tuple[str, int]], unsafe: dict[tuple[str, int], UnsafePathError]
) -> list[tuple[str, int]]:
    """The selected partitions, unless one of them is a symbolic link: its UnsafePathError
    (a typed error naming it, never a partition silently left out of the scan)."""
    for pair in selected:
        if pair in unsafe:
            raise unsafe[pair]
    return selected


def offset_for(spec: OffsetSpec, topic: str, partition: int, default: int) -> int:
    """The offset a Spark-style spec gives one partition: "earliest" / "latest", -2 / -1, or
    a {topic: {partition: offset}} mapping (partitions it leaves out get `default`)."""
    if spec is None:
        return default
    if isinstance(spec, str):
        if spec not in ("earliest", "latest"):
            raise ValueError(f"offsets must be earliest, latest or a mapping, not {spec!r}")
        return EARLIEST if spec == "earliest" else LATEST
    if isinstance(spec, int):
        return spec
    per_topic = spec.get(topic, {})
    for key, value in per_topic.items():
        if int(key) == partition:
            return int(value)
    return default


def _resolve(view: PartitionView, offset: int, latest: int) -> int:
    if offset == EARLIEST:
        return view.log_start_offset
    if offset == LATEST:
        return latest
    if offset < 0:
        raise ValueError(f"offset {offset} is neither an offset nor -2 (earliest) / -1 (latest)")
    return min(max(offset, view.log_start_offset), latest)


def plan_partition(
    path: str,
    topic: str,
    partition: int,
    *,
    isolation_level: str = "read_committed",
    start_offsets: OffsetSpec = None,
    end_offsets: OffsetSpec = None,
    start_timestamp: int | None = None,
    end_timestamp: int | None = None,
    records_per_range: int | None = None,
    fs: FileSystem | None = None,
    log_starts: Mapping[tuple[str, int], checkpoints.LogStart] | None = None,
    archive: str | None = None,
) -> list[ScanRange]:
    """The ranges covering what one partition holds now between the resolved start and end
    (see plan_ranges), cut at offset-index entries into pieces of about records_per_range."""
    if isolation_level not in ISOLATION_LEVELS:
        raise ValueError(f"isolation_level must be one of {ISOLATION_LEVELS}")
    fs, root = located(path, fs, archive)
    directory = os.path.join(root, f"{topic}-{partition}")
    log_start = (log_starts or {}).get((topic, partition))
    with _naming_archived(fs), PartitionView(fs, directory, topic, partition, log_start) as view:
        committed = isolation_level == "read_committed"
        latest = view.last_stable_offset if committed else view.log_end_offset
        start = _resolve(view, offset_for(start_offsets, topic, partition, EARLIEST), latest)
        stop = _resolve(view, offset_for(end_offsets, topic, partition, LATEST), latest)
        if start_timestamp is not None:
            start = max(start, min(view.offset_for_timestamp(start_timestamp), latest))
        if end_timestamp is not None:
            stop = min(stop, view.offset_for_timestamp(end_timestamp))
        if start >= stop:
            return []
        aborted = None
        if committed:
            aborted = tuple(
                txn
                for txn in view.aborted_transactions()
                if txn.last_offset >= start and txn.first_offset < stop
            )
        cuts = view.split_offsets(start, stop, records_per_range) if records_per_range else []
    bounds = [start, *cuts, stop]
    return [
        ScanRange(path, topic, partition, low, high, aborted, archive)
        for low, high in itertools.pairwise(bounds)
    ]


def plan_ranges(
    path: str,
    pairs: Iterable[tuple[str, int]],
    *,
    isolation_level: str = "read_committed",
    start_offsets: OffsetSpec = None,
    end_offsets: OffsetSpec = None,
    start_timestamp: int | None = None,
    end_timestamp: int | None = None,
    records_per_range: int | None = None,
    fs: FileSystem | None = None,
    archive: str | None = None,
) -> list[ScanRange]:
    """plan_partition for each (topic, partition), with the owner's checkpointed log start
    offsets. Start offsets default to the earliest, end offsets to the latest: the last
    stable offset under read_committed (the view's LSO, computed from the files), the log
    end otherwise. Timestamps (ms) narrow the range to records from the first with timestamp
    >= start_timestamp up to, not including, the first with timestamp >= end_timestamp.
    Every range keeps `path` as given (a URL with its options, for the readers to open), and
    `archive` (the log's archive: located)."""
    fs, root = located(path, fs, archive)
    log_starts = _log_starts(fs, root)

    def plan(pair: tuple[str, int]) -> list[ScanRange]:
        return plan_partition(
            path,
            *pair,
            isolation_level=isolation_level,
            start_offsets=start_offsets,
            end_offsets=end_offsets,
            start_timestamp=start_timestamp,
            end_timestamp=end_timestamp,
            records_per_range=records_per_range,
            fs=fs,
            log_starts=log_starts,
            archive=archive,
        )

    return [r for ranges in _per_partition(plan, pairs, path, archive) for r in ranges]


def _per_partition(
    work: Callable[[tuple[str, int]], T],
    pairs: Iterable[tuple[str, int]],
    path: str,
    archive: str | None,
) -> list[T]:
    """work(pair) for each partition, in order. On object storage the partitions are planned
    by limits.object_planning_threads threads: planning is a few small reads per segment, each
    a request whose latency, not its bytes, is the cost (the file system is thread-safe)."""
    pairs = list(pairs)
    remote = fs_arrow.is_url(path) or (archive is not None and fs_arrow.is_url(archive))
    if not remote or len(pairs) < 2:
        return [work(pair) for pair in pairs]
    threads = min(limits.object_planning_threads, len(pairs))
    with concurrent.futures.ThreadPoolExecutor(threads, "eoslog-plan") as pool:
        return list(pool.map(work, pairs))


def _log_starts(fs: FileSystem, root: str) -> Mapping[tuple[str, int], checkpoints.LogStart]:
    """The owner's checkpointed log start offsets."""
    try:
        return checkpoints.read_believed_log_starts(fs, root)[0]
    except OSError:
        return {}  # replaced under us: the first segment's base serves


def partition_bounds(
    path: str,
    pairs: Iterable[tuple[str, int]],
    *,
    isolation_level: str = "read_committed",
    fs: FileSystem | None = None,
    archive: str | None = None,
) -> dict[tuple[str, int], tuple[int, int]]:
    """{(topic, partition): (log start offset, latest)} as the files hold them now: latest is
    the last stable offset under read_committed, the log end otherwise (what plan_ranges
    plans up to). A streaming reader's micro-batches end there."""
    if isolation_level not in ISOLATION_LEVELS:
        raise ValueError(f"isolation_level must be one of {ISOLATION_LEVELS}")
    fs, root = located(path, fs, archive)
    log_starts = _log_starts(fs, root)

    def bound(pair: tuple[str, int]) -> tuple[int, int]:
        topic, partition = pair
        directory = os.path.join(root, f"{topic}-{partition}")
        with (
            _naming_archived(fs),
            PartitionView(fs, directory, topic, partition, log_starts.get(pair)) as view,
        ):
            committed = isolation_level == "read_committed"
            latest = view.last_stable_offset if committed else view.log_end_offset
            return view.log_start_offset, latest

    pairs = list(pairs)
    return dict(zip(pairs, _per_partition(bound, pairs, path, archive), strict=True))


def read_range(
    scan_range: ScanRange,
    *,
    include_headers: bool = False,
    verify_crc: bool = True,
    chunk_bytes: int = limits.offline_read_chunk_bytes,
    fs: FileSystem | None = None,
    fail_on_data_loss: bool = True,
    decompressed_bytes_max: int = limits.decompressed_batch_bytes_max,
) -> Iterator[pa.RecordBatch]:
    """The records of one planned range as RecordBatches in the Spark Kafka source's schema;
    nothing past scan_range.stop is read.

    When the owner's retention deleted segments holding planned offsets between the plan and
    this read (the range starts below the view's first segment), the records are gone:
    fail_on_data_loss (the default, as Spark's Kafka source) raises OffsetOutOfRangeError
    before yielding anything; otherwise the lost offsets are skipped and the range is read
    from the first offset still held."""
    fs, root = located(scan_range.path, fs, scan_range.archive)
    topic, partition = scan_range.topic, scan_range.partition
    directory = os.path.join(root, f"{topic}-{partition}")
    aborted = None if scan_range.aborted is None else list(scan_range.aborted)
    with _naming_archived(fs), PartitionView(fs, directory, topic, partition) as view:
        if fail_on_data_loss and view.log_start_offset > scan_range.start:
            lost_end = min(view.log_start_offset, scan_range.stop)
            raise OffsetOutOfRangeError(
                f"{topic}-{partition}: offsets {scan_range.start} to {lost_end - 1} were "
                "planned but retention deleted them before the read (the log now starts at "
                f"{view.log_start_offset}); fail_on_data_loss=False (Spark option "
                "failOnDataLoss=false) skips them"
            )
        decoded = view.read_arrow(
            scan_range.start,
            scan_range.stop,
            aborted,
            include_headers=include_headers,
            verify_crc=verify_crc,
            chunk_bytes=chunk_bytes,
            decompressed_bytes_max=decompressed_bytes_max,
        )
        yield from _gathered(columns.to_arrow(topic, partition) for columns in decoded)


@contextlib.contextmanager
def _naming_archived(fs: FileSystem) -> Iterator[None]:
    """A typed error reading a split log names the archived object it read, not only its path
    in the directory (ArchivedLogFileSystem.naming_archived)."""
    try:
        yield
    except KafkaException as error:
        if not isinstance(fs, ArchivedLogFileSystem):
            raise
        text = fs.naming_archived(str(error))
        if text == str(error):
            raise
        raise type(error)(text) from None


def _gathered(pieces: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The pieces joined into batches of at least YIELD_ROWS_MIN rows (the last may be
    smaller) and about YIELD_BYTES_MAX bytes at most; a piece large enough alone is passed on
    uncopied."""
    pending: list[pa.RecordBatch] = []
    rows = size = 0
    for piece in pieces:
        if pending and size + piece.nbytes > YIELD_BYTES_MAX:
            yield _joined(pending)
            pending, rows, size = [], 0, 0
        pending.append(piece)
        rows += piece.num_rows
        size += piece.nbytes
        if rows >= YIELD_ROWS_MIN:
            yield _joined(pending)
            pending, rows, size = [], 0, 0
    if pending:
        yield _joined(pending)


def _joined(pieces: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(pieces) == 1:
        return pieces[0]
    joined = pa.Table.from_batches(pieces).combine_chunks().to_batches()
    assert len(joined) == 1, "combine_chunks leaves one chunk per column"
    return joined[0]


def scan(
    path: str,
    topics: Iterable[str] | None = None,
    isolation_level: str = "read_committed",
    start_offsets: OffsetSpec = None,
    end_offsets: OffsetSpec = None,
    start_timestamp: int | None = None,
    end_timestamp: int | None = None,
    *,
    pattern: str | None = None,
    partitions: Iterable[tuple[str, int]] | None = None,
    include_headers: bool = False,
    verify_crc: bool = True,
    fail_on_data_loss: bool = True,
    decompressed_bytes_max: int = limits.decompressed_batch_bytes_max,
    archive: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """Read a log directory without opening it: pyarrow.RecordBatches in the Spark Kafka
    source's schema (docs/api.md "Spark"), partition after partition in offset order.

    `path` is a local path or a URL: `file://...`, or any file system pyarrow opens, read
    with ranged reads and never written (`s3://bucket/logs?endpoint_override=host:port&
    scheme=http&region=...`, with `access_key:secret_key@` before the bucket or the usual AWS
    environment variables; `gs://`, `hdfs://`; eoslog.fs_arrow). Only the directory and the
    partitions scanned are listed.

    Any process may call it while the owner writes: it takes no lock, maps nothing the owner
    may cut, and sees each partition as it stood when planned, up to its last whole batch.
    read_committed (the default) is computed from the files alone: no record of an aborted
    transaction, and nothing at or past the first offset of a transaction still open.
    Select partitions with `topics`, `pattern` (a regular expression on whole topic names)
    or `partitions` ((topic, partition) pairs); all topics but the internal ones by default.
    Offsets: "earliest" / "latest" or {topic: {partition: offset}} with -2 / -1 for
    earliest / latest (Spark's JSON); end offsets are exclusive. Timestamps are ms.

    Every partition is planned before the first is read. If the owner's retention deletes
    planned records before they are read, OffsetOutOfRangeError is raised, or with
    fail_on_data_loss=False the lost records are skipped (Spark's failOnDataLoss).

    decompressed_bytes_max: a compressed batch whose records decompress past it raises
    CorruptRecordError before more is allocated (a decompression bomb). The default,
    limits.decompressed_batch_bytes_max, covers every batch eoslog appends; raise it (up to
    limits.decompressed_batch_bytes_ceiling) to read batches other writers compressed harder.

    archive: the path or URL (as `path`) of the archive `eoslog archive` copied the log's older
    segments to (eoslog.archive): the scan reads the directory and the archive as one log, each
    segment from the directory while it is there, else from the archive.

    A damaged end of a partition's log is left out only where the owner's recovery would
    cut it (a torn tail: after an unclean stop, above the recovery point, nothing valid after
    it); anywhere else damage is an error naming the file and the byte, never records
    missing silently.

    Raises UnknownTopicOrPartitionError for a topic or partition with no directory,
    ValueError for a bad option, CorruptRecordError where the files are damaged,
    CorruptCheckpointError for a checkpoint the segments contradict (a log start past the
    log end, a recovery point the log does not reach), OffsetOutOfRangeError for planned
    records retention deleted (see above)."""
    if topics is not None:
        topics = names("topics", topics)
    if topics is None and pattern is None and partitions is None:
        pattern = ".*"
    # One file system for the whole scan: on object storage its listings and reads are kept
    # (eoslog.fs_arrow), so reading a range re-asks nothing planning asked.
    fs, _ = located(path, archive=archive)
    pairs = list_partitions(path, topics, pattern=pattern, partitions=partitions, fs=fs)
    ranges = plan_ranges(
        path,
        pairs,
        isolation_level=isolation_level,
        start_offsets=start_offsets,
        end_offsets=end_offsets,
        start_timestamp=start_timestamp,
        end_timestamp=end_timestamp,
        fs=fs,
        archive=archive,
    )
    for scan_range in ranges:
        yield from read_range(
            scan_range,
            include_headers=include_headers,
            verify_crc=verify_crc,
            fail_on_data_loss=fail_on_data_loss,
            decompressed_bytes_max=decompressed_bytes_max,
            fs=fs,
        )


# The schema of what scan yields (the Spark Kafka source's; columns.spark_schema).
arrow_schema = spark_schema
