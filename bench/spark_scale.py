"""The parts of spark_bench.py about scale past one machine: the planning of a read_committed
scan of a partition with a large active segment and no producer snapshot (the header walk
against whole reads of the segment), and the scan rate from object storage (SeaweedFS's S3
gateway on loopback, started as the tests start it: tests/support/seaweed.py) against the same
log on the local disk, in one run."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path as FilePath
from typing import Any

import pyarrow.compute as pc

import eoslog
import harness
import prose
from contenders_shared import expect
from eoslog import offline
from eoslog.fs import FileSystem, PosixFileSystem
from eoslog.log.partition_view import PartitionView
from harness import median_spread
from report import Section
from scenarios import (
    SPARK_ACTIVE_SEGMENT_BYTES,
    SPARK_LOCAL,
    SPARK_PLAN_REPEATS,
    SPARK_S3,
    storage_name,
    storage_targets,
)
from workload import READ_TOPIC, VALUE_BYTES, Committed, write_transactions

# The tests' helpers (the S3 server, the descriptor-less file system) are the bench's too.
sys.path.insert(0, str(FilePath(__file__).resolve().parents[1]))

from tests.support import seaweed
from tests.support.logtools import WholeReadsFileSystem

BUCKET = "eoslog-bench"


def bytes_read_by_this_process() -> int | None:
    """/proc/self/io's rchar (bytes through read(2)-family calls, page cache hits included),
    or None off Linux."""
    try:
        with open("/proc/self/io") as io:
            for line in io:
                if line.startswith("rchar:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


# --- planning without a snapshot ----------------------------------------------------------------


def write_active(root: str, records: int) -> tuple[str, Committed]:
    """One partition of `records` records in 1,000-record transactions (every third aborted),
    all in its active segment, closed, its producer snapshots deleted: planning it replays
    the whole segment."""
    path = os.path.join(root, "active")
    broker = eoslog.open(path, durability="none", background=False)
    try:
        committed = write_transactions(
            broker, records, 1, SPARK_ACTIVE_SEGMENT_BYTES, {"transactional.id": "bench-active"}
        )
    finally:
        broker.close()
    directory = os.path.join(path, f"{READ_TOPIC}-0")
    for name in os.listdir(directory):
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(directory, name))
    if committed.segments != 1:
        raise AssertionError(f"{committed.segments} segments: the planning bench wants one")
    return path, committed


def planning_section(args: argparse.Namespace, root: str) -> Section:
    """plan_ranges of the active-segment partition: the header walk (a local file) against
    the same replay over whole 16 MiB reads (WholeReadsFileSystem: no descriptor, as before
    the header walk and as on object storage), alternated; and the bytes each plan reads."""
    print(f"planning: writing {args.plan_records:,} records in one segment ...", flush=True)
    path, committed = write_active(root, args.plan_records)
    directory = os.path.join(path, f"{READ_TOPIC}-0")
    size = os.path.getsize(os.path.join(directory, "00000000000000000000.log"))
    with PartitionView(PosixFileSystem(), directory, READ_TOPIC, 0) as view:
        batches = len(view.segment(0).scan_headers_from(0))

    def planner(fs: FileSystem) -> Callable[[object], None]:
        def plan(_: object) -> None:
            (planned,) = offline.plan_ranges(path, [(READ_TOPIC, 0)], fs=fs)
            expect(planned.stop == committed.records + committed.transactions, "the LSO")
            expect(planned.aborted is not None, "read_committed")
            expect(len(planned.aborted or ()) == committed.aborted, "the aborted list")

        return plan

    sides = {"header walk": PosixFileSystem(), "whole reads": WholeReadsFileSystem()}
    contenders = [harness.Contender(name, planner(fs)) for name, fs in sides.items()]
    runs = harness.alternate(contenders, SPARK_PLAN_REPEATS, args.timer, label="planning")
    read: dict[str, str] = {}
    for name, fs in sides.items():
        before = bytes_read_by_this_process()
        planner(fs)(None)
        after = bytes_read_by_this_process()
        read[name] = "–" if before is None or after is None else f"{(after - before) / 2**20:.2f}"

    def ms(value: float) -> str:
        return f"{value * 1e3:.1f} ms"

    rows = [
        [label, median_spread(runs.seconds(name), ms), read[name]]
        for name, label in zip(sides, prose.SPARK_PLANNING_ROWS, strict=True)
    ]
    ratio = median_spread(runs.speedup("header walk", "whole reads"), harness.UNITS["×"])
    lines = [
        prose.SPARK_PLANNING.format(
            records=args.plan_records,
            transactions=committed.transactions,
            aborted=committed.aborted,
            mib=size / 2**20,
            batches=batches,
            repeats=SPARK_PLAN_REPEATS,
        ),
        "",
        *harness.table(["plan_ranges of the partition", "median (min – max)", "MiB read"], rows),
        "",
        f"Header walk ÷ whole reads (speed, median of per-round ratios): {ratio}.",
    ]
    return Section(prose.SPARK_PLANNING_TITLE, lines)


# --- object storage -----------------------------------------------------------------------------


def storage_section(
    args: argparse.Namespace, spark: Any, path: str, committed: Committed, rounds: int, row: str
) -> Section:
    """eoslog.scan and the Spark source's count() over the log at `path` and over its copy in
    a SeaweedFS bucket, alternated in `rounds` rounds; the targets under docs/bench.md's `row`."""
    targets = storage_targets(row)
    if seaweed.binary() is None:
        rows = [target.row(None, "no weed binary") for target in targets]
        return Section(prose.SPARK_STORAGE_TITLE, [prose.SPARK_STORAGE_SKIPPED], rows)
    server_dir = tempfile.mkdtemp(prefix="seaweed-", dir=os.path.dirname(path))
    with seaweed.serving(server_dir, BUCKET) as server:
        print("object storage: uploading the log ...", flush=True)
        server.upload(path, f"{BUCKET}/log")
        sources = {SPARK_LOCAL: path, SPARK_S3: server.url(f"{BUCKET}/log")}
        readers = {"eoslog.scan": _scanner, "Spark count()": _spark_counter}
        contenders = [
            harness.Contender(storage_name(reader, where), make(spark, source, committed))
            for where, source in sources.items()
            for reader, make in readers.items()
        ]
        runs = harness.alternate(contenders, rounds, args.timer, label="storage")
    names = [contender.name for contender in contenders]
    rows = harness.rate_rows(runs, names, committed.committed, harness.ms0)
    for row_cells in rows:
        rate = committed.committed * VALUE_BYTES / runs.median(row_cells[0]) / 2**20
        row_cells.append(f"{rate:.0f}")
    cells = harness.ratio_rows(
        runs,
        [
            (
                f"{reader}: S3 ÷ local",
                storage_name(reader, SPARK_S3),
                storage_name(reader, SPARK_LOCAL),
                "%",
            )
            for reader in readers
        ],
    )
    header = ["reader", "median committed rows/s", "min – max", "median ms/run", "value MiB/s"]
    lines = [
        prose.SPARK_STORAGE.format(
            records=committed.records,
            committed=committed.committed,
            partitions=args.partitions,
            rounds=rounds,
        ),
        "",
        *harness.table(header, rows),
        "",
        *harness.table(["ratio (median of per-round ratios; min – max)", "value"], cells),
    ]
    return Section(prose.SPARK_STORAGE_TITLE, lines, [t.of(runs) for t in targets])


def _scanner(_: Any, source: str, committed: Committed) -> Callable[[object], None]:
    def scan(_: object) -> None:
        rows = length = 0
        for batch in eoslog.scan(source, [READ_TOPIC]):
            rows += batch.num_rows
            length += pc.sum(pc.binary_length(batch.column("value"))).as_py() or 0
        expect(rows == committed.committed, f"eoslog.scan: {rows} rows")
        expect(length == committed.committed * VALUE_BYTES, f"eoslog.scan: {length} bytes")

    return scan


def _spark_counter(spark: Any, source: str, committed: Committed) -> Callable[[object], None]:
    def count(_: object) -> None:
        rows = spark.read.format("eoslog").option("subscribe", READ_TOPIC).load(source).count()
        expect(rows == committed.committed, f"Spark count(): {rows}")

    return count
