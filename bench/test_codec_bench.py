"""pytest-benchmark benchmarks of the batch codec against its peers, one group per path.

Run with `make bench` (or `pytest bench --benchmark-only`). Each group puts eoslog and its peers
side by side on the same records in the same run; the summary printed at the end (conftest.py)
gives records/s and eoslog's ratios to each peer against the docs/bench.md targets. Those ratios are
printed, never asserted. pytest-benchmark runs one contender's rounds after another's; the
published figures come from bench/write_results.py, which alternates them round by round.

Workload: bench/workload.py (EOSLOG_BENCH_RECORDS, EOSLOG_BENCH_KEY_BYTES=8 override it).
Rounds: EOSLOG_BENCH_ROUNDS (default 5), after one checked warm-up run per contender; a run
shorter than 0.25 s is repeated within a round (iterations); the cyclic GC is off while timing
(EOSLOG_BENCH_GC=on keeps it on).
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable
from typing import Any

import pytest

from contenders import Contender, Inputs, contenders_of, repeats_for, unavailable
from workload import Workload

ROUNDS = int(os.environ.get("EOSLOG_BENCH_ROUNDS", 5))
# As in write_results.py: the cyclic GC is off while a run is timed (the object-making peers'
# best case) unless EOSLOG_BENCH_GC=on.
GC_DURING_RUN = os.environ.get("EOSLOG_BENCH_GC", "off") == "on"


@pytest.fixture(scope="module")
def inputs() -> Inputs:
    return Inputs(Workload.from_env())


def _ids(contender: Contender) -> str:
    return contender.name.replace(" ", "-")


def _gc_off_while(run: Callable[[], Any]) -> Callable[[], Any]:
    if GC_DURING_RUN:
        return run

    def run_without_gc() -> Any:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return run()
        finally:
            if enabled:
                gc.enable()

    return run_without_gc


def _bench(benchmark: Any, inputs: Inputs, contender: Contender, record_rate: Any) -> None:
    reason = unavailable(contender)
    if reason is not None:
        pytest.skip(reason)
    run = inputs.runner(contender)
    records = inputs.records(contender)
    # The warm-up run, checked against the workload outside the timed region: every contender
    # must produce or consume exactly the workload's records.
    start = time.perf_counter()
    result = run()
    first_seconds = time.perf_counter() - start
    payload_bytes = inputs.check(contender, result)
    del result
    # Short runs are repeated within a round (pytest-benchmark reports per-iteration times),
    # by the same rule as write_results.py.
    repeats = repeats_for(run, first_seconds)
    benchmark.group = contender.path
    benchmark.extra_info["records"] = records  # per run (per iteration)
    benchmark.extra_info["iterations"] = repeats
    benchmark.extra_info["payload_bytes"] = payload_bytes
    benchmark.extra_info["library"] = contender.library
    benchmark.extra_info["workload"] = inputs.workload.describe()
    benchmark.extra_info["gc_during_run"] = GC_DURING_RUN
    benchmark.pedantic(_gc_off_while(run), rounds=ROUNDS, warmup_rounds=0, iterations=repeats)
    stats = getattr(benchmark.stats, "stats", None)
    if stats is not None:  # None under --benchmark-disable
        benchmark.extra_info["records_per_s_median"] = records / stats.median
        record_rate(contender, records, stats.median, stats.min, stats.max)


# (a) encode, uncompressed: eoslog per-record append, eoslog append_values, aiokafka (Cython),
# kafka-python (pure Python, on the first 200 batches).
@pytest.mark.parametrize("contender", contenders_of("encode-none"), ids=_ids)
def test_encode_none(
    benchmark: Any, inputs: Inputs, contender: Contender, record_rate: Any
) -> None:
    _bench(benchmark, inputs, contender, record_rate)


# (b) encode, lz4 (Kafka framing): the same four.
@pytest.mark.parametrize("contender", contenders_of("encode-lz4"), ids=_ids)
def test_encode_lz4(benchmark: Any, inputs: Inputs, contender: Contender, record_rate: Any) -> None:
    _bench(benchmark, inputs, contender, record_rate)


# (c) decode the whole uncompressed segment: to Arrow (eoslog decode_columns + to_arrow,
# aiokafka records gathered into Arrow) and per record (eoslog batch_records, aiokafka,
# kafka-python on the first 200 batches).
@pytest.mark.parametrize("contender", contenders_of("decode"), ids=_ids)
def test_decode(benchmark: Any, inputs: Inputs, contender: Contender, record_rate: Any) -> None:
    _bench(benchmark, inputs, contender, record_rate)


# (c') the same decode to Arrow over the lz4 segment.
@pytest.mark.parametrize("contender", contenders_of("decode-lz4"), ids=_ids)
def test_decode_lz4(benchmark: Any, inputs: Inputs, contender: Contender, record_rate: Any) -> None:
    _bench(benchmark, inputs, contender, record_rate)


# (d) validate every client batch as a leader does on append (eoslog validate_batch), next to
# aiokafka's CRC check plus a walk of every record.
@pytest.mark.parametrize("contender", contenders_of("validate"), ids=_ids)
def test_validate(benchmark: Any, inputs: Inputs, contender: Contender, record_rate: Any) -> None:
    _bench(benchmark, inputs, contender, record_rate)
