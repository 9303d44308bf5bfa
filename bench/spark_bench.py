"""Measure the eoslog Spark data source against the naive way to read segments in Spark and
against Spark's Python-source ingestion ceiling, in one run, and write bench/RESULTS-spark.md
(the Spark row of docs/bench.md's targets).

    python bench/spark_bench.py [--records N] [--rounds R] [--partitions P] [--tmp DIR]

Workload: the read_committed variant of the docs/bench.md standard workload: N records (default
1,000,000), value 100 B of JSON-like text, key null, written with `produce_batch()` in
1,000-record transactions (one batch each), every third transaction aborted, transaction i
going to partition i mod P (default 4, so Spark's local[2] has parallel tasks), segment.bytes
8 MiB, `durability="none"`; the broker is closed before reading (a clean shutdown), page
cache warm. Every contender reads the committed records of all P partitions.

Contenders, in one SparkSession (local[2], Python workers on this interpreter, reused):

- eoslog: `spark.read.format("eoslog").option("subscribe", topic).load(dir)`, read_committed
  (the default): the driver plans one range per partition; each task decodes its range in C
  into RecordBatches.
- aiokafka segments (bench/spark_sources.py): a Python data source whose tasks read the same
  .log files and decode them with aiokafka's MemoryRecords into Arrow (one Python object per
  field per record, then one pa.array per column, 100,000 rows per batch), with the same
  read_committed filtering (last stable offset and aborted transactions from eoslog's
  PartitionView on the driver; control batches and aborted batches skipped).
- prebuilt Arrow (bench/spark_sources.py): a Python data source whose tasks yield the same
  committed rows as RecordBatches already built (an Arrow IPC file per partition, mapped once
  per worker and kept): the ceiling of a Python data source.

Queries: `df.count()` and `df.select(sum(length(value))).collect()`, rows/s of committed
records. Per contender one checked warm-up (its rows, collected with toArrow(), equal the
committed records: offsets and values per partition), then --rounds rounds; in each round each
query runs every contender in turn (order reversed every other round). Medians, min – max,
and ratios as the median of per-round ratios. Targets are printed as met / not met, never
asserted.

The on-disk LSO: read_committed's last stable offset is computed from the files (the newest
producer snapshot, then a replay of the batch headers after it, or the whole partition when
there is no snapshot), once per partition per scan, on the driver. Timed apart: planning the
scan (eoslog.offline.plan_ranges over every partition) as the files stand, and with the
producer snapshots moved aside (the whole-partition walk), against opening the views alone.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path as FilePath
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

BENCH_DIR = FilePath(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import eoslog  # noqa: E402
import spark_sources  # noqa: E402
from eoslog import offline  # noqa: E402
from eoslog.fs import PosixFileSystem  # noqa: E402
from eoslog.log.partition_view import PartitionView  # noqa: E402
from log_bench import Section, Target, Timer, median_spread, orders, spread  # noqa: E402
from txn_bench import millions, pct, per_round, render_report, x  # noqa: E402
from workload import BATCH_RECORDS, RECORDS_DEFAULT, VALUE_BYTES, make_values  # noqa: E402

TITLE = (
    "# eoslog Spark benchmarks: the eoslog data source against aiokafka-decoded segments and "
    "prebuilt Arrow"
)
ROUNDS_DEFAULT = 7
ROUNDS_MIN = 3
PARTITIONS_DEFAULT = 4
PLAN_REPEATS = 5
PACKAGES = ("eoslog", "pyspark", "aiokafka", "pyarrow")
TOPIC = "bench"
TXN_RECORDS = BATCH_RECORDS  # one 1,000-record batch per transaction
ABORT_EVERY = 3  # every third transaction aborted (docs/bench.md: 1/3)
SEGMENT_BYTES = 8 << 20
# docs/bench.md: Spark scan, read_committed, 2 cores.
TARGET_AIOKAFKA = 2.0
TARGET_CEILING = 0.80

EOSLOG = "eoslog"
AIOKAFKA = "aiokafka segments"
PREBUILT = "prebuilt Arrow (ceiling)"
CONTENDERS = (EOSLOG, AIOKAFKA, PREBUILT)
COUNT = "count()"
SUM = "sum(length(value))"
QUERIES = (COUNT, SUM)


@dataclass
class BenchLog:
    """The log directory written once, and what each partition committed."""

    path: str
    partitions: int
    records: int
    transactions: int
    aborted: int
    segments: int
    offsets: list[list[int]]
    values: list[list[bytes]]

    @property
    def committed(self) -> int:
        return sum(len(offsets) for offsets in self.offsets)


def write_log(root: str, records: int, partitions: int) -> BenchLog:
    path = os.path.join(root, "log")
    values = make_values(records)
    broker = eoslog.open(path, durability="none", background=False)
    broker.create_topic(TOPIC, partitions, config={"segment.bytes": SEGMENT_BYTES})
    producer = broker.producer({"transactional.id": "bench-spark"})
    producer.init_transactions()
    offsets: list[list[int]] = [[] for _ in range(partitions)]
    committed: list[list[bytes]] = [[] for _ in range(partitions)]
    ends = [0] * partitions
    aborted = transactions = 0
    for start in range(0, records, TXN_RECORDS):
        chunk = values[start : start + TXN_RECORDS]
        partition = transactions % partitions
        producer.begin_transaction()
        producer.produce_batch(TOPIC, chunk, partition=partition)
        if transactions % ABORT_EVERY == ABORT_EVERY - 1:
            producer.abort_transaction()
            aborted += 1
        else:
            producer.commit_transaction()
            offsets[partition].extend(range(ends[partition], ends[partition] + len(chunk)))
            committed[partition].extend(chunk)
        ends[partition] += len(chunk) + 1  # the control marker takes one offset
        transactions += 1
    producer.close()
    segments = sum(len(broker.log(TOPIC, p).segments) for p in range(partitions))
    for partition in range(partitions):
        log = broker.log(TOPIC, partition)
        if log.last_stable_offset != log.log_end_offset or log.log_end_offset != ends[partition]:
            raise AssertionError("the bench log is not settled as expected")
    broker.close()
    return BenchLog(path, partitions, records, transactions, aborted, segments, offsets, committed)


def write_prebuilt(log: BenchLog, root: str) -> list[str]:
    """One Arrow IPC file per partition holding its committed rows (built with eoslog.scan,
    checked against the records committed)."""
    files = []
    for partition in range(log.partitions):
        table = pa.Table.from_batches(
            list(eoslog.scan(log.path, partitions=[(TOPIC, partition)])),
            schema=offline.arrow_schema(),
        )
        check_partition(table, log, partition, "prebuilt")
        file = os.path.join(root, f"prebuilt-{partition}.arrow")
        spark_sources.write_prebuilt(table, file)
        files.append(file)
    return files


def check_partition(table: pa.Table, log: BenchLog, partition: int, name: str) -> None:
    if table.column("offset").to_pylist() != log.offsets[partition]:
        raise AssertionError(f"{name}: partition {partition}: offsets differ from the committed")
    if table.column("value").to_pylist() != log.values[partition]:
        raise AssertionError(f"{name}: partition {partition}: values differ from the committed")


def check_frame(frame: Any, log: BenchLog, name: str) -> None:
    """The frame's rows are exactly the committed records (untimed)."""
    table = frame.toArrow()
    if table.num_rows != log.committed:
        raise AssertionError(f"{name}: {table.num_rows} rows, expected {log.committed}")
    for partition in range(log.partitions):
        mine = table.filter(pc.equal(table.column("partition"), partition))
        mine = mine.sort_by("offset")
        check_partition(mine, log, partition, name)


# --- Spark ----------------------------------------------------------------------------------


def start_spark() -> Any:
    from pyspark.sql import SparkSession

    import eoslog_spark

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
    for module in ("workload.py", "contenders.py", "spark_sources.py"):
        session.sparkContext.addPyFile(str(BENCH_DIR / module))
    eoslog_spark.register(session)
    session.dataSource.register(spark_sources.AiokafkaSegmentsSource)
    session.dataSource.register(spark_sources.PrebuiltArrowSource)
    return session


def frames(spark: Any, log: BenchLog, prebuilt: list[str]) -> dict[str, Callable[[], Any]]:
    """A fresh DataFrame per run: each query plans its scan anew, as a user's would."""
    return {
        EOSLOG: lambda: spark.read.format("eoslog").option("subscribe", TOPIC).load(log.path),
        AIOKAFKA: lambda: (
            spark.read.format("aiokafka_segments")
            .option("topic", TOPIC)
            .option("partitions", str(log.partitions))
            .load(log.path)
        ),
        PREBUILT: lambda: spark.read.format("prebuilt_arrow").load(",".join(prebuilt)),
    }


def queries(log: BenchLog) -> dict[str, Callable[[Any], None]]:
    from pyspark.sql import functions as F

    def count(frame: Any) -> None:
        if (rows := frame.count()) != log.committed:
            raise AssertionError(f"count() = {rows}, expected {log.committed}")

    def total_length(frame: Any) -> None:
        total = frame.select(F.sum(F.length("value"))).collect()[0][0]
        if total != log.committed * VALUE_BYTES:
            raise AssertionError(f"sum(length(value)) = {total}")

    return {COUNT: count, SUM: total_length}


def measure_spark(
    args: argparse.Namespace, spark: Any, log: BenchLog, prebuilt: list[str], timer: Timer
) -> tuple[Section, dict[str, dict[str, list[float]]]]:
    made = frames(spark, log, prebuilt)
    asked = queries(log)
    for name in CONTENDERS:
        print(f"spark warm-up (checked): {name} ...", flush=True)
        check_frame(made[name](), log, name)
        for query in QUERIES:
            asked[query](made[name]())
    times: dict[str, dict[str, list[float]]] = {q: {n: [] for n in CONTENDERS} for q in QUERIES}
    for order in orders(CONTENDERS, args.rounds):
        for query in QUERIES:
            for name in order:
                times[query][name].append(timer(timed(asked[query], made[name])))
            print(
                f"  {query} round:",
                ", ".join(f"{n} {times[query][n][-1] * 1e3:.0f} ms" for n in CONTENDERS),
                flush=True,
            )
    return spark_section(log, times), times


def timed(query: Callable[[Any], None], frame: Callable[[], Any]) -> Callable[[], None]:
    return lambda: query(frame())


def spark_section(log: BenchLog, times: dict[str, dict[str, list[float]]]) -> Section:
    n = log.committed
    lines = [
        f"Workload: {log.records:,} records (value {VALUE_BYTES} B JSON-like text, key null) in "
        f"{log.transactions:,} transactions of {TXN_RECORDS:,} records, one batch each, "
        f"{log.aborted:,} aborted (every {ABORT_EVERY}rd) and their abort markers; "
        f"{log.partitions} partitions ({log.segments} segments of ≤ "
        f"{SEGMENT_BYTES >> 20} MiB), read_committed. Every contender reads the {n:,} "
        "committed records. Spark local[2].",
        "",
        "| query | contender | median committed rows/s | min – max | median ms/run |",
        "|---|---|---:|---:|---:|",
    ]
    for query in QUERIES:
        for name in CONTENDERS:
            rates = [n / t for t in times[query][name]]
            lines.append(
                f"| {query} | {name} | {millions(statistics.median(rates))} | "
                f"{spread(rates, millions)} | {statistics.median(times[query][name]) * 1e3:.0f} |"
            )
    lines += ["", "| ratio (median of per-round ratios; min – max) | value |", "|---|---:|"]
    targets = []
    for query in QUERIES:
        over_aiokafka = per_round(times[query], AIOKAFKA, EOSLOG)
        of_ceiling = per_round(times[query], PREBUILT, EOSLOG)
        ceiling_over_aiokafka = per_round(times[query], AIOKAFKA, PREBUILT)
        lines += [
            f"| {query}: eoslog ÷ {AIOKAFKA} | {median_spread(over_aiokafka, x)} |",
            f"| {query}: eoslog ÷ {PREBUILT} | {median_spread(of_ceiling, pct)} |",
            f"| {query}: {PREBUILT} ÷ {AIOKAFKA} (the most any Python source can gain over "
            f"the aiokafka reader in this run) | {median_spread(ceiling_over_aiokafka, x)} |",
        ]
        targets += [
            Target(
                f"Spark scan, read_committed, 2 cores: {query}",
                f"÷ {AIOKAFKA}",
                f"≥ {TARGET_AIOKAFKA:.0f}×",
                median_spread(over_aiokafka, x),
                statistics.median(over_aiokafka) >= TARGET_AIOKAFKA,
            ),
            Target(
                f"Spark scan, read_committed, 2 cores: {query}",
                f"of the {PREBUILT}",
                f"≥ {TARGET_CEILING:.0%}",
                median_spread(of_ceiling, pct),
                statistics.median(of_ceiling) >= TARGET_CEILING,
            ),
        ]
    return Section("Spark scans: count() and sum(length(value))", lines, targets)


# --- the on-disk LSO ------------------------------------------------------------------------


def open_views(log: BenchLog) -> None:
    for partition in range(log.partitions):
        directory = os.path.join(log.path, f"{TOPIC}-{partition}")
        PartitionView(PosixFileSystem(), directory, TOPIC, partition).close()


def plan_scan(log: BenchLog) -> None:
    ranges = offline.plan_ranges(log.path, [(TOPIC, p) for p in range(log.partitions)])
    if sum(r.records_max for r in ranges) < log.committed:
        raise AssertionError("the plan misses committed records")


def snapshots_aside(log: BenchLog, aside: str) -> int:
    """Move every producer snapshot of the partitions to `aside`; how many."""
    moved = 0
    for partition in range(log.partitions):
        directory = os.path.join(log.path, f"{TOPIC}-{partition}")
        target = os.path.join(aside, str(partition))
        os.makedirs(target, exist_ok=True)
        for name in os.listdir(directory):
            if name.endswith(".snapshot"):
                os.rename(os.path.join(directory, name), os.path.join(target, name))
                moved += 1
    return moved


def snapshots_back(log: BenchLog, aside: str) -> None:
    for partition in range(log.partitions):
        directory = os.path.join(log.path, f"{TOPIC}-{partition}")
        source = os.path.join(aside, str(partition))
        for name in os.listdir(source):
            os.rename(os.path.join(source, name), os.path.join(directory, name))


def measure_lso(
    log: BenchLog, root: str, timer: Timer, scan_ms: float
) -> tuple[Section, list[float]]:
    def repeat(run: Callable[[], None]) -> list[float]:
        run()  # warm
        return [timer(run) * 1e3 for _ in range(PLAN_REPEATS)]

    views = repeat(lambda: open_views(log))
    planned = repeat(lambda: plan_scan(log))
    aside = os.path.join(root, "snapshots-aside")
    moved = snapshots_aside(log, aside)
    try:
        walked = repeat(lambda: plan_scan(log))
    finally:
        snapshots_back(log, aside)

    def ms(value: float) -> str:
        return f"{value:.1f} ms"

    lines = [
        f"Driver-side work of one read_committed scan of the {log.partitions} partitions, "
        f"{PLAN_REPEATS} runs each after a warm one (in the bench process, outside Spark). "
        "The LSO is computed once per partition per scan, on the driver; a task's view "
        "opens the segments and cuts the tail, and replays nothing.",
        "",
        "| driver work per scan | median (min – max) |",
        "|---|---:|",
        f"| open the {log.partitions} views (no LSO) | {median_spread(views, ms)} |",
        f"| plan_ranges: views + LSO + aborted list, producer snapshots as written | "
        f"{median_spread(planned, ms)} |",
        f"| plan_ranges with the {moved} producer snapshots moved aside (whole-partition "
        f"walk) | {median_spread(walked, ms)} |",
        "",
        f"For scale: the eoslog count() scan above took {scan_ms:.0f} ms (median), planning "
        "included.",
    ]
    return Section("The on-disk LSO: what planning a read_committed scan costs", lines), planned


# --- report ---------------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=RECORDS_DEFAULT)
    parser.add_argument("--rounds", type=int, default=ROUNDS_DEFAULT)
    parser.add_argument("--partitions", type=int, default=PARTITIONS_DEFAULT)
    parser.add_argument("--tmp", default="/tmp", help="where the data directories are made")
    parser.add_argument("--gc", choices=("off", "on"), default="off")
    parser.add_argument("--keep", action="store_true", help="keep the log directory")
    parser.add_argument("--output", type=FilePath, default=BENCH_DIR / "RESULTS-spark.md")
    args = parser.parse_args(argv)
    if args.rounds < ROUNDS_MIN:
        parser.error(f"--rounds must be at least {ROUNDS_MIN} (docs/bench.md)")
    if args.records < TXN_RECORDS * ABORT_EVERY * args.partitions:
        parser.error(f"--records must be at least {TXN_RECORDS * ABORT_EVERY * args.partitions}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    started = time.perf_counter()
    load_start = os.getloadavg()
    timer = Timer(args.gc == "on")
    root = tempfile.mkdtemp(prefix="eoslog-sparkbench-", dir=args.tmp)
    spark = None
    try:
        print(f"writing {args.records:,} records, 1/{ABORT_EVERY} aborted ...", flush=True)
        log = write_log(root, args.records, args.partitions)
        prebuilt = write_prebuilt(log, root)
        spark = start_spark()
        section, times = measure_spark(args, spark, log, prebuilt, timer)
        scan_ms = statistics.median(times[COUNT][EOSLOG]) * 1e3
        lso, _ = measure_lso(log, root, timer, scan_ms)
        sections = [section, lso]
    finally:
        if spark is not None:
            spark.stop()
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    text = render_report(
        TITLE,
        __doc__ or "",
        PACKAGES,
        f"{args.rounds} rounds; the driver's heap is collected before each timed run and its "
        f"cyclic GC is {args.gc} while timing (the Python workers are Spark's).",
        argv,
        args,
        sections,
        time.perf_counter() - started,
        load_start,
    )
    print(text)
    args.output.write_text(text + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
