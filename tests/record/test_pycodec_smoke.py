"""A quick check of the pure-Python codec twin against docs/format.md §11 and kafka-python.

The full suite (both twins, differential, fuzz) lives elsewhere; these few tests catch a broken
twin early. Run with EOSLOG_NO_EXTENSIONS=1 until the extension is built.
"""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from eoslog import errors
from eoslog.record import lz4frame, pycodec, pyprimitives, status

TIMESTAMP = 1_700_000_000_000
VECTOR_1 = bytes.fromhex(
    "0000000000000000 0000003d ffffffff 02 e641a44b 0000 00000000 0000018bcfe56800"
    " 0000018bcfe56800 ffffffffffffffff ffff ffffffff 00000001 16 00 00 00 01 0a 68656c6c6f 00"
)
VECTOR_2 = bytes.fromhex(
    "000000000000000000000047ffffffff0262db4fc30010000000010000018bcfe568000000018bcfe56805"
    "00000000000003e8000300000007000000021c000000046b3104763102026802780c000a02010100"
)
VECTOR_3 = bytes.fromhex(
    "000000000000000200000042ffffffff024e46c4910030000000000000018bcfe5680a0000018bcfe5680a"
    "00000000000003e80003ffffffff000000012000000008000000000c00000000000500"
)


def with_fixed_crc(batch: bytes | bytearray) -> bytes:
    fixed = bytearray(batch)
    struct.pack_into(">I", fixed, 17, pyprimitives.crc32c(bytes(fixed[21:])))
    return bytes(fixed)


def test_builders_write_the_format_test_vectors_byte_for_byte() -> None:
    plain = pycodec.BatchBuilder()
    assert plain.append(TIMESTAMP, None, b"hello")
    assert plain.build() == VECTOR_1

    transactional = pycodec.BatchBuilder(
        is_transactional=True, producer_id=1000, producer_epoch=3, base_sequence=7
    )
    transactional.append(TIMESTAMP, b"k1", b"v1", [("h", b"x")])
    transactional.append(TIMESTAMP + 5, None, None)
    assert transactional.build() == VECTOR_2

    marker = pycodec.build_control_batch(
        0,
        producer_id=1000,
        producer_epoch=3,
        coordinator_epoch=5,
        timestamp=TIMESTAMP + 10,
        base_offset=2,
    )
    assert marker == VECTOR_3


def test_primitives_match_the_documented_examples() -> None:
    assert pyprimitives.crc32c(b"123456789") == 0xE3069283
    assert pyprimitives.crc32c(b"6789", pyprimitives.crc32c(b"12345")) == 0xE3069283
    examples = {0: "00", -1: "01", 63: "7e", -64: "7f", 64: "8001", 300: "d804"}
    examples |= {2**31 - 1: "feffffff0f", -(2**31): "ffffffff0f"}
    for value, encoded in examples.items():
        assert pyprimitives.encode_varint(value).hex() == encoded
        assert pyprimitives.decode_varint(bytes.fromhex(encoded)) == (value, len(encoded) // 2)
    with pytest.raises(errors.InvalidRecordError, match=r"malformed varint .* byte 1\)"):
        pyprimitives.decode_varint(b"\x00\xff\xff\xff\xff\xff", 1)
    with pytest.raises(ValueError):
        pyprimitives.encode_varint(2**31)


def test_validate_and_decode_the_test_vectors() -> None:
    checked = pycodec.validate_batch(VECTOR_2)
    assert (checked.max_timestamp, checked.offset_delta_of_max_timestamp) == (TIMESTAMP + 5, 1)
    records = pycodec.batch_records(VECTOR_2)
    assert [(r.offset, r.key, r.value, r.headers) for r in records] == [
        (0, b"k1", b"v1", (("h", b"x"),)),
        (1, None, None, ()),
    ]
    pycodec.validate_batch(VECTOR_3, from_client=False)
    # A client's batch must start at offset 0, which is checked before the control bit.
    with pytest.raises(errors.InvalidRecordError, match="must have base offset 0"):
        pycodec.validate_batch(VECTOR_3)
    at_zero = bytearray(VECTOR_3)
    at_zero[7] = 0
    with pytest.raises(errors.InvalidRecordError, match="clients may not write control"):
        pycodec.validate_batch(bytes(at_zero))


def test_corrupt_bytes_raise_with_the_batch_position() -> None:
    flipped = bytearray(VECTOR_1)
    flipped[-3] ^= 0x01
    with pytest.raises(errors.CorruptRecordError, match=r"CRC-32C mismatch.*byte 73\)"):
        pycodec.batch_records(VECTOR_1 + bytes(flipped), 73)
    with pytest.raises(errors.CorruptRecordError, match="runs past the end"):
        pycodec.validate_batch(VECTOR_1[:-1])
    wrong_delta = bytearray(VECTOR_1)
    wrong_delta[64] = 0x02  # the first record's offset delta becomes 1
    with pytest.raises(errors.InvalidRecordError, match="offset deltas"):
        pycodec.validate_batch(with_fixed_crc(wrong_delta))


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_batches_round_trip_with_kafka_python(compression: int) -> None:
    ours = pycodec.BatchBuilder(compression=compression)
    theirs = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for index in range(300):
        key = None if index % 3 == 0 else b"key-%d" % index
        headers = [("n", b"%d" % index)] if index % 2 else []
        ours.append(TIMESTAMP + index, key, b"value" * index, headers)
        theirs.append(index, TIMESTAMP + index, key, b"value" * index, headers)
    built = ours.build()
    decoded = [(m.offset, m.key, m.value, list(m.headers)) for m in DefaultRecordBatch(built)]
    foreign = bytes(theirs.build())
    pycodec.validate_batch(foreign)
    records = pycodec.batch_records(foreign)
    assert [(r.offset, r.key, r.value, list(r.headers)) for r in records] == decoded


def test_lz4_frames_follow_kafka_reader_rules() -> None:
    frame = lz4frame.compress(b"abc" * 30_000)
    assert frame[:7] == bytes.fromhex("04224d18604082") and frame[-4:] == bytes(4)
    assert lz4frame.decompress(frame, 90_000) == b"abc" * 30_000
    assert lz4frame.decompress(frame, 89_999) == status.DECOMPRESSED_TOO_LARGE
    assert lz4frame.decompress(frame + b"\x00", 90_000) == status.DECOMPRESS_FAILED
    assert lz4frame.decompress(frame[:-4], 90_000) == status.DECOMPRESS_FAILED


def test_decode_columns_filters_offsets_and_stops_at_a_torn_tail() -> None:
    batches = []
    for base in (0, 3):
        builder = pycodec.BatchBuilder(base_offset=base)
        for offset in range(base, base + 3):
            builder.append(TIMESTAMP, None, b"%d" % offset, [("h", None)] if offset == 4 else None)
        batches.append(builder.build())
    data = b"".join(batches) + VECTOR_3 + batches[0][:40]
    columns = pycodec.decode_columns(data, include_headers=True, offset_min=2, offset_end=5)
    assert columns.offset.tolist() == [2, 3, 4]
    assert bytes(columns.value_data) == b"234"
    assert columns.key_validity.tolist() == [0]
    assert columns.end_position == len(data) - 40
    table = columns.to_arrow("topic", 0).to_pydict()
    assert table["headers"] == [None, None, [{"key": "h", "value": None}]]
