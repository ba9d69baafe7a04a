/* SipHash-c-d of a byte string under a 16-byte seed, the seeded hash of a keyed table's key
 * bytes: the C twin of offheap.kernels.siphash.siphash (that module's docstring states the
 * algorithm), held to it by the tests. Pure: no Python calls, safe without the GIL. */

#ifndef OFFHEAP_HASHMAP_SIPHASH_H
#define OFFHEAP_HASHMAP_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

#define SIPHASH_SEED_BYTES 16

uint64_t siphash(const unsigned char seed[SIPHASH_SEED_BYTES], const unsigned char *data,
                 size_t n, int c_rounds, int d_rounds);

#endif
