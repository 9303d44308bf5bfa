/* Kafka's murmur2 (clients/.../common/utils/Utils.java `murmur2`), the hash its default
 * partitioner applies to a record key: partition = (murmur2(key) & 0x7fffffff) % partitions.
 *
 * Java computes in signed 32-bit ints with wrapping multiplication and `>>>` shifts; the same
 * arithmetic in uint32_t gives the same bits, which the caller reads back as int32. Reads
 * exactly `length` bytes from p (p may be NULL when length is 0). */
#ifndef EOSLOG_MURMUR2_H
#define EOSLOG_MURMUR2_H

#include <stddef.h>
#include <stdint.h>

#define EOS_MURMUR2_SEED 0x9747b28cu
#define EOS_MURMUR2_M 0x5bd1e995u

static inline int32_t eos_murmur2(const uint8_t *p, size_t length) {
    const uint32_t m = EOS_MURMUR2_M;
    /* Java's `seed ^ length` takes the int length: keys are below 2 GiB (int32 lengths). */
    uint32_t h = EOS_MURMUR2_SEED ^ (uint32_t)length;
    size_t blocks = length / 4;
    for (size_t i = 0; i < blocks; i++) {
        const uint8_t *b = p + 4 * i;
        uint32_t k = (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16)
                     | ((uint32_t)b[3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    const uint8_t *tail = p + 4 * blocks;
    switch (length & 3) {
        case 3:
            h ^= (uint32_t)tail[2] << 16;
            /* fall through */
        case 2:
            h ^= (uint32_t)tail[1] << 8;
            /* fall through */
        case 1:
            h ^= (uint32_t)tail[0];
            h *= m;
            break;
        default:
            break;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

#endif
