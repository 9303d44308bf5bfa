"""Measure the Consumer's read paths against the one-object-per-record floor and a SQLite scan,
in one run, and write bench/RESULTS-consumer.md.

    python bench/consumer_bench.py [--records N] [--rounds R] [--tmp DIR] [--output PATH]

Workload (docs/bench.md standard): N records (default 1,000,000), key null, value 100 B JSON-like
text, 1,000 records per batch, one partition written with `append_batch` into a broker
(`durability="none"`, segment.bytes 32 MiB, so reads cross segments), read_committed, no
transactions (so no aborted data: the partition log reports none yet). Contenders, each run
reading all N records from offset 0, alternating in this process round by round:

- floor: `[(offset, value) for offset, value in zip(offsets, values)]` over prebuilt lists:
  one Python object per record, made by Python code (docs/bench.md "creating 1 M tuples").
- floor, C loop: `list(zip(offsets, values))`: one tuple per record with no Python code per
  record (for information: the harshest floor there is).
- consume(): `Consumer.consume(500, timeout=0)` until N messages, every Message kept.
- consume() + value(): the same, calling `value()` on every Message (for information: the
  cost a reader of values pays on top).
- consume_arrow(): `Consumer.consume_arrow(100_000, timeout=0)` until N rows, every batch kept.
- SQLite scan: iterating a Python cursor over `SELECT offset, timestamp, key, value` of the same
  rows (WAL, synchronous=NORMAL, inserted in 1,000-row transactions).
- memcpy: `numpy.copyto` of the N values' bytes (the bandwidth reference of consume_arrow).

Targets (docs/bench.md): consume() >= 70% of the floor; consume_arrow() >= 3x the SQLite scan and
>= 50% of memcpy bandwidth in payload bytes. Printed and marked met / not met, never asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path as FilePath

import numpy as np
import pyarrow as pa

BENCH_DIR = FilePath(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import eoslog  # noqa: E402
from eoslog.record import codec  # noqa: E402
from log_bench import Section, Target, Timer, fmt_load, orders, tree_line  # noqa: E402
from workload import Workload  # noqa: E402
from write_results import codec_line, command_line, machine_lines  # noqa: E402

ROUNDS_DEFAULT = 5
ROUNDS_MIN = 3
PACKAGES = ("eoslog", "numpy", "pyarrow")
TOPIC = "bench"
SEGMENT_BYTES = 32 << 20
CONSUME_MESSAGES = 500
ARROW_RECORDS = 100_000
CONSUME_TARGET = 0.70
SQLITE_TARGET = 3.0
MEMCPY_TARGET = 0.50
CONTENDERS = (
    "floor",
    "floor, C loop",
    "consume()",
    "consume() + value()",
    "consume_arrow()",
    "SQLite scan",
    "memcpy",
)


class ReadSource:
    """What the read contenders read: a broker holding one read_committed partition, `TOPIC`
    0, and a SQLite file with the same rows."""

    broker: eoslog.Broker
    sqlite: sqlite3.Connection

    def consumer(self) -> eoslog.Consumer:
        consumer = self.broker.consumer({"isolation.level": "read_committed"})
        consumer.assign([eoslog.TopicPartition(TOPIC, 0, 0)])
        return consumer

    def close(self) -> None:
        self.sqlite.close()
        self.broker.close()


class Data(ReadSource):
    """The workload written once into a broker and a SQLite file, plus the floor's lists."""

    def __init__(self, workload: Workload, root: str) -> None:
        self.workload = workload
        self.records = workload.records
        self.offsets = list(range(workload.records))
        self.broker = eoslog.open(os.path.join(root, "log"), durability="none", background=False)
        self.broker.create_topic(TOPIC, 1, config={"segment.bytes": SEGMENT_BYTES})
        log = self.broker.log(TOPIC, 0)
        for chunk in workload.chunks:
            builder = codec.BatchBuilder()
            for timestamp, key, value in zip(
                chunk.timestamps, chunk.keys, chunk.values, strict=True
            ):
                assert builder.append(timestamp, key, value)
            log.append_batch(builder.build())
        self.segments = len(log.segments)
        self.sqlite = sqlite3.connect(os.path.join(root, "records.sqlite"))
        self.sqlite.execute("PRAGMA journal_mode=WAL")
        self.sqlite.execute("PRAGMA synchronous=NORMAL")
        self.sqlite.execute(
            "CREATE TABLE records (offset INTEGER PRIMARY KEY, timestamp INTEGER, key BLOB, "
            "value BLOB)"
        )
        for chunk in workload.chunks:
            with self.sqlite:
                self.sqlite.executemany(
                    "INSERT INTO records VALUES (?, ?, ?, ?)",
                    zip(
                        range(chunk.first_index, chunk.first_index + len(chunk)),
                        chunk.timestamps,
                        chunk.keys,
                        chunk.values,
                        strict=True,
                    ),
                )
        self.payload = np.frombuffer(b"".join(workload.values), dtype=np.uint8)
        self.payload_target = np.empty_like(self.payload)


def read_runners(
    consumer: Callable[[], eoslog.Consumer],
    n: int,
    sqlite: sqlite3.Connection,
    payload: np.ndarray,
    payload_target: np.ndarray,
) -> dict[str, Callable[[], object]]:
    """The contenders that read n records back: consume() (and + value()), consume_arrow(),
    a SQLite cursor scan of the same rows and memcpy of the payload. Shared with
    txn_bench.py's read_committed section."""

    def consume(touch: bool) -> Callable[[], object]:
        def run() -> object:
            made = consumer()
            out: list[eoslog.Message] = []
            while len(out) < n:
                found = made.consume(CONSUME_MESSAGES, timeout=0)
                assert found, "the partition ended early"
                if touch:
                    for message in found:
                        message.value()
                out.extend(found)
            made.close()
            return out

        return run

    def consume_arrow() -> object:
        made = consumer()
        out: list[pa.RecordBatch] = []
        rows = 0
        while rows < n:
            batch = made.consume_arrow(ARROW_RECORDS, timeout=0)
            assert batch.num_rows, "the partition ended early"
            rows += batch.num_rows
            out.append(batch)
        made.close()
        return out

    def sqlite_scan() -> object:
        return [
            row
            for row in sqlite.execute(
                "SELECT offset, timestamp, key, value FROM records ORDER BY offset"
            )
        ]

    def memcpy() -> object:
        np.copyto(payload_target, payload)
        return None

    return {
        "consume()": consume(touch=False),
        "consume() + value()": consume(touch=True),
        "consume_arrow()": consume_arrow,
        "SQLite scan": sqlite_scan,
        "memcpy": memcpy,
    }


def runners(data: Data) -> dict[str, Callable[[], object]]:
    def floor() -> object:
        return [
            (offset, value)
            for offset, value in zip(data.offsets, data.workload.values, strict=True)
        ]

    def floor_c() -> object:
        return list(zip(data.offsets, data.workload.values, strict=True))

    reads = read_runners(
        data.consumer, data.records, data.sqlite, data.payload, data.payload_target
    )
    return {"floor": floor, "floor, C loop": floor_c, **reads}


def check(name: str, result: object, data: Data) -> None:
    """The warm-up result holds every record, the first and last ones right (untimed)."""
    workload = data.workload
    last = data.records - 1
    if name in ("consume()", "consume() + value()"):
        assert isinstance(result, list) and len(result) == data.records, name
        for index in (0, last):
            message = result[index]
            assert message.offset() == index and message.value() == workload.values[index]
            assert message.key() is None
            assert message.timestamp() == (eoslog.TIMESTAMP_CREATE_TIME, workload.timestamps[index])
    elif name == "consume_arrow()":
        assert isinstance(result, list)
        table = pa.Table.from_batches(result)
        assert table.num_rows == data.records, name
        assert table.column("offset").to_pylist() == data.offsets
        values = table.column("value")
        assert (
            values[0].as_py() == workload.values[0]
            and values[last].as_py() == workload.values[last]
        )
    elif name == "SQLite scan":
        assert isinstance(result, list) and len(result) == data.records
        assert result[last][3] == workload.values[last]
    elif name == "memcpy":
        assert np.array_equal(data.payload, data.payload_target)


def measure(data: Data, rounds: int, gc_on: bool) -> dict[str, list[float]]:
    timer = Timer(gc_on)
    run = runners(data)
    for name in CONTENDERS:
        result = run[name]()
        check(name, result, data)
        del result
    times: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    for order in orders(CONTENDERS, rounds):
        for name in order:
            times[name].append(timer(run[name]))
        print(
            "  round:",
            ", ".join(f"{n} {times[n][-1] * 1e3:.0f} ms" for n in CONTENDERS),
            flush=True,
        )
    return times


def ratio_rounds(times: dict[str, list[float]], slower: str, faster: str) -> list[float]:
    """Per-round ratios time(slower) / time(faster): how many times `faster`'s speed."""
    return [s / f for s, f in zip(times[slower], times[faster], strict=True)]


def fmt_ratio(values: Sequence[float], percent: bool) -> str:
    fmt = (lambda v: f"{v:.0%}") if percent else (lambda v: f"{v:.2f}×")
    return f"{fmt(statistics.median(values))} ({fmt(min(values))} – {fmt(max(values))})"


def results_section(data: Data, times: dict[str, list[float]]) -> Section:
    n = data.records
    payload = data.payload.nbytes
    lines = [
        "| contender | median records/s | min – max | median ms/run |",
        "|---|---:|---:|---:|",
    ]
    for name in CONTENDERS:
        runs = times[name]
        rates = [n / t for t in runs]
        lines.append(
            f"| {name} | {statistics.median(rates) / 1e6:.2f} M | "
            f"{min(rates) / 1e6:.2f} M – {max(rates) / 1e6:.2f} M | "
            f"{statistics.median(runs) * 1e3:.0f} |"
        )
    consume = ratio_rounds(times, "floor", "consume()")
    consume_c = ratio_rounds(times, "floor, C loop", "consume()")
    touched = ratio_rounds(times, "floor", "consume() + value()")
    arrow_sqlite = ratio_rounds(times, "SQLite scan", "consume_arrow()")
    arrow_memcpy = ratio_rounds(times, "memcpy", "consume_arrow()")
    arrow_gib_s = [payload / t / (1 << 30) for t in times["consume_arrow()"]]
    lines += [
        "",
        "| ratio (median of per-round ratios; min – max) | value |",
        "|---|---:|",
        f"| consume() ÷ floor | {fmt_ratio(consume, True)} |",
        f"| consume() ÷ floor, C loop | {fmt_ratio(consume_c, True)} |",
        f"| consume() + value() ÷ floor | {fmt_ratio(touched, True)} |",
        f"| consume_arrow() ÷ SQLite scan | {fmt_ratio(arrow_sqlite, False)} |",
        f"| consume_arrow() payload bandwidth ÷ memcpy | {fmt_ratio(arrow_memcpy, True)} |",
        "",
        f"consume_arrow() delivers {statistics.median(arrow_gib_s):.2f} GiB/s of value bytes "
        f"(median; {payload:,} bytes per run).",
        "",
    ]
    targets = [
        Target(
            "consume()",
            "÷ floor",
            f"≥ {CONSUME_TARGET:.0%}",
            fmt_ratio(consume, True),
            statistics.median(consume) >= CONSUME_TARGET,
        ),
        Target(
            "consume_arrow()",
            "÷ SQLite scan",
            f"≥ {SQLITE_TARGET:.0f}×",
            fmt_ratio(arrow_sqlite, False),
            statistics.median(arrow_sqlite) >= SQLITE_TARGET,
        ),
        Target(
            "consume_arrow()",
            "payload ÷ memcpy",
            f"≥ {MEMCPY_TARGET:.0%}",
            fmt_ratio(arrow_memcpy, True),
            statistics.median(arrow_memcpy) >= MEMCPY_TARGET,
        ),
    ]
    return Section("Results", lines, targets)


def render(
    argv: Sequence[str],
    args: argparse.Namespace,
    data: Data,
    section: Section,
    seconds: float,
    load_start: tuple[float, float, float],
) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join(
        [
            "# eoslog consumer benchmarks: consume() and consume_arrow()",
            "",
            f"Command: `{command_line(argv)}`  ",
            f"Date: {now}; wall time {seconds:.0f} s  ",
            codec_line() + "  ",
            tree_line(),
            "",
            "## Machine",
            "",
            *machine_lines(PACKAGES),
            f"- load average (1, 5, 15 min) at the start: {fmt_load(load_start)}; at the end: "
            f"{fmt_load(os.getloadavg())} (other processes share this machine)",
            "",
            "## Workload and method",
            "",
            f"Workload: {data.records:,} records, key null, value 100 B JSON-like text, 1,000 "
            f"records/batch, one partition ({data.segments} segments of ≤ 32 MiB), "
            '`durability="none"`, read_committed, no transactions (the partition log reports '
            'no aborted data yet, so the read_committed target\'s "aborted data present" '
            "variant is not measured). Page cache warm.",
            "",
            f"Contenders (see bench/consumer_bench.py): the floor "
            "`[(offset, value) for offset, value in zip(offsets, values)]` (one object per "
            "record, made by Python code); the same with `list(zip(...))` (no Python code per "
            f"record); `consume({CONSUME_MESSAGES}, timeout=0)` until every record is read, "
            f"every Message kept; the same calling `value()` on each; "
            f"`consume_arrow({ARROW_RECORDS:,}, timeout=0)`; a SQLite Python-cursor scan of "
            "the same rows (WAL, synchronous=NORMAL); `numpy.copyto` of the value bytes.",
            "",
            f"Method: one checked warm-up per contender, then {args.rounds} rounds in which they "
            "run alternately in this process (the order reverses every round). Medians and "
            "min – max are over the rounds; a ratio is the median of the per-round ratios. The "
            f"heap is collected before each run; the cyclic GC is {args.gc} while timing.",
            "",
            "## Targets (docs/bench.md)",
            "",
            "| path | figure | target | measured (median; min – max) | status |",
            "|---|---|---|---|---|",
            *(t.row() for t in section.targets),
            "",
            f"## {section.title}",
            "",
            *section.lines,
        ]
    )


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=ROUNDS_DEFAULT)
    parser.add_argument("--tmp", default="/tmp", help="where the data directory is made")
    parser.add_argument("--gc", choices=("off", "on"), default="off")
    parser.add_argument("--output", type=FilePath, default=BENCH_DIR / "RESULTS-consumer.md")
    args = parser.parse_args(argv)
    if args.rounds < ROUNDS_MIN:
        parser.error(f"--rounds must be at least {ROUNDS_MIN} (docs/bench.md)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    started = time.perf_counter()
    load_start = os.getloadavg()
    root = tempfile.mkdtemp(prefix="eoslog-consumerbench-", dir=args.tmp)
    try:
        print(f"building {args.records:,} records under {root} ...", flush=True)
        data = Data(Workload.build(args.records), root)
        try:
            times = measure(data, args.rounds, args.gc == "on")
            section = results_section(data, times)
            text = render(argv, args, data, section, time.perf_counter() - started, load_start)
        finally:
            data.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(text)
    args.output.write_text(text + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
