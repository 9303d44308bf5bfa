# Declarations of engine/batch.h for Cython (the C contract is documented there).
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t


cdef extern from "batch.h" nogil:
    ctypedef struct eos_batch_header:
        int64_t base_offset
        int32_t batch_length
        int32_t partition_leader_epoch
        int8_t magic
        uint32_t crc
        int16_t attributes
        int32_t last_offset_delta
        int64_t base_timestamp
        int64_t max_timestamp
        int64_t producer_id
        int16_t producer_epoch
        int32_t base_sequence
        int32_t records_count

    ctypedef struct eos_record:
        int64_t timestamp_delta
        int32_t offset_delta
        int32_t key_length
        const uint8_t *key
        int32_t value_length
        const uint8_t *value
        int32_t headers_count
        const uint8_t *headers
        const uint8_t *end

    ctypedef struct eos_walk_result:
        int64_t max_timestamp
        int64_t min_timestamp
        int32_t offset_delta_of_max_timestamp
        int32_t first_key_length

    ctypedef struct eos_columns:
        int64_t records_capacity, key_bytes_capacity, value_bytes_capacity
        int64_t header_entries_capacity, header_key_bytes_capacity, header_value_bytes_capacity
        int64_t records, key_bytes, value_bytes, header_entries, header_key_bytes
        int64_t header_value_bytes
        int64_t invalid_header_keys
        int64_t *offset
        int64_t *timestamp_ms
        int32_t *timestamp_type
        int32_t *key_offsets
        uint8_t *key_data
        uint8_t *key_validity
        int32_t *value_offsets
        uint8_t *value_data
        uint8_t *value_validity
        int headers_wanted
        int32_t *header_offsets
        uint8_t *header_validity
        int32_t *header_key_offsets
        uint8_t *header_key_data
        int32_t *header_value_offsets
        uint8_t *header_value_data
        uint8_t *header_value_validity

    ctypedef struct eos_record_ref:
        int64_t offset
        int64_t timestamp_ms
        const uint8_t *key
        const uint8_t *value
        const uint8_t *headers
        const uint8_t *end
        int32_t key_length
        int32_t value_length
        int32_t headers_count
        int32_t timestamp_type
        int32_t leader_epoch

    enum:
        EOS_WALK_CLIENT_RULES

    int eos_read_header(const uint8_t *buf, size_t len, eos_batch_header *out)
    void eos_write_header(uint8_t *buf, const eos_batch_header *header)
    int eos_frame_batch(const uint8_t *buf, size_t len, size_t *size)
    uint32_t eos_batch_crc(const uint8_t *batch, size_t size)
    int eos_parse_record(const uint8_t **cursor, const uint8_t *end, eos_record *out)
    int eos_utf8_valid(const uint8_t *p, size_t len)
    int eos_walk_records(const uint8_t *records, size_t len, int32_t count,
                         int64_t base_timestamp, int flags, eos_walk_result *out)
    int eos_crc_and_walk_records(const uint8_t *batch, size_t size, int32_t count,
                                 int64_t base_timestamp, int flags, uint32_t *crc,
                                 eos_walk_result *out)
    int eos_decode_records(eos_columns *columns, const uint8_t *records, size_t len,
                           const eos_batch_header *header, int64_t offset_min,
                           int64_t offset_end)
    int eos_index_records(eos_record_ref *refs, int64_t capacity, int64_t *count,
                          const uint8_t *records, size_t len, const eos_batch_header *header,
                          int64_t offset_min, int64_t offset_end)
    const uint8_t *eos_next_header(const uint8_t *p, const uint8_t *end, const uint8_t **key,
                                   int32_t *key_length, const uint8_t **value,
                                   int32_t *value_length)
    size_t eos_record_body_size(int64_t timestamp_delta, int32_t offset_delta,
                                int32_t key_length, int32_t value_length,
                                int32_t headers_count, size_t headers_size)
    size_t eos_write_record(uint8_t *out, size_t body_size, int64_t timestamp_delta,
                            int32_t offset_delta, const uint8_t *key, int32_t key_length,
                            const uint8_t *value, int32_t value_length, int32_t headers_count,
                            const uint8_t *headers, size_t headers_size)
