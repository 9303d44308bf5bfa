"""What the hardening checks cost (issue 12, item 10): a clean open of 1,000 segments and the
read paths, measured with this checkout's eoslog against another installed eoslog (a baseline
build, e.g. the commit before the checks), alternated round by round in one run.

    python bench/checks_bench.py --baseline-python /path/to/old/venv/bin/python
        [--records N] [--segments S] [--rounds R] [--tmp DIR] [--output PATH]

Workload: (1) one partition of S segments (default 1,000; one 10-record batch each, segment.bytes
2 KiB), closed cleanly; timed: `eoslog.open(path, background=False)` alone, best of 5 opens per
round. (2) one partition of N records (default 1,000,000; value 100 B, 1,000 records a batch,
`append_batch`, durability "none", segment.bytes 32 MiB), read_committed from offset 0:
`consume(500)` until N messages, and `consume_arrow(100_000)` until N rows, each timed whole.
Both directories are written once, by this checkout, and read by both builds (the format did not
change). Every measurement runs in a fresh child process of the interpreter under test, so each
side imports its own eoslog; the two sides alternate A B A B ... and the ratios are per round.

Targets (docs/bench.md): clean open of 1,000 segments < 200 ms; the read-path checks cost <= 3% of
consume throughput (this build's records/s >= 97% of the baseline's). Printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import eoslog
from eoslog.record import codec

BENCH_DIR = Path(__file__).resolve().parent
TOPIC = "bench"
OPEN_TARGET_MS = 200.0
READ_COST_MAX = 0.03

CHILD = textwrap.dedent(
    """
    import json, sys, time
    import eoslog
    kind, path, records = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if kind == "open":
        times = []
        for _ in range(5):
            start = time.perf_counter()
            broker = eoslog.open(path, background=False)
            times.append(time.perf_counter() - start)
            broker.close()
        print(json.dumps({"seconds": min(times)}))
    else:
        broker = eoslog.open(path, background=False, durability="none")
        consumer = broker.consumer({"auto.offset.reset": "earliest"})
        consumer.assign([eoslog.TopicPartition("bench", 0, 0)])
        taken = 0
        start = time.perf_counter()
        if kind == "consume":
            while taken < records:
                taken += len(consumer.consume(500, timeout=0))
        else:
            while taken < records:
                table = consumer.consume_arrow(100_000, timeout=0)
                taken += 0 if table is None else table.num_rows
        seconds = time.perf_counter() - start
        consumer.close()
        broker.close()
        print(json.dumps({"seconds": seconds, "records": taken}))
    """
)


def build_segments(path: str, segments: int) -> None:
    with eoslog.open(path, durability="none", background=False) as broker:
        broker.create_topic(TOPIC, 1, config={"segment.bytes": 2048})
        log = broker.log(TOPIC, 0)
        for number in range(segments):
            builder = codec.BatchBuilder()
            for record in range(10):
                builder.append(1_700_000_000_000 + number, None, b"%099d" % record)
            log.append_batch(builder.build())
        if len(log.segments) < segments:
            raise AssertionError(f"{len(log.segments)} segments, expected {segments}")


def build_records(path: str, records: int) -> None:
    value = b'{"id": 1234567, "name": "a record of the standard workload", "v": 0.5, "k": "ab"}'
    value = (value * 2)[:100]
    with eoslog.open(path, durability="none", background=False) as broker:
        broker.create_topic(TOPIC, 1, config={"segment.bytes": 32 << 20})
        log = broker.log(TOPIC, 0)
        for start in range(0, records, 1000):
            builder = codec.BatchBuilder()
            for _ in range(min(1000, records - start)):
                builder.append(1_700_000_000_000, None, value)
            log.append_batch(builder.build())


def measure(python: str, kind: str, path: str, records: int) -> float:
    done = subprocess.run(
        [python, "-c", CHILD, kind, path, str(records)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if kind != "open" and result["records"] < records:
        raise AssertionError(f"{kind} read {result['records']} of {records}")
    return float(result["seconds"])


def version_of(python: str) -> str:
    code = "import eoslog, os; print(os.path.dirname(eoslog.__file__))"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-python", required=True)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--segments", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tmp", default="/tmp")
    parser.add_argument("--output", type=Path, default=BENCH_DIR / "RESULTS-checks.md")
    args = parser.parse_args(argv)
    contenders = {"this build": sys.executable, "baseline": args.baseline_python}
    root = tempfile.mkdtemp(prefix="eoslog-checks-", dir=args.tmp)
    try:
        open_dir, read_dir = os.path.join(root, "open"), os.path.join(root, "read")
        build_segments(open_dir, args.segments)
        build_records(read_dir, args.records)
        kinds = {"open": open_dir, "consume": read_dir, "consume_arrow": read_dir}
        seconds: dict[tuple[str, str], list[float]] = {}
        for round_number in range(args.rounds + 1):  # round 0 warms the page cache
            order = list(contenders) if round_number % 2 else list(reversed(contenders))
            for kind, path in kinds.items():
                for name in order:
                    taken = measure(contenders[name], kind, path, args.records)
                    if round_number:
                        seconds.setdefault((kind, name), []).append(taken)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    lines = report(args, contenders, seconds)
    args.output.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def report(
    args: argparse.Namespace,
    contenders: dict[str, str],
    seconds: dict[tuple[str, str], list[float]],
) -> list[str]:
    def median(kind: str, name: str) -> float:
        return statistics.median(seconds[(kind, name)])

    def ratio(kind: str) -> float:
        pairs = zip(seconds[(kind, "baseline")], seconds[(kind, "this build")], strict=True)
        return statistics.median(old / new for old, new in pairs)

    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    lines = [
        "# What the hardening checks cost (bench/checks_bench.py)",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load average {load}, "
        f"{os.cpu_count()} cores; {args.rounds} alternated rounds after a warm-up.",
        f"Command: `python bench/checks_bench.py --baseline-python {args.baseline_python}`",
        "",
        *(f"- {name}: eoslog from `{version_of(python)}`" for name, python in contenders.items()),
        "",
        "| path | this build (median) | baseline (median) | this build ÷ baseline speed |",
        "|---|---:|---:|---:|",
    ]
    open_ms = median("open", "this build") * 1e3
    lines.append(
        f"| clean open of {args.segments:,} segments | {open_ms:.1f} ms | "
        f"{median('open', 'baseline') * 1e3:.1f} ms | {ratio('open'):.0%} |"
    )
    for kind in ("consume", "consume_arrow"):
        rates = [args.records / median(kind, name) / 1e6 for name in ("this build", "baseline")]
        lines.append(
            f"| {kind}() of {args.records:,} records | {rates[0]:.2f} M rec/s | "
            f"{rates[1]:.2f} M rec/s | {ratio(kind):.0%} |"
        )
    read_ok = all(ratio(kind) >= 1 - READ_COST_MAX for kind in ("consume", "consume_arrow"))
    lines += [
        "",
        f"Targets: clean open < {OPEN_TARGET_MS:g} ms: {open_ms:.1f} ms, "
        f"{'met' if open_ms < OPEN_TARGET_MS else 'not met'}; read-path checks cost "
        f"<= {READ_COST_MAX:.0%} of throughput: {'met' if read_ok else 'not met'}.",
    ]
    return lines


if __name__ == "__main__":
    sys.exit(main())
