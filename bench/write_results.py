"""Measure eoslog's codec against its peers in one process and write bench/RESULTS-codec.md.

    python bench/write_results.py [--records N] [--rounds R] [--key-bytes 8] [--paths a,b]

For each path (bench/contenders.py) every contender runs once as a warm-up whose result is
checked against the workload, then all contenders run alternately, round after round
(A B C, A B C, ...), so a slow phase of this shared machine hits every contender alike. Per
contender: median and min-max of records/s over the rounds. Per pair: the median of the
per-round ratios. The ratios are compared with the docs/bench.md targets and marked met / not met;
nothing is asserted and nothing is hard-coded. A physical-limits line (CRC32C and memcpy on
1 MiB) is measured in the same run.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path as FilePath

import numpy as np

BENCH_DIR = FilePath(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from contenders import (  # noqa: E402
    PATHS,
    SAMPLE_SECONDS_MIN,
    TABLES,
    TARGETS,
    Contender,
    Inputs,
    contenders_of,
    repeats_for,
    unavailable,
)
from workload import RECORDS_DEFAULT, Workload  # noqa: E402

ROUNDS_DEFAULT = 7
ROUNDS_MIN = 3  # docs/bench.md: median and spread over >= 3 runs
LIMIT_BYTES = 1024 * 1024
# Each physical-limit round repeats its call for at least this long, so that a 30 µs memcpy
# is timed over many calls and a slow pure-Python CRC over at least one.
LIMIT_ROUND_SECONDS_MIN = 0.05
PACKAGES = ("eoslog", "aiokafka", "kafka-python", "pyarrow", "lz4", "numpy", "crc32c", "cramjam")


@dataclass
class Measured:
    contender: Contender
    records: int  # per run
    payload_bytes: int  # per run
    repeats: int  # runs per timed sample
    seconds: list[float]  # per run: a sample's time / repeats

    @property
    def rates(self) -> list[float]:
        return [self.records / s for s in self.seconds]


@dataclass
class PathResult:
    path: str
    measured: list[Measured]
    skipped: list[tuple[Contender, str]]

    def find(self, name: str) -> Measured | None:
        return next((m for m in self.measured if m.contender.name == name), None)


def timed(run: Callable[[], object], repeats: int, gc_during_run: bool) -> float:
    """Seconds per run, over one sample of `repeats` runs. Each result is dropped as soon as
    the next run starts, as pytest-benchmark does: freeing any contender's result is cheap
    here (a list of batches, a few Arrow buffers, a count), while keeping several alive would
    make every repeated run fault in fresh memory. The heap is collected first; by default
    the cyclic GC is then off while the sample is timed: it would charge the contenders that
    create objects (the peers) for traversing this harness's own million-entry lists, so
    turning it off gives them their best case and keeps eoslog's ratios conservative."""
    gc.collect()
    if not gc_during_run:
        gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(repeats):
            run()
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    return elapsed / repeats


def measure_path(inputs: Inputs, path: str, rounds: int, gc_during_run: bool) -> PathResult:
    runnable: list[Contender] = []
    skipped = []
    for contender in contenders_of(path):
        reason = unavailable(contender)
        if reason is None:
            runnable.append(contender)
        else:
            skipped.append((contender, reason))
    measured = []
    runners = []
    for contender in runnable:
        run = inputs.runner(contender)
        # Warm-up, and the fairness check, outside any timed region.
        start = time.perf_counter()
        result = run()
        first_seconds = time.perf_counter() - start
        payload_bytes = inputs.check(contender, result)
        del result
        repeats = repeats_for(run, first_seconds)
        measured.append(Measured(contender, inputs.records(contender), payload_bytes, repeats, []))
        runners.append(run)
    for _ in range(rounds):
        for m, run in zip(measured, runners, strict=True):
            m.seconds.append(timed(run, m.repeats, gc_during_run))
    return PathResult(path, measured, skipped)


def measure_limits(rounds: int) -> dict[str, list[float]]:
    """GiB/s on 1 MiB: eoslog's CRC32C, the crc32c package's, and memcpy (numpy copyto into
    a preallocated array), alternately."""
    import crc32c as crc32c_package

    from eoslog.record import primitives

    source = np.frombuffer(os.urandom(LIMIT_BYTES), dtype=np.uint8)
    target = np.empty_like(source)
    data = source.tobytes()
    if primitives.crc32c(data) != crc32c_package.crc32c(data):
        raise AssertionError("eoslog crc32c and the crc32c package disagree")
    calls: dict[str, Callable[[], object]] = {
        "eoslog crc32c": lambda: primitives.crc32c(data),
        "crc32c package": lambda: crc32c_package.crc32c(data),
        "memcpy (numpy copyto)": lambda: np.copyto(target, source),
    }
    rates: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds + 1):  # the first round is the warm-up
        for name, call in calls.items():
            count = 0
            start = time.perf_counter()
            while True:
                call()
                count += 1
                elapsed = time.perf_counter() - start
                if elapsed >= LIMIT_ROUND_SECONDS_MIN:
                    break
            rates[name].append(count * LIMIT_BYTES / elapsed / 2**30)
    return {name: values[1:] for name, values in rates.items()}


# --- the report ---------------------------------------------------------------------------------


def millions(rate: float) -> str:
    return f"{rate / 1e6:.2f} M"


def spread(values: Sequence[float], scale: Callable[[float], str]) -> str:
    return f"{scale(min(values))} – {scale(max(values))}"


def ratio_rounds(ours: Measured, peer: Measured) -> list[float]:
    return [a / b for a, b in zip(ours.rates, peer.rates, strict=True)]


def x(value: float) -> str:
    return f"{value:.2f}×"


def machine_lines(packages: Sequence[str] = PACKAGES) -> list[str]:
    cpu = platform.processor() or "unknown"
    try:
        for line in FilePath("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "unknown"
    try:
        for line in FilePath("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 2**20:.1f} GiB"
                break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    versions = ", ".join(f"{name} {package_version(name)}" for name in packages)
    return [
        f"- CPU: {cpu}; cores: {os.cpu_count()} (usable by this process: {usable})",
        f"- memory: {memory}",
        f"- {platform.python_implementation()} {platform.python_version()} on "
        f"{platform.platform()}",
        f"- packages: {versions}",
    ]


def package_version(name: str) -> str:
    try:
        found = metadata.version(name)
    except metadata.PackageNotFoundError:
        found = "not installed"
    if name == "eoslog":
        import eoslog

        source = FilePath(eoslog.__file__).parent
        found = (
            f"{eoslog.__version__} (imported from {source}{git_commit()};"
            f" installed distribution: {found})"
        )
    return found


def git_output(*args: str) -> str | None:
    """What `git -C bench/ ARGS` prints, or None if git is missing or fails."""
    try:
        done = subprocess.run(
            ["git", "-C", str(BENCH_DIR), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def git_commit() -> str:
    commit = git_output("rev-parse", "--short", "HEAD")
    return f", commit {commit.strip()}" if commit is not None else ""


def command_line(argv: Sequence[str]) -> str:
    env = [
        f"{k}={os.environ[k]}" for k in ("EOSLOG_NO_EXTENSIONS", "PYTHONPATH") if k in os.environ
    ]
    python = os.path.relpath(sys.executable)
    if python.startswith(".."):
        python = "python"
    return " ".join([*env, shlex.join([python, sys.argv[0], *argv])])


def codec_line() -> str:
    from eoslog.record import USING_EXTENSIONS, codec, primitives

    backend = primitives.crc32c_backend()
    line = f"Codec under test: `{codec.__name__}` (CRC32C backend: {backend})."
    if not USING_EXTENSIONS:
        line += (
            " **The pure-Python twin is selected (EOSLOG_NO_EXTENSIONS): these numbers check the"
            " harness, they are not eoslog's performance.**"
        )
    return line


def table_lines(table: str, results: dict[str, PathResult]) -> list[str]:
    rows = [
        (result, m)
        for result in results.values()
        for m in result.measured
        if table in m.contender.tables
    ]
    rows.sort(key=lambda row: row[1].contender.library != "eoslog")  # eoslog first, stable
    skipped = [
        (c, reason)
        for result in results.values()
        for c, reason in result.skipped
        if table in c.tables
    ]
    if not rows and not skipped:
        return []
    lines = [
        f"### {TABLES[table]}",
        "",
        "| contender | records/run | runs/sample | median records/s | min – max | MiB/s (median) "
        "| bytes/run |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for _result, m in rows:
        median = statistics.median(m.rates)
        mib = m.payload_bytes * median / m.records / 2**20
        lines.append(
            f"| {m.contender.name} | {m.records:,} | {m.repeats} | {millions(median)} | "
            f"{spread(m.rates, millions)} | {mib:,.0f} | {m.payload_bytes:,} |"
        )
    for contender, reason in skipped:
        lines.append(f"| {contender.name} | — | — | not measured: {reason} | | | |")
    ratio_rows = []
    for result, ours in rows:
        if ours.contender.library != "eoslog":
            continue
        for peer in result.measured:
            if peer.contender.library == "eoslog" or table not in peer.contender.tables:
                continue
            ratios = ratio_rounds(ours, peer)
            ratio_rows.append(
                f"| {ours.contender.name} | {peer.contender.name} | "
                f"{x(statistics.median(ratios))} | {spread(ratios, x)} |"
            )
    if ratio_rows:
        lines += [
            "",
            "| eoslog | ÷ peer | ratio (median of per-round ratios) | min – max |",
            "|---|---|---:|---:|",
            *ratio_rows,
        ]
    return [*lines, ""]


def target_lines(results: dict[str, PathResult]) -> list[str]:
    lines = [
        "| path | eoslog | peer | target | measured ratio (median; min – max) | status |",
        "|---|---|---|---:|---:|---|",
    ]
    for target in TARGETS:
        result = results.get(target.path)
        if result is None:
            continue
        ours, peer = result.find(target.contender), result.find(target.peer)
        head = f"| {target.path} | {target.contender} | {target.peer} | ≥ {target.ratio_min:g}× |"
        if ours is None or peer is None:
            reasons = [r for c, r in result.skipped if c.name in (target.contender, target.peer)]
            lines.append(f"{head} — | not measured ({'; '.join(reasons) or 'not run'}) |")
            continue
        ratios = ratio_rounds(ours, peer)
        median = statistics.median(ratios)
        status = "met" if median >= target.ratio_min else "**not met**"
        lines.append(f"{head} {x(median)} ({spread(ratios, x)}) | {status} |")
    return lines


def limits_lines(limits: dict[str, list[float]], results: dict[str, PathResult]) -> list[str]:
    parts = [
        f"{name} {statistics.median(v):.2f} GiB/s ({min(v):.2f} – {max(v):.2f})"
        for name, v in limits.items()
    ]
    lines = ["Physical limits, 1 MiB buffer, median of rounds: " + "; ".join(parts) + "."]
    validate = results.get("validate")
    ours = validate.find("eoslog validate_batch") if validate else None
    if ours is not None:
        bandwidth = ours.payload_bytes * statistics.median(ours.rates) / ours.records / 2**30
        package = statistics.median(limits["crc32c package"])
        lines.append(
            f"eoslog validate_batch reads {bandwidth:.2f} GiB/s of batch bytes: "
            f"{bandwidth / package:.0%} of the crc32c package's CRC bandwidth "
            f"(ratio of medians from separate loops)."
        )
    return lines


def render(
    argv: Sequence[str],
    workload: Workload,
    rounds: int,
    gc_mode: str,
    results: dict[str, PathResult],
    limits: dict[str, list[float]],
    seconds_total: float,
) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# eoslog codec benchmarks: ratios to peers, measured in one run",
        "",
        f"Command: `{command_line(argv)}`  ",
        f"Date: {now}; wall time {seconds_total:.0f} s  ",
        codec_line(),
        "",
        "## Machine",
        "",
        *machine_lines(),
        "",
        "## Workload and method",
        "",
        f"Workload: {workload.describe()}. eoslog `append_values` stamps a whole batch with",
        "its first timestamp (the API takes one timestamp per call).",
        "",
        f"Method: per path, one checked warm-up run per contender, then {rounds} rounds in which",
        "the contenders run alternately in this process (A B C, A B C, …). A timed sample",
        f"repeats a run until it lasts ≥ {SAMPLE_SECONDS_MIN} s (runs/sample; the same rule for",
        "every contender). Records/s are median and min – max over the rounds; a ratio is the",
        "median of the per-round ratios.",
        f"`gc.collect()` before each run, cyclic GC {gc_mode} during it (off: the object-making",
        "peers' best case; `--gc on` to include it). Decoders verify CRCs (eoslog by",
        "default; aiokafka and kafka-python call `validate_crc()` as their consumers do with",
        "the default `check_crcs=True`). Decoders read the same eoslog-built segment; encoders",
        "encode the same pre-chunked records. kafka-python runs on a prefix (rates compare).",
        "",
        "## Targets (docs/bench.md)",
        "",
        *target_lines(results),
        "",
        "## Results",
        "",
    ]
    for table in TABLES:
        lines += table_lines(table, results)
    lines += ["## Physical limits", "", *limits_lines(limits, results), ""]
    return "\n".join(lines)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=RECORDS_DEFAULT)
    parser.add_argument("--rounds", type=int, default=ROUNDS_DEFAULT)
    parser.add_argument("--key-bytes", type=int, default=0, choices=(0, 8))
    parser.add_argument(
        "--paths",
        default=",".join(PATHS),
        help=f"comma-separated subset of: {', '.join(PATHS)}",
    )
    parser.add_argument(
        "--gc",
        choices=("off", "on"),
        default="off",
        help="cyclic GC during timed runs (default off: the peers' best case)",
    )
    parser.add_argument("--output", type=FilePath, default=BENCH_DIR / "RESULTS-codec.md")
    args = parser.parse_args(argv)
    if args.rounds < ROUNDS_MIN:
        parser.error(f"--rounds must be at least {ROUNDS_MIN} (docs/bench.md)")
    args.paths = [p for p in args.paths.split(",") if p]
    unknown = set(args.paths) - set(PATHS)
    if unknown:
        parser.error(f"unknown paths: {', '.join(sorted(unknown))}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    started = time.perf_counter()
    workload = Workload.build(args.records, args.key_bytes)
    inputs = Inputs(workload)
    print(f"workload: {workload.describe()}", flush=True)
    results = {}
    for path in args.paths:
        print(f"measuring {path} ...", flush=True)
        results[path] = measure_path(inputs, path, args.rounds, args.gc == "on")
    print("measuring physical limits ...", flush=True)
    limits = measure_limits(args.rounds)
    elapsed = time.perf_counter() - started
    text = render(argv, workload, args.rounds, args.gc, results, limits, elapsed)
    print(text)
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
