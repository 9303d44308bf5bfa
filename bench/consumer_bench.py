"""Measure the Consumer's read paths against the one-object-per-record floor and a SQLite scan,
in one run, and write bench/RESULTS-consumer.md.

    python bench/consumer_bench.py [--records N] [--latency-samples S] [--rounds R]
                                   [--paths read,wakeup] [--tmp DIR] [--quick]

The standard workload (key null, value 100 B, 1,000 records per batch, one partition) written with
`append_batch`, then read back from offset 0 by every contender of contenders_consumer.py's
`consume_contenders` (the floors, consume(), consume_arrow(), a SQLite scan, memcpy), alternating
round by round. Targets (scenarios.py): consume() >= 70% of the floor; consume_arrow() >= 3x the
SQLite scan and >= 50% of memcpy bandwidth in payload bytes; the drop-in
(eoslog.confluent.Consumer) consume() and poll() >= 0.95x the native consumer's.

Wake-up (the second section): a consumer waiting in another thread, woken by each record this
thread produces, against a `queue.Queue` hand-off between the same two threads. Target: the
produce → poll p99 <= 2x the hand-off p99 of the same round.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path as FilePath

sys.path.insert(0, str(FilePath(__file__).resolve().parent))


import contenders_consumer
import eoslog
import eoslog.confluent
import harness
import prose
from contenders_consumer import ARROW_RECORDS, CONSUME_MESSAGES, read_back
from report import Report, Section
from scenarios import (
    CONSUMER,
    CONSUMER_CONTENDERS,
    CONSUMER_RATIOS,
    CONSUMER_SEGMENT_BYTES,
    CONSUMER_TARGETS,
    WAKEUP_ARROW,
    WAKEUP_COMMITTED,
    WAKEUP_CONTENDERS,
    WAKEUP_POLL,
    WAKEUP_QUEUE,
    WAKEUP_TARGET,
)
from workload import Workload, write_batches

PACKAGES = ("eoslog", "numpy", "pyarrow")


def measure(args: argparse.Namespace, root: str) -> Report:
    sections, methods = [], []
    if "read" in args.paths:
        section, method = measure_read(args, root)
        sections.append(section)
        methods.append(method)
    if "wakeup" in args.paths:
        sections.append(measure_wakeup(args, root))
        methods.append(
            prose.WAKEUP_METHOD.format(
                samples=args.latency_samples,
                warmup=contenders_consumer.WAKEUP_WARMUP,
                rounds=args.rounds,
            )
        )
    return Report(prose.CONSUMER_TITLE, "\n\n".join(methods), PACKAGES, sections)


def measure_wakeup(args: argparse.Namespace, root: str) -> Section:
    samples = args.latency_samples
    sides = [
        contenders_consumer.queue_handoff(WAKEUP_QUEUE, samples),
        contenders_consumer.append_to_poll(WAKEUP_POLL, root, samples, "poll"),
        contenders_consumer.append_to_poll(WAKEUP_ARROW, root, samples, "arrow"),
        contenders_consumer.append_to_poll(WAKEUP_COMMITTED, root, samples, "committed"),
    ]
    # Each run warms up inside (WAKEUP_WARMUP hand-offs first).
    runs = harness.alternate(sides, args.rounds, args.timer, warmup=False)
    found, rows = harness.latency_rows(runs, WAKEUP_CONTENDERS)
    ratio = [
        float(ours[1] / anchor[1])
        for ours, anchor in zip(found[WAKEUP_POLL], found[WAKEUP_QUEUE], strict=True)
    ]
    lines = harness.table(["path", "p50", "p99", "p99.9"], rows)
    return Section(prose.WAKEUP_TITLE, lines, [WAKEUP_TARGET.row(ratio)])


def measure_read(args: argparse.Namespace, root: str) -> tuple[Section, str]:
    print(f"building {args.records:,} records under {root} ...", flush=True)
    path = os.path.join(root, "log")
    broker = eoslog.open(path, durability="none", background=False)
    try:
        committed = write_batches(broker, Workload.build(args.records), CONSUMER_SEGMENT_BYTES)
    finally:
        broker.close()
    # Opened again through the drop-in's registry, so that its consumers share the broker the
    # native ones read (an AdminClient holds it open; it holds nothing else).
    keeper = eoslog.confluent.AdminClient({"eoslog.dir": path, "eoslog.durability": "none"})
    try:
        sqlite_path = os.path.join(root, "records.sqlite")
        runs, gib_s = read_back(
            keeper._broker, committed, sqlite_path, CONSUMER_CONTENDERS, args.rounds, args.timer
        )
    finally:
        keeper.close()
    payload = sum(len(v) for v in committed.values[0])
    lines = [
        *harness.rates_and_ratios(
            runs,
            CONSUMER_CONTENDERS,
            committed.committed,
            "records/s",
            ("median ms/run", harness.ms0),
            CONSUMER_RATIOS,
        ),
        "",
        prose.READ_BANDWIDTH.format(gib_s=gib_s, which="", bytes=payload),
    ]
    targets = [t.of(runs) for t in CONSUMER_TARGETS]
    method = prose.CONSUMER_METHOD.format(
        records=args.records,
        segments=committed.segments,
        consume_messages=CONSUME_MESSAGES,
        arrow_records=ARROW_RECORDS,
        rounds=args.rounds,
        gc=args.gc,
    )
    return Section("Read throughput", lines, targets), method


if __name__ == "__main__":
    sys.exit(harness.main(CONSUMER, measure, __doc__ or ""))
