/* The compiled LongHashMap core's shared declarations: the table struct, the format constants
 * of offheap.hashmap.layout, the accessors and the probe (inline: they are the hot path), and the
 * functions the core's files share. The specification of the core is in _core.c. */

#ifndef OFFHEAP_HASHMAP_CORE_H
#define OFFHEAP_HASHMAP_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "lock_api.h"
#include "pairs.h"
#include "records.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "siphash.h"

#if SIZEOF_SIZE_T < 8
#error "offheap's compiled core needs a 64-bit platform"
#endif

#define CHUNK_BITS 16            /* layout.CHUNK_BITS, checked at import */
#define CHUNK_ENTRIES ((Py_ssize_t)1 << CHUNK_BITS)
#define CHUNK_MASK (CHUNK_ENTRIES - 1)
#define MAX_CAPACITY 0xFFFFFFFFu /* entry numbers + 1 must fit a uint32 index word */
#define MAX_HOMES ((Py_ssize_t)1 << 32)
#define EXTERNAL 0xFF            /* byte 0 of a word whose value is a record in the store */
#define INLINE_MAX 7             /* serialized bytes an inline word holds */

/* A keyed table's key slots (offheap.hashmap.keyslots) */
#define SLOT_BYTES 16
#define SLOT_INLINE_MAX 15       /* key bytes an inline slot holds; byte 15 is their length */
#define SLOT_LONG 0x80           /* byte 15 of a long key's slot */

/* What a table's keys are: int64 (LongHashMap's, 8 bytes an entry) or 16-byte key slots of one
 * key type (HashMap's, keyslots.KEY_TYPES). */
typedef enum { KEYS_INT64, KEYED_STR, KEYED_BYTES, KEYED_INT64, KEYED_OBJECT } KeyKind;

/* "object" serializer tags (offheap.store.serializers) that the inline codec reads and writes */
enum { TAG_NONE = 0, TAG_FALSE = 1, TAG_TRUE = 2, TAG_INT = 3, TAG_TEXT = 6, TAG_BYTES = 7 };

typedef enum {
    CODEC_INT64,   /* raw int64 values */
    CODEC_FLOAT64, /* raw float64 values */
    CODEC_EMPTY,   /* no values: a set's table, a value column of 0 bytes (every value None) */
    CODEC_OBJECT,  /* slot words of the "object" serializer */
    CODEC_STR,     /* slot words of the "str" serializer */
    CODEC_BYTES,   /* slot words of the "bytes" serializer */
    CODEC_WORDS,   /* slot words of another serializer: every value through the codec object */
} ValueCodec;

/* Whether a codec's values are stored raw (no slot words, no records): the typed ones. */
#define TYPED_CODEC(codec) ((codec) <= CODEC_EMPTY)

/* Imported once at module init. */
extern PyObject *ClosedError, *CorruptionError;
extern PyObject *as_key_function, *lookup_key_function; /* offheap.hashmap.layout */
extern PyObject *INT64, *FLOAT64, *EMPTY, *OBJECT, *STR, *BYTES; /* the serializer singletons */
extern double max_load;                                  /* layout.MAX_LOAD */
extern PyObject *s_encode, *s_decode, *s_release, *s_width_of, *s_make_room, *s_typed,
    *s_serializer;

/* ---------------------------------------------------------------------------------------------
 * The struct
 */

typedef struct {
    int64_t *keys; /* int64 keys, or the 16-byte key slots of a keyed table (slot_at) */
    char *values;  /* item_size bytes per entry; NULL for item_size 0 (no values region) */
    uint8_t *live; /* bit at % 8 of byte at / 8 for position at */
} Chunk;

typedef struct {
    uint32_t *index;       /* NULL while detached */
    Chunk *chunks;         /* entry e at position e & CHUNK_MASK of chunk e >> CHUNK_BITS */
    PyObject *index_owner; /* the object the index was exported from: _index */
    Py_buffer *exports;    /* the index, then keys, values, live of each chunk; .obj is NULL
                              for an export not held */
    Py_ssize_t n_exports;
    int readonly;          /* some buffer is read-only (a reader's table): no changes */
} Table;

typedef struct {
    PyObject_HEAD
    MapLock *lock;   /* _lock: the map's lock, NULL until the map sets one */
    Py_ssize_t n;    /* _n: live entries */
    Py_ssize_t used; /* _used: entries including holes */
    Py_ssize_t mods; /* _mods: bumped when the entries or their order change */
    Py_ssize_t homes, n_slots, width, capacity, max_n; /* the shape of the last attach */
    PyObject *codec;                                   /* _codec, kept after a detach */
    ValueCodec value_codec;
    int item_size; /* bytes per value: 8 for int64 and float64, 0 for empty, else width */
    Table table;
    KeyKind key_kind;       /* KEYS_INT64 until _set_keys makes the core a keyed table's */
    uint8_t seed[SIPHASH_SEED_BYTES]; /* a keyed table's hash seed */
    PyObject *keycodec;     /* a keyed table's KeyCodec (keycodec.py), NULL for int64 keys */
    RecordSource key_records; /* its store's arrays, kept between long-key reads (records.h) */
    /* A Cache's table (cachetable.py, cache.c): the eviction hand (an entry number) and the
     * columns beside the entries, float64 stamps and uint8 marks, one item per entry number;
     * exports of the numpy arrays the table sets (.obj NULL: none). Other maps leave them. */
    Py_ssize_t hand;
    Py_buffer stamps, marks;
} MapCore;

#define KEYED(self) ((self)->key_kind != KEYS_INT64)

/* A key on its way into a probe (keys.c): an int64 table's int64, or a keyed table's key bytes,
 * hash and slot. For a keyed key `slot` is the slot a new entry stores: the inline slot, or for
 * a long key the hash's tag in bytes 8..15 and, once `made`, the record id of the key bytes in
 * bytes 0..7. `data` is borrowed from the key object or from `owner`. */
typedef struct {
    int64_t int_key;
    uint64_t hash;
    uint8_t slot[SLOT_BYTES];
    int is_long, made;
    const char *data;
    Py_ssize_t len;
    PyObject *owner;
    char buffer[SLOT_BYTES]; /* the tagged bytes of a short "object" key */
} Key;

typedef struct {
    PyObject_HEAD
    MapCore *core;       /* NULL once the iteration has ended */
    Py_ssize_t mods;     /* core->mods at the first step */
    Py_ssize_t next;     /* the next entry number to look at */
    int what;            /* ITER_KEYS, ITER_VALUES or ITER_ITEMS */
    int started;
    ItemPairs pairs;     /* the item tuples handed out last (pairs.h) */
} EntryIter;

enum { ITER_KEYS, ITER_VALUES, ITER_ITEMS };

extern PyTypeObject EntryIterType;
extern const LockApi *lock_api; /* offheap.collection._lock's, imported by the module's init */

#define ATTACHED(self) ((self)->table.index != NULL)
#define KEY_SIZE(self) (KEYED(self) ? SLOT_BYTES : 8)


enum { PUT_STORED = 0, PUT_FAILED = -1, PUT_FAILED_AFTER_STORING = -2 };

/* lock.c: an operation's turn. `held` (0 at the start of an operation) tells whether the
 * operation holds the lock; hold_lock takes it (0, or 1 when it had to wait and other threads
 * ran: read the table again; -1 on error), end_turn gives it back. */
int hold_lock(MapCore *self, int *held);
void end_turn(MapCore *self, int held);

/* Before reading the table: wait while another thread holds the lock (then hold it). A free
 * lock is not taken: the caller makes no call into Python until it has done its change. */
static inline int
begin_turn(MapCore *self, int *held)
{
    const MapLock *lock = self->lock;
    if (*held || lock == NULL || lock->depth == 0)
        return 0;
    return hold_lock(self, held) < 0 ? -1 : 0;
}

/* table.c, values.c, operations.c, iterator.c, bulk.c (the last four: methods) */
int closed_error(const MapCore *self);
PyObject *kind_name(const MapCore *self);
void set_key_error(PyObject *key);
int check_used(const MapCore *self);
int check_writable(const MapCore *self);
int corrupt_slot(const MapCore *self, Py_ssize_t slot, size_t entry);
Py_ssize_t empty_slot_from(const MapCore *self, Py_ssize_t slot);
void append(MapCore *self, Py_ssize_t slot, Py_ssize_t end, const Key *key, uint64_t word);
int remove_at(MapCore *self, Py_ssize_t slot, Py_ssize_t e);
PyObject *MapCore_compact_entries(MapCore *self, PyObject *Py_UNUSED(ignored));
void release_table(Table *table);
void detach(MapCore *self);
int value_codec_of(PyObject *codec, ValueCodec *value_codec);
int export_table(PyObject *index, PyObject *key_chunks, PyObject *value_chunks, PyObject *live_chunks, Py_ssize_t key_size, Py_ssize_t value_size, Table *table, Py_ssize_t *n_slots, Py_ssize_t *capacity);
int int_key(PyObject *value, int64_t *key);
int lookup_key(PyObject *obj, int64_t *key);
int store_key(PyObject *obj, int64_t *key);
int encode_inline(const MapCore *self, PyObject *value, uint64_t *bits, int *width);
PyObject * decode_inline(ValueCodec codec, uint64_t word);
PyObject *decode_text(const unsigned char *data, Py_ssize_t size);
PyObject * codec_call(MapCore *self, PyObject *method, PyObject *arg);
PyObject * decode_word(MapCore *self, uint64_t word);
int release_word(MapCore *self, uint64_t word);
void release_unstored(MapCore *self, PyObject *made);
int word_of(MapCore *self, PyObject *word, uint64_t *bits, int *width);
int make_room(MapCore *self, int width, int index_full);
int put_turn(MapCore *self, Key *key, uint64_t bits, int width, int *held);
int put(MapCore *self, Key *key, uint64_t bits, int width);
int store(MapCore *self, Key *key, PyObject *value, int *held);
Py_ssize_t lookup(MapCore *self, PyObject *obj, Key *key, Py_ssize_t *slot, int *held);
Py_ssize_t lookup_entry(MapCore *self, PyObject *obj, Key *key, Py_ssize_t *slot,
                        uint64_t *word, int *held);
Py_ssize_t find_in_turn(MapCore *self, Key *key, Py_ssize_t *slot, int *held);
Py_ssize_t find_in_turn_after(MapCore *self, Key *key, Py_ssize_t previous, Py_ssize_t *slot,
                              int *held);
Py_ssize_t entry_from(MapCore *self, Key *key, Py_ssize_t e, Py_ssize_t *slot, uint64_t *word,
                      int *held);
PyObject * take(MapCore *self, Py_ssize_t e, uint64_t word);
int remove_entry(MapCore *self, Py_ssize_t slot, Py_ssize_t e, uint64_t word);
Py_ssize_t entry_arg(MapCore *self, PyObject *arg);
Py_ssize_t lookup_argument(MapCore *self, const char *method, PyObject *const *args,
                           Py_ssize_t nargs, PyObject **obj,
                           PyObject **default_value, Key *key, uint64_t *word, int *held);
PyObject * iterate(MapCore *self, int what);
PyObject *MapCore_find_entries(MapCore *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *MapCore_count_absent(MapCore *self, PyObject *keys);
PyObject *MapCore_put_words(MapCore *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *MapCore_remove_keys(MapCore *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *MapCore_put_batch(MapCore *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *MapCore_find_values(MapCore *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *MapCore_encode_inline_prefix(MapCore *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *MapCore_place_entries(MapCore *self, PyObject *const *args, Py_ssize_t nargs);

/* keys.c: keys of either kind of table */
int import_key_names(void);
void key_clear(Key *key);
int key_for_lookup(MapCore *self, PyObject *obj, Key *key);
int key_for_store(MapCore *self, PyObject *obj, Key *key);
Py_ssize_t keyed_find(MapCore *self, Key *key, Py_ssize_t *slot);
int make_key_slot(MapCore *self, Key *key);
void drop_made_slot(MapCore *self, Key *key);
int release_key_of(MapCore *self, const uint8_t stored[SLOT_BYTES]);
int key_needs_lock(const MapCore *self, Py_ssize_t e);
int key_read_needs_lock(const MapCore *self, Py_ssize_t e);
int int64_table(MapCore *self, const char *method);
PyObject *key_object(MapCore *self, Py_ssize_t e);
Py_ssize_t slot_of_entry(const MapCore *self, Py_ssize_t e);
Py_ssize_t insert_slot(const MapCore *self, const Key *key);
PyObject *MapCore_set_keys(MapCore *self, PyObject *keycodec);
int discard_key(MapCore *self, PyObject *obj);

/* cache.c: a Cache's table columns and the compiled cache core (CacheCore) */
extern PyType_Spec CacheCore_spec;
extern PyTypeObject *MapCoreType, *CacheCoreType;
extern PyMethodDef CacheCore_methods[];
int import_cache_names(void);
PyObject *column_get(MapCore *self, void *closure);
int column_set(MapCore *self, PyObject *value, void *closure);
void release_columns(MapCore *self);
PyObject *MapCore_move_to_end(MapCore *self, PyObject *obj);

/* keyedbulk.c: the bulk operations on lists of keys */
PyObject *MapCore_get_keys(MapCore *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *MapCore_key_states(MapCore *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *MapCore_discard_keys(MapCore *self, PyObject *keys);
PyObject *MapCore_put_key_words(MapCore *self, PyObject *const *args, Py_ssize_t nargs);


/* The entries that may be read: min(_used, _capacity), 0 for a negative _used. */
static inline size_t
entry_limit(const MapCore *self)
{
    if (self->used <= 0)
        return 0;
    return (size_t)(self->used < self->capacity ? self->used : self->capacity);
}

/* An exact int's int64 value: 1 with *key set, 0 outside int64 (a miss), -1 on error; as
 * int_key(), reading up to three 30-bit digits in place on CPython 3.11 (where an int64 key
 * has at most three), else through the API. */
static inline int
exact_int_key(PyObject *value, int64_t *key)
{
#if PY_VERSION_HEX < 0x030C0000 && PyLong_SHIFT == 30
    const Py_ssize_t size = Py_SIZE(value);
    const digit *d = ((PyLongObject *)value)->ob_digit;
    uint64_t magnitude;
    switch (size < 0 ? -size : size) {
    case 0: *key = 0; return 1;
    case 1: magnitude = d[0]; break;
    case 2: magnitude = d[0] | (uint64_t)d[1] << 30; break;
    case 3:
        if (d[2] >= 8) /* 2**63 or more: -2**63 alone is in range, through the API */
            return int_key(value, key);
        magnitude = d[0] | (uint64_t)d[1] << 30 | (uint64_t)d[2] << 60;
        break;
    default: return int_key(value, key);
    }
    *key = size < 0 ? -(int64_t)magnitude : (int64_t)magnitude;
    return 1;
#else
    return int_key(value, key);
#endif
}

/* ---------------------------------------------------------------------------------------------
 * Hashing and probing (layout.py); none of these run Python code
 */

static inline uint64_t
mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ull;
    return h ^ (h >> 33);
}

/* hash * homes >> 64, for homes <= 2**32: the home of a key whose mix64 is `hash`. */
static inline Py_ssize_t
home_of_hash(uint64_t h, Py_ssize_t homes)
{
#ifdef __SIZEOF_INT128__
    return (Py_ssize_t)(((unsigned __int128)h * (uint64_t)homes) >> 64);
#else /* the product from 32-bit halves, exact since homes <= 2**32 */
    uint64_t low = (h & 0xFFFFFFFFu) * (uint64_t)homes;
    return (Py_ssize_t)(((h >> 32) * (uint64_t)homes + (low >> 32)) >> 32);
#endif
}

/* mix64(key) * homes >> 64, for homes <= 2**32. */
static inline Py_ssize_t
home_of(int64_t key, Py_ssize_t homes)
{
    return home_of_hash(mix64((uint64_t)key), homes);
}

/* Entry e's fields; precondition for all of them: attached and 0 <= e < _capacity. */

static inline int64_t
key_at(const MapCore *self, Py_ssize_t e)
{
    return self->table.chunks[e >> CHUNK_BITS].keys[e & CHUNK_MASK];
}

/* Entry e's key slot in a keyed table. */
static inline const uint8_t *
slot_at(const MapCore *self, Py_ssize_t e)
{
    return (const uint8_t *)self->table.chunks[e >> CHUNK_BITS].keys
           + (size_t)(e & CHUNK_MASK) * SLOT_BYTES;
}

/* The hash a key slot's home comes from (keyedlayout.slot_hashes): the seeded hash of an inline
 * key's bytes, a long key's kept top 56 bits, the low 8 bits clear either way. A damaged length
 * byte hashes the whole 15 bytes (nothing is read past the slot; salvage reports the damage). */
static inline uint64_t
slot_hash(const MapCore *self, const uint8_t *slot)
{
    if (slot[SLOT_INLINE_MAX] == SLOT_LONG) {
        uint64_t tag = 0;
        for (int i = SLOT_INLINE_MAX - 1; i >= 8; i--)
            tag = tag << 8 | slot[i];
        return tag << 8;
    }
    size_t n = slot[SLOT_INLINE_MAX] <= SLOT_INLINE_MAX ? slot[SLOT_INLINE_MAX] : SLOT_INLINE_MAX;
    return siphash(self->seed, slot, n, 1, 3) & ~(uint64_t)0xFF;
}

/* The hash entry e's home comes from: mix64 of an int64 key, slot_hash of a key slot. */
static inline uint64_t
entry_hash(const MapCore *self, Py_ssize_t e)
{
    return KEYED(self) ? slot_hash(self, slot_at(self, e)) : mix64((uint64_t)key_at(self, e));
}

static inline uint64_t
value_at(const MapCore *self, Py_ssize_t e)
{
    const char *p = self->table.chunks[e >> CHUNK_BITS].values;
    Py_ssize_t at = e & CHUNK_MASK;
    switch (self->item_size) {
    case 0: return 0;
    case 2: return ((const uint16_t *)p)[at];
    case 4: return ((const uint32_t *)p)[at];
    default: return ((const uint64_t *)p)[at];
    }
}

static inline void
set_value_at(MapCore *self, Py_ssize_t e, uint64_t word)
{
    char *p = self->table.chunks[e >> CHUNK_BITS].values;
    Py_ssize_t at = e & CHUNK_MASK;
    switch (self->item_size) {
    case 0: break;
    case 2: ((uint16_t *)p)[at] = (uint16_t)word; break;
    case 4: ((uint32_t *)p)[at] = (uint32_t)word; break;
    default: ((uint64_t *)p)[at] = word;
    }
}

static inline int
is_live_at(const MapCore *self, Py_ssize_t e)
{
    Py_ssize_t at = e & CHUNK_MASK;
    return self->table.chunks[e >> CHUNK_BITS].live[at >> 3] >> (at & 7) & 1;
}

static inline void
set_live_at(MapCore *self, Py_ssize_t e, int live)
{
    Py_ssize_t at = e & CHUNK_MASK;
    uint8_t *byte = &self->table.chunks[e >> CHUNK_BITS].live[at >> 3];
    *byte = (uint8_t)(live ? *byte | 1u << (at & 7) : *byte & ~(1u << (at & 7)));
}

/* Whether entry e is live and holds the key: an int64 table's `int_key`, or (key_slot not NULL)
 * a keyed table's inline key slot. Any e may be asked. Precondition: attached. */
static inline int
entry_holds(const MapCore *self, Py_ssize_t e, int64_t int_key, const uint8_t *key_slot)
{
    if (e < 0 || (size_t)e >= entry_limit(self))
        return 0;
    int same = key_slot == NULL ? key_at(self, e) == int_key
                                : memcmp(slot_at(self, e), key_slot, SLOT_BYTES) == 0;
    return same && is_live_at(self, e);
}

/* The declaration of a function that does nothing but issue prefetches. GCC judges such a
 * function free of side effects (a prefetch changes no memory) and deletes every call to it, so
 * its prefetches never run; inlined always, its body joins its caller's first and survives. */
#if defined(__GNUC__)
#define PREFETCHING static inline __attribute__((always_inline)) void
#else
#define PREFETCHING static inline void
#endif

/* Starts loading the int64 keys of the entries in the two slots after `home`. A hit passes
 * about one displaced entry on average at the table's load, each a key read from a random place
 * in memory; with these in flight beside the home's, a probe waits for about one such read
 * instead of one per slot passed. Reads only index words (mostly on the home's cache line) and
 * the chunk table. (Keyed probes gained nothing measurable from it, measured with it running:
 * their time is the key's hash.) */
PREFETCHING
prefetch_keys_after(const MapCore *self, const uint32_t *index, Py_ssize_t home,
                    Py_ssize_t n_slots, size_t limit)
{
    for (Py_ssize_t s = home + 1; s <= home + 2 && s < n_slots; s++) {
        size_t e = (size_t)index[s] - 1; /* an empty slot's 0 wraps past limit */
        if (e < limit)
            __builtin_prefetch(&self->table.chunks[e >> CHUNK_BITS].keys[e & CHUNK_MASK]);
    }
}

/* The entry holding `key`, -1 when there is none, or -2 with CorruptionError set; *slot is its
 * slot, or the slot where it would go (_n_slots when the probe passed the last slot). With
 * can_match 0 no stored key equals `key` (an int outside int64 whose low 64 bits these are).
 * Precondition: attached. */
static inline Py_ssize_t
find(const MapCore *self, int64_t key, int can_match, Py_ssize_t *slot)
{
    const uint32_t *index = self->table.index;
    const Py_ssize_t homes = self->homes, n_slots = self->n_slots;
    const size_t limit = entry_limit(self);
    const Py_ssize_t home = home_of(key, homes);
    Py_ssize_t s = home;
    prefetch_keys_after(self, index, home, n_slots, limit);
    for (; s < n_slots; s++) {
        uint32_t ix = index[s];
        if (ix == 0)
            break;
        size_t e = (size_t)ix - 1;
        if (e >= limit) {
            *slot = s;
            return corrupt_slot(self, s, e) - 1;
        }
        int64_t k = key_at(self, (Py_ssize_t)e);
        if (k == key && can_match) {
            *slot = s;
            return (Py_ssize_t)e;
        }
        if (home_of(k, homes) > home)
            break;
    }
    *slot = s;
    return -1;
}

/* Probes of a keyed table compare slots only for this many steps before they compute the homes
 * of the entries they pass (a SipHash of each inline slot): a hit within them never hashes a
 * stored key. Passing an entry of a later home without noticing only lengthens a miss, never
 * changes its answer (Robin Hood order: every later entry has a later home too). */
#define UNHASHED_STEPS 8

/* find() in a keyed table, from slot `from` (the key's home, or past a long key's candidate
 * whose bytes differed): the entry whose slot is the key's (an inline key) or whose slot has the
 * key's tag (a long key: a candidate, whose record's bytes the caller compares), -1 when there
 * is none, -2 with CorruptionError set. *slot is the slot of the entry found; for a miss it is
 * some slot past the key's place (insert_slot() gives the place itself). Precondition: attached,
 * from >= the key's home. */
static inline Py_ssize_t
find_slot(const MapCore *self, const Key *key, Py_ssize_t from, Py_ssize_t *slot)
{
    const uint32_t *index = self->table.index;
    const Py_ssize_t n_slots = self->n_slots;
    const size_t limit = entry_limit(self);
    const Py_ssize_t home = home_of_hash(key->hash & ~(uint64_t)0xFF, self->homes);
    const size_t skip = key->is_long ? 8 : 0; /* a long key's slot: compare its tag */
    Py_ssize_t s = from;
    for (; s < n_slots; s++) {
        uint32_t ix = index[s];
        if (ix == 0)
            break;
        size_t e = (size_t)ix - 1;
        if (e >= limit) {
            *slot = s;
            return corrupt_slot(self, s, e) - 1;
        }
        const uint8_t *stored = slot_at(self, (Py_ssize_t)e);
        if (self->item_size) /* a hit reads it next: let its miss overlap the slot's */
            __builtin_prefetch(self->table.chunks[e >> CHUNK_BITS].values
                               + (e & CHUNK_MASK) * (size_t)self->item_size);
        if (memcmp(stored + skip, key->slot + skip, SLOT_BYTES - skip) == 0) {
            *slot = s;
            return (Py_ssize_t)e;
        }
        if (s - from >= UNHASHED_STEPS && home_of_hash(slot_hash(self, stored), self->homes) > home)
            break;
    }
    *slot = s;
    return -1;
}

/* ---------------------------------------------------------------------------------------------
 * The inline value codec (offheap.hashmap.valueslots words, offheap.store.serializers bytes)
 */

/* The slot width (2, 4 or 8 bytes) a word needs: valueslots.width_for_word. */
static inline int
word_width(uint64_t word)
{
    unsigned size = (unsigned)(word & 0xFF);
    if (size == EXTERNAL || size > 3)
        return 8;
    return size > 1 ? 4 : 2;
}

/* Whether a stored word names a record: external words only (typed values are raw). */
static inline int
owns_record(const MapCore *self, uint64_t word)
{
    return !TYPED_CODEC(self->value_codec) && (word & 0xFF) == EXTERNAL;
}

/* Whether reading or dropping a stored word calls the codec object, and so needs the lock:
 * external words, and every word of a serializer the core does not know. (A malformed inline
 * word goes to the codec only for the error it raises, which reads nothing of the store.) */
static inline int
word_needs_codec(const MapCore *self, uint64_t word)
{
    return self->value_codec == CODEC_WORDS || owns_record(self, word);
}

/* ---------------------------------------------------------------------------------------------
 * Keys of either kind (keys.c), the int64 cases inline: they are LongHashMap's hot path
 */

/* A Key before its admission: it owns nothing and names no record. */
static inline void
key_init(Key *key)
{
    key->owner = NULL;
    key->is_long = 0;
    key->made = 0;
}

/* The entry holding an admitted `key` (>= 0), -1 when there is none, -2 with an exception set;
 * *slot as find()'s. Calls no Python code (keyed_find reads a long key's record in place). */
static inline Py_ssize_t
key_find(MapCore *self, Key *key, Py_ssize_t *slot)
{
    return KEYED(self) ? keyed_find(self, key, slot) : find(self, key->int_key, 1, slot);
}

/* Free the record of a long key's slot that make_key_slot made and no entry took (a failed or
 * superseded put); the exception being raised, if any, is kept. */
static inline void
drop_key_slot(MapCore *self, Key *key)
{
    if (key->made == 1)
        drop_made_slot(self, key);
}

/* Whether reading or dropping entry e (its key, or its `word`) calls into Python. */
static inline int
entry_needs_lock(const MapCore *self, Py_ssize_t e, uint64_t word)
{
    return word_needs_codec(self, word) || (KEYED(self) && key_needs_lock(self, e));
}

#endif
