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

import os
import random
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from eoslog.record import layout

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
COMPRESSION_LZ4 = layout.COMPRESSION_LZ4
COMPRESSION_NAMES = {COMPRESSION_NONE: "none", COMPRESSION_LZ4: "lz4"}
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
