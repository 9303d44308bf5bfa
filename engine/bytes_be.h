/* Big-endian loads and stores: every integer in Kafka's batch header, indexes and snapshots is
 * big-endian (docs/format.md, general conventions). memcpy keeps unaligned access defined; compilers
 * turn each into one load or store plus a byte swap. */
#ifndef EOSLOG_BYTES_BE_H
#define EOSLOG_BYTES_BE_H

#include <stdint.h>
#include <string.h>

static inline uint16_t eos_load_u16be(const uint8_t *p) {
    return (uint16_t)(((uint16_t)p[0] << 8) | p[1]);
}
static inline uint32_t eos_load_u32be(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}
static inline uint64_t eos_load_u64be(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}
static inline int16_t eos_load_i16be(const uint8_t *p) { return (int16_t)eos_load_u16be(p); }
static inline int32_t eos_load_i32be(const uint8_t *p) { return (int32_t)eos_load_u32be(p); }
static inline int64_t eos_load_i64be(const uint8_t *p) { return (int64_t)eos_load_u64be(p); }

static inline void eos_store_u16be(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static inline void eos_store_u32be(uint8_t *p, uint32_t v) {
    v = __builtin_bswap32(v);
    memcpy(p, &v, 4);
}
static inline void eos_store_u64be(uint8_t *p, uint64_t v) {
    v = __builtin_bswap64(v);
    memcpy(p, &v, 8);
}
static inline void eos_store_i16be(uint8_t *p, int16_t v) { eos_store_u16be(p, (uint16_t)v); }
static inline void eos_store_i32be(uint8_t *p, int32_t v) { eos_store_u32be(p, (uint32_t)v); }
static inline void eos_store_i64be(uint8_t *p, int64_t v) { eos_store_u64be(p, (uint64_t)v); }

#endif
