"""Measure eoslog's idempotent Producer against its peers, in one run, and write
bench/RESULTS-producer.md.

    python bench/producer_bench.py [--records N] [--rounds R] [--paths ...] [--tmp DIR]

The docs/bench.md standard workload (1,000,000 records, value 100 B of JSON-like text, key null,
1,000 records per batch, one partition), produced by:

- eoslog `produce()` once per record (poll(0) every 10,000) then `flush()`, and
  `produce_batch(values)` of the whole list then `flush()`; each with the broker's
  durability "none" and "commit" (flush fsyncs). Batches close at batch.num.messages=1000
  (batch.size 1 MiB, linger.ms 100, so neither closes a batch first). A fresh log
  directory per run; open, topic creation and close are outside the timing.
- confluent-kafka's idempotent producer on librdkafka's in-process mock cluster
  (`test.mock.num.brokers=1`), `produce()` per record (poll(0) every 10,000, and on
  BufferError) then `flush()`, batch.num.messages=1000, linger.ms 5. A fresh producer (and
  mock cluster) per run; its creation is outside the timing.
- SQLite WAL, synchronous=NORMAL and FULL, `executemany` of 1,000-row transactions into
  (offset INTEGER PRIMARY KEY, value BLOB), a fresh file per run.

Per contender one warm-up run (checked: record count landed), then --rounds rounds in which
all contenders run in turn (order reversed every round); medians, min – max, and ratios as the
median of per-round ratios. Targets (docs/bench.md) are printed as met / not met, never asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path as FilePath

BENCH_DIR = FilePath(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import eoslog  # noqa: E402
from log_bench import Target, Timer, median_spread, orders, spread, tree_line  # noqa: E402
from workload import BATCH_RECORDS, RECORDS_DEFAULT, VALUE_BYTES, make_values  # noqa: E402
from write_results import codec_line, command_line  # noqa: E402
from write_results import machine_lines as codec_machine_lines  # noqa: E402

ROUNDS_DEFAULT = 3
ROUNDS_MIN = 3
POLL_EVERY = 10_000
PACKAGES = ("eoslog", "confluent-kafka", "numpy")
TOPIC = "bench"
EOSLOG_CONFIG = {
    "batch.num.messages": BATCH_RECORDS,
    "batch.size": 1 << 20,
    "linger.ms": 100,
}
# docs/bench.md targets (ratios of medians of per-round ratios).
PRODUCE_TARGET_CONFLUENT = 2.5
PRODUCE_TARGET_SQLITE = 3.0
PRODUCE_BATCH_TARGET_CONFLUENT = 10.0
COMMIT_TARGET_FRACTION = 0.80
CONTENDERS = (
    "eoslog produce() none",
    "eoslog produce() commit",
    "eoslog produce_batch() none",
    "eoslog produce_batch() commit",
    "confluent-kafka idempotent (mock)",
    "SQLite WAL NORMAL",
    "SQLite WAL FULL",
)


def eoslog_run(root: str, values: list[bytes], durability: str, batch: bool, timer: Timer) -> float:
    path = tempfile.mkdtemp(prefix="producer-", dir=root)
    broker = eoslog.open(path, durability=durability, background=False)
    try:
        broker.create_topic(TOPIC, 1)
        producer = broker.producer(EOSLOG_CONFIG)

        def produce_each() -> None:
            produce = producer.produce
            for i, value in enumerate(values):
                produce(TOPIC, value)
                if i % POLL_EVERY == 0:
                    producer.poll(0)
            if producer.flush() != 0:
                raise AssertionError("flush left messages queued")

        def produce_batch() -> None:
            producer.produce_batch(TOPIC, values, partition=0)
            if producer.flush() != 0:
                raise AssertionError("flush left messages queued")

        elapsed = timer(produce_batch if batch else produce_each)
        landed = broker.log(TOPIC, 0).log_end_offset
        if landed != len(values):
            raise AssertionError(f"eoslog: {landed} records landed, expected {len(values)}")
        producer.close()
    finally:
        broker.close()
        shutil.rmtree(path, ignore_errors=True)
    return elapsed


def confluent_run(values: list[bytes], timer: Timer) -> float:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "test.mock.num.brokers": 1,
            "enable.idempotence": True,
            "batch.num.messages": BATCH_RECORDS,
            "linger.ms": 5,
        }
    )
    delivered = [0]

    def count(err: object, msg: object) -> None:
        if err is None:
            delivered[0] += 1

    producer.produce(TOPIC, b"warm", on_delivery=count)  # creates the topic on the mock
    producer.flush()
    delivered[0] = 0

    def produce_each() -> None:
        produce = producer.produce
        for i, value in enumerate(values):
            try:
                produce(TOPIC, value, on_delivery=count)
            except BufferError:
                producer.poll(0.01)
                produce(TOPIC, value, on_delivery=count)
            if i % POLL_EVERY == 0:
                producer.poll(0)
        if producer.flush() != 0:
            raise AssertionError("confluent flush left messages queued")

    elapsed = timer(produce_each)
    if delivered[0] != len(values):
        raise AssertionError(f"confluent: {delivered[0]} delivered, expected {len(values)}")
    return elapsed


def sqlite_run(root: str, values: list[bytes], synchronous: str, timer: Timer) -> float:
    path = os.path.join(root, f"bench-{synchronous}.sqlite")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(f"PRAGMA synchronous={synchronous}")
    connection.execute("CREATE TABLE log (offset INTEGER PRIMARY KEY, value BLOB)")

    def insert() -> None:
        for start in range(0, len(values), BATCH_RECORDS):
            connection.execute("BEGIN")
            connection.executemany(
                "INSERT INTO log (value) VALUES (?)",
                ((v,) for v in values[start : start + BATCH_RECORDS]),
            )
            connection.execute("COMMIT")

    elapsed = timer(insert)
    (rows,) = connection.execute("SELECT count(*) FROM log").fetchone()
    connection.close()
    if rows != len(values):
        raise AssertionError(f"SQLite: {rows} rows, expected {len(values)}")
    return elapsed


def runners(root: str, values: list[bytes], timer: Timer) -> dict[str, Callable[[], float]]:
    return {
        "eoslog produce() none": lambda: eoslog_run(root, values, "none", False, timer),
        "eoslog produce() commit": lambda: eoslog_run(root, values, "commit", False, timer),
        "eoslog produce_batch() none": lambda: eoslog_run(root, values, "none", True, timer),
        "eoslog produce_batch() commit": lambda: eoslog_run(root, values, "commit", True, timer),
        "confluent-kafka idempotent (mock)": lambda: confluent_run(values, timer),
        "SQLite WAL NORMAL": lambda: sqlite_run(root, values, "NORMAL", timer),
        "SQLite WAL FULL": lambda: sqlite_run(root, values, "FULL", timer),
    }


def measure(args: argparse.Namespace, root: str) -> dict[str, list[float]]:
    values = make_values(args.records)
    timer = Timer(args.gc == "on")
    runs = {name: run for name, run in runners(root, values, timer).items() if name in args.paths}
    for name, run in runs.items():
        print(f"warm-up: {name} ...", flush=True)
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for round_number, order in enumerate(orders(list(runs), args.rounds)):
        for name in order:
            times[name].append(runs[name]())
        print(f"round {round_number + 1}/{args.rounds} done", flush=True)
    return times


def render(
    argv: Sequence[str], args: argparse.Namespace, times: dict[str, list[float]], seconds: float
) -> str:
    records = args.records

    def rate(name: str) -> list[float]:
        return [records / t for t in times[name]]

    def ratio(ours: str, peer: str) -> list[float]:
        return [p / o for o, p in zip(times[ours], times[peer], strict=True)]

    def millions(value: float) -> str:
        return f"{value / 1e6:.2f} M"

    def x(value: float) -> str:
        return f"{value:.2f}×"

    lines = [
        "# eoslog producer benchmarks: produce() and produce_batch() against their peers",
        "",
        f"Command: `{command_line(argv)}`  ",
        f"Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}; wall time {seconds:.0f} s  ",
        codec_line() + "  ",
        tree_line(),
        "",
        "## Machine",
        "",
        *codec_machine_lines(PACKAGES),
        f"- load average at the end: {', '.join(f'{v:.2f}' for v in os.getloadavg())}",
        "",
        "## Method",
        "",
        f"Workload: {records:,} records, value {VALUE_BYTES} B JSON-like text, key null, "
        f"{BATCH_RECORDS:,} records per batch, one partition, no compression. "
        + (__doc__ or "").split("\n\n", 2)[2].split("Per contender")[0].replace("\n", " ").strip(),
        "",
        f"One warm-up per contender, then {args.rounds} rounds, contenders in turn (order "
        "reversed every other round); cyclic GC "
        f"{args.gc} while timing. Ratios are medians of per-round ratios of times.",
        "",
        "## Records per second",
        "",
        "| contender | median records/s | min – max | median s |",
        "|---|---:|---:|---:|",
    ]
    for name in times:
        rates = rate(name)
        lines.append(
            f"| {name} | {millions(statistics.median(rates))} | {spread(rates, millions)} | "
            f"{statistics.median(times[name]):.3f} |"
        )
    peer = "confluent-kafka idempotent (mock)"
    lines += ["", "## Ratios (eoslog ÷ peer, records/s)", ""]
    for ours in [n for n in times if n.startswith("eoslog")]:
        for other in [n for n in times if not n.startswith("eoslog")]:
            values = ratio(ours, other)
            lines.append(f"- {ours} ÷ {other}: {median_spread(values, x)}")
    targets = []
    if peer in times and "eoslog produce() none" in times:
        values = ratio("eoslog produce() none", peer)
        targets.append(
            Target(
                "produce() per record (idempotent; docs/bench.md states it transactional)",
                f"÷ {peer}",
                f"≥ {PRODUCE_TARGET_CONFLUENT}×",
                median_spread(values, x),
                statistics.median(values) >= PRODUCE_TARGET_CONFLUENT,
            )
        )
    if "SQLite WAL NORMAL" in times and "eoslog produce() none" in times:
        values = ratio("eoslog produce() none", "SQLite WAL NORMAL")
        targets.append(
            Target(
                "produce() per record",
                "÷ SQLite WAL NORMAL",
                f"≥ {PRODUCE_TARGET_SQLITE}×",
                median_spread(values, x),
                statistics.median(values) >= PRODUCE_TARGET_SQLITE,
            )
        )
    if peer in times and "eoslog produce_batch() none" in times:
        values = ratio("eoslog produce_batch() none", peer)
        targets.append(
            Target(
                "produce_batch()",
                f"÷ {peer}",
                f"≥ {PRODUCE_BATCH_TARGET_CONFLUENT}×",
                median_spread(values, x),
                statistics.median(values) >= PRODUCE_BATCH_TARGET_CONFLUENT,
            )
        )
    for kind in ("produce()", "produce_batch()"):
        none, commit = f"eoslog {kind} none", f"eoslog {kind} commit"
        if none in times and commit in times:
            values = [n / c for n, c in zip(times[none], times[commit], strict=True)]
            targets.append(
                Target(
                    f"{kind} durability commit",
                    'of the "none" rate',
                    f"≥ {COMMIT_TARGET_FRACTION:.0%}",
                    median_spread(values, lambda v: f"{v:.0%}"),
                    statistics.median(values) >= COMMIT_TARGET_FRACTION,
                )
            )
    lines += [
        "",
        "## Targets (docs/bench.md)",
        "",
        "| path | figure | target | measured (median; min – max) | status |",
        "|---|---|---|---|---|",
        *(t.row() for t in targets),
        "",
    ]
    return "\n".join(lines)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=RECORDS_DEFAULT)
    parser.add_argument("--rounds", type=int, default=ROUNDS_DEFAULT)
    parser.add_argument("--paths", default=",".join(CONTENDERS), help="comma-separated names")
    parser.add_argument("--tmp", default="/tmp")
    parser.add_argument("--gc", choices=("off", "on"), default="off")
    parser.add_argument("--output", type=FilePath, default=BENCH_DIR / "RESULTS-producer.md")
    args = parser.parse_args(argv)
    if args.rounds < ROUNDS_MIN:
        parser.error(f"--rounds must be at least {ROUNDS_MIN} (docs/bench.md)")
    args.paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    unknown = set(args.paths) - set(CONTENDERS)
    if unknown:
        parser.error(f"unknown contenders: {', '.join(sorted(unknown))}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    started = time.perf_counter()
    root = tempfile.mkdtemp(prefix="eoslog-producerbench-", dir=args.tmp)
    try:
        times = measure(args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    text = render(argv, args, times, time.perf_counter() - started)
    print(text)
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
