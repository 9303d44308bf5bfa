"""The log cleaner (issue 14, item 5): its throughput (MB of segments read per second of a
cleaning pass) and the p99 latency of `append_batch` to a compacted partition with and
without the cleaner running on it, in one run, the two append phases alternated round by
round.

    python bench/cleaner_bench.py [--records N] [--keys K] [--appends A] [--rounds R]
        [--tmp DIR] [--output PATH] [--quick]

Each round: a compacted topic is filled with N records of 100 B values over K keys (64 KiB
segments, durability "none"), then A one-record appends are timed one by one, once with
nothing else running and once while a thread runs the cleaner (compactor.clean_log, every
segment rolled by the appends making new dirt) in a loop on the same partition; the order of
the two phases alternates. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path as FilePath

sys.path.insert(0, str(FilePath(__file__).resolve().parent))

import eoslog
import harness
from eoslog.log import compactor
from eoslog.log.partition import PartitionLog
from eoslog.record import codec
from report import Report, Section
from scenarios import CLEANER

PACKAGES = ("eoslog",)
CONFIG = {"cleanup.policy": "compact", "segment.bytes": 64 * 1024, "min.cleanable.dirty.ratio": 0}
VALUE = b"v" * 100


def one_record(key: int) -> bytes:
    builder = codec.BatchBuilder()
    builder.append(1_700_000_000_000, b"key%08d" % key, VALUE)
    return builder.build()


def filled(root: str, records: int, keys: int) -> tuple[eoslog.Broker, PartitionLog]:
    broker = eoslog.open(root, durability="none", background=False)
    broker.create_topic("t", 1, CONFIG)
    log = broker.log("t", 0)
    for number in range(records):
        log.append_batch(one_record(number % keys))
    return broker, log


def append_latencies(log: PartitionLog, appends: int, keys: int) -> list[float]:
    batches = [one_record(number % keys) for number in range(appends)]
    seconds = []
    for batch in batches:
        started = time.perf_counter()
        log.append_batch(batch)
        seconds.append(time.perf_counter() - started)
    return seconds


def with_cleaner(log: PartitionLog, appends: int, keys: int) -> tuple[list[float], float, int]:
    """The append latencies while a thread cleans in a loop; the thread's cleaning time
    and the bytes its passes read."""
    stop = threading.Event()
    cleaned = {"seconds": 0.0, "bytes": 0}

    def clean() -> None:
        throttle = compactor.Throttle(1 << 62)
        while not stop.is_set():
            started = time.perf_counter()
            done = compactor.clean_log(log, int(time.time() * 1000), throttle)
            if done is not None:
                cleaned["seconds"] += time.perf_counter() - started
                cleaned["bytes"] += done.bytes_read

    thread = threading.Thread(target=clean)
    thread.start()
    try:
        seconds = append_latencies(log, appends, keys)
    finally:
        stop.set()
        thread.join()
    return seconds, float(cleaned["seconds"]), int(cleaned["bytes"])


def measure(args: argparse.Namespace, root: str) -> Report:
    p99s: dict[str, list[float]] = {"without": [], "with": []}
    rates: list[float] = []
    for round_ in range(args.rounds):
        phases = ("without", "with") if round_ % 2 == 0 else ("with", "without")
        for phase in phases:
            directory = os.path.join(root, f"{round_}-{phase}")
            broker, log = filled(directory, args.records, args.keys)
            try:
                if phase == "without":
                    seconds = append_latencies(log, args.appends, args.keys)
                else:
                    seconds, busy, read = with_cleaner(log, args.appends, args.keys)
                    if busy > 0:
                        rates.append(read / busy / 1e6)
            finally:
                broker.close()
            p99s[phase].append(statistics.quantiles(seconds, n=100)[98] * 1e6)
        print(f"round {round_}: p99 {p99s['without'][-1]:.1f} / {p99s['with'][-1]:.1f} µs")

    def spread(values: list[float], unit: str) -> str:
        return f"{statistics.median(values):.1f} ({min(values):.1f} – {max(values):.1f}) {unit}"

    rows = [
        ["p99 append latency, no cleaner", spread(p99s["without"], "µs")],
        ["p99 append latency, cleaner running", spread(p99s["with"], "µs")],
        ["cleaner throughput (segments read)", spread(rates, "MB/s") if rates else "no pass"],
    ]
    method = (
        f"A compacted topic of {args.records:,} records (100 B values, {args.keys:,} keys, "
        f"64 KiB segments, durability none); per round {args.appends:,} one-record appends "
        "timed one by one without, then with, the cleaner looping on the same partition in a "
        f"thread (the order alternating); {args.rounds} rounds; median (min – max)."
    )
    lines = harness.table(["figure", "median (min – max)"], rows)
    return Report("# eoslog log cleaner benchmark", method, PACKAGES, [Section("Results", lines)])


if __name__ == "__main__":
    sys.exit(harness.main(CLEANER, measure, __doc__ or ""))
