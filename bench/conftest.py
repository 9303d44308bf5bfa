"""Benchmark-session plumbing: after pytest-benchmark's tables, a summary in records/s and
eoslog's ratios to each peer next to the docs/bench.md targets (printed, never asserted)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class Measured:
    path: str
    name: str
    library: str
    records: int
    seconds_median: float
    seconds_min: float
    seconds_max: float

    @property
    def rate_median(self) -> float:
        return self.records / self.seconds_median


_MEASURED: list[Measured] = []


@pytest.fixture
def record_rate() -> Callable[..., None]:
    def record(contender: Any, records: int, median: float, low: float, high: float) -> None:
        _MEASURED.append(
            Measured(contender.path, contender.name, contender.library, records, median, low, high)
        )

    return record


def pytest_configure(config: Any) -> None:
    # kafka-python 3.x loads its protocol schemas with importlib.resources calls deprecated in
    # Python 3.11: peer noise, one warning per schema.
    for message in ("read_text is deprecated", "open_text is deprecated"):
        config.addinivalue_line("filterwarnings", f"ignore:{message}:DeprecationWarning")


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _MEASURED:
        return
    from contenders import TARGETS

    write = terminalreporter.write_line
    terminalreporter.section("eoslog vs peers (records/s; ratios of medians, not alternated)")
    by_path: dict[str, list[Measured]] = {}
    for measured in _MEASURED:
        by_path.setdefault(measured.path, []).append(measured)
    for path, rows in by_path.items():
        write(f"[{path}]")
        for row in rows:
            low, high = row.records / row.seconds_max / 1e6, row.records / row.seconds_min / 1e6
            spread = f"{low:.2f}-{high:.2f}"
            write(
                f"  {row.name:<24} {row.rate_median / 1e6:8.2f} M rec/s  (min-max {spread})"
                f"  over {row.records:,} records"
            )
        for ours in (row for row in rows if row.library == "eoslog"):
            for peer in (row for row in rows if row.library != "eoslog"):
                ratio = ours.rate_median / peer.rate_median
                target = next(
                    (
                        t
                        for t in TARGETS
                        if (t.path, t.contender, t.peer) == (path, ours.name, peer.name)
                    ),
                    None,
                )
                verdict = ""
                if target is not None:
                    status = "met" if ratio >= target.ratio_min else "NOT met"
                    verdict = f"  target >= {target.ratio_min:g}x: {status}"
                write(f"  {ours.name} / {peer.name}: {ratio:.2f}x{verdict}")
    write("Published ratios (alternated rounds): python bench/write_results.py")
