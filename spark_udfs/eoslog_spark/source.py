"""The "eoslog" PySpark data source (docs/api.md "Spark"): batch scans of a log directory's segment
files, from any process, while the owner writes. The directory may be a URL (`s3://bucket/logs`,
eoslog.offline.located): each task opens it again from its ScanRange.

The driver plans with eoslog.offline (one PartitionView per partition: start and end offsets
resolved, read_committed's last stable offset and aborted transactions computed from the
files); each InputPartition carries one ScanRange, and read() decodes it in C into
pyarrow.RecordBatches in the Spark Kafka source's schema. Options follow the Spark Kafka
source: subscribe / assign / subscribePattern, isolationLevel, startingOffsets /
endingOffsets, startingTimestamp / endingTimestamp, includeHeaders, minPartitions,
maxRecordsPerPartition, failOnDataLoss (default true: a task whose planned records the owner's
retention deleted before it read them fails the query with OffsetOutOfRangeError; false: the
lost records are skipped), and eoslog's own `archive` (the path or URL `eoslog archive` copied
the log's older segments to: the directory and the archive are read as one log,
eoslog.archive_view).

Filter pushdown (PySpark >= 4.1 with spark.sql.python.filterPushdown.enabled): predicates on
partition and offset narrow the plan and are handled here; predicates on timestamp move the
start through the time index and are still evaluated by Spark (timestamps need not rise with
offsets). PySpark refuses a reader that overrides pushFilters while the setting is off, so
register() picks the reader class by the setting it finds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from eoslog import offline

SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_DDL = ", headers array<struct<key:string,value:binary>>"
PUSHDOWN_SETTING = "spark.sql.python.filterPushdown.enabled"


@dataclass(frozen=True)
class ScanOptions:
    """The options of one read, parsed once on the driver (picklable)."""

    path: str
    topics: tuple[str, ...] | None
    pattern: str | None
    assigned: tuple[tuple[str, int], ...] | None
    isolation_level: str
    starting: offline.OffsetSpec
    ending: offline.OffsetSpec
    start_timestamp: int | None
    end_timestamp: int | None
    include_headers: bool
    min_partitions: int | None
    records_per_partition_max: int | None
    fail_on_data_loss: bool
    archive: str | None = None  # where `eoslog archive` copied the older segments

    @classmethod
    def parse(cls, options: dict[str, str]) -> ScanOptions:
        """ValueError for a missing path, not exactly one of subscribe / assign /
        subscribePattern, or a malformed value."""
        lowered = {key.lower(): value for key, value in options.items()}
        path = lowered.get("path")
        if not path:
            raise ValueError('the eoslog source needs a log directory: .load("data/")')
        chosen = [key for key in ("subscribe", "assign", "subscribepattern") if key in lowered]
        if len(chosen) != 1:
            raise ValueError("give exactly one of subscribe, assign and subscribePattern")
        assigned = None
        if "assign" in lowered:
            assigned = tuple(
                (topic, int(partition))
                for topic, partitions in json.loads(lowered["assign"]).items()
                for partition in partitions
            )
        topics = None
        if "subscribe" in lowered:
            topics = tuple(t.strip() for t in lowered["subscribe"].split(",") if t.strip())
        return cls(
            path=path,
            topics=topics,
            pattern=lowered.get("subscribepattern"),
            assigned=assigned,
            isolation_level=lowered.get("isolationlevel", "read_committed"),
            starting=_offsets(lowered.get("startingoffsets")),
            ending=_offsets(lowered.get("endingoffsets")),
            start_timestamp=optional_int(lowered.get("startingtimestamp")),
            end_timestamp=optional_int(lowered.get("endingtimestamp")),
            include_headers=lowered.get("includeheaders", "false").lower() == "true",
            min_partitions=optional_int(lowered.get("minpartitions")),
            records_per_partition_max=optional_int(lowered.get("maxrecordsperpartition")),
            fail_on_data_loss=_flag(lowered.get("failondataloss", "true")),
            archive=lowered.get("archive") or None,
        )


def _offsets(text: str | None) -> offline.OffsetSpec:
    if text is None or text in ("earliest", "latest"):
        return text
    spec: dict[str, dict[int | str, int]] = json.loads(text)
    return spec


def _flag(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError(f"expected true or false, not {text!r}")
    return text.lower() == "true"


def optional_int(text: str | None) -> int | None:
    return None if text is None else int(text)


@dataclass
class Pushed:
    """What pushed-down filters narrowed: partitions kept, offsets [low, high), and the
    smallest timestamp (ms) a record may have."""

    partitions: set[int] | None = None
    offset_low: int = 0
    offset_high: int | None = None
    timestamp_low: int | None = None
    handled: list[Filter] = field(default_factory=list)


class EoslogPartition(InputPartition):
    """One ScanRange: a few numbers and the aborted transactions in it."""

    def __init__(self, scan_range: offline.ScanRange) -> None:
        super().__init__(scan_range)
        self.scan_range = scan_range


class EoslogReader(DataSourceReader):
    """Plans ScanRanges on the driver; reads one per task."""

    def __init__(self, options: ScanOptions) -> None:
        self.options = options
        self.pushed = Pushed()

    def partitions(self) -> Sequence[InputPartition]:
        ranges = plan(self.options, self.pushed)
        return [EoslogPartition(scan_range) for scan_range in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, partition)


def read_partition(options: ScanOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """One task's records: the partition's ScanRange decoded (batch and streaming reads)."""
    assert isinstance(partition, EoslogPartition), "partitions() made every partition"
    return offline.read_range(
        partition.scan_range,
        include_headers=options.include_headers,
        fail_on_data_loss=options.fail_on_data_loss,
    )


class EoslogPushdownReader(EoslogReader):
    """EoslogReader with pushFilters (only when Spark's pushdown setting is on)."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        for candidate in filters:
            if not push(self.pushed, candidate):
                yield candidate


def push(pushed: Pushed, candidate: Filter) -> bool:
    """Narrow `pushed` by one filter; True when the scan then answers it exactly (partition
    and offset predicates), False when Spark must still evaluate it."""
    column = candidate.attribute if hasattr(candidate, "attribute") else ()
    value: Any = getattr(candidate, "value", None)
    if column == ("partition",):
        if isinstance(candidate, EqualTo) and isinstance(value, int):
            wanted = {value}
        elif isinstance(candidate, In) and all(isinstance(v, int) for v in value):
            wanted = set(value)
        else:
            return False
        pushed.partitions = wanted if pushed.partitions is None else pushed.partitions & wanted
        return True
    if column == ("offset",) and isinstance(value, int):
        low, high = {
            EqualTo: (value, value + 1),
            GreaterThan: (value + 1, None),
            GreaterThanOrEqual: (value, None),
            LessThan: (0, value),
            LessThanOrEqual: (0, value + 1),
        }.get(type(candidate), (None, None))
        if low is None:
            return False
        pushed.offset_low = max(pushed.offset_low, low)
        if high is not None:
            pushed.offset_high = (
                high if pushed.offset_high is None else min(pushed.offset_high, high)
            )
        return True
    lower_bound = isinstance(candidate, GreaterThan | GreaterThanOrEqual | EqualTo)
    if column == ("timestamp",) and isinstance(value, datetime) and lower_bound:
        # A naive datetime is local time, as PySpark converts TimestampType; floor keeps
        # every record at or after it. Spark still filters the records exactly.
        milliseconds = math.floor(value.timestamp() * 1000)
        if pushed.timestamp_low is None or milliseconds > pushed.timestamp_low:
            pushed.timestamp_low = milliseconds
    return False


def plan(options: ScanOptions, pushed: Pushed) -> list[offline.ScanRange]:
    """The ranges to read: partitions selected by the options and pushed filters, offsets
    and timestamps resolved, split for minPartitions / maxRecordsPerPartition."""
    # One file system for planning: on object storage it keeps its listings and reads
    # (eoslog.fs_arrow). Each task opens options.path again from its ScanRange.
    fs, _ = offline.located(options.path, archive=options.archive)
    pairs = offline.list_partitions(
        options.path, options.topics, pattern=options.pattern, partitions=options.assigned, fs=fs
    )
    check_offsets_name_every_partition(options.starting, pairs, "startingOffsets")
    check_offsets_name_every_partition(options.ending, pairs, "endingOffsets")
    if pushed.partitions is not None:
        pairs = [pair for pair in pairs if pair[1] in pushed.partitions]
    start_timestamp = options.start_timestamp
    if pushed.timestamp_low is not None:
        start_timestamp = max(start_timestamp or pushed.timestamp_low, pushed.timestamp_low)

    def ranges(records_per_range: int | None) -> list[offline.ScanRange]:
        planned = offline.plan_ranges(
            options.path,
            pairs,
            isolation_level=options.isolation_level,
            start_offsets=options.starting,
            end_offsets=options.ending,
            start_timestamp=start_timestamp,
            end_timestamp=options.end_timestamp,
            records_per_range=records_per_range,
            fs=fs,
            archive=options.archive,
        )
        return [narrowed for r in planned if (narrowed := _narrow(r, pushed)) is not None]

    planned = ranges(options.records_per_partition_max)
    if options.min_partitions and len(planned) < options.min_partitions:
        total = sum(r.records_max for r in planned)
        per_range = max(1, total // options.min_partitions)
        if options.records_per_partition_max:
            per_range = min(per_range, options.records_per_partition_max)
        planned = ranges(per_range)
    return planned


def check_offsets_name_every_partition(
    spec: offline.OffsetSpec, pairs: Iterable[tuple[str, int]], option: str
) -> None:
    """As the Kafka source: offsets given as JSON name exactly the partitions the query reads
    (-2 / -1 for earliest / latest), so a partition left out, or one that does not exist, is an
    error rather than a silent default."""
    if not isinstance(spec, Mapping):
        return
    named = {(topic, int(partition)) for topic, offsets in spec.items() for partition in offsets}
    read = set(pairs)
    if named != read:
        raise ValueError(
            f"{option} gives specific offsets, so it must name every partition the query reads "
            f"(-1 for latest, -2 for earliest): it names {sorted(named)}, the query reads "
            f"{sorted(read)}"
        )


def _narrow(scan_range: offline.ScanRange, pushed: Pushed) -> offline.ScanRange | None:
    start = max(scan_range.start, pushed.offset_low)
    stop = (
        scan_range.stop if pushed.offset_high is None else min(scan_range.stop, pushed.offset_high)
    )
    return replace_range(scan_range, start, stop) if start < stop else None


def replace_range(scan_range: offline.ScanRange, start: int, stop: int) -> offline.ScanRange:
    return scan_range._replace(start=start, stop=stop)


class EoslogDataSource(DataSource):
    """spark.read.format("eoslog").option("subscribe", "orders").load("data/")."""

    pushdown = False

    @classmethod
    def name(cls) -> str:
        return "eoslog"

    def schema(self) -> str:
        include_headers = str(self.options.get("includeHeaders", "false")).lower() == "true"
        return SCHEMA_DDL + (HEADERS_DDL if include_headers else "")

    def reader(self, schema: Any) -> DataSourceReader:
        options = ScanOptions.parse(dict(self.options))
        return EoslogPushdownReader(options) if self.pushdown else EoslogReader(options)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        """spark.readStream.format("eoslog"): eoslog_spark.stream."""
        from eoslog_spark.stream import stream_reader

        return stream_reader(dict(self.options))


class EoslogPushdownDataSource(EoslogDataSource):
    """The same source, with a reader that accepts pushed-down filters."""

    pushdown = True


def register(spark: Any) -> None:
    """Register the "eoslog" data source with this session. Filter pushdown is used when
    the session has spark.sql.python.filterPushdown.enabled on at this call (PySpark >=
    4.1); register again after changing it."""
    enabled = str(spark.conf.get(PUSHDOWN_SETTING, "false")).lower() == "true"
    chosen = EoslogPushdownDataSource if enabled else EoslogDataSource
    spark.dataSource.register(chosen)
