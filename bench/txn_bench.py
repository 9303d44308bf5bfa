"""Measure eoslog's transactions against their peers, in one run, and write
bench/RESULTS-txn.md (the transaction rows of docs/bench.md's targets).

    python bench/txn_bench.py [--records N] [--rounds R] [--latency-samples S] [--quick]
                              [--paths produce,latency,read] [--tmp DIR] [--profile]

Three sections (scenarios.py has their contenders and targets; contenders_producer.py,
contenders_txn.py and contenders_consumer.py the timed bodies), each alternating its contenders
round by round: transactional produce() every 1,000 records against confluent-kafka's transactional
producer on the mock cluster and SQLite; single-record transaction latency against a 4 KiB write +
fdatasync; read_committed consume() and consume_arrow() with a third of the transactions aborted,
against a SQLite scan, memcpy and the one-object-per-record floor.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path as FilePath

sys.path.insert(0, str(FilePath(__file__).resolve().parent))

import contenders_consumer
import contenders_producer
import contenders_txn
import eoslog
import harness
import prose
from harness import median_spread, us, x
from report import Report, Section
from scenarios import (
    CONFLUENT_TRANSACTIONAL,
    TXN,
    TXN_ABORT_EVERY,
    TXN_CALLS_COUNT,
    TXN_CALLS_TARGET,
    TXN_FLUSH_TARGET,
    TXN_LATENCY_AT_RATE,
    TXN_LATENCY_COMMIT,
    TXN_LATENCY_COMMIT_SLACK_US,
    TXN_LATENCY_CONTENDERS,
    TXN_LATENCY_FLUSH,
    TXN_LATENCY_FSYNC,
    TXN_LATENCY_LOADED,
    TXN_LATENCY_NONE,
    TXN_LATENCY_SQLITE_FULL,
    TXN_LATENCY_SQLITE_NORMAL,
    TXN_LATENCY_TARGETS,
    TXN_LOAD_CONTENDERS,
    TXN_PRODUCE_BATCH,
    TXN_PRODUCE_COMMIT,
    TXN_PRODUCE_CONTENDERS,
    TXN_PRODUCE_NONE,
    TXN_PRODUCE_TARGETS,
    TXN_READ_CONTENDERS,
    TXN_READ_RATIOS,
    TXN_READ_TARGETS,
    TXN_SEGMENT_BYTES,
    TXN_SQLITE,
)
from workload import VALUE_BYTES, make_values, write_transactions

PACKAGES = ("eoslog", "confluent-kafka", "numpy", "pyarrow")
RATE_SUSTAINED = 0.99  # a fixed-rate run kept its rate if every round achieved 99% of it


def measure_produce(args: argparse.Namespace, root: str) -> Section:
    values = make_values(args.records)
    config = {"segment.bytes": TXN_SEGMENT_BYTES}
    sides = [
        contenders_producer.eoslog_producer(
            TXN_PRODUCE_NONE, root, values, "none", transactional=True, config=config
        ),
        contenders_producer.eoslog_producer(
            TXN_PRODUCE_COMMIT, root, values, "commit", transactional=True, config=config
        ),
        contenders_producer.eoslog_producer(
            TXN_PRODUCE_BATCH,
            root,
            values,
            "none",
            batch=True,
            transactional=True,
            config=config,
        ),
        contenders_producer.confluent_producer(CONFLUENT_TRANSACTIONAL, values, transactional=True),
        contenders_producer.sqlite_insert(TXN_SQLITE, root, values, "NORMAL"),
    ]
    runs = harness.alternate(sides, args.rounds, args.timer, label="produce")
    rows = harness.rate_rows(runs, TXN_PRODUCE_CONTENDERS, args.records, harness.seconds3)
    lines = [
        prose.TXN_PRODUCE.format(
            records=args.records,
            value_bytes=VALUE_BYTES,
            txn_records=contenders_producer.TXN_RECORDS,
            transactions=args.records // contenders_producer.TXN_RECORDS,
        ),
        "",
        *harness.table(["contender", "median records/s", "min – max", "median s"], rows),
        "",
        prose.TXN_PRODUCE_RATIOS,
        "",
        *(
            f"- {ours} ÷ {peer}: {median_spread(runs.speedup(ours, peer), x)}"
            for ours in (TXN_PRODUCE_NONE, TXN_PRODUCE_COMMIT, TXN_PRODUCE_BATCH)
            for peer in (CONFLUENT_TRANSACTIONAL, TXN_SQLITE)
        ),
    ]
    targets = [t.of(runs) for t in TXN_PRODUCE_TARGETS]
    return Section(prose.TXN_PRODUCE_TITLE, lines, targets)


def measure_latency(args: argparse.Namespace, root: str) -> list[Section]:
    """The single-record latency section and the under-load / fixed-rate one, from one
    alternation of all their contenders (so every ratio's two sides share a round)."""
    value = make_values(1)[0]
    samples = args.latency_samples
    load_rates: list[float] = []
    sides = [
        contenders_txn.transaction_latency(TXN_LATENCY_NONE, root, value, "none", samples),
        contenders_txn.sqlite_transaction_latency(
            TXN_LATENCY_SQLITE_NORMAL, root, value, "NORMAL", samples
        ),
        contenders_txn.produce_flush_latency(TXN_LATENCY_FLUSH, root, value, "none", samples),
        contenders_txn.transaction_latency(TXN_LATENCY_COMMIT, root, value, "commit", samples),
        contenders_txn.sqlite_transaction_latency(
            TXN_LATENCY_SQLITE_FULL, root, value, "FULL", samples
        ),
        contenders_txn.fsync_latency(TXN_LATENCY_FSYNC, root, samples),
        contenders_txn.transaction_latency(
            TXN_LATENCY_LOADED, root, value, "none", samples, load=load_rates
        ),
        *(
            contenders_txn.transaction_latency(name, root, value, durability, samples, rate=rate)
            for (durability, rate), name in TXN_LATENCY_AT_RATE.items()
        ),
    ]
    # The runs warm up inside (LATENCY_WARMUP calls each); the disk is quiet before each.
    runs = harness.alternate(sides, args.rounds, args.timer, quiet=True, warmup=False)
    found, rows = harness.latency_rows(runs, TXN_LATENCY_CONTENDERS)

    def p99(name: str) -> list[float]:
        return [float(percentiles[1]) for percentiles in found[name]]

    commit_bound = [2 * fsync + TXN_LATENCY_COMMIT_SLACK_US for fsync in p99(TXN_LATENCY_FSYNC)]
    none_ratio = harness.per_round(p99(TXN_LATENCY_NONE), p99(TXN_LATENCY_SQLITE_NORMAL))
    flush_ratio = harness.per_round(p99(TXN_LATENCY_FLUSH), p99(TXN_LATENCY_SQLITE_NORMAL))
    commit_ratio = harness.per_round(p99(TXN_LATENCY_COMMIT), commit_bound)
    commit_full = harness.per_round(p99(TXN_LATENCY_COMMIT), p99(TXN_LATENCY_SQLITE_FULL))
    lines = [
        *_percentile_table(
            prose.TXN_LATENCY.format(samples=samples, warmup=contenders_txn.LATENCY_WARMUP),
            rows,
            prose.TXN_LATENCY_RATIOS,
        ),
        f'- "none" ÷ {TXN_LATENCY_SQLITE_NORMAL}: {median_spread(none_ratio, x)}',
        f"- produce() + flush() ÷ {TXN_LATENCY_SQLITE_NORMAL}: {median_spread(flush_ratio, x)}",
        f'- "commit" ÷ (2 × fsync + {TXN_LATENCY_COMMIT_SLACK_US:g} µs): '
        f"{median_spread(commit_ratio, x)} (the bound: {median_spread(commit_bound, us)})",
        f'- "commit" ÷ {TXN_LATENCY_SQLITE_FULL}: {median_spread(commit_full, x)}',
    ]
    # Deterministic: counted once.
    calls = [contenders_txn.transaction_calls(root, value, "none", TXN_CALLS_COUNT)]
    lines += ["", prose.TXN_CALLS.format(count=TXN_CALLS_COUNT, calls=calls[0])]
    targets = [
        *(
            target.row(values)
            for target, values in zip(
                TXN_LATENCY_TARGETS,
                (none_ratio, none_ratio, commit_ratio, commit_full),
                strict=True,
            )
        ),
        TXN_FLUSH_TARGET.row(flush_ratio),
        TXN_CALLS_TARGET.row(calls),
    ]
    latency = Section(prose.TXN_LATENCY_TITLE, lines, targets)
    return [latency, _load_section(runs, samples, load_rates)]


def _percentile_table(intro: str, rows: list[list[str]], ratios: str) -> list[str]:
    """A section's paragraph, its percentile table and the heading of its ratio list."""
    return [intro, "", *harness.table(["contender", "p50", "p99", "p99.9"], rows), "", ratios, ""]


def _load_section(runs: harness.Runs, samples: int, load_rates: list[float]) -> Section:
    """Latency beside a producing thread and at fixed rates, each p99 against the unloaded
    closed-loop p99 of its durability in the same round; the rate each run achieved."""
    found, rows = harness.latency_rows(runs, TXN_LOAD_CONTENDERS)
    closed = harness.latency_rows(runs, (TXN_LATENCY_NONE, TXN_LATENCY_COMMIT))[0]
    closed_loop = {"none": TXN_LATENCY_NONE, "commit": TXN_LATENCY_COMMIT}

    def p99_ratio(name: str, anchor: str) -> str:
        mine = [float(p[1]) for p in found[name]]
        theirs = [float(p[1]) for p in closed[anchor]]
        return median_spread(harness.per_round(mine, theirs), x)

    lines = [
        *_percentile_table(
            prose.TXN_LOAD.format(samples=samples, batch=contenders_txn.LOAD_BATCH),
            rows,
            prose.TXN_LOAD_RATIOS,
        ),
        f"- {TXN_LATENCY_LOADED}: {p99_ratio(TXN_LATENCY_LOADED, TXN_LATENCY_NONE)}; the "
        f"load thread produced {median_spread(load_rates, harness.millions)} records/s",
    ]
    for (durability, rate), name in TXN_LATENCY_AT_RATE.items():
        achieved = [contenders_txn.achieved_rate(ns, rate) for ns in runs[name].values]
        kept = "sustained" if min(achieved) >= RATE_SUSTAINED * rate else "not sustained"
        lines.append(
            f"- {name}: {p99_ratio(name, closed_loop[durability])}; achieved "
            f"{median_spread(achieved, '{:,.0f}/s'.format)} ({kept})"
        )
    return Section(prose.TXN_LOAD_TITLE, lines, [])


def measure_read(args: argparse.Namespace, root: str) -> Section:
    print(f"read: producing {args.records:,} records, 1/{TXN_ABORT_EVERY} aborted ...", flush=True)
    broker = eoslog.open(os.path.join(root, "read"), durability="none", background=False)
    try:
        config = {**contenders_producer.PRODUCER_CONFIG, "transactional.id": "bench-txn"}
        committed = write_transactions(
            broker, args.records, 1, TXN_SEGMENT_BYTES, config, abort_every=TXN_ABORT_EVERY
        )
        sqlite_path = os.path.join(root, "committed.sqlite")
        runs, gib_s = contenders_consumer.read_back(
            broker, committed, sqlite_path, TXN_READ_CONTENDERS, args.rounds, args.timer
        )
    finally:
        broker.close()
    payload = sum(len(v) for v in committed.values[0])
    lines = [
        prose.TXN_READ.format(
            records=args.records,
            value_bytes=VALUE_BYTES,
            transactions=committed.transactions,
            txn_records=contenders_producer.TXN_RECORDS,
            aborted=committed.aborted,
            abort_every=TXN_ABORT_EVERY,
            segments=committed.segments,
            committed=committed.committed,
        ),
        "",
        *harness.rates_and_ratios(
            runs,
            TXN_READ_CONTENDERS,
            committed.committed,
            "committed records/s",
            ("median ms/run", harness.ms0),
            TXN_READ_RATIOS,
        ),
        "",
        prose.READ_BANDWIDTH.format(gib_s=gib_s, which="committed ", bytes=payload),
    ]
    return Section(prose.TXN_READ_TITLE, lines, [t.of(runs) for t in TXN_READ_TARGETS])


def profile_transactions(root: str) -> None:
    """cProfile of 200 single-record transactions per durability (printed, not written)."""
    value = make_values(1)[0]
    for durability in ("none", "commit"):
        side = contenders_txn.transaction_latency(durability, root, value, durability, 200)
        state = side.prepare()
        try:
            harness.profile(
                f"200 single-record transactions, durability {durability!r}",
                functools.partial(side.run, state),
            )
        finally:
            side.finish(state)


def measure(args: argparse.Namespace, root: str) -> Report:
    sections = []
    if "produce" in args.paths:
        sections.append(measure_produce(args, root))
    if "latency" in args.paths:
        sections += measure_latency(args, root)
    if "read" in args.paths:
        sections.append(measure_read(args, root))
    if args.profile:
        profile_transactions(root)
    method = prose.TXN_METHOD.format(rounds=args.rounds, gc=args.gc)
    return Report(prose.TXN_TITLE, method, PACKAGES, sections)


if __name__ == "__main__":
    sys.exit(harness.main(TXN, measure, __doc__ or ""))
