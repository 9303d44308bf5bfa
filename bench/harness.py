"""The bench harness: what every bench script shares, and nothing any one of them measures.

- timing: `Timer` (heap collected first, cyclic GC off while timing), `quiesce()` (write back
  dirty pages outside the timing) and the sample-length rule (`repeats_for`);
- alternation: `Contender` (untimed prepare, timed run, untimed check and finish) and
  `alternate()`, which runs one checked warm-up per contender, then the rounds, the contenders
  in turn within each round (order reversed every other round unless told otherwise);
- statistics: medians, spreads, per-round ratios (`Runs.speedup`), the number formats;
- targets: `Target`, a docs/bench.md row declared as data (a bound, a unit, and optionally the
  two contenders whose per-round speed ratio it is), turned into a row of the targets table;
- the report writer and the machine description are bench/report.py's: every
  RESULTS-<area>.md has the same header, machine, method and targets table (bench/summary.py
  reads that table);
- the command line: one parser for every script (`--rounds` of at least ROUNDS_MIN, `--quick`,
  the area's sizes, `--paths`, `--tmp`, `--gc`, `--profile`, `--keep`, `--output`) and
  `main()`, which makes the data directory, measures, writes the report and cleans up.

A script declares its `Area` (sizes, paths) and its scenarios as data, and gives `main()` a
function that measures and returns a `Report`. The Markdown prose around the tables lives in
bench/prose.py, not here and not in the scripts' timing code.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import math
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path as FilePath
from typing import Any

import numpy as np

from report import BENCH_DIR, Report, load, render

ROUNDS_MIN = 3  # docs/bench.md: median and spread over >= 3 runs
# A timed sample repeats a short run until it lasts at least this long. On this shared VM a
# 0.2-0.3 s stall now and then (seen after an idle sleep as well as after another contender)
# would otherwise dominate a 60 ms sample and bias the ratios against the fastest contender.
SAMPLE_SECONDS_MIN = 0.25
# Bounds a sample's runs: a run under 25 ms is timed over a sample shorter than the minimum.
REPEATS_MAX = 10


# --- timing -----------------------------------------------------------------------------------


class Timer:
    """Times a callable with the heap collected first and the cyclic GC off during the call
    (unless gc_on). With the GC on, the contenders that create one object per record (the
    peers, mostly) also pay for traversing the harness's own million-entry lists; off is their
    best case, so eoslog's ratios stay conservative."""

    def __init__(self, gc_on: bool = False) -> None:
        self.gc_on = gc_on

    def __call__(self, run: Callable[[], object], repeats: int = 1) -> float:
        """Seconds per run, over one sample of `repeats` runs. Each result is dropped as soon
        as its run returns, as pytest-benchmark does: keeping several alive would make every
        repeated run fault in fresh memory."""
        gc.collect()
        with self.gc_off():
            start = time.perf_counter()
            for _ in range(repeats):
                run()
            return (time.perf_counter() - start) / repeats

    @contextlib.contextmanager
    def gc_off(self) -> Iterator[None]:
        """The cyclic GC off for the block (unless gc_on); the caller collects first."""
        if not self.gc_on:
            gc.disable()
        try:
            yield
        finally:
            gc.enable()

    def without_gc(self, run: Callable[..., Any]) -> Callable[..., Any]:
        """`run` with the cyclic GC off during the call (unless gc_on)."""

        def run_without_gc(*args: Any) -> Any:
            with self.gc_off():
                return run(*args)

        return run_without_gc


def quiesce() -> None:
    """Write back dirty pages left by earlier work (outside any timed region), so no timed
    run shares the disk with another run's background write-back."""
    os.sync()


def repeats_for(run: Callable[[], object], first_seconds: float) -> int:
    """How many runs make one timed sample of at least SAMPLE_SECONDS_MIN. `first_seconds` is
    the warm-up's time; if it was short, one more (untimed for the report) run measures the
    steady state, since a first run pays one-off costs."""
    if first_seconds >= SAMPLE_SECONDS_MIN:
        return 1
    gc.collect()
    start = time.perf_counter()
    result = run()
    seconds = time.perf_counter() - start
    del result
    return max(1, min(REPEATS_MAX, math.ceil(SAMPLE_SECONDS_MIN / seconds)))


def _profiled(run: Callable[[], object]) -> cProfile.Profile:
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        run()
    finally:
        profiler.disable()
    return profiler


def profile(label: str, run: Callable[[], object], top: int = 15) -> None:
    """One extra untimed run under cProfile, printed (never written to the results)."""
    profiler = _profiled(run)
    print(f"\n--- cProfile: {label} (top {top} by own time) ---")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(top)


def count_calls(run: Callable[[], object]) -> int:
    """The Python function calls (cProfile's count, built-ins included) of one run."""
    return int(pstats.Stats(_profiled(run)).total_calls)


# --- contenders and their alternation -----------------------------------------------------------


def _nothing() -> None:
    return None


def _ignore(*_: object) -> None:
    return None


@dataclass(frozen=True)
class Contender:
    """One side of a comparison. Per run: `prepare()` (untimed) gives a state, `run(state)` is
    the timed body, `finish(state)` (untimed) cleans up. The warm-up's result also goes to
    `check(state, result)`, untimed, which raises if the contender did not do the work and may
    return a figure the report needs (bytes produced, say). A self-timed contender
    (`timed=False`) returns its own figure from `run` (latencies, phases timed apart)."""

    name: str
    run: Callable[[Any], Any]
    prepare: Callable[[], Any] = _nothing
    finish: Callable[[Any], None] = _ignore
    check: Callable[[Any, Any], Any] = _ignore
    timed: bool = True
    # What one run handles (records, bytes). Speed ratios compare amount per second, so two
    # contenders that run on different amounts (the codec's slow peer on a prefix) compare.
    amount: float = 1.0


@dataclass
class Measured:
    contender: Contender
    values: list[Any] = field(default_factory=list)  # per round: s per run, or run's figure
    repeats: int = 1  # runs per timed sample
    checked: Any = None  # what the warm-up's check returned


class Runs(dict[str, Measured]):
    """Every contender's measurements of one alternation, by name."""

    def seconds(self, name: str) -> list[float]:
        return [float(v) for v in self[name].values]

    def rates(self, name: str, amount: float) -> list[float]:
        """Per round: `amount` (records, bytes) per second."""
        return [amount / s for s in self.seconds(name)]

    def speedup(self, ours: str, peer: str) -> list[float]:
        """Per round: how many times the peer's speed ours is (our rate / the peer's, of each
        contender's amount per second; peer s / our s when the amounts are equal)."""
        return per_round(
            self.rates(ours, self[ours].contender.amount),
            self.rates(peer, self[peer].contender.amount),
        )

    def median(self, name: str) -> float:
        return statistics.median(self.seconds(name))


def orders(names: Sequence[str], rounds: int, reverse: bool = True) -> list[list[str]]:
    """Round r runs the contenders in order; with `reverse`, round r+1 in reverse, so no
    contender always runs right after the same neighbour."""
    return [list(reversed(names)) if reverse and r % 2 else list(names) for r in range(rounds)]


def warm_up(contender: Contender, quiet: bool = False) -> tuple[Any, float]:
    """One untimed run, checked: what the check returned, and the run's seconds."""
    state = contender.prepare()
    if quiet:
        quiesce()
    start = time.perf_counter()
    result = contender.run(state)
    seconds = time.perf_counter() - start
    checked = contender.check(state, result)
    del result
    contender.finish(state)
    return checked, seconds


def alternate(
    contenders: Sequence[Contender],
    rounds: int,
    timer: Timer,
    *,
    reverse: bool = True,
    quiet: bool = False,
    warmup: bool = True,
    repeat_short: bool = False,
    label: str = "",
) -> Runs:
    """One checked warm-up per contender (unless `warmup` is off), then `rounds` rounds in which
    every contender runs once, in turn, so a slow phase of a shared machine hits all alike.
    `quiet`: os.sync() before every run. `repeat_short`: a timed sample repeats a short run up
    to SAMPLE_SECONDS_MIN (the codec's rule). `label`: print a progress line per round."""
    runs = Runs((c.name, Measured(c)) for c in contenders)
    for contender in contenders if warmup else ():
        measured = runs[contender.name]
        measured.checked, first_seconds = warm_up(contender, quiet)
        if repeat_short and contender.timed:
            measured.repeats = repeats_for(lambda c=contender: c.run(c.prepare()), first_seconds)
    for number, order in enumerate(orders([c.name for c in contenders], rounds, reverse)):
        for name in order:
            measured = runs[name]
            contender = measured.contender
            state = contender.prepare()
            if quiet:
                quiesce()
            if contender.timed:
                value = timer(lambda c=contender, s=state: c.run(s), measured.repeats)
            else:  # self-timed: the heap collected first, the GC left to the contender
                gc.collect()
                value = contender.run(state)
            contender.finish(state)
            measured.values.append(value)
        if label:
            done = ", ".join(
                f"{name} {runs[name].values[-1] * 1e3:.0f} ms"
                for name in runs
                if runs[name].contender.timed
            )
            print(f"  {label} round {number + 1}/{rounds}: {done or 'done'}", flush=True)
    return runs


# --- statistics and formats ---------------------------------------------------------------------


def per_round(numerators: Sequence[float], denominators: Sequence[float]) -> list[float]:
    """Per round: numerator ÷ denominator (of rates: how many times faster; of times: slower)."""
    return [n / d for n, d in zip(numerators, denominators, strict=True)]


def spread(values: Sequence[float], fmt: Callable[[float], str]) -> str:
    return f"{fmt(min(values))} – {fmt(max(values))}"


def median_spread(values: Sequence[float], fmt: Callable[[float], str]) -> str:
    return f"{fmt(statistics.median(values))} ({spread(values, fmt)})"


# The number formats of the reports.
x: Callable[[float], str] = "{:.2f}×".format
pct: Callable[[float], str] = "{:.0%}".format
two: Callable[[float], str] = "{:.2f}".format
us: Callable[[float], str] = "{:,.1f} µs".format
ms: Callable[[float], str] = "{:,.1f} ms".format
gb_s: Callable[[float], str] = "{:.2f} GB/s".format


def millions(value: float) -> str:
    return f"{value / 1e6:.2f} M"


# How a target's unit writes its values (and its bound: the same format, without decimals).
UNITS: dict[str, Callable[[float], str]] = {
    "×": x,
    "%": pct,
    "µs": us,
    "ms": ms,
    "GB/s": gb_s,
    "calls": "{:,.0f} calls".format,
}
AT_LEAST = "≥"


@dataclass(frozen=True)
class Target:
    """A docs/bench.md target as data: `path` and `figure` name the row; the median of the
    per-round values must be `compare` `bound` (in `unit`, one of UNITS; % as a fraction).
    With `ours` and `peer` set, the values are the per-round speed ratio of those two
    contenders (Runs.speedup); otherwise the script gives them."""

    path: str
    figure: str
    bound: float
    unit: str = "×"
    compare: str = AT_LEAST
    ours: str = ""
    peer: str = ""

    def text(self) -> str:
        if self.unit == "%":
            return f"{self.compare} {self.bound * 100:g}%"
        sep = "" if self.unit == "×" else " "
        return f"{self.compare} {self.bound:g}{sep}{self.unit}"

    def met(self, value: float) -> bool:
        if self.compare == AT_LEAST:
            return value >= self.bound
        if self.compare == "≤":
            return value <= self.bound
        return value < self.bound

    def row(self, values: Sequence[float] | None, reason: str = "") -> str:
        """The targets-table row; `values` None: not measured (for `reason`)."""
        head = f"| {self.path} | {self.figure} | {self.text()} |"
        if values is None:
            return f"{head} — | not measured{f' ({reason})' if reason else ''} |"
        median = statistics.median(values)
        status = "met" if self.met(median) else "**not met**"
        return f"{head} {median_spread(values, UNITS[self.unit])} | {status} |"

    def of(self, runs: Runs) -> str:
        """The row of a ratio target from the runs it names (not measured if one is absent)."""
        missing = [n for n in (self.ours, self.peer) if n not in runs]
        if missing:
            return self.row(None, f"{' and '.join(missing)} not run")
        return self.row(runs.speedup(self.ours, self.peer))


# --- the command line ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    """A size knob of an area: `--<name>`, `full` by default, `quick` under --quick."""

    name: str
    full: float
    quick: float
    help: str = ""

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")


@dataclass(frozen=True)
class Area:
    """What the command line of one bench script offers: its results file (RESULTS-<name>.md),
    default rounds, sizes and paths (a comma-separated subset for --paths)."""

    name: str
    rounds: int
    sizes: Sequence[Size] = ()
    paths: Sequence[str] = ()
    options: Callable[[argparse.ArgumentParser], None] = _ignore  # the area's own flags
    validate: Callable[[argparse.Namespace], str | None] = _ignore  # an error message, or None


def parse_args(area: Area, argv: Sequence[str], description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description.split("\n\n")[0])
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help=f"timed rounds per contender (default {area.rounds}; --quick {ROUNDS_MIN}; "
        f"at least {ROUNDS_MIN})",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small sizes and the fewest rounds: checks the harness, not for RESULTS files",
    )
    for size in area.sizes:
        kind = float if isinstance(size.full, float) else int
        parser.add_argument(
            f"--{size.name}",
            type=kind,
            default=None,
            help=f"{size.help} (default {size.full:,}; --quick {size.quick:,})".strip(),
        )
    if area.paths:
        parser.add_argument(
            "--paths",
            "--sections",
            dest="paths",
            default=",".join(area.paths),
            help=f"comma-separated subset of: {', '.join(area.paths)}",
        )
    parser.add_argument("--tmp", default="/tmp", help="where the data directories are made")
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    parser.add_argument(
        "--gc",
        choices=("off", "on"),
        default="off",
        help="cyclic GC while timing (default off: the object-making peers' best case)",
    )
    parser.add_argument("--profile", action="store_true", help="print cProfile tables too")
    parser.add_argument("--output", type=FilePath, default=BENCH_DIR / f"RESULTS-{area.name}.md")
    area.options(parser)
    args = parser.parse_args(argv)
    args.argv = list(argv)
    if args.rounds is None:
        args.rounds = ROUNDS_MIN if args.quick else area.rounds
    if args.rounds < ROUNDS_MIN:
        parser.error(f"--rounds must be at least {ROUNDS_MIN} (docs/bench.md)")
    for size in area.sizes:
        if getattr(args, size.dest) is None:
            setattr(args, size.dest, size.quick if args.quick else size.full)
    if area.paths:
        args.paths = [p.strip() for p in args.paths.split(",") if p.strip()]
        unknown = set(args.paths) - set(area.paths)
        if unknown:
            parser.error(f"unknown paths: {', '.join(sorted(unknown))}")
    args.timer = Timer(args.gc == "on")
    error = area.validate(args)
    if error:
        parser.error(error)
    return args


def main(
    area: Area,
    measure: Callable[[argparse.Namespace, str], Report],
    description: str,
    argv: Sequence[str] | None = None,
) -> int:
    """Parse the command line, measure in a fresh data directory under --tmp (removed at the
    end unless --keep), write the report to --output and print it."""
    args = parse_args(area, list(sys.argv[1:] if argv is None else argv), description)
    started = time.perf_counter()
    load_start = load()
    root = tempfile.mkdtemp(prefix=f"eoslog-{area.name}bench-", dir=args.tmp)
    print(f"data under {root}", flush=True)
    try:
        report = measure(args, root)
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    text = render(report, args, time.perf_counter() - started, load_start)
    print(text)
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


def table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> list[str]:
    """A Markdown table: the first `left` columns aligned left (names), the rest right."""
    aligns = ["---" if i < left else "---:" for i in range(len(header))]
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(aligns) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def rate_rows(
    runs: Runs, names: Sequence[str], amount: float, per_run: Callable[[float], str]
) -> list[list[str]]:
    """Per contender: its name, the median and min – max of `amount` (records, rows) per
    second in millions, and its median time per run as `per_run` writes seconds."""
    rows = []
    for name in names:
        rates = runs.rates(name, amount)
        median = per_run(runs.median(name))
        rows.append([name, millions(statistics.median(rates)), spread(rates, millions), median])
    return rows


def ratio_rows(runs: Runs, ratios: Sequence[tuple[str, str, str, str]]) -> list[list[str]]:
    """Per (label, ours, peer, unit): the label and the per-round speed ratio's median and
    min – max in `unit`."""
    return [
        [label, median_spread(runs.speedup(ours, peer), UNITS[unit])]
        for label, ours, peer, unit in ratios
    ]


# The latency percentiles every latency table reports.
PERCENTILES = (50.0, 99.0, 99.9)


def round_percentiles(rounds: Sequence[Any]) -> list[Any]:
    """Per round (an array of nanoseconds): its PERCENTILES in µs."""
    return [np.percentile(ns / 1000.0, PERCENTILES) for ns in rounds]


def latency_rows(runs: Runs, names: Sequence[str]) -> tuple[dict[str, list[Any]], list[list[str]]]:
    """The self-timed contenders' percentiles per round (name -> [array(p50, p99, p99.9),
    ...]) and a table row per contender: its name, then each percentile's median (min - max)
    over the rounds."""
    found = {name: round_percentiles(runs[name].values) for name in names}
    rows = [
        [
            name,
            *(
                median_spread([float(p[i]) for p in found[name]], us)
                for i in range(len(PERCENTILES))
            ),
        ]
        for name in names
    ]
    return found, rows


def rates_and_ratios(
    runs: Runs,
    names: Sequence[str],
    amount: float,
    rate: str,
    per_run: tuple[str, Callable[[float], str]],
    ratios: Sequence[tuple[str, str, str, str]],
) -> list[str]:
    """A rate table (`rate_rows`, its rate column titled `rate`, its time column per_run[0])
    and a ratio table (`ratio_rows`)."""
    header = ["contender", f"median {rate}", "min – max", per_run[0]]
    rows = rate_rows(runs, names, amount, per_run[1])
    title = "ratio (median of per-round ratios; min – max)"
    return [*table(header, rows), "", *table([title, "value"], ratio_rows(runs, ratios))]


seconds3: Callable[[float], str] = "{:.3f}".format


def ms0(value: float) -> str:
    return f"{value * 1e3:.0f}"
