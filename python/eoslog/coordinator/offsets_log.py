"""The `__consumer_offsets` records: key and value bytes (docs/coordinator.md §3.5, §6.1).

Kafka writes them with its generated-message encoding, prefixed by an int16 version, from
OffsetCommitKey.json, OffsetCommitValue.json and GroupMetadataKey.json in
group-coordinator/src/main/resources/common/message/. The key's version says what the record
is: 0 and 1 an offset commit (group, topic, partition; the same layout), 2 group metadata
(group only). The OffsetCommit value:

| version | fields after the version                                                  |
|---------|---------------------------------------------------------------------------|
| 0       | offset int64, metadata string, commitTimestamp int64                      |
| 1       | offset int64, metadata string, commitTimestamp int64, expireTimestamp int64 |
| 2       | offset int64, metadata string, commitTimestamp int64                      |
| 3       | offset int64, leaderEpoch int32, metadata string, commitTimestamp int64   |
| 4       | as 3, flexible: compact string, then a tagged-field section               |

Kafka writes value version 3 unless an expire timestamp is set (then 1); eoslog writes 3. A
null value is a tombstone (the committed offset deleted). Decoding reads every version above.

Every function here is pure and thread-safe. Bad bytes raise CorruptOffsetsLogError (a
ValueError); bad arguments to an encoder raise ValueError. Both change nothing.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from eoslog.coordinator.message_fields import INT16, INT32, INT64, Reader, pack, string, uvarint
from eoslog.coordinator.transaction_log import partition_for
from eoslog.errors import CorruptOffsetsLogError

CONSUMER_OFFSETS_TOPIC: Final = "__consumer_offsets"
# The key versions (Kafka's coordinator record types): 0 and 1 are offset commits, 2 group
# metadata.
OFFSET_COMMIT_KEY_VERSIONS: Final = (0, 1)
OFFSET_COMMIT_KEY_VERSION_WRITTEN: Final = 1
GROUP_METADATA_KEY_VERSION: Final = 2
VALUE_VERSION_WRITTEN: Final = 3
VALUE_VERSIONS: Final = (0, 1, 2, 3, 4)
VALUE_VERSION_FLEXIBLE: Final = 4
NO_LEADER_EPOCH: Final = -1
NO_EXPIRE_TIMESTAMP: Final = -1


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    """One committed offset, field for field as OffsetCommitValue.json names it."""

    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = NO_LEADER_EPOCH
    expire_timestamp: int = NO_EXPIRE_TIMESTAMP


def group_partition(group: str, partitions: int) -> int:
    """The `__consumer_offsets` partition of a group: Kafka's Utils.abs(hashCode) % count,
    the rule `__transaction_state` uses for transactional ids."""
    return partition_for(group, partitions)


# --- encoding -------------------------------------------------------------------------------


def encode_offset_key(key: OffsetCommitKey) -> bytes:
    """The record key of an offset commit (key version 1). ValueError for a string longer
    than 32767 UTF-8 bytes or a partition outside int32."""
    return (
        INT16.pack(OFFSET_COMMIT_KEY_VERSION_WRITTEN)
        + string(key.group, flexible=False)
        + string(key.topic, flexible=False)
        + pack(INT32, key.partition, "partition")
    )


def encode_group_key(key: GroupMetadataKey) -> bytes:
    return INT16.pack(GROUP_METADATA_KEY_VERSION) + string(key.group, flexible=False)


def encode_offset_value(
    value: OffsetCommitValue | None, version: int = VALUE_VERSION_WRITTEN
) -> bytes | None:
    """The record value in `version` (default 3, as Kafka writes it); None for a tombstone.
    ValueError for a version that cannot carry the value (an expire timestamp outside
    version 1, a leader epoch before version 3), as Kafka's generated writer refuses."""
    if value is None:
        return None
    if version not in VALUE_VERSIONS:
        raise ValueError(f"offset commit value version {version} is not one of {VALUE_VERSIONS}")
    if value.expire_timestamp != NO_EXPIRE_TIMESTAMP and version != 1:
        raise ValueError(f"value version {version} cannot carry an expire timestamp")
    if value.leader_epoch != NO_LEADER_EPOCH and version < 3:
        raise ValueError(f"value version {version} cannot carry a leader epoch")
    flexible = version >= VALUE_VERSION_FLEXIBLE
    out = bytearray(INT16.pack(version))
    out += pack(INT64, value.offset, "offset")
    if version >= 3:
        out += pack(INT32, value.leader_epoch, "leader epoch")
    out += string(value.metadata, flexible)
    out += pack(INT64, value.commit_timestamp, "commit timestamp")
    if version == 1:
        out += pack(INT64, value.expire_timestamp, "expire timestamp")
    if flexible:
        out += uvarint(0)  # no tagged fields
    return bytes(out)


# --- decoding -------------------------------------------------------------------------------


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey:
    """What a record key names. CorruptOffsetsLogError for bad bytes or a key version this
    code does not know (3 and up belong to other group types, which eoslog never writes)."""
    reader = Reader(data, "consumer offsets key", CorruptOffsetsLogError)
    version = reader.fixed(INT16)
    if version in OFFSET_COMMIT_KEY_VERSIONS:
        group = reader.string(flexible=False)
        topic = reader.string(flexible=False)
        key: OffsetCommitKey | GroupMetadataKey = OffsetCommitKey(group, topic, reader.fixed(INT32))
    elif version == GROUP_METADATA_KEY_VERSION:
        key = GroupMetadataKey(reader.string(flexible=False))
    else:
        raise reader.corrupt(f"unknown key version {version}")
    reader.finish()
    return key


def decode_offset_value(data: bytes | None) -> OffsetCommitValue | None:
    """An offset commit's value, or None for a tombstone (a null value)."""
    if data is None:
        return None
    return _decode_written(data) or decode_offset_value_read(data)


def decode_offset_value_read(data: bytes) -> OffsetCommitValue:
    """decode_offset_value's field-by-field walk, for every version and every damage (the
    twin that tests hold the written version's fast path against)."""
    reader = Reader(data, "offset commit value", CorruptOffsetsLogError)
    version = reader.fixed(INT16)
    if version not in VALUE_VERSIONS:
        raise reader.corrupt(f"unknown value version {version}")
    flexible = version >= VALUE_VERSION_FLEXIBLE
    offset = reader.fixed(INT64)
    leader_epoch = reader.fixed(INT32) if version >= 3 else NO_LEADER_EPOCH
    metadata = reader.string(flexible)
    commit_timestamp = reader.fixed(INT64)
    expire_timestamp = reader.fixed(INT64) if version == 1 else NO_EXPIRE_TIMESTAMP
    if flexible:
        reader.skip_tagged_fields()
    reader.finish()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


# The version eoslog writes (3), decoded by offsets into the bytes: the open replays every
# record, and the Reader's field-by-field walk was most of its cost. Anything else, damage
# included, goes the Reader's way, which names the problem.
_WRITTEN_HEAD: Final = struct.Struct(">hqih")  # version, offset, leader epoch, metadata length


def _decode_written(data: bytes) -> OffsetCommitValue | None:
    """The value in `data` if it is a clean version-3 value; None otherwise."""
    try:
        version, offset, leader_epoch, length = _WRITTEN_HEAD.unpack_from(data)
        if version != VALUE_VERSION_WRITTEN or length < 0:
            return None
        end = _WRITTEN_HEAD.size + length
        if end + INT64.size != len(data):
            return None
        metadata = data[_WRITTEN_HEAD.size : end].decode("utf-8")
        (commit_timestamp,) = INT64.unpack_from(data, end)
    except (struct.error, UnicodeDecodeError):
        return None
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch)
