"""The peers of the eoslog Spark source in bench/spark_bench.py: two PySpark data sources over
the same log directory, shipped to Spark's Python workers with SparkContext.addPyFile (with
workload.py, whose aiokafka-to-Arrow column building they share with contenders_codec.py; so
cloudpickle pickles these classes by reference and a worker's module state survives between
tasks).

- "aiokafka_segments" (the naive way to read segments in Spark): the driver lists each
  partition's segment files and takes the aborted transactions and the last stable offset from
  eoslog's PartitionView (the .txnindex reader); each task reads its partition's .log files
  whole and decodes them with aiokafka's MemoryRecords (its Cython reader when built), one
  Python object per field per record, into Arrow columns, applying the same read_committed
  filtering: batches below the last stable offset, control batches skipped, transactional
  batches of an aborted transaction dropped.
- "prebuilt_arrow" (the ingestion ceiling): each task yields the committed rows of its
  partition as pyarrow.RecordBatches already built: an Arrow IPC file written once by the
  driver, memory-mapped once per worker process and kept.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from eoslog.fs import PosixFileSystem
from eoslog.log.partition_view import PartitionView
from eoslog.record.columns import SPARK_SCHEMA
from workload import arrow_from_lists

SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
# Rows per RecordBatch a peer yields: at least what eoslog's reader yields
# (eoslog.offline.YIELD_ROWS_MIN), so the peers are not slowed by smaller batches.
ROWS_PER_BATCH = 100_000
# Kafka's batch attributes (docs/format.md §1.2).
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

# Worker-process state of "prebuilt_arrow": IPC file path -> its record batches.
_PREBUILT: dict[str, list[pa.RecordBatch]] = {}


class SegmentsPartition(InputPartition):
    """One Kafka partition: its .log files, the offset to stop at (the last stable offset)
    and its aborted transactions as (producer id, first offset, last offset) rows."""

    def __init__(
        self,
        topic: str,
        partition: int,
        files: list[str],
        stop: int,
        aborted: list[tuple[int, int, int]],
    ) -> None:
        super().__init__((topic, partition))
        self.topic = topic
        self.partition = partition
        self.files = files
        self.stop = stop
        self.aborted = aborted


def plan_segments(path: str, topic: str, partitions: int) -> list[SegmentsPartition]:
    """What the driver of the aiokafka peer plans: per partition, its segment files and the
    read_committed bounds from eoslog's PartitionView."""
    planned = []
    for partition in range(partitions):
        directory = os.path.join(path, f"{topic}-{partition}")
        files = sorted(
            os.path.join(directory, name) for name in os.listdir(directory) if name.endswith(".log")
        )
        with PartitionView(PosixFileSystem(), directory, topic, partition) as view:
            stop = view.last_stable_offset
            aborted = [
                (txn.producer_id, txn.first_offset, txn.last_offset)
                for txn in view.aborted_transactions()
            ]
        planned.append(SegmentsPartition(topic, partition, files, stop, aborted))
    return planned


class AbortedRanges:
    """Whether a transactional batch belongs to an aborted transaction: per producer id, the
    sorted [first, last] offset ranges of its aborted transactions."""

    def __init__(self, aborted: Sequence[tuple[int, int, int]]) -> None:
        self.ranges: dict[int, tuple[list[int], list[int]]] = {}
        for producer_id, first, last in sorted(aborted):
            firsts, lasts = self.ranges.setdefault(producer_id, ([], []))
            firsts.append(first)
            lasts.append(last)

    def holds(self, producer_id: int, offset: int) -> bool:
        found = self.ranges.get(producer_id)
        if found is None:
            return False
        firsts, lasts = found
        slot = bisect.bisect_right(firsts, offset) - 1
        return slot >= 0 and offset <= lasts[slot]


def committed_batches(part: SegmentsPartition) -> Iterator[Any]:
    """aiokafka's batches of one partition below its last stable offset, CRC checked, with
    control batches and the batches of aborted transactions left out."""
    from aiokafka.record.memory_records import MemoryRecords

    aborted = AbortedRanges(part.aborted)
    for name in part.files:
        with open(name, "rb") as file:
            records = MemoryRecords(file.read())
        while (batch := records.next_batch()) is not None:
            if batch.base_offset >= part.stop:
                return
            if not batch.validate_crc():
                raise ValueError(f"{name}: CRC mismatch at offset {batch.base_offset}")
            if batch.is_control_batch:
                continue
            if batch.is_transactional and aborted.holds(batch.producer_id, batch.base_offset):
                continue
            yield batch


def aiokafka_read(part: SegmentsPartition) -> Iterator[pa.RecordBatch]:
    """The committed records of one partition, decoded with aiokafka into Spark-schema Arrow
    batches of about ROWS_PER_BATCH rows."""
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    offsets: list[int] = []
    timestamps: list[int] = []
    timestamp_types: list[int] = []
    columns = (keys, values, offsets, timestamps, timestamp_types)
    for batch in committed_batches(part):
        before = len(offsets)
        for record in batch:
            offsets.append(record.offset)
            timestamps.append(record.timestamp)
            keys.append(record.key)
            values.append(record.value)
        timestamp_types += [batch.timestamp_type] * (len(offsets) - before)
        if len(offsets) >= ROWS_PER_BATCH:
            yield arrow_from_lists(*columns, part.topic, part.partition)
            for column in columns:
                column.clear()
    if offsets:
        yield arrow_from_lists(*columns, part.topic, part.partition)


class AiokafkaReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.path = options["path"]
        self.topic = options["topic"]
        self.partitions_count = int(options["partitions"])

    def partitions(self) -> Sequence[InputPartition]:
        return plan_segments(self.path, self.topic, self.partitions_count)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SegmentsPartition)
        yield from aiokafka_read(partition)


class AiokafkaSegmentsSource(DataSource):
    """spark.read.format("aiokafka_segments").option("topic", t).option("partitions", n)
    .load(log directory)."""

    @classmethod
    def name(cls) -> str:
        return "aiokafka_segments"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: Any) -> DataSourceReader:
        return AiokafkaReader(dict(self.options))


class PrebuiltPartition(InputPartition):
    def __init__(self, file: str) -> None:
        super().__init__(file)
        self.file = file


def prebuilt_batches(file: str) -> list[pa.RecordBatch]:
    """The batches of an Arrow IPC file, mapped on first use in this process and kept."""
    found = _PREBUILT.get(file)
    if found is None:
        reader = pa.ipc.open_file(pa.memory_map(file))
        found = [reader.get_batch(i) for i in range(reader.num_record_batches)]
        _PREBUILT[file] = found
    return found


class PrebuiltReader(DataSourceReader):
    def __init__(self, files: list[str]) -> None:
        self.files = files

    def partitions(self) -> Sequence[InputPartition]:
        return [PrebuiltPartition(file) for file in self.files]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, PrebuiltPartition)
        yield from prebuilt_batches(partition.file)


class PrebuiltArrowSource(DataSource):
    """spark.read.format("prebuilt_arrow").load(comma-separated Arrow IPC files)."""

    @classmethod
    def name(cls) -> str:
        return "prebuilt_arrow"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: Any) -> DataSourceReader:
        return PrebuiltReader(self.options["path"].split(","))


def write_prebuilt(table: pa.Table, file: str) -> None:
    """Write one partition's committed rows as an Arrow IPC file of ROWS_PER_BATCH batches."""
    with pa.OSFile(file, "wb") as sink, pa.ipc.new_file(sink, SPARK_SCHEMA) as writer:
        for batch in table.to_batches(max_chunksize=ROWS_PER_BATCH):
            writer.write_batch(batch)
