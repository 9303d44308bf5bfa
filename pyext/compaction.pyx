# cython: language_level=3, boundscheck=False, wraparound=False
"""The log cleaner's per-record work (docs/design.md "Compaction"): hashing every record's
key into 128 bits, and rewriting a batch with only the records the cleaner keeps, its offsets
untouched. The decisions (which records stay) are eoslog.log.cleaner's, in Python over the
numpy arrays these return; nothing here creates a Python object per record.

Thread safety: the functions keep no state; the buffers they read must not change meanwhile."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport INT64_MAX, INT64_MIN, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

from batch cimport (
    eos_batch_crc,
    eos_batch_header,
    eos_parse_record,
    eos_read_header,
    eos_record,
    eos_record_body_size,
    eos_write_header,
    eos_write_record,
)
from engine cimport *

import numpy as np

from eoslog import limits
from eoslog.errors import raise_for_status
from eoslog.record import compression

include "framing.pxi"

# Two 64-bit hashes of a key make one 128-bit key identity (Kafka's SkimpyOffsetMap keeps a
# 16-byte MD5 for the same purpose: two keys with equal hashes are taken for one key, so the
# hash must be wide enough that this never happens by chance).
cdef uint64_t _SEED_HIGH = 0x9E3779B97F4A7C15ULL
cdef uint64_t _SEED_LOW = 0xC2B2AE3D27D4EB4FULL
cdef uint64_t _MULTIPLIER = 0xFF51AFD7ED558CCDULL


cdef inline uint64_t _finish(uint64_t h) noexcept nogil:
    # splitmix64's finalizer: every input bit reaches every output bit.
    h ^= h >> 30
    h *= 0xBF58476D1CE4E5B9ULL
    h ^= h >> 27
    h *= 0x94D049BB133111EBULL
    h ^= h >> 31
    return h


cdef inline uint64_t _hash(const uint8_t *p, int32_t length, uint64_t seed) noexcept nogil:
    cdef uint64_t h = seed ^ (<uint64_t>length * _MULTIPLIER)
    cdef uint64_t word
    cdef int32_t i = 0
    while i + 8 <= length:
        memcpy(&word, p + i, 8)
        h = _finish(h ^ word) + seed
        i += 8
    word = 0
    if i < length:
        memcpy(&word, p + i, <size_t>(length - i))
        h = _finish(h ^ word ^ (<uint64_t>(length - i) << 56)) + seed
    return _finish(h)


def batch_keys(data, infos):
    """For the whole batches of `data` listed in `infos` (scan.BATCH_INFO rows, positions into
    data), one row per record of every batch that is not a control batch, in log order:
    (offset int64, hash_high uint64, hash_low uint64, tombstone uint8 (a key with a null
    value), batch int32 (the row of infos)). A record without a key hashes as an empty key and
    is never a tombstone (eoslog's compacted topics refuse them; a log written before the
    topic was compacted may hold some). Raises as the decoders do for a malformed batch."""
    cdef const uint8_t[::1] view = data
    cdef Py_ssize_t n = len(infos), i
    cdef int64_t total = int(infos["records_count"].sum()) if n else 0
    offsets = np.empty(total, dtype=np.int64)
    highs = np.empty(total, dtype=np.uint64)
    lows = np.empty(total, dtype=np.uint64)
    tombstones = np.empty(total, dtype=np.uint8)
    batches = np.empty(total, dtype=np.int32)
    cdef int64_t[::1] offset_out = offsets
    cdef uint64_t[::1] high_out = highs
    cdef uint64_t[::1] low_out = lows
    cdef uint8_t[::1] tombstone_out = tombstones
    cdef int32_t[::1] batch_out = batches
    cdef int64_t[::1] positions = np.ascontiguousarray(infos["position"], dtype=np.int64)
    cdef int64_t count = 0
    cdef eos_batch_header h
    cdef eos_record r
    cdef const uint8_t *batch
    cdef const uint8_t *cursor
    cdef const uint8_t *end
    cdef _RecordsSection section
    cdef int32_t k, parsed
    for i in range(n):
        batch = at(view, positions[i])
        check(eos_read_header(batch, remaining_after(positions[i], view.shape[0]), &h),
              positions[i])
        if h.attributes & EOS_CONTROL_MASK:
            continue
        check_codec_and_count(&h, positions[i])
        if count + h.records_count > total:
            raise_for_status(EOS_RECORDS_REMAINING, positions[i])
        section = records_section(data, batch, <size_t>h.batch_length + EOS_LOG_OVERHEAD, &h,
                                  positions[i], limits.decompressed_batch_bytes_max)
        cursor = section.start
        end = section.start + section.size
        parsed = 0
        with nogil:
            for k in range(h.records_count):
                if eos_parse_record(&cursor, end, &r) != EOS_OK:
                    break
                parsed += 1
                offset_out[count] = h.base_offset + r.offset_delta
                if r.key_length >= 0:
                    high_out[count] = _hash(r.key, r.key_length, _SEED_HIGH)
                    low_out[count] = _hash(r.key, r.key_length, _SEED_LOW)
                else:
                    high_out[count] = _hash(r.key, 0, _SEED_HIGH)
                    low_out[count] = _hash(r.key, 0, _SEED_LOW)
                tombstone_out[count] = r.key_length >= 0 and r.value_length < 0
                batch_out[count] = <int32_t>i
                count += 1
        if parsed != h.records_count or cursor != end:
            raise_for_status(EOS_RECORD_OVERRUN, positions[i])
    return offsets[:count], highs[:count], lows[:count], tombstones[:count], batches[:count]


def filter_batch(data, Py_ssize_t position, keep, int64_t delete_horizon_ms=-1):
    """The batch at `position` of `data` rewritten with only the records whose entry in
    `keep` (uint8, one per record in order) is nonzero: base offset, last offset delta,
    producer fields, sequence and codec unchanged (Kafka's MemoryRecords.filterTo keeps a
    batch's offsets so that producer state survives), record count, length, max timestamp
    (CreateTime: the largest kept record's; an emptied batch keeps the old) and CRC new.
    delete_horizon_ms >= 0 on a batch without a delete horizon sets one (KIP-534: the
    attribute bit, and the base timestamp becomes the horizon with every record's timestamp
    delta re-encoded against it). ValueError when keep's length is not the record count."""
    cdef const uint8_t[::1] view = data
    cdef const uint8_t[::1] wanted = np.ascontiguousarray(keep, dtype=np.uint8)
    cdef eos_batch_header h
    cdef const uint8_t *batch = at(view, position)
    check_position(position)
    check(eos_read_header(batch, remaining_after(position, view.shape[0]), &h), position)
    check_codec_and_count(&h, position)
    if wanted.shape[0] != h.records_count:
        raise ValueError(f"keep has {wanted.shape[0]} entries for {h.records_count} records")
    cdef size_t size = <size_t>h.batch_length + EOS_LOG_OVERHEAD
    if size > remaining_after(position, view.shape[0]):
        raise_for_status(EOS_TRUNCATED_BATCH, position)
    cdef _RecordsSection section = records_section(
        data, batch, size, &h, position, limits.decompressed_batch_bytes_max)
    cdef bint rebase = delete_horizon_ms >= 0 and not (h.attributes & EOS_DELETE_HORIZON_MASK)
    cdef int64_t old_base = h.base_timestamp
    cdef int64_t new_base = delete_horizon_ms if rebase else h.base_timestamp
    # Re-encoding a delta can grow a record by at most the 10 bytes of a varlong.
    cdef Py_ssize_t room = <Py_ssize_t>section.size + 10 * <Py_ssize_t>h.records_count
    records = PyBytes_FromStringAndSize(NULL, room)
    cdef uint8_t *out = <uint8_t *>PyBytes_AS_STRING(records)
    cdef size_t written = 0, body
    cdef const uint8_t *cursor = section.start
    cdef const uint8_t *start
    cdef const uint8_t *end = section.start + section.size
    cdef eos_record r
    cdef int32_t k, kept = 0
    cdef int64_t timestamp, max_timestamp = INT64_MIN
    cdef int status = EOS_OK
    with nogil:
        for k in range(h.records_count):
            start = cursor
            status = eos_parse_record(&cursor, end, &r)
            if status != EOS_OK:
                break
            if not wanted[k]:
                continue
            kept += 1
            timestamp = old_base + r.timestamp_delta
            if timestamp > max_timestamp:
                max_timestamp = timestamp
            if not rebase:
                memcpy(out + written, start, <size_t>(cursor - start))
                written += <size_t>(cursor - start)
                continue
            body = eos_record_body_size(timestamp - new_base, r.offset_delta, r.key_length,
                                        r.value_length, r.headers_count,
                                        <size_t>(r.end - r.headers))
            written += eos_write_record(out + written, body, timestamp - new_base,
                                        r.offset_delta, r.key, r.key_length, r.value,
                                        r.value_length, r.headers_count, r.headers,
                                        <size_t>(r.end - r.headers))
    if status != EOS_OK:
        raise_for_status(status, position)
    if cursor != end:
        raise_for_status(EOS_RECORDS_REMAINING, position)
    assert <Py_ssize_t>written <= room, (written, room)
    payload = memoryview(records)[:written]
    cdef int codec = h.attributes & EOS_COMPRESSION_MASK
    if codec != EOS_COMPRESSION_NONE:
        payload = compression.compress(codec, payload)
    return _framed(&h, payload, kept, rebase, new_base, max_timestamp)


cdef object _framed(eos_batch_header *h, object payload, int32_t kept, bint rebase,
                    int64_t new_base, int64_t max_timestamp):
    """The batch of header h (updated here) over the records section `payload`."""
    cdef const uint8_t[::1] section = payload
    cdef Py_ssize_t size = EOS_RECORDS_OFFSET + section.shape[0]
    out = PyBytes_FromStringAndSize(NULL, size)
    cdef uint8_t *batch = <uint8_t *>PyBytes_AS_STRING(out)
    if section.shape[0]:
        memcpy(batch + EOS_RECORDS_OFFSET, &section[0], <size_t>section.shape[0])
    h.records_count = kept
    h.batch_length = <int32_t>(size - EOS_LOG_OVERHEAD)
    if rebase:
        h.attributes |= EOS_DELETE_HORIZON_MASK
        h.base_timestamp = new_base
    elif kept == 0 and not (h.attributes & EOS_DELETE_HORIZON_MASK):
        h.base_timestamp = -1  # Kafka's emptied batch (writeEmptyHeader): no base timestamp
    if kept and not (h.attributes & EOS_TIMESTAMP_TYPE_MASK):
        h.max_timestamp = max_timestamp
    eos_write_header(batch, h)
    h.crc = eos_batch_crc(batch, <size_t>size)
    eos_write_header(batch, h)
    assert eos_batch_crc(batch, <size_t>size) == h.crc
    return out
