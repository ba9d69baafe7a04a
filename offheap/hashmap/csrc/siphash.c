/* SipHash-c-d (siphash.h). Words are read byte by byte as little-endian, so the result is the
 * same on any byte order and alignment. */

#include "siphash.h"

static inline uint64_t
rotl(uint64_t x, int bits)
{
    return (x << bits) | (x >> (64 - bits));
}

static inline uint64_t
load_le(const unsigned char *p, size_t n)
{
    uint64_t word = 0;
    for (size_t i = 0; i < n; i++)
        word |= (uint64_t)p[i] << (8 * i);
    return word;
}

#define SIPROUND                                                  \
    do {                                                          \
        v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32); \
        v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;                    \
        v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;                    \
        v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32); \
    } while (0)

uint64_t
siphash(const unsigned char seed[SIPHASH_SEED_BYTES], const unsigned char *data, size_t n,
        int c_rounds, int d_rounds)
{
    uint64_t k0 = load_le(seed, 8), k1 = load_le(seed + 8, 8);
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
    size_t tail = n & ~(size_t)7;
    for (size_t at = 0; at <= tail; at += 8) {
        uint64_t m = at < tail ? load_le(data + at, 8)
                               : load_le(data + at, n - tail) | (uint64_t)(n & 0xff) << 56;
        v3 ^= m;
        for (int i = 0; i < c_rounds; i++)
            SIPROUND;
        v0 ^= m;
    }
    v2 ^= 0xff;
    for (int i = 0; i < d_rounds; i++)
        SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}
