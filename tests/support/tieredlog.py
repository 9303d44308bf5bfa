"""A log for the tiering tests (eoslog.archive, eoslog.archive_view): two partitions of small
segments on a clock the test moves, old records (committed and aborted transactions, plain
records) that retention.ms will expire, then young ones; and on partition 0 a transaction whose
data fills an old segment alone and whose ABORT marker lands in a young one, so that once the
old segments are archived and retention deletes them locally, the marker lies on the other
side of the seam from the data it aborts."""

from __future__ import annotations

import os

import pyarrow as pa

import eoslog
from eoslog.record.columns import spark_schema

TOPIC = "tiered"
PARTITIONS = 2
RETENTION_MS = 60_000
SEGMENT_BYTES = 1024
STRADDLING = b"straddling"


class TieredLog:
    """The log at `path`, its broker open (live) until close()."""

    def __init__(self, path: str, durability: str = "none") -> None:
        self.path = path
        self.now_ms = 1_800_000_000_000
        self.broker = eoslog.open(
            path, durability=durability, background=False, clock_ms=lambda: self.now_ms
        )
        self.broker.create_topic(
            TOPIC,
            num_partitions=PARTITIONS,
            config={"segment.bytes": SEGMENT_BYTES, "retention.ms": RETENTION_MS},
        )
        old, young = self.now_ms, self.now_ms + 2 * RETENTION_MS
        txn = self.broker.producer({"transactional.id": "tiered"})
        txn.init_transactions()
        plain = self.broker.producer({"enable.idempotence": True})
        for number in range(16):
            txn.begin_transaction()
            for index in range(3):
                txn.produce(
                    TOPIC,
                    value=b"old-%d-%d-" % (number, index) + b"o" * 50,
                    partition=number % PARTITIONS,
                    timestamp=old,
                )
            if number % 3 == 1:
                txn.flush()  # written, then aborted (unsent records would only be dropped)
                txn.abort_transaction()
            else:
                txn.commit_transaction()
            plain.produce(TOPIC, value=b"plain-%d" % number, partition=number % 2, timestamp=old)
            plain.flush()
        # Alone in its segment (nearly filling one), so that segment holds old records
        # only; the young records after it roll the next one, where the ABORT lands.
        txn.begin_transaction()
        txn.produce(TOPIC, value=STRADDLING + b"s" * 880, partition=0, timestamp=old)
        txn.flush()
        for index in range(30):
            plain.produce(
                TOPIC, value=b"young-%d-" % index + b"y" * 40, partition=index % 2, timestamp=young
            )
            plain.flush()
        txn.abort_transaction()
        for number in range(4):
            txn.begin_transaction()
            txn.produce(TOPIC, value=b"late-%d" % number, partition=number % 2, timestamp=young)
            txn.commit_transaction()
        plain.close()
        txn.close()
        # The checkpoints a running broker writes at its maintenance passes (the recovery
        # point, the owner's count of .txnindex entries), which the archiver copies.
        self.broker.run_maintenance()

    def view(self, isolation_level: str = "read_committed") -> pa.Table:
        """Every record the embedded Consumer delivers, partition after partition."""
        consumer = self.broker.consumer(
            {
                "group.id": "oracle",
                "isolation.level": isolation_level,
                "auto.offset.reset": "earliest",
            }
        )
        pieces = []
        for partition in range(PARTITIONS):
            consumer.assign([eoslog.TopicPartition(TOPIC, partition, 0)])
            while True:
                batch = consumer.consume_arrow(100_000, timeout=0.05)
                if batch.num_rows == 0:
                    break
                pieces.append(batch)
        consumer.close()
        return pa.Table.from_batches(pieces, schema=spark_schema(False))

    def expire(self) -> list[int]:
        """Move the clock past the old records and let the owner's retention delete their
        segments; each partition's new log start."""
        self.now_ms += 2 * RETENTION_MS + 1
        self.broker.run_maintenance()
        starts = [
            int(self.broker.log(TOPIC, partition).log_start_offset)
            for partition in range(PARTITIONS)
        ]
        assert all(start > 0 for start in starts), "retention deleted nothing"
        return starts

    def close(self) -> None:
        self.broker.close()


def segment_bases(directory: str, partition: int) -> list[int]:
    """The base offsets of the `.log` files of a partition of the log directory `directory`
    (none when the partition has no directory there)."""
    folder = os.path.join(directory, f"{TOPIC}-{partition}")
    names = os.listdir(folder) if os.path.isdir(folder) else []
    return sorted(int(name[:20]) for name in names if len(name) == 24 and name.endswith(".log"))
