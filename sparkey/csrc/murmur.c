/* MurmurHash3 as Sparkey indexes use it (pure: no Python objects, runs without the GIL).
 *
 * Austin Appleby's reference algorithms, public domain: little-endian blocks, a fall-through
 * tail, the length mixed into the final state. hash_size 8 is the first 64-bit word (h1) of
 * MurmurHash3_x64_128 with both lanes seeded by the zero-extended 32-bit seed, as libsparkey
 * and sparkey-java hash, and as sparkey.murmur computes with mmh3 or numpy.
 */
#include "native.h"

static inline uint32_t rotl32(uint32_t x, int r)
{
    return (x << r) | (x >> (32 - r));
}

static inline uint64_t rotl64(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static inline uint32_t fmix32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return h;
}

static inline uint64_t fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ull;
    k ^= k >> 33;
    return k;
}

/* The last len & (width - 1) bytes of a key as a little-endian word (the reference's tail). */
static inline uint64_t tail_word(const uint8_t *tail, size_t count)
{
    uint64_t word = 0;
    while (count-- > 0)
        word = (word << 8) | tail[count];
    return word;
}

static uint32_t murmur3_x86_32(const uint8_t *key, size_t len, uint32_t seed)
{
    const uint32_t c1 = 0xCC9E2D51u, c2 = 0x1B873593u;
    size_t blocks = len / 4;
    uint32_t h = seed;
    for (size_t i = 0; i < blocks; i++) {
        uint32_t k = (uint32_t)load_le(key + 4 * i, 4) * c1;
        h ^= rotl32(k, 15) * c2;
        h = rotl32(h, 13) * 5 + 0xE6546B64u;
    }
    if (len & 3) {
        uint32_t k = (uint32_t)tail_word(key + 4 * blocks, len & 3) * c1;
        h ^= rotl32(k, 15) * c2;
    }
    return fmix32(h ^ (uint32_t)len);
}

static uint64_t murmur3_x64_128_h1(const uint8_t *key, size_t len, uint32_t seed)
{
    const uint64_t c1 = 0x87C37B91114253D5ull, c2 = 0x4CF5AD432745937Full;
    size_t blocks = len / 16;
    uint64_t h1 = seed, h2 = seed;
    for (size_t i = 0; i < blocks; i++) {
        uint64_t k1 = load_le(key + 16 * i, 8), k2 = load_le(key + 16 * i + 8, 8);
        h1 ^= rotl64(k1 * c1, 31) * c2;
        h1 = (rotl64(h1, 27) + h2) * 5 + 0x52DCE729u;
        h2 ^= rotl64(k2 * c2, 33) * c1;
        h2 = (rotl64(h2, 31) + h1) * 5 + 0x38495AB5u;
    }
    const uint8_t *tail = key + 16 * blocks;
    size_t rest = len & 15;
    if (rest > 8)
        h2 ^= rotl64(tail_word(tail + 8, rest - 8) * c2, 33) * c1;
    if (rest)
        h1 ^= rotl64(tail_word(tail, rest < 8 ? rest : 8) * c1, 31) * c2;
    h1 ^= (uint64_t)len;
    h2 ^= (uint64_t)len;
    h1 += h2;
    h2 += h1;
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    return h1 + h2;
}

uint64_t sparkey_hash(const uint8_t *key, size_t len, uint32_t seed, unsigned hash_size)
{
    return hash_size == 4 ? murmur3_x86_32(key, len, seed) : murmur3_x64_128_h1(key, len, seed);
}
