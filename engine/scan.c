/* Scanning runs of whole batches: see scan.h. */
#include "scan.h"

#include "batch.h"
#include "batch_layout.h"
#include "bytes_be.h"
#include "status.h"

static void describe(size_t position, size_t size, const eos_batch_header *h,
                     eos_batch_info *info) {
    uint64_t last = (uint64_t)h->base_offset + (uint64_t)(int64_t)h->last_offset_delta;
    info->position = (int64_t)position;
    info->base_offset = h->base_offset;
    info->last_offset = (int64_t)last; /* wraps as Java's long sum would */
    info->max_timestamp = h->max_timestamp;
    info->producer_id = h->producer_id;
    info->size = (int32_t)size;
    info->records_count = h->records_count;
    info->base_sequence = h->base_sequence;
    info->partition_leader_epoch = h->partition_leader_epoch;
    info->attributes = h->attributes;
    info->producer_epoch = h->producer_epoch;
    info->reserved = 0;
}

int eos_scan_batches(const uint8_t *buf, size_t len, size_t start, int verify_crc,
                     eos_batch_info *out, size_t capacity, size_t *count, size_t *stop) {
    size_t position = start, n = 0;
    int status = EOS_OK;
    while (n < capacity && position < len) {
        size_t size = 0;
        status = eos_frame_batch(buf + position, len - position, &size);
        if (status == EOS_TRUNCATED_BATCH) {
            status = EOS_OK; /* a partial trailing batch: the end of the data */
            break;
        }
        if (status != EOS_OK) break;
        eos_batch_header h;
        status = eos_read_header(buf + position, size, &h);
        if (status != EOS_OK) break;
        if (verify_crc && eos_batch_crc(buf + position, size) != h.crc) {
            status = EOS_CRC_MISMATCH;
            break;
        }
        describe(position, size, &h, &out[n]);
        n++;
        position += size;
    }
    *count = n;
    *stop = position;
    return status;
}

size_t eos_find_valid_batch(const uint8_t *buf, size_t len, size_t from) {
    for (size_t p = from; p + EOS_HEADER_SIZE <= len; p++) {
        /* Cheap filters first: magic 2 at its place and a length that fits what remains. */
        if (buf[p + EOS_MAGIC_OFFSET] != EOS_MAGIC_V2) continue;
        int32_t batch_length = eos_load_i32be(buf + p + EOS_BATCH_LENGTH_OFFSET);
        if (batch_length < EOS_BATCH_LENGTH_MIN) continue;
        size_t size = (size_t)EOS_LOG_OVERHEAD + (size_t)batch_length;
        if (size > len - p) continue;
        if (eos_batch_crc(buf + p, size) == eos_load_u32be(buf + p + EOS_CRC_OFFSET)) return p;
    }
    return len;
}

int eos_find_batch(const uint8_t *buf, size_t len, size_t start, int64_t target,
                   size_t *position, size_t *size) {
    size_t p = start;
    for (;;) {
        *position = p;
        if (p > len || len - p < EOS_HEADER_SIZE) return EOS_TRUNCATED_BATCH;
        eos_batch_header h;
        int status = eos_read_header(buf + p, len - p, &h);
        if (status != EOS_OK) return status;
        size_t batch_size = (size_t)EOS_LOG_OVERHEAD + (size_t)h.batch_length;
        uint64_t last = (uint64_t)h.base_offset + (uint64_t)(int64_t)h.last_offset_delta;
        if ((int64_t)last >= target) {
            *size = batch_size;
            return EOS_OK;
        }
        p += batch_size;
    }
}

int eos_describe_header(const uint8_t *header, size_t len, size_t position, size_t end,
                        eos_batch_info *info) {
    if (position > end) return EOS_TRUNCATED_BATCH;
    if (len > end - position) len = end - position;
    eos_batch_header h;
    int status = eos_read_header(header, len, &h);
    if (status != EOS_OK) return status;
    size_t size = (size_t)EOS_LOG_OVERHEAD + (size_t)h.batch_length;
    if (size > end - position) return EOS_TRUNCATED_BATCH;
    describe(position, size, &h, info);
    return EOS_OK;
}
