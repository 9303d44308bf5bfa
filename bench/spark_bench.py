"""Measure the eoslog Spark data source against the naive way to read segments in Spark and
against Spark's Python-source ingestion ceiling, in one run, and write bench/RESULTS-spark.md
(the Spark row of docs/bench.md's targets).

    python bench/spark_bench.py [--records N] [--scale-records M] [--rounds R]
        [--scale-rounds S] [--partitions P] [--plan-records K] [--tmp DIR] [--quick]

The read_committed variant of the standard workload (workload.write_transactions, a third of
the transactions aborted, over P partitions) at two sizes, N and M records, read in one
SparkSession (local[2]) by `count()` and `sum(length(value))` over three sources: the eoslog
data source, aiokafka-decoded segments and prebuilt Arrow (spark_sources.py), every source
checked by aggregates. Also timed: the driver's planning of a read_committed scan (the on-disk
last stable offset), with and without snapshots and over a large active segment
(spark_scale.py), and scans of the N-record log from object storage against the local disk.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path as FilePath
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(FilePath(__file__).resolve().parent))

import eoslog
import harness
import prose
from contenders_spark import check_committed, spark_contenders
from eoslog import offline
from eoslog.fs import PosixFileSystem
from eoslog.log.partition_view import PartitionView
from harness import Runs, Target, median_spread
from report import BENCH_DIR, Report, Section
from scenarios import (
    SPARK,
    SPARK_ABORT_EVERY,
    SPARK_AIOKAFKA,
    SPARK_EOSLOG,
    SPARK_PLAN_REPEATS,
    SPARK_PREBUILT,
    SPARK_QUERIES,
    SPARK_SEGMENT_BYTES,
    SPARK_SOURCES,
    SPARK_TARGETS,
    spark_name,
    spark_targets,
)
from spark_scale import planning_section, storage_section
from workload import BATCH_RECORDS, READ_TOPIC, VALUE_BYTES, Committed, write_transactions

PACKAGES = ("eoslog", "pyspark", "aiokafka", "pyarrow")


def write_prebuilt(path: str, committed: Committed, root: str) -> list[str]:
    """One Arrow IPC file per partition holding its committed rows (built with eoslog.scan,
    checked against the records committed)."""
    import spark_sources

    files = []
    for partition in range(len(committed.offsets)):
        table = pa.Table.from_batches(
            list(eoslog.scan(path, partitions=[(READ_TOPIC, partition)])),
            schema=offline.arrow_schema(),
        )
        check_committed(table, committed, partition, "prebuilt")
        file = os.path.join(root, f"prebuilt-{partition}.arrow")
        spark_sources.write_prebuilt(table, file)
        files.append(file)
    return files


def start_spark() -> Any:
    from pyspark.sql import SparkSession

    import eoslog_spark
    import spark_sources

    # Python workers must import the installed eoslog: run them on this interpreter.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("eoslog-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    for module in ("workload.py", "spark_sources.py"):
        session.sparkContext.addPyFile(str(BENCH_DIR / module))
    eoslog_spark.register(session)
    session.dataSource.register(spark_sources.AiokafkaSegmentsSource)
    session.dataSource.register(spark_sources.PrebuiltArrowSource)
    return session


def frames(spark: Any, path: str, partitions: int, prebuilt: list[str]) -> dict[str, Any]:
    """Per source, a fresh DataFrame of the topic."""
    return {
        SPARK_EOSLOG: lambda: (
            spark.read.format("eoslog").option("subscribe", READ_TOPIC).load(path)
        ),
        SPARK_AIOKAFKA: lambda: (
            spark.read.format("aiokafka_segments")
            .option("topic", READ_TOPIC)
            .option("partitions", str(partitions))
            .load(path)
        ),
        SPARK_PREBUILT: lambda: spark.read.format("prebuilt_arrow").load(",".join(prebuilt)),
    }


def scale_path(args: argparse.Namespace) -> str:
    """The docs/bench.md row of the larger size."""
    return (
        f"Spark scan at {args.scale_records / 1e6:g} M records "
        f"({args.partitions} partitions, local[2])"
    )


def spark_section(
    args: argparse.Namespace, committed: Committed, runs: Runs, targets: list[Target]
) -> Section:
    """The rates and ratios at one size, and the rows of its targets."""
    n = committed.committed
    rows = []
    cells = []
    for query in SPARK_QUERIES:
        names = [spark_name(query, source) for source in SPARK_SOURCES]
        rates = harness.rate_rows(runs, names, n, harness.ms0)
        rows += [
            [query, source, *row[1:]] for source, row in zip(SPARK_SOURCES, rates, strict=True)
        ]
        ours, aiokafka, prebuilt = names
        ceiling = prose.SPARK_CEILING_RATIO.format(
            query=query, prebuilt=SPARK_PREBUILT, aiokafka=SPARK_AIOKAFKA
        )
        cells += harness.ratio_rows(
            runs,
            [
                (f"{query}: eoslog ÷ {SPARK_AIOKAFKA}", ours, aiokafka, "×"),
                (f"{query}: eoslog ÷ {SPARK_PREBUILT}", ours, prebuilt, "%"),
                (ceiling, prebuilt, aiokafka, "×"),
            ],
        )
    header = ["query", "contender", "median committed rows/s", "min – max", "median ms/run"]
    lines = [
        prose.SPARK_SCANS.format(
            records=committed.records,
            value_bytes=VALUE_BYTES,
            transactions=committed.transactions,
            txn_records=BATCH_RECORDS,
            aborted=committed.aborted,
            abort_every=SPARK_ABORT_EVERY,
            partitions=args.partitions,
            segments=committed.segments,
            segment_mib=SPARK_SEGMENT_BYTES >> 20,
            committed=n,
        ),
        "",
        *harness.table(header, rows, left=2),
        "",
        *harness.table(["ratio (median of per-round ratios; min – max)", "value"], cells),
    ]
    title = f"{prose.SPARK_SCANS_TITLE} at {committed.records:,} records"
    return Section(title, lines, [t.of(runs) for t in targets])


def trend_section(measured: list[tuple[Committed, Runs]]) -> Section:
    """Each ratio of the Spark sections, one column per size."""
    labels = []
    for query in SPARK_QUERIES:
        ours = spark_name(query, SPARK_EOSLOG)
        labels += [
            (f"{query}: eoslog ÷ {SPARK_AIOKAFKA}", ours, spark_name(query, SPARK_AIOKAFKA), "×"),
            (f"{query}: eoslog ÷ {SPARK_PREBUILT}", ours, spark_name(query, SPARK_PREBUILT), "%"),
        ]
    columns = [harness.ratio_rows(runs, labels) for _, runs in measured]
    rows = [[label[0], *(column[i][1] for column in columns)] for i, label in enumerate(labels)]
    header = ["ratio", *(f"{committed.records:,} records" for committed, _ in measured)]
    return Section(prose.SPARK_TREND_TITLE, [prose.SPARK_TREND, "", *harness.table(header, rows)])


# --- the on-disk LSO ------------------------------------------------------------------------


def move_snapshots(path: str, partitions: int, source: str, target: str) -> int:
    """Move every producer snapshot of the partitions from `source` (a partition directory
    when "", else a directory under `target`'s parent) to `target`; how many."""
    moved = 0
    for partition in range(partitions):
        directory = os.path.join(path, f"{READ_TOPIC}-{partition}")
        here = os.path.join(source, str(partition)) if source else directory
        there = os.path.join(target, str(partition)) if target else directory
        os.makedirs(there, exist_ok=True)
        for name in os.listdir(here):
            if name.endswith(".snapshot"):
                os.rename(os.path.join(here, name), os.path.join(there, name))
                moved += 1
    return moved


def measure_lso(
    args: argparse.Namespace, path: str, committed: Committed, root: str, scan_ms: float
) -> Section:
    partitions = args.partitions

    def open_views(_: object) -> None:
        for partition in range(partitions):
            directory = os.path.join(path, f"{READ_TOPIC}-{partition}")
            PartitionView(PosixFileSystem(), directory, READ_TOPIC, partition).close()

    def plan_scan(_: object) -> None:
        ranges = offline.plan_ranges(path, [(READ_TOPIC, p) for p in range(partitions)])
        if sum(r.records_max for r in ranges) < committed.committed:
            raise AssertionError("the plan misses committed records")

    def repeat(name: str, run: Callable[[object], None]) -> list[float]:
        contender = harness.Contender(name, run)
        runs = harness.alternate([contender], SPARK_PLAN_REPEATS, args.timer)
        return [s * 1e3 for s in runs.seconds(name)]

    views = repeat("views", open_views)
    planned = repeat("plan", plan_scan)
    aside = os.path.join(root, "snapshots-aside")
    moved = move_snapshots(path, partitions, "", aside)
    try:
        walked = repeat("walk", plan_scan)
    finally:
        move_snapshots(path, partitions, aside, "")

    def ms(value: float) -> str:
        return f"{value:.1f} ms"

    labels = [row.format(partitions=partitions, moved=moved) for row in prose.SPARK_LSO_ROWS]
    cells = [
        [label, median_spread(v, ms)]
        for label, v in zip(labels, (views, planned, walked), strict=True)
    ]
    lines = [
        prose.SPARK_LSO.format(partitions=partitions, repeats=SPARK_PLAN_REPEATS),
        "",
        *harness.table(["driver work per scan", "median (min – max)"], cells),
        "",
        prose.SPARK_LSO_SCALE.format(scan_ms=scan_ms),
    ]
    return Section(prose.SPARK_LSO_TITLE, lines)


def write_log(args: argparse.Namespace, root: str, records: int) -> tuple[str, Committed]:
    print(f"writing {records:,} records, 1/{SPARK_ABORT_EVERY} aborted ...", flush=True)
    path = os.path.join(root, f"log-{records}")
    broker = eoslog.open(path, durability="none", background=False)
    try:
        committed = write_transactions(
            broker,
            records,
            args.partitions,
            SPARK_SEGMENT_BYTES,
            {"transactional.id": "bench-spark"},
            abort_every=SPARK_ABORT_EVERY,
        )
    finally:
        broker.close()
    return path, committed


def measure_size(
    args: argparse.Namespace, spark: Any, root: str, records: int, rounds: int
) -> tuple[str, Committed, Runs]:
    """Write the log of `records` records and its prebuilt Arrow files; alternate the Spark
    contenders over them."""
    path, committed = write_log(args, root, records)
    prebuilt_dir = os.path.join(root, f"prebuilt-{records}")
    os.mkdir(prebuilt_dir)
    prebuilt = write_prebuilt(path, committed, prebuilt_dir)
    made = frames(spark, path, args.partitions, prebuilt)
    sides = spark_contenders(made, committed, SPARK_QUERIES)
    runs = harness.alternate(sides, rounds, args.timer, label=f"spark {records:,}")
    return path, committed, runs


def measure(args: argparse.Namespace, root: str) -> Report:
    spark = start_spark()
    try:
        path, committed, runs = measure_size(args, spark, root, args.records, args.rounds)
        measured = [(committed, runs, SPARK_TARGETS)]
        stored = path, committed, args.rounds, SPARK_TARGETS[0].path.split(":")[0]
        if args.scale_records:
            large_path, large, large_runs = measure_size(
                args, spark, root, args.scale_records, args.scale_rounds
            )
            large.values.clear()  # not needed past its checks: memory for what follows
            measured.append((large, large_runs, spark_targets(scale_path(args))))
            stored = large_path, large, args.scale_rounds, scale_path(args)
        storage = storage_section(args, spark, *stored)
    finally:
        spark.stop()
    scan_ms = statistics.median(runs.seconds(spark_name(SPARK_QUERIES[0], SPARK_EOSLOG))) * 1e3
    sections = [spark_section(args, *each) for each in measured]
    if len(measured) > 1:
        sections.append(trend_section([(each, each_runs) for each, each_runs, _ in measured]))
    sections += [
        measure_lso(args, path, committed, root, scan_ms),
        planning_section(args, root),
        storage,
    ]
    method = prose.SPARK_METHOD.format(
        rounds=args.rounds, scale_rounds=args.scale_rounds, gc=args.gc
    )
    return Report(prose.SPARK_TITLE, method, PACKAGES, sections)


if __name__ == "__main__":
    sys.exit(harness.main(SPARK, measure, __doc__ or ""))
