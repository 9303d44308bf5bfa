"""The Spark scans' contenders (spark_bench.py): each query over each data source, every run
checked against the committed records."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

import harness
from contenders_shared import expect
from workload import (
    VALUE_BYTES,
    Committed,
)


def check_committed(table: pa.Table, committed: Committed, partition: int, name: str) -> None:
    """One partition's rows, in offset order, are exactly its committed records (untimed)."""
    offsets = table.column("offset").to_pylist()
    expect(offsets == committed.offsets[partition], f"{name}: partition {partition}: offsets")
    values = table.column("value").to_pylist()
    expect(values == committed.values[partition], f"{name}: partition {partition}: values")


def spark_contenders(
    frames: dict[str, Callable[[], Any]], committed: Committed, queries: Sequence[str]
) -> list[harness.Contender]:
    """Each query of `queries` ("count()", "sum(length(value))") over each source of `frames`
    (a fresh DataFrame per run: each query plans its scan anew, as a user's would), named
    "<query> <source>". Every run checks its count or total length; the warm-up of a source's
    first query also collects its rows (toArrow) and compares them with the committed ones."""
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    def count(frame: Any) -> None:
        rows = frame.count()
        expect(rows == committed.committed, f"count() = {rows}")

    def total_length(frame: Any) -> None:
        total = frame.select(F.sum(F.length("value"))).collect()[0][0]
        expect(total == committed.committed * VALUE_BYTES, f"sum(length(value)) = {total}")

    def check_rows(source: str) -> Callable[[object, object], None]:
        def check(_: object, __: object) -> None:
            table = frames[source]().toArrow()
            expect(table.num_rows == committed.committed, f"{source}: {table.num_rows} rows")
            for partition in range(len(committed.offsets)):
                mine = table.filter(pc.equal(table.column("partition"), partition))
                check_committed(mine.sort_by("offset"), committed, partition, source)

        return check

    run = {"count()": count, "sum(length(value))": total_length}
    return [
        harness.Contender(
            f"{query} {source}",
            lambda _, query=query, source=source: run[query](frames[source]()),
            **({"check": check_rows(source)} if query == queries[0] else {}),
        )
        for query in queries
        for source in frames
    ]
