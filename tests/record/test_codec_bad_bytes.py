"""Bad bytes raise a typed error, change nothing and allocate nothing they were not given
(docs/style.md rule 3, docs/reliability.md "Security and bad input"), in both twins."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings

from eoslog.errors import CorruptRecordError, InvalidRecordError
from eoslog.record import layout, status
from eoslog.record.compression import CODEC_NAMES
from tests.support.batches import (
    INT32_MAX,
    SAMPLE_RECORDS,
    TS,
    TYPED_ERRORS,
    assemble,
    bad_input,
    build,
    compressible,
    encode_varint,
    expected_records,
    flip_bit,
    forge,
    kafka_lz4_frame,
    raw_record,
)

COMPRESSIONS = pytest.mark.parametrize(
    "compression", list(CODEC_NAMES.values()), ids=list(CODEC_NAMES)
)
# Bytes 12..15: Kafka's CRC starts at the attributes, so the partition leader epoch (which a
# leader rewrites in place) is unprotected by design (docs/format.md §1.1).
LEADER_EPOCH_BITS = set(range(8 * 12, 8 * 16))
BASE_OFFSET_BITS = set(range(8 * 0, 8 * 8))


def _message(code: int, position: int = 0) -> str:
    return f"{status.MESSAGES[code][1]} (batch at byte {position})"


def _small_batch(codec: ModuleType, compression: int) -> bytes:
    batch = build(codec, SAMPLE_RECORDS, compression=compression)
    assert codec.read_header(batch).compression == compression
    return batch


def _undetected_bits(codec: ModuleType, batch: bytes, *, from_client: bool) -> set[int]:
    undetected = set()
    for bit in range(8 * len(batch)):
        try:
            codec.validate_batch(flip_bit(batch, bit), from_client=from_client)
        except TYPED_ERRORS:
            continue
        undetected.add(bit)
    return undetected


# --- single-bit flips -------------------------------------------------------------------------


@COMPRESSIONS
def test_every_bit_flip_outside_the_leader_epoch_is_detected_from_a_client(
    codec: ModuleType, compression: int
) -> None:
    batch = _small_batch(codec, compression)
    assert _undetected_bits(codec, batch, from_client=True) == LEADER_EPOCH_BITS


@COMPRESSIONS
def test_leader_accepts_bit_flips_only_in_base_offset_and_leader_epoch(
    codec: ModuleType, compression: int
) -> None:
    batch = _small_batch(codec, compression)
    undetected = _undetected_bits(codec, batch, from_client=False)
    assert undetected == BASE_OFFSET_BITS | LEADER_EPOCH_BITS


@COMPRESSIONS
def test_flipped_base_offset_is_rejected_from_a_client_and_read_back_by_a_leader(
    codec: ModuleType, compression: int
) -> None:
    batch = _small_batch(codec, compression)
    for bit in sorted(BASE_OFFSET_BITS):
        flipped = flip_bit(batch, bit)
        base_offset = int.from_bytes(flipped[0:8], "big", signed=True)
        with pytest.raises(InvalidRecordError) as raised:
            codec.validate_batch(flipped, from_client=True)
        assert str(raised.value) == _message(status.NONZERO_BASE_OFFSET)
        assert codec.validate_batch(flipped, from_client=False).header.base_offset == base_offset


@COMPRESSIONS
def test_flipped_leader_epoch_is_accepted_and_read_back(
    codec: ModuleType, compression: int
) -> None:
    batch = _small_batch(codec, compression)
    for bit in sorted(LEADER_EPOCH_BITS):
        flipped = flip_bit(batch, bit)
        epoch = int.from_bytes(flipped[12:16], "big", signed=True)
        assert codec.validate_batch(flipped).header.partition_leader_epoch == epoch
        assert codec.batch_records(flipped) == expected_records(SAMPLE_RECORDS)


def test_bit_flip_in_the_records_is_reported_as_a_crc_mismatch(codec: ModuleType) -> None:
    batch = _small_batch(codec, layout.COMPRESSION_NONE)
    flipped = flip_bit(batch, 8 * (len(batch) - 3))
    with pytest.raises(CorruptRecordError) as raised:
        codec.validate_batch(flipped)
    assert str(raised.value) == _message(status.CRC_MISMATCH)
    with pytest.raises(CorruptRecordError):
        codec.batch_records(flipped)
    with pytest.raises(CorruptRecordError):
        codec.decode_columns(flipped)


def test_validate_batch_changes_nothing_in_its_input(codec: ModuleType) -> None:
    batch = bytearray(flip_bit(_small_batch(codec, layout.COMPRESSION_LZ4), 8 * 70))
    before = bytes(batch)
    with pytest.raises(CorruptRecordError):
        codec.validate_batch(batch)
    assert batch == before


# --- truncation -------------------------------------------------------------------------------


@COMPRESSIONS
def test_truncated_batch_raises_corrupt_record_error(codec: ModuleType, compression: int) -> None:
    batch = _small_batch(codec, compression)
    for length in range(len(batch)):
        cut = batch[:length]
        code = status.TRUNCATED_HEADER if length < layout.HEADER_SIZE else status.TRUNCATED_BATCH
        with pytest.raises(CorruptRecordError) as raised:
            codec.validate_batch(cut)
        assert str(raised.value) == _message(code), length
        with pytest.raises(CorruptRecordError):
            codec.batch_records(cut)


def test_read_header_needs_only_the_61_header_bytes(codec: ModuleType) -> None:
    batch = _small_batch(codec, layout.COMPRESSION_NONE)
    assert codec.read_header(batch[: layout.HEADER_SIZE]) == codec.read_header(batch)
    with pytest.raises(CorruptRecordError) as raised:
        codec.read_header(batch[: layout.HEADER_SIZE - 1])
    assert str(raised.value) == _message(status.TRUNCATED_HEADER)


@COMPRESSIONS
def test_iter_headers_stops_quietly_at_a_partial_trailing_batch(
    codec: ModuleType, compression: int
) -> None:
    good = _small_batch(codec, compression)
    header = codec.read_header(good)
    for length in range(1, len(good)):
        assert list(codec.iter_headers(good + good[:length])) == [(0, header)], length


@COMPRESSIONS
def test_decode_columns_returns_the_whole_batches_before_a_partial_one(
    codec: ModuleType, compression: int
) -> None:
    good = _small_batch(codec, compression)
    records = expected_records(SAMPLE_RECORDS)
    for length in range(0, len(good), 7):
        columns = codec.decode_columns(good + good[:length])
        assert columns.end_position == len(good), length
        assert columns.count == len(records)
        assert columns.offset.tolist() == [record.offset for record in records]
        assert columns.timestamp_ms.tolist() == [record.timestamp for record in records]


@pytest.mark.parametrize(
    ("field", "value", "error", "code"),
    [
        ("batch_length", 20, CorruptRecordError, status.BATCH_LENGTH_TOO_SMALL),
        ("magic", 7, CorruptRecordError, status.BAD_MAGIC),
        ("magic", 1, InvalidRecordError, status.UNSUPPORTED_MAGIC),
    ],
)
def test_iter_headers_raises_on_a_bad_length_or_magic_in_a_whole_batch(
    codec: ModuleType, field: str, value: int, error: type[Exception], code: int
) -> None:
    good = _small_batch(codec, layout.COMPRESSION_NONE)
    bad = forge(good, **{field: value})
    with pytest.raises(error) as raised:
        list(codec.iter_headers(good + bad))
    assert str(raised.value) == _message(code, len(good))
    with pytest.raises(error):
        codec.read_header(bad)


# --- lies about sizes allocate nothing --------------------------------------------------------

# Runs in a child process: import everything, warm every function up on a good batch, then cap
# the address space at what is mapped now + 256 MiB and feed it the lie.
MEMORY_PROBE = """
import importlib, resource, sys
codec = importlib.import_module(sys.argv[1])
good, lie = bytes.fromhex(sys.argv[2]), bytes.fromhex(sys.argv[3])
calls = {
    "validate_batch": lambda data: codec.validate_batch(data, from_client=False),
    "read_header": lambda data: codec.read_header(data),
    "iter_headers": lambda data: len(list(codec.iter_headers(data))),
    "decode_columns": lambda data: codec.decode_columns(data, include_headers=True).count,
    "batch_records": lambda data: len(codec.batch_records(data)),
}
for call in calls.values():
    call(good)
with open("/proc/self/status") as status_file:
    kib = next(int(line.split()[1]) for line in status_file if line.startswith("VmSize:"))
_, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (kib * 1024 + (256 << 20), hard))
for name, call in calls.items():
    try:
        call(lie)
        outcome = "returned"
    except BaseException as error:
        outcome = type(error).__name__
    print(name, outcome)
"""

TYPED_NAMES = {error.__name__ for error in TYPED_ERRORS}


def _probe_memory(codec: ModuleType, good: bytes, lie: bytes) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, codec.__name__, good.hex(), lie.hex()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return dict(line.split() for line in done.stdout.splitlines())


def _two_gib_length_lie() -> bytes:
    # A 100-byte buffer whose header says 0x7FFFFFF0 bytes follow the length field.
    section = b"".join(raw_record(offset_delta=i, value=b"v" * 5) for i in range(4))
    batch = assemble(section, records_count=4)
    return forge(batch[:100].ljust(100, b"\0"), batch_length=0x7FFFFFF0)


def _huge_count_lie(compression: int) -> bytes:
    section = b"".join(raw_record(offset_delta=i, value=b"v") for i in range(3))
    if compression == layout.COMPRESSION_LZ4:
        section = kafka_lz4_frame(section)
    return assemble(section, records_count=INT32_MAX, attributes=compression)


def _huge_field_lie(field: str) -> bytes:
    if field == "header_count":
        record = raw_record(value=b"v", header_count=INT32_MAX)
    else:
        record = raw_record(key=b"k", value=b"v", key_length=INT32_MAX)
    return assemble(record, records_count=1)


LIES = {
    "length_2gib": (_two_gib_length_lie, ("CorruptRecordError", "returned", "returned")),
    "count_2g_none": (
        lambda: _huge_count_lie(layout.COMPRESSION_NONE),
        (TYPED_NAMES, "returned", TYPED_NAMES),
    ),
    "count_2g_lz4": (
        lambda: _huge_count_lie(layout.COMPRESSION_LZ4),
        (TYPED_NAMES, "returned", TYPED_NAMES),
    ),
    "header_count_2g": (
        lambda: _huge_field_lie("header_count"),
        ("InvalidRecordError", "returned", "InvalidRecordError"),
    ),
    "key_length_2g": (
        lambda: _huge_field_lie("key_length"),
        ("InvalidRecordError", "returned", "InvalidRecordError"),
    ),
}


@pytest.mark.parametrize("lie_name", list(LIES))
def test_a_size_lie_raises_a_typed_error_without_allocating_it(
    codec: ModuleType, lie_name: str
) -> None:
    make_lie, (checked, iterated, decoded) = LIES[lie_name]
    good = _small_batch(codec, layout.COMPRESSION_LZ4)
    outcomes = _probe_memory(codec, good, make_lie())

    def matches(outcome: str, expected: str | set[str]) -> bool:
        return outcome in expected if isinstance(expected, set) else outcome == expected

    assert "MemoryError" not in outcomes.values(), outcomes
    assert matches(outcomes["validate_batch"], checked), outcomes
    assert matches(outcomes["batch_records"], checked), outcomes
    assert outcomes["read_header"] == "returned", outcomes
    assert matches(outcomes["iter_headers"], iterated), outcomes
    assert matches(outcomes["decode_columns"], decoded), outcomes


def test_a_2gib_length_claim_reads_as_a_partial_batch_when_scanning(codec: ModuleType) -> None:
    lie = _two_gib_length_lie()
    assert codec.read_header(lie).batch_length == 0x7FFFFFF0
    assert list(codec.iter_headers(lie)) == []
    columns = codec.decode_columns(lie)
    assert (columns.count, columns.end_position) == (0, 0)
    with pytest.raises(CorruptRecordError) as raised:
        codec.validate_batch(lie)
    assert str(raised.value) == _message(status.TRUNCATED_BATCH)


def test_a_negative_header_count_is_an_invalid_record(codec: ModuleType) -> None:
    batch = assemble(raw_record(value=b"v", header_count=-1), records_count=1)
    with pytest.raises(InvalidRecordError) as raised:
        codec.validate_batch(batch)
    assert str(raised.value) == _message(status.BAD_HEADER_COUNT)


def test_a_compressed_batch_that_expands_hugely_is_still_decoded_within_limits(
    codec: ModuleType,
) -> None:
    # A few KiB of lz4 that inflate to 4 MiB: legal, and well under the decompressed limit.
    value = compressible(4 << 20)
    batch = assemble(
        kafka_lz4_frame(raw_record(value=value)),
        records_count=1,
        attributes=layout.COMPRESSION_LZ4,
    )
    assert len(batch) < len(value) // 50
    assert codec.batch_records(batch)[0].value == value


def test_varint_with_a_continuation_bit_on_its_fifth_byte_is_rejected(codec: ModuleType) -> None:
    # attributes, timestamp delta 0, then an offset delta whose 5th byte still continues.
    body = b"\x00\x00" + b"\x80\x80\x80\x80\x80\x00" + b"\x01\x01\x00"
    batch = assemble(encode_varint(len(body)) + body, records_count=1)
    with pytest.raises(InvalidRecordError) as raised:
        codec.validate_batch(batch)
    assert str(raised.value) == _message(status.BAD_VARINT)


# --- random bad input -------------------------------------------------------------------------


def _survives(codec: ModuleType, data: bytes) -> None:
    """Each decoder either returns or raises one of the four typed errors."""
    calls = [
        lambda: codec.validate_batch(data),
        lambda: codec.validate_batch(data, from_client=False),
        lambda: codec.batch_records(data),
        lambda: list(codec.iter_headers(data)),
        lambda: codec.decode_columns(data, include_headers=True, include_control=True),
        lambda: codec.read_header(data),
    ]
    for call in calls:
        with contextlib.suppress(TYPED_ERRORS):
            call()


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=bad_input())
def test_bad_input_raises_only_typed_errors(codec: ModuleType, data: bytes) -> None:
    _survives(codec, data)


def test_a_timestamp_delta_beyond_int32_decodes_as_a_varlong(codec: ModuleType) -> None:
    section = raw_record(timestamp_delta=1 << 62, value=b"v")
    batch = assemble(section, records_count=1, base_timestamp=TS, max_timestamp=TS)
    assert codec.batch_records(batch)[0].timestamp == TS + (1 << 62)
    assert codec.decode_columns(batch).timestamp_ms.tolist() == [TS + (1 << 62)]
