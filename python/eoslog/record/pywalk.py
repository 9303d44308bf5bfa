"""Framing and the record walk of the pure-Python codec twin (docs/format.md §1-§2).

Internal to eoslog.record.pycodec and its helper modules (pycolumns, pybuilder); the contract
is pyext/codec.pyi, exposed by pycodec. The readers share what lives here: the status-failure
helpers, header and framing checks, the CRC check, and the walk over a batch's records.
Imports nothing from pycodec, pycolumns or pybuilder, so there is no cycle.

Status inside, exceptions outside (docs/style.md rule 4): the helpers here raise `_Failure`
carrying a status code (through `fail`), and `at_batch` turns it into an eoslog error with
`errors.raise_for_status`, naming the byte position where the offending batch starts. Bad bytes
raise and change nothing; nothing here allocates by a length or count it has not checked
against the bytes actually present.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final, NamedTuple, NoReturn, ParamSpec, TypeVar

# Imported as modules, not by name: eoslog.errors imports eoslog.record, which loads this twin
# while eoslog.errors is still initialising, so its names are looked up at call time.
from eoslog import errors, limits
from eoslog.record import compression, layout, status
from eoslog.record.pyprimitives import INT64_MIN, UINT32_MASK, UINT64_MASK, crc32c
from eoslog.record.types import BatchHeader

# A records section: a view into the caller's buffer, or the bytes decompressed from it.
Section = bytes | memoryview
_T = TypeVar("_T")
_P = ParamSpec("_P")

_HEADER: Final = layout.HEADER_STRUCT
_INT32: Final = struct.Struct(">i")


# Kafka's FileLogInputStream treats fewer than 17 bytes (offset, length and magic) as the end of
# the data, and only then reads the length (docs/format.md §1.5).
_HEADER_SIZE_UP_TO_MAGIC: Final = 17


class _Failure(Exception):
    """A status code on its way to the public function that names the batch position."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def fail(code: int) -> NoReturn:
    """Abandon the current batch with status `code` (caught by at_batch)."""
    raise _Failure(code)


def at_batch(position: int, call: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """Run `call`; a status failure becomes the eoslog error for the batch at `position`."""
    try:
        return call(*args, **kwargs)
    except _Failure as failure:
        code = failure.code
    # Raised outside the except block so the user sees one error, not a chained pair.
    errors.raise_for_status(code, position)


def wrap_int64(value: int) -> int:
    """value as Java's long arithmetic leaves it: base + delta wraps, as in Kafka's reader."""
    return ((value - INT64_MIN) & UINT64_MASK) + INT64_MIN


# --- headers and framing ---------------------------------------------------------------------


def header_at(view: memoryview, position: int) -> BatchHeader:
    """The header at `position`, in read_header's check order."""
    if len(view) - position < layout.HEADER_SIZE:
        fail(status.TRUNCATED_HEADER)
    header = BatchHeader._make(_HEADER.unpack_from(view, position))
    if header.batch_length < layout.BATCH_LENGTH_MIN:
        fail(status.BATCH_LENGTH_TOO_SMALL)
    if not 0 <= header.magic <= layout.MAGIC_V2:
        fail(status.BAD_MAGIC)
    if header.magic != layout.MAGIC_V2:
        fail(status.UNSUPPORTED_MAGIC)
    return header


def whole_batch_at(view: memoryview, position: int) -> BatchHeader:
    """The header of a batch that must lie whole inside the buffer from `position`."""
    header = header_at(view, position)
    if position + header.size_in_bytes > len(view):
        fail(status.TRUNCATED_BATCH)
    return header


def exactly_one_batch(view: memoryview) -> BatchHeader:
    """The header of the buffer's one batch, which must fill it exactly."""
    header = header_at(view, 0)
    if header.size_in_bytes > len(view):
        fail(status.TRUNCATED_BATCH)
    if header.size_in_bytes < len(view):
        fail(status.TRAILING_BYTES)
    return header


def next_batch(view: memoryview, position: int) -> BatchHeader | None:
    """The header of the whole batch at `position`, or None where the data ends or only part of
    a batch remains (a torn tail: Kafka's FileLogInputStream stops there without error).
    A length field below the minimum, or a bad magic, raises as read_header does."""
    remaining = len(view) - position
    if remaining < _HEADER_SIZE_UP_TO_MAGIC:
        return None
    (batch_length,) = _INT32.unpack_from(view, position + layout.BATCH_LENGTH_OFFSET)
    if batch_length < layout.BATCH_LENGTH_MIN:
        fail(status.BATCH_LENGTH_TOO_SMALL)
    if layout.LOG_OVERHEAD + batch_length > remaining:
        return None
    return header_at(view, position)


def computed_crc(view: memoryview, position: int, header: BatchHeader) -> int:
    """The CRC-32C the whole batch at `position` should carry (over bytes [21, end))."""
    return crc32c(view[position + layout.ATTRIBUTES_OFFSET : position + header.size_in_bytes])


def check_crc(view: memoryview, position: int, header: BatchHeader) -> None:
    """CRC_MISMATCH unless the whole batch at `position` carries its computed CRC."""
    if computed_crc(view, position, header) != header.crc:
        fail(status.CRC_MISMATCH)


# --- the record walk -------------------------------------------------------------------------


class RecordSpan(NamedTuple):
    """Where one record's fields lie in the records buffer; a length of -1 means null."""

    timestamp_delta: int
    offset_delta: int
    key_start: int
    key_length: int
    value_start: int
    value_length: int
    # (key start, key length, value start, value length) per header.
    headers: tuple[tuple[int, int, int, int], ...]


def _read_unsigned(records: Section, cursor: int, end: int, bytes_max: int) -> tuple[int, int]:
    """An LEB128 group that must end before `end`: RECORD_OVERRUN if the bytes run out first,
    BAD_VARINT if it is longer than Kafka allows (5 bytes for a varint, 10 for a varlong)."""
    start = cursor
    limit = min(end, cursor + bytes_max)
    unsigned = 0
    shift = 0
    while cursor < limit:
        byte = records[cursor]
        cursor += 1
        unsigned |= (byte & 0x7F) << shift
        if byte < 0x80:
            return unsigned, cursor
        shift += 7
    fail(status.BAD_VARINT if cursor - start == bytes_max else status.RECORD_OVERRUN)


def _read_varint(records: Section, cursor: int, end: int) -> tuple[int, int]:
    unsigned, cursor = _read_unsigned(records, cursor, end, 5)
    # Bits past bit 31 of a 5th byte are dropped, as Kafka's ByteUtils.readUnsignedVarint does.
    unsigned &= UINT32_MASK
    return (unsigned >> 1) ^ -(unsigned & 1), cursor


def _read_varlong(records: Section, cursor: int, end: int) -> tuple[int, int]:
    unsigned, cursor = _read_unsigned(records, cursor, end, 10)
    unsigned &= UINT64_MASK
    return (unsigned >> 1) ^ -(unsigned & 1), cursor


def _read_field(records: Section, cursor: int, end: int) -> tuple[int, int, int]:
    """(start, length or -1 for null, next cursor) of a length-prefixed byte field. Any
    negative length is null, as Kafka's Utils.readBytes reads it."""
    length, cursor = _read_varint(records, cursor, end)
    if length < 0:
        return cursor, -1, cursor
    if cursor + length > end:
        fail(status.RECORD_OVERRUN)
    return cursor, length, cursor + length


def _read_headers(
    records: Section, cursor: int, end: int
) -> tuple[tuple[tuple[int, int, int, int], ...], int]:
    count, cursor = _read_varint(records, cursor, end)
    # Each header takes at least one byte, so a count above the bytes left cannot be right
    # (DefaultRecord.readFrom); checking first keeps a forged count from driving the loop.
    if count < 0 or count > end - cursor:
        fail(status.BAD_HEADER_COUNT)
    headers = []
    for _ in range(count):
        key_length, cursor = _read_varint(records, cursor, end)
        if key_length < 0:
            fail(status.BAD_HEADER_KEY)
        key_start = cursor
        cursor += key_length
        if cursor > end:
            fail(status.RECORD_OVERRUN)
        value_start, value_length, cursor = _read_field(records, cursor, end)
        headers.append((key_start, key_length, value_start, value_length))
    return tuple(headers), cursor


def _check_header_keys_utf8(
    records: Section, headers: tuple[tuple[int, int, int, int], ...]
) -> None:
    for key_start, key_length, _, _ in headers:
        try:
            bytes(records[key_start : key_start + key_length]).decode("utf-8")
        except UnicodeDecodeError:
            fail(status.BAD_HEADER_KEY_UTF8)


def _read_record(
    records: Section, cursor: int, end: int, index: int, client_rules: bool
) -> tuple[RecordSpan, int]:
    """One record (docs/format.md §2) starting at `cursor` in a records section ending at `end`;
    its fields must use exactly the bytes its length field claims."""
    if cursor >= end:
        fail(status.RECORD_OVERRUN)  # the section ended before `count` records
    length, cursor = _read_varint(records, cursor, end)
    if length < 0:
        fail(status.RECORD_SIZE_MISMATCH)
    record_end = cursor + length
    if record_end > end:
        fail(status.RECORD_OVERRUN)
    if cursor >= record_end:
        fail(status.RECORD_OVERRUN)
    cursor += 1  # the attributes byte, unused in v2
    timestamp_delta, cursor = _read_varlong(records, cursor, record_end)
    offset_delta, cursor = _read_varint(records, cursor, record_end)
    key_start, key_length, cursor = _read_field(records, cursor, record_end)
    value_start, value_length, cursor = _read_field(records, cursor, record_end)
    headers, cursor = _read_headers(records, cursor, record_end)
    if cursor != record_end:
        fail(status.RECORD_SIZE_MISMATCH)
    # The client rules once the record parsed whole, in the native walk's order
    # (engine/batch.c walk_record_exact): its structure, then its offset delta, then its header
    # keys' UTF-8, so bytes with several faults get the same status from both twins.
    if client_rules:
        if offset_delta != index:
            fail(status.BAD_OFFSET_DELTA)
        _check_header_keys_utf8(records, headers)
    span = RecordSpan(
        timestamp_delta, offset_delta, key_start, key_length, value_start, value_length, headers
    )
    return span, cursor


def _records_section(
    view: memoryview, position: int, header: BatchHeader, decompressed_bytes_max: int
) -> Section:
    """The batch's records, decompressed if need be (DECOMPRESSED_TOO_LARGE past
    decompressed_bytes_max, before more is allocated). Checks the codec, then the count."""
    codec = header.compression
    if codec > layout.COMPRESSION_ZSTD:
        fail(status.BAD_COMPRESSION)
    if header.records_count < 0:
        fail(status.NEGATIVE_COUNT)
    section = view[position + layout.RECORDS_OFFSET : position + header.size_in_bytes]
    if codec == layout.COMPRESSION_NONE:
        return section
    records = compression.decompress(codec, section, decompressed_bytes_max)
    if isinstance(records, int):
        fail(records)
    return records


def walk_records(
    view: memoryview,
    position: int,
    header: BatchHeader,
    client_rules: bool,
    decompressed_bytes_max: int = limits.decompressed_batch_bytes_max,
) -> tuple[Section, list[RecordSpan]]:
    """Every record of the whole batch at `position`, checked as Kafka's reader checks them.
    With client_rules (validation of an append) also: offset deltas exactly 0..count-1, header
    keys valid UTF-8, and the control-batch rule (one record, key of at least 4 bytes). Readers
    skip those, so batches Kafka's compaction left with gaps still read; without them the
    offset deltas must still increase from 0 and end at most at the batch's last offset
    delta."""
    records = _records_section(view, position, header, decompressed_bytes_max)
    end = len(records)
    cursor = 0
    spans = []
    previous_delta = -1
    # range() is lazy, so a forged count costs nothing: the walk fails when the bytes end.
    for index in range(header.records_count):
        span, cursor = _read_record(records, cursor, end, index, client_rules)
        # A reader's rule (the native twin's check_offset_delta): offset deltas increase from
        # 0 and stay within the batch's last offset delta, so a batch's offsets never go
        # backwards and never reach past its end into the next batch's.
        if not client_rules and not previous_delta < span.offset_delta <= header.last_offset_delta:
            fail(status.BAD_OFFSET_DELTA)
        previous_delta = span.offset_delta
        spans.append(span)
    if cursor != end:
        fail(status.RECORDS_REMAINING)
    # The deltas ran 0..count-1; readers refuse one past the last offset delta (above).
    if client_rules and spans and header.last_offset_delta < len(spans) - 1:
        fail(status.BAD_OFFSET_DELTA)
    if (
        client_rules
        and header.is_control
        and (len(spans) != 1 or spans[0].key_length < layout.CONTROL_KEY_SIZE)
    ):
        fail(status.BAD_CONTROL_RECORD)
    return records, spans


def record_timestamp(header: BatchHeader, span: RecordSpan) -> int:
    """The absolute timestamp of the record at `span` in the batch under `header`."""
    # With LogAppendTime every record carries the broker's time (DefaultRecord.readFrom).
    if header.timestamp_type == layout.TIMESTAMP_LOG_APPEND_TIME:
        return header.max_timestamp
    return wrap_int64(header.base_timestamp + span.timestamp_delta)


def optional_bytes(records: Section, start: int, length: int) -> bytes | None:
    """A copy of the field at [start, start + length), or None for a null (length -1)."""
    if length < 0:
        return None
    return bytes(records[start : start + length])
