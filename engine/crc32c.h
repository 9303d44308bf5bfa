/* CRC-32C (Castagnoli; reflected polynomial 0x82F63B78, init and final XOR 0xFFFFFFFF), the
 * checksum of Kafka's v2 batches (docs/format.md §1.1). No Python objects; safe without the GIL. */
#ifndef EOSLOG_CRC32C_H
#define EOSLOG_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC of buf[0, len) continuing from `crc`, a previous result (0 to start):
 * eos_crc32c(eos_crc32c(0, a, n), b, m) == CRC of a followed by b. Check value:
 * eos_crc32c(0, "123456789", 9) == 0xE3069283. Picks the hardware path when the CPU has
 * SSE4.2 and that path passed its self-check at first use; otherwise a portable table. */
uint32_t eos_crc32c(uint32_t crc, const void *buf, size_t len);

/* The portable path alone, for tests that compare the two. */
uint32_t eos_crc32c_portable(uint32_t crc, const void *buf, size_t len);

/* CRC of A followed by B, given crc_a, crc_b and len_b only (GF(2) polynomial arithmetic). */
uint32_t eos_crc32c_combine(uint32_t crc_a, uint32_t crc_b, size_t len_b);

/* "sse4.2" or "portable": what eos_crc32c uses on this machine. */
const char *eos_crc32c_backend(void);

#endif
