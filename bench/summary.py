"""Gather every docs/bench.md target row from bench/RESULTS-*.md into bench/RESULTS.md and plot
them.

    python bench/summary.py [--bench-dir DIR] [--no-plot]

Each bench script (write_results.py, log_bench.py, producer_bench.py, consumer_bench.py,
txn_bench.py, spark_bench.py, serve_bench.py) measures its paths against their peers in one run
and writes its own RESULTS-<area>.md with a "## Targets (docs/bench.md)" table (report.render
writes it).
This script measures nothing: it reads those tables as they are, and writes

- bench/RESULTS.md: one table of every target with its measured figure and status, each row
  linked to the file (and so the run, date and machine) it comes from;
- bench/targets.png: per target, how far the measured median is from the target
  (measured ÷ target for "at least" targets, target ÷ measured for "at most" ones; 1 = on the
  target, right of it = met), on a log scale.

`make bench-results` runs every bench script and then this one.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path as FilePath

sys.path.insert(0, str(FilePath(__file__).resolve().parent))

from report import BENCH_DIR, TARGETS_HEADING

# A target as docs/bench.md writes it: a comparison, a number and an optional unit.
TARGET_RE = re.compile(r"([≥≤<>])\s*([0-9][0-9.,]*)\s*(×|%|µs|ms|GB/s)?")
FIRST_NUMBER_RE = re.compile(r"-?[0-9][0-9.,]*")
AT_LEAST = ("≥", ">")


@dataclass(frozen=True)
class TargetRow:
    """One target row of one RESULTS-*.md file."""

    source: str
    date: str
    path: str
    figure: str
    target: str
    measured: str
    met: bool

    def distance(self) -> float | None:
        """measured ÷ target (or target ÷ measured for an upper bound); None if unparseable."""
        target = TARGET_RE.search(self.target)
        measured = FIRST_NUMBER_RE.search(self.measured)
        if target is None or measured is None:
            return None
        bound = _number(target.group(2))
        value = _number(measured.group(0))
        if bound <= 0 or value <= 0:
            return None
        return value / bound if target.group(1) in AT_LEAST else bound / value


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def read_targets(results_file: FilePath) -> list[TargetRow]:
    """The target rows of one results file (empty if it has no targets table)."""
    lines = results_file.read_text(encoding="utf-8").splitlines()
    date = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("Date:")), "")
    date = date.split(";")[0]
    try:
        start = lines.index(TARGETS_HEADING)
    except ValueError:
        return []
    table = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("|") and not line.startswith("|---"):
            table.append(_cells(line))
    if not table:
        return []
    header, body = table[0], table[1:]
    rows = []
    for cells in body:
        record = dict(zip(header, cells, strict=True))
        status = record["status"].strip("*")
        if "figure" in record:
            figure = record["figure"]
        else:  # the codec table names the contenders instead of a figure
            figure = f"{record['eoslog']} ÷ {record['peer']}"
        measured = next(v for k, v in record.items() if k.startswith("measured"))
        rows.append(
            TargetRow(
                source=results_file.name,
                date=date,
                path=record["path"],
                figure=figure,
                target=record["target"],
                measured=measured,
                met=status == "met",
            )
        )
    return rows


def results_files(bench_dir: FilePath) -> list[FilePath]:
    return sorted(bench_dir.glob("RESULTS-*.md"))


def render(rows: Sequence[TargetRow], sources: Sequence[FilePath], plotted: bool) -> str:
    met = sum(row.met for row in rows)
    lines = [
        "# eoslog benchmark results: every docs/bench.md target",
        "",
        "Command: `make bench-results` (each bench script, then `.venv/bin/python "
        "bench/summary.py`, which measures nothing and gathers the tables below).  ",
        f"Targets met: {met} of {len(rows)}.",
        "",
        "Every figure is a ratio or percentile measured in one run of the script named in its",
        "row's source file, which also gives the workload, method, machine, load average and",
        "the full per-contender tables. Nothing here is asserted by the test suite.",
        "",
        "| source (date) | path | figure | target | measured (median; min – max) | status |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        status = "met" if row.met else "**not met**"
        lines.append(
            f"| [{row.source}]({row.source}) ({row.date}) | {row.path} | {row.figure} | "
            f"{row.target} | {row.measured} | {status} |"
        )
    lines += ["", "## Sources", ""]
    for source in sources:
        first = source.read_text(encoding="utf-8").splitlines()[0].lstrip("# ")
        lines.append(f"- [{source.name}]({source.name}): {first}")
    if plotted:
        lines += [
            "",
            "## Distance from each target",
            "",
            "measured ÷ target (target ÷ measured for an upper bound), log scale; right of 1 is",
            "met.",
            "",
            "![targets](targets.png)",
        ]
    return "\n".join(lines) + "\n"


def plot(rows: Sequence[TargetRow], output: FilePath) -> bool:
    """Write the distance-from-target chart; False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    drawn = [(row, row.distance()) for row in rows]
    drawn = [(row, d) for row, d in drawn if d is not None]
    labels = [f"{row.path}: {row.figure} {row.target}"[:72] for row, _ in drawn]
    values = [d for _, d in drawn if d is not None]
    colours = ["#2a7d2e" if row.met else "#b3261e" for row, _ in drawn]
    fig, ax = plt.subplots(figsize=(11, 0.32 * len(drawn) + 1.2))
    # Bars grow from the target (1) outwards, so their length shows the distance from it.
    ax.barh(range(len(drawn)), [v - 1.0 for v in values], left=1.0, color=colours)
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks(range(len(drawn)), labels, fontsize=7)
    ax.invert_yaxis()
    low = min([*values, 0.5])
    high = max([*values, 2.0])
    ax.set_xlim(10 ** math.floor(math.log10(low)), 10 ** math.ceil(math.log10(high)))
    ax.set_xlabel("measured ÷ target (green: met, red: not met)")
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    plt.close(fig)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench-dir", type=FilePath, default=BENCH_DIR)
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    sources = results_files(args.bench_dir)
    rows = [row for source in sources for row in read_targets(source)]
    if not rows:
        print(f"no target tables in {args.bench_dir}/RESULTS-*.md", file=sys.stderr)
        return 1
    plotted = not args.no_plot and plot(rows, args.bench_dir / "targets.png")
    output = args.bench_dir / "RESULTS.md"
    output.write_text(render(rows, sources, plotted), encoding="utf-8")
    met = sum(row.met for row in rows)
    print(f"wrote {output}: {met} of {len(rows)} targets met" + (" (+ targets.png)" * plotted))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
