/* Zigzag varints and varlongs as Kafka's ByteUtils encodes them (docs/format.md §2.1).
 *
 * Decoders take [p, end) and never read past end. They return the number of bytes consumed,
 * or 0 when the input is malformed: it ran out, or a varint's 5th byte (a varlong's 10th)
 * still has its continuation bit. Bits of a varint's 5th byte beyond bit 31 are dropped, as
 * Kafka's readUnsignedVarint drops them, so every byte string Kafka accepts we accept. */
#ifndef EOSLOG_VARINT_H
#define EOSLOG_VARINT_H

#include <stddef.h>
#include <stdint.h>

#define EOS_VARINT_BYTES_MAX 5
#define EOS_VARLONG_BYTES_MAX 10

static inline uint32_t eos_zigzag32(int32_t v) {
    return ((uint32_t)v << 1) ^ (uint32_t)(v >> 31);
}
static inline uint64_t eos_zigzag64(int64_t v) {
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}
static inline int32_t eos_unzigzag32(uint32_t u) {
    return (int32_t)((u >> 1) ^ (~(u & 1) + 1));
}
static inline int64_t eos_unzigzag64(uint64_t u) {
    return (int64_t)((u >> 1) ^ (~(u & 1) + 1));
}

static inline size_t eos_decode_varint(const uint8_t *p, const uint8_t *end, int32_t *out) {
    /* One-byte values dominate record fields (lengths < 64, deltas < 64): test them first. */
    if (p < end && p[0] < 0x80) {
        *out = eos_unzigzag32(p[0]);
        return 1;
    }
    uint32_t u = 0;
    for (size_t i = 0; i < EOS_VARINT_BYTES_MAX; i++) {
        if (p + i >= end) return 0;
        uint8_t b = p[i];
        u |= (uint32_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *out = eos_unzigzag32(u);
            return i + 1;
        }
    }
    return 0;
}

static inline size_t eos_decode_varlong(const uint8_t *p, const uint8_t *end, int64_t *out) {
    if (p < end && p[0] < 0x80) {
        *out = eos_unzigzag64(p[0]);
        return 1;
    }
    uint64_t u = 0;
    for (size_t i = 0; i < EOS_VARLONG_BYTES_MAX; i++) {
        if (p + i >= end) return 0;
        uint8_t b = p[i];
        u |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *out = eos_unzigzag64(u);
            return i + 1;
        }
    }
    return 0;
}

static inline size_t eos_size_of_uvarint64(uint64_t u) {
    size_t n = 1;
    while (u >= 0x80) {
        u >>= 7;
        n++;
    }
    return n;
}
static inline size_t eos_size_of_varint(int32_t v) { return eos_size_of_uvarint64(eos_zigzag32(v)); }
static inline size_t eos_size_of_varlong(int64_t v) { return eos_size_of_uvarint64(eos_zigzag64(v)); }

/* Writers assume room for EOS_VARLONG_BYTES_MAX bytes at p; they return bytes written. */
static inline size_t eos_encode_uvarint64(uint8_t *p, uint64_t u) {
    size_t n = 0;
    while (u >= 0x80) {
        p[n++] = (uint8_t)(u | 0x80);
        u >>= 7;
    }
    p[n++] = (uint8_t)u;
    return n;
}
static inline size_t eos_encode_varint(uint8_t *p, int32_t v) {
    return eos_encode_uvarint64(p, eos_zigzag32(v));
}
static inline size_t eos_encode_varlong(uint8_t *p, int64_t v) {
    return eos_encode_uvarint64(p, eos_zigzag64(v));
}

#endif
