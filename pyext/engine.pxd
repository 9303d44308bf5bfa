# cython: language_level=3
# Declarations of the C engine (engine/*.h) for the Cython modules in pyext/. Every function and
# macro of crc32c.h, varint.h, murmur2.h, bytes_be.h, batch_layout.h, scan.h and status.h is
# declared here, once, so that the modules using them agree. Nothing in engine/ touches Python
# objects, so every declaration is nogil; extern functions are noexcept in Cython 3 (they
# return statuses).

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t


cdef extern from "crc32c.h" nogil:
    uint32_t eos_crc32c(uint32_t crc, const void *buf, size_t len)
    uint32_t eos_crc32c_portable(uint32_t crc, const void *buf, size_t len)
    uint32_t eos_crc32c_combine(uint32_t crc_a, uint32_t crc_b, size_t len_b)
    const char *eos_crc32c_backend()


cdef extern from "varint.h" nogil:
    enum:
        EOS_VARINT_BYTES_MAX
        EOS_VARLONG_BYTES_MAX

    uint32_t eos_zigzag32(int32_t v)
    uint64_t eos_zigzag64(int64_t v)
    int32_t eos_unzigzag32(uint32_t u)
    int64_t eos_unzigzag64(uint64_t u)

    # Return bytes consumed, or 0 for a malformed or truncated varint; never read past end.
    size_t eos_decode_varint(const uint8_t *p, const uint8_t *end, int32_t *out)
    size_t eos_decode_varlong(const uint8_t *p, const uint8_t *end, int64_t *out)

    size_t eos_size_of_uvarint64(uint64_t u)
    size_t eos_size_of_varint(int32_t v)
    size_t eos_size_of_varlong(int64_t v)

    # Writers need room for EOS_VARLONG_BYTES_MAX bytes at p; they return bytes written.
    size_t eos_encode_uvarint64(uint8_t *p, uint64_t u)
    size_t eos_encode_varint(uint8_t *p, int32_t v)
    size_t eos_encode_varlong(uint8_t *p, int64_t v)


cdef extern from "murmur2.h" nogil:
    int32_t eos_murmur2(const uint8_t *p, size_t length)


cdef extern from "bytes_be.h" nogil:
    uint16_t eos_load_u16be(const uint8_t *p)
    uint32_t eos_load_u32be(const uint8_t *p)
    uint64_t eos_load_u64be(const uint8_t *p)
    int16_t eos_load_i16be(const uint8_t *p)
    int32_t eos_load_i32be(const uint8_t *p)
    int64_t eos_load_i64be(const uint8_t *p)

    void eos_store_u16be(uint8_t *p, uint16_t v)
    void eos_store_u32be(uint8_t *p, uint32_t v)
    void eos_store_u64be(uint8_t *p, uint64_t v)
    void eos_store_i16be(uint8_t *p, int16_t v)
    void eos_store_i32be(uint8_t *p, int32_t v)
    void eos_store_i64be(uint8_t *p, int64_t v)


cdef extern from "batch_layout.h" nogil:
    enum:
        EOS_BASE_OFFSET_OFFSET
        EOS_BATCH_LENGTH_OFFSET
        EOS_PARTITION_LEADER_EPOCH_OFFSET
        EOS_MAGIC_OFFSET
        EOS_CRC_OFFSET
        EOS_ATTRIBUTES_OFFSET
        EOS_LAST_OFFSET_DELTA_OFFSET
        EOS_BASE_TIMESTAMP_OFFSET
        EOS_MAX_TIMESTAMP_OFFSET
        EOS_PRODUCER_ID_OFFSET
        EOS_PRODUCER_EPOCH_OFFSET
        EOS_BASE_SEQUENCE_OFFSET
        EOS_RECORDS_COUNT_OFFSET
        EOS_RECORDS_OFFSET

        EOS_LOG_OVERHEAD
        EOS_HEADER_SIZE
        EOS_BATCH_LENGTH_MIN
        EOS_MAGIC_V2

        EOS_COMPRESSION_MASK
        EOS_TIMESTAMP_TYPE_MASK
        EOS_TRANSACTIONAL_MASK
        EOS_CONTROL_MASK
        EOS_DELETE_HORIZON_MASK

        EOS_COMPRESSION_NONE
        EOS_COMPRESSION_GZIP
        EOS_COMPRESSION_SNAPPY
        EOS_COMPRESSION_LZ4
        EOS_COMPRESSION_ZSTD

        EOS_CONTROL_ABORT
        EOS_CONTROL_COMMIT
        EOS_CONTROL_KEY_VERSION
        EOS_CONTROL_KEY_TYPE_OFFSET
        EOS_CONTROL_KEY_SIZE
        EOS_END_TXN_MARKER_VERSION
        EOS_END_TXN_MARKER_EPOCH_OFFSET
        EOS_END_TXN_MARKER_VALUE_SIZE

        EOS_RECORD_BYTES_MIN
        EOS_RECORD_HEADER_BYTES_MIN


cdef extern from "status.h" nogil:
    enum eos_status:
        EOS_OK
        EOS_TRUNCATED_HEADER
        EOS_BATCH_LENGTH_TOO_SMALL
        EOS_BAD_MAGIC
        EOS_UNSUPPORTED_MAGIC
        EOS_TRUNCATED_BATCH
        EOS_TRAILING_BYTES
        EOS_CRC_MISMATCH
        EOS_BATCH_TOO_LARGE
        EOS_NONZERO_BASE_OFFSET
        EOS_CONTROL_FROM_CLIENT
        EOS_COUNT_MISMATCH
        EOS_SEQUENCE_WITHOUT_PRODUCER
        EOS_TRANSACTIONAL_WITHOUT_PRODUCER
        EOS_UNSUPPORTED_COMPRESSION
        EOS_BAD_COMPRESSION
        EOS_DECOMPRESS_FAILED
        EOS_BAD_VARINT
        EOS_RECORD_OVERRUN
        EOS_RECORD_SIZE_MISMATCH
        EOS_BAD_HEADER_COUNT
        EOS_BAD_HEADER_KEY
        EOS_RECORDS_REMAINING
        EOS_BAD_OFFSET_DELTA
        EOS_NEGATIVE_COUNT
        EOS_DECOMPRESSED_TOO_LARGE
        EOS_BAD_HEADER_KEY_UTF8
        EOS_BAD_CONTROL_RECORD
        # Internal, never surfaced: the output columns need more room; grow and retry.
        EOS_NEED_SPACE


cdef extern from "scan.h" nogil:
    # One row of a scan (scan.BATCH_INFO is its numpy view, checked against sizeof).
    ctypedef struct eos_batch_info:
        int64_t position
        int64_t base_offset
        int64_t last_offset
        int64_t max_timestamp
        int64_t producer_id
        int32_t size
        int32_t records_count
        int32_t base_sequence
        int32_t partition_leader_epoch
        int16_t attributes
        int16_t producer_epoch
        int32_t reserved

    int eos_scan_batches(const uint8_t *buf, size_t len, size_t start, int verify_crc,
                         eos_batch_info *out, size_t capacity, size_t *count, size_t *stop)
    size_t eos_find_valid_batch(const uint8_t *buf, size_t len, size_t start)
    int eos_find_batch(const uint8_t *buf, size_t len, size_t start, int64_t target,
                       size_t *position, size_t *size)
    int eos_describe_header(const uint8_t *header, size_t len, size_t position, size_t end,
                            eos_batch_info *info)


cdef inline const eos_batch_info *batch_info_rows(infos, dtype) except? NULL:
    """The eos_batch_info rows of a contiguous array of `dtype` (scan.BATCH_INFO: a
    scan_batches result or a slice of it); NULL for none. Valid while `infos` lives."""
    if infos.dtype != dtype:
        raise TypeError("expected an array of scan.BATCH_INFO rows")
    if len(infos) == 0:
        return NULL
    cdef const uint8_t[::1] raw = infos.view("u1")
    return <const eos_batch_info *>&raw[0]
