/* The compiled LongHashMap core's bulk build: a batch large against the map is appended and
 * the whole index placed anew in one sequential pass, leaving the bytes that inserting the
 * batch's keys one at a time would (offheap.hashmap.layout: entries in first-occurrence order,
 * each with its last value; the index sorted by home and, within a home, by entry number).
 *
 * Two steps, with the map's _reserve between them (bulk.c):
 *
 * - plan_batch sorts (hash, position) records of the batch by hash (a stable radix scatter on
 *   the hash's top bits, then each bucket on its own: sort_batch_by_hash) and reduces equal
 *   hashes, which are equal keys since mix64 is a bijection, to one record each; it counts the
 *   keys the map does not hold, probing it in hash order, which is index order. It keeps no
 *   copy of the keys: a new entry's key is unmix64 of its hash.
 * - build_batch sorts the map's live entries by hash the same way, merges them with the plan
 *   (an equal hash: the key is present, its value is overwritten), numbers the new keys by their
 *   first position (a bitmap of first positions and its prefix counts give each one's rank),
 *   checks that the placement fits the index (else BUILD_OVERFLOW: the index must grow), that
 *   the room was reserved and that every word fits the value width (else BUILD_NO_ROOM), and
 *   only then makes the entries live: the new entries (values in batch order, keys in hash
 *   order), the overwritten values, and the index slot by slot. Placement in the merged order is
 *   Robin Hood order once each run of equal homes is sorted by entry number: entry j of the
 *   order takes slot max(home, previous slot + 1).
 *
 * Example: an empty map of 16 homes and the batch [7, 3, 7] (values a, b, c), where home(7) = 5
 * and home(3) = 2: the plan is {3: first 1, last 1}, {7: first 0, last 2} in hash order, position
 * 0 is dropped (its value is replaced); entries 0 = (7, c) and 1 = (3, b); index[2] = 2,
 * index[5] = 1.
 *
 * Cost: O(n + batch) time, sequential but for the radix scatters and the new keys' writes;
 * scratch memory of about 16 bytes per batch key (24 with duplicate keys) and 32 per entry of
 * the map, freed before the call returns. A 4 KiB page of fresh scratch costs about 1 us to map
 * here, as much as the sort's own work on the 256 records it holds, so the scratch is kept
 * small: a batch of 1M new keys into an empty map went from 48 to 39 ns a key when the plan
 * stopped copying the keys and the words (16 bytes a key) and the sort its records (16 more).
 * Nothing here calls into Python; build_batch changes the table only once it cannot fail. */

#include "build.h"

#define SMALL_SORT 32  /* records sorted by insertion; larger groups by merging */
#ifndef RADIX_BITS
#define RADIX_BITS 10  /* at most 2**RADIX_BITS buckets a radix pass scatters to */
#endif

static void
insertion_sort(Record *records, Py_ssize_t n, int by_tag)
{
    for (Py_ssize_t i = 1; i < n; i++) {
        Record item = records[i];
        Py_ssize_t j = i;
        for (; j > 0 && (by_tag ? records[j - 1].tag > item.tag : records[j - 1].hash > item.hash);
             j--)
            records[j] = records[j - 1];
        records[j] = item;
    }
}

/* Stable sort by hash (by_tag 0) or tag (1), merging runs bottom up through `scratch` (n
 * records): O(n log n) however the keys are chosen. */
static void
merge_sort(Record *records, Record *scratch, Py_ssize_t n, int by_tag)
{
    for (Py_ssize_t i = 0; i < n; i += SMALL_SORT)
        insertion_sort(records + i, n - i < SMALL_SORT ? n - i : SMALL_SORT, by_tag);
    Record *from = records, *to = scratch;
    for (Py_ssize_t width = SMALL_SORT; width < n; width *= 2) {
        for (Py_ssize_t low = 0; low < n; low += 2 * width) {
            Py_ssize_t middle = low + width < n ? low + width : n;
            Py_ssize_t high = low + 2 * width < n ? low + 2 * width : n;
            Py_ssize_t a = low, b = middle, k = low;
            while (a < middle && b < high) {
                int take_b = by_tag ? from[b].tag < from[a].tag : from[b].hash < from[a].hash;
                to[k++] = take_b ? from[b++] : from[a++];
            }
            while (a < middle)
                to[k++] = from[a++];
            while (b < high)
                to[k++] = from[b++];
        }
        Record *swap = from;
        from = to;
        to = swap;
    }
    if (from != records)
        memcpy(records, from, (size_t)n * sizeof(Record));
}

static void
sort_small(Record *records, Record *scratch, Py_ssize_t n, int by_tag)
{
    if (n <= SMALL_SORT)
        insertion_sort(records, n, by_tag);
    else
        merge_sort(records, scratch, n, by_tag);
}

/* Whether record a goes after record b: by hash, then by tag. */
static inline int
goes_after(const Record *a, const Record *b)
{
    return a->hash > b->hash || (a->hash == b->hash && a->tag > b->tag);
}

/* Finish sorting records by (hash, tag) when they are sorted by a key that the hash orders (the
 * hash's top bits, a home) and each group of equal keys is in an order of its own: insertion
 * over the whole array, which moves a record only within its group, a move per inversion. 0,
 * the work left partly done (each group still in place), when the moves would exceed
 * `most_moves`: then the caller sorts each group. */
static int
finish_by_insertion(Record *records, Py_ssize_t n, Py_ssize_t most_moves)
{
    for (Py_ssize_t i = 1; i < n; i++) {
        if (!goes_after(&records[i - 1], &records[i]))
            continue;
        Record item = records[i];
        Py_ssize_t j = i;
        for (; j > 0 && goes_after(&records[j - 1], &item); j--)
            records[j] = records[j - 1];
        records[j] = item;
        if ((most_moves -= i - j) < 0)
            return 0;
    }
    return 1;
}

/* Sort `n` records, which come in increasing tags (batch positions, entry numbers) and whose
 * hashes share their top `skip` bits, stably by hash, `scratch` holding as many: an LSD radix
 * sort in one or two passes over the hash's next ceil(log2 n) bits (at most one record per
 * digit value on average), then the groups of equal bits by the whole hash: by insertion over
 * the whole array while that stays within 2 moves a record, as it does for evenly spread hashes
 * (no branch per group), else group by group in O(g log g). A digit has at most RADIX_BITS
 * bits: scattering 1M records to 2**11 buckets took 4.1 ms, to 2**10 2.2 ms (16-byte records,
 * 32 KiB of L1). Returns the sorted array (records or scratch), NULL with MemoryError. */
static Record *
sort_by_hash(Record *records, Record *scratch, Py_ssize_t n, int skip)
{
    if (n <= SMALL_SORT) {
        insertion_sort(records, n, 0);
        return records;
    }
    int bits = 1;
    while (bits < 32 && bits < 64 - skip && ((Py_ssize_t)1 << bits) < n)
        bits++;
    int passes = (bits + RADIX_BITS - 1) / RADIX_BITS;  /* bits spread over the passes */
    int digit = (bits + passes - 1) / passes;
    if (skip + digit * passes > 64)
        digit = (64 - skip) / passes;
    const int top_shift = 64 - skip - digit * passes;
    const size_t buckets = (size_t)1 << digit, mask = buckets - 1;
    Py_ssize_t *counts = PyMem_Calloc(buckets * (size_t)passes, sizeof(Py_ssize_t));
    if (counts == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        for (int pass = 0; pass < passes; pass++)
            counts[(size_t)pass * buckets + ((records[i].hash >> (top_shift + pass * digit)) & mask)]++;
    Record *from = records, *to = scratch;
    for (int pass = 0; pass < passes; pass++) {
        Py_ssize_t *offsets = counts + (size_t)pass * buckets, sum = 0;
        for (size_t b = 0; b < buckets; b++) {
            Py_ssize_t count = offsets[b];
            offsets[b] = sum;
            sum += count;
        }
        const int shift = top_shift + pass * digit;
        for (Py_ssize_t i = 0; i < n; i++)
            to[offsets[(from[i].hash >> shift) & mask]++] = from[i];
        Record *swap = from;
        from = to;
        to = swap;
    }
    PyMem_Free(counts);
    if (finish_by_insertion(from, n, 2 * n)) /* by (hash, tag): stable, tags coming in order */
        return from;
    for (Py_ssize_t i = 0; i < n;) {
        Py_ssize_t j = i + 1;
        const uint64_t top = from[i].hash >> top_shift;
        while (j < n && from[j].hash >> top_shift == top)
            j++;
        if (j - i > 1)
            sort_small(from + i, to + i, j - i, 0);
        i = j;
    }
    return from;
}

/* The batch's (mix64(key), position) records sorted by (hash, position), in a new array of n
 * records (the caller's to free); NULL with MemoryError. The first radix pass scatters straight
 * from the keys by the hash's top bits, and each bucket is then sorted on its own in a scratch
 * the size of the largest (sort_by_hash): scratch of 16 bytes per key in all, where records
 * made first and sorted in two passes over the array take 32 (each 4 KiB page of it a page
 * fault to map: about 1 us here, as much as the sort's own work on the records it holds). */
static Record *
sort_batch_by_hash(const int64_t *keys, Py_ssize_t n)
{
    const size_t items = n > 0 ? (size_t)n : 1;
    Record *records = PyMem_Malloc(items * sizeof(Record));
    if (records == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    int bits = 0;
    while (bits < RADIX_BITS && ((Py_ssize_t)1 << (bits + 1)) <= n / SMALL_SORT)
        bits++;
    const size_t buckets = (size_t)1 << bits;
    const int shift = 64 - bits; /* bits 0: one bucket, every hash's top 0 bits */
    Py_ssize_t *offsets = PyMem_Calloc(buckets + 1, sizeof(Py_ssize_t));
    Record *scratch = NULL;
    if (offsets == NULL)
        goto no_memory;
    for (Py_ssize_t p = 0; p < n; p++)
        offsets[bits ? (mix64((uint64_t)keys[p]) >> shift) + 1 : 1]++;
    Py_ssize_t largest = 0;
    for (size_t b = 0; b < buckets; b++) {
        largest = offsets[b + 1] > largest ? offsets[b + 1] : largest;
        offsets[b + 1] += offsets[b];
    }
    if ((scratch = PyMem_Malloc((largest ? (size_t)largest : 1) * sizeof(Record))) == NULL)
        goto no_memory;
    for (Py_ssize_t p = 0; p < n; p++) {
        const uint64_t hash = mix64((uint64_t)keys[p]);
        records[offsets[bits ? hash >> shift : 0]++] = (Record){hash, p};
    }
    /* offsets[b] is now bucket b's end, the next bucket's start */
    for (size_t b = 0, start = 0; b < buckets; start = (size_t)offsets[b++]) {
        Py_ssize_t size = offsets[b] - (Py_ssize_t)start;
        Record *sorted = sort_by_hash(records + start, scratch, size, bits);
        if (sorted == NULL)
            goto fail;
        if (sorted != records + start)
            memcpy(records + start, sorted, (size_t)size * sizeof(Record));
    }
    PyMem_Free(offsets);
    PyMem_Free(scratch);
    return records;
no_memory:
    PyErr_NoMemory();
fail:
    PyMem_Free(offsets);
    PyMem_Free(scratch);
    PyMem_Free(records);
    return NULL;
}

void
free_plan(BatchPlan *plan)
{
    PyMem_Free(plan->own_words);
    PyMem_Free(plan->distinct);
    PyMem_Free(plan->dropped);
    memset(plan, 0, sizeof *plan);
}

/* Plan a batch of `n` keys and words (see the file's comment and BatchPlan's); -1 with an
 * error, nothing held. Each key is read once. Precondition: attached. */
int
plan_batch(const MapCore *self, const int64_t *keys, const uint64_t *words, Py_ssize_t n,
           BatchPlan *plan)
{
    memset(plan, 0, sizeof *plan);
    plan->n = n;
    plan->words = words;
    size_t items = n > 0 ? (size_t)n : 1;
    Record *sorted = sort_batch_by_hash(keys, n);
    if (sorted == NULL)
        return -1;
    plan->distinct = sorted; /* reduced in place below */
    Py_ssize_t n_distinct = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        n_distinct += i == 0 || sorted[i].hash != sorted[i - 1].hash;
    if (n > n_distinct) {
        plan->dropped = PyMem_Malloc((size_t)(n - n_distinct) * sizeof(Record));
        plan->own_words = PyMem_Malloc(items * sizeof(uint64_t));
        if (plan->dropped == NULL || plan->own_words == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        memcpy(plan->own_words, words, (size_t)n * sizeof(uint64_t));
        plan->words = plan->own_words;
    }
    /* One record per distinct key, in place (a group's first record is never behind the write
     * position); its first position gets its last value. */
    for (Py_ssize_t i = 0; i < n;) {
        Py_ssize_t j = i + 1, first = sorted[i].tag;
        for (; j < n && sorted[j].hash == sorted[i].hash; j++)
            plan->dropped[plan->n_dropped++] = (Record){(uint64_t)sorted[j].tag,
                                                        (int64_t)plan->own_words[sorted[j - 1].tag]};
        if (j - i > 1)
            plan->own_words[first] = plan->own_words[sorted[j - 1].tag];
        sorted[plan->n_distinct++] = sorted[i];
        i = j;
    }
    plan->n_absent = plan->n_distinct;
    if (self->n > 0) {
        const Record *distinct = plan->distinct;
        Py_ssize_t slot;
        for (Py_ssize_t g = 0; g < plan->n_distinct; g++) {
            if (g + PREFETCH_AHEAD / 2 < plan->n_distinct)
                prefetch_entry(self, unmix64(distinct[g + PREFETCH_AHEAD / 2].hash), 0);
            Py_ssize_t e = find(self, unmix64(distinct[g].hash), 1, &slot);
            if (e == -2)
                goto fail;
            plan->n_absent -= e >= 0;
        }
    }
    return 0;
fail:
    free_plan(plan);
    return -1;
}

/* The map's live entries as (hash, entry) records sorted by hash, into `records` (n records,
 * `scratch` as many): the sorted array, or NULL with an error (CorruptionError when the live
 * bits do not count _n). */
static Record *
sorted_entries(const MapCore *self, Record *records, Record *scratch)
{
    Py_ssize_t count = 0;
    for (Py_ssize_t e = 0; e < self->used; e++) {
        if (!is_live_at(self, e))
            continue;
        if (count < self->n)
            records[count] = (Record){entry_hash(self, e), e};
        count++;
    }
    if (count != self->n) {
        PyErr_Format(CorruptionError, "LongHashMap live bits do not match its %zd entries: the "
                     "table is damaged", self->n);
        return NULL;
    }
    return sort_by_hash(records, scratch, count, 0);
}

/* Bits set in a word (without the library call __builtin_popcountll makes on a baseline CPU). */
static inline Py_ssize_t
popcount64(uint64_t x)
{
    x -= (x >> 1) & 0x5555555555555555ull;
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    return (Py_ssize_t)((x * 0x0101010101010101ull) >> 56);
}

/* How many bits are set before position p (prefix[w]: the bits set in words before w). */
static inline Py_ssize_t
rank_of(const uint64_t *bits, const Py_ssize_t *prefix, Py_ssize_t p)
{
    return prefix[p >> 6] + popcount64(bits[p >> 6] & (((uint64_t)1 << (p & 63)) - 1));
}

/* Write `index` (n_slots slots) from `order` (m records whose hash is now the home, in home
 * order): each run of equal homes sorted by entry (by insertion over the whole order while runs
 * are short, as under the load limit), entry j at max(home, previous slot + 1), the rest zero.
 * Precondition: the placement fits (checked by the caller). */
static void
place_index(uint32_t *index, Py_ssize_t n_slots, Record *order, Record *scratch, Py_ssize_t m)
{
    if (!finish_by_insertion(order, m, 2 * m))
        for (Py_ssize_t i = 0; i < m;) {
            Py_ssize_t j = i + 1;
            while (j < m && order[j].hash == order[i].hash)
                j++;
            sort_small(order + i, scratch, j - i, 1);
            i = j;
        }
    memset(index, 0, (size_t)n_slots * sizeof(uint32_t));
    Py_ssize_t previous = -1;
    for (Py_ssize_t k = 0; k < m; k++) {
        Py_ssize_t home = (Py_ssize_t)order[k].hash;
        previous = home > previous ? home : previous + 1;
        index[previous] = (uint32_t)(order[k].tag + 1);
    }
}

/* Whether the entries of `order` (by hash) placed in home order for `homes` homes stay inside
 * an index of n_slots slots. */
static int
placement_fits(const Record *order, Py_ssize_t m, Py_ssize_t homes, Py_ssize_t n_slots)
{
    Py_ssize_t previous = -1;
    for (Py_ssize_t k = 0; k < m; k++) {
        Py_ssize_t home = home_of_hash(order[k].hash, homes);
        previous = home > previous ? home : previous + 1;
    }
    return previous < n_slots;
}

/* Whether a word fits the table's value width. */
static inline int
word_fits(const MapCore *self, uint64_t word)
{
    return TYPED_CODEC(self->value_codec) || word_width(word) <= self->width;
}

/* Keep the word past _used at entry e, before a build writes it, in kept[*n_kept] as (e, word)
 * when it is not 0 and the word written may turn out too wide (not typed). */
static inline void
keep_old_word(const MapCore *self, Py_ssize_t e, Record *kept, Py_ssize_t *n_kept)
{
    if (TYPED_CODEC(self->value_codec))
        return;
    const uint64_t old = value_at(self, e);
    if (old != 0)
        kept[(*n_kept)++] = (Record){(uint64_t)e, (int64_t)old};
}

/* Apply a plan to the table (see the file's comment): BUILD_DONE, with the words the map no
 * longer holds (replaced values that own a record, the batch's dropped ones) in released[0 ..
 * *n_released) for the caller to release (room for plan->n words), the plan used up;
 * BUILD_OVERFLOW, or BUILD_NO_ROOM (no room reserved, or some word of the batch too wide for
 * the values), with the map and the plan unchanged; BUILD_FAILED with an error, the map
 * unchanged. *n_new is the number of keys the batch adds. Each of the caller's words is read
 * once, checked as it is read. Preconditions: attached and writable, 0 <= _used <= _capacity. */
int
build_batch(MapCore *self, BatchPlan *plan, uint64_t *released, Py_ssize_t *n_released,
            Py_ssize_t *n_new)
{
    const Py_ssize_t n = self->n, used = self->used, n_distinct = plan->n_distinct;
    const Py_ssize_t n_words = (plan->n + 63) / 64, m_most = n + n_distinct;
    const Record *distinct = plan->distinct;
    const uint64_t *words = plan->words;
    int status = BUILD_FAILED;
    Record *entries = NULL, *entry_scratch = NULL, *existing = NULL, *merged = NULL;
    Py_ssize_t *present = NULL; /* (entry, first position, word) of each key the map holds */
    uint64_t *firsts = PyMem_Calloc(n_words ? (size_t)n_words : 1, sizeof(uint64_t));
    Py_ssize_t *prefix = PyMem_Malloc((n_words ? (size_t)n_words : 1) * sizeof(Py_ssize_t));
    Record *scratch = PyMem_Malloc((m_most ? (size_t)m_most : 1) * sizeof(Record)); /* long runs only */
    const Py_ssize_t most_released = !TYPED_CODEC(self->value_codec) ? plan->n : 0;
    Record *releasing = PyMem_Malloc((most_released ? (size_t)most_released : 1) * sizeof(Record));
    Record *releasing_scratch = PyMem_Malloc((most_released ? (size_t)most_released : 1) * sizeof(Record));
    if (n > 0) {
        entries = PyMem_Malloc((size_t)n * sizeof(Record));
        entry_scratch = PyMem_Malloc((size_t)n * sizeof(Record));
        merged = PyMem_Malloc((size_t)m_most * sizeof(Record));
        present = PyMem_Malloc((n_distinct ? (size_t)n_distinct : 1) * 3 * sizeof(Py_ssize_t));
    }
    if (firsts == NULL || prefix == NULL || scratch == NULL || releasing == NULL
        || releasing_scratch == NULL
        || (n > 0 && (entries == NULL || entry_scratch == NULL || merged == NULL || present == NULL))) {
        PyErr_NoMemory();
        goto done;
    }
    if (n > 0 && (existing = sorted_entries(self, entries, entry_scratch)) == NULL)
        goto done;

    /* The entries and the batch's keys by hash: an equal hash is a key present. With no
     * entries, the plan's records are the order, their tags -1 - first position meanwhile. */
    Py_ssize_t i = 0, g = 0, m = 0, n_present = 0, added = 0;
    Record *order = n > 0 ? merged : plan->distinct;
    while (i < n || g < n_distinct) {
        if (g == n_distinct || (i < n && existing[i].hash < distinct[g].hash))
            order[m++] = existing[i++];
        else if (i == n || distinct[g].hash < existing[i].hash) {
            Py_ssize_t first = distinct[g].tag;
            firsts[first >> 6] |= (uint64_t)1 << (first & 63);
            order[m++] = (Record){distinct[g++].hash, -1 - first};
            added++;
        }
        else {
            present[3 * n_present] = existing[i].tag;
            present[3 * n_present++ + 1] = distinct[g++].tag;
            order[m++] = existing[i++];
        }
    }
    *n_new = added;
    status = BUILD_NO_ROOM;
    if (used + added > self->capacity || n + added > self->max_n)
        goto unplanned;
    if (!placement_fits(order, m, self->homes, self->n_slots)) {
        status = BUILD_OVERFLOW;
        goto unplanned;
    }

    /* The words, each read once and checked before the map changes: the new entries' values go
     * to their places past _used (no entry yet; the words there that are not 0, left by removed
     * entries, are kept in `releasing` until every word has passed), the present keys' into
     * `present`. A typed word always fits. */
    Py_ssize_t n_kept = 0;
    const int all_new = added == plan->n; /* then position p is entry used + p */
    for (Py_ssize_t w = 0, sum = 0; w < n_words; w++) {
        prefix[w] = sum;
        sum += popcount64(firsts[w]);
    }
    Py_ssize_t e = used;
    if (all_new)
        for (Py_ssize_t p = 0; p < plan->n; p++, e++) {
            const uint64_t word = words[p];
            if (!word_fits(self, word))
                goto too_wide;
            keep_old_word(self, e, releasing, &n_kept);
            set_value_at(self, e, word);
        }
    else
        for (Py_ssize_t w = 0; w < n_words; w++)
            for (uint64_t set = firsts[w]; set; set &= set - 1, e++) {
                const uint64_t word = words[w * 64 + __builtin_ctzll(set)];
                if (!word_fits(self, word))
                    goto too_wide;
                keep_old_word(self, e, releasing, &n_kept);
                set_value_at(self, e, word);
            }
    for (Py_ssize_t k = 0; k < n_present; k++)
        if (!word_fits(self, (uint64_t)(present[3 * k + 2] = (Py_ssize_t)words[present[3 * k + 1]])))
            goto too_wide;
    for (Py_ssize_t k = 0; k < plan->n_dropped; k++)
        if (!word_fits(self, (uint64_t)plan->dropped[k].tag))
            goto too_wide;

    /* Nothing can fail from here on: the new entries, the overwritten values, the index. */
    for (e = used; e < used + added; e++)
        set_live_at(self, e, 1);
    /* The words given up, in the order the key-by-key path releases them: each when the next
     * occurrence of its key overwrites it (an entry's old word at its key's first position). */
    Py_ssize_t n_releasing = 0;
    for (Py_ssize_t k = 0; k < n_present; k++) {
        uint64_t old = value_at(self, present[3 * k]);
        set_value_at(self, present[3 * k], (uint64_t)present[3 * k + 2]);
        if (owns_record(self, old))
            releasing[n_releasing++] = (Record){(uint64_t)present[3 * k + 1], (int64_t)old};
    }
    for (Py_ssize_t k = 0; k < plan->n_dropped; k++)
        if (owns_record(self, (uint64_t)plan->dropped[k].tag))
            releasing[n_releasing++] = plan->dropped[k];
    sort_small(releasing, releasing_scratch, n_releasing, 0);
    for (Py_ssize_t k = 0; k < n_releasing; k++)
        released[k] = (uint64_t)releasing[k].tag;
    *n_released = n_releasing;
    /* The new entries' keys, each unmix64 of its hash, and every entry's home. */
    const Py_ssize_t homes = self->homes;
    for (Py_ssize_t k = 0; k < m; k++) {
        if (order[k].tag < 0) {
            Py_ssize_t first = -1 - order[k].tag;
            e = used + (all_new ? first : rank_of(firsts, prefix, first));
            self->table.chunks[e >> CHUNK_BITS].keys[e & CHUNK_MASK] = unmix64(order[k].hash);
            order[k].tag = e;
        }
        order[k].hash = (uint64_t)home_of_hash(order[k].hash, homes);
    }
    place_index(self->table.index, self->n_slots, order, scratch, m);
    self->used = used + added;
    self->n = n + added;
    self->mods++;
    status = BUILD_DONE;
    goto done;
too_wide: /* the words past _used as they were */
    for (Py_ssize_t written = used; written < e; written++)
        set_value_at(self, written, 0);
    for (Py_ssize_t k = 0; k < n_kept; k++)
        set_value_at(self, (Py_ssize_t)releasing[k].hash, (uint64_t)releasing[k].tag);
unplanned:
    if (n == 0) /* the plan's records were the order: back to (hash, first position) */
        for (Py_ssize_t k = 0; k < m; k++)
            plan->distinct[k].tag = -1 - plan->distinct[k].tag;
done:
    PyMem_Free(firsts);
    PyMem_Free(prefix);
    PyMem_Free(scratch);
    PyMem_Free(entries);
    PyMem_Free(entry_scratch);
    PyMem_Free(merged);
    PyMem_Free(present);
    PyMem_Free(releasing);
    PyMem_Free(releasing_scratch);
    return status;
}

/* _find_entries by merging (bulk.c chooses it for a batch large against a large map): out[i] =
 * the entry holding keys[i], or -1. The batch's (hash, position) records and the map's live
 * (hash, entry) records, each sorted by hash, are merged: an equal hash is the key present,
 * mix64 being a bijection. O(n + _n) time, sequential but for the radix scatters and the writes
 * to out, where n probes would each wait on an index slot and then a key at random (~40 ns
 * apiece at best on a table past the caches); scratch of 32 bytes per key and per entry, freed
 * before it returns. 0, or -1 with an error (out partly written). Nothing here calls into
 * Python. Precondition: attached. */
int
find_by_merge(const MapCore *self, const int64_t *keys, Py_ssize_t n, int64_t *out)
{
    const Py_ssize_t n_entries = self->n;
    const size_t entries = n_entries > 0 ? (size_t)n_entries : 1;
    Record *wanted = NULL;
    Record *map = PyMem_Malloc(entries * sizeof(Record));
    Record *map_scratch = PyMem_Malloc(entries * sizeof(Record));
    int status = -1;
    if (map == NULL || map_scratch == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const Record *held = (wanted = sort_batch_by_hash(keys, n)) == NULL ? NULL
                         : sorted_entries(self, map, map_scratch);
    if (held == NULL)
        goto done;
    for (Py_ssize_t i = 0, j = 0; i < n; i++) {
        const uint64_t hash = wanted[i].hash;
        while (j < n_entries && held[j].hash < hash)
            j++;
        out[wanted[i].tag] = j < n_entries && held[j].hash == hash ? held[j].tag : -1;
    }
    status = 0;
done:
    PyMem_Free(wanted);
    PyMem_Free(map);
    PyMem_Free(map_scratch);
    return status;
}

/* _place_entries: fill `index`, an index of n_slots slots for `homes` homes that is not the
 * table's, with the map's live entries in Robin Hood order (offheap.hashmap.layout): the entries
 * sorted by hash are in home order for any number of homes, each run of equal homes then sorted
 * by entry number, so the bytes are those of growth.py's numpy placement. BUILD_DONE,
 * BUILD_OVERFLOW with `index` untouched when an entry would land past its last slot, or
 * BUILD_FAILED with an error. O(_n) time but for the radix scatters; scratch of 32 bytes per
 * entry. Nothing here calls into Python. Precondition: attached, homes <= n_slots. */
int
place_entries(const MapCore *self, uint32_t *index, Py_ssize_t n_slots, Py_ssize_t homes)
{
    const size_t items = self->n > 0 ? (size_t)self->n : 1;
    Record *records = PyMem_Malloc(items * sizeof(Record));
    Record *scratch = PyMem_Malloc(items * sizeof(Record));
    Record *order;
    int status = BUILD_FAILED;
    if (records == NULL || scratch == NULL)
        PyErr_NoMemory();
    else if ((order = sorted_entries(self, records, scratch)) != NULL) {
        status = BUILD_OVERFLOW;
        if (placement_fits(order, self->n, homes, n_slots)) {
            for (Py_ssize_t k = 0; k < self->n; k++)
                order[k].hash = (uint64_t)home_of_hash(order[k].hash, homes);
            place_index(index, n_slots, order, order == records ? scratch : records, self->n);
            status = BUILD_DONE;
        }
    }
    PyMem_Free(records);
    PyMem_Free(scratch);
    return status;
}
