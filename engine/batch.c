/* Kafka v2 record batches: see batch.h for the contract of each function. */
#include "batch.h"

#include <string.h>

#include "batch_layout.h"
#include "bytes_be.h"
#include "crc32c.h"
#include "status.h"
#include "varint.h"

/* Broken invariants are our bugs: fail loudly even in release builds (docs/style.md rule 5);
 * assert() would vanish under NDEBUG. */
#define EOS_VERIFY(cond)          \
    do {                          \
        if (!(cond)) __builtin_trap(); \
    } while (0)

static int check_magic(int8_t magic) {
    if (magic == EOS_MAGIC_V2) return EOS_OK;
    if (magic == 0 || magic == 1) return EOS_UNSUPPORTED_MAGIC;
    return EOS_BAD_MAGIC;
}

int eos_read_header(const uint8_t *buf, size_t len, eos_batch_header *out) {
    if (len < EOS_HEADER_SIZE) return EOS_TRUNCATED_HEADER;
    out->base_offset = eos_load_i64be(buf + EOS_BASE_OFFSET_OFFSET);
    out->batch_length = eos_load_i32be(buf + EOS_BATCH_LENGTH_OFFSET);
    out->partition_leader_epoch = eos_load_i32be(buf + EOS_PARTITION_LEADER_EPOCH_OFFSET);
    out->magic = (int8_t)buf[EOS_MAGIC_OFFSET];
    out->crc = eos_load_u32be(buf + EOS_CRC_OFFSET);
    out->attributes = eos_load_i16be(buf + EOS_ATTRIBUTES_OFFSET);
    out->last_offset_delta = eos_load_i32be(buf + EOS_LAST_OFFSET_DELTA_OFFSET);
    out->base_timestamp = eos_load_i64be(buf + EOS_BASE_TIMESTAMP_OFFSET);
    out->max_timestamp = eos_load_i64be(buf + EOS_MAX_TIMESTAMP_OFFSET);
    out->producer_id = eos_load_i64be(buf + EOS_PRODUCER_ID_OFFSET);
    out->producer_epoch = eos_load_i16be(buf + EOS_PRODUCER_EPOCH_OFFSET);
    out->base_sequence = eos_load_i32be(buf + EOS_BASE_SEQUENCE_OFFSET);
    out->records_count = eos_load_i32be(buf + EOS_RECORDS_COUNT_OFFSET);
    if (out->batch_length < EOS_BATCH_LENGTH_MIN) return EOS_BATCH_LENGTH_TOO_SMALL;
    return check_magic(out->magic);
}

void eos_write_header(uint8_t *buf, const eos_batch_header *h) {
    eos_store_i64be(buf + EOS_BASE_OFFSET_OFFSET, h->base_offset);
    eos_store_i32be(buf + EOS_BATCH_LENGTH_OFFSET, h->batch_length);
    eos_store_i32be(buf + EOS_PARTITION_LEADER_EPOCH_OFFSET, h->partition_leader_epoch);
    buf[EOS_MAGIC_OFFSET] = (uint8_t)h->magic;
    eos_store_u32be(buf + EOS_CRC_OFFSET, h->crc);
    eos_store_i16be(buf + EOS_ATTRIBUTES_OFFSET, h->attributes);
    eos_store_i32be(buf + EOS_LAST_OFFSET_DELTA_OFFSET, h->last_offset_delta);
    eos_store_i64be(buf + EOS_BASE_TIMESTAMP_OFFSET, h->base_timestamp);
    eos_store_i64be(buf + EOS_MAX_TIMESTAMP_OFFSET, h->max_timestamp);
    eos_store_i64be(buf + EOS_PRODUCER_ID_OFFSET, h->producer_id);
    eos_store_i16be(buf + EOS_PRODUCER_EPOCH_OFFSET, h->producer_epoch);
    eos_store_i32be(buf + EOS_BASE_SEQUENCE_OFFSET, h->base_sequence);
    eos_store_i32be(buf + EOS_RECORDS_COUNT_OFFSET, h->records_count);
}

/* Kafka's FileLogInputStream gives up quietly with fewer than 17 bytes (offset, length and
 * magic) left, and when the length runs past the end; only then is the magic read. */
#define EOS_HEADER_SIZE_UP_TO_MAGIC 17

int eos_frame_batch(const uint8_t *buf, size_t len, size_t *size) {
    if (len < EOS_HEADER_SIZE_UP_TO_MAGIC) return EOS_TRUNCATED_BATCH;
    int32_t batch_length = eos_load_i32be(buf + EOS_BATCH_LENGTH_OFFSET);
    if (batch_length < EOS_BATCH_LENGTH_MIN) return EOS_BATCH_LENGTH_TOO_SMALL;
    size_t total = (size_t)EOS_LOG_OVERHEAD + (size_t)batch_length;
    if (total > len) return EOS_TRUNCATED_BATCH;
    int status = check_magic((int8_t)buf[EOS_MAGIC_OFFSET]);
    if (status != EOS_OK) return status;
    *size = total;
    return EOS_OK;
}

uint32_t eos_batch_crc(const uint8_t *batch, size_t size) {
    EOS_VERIFY(size >= EOS_HEADER_SIZE);
    return eos_crc32c(0, batch + EOS_ATTRIBUTES_OFFSET, size - EOS_ATTRIBUTES_OFFSET);
}

/* Why a varint could not be read: bytes ran out first (RECORD_OVERRUN), or all of the
 * longest legal encoding still had continuation bits (BAD_VARINT). */
static inline int varint_failure(const uint8_t *p, const uint8_t *end, size_t bytes_max) {
    return (size_t)(end - p) >= bytes_max ? EOS_BAD_VARINT : EOS_RECORD_OVERRUN;
}

/* Reads a varint field bounded by end, returning the failure status from the caller. */
#define READ_VARINT(p, end, out)                                               \
    do {                                                                       \
        size_t used_ = eos_decode_varint((p), (end), (out));                   \
        if (used_ == 0) return varint_failure((p), (end), EOS_VARINT_BYTES_MAX); \
        (p) += used_;                                                          \
    } while (0)

/* base + delta as Java's long arithmetic wraps it (Kafka's reader does the same sums);
 * in C a signed overflow would be undefined, so add as unsigned. */
static inline int64_t wrapping_add(int64_t base, int64_t delta) {
    return (int64_t)((uint64_t)base + (uint64_t)delta);
}

/* eos_parse_record's body, inlined into the decode loops below: a call per record cost
 * about a fifth of a columnar decode (perf on the read_committed bench's fetches). */
static inline int parse_record(const uint8_t **cursor, const uint8_t *end, eos_record *r) {
    const uint8_t *p = *cursor;
    if (p >= end) return EOS_RECORD_OVERRUN; /* the section ended before the declared count */
    int32_t length;
    READ_VARINT(p, end, &length);
    if (length < 0) return EOS_RECORD_SIZE_MISMATCH;
    if ((size_t)length > (size_t)(end - p)) return EOS_RECORD_OVERRUN;
    const uint8_t *record_end = p + length;

    if (p >= record_end) return EOS_RECORD_OVERRUN;
    p++; /* attributes: unused in v2 */
    size_t used = eos_decode_varlong(p, record_end, &r->timestamp_delta);
    if (used == 0) return varint_failure(p, record_end, EOS_VARLONG_BYTES_MAX);
    p += used;
    READ_VARINT(p, record_end, &r->offset_delta);

    READ_VARINT(p, record_end, &r->key_length);
    r->key = p;
    if (r->key_length > 0) {
        if ((size_t)r->key_length > (size_t)(record_end - p)) return EOS_RECORD_OVERRUN;
        p += r->key_length;
    }
    READ_VARINT(p, record_end, &r->value_length);
    r->value = p;
    if (r->value_length > 0) {
        if ((size_t)r->value_length > (size_t)(record_end - p)) return EOS_RECORD_OVERRUN;
        p += r->value_length;
    }
    READ_VARINT(p, record_end, &r->headers_count);
    if (r->headers_count < 0 || (size_t)r->headers_count > (size_t)(record_end - p))
        return EOS_BAD_HEADER_COUNT;
    r->headers = p;
    for (int32_t i = 0; i < r->headers_count; i++) {
        int32_t key_length, value_length;
        READ_VARINT(p, record_end, &key_length);
        if (key_length < 0) return EOS_BAD_HEADER_KEY;
        if ((size_t)key_length > (size_t)(record_end - p)) return EOS_RECORD_OVERRUN;
        p += key_length;
        READ_VARINT(p, record_end, &value_length);
        if (value_length > 0) {
            if ((size_t)value_length > (size_t)(record_end - p)) return EOS_RECORD_OVERRUN;
            p += value_length;
        }
    }
    if (p != record_end) return EOS_RECORD_SIZE_MISMATCH;
    r->end = record_end;
    *cursor = record_end;
    return EOS_OK;
}

int eos_parse_record(const uint8_t **cursor, const uint8_t *end, eos_record *r) {
    return parse_record(cursor, end, r);
}

int eos_utf8_valid(const uint8_t *p, size_t len) {
    size_t i = 0;
    while (i < len) {
        uint8_t c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint8_t low = 0x80, high = 0xBF; /* allowed range of the first continuation byte */
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) low = 0xA0;  /* no overlong 3-byte forms */
            if (c == 0xED) high = 0x9F; /* no UTF-16 surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) low = 0x90;  /* no overlong 4-byte forms */
            if (c == 0xF4) high = 0x8F; /* nothing above U+10FFFF */
        } else {
            return 0;
        }
        if (need > len - i - 1) return 0;
        if (p[i + 1] < low || p[i + 1] > high) return 0;
        for (size_t k = 2; k <= need; k++)
            if ((p[i + k] & 0xC0) != 0x80) return 0;
        i += need + 1;
    }
    return 1;
}

/* One header of a record whose structure eos_parse_record already checked: these reads
 * cannot fail, and the cursor stays inside the record. */
typedef struct {
    const uint8_t *key;
    int32_t key_length;
    const uint8_t *value;
    int32_t value_length; /* < 0: null */
} checked_header;

static inline const uint8_t *next_checked_header(const uint8_t *p, const uint8_t *end,
                                                 checked_header *h) {
    h->key_length = 0;
    h->value_length = -1;
    p += eos_decode_varint(p, end, &h->key_length);
    h->key = p;
    p += h->key_length;
    p += eos_decode_varint(p, end, &h->value_length);
    h->value = p;
    if (h->value_length > 0) p += h->value_length;
    return p;
}

static int check_header_keys_utf8(const eos_record *r) {
    const uint8_t *p = r->headers;
    for (int32_t i = 0; i < r->headers_count; i++) {
        checked_header h;
        p = next_checked_header(p, r->end, &h);
        if (!eos_utf8_valid(h.key, (size_t)h.key_length)) return EOS_BAD_HEADER_KEY_UTF8;
    }
    EOS_VERIFY(p == r->end);
    return EOS_OK;
}

/* ---- the validation walk -------------------------------------------------------------------
 *
 * Why it is shaped this way. Measured on a 2-core AMD EPYC, 64 batches of 1 MiB (9,520 records
 * of 100-byte values each), cold in DRAM as an append sees them: the CRC alone is memory bound
 * (~95 us per batch cold, ~45 us cached), and the walk through eos_parse_record added ~95 us
 * (~10 ns a record) on the bytes the CRC had just brought in: ~195 us in all. Now ~118 us:
 *
 * - The common record (no headers, offset delta i, varints of at most 3 bytes) is checked by
 *   walk_plain_record with two bounds tests per record instead of one per byte: the walk on
 *   cached bytes went from ~95 to ~58 us. Every other record, valid or not, goes to the exact
 *   path, which finds its status as before: the fast path never decides a status.
 * - The CRC and the walk take turns over chunks of WALK_CHUNK_BYTES, the walk prefetching the
 *   chunk after next, so the batch is read from memory once and the walk works on bytes in L1
 *   while later ones are on their way (CRC then fast walk: ~155 us; taking turns: ~118 us).
 *   Chunks of 1.5, 3, 6 and 12 KiB were within noise of each other; 2 and 4 KiB, which end on
 *   the CRC's single-stream tail, were ~15% slower. */

#if defined(__GNUC__)
#define EOS_UNLIKELY(cond) __builtin_expect(!!(cond), 0)
#define EOS_PREFETCH(address) __builtin_prefetch(address)
#define EOS_NOINLINE __attribute__((noinline))
#else
#define EOS_UNLIKELY(cond) (cond)
#define EOS_PREFETCH(address) ((void)(address))
#define EOS_NOINLINE
#endif

/* A multiple of the CRC's three-stream step of 3 x 256 bytes, so no chunk ends on the CRC's
 * slower single-stream tail; a chunk and the one prefetched after it stay in a 32 KiB L1. */
#define WALK_CHUNK_BYTES 3072
#define WALK_PREFETCH_BYTES (2 * WALK_CHUNK_BYTES)

/* An unsigned varint of at most 3 bytes at p, with no bounds test: the caller guarantees 3
 * readable bytes. Returns the bytes used, or 0 when it is longer. 3 bytes hold every offset
 * delta below 2^20, and every record length or value length below 1 MiB. */
static inline size_t uvarint3_unchecked(const uint8_t *p, uint32_t *u) {
    uint32_t b0 = p[0];
    if (b0 < 0x80) {
        *u = b0;
        return 1;
    }
    uint32_t b1 = p[1];
    if (b1 < 0x80) {
        *u = (b0 & 0x7F) | b1 << 7;
        return 2;
    }
    uint32_t b2 = p[2];
    if (b2 < 0x80) {
        *u = (b0 & 0x7F) | (b1 & 0x7F) << 7 | b2 << 14;
        return 3;
    }
    return 0;
}

/* Bytes walk_plain_record needs readable: from the record's start, its length, attributes,
 * timestamp delta, offset delta and key length at 3 bytes each at most (13), rounded up; after
 * the record's end, a value length read when the record is shorter than its fields. */
#define PLAIN_RECORD_HEAD_BYTES 16
#define PLAIN_RECORD_TAIL_BYTES 3

/* The common record of a producer's batch: no headers, offset delta i (given zigzagged),
 * every varint at most 3 bytes, and ending at least 3 bytes before end. Returns 1 and moves
 * *cursor past the record when it is one, and then parse_record would accept it with the same
 * fields; returns 0 otherwise and changes nothing (the exact path decides). Fields are read
 * bounded by end, not by the record's end: positions only grow, so a record whose last field
 * ends exactly at its end read nothing beyond it. Reads only inside [*cursor, end). */
static inline int walk_plain_record(const uint8_t **cursor, const uint8_t *end,
                                    uint32_t offset_delta_zigzag, int64_t *timestamp_delta,
                                    int32_t *key_length) {
    const uint8_t *p = *cursor;
    uint32_t u;
    size_t used;
    if (end - p < PLAIN_RECORD_HEAD_BYTES) return 0;
    if ((used = uvarint3_unchecked(p, &u)) == 0) return 0;
    int32_t length = eos_unzigzag32(u);
    p += used;
    if (length < 0 || length > end - p - PLAIN_RECORD_TAIL_BYTES) return 0;
    const uint8_t *record_end = p + length;
    p++; /* attributes: unused in v2 */
    if ((used = uvarint3_unchecked(p, &u)) == 0) return 0;
    *timestamp_delta = eos_unzigzag64(u);
    p += used;
    if ((used = uvarint3_unchecked(p, &u)) == 0 || u != offset_delta_zigzag) return 0;
    p += used;
    if ((used = uvarint3_unchecked(p, &u)) == 0) return 0;
    *key_length = eos_unzigzag32(u);
    p += used;
    if (*key_length > 0) {
        if (*key_length > record_end - p) return 0;
        p += *key_length;
    }
    /* Here p <= max(record_end, *cursor + 13), so 3 more bytes are readable. */
    if ((used = uvarint3_unchecked(p, &u)) == 0) return 0;
    int32_t value_length = eos_unzigzag32(u);
    p += used;
    if (value_length > 0) {
        if (value_length > record_end - p) return 0;
        p += value_length;
    }
    if (*p != 0 || p + 1 != record_end) return 0; /* header count 0 is the single byte 0 */
    *cursor = record_end;
    return 1;
}

/* One record by the exact rules, with every status: the walk's path for every record that
 * walk_plain_record leaves. Out of line, so that the fast loop stays small. */
static EOS_NOINLINE int walk_record_exact(const uint8_t **cursor, const uint8_t *end, int32_t i,
                                          int flags, int64_t *timestamp_delta,
                                          int32_t *offset_delta, int32_t *key_length) {
    eos_record r;
    int status = eos_parse_record(cursor, end, &r);
    if (status != EOS_OK) return status;
    if (flags & EOS_WALK_CLIENT_RULES) {
        if (r.offset_delta != i) return EOS_BAD_OFFSET_DELTA;
        status = check_header_keys_utf8(&r);
        if (status != EOS_OK) return status;
    }
    *timestamp_delta = r.timestamp_delta;
    *offset_delta = r.offset_delta;
    *key_length = r.key_length;
    return EOS_OK;
}

/* A walk in progress, so that it can stop at a chunk's end and resume. */
typedef struct {
    const uint8_t *cursor; /* the next record */
    const uint8_t *end;
    int32_t next;          /* the next record's index */
    int32_t count;
    int64_t base_timestamp;
    int flags;
    eos_walk_result *out;
} walk_state;

static void walk_start(walk_state *w, const uint8_t *records, size_t len, int32_t count,
                       int64_t base_timestamp, int flags, eos_walk_result *out) {
    w->cursor = records;
    w->end = records + len;
    w->next = 0;
    w->count = count;
    w->base_timestamp = base_timestamp;
    w->flags = flags;
    w->out = out;
    out->max_timestamp = -1;
    out->min_timestamp = -1;
    out->offset_delta_of_max_timestamp = 0;
    out->first_key_length = -1;
}

/* Walk on through the records that start before limit (<= end). */
static int walk_before(walk_state *w, const uint8_t *limit) {
    const uint8_t *cursor = w->cursor, *end = w->end;
    eos_walk_result *out = w->out;
    int32_t i = w->next;
    int status = EOS_OK;
    for (; i < w->count && cursor < limit; i++) {
        int64_t timestamp_delta;
        int32_t offset_delta = i, key_length;
        if (end - cursor > WALK_PREFETCH_BYTES) EOS_PREFETCH(cursor + WALK_PREFETCH_BYTES);
        if (EOS_UNLIKELY(!walk_plain_record(&cursor, end, eos_zigzag32(i), &timestamp_delta,
                                            &key_length))) {
            status = walk_record_exact(&cursor, end, i, w->flags, &timestamp_delta,
                                       &offset_delta, &key_length);
            if (status != EOS_OK) break;
        }
        if (i == 0) out->first_key_length = key_length;
        int64_t timestamp = wrapping_add(w->base_timestamp, timestamp_delta);
        if (i == 0 || timestamp > out->max_timestamp) {
            out->max_timestamp = timestamp;
            out->offset_delta_of_max_timestamp = offset_delta;
        }
        if (timestamp != -1 && (out->min_timestamp == -1 || timestamp < out->min_timestamp))
            out->min_timestamp = timestamp;
    }
    EOS_VERIFY(cursor <= end);
    w->cursor = cursor;
    w->next = i;
    return status;
}

/* After walking up to end: the count must be reached exactly where the bytes end. */
static int walk_finish(const walk_state *w) {
    EOS_VERIFY(w->next >= w->count || w->cursor == w->end);
    /* Fewer records than the count: the next one would start at end. */
    if (w->next < w->count) return EOS_RECORD_OVERRUN;
    if (w->cursor != w->end) return EOS_RECORDS_REMAINING;
    return EOS_OK;
}

int eos_walk_records(const uint8_t *records, size_t len, int32_t count, int64_t base_timestamp,
                     int flags, eos_walk_result *out) {
    walk_state w;
    walk_start(&w, records, len, count, base_timestamp, flags, out);
    int status = walk_before(&w, w.end);
    if (status != EOS_OK) return status;
    return walk_finish(&w);
}

int eos_crc_and_walk_records(const uint8_t *batch, size_t size, int32_t count,
                             int64_t base_timestamp, int flags, uint32_t *crc,
                             eos_walk_result *out) {
    EOS_VERIFY(size >= EOS_HEADER_SIZE);
    walk_state w;
    walk_start(&w, batch + EOS_RECORDS_OFFSET, size - EOS_RECORDS_OFFSET, count, base_timestamp,
               flags, out);
    const uint8_t *p = batch + EOS_ATTRIBUTES_OFFSET, *end = batch + size;
    uint32_t crc_so_far = 0;
    int status = EOS_OK;
    while (p < end) {
        /* Chunks end on 64-byte boundaries; the last one takes the remainder. */
        size_t chunk = (size_t)(end - p);
        size_t to_boundary = WALK_CHUNK_BYTES - ((uintptr_t)p & 63u);
        if (chunk >= to_boundary + WALK_CHUNK_BYTES) chunk = to_boundary;
        crc_so_far = eos_crc32c(crc_so_far, p, chunk);
        p += chunk;
        /* The first failing record decides the status; the CRC still covers every byte. */
        if (status == EOS_OK) status = walk_before(&w, p);
    }
    EOS_VERIFY(p == end);
    *crc = crc_so_far;
    if (status != EOS_OK) return status;
    return walk_finish(&w);
}

static inline void set_bit(uint8_t *bitmap, int64_t i, int on) {
    uint8_t mask = (uint8_t)(1u << (i & 7));
    if (on)
        bitmap[i >> 3] |= mask;
    else
        bitmap[i >> 3] &= (uint8_t)~mask;
}

/* Append one record's headers to the header columns; the structure was already checked. */
static int decode_headers(eos_columns *c, const eos_record *r, int64_t *entries,
                          int64_t *key_bytes, int64_t *value_bytes, int64_t *invalid_keys) {
    const uint8_t *p = r->headers;
    for (int32_t i = 0; i < r->headers_count; i++) {
        checked_header h;
        p = next_checked_header(p, r->end, &h);
        int32_t key_length = h.key_length, value_length = h.value_length;
        const uint8_t *key = h.key, *value = h.value;
        int64_t value_size = value_length > 0 ? value_length : 0;
        if (*entries >= c->header_entries_capacity ||
            *key_bytes + key_length > c->header_key_bytes_capacity ||
            *value_bytes + value_size > c->header_value_bytes_capacity)
            return EOS_NEED_SPACE;
        /* Arrow strings must be UTF-8: count malformed keys so the caller can replace them
         * (rare; Java's String decoding replaces them the same way). */
        if (!eos_utf8_valid(key, (size_t)key_length)) *invalid_keys += 1;
        memcpy(c->header_key_data + *key_bytes, key, (size_t)key_length);
        *key_bytes += key_length;
        if (value_size) memcpy(c->header_value_data + *value_bytes, value, (size_t)value_size);
        *value_bytes += value_size;
        set_bit(c->header_value_validity, *entries, value_length >= 0);
        *entries += 1;
        c->header_key_offsets[*entries] = (int32_t)*key_bytes;
        c->header_value_offsets[*entries] = (int32_t)*value_bytes;
    }
    return EOS_OK;
}

/* A reader's rule for offset deltas (a producer's is stricter: 0, 1, ..., count-1): they
 * increase from 0 and stay within the batch's last offset delta, so a batch's offsets never go
 * backwards nor reach into the next batch's, which its CRC cannot rule out (a forged batch
 * carries a valid one). Gaps are what compaction leaves. */
static inline int check_offset_delta(const eos_record *r, const eos_batch_header *h,
                                     int32_t *previous_delta) {
    if (r->offset_delta <= *previous_delta || r->offset_delta > h->last_offset_delta)
        return EOS_BAD_OFFSET_DELTA;
    *previous_delta = r->offset_delta;
    return EOS_OK;
}

/* The decoders' step: parse the record at *cursor, check its offset delta against the one
 * before (check_offset_delta) and give its absolute offset (Java's wrapping long sum). */
static inline int next_record(const uint8_t **cursor, const uint8_t *end,
                              const eos_batch_header *h, int32_t *previous_delta, eos_record *r,
                              int64_t *offset) {
    int status = parse_record(cursor, end, r);
    if (status != EOS_OK) return status;
    status = check_offset_delta(r, h, previous_delta);
    if (status != EOS_OK) return status;
    *offset = wrapping_add(h->base_offset, r->offset_delta);
    return EOS_OK;
}

int eos_decode_records(eos_columns *c, const uint8_t *records, size_t len,
                       const eos_batch_header *h, int64_t offset_min, int64_t offset_end) {
    const uint8_t *cursor = records, *end = records + len;
    /* Work on local counters and publish them only when the whole batch decoded, so a failed
     * or retried batch leaves the columns exactly as they were. */
    int64_t n = c->records, key_bytes = c->key_bytes, value_bytes = c->value_bytes;
    int64_t entries = c->header_entries, header_key_bytes = c->header_key_bytes;
    int64_t header_value_bytes = c->header_value_bytes;
    int64_t invalid_keys = c->invalid_header_keys;
    int log_append_time = (h->attributes & EOS_TIMESTAMP_TYPE_MASK) != 0;
    if (h->records_count < 0) return EOS_NEGATIVE_COUNT;
    int32_t previous_delta = -1;
    for (int32_t i = 0; i < h->records_count; i++) {
        eos_record r;
        int64_t offset;
        int status = next_record(&cursor, end, h, &previous_delta, &r, &offset);
        if (status != EOS_OK) return status;
        if (offset < offset_min || offset >= offset_end) continue;
        int64_t key_size = r.key_length > 0 ? r.key_length : 0;
        int64_t value_size = r.value_length > 0 ? r.value_length : 0;
        if (n >= c->records_capacity || key_bytes + key_size > c->key_bytes_capacity ||
            value_bytes + value_size > c->value_bytes_capacity)
            return EOS_NEED_SPACE;
        c->offset[n] = offset;
        c->timestamp_ms[n] = log_append_time ? h->max_timestamp
                                             : wrapping_add(h->base_timestamp, r.timestamp_delta);
        c->timestamp_type[n] = log_append_time;
        if (key_size) memcpy(c->key_data + key_bytes, r.key, (size_t)key_size);
        key_bytes += key_size;
        set_bit(c->key_validity, n, r.key_length >= 0);
        c->key_offsets[n + 1] = (int32_t)key_bytes;
        if (value_size) memcpy(c->value_data + value_bytes, r.value, (size_t)value_size);
        value_bytes += value_size;
        set_bit(c->value_validity, n, r.value_length >= 0);
        c->value_offsets[n + 1] = (int32_t)value_bytes;
        if (c->headers_wanted) {
            status = decode_headers(c, &r, &entries, &header_key_bytes, &header_value_bytes,
                                    &invalid_keys);
            if (status != EOS_OK) return status;
            set_bit(c->header_validity, n, r.headers_count > 0);
            c->header_offsets[n + 1] = (int32_t)entries;
        }
        n++;
    }
    if (cursor != end) return EOS_RECORDS_REMAINING;
    c->records = n;
    c->key_bytes = key_bytes;
    c->value_bytes = value_bytes;
    c->header_entries = entries;
    c->header_key_bytes = header_key_bytes;
    c->header_value_bytes = header_value_bytes;
    c->invalid_header_keys = invalid_keys;
    return EOS_OK;
}

int eos_index_records(eos_record_ref *refs, int64_t capacity, int64_t *count,
                      const uint8_t *records, size_t len, const eos_batch_header *h,
                      int64_t offset_min, int64_t offset_end) {
    const uint8_t *cursor = records, *end = records + len;
    int64_t n = *count; /* published only when the whole batch is indexed */
    int32_t log_append_time = (h->attributes & EOS_TIMESTAMP_TYPE_MASK) != 0;
    EOS_VERIFY(n >= 0 && n <= capacity);
    if (h->records_count < 0) return EOS_NEGATIVE_COUNT;
    int32_t previous_delta = -1;
    for (int32_t i = 0; i < h->records_count; i++) {
        eos_record r;
        int64_t offset;
        int status = next_record(&cursor, end, h, &previous_delta, &r, &offset);
        if (status != EOS_OK) return status;
        if (offset < offset_min || offset >= offset_end) continue;
        if (n >= capacity) return EOS_NEED_SPACE;
        eos_record_ref *ref = &refs[n++];
        ref->offset = offset;
        ref->timestamp_ms = log_append_time ? h->max_timestamp
                                            : wrapping_add(h->base_timestamp, r.timestamp_delta);
        ref->key = r.key_length >= 0 ? r.key : NULL;
        ref->value = r.value_length >= 0 ? r.value : NULL;
        ref->headers = r.headers;
        ref->end = r.end;
        ref->key_length = r.key_length;
        ref->value_length = r.value_length;
        ref->headers_count = r.headers_count;
        ref->timestamp_type = log_append_time;
        ref->leader_epoch = h->partition_leader_epoch;
    }
    if (cursor != end) return EOS_RECORDS_REMAINING;
    EOS_VERIFY(n >= *count && n <= capacity);
    *count = n;
    return EOS_OK;
}

const uint8_t *eos_next_header(const uint8_t *p, const uint8_t *end, const uint8_t **key,
                               int32_t *key_length, const uint8_t **value,
                               int32_t *value_length) {
    checked_header h;
    const uint8_t *next = next_checked_header(p, end, &h);
    EOS_VERIFY(next <= end && h.key_length >= 0);
    *key = h.key;
    *key_length = h.key_length;
    *value = h.value_length >= 0 ? h.value : NULL;
    *value_length = h.value_length;
    return next;
}

size_t eos_record_body_size(int64_t timestamp_delta, int32_t offset_delta, int32_t key_length,
                            int32_t value_length, int32_t headers_count, size_t headers_size) {
    size_t size = 1 + eos_size_of_varlong(timestamp_delta) + eos_size_of_varint(offset_delta);
    size += eos_size_of_varint(key_length) + (key_length > 0 ? (size_t)key_length : 0);
    size += eos_size_of_varint(value_length) + (value_length > 0 ? (size_t)value_length : 0);
    size += eos_size_of_varint(headers_count) + headers_size;
    return size;
}

size_t eos_write_record(uint8_t *out, size_t body_size, int64_t timestamp_delta,
                        int32_t offset_delta, const uint8_t *key, int32_t key_length,
                        const uint8_t *value, int32_t value_length, int32_t headers_count,
                        const uint8_t *headers, size_t headers_size) {
    EOS_VERIFY(body_size <= INT32_MAX);
    uint8_t *p = out;
    p += eos_encode_varint(p, (int32_t)body_size);
    uint8_t *body = p;
    *p++ = 0; /* record attributes: unused in v2, written as 0 */
    p += eos_encode_varlong(p, timestamp_delta);
    p += eos_encode_varint(p, offset_delta);
    p += eos_encode_varint(p, key_length);
    if (key_length > 0) {
        memcpy(p, key, (size_t)key_length);
        p += key_length;
    }
    p += eos_encode_varint(p, value_length);
    if (value_length > 0) {
        memcpy(p, value, (size_t)value_length);
        p += value_length;
    }
    p += eos_encode_varint(p, headers_count);
    if (headers_size) {
        memcpy(p, headers, headers_size);
        p += headers_size;
    }
    /* The size computed up front and the bytes written must agree (pairs with the reader). */
    EOS_VERIFY((size_t)(p - body) == body_size);
    return (size_t)(p - out);
}
