"""Single-record transactions against their anchors (txn_bench.py's latency section): each
call timed alone, eoslog's begin / produce / commit (alone, beside a thread producing batches,
and at a fixed rate), the idempotent produce() + flush(), SQLite's BEGIN / INSERT / COMMIT of one
row (WAL, synchronous NORMAL and FULL) and a 4 KiB append + fdatasync."""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
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
SLEEP_SLACK_NS = 200_000  # a fixed-rate run spins the last 200 µs before a call is due
LOAD_TOPIC = "load"
LOAD_BATCH = 1_000  # records per batch of the load thread
FSYNC_BLOCK = 4096
# The single-record transaction as docs/bench.md's latency rows define it: linger.ms 0, so
# the record's batch closes at produce() and nothing waits for a linger deadline.
LATENCY_CONFIG: dict[str, object] = {**PRODUCER_CONFIG, "linger.ms": 0}


def timed_calls(call: Callable[[], object], samples: int, rate: float = 0.0) -> np.ndarray:
    """LATENCY_WARMUP untimed calls of `call`, then `samples` calls each timed alone;
    nanoseconds. With `rate` (calls per second) the calls are scheduled at fixed intervals from
    the first one, and each is measured from its scheduled start, not its actual one (corrected
    for coordinated omission: a call that starts late because an earlier one ran long carries
    that wait in its figure)."""
    for _ in range(LATENCY_WARMUP):
        call()
    clock = time.perf_counter_ns
    out = np.empty(samples, dtype=np.int64)
    if not rate:
        for i in range(samples):
            start = clock()
            call()
            out[i] = clock() - start
        return out
    interval = 1e9 / rate
    first = clock()
    for i in range(samples):
        due = first + int(i * interval)
        while (now := clock()) < due:
            if due - now > SLEEP_SLACK_NS:  # sleep most of a long wait, spin the rest
                time.sleep((due - now - SLEEP_SLACK_NS) / 1e9)
        call()
        out[i] = clock() - due
    return out


def achieved_rate(latencies: np.ndarray, rate: float) -> float:
    """Calls per second a fixed-rate run of `timed_calls` achieved: its calls over the time
    from the first scheduled start to the last call's end."""
    span_ns = (len(latencies) - 1) * 1e9 / rate + float(latencies[-1])
    return len(latencies) * 1e9 / span_ns


def transaction_latency(
    name: str,
    root: str,
    value: bytes,
    durability: str,
    samples: int,
    *,
    rate: float = 0.0,
    load: list[float] | None = None,
) -> harness.Contender:
    """Self-timed: `samples` single-record transactions (begin_transaction(), produce() of
    `value`, commit_transaction(); LATENCY_CONFIG) on a fresh broker, each timed alone
    (`timed_calls`, at `rate` if given); nanoseconds. With `load`, a second thread produces
    LOAD_BATCH-record batches to another topic of the broker meanwhile (`produce_batch()` +
    `flush()`, idempotent) and its records/s are appended to `load` per run. Checked:
    read_committed reads every record back."""

    def prepare() -> tuple[Any, Any, Any]:
        broker = open_broker(root, durability)
        producer = broker.producer({**LATENCY_CONFIG, "transactional.id": "bench-txn"})
        producer.init_transactions()
        return broker, producer, None if load is None else _Load(broker, value)

    def run(state: tuple[Any, Any, Any]) -> np.ndarray:
        begin, produce, commit = (
            state[1].begin_transaction,
            state[1].produce,
            state[1].commit_transaction,
        )

        def transaction() -> None:
            begin()
            produce(PRODUCE_TOPIC, value)
            commit()

        out = timed_calls(transaction, samples, rate)
        if state[2] is not None and load is not None:
            load.append(state[2].stop())
        rows = committed_rows(state[0])
        expect(rows == LATENCY_WARMUP + samples, f"{name}: {rows} committed")
        return out

    def finish(state: tuple[Any, Any, Any]) -> None:
        if state[2] is not None:
            state[2].stop()
        state[1].close()
        close_broker(state[0])

    return harness.Contender(name, run, prepare, finish, timed=False)


class _Load:
    """A thread producing LOAD_BATCH-record batches of `value` to LOAD_TOPIC of `broker`
    (an idempotent producer, `produce_batch()` then `flush()`) until stopped."""

    def __init__(self, broker: Any, value: bytes) -> None:
        broker.create_topic(LOAD_TOPIC, 1)
        self._producer = broker.producer(PRODUCER_CONFIG)
        self._values = [value] * LOAD_BATCH
        self._stopping = threading.Event()
        self._records = 0
        self._started = time.perf_counter()
        self._seconds = 0.0
        self._thread = threading.Thread(target=self._produce, daemon=True)
        self._thread.start()

    def _produce(self) -> None:
        producer, values = self._producer, self._values
        while not self._stopping.is_set():
            producer.produce_batch(LOAD_TOPIC, values, partition=0)
            expect(producer.flush() == 0, "load flush left messages queued")
            self._records += len(values)

    def stop(self) -> float:
        """Stop the thread (once); the records per second it produced."""
        if not self._stopping.is_set():
            self._stopping.set()
            self._thread.join()
            self._seconds = time.perf_counter() - self._started
            self._producer.close()
        return self._records / self._seconds


def produce_flush_latency(
    name: str, root: str, value: bytes, durability: str, samples: int
) -> harness.Contender:
    """Self-timed: `samples` idempotent (not transactional) `produce()` of `value` +
    `flush()` on a fresh broker (LATENCY_CONFIG), each timed alone; nanoseconds. Checked: every
    record landed."""

    def prepare() -> tuple[Any, Any]:
        broker = open_broker(root, durability)
        return broker, broker.producer(LATENCY_CONFIG)

    def run(state: tuple[Any, Any]) -> np.ndarray:
        produce, flush = state[1].produce, state[1].flush

        def produce_flush() -> None:
            produce(PRODUCE_TOPIC, value)
            flush()

        out = timed_calls(produce_flush, samples)
        landed = state[0].log(PRODUCE_TOPIC, 0).log_end_offset
        expect(landed == LATENCY_WARMUP + samples, f"{name}: {landed} landed")
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
        write, fdatasync = os.write, os.fdatasync

        def append() -> None:
            write(fd, block)
            fdatasync(fd)

        out = timed_calls(append, samples)
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

        def transaction() -> None:
            execute("BEGIN")
            execute(insert, row)
            execute("COMMIT")

        out = timed_calls(transaction, samples)
        (rows,) = execute("SELECT count(*) FROM log").fetchone()
        expect(rows == LATENCY_WARMUP + samples, f"{name}: {rows} rows")
        return out

    def finish(connection: Any) -> None:
        connection.close()
        remove_sqlite(path)

    return harness.Contender(name, run, prepare, finish, timed=False)
