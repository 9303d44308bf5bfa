"""The producers' contenders (producer_bench.py, txn_bench.py): eoslog's idempotent and
transactional produce, confluent-kafka on librdkafka's mock cluster, SQLite WAL inserts; and
the broker helpers the transaction latency contenders (contenders_txn.py) share."""

from __future__ import annotations

import os
from typing import Any

import eoslog
import harness
from contenders_shared import expect, sqlite_log
from workload import (
    BATCH_RECORDS,
)

PRODUCE_TOPIC = "bench"
POLL_EVERY = 10_000  # produce() loops poll(0) this often, as a producing application would
TXN_RECORDS = 1_000  # records per transaction (docs/bench.md: commit every 1,000)
# Batches close at batch.num.messages; batch.size and linger.ms are large enough not to first.
PRODUCER_CONFIG: dict[str, object] = {
    "batch.num.messages": BATCH_RECORDS,
    "batch.size": 1 << 20,
    "linger.ms": 100,
}


def open_broker(root: str, durability: str, config: dict[str, object] | None = None) -> Any:
    """A broker in a fresh directory under `root` with PRODUCE_TOPIC (one partition)."""
    import tempfile

    broker = eoslog.open(tempfile.mkdtemp(dir=root), durability=durability, background=False)
    broker.create_topic(PRODUCE_TOPIC, 1, config or {})
    return broker


def close_broker(broker: Any) -> None:
    import shutil

    path = broker.path
    broker.close()
    shutil.rmtree(path, ignore_errors=True)


def committed_rows(broker: Any) -> int:
    """Records a read_committed consumer reads from offset 0 (untimed check)."""
    consumer = broker.consumer({"isolation.level": "read_committed"})
    consumer.assign([eoslog.TopicPartition(PRODUCE_TOPIC, 0, 0)])
    rows = 0
    while batch := consumer.consume_arrow(100_000, timeout=0).num_rows:
        rows += batch
    consumer.close()
    return rows


def eoslog_producer(
    name: str,
    root: str,
    values: list[bytes],
    durability: str,
    *,
    batch: bool = False,
    transactional: bool = False,
    config: dict[str, object] | None = None,
    confluent_layer: bool = False,
) -> harness.Contender:
    """eoslog's Producer on a fresh broker per run: `produce()` per record (poll(0) every
    POLL_EVERY) then `flush()`, or `produce_batch(values)` then `flush()`; `transactional`:
    `produce()` per record in transactions of TXN_RECORDS (init_transactions() untimed), or
    with `batch` too `produce_batch()` of each transaction's TXN_RECORDS values.
    `confluent_layer`: the same producer made as a confluent-kafka user makes it,
    eoslog.confluent.Producer({"eoslog.dir": ...}), on the same prepared directory.
    Checked: the records landed (every run), read_committed reads them all (warm-up)."""

    def prepare() -> tuple[Any, Any]:
        broker = open_broker(root, durability, config)
        transactional_id = {"transactional.id": "bench-txn"} if transactional else {}
        if confluent_layer:
            import eoslog.confluent

            path = broker.path
            broker.close()  # the confluent layer opens the directory itself, as a user's would
            producer = eoslog.confluent.Producer(
                {
                    "eoslog.dir": path,
                    "eoslog.durability": durability,
                    **PRODUCER_CONFIG,
                    **transactional_id,
                }
            )
            broker = producer._broker
        else:
            producer = broker.producer({**PRODUCER_CONFIG, **transactional_id})
        if transactional:
            producer.init_transactions()
        return broker, producer

    def produce_each(state: tuple[Any, Any]) -> None:
        producer = state[1]
        produce = producer.produce
        for i, value in enumerate(values):
            produce(PRODUCE_TOPIC, value)
            if i % POLL_EVERY == 0:
                producer.poll(0)
        expect(producer.flush() == 0, "flush left messages queued")

    def produce_batch(state: tuple[Any, Any]) -> None:
        producer = state[1]
        producer.produce_batch(PRODUCE_TOPIC, values, partition=0)
        expect(producer.flush() == 0, "flush left messages queued")

    def produce_transactions(state: tuple[Any, Any]) -> None:
        producer = state[1]
        produce = producer.produce
        for start in range(0, len(values), TXN_RECORDS):
            producer.begin_transaction()
            if batch:
                producer.produce_batch(
                    PRODUCE_TOPIC, values[start : start + TXN_RECORDS], partition=0
                )
            else:
                for value in values[start : start + TXN_RECORDS]:
                    produce(PRODUCE_TOPIC, value)
            producer.commit_transaction()

    def check(state: tuple[Any, Any], _: object) -> None:
        rows = committed_rows(state[0])
        expect(rows == len(values), f"{name}: {rows} committed records read")

    def finish(state: tuple[Any, Any]) -> None:
        broker, producer = state
        if not transactional:
            landed = broker.log(PRODUCE_TOPIC, 0).log_end_offset
            expect(landed == len(values), f"{name}: {landed} records landed")
        producer.close()
        close_broker(broker)

    run = produce_transactions if transactional else produce_batch if batch else produce_each
    return harness.Contender(name, run, prepare, finish, check)


def confluent_producer(
    name: str,
    values: list[bytes],
    transactional: bool,
    cluster: dict[str, object] | None = None,
    partition: int = -1,
) -> harness.Contender:
    """confluent-kafka's producer on librdkafka's in-process mock cluster (a fresh one per
    run, created untimed), or on the `cluster` its settings name (serve_bench.py: an
    `eoslog serve` address); `partition` -1: the partitioner's choice (the mock auto-creates
    4 partitions), else every record to that one. Idempotent `produce()` per record (poll(0)
    every POLL_EVERY and on BufferError) then `flush()`; or transactional, begin / produce /
    commit_transaction() every TXN_RECORDS (the commit flushes, inside the timing). The mock
    does not filter read_committed: the check is the delivery reports (every run)."""

    def prepare() -> tuple[Any, list[int]]:
        from confluent_kafka import Producer

        settings: dict[str, object] = {
            **(cluster or {"test.mock.num.brokers": 1}),
            "batch.num.messages": BATCH_RECORDS,
            "linger.ms": 5,
        }
        settings |= {"transactional.id": "bench-txn"} if transactional else {}
        producer = Producer(settings | ({} if transactional else {"enable.idempotence": True}))
        delivered = [0]

        def count(err: object, msg: object) -> None:
            if err is None:
                delivered[0] += 1

        if transactional:
            producer.init_transactions(30)
            producer.begin_transaction()
        producer.produce(PRODUCE_TOPIC, b"warm", on_delivery=count)  # creates the topic
        if transactional:
            producer.commit_transaction(30)
        producer.flush()
        delivered[0] = 0
        return (producer, count), delivered

    def run(state: tuple[Any, list[int]]) -> None:
        (producer, count), _ = state
        produce = producer.produce
        step = TXN_RECORDS if transactional else len(values)
        for start in range(0, len(values), step):
            if transactional:
                producer.begin_transaction()
            for i, value in enumerate(values[start : start + step]):
                while True:  # a full queue (a slower cluster) drains by poll()
                    try:
                        produce(PRODUCE_TOPIC, value, partition=partition, on_delivery=count)
                        break
                    except BufferError:
                        producer.poll(0.01)
                if not transactional and i % POLL_EVERY == 0:
                    producer.poll(0)
            if transactional:
                producer.commit_transaction()
        if not transactional:
            expect(producer.flush() == 0, "confluent flush left messages queued")

    def finish(state: tuple[Any, list[int]]) -> None:
        delivered = state[1][0]
        expect(delivered == len(values), f"{name}: {delivered} delivered")

    return harness.Contender(name, run, prepare, finish)


def sqlite_insert(name: str, root: str, values: list[bytes], synchronous: str) -> harness.Contender:
    """SQLite in WAL mode, `executemany` of BATCH_RECORDS-row transactions into
    (offset INTEGER PRIMARY KEY, value BLOB), a fresh file per run; checked: the row count."""
    path = os.path.join(root, f"bench-{synchronous}.sqlite")

    def prepare() -> Any:
        return sqlite_log(path, synchronous)

    def run(connection: Any) -> None:
        for start in range(0, len(values), BATCH_RECORDS):
            connection.execute("BEGIN")
            connection.executemany(
                "INSERT INTO log (value) VALUES (?)",
                ((v,) for v in values[start : start + BATCH_RECORDS]),
            )
            connection.execute("COMMIT")

    def finish(connection: Any) -> None:
        (rows,) = connection.execute("SELECT count(*) FROM log").fetchone()
        connection.close()
        expect(rows == len(values), f"{name}: {rows} rows")

    return harness.Contender(name, run, prepare, finish)
