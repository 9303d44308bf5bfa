"""bench/spark_bench.py at tiny sizes, so its code paths run in the suite: both sizes checked by
aggregates and rows, the trend, the planning of a snapshot-less active segment, and the scans
from object storage (when the S3 server's binary is installed). The figures mean nothing here;
the published ones come from the full run (bench/README.md)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import REPO_ROOT, seaweed

pytest.importorskip("pyspark", reason="pyspark is in the test extra")
pytestmark = pytest.mark.spark

# Far past what the run takes on the 2-core VM (about a minute and a half): a hung Spark fails.
RUN_DEADLINE_S = 900


def test_the_spark_bench_runs_both_sizes_planning_and_object_storage(tmp_path) -> None:  # type: ignore[no-untyped-def]
    output = tmp_path / "RESULTS-spark.md"
    arguments = [
        "--partitions", "2", "--records", "6000", "--scale-records", "12000",
        "--plan-records", "6000", "--rounds", "3", "--scale-rounds", "3",
        "--tmp", str(tmp_path), "--output", str(output),
    ]  # fmt: skip
    finished = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "bench", "spark_bench.py"), *arguments],
        capture_output=True,
        text=True,
        timeout=RUN_DEADLINE_S,
        check=False,
    )
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    report = output.read_text()
    for title in (
        "## Spark scans: count() and sum(length(value)) at 6,000 records",
        "## Spark scans: count() and sum(length(value)) at 12,000 records",
        "## The trend: the ratios at both sizes",
        "## Planning without a producer snapshot: batch headers against whole reads",
        "## Object storage: scans from S3 against the local disk",
    ):
        assert title in report
    assert "| ratio | 6,000 records | 12,000 records |" in report
    # docs/bench.md's rows: one per query and figure at each size, object storage at the larger.
    assert report.count("| Spark scan, read_committed, 2 cores: count() |") == 2
    larger = "| Spark scan at 0.012 M records (2 partitions, local[2])"
    assert report.count(f"{larger}: sum(length(value)) |") == 2
    assert report.count(f"{larger}: object storage |") == 2
    if seaweed.binary() is not None:
        assert "| eoslog.scan, S3 (SeaweedFS, loopback) |" in report
        assert "not measured" not in report
