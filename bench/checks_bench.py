"""What the hardening checks cost (issue 12, item 10): a clean open of 1,000 segments and the
read paths, measured with this checkout's eoslog against another installed eoslog (a baseline
build, e.g. the commit before the checks), alternated round by round in one run.

    python bench/checks_bench.py --baseline-python /path/to/old/venv/bin/python
        [--records N] [--segments S] [--rounds R] [--tmp DIR] [--output PATH] [--quick]

Every measurement runs in a fresh child process of the interpreter under test
(contenders_checks.child_contender), so each side imports its own eoslog. Targets
(scenarios.py): clean open < 200 ms; the read-path checks cost <= 3% of consume throughput.
Printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path as FilePath

sys.path.insert(0, str(FilePath(__file__).resolve().parent))

import eoslog
import harness
import prose
from contenders_checks import child_contender
from report import Report, Section
from scenarios import (
    CHECKS,
    CHECKS_BUILDS,
    CHECKS_KINDS,
    CHECKS_OPEN_TARGET,
    CHECKS_READ_TARGETS,
    CHECKS_TARGETS_HEADING,
    CONSUMER_SEGMENT_BYTES,
)
from workload import (
    SEGMENT_BATCH_RECORDS,
    SEGMENT_BYTES_SMALL,
    Workload,
    build_segments,
    value_pool,
    write_batches,
)

PACKAGES = ("eoslog",)


def source_of(python: str) -> str:
    code = "import eoslog, os; print(os.path.dirname(eoslog.__file__))"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def measure(args: argparse.Namespace, root: str) -> Report:
    builds = dict(zip(CHECKS_BUILDS, (sys.executable, args.baseline_python), strict=True))
    opened = build_segments(os.path.join(root, "open"), value_pool(), args.segments).root
    read = os.path.join(root, "read")
    with eoslog.open(read, durability="none", background=False) as broker:
        write_batches(broker, Workload.build(args.records), CONSUMER_SEGMENT_BYTES)
    sides = [
        child_contender(
            f"{kind} {name}", python, kind, opened if kind == "open" else read, args.records
        )
        for kind in CHECKS_KINDS
        for name, python in builds.items()
    ]
    runs = harness.alternate(sides, args.rounds, args.timer, label="checks")

    def ms(value: float) -> str:
        return f"{value * 1e3:.1f} ms"

    def rate(value: float) -> str:
        return f"{args.records / value / 1e6:.2f} M rec/s"

    rows = []
    for kind in CHECKS_KINDS:
        ours, baseline = (runs.seconds(f"{kind} {name}") for name in CHECKS_BUILDS)
        fmt = ms if kind == "open" else rate
        label = (
            f"clean open of {args.segments:,} segments"
            if kind == "open"
            else f"{kind}() of {args.records:,} records"
        )
        speed = runs.speedup(f"{kind} this build", f"{kind} baseline")
        rows.append(
            [
                label,
                fmt(statistics.median(ours)),
                fmt(statistics.median(baseline)),
                harness.median_spread(speed, harness.pct),
            ]
        )
    header = ["path", "this build (median)", "baseline (median)", "this build ÷ baseline speed"]
    lines = [
        *(prose.CHECKS_BUILD.format(name=n, source=source_of(p)) for n, p in builds.items()),
        "",
        *harness.table(header, rows),
    ]
    open_ms = [s * 1e3 for s in runs.seconds("open this build")]
    targets = [CHECKS_OPEN_TARGET.row(open_ms), *(t.of(runs) for t in CHECKS_READ_TARGETS)]
    method = prose.CHECKS_METHOD.format(
        segments=args.segments,
        batch_records=SEGMENT_BATCH_RECORDS,
        segment_bytes=SEGMENT_BYTES_SMALL,
        records=args.records,
        rounds=args.rounds,
    )
    sections = [Section("Results", lines, targets)]
    return Report(
        prose.CHECKS_TITLE, method, PACKAGES, sections, targets_heading=CHECKS_TARGETS_HEADING
    )


if __name__ == "__main__":
    sys.exit(harness.main(CHECKS, measure, __doc__ or ""))
