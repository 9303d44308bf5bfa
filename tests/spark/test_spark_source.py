"""The "eoslog" Spark data source (docs/api.md "Spark"): its DataFrame equals the embedded
Consumer's view record for record, in Spark's Kafka-source schema, with pushdown off and on."""

from __future__ import annotations

import json
import os
import pathlib

import pyarrow as pa
import pytest

import eoslog
from tests.support import scanlog

pyspark = pytest.importorskip("pyspark", reason="pyspark is in the test extra")
pytestmark = pytest.mark.spark

SEED = int(os.environ.get("EOSLOG_SCAN_SEED", "11"))


@pytest.fixture(scope="module")
def owned(tmp_path_factory):  # type: ignore[no-untyped-def]
    print(f"seed {SEED} (EOSLOG_SCAN_SEED replays)")
    path = str(tmp_path_factory.mktemp("spark-log"))
    broker = eoslog.open(path, durability="none")
    scanlog.fill(broker, SEED)
    yield path, broker
    broker.close()


def _rows(table: pa.Table) -> list[dict[str, object]]:
    """The rows without timestamps (compared on their own), in (partition, offset) order."""
    rows = table.drop_columns(["timestamp"]).to_pylist()
    return sorted(rows, key=lambda row: (row["partition"], row["offset"]))


def _frame_rows(frame) -> list[dict[str, object]]:  # type: ignore[no-untyped-def]
    return _rows(frame.toArrow())


def test_read_committed_frame_equals_consumer(spark, owned) -> None:  # type: ignore[no-untyped-def]
    path, broker = owned
    want = scanlog.consumer_view(broker)
    frame = (
        spark.read.format("eoslog")
        .option("subscribe", scanlog.TOPIC)
        .option("maxRecordsPerPartition", "60")
        .load(path)
    )
    got = frame.toArrow()
    assert got.num_rows == want.num_rows > 0
    assert _rows(got) == _rows(want)
    assert sorted(got.column("timestamp").to_pylist()) == sorted(
        want.column("timestamp").to_pylist()
    )


def test_every_column_type_matches_spark_kafka_schema(spark, owned) -> None:  # type: ignore[no-untyped-def]
    path, broker = owned
    frame = (
        spark.read.format("eoslog")
        .option("assign", json.dumps({scanlog.TOPIC: [0]}))
        .option("includeHeaders", "true")
        .load(path)
    )
    assert frame.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    want = scanlog.consumer_view(broker, include_headers=True)
    want = want.filter(pa.compute.equal(want.column("partition"), 0))
    got = frame.orderBy("offset").toArrow()
    assert got.column("headers").to_pylist() == want.column("headers").to_pylist()
    assert got.column("offset").to_pylist() == want.column("offset").to_pylist()


def test_offset_options_equal_consumer_from_those_offsets(spark, owned) -> None:  # type: ignore[no-untyped-def]
    path, broker = owned
    starts = {p: broker.log(scanlog.TOPIC, p).log_end_offset // 2 for p in range(3)}
    spec = json.dumps({scanlog.TOPIC: {str(p): o for p, o in starts.items()}})
    frame = (
        spark.read.format("eoslog")
        .option("subscribePattern", "ord.*")
        .option("startingOffsets", spec)
        .option("endingOffsets", "latest")
        .option("minPartitions", "5")
        .load(path)
    )
    assert _frame_rows(frame) == _rows(scanlog.consumer_view(broker, start=starts))


def test_pushed_down_filters_give_the_same_rows_as_spark_filtering(spark, owned) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    import eoslog_spark

    path, _ = owned

    def query():  # type: ignore[no-untyped-def]
        frame = spark.read.format("eoslog").option("subscribe", scanlog.TOPIC).load(path)
        return frame.where((F.col("partition") == 1) & (F.col("offset") >= 20)).where(
            F.col("offset") < 90
        )

    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    eoslog_spark.register(spark)
    without = _frame_rows(query())
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    eoslog_spark.register(spark)
    try:
        pushed = _frame_rows(query())
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
        eoslog_spark.register(spark)
    assert without == pushed
    assert len(pushed) > 0


def test_decode_batches_in_map_in_arrow_equals_scan(spark, owned) -> None:  # type: ignore[no-untyped-def]
    """decode_batches as a user runs it: segment files read with binaryFile, decoded by
    DataFrame.mapInArrow in Spark's Python workers, equal eoslog.scan read_uncommitted
    (decode_batches sees raw batches: it keeps aborted records and drops control ones)."""
    import eoslog_spark
    from eoslog_spark.source import HEADERS_DDL, SCHEMA_DDL

    path, _ = owned
    topic = scanlog.TOPIC  # a local: the function is pickled to Spark's workers by value
    directory = os.path.join(path, f"{topic}-1")

    def decode(batches):  # type: ignore[no-untyped-def]
        return eoslog_spark.decode_batches(batches, topic=topic, partition=1, include_headers=True)

    files = spark.read.format("binaryFile").option("pathGlobFilter", "*.log").load(directory)
    assert files.count() > 1  # several segments, so several cells
    decoded = files.select("content").mapInArrow(decode, SCHEMA_DDL + HEADERS_DDL)
    scanned = eoslog.scan(
        path,
        partitions=[(scanlog.TOPIC, 1)],
        isolation_level="read_uncommitted",
        include_headers=True,
    )
    want = pa.Table.from_batches(list(scanned))
    got = decoded.orderBy("offset").toArrow()
    assert got.num_rows == want.num_rows > 0
    assert _rows(got) == _rows(want)
    assert got.column("timestamp").to_pylist() == want.column("timestamp").to_pylist()
    assert got.column("headers").to_pylist() == want.column("headers").to_pylist()


def test_header_value_as_arrow_udf_equals_first_matching_header(spark, owned) -> None:  # type: ignore[no-untyped-def]
    """header_value inside an arrow_udf over the source's headers column: per record the
    value of its first header named "trace", null when it has none."""
    from pyspark.sql.functions import arrow_udf

    import eoslog_spark

    path, _ = owned

    @arrow_udf("binary")  # type: ignore[misc]
    def trace(headers: pa.Array) -> pa.Array:
        return eoslog_spark.header_value(headers, "trace")

    frame = (
        spark.read.format("eoslog")
        .option("subscribe", scanlog.TOPIC)
        .option("includeHeaders", "true")
        .load(path)
    )
    got = frame.select("partition", "offset", "headers", trace("headers").alias("trace"))
    rows = got.toArrow().to_pylist()
    want = pa.Table.from_batches(list(eoslog.scan(path, [scanlog.TOPIC], include_headers=True)))
    assert len(rows) == want.num_rows > 0
    for row in rows:
        first = None
        for header in row["headers"] or []:
            if header["key"] == "trace":
                first = header["value"]
                break
        assert row["trace"] == first, row
    assert any(row["trace"] is not None for row in rows)
    assert any(row["trace"] is None for row in rows)

    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    made = pa.table(
        {
            "headers": pa.array(
                [
                    [("trace", b"first"), ("trace", b"second")],
                    None,
                    [],
                    [("other", b"x"), ("trace", None), ("trace", b"late")],
                    [("other", b"y")],
                ],
                pa.list_(header),
            )
        }
    )
    picked = spark.createDataFrame(made).select(trace("headers").alias("trace")).toArrow()
    assert picked.column("trace").to_pylist() == [b"first", None, None, None, None]


@pytest.mark.parametrize("option", ["startingOffsets", "endingOffsets"])
@pytest.mark.parametrize("named", [[0, 1], [0, 1, 2, 3]])
def test_json_offsets_must_name_exactly_the_partitions_read(owned, option, named) -> None:  # type: ignore[no-untyped-def]
    """As the Kafka source: a partition left out of the JSON, or one the topic does not have,
    fails the planning instead of being read from a default."""
    from eoslog_spark.source import EoslogDataSource

    path, _ = owned
    spec = json.dumps(
        {scanlog.TOPIC: {str(p): -2 if option == "startingOffsets" else -1 for p in named}}
    )
    options = {"path": path, "subscribe": scanlog.TOPIC, option: spec}
    with pytest.raises(ValueError, match=f"{option} gives specific offsets, so it must name every"):
        EoslogDataSource(options).reader(None).partitions()
    every = {scanlog.TOPIC: {str(p): -2 if option == "startingOffsets" else -1 for p in range(3)}}
    options[option] = json.dumps(every)
    assert EoslogDataSource(options).reader(None).partitions()


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_fail_on_data_loss_when_retention_deletes_planned_segments(
    tmp_path: pathlib.Path, fail_on_data_loss: str
) -> None:
    """What a task does when the owner's retention deleted segments after the driver planned
    them: failOnDataLoss true (the default) fails it with OffsetOutOfRangeError, false skips
    the lost records (the reader's partitions() and read() as Spark calls them)."""
    from eoslog.errors import OffsetOutOfRangeError
    from eoslog_spark.source import EoslogDataSource, EoslogReader

    retained = scanlog.RetainedLog(str(tmp_path))
    try:
        options = {"path": str(tmp_path), "subscribe": retained.TOPIC}
        if fail_on_data_loss == "false":
            options["failOnDataLoss"] = "false"
        reader = EoslogDataSource(options).reader(None)
        assert isinstance(reader, EoslogReader)
        (planned,) = reader.partitions()
        log_start = retained.expire()
        if fail_on_data_loss == "true":
            with pytest.raises(OffsetOutOfRangeError, match="failOnDataLoss=false"):
                list(reader.read(planned))
        else:
            got = pa.Table.from_batches(list(reader.read(planned)))
            assert got.column("offset").to_pylist() == list(range(log_start, retained.RECORDS))
    finally:
        retained.broker.close()
