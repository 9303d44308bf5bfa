"""bench/summary.py gathers the target rows the bench scripts wrote; RESULTS.md is built from it,
so a row it drops or a status it flips would misreport what was measured."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import summary

LOG_STYLE = """# eoslog log benchmarks

Command: `x`
Date: 2026-11-21 08:09 UTC; wall time 51 s

## Targets (docs/bench.md)

| path | figure | target | measured (median; min – max) | status |
|---|---|---|---|---|
| append | append_batch ÷ raw os.write | ≥ 60% | 71% (60% – 77%) | met |
| random-offset read | p99 of `log.read` | ≤ 20 µs | 40.0 (10.0 – 46.9) µs | **not met** |

## 1. append
| not | a | target | row | met |
"""

CODEC_STYLE = """# eoslog codec benchmarks

Date: 2026-11-21 05:41 UTC; wall time 99 s

## Targets (docs/bench.md)

| path | eoslog | peer | target | measured ratio (median; min – max) | status |
|---|---|---|---:|---:|---|
| encode-none | eoslog append | aiokafka | ≥ 1.5× | 2.16× (2.00× – 2.39×) | met |
"""


@pytest.fixture
def bench_dir(tmp_path: Path) -> Path:
    (tmp_path / "RESULTS-log.md").write_text(LOG_STYLE, encoding="utf-8")
    (tmp_path / "RESULTS-codec.md").write_text(CODEC_STYLE, encoding="utf-8")
    (tmp_path / "RESULTS-empty.md").write_text("# no targets here\n", encoding="utf-8")
    return tmp_path


def test_every_target_row_is_read_with_its_status_and_only_target_rows(bench_dir: Path) -> None:
    rows = summary.read_targets(bench_dir / "RESULTS-log.md")
    assert [(r.path, r.target, r.met) for r in rows] == [
        ("append", "≥ 60%", True),
        ("random-offset read", "≤ 20 µs", False),
    ]
    assert rows[0].date == "2026-11-21 08:09 UTC"


def test_codec_rows_name_the_contenders_as_the_figure(bench_dir: Path) -> None:
    (row,) = summary.read_targets(bench_dir / "RESULTS-codec.md")
    assert row.figure == "eoslog append ÷ aiokafka"
    assert row.measured.startswith("2.16×")


def test_distance_is_measured_over_target_for_lower_bounds_and_inverted_for_upper_bounds(
    bench_dir: Path,
) -> None:
    met, not_met = summary.read_targets(bench_dir / "RESULTS-log.md")
    assert met.distance() == pytest.approx(71 / 60)
    assert not_met.distance() == pytest.approx(20 / 40)


def test_results_md_lists_every_row_and_counts_the_met_ones(bench_dir: Path) -> None:
    assert summary.main(["--bench-dir", str(bench_dir), "--no-plot"]) == 0
    text = (bench_dir / "RESULTS.md").read_text(encoding="utf-8")
    assert "Targets met: 2 of 3." in text
    assert text.count("| **not met** |") == 1
    assert "[RESULTS-empty.md](RESULTS-empty.md)" in text


def test_no_target_tables_is_an_error_not_an_empty_summary(tmp_path: Path) -> None:
    assert summary.main(["--bench-dir", str(tmp_path), "--no-plot"]) == 1
    assert not (tmp_path / "RESULTS.md").exists()
