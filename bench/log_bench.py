"""Measure eoslog's partition log against the physical limits of this machine, in one run, and
write bench/RESULTS-log.md.

    python bench/log_bench.py [--rounds R] [--paths append,read,recovery,open] [--tmp DIR]

Four paths (docs/bench.md targets), each on data built once in a fresh directory under
--tmp (default /tmp), eoslog and its peer alternating round by round in this process:

1. append: `PartitionLog.append_batch` of prebuilt ~1 MiB batches (full validation,
   durability="none") against raw sequential `os.write` of the same bytes to a file in the
   same log directory; also both with one fsync at the end. GiB/s and the ratio (≥ 60%).
2. read: `log.read(offset, max_bytes=1)` (index lookup + first batch) at random offsets of a
   10,000,000-record partition spanning several segments, each call timed on its own;
   p50/p99/p999 (p99 ≤ 20 µs), next to `read_header` on the returned bytes and to the floor:
   a bisect in an in-memory table of batch positions plus `os.pread` of the same batch.
3. recovery: `eoslog.open` + `close` of that partition after removing the clean-shutdown
   marker and the recovery-point checkpoint, so every segment is rescanned; GB/s of segment
   (≥ 1 GB/s), page cache warm, next to `os.pread` of the same files in 8 MiB chunks.
4. open: a clean `eoslog.open(path, background=False)` of a partition of 1,000 segments
   (< 0.2 s), next to the syscall floor: listdir plus open/fstat/close of every file.

Per contender: one checked warm-up run, then --rounds rounds; medians and min – max over
the rounds; a ratio is the median of the per-round ratios. Targets are printed and marked
met / not met, never asserted.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import cProfile
import gc
import mmap
import os
import pstats
import random
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path as FilePath
from typing import Any

import numpy as np

from eoslog import limits

BENCH_DIR = FilePath(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import eoslog  # noqa: E402
from eoslog.record import codec, layout  # noqa: E402
from workload import TIMESTAMP_BASE_MS, VALUE_BYTES, make_values  # noqa: E402
from write_results import codec_line, command_line, git_output  # noqa: E402
from write_results import machine_lines as codec_machine_lines  # noqa: E402

PATHS = ("append", "read", "recovery", "open")
ROUNDS_DEFAULT = 5
ROUNDS_MIN = 3  # docs/bench.md: median and spread over >= 3 runs
PACKAGES = ("eoslog", "numpy", "crc32c")
SEED = 20_260_101
MIB = 1 << 20
GIB = 1 << 30
# Distinct values the batches are cut from: every batch takes a different window of them.
VALUE_POOL = 1 << 17

# 1. append
APPEND_MIB_DEFAULT = 256
APPEND_BATCH_BYTES_MAX = MIB
APPEND_MAX_MESSAGE_BYTES = 2 * MIB
APPEND_TARGET_RATIO = 0.60

# 2. read (its partition is also the recovery data set)
READ_RECORDS_DEFAULT = 10_000_000
READ_BATCH_RECORDS = 1_000
READ_SEGMENT_BYTES = 256 * MIB
READ_SAMPLES_DEFAULT = 100_000
# A contender's round stops after this many seconds even if not every offset was read, so a
# slow read path cannot make the run endless; the report gives the samples actually timed.
READ_ROUND_SECONDS_DEFAULT = 6.0
READ_WARMUP_SAMPLES = 1_000
READ_VARIANT_BATCH_RECORDS_DEFAULT = 500
READ_TARGET_P99_US = 20.0
PERCENTILES = (50.0, 99.0, 99.9)

# 3. recovery
RECOVERY_TARGET_GB_S = 1.0
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"

# 4. open
OPEN_SEGMENTS_DEFAULT = 1_000
OPEN_SEGMENT_BYTES = 4096
OPEN_BATCH_RECORDS = 30  # ~3.3 KB: one batch fills a 4 KiB segment, so each batch rolls
OPEN_TARGET_SECONDS = 0.2

_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length
_LAST_OFFSET_DELTA = struct.Struct(">i")


# --- timing ---------------------------------------------------------------------------------


class Timer:
    """Times a callable with the heap collected first and the cyclic GC off during the call
    (unless gc_on), as bench/write_results.py does."""

    def __init__(self, gc_on: bool) -> None:
        self.gc_on = gc_on

    def __call__(self, run: Callable[[], object]) -> float:
        gc.collect()
        if not self.gc_on:
            gc.disable()
        try:
            start = time.perf_counter()
            run()
            return time.perf_counter() - start
        finally:
            gc.enable()


def quiesce() -> None:
    """Write back dirty pages left by earlier work (outside any timed region), so no timed
    run shares the disk with another run's background writeback."""
    os.sync()


def median_spread(values: Sequence[float], fmt: Callable[[float], str]) -> str:
    return f"{fmt(statistics.median(values))} ({fmt(min(values))} – {fmt(max(values))})"


def spread(values: Sequence[float], fmt: Callable[[float], str]) -> str:
    return f"{fmt(min(values))} – {fmt(max(values))}"


def orders(names: Sequence[str], rounds: int) -> list[list[str]]:
    """Round r runs the contenders in order, round r+1 in reverse: alternated, and no
    contender always runs right after the same neighbour."""
    return [list(names) if r % 2 == 0 else list(reversed(names)) for r in range(rounds)]


@dataclass
class Target:
    path: str
    figure: str
    target: str
    measured: str
    met: bool | None  # None: not measured

    def row(self) -> str:
        status = "not measured" if self.met is None else "met" if self.met else "**not met**"
        return f"| {self.path} | {self.figure} | {self.target} | {self.measured} | {status} |"


@dataclass
class Section:
    title: str
    lines: list[str]
    targets: list[Target] = field(default_factory=list)


# --- data -------------------------------------------------------------------------------------


def value_pool() -> list[bytes]:
    return make_values(VALUE_POOL)


def window(pool: Sequence[bytes], k: int, size: int) -> Sequence[bytes]:
    start = (k * size) % (len(pool) - size)
    return pool[start : start + size]


def build_append_batches(pool: Sequence[bytes], mib: int) -> tuple[list[bytes], int]:
    """`mib` batches of as many records as fit in 1 MiB (uncompressed, key null, one
    CreateTime per batch), each cut from a different window of the pool; and the records per
    batch."""
    batches: list[bytes] = []
    per_batch = 0
    timestamp = TIMESTAMP_BASE_MS
    for k in range(mib):
        builder = codec.BatchBuilder(batch_bytes_max=APPEND_BATCH_BYTES_MAX)
        appended = builder.append_values(window(pool, k, 10_000), None, timestamp)
        if per_batch and appended != per_batch:
            raise AssertionError(f"batch {k} holds {appended} records, not {per_batch}")
        per_batch = appended
        timestamp += appended
        batches.append(builder.build())
    return batches, per_batch


@dataclass
class Partition:
    """A partition built by this run: where it is and what it holds."""

    root: str  # the log directory
    topic: str
    records: int
    batches: int
    batch_bytes: int  # of the first batch
    segments: int
    log_bytes: int
    build_seconds: float  # appends + close (the final flush)

    @property
    def directory(self) -> str:
        return os.path.join(self.root, f"{self.topic}-0")

    def log_files(self) -> list[str]:
        names = sorted(n for n in os.listdir(self.directory) if n.endswith(".log"))
        return [os.path.join(self.directory, n) for n in names]


def build_partition(
    root: str,
    topic: str,
    pool: Sequence[bytes],
    *,
    records: int,
    batch_records: int,
    config: dict[str, object],
) -> Partition:
    """Append `records` records in batches of `batch_records` (built with append_values,
    one CreateTime per batch) to a new topic with `config`, then close the broker."""
    if records % batch_records:
        raise ValueError(f"{records} records is not a multiple of {batch_records}")
    start = time.perf_counter()
    broker = eoslog.open(root, durability="none", background=False)
    try:
        broker.create_topic(topic, 1, config)
        log = broker.log(topic, 0)
        first = 0
        for k in range(records // batch_records):
            builder = codec.BatchBuilder()
            builder.append_values(
                window(pool, k, batch_records), None, TIMESTAMP_BASE_MS + k * batch_records
            )
            raw = builder.build()
            first = first or len(raw)
            log.append_batch(raw)
        if log.log_end_offset != records:
            raise AssertionError(f"log end {log.log_end_offset}, expected {records}")
        segments = len(log.segments)
    finally:
        broker.close()
    build_seconds = time.perf_counter() - start
    directory = os.path.join(root, f"{topic}-0")
    log_bytes = sum(
        os.path.getsize(os.path.join(directory, n))
        for n in os.listdir(directory)
        if n.endswith(".log")
    )
    quiesce()
    return Partition(
        root, topic, records, records // batch_records, first, segments, log_bytes, build_seconds
    )


@dataclass
class BatchTable:
    """Every batch of a partition, from an independent walk of the .log files (8-byte base
    offset and 4-byte length per entry, struct only): the floor's in-memory index."""

    last_offsets: list[int]
    fds: list[int]
    views: list[memoryview]  # per batch: the whole segment, mapped read-only
    positions: list[int]
    sizes: list[int]
    open_fds: list[int]
    maps: list[mmap.mmap]

    @classmethod
    def of(cls, partition: Partition) -> BatchTable:
        table = cls([], [], [], [], [], [], [])
        for path in partition.log_files():
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            table.open_fds.append(fd)
            size = os.fstat(fd).st_size
            mapped = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
            table.maps.append(mapped)
            view = memoryview(mapped)
            position = 0
            while position + layout.HEADER_SIZE <= size:
                head = os.pread(fd, layout.HEADER_SIZE, position)
                base_offset, batch_length = _BATCH_HEAD.unpack_from(head, 0)
                (delta,) = _LAST_OFFSET_DELTA.unpack_from(head, layout.LAST_OFFSET_DELTA_OFFSET)
                batch_size = layout.LOG_OVERHEAD + batch_length
                table.last_offsets.append(base_offset + delta)
                table.fds.append(fd)
                table.views.append(view)
                table.positions.append(position)
                table.sizes.append(batch_size)
                position += batch_size
        return table

    def read(self, offset: int) -> bytes:
        """The floor's read: the batch holding offset, from a known position."""
        i = bisect.bisect_left(self.last_offsets, offset)
        return os.pread(self.fds[i], self.sizes[i], self.positions[i])

    def read_mapped(self, offset: int) -> memoryview:
        """The zero-copy floor: the same batch as a slice of the mapped segment."""
        i = bisect.bisect_left(self.last_offsets, offset)
        position = self.positions[i]
        return self.views[i][position : position + self.sizes[i]]

    def close(self) -> None:
        for view in set(self.views):
            view.release()
        self.views.clear()
        for mapped in self.maps:
            mapped.close()
        self.maps.clear()
        for fd in self.open_fds:
            os.close(fd)
        self.open_fds.clear()


def remove_recovery_markers(root: str) -> None:
    """What an unclean stop with no checkpoint leaves: every segment is rescanned."""
    for name in (CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE):
        path = os.path.join(root, name)
        if os.path.exists(path):
            os.unlink(path)


def read_files_raw(paths: Sequence[str], chunk: int = limits.recovery_chunk_bytes) -> int:
    """os.pread of every file in `chunk`-byte pieces: the physical peer of recovery."""
    total = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            position = 0
            while True:
                data = os.pread(fd, chunk, position)
                if not data:
                    break
                position += len(data)
            total += position
        finally:
            os.close(fd)
    return total


def open_files_raw(directory: str) -> int:
    """listdir plus open/fstat/close of every file: the syscall floor of a clean open."""
    count = 0
    for name in os.listdir(directory):
        fd = os.open(os.path.join(directory, name), os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fstat(fd)
        finally:
            os.close(fd)
        count += 1
    return count


# --- 1. append --------------------------------------------------------------------------------


@dataclass
class AppendSide:
    """One append contender: prepare (untimed) gives the state, run (timed) writes every
    batch, finish (untimed) checks what landed on disk and removes it."""

    name: str
    prepare: Callable[[], Any]
    run: Callable[[Any], None]
    finish: Callable[[Any], None]


def append_sides(
    broker: eoslog.Broker, root: str, batches: list[bytes], records: int
) -> list[AppendSide]:
    """The four append contenders; eoslog's make a new topic in `broker` per run."""
    total = sum(len(b) for b in batches)
    counter = iter(range(1 << 30))

    def eoslog_prepare() -> Any:
        topic = f"append-{next(counter)}"
        broker.create_topic(topic, 1, {"max.message.bytes": APPEND_MAX_MESSAGE_BYTES})
        return topic, broker.log(topic, 0)

    def eoslog_run(state: Any, sync: bool) -> None:
        log = state[1]
        append = log.append_batch
        for raw in batches:
            append(raw)
        if sync:
            log.flush()

    def eoslog_finish(state: Any) -> None:
        topic, log = state
        if log.log_end_offset != records:
            raise AssertionError(f"eoslog log end {log.log_end_offset}, expected {records}")
        stored = sum(s.size for s in log.segments)
        if stored != total:
            raise AssertionError(f"eoslog stored {stored} bytes, expected {total}")
        broker.delete_topic(topic)

    def raw_prepare() -> Any:
        path = os.path.join(root, f"raw-{next(counter)}.log")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        return path, fd

    def raw_run(state: Any, sync: bool) -> None:
        fd = state[1]
        write = os.write
        for raw in batches:
            if write(fd, raw) != len(raw):
                raise OSError("short write")
        if sync:
            os.fdatasync(fd)

    def raw_finish(state: Any) -> None:
        path, fd = state
        os.close(fd)
        if os.path.getsize(path) != total:
            raise AssertionError(f"raw file holds {os.path.getsize(path)} bytes, not {total}")
        os.unlink(path)

    sides = []
    for sync, suffix in ((False, ""), (True, " + fsync")):
        sides.append(
            AppendSide(
                f"eoslog append_batch{suffix}",
                eoslog_prepare,
                lambda s, sync=sync: eoslog_run(s, sync),
                eoslog_finish,
            )
        )
        sides.append(
            AppendSide(
                f"raw os.write{suffix}",
                raw_prepare,
                lambda s, sync=sync: raw_run(s, sync),
                raw_finish,
            )
        )
    return sides


def measure_append(args: argparse.Namespace, root: str, pool: Sequence[bytes]) -> Section:
    timer = Timer(args.gc == "on")
    start = time.perf_counter()
    batches, per_batch = build_append_batches(pool, args.append_mib)
    build_seconds = time.perf_counter() - start
    total = sum(len(b) for b in batches)
    records = per_batch * len(batches)
    directory = os.path.join(root, "append")
    broker = eoslog.open(directory, durability="none", background=False)
    sides = append_sides(broker, directory, batches, records)
    by_name = {side.name: side for side in sides}
    seconds: dict[str, list[float]] = {side.name: [] for side in sides}

    def once(side: AppendSide) -> float:
        state = side.prepare()
        quiesce()
        elapsed = timer(lambda: side.run(state))
        side.finish(state)
        return elapsed

    try:
        for side in sides:  # warm-up, checked
            once(side)
        for order in orders([s.name for s in sides], args.rounds):
            for name in order:
                seconds[name].append(once(by_name[name]))
        breakdown = append_breakdown(batches, args.rounds, timer)
        if args.profile:
            state = sides[0].prepare()
            profile("append_batch", lambda: sides[0].run(state))
            sides[0].finish(state)
    finally:
        broker.close()

    def gib_s(name: str) -> list[float]:
        return [total / s / GIB for s in seconds[name]]

    def gib(value: float) -> str:
        return f"{value:.2f}"

    lines = [
        f"Workload: {len(batches)} batches × {per_batch:,} records ({records:,} records, "
        f"{total / MIB:.1f} MiB; {len(batches[0]):,} B per batch), key null, value "
        f"{VALUE_BYTES} B JSON-like text, uncompressed, no headers, non-transactional, one "
        "CreateTime per batch; built once in memory "
        f'({build_seconds:.1f} s). eoslog: `durability="none"`, a new topic per run '
        f"(segment.bytes 1 GiB default, max.message.bytes {APPEND_MAX_MESSAGE_BYTES:,}), "
        "`append_batch` per batch with full validation (CRC, every record walked, client "
        "rules). Peer: `os.write` of the same bytes objects, in order, to a new file in the "
        "same log directory. The `+ fsync` rows end with `log.flush()` (fdatasync of the "
        "segment and index msync) and `os.fdatasync(fd)` respectively, inside the timed "
        "region. Isolation: n/a.",
        "",
        "| contender | median GiB/s | min – max | median s per run |",
        "|---|---:|---:|---:|",
    ]
    for side in sides:
        rates = gib_s(side.name)
        lines.append(
            f"| {side.name} | {gib(statistics.median(rates))} | {spread(rates, gib)} | "
            f"{statistics.median(seconds[side.name]):.3f} |"
        )
    targets = []
    lines += ["", "| eoslog ÷ raw write | ratio (median of per-round ratios) | min – max |"]
    lines.append("|---|---:|---:|")
    for suffix in ("", " + fsync"):
        ratios = [
            r / p
            for r, p in zip(
                gib_s(f"eoslog append_batch{suffix}"), gib_s(f"raw os.write{suffix}"), strict=True
            )
        ]
        ratio = statistics.median(ratios)
        lines.append(
            f"| append_batch{suffix} | {ratio:.0%} | {spread(ratios, lambda v: f'{v:.0%}')} |"
        )
        targets.append(
            Target(
                "append",
                f"append_batch{suffix} ÷ raw os.write{suffix}",
                f"≥ {APPEND_TARGET_RATIO:.0%}",
                f"{ratio:.0%} ({spread(ratios, lambda v: f'{v:.0%}')})",
                ratio >= APPEND_TARGET_RATIO,
            )
        )
    per_batch_us = {
        name: statistics.median(values) / len(batches) * 1e6 for name, values in seconds.items()
    }
    lines += [
        "",
        "Where the time goes (the same batches, in memory, median of "
        f"{args.rounds} rounds; per {len(batches[0]) / MIB:.2f} MiB batch): "
        + "; ".join(
            f"{name} {total / s / GIB:.2f} GiB/s = {s / len(batches) * 1e6:.0f} µs"
            for name, s in breakdown.items()
        )
        + f". For comparison: append_batch {per_batch_us['eoslog append_batch']:.0f} µs, "
        f"raw os.write {per_batch_us['raw os.write']:.0f} µs per batch.",
        "",
    ]
    return Section(
        "1. append_batch of 1 MiB prebuilt batches vs raw sequential write", lines, targets
    )


def append_breakdown(batches: list[bytes], rounds: int, timer: Timer) -> dict[str, float]:
    """Seconds over all batches for the parts of append_batch that touch every byte."""
    from eoslog.record import primitives

    def validate() -> None:
        for raw in batches:
            codec.validate_batch(raw, batch_bytes_max=APPEND_MAX_MESSAGE_BYTES)

    def crc() -> None:
        for raw in batches:
            primitives.crc32c(raw)

    def copy() -> None:
        for raw in batches:
            bytearray(raw)

    parts = {
        "validate_batch": validate,
        "of which CRC32C (eoslog primitives.crc32c)": crc,
        "bytearray copy": copy,
    }
    samples: dict[str, list[float]] = {name: [] for name in parts}
    for run in parts.values():  # warm-up
        run()
    for order in orders(list(parts), rounds):
        for name in order:
            samples[name].append(timer(parts[name]))
    return {name: statistics.median(values) for name, values in samples.items()}


# --- 2. read ----------------------------------------------------------------------------------


@dataclass
class Latencies:
    """Per round: the samples timed (ns) of one contender."""

    rounds: list[np.ndarray] = field(default_factory=list)

    def percentiles(self) -> list[np.ndarray]:
        return [np.percentile(ns / 1000.0, PERCENTILES) for ns in self.rounds]

    def counts(self) -> list[int]:
        return [len(ns) for ns in self.rounds]


def read_rounds(
    args: argparse.Namespace, partition: Partition, table: BatchTable, label: str
) -> tuple[dict[str, Latencies], list[str]]:
    """Alternate eoslog's read (with read_header on its result) and the floor over the
    same random offsets per round. Returns the latencies and notes."""
    broker = eoslog.open(partition.root, durability="none", background=False)
    notes: list[str] = []
    results = {
        name: Latencies() for name in ("eoslog", "header", "header again", "floor", "floor mmap")
    }
    try:
        log = broker.log(partition.topic, 0)
        read = log.read
        read_header = codec.read_header
        clock = time.perf_counter_ns

        def run_eoslog(offsets: list[int], budget_s: float, keep: bool) -> None:
            reads = np.empty(len(offsets), dtype=np.int64)
            headers = np.empty(len(offsets), dtype=np.int64)
            headers_again = np.empty(len(offsets), dtype=np.int64)
            deadline = clock() + int(budget_s * 1e9)
            done = 0
            for offset in offsets:
                t0 = clock()
                result = read(offset, max_bytes=1)
                t1 = clock()
                header = read_header(result.records)
                t2 = clock()
                read_header(result.records)
                t3 = clock()
                if not header.base_offset <= offset <= header.last_offset:
                    raise AssertionError(f"read({offset}) returned batch {header}")
                reads[done] = t1 - t0
                headers[done] = t2 - t1
                headers_again[done] = t3 - t2
                done += 1
                if t3 > deadline:
                    break
            if keep:
                results["eoslog"].rounds.append(reads[:done])
                results["header"].rounds.append(headers[:done])
                results["header again"].rounds.append(headers_again[:done])

        def run_floor(
            offsets: list[int], budget_s: float, keep: bool, mapped: bool = False
        ) -> None:
            times = np.empty(len(offsets), dtype=np.int64)
            floor_read = table.read_mapped if mapped else table.read
            deadline = clock() + int(budget_s * 1e9)
            done = 0
            for offset in offsets:
                t0 = clock()
                floor_read(offset)
                t1 = clock()
                times[done] = t1 - t0
                done += 1
                if t1 > deadline:
                    break
            if keep:
                results["floor mmap" if mapped else "floor"].rounds.append(times[:done])

        def run_floor_mapped(offsets: list[int], budget_s: float, keep: bool) -> None:
            run_floor(offsets, budget_s, keep, mapped=True)

        # Fairness check, untimed: eoslog returns exactly the batch the floor reads.
        check_rng = random.Random(SEED)
        for _ in range(100):
            offset = check_rng.randrange(partition.records)
            expected = table.read(offset)
            if bytes(read(offset, max_bytes=1).records) != expected:
                raise AssertionError(f"eoslog and the floor disagree at offset {offset}")
            if table.read_mapped(offset) != expected:
                raise AssertionError(f"the two floors disagree at offset {offset}")
        runners = {"eoslog": run_eoslog, "floor": run_floor, "floor mmap": run_floor_mapped}
        warmup = [check_rng.randrange(partition.records) for _ in range(READ_WARMUP_SAMPLES)]
        for run in runners.values():
            run(warmup, args.read_round_seconds / 2, False)
        for r, order in enumerate(orders(list(runners), args.rounds)):
            rng = random.Random(SEED + 1 + r)
            offsets = [rng.randrange(partition.records) for _ in range(args.read_samples)]
            gc.collect()
            if args.gc != "on":
                gc.disable()
            try:
                for name in order:
                    runners[name](offsets, args.read_round_seconds, True)
            finally:
                gc.enable()
        short = [n for n in results["eoslog"].counts() if n < args.read_samples]
        if short:
            notes.append(
                f"{label}: eoslog's rounds hit the {args.read_round_seconds:g} s budget after "
                f"{min(short):,} – {max(short):,} of {args.read_samples:,} reads "
                "(the percentiles are over the reads timed)."
            )
        if args.profile:
            profile_offsets = [check_rng.randrange(partition.records) for _ in range(2_000)]
            profile(f"read ({label})", lambda: run_eoslog(profile_offsets, 10.0, False))
    finally:
        broker.close()
    return results, notes


def measure_read(
    args: argparse.Namespace, root: str, pool: Sequence[bytes]
) -> tuple[Section, Partition]:
    partition = build_partition(
        os.path.join(root, "read"),
        "read",
        pool,
        records=args.read_records,
        batch_records=READ_BATCH_RECORDS,
        config={"segment.bytes": READ_SEGMENT_BYTES},
    )
    sets = [(f"{READ_BATCH_RECORDS:,}-record batches", partition)]
    if args.read_variant_batch_records:
        variant = build_partition(
            os.path.join(root, "read-variant"),
            "read",
            pool,
            records=args.read_records,
            batch_records=args.read_variant_batch_records,
            config={"segment.bytes": READ_SEGMENT_BYTES},
        )
        sets.append((f"variant: {args.read_variant_batch_records:,}-record batches", variant))
    lines = [
        f"Workload: {partition.records:,} records in {partition.batches:,} batches × "
        f"{READ_BATCH_RECORDS:,} records ({partition.batch_bytes:,} B per batch), key null, "
        f"value {VALUE_BYTES} B, uncompressed; segment.bytes {READ_SEGMENT_BYTES // MIB} MiB "
        f"→ {partition.segments} segment(s), {partition.log_bytes / 1e9:.2f} GB of .log; "
        f'built once with `append_batch`, durability="none", closed, then reopened for the '
        f"reads (build {partition.build_seconds:.1f} s including the final flush). "
        f"Per round {args.read_samples:,} offsets drawn uniformly from [0, "
        f"{partition.records:,}) (a new seeded draw each round, the same for every "
        "contender); each call timed alone with `time.perf_counter_ns`. eoslog: "
        "`log.read(offset, max_bytes=1)` (read_committed, the default; no transactions), "
        "then `codec.read_header` on the returned bytes, timed apart, twice: the first call "
        "pays for whatever CPU cache the read evicted, the second is the decode's own cost. "
        "Floor: `bisect` in an "
        "in-memory list of every batch's last offset, then `os.pread` of that same batch "
        "(the bytes eoslog returns, checked on 100 offsets). Zero-copy floor: the same "
        "bisect, then a `memoryview` slice of the segment mapped read-only (no copy: what a "
        "read returning a view into a mapped segment would cost). Page cache warm.",
    ]
    if len(sets) > 1:
        variant = sets[1][1]
        lines.append(
            f"The variant holds the same records in {variant.batches:,} batches of "
            f"{args.read_variant_batch_records:,} ({variant.batch_bytes:,} B, below the "
            f"64 KiB chunk the segment reads with), {variant.segments} segments, build "
            f"{variant.build_seconds:.1f} s."
        )
    lines += [
        "",
        "Latency in µs: per round the p50 / p99 / p99.9 of the calls timed; the table gives "
        "the median of the rounds and their min – max.",
        "",
        "| data | contender | calls timed per round | p50 µs | p99 µs | p99.9 µs |",
        "|---|---|---:|---:|---:|---:|",
    ]
    targets = []
    notes: list[str] = []
    names = {
        "eoslog": "eoslog `log.read(offset, max_bytes=1)`",
        "header": "`read_header` on the returned bytes",
        "header again": "`read_header` again on the same bytes (warm caches)",
        "floor": "floor: bisect + `os.pread` of the batch",
        "floor mmap": "zero-copy floor: bisect + slice of the mmapped segment",
    }

    def us(value: float) -> str:
        return f"{value:,.1f}"

    for label, data in sets:
        table = BatchTable.of(data)
        try:
            results, found_notes = read_rounds(args, data, table, label)
        finally:
            table.close()
        notes += found_notes
        for key, latencies in results.items():
            per_round = latencies.percentiles()
            cells = [
                median_spread([float(p[i]) for p in per_round], us) for i in range(len(PERCENTILES))
            ]
            counts = latencies.counts()
            count = (
                f"{min(counts):,}"
                if min(counts) == max(counts)
                else spread(counts, lambda v: f"{v:,}")
            )
            lines.append(f"| {label} | {names[key]} | {count} | {' | '.join(cells)} |")
        p99s = [float(p[1]) for p in results["eoslog"].percentiles()]
        if data is partition:
            targets.append(
                Target(
                    "random-offset read",
                    f"p99 of `log.read` ({label})",
                    f"≤ {READ_TARGET_P99_US:g} µs",
                    f"{median_spread(p99s, us)} µs",
                    statistics.median(p99s) <= READ_TARGET_P99_US,
                )
            )
    lines += ["", *notes, ""] if notes else [""]
    return Section("2. Random-offset read on a 10 M-record partition", lines, targets), partition


# --- 3. recovery ------------------------------------------------------------------------------


def measure_recovery(
    args: argparse.Namespace, root: str, pool: Sequence[bytes], partition: Partition | None
) -> Section:
    if partition is None:
        partition = build_partition(
            os.path.join(root, "read"),
            "read",
            pool,
            records=args.read_records,
            batch_records=READ_BATCH_RECORDS,
            config={"segment.bytes": READ_SEGMENT_BYTES},
        )
    timer = Timer(args.gc == "on")
    files = partition.log_files()
    phases: dict[str, list[float]] = {"open": [], "close": [], "open + close": [], "raw": []}

    def eoslog_once(keep: bool) -> None:
        remove_recovery_markers(partition.root)
        quiesce()
        holder: list[Any] = []
        opened = timer(
            lambda: holder.append(eoslog.open(partition.root, durability="none", background=False))
        )
        broker = holder[0]
        log = broker.log(partition.topic, 0)
        report = log.recovery_report
        if (
            report.clean_shutdown
            or report.segments_recovered != partition.segments
            or report.bytes_truncated
            or log.log_end_offset != partition.records
        ):
            broker.close()
            raise AssertionError(f"recovery did not rescan every segment cleanly: {report}")
        closed = timer(broker.close)
        if keep:
            phases["open"].append(opened)
            phases["close"].append(closed)
            phases["open + close"].append(opened + closed)

    def raw_once(keep: bool) -> None:
        quiesce()
        counted: list[int] = []
        elapsed = timer(lambda: counted.append(read_files_raw(files)))
        if counted[0] != partition.log_bytes:
            raise AssertionError(f"read {counted[0]} bytes, expected {partition.log_bytes}")
        if keep:
            phases["raw"].append(elapsed)

    runners = {"eoslog": eoslog_once, "raw": raw_once}
    for run in runners.values():  # warm-up: also warms the page cache
        run(False)
    for order in orders(list(runners), args.rounds):
        for name in order:
            runners[name](True)
    if args.profile:
        remove_recovery_markers(partition.root)
        profile(
            "recovery open",
            lambda: eoslog.open(partition.root, durability="none", background=False).close(),
        )

    def gb_s(seconds: Sequence[float]) -> list[float]:
        return [partition.log_bytes / s / 1e9 for s in seconds]

    def two(value: float) -> str:
        return f"{value:.2f}"

    lines = [
        f"Workload: the random-read partition (section 2 builds it; {partition.records:,} "
        f"records, {partition.batches:,} batches of {partition.batch_bytes:,} B, "
        f"{partition.segments} segments, {partition.log_bytes / 1e9:.3f} GB of .log). Before "
        f"each eoslog run `{CLEAN_SHUTDOWN_FILE}` and `{RECOVERY_POINT_FILE}` are deleted, so "
        '`eoslog.open(path, durability="none", background=False)` rescans every segment '
        "(CRC of every batch, offsets, index rebuild; checked: segments_recovered = "
        f"{partition.segments}, nothing truncated, log end = {partition.records:,}); `close()` "
        "is timed apart. Peer: `os.pread` of the same .log files in "
        f"{limits.recovery_chunk_bytes // MIB} MiB chunks (the chunk recovery reads with). **Page "
        "cache warm** (the files were just written and read; the warm-up round reads them "
        "again); a cold-cache run is not measured. GB = 10^9 bytes of .log.",
        "",
        "| contender | median s | min – max | GB/s of segment (median) | min – max |",
        "|---|---:|---:|---:|---:|",
    ]
    labels = {
        "open": "eoslog open (recovery)",
        "close": "eoslog close",
        "open + close": "eoslog open + close",
        "raw": f"raw os.pread, {limits.recovery_chunk_bytes // MIB} MiB chunks",
    }
    for key, label in labels.items():
        values = phases[key]
        rates = gb_s(values)
        # close scans nothing: a rate per byte of segment would mean nothing there.
        rate_cells = (
            "— | —"
            if key == "close"
            else f"{two(statistics.median(rates))} | " + spread(rates, two)
        )
        lines.append(
            f"| {label} | {statistics.median(values):.3f} | {spread(values, lambda v: f'{v:.3f}')}"
            f" | {rate_cells} |"
        )
    ratios = [raw / total for raw, total in zip(phases["raw"], phases["open + close"], strict=True)]
    rate = gb_s(phases["open + close"])
    lines += [
        "",
        f"eoslog open + close ÷ raw pread (per-round ratio of rates): "
        f"{statistics.median(ratios):.0%} ({spread(ratios, lambda v: f'{v:.0%}')}).",
        "",
    ]
    target = Target(
        "recovery",
        "GB/s of segment scanned by open + close (page cache warm)",
        f"≥ {RECOVERY_TARGET_GB_S:g} GB/s",
        f"{median_spread(rate, two)} GB/s",
        statistics.median(rate) >= RECOVERY_TARGET_GB_S,
    )
    return Section("3. Recovery after an unclean stop", lines, [target])


# --- 4. clean open of many segments -----------------------------------------------------------


def build_segments(root: str, pool: Sequence[bytes], segments: int) -> Partition:
    partition = build_partition(
        root,
        "segments",
        pool,
        records=segments * OPEN_BATCH_RECORDS,
        batch_records=OPEN_BATCH_RECORDS,
        config={"segment.bytes": OPEN_SEGMENT_BYTES},
    )
    if partition.segments != segments:
        raise AssertionError(f"{partition.segments} segments, expected {segments}")
    return partition


def measure_open(args: argparse.Namespace, root: str, pool: Sequence[bytes]) -> Section:
    partition = build_segments(os.path.join(root, "open"), pool, args.segments)
    timer = Timer(args.gc == "on")
    phases: dict[str, list[float]] = {"open": [], "close": [], "open + close": [], "floor": []}
    files = len(os.listdir(partition.directory))

    def eoslog_once(keep: bool) -> None:
        quiesce()
        holder: list[Any] = []
        opened = timer(lambda: holder.append(eoslog.open(partition.root, background=False)))
        broker = holder[0]
        log = broker.log(partition.topic, 0)
        report = log.recovery_report
        if (
            not report.clean_shutdown
            or report.segments_recovered
            or report.indexes_rebuilt
            or len(log.segments) != partition.segments
        ):
            broker.close()
            raise AssertionError(f"not a clean open of {partition.segments} segments: {report}")
        closed = timer(broker.close)
        if keep:
            phases["open"].append(opened)
            phases["close"].append(closed)
            phases["open + close"].append(opened + closed)

    def floor_once(keep: bool) -> None:
        quiesce()
        elapsed = timer(lambda: open_files_raw(partition.directory))
        if keep:
            phases["floor"].append(elapsed)

    runners = {"eoslog": eoslog_once, "floor": floor_once}
    for run in runners.values():
        run(False)
    for order in orders(list(runners), args.rounds):
        for name in order:
            runners[name](True)
    if args.profile:
        profile("clean open", lambda: eoslog.open(partition.root, background=False).close())

    def ms(value: float) -> str:
        return f"{value * 1e3:,.1f}"

    lines = [
        f"Workload: one partition of {partition.segments:,} segments (segment.bytes "
        f"{OPEN_SEGMENT_BYTES:,}; one {partition.batch_bytes:,}-byte batch of "
        f"{OPEN_BATCH_RECORDS} records per segment; {files:,} files in the partition "
        "directory), plus the two internal topics' partitions, closed cleanly; built with "
        f'`append_batch` (durability="none") in {partition.build_seconds:.1f} s including '
        "the final close. eoslog: `eoslog.open(path, background=False)` timed alone "
        "(checked: clean shutdown, nothing rescanned, every segment loaded), `close()` timed "
        "apart. Floor: `os.listdir` of the partition directory plus `os.open` / `os.fstat` / "
        "`os.close` of every file in it.",
        "",
        "| contender | median ms | min – max |",
        "|---|---:|---:|",
    ]
    labels = {
        "open": "eoslog open",
        "close": "eoslog close",
        "open + close": "eoslog open + close",
        "floor": "floor: listdir + open/fstat/close of every file",
    }
    for key, label in labels.items():
        values = phases[key]
        lines.append(f"| {label} | {ms(statistics.median(values))} | {spread(values, ms)} |")
    ratios = [f / o for f, o in zip(phases["floor"], phases["open"], strict=True)]
    lines += [
        "",
        f"floor ÷ eoslog open (per-round ratio of times): {statistics.median(ratios):.0%} "
        f"({spread(ratios, lambda v: f'{v:.0%}')}).",
        "",
    ]
    opened = phases["open"]
    target = Target(
        "clean open",
        f"`eoslog.open` of {partition.segments:,} segments",
        f"< {OPEN_TARGET_SECONDS * 1e3:g} ms",
        f"{median_spread(opened, ms)} ms",
        statistics.median(opened) < OPEN_TARGET_SECONDS,
    )
    return Section(f"4. Clean open of {partition.segments:,} segments", lines, [target])


# --- profiling (--profile) --------------------------------------------------------------------


def profile(label: str, run: Callable[[], object], top: int = 15) -> None:
    """One extra untimed run under cProfile, printed (never written to the results)."""
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        run()
    finally:
        profiler.disable()
    print(f"\n--- cProfile: {label} (top {top} by own time) ---")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(top)


# --- the report -------------------------------------------------------------------------------


def machine_lines(tmp: str) -> list[str]:
    """The codec report's machine lines (with this script's packages), plus the data disk."""
    return [*codec_machine_lines(PACKAGES), f"- data: {disk_line(tmp)}"]


def disk_line(tmp: str) -> str:
    """The file system under the data directory and the kernel's write-back thresholds."""
    path = os.path.realpath(tmp)
    best = ("?", "?", "")
    try:
        for line in FilePath("/proc/mounts").read_text().splitlines():
            device, mount, fstype = line.split()[:3]
            if (path == mount or path.startswith(mount.rstrip("/") + "/")) and len(mount) > len(
                best[2]
            ):
                best = (device, fstype, mount)
    except OSError:
        pass
    dirty = []
    for knob in ("dirty_background_ratio", "dirty_ratio"):
        with contextlib.suppress(OSError):
            dirty.append(f"vm.{knob}={FilePath(f'/proc/sys/vm/{knob}').read_text().strip()}")
    return (
        f"under {tmp} on {best[0]} ({best[1]}, mounted at {best[2] or '?'}); eoslog and every "
        f"peer write and read in the same directory tree; {', '.join(dirty)}"
    )


def tree_line() -> str:
    status = git_output("status", "--porcelain", "--untracked-files=no")
    if status is None:
        return ""
    dirty = "uncommitted changes to tracked files" if status.strip() else "clean"
    return f"Source tree: {dirty} (the measured code is the installed package named below)."


def render(
    argv: Sequence[str],
    args: argparse.Namespace,
    sections: list[Section],
    seconds: float,
    load_start: tuple[float, float, float],
) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    targets = [t for s in sections for t in s.targets]
    lines = [
        "# eoslog log benchmarks: append, random read, recovery, clean open",
        "",
        f"Command: `{command_line(argv)}`  ",
        f"Date: {now}; wall time {seconds:.0f} s  ",
        codec_line() + "  ",
        tree_line(),
        "",
        "## Machine",
        "",
        *machine_lines(args.tmp),
        f"- load average (1, 5, 15 min) at the start: {fmt_load(load_start)}; at the end: "
        f"{fmt_load(os.getloadavg())} (other processes share this machine)",
        "",
        "## Method",
        "",
        "Each path builds its data once in a fresh directory, then runs one checked warm-up "
        f"per contender and {args.rounds} rounds in which eoslog and its peer alternate in "
        "this process (the order reverses every round). Medians and min – max are over the "
        "rounds; a ratio is the median of the per-round ratios. Before every timed run the "
        "heap is collected and `os.sync()` writes back dirty pages left by earlier work; "
        f"the cyclic GC is {args.gc} while timing. Nothing is asserted: the targets of "
        "docs/bench.md are compared below.",
        "",
        "## Targets (docs/bench.md)",
        "",
        "| path | figure | target | measured (median; min – max) | status |",
        "|---|---|---|---|---|",
        *(t.row() for t in targets),
        "",
    ]
    for section in sections:
        lines += [f"## {section.title}", "", *section.lines]
    return "\n".join(lines)


def fmt_load(load: Sequence[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in load)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS_DEFAULT)
    parser.add_argument(
        "--paths", default=",".join(PATHS), help=f"comma-separated subset of {', '.join(PATHS)}"
    )
    parser.add_argument("--tmp", default="/tmp", help="where the data directories are made")
    parser.add_argument("--append-mib", type=int, default=APPEND_MIB_DEFAULT)
    parser.add_argument("--read-records", type=int, default=READ_RECORDS_DEFAULT)
    parser.add_argument("--read-samples", type=int, default=READ_SAMPLES_DEFAULT)
    parser.add_argument(
        "--read-round-seconds",
        type=float,
        default=READ_ROUND_SECONDS_DEFAULT,
        help="time budget of one contender's round of reads",
    )
    parser.add_argument(
        "--read-variant-batch-records",
        type=int,
        default=READ_VARIANT_BATCH_RECORDS_DEFAULT,
        help="also read a partition of the same records in batches this size (0: skip)",
    )
    parser.add_argument("--segments", type=int, default=OPEN_SEGMENTS_DEFAULT)
    parser.add_argument("--gc", choices=("off", "on"), default="off")
    parser.add_argument("--profile", action="store_true", help="print cProfile tables too")
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    parser.add_argument("--output", type=FilePath, default=BENCH_DIR / "RESULTS-log.md")
    args = parser.parse_args(argv)
    if args.rounds < ROUNDS_MIN:
        parser.error(f"--rounds must be at least {ROUNDS_MIN} (docs/bench.md)")
    args.paths = [p for p in args.paths.split(",") if p]
    unknown = set(args.paths) - set(PATHS)
    if unknown:
        parser.error(f"unknown paths: {', '.join(sorted(unknown))}")
    if args.read_records % READ_BATCH_RECORDS or (
        args.read_variant_batch_records and args.read_records % args.read_variant_batch_records
    ):
        parser.error("--read-records must be a multiple of the batch sizes")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    started = time.perf_counter()
    load_start = os.getloadavg()
    root = tempfile.mkdtemp(prefix="eoslog-logbench-", dir=args.tmp)
    print(f"data under {root}", flush=True)
    sections: list[Section] = []
    try:
        pool = value_pool()
        read_partition = None
        if "append" in args.paths:
            print("measuring append ...", flush=True)
            sections.append(measure_append(args, root, pool))
        if "read" in args.paths:
            print("measuring read ...", flush=True)
            section, read_partition = measure_read(args, root, pool)
            sections.append(section)
        if "recovery" in args.paths:
            print("measuring recovery ...", flush=True)
            sections.append(measure_recovery(args, root, pool, read_partition))
        if "open" in args.paths:
            print("measuring open ...", flush=True)
            sections.append(measure_open(args, root, pool))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    text = render(argv, args, sections, time.perf_counter() - started, load_start)
    print(text)
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
