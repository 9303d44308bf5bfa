"""The invariant checker every reliability family runs after a restart (docs/reliability.md
"The invariant checker"): invariants 1, 2, 7 and 8 for the partition log.

    report = check_log(path_or_broker, acked, fs=twin_image)
    print(report.summary())
    assert report.ok, report.describe()

`acked` maps (topic, partition) to the appends acknowledged DURABLY: (base_offset,
last_offset, values), values being the record values at base_offset .. last_offset. Values
must be unique within a partition (a workload puts a sequence number in each), so that a
record found at another offset, or twice, can be told from a lost one.

Anomaly classes (one counter each, printed by every family):
- lost: an acknowledged record that is nowhere in the log (invariant 1);
- duplicated: an acknowledged value present more than once (invariant 1);
- misordered: an acknowledged value at another offset, offsets that do not strictly increase,
  a gap between batches (no control records are written by the log layer, so none may
  appear), or a log end offset that disagrees with the last batch (invariant 2);
- index_mismatch: a lookup (read from an offset, offset_for_timestamp) that answers wrongly
  (invariant 7);
- stale_index: an offset or time index entry that disagrees with a scan of the .log
  (invariant 7; lookups never believe such an entry, so it is counted apart from the wrong
  answers it would otherwise cause);
- nondeterministic: a second open of a copy of the same files reads differently
  (invariant 8);
- corrupt_read: a read whose batches fail decode_columns (CRC or structure): a corrupt
  record returned to a reader.

The checker reads through the public partition-log API (read, offset_for_timestamp,
log_start_offset, log_end_offset) and inspects the segments' in-memory indexes
(PartitionLog.segments, LogSegment.offset_index / time_index), because a file alone cannot
say how many entries an active, preallocated index holds.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import eoslog
from eoslog.errors import KafkaException
from eoslog.fs import FileSystem
from eoslog.fs_twin import RecordingFileSystem
from eoslog.log.partition import PartitionLog
from eoslog.record import codec

# A partition as a plain (topic, partition) tuple, the key of per-partition maps; not the
# client's eoslog.TopicPartition class, which also carries an offset.
PartitionKey = tuple[str, int]
AckedAppend = tuple[int, int, Sequence[bytes | None]]
Acked = Mapping[PartitionKey, Iterable[AckedAppend]]

ANOMALY_CLASSES = (
    "lost",
    "duplicated",
    "misordered",
    "index_mismatch",
    "stale_index",
    "nondeterministic",
    "corrupt_read",
)
# Enough messages to diagnose a failure without flooding the output of a 1,000-image run.
DETAILS_MAX = 20
DETAILS_PER_CLASS = 4
# Reads are made in pieces of this size: small, so that a read crosses many batches and
# segments and exercises the read path as a consumer would.
READ_BYTES = 4096
# How many offsets inside batches (not at their starts) each check reads from, at random.
INNER_OFFSET_READS = 32


@dataclass
class Report:
    """Counters per anomaly class and the first few messages describing them."""

    counts: Counter[str] = field(default_factory=Counter)
    details: list[str] = field(default_factory=list)
    records_checked: int = 0
    batches_read: int = 0

    def add(self, kind: str, message: str) -> None:
        assert kind in ANOMALY_CLASSES, kind
        self.counts[kind] += 1
        if self.counts[kind] <= DETAILS_PER_CLASS and len(self.details) < DETAILS_MAX:
            self.details.append(f"{kind}: {message}")

    def merge(self, other: Report) -> None:
        self.counts.update(other.counts)
        self.records_checked += other.records_checked
        self.batches_read += other.batches_read
        room = DETAILS_MAX - len(self.details)
        self.details.extend(other.details[: max(room, 0)])

    @property
    def ok(self) -> bool:
        return not any(self.counts[kind] for kind in ANOMALY_CLASSES)

    def summary(self) -> str:
        return " ".join(f"{kind}={self.counts[kind]}" for kind in ANOMALY_CLASSES)

    def describe(self) -> str:
        return self.summary() + "".join(f"\n  {line}" for line in self.details)


@dataclass(frozen=True)
class ReadBatch:
    """One batch as a reader gets it: header, raw bytes, record offsets and values."""

    position: int  # in the FetchResult that returned it
    header: Any  # eoslog.record.types.BatchHeader
    raw: bytes
    offsets: list[int]
    values: list[bytes | None]
    timestamps: list[int]


@dataclass
class PartitionRead:
    """Everything a read_uncommitted consumer gets from log start to log end."""

    log_start_offset: int
    log_end_offset: int
    batches: list[ReadBatch] = field(default_factory=list)
    stuck_at: int | None = None  # an offset below the log end that read nothing

    def fingerprint(self) -> tuple[int, int, int | None, bytes]:
        return (
            self.log_start_offset,
            self.log_end_offset,
            self.stuck_at,
            b"".join(batch.raw for batch in self.batches),
        )


# --- reading ------------------------------------------------------------------------------


def decode_values(raw: bytes | memoryview) -> tuple[list[int], list[bytes | None], list[int]]:
    """(offsets, values, timestamps) of the records in whole batches, by decode_columns
    (CRC checked). Raises what decode_columns raises for corrupt bytes."""
    columns = codec.decode_columns(raw, include_control=True)
    offsets = [int(offset) for offset in columns.offset]
    timestamps = [int(timestamp) for timestamp in columns.timestamp_ms]
    values: list[bytes | None] = []
    data = columns.value_data.tobytes()
    bounds = columns.value_offsets
    validity = columns.value_validity
    for i in range(columns.count):
        if validity[i >> 3] >> (i & 7) & 1:
            values.append(data[int(bounds[i]) : int(bounds[i + 1])])
        else:
            values.append(None)
    return offsets, values, timestamps


def read_partition(log: PartitionLog, report: Report, label: str) -> PartitionRead:
    """Read every batch from the log start to the log end in READ_BYTES pieces, checking each
    batch with decode_columns (corrupt_read) and the offsets (misordered). Stops at the first
    batch a reader cannot decode: nothing after it is readable."""
    start, end = log.log_start_offset, log.log_end_offset
    result = PartitionRead(start, end)
    offset = start
    while offset < end:
        try:
            raw = bytes(log.read(offset, READ_BYTES, isolation_level="read_uncommitted").records)
        except (KafkaException, ValueError) as error:
            report.add("corrupt_read", f"{label}: read({offset}) raised {error!r}")
            result.stuck_at = offset
            break
        if not raw:
            # Offsets below the log end that no batch holds: a hole. Go on from the next
            # segment, so that the records after it are still checked.
            later = [s.base_offset for s in log.segments if s.base_offset > offset]
            report.add(
                "misordered",
                f"{label}: read({offset}) below log end {end} returned nothing (a hole up to "
                f"{later[0] if later else end})",
            )
            if not later:
                result.stuck_at = offset
                break
            offset = later[0]
            continue
        batches, error = _decode_batches(raw)
        result.batches.extend(batches)
        report.batches_read += len(batches)
        for batch in batches:
            header = batch.header
            if batch.offsets != list(range(header.base_offset, header.last_offset + 1)):
                report.add(
                    "misordered",
                    f"{label}: batch at {header.base_offset} holds offsets "
                    f"{batch.offsets[:5]}... not {header.base_offset}..{header.last_offset}",
                )
        if error is not None:
            report.add("corrupt_read", f"{label}: read({offset}) returned corrupt bytes: {error}")
            result.stuck_at = offset
            break
        following = batches[-1].header.last_offset + 1
        if following <= offset:
            report.add(
                "misordered",
                f"{label}: read({offset}) returned batches ending at {following - 1}",
            )
            result.stuck_at = offset
            break
        offset = following
    _check_offset_order(result, report, label)
    return result


def _decode_batches(raw: bytes) -> tuple[list[ReadBatch], str | None]:
    """The batches of one read, each decoded on its own, up to the first that fails: (those
    before it, the error) or (all, None)."""
    batches: list[ReadBatch] = []
    try:
        for position, header in codec.iter_headers(raw):
            data = raw[position : position + header.size_in_bytes]
            offsets, values, timestamps = decode_values(data)
            batches.append(ReadBatch(position, header, data, offsets, values, timestamps))
    except (KafkaException, ValueError) as error:
        return batches, str(error)
    if not batches:
        return batches, "no whole batch in a non-empty read"
    return batches, None


def _check_offset_order(read: PartitionRead, report: Report, label: str) -> None:
    """Invariant 2 over the batches read: strictly increasing, no gaps, ending at the log
    end offset."""
    previous_last: int | None = None
    for batch in read.batches:
        header = batch.header
        if previous_last is not None:
            if header.base_offset <= previous_last:
                report.add(
                    "misordered",
                    f"{label}: batch {header.base_offset}..{header.last_offset} follows a "
                    f"batch ending at {previous_last}",
                )
            elif header.base_offset != previous_last + 1:
                report.add(
                    "misordered",
                    f"{label}: gap of offsets {previous_last + 1}..{header.base_offset - 1} "
                    f"with no control records there",
                )
        elif header.base_offset > read.log_start_offset:
            report.add(
                "misordered",
                f"{label}: first batch starts at {header.base_offset}, above the log start "
                f"{read.log_start_offset}",
            )
        previous_last = header.last_offset
    if read.stuck_at is None:
        expected_end = read.log_start_offset if previous_last is None else previous_last + 1
        if read.log_end_offset != expected_end:
            report.add(
                "misordered",
                f"{label}: log end offset {read.log_end_offset} but the batches end at "
                f"{expected_end}",
            )


# --- invariant 1 ----------------------------------------------------------------------------


def check_acknowledged(
    read: PartitionRead,
    acked: Iterable[AckedAppend],
    report: Report,
    label: str,
    missing_allowed_below: int = 0,
) -> None:
    """Every acknowledged record is present exactly once, at its offset, with its value.
    Records below missing_allowed_below (removed by retention) may be absent."""
    where: dict[bytes | None, list[int]] = {}
    for batch in read.batches:
        for offset, value in zip(batch.offsets, batch.values, strict=True):
            where.setdefault(value, []).append(offset)
    for base_offset, last_offset, values in acked:
        assert len(values) == last_offset - base_offset + 1, (base_offset, last_offset)
        for offset, value in enumerate(values, start=base_offset):
            report.records_checked += 1
            found = where.get(value, [])
            if not found:
                if offset >= missing_allowed_below:
                    report.add("lost", f"{label}: offset {offset} value {value!r} is missing")
            elif len(found) > 1:
                report.add(
                    "duplicated", f"{label}: value {value!r} (offset {offset}) is at {found}"
                )
            elif found[0] != offset:
                report.add(
                    "misordered",
                    f"{label}: value {value!r} acknowledged at {offset} is at {found[0]}",
                )


# --- invariant 7 ----------------------------------------------------------------------------


def check_indexes(log: PartitionLog, read: PartitionRead, report: Report, label: str) -> None:
    """Every offset/time index entry agrees with a scan of its segment's .log; reads from
    inside batches and offset_for_timestamp answer as a scan does."""
    for segment in log.segments:
        data = segment.log.pread(segment.size, 0)
        try:
            batches = {position: header for position, header in codec.iter_headers(data)}
        except (KafkaException, ValueError) as error:
            report.add("index_mismatch", f"{label}: {segment.path('.log')} does not scan: {error}")
            continue
        name = os.path.basename(segment.path(""))
        _check_offset_index(segment.offset_index, batches, report, f"{label}/{name}.index")
        _check_time_index(segment.time_index, batches, report, f"{label}/{name}.timeindex")
    _check_lookups(log, read, report, label)


def _check_offset_index(index: Any, batches: dict[int, Any], report: Report, label: str) -> None:
    previous = (-1, -1)
    for slot in range(index.entries):
        offset, position = index.entry(slot)
        header = batches.get(position)
        if header is None:
            report.add("stale_index", f"{label}[{slot}] = {offset}@{position}: no batch there")
        elif not header.base_offset <= offset <= header.last_offset:
            report.add(
                "stale_index",
                f"{label}[{slot}] = {offset}@{position}: that batch holds "
                f"{header.base_offset}..{header.last_offset}",
            )
        if offset <= previous[0] or position <= previous[1]:
            report.add("stale_index", f"{label}[{slot}] = {offset}@{position} follows {previous}")
        previous = (offset, position)


def _check_time_index(index: Any, batches: dict[int, Any], report: Report, label: str) -> None:
    """Entry (ts, offset): the batch ending at offset carries max timestamp ts, the largest
    of every batch of the segment up to it."""
    running_max: dict[int, int] = {}
    largest = -1
    last_offsets: dict[int, int] = {}
    for position in sorted(batches):
        header = batches[position]
        largest = max(largest, header.max_timestamp)
        running_max[header.last_offset] = largest
        last_offsets[header.last_offset] = header.max_timestamp
    previous = (-1, -1)
    for slot in range(index.entries):
        timestamp, offset = index.entry(slot)
        if offset not in last_offsets:
            report.add("stale_index", f"{label}[{slot}] = {timestamp}@{offset}: no batch ends")
        elif last_offsets[offset] != timestamp or running_max[offset] != timestamp:
            report.add(
                "stale_index",
                f"{label}[{slot}] = {timestamp}@{offset}: batch max timestamp "
                f"{last_offsets[offset]}, max so far {running_max[offset]}",
            )
        if timestamp <= previous[0] or offset < previous[1]:
            report.add("stale_index", f"{label}[{slot}] = {timestamp}@{offset} follows {previous}")
        previous = (timestamp, offset)


def _check_lookups(log: PartitionLog, read: PartitionRead, report: Report, label: str) -> None:
    if not read.batches:
        return
    rng = random.Random(len(read.batches))
    headers = [batch.header for batch in read.batches]
    targets = [h.base_offset + rng.randrange(h.last_offset - h.base_offset + 1) for h in headers]
    for offset in rng.sample(targets, min(INNER_OFFSET_READS, len(targets))):
        try:
            fetched = bytes(log.read(offset, 1, isolation_level="read_uncommitted").records)
            first = codec.read_header(fetched) if fetched else None
        except (KafkaException, ValueError) as error:
            report.add("index_mismatch", f"{label}: read({offset}) raised {error!r}")
            continue
        if first is None or not first.base_offset <= offset <= first.last_offset:
            found = None if first is None else (first.base_offset, first.last_offset)
            report.add("index_mismatch", f"{label}: read({offset}) began with batch {found}")
    # offset_for_timestamp against a scan: the smallest offset whose timestamp is >= target.
    records = sorted(
        (offset, timestamp)
        for batch in read.batches
        for offset, timestamp in zip(batch.offsets, batch.timestamps, strict=True)
        if offset >= read.log_start_offset
    )
    probes = {h.max_timestamp for h in headers} | {h.base_timestamp - 1 for h in headers}
    for target in sorted(rng.sample(sorted(probes), min(INNER_OFFSET_READS, len(probes)))):
        expected = next(((o, t) for o, t in records if t >= target), None)
        try:
            answer = log.offset_for_timestamp(target)
        except (KafkaException, ValueError) as error:
            report.add("index_mismatch", f"{label}: offset_for_timestamp({target}) raised {error}")
            continue
        if answer != expected:
            report.add(
                "index_mismatch",
                f"{label}: offset_for_timestamp({target}) = {answer}, a scan says {expected}",
            )


# --- invariant 8 and the entry point ----------------------------------------------------


def copy_twin(
    fs: RecordingFileSystem, content_of: Callable[[str], bytes] | None = None
) -> RecordingFileSystem:
    """A twin holding the current content of every file of fs (or `content_of(path)`), all
    durable. A twin that is itself a crash image (everything durable) is copied exactly by
    crash_image."""
    if content_of is None and not fs.unsynced_paths():
        return fs.crash_image(random.Random(0))
    content = fs.snapshot_bytes if content_of is None else content_of
    copy = RecordingFileSystem(seed=0)

    def walk(path: str) -> None:
        for name in fs.listdir(path):
            child = os.path.join(path, name)
            try:
                fs.listdir(child)
            except NotADirectoryError:
                handle = copy.open(child, create=True)
                handle.pwrite(content(child), 0)
                handle.sync()
                handle.close()
            else:
                copy.makedirs(child, durable=True)
                walk(child)

    walk("/")
    return copy


def open_broker(path: str, fs: FileSystem | None, **options: Any) -> eoslog.Broker:
    options.setdefault("background", False)
    return eoslog.open(path, fs=fs, **options)


def _copy_files(
    path: str, fs: FileSystem | None
) -> tuple[str, FileSystem | None, Callable[[], None]]:
    """A copy of the log directory: (path, fs, cleanup)."""
    if isinstance(fs, RecordingFileSystem):
        return path, copy_twin(fs), lambda: None
    scratch = tempfile.mkdtemp(prefix="eoslog-copy-", dir=os.path.dirname(os.path.abspath(path)))
    target = os.path.join(scratch, "log")
    shutil.copytree(path, target, ignore=shutil.ignore_patterns(".lock"))
    return target, None, lambda: shutil.rmtree(scratch, ignore_errors=True)


def check_broker(
    broker: eoslog.Broker,
    acked: Acked,
    *,
    missing_allowed_below: Mapping[PartitionKey, int] | None = None,
    label: str = "",
) -> tuple[Report, dict[PartitionKey, PartitionRead]]:
    """Invariants 1, 2 and 7 on an open broker, for the partitions in acked."""
    report = Report()
    reads: dict[PartitionKey, PartitionRead] = {}
    for (topic, partition), appends in acked.items():
        log = broker.log(topic, partition)
        where = f"{label}{topic}-{partition}"
        read = read_partition(log, report, where)
        reads[(topic, partition)] = read
        floor = (missing_allowed_below or {}).get((topic, partition), 0)
        check_acknowledged(read, appends, report, where, floor)
        check_indexes(log, read, report, where)
    return report, reads


def check_log(
    target: eoslog.Broker | str,
    acked: Acked,
    *,
    fs: FileSystem | None = None,
    missing_allowed_below: Mapping[PartitionKey, int] | None = None,
    deterministic: bool = True,
    label: str = "",
    **open_options: Any,
) -> Report:
    """Check invariants 1, 2, 7 and 8 for the partitions in `acked`.

    target is an open Broker, or the path of a log directory (on fs, a RecordingFileSystem
    crash image or None for the real files) which is opened with eoslog.open(...,
    background=False, **open_options) and closed afterwards; opening errors propagate.
    Invariant 8: a copy of the same files (made before the open, for a path; of the broker's
    current files, for a Broker) is opened too and must read exactly the same.
    """
    copy: tuple[str, FileSystem | None, Callable[[], None]] | None = None
    if isinstance(target, eoslog.Broker):
        broker, owned = target, False
        path, fs = broker.path, broker.fs
    else:
        path = target
        if deterministic:
            copy = _copy_files(path, fs)
        broker, owned = open_broker(path, fs, **open_options), True
    try:
        report, reads = check_broker(
            broker, acked, missing_allowed_below=missing_allowed_below, label=label
        )
        if deterministic:
            if copy is None:
                copy = _copy_files(path, fs)
            _check_reopen_reads_the_same(copy, reads, report, label, open_options)
    finally:
        if owned:
            broker.close()
        if copy is not None:
            copy[2]()
    return report


def _check_reopen_reads_the_same(
    copy: tuple[str, FileSystem | None, Callable[[], None]],
    reads: Mapping[PartitionKey, PartitionRead],
    report: Report,
    label: str,
    open_options: Mapping[str, Any],
) -> None:
    path, fs, _ = copy
    try:
        again = open_broker(path, fs, **open_options)
    except Exception as error:  # any difference in outcome is nondeterminism
        report.add("nondeterministic", f"{label}the copy does not open: {error!r}")
        return
    try:
        scratch = Report()
        for (topic, partition), first in reads.items():
            second = read_partition(again.log(topic, partition), scratch, f"{label}copy")
            if first.fingerprint() != second.fingerprint():
                report.add(
                    "nondeterministic",
                    f"{label}{topic}-{partition}: first open reads "
                    f"[{first.log_start_offset}, {first.log_end_offset}) in "
                    f"{len(first.batches)} batches, the copy [{second.log_start_offset}, "
                    f"{second.log_end_offset}) in {len(second.batches)}",
                )
    finally:
        again.close()


# --- what a workload acknowledged ---------------------------------------------------------


class Ledger:
    """The appends a workload had acknowledged DURABLY, as check_log wants them.

    Under durability "always" every append that returned is durable; under "commit" (and
    "none") appends wait in `pending` until a flush() (or close()) returns. Call truncating()
    BEFORE truncate_to (a crash during it may remove any of those records) and set
    `floor[tp]` to the offset below which retention may have removed records.
    """

    def __init__(self, durability: str) -> None:
        self.durability = durability
        self.acked: dict[PartitionKey, list[AckedAppend]] = {}
        self.pending: dict[PartitionKey, list[AckedAppend]] = {}
        self.floor: dict[PartitionKey, int] = {}

    def add_partition(self, tp: PartitionKey) -> None:
        self.acked.setdefault(tp, [])
        self.pending.setdefault(tp, [])
        self.floor.setdefault(tp, 0)

    def appended(self, tp: PartitionKey, info: Any, values: Sequence[bytes | None]) -> None:
        entry = (int(info.base_offset), int(info.last_offset), tuple(values))
        if self.durability == "always":
            self.acked[tp].append(entry)
        else:
            self.pending[tp].append(entry)

    def delivered(self, tp: PartitionKey, offset: int, value: bytes | None) -> None:
        """A delivery callback reported the record without error: under "commit" and
        "always" that is an acknowledgement of its own (docs/reliability.md), durable at once."""
        entry = (offset, offset, (value,))
        (self.pending if self.durability == "none" else self.acked)[tp].append(entry)

    def flushed(self, tp: PartitionKey | None = None) -> None:
        for key in [tp] if tp is not None else list(self.pending):
            self.acked[key].extend(self.pending[key])
            self.pending[key].clear()

    def truncating(self, tp: PartitionKey, offset: int) -> None:
        """truncate_to(offset) removes every batch whose last offset is >= offset."""
        for entries in (self.acked[tp], self.pending[tp]):
            entries[:] = [entry for entry in entries if entry[1] < offset]

    def snapshot(self) -> tuple[dict[PartitionKey, list[AckedAppend]], dict[PartitionKey, int]]:
        return {tp: list(entries) for tp, entries in self.acked.items()}, dict(self.floor)
