"""The "eoslog" Spark data source (API.md "Spark"): its DataFrame equals the embedded Consumer's
view record for record, in Spark's Kafka-source schema, with pushdown off and on."""

from __future__ import annotations

import json
import os
import sys

import pyarrow as pa
import pytest

import eoslog
import scanlog

pyspark = pytest.importorskip("pyspark", reason="pyspark is in the test extra")
pytestmark = pytest.mark.spark

SEED = int(os.environ.get("EOSLOG_SCAN_SEED", "11"))


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    from pyspark.sql import SparkSession

    # Python workers must import the installed eoslog: run them on this interpreter.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    import eoslog_spark

    eoslog_spark.register(session)
    yield session
    session.stop()


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


def test_decode_batches_udf_decodes_raw_segment_bytes(owned) -> None:  # type: ignore[no-untyped-def]
    """The mapInArrow function over a binary column of segment files (as binaryFile reads
    them; Spark's mapInArrow itself needs pandas, so the function is driven directly)."""
    import eoslog_spark

    path, _ = owned
    directory = os.path.join(path, f"{scanlog.TOPIC}-1")
    names = sorted(name for name in os.listdir(directory) if name.endswith(".log"))
    contents = []
    for name in names:
        with open(os.path.join(directory, name), "rb") as file:
            contents.append(file.read())
    raw = pa.record_batch([pa.array(contents, pa.binary())], names=["content"])
    got = pa.Table.from_batches(
        list(
            eoslog_spark.decode_batches(
                iter([raw]), topic=scanlog.TOPIC, partition=1, include_headers=True
            )
        )
    )
    scanned = eoslog.scan(
        path,
        partitions=[(scanlog.TOPIC, 1)],
        isolation_level="read_uncommitted",
        include_headers=True,
    )
    want = pa.Table.from_batches(list(scanned))
    assert got.equals(want)
    values = eoslog_spark.header_value(got.column("headers"), "trace").to_pylist()
    expected = [
        None if headers is None else dict((h["key"], h["value"]) for h in headers).get("trace")
        for headers in got.column("headers").to_pylist()
    ]
    assert values == expected
    assert any(value is not None for value in values)
