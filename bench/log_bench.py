"""Measure eoslog's partition log against the physical limits of this machine, in one run, and
write bench/RESULTS-log.md.

    python bench/log_bench.py [--rounds R] [--paths append,read,recovery,open] [--tmp DIR]
                              [--quick] [--profile] [--keep]

Four paths (docs/bench.md targets), each on data built once in a fresh directory under --tmp,
eoslog and its peer alternating round by round in this process (contenders_log.py has the timed
bodies, workload.py the data):

1. append: `PartitionLog.append_batch` of prebuilt ~1 MiB batches (full validation,
   durability="none") against raw sequential `os.write` of the same bytes to a file in the
   same log directory; also both with one fsync at the end. GiB/s and the ratio (≥ 60%).
2. read: `log.read(offset, max_bytes=1)` at random offsets of a 10,000,000-record partition,
   each call timed on its own; p50/p99/p999 (p99 ≤ 20 µs), next to `read_header` on the
   returned bytes and to the floors: bisect + `os.pread`, bisect + a slice of the mapped file.
3. recovery: `eoslog.open` + `close` of that partition after removing the clean-shutdown
   marker and the recovery-point checkpoint; GB/s of segment (≥ 1 GB/s), page cache warm,
   next to `os.pread` of the same files in 8 MiB chunks.
4. open: a clean `eoslog.open(path, background=False)` of a partition of 1,000 segments
   (< 0.2 s), next to the syscall floor: listdir plus open/fstat/close of every file.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path as FilePath

import numpy as np

sys.path.insert(0, str(FilePath(__file__).resolve().parent))

import contenders_log
import eoslog
import harness
import prose
from eoslog import limits
from harness import Runs, median_spread, pct, spread
from report import Report, Section
from scenarios import (
    LOG,
    LOG_APPEND_TARGETS,
    LOG_OPEN_TARGET,
    LOG_READ_BATCH_RECORDS,
    LOG_READ_SEGMENT_BYTES,
    LOG_READ_TARGET,
    LOG_RECOVERY_TARGET,
)
from workload import (
    CLEAN_SHUTDOWN_FILE,
    MIB,
    RECOVERY_POINT_FILE,
    SEGMENT_BATCH_RECORDS,
    SEGMENT_BYTES_SMALL,
    VALUE_BYTES,
    BatchTable,
    Partition,
    build_append_batches,
    build_partition,
    build_segments,
    remove_recovery_markers,
    value_pool,
)

PACKAGES = ("eoslog", "numpy", "crc32c")
SEED = 20_260_101
GIB = 1 << 30
READ_WARMUP_SAMPLES = 1_000


# --- 1. append --------------------------------------------------------------------------------


def measure_append(args: argparse.Namespace, root: str, pool: Sequence[bytes]) -> Section:
    start = time.perf_counter()
    batches, per_batch = build_append_batches(pool, args.append_mib)
    build_seconds = time.perf_counter() - start
    total = sum(len(b) for b in batches)
    records = per_batch * len(batches)
    directory = os.path.join(root, "append")
    broker = eoslog.open(directory, durability="none", background=False)
    try:
        sides = contenders_log.append_contenders(broker, directory, batches, records)
        runs = harness.alternate(sides, args.rounds, args.timer, quiet=True)
        parts = harness.alternate(contenders_log.append_parts(batches), args.rounds, args.timer)
        if args.profile:
            state = sides[0].prepare()
            harness.profile("append_batch", lambda: sides[0].run(state))
            sides[0].finish(state)
    finally:
        broker.close()

    lines = [
        prose.LOG_APPEND.format(
            batches=len(batches),
            per_batch=per_batch,
            records=records,
            mib=total / MIB,
            batch_bytes=len(batches[0]),
            value_bytes=VALUE_BYTES,
            build_seconds=build_seconds,
            max_message_bytes=contenders_log.APPEND_MAX_MESSAGE_BYTES,
        ),
        "",
    ]
    rows = []
    for name in runs:
        rates = runs.rates(name, total / GIB)
        median_s = f"{runs.median(name):.3f}"
        rows.append(
            [name, harness.two(statistics.median(rates)), spread(rates, harness.two), median_s]
        )
    header = ["contender", "median GiB/s", "min – max", "median s per run"]
    lines += harness.table(header, rows)
    ratios = []
    for target in LOG_APPEND_TARGETS:
        values = runs.speedup(target.ours, target.peer)
        ratios.append(
            [
                target.ours.removeprefix("eoslog "),
                pct(statistics.median(values)),
                spread(values, pct),
            ]
        )
    header = ["eoslog ÷ raw write", "ratio (median of per-round ratios)", "min – max"]
    lines += ["", *harness.table(header, ratios), ""]
    per_batch_us = {name: runs.median(name) / len(batches) * 1e6 for name in runs}
    described = "; ".join(
        f"{name} {total / parts.median(name) / GIB:.2f} GiB/s = "
        f"{parts.median(name) / len(batches) * 1e6:.0f} µs"
        for name in parts
    )
    lines.append(
        prose.LOG_APPEND_PARTS.format(
            rounds=args.rounds,
            batch_mib=len(batches[0]) / MIB,
            parts=described,
            append_us=per_batch_us["eoslog append_batch"],
            raw_us=per_batch_us["raw os.write"],
        )
    )
    return Section(prose.LOG_APPEND_TITLE, lines, [t.of(runs) for t in LOG_APPEND_TARGETS])


# --- 2. read ----------------------------------------------------------------------------------


def read_rounds(
    args: argparse.Namespace, partition: Partition, label: str
) -> tuple[dict[str, list[np.ndarray]], list[str]]:
    """Alternate eoslog's reads and the floors over the same random offsets per round: per
    row, the nanoseconds of each call timed, per round; and notes."""

    @functools.cache
    def schedule(k: int) -> tuple[list[int], float]:
        if k == 0:  # the warm-up
            rng = random.Random(SEED - 1)
            offsets = [rng.randrange(partition.records) for _ in range(READ_WARMUP_SAMPLES)]
            return offsets, args.read_round_seconds / 2
        rng = random.Random(SEED + k)
        return [rng.randrange(partition.records) for _ in range(args.read_samples)], (
            args.read_round_seconds
        )

    broker = eoslog.open(partition.root, durability="none", background=False)
    table = BatchTable.of(partition)
    try:
        log = broker.log(partition.topic, 0)
        check_rng = random.Random(SEED)
        contenders_log.check_reads(
            log, table, [check_rng.randrange(partition.records) for _ in range(100)]
        )
        sides = contenders_log.read_contenders(log, table, schedule, args.timer)
        runs = harness.alternate(sides, args.rounds, args.timer)
        if args.profile:
            offsets = [check_rng.randrange(partition.records) for _ in range(2_000)]
            harness.profile(f"read ({label})", lambda: sides[0].run((offsets, 10.0)))
    finally:
        table.close()
        broker.close()
    rows: dict[str, list[np.ndarray]] = {}
    for measured in runs.values():
        for per_round in measured.values:
            for row, ns in per_round.items():
                rows.setdefault(row, []).append(ns)
    notes = []
    short = [len(ns) for ns in rows["eoslog"] if len(ns) < args.read_samples]
    if short:
        notes.append(
            prose.LOG_READ_BUDGET.format(
                label=label,
                budget=args.read_round_seconds,
                fewest=min(short),
                most=max(short),
                samples=args.read_samples,
            )
        )
    return rows, notes


def measure_read(
    args: argparse.Namespace, root: str, pool: Sequence[bytes]
) -> tuple[Section, Partition]:
    partition = read_partition(root, pool, args.read_records, LOG_READ_BATCH_RECORDS)
    sets = [(f"{LOG_READ_BATCH_RECORDS:,}-record batches", partition)]
    lines = [
        prose.LOG_READ.format(
            records=partition.records,
            batches=partition.batches,
            batch_records=LOG_READ_BATCH_RECORDS,
            batch_bytes=partition.batch_bytes,
            value_bytes=VALUE_BYTES,
            segment_mib=LOG_READ_SEGMENT_BYTES // MIB,
            segments=partition.segments,
            gb=partition.log_bytes / 1e9,
            build_seconds=partition.build_seconds,
            samples=args.read_samples,
        )
    ]
    if args.read_variant_batch_records:
        variant_records = args.read_variant_batch_records
        variant = read_partition(root, pool, args.read_records, variant_records, "read-variant")
        sets.append((f"variant: {variant_records:,}-record batches", variant))
        lines.append(
            prose.LOG_READ_VARIANT.format(
                batches=variant.batches,
                batch_records=variant_records,
                batch_bytes=variant.batch_bytes,
                segments=variant.segments,
                build_seconds=variant.build_seconds,
            )
        )
    lines += ["", prose.LOG_READ_TABLE, ""]
    targets = []
    notes: list[str] = []
    cells = []
    for label, data in sets:
        rows, found = read_rounds(args, data, label)
        notes += found
        for row, rounds in rows.items():
            per_round = harness.round_percentiles(rounds)
            counts = [len(ns) for ns in rounds]
            count = (
                f"{min(counts):,}"
                if min(counts) == max(counts)
                else spread(counts, lambda v: f"{v:,}")
            )
            latencies = [
                median_spread([float(p[i]) for p in per_round], lambda v: f"{v:,.1f}")
                for i in range(len(harness.PERCENTILES))
            ]
            cells.append([label, prose.LOG_READ_ROWS[row], count, *latencies])
            if row == "eoslog" and data is partition:
                target = dataclasses.replace(
                    LOG_READ_TARGET, figure=LOG_READ_TARGET.figure.format(label=label)
                )
                targets.append(target.row([float(p[1]) for p in per_round]))
    header = ["data", "contender", "calls timed per round", "p50 µs", "p99 µs", "p99.9 µs"]
    lines += harness.table(header, cells, left=2)
    lines += ["", *notes]
    return Section(prose.LOG_READ_TITLE, lines, targets), partition


def read_partition(
    root: str, pool: Sequence[bytes], records: int, batch_records: int, name: str = "read"
) -> Partition:
    return build_partition(
        os.path.join(root, name),
        "read",
        pool,
        records=records,
        batch_records=batch_records,
        config={"segment.bytes": LOG_READ_SEGMENT_BYTES},
    )


# --- 3. recovery and 4. clean open ------------------------------------------------------------


def open_phases(runs: Runs, floor: str) -> dict[str, list[float]]:
    """Per round: open, close, their sum (timed apart, in the same round) and the floor."""
    opened, closed = runs.seconds("eoslog open"), runs.seconds("eoslog close")
    return {
        "open": opened,
        "close": closed,
        "open + close": [o + c for o, c in zip(opened, closed, strict=True)],
        floor: runs.seconds(floor),
    }


def measure_recovery(
    args: argparse.Namespace, root: str, pool: Sequence[bytes], partition: Partition | None
) -> Section:
    if partition is None:
        partition = read_partition(root, pool, args.read_records, LOG_READ_BATCH_RECORDS)
    files = partition.log_files()
    sides = contenders_log.open_contenders(
        partition, True, lambda: contenders_log.read_files_raw(files), "raw"
    )
    phases = open_phases(harness.alternate(sides, args.rounds, args.timer, quiet=True), "raw")
    if args.profile:

        def recover() -> None:
            remove_recovery_markers(partition.root)
            eoslog.open(partition.root, durability="none", background=False).close()

        harness.profile("recovery open", recover)
    chunk_mib = limits.recovery_chunk_bytes // MIB
    labels = {
        "open": "eoslog open (recovery)",
        "close": "eoslog close",
        "open + close": "eoslog open + close",
        "raw": f"raw os.pread, {chunk_mib} MiB chunks",
    }
    rows = []
    for key, values in phases.items():
        rates = [partition.log_bytes / s / 1e9 for s in values]
        # close scans nothing: a rate per byte of segment would mean nothing there.
        rate = (
            ["—", "—"]
            if key == "close"
            else [harness.two(statistics.median(rates)), spread(rates, harness.two)]
        )
        rows.append(
            [
                labels[key],
                f"{statistics.median(values):.3f}",
                spread(values, lambda v: f"{v:.3f}"),
                *rate,
            ]
        )
    header = ["contender", "median s", "min – max", "GB/s of segment (median)", "min – max"]
    ratios = harness.per_round(phases["raw"], phases["open + close"])
    lines = [
        prose.LOG_RECOVERY.format(
            records=partition.records,
            batches=partition.batches,
            batch_bytes=partition.batch_bytes,
            segments=partition.segments,
            gb=partition.log_bytes / 1e9,
            clean_file=CLEAN_SHUTDOWN_FILE,
            recovery_file=RECOVERY_POINT_FILE,
            chunk_mib=chunk_mib,
        ),
        "",
        *harness.table(header, rows),
        "",
        prose.LOG_RECOVERY_RATIO.format(ratio=median_spread(ratios, pct)),
    ]
    rate = [partition.log_bytes / s / 1e9 for s in phases["open + close"]]
    return Section(prose.LOG_RECOVERY_TITLE, lines, [LOG_RECOVERY_TARGET.row(rate)])


def measure_open(args: argparse.Namespace, root: str, pool: Sequence[bytes]) -> Section:
    partition = build_segments(os.path.join(root, "open"), pool, args.segments)
    files = len(os.listdir(partition.directory))
    sides = contenders_log.open_contenders(
        partition, False, lambda: contenders_log.open_files_raw(partition.directory), "floor"
    )
    phases = open_phases(harness.alternate(sides, args.rounds, args.timer, quiet=True), "floor")
    if args.profile:
        harness.profile("clean open", lambda: eoslog.open(partition.root, background=False).close())
    labels = {
        "open": "eoslog open",
        "close": "eoslog close",
        "open + close": "eoslog open + close",
        "floor": "floor: listdir + open/fstat/close of every file",
    }
    rows = [[labels[k], *_ms(v)] for k, v in phases.items()]
    ratios = harness.per_round(phases["floor"], phases["open"])
    lines = [
        prose.LOG_OPEN.format(
            segments=partition.segments,
            segment_bytes=SEGMENT_BYTES_SMALL,
            batch_bytes=partition.batch_bytes,
            batch_records=SEGMENT_BATCH_RECORDS,
            files=files,
            build_seconds=partition.build_seconds,
        ),
        "",
        *harness.table(["contender", "median ms", "min – max"], rows),
        "",
        prose.LOG_OPEN_RATIO.format(ratio=median_spread(ratios, pct)),
    ]
    target = dataclasses.replace(
        LOG_OPEN_TARGET, figure=LOG_OPEN_TARGET.figure.format(segments=partition.segments)
    )
    title = prose.LOG_OPEN_TITLE.format(segments=partition.segments)
    return Section(title, lines, [target.row([s * 1e3 for s in phases["open"]])])


def _ms(values: Sequence[float]) -> list[str]:
    def fmt(value: float) -> str:
        return f"{value * 1e3:,.1f}"

    return [fmt(statistics.median(values)), spread(values, fmt)]


def measure(args: argparse.Namespace, root: str) -> Report:
    pool = value_pool()
    sections = []
    read = None
    if "append" in args.paths:
        print("measuring append ...", flush=True)
        sections.append(measure_append(args, root, pool))
    if "read" in args.paths:
        print("measuring read ...", flush=True)
        section, read = measure_read(args, root, pool)
        sections.append(section)
    if "recovery" in args.paths:
        print("measuring recovery ...", flush=True)
        sections.append(measure_recovery(args, root, pool, read))
    if "open" in args.paths:
        print("measuring open ...", flush=True)
        sections.append(measure_open(args, root, pool))
    method = prose.LOG_METHOD.format(rounds=args.rounds, gc=args.gc)
    return Report(prose.LOG_TITLE, method, PACKAGES, sections)


if __name__ == "__main__":
    sys.exit(harness.main(LOG, measure, __doc__ or ""))
