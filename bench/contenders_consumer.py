"""The consumers' contenders (consumer_bench.py, txn_bench.py): reading a partition's committed
records back with consume(), consume_arrow(), a SQLite scan, memcpy and the
one-object-per-record floors, and `read_back`, which alternates them; and the wake-up latency
of a waiting consumer against a `queue.Queue` hand-off between the same threads."""

from __future__ import annotations

import queue
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

import contenders_producer
import eoslog
import eoslog.confluent
import harness
from contenders_shared import expect
from scenarios import CONFLUENT_CONSUME, CONFLUENT_POLL
from workload import (
    READ_TOPIC,
    Committed,
)

CONSUME_MESSAGES = 500
ARROW_RECORDS = 100_000


def consume_contenders(
    broker: Any, committed: Committed, sqlite: Any
) -> dict[str, harness.Contender]:
    """Every contender reads the committed records of READ_TOPIC partition 0 from offset 0:
    the floors (one Python object per record, made by Python code / by `list(zip())`),
    read_committed `consume(500, timeout=0)` until every record is read, every Message kept
    (and the same calling `value()` on each), `poll(0)` likewise, one Message per call, the
    same two through the drop-in (`eoslog.confluent.Consumer` over the broker's directory,
    which must have been opened through eoslog.confluent so that it is shared),
    `consume_arrow(100_000, timeout=0)`, a SQLite
    Python-cursor scan of the same rows, and `numpy.copyto` of the value bytes. Each warm-up
    is checked against the committed records."""
    offsets, values = committed.offsets[0], committed.values[0]
    n = len(offsets)
    payload = np.frombuffer(b"".join(values), dtype=np.uint8)
    target = np.empty_like(payload)

    def consumer(drop_in: bool = False) -> Any:
        config = {"isolation.level": "read_committed"}
        if drop_in:
            made = eoslog.confluent.Consumer({**config, "eoslog.dir": broker.path})
        else:
            made = broker.consumer(config)
        made.assign([eoslog.TopicPartition(READ_TOPIC, 0, 0)])
        return made

    def consume(touch: bool, drop_in: bool = False) -> Callable[[object], object]:
        def run(_: object) -> object:
            made = consumer(drop_in)
            out: list[Any] = []
            while len(out) < n:
                found = made.consume(CONSUME_MESSAGES, timeout=0)
                expect(bool(found), "the partition ended early")
                if touch:
                    for message in found:
                        message.value()
                out.extend(found)
            made.close()
            return out

        return run

    def poll(drop_in: bool) -> Callable[[object], object]:
        def run(_: object) -> object:
            made = consumer(drop_in)
            out: list[Any] = []
            append, take = out.append, made.poll
            for _ in range(n):
                append(take(0))
            made.close()
            expect(out[-1] is not None, "the partition ended early")
            return out

        return run

    def consume_arrow(_: object) -> object:
        made = consumer()
        out: list[pa.RecordBatch] = []
        rows = 0
        while rows < n:
            batch = made.consume_arrow(ARROW_RECORDS, timeout=0)
            expect(batch.num_rows > 0, "the partition ended early")
            rows += batch.num_rows
            out.append(batch)
        made.close()
        return out

    def sqlite_scan(_: object) -> object:
        query = "SELECT offset, timestamp, key, value FROM records ORDER BY offset"
        return [row for row in sqlite.execute(query)]

    def memcpy(_: object) -> object:
        np.copyto(target, payload)
        return target

    def check_messages(_: object, result: Any) -> None:
        expect([m.offset() for m in result] == offsets, "consume(): offsets differ")
        expect(result[0].value() == values[0] and result[-1].value() == values[-1], "values")
        expect(result[-1].key() is None, "consume(): a key where none was written")

    def check_arrow(_: object, result: Any) -> None:
        table = pa.Table.from_batches(result)
        expect(table.column("offset").to_pylist() == offsets, "consume_arrow(): offsets")
        expect(table.column("value").to_pylist() == values, "consume_arrow(): values")

    def check_rows(_: object, result: Any) -> None:
        expect(len(result) == n and result[-1][3] == values[-1], "SQLite: rows differ")

    def check_copy(_: object, result: Any) -> None:
        expect(np.array_equal(payload, result), "memcpy: bytes differ")

    def check_floor(_: object, result: Any) -> None:
        expect(len(result) == n and result[-1] == (offsets[-1], values[-1]), "the floor")

    table: list[harness.Contender] = [
        harness.Contender(
            "floor",
            lambda _: [(offset, value) for offset, value in zip(offsets, values, strict=True)],
            check=check_floor,
        ),
        harness.Contender(
            "floor, C loop", lambda _: list(zip(offsets, values, strict=True)), check=check_floor
        ),
        harness.Contender("consume()", consume(touch=False), check=check_messages),
        harness.Contender(
            CONFLUENT_CONSUME, consume(touch=False, drop_in=True), check=check_messages
        ),
        harness.Contender("poll()", poll(drop_in=False), check=check_messages),
        harness.Contender(CONFLUENT_POLL, poll(drop_in=True), check=check_messages),
        harness.Contender("consume() + value()", consume(touch=True), check=check_messages),
        harness.Contender("consume_arrow()", consume_arrow, check=check_arrow),
        harness.Contender("SQLite scan", sqlite_scan, check=check_rows),
        harness.Contender("memcpy", memcpy, check=check_copy),
    ]
    return {c.name: c for c in table}


def read_back(
    broker: Any,
    committed: Committed,
    sqlite_path: str,
    names: Sequence[str],
    rounds: int,
    timer: harness.Timer,
) -> tuple[harness.Runs, float]:
    """Alternate the contenders `names` of consume_contenders over the committed records (a
    SQLite file of them made at `sqlite_path` for the scan): the runs, and the median GiB/s of
    value bytes consume_arrow() delivered."""
    from workload import sqlite_rows

    sqlite = sqlite_rows(sqlite_path, committed)
    try:
        table = consume_contenders(broker, committed, sqlite)
        runs = harness.alternate([table[n] for n in names], rounds, timer, label="read")
    finally:
        sqlite.close()
    payload = sum(len(v) for v in committed.values[0])
    return runs, statistics.median(runs.rates("consume_arrow()", payload / (1 << 30)))


# --- wake-up latency (consumer_bench.py's second section) -------------------------------------

WAKEUP_WARMUP = 200  # untimed hand-offs before the timed ones, in every run
WAKEUP_VALUE = b"x" * 100


def queue_handoff(name: str, samples: int) -> harness.Contender:
    """Self-timed anchor: a stamp put on a `queue.Queue` by this thread, taken by a waiting
    thread, which answers on a second queue; per hand-off, from the put to the take;
    nanoseconds."""

    def run(_: None) -> np.ndarray:
        to_reader: queue.Queue[int] = queue.Queue()
        back: queue.Queue[None] = queue.Queue()
        out = np.empty(WAKEUP_WARMUP + samples, dtype=np.int64)

        def reader() -> None:
            for i in range(len(out)):
                stamp = to_reader.get()
                out[i] = time.perf_counter_ns() - stamp
                back.put(None)

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        for _ in range(len(out)):
            to_reader.put(time.perf_counter_ns())
            back.get()
        thread.join()
        return out[WAKEUP_WARMUP:]

    return harness.Contender(name, run, lambda: None, lambda _: None, timed=False)


def append_to_poll(name: str, root: str, samples: int, kind: str) -> harness.Contender:
    """Self-timed: a consumer waiting in another thread of the process, woken by each record
    this thread makes readable; per record, from just before the producer call to the
    moment the reader holds it; nanoseconds. kind: "poll" (produce() + flush(), poll()),
    "arrow" (the same, consume_arrow(1)), "committed" (begin_transaction(), produce(),
    commit_transaction(); read_committed poll()). Checked: every record arrives, in order."""
    topic = contenders_producer.PRODUCE_TOPIC

    def prepare() -> tuple[Any, Any, Any]:
        broker = contenders_producer.open_broker(root, "none")
        config: dict[str, object] = {"linger.ms": 0}
        if kind == "committed":
            config["transactional.id"] = "bench-wakeup"
        producer = broker.producer(config)
        if kind == "committed":
            producer.init_transactions()
        isolation = "read_committed" if kind == "committed" else "read_uncommitted"
        consumer = broker.consumer({"isolation.level": isolation})
        consumer.assign([eoslog.TopicPartition(topic, 0, 0)])
        return broker, producer, consumer

    def run(state: tuple[Any, Any, Any]) -> np.ndarray:
        _, producer, consumer = state
        total = WAKEUP_WARMUP + samples
        out = np.empty(total, dtype=np.int64)
        stamps = np.empty(total, dtype=np.int64)
        back: queue.Queue[None] = queue.Queue()
        offsets: list[int] = []

        def reader() -> None:
            for i in range(total):
                if kind == "arrow":
                    got = consumer.consume_arrow(1, timeout=30).column("offset").to_pylist()
                else:
                    message = consumer.poll(30)
                    got = [] if message is None else [message.offset()]
                out[i] = time.perf_counter_ns() - stamps[i]
                offsets.extend(got)
                back.put(None)

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        for i in range(total):
            stamps[i] = time.perf_counter_ns()
            if kind == "committed":
                producer.begin_transaction()
                producer.produce(topic, WAKEUP_VALUE, partition=0)
                producer.commit_transaction()
            else:
                producer.produce(topic, WAKEUP_VALUE, partition=0)
                producer.flush()
            back.get()
        thread.join()
        step = 2 if kind == "committed" else 1  # a COMMIT marker after each record
        expect(offsets[-total:] == list(range(0, step * total, step))[-total:], f"{name}: lost")
        return out[WAKEUP_WARMUP:]

    def finish(state: tuple[Any, Any, Any]) -> None:
        state[2].close()
        state[1].close()
        contenders_producer.close_broker(state[0])

    return harness.Contender(name, run, prepare, finish, timed=False)
