"""The Spark scans' contenders (spark_bench.py): each query over each data source, every run
checked against the committed records: by aggregates per partition at any size (count, sum of
value lengths, first and last offset: nothing but a few numbers reaches the driver), and row for
row up to ROWS_CHECKED_MAX committed rows (collecting more to the driver fails in Spark:
TaskResultLost at 4,000,000 records)."""

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

# Up to this many committed rows a source's warm-up also collects them (toArrow) and compares
# them with the records committed; past it the aggregates alone check it.
ROWS_CHECKED_MAX = 1_000_000

# Per partition: (rows, sum of value lengths, first offset, last offset).
Aggregates = dict[int, tuple[int, int, int, int]]


def check_committed(table: pa.Table, committed: Committed, partition: int, name: str) -> None:
    """One partition's rows, in offset order, are exactly its committed records (untimed)."""
    offsets = table.column("offset").to_pylist()
    expect(offsets == committed.offsets[partition], f"{name}: partition {partition}: offsets")
    values = table.column("value").to_pylist()
    expect(values == committed.values[partition], f"{name}: partition {partition}: values")


def expected_aggregates(committed: Committed) -> Aggregates:
    """The aggregates of the committed records, per partition that holds any."""
    return {
        partition: (len(offsets), sum(map(len, values)), offsets[0], offsets[-1])
        for partition, (offsets, values) in enumerate(
            zip(committed.offsets, committed.values, strict=True)
        )
        if offsets
    }


def spark_aggregates(frame: Any) -> Aggregates:
    """The aggregates of a DataFrame in the Spark Kafka source's schema, computed by Spark."""
    from pyspark.sql import functions as F

    rows = (
        frame.groupBy("partition")
        .agg(F.count("*"), F.sum(F.length("value")), F.min("offset"), F.max("offset"))
        .collect()
    )
    return {int(row[0]): (int(row[1]), int(row[2]), int(row[3]), int(row[4])) for row in rows}


def spark_contenders(
    frames: dict[str, Callable[[], Any]], committed: Committed, queries: Sequence[str]
) -> list[harness.Contender]:
    """Each query of `queries` ("count()", "sum(length(value))") over each source of `frames`
    (a fresh DataFrame per run: each query plans its scan anew, as a user's would), named
    "<query> <source>". Every run checks its count or total length; the warm-up of a source's
    first query also checks its aggregates per partition (spark_aggregates) and, up to
    ROWS_CHECKED_MAX committed rows, collects its rows (toArrow) and compares them with the
    committed ones."""
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    def count(frame: Any) -> None:
        rows = frame.count()
        expect(rows == committed.committed, f"count() = {rows}")

    def total_length(frame: Any) -> None:
        total = frame.select(F.sum(F.length("value"))).collect()[0][0]
        expect(total == committed.committed * VALUE_BYTES, f"sum(length(value)) = {total}")

    expected = expected_aggregates(committed)

    def check_rows(source: str) -> Callable[[object, object], None]:
        def check(_: object, __: object) -> None:
            found = spark_aggregates(frames[source]())
            expect(found == expected, f"{source}: aggregates {found} != {expected}")
            if committed.committed > ROWS_CHECKED_MAX:
                return
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
