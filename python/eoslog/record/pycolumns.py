"""decode_columns of the pure-Python codec twin: whole batches into Arrow-layout columns.

Internal: eoslog.record.pycodec exposes decode_columns (contract: pyext/codec.pyi). Each
function is pure and thread-safe. Failures travel as pywalk status codes and surface, through
pywalk.at_batch, as the eoslog error naming the offending batch's position.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from eoslog import limits
from eoslog.record.columns import ColumnarRecords, RecordHeaders
from eoslog.record.pyprimitives import INT64_MAX, byte_view, check_position
from eoslog.record.pywalk import (
    at_batch,
    check_crc,
    next_batch,
    optional_bytes,
    record_timestamp,
    walk_records,
    wrap_int64,
)
from eoslog.record.types import BatchHeader

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from typing_extensions import Buffer


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

    def held_bytes(self) -> int:
        """The payload bytes the columns hold: keys, values, header keys and header values."""
        columns = (self.keys, self.values, self.header_keys, self.header_values)
        return sum(len(column.data) for column in columns)

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
    decompressed_bytes_max: int,
) -> list[_Row]:
    """The records of one whole batch whose offsets fall in offset_range, as rows."""
    records, spans = walk_records(view, position, header, False, decompressed_bytes_max)
    rows = []
    for span in spans:
        offset = wrap_int64(header.base_offset + span.offset_delta)
        if offset not in offset_range:
            continue
        headers: tuple[tuple[bytes, bytes | None], ...] = ()
        if include_headers:
            headers = tuple(
                (
                    _header_key_utf8(bytes(records[start : start + length])),
                    optional_bytes(records, value_start, value_length),
                )
                for start, length, value_start, value_length in span.headers
            )
        rows.append(
            _Row(
                offset=offset,
                timestamp=record_timestamp(header, span),
                timestamp_type=header.timestamp_type,
                key=optional_bytes(records, span.key_start, span.key_length),
                value=optional_bytes(records, span.value_start, span.value_length),
                headers=headers,
            )
        )
    return rows


def _check_decompressed_bytes_max(decompressed_bytes_max: int) -> None:
    if not 0 < decompressed_bytes_max <= limits.decompressed_batch_bytes_ceiling:
        raise ValueError(
            f"decompressed_bytes_max must be in 1..{limits.decompressed_batch_bytes_ceiling}, "
            f"got {decompressed_bytes_max}"
        )


def decode_columns(
    data: Buffer,
    position: int = 0,
    *,
    include_headers: bool = False,
    verify_crc: bool = True,
    include_control: bool = False,
    offset_min: int = 0,
    offset_end: int = INT64_MAX,
    runs: Sequence[tuple[int, int]] | None = None,
    records_max: int | None = None,
    skips: Sequence[tuple[int, int]] | None = None,
    decompressed_bytes_max: int = limits.decompressed_batch_bytes_max,
    held_bytes_max: int | None = None,
) -> ColumnarRecords:
    """Decode the run of whole batches from `position` into Arrow-layout columns. Keeps
    records with offset_min <= offset < offset_end; skips control batches unless
    include_control; jumps over the byte ranges [start, end) of `skips` (ascending, each
    whole batches; ValueError if one starts inside a batch). Stops at a partial trailing
    batch or before a batch that would push a column past limits.column_bytes_max (see
    end_position). runs (not with skips) and records_max: as in
    pyext/codec.pyi (the batches of several byte ranges into one set of columns; a cap on
    the records decoded, cutting the batch that reaches it when it has one record per
    offset).

    Per batch, in order: framing as iter_headers; CRC if verify_crc (skipped batches too);
    a skipped control batch ends there; otherwise the record checks of batch_records. Errors
    name the offending batch's position."""
    decoder = ColumnDecoder(include_headers)
    decoder.decode(
        data,
        position,
        verify_crc=verify_crc,
        include_control=include_control,
        offset_min=offset_min,
        offset_end=offset_end,
        runs=runs,
        records_max=records_max,
        skips=skips,
        decompressed_bytes_max=decompressed_bytes_max,
        held_bytes_max=held_bytes_max,
    )
    return decoder.finish()


class ColumnDecoder:
    """Columns filled by decode() calls over one or more buffers, then taken by finish()
    (contract: pyext/codec.pyi). Not thread-safe."""

    def __init__(self, include_headers: bool = False) -> None:
        self._columns = _ColumnBuilder(include_headers)
        self._include_headers = include_headers
        self._end_position = 0
        self._finished = False

    @property
    def count(self) -> int:
        return len(self._columns.offsets)

    def decode(
        self,
        data: Buffer,
        position: int = 0,
        *,
        verify_crc: bool = True,
        include_control: bool = False,
        offset_min: int = 0,
        offset_end: int = INT64_MAX,
        runs: Sequence[tuple[int, int]] | None = None,
        records_max: int | None = None,
        skips: Sequence[tuple[int, int]] | None = None,
        decompressed_bytes_max: int = limits.decompressed_batch_bytes_max,
        held_bytes_max: int | None = None,
    ) -> int:
        if self._finished:
            raise ValueError("this ColumnDecoder has finished")
        if records_max is not None and records_max < 1:
            raise ValueError(f"records_max must be at least 1, got {records_max}")
        if runs is not None and skips is not None:
            raise ValueError("give runs or skips, not both")
        _check_decompressed_bytes_max(decompressed_bytes_max)
        if held_bytes_max is not None and held_bytes_max < 0:
            raise ValueError(f"held_bytes_max must not be negative, got {held_bytes_max}")
        skipped = _skip_ranges(skips)
        view = byte_view(data)
        ranges = _checked_runs(runs, position, len(view))
        if records_max is not None and self.count >= records_max:
            self._end_position = ranges[0][0] if ranges else position
            return self._end_position
        include_headers = self._include_headers
        offset_range = range(offset_min, max(offset_min, offset_end))

        def rows_at(run: memoryview, cursor: int) -> tuple[BatchHeader, list[_Row] | None] | None:
            header = next_batch(run, cursor)
            if header is None:
                return None
            if verify_crc:
                check_crc(run, cursor, header)
            if header.is_control and not include_control:
                return header, None  # skipped whole, as if absent
            return header, _batch_rows(
                run, cursor, header, include_headers, offset_range, decompressed_bytes_max
            )

        def batch_end(header: BatchHeader, records_left: int) -> int:
            return _clipped_end(header, offset_min, offset_end, records_left)

        found = (
            self._decode_runs(
                view, ranges, rows_at, records_max, batch_end, offset_end, skipped, held_bytes_max
            )
            if ranges
            else position
        )
        self._end_position = found
        return found

    def _decode_runs(
        self,
        view: memoryview,
        ranges: list[tuple[int, int]],
        rows_at: Callable[[memoryview, int], tuple[BatchHeader, list[_Row] | None] | None],
        records_max: int | None,
        batch_end: Callable[[BatchHeader, int], int],
        offset_end: int,
        skipped: list[tuple[int, int]],
        held_bytes_max: int | None,
    ) -> int:
        columns = self._columns
        position = first = ranges[0][0]
        for position, run_end in ranges:
            run = view[:run_end]
            while True:
                position = _past_skips(skipped, position, first, len(view))
                # The held-bytes budget: stop before the next batch (native twin's comment).
                if (
                    held_bytes_max is not None
                    and columns.offsets
                    and columns.held_bytes() >= held_bytes_max
                ):
                    return position
                batch = at_batch(position, rows_at, run, position)
                if batch is None:
                    break
                header, found = batch
                if found is None:  # a control batch skipped
                    position += header.size_in_bytes
                    continue
                rows, cut = found, False
                if records_max is not None:
                    # The native twin's cut: by offset, at the batch_end records_max gives.
                    end = batch_end(header, records_max - len(columns.offsets))
                    cut = end < offset_end
                    rows = [row for row in rows if row.offset < end] if cut else rows
                if not columns.fits(rows):
                    return position
                columns.add(rows)
                if cut:
                    return position  # a next call starts in this batch
                position += header.size_in_bytes
                if records_max is not None and len(columns.offsets) == records_max:
                    return position
        return position

    def finish(self) -> ColumnarRecords:
        if self._finished:
            raise ValueError("this ColumnDecoder has finished")
        self._finished = True
        return self._columns.finish(self._end_position)


def _clipped_end(header: BatchHeader, offset_min: int, offset_end: int, records_left: int) -> int:
    """The native twin's clipped_end (pyext/columns.pxi), int64 wrapping included: the
    offset_end that stops a batch after records_left records, or offset_end when the whole
    batch fits. Only a batch with one record per offset is cut; one with gaps is decoded
    whole."""
    first = max(header.base_offset, offset_min)
    last = wrap_int64(header.base_offset + header.last_offset_delta)
    stop = wrap_int64(first + records_left)
    if header.last_offset_delta + 1 != header.records_count or last < stop:
        return offset_end
    return min(stop, offset_end)


def _checked_runs(
    runs: Sequence[tuple[int, int]] | None, position: int, size: int
) -> list[tuple[int, int]]:
    """[(position, size)] without runs, else the runs, checked to be ascending,
    non-overlapping ranges inside the data (ValueError otherwise)."""
    if runs is None:
        check_position(position)
        return [(position, size)]
    previous = 0
    for start, end in runs:
        if start < previous or end < start or end > size:
            raise ValueError(f"run [{start}, {end}) is out of order or outside {size} bytes")
        previous = end
    return list(runs)


def _skip_ranges(skips: Sequence[tuple[int, int]] | None) -> list[tuple[int, int]]:
    ranges = [(int(start), int(end)) for start, end in skips or ()]
    for index, (start, end) in enumerate(ranges):
        if end < start or (index and start < ranges[index - 1][1]):
            raise ValueError("skips must be ascending, non-overlapping [start, end) ranges")
    ranges.reverse()  # popped from the end, lowest first
    return ranges


def _past_skips(ranges: list[tuple[int, int]], position: int, first: int, size: int) -> int:
    """position moved past the skipped ranges that start there (ranges consumed as passed);
    ValueError for one that started inside a batch decoded from `first` on, or covers it."""
    while ranges and ranges[-1][0] <= position:
        start, end = ranges.pop()
        if end > size:
            raise ValueError(f"skipped range ends at {end}, past the data's {size} bytes")
        if start == position:
            position = max(position, end)
        elif start >= first or end > first:
            raise ValueError(
                f"skipped range {start}-{end} does not start at a batch boundary "
                f"(next batch at {position})"
            )
    return position
