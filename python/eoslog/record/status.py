"""Status codes shared by the native kernels and the pure-Python twin (docs/style.md rule 4).

The C engine returns these integers from `nogil` code (engine/status.h holds the same
numbers; tests/record/test_layout.py checks that the two agree). Exactly one function,
`eoslog.errors.raise_for_status`, turns a code into an exception, so both twins raise the same
type with the same message for the same input.
"""

from __future__ import annotations

from typing import Final

OK: Final = 0
TRUNCATED_HEADER: Final = 1
BATCH_LENGTH_TOO_SMALL: Final = 2
BAD_MAGIC: Final = 3
UNSUPPORTED_MAGIC: Final = 4
TRUNCATED_BATCH: Final = 5
TRAILING_BYTES: Final = 6
CRC_MISMATCH: Final = 7
BATCH_TOO_LARGE: Final = 8
NONZERO_BASE_OFFSET: Final = 9
CONTROL_FROM_CLIENT: Final = 10
COUNT_MISMATCH: Final = 11
SEQUENCE_WITHOUT_PRODUCER: Final = 12
TRANSACTIONAL_WITHOUT_PRODUCER: Final = 13
UNSUPPORTED_COMPRESSION: Final = 14
BAD_COMPRESSION: Final = 15
DECOMPRESS_FAILED: Final = 16
BAD_VARINT: Final = 17
RECORD_OVERRUN: Final = 18
RECORD_SIZE_MISMATCH: Final = 19
BAD_HEADER_COUNT: Final = 20
BAD_HEADER_KEY: Final = 21
RECORDS_REMAINING: Final = 22
BAD_OFFSET_DELTA: Final = 23
NEGATIVE_COUNT: Final = 24
DECOMPRESSED_TOO_LARGE: Final = 25
BAD_HEADER_KEY_UTF8: Final = 26
BAD_CONTROL_RECORD: Final = 27

# (error class name in eoslog.errors, message). The message names what is wrong in words a
# user can act on; raise_for_status appends the byte position of the batch.
MESSAGES: Final[dict[int, tuple[str, str]]] = {
    TRUNCATED_HEADER: ("CorruptRecordError", "fewer than 61 bytes for a v2 batch header"),
    BATCH_LENGTH_TOO_SMALL: (
        "CorruptRecordError",
        "batch length field is below the 49-byte minimum",
    ),
    BAD_MAGIC: ("CorruptRecordError", "invalid magic byte (not 0, 1 or 2)"),
    UNSUPPORTED_MAGIC: ("InvalidRecordError", "only magic v2 record batches are supported"),
    TRUNCATED_BATCH: ("CorruptRecordError", "batch length runs past the end of the buffer"),
    TRAILING_BYTES: (
        "InvalidRecordError",
        "bytes remain after the batch (exactly one batch expected)",
    ),
    CRC_MISMATCH: ("CorruptRecordError", "CRC-32C mismatch: the batch is corrupt"),
    BATCH_TOO_LARGE: ("RecordTooLargeError", "batch is larger than the allowed maximum"),
    NONZERO_BASE_OFFSET: ("InvalidRecordError", "a batch from a client must have base offset 0"),
    CONTROL_FROM_CLIENT: ("InvalidRecordError", "clients may not write control batches"),
    COUNT_MISMATCH: (
        "InvalidRecordError",
        "record count must be positive and equal to last offset delta + 1",
    ),
    SEQUENCE_WITHOUT_PRODUCER: (
        "InvalidRecordError",
        "invalid sequence: a batch with a producer id needs a base sequence >= 0",
    ),
    TRANSACTIONAL_WITHOUT_PRODUCER: (
        "InvalidRecordError",
        "a transactional batch needs a producer id",
    ),
    UNSUPPORTED_COMPRESSION: (
        "UnsupportedCompressionTypeError",
        "compression codec not supported (eoslog reads and writes none and lz4)",
    ),
    BAD_COMPRESSION: ("CorruptRecordError", "unknown compression codec id"),
    DECOMPRESS_FAILED: ("CorruptRecordError", "compressed records could not be decompressed"),
    BAD_VARINT: ("InvalidRecordError", "malformed varint in a record"),
    RECORD_OVERRUN: ("InvalidRecordError", "record runs past the end of the records section"),
    RECORD_SIZE_MISMATCH: (
        "InvalidRecordError",
        "record length field disagrees with the bytes its fields use",
    ),
    BAD_HEADER_COUNT: ("InvalidRecordError", "invalid record header count"),
    BAD_HEADER_KEY: ("InvalidRecordError", "record header key is null or of negative length"),
    RECORDS_REMAINING: (
        "InvalidRecordError",
        "incorrect declared batch size: bytes remain after the declared record count",
    ),
    # A producer's deltas must run 0, 1, ..., count-1; a reader's must increase from 0
    # (compaction leaves gaps, never a step back).
    BAD_OFFSET_DELTA: (
        "InvalidRecordError",
        "record offset deltas must run 0, 1, ..., count-1 (from a producer) or increase from 0 "
        "up to the batch's last offset delta (in a log)",
    ),
    NEGATIVE_COUNT: ("InvalidRecordError", "negative record count"),
    DECOMPRESSED_TOO_LARGE: (
        "CorruptRecordError",
        "decompressed records exceed the decompressed batch limit",
    ),
    BAD_HEADER_KEY_UTF8: ("InvalidRecordError", "record header key is not valid UTF-8"),
    BAD_CONTROL_RECORD: ("InvalidRecordError", "malformed control record"),
}
