"""The Kafka v2 record batch codec in pure Python (FORMAT.md §1-§4, §10).

The readable twin of eoslog._ext.codec (contract: pyext/codec.pyi): for every input it returns
equal values and raises the same exception type with the same message. EOSLOG_NO_EXTENSIONS=1
selects it. Module functions are pure and thread-safe; a BatchBuilder belongs to one thread.

Status inside, exceptions outside (STYLE.md rule 4): the private helpers raise `_Failure`
carrying a status code, and each public function turns it into an eoslog error with
`errors.raise_for_status`, naming the byte position where the offending batch starts. Bad bytes
raise and change nothing; nothing here allocates by a length or count it has not checked
against the bytes actually present.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Final, NamedTuple, NoReturn, ParamSpec, TypeVar

import numpy as np

# Imported as modules, not by name: eoslog.errors imports eoslog.record, which loads this twin
# while eoslog.errors is still initialising, so its names are looked up at call time.
from eoslog import errors, limits
from eoslog.record import layout, lz4frame, status
from eoslog.record.columns import ColumnarRecords, RecordHeaders
from eoslog.record.pyprimitives import (
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    UINT32_MASK,
    UINT64_MASK,
    byte_view,
    check_position,
    crc32c,
    encode_varint,
    encode_varlong,
)
from eoslog.record.types import BatchHeader, Record, ValidatedBatch

if TYPE_CHECKING:
    from typing_extensions import Buffer

Headers = Sequence[tuple[str, bytes | None]]
# A records section: a view into the caller's buffer, or the bytes lz4 decompressed.
_Section = bytes | memoryview
_T = TypeVar("_T")
_P = ParamSpec("_P")

_HEADER: Final = layout.HEADER_STRUCT
_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")
_UINT32: Final = struct.Struct(">I")
_NULL_LENGTH: Final = b"\x01"  # encode_varint(-1): Kafka's null key, value or header value
# Control record key = version 0 + type; end-transaction marker value = version 0 + epoch.
_CONTROL_KEY: Final = struct.Struct(">hh")
_END_TXN_MARKER_VALUE: Final = struct.Struct(">hi")
_CLIENT_UNSUPPORTED_CODECS: Final = (
    layout.COMPRESSION_GZIP,
    layout.COMPRESSION_SNAPPY,
    layout.COMPRESSION_ZSTD,
)


# Kafka's FileLogInputStream treats fewer than 17 bytes (offset, length and magic) as the end of
# the data, and only then reads the length (FORMAT.md §1.5).
_HEADER_SIZE_UP_TO_MAGIC: Final = 17


class _Failure(Exception):
    """A status code on its way to the public function that names the batch position."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _fail(code: int) -> NoReturn:
    raise _Failure(code)


def _at_batch(position: int, call: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """Run `call`; a status failure becomes the eoslog error for the batch at `position`."""
    try:
        return call(*args, **kwargs)
    except _Failure as failure:
        code = failure.code
    # Raised outside the except block so the user sees one error, not a chained pair.
    errors.raise_for_status(code, position)


def _wrap_int64(value: int) -> int:
    """value as Java's long arithmetic leaves it: base + delta wraps, as in Kafka's reader."""
    return ((value - INT64_MIN) & UINT64_MASK) + INT64_MIN


def _check_range(name: str, value: int, low: int, high: int, bits: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name} must fit in int{bits}, got {value}")


# --- headers and framing ---------------------------------------------------------------------


def _header_at(view: memoryview, position: int) -> BatchHeader:
    """The header at `position`, in read_header's check order."""
    if len(view) - position < layout.HEADER_SIZE:
        _fail(status.TRUNCATED_HEADER)
    header = BatchHeader._make(_HEADER.unpack_from(view, position))
    if header.batch_length < layout.BATCH_LENGTH_MIN:
        _fail(status.BATCH_LENGTH_TOO_SMALL)
    if not 0 <= header.magic <= layout.MAGIC_V2:
        _fail(status.BAD_MAGIC)
    if header.magic != layout.MAGIC_V2:
        _fail(status.UNSUPPORTED_MAGIC)
    return header


def _whole_batch_at(view: memoryview, position: int) -> BatchHeader:
    """The header of a batch that must lie whole inside the buffer from `position`."""
    header = _header_at(view, position)
    if position + header.size_in_bytes > len(view):
        _fail(status.TRUNCATED_BATCH)
    return header


def _exactly_one_batch(view: memoryview) -> BatchHeader:
    """The header of the buffer's one batch, which must fill it exactly."""
    header = _header_at(view, 0)
    if header.size_in_bytes > len(view):
        _fail(status.TRUNCATED_BATCH)
    if header.size_in_bytes < len(view):
        _fail(status.TRAILING_BYTES)
    return header


def _next_batch(view: memoryview, position: int) -> BatchHeader | None:
    """The header of the whole batch at `position`, or None where the data ends or only part of
    a batch remains (a torn tail: Kafka's FileLogInputStream stops there without error).
    A length field below the minimum, or a bad magic, raises as read_header does."""
    remaining = len(view) - position
    if remaining < _HEADER_SIZE_UP_TO_MAGIC:
        return None
    (batch_length,) = _INT32.unpack_from(view, position + layout.BATCH_LENGTH_OFFSET)
    if batch_length < layout.BATCH_LENGTH_MIN:
        _fail(status.BATCH_LENGTH_TOO_SMALL)
    if layout.LOG_OVERHEAD + batch_length > remaining:
        return None
    return _header_at(view, position)


def _batch_crc(view: memoryview, position: int, header: BatchHeader) -> int:
    return crc32c(view[position + layout.ATTRIBUTES_OFFSET : position + header.size_in_bytes])


def _check_crc(view: memoryview, position: int, header: BatchHeader) -> None:
    if _batch_crc(view, position, header) != header.crc:
        _fail(status.CRC_MISMATCH)


def read_header(data: Buffer, position: int = 0) -> BatchHeader:
    """The header of the batch at `position`, without checking its CRC or its records.

    CorruptRecordError: fewer than 61 bytes from position; batch length < 49; magic not 0-2.
    InvalidRecordError: magic 0 or 1 (only v2 is supported). ValueError: negative position."""
    check_position(position)
    view = byte_view(data)
    return _at_batch(position, _header_at, view, position)


def iter_headers(data: Buffer, position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch from `position` on. Stops without error at a
    partial trailing batch (Kafka's FileLogInputStream rule); a bad length or magic raises as
    read_header does. CRCs are not checked. The iterator holds a view of `data`."""
    # Checked here rather than in the generator, so a bad argument fails at the call.
    check_position(position)
    return _iter_headers(byte_view(data), position)


def _iter_headers(view: memoryview, position: int) -> Iterator[tuple[int, BatchHeader]]:
    while True:
        header = _at_batch(position, _next_batch, view, position)
        if header is None:
            return
        yield position, header
        position += header.size_in_bytes


def batch_crc(data: Buffer, position: int = 0) -> int:
    """The CRC-32C the batch at `position` should carry (over bytes [21, end)).
    Raises as read_header does, and TRUNCATED_BATCH if the batch is not all there."""
    check_position(position)
    view = byte_view(data)
    header = _at_batch(position, _whole_batch_at, view, position)
    return _batch_crc(view, position, header)


# --- the record walk -------------------------------------------------------------------------


class _RecordSpan(NamedTuple):
    """Where one record's fields lie in the records buffer; a length of -1 means null."""

    timestamp_delta: int
    offset_delta: int
    key_start: int
    key_length: int
    value_start: int
    value_length: int
    # (key start, key length, value start, value length) per header.
    headers: tuple[tuple[int, int, int, int], ...]


def _read_unsigned(records: _Section, cursor: int, end: int, bytes_max: int) -> tuple[int, int]:
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
    _fail(status.BAD_VARINT if cursor - start == bytes_max else status.RECORD_OVERRUN)


def _read_varint(records: _Section, cursor: int, end: int) -> tuple[int, int]:
    unsigned, cursor = _read_unsigned(records, cursor, end, 5)
    # Bits past bit 31 of a 5th byte are dropped, as Kafka's ByteUtils.readUnsignedVarint does.
    unsigned &= UINT32_MASK
    return (unsigned >> 1) ^ -(unsigned & 1), cursor


def _read_varlong(records: _Section, cursor: int, end: int) -> tuple[int, int]:
    unsigned, cursor = _read_unsigned(records, cursor, end, 10)
    unsigned &= UINT64_MASK
    return (unsigned >> 1) ^ -(unsigned & 1), cursor


def _read_field(records: _Section, cursor: int, end: int) -> tuple[int, int, int]:
    """(start, length or -1 for null, next cursor) of a length-prefixed byte field. Any
    negative length is null, as Kafka's Utils.readBytes reads it."""
    length, cursor = _read_varint(records, cursor, end)
    if length < 0:
        return cursor, -1, cursor
    if cursor + length > end:
        _fail(status.RECORD_OVERRUN)
    return cursor, length, cursor + length


def _read_headers(
    records: _Section, cursor: int, end: int, check_utf8: bool
) -> tuple[tuple[tuple[int, int, int, int], ...], int]:
    count, cursor = _read_varint(records, cursor, end)
    # Each header takes at least one byte, so a count above the bytes left cannot be right
    # (DefaultRecord.readFrom); checking first keeps a forged count from driving the loop.
    if count < 0 or count > end - cursor:
        _fail(status.BAD_HEADER_COUNT)
    headers = []
    for _ in range(count):
        key_length, cursor = _read_varint(records, cursor, end)
        if key_length < 0:
            _fail(status.BAD_HEADER_KEY)
        key_start = cursor
        cursor += key_length
        if cursor > end:
            _fail(status.RECORD_OVERRUN)
        if check_utf8:
            try:
                bytes(records[key_start:cursor]).decode("utf-8")
            except UnicodeDecodeError:
                _fail(status.BAD_HEADER_KEY_UTF8)
        value_start, value_length, cursor = _read_field(records, cursor, end)
        headers.append((key_start, key_length, value_start, value_length))
    return tuple(headers), cursor


def _read_record(
    records: _Section, cursor: int, end: int, index: int, client_rules: bool
) -> tuple[_RecordSpan, int]:
    """One record (FORMAT.md §2) starting at `cursor` in a records section ending at `end`;
    its fields must use exactly the bytes its length field claims."""
    if cursor >= end:
        _fail(status.RECORD_OVERRUN)  # the section ended before `count` records
    length, cursor = _read_varint(records, cursor, end)
    if length < 0:
        _fail(status.RECORD_SIZE_MISMATCH)
    record_end = cursor + length
    if record_end > end:
        _fail(status.RECORD_OVERRUN)
    if cursor >= record_end:
        _fail(status.RECORD_OVERRUN)
    cursor += 1  # the attributes byte, unused in v2
    timestamp_delta, cursor = _read_varlong(records, cursor, record_end)
    offset_delta, cursor = _read_varint(records, cursor, record_end)
    key_start, key_length, cursor = _read_field(records, cursor, record_end)
    value_start, value_length, cursor = _read_field(records, cursor, record_end)
    headers, cursor = _read_headers(records, cursor, record_end, client_rules)
    if cursor != record_end:
        _fail(status.RECORD_SIZE_MISMATCH)
    # Checked once the record parsed whole, so a malformed record reports its structure first.
    if client_rules and offset_delta != index:
        _fail(status.BAD_OFFSET_DELTA)
    span = _RecordSpan(
        timestamp_delta, offset_delta, key_start, key_length, value_start, value_length, headers
    )
    return span, cursor


def _records_section(view: memoryview, position: int, header: BatchHeader) -> _Section:
    """The batch's records, decompressed if need be. Checks the codec, then the count."""
    codec = header.compression
    if codec in _CLIENT_UNSUPPORTED_CODECS:
        _fail(status.UNSUPPORTED_COMPRESSION)
    if codec > layout.COMPRESSION_ZSTD:
        _fail(status.BAD_COMPRESSION)
    if header.records_count < 0:
        _fail(status.NEGATIVE_COUNT)
    section = view[position + layout.RECORDS_OFFSET : position + header.size_in_bytes]
    if codec == layout.COMPRESSION_NONE:
        return section
    records = lz4frame.decompress(section, limits.decompressed_batch_bytes_max)
    if isinstance(records, int):
        _fail(records)
    return records


def _walk_records(
    view: memoryview, position: int, header: BatchHeader, client_rules: bool
) -> tuple[_Section, list[_RecordSpan]]:
    """Every record of the whole batch at `position`, checked as Kafka's reader checks them.
    With client_rules (validation of an append) also: offset deltas exactly 0..count-1, header
    keys valid UTF-8, and the control-batch rule (one record, key of at least 4 bytes). Readers
    skip those, so batches Kafka's compaction left with gaps still read."""
    records = _records_section(view, position, header)
    end = len(records)
    cursor = 0
    spans = []
    # range() is lazy, so a forged count costs nothing: the walk fails when the bytes end.
    for index in range(header.records_count):
        span, cursor = _read_record(records, cursor, end, index, client_rules)
        spans.append(span)
    if cursor != end:
        _fail(status.RECORDS_REMAINING)
    if (
        client_rules
        and header.is_control
        and (len(spans) != 1 or spans[0].key_length < layout.CONTROL_KEY_SIZE)
    ):
        _fail(status.BAD_CONTROL_RECORD)
    return records, spans


def _timestamp(header: BatchHeader, span: _RecordSpan) -> int:
    # With LogAppendTime every record carries the broker's time (DefaultRecord.readFrom).
    if header.timestamp_type == layout.TIMESTAMP_LOG_APPEND_TIME:
        return header.max_timestamp
    return _wrap_int64(header.base_timestamp + span.timestamp_delta)


def _optional_bytes(records: _Section, start: int, length: int) -> bytes | None:
    if length < 0:
        return None
    return bytes(records[start : start + length])


# --- validation and decoding -----------------------------------------------------------------


def _check_client_rules(header: BatchHeader) -> None:
    """What a Kafka leader refuses from a producer (FORMAT.md §10.2)."""
    if header.is_control:
        _fail(status.CONTROL_FROM_CLIENT)
    count = header.records_count
    if count <= 0 or count != header.last_offset_delta + 1:
        _fail(status.COUNT_MISMATCH)
    if header.has_producer_id and header.base_sequence < 0:
        _fail(status.SEQUENCE_WITHOUT_PRODUCER)
    # Kafka leaves this to the client's builder; eoslog refuses it so producer state always
    # sees transactional data (FORMAT.md §10.2, last note).
    if header.is_transactional and not header.has_producer_id:
        _fail(status.TRANSACTIONAL_WITHOUT_PRODUCER)


def _max_timestamp(header: BatchHeader, spans: list[_RecordSpan]) -> tuple[int, int]:
    """(max timestamp, offset delta of the first record carrying it), as the time index needs."""
    if header.timestamp_type == layout.TIMESTAMP_LOG_APPEND_TIME:
        return header.max_timestamp, header.last_offset_delta
    if not spans:
        return header.max_timestamp, 0
    timestamps = [_timestamp(header, span) for span in spans]
    largest = max(timestamps)
    return largest, spans[timestamps.index(largest)].offset_delta


def _validate(view: memoryview, batch_bytes_max: int, from_client: bool) -> ValidatedBatch:
    header = _exactly_one_batch(view)
    if header.size_in_bytes > batch_bytes_max:
        _fail(status.BATCH_TOO_LARGE)
    if from_client and header.base_offset != 0:
        _fail(status.NONZERO_BASE_OFFSET)
    _check_crc(view, 0, header)
    if from_client:
        _check_client_rules(header)
    _, spans = _walk_records(view, 0, header, client_rules=True)
    max_timestamp, offset_delta = _max_timestamp(header, spans)
    return ValidatedBatch(header, max_timestamp, offset_delta)


def validate_batch(
    data: Buffer,
    *,
    batch_bytes_max: int = limits.message_bytes_default,
    from_client: bool = True,
) -> ValidatedBatch:
    """Check that `data` is exactly one well-formed v2 batch, as a Kafka leader does on
    append (FORMAT.md §10), walking (and decompressing) every record. In order:
    header as read_header; TRUNCATED_BATCH / TRAILING_BYTES (exactly one batch); size >
    batch_bytes_max -> RecordTooLargeError; from a client, base offset != 0; CRC; from a
    client: control batch, count != last offset delta + 1 or count <= 0, producer id >= 0 with
    sequence < 0, transactional without producer id; codec (gzip/snappy/zstd ->
    UnsupportedCompressionTypeError; ids 5-7 -> CorruptRecordError); negative count; every
    record well formed, offset deltas exactly 0..count-1, header keys valid UTF-8, no bytes
    left over; a control batch holds exactly one record whose key is >= 4 bytes. Changes
    nothing. Errors name byte 0."""
    view = byte_view(data)
    return _at_batch(0, _validate, view, batch_bytes_max, from_client)


def _decode_records(view: memoryview, position: int, verify_crc: bool) -> list[Record]:
    header = _whole_batch_at(view, position)
    if verify_crc:
        _check_crc(view, position, header)
    records, spans = _walk_records(view, position, header, client_rules=False)
    decoded = []
    for span in spans:
        headers = tuple(
            (
                # Java's String constructor replaces malformed UTF-8; "replace" matches it.
                bytes(records[key_start : key_start + key_length]).decode("utf-8", "replace"),
                _optional_bytes(records, value_start, value_length),
            )
            for key_start, key_length, value_start, value_length in span.headers
        )
        decoded.append(
            Record(
                offset=_wrap_int64(header.base_offset + span.offset_delta),
                timestamp=_timestamp(header, span),
                key=_optional_bytes(records, span.key_start, span.key_length),
                value=_optional_bytes(records, span.value_start, span.value_length),
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
    return _at_batch(position, _decode_records, view, position, verify_crc)


# --- columnar decoding -----------------------------------------------------------------------


class _BinaryColumn:
    """An Arrow binary column being filled: data bytes, offsets (count + 1), validity."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.offsets = [0]
        self.valid: list[bool] = []

    def append(self, item: bytes | None) -> None:
        if item is not None:
            self.data += item
        self.offsets.append(len(self.data))
        self.valid.append(item is not None)


def _bitmap(valid: list[bool]) -> np.ndarray[tuple[int], np.dtype[np.uint8]]:
    """An Arrow validity bitmap: one bit per item, least significant bit first."""
    return np.packbits(np.asarray(valid, dtype=np.bool_), bitorder="little")


def _int32s(values: list[int]) -> np.ndarray[tuple[int], np.dtype[np.int32]]:
    return np.asarray(values, dtype=np.int32)


def _uint8s(data: bytearray) -> np.ndarray[tuple[int], np.dtype[np.uint8]]:
    return np.frombuffer(bytes(data), dtype=np.uint8)


def _header_key_utf8(key: bytes) -> bytes:
    """The key as valid UTF-8, for Arrow's string column: malformed bytes are replaced as
    batch_records replaces them, so both decoders show the same strings."""
    try:
        key.decode("utf-8")
    except UnicodeDecodeError:
        return key.decode("utf-8", "replace").encode("utf-8")
    return key


class _Row(NamedTuple):
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[bytes, bytes | None], ...]


class _ColumnBuilder:
    """The columns of decode_columns, grown one whole batch at a time."""

    def __init__(self, include_headers: bool) -> None:
        self.include_headers = include_headers
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.timestamp_types: list[int] = []
        self.keys = _BinaryColumn()
        self.values = _BinaryColumn()
        self.header_offsets = [0]
        self.header_valid: list[bool] = []
        self.header_keys = _BinaryColumn()
        self.header_values = _BinaryColumn()

    def fits(self, rows: list[_Row]) -> bool:
        """Whether these rows keep every data column within limits.column_bytes_max."""
        added = [
            (self.keys.data, sum(len(row.key or b"") for row in rows)),
            (self.values.data, sum(len(row.value or b"") for row in rows)),
        ]
        if self.include_headers:
            entries = [entry for row in rows for entry in row.headers]
            added.append((self.header_keys.data, sum(len(key) for key, _ in entries)))
            added.append((self.header_values.data, sum(len(v or b"") for _, v in entries)))
        return all(len(data) + more <= limits.column_bytes_max for data, more in added)

    def add(self, rows: list[_Row]) -> None:
        for row in rows:
            self.offsets.append(row.offset)
            self.timestamps.append(row.timestamp)
            self.timestamp_types.append(row.timestamp_type)
            self.keys.append(row.key)
            self.values.append(row.value)
            if self.include_headers:
                for key, value in row.headers:
                    self.header_keys.append(key)
                    self.header_values.append(value)
                self.header_offsets.append(self.header_offsets[-1] + len(row.headers))
                # Spark's Kafka source gives a record without headers a null list.
                self.header_valid.append(bool(row.headers))

    def finish(self, end_position: int) -> ColumnarRecords:
        headers = None
        if self.include_headers:
            headers = RecordHeaders(
                offsets=_int32s(self.header_offsets),
                validity=_bitmap(self.header_valid),
                key_offsets=_int32s(self.header_keys.offsets),
                key_data=_uint8s(self.header_keys.data),
                value_offsets=_int32s(self.header_values.offsets),
                value_data=_uint8s(self.header_values.data),
                value_validity=_bitmap(self.header_values.valid),
            )
        return ColumnarRecords(
            count=len(self.offsets),
            offset=np.asarray(self.offsets, dtype=np.int64),
            timestamp_ms=np.asarray(self.timestamps, dtype=np.int64),
            timestamp_type=_int32s(self.timestamp_types),
            key_offsets=_int32s(self.keys.offsets),
            key_data=_uint8s(self.keys.data),
            key_validity=_bitmap(self.keys.valid),
            value_offsets=_int32s(self.values.offsets),
            value_data=_uint8s(self.values.data),
            value_validity=_bitmap(self.values.valid),
            headers=headers,
            end_position=end_position,
        )


def _batch_rows(
    view: memoryview,
    position: int,
    header: BatchHeader,
    include_headers: bool,
    offset_range: range,
) -> list[_Row]:
    """The records of one whole batch whose offsets fall in offset_range, as rows."""
    records, spans = _walk_records(view, position, header, client_rules=False)
    rows = []
    for span in spans:
        offset = _wrap_int64(header.base_offset + span.offset_delta)
        if offset not in offset_range:
            continue
        headers: tuple[tuple[bytes, bytes | None], ...] = ()
        if include_headers:
            headers = tuple(
                (
                    _header_key_utf8(bytes(records[start : start + length])),
                    _optional_bytes(records, value_start, value_length),
                )
                for start, length, value_start, value_length in span.headers
            )
        rows.append(
            _Row(
                offset=offset,
                timestamp=_timestamp(header, span),
                timestamp_type=header.timestamp_type,
                key=_optional_bytes(records, span.key_start, span.key_length),
                value=_optional_bytes(records, span.value_start, span.value_length),
                headers=headers,
            )
        )
    return rows


def decode_columns(
    data: Buffer,
    position: int = 0,
    *,
    include_headers: bool = False,
    verify_crc: bool = True,
    include_control: bool = False,
    offset_min: int = 0,
    offset_end: int = INT64_MAX,
) -> ColumnarRecords:
    """Decode the run of whole batches from `position` into Arrow-layout columns. Keeps
    records with offset_min <= offset < offset_end; skips control batches unless
    include_control. Stops at a partial trailing batch or before a batch that would push a
    column past limits.column_bytes_max (see end_position).

    Per batch, in order: framing as iter_headers; CRC if verify_crc (skipped batches too);
    a skipped control batch ends there; otherwise the record checks of batch_records. Errors
    name the offending batch's position."""
    check_position(position)
    view = byte_view(data)
    columns = _ColumnBuilder(include_headers)
    offset_range = range(offset_min, max(offset_min, offset_end))

    def rows_at(cursor: int) -> tuple[BatchHeader, list[_Row]] | None:
        header = _next_batch(view, cursor)
        if header is None:
            return None
        if verify_crc:
            _check_crc(view, cursor, header)
        if header.is_control and not include_control:
            return header, []
        return header, _batch_rows(view, cursor, header, include_headers, offset_range)

    while True:
        batch = _at_batch(position, rows_at, position)
        if batch is None:
            break
        header, rows = batch
        if not columns.fits(rows):
            break
        columns.add(rows)
        position += header.size_in_bytes
    return columns.finish(position)


# --- in-place stamping and control batches -----------------------------------------------------


def _stamp(
    view: memoryview, base_offset: int, partition_leader_epoch: int, log_append_time_ms: int
) -> None:
    header = _exactly_one_batch(view)
    # Base offset and leader epoch lie outside the CRC, so rewriting them keeps it valid
    # (LogValidator.assignOffsetsNonCompressed).
    _INT64.pack_into(view, layout.BASE_OFFSET_OFFSET, base_offset)
    _INT32.pack_into(view, layout.PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
    if log_append_time_ms < 0:
        return
    attributes = header.attributes | layout.TIMESTAMP_TYPE_MASK
    _INT16.pack_into(view, layout.ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(view, layout.MAX_TIMESTAMP_OFFSET, log_append_time_ms)
    _UINT32.pack_into(view, layout.CRC_OFFSET, crc32c(view[layout.ATTRIBUTES_OFFSET :]))


def stamp_batch(
    data: Buffer,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    log_append_time_ms: int = -1,
) -> None:
    """Rewrite, in place, the fields a leader assigns on append: base offset and partition
    leader epoch (outside the CRC); with log_append_time_ms >= 0 also the LogAppendTime bit and
    max timestamp, recomputing the CRC. `data` must be writable and exactly one batch.

    ValueError if an argument does not fit its field; TypeError for a read-only buffer; then
    the header checks of read_header and TRUNCATED_BATCH / TRAILING_BYTES. On error nothing
    is written. Not safe against a concurrent reader of the same bytes."""
    _check_range("base_offset", base_offset, INT64_MIN, INT64_MAX, 64)
    _check_range("partition_leader_epoch", partition_leader_epoch, INT32_MIN, INT32_MAX, 32)
    _check_range("log_append_time_ms", log_append_time_ms, INT64_MIN, INT64_MAX, 64)
    view = byte_view(data)
    if view.readonly:
        raise TypeError("stamp_batch needs a writable buffer")
    _at_batch(0, _stamp, view, base_offset, partition_leader_epoch, log_append_time_ms)


def build_control_batch(
    control_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A COMMIT (1) or ABORT (0) end-transaction marker batch exactly as Kafka writes it
    (FORMAT.md §3): 78 bytes, attributes 0x30, base sequence -1, one record.
    ValueError for another control type or an argument that does not fit its field."""
    if control_type not in (layout.CONTROL_ABORT, layout.CONTROL_COMMIT):
        raise ValueError(f"control_type must be 0 (ABORT) or 1 (COMMIT), got {control_type}")
    _check_range("producer_id", producer_id, INT64_MIN, INT64_MAX, 64)
    _check_range("producer_epoch", producer_epoch, INT16_MIN, INT16_MAX, 16)
    _check_range("coordinator_epoch", coordinator_epoch, INT32_MIN, INT32_MAX, 32)
    _check_range("timestamp", timestamp, INT64_MIN, INT64_MAX, 64)
    _check_range("base_offset", base_offset, INT64_MIN, INT64_MAX, 64)
    _check_range("partition_leader_epoch", partition_leader_epoch, INT32_MIN, INT32_MAX, 32)
    key = _CONTROL_KEY.pack(0, control_type)
    value = _END_TXN_MARKER_VALUE.pack(0, coordinator_epoch)
    # attributes 0, timestamp delta 0, offset delta 0, key, value, no headers.
    body = b"\x00\x00\x00" + _field(key) + _field(value) + b"\x00"
    record = encode_varint(len(body)) + body
    attributes = layout.TRANSACTIONAL_MASK | layout.CONTROL_MASK
    batch = _assemble(
        [record],
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=layout.NO_SEQUENCE,
    )
    if len(batch) != layout.END_TXN_MARKER_BATCH_SIZE:
        raise AssertionError(f"marker batch is {len(batch)} bytes, Kafka writes 78")
    return batch


def _field(data: bytes | None) -> bytes:
    """A length-prefixed byte field; None is Kafka's null (length -1)."""
    if data is None:
        return _NULL_LENGTH
    return encode_varint(len(data)) + data


def _assemble(
    records: list[bytes],
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    compress: bool = False,
) -> bytes:
    """Header + records section (lz4-framed if asked), with length and CRC filled in."""
    section = b"".join(records)
    if compress:
        section = lz4frame.compress(section)
    batch = bytearray(layout.HEADER_SIZE)
    batch += section
    _HEADER.pack_into(
        batch,
        0,
        base_offset,
        len(batch) - layout.LOG_OVERHEAD,
        partition_leader_epoch,
        layout.MAGIC_V2,
        0,  # the CRC, filled in below once everything it covers is in place
        attributes,
        len(records) - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    crc = crc32c(memoryview(batch)[layout.ATTRIBUTES_OFFSET :])
    _UINT32.pack_into(batch, layout.CRC_OFFSET, crc)
    return bytes(batch)


# --- building batches ------------------------------------------------------------------------


class BatchBuilder:
    """Builds one v2 batch record by record. Not thread-safe: one builder per thread."""

    def __init__(
        self,
        *,
        compression: int = 0,
        timestamp_type: int = 0,
        is_transactional: bool = False,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        partition_leader_epoch: int = -1,
        base_offset: int = 0,
        batch_bytes_max: int = limits.batch_bytes_max,
    ) -> None:
        """ValueError for an unsupported compression (only 0 none and 3 lz4 are built), a
        timestamp type other than 0/1, a transactional batch without a producer id, or (after
        those) a producer id, epoch, sequence, leader epoch or base offset outside its field."""
        if compression not in (layout.COMPRESSION_NONE, layout.COMPRESSION_LZ4):
            raise ValueError(
                f"unsupported compression {compression}: only 0 (none) and 3 (lz4) are built"
            )
        if timestamp_type not in (layout.TIMESTAMP_CREATE_TIME, layout.TIMESTAMP_LOG_APPEND_TIME):
            raise ValueError(
                f"timestamp_type must be 0 (CreateTime) or 1 (LogAppendTime), got {timestamp_type}"
            )
        if is_transactional and producer_id < 0:
            raise ValueError("a transactional batch needs a producer id")
        if batch_bytes_max > limits.batch_bytes_max:
            raise ValueError(
                f"batch_bytes_max must be at most {limits.batch_bytes_max}, got {batch_bytes_max}"
            )
        _check_range("producer_id", producer_id, INT64_MIN, INT64_MAX, 64)
        _check_range("producer_epoch", producer_epoch, INT16_MIN, INT16_MAX, 16)
        _check_range("base_sequence", base_sequence, INT32_MIN, INT32_MAX, 32)
        _check_range("partition_leader_epoch", partition_leader_epoch, INT32_MIN, INT32_MAX, 32)
        _check_range("base_offset", base_offset, INT64_MIN, INT64_MAX, 64)
        self._compression = compression
        self._attributes = (
            compression
            | (layout.TIMESTAMP_TYPE_MASK if timestamp_type else 0)
            | (layout.TRANSACTIONAL_MASK if is_transactional else 0)
        )
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._partition_leader_epoch = partition_leader_epoch
        self._base_offset = base_offset
        self._batch_bytes_max = batch_bytes_max
        self._records: list[bytes] = []
        self._records_bytes = 0
        self._base_timestamp = layout.NO_TIMESTAMP
        self._max_timestamp = layout.NO_TIMESTAMP

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None = None,
    ) -> bool:
        """Add one record (offset delta = records so far). False, changing nothing, if the
        builder already holds records and this one would take the batch past batch_bytes_max
        (start a new batch). RecordTooLargeError if it alone would not fit in an empty batch.
        ValueError for a negative timestamp other than -1 (or one past int64); TypeError for a
        header key that is not a str."""
        _check_timestamp(timestamp)
        count = len(self._records)
        if count >= limits.batch_records_max:
            return False
        # Stage the encoded record first, so a refusal leaves the builder as it was.
        base_timestamp = self._base_timestamp if count else timestamp
        record = _encode_record(
            count, _wrap_int64(timestamp - base_timestamp), key, value, headers or ()
        )
        size = len(record)
        if count == 0:
            if layout.HEADER_SIZE + size > self._batch_bytes_max:
                raise errors.RecordTooLargeError(
                    f"record of {size} bytes does not fit in a batch of at most "
                    f"{self._batch_bytes_max} bytes"
                )
        elif self.estimated_size() + size > self._batch_bytes_max:
            return False
        self._records.append(record)
        self._records_bytes += size
        self._base_timestamp = base_timestamp
        self._max_timestamp = max(self._max_timestamp, timestamp)
        return True

    def append_values(
        self,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        timestamp: int = -1,
    ) -> int:
        """Append records with these values (and keys), all at `timestamp`, as many as fit;
        returns how many were appended (the rest belong in the next batch). ValueError, before
        anything is appended, for a bad timestamp or keys of another length than values;
        RecordTooLargeError as append."""
        _check_timestamp(timestamp)
        if keys is not None and len(keys) != len(values):
            raise ValueError(
                f"keys and values must have the same length, got {len(keys)} and {len(values)}"
            )
        for index in range(len(values)):
            key = None if keys is None else keys[index]
            if not self.append(timestamp, key, values[index]):
                return index
        return len(values)

    def record_count(self) -> int:
        return len(self._records)

    def estimated_size(self) -> int:
        """Size in bytes of the batch if built now, before compression."""
        return layout.HEADER_SIZE + self._records_bytes

    def build(self) -> bytes:
        """The finished batch (compressed if asked; CRC set). ValueError if it has no records.
        Building does not change the builder; start the next batch with reset()."""
        if not self._records:
            raise ValueError("cannot build an empty batch")
        return _assemble(
            self._records,
            base_offset=self._base_offset,
            partition_leader_epoch=self._partition_leader_epoch,
            attributes=self._attributes,
            base_timestamp=self._base_timestamp,
            # With LogAppendTime the broker overwrites this on append (stamp_batch).
            max_timestamp=self._max_timestamp,
            producer_id=self._producer_id,
            producer_epoch=self._producer_epoch,
            base_sequence=self._base_sequence,
            compress=self._compression == layout.COMPRESSION_LZ4,
        )

    def reset(self) -> None:
        """Forget all records; keep the batch settings."""
        self._records = []
        self._records_bytes = 0
        self._base_timestamp = layout.NO_TIMESTAMP
        self._max_timestamp = layout.NO_TIMESTAMP


def _check_timestamp(timestamp: int) -> None:
    if not layout.NO_TIMESTAMP <= timestamp <= INT64_MAX:
        raise ValueError(f"timestamp must be -1 or in [0, 2**63 - 1], got {timestamp}")


def _encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Headers,
) -> bytes:
    """One record exactly as Kafka's DefaultRecord.writeTo lays it out (FORMAT.md §2)."""
    body = bytearray(b"\x00")  # attributes: unused in v2, written as 0
    body += encode_varlong(timestamp_delta)
    body += encode_varint(offset_delta)
    body += _field(None if key is None else bytes(key))
    body += _field(None if value is None else bytes(value))
    body += encode_varint(len(headers))
    for header_key, header_value in headers:
        if not isinstance(header_key, str):
            raise TypeError(f"header keys must be str, got {type(header_key).__name__}")
        body += _field(header_key.encode("utf-8"))
        body += _field(None if header_value is None else bytes(header_value))
    return encode_varint(len(body)) + bytes(body)
