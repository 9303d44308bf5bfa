"""The "eoslog" Spark data source over a log split between an archive and the live directory
(the `archive` option; docs/api.md "Spark", eoslog.archive_view): once retention deleted the
archived segments locally, the frame is still the whole log's read_committed view."""

from __future__ import annotations

import pyarrow as pa
import pytest

from eoslog import archive
from tests.support import tieredlog

pyspark = pytest.importorskip("pyspark", reason="pyspark is in the test extra")
pytestmark = pytest.mark.spark


def _rows(table: pa.Table) -> list[dict[str, object]]:
    rows = table.to_pylist()
    return sorted(rows, key=lambda row: (row["partition"], row["offset"]))


def test_frame_of_the_directory_with_its_archive_equals_the_whole_log(spark, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tieredlog.TieredLog(str(tmp_path / "log"))
    target = "file://" + str(tmp_path / "archive")
    try:
        want = log.view()
        archive.archive(log.path, target)
        log.expire()
        reader = spark.read.format("eoslog").option("subscribe", tieredlog.TOPIC)
        whole = reader.option("archive", target).load(log.path).toArrow()
        local = reader.option("archive", "").load(log.path).toArrow()
    finally:
        log.close()
    assert local.num_rows < want.num_rows, "retention deleted archived records locally"
    assert whole.num_rows == want.num_rows
    assert _rows(whole.drop_columns(["timestamp"])) == _rows(want.drop_columns(["timestamp"]))
