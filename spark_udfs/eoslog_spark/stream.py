"""The "eoslog" structured-streaming source (docs/api.md "Spark"): spark.readStream.format("eoslog")
over a log directory another process owns and writes.

Offsets are those Spark's Kafka source writes in its checkpoint, {"topic": {"0": 42}}: per
partition, the next offset to read. A micro-batch reads, per partition, [start, end) where end
is the partition's last stable offset (read_committed, the default) or log end
(read_uncommitted) when Spark asked for the batch's end, capped by maxOffsetsPerTrigger spread
over the partitions in proportion to what each has waiting. A batch is planned for exactly its
span, so the same (start, end) reads the same records after a restart: under read_committed no
transaction is open below the end, and the records a restarted query sees again are none, the
records it misses are none.

Options (as the Kafka source): subscribe / assign / subscribePattern, startingOffsets
("latest", the default, "earliest", or {"topic": {"0": 42}} with -2 / -1 for earliest / latest),
maxOffsetsPerTrigger, minOffsetsPerTrigger with maxTriggerDelay (default 15m), failOnDataLoss,
includeHeaders, isolationLevel, maxRecordsPerPartition, archive. Partitions that appear later
are read from their earliest offset. Trigger.AvailableNow reads what was there when the query
started, in batches bounded by maxOffsetsPerTrigger, then stops.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from eoslog import offline
from eoslog.errors import OffsetOutOfRangeError
from eoslog_spark.source import (
    EoslogPartition,
    ScanOptions,
    check_offsets_name_every_partition,
    optional_int,
    read_partition,
)

Offsets = dict[str, dict[str, int]]  # {"topic": {"0": 42}}: the next offset to read
Bounds = dict[tuple[str, int], tuple[int, int]]  # (log start, latest) per partition

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def duration_ms(text: str) -> int:
    """Milliseconds of a Spark duration ("15m", "30s", "500ms"; a bare number is ms)."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    if match is None or match.group(2) not in ("", *_UNITS_MS):
        raise ValueError(f"expected a duration such as 15m, 30s or 500ms, not {text!r}")
    return int(match.group(1)) * _UNITS_MS.get(match.group(2), 1)


@dataclass(frozen=True)
class StreamOptions:
    """The options of one streaming query, parsed once on the driver (picklable)."""

    scan: ScanOptions
    offsets_per_trigger_max: int | None
    offsets_per_trigger_min: int | None
    trigger_delay_max_ms: int

    @classmethod
    def parse(cls, options: dict[str, str]) -> StreamOptions:
        """ValueError for what ScanOptions.parse refuses, endingOffsets (a stream has no
        end), or a malformed limit."""
        lowered = {key.lower(): value for key, value in options.items()}
        if "endingoffsets" in lowered or "endingtimestamp" in lowered:
            raise ValueError("a streaming query has no end: endingOffsets is for batch reads")
        lowered.setdefault("startingoffsets", "latest")
        most = optional_int(lowered.get("maxoffsetspertrigger"))
        least = optional_int(lowered.get("minoffsetspertrigger"))
        for name, value in (("maxOffsetsPerTrigger", most), ("minOffsetsPerTrigger", least)):
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive, not {value}")
        return cls(
            scan=ScanOptions.parse(lowered),
            offsets_per_trigger_max=most,
            offsets_per_trigger_min=least,
            trigger_delay_max_ms=duration_ms(lowered.get("maxtriggerdelay", "15m")),
        )


def _flat(offsets: Mapping[str, Mapping[str, int]]) -> dict[tuple[str, int], int]:
    return {
        (topic, int(partition)): int(offset)
        for topic, per_partition in offsets.items()
        for partition, offset in per_partition.items()
    }


def _nested(flat: Mapping[tuple[str, int], int]) -> Offsets:
    """Spark's Kafka-source shape, topics and partitions in order."""
    nested: Offsets = {}
    for topic, partition in sorted(flat):
        nested.setdefault(topic, {})[str(partition)] = flat[(topic, partition)]
    return nested


def _spec(flat: Mapping[tuple[str, int], int]) -> dict[str, Mapping[int | str, int]]:
    """The offsets as plan_ranges takes them."""
    spec: dict[str, dict[int | str, int]] = {}
    for (topic, partition), offset in flat.items():
        spec.setdefault(topic, {})[partition] = offset
    return dict(spec)


def prorated(
    start: Mapping[tuple[str, int], int], latest: Mapping[tuple[str, int], int], limit: int
) -> dict[tuple[str, int], int]:
    """The ends after reading at most about `limit` offsets from `start` towards `latest`, the
    limit shared in proportion to what each partition has waiting; a partition with any
    waiting gets at least one, so a small limit still moves every partition."""
    waiting = {key: max(0, latest[key] - start[key]) for key in latest}
    total = sum(waiting.values())
    if total <= limit:
        return dict(latest)
    ends = {}
    for key, count in waiting.items():
        share = limit * count / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        ends[key] = min(start[key] + step, latest[key])
    return ends


class EoslogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets from the files on the driver; each micro-batch planned as ScanRanges."""

    def __init__(self, options: StreamOptions) -> None:
        self.options = options
        self.target: dict[tuple[str, int], int] | None = None  # Trigger.AvailableNow's end
        self.last_batch_ms = time.monotonic() * 1000

    def _bounds(self) -> Bounds:
        scan = self.options.scan
        fs, _ = offline.located(scan.path, archive=scan.archive)
        pairs = offline.list_partitions(
            scan.path, scan.topics, pattern=scan.pattern, partitions=scan.assigned, fs=fs
        )
        return offline.partition_bounds(
            scan.path, pairs, isolation_level=scan.isolation_level, fs=fs, archive=scan.archive
        )

    def initialOffset(self) -> Offsets:
        """startingOffsets resolved against the partitions there now."""
        spec = self.options.scan.starting
        bounds = self._bounds()
        check_offsets_name_every_partition(spec, bounds, "startingOffsets")
        starts = {}
        for (topic, partition), (log_start, latest) in bounds.items():
            wanted = offline.offset_for(spec, topic, partition, offline.LATEST)
            if wanted == offline.EARLIEST:
                starts[(topic, partition)] = log_start
            elif wanted == offline.LATEST:
                starts[(topic, partition)] = latest
            else:
                starts[(topic, partition)] = wanted
        return _nested(starts)

    def reportLatestOffset(self) -> Offsets:
        """Each partition's latest offset now, whatever the read limit (Spark shows it in the
        query's progress as latestOffset, as for the Kafka source)."""
        return _nested({key: latest for key, (_, latest) in self._bounds().items()})

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = {key: latest for key, (_, latest) in self._bounds().items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.offsets_per_trigger_max is not None:
            return ReadMaxRows(self.options.offsets_per_trigger_max)
        if self.options.offsets_per_trigger_min is not None:
            return ReadMinRows(self.options.offsets_per_trigger_min)
        return ReadAllAvailable()

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        """Each partition's end for the next batch: its latest (capped at the AvailableNow
        target), no more than maxOffsetsPerTrigger in all, or `start` itself while fewer than
        minOffsetsPerTrigger wait and maxTriggerDelay has not passed."""
        bounds = self._bounds()
        begun = _flat(start)
        # A partition that appeared since the query started is read from its earliest.
        begun.update({key: low for key, (low, _) in bounds.items() if key not in begun})
        latest = {key: max(begun[key], high) for key, (_, high) in bounds.items()}
        if self.target is not None:
            target = self.target
            latest = {
                key: max(begun[key], min(high, target.get(key, begun[key])))
                for key, high in latest.items()
            }
        if not isinstance(limit, ReadAllAvailable):
            least = self.options.offsets_per_trigger_min
            if least is not None and self.target is None:
                waiting = sum(latest[key] - begun[key] for key in latest)
                waited_ms = time.monotonic() * 1000 - self.last_batch_ms
                if waiting < least and waited_ms < self.options.trigger_delay_max_ms:
                    return start
            most = self.options.offsets_per_trigger_max
            if most is not None:
                latest = prorated(begun, latest, most)
        if latest != begun:
            self.last_batch_ms = time.monotonic() * 1000
        return _nested(latest)

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        """The ScanRanges of [start, end) per partition; a partition missing from start began
        at its earliest. A start the owner's retention deleted: OffsetOutOfRangeError with
        failOnDataLoss, else the lost offsets are skipped."""
        scan = self.options.scan
        begun, ended = _flat(start), _flat(end)
        spans = {
            key: (begun.get(key, offline.EARLIEST), stop)
            for key, stop in ended.items()
            if begun.get(key, -1) < stop
        }
        if not spans:
            return []
        bounds = offline.partition_bounds(
            scan.path, sorted(spans), isolation_level=scan.isolation_level, archive=scan.archive
        )
        for key, (low, _) in spans.items():
            log_start = bounds[key][0]
            if scan.fail_on_data_loss and 0 <= low < log_start:
                raise OffsetOutOfRangeError(
                    f"{key[0]}-{key[1]}: offsets {low} to {log_start - 1} were deleted by "
                    "retention before this query read them (failOnDataLoss=false skips them)"
                )
        ranges = offline.plan_ranges(
            scan.path,
            sorted(spans),
            isolation_level=scan.isolation_level,
            start_offsets=_spec({key: low for key, (low, _) in spans.items()}),
            end_offsets=_spec({key: stop for key, (_, stop) in spans.items()}),
            records_per_range=scan.records_per_partition_max,
            archive=scan.archive,
        )
        return [EoslogPartition(scan_range) for scan_range in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options.scan, partition)

    def commit(self, end: Offsets) -> None:
        """Nothing to release: the log keeps its records by its own retention."""


def stream_reader(options: dict[str, str]) -> EoslogStreamReader:
    return EoslogStreamReader(StreamOptions.parse(options))


__all__ = ["EoslogStreamReader", "StreamOptions", "duration_ms", "prorated", "stream_reader"]
