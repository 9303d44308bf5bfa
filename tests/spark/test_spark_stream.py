"""The "eoslog" streaming source (docs/api.md "Spark"): spark.readStream.format("eoslog") reads
every committed record exactly once across restarts, in Spark's Kafka-source offsets."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time

import pyarrow as pa
import pytest

import eoslog
from tests.support import scanlog

pyspark = pytest.importorskip("pyspark", reason="pyspark is in the test extra")
pytestmark = pytest.mark.spark

DEADLINE_S = 180

# The writer owns the log in its own process: transactions of 1 to 6 records over the
# partitions, every third aborted, until a line on stdin tells it to stop; it then prints the
# number of transactions it wrote.
WRITER = """
import random, sys, threading
import eoslog
path, topic, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
broker = eoslog.open(path, durability="none")
broker.create_topic(topic, num_partitions=partitions, config={"segment.bytes": 4096})
producer = broker.producer({"transactional.id": "stream-writer"})
producer.init_transactions()
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
print("ready", flush=True)
rng = random.Random(5)
number = 0
while not stop.is_set():
    producer.begin_transaction()
    for index in range(rng.randint(1, 6)):
        producer.produce(
            topic, value=b"%d-%d" % (number, index), key=b"k%d" % index,
            partition=rng.randrange(partitions),
        )
        producer.flush()  # in the log while the transaction is still open
    if number % 3 == 0:
        producer.abort_transaction()
    else:
        producer.commit_transaction()
    number += 1
broker.close()
print(number, flush=True)
"""


def _rows(table: pa.Table) -> list[dict[str, object]]:
    rows = table.select(["key", "value", "topic", "partition", "offset"]).to_pylist()
    return sorted(rows, key=lambda row: (row["partition"], row["offset"]))


def _stream(spark, path: str, **options: str):  # type: ignore[no-untyped-def]
    reader = spark.readStream.format("eoslog").option("subscribe", scanlog.TOPIC)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load(path)


def _run_available_now(frame, sink: pathlib.Path, checkpoint: pathlib.Path):  # type: ignore[no-untyped-def]
    query = (
        frame.writeStream.format("parquet")
        .option("path", str(sink))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(DEADLINE_S), "the AvailableNow query did not finish"
    assert query.exception() is None
    return query


def _sink_rows(spark, sink: pathlib.Path) -> list[dict[str, object]]:  # type: ignore[no-untyped-def]
    # spark.read honours the file sink's _spark_metadata: only files of committed batches.
    return _rows(spark.read.parquet(str(sink)).toArrow())


def _offsets_file(checkpoint: pathlib.Path) -> dict[str, dict[str, int]]:
    """The source offsets of the last batch in the checkpoint, as Spark wrote them."""
    names = [item for item in (checkpoint / "offsets").iterdir() if item.name.isdigit()]
    files = sorted(names, key=lambda item: int(item.name))
    lines = files[-1].read_text().splitlines()
    assert lines[0] == "v1"
    offsets: dict[str, dict[str, int]] = json.loads(lines[2])
    return offsets


def _last_stable(path: str) -> dict[str, dict[str, int]]:
    from eoslog import offline

    pairs = [(scanlog.TOPIC, partition) for partition in range(scanlog.PARTITIONS)]
    bounds = offline.partition_bounds(path, pairs)
    return {scanlog.TOPIC: {str(p): bounds[(t, p)][1] for t, p in pairs}}


@pytest.fixture(scope="module")
def filled(tmp_path_factory):  # type: ignore[no-untyped-def]
    """scanlog's workload (aborted transactions, one left open at the tail) and the embedded
    Consumer's read_committed view of it."""
    path = str(tmp_path_factory.mktemp("stream-log"))
    broker = eoslog.open(path, durability="none")
    scanlog.fill(broker, 7)
    yield path, scanlog.consumer_view(broker)
    broker.close()


def test_available_now_reads_exactly_the_committed_records(spark, filled, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path, want = filled
    frame = _stream(spark, path, startingOffsets="earliest")
    _run_available_now(frame, tmp_path / "sink", tmp_path / "checkpoint")
    got = _sink_rows(spark, tmp_path / "sink")
    assert len(got) == want.num_rows > 0
    assert got == _rows(want)


def test_checkpoint_offsets_are_the_kafka_sources_ending_at_the_last_stable_offset(
    spark, filled, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    path, _ = filled
    frame = _stream(spark, path, startingOffsets="earliest")
    _run_available_now(frame, tmp_path / "sink", tmp_path / "checkpoint")
    # The open transaction at partition 0's tail holds the end there, below the log end.
    assert _offsets_file(tmp_path / "checkpoint") == _last_stable(path)


def test_max_offsets_per_trigger_bounds_each_batch(spark, filled, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path, want = filled
    frame = _stream(spark, path, startingOffsets="earliest", maxOffsetsPerTrigger="50")
    query = _run_available_now(frame, tmp_path / "sink", tmp_path / "checkpoint")
    sizes = [progress.numInputRows for progress in query.recentProgress]
    assert sum(sizes) == want.num_rows
    assert max(sizes) <= 50
    assert len([size for size in sizes if size]) >= want.num_rows // 50
    assert _sink_rows(spark, tmp_path / "sink") == _rows(want)


def test_starting_offsets_latest_reads_nothing_already_there(spark, filled, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path, _ = filled
    _run_available_now(_stream(spark, path), tmp_path / "sink", tmp_path / "checkpoint")
    assert _sink_rows(spark, tmp_path / "sink") == []


def test_ending_offsets_is_refused_for_a_stream(spark, filled, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path, _ = filled
    frame = _stream(spark, path, endingOffsets="latest")
    with pytest.raises(Exception, match="endingOffsets"):
        _run_available_now(frame, tmp_path / "sink", tmp_path / "checkpoint")


def _wait_for_rows(query, seen: int) -> None:  # type: ignore[no-untyped-def]
    """Until the running query has committed a batch with rows beyond `seen` batches."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        assert query.exception() is None
        progress = query.recentProgress
        if any(item.numInputRows for item in progress[seen:]):
            return
        query.awaitTermination(0.2)
    raise AssertionError("the query read nothing new before the deadline")


def test_restarted_query_holds_every_committed_record_exactly_once(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "log")
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, path, scanlog.TOPIC, str(scanlog.PARTITIONS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdin is not None and writer.stdout is not None
    try:
        assert writer.stdout.readline().strip() == "ready"
        sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
        for _ in range(3):
            query = (
                _stream(spark, path, startingOffsets="earliest")
                .writeStream.format("parquet")
                .option("path", str(sink))
                .option("checkpointLocation", str(checkpoint))
                .start()
            )
            _wait_for_rows(query, 0)
            query.stop()  # while the writer is still writing
        writer.stdin.write("stop\n")
        writer.stdin.flush()
        transactions = int(writer.stdout.readline())
        assert writer.wait(DEADLINE_S) == 0
    finally:
        writer.kill()
        writer.wait()
    assert transactions > 0
    _run_available_now(_stream(spark, path, startingOffsets="earliest"), sink, checkpoint)
    broker = eoslog.open(path, durability="none")
    try:
        want = scanlog.consumer_view(broker)
    finally:
        broker.close()
    got = _sink_rows(spark, sink)
    assert len(got) == want.num_rows > 0
    assert got == _rows(want)
    assert {row["value"].split(b"-")[0] for row in got} == {
        b"%d" % number for number in range(transactions) if number % 3
    }


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_fail_on_data_loss_when_retention_deleted_offsets_the_stream_had_not_read(
    tmp_path: pathlib.Path, fail_on_data_loss: str
) -> None:
    """A batch starting below the log start (retention ran while the query was behind):
    failOnDataLoss true fails it with OffsetOutOfRangeError, false reads from the log start
    (the stream reader's methods as Spark calls them)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from eoslog.errors import OffsetOutOfRangeError
    from eoslog_spark.source import EoslogDataSource

    retained = scanlog.RetainedLog(str(tmp_path))
    try:
        options = {"path": str(tmp_path), "subscribe": retained.TOPIC}
        options |= {"startingOffsets": "earliest", "failOnDataLoss": fail_on_data_loss}
        reader = EoslogDataSource(options).streamReader(None)
        start = reader.initialOffset()
        assert start == {retained.TOPIC: {"0": 0}}
        end = reader.latestOffset(start, ReadAllAvailable())
        assert end == {retained.TOPIC: {"0": retained.RECORDS}}
        log_start = retained.expire()
        if fail_on_data_loss == "true":
            with pytest.raises(OffsetOutOfRangeError, match="failOnDataLoss=false"):
                reader.partitions(start, end)
        else:
            (planned,) = reader.partitions(start, end)
            got = pa.Table.from_batches(list(reader.read(planned)))
            assert got.column("offset").to_pylist() == list(range(log_start, retained.RECORDS))
    finally:
        retained.broker.close()


def test_max_offsets_per_trigger_is_shared_in_proportion_to_what_waits() -> None:
    from eoslog_spark.stream import prorated

    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 7}
    latest = {("t", 0): 300, ("t", 1): 200, ("t", 2): 8}
    # 401 waiting, 100 allowed: 300/401 and 100/401 of it, and at least one for partition 2.
    assert prorated(start, latest, 100) == {("t", 0): 74, ("t", 1): 124, ("t", 2): 8}
    assert prorated(start, latest, 401) == latest


@pytest.mark.parametrize(
    ("option", "value"),
    [("maxOffsetsPerTrigger", "0"), ("minOffsetsPerTrigger", "-1"), ("maxTriggerDelay", "soon")],
)
def test_malformed_trigger_limits_are_refused(option: str, value: str) -> None:
    from eoslog_spark.stream import StreamOptions

    with pytest.raises(ValueError, match=option if option != "maxTriggerDelay" else "duration"):
        StreamOptions.parse({"path": "data", "subscribe": "orders", option: value})


@pytest.mark.parametrize(("delay", "moves"), [("1h", False), ("0ms", True)])
def test_min_offsets_per_trigger_waits_until_max_trigger_delay(filled, delay, moves) -> None:  # type: ignore[no-untyped-def]
    """Fewer offsets waiting than minOffsetsPerTrigger: no new batch (the end is the start)
    until maxTriggerDelay has passed since the last batch."""
    from pyspark.sql.streaming.datasource import ReadMinRows

    from eoslog_spark.source import EoslogDataSource

    path, _ = filled
    options = {"path": path, "subscribe": scanlog.TOPIC, "startingOffsets": "earliest"}
    options |= {"minOffsetsPerTrigger": "1000000", "maxTriggerDelay": delay}
    reader = EoslogDataSource(options).streamReader(None)
    assert reader.getDefaultReadLimit() == ReadMinRows(1_000_000)
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert (end == _last_stable(path)) is moves
    assert (end == start) is not moves


def test_starting_offsets_json_must_name_every_partition_of_the_stream(filled) -> None:  # type: ignore[no-untyped-def]
    from eoslog_spark.source import EoslogDataSource

    path, _ = filled
    partial = json.dumps({scanlog.TOPIC: {"0": 0}})
    options = {"path": path, "subscribe": scanlog.TOPIC, "startingOffsets": partial}
    with pytest.raises(ValueError, match="startingOffsets gives specific offsets"):
        EoslogDataSource(options).streamReader(None).initialOffset()
    every = {scanlog.TOPIC: {str(p): 1 for p in range(scanlog.PARTITIONS)}}
    options["startingOffsets"] = json.dumps(every)
    assert EoslogDataSource(options).streamReader(None).initialOffset() == every


def test_report_latest_offset_is_each_partitions_end_whatever_the_read_limit(filled) -> None:  # type: ignore[no-untyped-def]
    from eoslog_spark.source import EoslogDataSource

    path, _ = filled
    options = {"path": path, "subscribe": scanlog.TOPIC, "startingOffsets": "earliest"}
    reader = EoslogDataSource(options | {"maxOffsetsPerTrigger": "1"}).streamReader(None)
    start = reader.initialOffset()
    assert reader.latestOffset(start, reader.getDefaultReadLimit()) != _last_stable(path)
    assert reader.reportLatestOffset() == _last_stable(path)


def test_a_batch_ends_before_an_open_transaction_whose_records_come_once_it_commits(
    tmp_path: pathlib.Path,
) -> None:
    """read_committed: the first batch ends at the open transaction's first offset (a record
    written after it waits too); once the transaction commits, the next batch holds its
    records and the one after, so no record is missed or read twice."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from eoslog_spark.source import EoslogDataSource

    broker = eoslog.open(str(tmp_path), durability="none")
    try:
        txn, _ = scanlog.open_transaction_between(broker, "t")
        options = {"path": str(tmp_path), "subscribe": "t", "startingOffsets": "earliest"}
        reader = EoslogDataSource(options).streamReader(None)

        def batch(start):  # type: ignore[no-untyped-def]
            end = reader.latestOffset(start, ReadAllAvailable())
            pieces = [b for p in reader.partitions(start, end) for b in reader.read(p)]
            return end, pa.Table.from_batches(pieces, schema=pieces[0].schema) if pieces else None

        first_end, first = batch(reader.initialOffset())
        assert first_end == {"t": {"0": 1}}
        assert first.column("value").to_pylist() == [b"before"]
        txn.commit_transaction()
        second_end, second = batch(first_end)
        assert second.column("value").to_pylist() == [b"inside", b"after"]
        assert second_end == {"t": {"0": 4}}  # past the commit marker
    finally:
        broker.close()
