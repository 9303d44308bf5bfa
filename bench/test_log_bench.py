"""pytest-benchmark benchmarks of eoslog's partition log against the physical limits, one group
per path: append, random-offset read, recovery, clean open.

Run with `pytest bench -k log --benchmark-only`. The data sets are smaller than those of
bench/log_bench.py so that the whole module runs in about a minute or two; the published
figures (full sizes, eoslog and its peer alternated round by round, latency percentiles) come
from `python bench/log_bench.py`, which writes bench/RESULTS-log.md. The summary printed at the
end gives eoslog's figures and ratios next to the docs/bench.md targets; nothing is asserted.

Knobs (environment): EOSLOG_BENCH_ROUNDS (default 5, after one warm-up round);
EOSLOG_BENCH_LOG_APPEND_MIB (1 MiB batches appended per run, default 64);
EOSLOG_BENCH_LOG_READ_RECORDS (records in the read / recovery partition, default 1,000,000,
segment.bytes 32 MiB); EOSLOG_BENCH_LOG_READ_CALLS (random offsets read per iteration,
default 100); EOSLOG_BENCH_LOG_SEGMENTS (segments of the clean-open partition, default 1,000);
EOSLOG_BENCH_TMP (where data directories are made, default /tmp); EOSLOG_BENCH_GC=on keeps the
cyclic GC on while timing.
"""

from __future__ import annotations

import gc
import os
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import eoslog
from eoslog.record import codec
from log_bench import (
    APPEND_TARGET_RATIO,
    GIB,
    MIB,
    OPEN_TARGET_SECONDS,
    READ_BATCH_RECORDS,
    READ_TARGET_P99_US,
    RECOVERY_TARGET_GB_S,
    SEED,
    AppendSide,
    BatchTable,
    Partition,
    append_sides,
    build_append_batches,
    build_partition,
    build_segments,
    open_files_raw,
    quiesce,
    read_files_raw,
    remove_recovery_markers,
    value_pool,
)

ROUNDS = int(os.environ.get("EOSLOG_BENCH_ROUNDS", 5))
APPEND_MIB = int(os.environ.get("EOSLOG_BENCH_LOG_APPEND_MIB", 64))
READ_RECORDS = int(os.environ.get("EOSLOG_BENCH_LOG_READ_RECORDS", 1_000_000))
READ_SEGMENT_BYTES = 32 * MIB
READ_CALLS = int(os.environ.get("EOSLOG_BENCH_LOG_READ_CALLS", 100))
SEGMENTS = int(os.environ.get("EOSLOG_BENCH_LOG_SEGMENTS", 1_000))
TMP = os.environ.get("EOSLOG_BENCH_TMP", "/tmp")
GC_DURING_RUN = os.environ.get("EOSLOG_BENCH_GC", "off") == "on"


# --- the summary printed after pytest-benchmark's tables ------------------------------------


@dataclass(frozen=True)
class Figure:
    group: str
    name: str
    median_s: float
    amount: float  # bytes (append, recovery), calls (read) or 1 (open) per iteration


class Summary:
    """A plugin registered by the module: prints eoslog's figures and ratios to the peers
    next to the docs/bench.md targets (ratios of medians, not alternated; indicative only)."""

    def __init__(self) -> None:
        self.figures: list[Figure] = []

    def find(self, group: str, name: str) -> Figure | None:
        return next((f for f in self.figures if (f.group, f.name) == (group, name)), None)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.figures:
            return
        write = terminalreporter.write_line
        terminalreporter.section("eoslog log vs physical limits (medians, not alternated)")
        for figure in self.figures:
            if figure.group in ("append", "recovery"):
                unit = "GiB/s" if figure.group == "append" else "GB/s"
                scale = GIB if figure.group == "append" else 1e9
                value = f"{figure.amount / figure.median_s / scale:8.2f} {unit}"
            elif figure.group == "read":
                value = f"{figure.median_s / figure.amount * 1e6:8.1f} µs per call (mean)"
            else:
                value = f"{figure.median_s * 1e3:8.1f} ms"
            write(f"[{figure.group}] {figure.name:<34} {value}")
        for suffix in ("", " + fsync"):
            ours = self.find("append", f"eoslog append_batch{suffix}")
            peer = self.find("append", f"raw os.write{suffix}")
            if ours and peer:
                ratio = peer.median_s / ours.median_s
                status = "met" if ratio >= APPEND_TARGET_RATIO else "NOT met"
                write(
                    f"append_batch{suffix} / raw os.write{suffix}: {ratio:.0%}"
                    f"  target >= {APPEND_TARGET_RATIO:.0%}: {status}"
                )
        read = self.find("read", "eoslog log.read")
        if read:
            write(
                f"read: the p99 target (<= {READ_TARGET_P99_US:g} µs) needs per-call timing: "
                "python bench/log_bench.py --paths read"
            )
        recovery = self.find("recovery", "eoslog open + close")
        if recovery:
            rate = recovery.amount / recovery.median_s / 1e9
            status = "met" if rate >= RECOVERY_TARGET_GB_S else "NOT met"
            write(f"recovery: {rate:.2f} GB/s  target >= {RECOVERY_TARGET_GB_S:g} GB/s: {status}")
        clean = self.find("open", "eoslog open")
        if clean:
            status = "met" if clean.median_s < OPEN_TARGET_SECONDS else "NOT met"
            write(
                f"clean open of {SEGMENTS:,} segments: {clean.median_s * 1e3:.1f} ms"
                f"  target < {OPEN_TARGET_SECONDS * 1e3:g} ms: {status}"
            )
        write("Published figures (alternated rounds, percentiles): python bench/log_bench.py")


_SUMMARY = Summary()


@pytest.fixture(scope="module", autouse=True)
def _summary(request: pytest.FixtureRequest) -> Summary:
    manager = request.config.pluginmanager
    if not manager.is_registered(_SUMMARY):
        manager.register(_SUMMARY, "eoslog-log-bench-summary")
    return _SUMMARY


# --- data -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def root() -> Iterator[str]:
    directory = tempfile.mkdtemp(prefix="eoslog-logbench-", dir=TMP)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def pool() -> list[bytes]:
    return value_pool()


@pytest.fixture(scope="module")
def append_data(pool: list[bytes]) -> tuple[list[bytes], int]:
    batches, per_batch = build_append_batches(pool, APPEND_MIB)
    return batches, per_batch * len(batches)


@pytest.fixture(scope="module")
def read_partition(root: str, pool: list[bytes]) -> Partition:
    return build_partition(
        os.path.join(root, "read"),
        "read",
        pool,
        records=READ_RECORDS,
        batch_records=READ_BATCH_RECORDS,
        config={"segment.bytes": READ_SEGMENT_BYTES},
    )


@pytest.fixture(scope="module")
def segments_partition(root: str, pool: list[bytes]) -> Partition:
    return build_segments(os.path.join(root, "open"), pool, SEGMENTS)


# --- helpers --------------------------------------------------------------------------------


def _gc_off_while(run: Callable[..., Any]) -> Callable[..., Any]:
    if GC_DURING_RUN:
        return run

    def run_without_gc(*args: Any) -> Any:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return run(*args)
        finally:
            if enabled:
                gc.enable()

    return run_without_gc


def _collected() -> tuple[tuple[()], dict[str, Any]]:
    """A pedantic setup: collect the heap before each timed run, outside the timing."""
    gc.collect()
    return (), {}


def _record(benchmark: Any, group: str, name: str, amount: float) -> None:
    stats = getattr(benchmark.stats, "stats", None)
    if stats is not None:  # None under --benchmark-disable
        _SUMMARY.figures.append(Figure(group, name, stats.median, amount))


# --- 1. append ------------------------------------------------------------------------------

APPEND_NAMES = (
    "eoslog append_batch",
    "raw os.write",
    "eoslog append_batch + fsync",
    "raw os.write + fsync",
)


@pytest.mark.parametrize("name", APPEND_NAMES)
def test_append(benchmark: Any, root: str, append_data: tuple[list[bytes], int], name: str) -> None:
    batches, records = append_data
    directory = os.path.join(root, "append")
    broker = eoslog.open(directory, durability="none", background=False)
    try:
        sides = {side.name: side for side in append_sides(broker, directory, batches, records)}
        side: AppendSide = sides[name]

        def setup() -> tuple[tuple[Any], dict[str, Any]]:
            state = side.prepare()
            quiesce()
            gc.collect()
            return (state,), {}

        benchmark.group = "log: append 1 MiB batches"
        benchmark.extra_info["bytes"] = sum(len(b) for b in batches)
        benchmark.extra_info["records"] = records
        benchmark.pedantic(
            _gc_off_while(side.run),
            setup=setup,
            teardown=side.finish,
            rounds=ROUNDS,
            warmup_rounds=1,
        )
    finally:
        broker.close()
    _record(benchmark, "append", name, sum(len(b) for b in batches))


# --- 2. random-offset read ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["eoslog log.read", "read_header", "floor: bisect + pread"])
def test_random_read(benchmark: Any, read_partition: Partition, name: str) -> None:
    rng = random.Random(SEED)
    offsets = [rng.randrange(read_partition.records) for _ in range(READ_CALLS)]
    broker = eoslog.open(read_partition.root, durability="none", background=False)
    table = BatchTable.of(read_partition)
    try:
        log = broker.log(read_partition.topic, 0)
        for offset in offsets[:10]:  # the fairness check, untimed
            if bytes(log.read(offset, max_bytes=1).records) != table.read(offset):
                raise AssertionError(f"eoslog and the floor disagree at offset {offset}")
        returned = [log.read(offset, max_bytes=1).records for offset in offsets]

        def eoslog_reads() -> None:
            read = log.read
            for offset in offsets:
                read(offset, max_bytes=1)

        def headers() -> None:
            read_header = codec.read_header
            for records in returned:
                read_header(records)

        def floor_reads() -> None:
            floor = table.read
            for offset in offsets:
                floor(offset)

        run = {
            "eoslog log.read": eoslog_reads,
            "read_header": headers,
            "floor: bisect + pread": floor_reads,
        }[name]
        benchmark.group = "log: random-offset read"
        benchmark.extra_info["calls"] = len(offsets)
        benchmark.extra_info["records"] = read_partition.records
        benchmark.extra_info["segments"] = read_partition.segments
        benchmark.pedantic(_gc_off_while(run), setup=_collected, rounds=ROUNDS, warmup_rounds=1)
    finally:
        table.close()
        broker.close()
    _record(benchmark, "read", name, len(offsets))


# --- 3. recovery ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["eoslog open + close", "raw pread 8 MiB"])
def test_recovery(benchmark: Any, read_partition: Partition, name: str) -> None:
    files = read_partition.log_files()
    reports: list[Any] = []

    def setup() -> tuple[tuple[()], dict[str, Any]]:
        remove_recovery_markers(read_partition.root)
        quiesce()
        return _collected()

    def recover() -> None:
        broker = eoslog.open(read_partition.root, durability="none", background=False)
        reports.append(broker.log(read_partition.topic, 0).recovery_report)
        broker.close()

    def check() -> None:
        report = reports.pop()
        if report.segments_recovered != read_partition.segments or report.bytes_truncated:
            raise AssertionError(f"recovery did not rescan every segment cleanly: {report}")

    def raw() -> None:
        read_files_raw(files)

    benchmark.group = "log: recovery scan"
    benchmark.extra_info["bytes"] = read_partition.log_bytes
    benchmark.extra_info["segments"] = read_partition.segments
    if name == "eoslog open + close":
        benchmark.pedantic(
            _gc_off_while(recover), setup=setup, teardown=check, rounds=ROUNDS, warmup_rounds=1
        )
    else:
        benchmark.pedantic(_gc_off_while(raw), setup=setup, rounds=ROUNDS, warmup_rounds=1)
    _record(benchmark, "recovery", name, read_partition.log_bytes)


# --- 4. clean open --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["eoslog open", "floor: listdir + open/fstat/close"])
def test_clean_open(benchmark: Any, segments_partition: Partition, name: str) -> None:
    def setup() -> tuple[tuple[list[Any]], dict[str, Any]]:
        quiesce()
        gc.collect()
        return ([],), {}

    def open_broker(holder: list[Any]) -> None:
        holder.append(eoslog.open(segments_partition.root, background=False))

    def close_broker(holder: list[Any]) -> None:
        broker = holder.pop()
        segments = len(broker.log(segments_partition.topic, 0).segments)
        report = broker.log(segments_partition.topic, 0).recovery_report
        broker.close()
        if segments != segments_partition.segments or report.segments_recovered:
            raise AssertionError(f"not a clean open of {segments_partition.segments}: {report}")

    def floor(holder: list[Any]) -> None:
        holder.append(open_files_raw(segments_partition.directory))

    benchmark.group = "log: clean open"
    benchmark.extra_info["segments"] = segments_partition.segments
    if name == "eoslog open":
        run, teardown = open_broker, close_broker
    else:
        run, teardown = floor, list.clear
    benchmark.pedantic(
        _gc_off_while(run), setup=setup, teardown=teardown, rounds=ROUNDS, warmup_rounds=1
    )
    _record(benchmark, "open", name, 1)
