"""Writing batches in the pure-Python codec twin: BatchBuilder, build_control_batch and
stamp_batch (docs/format.md §1-§3).

Internal: eoslog.record.pycodec exposes these (contract: pyext/codec.pyi). The module
functions are pure and thread-safe; a BatchBuilder belongs to one thread. Argument errors
raise ValueError / TypeError at once; stamp_batch's checks of the bytes travel as pywalk
status codes and surface, through pywalk.at_batch, as eoslog errors.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

# Imported as modules, not by name: eoslog.errors imports eoslog.record, which loads this twin
# while eoslog.errors is still initialising, so its names are looked up at call time.
from eoslog import errors, limits
from eoslog.record import compression, control, layout
from eoslog.record.compression import LEVEL_DEFAULT, codec_level
from eoslog.record.pyprimitives import (
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    byte_view,
    crc32c,
    encode_varint,
    encode_varlong,
)
from eoslog.record.pywalk import at_batch, exactly_one_batch, wrap_int64

if TYPE_CHECKING:
    from typing_extensions import Buffer

Headers = Sequence[tuple[str, bytes | None]]

_HEADER: Final = layout.HEADER_STRUCT
_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")
_UINT32: Final = struct.Struct(">I")
_NULL_LENGTH: Final = b"\x01"  # encode_varint(-1): Kafka's null key, value or header value


def _check_range(name: str, value: int, low: int, high: int, bits: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name} must fit in int{bits}, got {value}")


# --- in-place stamping and control batches -----------------------------------------------------


def _stamp(
    view: memoryview,
    base_offset: int,
    partition_leader_epoch: int,
    log_append_time_ms: int,
    max_timestamp: int | None,
) -> None:
    header = exactly_one_batch(view)
    # Base offset and leader epoch lie outside the CRC, so rewriting them keeps it valid
    # (LogValidator.assignOffsetsNonCompressed).
    _INT64.pack_into(view, layout.BASE_OFFSET_OFFSET, base_offset)
    _INT32.pack_into(view, layout.PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
    if log_append_time_ms >= 0:
        attributes = header.attributes | layout.TIMESTAMP_TYPE_MASK
        _INT16.pack_into(view, layout.ATTRIBUTES_OFFSET, attributes)
        _INT64.pack_into(view, layout.MAX_TIMESTAMP_OFFSET, log_append_time_ms)
    elif max_timestamp is not None and max_timestamp != header.max_timestamp:
        _INT64.pack_into(view, layout.MAX_TIMESTAMP_OFFSET, max_timestamp)
    else:
        return
    _UINT32.pack_into(view, layout.CRC_OFFSET, crc32c(view[layout.ATTRIBUTES_OFFSET :]))


def stamp_batch(
    data: Buffer,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    log_append_time_ms: int = -1,
    max_timestamp: int | None = None,
) -> None:
    """Rewrite, in place, the fields a leader assigns on append: base offset and partition
    leader epoch (outside the CRC); with log_append_time_ms >= 0 also the LogAppendTime bit and
    max timestamp, recomputing the CRC. With max_timestamp (CreateTime: the largest record
    timestamp, which Kafka's LogValidator writes over whatever the producer put there) the max
    timestamp and the CRC are rewritten when they differ. `data` must be writable and exactly
    one batch.

    ValueError if an argument does not fit its field; TypeError for a read-only buffer; then
    the header checks of read_header and TRUNCATED_BATCH / TRAILING_BYTES. On error nothing
    is written. Not safe against a concurrent reader of the same bytes."""
    _check_range("base_offset", base_offset, INT64_MIN, INT64_MAX, 64)
    _check_range("partition_leader_epoch", partition_leader_epoch, INT32_MIN, INT32_MAX, 32)
    _check_range("log_append_time_ms", log_append_time_ms, INT64_MIN, INT64_MAX, 64)
    if max_timestamp is not None:
        _check_range("max_timestamp", max_timestamp, INT64_MIN, INT64_MAX, 64)
        if log_append_time_ms >= 0:
            raise ValueError("max_timestamp is for CreateTime; LogAppendTime sets its own")
    view = byte_view(data)
    if view.readonly:
        raise TypeError("stamp_batch needs a writable buffer")
    at_batch(
        0, _stamp, view, base_offset, partition_leader_epoch, log_append_time_ms, max_timestamp
    )


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
    (docs/format.md §3): 78 bytes, attributes 0x30, base sequence -1, one record.
    ValueError for another control type or an argument that does not fit its field."""
    if control_type not in (control.ABORT, control.COMMIT):
        raise ValueError(f"control_type must be 0 (ABORT) or 1 (COMMIT), got {control_type}")
    _check_range("producer_id", producer_id, INT64_MIN, INT64_MAX, 64)
    _check_range("producer_epoch", producer_epoch, INT16_MIN, INT16_MAX, 16)
    _check_range("coordinator_epoch", coordinator_epoch, INT32_MIN, INT32_MAX, 32)
    _check_range("timestamp", timestamp, INT64_MIN, INT64_MAX, 64)
    _check_range("base_offset", base_offset, INT64_MIN, INT64_MAX, 64)
    _check_range("partition_leader_epoch", partition_leader_epoch, INT32_MIN, INT32_MAX, 32)
    key = control.encode_key(control_type)
    value = control.encode_marker_value(coordinator_epoch)
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
    compression_level: int = LEVEL_DEFAULT,
) -> bytes:
    """Header + records section (compressed with the codec `attributes` name, at
    `compression_level`), with length and CRC filled in."""
    section = b"".join(records)
    codec = attributes & layout.COMPRESSION_MASK
    if codec != layout.COMPRESSION_NONE:
        section = compression.compress(codec, section, compression_level)
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
        compression_level: int = LEVEL_DEFAULT,
    ) -> None:
        """ValueError for a compression other than Kafka's 0 (none) to 4 (zstd), a
        compression level below -1 (-1: the codec's default; compression.codec_level), a
        timestamp type other than 0/1, a transactional batch without a producer id, or (after
        those) a producer id, epoch, sequence, leader epoch or base offset outside its field."""
        if not layout.COMPRESSION_NONE <= compression <= layout.COMPRESSION_ZSTD:
            raise ValueError(
                f"unsupported compression {compression}: Kafka's codecs are 0 (none) to 4 (zstd)"
            )
        if compression != layout.COMPRESSION_NONE:
            compression_level = codec_level(compression, compression_level)
        self._compression_level = compression_level
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
            count, wrap_int64(timestamp - base_timestamp), key, value, headers or ()
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

    def append_spans(
        self,
        values_data: Buffer,
        value_starts: npt.ArrayLike,
        value_lengths: npt.ArrayLike,
        keys_data: Buffer | None = None,
        key_starts: npt.ArrayLike | None = None,
        key_lengths: npt.ArrayLike | None = None,
        timestamp: int = -1,
        first: int = 0,
    ) -> int:
        """Append records first, first + 1, ... whose value i is values_data[value_starts[i] :
        value_starts[i] + value_lengths[i]] (length -1: null), and key likewise when keys_data
        is given, all at `timestamp`, as many as fit; returns how many were appended. No
        Python object per record in the native twin. ValueError, before anything is appended,
        for a bad timestamp, spans outside their data, arrays of unequal length or `first`
        outside [0, n]; RecordTooLargeError as append."""
        _check_timestamp(timestamp)
        values = byte_view(values_data)
        v_starts = np.asarray(value_starts, dtype=np.int64)
        v_lengths = np.asarray(value_lengths, dtype=np.int32)
        count = len(v_starts)
        _check_span_arrays("value", len(values), v_starts, v_lengths, count)
        keys = None
        k_starts: list[int] = []
        k_lengths: list[int] = []
        if keys_data is not None:
            keys = byte_view(keys_data)
            k_start_array = np.asarray(key_starts, dtype=np.int64)
            k_length_array = np.asarray(key_lengths, dtype=np.int32)
            _check_span_arrays("key", len(keys), k_start_array, k_length_array, count)
            k_starts, k_lengths = k_start_array.tolist(), k_length_array.tolist()
        if not 0 <= first <= count:
            raise ValueError(f"first must be in [0, {count}], got {first}")
        starts, lengths = v_starts.tolist(), v_lengths.tolist()
        for i in range(first, count):
            key = None
            if keys is not None and k_lengths[i] >= 0:
                key = keys[k_starts[i] : k_starts[i] + k_lengths[i]].tobytes()
            value = None
            if lengths[i] >= 0:
                value = values[starts[i] : starts[i] + lengths[i]].tobytes()
            if not self.append(timestamp, key, value):
                return i - first
        return count - first

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Set the producer id, epoch and base sequence the next build() writes (Kafka's
        MemoryRecordsBuilder.setProducerState: a producer assigns the sequence when the batch
        is drained, not when it is opened). ValueError for a value outside its field, or a
        transactional batch without a producer id; nothing changes then."""
        _check_range("producer_id", producer_id, INT64_MIN, INT64_MAX, 64)
        _check_range("producer_epoch", producer_epoch, INT16_MIN, INT16_MAX, 16)
        _check_range("base_sequence", base_sequence, INT32_MIN, INT32_MAX, 32)
        if self._attributes & layout.TRANSACTIONAL_MASK and producer_id < 0:
            raise ValueError("a transactional batch needs a producer id")
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence

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
            compression_level=self._compression_level,
        )

    def reset(self) -> None:
        """Forget all records; keep the batch settings."""
        self._records = []
        self._records_bytes = 0
        self._base_timestamp = layout.NO_TIMESTAMP
        self._max_timestamp = layout.NO_TIMESTAMP


def _check_span_arrays(
    what: str,
    size: int,
    starts: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int32],
    count: int,
) -> None:
    """ValueError unless there are `count` spans, each inside [0, size) (length -1: null)."""
    if len(starts) != count or len(lengths) != count:
        raise ValueError(
            f"{what} starts and lengths must both have {count} entries, got "
            f"{len(starts)} and {len(lengths)}"
        )
    for i, (start, length) in enumerate(zip(starts.tolist(), lengths.tolist(), strict=True)):
        if length < -1 or (length >= 0 and (start < 0 or start > size - length)):
            raise ValueError(
                f"{what} span {i} (start {start}, length {length}) lies outside the "
                f"{size} bytes of data"
            )


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
    """One record exactly as Kafka's DefaultRecord.writeTo lays it out (docs/format.md §2)."""
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
