"""The `__consumer_offsets` record codec (eoslog.coordinator.offsets_log) against the byte
layout of Kafka's OffsetCommitKey.json, OffsetCommitValue.json and GroupMetadataKey.json
(group-coordinator/src/main/resources/common/message/): encode and decode in pairs, every
value version, and bad bytes refused with CorruptOffsetsLogError."""

from __future__ import annotations

import struct

import pytest

from eoslog.coordinator.offsets_log import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_offset_key,
    encode_offset_value,
    group_partition,
)
from eoslog.errors import CorruptOffsetsLogError

TS = 1_700_000_000_000


def _string(text: bytes) -> bytes:
    return struct.pack(">h", len(text)) + text


def test_offset_commit_key_is_version_1_then_group_topic_partition() -> None:
    key = OffsetCommitKey("copier", "orders", 3)
    expected = b"\x00\x01" + _string(b"copier") + _string(b"orders") + b"\x00\x00\x00\x03"
    assert encode_offset_key(key) == expected
    assert decode_key(expected) == key


def test_key_version_0_is_an_offset_commit_too() -> None:
    data = b"\x00\x00" + _string(b"g") + _string(b"t") + b"\x00\x00\x00\x07"
    assert decode_key(data) == OffsetCommitKey("g", "t", 7)


def test_group_metadata_key_is_version_2_then_the_group() -> None:
    data = b"\x00\x02" + _string(b"copier")
    assert encode_group_key(GroupMetadataKey("copier")) == data
    assert decode_key(data) == GroupMetadataKey("copier")


def test_value_version_3_is_offset_leader_epoch_metadata_timestamp() -> None:
    value = OffsetCommitValue(42, "meta", TS, leader_epoch=5)
    expected = (
        b"\x00\x03"
        + struct.pack(">q", 42)
        + struct.pack(">i", 5)
        + _string(b"meta")
        + struct.pack(">q", TS)
    )
    assert encode_offset_value(value) == expected
    assert decode_offset_value(expected) == value


@pytest.mark.parametrize(
    ("version", "body", "value"),
    [
        (
            0,
            struct.pack(">q", 9) + _string(b"") + struct.pack(">q", TS),
            OffsetCommitValue(9, "", TS),
        ),
        (
            1,
            struct.pack(">q", 9) + _string(b"m") + struct.pack(">qq", TS, TS + 1),
            OffsetCommitValue(9, "m", TS, expire_timestamp=TS + 1),
        ),
        (
            2,
            struct.pack(">q", 9) + _string(b"") + struct.pack(">q", TS),
            OffsetCommitValue(9, "", TS),
        ),
        (
            4,
            struct.pack(">qi", 9, -1) + b"\x02m" + struct.pack(">q", TS) + b"\x00",
            OffsetCommitValue(9, "m", TS),
        ),
    ],
)
def test_every_value_version_encodes_and_decodes_as_its_schema_says(
    version: int, body: bytes, value: OffsetCommitValue
) -> None:
    data = struct.pack(">h", version) + body
    assert decode_offset_value(data) == value
    assert encode_offset_value(value, version) == data


def test_a_flexible_value_skips_tagged_fields_it_does_not_know() -> None:
    data = b"\x00\x04" + struct.pack(">qi", 1, -1) + b"\x01" + struct.pack(">q", TS)
    data += b"\x01" + b"\x05\x02ab"  # one tagged field: tag 5, two bytes
    assert decode_offset_value(data) == OffsetCommitValue(1, "", TS)


def test_a_null_value_is_a_tombstone() -> None:
    assert encode_offset_value(None) is None
    assert decode_offset_value(None) is None


def test_a_version_that_cannot_carry_a_field_refuses_to_encode_it() -> None:
    with pytest.raises(ValueError, match="expire timestamp"):
        encode_offset_value(OffsetCommitValue(1, "", TS, expire_timestamp=TS), 3)
    with pytest.raises(ValueError, match="leader epoch"):
        encode_offset_value(OffsetCommitValue(1, "", TS, leader_epoch=3), 1)
    with pytest.raises(ValueError, match="version 9"):
        encode_offset_value(OffsetCommitValue(1, "", TS), 9)


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x03" + _string(b"g"),  # a key version no offsets code writes
        b"\x00\x01" + _string(b"g") + _string(b"t"),  # truncated: no partition
        b"\x00\x01" + _string(b"g") + _string(b"t") + b"\x00\x00\x00\x01\x00",  # trailing
        b"\x00\x01" + b"\x00\x05ab",  # string longer than the bytes
        b"\x00\x02" + b"\xff\xff",  # null group
        b"\x00\x02" + _string(b"\xff\xfe"),  # not UTF-8
        b"\x00",
    ],
)
def test_bad_key_bytes_raise_corrupt_offsets_log_error(data: bytes) -> None:
    with pytest.raises(CorruptOffsetsLogError) as raised:
        decode_key(data)
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x05" + struct.pack(">q", 1) + _string(b"") + struct.pack(">q", TS),  # version 5
        b"\x00\x03" + struct.pack(">q", 1),  # truncated
        b"\x00\x03" + struct.pack(">qi", 1, -1) + _string(b"") + struct.pack(">q", TS) + b"x",
    ],
)
def test_bad_value_bytes_raise_corrupt_offsets_log_error(data: bytes) -> None:
    with pytest.raises(CorruptOffsetsLogError):
        decode_offset_value(data)


def test_a_group_lives_in_the_partition_kafka_puts_it_in() -> None:
    # Java: "a".hashCode() == 97; "copier".hashCode() == -1354729774 (abs % 50 == 24).
    assert group_partition("a", 50) == 47
    assert group_partition("copier", 50) == 24
    assert group_partition("copier", 1) == 0
