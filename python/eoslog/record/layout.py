"""The Kafka v2 record batch layout: byte offsets, sizes and attribute bits (docs/format.md §1-§3).

This is the Python statement of the layout; engine/batch_layout.h is the C statement of the
same numbers, and tests/record/test_layout.py checks field by field that the two agree
(docs/style.md rule 1). Every integer in the header is big-endian.
"""

from __future__ import annotations

import struct
from typing import Final

BASE_OFFSET_OFFSET: Final = 0
BATCH_LENGTH_OFFSET: Final = 8
PARTITION_LEADER_EPOCH_OFFSET: Final = 12
MAGIC_OFFSET: Final = 16
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21
LAST_OFFSET_DELTA_OFFSET: Final = 23
BASE_TIMESTAMP_OFFSET: Final = 27
MAX_TIMESTAMP_OFFSET: Final = 35
PRODUCER_ID_OFFSET: Final = 43
PRODUCER_EPOCH_OFFSET: Final = 51
BASE_SEQUENCE_OFFSET: Final = 53
RECORDS_COUNT_OFFSET: Final = 57
RECORDS_OFFSET: Final = 61

# The 8-byte offset and 4-byte length that start every log entry (Records.LOG_OVERHEAD).
LOG_OVERHEAD: Final = 12
HEADER_SIZE: Final = RECORDS_OFFSET
# batchLength counts the bytes after itself, so the smallest legal value is 61 - 12.
BATCH_LENGTH_MIN: Final = HEADER_SIZE - LOG_OVERHEAD

MAGIC_V2: Final = 2

COMPRESSION_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08
TRANSACTIONAL_MASK: Final = 0x10
CONTROL_MASK: Final = 0x20
DELETE_HORIZON_MASK: Final = 0x40

COMPRESSION_NONE: Final = 0
COMPRESSION_GZIP: Final = 1
COMPRESSION_SNAPPY: Final = 2
COMPRESSION_LZ4: Final = 3
COMPRESSION_ZSTD: Final = 4

TIMESTAMP_CREATE_TIME: Final = 0
TIMESTAMP_LOG_APPEND_TIME: Final = 1

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1
NO_TIMESTAMP: Final = -1

# Control records (docs/format.md §3): key = version int16 + type int16; an end-transaction marker's
# value = version int16 + coordinator epoch int32. eoslog.record.control encodes and decodes them.
CONTROL_ABORT: Final = 0
CONTROL_COMMIT: Final = 1
CONTROL_KEY_VERSION: Final = 0
CONTROL_KEY_TYPE_OFFSET: Final = 2
CONTROL_KEY_SIZE: Final = 4
END_TXN_MARKER_VERSION: Final = 0
END_TXN_MARKER_EPOCH_OFFSET: Final = 2
END_TXN_MARKER_VALUE_SIZE: Final = 6
# The whole marker batch Kafka writes: 61-byte header + one 17-byte record.
END_TXN_MARKER_BATCH_SIZE: Final = 78

# batchLength, the int32 at BATCH_LENGTH_OFFSET: the bytes after itself, so a batch occupies
# LOG_OVERHEAD + batchLength bytes (docs/format.md §1.1).
BATCH_LENGTH_STRUCT: Final = struct.Struct(">i")


def batch_size_at(buffer: bytes | bytearray | memoryview, at: int = 0) -> int:
    """The size in bytes the batch starting at `at` of buffer claims (LOG_OVERHEAD + its
    batchLength, as stored: unchecked, possibly negative). The buffer must hold at least
    LOG_OVERHEAD bytes from `at` (struct.error otherwise)."""
    length: int = BATCH_LENGTH_STRUCT.unpack_from(buffer, at + BATCH_LENGTH_OFFSET)[0]
    return LOG_OVERHEAD + length


# The header fields after the CRC-free prefix, as one struct (big-endian, no padding).
HEADER_STRUCT: Final = struct.Struct(">qiibIhiqqqhii")
assert HEADER_STRUCT.size == HEADER_SIZE

# Kafka's LZ4 frame header for magic 1 and 2: magic, FLG 0x60, BD 0x40 (64 KiB blocks), HC.
LZ4_FRAME_HEADER: Final = b"\x04\x22\x4d\x18\x60\x40\x82"
