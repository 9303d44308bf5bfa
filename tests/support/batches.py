"""Batches and byte-level helpers shared by the codec tests.

Batches are built through whichever codec module a test hands in (native or pure), so one
helper serves both twins. Header rewrites and CRC fixes use kafka-python's CRC-32C, an
implementation independent of both twins, so a test never trusts the code it is checking to
repair its own input.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import Any

import lz4.frame
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaPythonBuilder
from kafka.record.util import calc_crc32c

from eoslog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedCompressionTypeError,
)
from eoslog.record import layout
from eoslog.record.types import BatchHeader, Record

# docs/format.md §11's base timestamp: 2023-11-14T22:13:20Z.
TS = 1_700_000_000_000
INT32_MAX = (1 << 31) - 1

# The only exceptions bad bytes may raise (docs/style.md rule 3: bad input raises a typed error).
TYPED_ERRORS: tuple[type[Exception], ...] = (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedCompressionTypeError,
)

Headers = Sequence[tuple[str, bytes | None]]
# (timestamp, key, value, headers): the arguments of BatchBuilder.append.
RecordSpec = tuple[int, bytes | None, bytes | None, Headers]

# Three records covering the nullable fields: a header with a null value, a null key, a null
# value and an empty value.
SAMPLE_RECORDS: list[RecordSpec] = [
    (TS, b"k0", b"first value", [("trace", b"abc"), ("empty", None)]),
    (TS + 7, None, b"", []),
    (TS + 3, b"", None, [("é", b"")]),
]


def build(codec: ModuleType, records: Iterable[RecordSpec], **settings: Any) -> bytes:
    """One batch holding `records`, built by `codec.BatchBuilder(**settings)`."""
    builder = codec.BatchBuilder(**settings)
    for timestamp, key, value, headers in records:
        assert builder.append(timestamp, key, value, list(headers)), "record did not fit"
    return builder.build()


def compressible(size: int, seed: int = 0) -> bytes:
    """`size` bytes that lz4 shrinks well but that are not one repeated byte."""
    line = b"".join(b"%08d:%d;" % (i * 7919 + seed, seed) for i in range(64))
    return (line * (size // len(line) + 1))[:size]


def expected_records(
    records: Sequence[RecordSpec],
    base_offset: int = 0,
    log_append_time_ms: int | None = None,
) -> list[Record]:
    """The records a decoder must return for a batch built from `records`."""
    return [
        Record(
            offset=base_offset + i,
            timestamp=timestamp if log_append_time_ms is None else log_append_time_ms,
            key=key,
            value=value,
            headers=tuple((k, v) for k, v in headers),
        )
        for i, (timestamp, key, value, headers) in enumerate(records)
    ]


def unpack_header(data: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """The 61-byte header read with struct, independently of either codec twin."""
    return BatchHeader(*layout.HEADER_STRUCT.unpack_from(data, position))


def crc_of(batch: bytes | bytearray | memoryview) -> int:
    """CRC-32C over [attributes, end), by kafka-python's implementation."""
    return calc_crc32c(bytes(batch[layout.ATTRIBUTES_OFFSET :]))


def forge(batch: bytes | bytearray, *, fix_crc: bool = True, **fields: int) -> bytes:
    """`batch` with header fields (BatchHeader names) replaced and, by default, a CRC that
    matches the result, so that checks past the CRC are reached."""
    header = unpack_header(batch)._replace(**fields)
    out = bytearray(batch)
    layout.HEADER_STRUCT.pack_into(out, 0, *header)
    if fix_crc:
        out[layout.CRC_OFFSET : layout.CRC_OFFSET + 4] = crc_of(out).to_bytes(4, "big")
    return bytes(out)


def with_fixed_crc(data: bytes | bytearray) -> bytes:
    """`data` with its CRC field recomputed over everything from the attributes on."""
    if len(data) < layout.HEADER_SIZE:
        return bytes(data)
    out = bytearray(data)
    out[layout.CRC_OFFSET : layout.CRC_OFFSET + 4] = crc_of(out).to_bytes(4, "big")
    return bytes(out)


def flip_bit(data: bytes, bit: int) -> bytes:
    """`data` with bit `bit` (0 = most significant bit of byte 0) inverted."""
    out = bytearray(data)
    out[bit // 8] ^= 0x80 >> (bit % 8)
    return bytes(out)


def outcome(function: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """("ok", result) or ("raised", (exception type, message)): what a differential test
    compares between the twins."""
    try:
        result = function(*args, **kwargs)
        if hasattr(result, "__next__"):
            result = list(result)
    except Exception as error:
        return ("raised", (type(error), str(error)))
    return ("ok", result)


def encode_varint(value: int) -> bytes:
    """Zigzag LEB128 (docs/format.md §2.1), written out here so forged records do not depend on the
    twins' own encoder."""
    unsigned = (value << 1) ^ (value >> 63)
    unsigned &= (1 << 64) - 1
    out = bytearray()
    while unsigned >= 0x80:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)
    return bytes(out)


def kafka_lz4_frame(payload: bytes) -> bytes:
    """An LZ4 frame exactly as Kafka writes one (docs/format.md §4): independent 64 KiB blocks, no
    content size, no checksums; header 04 22 4D 18 60 40 82."""
    return lz4.frame.compress(
        payload,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )


def assemble(
    records_section: bytes,
    *,
    records_count: int,
    last_offset_delta: int | None = None,
    attributes: int = 0,
    base_offset: int = 0,
    base_timestamp: int = TS,
    max_timestamp: int = TS,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A v2 batch around `records_section` (already compressed if the attributes say so),
    with a correct length and CRC: the way to reach the checks that come after the CRC."""
    if last_offset_delta is None:
        last_offset_delta = records_count - 1
    header = BatchHeader(
        base_offset=base_offset,
        batch_length=layout.HEADER_SIZE - layout.LOG_OVERHEAD + len(records_section),
        partition_leader_epoch=partition_leader_epoch,
        magic=layout.MAGIC_V2,
        crc=0,
        attributes=attributes,
        last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=records_count,
    )
    return with_fixed_crc(layout.HEADER_STRUCT.pack(*header) + records_section)


def raw_record(
    *,
    offset_delta: int = 0,
    timestamp_delta: int = 0,
    key: bytes | None = None,
    value: bytes | None = None,
    headers: Sequence[tuple[bytes, bytes | None]] = (),
    header_count: int | None = None,
    key_length: int | None = None,
) -> bytes:
    """One v2 record (docs/format.md §2) with the option to lie in its count and length fields."""

    def nullable(data: bytes | None, length: int | None = None) -> bytes:
        if data is None:
            return encode_varint(-1 if length is None else length)
        return encode_varint(len(data) if length is None else length) + data

    body = bytearray(b"\x00")
    body += encode_varint(timestamp_delta) + encode_varint(offset_delta)
    body += nullable(key, key_length) + nullable(value)
    body += encode_varint(len(headers) if header_count is None else header_count)
    for header_key, header_value in headers:
        body += encode_varint(len(header_key)) + header_key + nullable(header_value)
    return encode_varint(len(body)) + bytes(body)


def peer_batch(
    records: Sequence[RecordSpec],
    *,
    compression: int = 0,
    is_transactional: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """A batch built by kafka-python's DefaultRecordBatchBuilder, independent of both twins."""
    builder = KafkaPythonBuilder(
        2, compression, is_transactional, producer_id, producer_epoch, base_sequence, 1 << 30
    )
    for offset, (timestamp, key, value, headers) in enumerate(records):
        assert builder.append(offset, timestamp, key, value, list(headers)) is not None
    return bytes(builder.build())


# --- hypothesis strategies for bad input -------------------------------------------------------

# Valid batches to start mutating from, none built by the twins under test.
SEED_BATCHES: dict[str, bytes] = {
    "kafka_python_plain": peer_batch(SAMPLE_RECORDS),
    "kafka_python_lz4": peer_batch(
        [(TS, b"k", compressible(3000), [("h", b"v")]), (TS + 1, None, compressible(500), [])],
        compression=layout.COMPRESSION_LZ4,
    ),
    "kafka_python_transactional": peer_batch(
        SAMPLE_RECORDS, is_transactional=True, producer_id=9, producer_epoch=1, base_sequence=5
    ),
    "kafka_lz4_frame": assemble(
        kafka_lz4_frame(
            b"".join(
                raw_record(offset_delta=i, key=b"key", value=compressible(200, i)) for i in range(3)
            )
        ),
        records_count=3,
        attributes=layout.COMPRESSION_LZ4,
    ),
    "abort_marker": assemble(
        raw_record(key=b"\x00\x00\x00\x00", value=b"\x00\x00\x00\x00\x00\x05"),
        records_count=1,
        attributes=layout.TRANSACTIONAL_MASK | layout.CONTROL_MASK,
        producer_id=1000,
        producer_epoch=3,
    ),
}


@st.composite
def mutated_batches(draw: st.DrawFn) -> bytes:
    """A valid batch after 1-4 random byte overwrites, insertions or deletions; half of them
    get a repaired CRC so that the structural checks behind it are exercised too."""
    data = bytearray(SEED_BATCHES[draw(st.sampled_from(sorted(SEED_BATCHES)))])
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["overwrite", "insert", "delete"]))
        at = draw(st.integers(0, len(data)))
        if kind == "overwrite" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            del data[at : at + draw(st.integers(1, 8))]
    if draw(st.booleans()):
        return with_fixed_crc(data)
    return bytes(data)


@st.composite
def forged_batches(draw: st.DrawFn) -> bytes:
    """A well-framed batch with a correct CRC around random record bytes (plain or inside a
    real LZ4 frame) and a random record count and attributes."""
    section = draw(st.binary(max_size=200))
    attributes = draw(st.integers(0, 0x7F))
    if draw(st.booleans()):
        attributes = (attributes & ~layout.COMPRESSION_MASK) | layout.COMPRESSION_LZ4
        section = kafka_lz4_frame(section)
    count = draw(st.one_of(st.integers(-2, 12), st.just(INT32_MAX), st.just(-(1 << 31))))
    delta = draw(st.one_of(st.just(count - 1), st.integers(-(1 << 31), INT32_MAX)))
    return assemble(
        section,
        records_count=count,
        last_offset_delta=max(-(1 << 31), min(INT32_MAX, delta)),
        attributes=attributes,
        producer_id=draw(st.sampled_from([-1, 0, 77])),
        base_sequence=draw(st.sampled_from([-1, 0, 3])),
    )


def bad_input() -> st.SearchStrategy[bytes]:
    """Every kind of bad bytes the decoders must survive with a typed error."""
    return st.one_of(st.binary(max_size=300), mutated_batches(), forged_batches())
