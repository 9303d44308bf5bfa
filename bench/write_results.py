"""Measure eoslog's codec against its peers in one process and write bench/RESULTS-codec.md.

    python bench/write_results.py [--records N] [--rounds R] [--key-bytes 8] [--paths a,b]
                                  [--quick]

The scenarios are scenarios.py's codec table (paths, contenders, targets), the contenders
contenders_codec.py's. For each path every contender runs once as a warm-up whose result is
checked against the workload, then all contenders run alternately, round after round
(A B C, A B C, ...), so a slow phase of this shared machine hits every contender alike. Per
contender: median and min-max of records/s over the rounds. Per pair: the median of the
per-round ratios. A physical-limits line (CRC32C and memcpy on 1 MiB) is measured in the same
run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path as FilePath

import numpy as np

sys.path.insert(0, str(FilePath(__file__).resolve().parent))

import harness
import prose
from contenders_codec import Contender, Inputs, contenders_of, unavailable
from harness import Runs, millions, spread, x
from report import Report, Section
from scenarios import CODEC, TABLES, TARGETS
from workload import Workload

LIMIT_BYTES = 1024 * 1024
# Each physical-limit round repeats its call for at least this long, so that a 30 µs memcpy
# is timed over many calls and a slow pure-Python CRC over at least one.
LIMIT_ROUND_SECONDS_MIN = 0.05
PACKAGES = ("eoslog", "aiokafka", "kafka-python", "pyarrow", "lz4", "numpy", "crc32c", "cramjam")


class PathResult:
    """One path's alternation: the runs, the scenario's contenders by name, the skipped ones."""

    def __init__(self, inputs: Inputs, path: str, args: argparse.Namespace) -> None:
        self.inputs = inputs
        self.contenders: dict[str, Contender] = {}
        self.skipped: list[tuple[Contender, str]] = []
        timed = []
        for contender in contenders_of(path):
            reason = unavailable(contender)
            if reason is not None:
                self.skipped.append((contender, reason))
                continue
            self.contenders[contender.name] = contender
            timed.append(inputs.timed(contender))
        self.runs = harness.alternate(
            timed, args.rounds, args.timer, reverse=False, repeat_short=True
        )

    def records(self, name: str) -> int:
        return self.inputs.records(self.contenders[name])

    def rates(self, name: str) -> list[float]:
        return self.runs.rates(name, self.records(name))


def measure_limits(rounds: int, timer: harness.Timer) -> Runs:
    """GiB/s on 1 MiB: eoslog's CRC32C, the crc32c package's, and memcpy (numpy copyto into
    a preallocated array), alternately."""
    import crc32c as crc32c_package

    from eoslog.record import primitives

    source = np.frombuffer(os.urandom(LIMIT_BYTES), dtype=np.uint8)
    target = np.empty_like(source)
    data = source.tobytes()
    if primitives.crc32c(data) != crc32c_package.crc32c(data):
        raise AssertionError("eoslog crc32c and the crc32c package disagree")

    def bandwidth(call: Callable[[], object]) -> Callable[[object], float]:
        def run(_: object) -> float:
            count = 0
            start = time.perf_counter()
            while True:
                call()
                count += 1
                elapsed = time.perf_counter() - start
                if elapsed >= LIMIT_ROUND_SECONDS_MIN:
                    return count * LIMIT_BYTES / elapsed / 2**30

        return run

    calls: dict[str, Callable[[], object]] = {
        "eoslog crc32c": lambda: primitives.crc32c(data),
        "crc32c package": lambda: crc32c_package.crc32c(data),
        "memcpy (numpy copyto)": lambda: np.copyto(target, source),
    }
    contenders = [harness.Contender(n, bandwidth(c), timed=False) for n, c in calls.items()]
    return harness.alternate(contenders, rounds, timer, reverse=False)


# --- the report ---------------------------------------------------------------------------------


def table_lines(table: str, results: dict[str, PathResult]) -> list[str]:
    rows = [
        (result, result.contenders[name])
        for result in results.values()
        for name in result.runs
        if table in result.contenders[name].tables
    ]
    rows.sort(key=lambda row: row[1].library != "eoslog")  # eoslog first, stable
    skipped = [
        (c, reason)
        for result in results.values()
        for c, reason in result.skipped
        if table in c.tables
    ]
    if not rows and not skipped:
        return []
    cells = []
    for result, contender in rows:
        measured = result.runs[contender.name]
        rates = result.rates(contender.name)
        records = result.records(contender.name)
        mib = measured.checked * statistics.median(rates) / records / 2**20
        cells.append(
            [
                contender.name,
                f"{records:,}",
                str(measured.repeats),
                millions(statistics.median(rates)),
                spread(rates, millions),
                f"{mib:,.0f}",
                f"{measured.checked:,}",
            ]
        )
    cells += [[c.name, "—", "—", f"not measured: {reason}", "", "", ""] for c, reason in skipped]
    lines = [
        f"### {TABLES[table]}",
        "",
        *harness.table(
            [
                "contender",
                "records/run",
                "runs/sample",
                "median records/s",
                "min – max",
                "MiB/s (median)",
                "bytes/run",
            ],
            cells,
        ),
    ]
    ratios = []
    for result, ours in rows:
        if ours.library == "eoslog":
            for peer in result.contenders.values():
                if peer.library != "eoslog" and table in peer.tables:
                    values = result.runs.speedup(ours.name, peer.name)
                    median = x(statistics.median(values))
                    ratios.append([ours.name, peer.name, median, spread(values, x)])
    if ratios:
        header = ["eoslog", "÷ peer", "ratio (median of per-round ratios)", "min – max"]
        lines += ["", *harness.table(header, ratios, left=2)]
    return [*lines, ""]


def target_rows(results: dict[str, PathResult]) -> list[str]:
    rows = []
    for target in TARGETS:
        result = results.get(target.path)
        if result is None:
            continue
        names = (target.ours, target.peer)
        reasons = [reason for c, reason in result.skipped if c.name in names]
        rows.append(target.row(None, "; ".join(reasons)) if reasons else target.of(result.runs))
    return rows


def limits_lines(limits: Runs, results: dict[str, PathResult]) -> list[str]:
    parts = [
        f"{name} {statistics.median(m.values):.2f} GiB/s ({spread(m.values, harness.two)})"
        for name, m in limits.items()
    ]
    lines = [prose.CODEC_LIMITS.format(limits="; ".join(parts))]
    validate = results.get("validate")
    if validate is not None and "eoslog validate_batch" in validate.runs:
        ours = validate.runs["eoslog validate_batch"]
        rate = statistics.median(validate.rates("eoslog validate_batch"))
        bandwidth = ours.checked * rate / validate.records("eoslog validate_batch") / 2**30
        package = statistics.median(limits["crc32c package"].values)
        lines.append(prose.CODEC_VALIDATE.format(bandwidth=bandwidth, fraction=bandwidth / package))
    return lines


def measure(args: argparse.Namespace, root: str) -> Report:
    workload = Workload.build(args.records, args.key_bytes)
    inputs = Inputs(workload)
    print(f"workload: {workload.describe()}", flush=True)
    results = {}
    for path in args.paths:
        print(f"measuring {path} ...", flush=True)
        results[path] = PathResult(inputs, path, args)
    print("measuring physical limits ...", flush=True)
    limits = measure_limits(args.rounds, args.timer)
    tables = [line for table in TABLES for line in table_lines(table, results)]
    method = prose.CODEC_METHOD.format(
        workload=workload.describe(),
        rounds=args.rounds,
        sample_seconds=harness.SAMPLE_SECONDS_MIN,
        gc=args.gc,
    )
    return Report(
        prose.CODEC_TITLE,
        method,
        PACKAGES,
        [
            Section("Results", tables, target_rows(results)),
            Section("Physical limits", limits_lines(limits, results)),
        ],
        data_disk=False,
    )


if __name__ == "__main__":
    sys.exit(harness.main(CODEC, measure, __doc__ or ""))
