"""pytest-benchmark over the scenario tables (`make bench`): micro benchmarks, one group per path.

Each test takes one contender of contenders_codec.py or contenders_log.py, the same as the bench
scripts run (the codec's paths; the log's append, random read, recovery and clean open), gives it
the same checked warm-up (harness.warm_up), then lets pytest-benchmark time it: `prepare` as the
setup, `run` timed with the cyclic GC off, `finish` as the teardown. pytest-benchmark runs one
contender's rounds after another's, so the ratios conftest.py prints at the end are ratios of
medians, indicative only; the published figures come from the scripts, which alternate the
contenders (`make bench-results`). Nothing is asserted about speed.

Environment: EOSLOG_BENCH_RECORDS and EOSLOG_BENCH_KEY_BYTES=8 (the codec workload),
EOSLOG_BENCH_ROUNDS (default 5), EOSLOG_BENCH_GC=on, EOSLOG_BENCH_TMP (default /tmp), and the
log's sizes: EOSLOG_BENCH_LOG_APPEND_MIB (default 64), EOSLOG_BENCH_LOG_READ_RECORDS (default
1,000,000), EOSLOG_BENCH_LOG_READ_CALLS (offsets per run, default 100),
EOSLOG_BENCH_LOG_SEGMENTS (default 1,000).
"""

from __future__ import annotations

import gc
import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

import contenders_log
import eoslog
import harness
from conftest import Figure, record
from contenders_codec import CONTENDERS, Contender, Inputs, unavailable
from scenarios import LOG_READ_BATCH_RECORDS, LOG_READ_SEGMENT_BYTES
from workload import (
    BatchTable,
    Partition,
    Workload,
    build_append_batches,
    build_partition,
    build_segments,
    value_pool,
)

ROUNDS = int(os.environ.get("EOSLOG_BENCH_ROUNDS", 5))
TIMER = harness.Timer(os.environ.get("EOSLOG_BENCH_GC", "off") == "on")
TMP = os.environ.get("EOSLOG_BENCH_TMP", "/tmp")
APPEND_MIB = int(os.environ.get("EOSLOG_BENCH_LOG_APPEND_MIB", 64))
READ_RECORDS = int(os.environ.get("EOSLOG_BENCH_LOG_READ_RECORDS", 1_000_000))
READ_CALLS = int(os.environ.get("EOSLOG_BENCH_LOG_READ_CALLS", 100))
SEGMENTS = int(os.environ.get("EOSLOG_BENCH_LOG_SEGMENTS", 1_000))


def bench(
    benchmark: Any,
    contender: harness.Contender,
    group: str,
    amount: float,
    *,
    stateless: bool = False,
    quiet: bool = False,
) -> Any:
    """Warm `contender` up (checked), time it with pytest-benchmark and record its median for
    the summary; `amount` is what one run handles (records, bytes, calls). A `stateless`
    contender repeats a short run within a round (pytest-benchmark's iterations), by the
    scripts' rule; the others get a fresh `prepare()` per round. Returns the check's figure."""
    checked, first_seconds = harness.warm_up(contender, quiet)
    benchmark.group = group
    run = TIMER.without_gc(contender.run)
    if stateless:
        repeats = harness.repeats_for(lambda: contender.run(None), first_seconds)
        benchmark.extra_info["iterations"] = repeats
        benchmark.pedantic(run, args=(None,), rounds=ROUNDS, iterations=repeats)
    else:

        def setup() -> tuple[tuple[Any], dict[str, Any]]:
            state = contender.prepare()
            if quiet:
                harness.quiesce()
            gc.collect()
            return (state,), {}

        benchmark.pedantic(run, setup=setup, teardown=contender.finish, rounds=ROUNDS)
    stats = getattr(benchmark.stats, "stats", None)
    if stats is not None:  # None under --benchmark-disable
        record(Figure(group, contender.name, stats.median, stats.min, stats.max, amount))
    return checked


# --- the codec ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def inputs() -> Inputs:
    return Inputs(Workload.from_env())


@pytest.mark.parametrize("contender", CONTENDERS, ids=lambda c: f"{c.path}:{c.name}")
def test_codec(benchmark: Any, inputs: Inputs, contender: Contender) -> None:
    reason = unavailable(contender)
    if reason is not None:
        pytest.skip(reason)
    records = inputs.records(contender)
    payload = bench(benchmark, inputs.timed(contender), contender.path, records, stateless=True)
    benchmark.extra_info.update(
        records=records,
        payload_bytes=payload,
        library=contender.library,
        workload=inputs.workload.describe(),
    )


# --- the partition log --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def root() -> Iterator[str]:
    directory = tempfile.mkdtemp(prefix="eoslog-logbench-", dir=TMP)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def pool() -> list[bytes]:
    return value_pool()


@pytest.fixture(scope="module")
def read_partition(root: str, pool: list[bytes]) -> Partition:
    return build_partition(
        os.path.join(root, "read"),
        "read",
        pool,
        records=READ_RECORDS,
        batch_records=LOG_READ_BATCH_RECORDS,
        config={"segment.bytes": LOG_READ_SEGMENT_BYTES},
    )


@pytest.fixture(scope="module")
def segments_partition(root: str, pool: list[bytes]) -> Partition:
    return build_segments(os.path.join(root, "open"), pool, SEGMENTS)


APPEND = [
    f"{name}{suffix}"
    for suffix in ("", " + fsync")
    for name in ("eoslog append_batch", "raw os.write")
]


@pytest.mark.parametrize("name", APPEND)
def test_log_append(benchmark: Any, root: str, pool: list[bytes], name: str) -> None:
    batches, per_batch = build_append_batches(pool, APPEND_MIB)
    directory = os.path.join(root, "append")
    broker = eoslog.open(directory, durability="none", background=False)
    try:
        sides = contenders_log.append_contenders(
            broker, directory, batches, per_batch * len(batches)
        )
        (side,) = [s for s in sides if s.name == name]
        bench(benchmark, side, "log: append", sum(len(b) for b in batches), quiet=True)
    finally:
        broker.close()


@pytest.mark.parametrize("name", ["eoslog", "floor", "floor mmap"])
def test_log_read(benchmark: Any, read_partition: Partition, name: str) -> None:
    rng = random.Random(20_260_101)
    offsets = [rng.randrange(read_partition.records) for _ in range(READ_CALLS)]
    broker = eoslog.open(read_partition.root, durability="none", background=False)
    table = BatchTable.of(read_partition)
    try:
        log = broker.log(read_partition.topic, 0)
        contenders_log.check_reads(log, table, offsets[:10])
        sides = contenders_log.read_contenders(log, table, lambda _: (offsets, 3600.0), TIMER)
        (side,) = [s for s in sides if s.name == name]
        bench(benchmark, side, "log: random-offset read (calls timed one by one)", READ_CALLS)
    finally:
        table.close()
        broker.close()


@pytest.mark.parametrize("name", ["eoslog open", "eoslog close", "raw"])
def test_log_recovery(benchmark: Any, read_partition: Partition, name: str) -> None:
    files = read_partition.log_files()
    sides = contenders_log.open_contenders(
        read_partition, True, lambda: contenders_log.read_files_raw(files), "raw"
    )
    (side,) = [s for s in sides if s.name == name]
    bench(benchmark, side, "log: recovery", read_partition.log_bytes, quiet=True)


@pytest.mark.parametrize("name", ["eoslog open", "eoslog close", "floor"])
def test_log_open(benchmark: Any, segments_partition: Partition, name: str) -> None:
    directory = segments_partition.directory
    sides = contenders_log.open_contenders(
        segments_partition, False, lambda: contenders_log.open_files_raw(directory), "floor"
    )
    (side,) = [s for s in sides if s.name == name]
    bench(benchmark, side, "log: clean open", 1, quiet=True)
