"""Single-record transactions against their anchors (txn_bench.py's latency section): each
call timed alone, eoslog's begin / produce / commit, SQLite's BEGIN / INSERT / COMMIT of one row
(WAL, synchronous NORMAL and FULL) and a 4 KiB append + fdatasync."""

from __future__ import annotations

import functools
import os
import time
from typing import Any

import numpy as np

import harness
from contenders_producer import (
    PRODUCE_TOPIC,
    PRODUCER_CONFIG,
    close_broker,
    committed_rows,
    open_broker,
)
from contenders_shared import expect, remove_sqlite, sqlite_log

LATENCY_WARMUP = 200  # untimed calls before the timed ones, in every run
FSYNC_BLOCK = 4096
# The single-record transaction as docs/bench.md's latency rows define it: linger.ms 0, so
# the record's batch closes at produce() and nothing waits for a linger deadline.
LATENCY_CONFIG: dict[str, object] = {**PRODUCER_CONFIG, "linger.ms": 0}


def transaction_latency(
    name: str, root: str, value: bytes, durability: str, samples: int
) -> harness.Contender:
    """Self-timed: `samples` single-record transactions (begin_transaction(), produce() of
    `value`, commit_transaction(); LATENCY_CONFIG) on a fresh broker, each timed alone;
    nanoseconds. Checked: read_committed reads every record back."""

    def prepare() -> tuple[Any, Any]:
        broker = open_broker(root, durability)
        producer = broker.producer({**LATENCY_CONFIG, "transactional.id": "bench-txn"})
        producer.init_transactions()
        return broker, producer

    def run(state: tuple[Any, Any]) -> np.ndarray:
        producer = state[1]
        begin, produce, commit = (
            producer.begin_transaction,
            producer.produce,
            producer.commit_transaction,
        )
        clock = time.perf_counter_ns
        for _ in range(LATENCY_WARMUP):
            begin()
            produce(PRODUCE_TOPIC, value)
            commit()
        out = np.empty(samples, dtype=np.int64)
        for i in range(samples):
            start = clock()
            begin()
            produce(PRODUCE_TOPIC, value)
            commit()
            out[i] = clock() - start
        rows = committed_rows(state[0])
        expect(rows == LATENCY_WARMUP + samples, f"{name}: {rows} committed")
        return out

    def finish(state: tuple[Any, Any]) -> None:
        state[1].close()
        close_broker(state[0])

    return harness.Contender(name, run, prepare, finish, timed=False)


def transaction_calls(root: str, value: bytes, durability: str, count: int) -> float:
    """Python function calls per single-record transaction (begin_transaction(), produce()
    of `value`, commit_transaction()), counted by cProfile over `count` transactions after
    LATENCY_WARMUP untimed ones, on a fresh broker."""
    broker = open_broker(root, durability)
    try:
        producer = broker.producer({**LATENCY_CONFIG, "transactional.id": "bench-calls"})
        producer.init_transactions()

        def transactions(number: int) -> None:
            for _ in range(number):
                producer.begin_transaction()
                producer.produce(PRODUCE_TOPIC, value)
                producer.commit_transaction()

        transactions(LATENCY_WARMUP)
        calls = harness.count_calls(functools.partial(transactions, count))
        producer.close()
    finally:
        close_broker(broker)
    return calls / count


def fsync_latency(name: str, root: str, samples: int) -> harness.Contender:
    """Self-timed: `samples` appends of FSYNC_BLOCK bytes + `os.fdatasync` to a file under
    `root`, each timed alone; nanoseconds."""
    path = os.path.join(root, "fsync-probe")
    block = b"x" * FSYNC_BLOCK

    def prepare() -> int:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)

    def run(fd: int) -> np.ndarray:
        clock = time.perf_counter_ns
        for _ in range(LATENCY_WARMUP):
            os.write(fd, block)
            os.fdatasync(fd)
        out = np.empty(samples, dtype=np.int64)
        for i in range(samples):
            start = clock()
            os.write(fd, block)
            os.fdatasync(fd)
            out[i] = clock() - start
        size = os.fstat(fd).st_size
        expect(size == FSYNC_BLOCK * (LATENCY_WARMUP + samples), f"{name}: {size} bytes")
        return out

    def finish(fd: int) -> None:
        os.close(fd)
        os.unlink(path)

    return harness.Contender(name, run, prepare, finish, timed=False)


def sqlite_transaction_latency(
    name: str, root: str, value: bytes, synchronous: str, samples: int
) -> harness.Contender:
    """Self-timed: `samples` single-row transactions (BEGIN, INSERT of `value`, COMMIT) into a
    fresh SQLite file in WAL mode with `synchronous`, each timed alone; nanoseconds. Checked:
    the row count."""
    path = os.path.join(root, f"latency-{synchronous}.sqlite")

    def prepare() -> Any:
        return sqlite_log(path, synchronous)

    def run(connection: Any) -> np.ndarray:
        execute = connection.execute
        insert = "INSERT INTO log (value) VALUES (?)"
        row = (value,)
        clock = time.perf_counter_ns
        for _ in range(LATENCY_WARMUP):
            execute("BEGIN")
            execute(insert, row)
            execute("COMMIT")
        out = np.empty(samples, dtype=np.int64)
        for i in range(samples):
            start = clock()
            execute("BEGIN")
            execute(insert, row)
            execute("COMMIT")
            out[i] = clock() - start
        (rows,) = execute("SELECT count(*) FROM log").fetchone()
        expect(rows == LATENCY_WARMUP + samples, f"{name}: {rows} rows")
        return out

    def finish(connection: Any) -> None:
        connection.close()
        remove_sqlite(path)

    return harness.Contender(name, run, prepare, finish, timed=False)
