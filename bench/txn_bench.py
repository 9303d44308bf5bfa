"""Measure eoslog's transactions against their peers, in one run, and write
bench/RESULTS-txn.md (the transaction rows of docs/bench.md's targets).

    python bench/txn_bench.py [--records N] [--rounds R] [--latency-samples S]
                              [--sections produce,latency,read] [--tmp DIR] [--profile]

Three sections, each with its contenders alternating in this process round by round:

- produce: the docs/bench.md standard workload (N records, default 1,000,000, value 100 B of
  JSON-like text, key null, one partition), transactional, commit every 1,000 records.
  eoslog `produce()` once per record inside begin_transaction() / commit_transaction()
  (transactional.id set, init_transactions() outside the timing; batch.num.messages 1000,
  batch.size 1 MiB, linger.ms 100), with the broker's durability "none" and "commit" (the
  commit fsyncs). confluent-kafka's transactional producer on librdkafka's in-process mock
  cluster (`test.mock.num.brokers=1`, transactional.id set, init_transactions() outside the
  timing; begin, `produce()` per record (poll(0) on BufferError), commit_transaction() every
  1,000 records: the commit flushes, so it is inside the timing; batch.num.messages 1000,
  linger.ms 5). SQLite WAL synchronous=NORMAL, `executemany` of 1,000-row transactions (as
  in producer_bench.py). A fresh log directory / mock cluster / file per run.
- latency: single-record transactions (begin_transaction(), produce() of one 100 B record,
  commit_transaction()), each timed alone, with durability "none" and "commit"; and the
  physical limit: a 4 KiB `os.write` append + `os.fdatasync` to a file in the same directory
  tree. p50 / p99 / p99.9 per round.
- read: the read_committed variant of the standard workload: N records produced with
  `produce_batch()` in 1,000-record transactions, every third transaction aborted (a fresh
  broker, durability "none", segment.bytes 32 MiB). Read from offset 0 under read_committed:
  `consume_arrow(100_000, timeout=0)` and `consume(500, timeout=0)` (every Message kept)
  until every committed record is read; a SQLite Python-cursor scan of the committed rows
  (WAL, synchronous=NORMAL; the table holds only the committed rows, as if the aborted
  transactions had been rolled back); `numpy.copyto` of the committed values' bytes;
  and the one-object-per-record floor of consumer_bench.py.

Per contender one checked warm-up (records read back equal the records committed), then
--rounds rounds in which the contenders run in turn (order reversed every other round);
medians, min – max, and ratios as the median of per-round ratios. Targets (docs/bench.md) are
printed as met / not met, never asserted.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path as FilePath

import numpy as np
import pyarrow as pa

BENCH_DIR = FilePath(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import consumer_bench  # noqa: E402
import eoslog  # noqa: E402
from log_bench import (  # noqa: E402
    Section,
    Target,
    Timer,
    disk_line,
    fmt_load,
    median_spread,
    orders,
    spread,
    tree_line,
)
from producer_bench import sqlite_run  # noqa: E402
from workload import BATCH_RECORDS, RECORDS_DEFAULT, VALUE_BYTES, make_values  # noqa: E402
from write_results import codec_line, command_line, machine_lines  # noqa: E402

ROUNDS_DEFAULT = 3
ROUNDS_MIN = 3
LATENCY_SAMPLES_DEFAULT = 2_000
LATENCY_WARMUP = 200
PACKAGES = ("eoslog", "confluent-kafka", "numpy", "pyarrow")
TOPIC = "bench"
TXN_RECORDS = 1_000  # records per transaction (docs/bench.md: commit every 1,000)
ABORT_EVERY = 3  # every third transaction aborted (docs/bench.md: 1/3)
SEGMENT_BYTES = 32 << 20
CONSUME_MESSAGES = consumer_bench.CONSUME_MESSAGES
ARROW_RECORDS = consumer_bench.ARROW_RECORDS
FSYNC_BLOCK = 4096
PERCENTILES = (50.0, 99.0, 99.9)
EOSLOG_CONFIG: dict[str, object] = {
    "transactional.id": "bench-txn",
    "batch.num.messages": BATCH_RECORDS,
    "batch.size": 1 << 20,
    "linger.ms": 100,
}
# docs/bench.md targets.
PRODUCE_TARGET_CONFLUENT = 2.5
PRODUCE_TARGET_SQLITE = 3.0
COMMIT_TARGET_FRACTION = 0.80
LATENCY_TARGET_NONE_US = 50.0
LATENCY_TARGET_FSYNC_MARGIN_US = 50.0
ARROW_TARGET_SQLITE = 3.0
ARROW_TARGET_MEMCPY = 0.50
CONSUME_TARGET_FLOOR = 0.70
SECTIONS = ("produce", "latency", "read")

PRODUCE_NONE = "eoslog produce() txn none"
PRODUCE_COMMIT = "eoslog produce() txn commit"
CONFLUENT = "confluent-kafka transactional (mock)"
SQLITE_NORMAL = "SQLite WAL NORMAL"
PRODUCE_CONTENDERS = (PRODUCE_NONE, PRODUCE_COMMIT, CONFLUENT, SQLITE_NORMAL)
LATENCY_NONE = 'eoslog txn "none"'
LATENCY_COMMIT = 'eoslog txn "commit"'
LATENCY_FSYNC = "4 KiB write + fdatasync"
LATENCY_CONTENDERS = (LATENCY_NONE, LATENCY_COMMIT, LATENCY_FSYNC)
READ_CONTENDERS = ("floor", "consume()", "consume_arrow()", "SQLite scan", "memcpy")


def x(value: float) -> str:
    return f"{value:.2f}×"


def pct(value: float) -> str:
    return f"{value:.0%}"


def millions(value: float) -> str:
    return f"{value / 1e6:.2f} M"


per_round = consumer_bench.ratio_rounds


def rate_rows(
    names: Sequence[str],
    times: dict[str, list[float]],
    records: int,
    fmt_seconds: Callable[[float], str],
) -> list[str]:
    """One table row per contender: median records/s, its min – max, and the median time."""
    rows = []
    for name in names:
        rates = [records / t for t in times[name]]
        rows.append(
            f"| {name} | {millions(statistics.median(rates))} | {spread(rates, millions)} | "
            f"{fmt_seconds(statistics.median(times[name]))} |"
        )
    return rows


def open_broker(root: str, durability: str, prefix: str) -> tuple[eoslog.Broker, str]:
    path = tempfile.mkdtemp(prefix=prefix, dir=root)
    broker = eoslog.open(path, durability=durability, background=False)
    broker.create_topic(TOPIC, 1, config={"segment.bytes": SEGMENT_BYTES})
    return broker, path


def committed_rows(broker: eoslog.Broker) -> int:
    """Records a read_committed consumer reads from offset 0 (untimed check)."""
    consumer = broker.consumer({"isolation.level": "read_committed"})
    consumer.assign([eoslog.TopicPartition(TOPIC, 0, 0)])
    rows = 0
    while batch := consumer.consume_arrow(ARROW_RECORDS, timeout=0).num_rows:
        rows += batch
    consumer.close()
    return rows


# --- produce: transactional, commit every 1,000 ------------------------------------------------


def eoslog_txn_run(
    root: str, values: list[bytes], durability: str, timer: Timer, check: bool
) -> float:
    broker, path = open_broker(root, durability, "txn-produce-")
    try:
        producer = broker.producer(EOSLOG_CONFIG)
        producer.init_transactions()

        def produce_each() -> None:
            produce = producer.produce
            for start in range(0, len(values), TXN_RECORDS):
                producer.begin_transaction()
                for value in values[start : start + TXN_RECORDS]:
                    produce(TOPIC, value)
                producer.commit_transaction()

        elapsed = timer(produce_each)
        if check and (rows := committed_rows(broker)) != len(values):
            raise AssertionError(f"eoslog: {rows} committed records read, expected {len(values)}")
        producer.close()
    finally:
        broker.close()
        shutil.rmtree(path, ignore_errors=True)
    return elapsed


def confluent_txn_run(values: list[bytes], timer: Timer) -> float:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "test.mock.num.brokers": 1,
            "transactional.id": "bench-txn",
            "batch.num.messages": BATCH_RECORDS,
            "linger.ms": 5,
        }
    )
    delivered = [0]

    def count(err: object, msg: object) -> None:
        if err is None:
            delivered[0] += 1

    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(TOPIC, b"warm", on_delivery=count)  # creates the topic on the mock
    producer.commit_transaction(30)
    delivered[0] = 0

    def produce_each() -> None:
        produce = producer.produce
        for start in range(0, len(values), TXN_RECORDS):
            producer.begin_transaction()
            for value in values[start : start + TXN_RECORDS]:
                try:
                    produce(TOPIC, value, on_delivery=count)
                except BufferError:
                    producer.poll(0.01)
                    produce(TOPIC, value, on_delivery=count)
            producer.commit_transaction()

    elapsed = timer(produce_each)
    # The mock does not filter read_committed: the check is the delivery reports of
    # committed transactions (commit_transaction() raises if a message failed).
    if delivered[0] != len(values):
        raise AssertionError(f"confluent: {delivered[0]} delivered, expected {len(values)}")
    return elapsed


def measure_produce(args: argparse.Namespace, root: str, timer: Timer) -> Section:
    values = make_values(args.records)
    runs: dict[str, Callable[[bool], float]] = {
        PRODUCE_NONE: lambda check: eoslog_txn_run(root, values, "none", timer, check),
        PRODUCE_COMMIT: lambda check: eoslog_txn_run(root, values, "commit", timer, check),
        CONFLUENT: lambda check: confluent_txn_run(values, timer),
        SQLITE_NORMAL: lambda check: sqlite_run(root, values, "NORMAL", timer),
    }
    for name, run in runs.items():
        print(f"produce warm-up (checked): {name} ...", flush=True)
        run(True)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for order in orders(PRODUCE_CONTENDERS, args.rounds):
        for name in order:
            times[name].append(runs[name](False))
        print(
            "  produce round:",
            ", ".join(f"{n} {times[n][-1]:.2f} s" for n in PRODUCE_CONTENDERS),
            flush=True,
        )
    n = args.records
    lines = [
        f"Workload: {n:,} records, value {VALUE_BYTES} B JSON-like text, key null, one "
        f"partition, no compression, transactional with a commit every {TXN_RECORDS:,} "
        f"records ({n // TXN_RECORDS:,} transactions per run).",
        "",
        "| contender | median records/s | min – max | median s |",
        "|---|---:|---:|---:|",
    ]
    lines += rate_rows(PRODUCE_CONTENDERS, times, n, lambda seconds: f"{seconds:.3f}")
    lines += ["", "Ratios (eoslog ÷ peer, records/s; median of per-round ratios, min – max):", ""]
    for ours in (PRODUCE_NONE, PRODUCE_COMMIT):
        for peer in (CONFLUENT, SQLITE_NORMAL):
            lines.append(f"- {ours} ÷ {peer}: {median_spread(per_round(times, peer, ours), x)}")
    confluent = per_round(times, CONFLUENT, PRODUCE_NONE)
    sqlite = per_round(times, SQLITE_NORMAL, PRODUCE_NONE)
    commit = per_round(times, PRODUCE_NONE, PRODUCE_COMMIT)
    targets = [
        Target(
            'produce() per record, transactional, "none"',
            f"÷ {CONFLUENT}",
            f"≥ {PRODUCE_TARGET_CONFLUENT}×",
            median_spread(confluent, x),
            statistics.median(confluent) >= PRODUCE_TARGET_CONFLUENT,
        ),
        Target(
            'produce() per record, transactional, "none"',
            f"÷ {SQLITE_NORMAL}",
            f"≥ {PRODUCE_TARGET_SQLITE:.0f}×",
            median_spread(sqlite, x),
            statistics.median(sqlite) >= PRODUCE_TARGET_SQLITE,
        ),
        Target(
            'produce() per record, transactional, "commit"',
            'of the "none" rate',
            f"≥ {COMMIT_TARGET_FRACTION:.0%}",
            median_spread(commit, pct),
            statistics.median(commit) >= COMMIT_TARGET_FRACTION,
        ),
    ]
    return Section("Transactional produce(), commit every 1,000", lines, targets)


# --- latency: single-record transactions against an fsync ---------------------------------------


def eoslog_latency_run(root: str, value: bytes, durability: str, samples: int) -> np.ndarray:
    broker, path = open_broker(root, durability, "txn-latency-")
    try:
        producer = broker.producer(EOSLOG_CONFIG)
        producer.init_transactions()
        begin, produce, commit = (
            producer.begin_transaction,
            producer.produce,
            producer.commit_transaction,
        )
        clock = time.perf_counter_ns
        for _ in range(LATENCY_WARMUP):
            begin()
            produce(TOPIC, value)
            commit()
        out = np.empty(samples, dtype=np.int64)
        for i in range(samples):
            start = clock()
            begin()
            produce(TOPIC, value)
            commit()
            out[i] = clock() - start
        if (rows := committed_rows(broker)) != LATENCY_WARMUP + samples:
            raise AssertionError(f"eoslog: {rows} committed, expected {LATENCY_WARMUP + samples}")
        producer.close()
    finally:
        broker.close()
        shutil.rmtree(path, ignore_errors=True)
    return out


def fsync_latency_run(root: str, samples: int) -> np.ndarray:
    path = os.path.join(root, "fsync-probe")
    block = b"x" * FSYNC_BLOCK
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        clock = time.perf_counter_ns
        for _ in range(LATENCY_WARMUP):
            os.write(fd, block)
            os.fdatasync(fd)
        out = np.empty(samples, dtype=np.int64)
        for i in range(samples):
            start = clock()
            os.write(fd, block)
            os.fdatasync(fd)
            out[i] = clock() - start
        if os.fstat(fd).st_size != FSYNC_BLOCK * (LATENCY_WARMUP + samples):
            raise AssertionError("fsync probe: wrong file size")
    finally:
        os.close(fd)
        os.unlink(path)
    return out


def measure_latency(args: argparse.Namespace, root: str) -> Section:
    value = make_values(1)[0]
    samples = args.latency_samples
    runs: dict[str, Callable[[], np.ndarray]] = {
        LATENCY_NONE: lambda: eoslog_latency_run(root, value, "none", samples),
        LATENCY_COMMIT: lambda: eoslog_latency_run(root, value, "commit", samples),
        LATENCY_FSYNC: lambda: fsync_latency_run(root, samples),
    }
    # µs percentiles per round: name -> [array(p50, p99, p99.9), ...]
    found: dict[str, list[np.ndarray]] = {name: [] for name in runs}
    for order in orders(LATENCY_CONTENDERS, args.rounds):
        for name in order:
            os.sync()  # no run shares the disk with an earlier one's write-back
            found[name].append(np.percentile(runs[name]() / 1000.0, PERCENTILES))
        print(
            "  latency round:",
            ", ".join(f"{n} p99 {found[n][-1][1]:.0f} µs" for n in LATENCY_CONTENDERS),
            flush=True,
        )

    def us(value: float) -> str:
        return f"{value:.0f} µs" if value >= 10 else f"{value:.1f} µs"

    lines = [
        f"Each call timed alone with `perf_counter_ns`; {samples:,} calls per contender per "
        f"round after {LATENCY_WARMUP} untimed ones; a fresh broker (or file) per round, "
        "`os.sync()` before each contender. Percentiles per round; the table gives the "
        "median over rounds and min – max.",
        "",
        "| contender | p50 | p99 | p99.9 |",
        "|---|---:|---:|---:|",
    ]
    for name in LATENCY_CONTENDERS:
        cells = []
        for index in range(len(PERCENTILES)):
            column = [float(p[index]) for p in found[name]]
            cells.append(median_spread(column, us))
        lines.append(f"| {name} | {' | '.join(cells)} |")
    none_p99 = [float(p[1]) for p in found[LATENCY_NONE]]
    margin = [
        float(c[1] - f[1]) for c, f in zip(found[LATENCY_COMMIT], found[LATENCY_FSYNC], strict=True)
    ]
    lines += [
        "",
        f'p99 of "commit" − p99 of the fsync, per round: {median_spread(margin, us)}.',
    ]
    targets = [
        Target(
            'single-record transaction, "none"',
            "p99",
            f"≤ {LATENCY_TARGET_NONE_US:.0f} µs",
            median_spread(none_p99, us),
            statistics.median(none_p99) <= LATENCY_TARGET_NONE_US,
        ),
        Target(
            'single-record transaction, "commit"',
            "p99 − fsync p99 (same round)",
            f"≤ {LATENCY_TARGET_FSYNC_MARGIN_US:.0f} µs",
            median_spread(margin, us),
            statistics.median(margin) <= LATENCY_TARGET_FSYNC_MARGIN_US,
        ),
    ]
    return Section("Single-record transaction latency", lines, targets)


# --- read: read_committed with 1/3 of transactions aborted ---------------------------------------


class ReadData(consumer_bench.ReadSource):
    """The read_committed variant written once: a broker holding N records in 1,000-record
    transactions, every third aborted; the committed rows in SQLite; their values as bytes."""

    def __init__(self, records: int, root: str) -> None:
        values = make_values(records)
        self.broker, _ = open_broker(root, "none", "txn-read-")
        producer = self.broker.producer(EOSLOG_CONFIG)
        producer.init_transactions()
        self.offsets: list[int] = []
        self.values: list[bytes] = []
        offset = 0
        self.transactions = 0
        self.aborted = 0
        for start in range(0, records, TXN_RECORDS):
            chunk = values[start : start + TXN_RECORDS]
            producer.begin_transaction()
            producer.produce_batch(TOPIC, chunk, partition=0)
            if self.transactions % ABORT_EVERY == ABORT_EVERY - 1:
                producer.abort_transaction()
                self.aborted += 1
            else:
                producer.commit_transaction()
                self.offsets.extend(range(offset, offset + len(chunk)))
                self.values.extend(chunk)
            offset += len(chunk) + 1  # the control marker takes one offset
            self.transactions += 1
        producer.close()
        log = self.broker.log(TOPIC, 0)
        if log.last_stable_offset != log.log_end_offset or log.log_end_offset != offset:
            raise AssertionError("the read variant's log is not settled as expected")
        self.segments = len(log.segments)
        self.records = records
        self.committed = len(self.values)
        self.sqlite = sqlite3.connect(os.path.join(root, "committed.sqlite"))
        self.sqlite.execute("PRAGMA journal_mode=WAL")
        self.sqlite.execute("PRAGMA synchronous=NORMAL")
        self.sqlite.execute(
            "CREATE TABLE records (offset INTEGER PRIMARY KEY, timestamp INTEGER, key BLOB, "
            "value BLOB)"
        )
        for start in range(0, self.committed, TXN_RECORDS):
            with self.sqlite:
                self.sqlite.executemany(
                    "INSERT INTO records VALUES (?, ?, NULL, ?)",
                    zip(
                        self.offsets[start : start + TXN_RECORDS],
                        self.offsets[start : start + TXN_RECORDS],
                        self.values[start : start + TXN_RECORDS],
                        strict=True,
                    ),
                )
        self.payload = np.frombuffer(b"".join(self.values), dtype=np.uint8)
        self.payload_target = np.empty_like(self.payload)


def read_runners(data: ReadData) -> dict[str, Callable[[], object]]:
    def floor() -> object:
        return [(offset, value) for offset, value in zip(data.offsets, data.values, strict=True)]

    reads = consumer_bench.read_runners(
        data.consumer, data.committed, data.sqlite, data.payload, data.payload_target
    )
    del reads["consume() + value()"]
    return {"floor": floor, **reads}


def read_check(name: str, result: object, data: ReadData) -> None:
    """The warm-up read exactly the committed records (untimed)."""
    if name == "consume()":
        assert isinstance(result, list) and len(result) == data.committed, name
        assert [m.offset() for m in result] == data.offsets, name
        assert result[-1].value() == data.values[-1] and result[0].value() == data.values[0]
    elif name == "consume_arrow()":
        assert isinstance(result, list)
        table = pa.Table.from_batches(result)
        assert table.num_rows == data.committed, name
        assert table.column("offset").to_pylist() == data.offsets, name
        assert table.column("value").to_pylist() == data.values, name
    elif name == "SQLite scan":
        assert isinstance(result, list) and len(result) == data.committed, name
    elif name == "memcpy":
        assert np.array_equal(data.payload, data.payload_target)


def measure_read(args: argparse.Namespace, root: str, timer: Timer) -> Section:
    print(f"read: producing {args.records:,} records, 1/{ABORT_EVERY} aborted ...", flush=True)
    data = ReadData(args.records, root)
    try:
        runs = read_runners(data)
        for name in READ_CONTENDERS:
            result = runs[name]()
            read_check(name, result, data)
            del result
        times: dict[str, list[float]] = {name: [] for name in READ_CONTENDERS}
        for order in orders(READ_CONTENDERS, args.rounds):
            for name in order:
                times[name].append(timer(runs[name]))
            print(
                "  read round:",
                ", ".join(f"{n} {times[n][-1] * 1e3:.0f} ms" for n in READ_CONTENDERS),
                flush=True,
            )
        return read_section(data, times)
    finally:
        data.close()


def read_section(data: ReadData, times: dict[str, list[float]]) -> Section:
    n = data.committed
    lines = [
        f"Workload: {data.records:,} records (value {VALUE_BYTES} B JSON-like text, key null) "
        f"in {data.transactions:,} transactions of {TXN_RECORDS:,} records, one batch each, "
        f"{data.aborted:,} aborted (every {ABORT_EVERY}rd) and their abort markers; one "
        f'partition ({data.segments} segments of ≤ 32 MiB), `durability="none"`, page cache '
        f"warm. Every contender reads the {n:,} committed records (SQLite holds only them).",
        "",
        "| contender | median committed records/s | min – max | median ms/run |",
        "|---|---:|---:|---:|",
    ]
    lines += rate_rows(READ_CONTENDERS, times, n, lambda seconds: f"{seconds * 1e3:.0f}")
    arrow_sqlite = per_round(times, "SQLite scan", "consume_arrow()")
    arrow_memcpy = per_round(times, "memcpy", "consume_arrow()")
    consume_sqlite = per_round(times, "SQLite scan", "consume()")
    consume_floor = per_round(times, "floor", "consume()")
    gib_s = [data.payload.nbytes / t / (1 << 30) for t in times["consume_arrow()"]]
    lines += [
        "",
        "| ratio (median of per-round ratios; min – max) | value |",
        "|---|---:|",
        f"| consume_arrow() ÷ SQLite scan | {median_spread(arrow_sqlite, x)} |",
        f"| consume_arrow() payload bandwidth ÷ memcpy | {median_spread(arrow_memcpy, pct)} |",
        f"| consume() ÷ SQLite scan | {median_spread(consume_sqlite, x)} |",
        f"| consume() ÷ floor | {median_spread(consume_floor, pct)} |",
        "",
        f"consume_arrow() delivers {statistics.median(gib_s):.2f} GiB/s of committed value "
        f"bytes (median; {data.payload.nbytes:,} bytes per run).",
    ]
    targets = [
        Target(
            "read_committed consume_arrow(), aborted data present",
            "÷ SQLite scan",
            f"≥ {ARROW_TARGET_SQLITE:.0f}×",
            median_spread(arrow_sqlite, x),
            statistics.median(arrow_sqlite) >= ARROW_TARGET_SQLITE,
        ),
        Target(
            "read_committed consume_arrow(), aborted data present",
            "payload ÷ memcpy",
            f"≥ {ARROW_TARGET_MEMCPY:.0%}",
            median_spread(arrow_memcpy, pct),
            statistics.median(arrow_memcpy) >= ARROW_TARGET_MEMCPY,
        ),
        Target(
            "read_committed consume(), aborted data present",
            "÷ floor (docs/bench.md's consume() row)",
            f"≥ {CONSUME_TARGET_FLOOR:.0%}",
            median_spread(consume_floor, pct),
            statistics.median(consume_floor) >= CONSUME_TARGET_FLOOR,
        ),
    ]
    return Section("read_committed with 1/3 of transactions aborted", lines, targets)


# --- profile (--profile): where a transaction's time goes ----------------------------------------


def profile_transactions(root: str, top: int = 15) -> None:
    """cProfile of 200 single-record transactions per durability (printed, not written)."""
    value = make_values(1)[0]
    for durability in ("none", "commit"):
        broker, path = open_broker(root, durability, "txn-profile-")
        try:
            producer = broker.producer(EOSLOG_CONFIG)
            producer.init_transactions()
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(200):
                producer.begin_transaction()
                producer.produce(TOPIC, value)
                producer.commit_transaction()
            profiler.disable()
            producer.close()
        finally:
            broker.close()
            shutil.rmtree(path, ignore_errors=True)
        print(f"\n--- profile: 200 single-record transactions, durability {durability!r} ---")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


# --- report ---------------------------------------------------------------------------------


def method_lines(text: str) -> list[str]:
    """The docstring's method paragraphs as Markdown: wrapped lines joined, bullets kept."""
    out: list[str] = []
    for paragraph in text.strip().split("\n\n"):
        items: list[str] = []
        for line in paragraph.splitlines():
            if line.startswith("- ") or not items:
                items.append(line.strip())
            else:
                items[-1] += " " + line.strip()
        out += [*items, ""]
    return out[:-1]


def render(
    argv: Sequence[str],
    args: argparse.Namespace,
    sections: list[Section],
    seconds: float,
    load_start: tuple[float, float, float],
) -> str:
    return render_report(
        "# eoslog transaction benchmarks: transactional produce(), single-record transaction "
        "latency, read_committed with aborted data",
        __doc__ or "",
        PACKAGES,
        f"{args.rounds} rounds; the heap is collected before each timed throughput run and the "
        f"cyclic GC is {args.gc} while timing (latency loops run with the GC as it is).",
        argv,
        args,
        sections,
        seconds,
        load_start,
    )


def render_report(
    title: str,
    doc: str,
    packages: Sequence[str],
    rounds_line: str,
    argv: Sequence[str],
    args: argparse.Namespace,
    sections: list[Section],
    seconds: float,
    load_start: tuple[float, float, float],
) -> str:
    """A bench script's RESULTS-*.md: header, machine, the method (the docstring after its
    first two paragraphs), the targets table bench/summary.py reads, then the sections."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    method = method_lines(doc.split("\n\n", 2)[2])
    lines = [
        title,
        "",
        f"Command: `{command_line(argv)}`  ",
        f"Date: {now}; wall time {seconds:.0f} s  ",
        codec_line() + "  ",
        tree_line(),
        "",
        "## Machine",
        "",
        *machine_lines(packages),
        f"- data: {disk_line(args.tmp)}",
        f"- load average (1, 5, 15 min) at the start: {fmt_load(load_start)}; at the end: "
        f"{fmt_load(os.getloadavg())} (other processes share this machine)",
        "",
        "## Method",
        "",
        *method,
        "",
        rounds_line,
        "",
        "## Targets (docs/bench.md)",
        "",
        "| path | figure | target | measured (median; min – max) | status |",
        "|---|---|---|---|---|",
        *(t.row() for section in sections for t in section.targets),
    ]
    for section in sections:
        lines += ["", f"## {section.title}", "", *section.lines]
    return "\n".join(lines)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=RECORDS_DEFAULT)
    parser.add_argument("--rounds", type=int, default=ROUNDS_DEFAULT)
    parser.add_argument("--latency-samples", type=int, default=LATENCY_SAMPLES_DEFAULT)
    parser.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated")
    parser.add_argument("--tmp", default="/tmp", help="where the data directories are made")
    parser.add_argument("--gc", choices=("off", "on"), default="off")
    parser.add_argument("--profile", action="store_true", help="print cProfile tables too")
    parser.add_argument("--output", type=FilePath, default=BENCH_DIR / "RESULTS-txn.md")
    args = parser.parse_args(argv)
    if args.rounds < ROUNDS_MIN:
        parser.error(f"--rounds must be at least {ROUNDS_MIN} (docs/bench.md)")
    if args.records < TXN_RECORDS * ABORT_EVERY:
        parser.error(f"--records must be at least {TXN_RECORDS * ABORT_EVERY}")
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    started = time.perf_counter()
    load_start = os.getloadavg()
    timer = Timer(args.gc == "on")
    root = tempfile.mkdtemp(prefix="eoslog-txnbench-", dir=args.tmp)
    sections: list[Section] = []
    try:
        if "produce" in args.sections:
            sections.append(measure_produce(args, root, timer))
        if "latency" in args.sections:
            sections.append(measure_latency(args, root))
        if "read" in args.sections:
            sections.append(measure_read(args, root, timer))
        if args.profile:
            profile_transactions(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    text = render(argv, args, sections, time.perf_counter() - started, load_start)
    print(text)
    args.output.write_text(text + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
