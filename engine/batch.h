/* Kafka v2 record batches in C: header read/write, CRC, record parsing, the validation walk and
 * the columnar decode (docs/format.md §1-§3, §10). No Python objects; every function is safe to call
 * without the GIL. Functions return an enum eos_status (status.h); nothing here allocates.
 *
 * Bounds: every length read from the bytes is checked against the bytes present before it is
 * used, so no input can make these functions read outside [buf, buf + len). */
#ifndef EOSLOG_BATCH_H
#define EOSLOG_BATCH_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t base_offset;
    int32_t batch_length;
    int32_t partition_leader_epoch;
    int8_t magic;
    uint32_t crc;
    int16_t attributes;
    int32_t last_offset_delta;
    int64_t base_timestamp;
    int64_t max_timestamp;
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t base_sequence;
    int32_t records_count;
} eos_batch_header;

/* One record, pointing into the records section it was parsed from. */
typedef struct {
    int64_t timestamp_delta;
    int32_t offset_delta;
    int32_t key_length; /* < 0: null key */
    const uint8_t *key;
    int32_t value_length; /* < 0: null value */
    const uint8_t *value;
    int32_t headers_count;
    const uint8_t *headers; /* [headers, end): the encoded headers, already checked */
    const uint8_t *end;
} eos_record;

/* Header of the batch at buf[0, len): needs 61 bytes, batch length >= 49, magic 2. */
int eos_read_header(const uint8_t *buf, size_t len, eos_batch_header *out);
void eos_write_header(uint8_t *buf, const eos_batch_header *header);

/* Framing of the batch at buf[0, len) as Kafka's FileLogInputStream reads a file: OK with
 * *size set when a whole batch is present; EOS_TRUNCATED_BATCH when the bytes end first (fewer
 * than 17 bytes, or the length runs past len): the caller stops there without error. A length
 * below the v2 minimum, or a bad magic, is an error. */
int eos_frame_batch(const uint8_t *buf, size_t len, size_t *size);

/* CRC-32C of a whole batch's protected bytes [21, size). */
uint32_t eos_batch_crc(const uint8_t *batch, size_t size);

/* Parse the record at *cursor (before end); on OK, *cursor moves past it. Checks the whole
 * structure, headers included; never reads at or past end. */
int eos_parse_record(const uint8_t **cursor, const uint8_t *end, eos_record *out);

/* Validate UTF-8 exactly as Python's strict decoder does (no overlongs, no surrogates,
 * nothing above U+10FFFF). Returns 1 when valid. */
int eos_utf8_valid(const uint8_t *p, size_t len);

typedef struct {
    int64_t max_timestamp;
    /* The smallest record timestamp other than -1 (NO_TIMESTAMP), or -1 when every record
     * has none: with max_timestamp it bounds what the leader's timestamp rules check. */
    int64_t min_timestamp;
    int32_t offset_delta_of_max_timestamp;
    int32_t first_key_length; /* the first record's key (control batches check it) */
} eos_walk_result;

enum { EOS_WALK_CLIENT_RULES = 1 }; /* offset deltas 0..n-1 and UTF-8 header keys */

/* Walk exactly `count` records of an uncompressed records section [records, records + len):
 * each well formed, nothing left over. With EOS_WALK_CLIENT_RULES also the stricter rules an
 * append applies. Reports the max record timestamp (CreateTime) for the time index, and the
 * min one other than -1 for the timestamp rules. */
int eos_walk_records(const uint8_t *records, size_t len, int32_t count, int64_t base_timestamp,
                     int flags, eos_walk_result *out);

/* The CRC of the batch batch[0, size) (as eos_batch_crc) and the walk of its records section
 * (as eos_walk_records, the records uncompressed from byte 61 on), in one pass over the bytes
 * that takes turns between the two, so a batch that is not in cache is read from memory once.
 * *crc is always set; the status is the walk's. */
int eos_crc_and_walk_records(const uint8_t *batch, size_t size, int32_t count,
                             int64_t base_timestamp, int flags, uint32_t *crc,
                             eos_walk_result *out);

/* Output columns in Arrow layout. The caller allocates every array with the given capacities
 * (offsets arrays hold capacity + 1 entries, offsets[0] == 0) and zeroes nothing: validity
 * bits are written explicitly. `headers_wanted` == 0 leaves the header arrays untouched. */
typedef struct {
    int64_t records_capacity, key_bytes_capacity, value_bytes_capacity;
    int64_t header_entries_capacity, header_key_bytes_capacity, header_value_bytes_capacity;
    int64_t records, key_bytes, value_bytes, header_entries, header_key_bytes, header_value_bytes;
    int64_t invalid_header_keys; /* header keys that are not UTF-8 (the caller replaces them) */
    int64_t *offset;
    int64_t *timestamp_ms;
    int32_t *timestamp_type;
    int32_t *key_offsets;
    uint8_t *key_data;
    uint8_t *key_validity;
    int32_t *value_offsets;
    uint8_t *value_data;
    uint8_t *value_validity;
    int headers_wanted;
    int32_t *header_offsets;
    uint8_t *header_validity;
    int32_t *header_key_offsets;
    uint8_t *header_key_data;
    int32_t *header_value_offsets;
    uint8_t *header_value_data;
    uint8_t *header_value_validity;
} eos_columns;

/* Append the records of one batch (records section [records, records + len), uncompressed)
 * with offset_min <= offset < offset_end to the columns. All or nothing: on any status but OK
 * the columns are as before. EOS_NEED_SPACE: a capacity is too small; grow and call again. */
int eos_decode_records(eos_columns *columns, const uint8_t *records, size_t len,
                       const eos_batch_header *header, int64_t offset_min, int64_t offset_end);

/* One record of a batch as a consumer's Message reads it: pointers into the records section it
 * was indexed from (the caller keeps that memory alive), nothing copied. key / value are NULL
 * for null ones; [headers, end) are the record's encoded headers, already checked by
 * eos_parse_record, to be walked with eos_next_header. */
typedef struct {
    int64_t offset;
    int64_t timestamp_ms;
    const uint8_t *key;
    const uint8_t *value;
    const uint8_t *headers;
    const uint8_t *end;
    int32_t key_length;   /* < 0: null key */
    int32_t value_length; /* < 0: null value */
    int32_t headers_count;
    int32_t timestamp_type; /* 0 CreateTime, 1 LogAppendTime (the batch's) */
    int32_t leader_epoch;   /* the batch's partition leader epoch (-1: none) */
} eos_record_ref;

/* Append a reference to each record of one batch (records section [records, records + len),
 * uncompressed) with offset_min <= offset < offset_end to refs[*count ..], at most `capacity`
 * entries in all, and advance *count. The records are checked as eos_decode_records checks
 * them. All or nothing: on any status but OK *count is unchanged. EOS_NEED_SPACE: capacity
 * is too small; grow and call again. */
int eos_index_records(eos_record_ref *refs, int64_t capacity, int64_t *count,
                      const uint8_t *records, size_t len, const eos_batch_header *header,
                      int64_t offset_min, int64_t offset_end);

/* One header of a record indexed by eos_index_records: reads the header at p (before `end`,
 * the record's end) into key / value (value NULL with *value_length < 0 when null) and returns
 * the next header's position. The headers were checked, so this cannot fail. */
const uint8_t *eos_next_header(const uint8_t *p, const uint8_t *end, const uint8_t **key,
                               int32_t *key_length, const uint8_t **value,
                               int32_t *value_length);

/* Record encoding for the builder: the size of the record body (what its length varint
 * counts) and the writer. headers_size is the encoded size of the headers after their count. */
size_t eos_record_body_size(int64_t timestamp_delta, int32_t offset_delta, int32_t key_length,
                            int32_t value_length, int32_t headers_count, size_t headers_size);
/* Writes length varint + body at out (room for eos_record_body_size + 5 bytes); the headers'
 * bytes, already encoded, are copied from headers. Returns bytes written. */
size_t eos_write_record(uint8_t *out, size_t body_size, int64_t timestamp_delta,
                        int32_t offset_delta, const uint8_t *key, int32_t key_length,
                        const uint8_t *value, int32_t value_length, int32_t headers_count,
                        const uint8_t *headers, size_t headers_size);

#endif
