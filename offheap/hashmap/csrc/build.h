/* The bulk build of the compiled LongHashMap core (build.c), used by bulk.c's _put_batch: a
 * batch that is large against the map is planned once (sorted by hash, its duplicates reduced)
 * and then appended and placed in one pass over the index, instead of one probe per key. */

#ifndef OFFHEAP_HASHMAP_BUILD_H
#define OFFHEAP_HASHMAP_BUILD_H

#include "core.h"

typedef struct {
    uint64_t hash;
    int64_t tag; /* a batch position, or an entry number */
} Record;

/* A batch's plan, owned by the call that made it (free_plan). The map's _reserve runs Python
 * code between the plan and the build, and the caller's arrays may change meanwhile, so the plan
 * keeps no pointer to the caller's keys: a key is unmix64 of its hash (mix64 is a bijection), and
 * the index and the entries a build writes come from the same hashes whatever happens to the
 * array. The words are the caller's, read once each by the build, which checks each against the
 * value width as it reads it; with duplicate keys the plan holds a copy of its own, where a key's
 * first position has its last word. */
typedef struct {
    const uint64_t *words; /* the caller's words, or own_words */
    uint64_t *own_words;   /* the copy a batch with duplicates needs, else NULL */
    Py_ssize_t n;          /* batch positions */
    Record *distinct;      /* (hash, first position) of each distinct key, in hash order; equal
                              hashes are equal keys, mix64 being a bijection */
    Py_ssize_t n_distinct;
    Record *dropped;       /* (position, word): the word of an earlier occurrence of the key at
                              that position, which the occurrence replaces */
    Py_ssize_t n_dropped;
    Py_ssize_t n_absent;   /* distinct keys the map did not hold when planned */
} BatchPlan;

/* Prefetching. A batch of random keys is memory-bound: each probe waits on an index slot, then
 * on an entry's key (and value). The bulk loops ask for them ahead of time, in two stages: the
 * index slot of the key PREFETCH_AHEAD places on, then (the slot having arrived) the entry it
 * names for the key PREFETCH_AHEAD / 2 places on, so the probe of the current key finds both in
 * cache. Only addresses inside the attached table are touched; a detached table is skipped. */
#define PREFETCH_AHEAD 16

PREFETCHING
prefetch_slot(const MapCore *self, int64_t key)
{
    if (ATTACHED(self))
        __builtin_prefetch(&self->table.index[home_of(key, self->homes)]);
}

PREFETCHING
prefetch_entry(const MapCore *self, int64_t key, int with_value)
{
    if (!ATTACHED(self))
        return;
    uint32_t ix = self->table.index[home_of(key, self->homes)];
    if (ix == 0 || (size_t)ix - 1 >= entry_limit(self))
        return;
    const Chunk *chunk = &self->table.chunks[(ix - 1) >> CHUNK_BITS];
    Py_ssize_t at = (ix - 1) & CHUNK_MASK;
    __builtin_prefetch(&chunk->keys[at]);
    if (with_value)
        __builtin_prefetch(chunk->values + at * self->item_size);
}

/* Both stages for the keys ahead of keys[i]. */
PREFETCHING
prefetch_ahead(const MapCore *self, const int64_t *keys, Py_ssize_t i, Py_ssize_t n,
               int with_value)
{
    if (i + PREFETCH_AHEAD < n)
        prefetch_slot(self, keys[i + PREFETCH_AHEAD]);
    if (i + PREFETCH_AHEAD / 2 < n)
        prefetch_entry(self, keys[i + PREFETCH_AHEAD / 2], with_value);
}

/* mix64's inverse: the int64 key whose mix64 is `h`. */
static inline int64_t
unmix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0x9CB4B2F8129337DBull; /* the inverse of 0xC4CEB9FE1A85EC53 modulo 2**64 */
    h ^= h >> 33;
    h *= 0x4F74430C22A54005ull; /* the inverse of 0xFF51AFD7ED558CCD */
    return (int64_t)(h ^ (h >> 33));
}

enum { BUILD_DONE = 0, BUILD_FAILED = -1, BUILD_OVERFLOW = 1, BUILD_NO_ROOM = 2 };

int plan_batch(const MapCore *self, const int64_t *keys, const uint64_t *words, Py_ssize_t n,
               BatchPlan *plan);
void free_plan(BatchPlan *plan);
int find_by_merge(const MapCore *self, const int64_t *keys, Py_ssize_t n, int64_t *out);
int place_entries(const MapCore *self, uint32_t *index, Py_ssize_t n_slots, Py_ssize_t homes);
int build_batch(MapCore *self, BatchPlan *plan, uint64_t *released, Py_ssize_t *n_released,
                Py_ssize_t *n_new);

#endif
