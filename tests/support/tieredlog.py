"""A log for the tiering tests (eoslog.archive, eoslog.archive_view): two partitions of small
segments on a clock the test moves, old records (committed and aborted transactions, plain
records) that retention.ms will expire, then young ones; and on partition 0 a transaction whose
data fills an old segment alone and whose ABORT marker lands in a young one, so that once the
old segments are archived and retention deletes them locally, the marker lies on the other
side of the seam from the data it aborts."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import eoslog
from eoslog.errors import KafkaException
from eoslog.record.columns import spark_schema

TOPIC = "tiered"
PARTITIONS = 2
RETENTION_MS = 60_000
SEGMENT_BYTES = 1024
STRADDLING = b"straddling"
_SCHEMA = spark_schema(False)


class TieredLog:
    """The log at `path`, its broker open (live) until close()."""

    def __init__(
        self,
        path: str,
        durability: str = "none",
        *,
        archive: str | None = None,
        topic_config: dict[str, object] | None = None,
    ) -> None:
        """archive, topic_config: eoslog.open's archive, and more of the topic's config."""
        self.path = path
        self.now_ms = 1_800_000_000_000
        self.broker = eoslog.open(
            path,
            durability=durability,
            background=False,
            clock_ms=lambda: self.now_ms,
            archive=archive,
        )
        self.broker.create_topic(
            TOPIC,
            num_partitions=PARTITIONS,
            config={
                "segment.bytes": SEGMENT_BYTES,
                "retention.ms": RETENTION_MS,
                **(topic_config or {}),
            },
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
        return pa.Table.from_batches(pieces, schema=_SCHEMA)

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


def scanned(path: str, **options: Any) -> pa.Table:
    """eoslog.scan of the topic, as one table."""
    return pa.Table.from_batches(list(eoslog.scan(path, [TOPIC], **options)), schema=_SCHEMA)


def partition_of(table: pa.Table, partition: int) -> pa.Table:
    return table.filter(pc.equal(table.column("partition"), partition))


def check_prefix_of_each_partition(got: pa.Table, whole: pa.Table) -> None:
    """Each partition of `got` (a scan of an archive alone) is a proper, non-empty prefix of
    that partition of `whole`."""
    for partition in range(PARTITIONS):
        want, mine = partition_of(whole, partition), partition_of(got, partition)
        assert 0 < mine.num_rows < want.num_rows
        assert mine.equals(want.slice(0, mine.num_rows))


def scans_during(run: Callable[[], object], check: Callable[[], None]) -> int:
    """Call `check` over and over while `run` runs in another thread, at least once; re-raise
    what `run` raised; the number of checks."""
    done = threading.Event()
    failure: list[BaseException] = []

    def running() -> None:
        try:
            run()
        except BaseException as error:  # re-raised below, in the caller's thread
            failure.append(error)
        finally:
            done.set()

    thread = threading.Thread(target=running)
    thread.start()
    checks = 0
    try:
        while not done.is_set() or checks == 0:
            check()
            checks += 1
    finally:
        thread.join()
    if failure:
        raise failure[0]
    return checks


def error_of(read: Callable[[], object]) -> type[BaseException]:
    """The type of the KafkaException `read` raises."""
    with pytest.raises(KafkaException) as caught:
        read()
    return type(caught.value)


def flipped(data: bytes) -> bytes:
    """`data` with its middle byte's bits flipped (inside a record of a segment's `.log`)."""
    changed = bytearray(data)
    changed[len(changed) // 2] ^= 0xFF
    return bytes(changed)


def harm(directory: str, how: str) -> None:
    """Damage the second segment of partition 0 in the log directory `directory`: flip a byte
    in the middle of its `.log`, or remove the `.log`."""
    base = segment_bases(directory, 0)[1]
    path = os.path.join(directory, f"{TOPIC}-0", f"{base:020d}.log")
    if how == "missing":
        os.unlink(path)
        return
    with open(path, "rb") as file:
        data = file.read()
    with open(path, "wb") as file:
        file.write(flipped(data))


def check_whole_log(path: str, url: str, want: pa.Table, isolation_level: str) -> None:
    """A scan of the directory `path` with its archive `url` is `want` (the whole log), and one
    of the directory alone is shorter (retention deleted archived segments there)."""
    got = scanned(path, isolation_level=isolation_level, archive=url)
    assert got.num_rows == want.num_rows > 0
    assert got.equals(want)
    assert scanned(path, isolation_level=isolation_level).num_rows < want.num_rows
