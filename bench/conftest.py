"""Benchmark-session plumbing for test_bench.py: after pytest-benchmark's tables, each group's
medians and eoslog's ratios to its peers next to the docs/bench.md targets of the scenario
tables (ratios of medians, not alternated: indicative only; printed, never asserted)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class Figure:
    group: str
    name: str
    median: float  # seconds per run
    low: float
    high: float
    amount: float  # what one run handles: records, bytes or calls


_FIGURES: list[Figure] = []


def record(figure: Figure) -> None:
    _FIGURES.append(figure)


def pytest_configure(config: Any) -> None:
    # kafka-python 3.x loads its protocol schemas with importlib.resources calls deprecated in
    # Python 3.11: peer noise, one warning per schema.
    for message in ("read_text is deprecated", "open_text is deprecated"):
        config.addinivalue_line("filterwarnings", f"ignore:{message}:DeprecationWarning")


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _FIGURES:
        return
    from harness import UNITS
    from scenarios import LOG_APPEND_TARGETS, TARGETS

    write = terminalreporter.write_line
    terminalreporter.section("eoslog vs peers (medians; ratios of medians, not alternated)")
    rates = {(f.group, f.name): f.amount / f.median for f in _FIGURES}
    for figure in _FIGURES:
        per_unit = figure.amount / figure.median
        name = f"[{figure.group}] {figure.name}"
        write(
            f"{name:<56} {figure.median * 1e3:10.3f} ms/run "
            f"({figure.low * 1e3:.3f} – {figure.high * 1e3:.3f}); {per_unit:,.0f} per s"
        )
    for target in [*TARGETS, *LOG_APPEND_TARGETS]:
        group = target.path if target in TARGETS else "log: append"
        ours, peer = rates.get((group, target.ours)), rates.get((group, target.peer))
        if ours is not None and peer is not None:
            ratio = ours / peer
            status = "met" if target.met(ratio) else "NOT met"
            shown = UNITS[target.unit](ratio)
            write(f"{target.path}: {target.figure}: {shown} (target {target.text()}: {status})")
    write("Published ratios (alternated rounds): make bench-results")
