"""Logs for the offline-scan tests: transactions committed and aborted, batches of every codec
(transactions lz4, the plain records in turn none, gzip, snappy and zstd), headers, several
segments and partitions, and a transaction left open at the tail; and the embedded Consumer's
view of them, which scans must equal."""

from __future__ import annotations

import random
import time

import pyarrow as pa

import eoslog
from eoslog.record.columns import spark_schema

TOPIC = "orders"
PARTITIONS = 3
SEGMENT_BYTES = 3 * 1024


def fill(broker: eoslog.Broker, seed: int, transactions: int = 45) -> tuple[eoslog.Producer, int]:
    """Write the workload; returns the producer whose transaction stays open at the tail, and
    the base of the record timestamps: transaction n's records are stamped base + n s (+ the
    record's index in ms), ahead of the wall clock that stamps the markers, so timestamps
    rise with offsets."""
    rng = random.Random(seed)
    base = int(time.time() * 1000) + 60_000
    if TOPIC not in broker.list_topics():
        broker.create_topic(
            TOPIC, num_partitions=PARTITIONS, config={"segment.bytes": SEGMENT_BYTES}
        )
    txn = broker.producer({"transactional.id": f"scan-{seed}", "compression.type": "lz4"})
    txn.init_transactions()
    plains = [
        broker.producer({"enable.idempotence": True, "compression.type": name})
        for name in ("none", "gzip", "snappy", "zstd")
    ]
    for number in range(transactions):
        txn.begin_transaction()
        for index in range(rng.randint(1, 40)):
            headers = [("trace", b"t%d" % index), ("n", None)] if index % 3 == 0 else None
            txn.produce(
                TOPIC,
                value=b"%d-%d-" % (number, index) + b"x" * rng.randint(0, 90),
                key=None if index % 4 == 0 else b"k%d" % index,
                partition=rng.randrange(PARTITIONS),
                headers=headers,
                timestamp=base + number * 1000 + index,
            )
        if rng.random() < 1 / 3:
            txn.abort_transaction()
        else:
            txn.commit_transaction()
        plain = plains[number % len(plains)]
        plain.produce(
            TOPIC,
            value=b"plain-%d" % number,
            partition=number % PARTITIONS,
            timestamp=base + number * 1000 + 999,
        )
        plain.flush()
    return leave_open(broker, plain, TOPIC, f"scan-open-{seed}"), base


def leave_open(
    broker: eoslog.Broker, plain: eoslog.Producer, topic: str, transactional_id: str
) -> eoslog.Producer:
    """A transaction holding b"open" left open on partition 0 of `topic`, then b"after-open"
    from `plain` past it; returns the transaction's producer."""
    tail = broker.producer({"transactional.id": transactional_id})
    tail.init_transactions()
    tail.begin_transaction()
    tail.produce(topic, value=b"open", partition=0)
    tail.flush()
    plain.produce(topic, value=b"after-open", partition=0)
    plain.flush()
    return tail


def open_transaction_between(
    broker: eoslog.Broker, topic: str
) -> tuple[eoslog.Producer, eoslog.Producer]:
    """A one-partition `topic` holding b"before", then b"inside" in a transaction left open,
    then b"after" (past the last stable offset until that transaction ends); returns the
    transactional producer (to commit or abort it) and the plain one."""
    broker.create_topic(topic, 1)
    plain = broker.producer({"linger.ms": 0})
    plain.produce(topic, value=b"before")
    plain.flush()
    writer = broker.producer({"transactional.id": f"open-{topic}"})
    writer.init_transactions()
    writer.begin_transaction()
    writer.produce(topic, value=b"inside")
    writer.flush()
    plain.produce(topic, value=b"after")
    plain.flush()
    return writer, plain


def consumer_view(
    broker: eoslog.Broker,
    isolation_level: str = "read_committed",
    start: dict[int, int] | None = None,
    include_headers: bool = False,
) -> pa.Table:
    """Every record the embedded Consumer delivers, partition after partition."""
    consumer = broker.consumer(
        {"group.id": "oracle", "isolation.level": isolation_level, "auto.offset.reset": "earliest"}
    )
    pieces = []
    for partition in range(PARTITIONS):
        offset = (start or {}).get(partition, 0)
        consumer.assign([eoslog.TopicPartition(TOPIC, partition, offset)])
        while True:
            batch = consumer.consume_arrow(100_000, timeout=0.05, include_headers=include_headers)
            if batch.num_rows == 0:
                break
            pieces.append(batch)
    consumer.close()
    return pa.Table.from_batches(pieces, schema=spark_schema(include_headers))


def scanned(batches: object, include_headers: bool = False) -> pa.Table:
    schema = spark_schema(include_headers)
    return pa.Table.from_batches(list(batches), schema=schema)  # type: ignore[call-overload]


class RetainedLog:
    """One partition of topic RETAINED under retention.ms, on a clock the test moves: the
    first half of the records is old enough to expire, the second half is not. expire()
    moves the clock and lets the owner's retention delete the old segments."""

    TOPIC = "retained"
    RETENTION_MS = 60_000
    RECORDS = 200

    def __init__(self, path: str) -> None:
        self.now_ms = 1_800_000_000_000
        self.broker = eoslog.open(
            path, durability="none", background=False, clock_ms=lambda: self.now_ms
        )
        self.broker.create_topic(
            self.TOPIC,
            num_partitions=1,
            config={"segment.bytes": 2048, "retention.ms": self.RETENTION_MS},
        )
        producer = self.broker.producer({"enable.idempotence": True})
        for index in range(self.RECORDS):
            young = index >= self.RECORDS // 2
            producer.produce(
                self.TOPIC,
                value=b"r%d-" % index + b"y" * 40,
                partition=0,
                timestamp=self.now_ms + (2 * self.RETENTION_MS if young else 0),
            )
            producer.flush()
        producer.close()

    def expire(self) -> int:
        """Run retention past the old half; the new log start offset."""
        self.now_ms += 2 * self.RETENTION_MS + 1
        self.broker.run_maintenance()
        log = self.broker.log(self.TOPIC, 0)
        assert 0 < log.log_start_offset < self.RECORDS, "retention kept or deleted everything"
        return int(log.log_start_offset)
