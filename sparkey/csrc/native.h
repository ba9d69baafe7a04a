/* Declarations shared by the sources of sparkey._native (pure layer, no IO).
 *
 * murmur.c     MurmurHash3 as Sparkey indexes use it
 * entries.c    VLQs, PUT framing, and entry reads from an uncompressed log or a decompressed block
 * table.c      slot probing of a lookup and the sequential Robin Hood build
 * arguments.c  argument handling shared by the functions Python calls
 * lookups.c    the Lookup type: get, get_many over one open store, any compression
 * slots.c      LookupSlots, the base type whose slots answer a reader's r[k] and `k in r`
 * scans.c      the per-entry steps of a log scan (walk_block, decode_headers)
 * cutting.c    the block cutting of bulk writes (cut_blocks)
 * _native.c    the module, with the hashing, framing and index-build functions
 *
 * Integers in the files are unsigned little-endian. Offsets read from a file are untrusted:
 * they are combined with saturating arithmetic (sat_add) and compared with the length of the
 * buffer before anything is dereferenced. Functions that return PyObject* or set exceptions run
 * with the GIL held; murmur.c, sparkey_write_put and sparkey_fill_slots never touch Python
 * objects and run without it.
 */
#ifndef SPARKEY_NATIVE_H
#define SPARKEY_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* A function the extension exports beside PyInit (it builds with hidden visibility):
 * benchmarks/sparkey_lookup_floor.c calls these through ctypes. */
#if defined(__GNUC__)
#define SPARKEY_EXPORTED __attribute__((visibility("default")))
#else
#define SPARKEY_EXPORTED
#endif

#define SPARKEY_LOG_HEADER_SIZE 84
#define SPARKEY_INDEX_HEADER_SIZE 112
#define SPARKEY_MAX_VLQ_BYTES 10
#define SPARKEY_MANY_VLQ_BYTES 9  /* entries.vlq_many reads at most 9 bytes (63 bits) */
#define SPARKEY_MAX_ENTRY_PART_LEN 2147483647u  /* longest key or value sparkey-java reads */
#define SPARKEY_KIND_PUT 0                      /* EntryKind.PUT; every other code is a DELETE */

/* The exception classes the module raises: from sparkey.errors, and spans_blocks, private to
 * the module, which sparkey_block_value raises for an entry that continues past its block. */
typedef struct {
    PyObject *log_format_error;
    PyObject *index_format_error;
    PyObject *entry_type_error;
    PyObject *entry_size_error;
    PyObject *closed_error;
    PyObject *spans_blocks;
} sparkey_errors;

static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

static inline uint64_t load_le(const uint8_t *p, unsigned size)
{
#if PY_LITTLE_ENDIAN
    if (size == 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
#else
    uint64_t v = 0;
    for (unsigned i = size; i-- > 0;)
        v = (v << 8) | p[i];
    return v;
#endif
}

static inline void store_le(uint8_t *p, unsigned size, uint64_t v)
{
#if PY_LITTLE_ENDIAN
    if (size == 4) {
        uint32_t narrow = (uint32_t)v;
        memcpy(p, &narrow, 4);
    } else {
        memcpy(p, &v, 8);
    }
#else
    for (unsigned i = 0; i < size; i++, v >>= 8)
        p[i] = (uint8_t)v;
#endif
}

/* ---- murmur.c */

/* MurmurHash3_x86_32 (hash_size 4) or the first word of MurmurHash3_x64_128 with both lanes
 * seeded by the 32-bit seed (hash_size 8), as sparkey.murmur. */
SPARKEY_EXPORTED uint64_t sparkey_hash(const uint8_t *key, size_t len, uint32_t seed,
                                       unsigned hash_size);

/* ---- entries.c */

/* A log mapped from offset 0; entries lie in [SPARKEY_LOG_HEADER_SIZE, end). */
typedef struct {
    const uint8_t *data;
    uint64_t end;
} sparkey_log;

/* format.vlq_decode: 0 and the value (saturated at UINT64_MAX) and the next offset, or -1 when
 * the VLQ runs past end or is longer than SPARKEY_MAX_VLQ_BYTES. */
int sparkey_vlq_decode(const uint8_t *buf, uint64_t pos, uint64_t end, uint64_t *value,
                       uint64_t *next);

/* Encoded sizes of a PUT and a DELETE (format.put_size, format.delete_size), and the bytes of
 * a PUT written at out; sparkey_write_put returns the end of them. */
uint64_t sparkey_put_size(uint64_t key_len, uint64_t value_len);
uint64_t sparkey_delete_size(uint64_t key_len);
uint8_t *sparkey_write_put(uint8_t *out, const uint8_t *key, size_t key_len,
                           const uint8_t *value, size_t value_len);

/* The value of the PUT at (position, entry_index) of an uncompressed log when its key is
 * `key`: a new bytes object (Py_True with found_only, which copies nothing), Py_None for
 * another key (new references), or NULL with LogFormatError/IndexFormatError set. Mirrors
 * LogReader.value_for of NONE logs. */
PyObject *sparkey_log_value(const sparkey_errors *errors, const sparkey_log *log,
                            uint64_t position, uint64_t entry_index,
                            const uint8_t *key, size_t key_len, int found_only);

/* The compressed payload of the block at `position`: [*start, *stop) in the log, checked
 * against its end (LogReader.block_at before decompression). 0, or -1 with an error set. */
int sparkey_block_payload(const sparkey_errors *errors, const sparkey_log *log,
                          uint64_t position, uint64_t *start, uint64_t *stop);

/* The value of entry `entry_index` of the decompressed block read at `position` when it is a
 * PUT of `key`, as sparkey_log_value; SpansBlocks when the entry does not lie wholly in the
 * block (the caller then reads it across blocks). */
PyObject *sparkey_block_value(const sparkey_errors *errors, const uint8_t *block, uint64_t size,
                              uint64_t position, uint64_t entry_index,
                              const uint8_t *key, size_t key_len);

/* blocks.walk_block: the offsets of the next entries (at most `limit`) from *pos that lie
 * wholly before `stop` go to `offsets`, *pos moves past them; their count, or -1 with
 * LogFormatError set for a corrupt header. block[0:stop] must be readable. */
int64_t sparkey_walk_block(const sparkey_errors *errors, const uint8_t *block, uint64_t *pos,
                           uint64_t stop, uint64_t limit, int64_t *offsets);

/* ---- table.c */

/* The slot table of an index and the probe parameters from its header. */
typedef struct {
    const uint8_t *slots;       /* slot 0, right after the 112-byte header */
    uint64_t capacity;
    uint64_t probe_limit;       /* the largest displacement a probe reads, below capacity */
    uint64_t home_multiplier;   /* sparkey_home_multiplier(capacity, hash_size) */
    uint32_t seed;
    unsigned hash_size;
    unsigned address_size;
    unsigned entry_block_bits;
} sparkey_table;

/* hash % capacity without a division when both fit 32 bits (Lemire, Kaser and Kurz, "Faster
 * remainder by direct computation", 2019): with M = floor((2**64 - 1) / capacity) + 1,
 * hash % capacity is the high 64 bits of (M * hash mod 2**64) * capacity. The multiplier is
 * that M for hash_size 4 and a capacity below 2**32, else 0 (as is M for capacity 1, wrapped):
 * sparkey_home then divides. A probe takes one remainder per slot it passes, a build one per
 * slot it moves through. */
static inline uint64_t sparkey_home_multiplier(uint64_t capacity, unsigned hash_size)
{
    return hash_size == 4 && capacity >> 32 == 0 ? UINT64_MAX / capacity + 1 : 0;
}

/* The home slot of `hash` in a table of `capacity` slots: hash % capacity. */
static inline uint64_t sparkey_home(uint64_t hash, uint64_t capacity, uint64_t multiplier)
{
    if (!multiplier)
        return hash % capacity;
    uint64_t low = multiplier * hash;
    /* the high 64 bits of low * capacity, in 64-bit products (capacity < 2**32) */
    return ((low >> 32) * capacity + ((low & UINT32_MAX) * capacity >> 32)) >> 32;
}

/* A lookup in progress: the key's hash, the slot to read next and its displacement. */
typedef struct {
    uint64_t hash;
    uint64_t slot;
    uint64_t displacement;
    int finished;
} sparkey_probe;

/* Start probing for `hash` at its home slot. */
void sparkey_probe_start(const sparkey_table *table, sparkey_probe *probe, uint64_t hash);

/* The address of the next slot holding the probe's hash: 1 and *address, or 0 once the probe
 * has reached an empty slot, the Robin Hood early exit or probe_limit (HashIndex.get). */
int sparkey_probe_next(const sparkey_table *table, sparkey_probe *probe, uint64_t *address);

/* The entries of a log in log order, as sparkey.robinhood.replay takes them. With keys == NULL
 * every entry is a PUT of a distinct key (kinds and lengths unused). */
typedef struct {
    size_t count;
    const uint64_t *hashes;
    const uint64_t *addresses;
    const uint8_t *kinds;
    const uint8_t *keys;          /* key i is keys[key_offsets[i]:][:key_lengths[i]] */
    const int64_t *key_offsets;
    const int64_t *key_lengths;
    const int64_t *value_lengths;
} sparkey_entries;

/* Fill `slots` (capacity packed slots of hash_size + address_size bytes) with the table that
 * replaying the entries builds under libsparkey's (java == 0) or sparkey-java's rules; store
 * the garbage bytes the replay counts. Runs without the GIL; the inputs must be validated
 * (keys in bounds, hashes and addresses fit the slot). 0, or -1 when memory runs out. */
int sparkey_fill_slots(uint8_t *slots, uint64_t capacity, unsigned hash_size,
                       unsigned address_size, const sparkey_entries *entries, int java,
                       uint64_t *garbage);

/* ---- arguments.c (GIL held) */

static inline sparkey_errors *sparkey_errors_of(PyObject *module)
{
    return (sparkey_errors *)PyModule_GetState(module);
}

/* Release a view filled by PyObject_GetBuffer; a zeroed view (never filled) is left alone. */
void sparkey_release(Py_buffer *view);
/* TypeError unless low <= nargs <= high. */
int sparkey_check_nargs(const char *name, Py_ssize_t nargs, Py_ssize_t low, Py_ssize_t high);
/* An int in [0, 2**64), one in [0, 2**32) (a hash seed), or 4 or 8 (a word size); else
 * ValueError or TypeError naming the argument. */
int sparkey_as_u64(PyObject *obj, const char *name, uint64_t *out);
int sparkey_as_seed(PyObject *obj, uint32_t *seed);
int sparkey_as_word_size(PyObject *obj, const char *name, unsigned *size);
/* Fill view with a contiguous array of `itemsize`-byte integers (`kind` 'u' or 'i') in native
 * byte order; TypeError for any other format. */
int sparkey_get_array(PyObject *obj, Py_buffer *view, char kind, Py_ssize_t itemsize,
                      int writable, const char *name);
/* A key or value as sparkey.format.entry_bytes takes it, as a bytes object (new reference):
 * bytes as they are, str encoded as UTF-8, bytearray and memoryview copied; EntryTypeError
 * for anything else. */
PyObject *sparkey_entry_bytes(const sparkey_errors *errors, PyObject *obj, const char *role);
/* A column of byte strings that can be read without the GIL while its holder lives: the items
 * of a pinned sequence of bytes objects, or the rows data[offsets[i]:offsets[i + 1]] of a
 * buffer (a PackedBytes column). */
typedef struct {
    PyObject *const *items;     /* NULL for rows of a buffer */
    const uint8_t *data;
    const int64_t *offsets;     /* count + 1 non-decreasing offsets within the buffer */
    Py_ssize_t count;
} sparkey_column;

/* Pin the items of `seq` as bytes objects (taken as sparkey_entry_bytes takes them) and return
 * their holder (a new reference): a tuple of bytes is its own holder, checked without the GIL
 * when it is long; anything else is copied into a private list, whose non-bytes items are
 * replaced by their bytes. */
PyObject *sparkey_pin_column(const sparkey_errors *errors, PyObject *seq, const char *role,
                             sparkey_column *column);

/* A column of the rows of `data` (a filled buffer) between the int64 `offsets` (a filled
 * array view); ValueError unless they are non-decreasing and within the buffer. */
int sparkey_rows_column(const Py_buffer *data, const Py_buffer *offsets, const char *role,
                        sparkey_column *column);

static inline void sparkey_row(const sparkey_column *column, Py_ssize_t i,
                               const uint8_t **data, size_t *size)
{
    if (column->items) {
        PyObject *item = column->items[i];
        *data = (const uint8_t *)PyBytes_AS_STRING(item);
        *size = (size_t)PyBytes_GET_SIZE(item);
    } else {
        *data = column->data + column->offsets[i];
        *size = (size_t)(column->offsets[i + 1] - column->offsets[i]);
    }
}

/* ---- lookups.c, scans.c, cutting.c */

/* Add the Lookup type to the module (its state must hold the errors already). */
int sparkey_add_lookup_type(PyObject *module);
/* Whether `object` is a Lookup. */
int sparkey_is_lookup(PyObject *object);
/* The value a Lookup stores for `key` (a new bytes object; with found_only, True, or the
 * value of a compressed store), None when absent, NULL with an exception (ClosedError once
 * released, EntryTypeError for a key of another type). */
SPARKEY_EXPORTED PyObject *sparkey_lookup_value(PyObject *lookup, PyObject *key, int found_only);

/* ---- slots.c */

/* Add the base type LookupSlots to the module. */
int sparkey_add_slots_type(PyObject *module);
extern PyMethodDef sparkey_scan_methods[];
extern PyMethodDef sparkey_cutting_methods[];

#endif
