/* CRC-32C (Castagnoli), as Kafka's v2 batches use it (docs/format.md §1.1).
 *
 * Two paths compute the same function. The portable path reads eight bytes per step through
 * eight 256-entry tables ("slicing by 8"). The hardware path uses the SSE4.2 crc32 instruction,
 * which has a latency of 3 cycles but can start one per cycle: a single dependent chain uses a
 * third of the unit, so large buffers are cut into three adjacent blocks whose CRCs run as three
 * independent chains and are merged afterwards by polynomial arithmetic.
 *
 * Everything this file needs (tables, backend choice, self-check) is set up once, before any
 * caller can run: by a constructor that the dynamic loader runs when the extension module is
 * loaded. After that all state is read-only, so every function here is safe from any thread,
 * without the GIL.
 *
 * Conventions. A CRC register is a degree < 32 polynomial over GF(2) stored "reflected": bit 31
 * holds the coefficient of x^0 and bit 0 the coefficient of x^31, which is the order in which the
 * bits of each byte enter (least significant bit first). The public value is the register
 * complemented on entry and on exit (init and final XOR 0xFFFFFFFF); internal functions work on
 * the raw register. */
#include "crc32c.h"

#include <stdbool.h>
#include <string.h>

#if !defined(__GNUC__)
#error "crc32c.c needs GCC or Clang: it uses a constructor and CPU-feature built-ins"
#endif

#if defined(__x86_64__)
#include <nmmintrin.h>
#define EOS_CRC_HAVE_X86 1
#define EOS_TARGET_SSE42 __attribute__((target("sse4.2")))
#else
#define EOS_CRC_HAVE_X86 0
#endif

/* The Castagnoli polynomial, reflected (docs/format.md §1.1). */
#define POLY_REFLECTED 0x82F63B78u
/* The polynomial 1 (x^0) and x^8 in the reflected layout. */
#define POLY_ONE 0x80000000u
#define POLY_X8 0x00800000u

/* Block lengths (bytes per stream) of the three-stream hardware loop. The large block makes the
 * merge (two table shifts on the critical path, ~20 cycles) negligible; the small block lets
 * buffers from 3 * 256 bytes up use all three chains. Both must be multiples of 16: the loop
 * takes two words per stream per step. Measured on a 2-core AMD EPYC (family 25), 1 MiB / 4 KiB
 * buffers: 4096 and 256 gave ~21 / 17 GiB/s; 2048 or 8192 and 128 or 512 were no faster at
 * 1 MiB and up to 2x slower at 1 KiB. */
#define BLOCK_LARGE 4096u
#define BLOCK_SMALL 256u
#define STREAMS 3u

/* A linear map on registers, "multiply by a fixed x^k mod P", tabulated per byte of the input:
 * shift(c) = t[0][byte 0 of c] ^ t[1][byte 1] ^ t[2][byte 2] ^ t[3][byte 3]. */
typedef struct {
    uint32_t table[4][256];
} shift_table;

static uint32_t slice_tables[8][256];
static shift_table shift_by_block_large;
static shift_table shift_by_block_small;
/* x^(8 * 2^k) mod P for k = 0..63: combine builds x^(8 * len) from these by multiplication. */
static uint32_t power_of_x8[64];

typedef uint32_t (*crc_update_fn)(uint32_t raw, const uint8_t *p, size_t len);
static crc_update_fn crc_update;
static const char *backend_name = "uninitialized";

/* ---- GF(2) polynomial arithmetic ---------------------------------------------------------- */

/* a * b mod P, both reflected. Walks a's coefficients from x^0 upward while b is multiplied by
 * x at each step; multiplying a reflected value by x is a right shift, and a coefficient that
 * overflows to x^32 is replaced by P's lower terms. Used only at setup and in combine. */
static uint32_t gf2_multiply_mod(uint32_t a, uint32_t b) {
    uint32_t product = 0;
    for (unsigned i = 0; i < 32; i++) {
        if (a & (POLY_ONE >> i)) product ^= b;
        b = (b & 1u) ? (b >> 1) ^ POLY_REFLECTED : b >> 1;
    }
    return product;
}

/* x^(8 * len) mod P: the factor that appends len zero bytes to a raw register. */
static uint32_t x8_power_mod(uint64_t len) {
    uint32_t result = POLY_ONE;
    for (unsigned k = 0; len != 0; k++, len >>= 1) {
        if (len & 1u) result = gf2_multiply_mod(result, power_of_x8[k]);
    }
    return result;
}

/* Multiplication by a fixed factor is linear over GF(2), so an entry is the XOR of the entries
 * for its single bits: only 32 multiplications per table. */
static void shift_table_build(shift_table *t, uint32_t factor) {
    for (unsigned k = 0; k < 4; k++) {
        t->table[k][0] = 0;
        for (uint32_t b = 1; b < 256; b++) {
            uint32_t low_bit = b & (~b + 1);
            t->table[k][b] = b == low_bit ? gf2_multiply_mod(b << (8 * k), factor)
                                          : t->table[k][low_bit] ^ t->table[k][b ^ low_bit];
        }
    }
}

static inline uint32_t shift_apply(const shift_table *t, uint32_t c) {
    return t->table[0][c & 0xFF] ^ t->table[1][(c >> 8) & 0xFF] ^ t->table[2][(c >> 16) & 0xFF] ^
           t->table[3][c >> 24];
}

/* ---- portable path ------------------------------------------------------------------------ */

static void slice_tables_build(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (unsigned bit = 0; bit < 8; bit++) c = (c & 1u) ? (c >> 1) ^ POLY_REFLECTED : c >> 1;
        slice_tables[0][n] = c;
    }
    /* slice_tables[k][n]: byte n followed by k zero bytes, so eight table lookups advance the
     * register over eight bytes at once. */
    for (unsigned k = 1; k < 8; k++) {
        for (unsigned n = 0; n < 256; n++) {
            uint32_t prev = slice_tables[k - 1][n];
            slice_tables[k][n] = (prev >> 8) ^ slice_tables[0][prev & 0xFF];
        }
    }
}

/* Little-endian 32-bit load from bytes: defined for any alignment and host byte order, and
 * compiled to one load on little-endian hosts. */
static inline uint32_t load_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t portable_update(uint32_t raw, const uint8_t *p, size_t len) {
    const uint32_t(*t)[256] = (const uint32_t(*)[256])slice_tables;
    while (len >= 8) {
        uint32_t low = raw ^ load_u32le(p);
        uint32_t high = load_u32le(p + 4);
        raw = t[7][low & 0xFF] ^ t[6][(low >> 8) & 0xFF] ^ t[5][(low >> 16) & 0xFF] ^
              t[4][low >> 24] ^ t[3][high & 0xFF] ^ t[2][(high >> 8) & 0xFF] ^
              t[1][(high >> 16) & 0xFF] ^ t[0][high >> 24];
        p += 8;
        len -= 8;
    }
    while (len-- > 0) raw = (raw >> 8) ^ t[0][(raw ^ *p++) & 0xFF];
    return raw;
}

/* ---- hardware path (x86-64 SSE4.2) -------------------------------------------------------- */

#if EOS_CRC_HAVE_X86

static inline uint64_t load_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Raw register over STREAMS * block bytes at p: stream i covers bytes [i * block, (i+1) * block)
 * and all three chains advance in the same loop so the instruction unit stays busy. Stream 0
 * continues from raw; streams 1 and 2 start from 0, and since the raw CRC is linear,
 * CRC(A B C) = shift(shift(CRC(A)) ^ CRC(B)) ^ CRC(C), with shift = "append block zero bytes". */
static EOS_TARGET_SSE42 uint32_t hw_three_streams(uint32_t raw, const uint8_t *p, size_t block,
                                                  const shift_table *shift) {
    uint64_t c0 = raw, c1 = 0, c2 = 0;
    const uint8_t *end = p + block;
    while (p < end) {
        c0 = _mm_crc32_u64(c0, load_u64(p));
        c1 = _mm_crc32_u64(c1, load_u64(p + block));
        c2 = _mm_crc32_u64(c2, load_u64(p + 2 * block));
        c0 = _mm_crc32_u64(c0, load_u64(p + 8));
        c1 = _mm_crc32_u64(c1, load_u64(p + block + 8));
        c2 = _mm_crc32_u64(c2, load_u64(p + 2 * block + 8));
        p += 16;
    }
    uint32_t merged = shift_apply(shift, (uint32_t)c0) ^ (uint32_t)c1;
    return shift_apply(shift, merged) ^ (uint32_t)c2;
}

static EOS_TARGET_SSE42 uint32_t hw_update(uint32_t raw, const uint8_t *p, size_t len) {
    /* Align to 8 bytes first so the word loads below never straddle a cache line needlessly. */
    while (len > 0 && ((uintptr_t)p & 7u) != 0) {
        raw = _mm_crc32_u8(raw, *p++);
        len--;
    }
    while (len >= STREAMS * BLOCK_LARGE) {
        raw = hw_three_streams(raw, p, BLOCK_LARGE, &shift_by_block_large);
        p += STREAMS * BLOCK_LARGE;
        len -= STREAMS * BLOCK_LARGE;
    }
    while (len >= STREAMS * BLOCK_SMALL) {
        raw = hw_three_streams(raw, p, BLOCK_SMALL, &shift_by_block_small);
        p += STREAMS * BLOCK_SMALL;
        len -= STREAMS * BLOCK_SMALL;
    }
    uint64_t wide = raw;
    while (len >= 8) {
        wide = _mm_crc32_u64(wide, load_u64(p));
        p += 8;
        len -= 8;
    }
    raw = (uint32_t)wide;
    while (len-- > 0) raw = _mm_crc32_u8(raw, *p++);
    return raw;
}

#endif /* EOS_CRC_HAVE_X86 */

/* ---- setup and self-check ----------------------------------------------------------------- */

/* Known answers (public CRC values, start 0), from the CRC-32C check value and the test vectors
 * of RFC 3720 (iSCSI) Appendix B.4. */
static bool known_answers_hold(crc_update_fn update) {
    static const uint8_t check[] = "123456789";
    uint8_t zeros[32], ones[32], ascending[32], descending[32];
    for (unsigned i = 0; i < 32; i++) {
        zeros[i] = 0;
        ones[i] = 0xFF;
        ascending[i] = (uint8_t)i;
        descending[i] = (uint8_t)(31 - i);
    }
    return ~update(~0u, check, 9) == 0xE3069283u && ~update(~0u, zeros, 32) == 0x8A9136AAu &&
           ~update(~0u, ones, 32) == 0x62A8AB43u && ~update(~0u, ascending, 32) == 0x46DD794Eu &&
           ~update(~0u, descending, 32) == 0x113FDB5Cu;
}

#if EOS_CRC_HAVE_X86

#define SELF_CHECK_BYTES (2 * STREAMS * BLOCK_LARGE + 2 * STREAMS * BLOCK_SMALL + 64)

/* Does the hardware path agree with the portable one? Lengths straddle every point where
 * hw_update changes strategy (8-byte words, one and two small three-stream blocks, one and two
 * large ones, large followed by small), at every start alignment mod 8, on pseudo-random bytes
 * and from nonzero starting registers. The portable reference for each length extends the one
 * for the previous length. */
static bool hardware_agrees_with_portable(void) {
    static uint8_t data[SELF_CHECK_BYTES];
    uint64_t state = 0x9E3779B97F4A7C15u;
    for (size_t i = 0; i < sizeof data; i++) {
        /* xorshift64: any fixed pseudo-random bytes will do. */
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        data[i] = (uint8_t)(state >> 56);
    }
    /* Ascending, so each reference CRC extends the previous one. */
    static const size_t boundaries[] = {
        16, STREAMS * BLOCK_SMALL, 2 * STREAMS * BLOCK_SMALL, STREAMS * BLOCK_LARGE,
        STREAMS * BLOCK_LARGE + STREAMS * BLOCK_SMALL, 2 * STREAMS * BLOCK_LARGE,
        2 * STREAMS * BLOCK_LARGE + 2 * STREAMS * BLOCK_SMALL,
    };
    /* Lengths boundary - 9 + delta: one byte, one word and a word plus one byte either side,
     * ascending so that each reference extends the previous one. */
    static const size_t deltas[] = {0, 1, 2, 8, 9, 10, 16, 17, 18, 25};
    /* The alignment prefix is what start offsets exercise, and short lengths cover it; the
     * large blocks are checked at two offsets only, which keeps the check near 0.2 ms. */
    const size_t large_from = STREAMS * BLOCK_LARGE - 16;
    for (size_t offset = 0; offset < 8; offset++) {
        bool all_lengths = offset == 0 || offset == 5;
        uint32_t start = 0x01000193u * (uint32_t)(offset + 1);
        uint32_t reference = start;
        size_t reference_len = 0;
        for (size_t b = 0; b < sizeof boundaries / sizeof boundaries[0]; b++) {
            for (size_t d = 0; d < sizeof deltas / sizeof deltas[0]; d++) {
                size_t len = boundaries[b] - 9 + deltas[d];
                if (offset + len > sizeof data || (len > large_from && !all_lengths)) break;
                reference = portable_update(reference, data + offset + reference_len,
                                            len - reference_len);
                reference_len = len;
                if (hw_update(start, data + offset, len) != reference) return false;
            }
        }
    }
    return true;
}

#endif /* EOS_CRC_HAVE_X86 */

/* Runs when the shared object is loaded, before any other code can call in, so the tables and
 * the backend choice are published before first use without locks. */
__attribute__((constructor)) static void crc32c_setup(void) {
    slice_tables_build();
    power_of_x8[0] = POLY_X8;
    for (unsigned k = 1; k < 64; k++) {
        power_of_x8[k] = gf2_multiply_mod(power_of_x8[k - 1], power_of_x8[k - 1]);
    }
    shift_table_build(&shift_by_block_large, x8_power_mod(BLOCK_LARGE));
    shift_table_build(&shift_by_block_small, x8_power_mod(BLOCK_SMALL));

    crc_update = portable_update;
    /* A portable path that misses its known answers is our bug, not the machine's: report
     * "broken" so the Python binding refuses to load rather than write bad checksums. */
    if (!known_answers_hold(portable_update)) {
        backend_name = "broken";
        return;
    }
    backend_name = "portable";
#if EOS_CRC_HAVE_X86
    /* GCC requires this before __builtin_cpu_supports in code that may run before libgcc's own
     * constructor has filled in the CPU model, as a constructor may. */
    __builtin_cpu_init();
    /* A CPU or hypervisor that claims SSE4.2 but computes differently falls back silently to
     * the portable path; eos_crc32c_backend() says which one runs. */
    if (__builtin_cpu_supports("sse4.2") && known_answers_hold(hw_update) &&
        hardware_agrees_with_portable()) {
        crc_update = hw_update;
        backend_name = "sse4.2";
    }
#endif
}

/* ---- public API --------------------------------------------------------------------------- */

uint32_t eos_crc32c(uint32_t crc, const void *buf, size_t len) {
    return ~crc_update(~crc, (const uint8_t *)buf, len);
}

uint32_t eos_crc32c_portable(uint32_t crc, const void *buf, size_t len) {
    return ~portable_update(~crc, (const uint8_t *)buf, len);
}

/* With init and final XOR both 0xFFFFFFFF they cancel out of the combination, leaving the raw
 * identity CRC(A B) = CRC(A) * x^(8 len_b) ^ CRC(B). */
uint32_t eos_crc32c_combine(uint32_t crc_a, uint32_t crc_b, size_t len_b) {
    return gf2_multiply_mod(crc_a, x8_power_mod((uint64_t)len_b)) ^ crc_b;
}

const char *eos_crc32c_backend(void) { return backend_name; }
