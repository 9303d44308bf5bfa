"""Known byte vectors (docs/format.md §11) and Kafka's own record-batch behaviours
(docs/kafka-behaviours.md items 1-3), encoded and decoded by both twins."""

from __future__ import annotations

import mmap
from types import ModuleType

import numpy as np
import pytest

from eoslog.errors import InvalidRecordError
from eoslog.record import layout, status
from eoslog.record.types import (
    BatchHeader,
    Record,
    ValidatedBatch,
    decrement_sequence,
    increment_sequence,
)
from tests.support.batches import INT32_MAX, SAMPLE_RECORDS, TS, build, crc_of, expected_records


def _hex(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


# docs/format.md §11, verbatim.
VECTOR_1 = _hex(
    "0000000000000000 0000003d ffffffff 02 e641a44b 0000 00000000 0000018bcfe56800"
    " 0000018bcfe56800 ffffffffffffffff ffff ffffffff 00000001"
    " 16 00 00 00 01 0a 68656c6c6f 00"
)
VECTOR_2 = _hex(
    "000000000000000000000047ffffffff0262db4fc30010000000010000018bcfe568000000018bcfe568"
    "0500000000000003e8000300000007000000021c000000046b3104763102026802780c000a02010100"
)
VECTOR_3 = _hex(
    "000000000000000200000042ffffffff024e46c4910030000000000000018bcfe5680a0000018bcfe568"
    "0a00000000000003e80003ffffffff000000012000000008000000000c00000000000500"
)
LZ4_FRAME_HEADER = _hex("04 22 4D 18 60 40 82")
LZ4_END_MARK = _hex("00 00 00 00")

HEADER_1 = BatchHeader(
    base_offset=0,
    batch_length=61,
    partition_leader_epoch=-1,
    magic=2,
    crc=0xE641A44B,
    attributes=0,
    last_offset_delta=0,
    base_timestamp=TS,
    max_timestamp=TS,
    producer_id=-1,
    producer_epoch=-1,
    base_sequence=-1,
    records_count=1,
)
HEADER_2 = BatchHeader(
    base_offset=0,
    batch_length=71,
    partition_leader_epoch=-1,
    magic=2,
    crc=0x62DB4FC3,
    attributes=0x10,
    last_offset_delta=1,
    base_timestamp=TS,
    max_timestamp=TS + 5,
    producer_id=1000,
    producer_epoch=3,
    base_sequence=7,
    records_count=2,
)
HEADER_3 = BatchHeader(
    base_offset=2,
    batch_length=66,
    partition_leader_epoch=-1,
    magic=2,
    crc=0x4E46C491,
    attributes=0x30,
    last_offset_delta=0,
    base_timestamp=TS + 10,
    max_timestamp=TS + 10,
    producer_id=1000,
    producer_epoch=3,
    base_sequence=-1,
    records_count=1,
)
RECORDS_1 = [Record(0, TS, None, b"hello", ())]
RECORDS_2 = [
    Record(0, TS, b"k1", b"v1", (("h", b"x"),)),
    Record(1, TS + 5, None, None, ()),
]
# An ABORT marker: key = version 0 + type 0; value = version 0 + coordinator epoch 5.
RECORDS_3 = [Record(2, TS + 10, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x05", ())]

VECTORS = {
    "vector1_plain": (VECTOR_1, HEADER_1, RECORDS_1),
    "vector2_transactional": (VECTOR_2, HEADER_2, RECORDS_2),
    "vector3_abort_marker": (VECTOR_3, HEADER_3, RECORDS_3),
}


def _message(code: int, position: int = 0) -> str:
    return f"{status.MESSAGES[code][1]} (batch at byte {position})"


# --- encoding ---------------------------------------------------------------------------------


def test_vector_1_plain_batch_is_built_byte_exact(codec: ModuleType) -> None:
    builder = codec.BatchBuilder()
    assert builder.append(TS, None, b"hello") is True
    assert builder.record_count() == 1
    assert builder.build() == VECTOR_1


def test_vector_2_transactional_batch_is_built_byte_exact(codec: ModuleType) -> None:
    builder = codec.BatchBuilder(
        is_transactional=True, producer_id=1000, producer_epoch=3, base_sequence=7
    )
    assert builder.append(TS, b"k1", b"v1", [("h", b"x")]) is True
    assert builder.append(TS + 5, None, None) is True
    assert builder.build() == VECTOR_2


def test_vector_3_abort_marker_is_built_byte_exact(codec: ModuleType) -> None:
    marker = codec.build_control_batch(
        layout.CONTROL_ABORT,
        producer_id=1000,
        producer_epoch=3,
        coordinator_epoch=5,
        timestamp=TS + 10,
        base_offset=2,
    )
    assert marker == VECTOR_3
    assert len(marker) == layout.END_TXN_MARKER_BATCH_SIZE


def test_commit_marker_differs_from_abort_marker_only_in_type_and_crc(codec: ModuleType) -> None:
    commit = codec.build_control_batch(
        layout.CONTROL_COMMIT,
        producer_id=1000,
        producer_epoch=3,
        coordinator_epoch=5,
        timestamp=TS + 10,
        base_offset=2,
    )
    differing = [i for i in range(len(VECTOR_3)) if commit[i] != VECTOR_3[i]]
    # record length, attributes, timestamp delta, offset delta, key length, key version (2)
    type_byte = layout.RECORDS_OFFSET + 8
    crc_bytes = range(layout.CRC_OFFSET, layout.CRC_OFFSET + 4)
    assert len(commit) == len(VECTOR_3)
    assert set(differing) - set(crc_bytes) == {type_byte}
    assert commit[type_byte] == layout.CONTROL_COMMIT
    assert crc_of(commit) == int.from_bytes(commit[17:21], "big")


def test_control_batch_carries_the_given_partition_leader_epoch(codec: ModuleType) -> None:
    marker = codec.build_control_batch(
        layout.CONTROL_COMMIT,
        producer_id=1,
        producer_epoch=0,
        coordinator_epoch=0,
        timestamp=TS,
        partition_leader_epoch=9,
    )
    assert codec.read_header(marker).partition_leader_epoch == 9


def test_vector_7_lz4_batch_records_are_one_kafka_lz4_frame(codec: ModuleType) -> None:
    assert layout.LZ4_FRAME_HEADER == LZ4_FRAME_HEADER
    batch = build(codec, SAMPLE_RECORDS, compression=layout.COMPRESSION_LZ4)
    records_section = batch[layout.RECORDS_OFFSET :]
    assert records_section.startswith(LZ4_FRAME_HEADER)
    assert records_section.endswith(LZ4_END_MARK)
    assert batch[layout.ATTRIBUTES_OFFSET + 1] & layout.COMPRESSION_MASK == layout.COMPRESSION_LZ4


# --- decoding ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(VECTORS))
def test_read_header_decodes_the_documented_fields(codec: ModuleType, name: str) -> None:
    data, header, _ = VECTORS[name]
    assert codec.read_header(data) == header
    assert codec.batch_crc(data) == header.crc


@pytest.mark.parametrize("name", list(VECTORS))
def test_batch_records_decodes_the_documented_records(codec: ModuleType, name: str) -> None:
    data, _, records = VECTORS[name]
    assert codec.batch_records(data) == records


@pytest.mark.parametrize("name", list(VECTORS))
def test_iter_headers_finds_each_vector_in_a_run(codec: ModuleType, name: str) -> None:
    data, header, _ = VECTORS[name]
    run = VECTOR_1 + data
    assert list(codec.iter_headers(run)) == [(0, HEADER_1), (len(VECTOR_1), header)]
    assert codec.batch_records(run, len(VECTOR_1)) == VECTORS[name][2]


@pytest.mark.parametrize(
    ("data", "header", "max_timestamp", "delta_of_max", "min_timestamp"),
    [(VECTOR_1, HEADER_1, TS, 0, TS), (VECTOR_2, HEADER_2, TS + 5, 1, TS)],
    ids=["vector1", "vector2"],
)
def test_validate_batch_accepts_vectors_1_and_2_from_a_client(
    codec: ModuleType,
    data: bytes,
    header: BatchHeader,
    max_timestamp: int,
    delta_of_max: int,
    min_timestamp: int,
) -> None:
    expected = ValidatedBatch(header, max_timestamp, delta_of_max, min_timestamp)
    assert codec.validate_batch(data) == expected
    assert codec.validate_batch(data, from_client=True) == expected
    assert codec.validate_batch(data, from_client=False) == expected


def test_validate_batch_accepts_the_abort_marker_from_the_coordinator(codec: ModuleType) -> None:
    validated = codec.validate_batch(VECTOR_3, from_client=False)
    assert validated == ValidatedBatch(HEADER_3, TS + 10, 0, TS + 10)


def test_validate_batch_rejects_a_control_batch_from_a_client(codec: ModuleType) -> None:
    # Vector 3 also has base offset 2; the control rule is checked after the base-offset rule,
    # so the marker is moved to offset 0 to reach it (docs/format.md §10.2).
    at_zero = bytearray(VECTOR_3)
    at_zero[0:8] = bytes(8)  # base offset is outside the CRC
    with pytest.raises(InvalidRecordError) as raised:
        codec.validate_batch(bytes(at_zero), from_client=True)
    assert str(raised.value) == _message(status.CONTROL_FROM_CLIENT)


def test_validate_batch_rejects_the_abort_marker_from_a_client(codec: ModuleType) -> None:
    # As stored, vector 3 fails the earlier base-offset rule (validate_batch's order).
    with pytest.raises(InvalidRecordError) as raised:
        codec.validate_batch(VECTOR_3)
    assert str(raised.value) == _message(status.NONZERO_BASE_OFFSET)


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "numpy", "mmap"])
def test_codec_reads_any_buffer_object(codec: ModuleType, kind: str) -> None:
    data: object
    if kind == "bytes":
        data = VECTOR_2
    elif kind == "bytearray":
        data = bytearray(VECTOR_2)
    elif kind == "memoryview":
        data = memoryview(b"\xff" * 5 + VECTOR_2)[5:]
    elif kind == "numpy":
        data = np.frombuffer(VECTOR_2, dtype=np.uint8)
    else:
        data = mmap.mmap(-1, len(VECTOR_2))
        data.write(VECTOR_2)
    assert codec.read_header(data) == HEADER_2
    assert codec.batch_records(data) == RECORDS_2
    assert codec.validate_batch(data).header == HEADER_2
    assert codec.batch_crc(data) == HEADER_2.crc
    assert list(codec.iter_headers(data)) == [(0, HEADER_2)]
    assert codec.decode_columns(data).offset.tolist() == [0, 1]


# --- sequence arithmetic (docs/kafka-behaviours.md items 1 and 3) ---------------------------------


@pytest.mark.parametrize(
    ("sequence", "delta", "expected"),
    [(5, 5, 10), (INT32_MAX, 1, 0), (INT32_MAX - 5, 10, 4), (0, 0, 0), (INT32_MAX, 0, INT32_MAX)],
)
def test_increment_sequence_wraps_past_int32_max_to_zero(
    sequence: int, delta: int, expected: int
) -> None:
    assert increment_sequence(sequence, delta) == expected


@pytest.mark.parametrize(
    ("sequence", "delta", "expected"),
    [(5, 5, 0), (0, 1, INT32_MAX), (3, 10, INT32_MAX - 6), (INT32_MAX, 0, INT32_MAX)],
)
def test_decrement_sequence_wraps_below_zero_to_int32_max(
    sequence: int, delta: int, expected: int
) -> None:
    assert decrement_sequence(sequence, delta) == expected


def test_last_sequence_of_a_built_batch_wraps_at_int32_max(codec: ModuleType) -> None:
    batch = build(
        codec, SAMPLE_RECORDS, producer_id=77, producer_epoch=0, base_sequence=INT32_MAX - 1
    )
    header = codec.read_header(batch)
    assert header.base_sequence == INT32_MAX - 1
    assert header.last_offset_delta == 2
    # Sequences INT32_MAX - 1, INT32_MAX, 0.
    assert header.last_sequence == 0


def test_last_sequence_is_no_sequence_when_the_batch_has_none(codec: ModuleType) -> None:
    assert codec.read_header(VECTOR_1).last_sequence == layout.NO_SEQUENCE
    assert codec.read_header(VECTOR_3).last_sequence == layout.NO_SEQUENCE


def test_empty_batch_header_gives_last_offset_and_last_sequence_from_the_delta() -> None:
    # docs/kafka-behaviours.md item 3 (testWriteEmptyHeader): no records, yet the header still says
    # which offsets and sequences the compacted-away records used.
    header = HEADER_2._replace(
        base_offset=15,
        last_offset_delta=5,
        base_timestamp=layout.NO_TIMESTAMP,
        max_timestamp=TS,
        base_sequence=10,
        records_count=0,
    )
    assert header.last_offset == 20
    assert header.last_sequence == 15
    assert header.producer_id == 1000
    assert header.producer_epoch == 3


# --- stamping on append (docs/kafka-behaviours.md items 2 and 73) ---------------------------------


@pytest.mark.parametrize("compression", [layout.COMPRESSION_NONE, layout.COMPRESSION_LZ4])
@pytest.mark.parametrize("kind", ["bytearray", "memoryview_slice"])
def test_stamp_batch_with_log_append_time_sets_type_bit_max_timestamp_and_valid_crc(
    codec: ModuleType, compression: int, kind: str
) -> None:
    built = build(codec, SAMPLE_RECORDS, compression=compression)
    append_time = TS + 123_456
    backing = bytearray(b"\xee" * 3 + built + b"\xee" * 3)
    data = bytearray(built) if kind == "bytearray" else memoryview(backing)[3:-3]

    codec.stamp_batch(
        data, base_offset=100, partition_leader_epoch=7, log_append_time_ms=append_time
    )

    stamped = bytes(data)
    before = codec.read_header(built)
    header = codec.read_header(stamped)
    assert header == before._replace(
        base_offset=100,
        partition_leader_epoch=7,
        attributes=before.attributes | layout.TIMESTAMP_TYPE_MASK,
        max_timestamp=append_time,
        crc=header.crc,
    )
    assert header.timestamp_type == layout.TIMESTAMP_LOG_APPEND_TIME
    assert header.crc == crc_of(stamped) == codec.batch_crc(stamped)
    assert codec.validate_batch(stamped, from_client=False).max_timestamp == append_time
    assert codec.batch_records(stamped) == expected_records(SAMPLE_RECORDS, 100, append_time)
    if kind == "memoryview_slice":
        assert backing[:3] == backing[-3:] == b"\xee" * 3


def test_log_append_time_max_timestamp_is_placed_at_the_last_offset(codec: ModuleType) -> None:
    # With LogAppendTime every record carries the header's time; Kafka's LogValidator then
    # reports the batch's last offset as the offset of the max timestamp, and so does eoslog.
    data = bytearray(build(codec, SAMPLE_RECORDS))
    codec.stamp_batch(data, base_offset=0, partition_leader_epoch=0, log_append_time_ms=TS + 50)
    validated = codec.validate_batch(data, from_client=False)
    assert (validated.max_timestamp, validated.offset_delta_of_max_timestamp) == (TS + 50, 2)


def test_stamp_batch_without_log_append_time_leaves_the_crc_covered_bytes_alone(
    codec: ModuleType,
) -> None:
    built = build(codec, SAMPLE_RECORDS)
    data = bytearray(built)

    codec.stamp_batch(data, base_offset=2**40, partition_leader_epoch=12)

    assert data[layout.MAGIC_OFFSET :] == built[layout.MAGIC_OFFSET :]
    assert (
        data[layout.BATCH_LENGTH_OFFSET : layout.PARTITION_LEADER_EPOCH_OFFSET]
        == (built[layout.BATCH_LENGTH_OFFSET : layout.PARTITION_LEADER_EPOCH_OFFSET])
    )
    header = codec.read_header(data)
    assert (header.base_offset, header.partition_leader_epoch) == (2**40, 12)
    assert codec.batch_records(data) == expected_records(SAMPLE_RECORDS, 2**40)
    assert codec.validate_batch(data, from_client=False).max_timestamp == TS + 7


def test_stamp_batch_with_a_create_time_max_timestamp_rewrites_it_and_the_crc_when_it_differs(
    codec: ModuleType,
) -> None:
    # What Kafka's LogValidator does to a CreateTime batch whose header max timestamp is not
    # its records' largest (docs/format.md §10.2).
    built = build(codec, SAMPLE_RECORDS)
    data = bytearray(built)
    codec.stamp_batch(data, base_offset=5, partition_leader_epoch=0, max_timestamp=TS + 99)
    header = codec.read_header(data)
    assert header.max_timestamp == TS + 99
    assert header.crc == crc_of(data) == codec.batch_crc(data)
    assert header.attributes == codec.read_header(built).attributes  # still CreateTime
    same = bytearray(built)
    codec.stamp_batch(same, base_offset=5, partition_leader_epoch=0, max_timestamp=TS + 7)
    assert same[layout.MAGIC_OFFSET :] == built[layout.MAGIC_OFFSET :]  # equal: CRC untouched
    with pytest.raises(ValueError, match="max_timestamp"):
        codec.stamp_batch(
            bytearray(built),
            base_offset=0,
            partition_leader_epoch=0,
            log_append_time_ms=TS,
            max_timestamp=TS,
        )
    with pytest.raises(ValueError, match="max_timestamp must fit in int64"):
        codec.stamp_batch(
            bytearray(built), base_offset=0, partition_leader_epoch=0, max_timestamp=2**63
        )
