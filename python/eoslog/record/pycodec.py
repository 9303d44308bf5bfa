"""The Kafka v2 record batch codec in pure Python (docs/format.md §1-§4, §10).

The readable twin of eoslog._ext.codec (contract: pyext/codec.pyi): for every input it returns
equal values and raises the same exception type with the same message. EOSLOG_NO_EXTENSIONS=1
selects it. Module functions are pure and thread-safe; a BatchBuilder belongs to one thread.

This module holds the readers and validation and exposes the whole contract (`__all__`); the
rest lives in internal modules beside it: pywalk (framing, the status-failure helpers and the
record walk every reader shares), pycolumns (decode_columns) and pybuilder (BatchBuilder,
build_control_batch, stamp_batch).

Status inside, exceptions outside (docs/style.md rule 4): the private helpers raise
`pywalk._Failure` carrying a status code, and each public function turns it into an eoslog
error with `errors.raise_for_status` (through `pywalk.at_batch`), naming the byte position
where the offending batch starts. Bad bytes raise and change nothing; nothing here allocates by
a length or count it has not checked against the bytes actually present.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from eoslog import limits
from eoslog.record import layout, status
from eoslog.record.pybuilder import BatchBuilder, Headers, build_control_batch, stamp_batch
from eoslog.record.pycolumns import ColumnDecoder, decode_columns
from eoslog.record.pyprimitives import byte_view, check_position
from eoslog.record.pywalk import (
    RecordSpan,
    at_batch,
    check_crc,
    computed_crc,
    exactly_one_batch,
    fail,
    header_at,
    next_batch,
    optional_bytes,
    record_timestamp,
    walk_records,
    whole_batch_at,
    wrap_int64,
)
from eoslog.record.types import BatchHeader, Record, ValidatedBatch

if TYPE_CHECKING:
    from typing_extensions import Buffer

# The contract of pyext/codec.pyi, which the native module exposes too.
__all__ = [
    "BatchBuilder",
    "ColumnDecoder",
    "Headers",
    "batch_crc",
    "batch_records",
    "build_control_batch",
    "decode_columns",
    "iter_headers",
    "read_header",
    "stamp_batch",
    "validate_batch",
]


# --- headers and framing ---------------------------------------------------------------------


def read_header(data: Buffer, position: int = 0) -> BatchHeader:
    """The header of the batch at `position`, without checking its CRC or its records.

    CorruptRecordError: fewer than 61 bytes from position; batch length < 49; magic not 0-2.
    InvalidRecordError: magic 0 or 1 (only v2 is supported). ValueError: negative position."""
    check_position(position)
    view = byte_view(data)
    return at_batch(position, header_at, view, position)


def iter_headers(data: Buffer, position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch from `position` on. Stops without error at a
    partial trailing batch (Kafka's FileLogInputStream rule); a bad length or magic raises as
    read_header does. CRCs are not checked. The iterator holds a view of `data`."""
    # Checked here rather than in the generator, so a bad argument fails at the call.
    check_position(position)
    return _iter_headers(byte_view(data), position)


def _iter_headers(view: memoryview, position: int) -> Iterator[tuple[int, BatchHeader]]:
    while True:
        header = at_batch(position, next_batch, view, position)
        if header is None:
            return
        yield position, header
        position += header.size_in_bytes


def batch_crc(data: Buffer, position: int = 0) -> int:
    """The CRC-32C the batch at `position` should carry (over bytes [21, end)).
    Raises as read_header does, and TRUNCATED_BATCH if the batch is not all there."""
    check_position(position)
    view = byte_view(data)
    header = at_batch(position, whole_batch_at, view, position)
    return computed_crc(view, position, header)


# --- validation and decoding -----------------------------------------------------------------


def _check_client_rules(header: BatchHeader) -> None:
    """What a Kafka leader refuses from a producer (docs/format.md §10.2)."""
    if header.is_control:
        fail(status.CONTROL_FROM_CLIENT)
    count = header.records_count
    if count <= 0 or count != header.last_offset_delta + 1:
        fail(status.COUNT_MISMATCH)
    if header.has_producer_id and header.base_sequence < 0:
        fail(status.SEQUENCE_WITHOUT_PRODUCER)
    # Kafka leaves this to the client's builder; eoslog refuses it so producer state always
    # sees transactional data (docs/format.md §10.2, last note).
    if header.is_transactional and not header.has_producer_id:
        fail(status.TRANSACTIONAL_WITHOUT_PRODUCER)


def _timestamps(header: BatchHeader, spans: list[RecordSpan]) -> tuple[int, int, int]:
    """(max timestamp, offset delta of the first record carrying it, min timestamp other than
    -1 or -1): ValidatedBatch's fields, as the time index and the timestamp rules need."""
    if header.timestamp_type == layout.TIMESTAMP_LOG_APPEND_TIME:
        return header.max_timestamp, header.last_offset_delta, header.max_timestamp
    if not spans:
        return header.max_timestamp, 0, -1
    timestamps = [record_timestamp(header, span) for span in spans]
    largest = max(timestamps)
    stamped = [timestamp for timestamp in timestamps if timestamp != -1]
    smallest = min(stamped) if stamped else -1
    return largest, spans[timestamps.index(largest)].offset_delta, smallest


def _validate(view: memoryview, batch_bytes_max: int, from_client: bool) -> ValidatedBatch:
    header = exactly_one_batch(view)
    if header.size_in_bytes > batch_bytes_max:
        fail(status.BATCH_TOO_LARGE)
    if from_client and header.base_offset != 0:
        fail(status.NONZERO_BASE_OFFSET)
    check_crc(view, 0, header)
    if from_client:
        _check_client_rules(header)
    # The topic's max.message.bytes bounds decompression too: a bomb stops at that limit.
    decompressed_bytes_max = limits.decompressed_bytes_max_for(batch_bytes_max)
    _, spans = walk_records(view, 0, header, True, decompressed_bytes_max)
    return ValidatedBatch(header, *_timestamps(header, spans))


def validate_batch(
    data: Buffer,
    *,
    batch_bytes_max: int = limits.message_bytes_default,
    from_client: bool = True,
) -> ValidatedBatch:
    """Check that `data` is exactly one well-formed v2 batch, as a Kafka leader does on
    append (docs/format.md §10), walking (and decompressing) every record. In order:
    header as read_header; TRUNCATED_BATCH / TRAILING_BYTES (exactly one batch); size >
    batch_bytes_max -> RecordTooLargeError; from a client, base offset != 0; CRC; from a
    client: control batch, count != last offset delta + 1 or count <= 0, producer id >= 0 with
    sequence < 0, transactional without producer id; codec (gzip/snappy/zstd ->
    UnsupportedCompressionTypeError; ids 5-7 -> CorruptRecordError); negative count; every
    record well formed (an lz4 section decompressing past
    limits.decompressed_bytes_max_for(batch_bytes_max) -> CorruptRecordError, before more is
    allocated), offset deltas exactly 0..count-1, header keys valid UTF-8, no bytes
    left over; a control batch holds exactly one record whose key is >= 4 bytes. Changes
    nothing. Errors name byte 0."""
    view = byte_view(data)
    return at_batch(0, _validate, view, batch_bytes_max, from_client)


def _decode_records(view: memoryview, position: int, verify_crc: bool) -> list[Record]:
    header = whole_batch_at(view, position)
    if verify_crc:
        check_crc(view, position, header)
    records, spans = walk_records(view, position, header, client_rules=False)
    decoded = []
    for span in spans:
        headers = tuple(
            (
                # Java's String constructor replaces malformed UTF-8; "replace" matches it.
                bytes(records[key_start : key_start + key_length]).decode("utf-8", "replace"),
                optional_bytes(records, value_start, value_length),
            )
            for key_start, key_length, value_start, value_length in span.headers
        )
        decoded.append(
            Record(
                offset=wrap_int64(header.base_offset + span.offset_delta),
                timestamp=record_timestamp(header, span),
                key=optional_bytes(records, span.key_start, span.key_length),
                value=optional_bytes(records, span.value_start, span.value_length),
                headers=headers,
            )
        )
    return decoded


def batch_records(data: Buffer, position: int = 0, *, verify_crc: bool = True) -> list[Record]:
    """Decode every record of the batch at `position` (decompressing it). Records carry
    absolute offsets and timestamps (LogAppendTime: the batch max timestamp). Header keys are
    decoded as UTF-8 with replacement, as Java's String constructor does. Checks, in order:
    header as read_header, TRUNCATED_BATCH, CRC (if verify_crc), then the record checks of
    validate_batch except its client rules (dense offset deltas, UTF-8 header keys, the
    control-record rule), so batches with offset gaps from Kafka's compaction still read."""
    check_position(position)
    view = byte_view(data)
    return at_batch(position, _decode_records, view, position, verify_crc)
