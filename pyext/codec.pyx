# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The Kafka v2 record batch codec over the C engine. The contract is pyext/codec.pyi; the
readable twin is eoslog.record.pycodec, and both must behave identically.

Python decides per batch (framing, decompression, building result objects); every per-record
and per-byte loop runs in engine/batch.c, without the GIL where the work is large.
"""

cimport cython
from cpython.bytes cimport (
    PyBytes_AS_STRING,
    PyBytes_CheckExact,
    PyBytes_FromStringAndSize,
    PyBytes_GET_SIZE,
)
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport (
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    int16_t,
    int32_t,
    int64_t,
    uint8_t,
    uint32_t,
    uint64_t,
)
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy

from batch cimport (
    EOS_WALK_CLIENT_RULES,
    eos_batch_crc,
    eos_crc_and_walk_records,
    eos_batch_header,
    eos_columns,
    eos_decode_records,
    eos_frame_batch,
    eos_parse_record,
    eos_read_header,
    eos_record,
    eos_record_body_size,
    eos_walk_records,
    eos_walk_result,
    eos_write_header,
    eos_write_record,
)
from engine cimport *

import numpy as np

from eoslog import limits
from eoslog.errors import RecordTooLargeError, raise_for_status
from eoslog.record import compression, layout
from eoslog.record.compression import codec_level as _codec_level
from eoslog.record import status as status_codes
from eoslog.record.columns import ColumnarRecords, RecordHeaders
from eoslog.record.types import BatchHeader, Record, ValidatedBatch

# The C statement of the layout and status codes, for tests/record/test_layout.py to compare with
# layout.py and status.py (docs/style.md rule 1).
LAYOUT = {
    "BASE_OFFSET_OFFSET": EOS_BASE_OFFSET_OFFSET,
    "BATCH_LENGTH_OFFSET": EOS_BATCH_LENGTH_OFFSET,
    "PARTITION_LEADER_EPOCH_OFFSET": EOS_PARTITION_LEADER_EPOCH_OFFSET,
    "MAGIC_OFFSET": EOS_MAGIC_OFFSET,
    "CRC_OFFSET": EOS_CRC_OFFSET,
    "ATTRIBUTES_OFFSET": EOS_ATTRIBUTES_OFFSET,
    "LAST_OFFSET_DELTA_OFFSET": EOS_LAST_OFFSET_DELTA_OFFSET,
    "BASE_TIMESTAMP_OFFSET": EOS_BASE_TIMESTAMP_OFFSET,
    "MAX_TIMESTAMP_OFFSET": EOS_MAX_TIMESTAMP_OFFSET,
    "PRODUCER_ID_OFFSET": EOS_PRODUCER_ID_OFFSET,
    "PRODUCER_EPOCH_OFFSET": EOS_PRODUCER_EPOCH_OFFSET,
    "BASE_SEQUENCE_OFFSET": EOS_BASE_SEQUENCE_OFFSET,
    "RECORDS_COUNT_OFFSET": EOS_RECORDS_COUNT_OFFSET,
    "RECORDS_OFFSET": EOS_RECORDS_OFFSET,
    "LOG_OVERHEAD": EOS_LOG_OVERHEAD,
    "HEADER_SIZE": EOS_HEADER_SIZE,
    "BATCH_LENGTH_MIN": EOS_BATCH_LENGTH_MIN,
    "MAGIC_V2": EOS_MAGIC_V2,
    "COMPRESSION_MASK": EOS_COMPRESSION_MASK,
    "TIMESTAMP_TYPE_MASK": EOS_TIMESTAMP_TYPE_MASK,
    "TRANSACTIONAL_MASK": EOS_TRANSACTIONAL_MASK,
    "CONTROL_MASK": EOS_CONTROL_MASK,
    "DELETE_HORIZON_MASK": EOS_DELETE_HORIZON_MASK,
    "COMPRESSION_NONE": EOS_COMPRESSION_NONE,
    "COMPRESSION_GZIP": EOS_COMPRESSION_GZIP,
    "COMPRESSION_SNAPPY": EOS_COMPRESSION_SNAPPY,
    "COMPRESSION_LZ4": EOS_COMPRESSION_LZ4,
    "COMPRESSION_ZSTD": EOS_COMPRESSION_ZSTD,
    "CONTROL_ABORT": EOS_CONTROL_ABORT,
    "CONTROL_COMMIT": EOS_CONTROL_COMMIT,
    "CONTROL_KEY_VERSION": EOS_CONTROL_KEY_VERSION,
    "CONTROL_KEY_TYPE_OFFSET": EOS_CONTROL_KEY_TYPE_OFFSET,
    "CONTROL_KEY_SIZE": EOS_CONTROL_KEY_SIZE,
    "END_TXN_MARKER_VERSION": EOS_END_TXN_MARKER_VERSION,
    "END_TXN_MARKER_EPOCH_OFFSET": EOS_END_TXN_MARKER_EPOCH_OFFSET,
    "END_TXN_MARKER_VALUE_SIZE": EOS_END_TXN_MARKER_VALUE_SIZE,
}
STATUS = {
    "OK": EOS_OK,
    "TRUNCATED_HEADER": EOS_TRUNCATED_HEADER,
    "BATCH_LENGTH_TOO_SMALL": EOS_BATCH_LENGTH_TOO_SMALL,
    "BAD_MAGIC": EOS_BAD_MAGIC,
    "UNSUPPORTED_MAGIC": EOS_UNSUPPORTED_MAGIC,
    "TRUNCATED_BATCH": EOS_TRUNCATED_BATCH,
    "TRAILING_BYTES": EOS_TRAILING_BYTES,
    "CRC_MISMATCH": EOS_CRC_MISMATCH,
    "BATCH_TOO_LARGE": EOS_BATCH_TOO_LARGE,
    "NONZERO_BASE_OFFSET": EOS_NONZERO_BASE_OFFSET,
    "CONTROL_FROM_CLIENT": EOS_CONTROL_FROM_CLIENT,
    "COUNT_MISMATCH": EOS_COUNT_MISMATCH,
    "SEQUENCE_WITHOUT_PRODUCER": EOS_SEQUENCE_WITHOUT_PRODUCER,
    "TRANSACTIONAL_WITHOUT_PRODUCER": EOS_TRANSACTIONAL_WITHOUT_PRODUCER,
    "UNSUPPORTED_COMPRESSION": EOS_UNSUPPORTED_COMPRESSION,
    "BAD_COMPRESSION": EOS_BAD_COMPRESSION,
    "DECOMPRESS_FAILED": EOS_DECOMPRESS_FAILED,
    "BAD_VARINT": EOS_BAD_VARINT,
    "RECORD_OVERRUN": EOS_RECORD_OVERRUN,
    "RECORD_SIZE_MISMATCH": EOS_RECORD_SIZE_MISMATCH,
    "BAD_HEADER_COUNT": EOS_BAD_HEADER_COUNT,
    "BAD_HEADER_KEY": EOS_BAD_HEADER_KEY,
    "RECORDS_REMAINING": EOS_RECORDS_REMAINING,
    "BAD_OFFSET_DELTA": EOS_BAD_OFFSET_DELTA,
    "NEGATIVE_COUNT": EOS_NEGATIVE_COUNT,
    "DECOMPRESSED_TOO_LARGE": EOS_DECOMPRESSED_TOO_LARGE,
    "BAD_HEADER_KEY_UTF8": EOS_BAD_HEADER_KEY_UTF8,
    "BAD_CONTROL_RECORD": EOS_BAD_CONTROL_RECORD,
}

# Work on more bytes than this runs without the GIL; below it, releasing costs more than it
# saves (a GIL round trip is ~100 ns, a kilobyte of decode about as much).
cdef size_t NOGIL_BYTES = 64 * 1024
include "framing.pxi"


new_tuple = tuple.__new__


cdef object header_object(const eos_batch_header *h):
    return new_tuple(BatchHeader, (
        h.base_offset, h.batch_length, h.partition_leader_epoch, h.magic, h.crc,
        h.attributes, h.last_offset_delta, h.base_timestamp, h.max_timestamp,
        h.producer_id, h.producer_epoch, h.base_sequence, h.records_count,
    ))


def read_header(data, Py_ssize_t position=0):
    check_position(position)
    cdef const uint8_t[::1] view = data
    cdef eos_batch_header h
    check(eos_read_header(at(view, position), remaining_after(position, view.shape[0]), &h),
          position)
    return header_object(&h)


def iter_headers(data, Py_ssize_t position=0):
    # Arguments are checked here, at the call, not at the first next().
    check_position(position)
    cdef const uint8_t[::1] view = data
    return _iter_headers(view, position)


def _iter_headers(const uint8_t[::1] view, Py_ssize_t position):
    cdef size_t batch_size = 0
    cdef eos_batch_header h
    cdef int status
    while True:
        status = eos_frame_batch(at(view, position), remaining_after(position, view.shape[0]),
                                 &batch_size)
        if status == EOS_TRUNCATED_BATCH:
            return
        check(status, position)
        check(eos_read_header(at(view, position), batch_size, &h), position)
        yield position, header_object(&h)
        position += <Py_ssize_t>batch_size


def batch_crc(data, Py_ssize_t position=0):
    check_position(position)
    cdef const uint8_t[::1] view = data
    cdef size_t remaining = remaining_after(position, view.shape[0])
    cdef eos_batch_header h
    cdef const uint8_t *batch = at(view, position)
    check(eos_read_header(batch, remaining, &h), position)
    cdef size_t batch_size = EOS_LOG_OVERHEAD + <size_t>h.batch_length
    if batch_size > remaining:
        raise_for_status(EOS_TRUNCATED_BATCH, position)
    return eos_batch_crc(batch, batch_size)


cdef int check_client_rules(const eos_batch_header *h) noexcept:
    """The rules a leader applies to a batch from a producer (docs/format.md §10.2)."""
    if h.attributes & EOS_CONTROL_MASK:
        return EOS_CONTROL_FROM_CLIENT
    if h.records_count <= 0 or <int64_t>h.last_offset_delta + 1 != h.records_count:
        return EOS_COUNT_MISMATCH
    if h.producer_id >= 0 and h.base_sequence < 0:
        return EOS_SEQUENCE_WITHOUT_PRODUCER
    if (h.attributes & EOS_TRANSACTIONAL_MASK) and h.producer_id < 0:
        return EOS_TRANSACTIONAL_WITHOUT_PRODUCER
    return EOS_OK


def validate_batch(data, *, Py_ssize_t batch_bytes_max=limits.message_bytes_default,
                   bint from_client=True):
    cdef const uint8_t[::1] view = data
    cdef size_t size = <size_t>view.shape[0]
    cdef const uint8_t *batch = start_of(view)
    cdef eos_batch_header h
    cdef eos_walk_result walk
    cdef int status = EOS_OK
    cdef uint32_t crc
    cdef _RecordsSection section
    check(eos_read_header(batch, size, &h), 0)
    cdef size_t batch_size = EOS_LOG_OVERHEAD + <size_t>h.batch_length
    if batch_size > size:
        raise_for_status(EOS_TRUNCATED_BATCH, 0)
    if batch_size < size:
        raise_for_status(EOS_TRAILING_BYTES, 0)
    if batch_size > <size_t>batch_bytes_max:
        raise_for_status(EOS_BATCH_TOO_LARGE, 0)
    if from_client and h.base_offset != 0:
        raise_for_status(EOS_NONZERO_BASE_OFFSET, 0)
    # Uncompressed records are walked in the same pass as the CRC (the batch is read from
    # memory once); the walk's status is only reported after the checks that come before it.
    cdef bint walked = (h.attributes & EOS_COMPRESSION_MASK) == EOS_COMPRESSION_NONE
    if walked:
        if batch_size >= NOGIL_BYTES:
            with nogil:
                status = eos_crc_and_walk_records(batch, batch_size, h.records_count,
                                                  h.base_timestamp, EOS_WALK_CLIENT_RULES,
                                                  &crc, &walk)
        else:
            status = eos_crc_and_walk_records(batch, batch_size, h.records_count,
                                              h.base_timestamp, EOS_WALK_CLIENT_RULES, &crc,
                                              &walk)
    else:
        crc = eos_batch_crc(batch, batch_size)
    if crc != h.crc:
        raise_for_status(EOS_CRC_MISMATCH, 0)
    if from_client:
        check(check_client_rules(&h), 0)
    check_codec_and_count(&h, 0)
    if not walked:
        # The topic's max.message.bytes bounds decompression too: a bomb stops at that limit.
        section = records_section(data, batch, batch_size, &h, 0,
                                  limits.decompressed_bytes_max_for(batch_bytes_max))
        status = walk_section(section, &h, &walk)
    check(status, 0)
    # The walk held the deltas to 0..count-1; readers refuse one past the last offset delta
    # (engine/batch.c check_offset_delta), so a batch they would refuse is not valid here.
    if h.records_count > 0 and h.last_offset_delta < h.records_count - 1:
        raise_for_status(EOS_BAD_OFFSET_DELTA, 0)
    if h.attributes & EOS_CONTROL_MASK:
        if h.records_count != 1 or walk.first_key_length < EOS_CONTROL_KEY_SIZE:
            raise_for_status(EOS_BAD_CONTROL_RECORD, 0)
    header = header_object(&h)
    # tuple.__new__, as for the header: every append validates, and the NamedTuple's
    # Python-level __new__ would cost it a frame.
    if h.attributes & EOS_TIMESTAMP_TYPE_MASK:
        # Every record carries the header's time (what a decode reports for each).
        return new_tuple(
            ValidatedBatch, (header, h.max_timestamp, h.last_offset_delta, h.max_timestamp)
        )
    if h.records_count == 0:
        return new_tuple(ValidatedBatch, (header, h.max_timestamp, 0, -1))
    return new_tuple(ValidatedBatch, (
        header, walk.max_timestamp, walk.offset_delta_of_max_timestamp, walk.min_timestamp
    ))


cdef int walk_section(_RecordsSection section, const eos_batch_header *h,
                      eos_walk_result *walk) noexcept:
    """The walk of a decompressed records section, without the GIL when it is large."""
    cdef int status
    if section.size >= NOGIL_BYTES:
        with nogil:
            status = eos_walk_records(section.start, section.size, h.records_count,
                                      h.base_timestamp, EOS_WALK_CLIENT_RULES, walk)
    else:
        status = eos_walk_records(section.start, section.size, h.records_count,
                                  h.base_timestamp, EOS_WALK_CLIENT_RULES, walk)
    return status


cdef tuple headers_tuple(const eos_record *r):
    """The record's headers as Python objects; keys decoded as Java's String(byte[]) would."""
    if r.headers_count == 0:
        return ()
    cdef list out = []
    cdef const uint8_t *p = r.headers
    cdef int32_t i, key_length, value_length
    for i in range(r.headers_count):
        # The structure was checked by eos_parse_record, so these reads stay in bounds.
        p += eos_decode_varint(p, r.end, &key_length)
        key = (<const char *>p)[:key_length].decode("utf-8", "replace")
        p += key_length
        p += eos_decode_varint(p, r.end, &value_length)
        if value_length < 0:
            value = None
        else:
            value = PyBytes_FromStringAndSize(<const char *>p, value_length)
            p += value_length
        out.append((key, value))
    return tuple(out)


cdef inline object bytes_or_none(const uint8_t *p, int32_t length):
    if length < 0:
        return None
    return PyBytes_FromStringAndSize(<const char *>p, length)


def batch_records(data, Py_ssize_t position=0, *, bint verify_crc=True):
    check_position(position)
    cdef const uint8_t[::1] view = data
    cdef size_t remaining = remaining_after(position, view.shape[0])
    cdef eos_batch_header h
    cdef eos_record r
    cdef const uint8_t *batch = at(view, position)
    check(eos_read_header(batch, remaining, &h), position)
    cdef size_t batch_size = EOS_LOG_OVERHEAD + <size_t>h.batch_length
    if batch_size > remaining:
        raise_for_status(EOS_TRUNCATED_BATCH, position)
    if verify_crc and eos_batch_crc(batch, batch_size) != h.crc:
        raise_for_status(EOS_CRC_MISMATCH, position)
    check_codec_and_count(&h, position)
    cdef _RecordsSection section = records_section(data, batch, batch_size, &h, position,
                                                   limits.decompressed_batch_bytes_max)
    cdef const uint8_t *cursor = section.start
    cdef const uint8_t *end = section.start + section.size
    cdef bint log_append_time = (h.attributes & EOS_TIMESTAMP_TYPE_MASK) != 0
    cdef list records = []
    cdef int32_t i, previous_delta = -1
    for i in range(h.records_count):
        check(eos_parse_record(&cursor, end, &r), position)
        # A reader's rule for offset deltas (engine/batch.c check_offset_delta): increasing
        # from 0 and within the batch's last offset delta, so offsets never go backwards.
        if r.offset_delta <= previous_delta or r.offset_delta > h.last_offset_delta:
            raise_for_status(EOS_BAD_OFFSET_DELTA, position)
        previous_delta = r.offset_delta
        # tuple.__new__ skips the NamedTuple's Python-level __new__ (a frame per record).
        records.append(new_tuple(Record, (
            wrapping_add(h.base_offset, r.offset_delta),
            h.max_timestamp if log_append_time else wrapping_add(h.base_timestamp,
                                                                  r.timestamp_delta),
            bytes_or_none(r.key, r.key_length),
            bytes_or_none(r.value, r.value_length),
            headers_tuple(&r),
        )))
    if cursor != end:
        raise_for_status(EOS_RECORDS_REMAINING, position)
    return records


def stamp_batch(data, *, int64_t base_offset, int32_t partition_leader_epoch,
                int64_t log_append_time_ms=-1, max_timestamp=None):
    cdef int64_t create_time_max = 0
    if max_timestamp is not None:
        if not INT64_MIN <= max_timestamp <= INT64_MAX:
            raise ValueError(f"max_timestamp must fit in int64, got {max_timestamp}")
        if log_append_time_ms >= 0:
            raise ValueError("max_timestamp is for CreateTime; LogAppendTime sets its own")
        create_time_max = max_timestamp
    cdef uint8_t[::1] view
    try:
        view = data
    except (BufferError, ValueError, TypeError):
        raise TypeError("stamp_batch needs a writable buffer") from None
    cdef size_t size = <size_t>view.shape[0]
    cdef eos_batch_header h
    check(eos_read_header(start_of(view), size, &h), 0)
    cdef size_t batch_size = EOS_LOG_OVERHEAD + <size_t>h.batch_length
    if batch_size > size:
        raise_for_status(EOS_TRUNCATED_BATCH, 0)
    if batch_size < size:
        raise_for_status(EOS_TRAILING_BYTES, 0)
    h.base_offset = base_offset
    h.partition_leader_epoch = partition_leader_epoch
    cdef bint covered_changed = False
    if log_append_time_ms >= 0:
        h.attributes = h.attributes | EOS_TIMESTAMP_TYPE_MASK
        h.max_timestamp = log_append_time_ms
        covered_changed = True
    elif max_timestamp is not None and create_time_max != h.max_timestamp:
        h.max_timestamp = create_time_max
        covered_changed = True
    eos_write_header(&view[0], &h)
    if covered_changed:
        # Only the attributes and max timestamp are covered by the CRC (docs/format.md §1.1).
        h.crc = eos_batch_crc(&view[0], batch_size)
        eos_write_header(&view[0], &h)


def build_control_batch(int control_type, *, int64_t producer_id, int16_t producer_epoch,
                        int32_t coordinator_epoch, int64_t timestamp, int64_t base_offset=0,
                        int32_t partition_leader_epoch=-1):
    if control_type != EOS_CONTROL_ABORT and control_type != EOS_CONTROL_COMMIT:
        raise ValueError(f"control_type must be 0 (ABORT) or 1 (COMMIT), got {control_type}")
    # The control record's key and value (docs/format.md §3), laid out by batch_layout.h as
    # eoslog.record.control lays them out in Python.
    cdef uint8_t key[EOS_CONTROL_KEY_SIZE]
    cdef uint8_t value[EOS_END_TXN_MARKER_VALUE_SIZE]
    eos_store_i16be(key, EOS_CONTROL_KEY_VERSION)
    eos_store_i16be(key + EOS_CONTROL_KEY_TYPE_OFFSET, <int16_t>control_type)
    eos_store_i16be(value, EOS_END_TXN_MARKER_VERSION)
    eos_store_i32be(value + EOS_END_TXN_MARKER_EPOCH_OFFSET, coordinator_epoch)
    cdef size_t body = eos_record_body_size(0, 0, EOS_CONTROL_KEY_SIZE,
                                            EOS_END_TXN_MARKER_VALUE_SIZE, 0, 0)
    out = PyBytes_FromStringAndSize(NULL, EOS_RECORDS_OFFSET + 1 + <Py_ssize_t>body)
    cdef uint8_t *batch = <uint8_t *>PyBytes_AS_STRING(out)
    cdef size_t written = eos_write_record(batch + EOS_RECORDS_OFFSET, body, 0, 0, key,
                                           EOS_CONTROL_KEY_SIZE, value,
                                           EOS_END_TXN_MARKER_VALUE_SIZE, 0, NULL, 0)
    cdef size_t batch_size = EOS_RECORDS_OFFSET + written
    if batch_size != <size_t>PyBytes_GET_SIZE(out):
        raise AssertionError("control record size disagrees with its encoding")
    cdef eos_batch_header h
    h.base_offset = base_offset
    h.batch_length = <int32_t>(batch_size - EOS_LOG_OVERHEAD)
    h.partition_leader_epoch = partition_leader_epoch
    h.magic = EOS_MAGIC_V2
    h.crc = 0
    h.attributes = EOS_TRANSACTIONAL_MASK | EOS_CONTROL_MASK
    h.last_offset_delta = 0
    h.base_timestamp = timestamp
    h.max_timestamp = timestamp
    h.producer_id = producer_id
    h.producer_epoch = producer_epoch
    h.base_sequence = -1
    h.records_count = 1
    eos_write_header(batch, &h)
    h.crc = eos_batch_crc(batch, batch_size)
    eos_write_header(batch, &h)
    return out


include "columns.pxi"
include "builder.pxi"


# --- the builder's C entry point for eoslog._ext.accumulator --------------------------------
# produce() appends one record per call; going through BatchBuilder.append (a Python method
# call: attribute lookup, argument tuple, bool result) would cost about as much as the append
# itself. The accumulator module instead calls this function through a capsule, as numpy and
# datetime export their C APIs, so both modules keep one BatchBuilder type.

from cpython.pycapsule cimport PyCapsule_New

ctypedef int (*builder_append_fn)(object, int64_t, object, object) except -1


cdef int _builder_append(object builder, int64_t timestamp, object key, object value) except -1:
    """BatchBuilder.append without headers: 1 when added, 0 when the batch is full. TypeError
    unless `builder` is exactly a BatchBuilder."""
    if type(builder) is not BatchBuilder:
        raise TypeError(f"expected a BatchBuilder, got {type(builder).__name__}")
    return (<BatchBuilder>builder).add(timestamp, key, value, None)


_BUILDER_APPEND = PyCapsule_New(<void *>_builder_append, "eoslog._ext.codec.builder_append",
                                NULL)
