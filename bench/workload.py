"""The standard workload of docs/bench.md, and the same records encoded by eoslog and by its peers.

N records (1,000,000 unless EOSLOG_BENCH_RECORDS says otherwise), key null (or 8 bytes with
EOSLOG_BENCH_KEY_BYTES=8), value exactly 100 bytes of JSON-like text, 1,000 records per batch,
CreateTime timestamps TIMESTAMP_BASE_MS + i, one partition. Everything is deterministic: the
same N gives the same bytes on every machine, so every contender encodes, and every decoder
reads, exactly the same records.

The encode helpers here are the timed bodies of the encode benchmarks, so they are written the
way a user of each library would write them and do nothing else: the records are chunked into
per-batch lists beforehand (Workload.chunks), outside any timed region, and every contender
iterates the same lists.
"""

from __future__ import annotations

import bisect
import mmap
import os
import random
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from eoslog.record import layout
from eoslog.record.columns import SPARK_SCHEMA

RECORDS_DEFAULT = 1_000_000
RECORDS_ENV = "EOSLOG_BENCH_RECORDS"
KEY_BYTES_ENV = "EOSLOG_BENCH_KEY_BYTES"
BATCH_RECORDS = 1_000
VALUE_BYTES = 100
KEY_BYTES_VARIANT = 8
# kafka-python is pure Python (~0.6 M records/s build, ~0.36 M decode on the reference
# machine), so its runs use the first 200 batches; rates are per record, so they compare.
SLOW_PEER_RECORDS_MAX = 200_000
# 2026-01-01T00:00:00Z in ms: a realistic 13-digit CreateTime, so timestamp deltas stay small.
TIMESTAMP_BASE_MS = 1_767_225_600_000
SEED = 20_260_101
COMPRESSION_NONE = layout.COMPRESSION_NONE
# Peers take a batch size limit; one batch of the workload (~110 KB) must always fit.
PEER_BATCH_SIZE_BYTES = 4 * 1024 * 1024
# aiokafka's builder wants a headers list; one shared empty list, as a producer would pass.
NO_HEADERS: list[tuple[str, bytes | None]] = []

# The vocabulary of the notes in the values.
_WORD_TEXT = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
    "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu order "
    "paid refund shipped pending card wire cash basket item qty price tax discount coupon"
)
_CURRENCIES = ("EUR", "USD", "GBP", "JPY", "CHF")


@dataclass(frozen=True)
class Chunk:
    """The records of one batch, as parallel lists (what a producer accumulates)."""

    first_index: int
    timestamps: list[int]
    keys: list[bytes | None]
    values: list[bytes]
    keyed: bool

    def __len__(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class Workload:
    records: int
    key_bytes: int  # 0: null keys
    values: list[bytes]
    keys: list[bytes | None]
    timestamps: list[int]
    chunks: list[Chunk] = field(repr=False)

    @classmethod
    def build(cls, records: int = RECORDS_DEFAULT, key_bytes: int = 0) -> Workload:
        if records <= 0:
            raise ValueError(f"records must be positive, not {records}")
        if key_bytes not in (0, KEY_BYTES_VARIANT):
            raise ValueError(f"key_bytes must be 0 or {KEY_BYTES_VARIANT}, not {key_bytes}")
        values = make_values(records)
        keys = make_keys(records) if key_bytes else [None] * records
        timestamps = list(range(TIMESTAMP_BASE_MS, TIMESTAMP_BASE_MS + records))
        chunks = [
            Chunk(
                first_index=start,
                timestamps=timestamps[start : start + BATCH_RECORDS],
                keys=keys[start : start + BATCH_RECORDS],
                values=values[start : start + BATCH_RECORDS],
                keyed=bool(key_bytes),
            )
            for start in range(0, records, BATCH_RECORDS)
        ]
        return cls(records, key_bytes, values, keys, timestamps, chunks)

    @classmethod
    def from_env(cls) -> Workload:
        records = int(os.environ.get(RECORDS_ENV, RECORDS_DEFAULT))
        return cls.build(records, int(os.environ.get(KEY_BYTES_ENV, 0)))

    @property
    def slow_chunks(self) -> list[Chunk]:
        """The leading batches that the slow pure-Python peer runs on."""
        return self.chunks[: -(-SLOW_PEER_RECORDS_MAX // BATCH_RECORDS)]

    @property
    def slow_records(self) -> int:
        return sum(len(chunk) for chunk in self.slow_chunks)

    def describe(self) -> str:
        """The one-line workload statement docs/bench.md asks every benchmark to print."""
        key = f"{self.key_bytes}-byte keys" if self.key_bytes else "key null"
        return (
            f"{self.records:,} records, {key}, value {VALUE_BYTES} B JSON-like text, "
            f"{BATCH_RECORDS:,} records/batch ({len(self.chunks):,} batches), one partition, "
            f"CreateTime base+i, no headers, non-transactional, in memory (no durability, "
            f"isolation n/a); kafka-python on the first {self.slow_records:,} records"
        )


def make_values(records: int, seed: int = SEED) -> list[bytes]:
    """`records` JSON-like values of exactly VALUE_BYTES ASCII bytes, varied per record."""
    rng = random.Random(seed)
    words = _WORD_TEXT.split()
    # A long pseudo-random text to cut each record's note from, so a value costs one slice
    # rather than many random draws, yet no two neighbouring notes are equal.
    text = " ".join(rng.choice(words) for _ in range(20_000))
    values = []
    for i in range(records):
        cents = rng.randrange(100, 10_000_000)
        head = (
            f'{{"id":{i},"user":"u{i % 9973}","amount":{cents // 100}.{cents % 100:02d},'
            f'"cur":"{_CURRENCIES[i % 5]}","note":"'
        )
        room = VALUE_BYTES - len(head) - 2
        if room < 0:
            raise ValueError(f"record {i}: id too long for a {VALUE_BYTES}-byte value")
        start = rng.randrange(0, len(text) - room)
        value = (head + text[start : start + room] + '"}').encode("ascii")
        if len(value) != VALUE_BYTES:
            raise AssertionError(f"value {i} is {len(value)} bytes")
        values.append(value)
    return values


def make_keys(records: int) -> list[bytes | None]:
    """8-byte keys, distinct and spread (Fibonacci hashing of the index), big-endian."""
    return [
        struct.pack(">Q", (i * 0x9E3779B97F4A7C15) & 0xFFFF_FFFF_FFFF_FFFF) for i in range(records)
    ]


# --- encoders: each returns one bytes-like per batch -----------------------------------------


def eoslog_batches(chunks: Sequence[Chunk], compression: int = COMPRESSION_NONE) -> list[bytes]:
    """eoslog BatchBuilder, one `append` call per record (the producer's path)."""
    from eoslog.record import codec

    builder_type = codec.BatchBuilder
    batches = []
    for chunk in chunks:
        builder = builder_type(compression=compression)
        append = builder.append
        for timestamp, key, value in zip(chunk.timestamps, chunk.keys, chunk.values, strict=True):
            append(timestamp, key, value)
        batches.append(builder.build())
    return batches


def eoslog_batches_vectorized(
    chunks: Sequence[Chunk], compression: int = COMPRESSION_NONE
) -> list[bytes]:
    """eoslog BatchBuilder.append_values, one call per batch (`produce_batch()`'s path).

    append_values stamps every record of a call with one timestamp, so each batch carries its
    first record's timestamp (base + first index) for all its records."""
    from eoslog.record import codec

    builder_type = codec.BatchBuilder
    batches = []
    for chunk in chunks:
        builder = builder_type(compression=compression)
        keys = chunk.keys if chunk.keyed else None
        builder.append_values(chunk.values, keys, chunk.timestamps[0])
        batches.append(builder.build())
    return batches


def aiokafka_batches(
    chunks: Sequence[Chunk], compression: int = COMPRESSION_NONE
) -> list[bytearray]:
    """aiokafka's Cython DefaultRecordBatchBuilder, one `append` per record, as its producer
    does (offset = index in batch, no headers)."""
    from aiokafka.record._crecords import DefaultRecordBatchBuilder

    batches = []
    for chunk in chunks:
        builder = DefaultRecordBatchBuilder(2, compression, 0, -1, -1, -1, PEER_BATCH_SIZE_BYTES)
        append = builder.append
        for offset, timestamp, key, value in zip(
            range(len(chunk)), chunk.timestamps, chunk.keys, chunk.values, strict=True
        ):
            append(offset, timestamp, key, value, NO_HEADERS)
        batches.append(builder.build())
    return batches


def kafka_python_batches(
    chunks: Sequence[Chunk], compression: int = COMPRESSION_NONE
) -> list[bytearray]:
    """kafka-python's pure-Python DefaultRecordBatchBuilder, one `append` per record."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    batches = []
    for chunk in chunks:
        builder = DefaultRecordBatchBuilder(2, compression, 0, -1, -1, -1, PEER_BATCH_SIZE_BYTES)
        append = builder.append
        for offset, timestamp, key, value in zip(
            range(len(chunk)), chunk.timestamps, chunk.keys, chunk.values, strict=True
        ):
            append(offset, timestamp, key, value, NO_HEADERS)
        batches.append(builder.build())
    return batches


# --- segments ---------------------------------------------------------------------------------


def as_segment(batches: Sequence[bytes | bytearray]) -> bytes:
    """The batches as a leader would store them: concatenated, base offsets assigned
    consecutively from 0. The base offset lies outside the CRC, so the batches stay valid."""
    parts = []
    base_offset = 0
    for batch in batches:
        stamped = bytearray(batch)
        struct.pack_into(">q", stamped, layout.BASE_OFFSET_OFFSET, base_offset)
        (last_offset_delta,) = struct.unpack_from(">i", stamped, layout.LAST_OFFSET_DELTA_OFFSET)
        base_offset += last_offset_delta + 1
        parts.append(stamped)
    return b"".join(parts)


def eoslog_segment(workload: Workload, compression: int = COMPRESSION_NONE) -> bytes:
    """The whole workload built by eoslog's per-record builder, as one segment."""
    return as_segment(eoslog_batches(workload.chunks, compression))


def batch_positions(segment: bytes | bytearray | memoryview) -> list[int]:
    """The start of every whole batch in a segment, read from the length fields alone (an
    independent walk: it does not use the codec under test)."""
    positions = []
    position = 0
    while position + layout.HEADER_SIZE <= len(segment):
        (batch_length,) = struct.unpack_from(">i", segment, position + layout.BATCH_LENGTH_OFFSET)
        end = position + layout.LOG_OVERHEAD + batch_length
        if end > len(segment):
            break
        positions.append(position)
        position = end
    return positions


def segment_prefix(segment: bytes, batches: int) -> bytes:
    """The first `batches` whole batches of a segment."""
    positions = batch_positions(segment)
    if batches >= len(positions):
        return segment
    return segment[: positions[batches]]


def header_of(batch: bytes | bytearray | memoryview, position: int = 0) -> tuple[int, ...]:
    """The 13 header fields of the batch at `position` (layout.HEADER_STRUCT order)."""
    return tuple(layout.HEADER_STRUCT.unpack_from(batch, position))


TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")


def arrow_from_lists(
    keys: list[bytes | None],
    values: list[bytes | None],
    offsets: list[int],
    timestamps: list[int],
    timestamp_types: list[int],
    topic: str = "t",
    partition: int = 0,
) -> pa.RecordBatch:
    """Spark-schema Arrow from per-record lists (timestamps in ms)."""
    n = len(offsets)
    columns = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        pa.array(np.asarray(timestamps, dtype=np.int64) * 1000, type=TIMESTAMP_TYPE),
        pa.array(timestamp_types, pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=SPARK_SCHEMA)


# --- partitions on disk (the log, consumer, transaction and Spark benchmarks) -------------------

MIB = 1 << 20
# Distinct values the log benchmarks' batches are cut from: each batch takes another window.
VALUE_POOL = 1 << 17
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
# The many-segments partition of the clean-open benchmarks: one ~3.3 KB batch fills a 4 KiB
# segment, so every batch rolls a new segment.
SEGMENT_BYTES_SMALL = 4096
SEGMENT_BATCH_RECORDS = 30
_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length
_LAST_OFFSET_DELTA = struct.Struct(">i")


def value_pool() -> list[bytes]:
    return make_values(VALUE_POOL)


def window(pool: Sequence[bytes], k: int, size: int) -> Sequence[bytes]:
    start = (k * size) % (len(pool) - size)
    return pool[start : start + size]


def build_append_batches(
    pool: Sequence[bytes], count: int, batch_bytes_max: int = MIB
) -> tuple[list[bytes], int]:
    """`count` batches of as many records as fit in `batch_bytes_max` (uncompressed, key null,
    one CreateTime per batch), each cut from a different window of the pool; and the records
    per batch."""
    from eoslog.record import codec

    batches: list[bytes] = []
    per_batch = 0
    timestamp = TIMESTAMP_BASE_MS
    for k in range(count):
        builder = codec.BatchBuilder(batch_bytes_max=batch_bytes_max)
        appended = builder.append_values(window(pool, k, 10_000), None, timestamp)
        if per_batch and appended != per_batch:
            raise AssertionError(f"batch {k} holds {appended} records, not {per_batch}")
        per_batch = appended
        timestamp += appended
        batches.append(builder.build())
    return batches, per_batch


@dataclass
class Partition:
    """A partition built by a bench run: where it is and what it holds."""

    root: str  # the log directory
    topic: str
    records: int
    batches: int
    batch_bytes: int  # of the first batch
    segments: int
    log_bytes: int
    build_seconds: float  # appends + close (the final flush)

    @property
    def directory(self) -> str:
        return os.path.join(self.root, f"{self.topic}-0")

    def log_files(self) -> list[str]:
        names = sorted(n for n in os.listdir(self.directory) if n.endswith(".log"))
        return [os.path.join(self.directory, n) for n in names]


def build_partition(
    root: str,
    topic: str,
    pool: Sequence[bytes],
    *,
    records: int,
    batch_records: int,
    config: dict[str, object],
) -> Partition:
    """Append `records` records in batches of `batch_records` (built with append_values,
    one CreateTime per batch) to a new topic with `config`, then close the broker."""
    import time

    import eoslog
    from eoslog.record import codec

    if records % batch_records:
        raise ValueError(f"{records} records is not a multiple of {batch_records}")
    start = time.perf_counter()
    broker = eoslog.open(root, durability="none", background=False)
    try:
        broker.create_topic(topic, 1, config)
        log = broker.log(topic, 0)
        first = 0
        for k in range(records // batch_records):
            builder = codec.BatchBuilder()
            builder.append_values(
                window(pool, k, batch_records), None, TIMESTAMP_BASE_MS + k * batch_records
            )
            raw = builder.build()
            first = first or len(raw)
            log.append_batch(raw)
        if log.log_end_offset != records:
            raise AssertionError(f"log end {log.log_end_offset}, expected {records}")
        segments = len(log.segments)
    finally:
        broker.close()
    build_seconds = time.perf_counter() - start
    directory = os.path.join(root, f"{topic}-0")
    log_bytes = sum(
        os.path.getsize(os.path.join(directory, n))
        for n in os.listdir(directory)
        if n.endswith(".log")
    )
    os.sync()  # no timed run shares the disk with this build's write-back
    return Partition(
        root, topic, records, records // batch_records, first, segments, log_bytes, build_seconds
    )


def build_segments(root: str, pool: Sequence[bytes], segments: int) -> Partition:
    """A partition of `segments` segments of SEGMENT_BYTES_SMALL, one batch each."""
    partition = build_partition(
        root,
        "segments",
        pool,
        records=segments * SEGMENT_BATCH_RECORDS,
        batch_records=SEGMENT_BATCH_RECORDS,
        config={"segment.bytes": SEGMENT_BYTES_SMALL},
    )
    if partition.segments != segments:
        raise AssertionError(f"{partition.segments} segments, expected {segments}")
    return partition


def remove_recovery_markers(root: str) -> None:
    """What an unclean stop with no checkpoint leaves: every segment is rescanned."""
    for name in (CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE):
        path = os.path.join(root, name)
        if os.path.exists(path):
            os.unlink(path)


@dataclass
class BatchTable:
    """Every batch of a partition, from an independent walk of the .log files (8-byte base
    offset and 4-byte length per entry, struct only): the read floor's in-memory index."""

    last_offsets: list[int]
    fds: list[int]
    views: list[memoryview]  # per batch: the whole segment, mapped read-only
    positions: list[int]
    sizes: list[int]
    open_fds: list[int]
    maps: list[mmap.mmap]

    @classmethod
    def of(cls, partition: Partition) -> BatchTable:
        table = cls([], [], [], [], [], [], [])
        for path in partition.log_files():
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            table.open_fds.append(fd)
            size = os.fstat(fd).st_size
            mapped = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
            table.maps.append(mapped)
            view = memoryview(mapped)
            position = 0
            while position + layout.HEADER_SIZE <= size:
                head = os.pread(fd, layout.HEADER_SIZE, position)
                base_offset, batch_length = _BATCH_HEAD.unpack_from(head, 0)
                (delta,) = _LAST_OFFSET_DELTA.unpack_from(head, layout.LAST_OFFSET_DELTA_OFFSET)
                batch_size = layout.LOG_OVERHEAD + batch_length
                table.last_offsets.append(base_offset + delta)
                table.fds.append(fd)
                table.views.append(view)
                table.positions.append(position)
                table.sizes.append(batch_size)
                position += batch_size
        return table

    def read(self, offset: int) -> bytes:
        """The floor's read: the batch holding offset, from a known position."""
        i = bisect.bisect_left(self.last_offsets, offset)
        return os.pread(self.fds[i], self.sizes[i], self.positions[i])

    def read_mapped(self, offset: int) -> memoryview:
        """The zero-copy floor: the same batch as a slice of the mapped segment."""
        i = bisect.bisect_left(self.last_offsets, offset)
        position = self.positions[i]
        return self.views[i][position : position + self.sizes[i]]

    def close(self) -> None:
        for view in set(self.views):
            view.release()
        self.views.clear()
        for mapped in self.maps:
            mapped.close()
        self.maps.clear()
        for fd in self.open_fds:
            os.close(fd)
        self.open_fds.clear()


# --- topics read back (the consumer, transaction and Spark benchmarks) --------------------------

READ_TOPIC = "bench"


@dataclass
class Committed:
    """A topic written for the read benchmarks, and what read_committed must return from it."""

    records: int  # written, aborted ones included
    transactions: int
    aborted: int
    segments: int
    offsets: list[list[int]]  # per partition, committed
    values: list[list[bytes]]
    timestamps: list[list[int]]

    @property
    def committed(self) -> int:
        return sum(len(offsets) for offsets in self.offsets)


def write_batches(broker: Any, workload: Workload, segment_bytes: int) -> Committed:
    """The workload's batches (eoslog_batches: `append` per record) appended to a new topic
    of one partition, no transactions."""
    broker.create_topic(READ_TOPIC, 1, config={"segment.bytes": segment_bytes})
    log = broker.log(READ_TOPIC, 0)
    for raw in eoslog_batches(workload.chunks):
        log.append_batch(raw)
    offsets = list(range(workload.records))
    return Committed(
        workload.records,
        0,
        0,
        len(log.segments),
        [offsets],
        [workload.values],
        [workload.timestamps],
    )


def write_transactions(
    broker: Any,
    records: int,
    partitions: int,
    segment_bytes: int,
    producer_config: dict[str, object],
    transaction_records: int = BATCH_RECORDS,
    abort_every: int = 3,
) -> Committed:
    """The read_committed variant of the standard workload: `records` values produced with
    `produce_batch()` in transactions of `transaction_records`, transaction i to partition
    i mod `partitions`, every `abort_every`-th aborted (docs/bench.md: 1/3); the producer's
    configuration (a transactional.id included) is `producer_config`."""
    values = make_values(records)
    broker.create_topic(READ_TOPIC, partitions, config={"segment.bytes": segment_bytes})
    producer = broker.producer(producer_config)
    producer.init_transactions()
    offsets: list[list[int]] = [[] for _ in range(partitions)]
    committed: list[list[bytes]] = [[] for _ in range(partitions)]
    ends = [0] * partitions
    aborted = transactions = 0
    for start in range(0, records, transaction_records):
        chunk = values[start : start + transaction_records]
        partition = transactions % partitions
        producer.begin_transaction()
        producer.produce_batch(READ_TOPIC, chunk, partition=partition)
        if transactions % abort_every == abort_every - 1:
            producer.abort_transaction()
            aborted += 1
        else:
            producer.commit_transaction()
            offsets[partition].extend(range(ends[partition], ends[partition] + len(chunk)))
            committed[partition].extend(chunk)
        ends[partition] += len(chunk) + 1  # the control marker takes one offset
        transactions += 1
    producer.close()
    segments = 0
    for partition in range(partitions):
        log = broker.log(READ_TOPIC, partition)
        if log.last_stable_offset != log.log_end_offset or log.log_end_offset != ends[partition]:
            raise AssertionError("the read_committed variant is not settled as expected")
        segments += len(log.segments)
    # SQLite's rows take the offset as their timestamp (the scan reads every column).
    return Committed(records, transactions, aborted, segments, offsets, committed, offsets)


def sqlite_rows(path: str, committed: Committed) -> Any:
    """A SQLite file (WAL, synchronous=NORMAL) with the committed rows of partition 0, as
    (offset, timestamp, key, value), inserted in BATCH_RECORDS-row transactions."""
    import sqlite3

    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.execute(
        "CREATE TABLE records (offset INTEGER PRIMARY KEY, timestamp INTEGER, key BLOB, value BLOB)"
    )
    offsets, timestamps, values = committed.offsets[0], committed.timestamps[0], committed.values[0]
    for start in range(0, len(offsets), BATCH_RECORDS):
        stop = start + BATCH_RECORDS
        with connection:
            connection.executemany(
                "INSERT INTO records VALUES (?, ?, NULL, ?)",
                zip(offsets[start:stop], timestamps[start:stop], values[start:stop], strict=True),
            )
    return connection
