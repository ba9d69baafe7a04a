/* offheap.hashmap._core: the compiled scalar operations of a LongHashMap (layer 6).
 *
 * MapCore is the C twin of the pure-Python reference offheap.hashmap.core.MapCore: the same
 * attributes and methods, the same results and the same effect on every byte of the table
 * (format: offheap.hashmap.layout; the contract with the map: the reference's module docstring).
 * offheap.kernels.native chooses between the two.
 *
 * Ownership. While attached, a MapCore holds a buffer export (PyObject_GetBuffer) of the index
 * and of every chunk's keys, values and live bits, so none of their regions can be unmapped under
 * it; _detach and deallocation release them all. The value codec is held from one attach to the
 * next. A table with a read-only buffer (a reader's) serves lookups; a change raises the
 * TypeError a write into read-only memory raises, before anything changed.
 *
 * Safety. Any call into Python (the codec's methods, _make_room, __index__, a garbage collection
 * that an allocation starts) may detach, re-attach or grow the table, or switch threads. So no
 * pointer into the table is kept across such a call: an operation copies the words it needs
 * into locals, makes the call, then re-reads the struct and checks that it is still attached.
 * Entry numbers read from the index are checked against min(_used, _capacity) and probes stop
 * at _n_slots: a damaged table raises CorruptionError, never reads or writes out of bounds.
 *
 * Values. The common values are encoded and decoded here, byte for byte as the serializers of
 * offheap.store.serializers do: for "object" None, False, True, ints of int64 and exact str and
 * bytes whose serialized form fits a word (<= 7 bytes); for "str" and "bytes" exact str and
 * bytes of <= 7 bytes; raw int64 and float64 for the typed codecs. Everything else (external
 * records, pickles, validation errors) goes through the codec object (ValueSlots), so there is
 * one implementation of it. Only external words own a record: inline words and typed values
 * need no release.
 *
 * Thread safety: an operation runs under the GIL, which it gives up only inside those calls into
 * Python; the map serializes access as it does for the reference.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

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

/* "object" serializer tags (offheap.store.serializers) that the inline codec reads and writes */
enum { TAG_NONE = 0, TAG_FALSE = 1, TAG_TRUE = 2, TAG_INT = 3, TAG_TEXT = 6, TAG_BYTES = 7 };

typedef enum {
    CODEC_INT64,   /* raw int64 values */
    CODEC_FLOAT64, /* raw float64 values */
    CODEC_OBJECT,  /* slot words of the "object" serializer */
    CODEC_STR,     /* slot words of the "str" serializer */
    CODEC_BYTES,   /* slot words of the "bytes" serializer */
    CODEC_WORDS,   /* slot words of another serializer: every value through the codec object */
} ValueCodec;

/* Imported once at module init. */
static PyObject *ClosedError, *CorruptionError;
static PyObject *as_key_function, *lookup_key_function; /* offheap.hashmap.layout */
static PyObject *INT64, *FLOAT64, *OBJECT, *STR, *BYTES; /* the serializer singletons */
static double max_load;                                  /* layout.MAX_LOAD */
static PyObject *s_encode, *s_decode, *s_release, *s_width_of, *s_make_room, *s_typed,
    *s_serializer;

/* ---------------------------------------------------------------------------------------------
 * The struct
 */

typedef struct {
    int64_t *keys;
    char *values;  /* item_size bytes per entry */
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
    Py_ssize_t n;    /* _n: live entries */
    Py_ssize_t used; /* _used: entries including holes */
    Py_ssize_t mods; /* _mods: bumped when the entries or their order change */
    Py_ssize_t homes, n_slots, width, capacity, max_n; /* the shape of the last attach */
    PyObject *codec;                                   /* _codec, kept after a detach */
    ValueCodec value_codec;
    int item_size; /* bytes per value: 8 for typed values, else width */
    Table table;
} MapCore;

typedef struct {
    PyObject_HEAD
    MapCore *core;       /* NULL once the iteration has ended */
    Py_ssize_t mods;     /* core->mods at the first step */
    Py_ssize_t next;     /* the next entry number to look at */
    int what;            /* ITER_KEYS, ITER_VALUES or ITER_ITEMS */
    int started;
} EntryIter;

enum { ITER_KEYS, ITER_VALUES, ITER_ITEMS };

static PyTypeObject EntryIterType;

#define ATTACHED(self) ((self)->table.index != NULL)

static int
closed_error(void)
{
    PyErr_SetString(ClosedError, "the LongHashMap is closed");
    return -1;
}

static void
set_key_error(PyObject *key)
{
    PyObject *args = PyTuple_Pack(1, key); /* a tuple key must not become the args */
    if (args != NULL) {
        PyErr_SetObject(PyExc_KeyError, args);
        Py_DECREF(args);
    }
}

/* The entries that may be read: min(_used, _capacity), 0 for a negative _used. */
static inline size_t
entry_limit(const MapCore *self)
{
    if (self->used <= 0)
        return 0;
    return (size_t)(self->used < self->capacity ? self->used : self->capacity);
}

/* CorruptionError unless 0 <= _used <= _capacity (before appending or dropping holes). */
static int
check_used(const MapCore *self)
{
    if (self->used >= 0 && self->used <= self->capacity)
        return 0;
    PyErr_Format(CorruptionError,
                 "LongHashMap counters are out of range: %zd entries used of a capacity of %zd",
                 self->used, self->capacity);
    return -1;
}

/* TypeError, as for a write into a read-only memoryview, when the table cannot change. */
static int
check_writable(const MapCore *self)
{
    if (!self->table.readonly)
        return 0;
    PyErr_SetString(PyExc_TypeError, "cannot modify read-only memory");
    return -1;
}

static int
corrupt_slot(const MapCore *self, Py_ssize_t slot, size_t entry)
{
    PyErr_Format(CorruptionError,
                 "LongHashMap index slot %zd points at entry %zu, but only %zu entries are in "
                 "use: the table is damaged", slot, entry, entry_limit(self));
    return -1;
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

/* mix64(key) * homes >> 64, for homes <= 2**32. */
static inline Py_ssize_t
home_of(int64_t key, Py_ssize_t homes)
{
    uint64_t h = mix64((uint64_t)key);
#ifdef __SIZEOF_INT128__
    return (Py_ssize_t)(((unsigned __int128)h * (uint64_t)homes) >> 64);
#else /* the product from 32-bit halves, exact since homes <= 2**32 */
    uint64_t low = (h & 0xFFFFFFFFu) * (uint64_t)homes;
    return (Py_ssize_t)(((h >> 32) * (uint64_t)homes + (low >> 32)) >> 32);
#endif
}

/* Entry e's fields; precondition for all of them: attached and 0 <= e < _capacity. */

static inline int64_t
key_at(const MapCore *self, Py_ssize_t e)
{
    return self->table.chunks[e >> CHUNK_BITS].keys[e & CHUNK_MASK];
}

static inline uint64_t
value_at(const MapCore *self, Py_ssize_t e)
{
    const char *p = self->table.chunks[e >> CHUNK_BITS].values;
    Py_ssize_t at = e & CHUNK_MASK;
    switch (self->item_size) {
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

/* The entry holding `key`, -1 when there is none, or -2 with CorruptionError set; *slot is its
 * slot, or the slot where it would go (_n_slots when the probe passed the last slot). With
 * can_match 0 no stored key equals `key` (an int outside int64 whose low 64 bits these are).
 * Precondition: attached. */
static Py_ssize_t
find(const MapCore *self, int64_t key, int can_match, Py_ssize_t *slot)
{
    const uint32_t *index = self->table.index;
    const Py_ssize_t homes = self->homes, n_slots = self->n_slots;
    const size_t limit = entry_limit(self);
    const Py_ssize_t home = home_of(key, homes);
    Py_ssize_t s = home;
    for (; s < n_slots; s++) {
        uint32_t ix = index[s];
        if (ix == 0)
            break;
        size_t e = (size_t)ix - 1;
        if (e >= limit)
            return corrupt_slot(self, s, e) - 1;
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

/* The first empty index slot at or after `slot`, or -1 when the slack is full. */
static Py_ssize_t
empty_slot_from(const MapCore *self, Py_ssize_t slot)
{
    const uint32_t *index = self->table.index;
    for (; slot < self->n_slots; slot++)
        if (index[slot] == 0)
            return slot;
    return -1;
}

/* Append entry _used for `key` and point index slot `slot` at it, moving the run slot..end-1
 * one place right. Preconditions: attached, 0 <= _used < _capacity, index[end] == 0. */
static void
append(MapCore *self, Py_ssize_t slot, Py_ssize_t end, int64_t key, uint64_t word)
{
    Py_ssize_t e = self->used;
    uint32_t *index = self->table.index;
    self->table.chunks[e >> CHUNK_BITS].keys[e & CHUNK_MASK] = key;
    set_value_at(self, e, word);
    set_live_at(self, e, 1);
    memmove(index + slot + 1, index + slot, (size_t)(end - slot) * sizeof(uint32_t));
    index[slot] = (uint32_t)(e + 1);
    self->used = e + 1;
    self->n++;
    self->mods++;
}

/* Remove entry `e`, found at index slot `slot`: empty the slot by backward shift, clear its live
 * bit and drop the holes at the end of the entries (its word is not released). -1 with
 * CorruptionError set, the table unchanged, if an entry on the way is out of range. */
static int
remove_at(MapCore *self, Py_ssize_t slot, Py_ssize_t e)
{
    uint32_t *index = self->table.index;
    const size_t limit = entry_limit(self);
    if (check_writable(self) < 0 || check_used(self) < 0)
        return -1;
    Py_ssize_t end = slot + 1;
    for (; end < self->n_slots; end++) {
        uint32_t ix = index[end];
        if (ix == 0)
            break;
        if ((size_t)ix - 1 >= limit)
            return corrupt_slot(self, end, (size_t)ix - 1);
        if (home_of(key_at(self, ix - 1), self->homes) == end)
            break;
    }
    memmove(index + slot, index + slot + 1, (size_t)(end - slot - 1) * sizeof(uint32_t));
    index[end - 1] = 0;
    set_live_at(self, e, 0);
    self->n--;
    self->mods++;
    Py_ssize_t used = self->used;
    while (used > 0 && !is_live_at(self, used - 1))
        used--;
    self->used = used;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Key admission (layout.lookup_key and layout.as_key)
 */

/* A float key that is_integer() and in int64: 1 with *key set, else 0 (a miss). */
static int
float_key(double v, int64_t *key)
{
    if (!isfinite(v) || floor(v) != v || v < -9223372036854775808.0 || v >= 9223372036854775808.0)
        return 0;
    *key = (int64_t)v;
    return 1;
}

/* An int's int64 value: 1 with *key set, 0 outside int64 (a miss), -1 on error. */
static int
int_key(PyObject *value, int64_t *key)
{
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow)
        return 0;
    if (v == -1 && PyErr_Occurred())
        return -1;
    *key = v;
    return 1;
}

/* The int64 a lookup probes for: 1 with *key set, 0 when no key of a map can equal `obj`,
 * -1 on error. As layout.lookup_key: exact ints and floats here, float subclasses through it,
 * anything else through operator.index (a TypeError is a miss). May run Python code. */
static int
lookup_key(PyObject *obj, int64_t *key)
{
    if (PyLong_CheckExact(obj))
        return int_key(obj, key);
    if (PyFloat_CheckExact(obj))
        return float_key(PyFloat_AS_DOUBLE(obj), key);
    PyObject *admitted;
    if (PyFloat_Check(obj)) {
        if ((admitted = PyObject_CallOneArg(lookup_key_function, obj)) == NULL)
            return -1;
    }
    else if ((admitted = PyNumber_Index(obj)) == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    int found = admitted == Py_None ? 0 : int_key(admitted, key);
    Py_DECREF(admitted);
    return found;
}

/* The int64 key to store, or -1 with layout.as_key's TypeError or OverflowError: an exact int
 * of int64 here, anything else through as_key itself so that its messages stay its own. */
static int
store_key(PyObject *obj, int64_t *key)
{
    if (PyLong_CheckExact(obj)) {
        int in_range = int_key(obj, key);
        if (in_range != 0)
            return in_range == 1 ? 0 : -1;
    }
    PyObject *admitted = PyObject_CallOneArg(as_key_function, obj);
    if (admitted == NULL)
        return -1;
    long long v = PyLong_AsLongLong(admitted); /* as_key returns an int of int64 */
    Py_DECREF(admitted);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *key = v;
    return 0;
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

/* The inline word of an optional tag byte (tag < 0: none) and `size` bytes, tag + size <= 7. */
static uint64_t
inline_word(int tag, const char *data, Py_ssize_t size)
{
    uint64_t word = 0;
    int at = 1;
    if (tag >= 0)
        word |= (uint64_t)tag << (8 * at++);
    for (Py_ssize_t i = 0; i < size; i++)
        word |= (uint64_t)(unsigned char)data[i] << (8 * at++);
    return word | (uint64_t)(at - 1);
}

/* An exact str as an inline word (UTF-8, surrogatepass) after an optional tag: 1 with *word
 * set, 0 when it is too long, -1 on error. */
static int
encode_text(PyObject *text, int tag, uint64_t *word)
{
    const Py_ssize_t room = INLINE_MAX - (tag >= 0);
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0)
        return -1;
#endif
    if (PyUnicode_GET_LENGTH(text) > room) /* every code point takes at least one byte */
        return 0;
    if (PyUnicode_IS_ASCII(text)) {
        *word = inline_word(tag, (const char *)PyUnicode_1BYTE_DATA(text),
                            PyUnicode_GET_LENGTH(text));
        return 1;
    }
    PyObject *utf8 = PyUnicode_AsEncodedString(text, "utf-8", "surrogatepass");
    if (utf8 == NULL)
        return -1;
    int fits = PyBytes_GET_SIZE(utf8) <= room;
    if (fits)
        *word = inline_word(tag, PyBytes_AS_STRING(utf8), PyBytes_GET_SIZE(utf8));
    Py_DECREF(utf8);
    return fits;
}

static int
encode_object(PyObject *value, uint64_t *word)
{
    if (value == Py_None || value == Py_False || value == Py_True) {
        *word = inline_word(value == Py_None ? TAG_NONE : value == Py_False ? TAG_FALSE : TAG_TRUE,
                            NULL, 0);
        return 1;
    }
    if (PyLong_CheckExact(value)) {
        int64_t v;
        int in_range = int_key(value, &v);
        if (in_range <= 0)
            return in_range; /* outside int64: tag 04, the codec's */
        uint64_t zigzag = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
        char varint[10];
        Py_ssize_t size = 0;
        for (; zigzag >= 0x80; zigzag >>= 7)
            varint[size++] = (char)((zigzag & 0x7F) | 0x80);
        varint[size++] = (char)zigzag;
        if (size > INLINE_MAX - 1)
            return 0; /* an external record, the codec's */
        *word = inline_word(TAG_INT, varint, size);
        return 1;
    }
    if (PyUnicode_CheckExact(value))
        return encode_text(value, TAG_TEXT, word);
    if (PyBytes_CheckExact(value) && PyBytes_GET_SIZE(value) < INLINE_MAX) {
        *word = inline_word(TAG_BYTES, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value));
        return 1;
    }
    return 0;
}

/* `value` as the word or raw value to store when the inline codec takes it: 1 with *bits and
 * *width set, 0 when the codec object must encode it, -1 on error. */
static int
encode_inline(const MapCore *self, PyObject *value, uint64_t *bits, int *width)
{
    int done = 0;
    *width = 8;
    switch (self->value_codec) {
    case CODEC_INT64:
        if (PyLong_CheckExact(value)) {
            int64_t v = 0;
            done = int_key(value, &v); /* outside int64: the codec's OverflowError */
            *bits = (uint64_t)v;
        }
        return done;
    case CODEC_FLOAT64:
        if (PyFloat_CheckExact(value)) {
            double v = PyFloat_AS_DOUBLE(value);
            memcpy(bits, &v, sizeof v);
            done = 1;
        }
        return done;
    case CODEC_OBJECT:
        done = encode_object(value, bits);
        break;
    case CODEC_STR:
        done = PyUnicode_CheckExact(value) ? encode_text(value, -1, bits) : 0;
        break;
    case CODEC_BYTES:
        if (PyBytes_CheckExact(value) && PyBytes_GET_SIZE(value) <= INLINE_MAX) {
            *bits = inline_word(-1, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value));
            done = 1;
        }
        break;
    case CODEC_WORDS:
        break;
    }
    if (done == 1)
        *width = word_width(*bits);
    return done;
}

/* A str decoded from UTF-8 (surrogatepass), or NULL without an error for malformed bytes. */
static PyObject *
decode_text(const unsigned char *data, Py_ssize_t size)
{
    PyObject *text = PyUnicode_DecodeUTF8((const char *)data, size, "surrogatepass");
    if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        PyErr_Clear();
    return text;
}

/* `size` serialized bytes as an array: byte i is bits 8i..8i+7 of `bytes`. */
static inline void
unpack_bytes(uint64_t bytes, unsigned size, unsigned char *data)
{
    for (unsigned i = 0; i < size; i++)
        data[i] = (unsigned char)(bytes >> (8 * i));
}

/* An "object" value of `size` serialized bytes (byte i is bits 8i..8i+7 of `bytes`). */
static PyObject *
decode_object(uint64_t bytes, unsigned size)
{
    if (size == 0)
        return NULL;
    unsigned char data[INLINE_MAX];
    switch (bytes & 0xFF) {
    case TAG_NONE: return size == 1 ? Py_NewRef(Py_None) : NULL;
    case TAG_FALSE: return size == 1 ? Py_NewRef(Py_False) : NULL;
    case TAG_TRUE: return size == 1 ? Py_NewRef(Py_True) : NULL;
    case TAG_INT: {
        uint64_t code = 0;
        unsigned at = 1;
        for (unsigned shift = 0;; shift += 7) {
            if (at == size)
                return NULL; /* the varint runs past the end */
            unsigned byte = (unsigned)(bytes >> (8 * at++)) & 0xFF;
            code |= (uint64_t)(byte & 0x7F) << shift;
            if (byte < 0x80)
                break;
        }
        if (at != size)
            return NULL; /* bytes left after the varint */
        return PyLong_FromLongLong((int64_t)(code >> 1) ^ -(int64_t)(code & 1));
    }
    case TAG_TEXT:
        unpack_bytes(bytes >> 8, size - 1, data);
        return decode_text(data, size - 1);
    case TAG_BYTES:
        unpack_bytes(bytes >> 8, size - 1, data);
        return PyBytes_FromStringAndSize((const char *)data, size - 1);
    default: return NULL;
    }
}

/* The value of an inline word (a new object), or NULL without an error when the codec object
 * must decode it: external words, other tags and malformed words, which it reports. */
static PyObject *
decode_inline(ValueCodec codec, uint64_t word)
{
    unsigned size = (unsigned)(word & 0xFF);
    if (size > INLINE_MAX || (size < INLINE_MAX && word >> (8 * (size + 1)) != 0))
        return NULL;
    unsigned char data[INLINE_MAX];
    switch (codec) {
    case CODEC_OBJECT:
        return decode_object(word >> 8, size);
    case CODEC_STR:
        unpack_bytes(word >> 8, size, data);
        return decode_text(data, size);
    case CODEC_BYTES:
        unpack_bytes(word >> 8, size, data);
        return PyBytes_FromStringAndSize((const char *)data, size);
    default:
        return NULL;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Calls into the codec object and the map; each may run any Python code
 */

static PyObject *
codec_call(MapCore *self, PyObject *method, PyObject *arg)
{
    PyObject *codec = self->codec;
    if (codec == NULL) {
        closed_error();
        return NULL;
    }
    Py_INCREF(codec); /* the call may attach another codec */
    PyObject *result = PyObject_CallMethodOneArg(codec, method, arg);
    Py_DECREF(codec);
    return result;
}

/* The value a stored word or raw value stands for (a new reference). */
static PyObject *
decode_word(MapCore *self, uint64_t word)
{
    if (self->value_codec == CODEC_INT64)
        return PyLong_FromLongLong((int64_t)word);
    if (self->value_codec == CODEC_FLOAT64) {
        double v;
        memcpy(&v, &word, sizeof v);
        return PyFloat_FromDouble(v);
    }
    PyObject *value = decode_inline(self->value_codec, word);
    if (value != NULL || PyErr_Occurred())
        return value;
    PyObject *number = PyLong_FromUnsignedLongLong(word);
    if (number == NULL)
        return NULL;
    value = codec_call(self, s_decode, number);
    Py_DECREF(number);
    return value;
}

/* Whether a stored word names a record: external words only (typed values are raw). */
static inline int
owns_record(const MapCore *self, uint64_t word)
{
    return self->value_codec > CODEC_FLOAT64 && (word & 0xFF) == EXTERNAL;
}

/* codec.release(word) for a word the table held, once the table no longer does. */
static int
release_word(MapCore *self, uint64_t word)
{
    PyObject *number = PyLong_FromUnsignedLongLong(word);
    if (number == NULL)
        return -1;
    PyObject *result = codec_call(self, s_release, number);
    Py_DECREF(number);
    Py_XDECREF(result);
    return result == NULL ? -1 : 0;
}

/* codec.release(made) for a word the codec made that the table did not take; the pending
 * exception stays set unless release raises one of its own. */
static void
release_unstored(MapCore *self, PyObject *made)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *result = codec_call(self, s_release, made);
    if (result != NULL) {
        Py_DECREF(result);
        PyErr_Restore(type, value, traceback);
        return;
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
}

/* The bits and width of a word the codec object made (or the map passed to _put). */
static int
word_of(MapCore *self, PyObject *word, uint64_t *bits, int *width)
{
    PyObject *w = codec_call(self, s_width_of, word);
    if (w == NULL)
        return -1;
    long width_bytes = PyLong_AsLong(w);
    Py_DECREF(w);
    if (width_bytes == -1 && PyErr_Occurred())
        return -1;
    if (width_bytes != 2 && width_bytes != 4 && width_bytes != 8) {
        PyErr_Format(PyExc_ValueError, "width_of gave %ld bytes; slots are 2, 4 or 8", width_bytes);
        return -1;
    }
    *width = (int)width_bytes;
    if (self->value_codec == CODEC_FLOAT64) {
        double v = PyFloat_AsDouble(word);
        if (v == -1.0 && PyErr_Occurred())
            return -1;
        memcpy(bits, &v, sizeof v);
        return 0;
    }
    if (self->value_codec == CODEC_INT64) {
        long long v = PyLong_AsLongLong(word);
        if (v == -1 && PyErr_Occurred())
            return -1;
        *bits = (uint64_t)v;
        return 0;
    }
    *bits = PyLong_AsUnsignedLongLong(word);
    if (*bits == (uint64_t)-1 && PyErr_Occurred())
        return -1;
    if (width_bytes < 8 && *bits >> (8 * width_bytes) != 0) {
        PyErr_Format(PyExc_ValueError, "slot word %#llx does not fit the %ld bytes width_of gave",
                     (unsigned long long)*bits, width_bytes);
        return -1;
    }
    return 0;
}

/* self._make_room(width, index_full): the map grows or reshapes the table and re-attaches it. */
static int
make_room(MapCore *self, int width, int index_full)
{
    PyObject *w = PyLong_FromLong(width);
    if (w == NULL)
        return -1;
    PyObject *result = PyObject_CallMethodObjArgs((PyObject *)self, s_make_room, w,
                                                  index_full ? Py_True : Py_False, NULL);
    Py_DECREF(w);
    Py_XDECREF(result);
    return result == NULL ? -1 : 0;
}

/* ---------------------------------------------------------------------------------------------
 * The operations
 */

enum { PUT_STORED = 0, PUT_FAILED = -1, PUT_FAILED_AFTER_STORING = -2 };

/* Store `bits` (a word of `width` bytes, or a raw typed value) under `key`, asking the map for
 * room until it fits, as the reference's _put. PUT_FAILED leaves the table as it was and the
 * word to the caller; PUT_FAILED_AFTER_STORING means the word is stored but releasing the word
 * it replaced failed. */
static int
put(MapCore *self, int64_t key, uint64_t bits, int width)
{
    for (;;) {
        if (!ATTACHED(self))
            return closed_error();
        Py_ssize_t slot, e = find(self, key, 1, &slot);
        if (e == -2)
            return PUT_FAILED;
        int index_full = 0;
        if (e >= 0) {
            if (width <= self->width) {
                if (check_writable(self) < 0)
                    return PUT_FAILED;
                uint64_t old = value_at(self, e);
                set_value_at(self, e, bits);
                if (owns_record(self, old) && release_word(self, old) < 0)
                    return PUT_FAILED_AFTER_STORING;
                return PUT_STORED;
            }
        }
        else if (width <= self->width && self->n < self->max_n && self->used < self->capacity) {
            if (check_writable(self) < 0 || check_used(self) < 0)
                return PUT_FAILED;
            Py_ssize_t end = empty_slot_from(self, slot);
            if (end >= 0) {
                append(self, slot, end, key, bits);
                return PUT_STORED;
            }
            index_full = 1;
        }
        if (make_room(self, width, index_full) < 0)
            return PUT_FAILED;
    }
}

/* self[key] = value once the key is admitted: encode (inline, or through the codec, whose
 * record is released again if the put fails), then put. */
static int
store(MapCore *self, int64_t key, PyObject *value)
{
    uint64_t bits;
    int width;
    int inline_done = encode_inline(self, value, &bits, &width);
    if (inline_done < 0)
        return -1;
    if (inline_done)
        return put(self, key, bits, width) == PUT_STORED ? 0 : -1;
    PyObject *made = codec_call(self, s_encode, value);
    if (made == NULL)
        return -1;
    int status = word_of(self, made, &bits, &width) < 0 ? PUT_FAILED : put(self, key, bits, width);
    if (status == PUT_FAILED)
        release_unstored(self, made);
    Py_DECREF(made);
    return status == PUT_STORED ? 0 : -1;
}

/* The entry of a looked-up key (>= 0), -1 for a miss, -2 with an exception set; *key and
 * *slot are set for a hit. ClosedError when detached, before or after admitting the key. */
static Py_ssize_t
lookup(MapCore *self, PyObject *obj, int64_t *key, Py_ssize_t *slot)
{
    if (!ATTACHED(self))
        return closed_error() - 1;
    int admitted = lookup_key(obj, key);
    if (admitted <= 0)
        return admitted - 1;
    if (!ATTACHED(self))
        return closed_error() - 1;
    return find(self, *key, 1, slot);
}

/* Decode entry e's value, then remove the entry and release its word (pop and popitem). The
 * decoding may run Python code: the entry is removed only if it still holds the same word. */
static PyObject *
take(MapCore *self, int64_t key, Py_ssize_t e)
{
    uint64_t word = value_at(self, e);
    PyObject *value = decode_word(self, word);
    if (value == NULL)
        return NULL;
    if (!ATTACHED(self)) {
        Py_DECREF(value);
        closed_error();
        return NULL;
    }
    Py_ssize_t slot, found = find(self, key, 1, &slot);
    if (found != e || value_at(self, e) != word) {
        if (found != -2)
            PyErr_SetString(PyExc_RuntimeError,
                            "LongHashMap changed while a value was being taken out");
        Py_DECREF(value);
        return NULL;
    }
    if (remove_at(self, slot, e) < 0 || (owns_record(self, word) && release_word(self, word) < 0)) {
        Py_DECREF(value);
        return NULL;
    }
    return value;
}

/* An entry number argument in [0, _capacity) of an attached table, or -1 with an error. */
static Py_ssize_t
entry_arg(MapCore *self, PyObject *arg)
{
    if (!ATTACHED(self))
        return closed_error();
    Py_ssize_t e = PyLong_AsSsize_t(arg);
    if (e == -1 && PyErr_Occurred())
        return -1;
    if (e < 0 || e >= self->capacity) {
        PyErr_Format(PyExc_IndexError, "entry %zd is outside the table's %zd entries", e,
                     self->capacity);
        return -1;
    }
    return e;
}

/* The (key, default) arguments of get, pop and setdefault, by position or by name. */
static int
key_and_default(const char *method, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                PyObject **obj, PyObject **default_value)
{
    PyObject *given[2] = {NULL, NULL};
    if (nargs > 2) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most 2 arguments (%zd given)", method, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        given[i] = args[i];
    Py_ssize_t n_keywords = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < n_keywords; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        int at = PyUnicode_CompareWithASCIIString(name, "key") == 0       ? 0
                 : PyUnicode_CompareWithASCIIString(name, "default") == 0 ? 1
                                                                          : -1;
        if (at < 0 || given[at] != NULL) {
            PyErr_Format(PyExc_TypeError, at < 0 ? "%s() got an unexpected keyword argument '%U'"
                                                 : "%s() got multiple values for argument '%U'",
                         method, name);
            return -1;
        }
        given[at] = args[nargs + i];
    }
    if (given[0] == NULL) {
        PyErr_Format(PyExc_TypeError, "%s() missing required argument 'key'", method);
        return -1;
    }
    *obj = given[0];
    *default_value = given[1];
    return 0;
}

/* The entry of the key argument of get, pop or setdefault, as lookup() gives it (-2 also for
 * bad arguments); *obj and *default_value (NULL when not given) are the arguments. */
static Py_ssize_t
lookup_argument(MapCore *self, const char *method, PyObject *const *args, Py_ssize_t nargs,
                PyObject *kwnames, PyObject **obj, PyObject **default_value, int64_t *key)
{
    Py_ssize_t slot;
    if (key_and_default(method, args, nargs, kwnames, obj, default_value) < 0)
        return -2;
    return lookup(self, *obj, key, &slot);
}

/* ---------------------------------------------------------------------------------------------
 * Attaching and detaching
 */

/* Release the exports of a table that is no longer the struct's (may run Python code). */
static void
release_table(Table *table)
{
    for (Py_ssize_t i = 0; i < table->n_exports; i++)
        if (table->exports[i].obj != NULL)
            PyBuffer_Release(&table->exports[i]);
    PyMem_Free(table->exports);
    PyMem_Free(table->chunks);
    Py_XDECREF(table->index_owner);
}

/* Detach: the struct forgets the table first, then its exports are released. */
static void
detach(MapCore *self)
{
    Table old = self->table;
    memset(&self->table, 0, sizeof self->table);
    release_table(&old);
}

/* A C-contiguous export of `obj` with items of `item_size` bytes: their number, or -1 with an
 * error. */
static Py_ssize_t
export_items(PyObject *obj, Py_buffer *view, Py_ssize_t item_size, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->itemsize != item_size || view->len % item_size != 0) {
        PyErr_Format(PyExc_ValueError, "the %s must have %zd-byte items, not %zd-byte ones", what,
                     item_size, view->itemsize);
        return -1;
    }
    return view->len / item_size;
}

/* The value codec that `codec` (a ValueSlots) stands for; -1 with an error. */
static int
value_codec_of(PyObject *codec, ValueCodec *value_codec)
{
    PyObject *typed = PyObject_GetAttr(codec, s_typed);
    if (typed == NULL)
        return -1;
    int is_typed = PyObject_IsTrue(typed);
    Py_DECREF(typed);
    PyObject *serializer = is_typed < 0 ? NULL : PyObject_GetAttr(codec, s_serializer);
    if (serializer == NULL)
        return -1;
    int known = 1;
    if (serializer == INT64)
        *value_codec = CODEC_INT64;
    else if (serializer == FLOAT64)
        *value_codec = CODEC_FLOAT64;
    else if (is_typed)
        known = 0;
    else if (serializer == OBJECT)
        *value_codec = CODEC_OBJECT;
    else if (serializer == STR)
        *value_codec = CODEC_STR;
    else if (serializer == BYTES)
        *value_codec = CODEC_BYTES;
    else
        *value_codec = CODEC_WORDS;
    Py_DECREF(serializer);
    if (!known)
        PyErr_SetString(PyExc_TypeError, "typed values are of the int64 or float64 serializer");
    return known ? 0 : -1;
}

/* The exports of one chunk's keys, values and live bits (exports[0..2]): its capacity, or -1
 * with an error. */
static Py_ssize_t
export_chunk(PyObject *keys, PyObject *values, PyObject *live, Py_ssize_t value_size,
             Py_buffer *exports, Chunk *chunk)
{
    Py_ssize_t capacity = export_items(keys, &exports[0], 8, "keys");
    Py_ssize_t n_values = capacity < 0 ? -1 : export_items(values, &exports[1], value_size, "values");
    Py_ssize_t n_live = n_values < 0 ? -1 : export_items(live, &exports[2], 1, "live bits");
    if (n_live < 0)
        return -1;
    if (capacity == 0 || capacity > CHUNK_ENTRIES || capacity % 8 != 0 || n_values != capacity
        || n_live != capacity / 8) {
        PyErr_Format(PyExc_ValueError,
                     "a chunk holds 8 to %zd keys (a multiple of 8), as many values and one "
                     "live bit per key, not %zd keys, %zd values and %zd bytes of live bits",
                     CHUNK_ENTRIES, capacity, n_values, n_live);
        return -1;
    }
    chunk->keys = exports[0].buf;
    chunk->values = exports[1].buf;
    chunk->live = exports[2].buf;
    return capacity;
}

/* The exports of the index and the chunks, into `table` (released by the caller on error). */
static int
export_table(PyObject *index, PyObject *key_chunks, PyObject *value_chunks,
             PyObject *live_chunks, Py_ssize_t value_size, Table *table, Py_ssize_t *n_slots,
             Py_ssize_t *capacity)
{
    Py_ssize_t n_chunks = PyTuple_GET_SIZE(key_chunks);
    if (PyTuple_GET_SIZE(value_chunks) != n_chunks || PyTuple_GET_SIZE(live_chunks) != n_chunks) {
        PyErr_Format(PyExc_ValueError, "%zd key chunks, %zd value chunks and %zd live chunks",
                     n_chunks, PyTuple_GET_SIZE(value_chunks), PyTuple_GET_SIZE(live_chunks));
        return -1;
    }
    table->exports = PyMem_Calloc((size_t)(1 + 3 * n_chunks), sizeof(Py_buffer));
    table->chunks = PyMem_Calloc((size_t)(n_chunks ? n_chunks : 1), sizeof(Chunk));
    if (table->exports == NULL || table->chunks == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    table->n_exports = 1 + 3 * n_chunks;
    if ((*n_slots = export_items(index, &table->exports[0], 4, "index")) < 0)
        return -1;
    *capacity = 0;
    for (Py_ssize_t i = 0; i < n_chunks; i++) {
        Py_ssize_t chunk_capacity = export_chunk(
            PyTuple_GET_ITEM(key_chunks, i), PyTuple_GET_ITEM(value_chunks, i),
            PyTuple_GET_ITEM(live_chunks, i), value_size, &table->exports[1 + 3 * i],
            &table->chunks[i]);
        if (chunk_capacity < 0)
            return -1;
        if (i < n_chunks - 1 && chunk_capacity != CHUNK_ENTRIES) {
            PyErr_Format(PyExc_ValueError, "chunk %zd of %zd holds %zd entries: every chunk "
                         "but the last holds %zd", i, n_chunks, chunk_capacity, CHUNK_ENTRIES);
            return -1;
        }
        *capacity += chunk_capacity;
    }
    if ((size_t)*capacity > MAX_CAPACITY) {
        PyErr_Format(PyExc_ValueError, "%zd entries do not fit the index's entry numbers",
                     *capacity);
        return -1;
    }
    for (Py_ssize_t i = 0; i < table->n_exports; i++)
        table->readonly |= table->exports[i].readonly;
    table->index = table->exports[0].buf;
    table->index_owner = Py_NewRef(index);
    return 0;
}

static PyObject *
MapCore_attach(MapCore *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"codec", "index", "key_chunks", "value_chunks", "live_chunks",
                            "homes", "width", NULL};
    PyObject *codec, *index, *chunk_lists[3], *chunks[3] = {NULL, NULL, NULL};
    Py_ssize_t homes, width, n_slots, capacity;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOnn:_attach", names, &codec, &index,
                                     &chunk_lists[0], &chunk_lists[1], &chunk_lists[2], &homes,
                                     &width))
        return NULL;
    /* First everything that may run Python code, into locals. */
    ValueCodec value_codec;
    if (value_codec_of(codec, &value_codec) < 0)
        return NULL;
    int typed = value_codec <= CODEC_FLOAT64;
    if (!typed && width != 2 && width != 4 && width != 8)
        return PyErr_Format(PyExc_ValueError, "slot words are 2, 4 or 8 bytes wide, not %zd",
                            width);
    if (homes < 1 || homes > MAX_HOMES)
        return PyErr_Format(PyExc_ValueError, "homes must be in [1, 2**32], not %zd", homes);
    Table table;
    memset(&table, 0, sizeof table);
    for (int i = 0; i < 3; i++)
        if ((chunks[i] = PySequence_Tuple(chunk_lists[i])) == NULL)
            goto fail;
    if (export_table(index, chunks[0], chunks[1], chunks[2], typed ? 8 : width, &table,
                     &n_slots, &capacity) < 0)
        goto fail;
    if (n_slots < homes) {
        PyErr_Format(PyExc_ValueError, "an index of %zd slots is shorter than its %zd homes",
                     n_slots, homes);
        goto fail;
    }
    /* Then the switch, which runs no Python code; the old exports and codec go afterwards. */
    Table old = self->table;
    PyObject *old_codec = self->codec;
    self->table = table;
    self->codec = Py_NewRef(codec);
    self->value_codec = value_codec;
    self->item_size = typed ? 8 : (int)width;
    self->homes = homes;
    self->n_slots = n_slots;
    self->width = width;
    self->capacity = capacity;
    self->max_n = (Py_ssize_t)(max_load * (double)homes);
    for (int i = 0; i < 3; i++)
        Py_DECREF(chunks[i]);
    release_table(&old);
    Py_XDECREF(old_codec);
    Py_RETURN_NONE;
fail:
    for (int i = 0; i < 3; i++)
        Py_XDECREF(chunks[i]);
    release_table(&table);
    return NULL;
}

static PyObject *
MapCore_detach(MapCore *self, PyObject *Py_UNUSED(ignored))
{
    detach(self);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------------
 * The type's slots
 */

static Py_ssize_t
MapCore_length(MapCore *self)
{
    return self->n;
}

static PyObject *
MapCore_subscript(MapCore *self, PyObject *obj)
{
    int64_t key;
    Py_ssize_t slot, e = lookup(self, obj, &key, &slot);
    if (e < 0) {
        if (e == -1)
            set_key_error(obj);
        return NULL;
    }
    return decode_word(self, value_at(self, e));
}

static int
MapCore_contains(MapCore *self, PyObject *obj)
{
    int64_t key;
    Py_ssize_t slot, e = lookup(self, obj, &key, &slot);
    return e == -2 ? -1 : e >= 0;
}

static int
delete_item(MapCore *self, PyObject *obj)
{
    int64_t key;
    Py_ssize_t slot, e = lookup(self, obj, &key, &slot);
    if (e < 0) {
        if (e == -1)
            set_key_error(obj);
        return -1;
    }
    uint64_t word = value_at(self, e);
    if (remove_at(self, slot, e) < 0)
        return -1;
    return owns_record(self, word) ? release_word(self, word) : 0;
}

static int
MapCore_ass_subscript(MapCore *self, PyObject *obj, PyObject *value)
{
    if (value == NULL)
        return delete_item(self, obj);
    if (!ATTACHED(self))
        return closed_error();
    int64_t key;
    if (store_key(obj, &key) < 0)
        return -1;
    return store(self, key, value);
}

static PyObject *
iterate(MapCore *self, int what)
{
    EntryIter *it = PyObject_GC_New(EntryIter, &EntryIterType);
    if (it == NULL)
        return NULL;
    it->core = (MapCore *)Py_NewRef(self);
    it->mods = 0;
    it->next = 0;
    it->what = what;
    it->started = 0;
    PyObject_GC_Track(it);
    return (PyObject *)it;
}

static PyObject *
MapCore_iter(MapCore *self)
{
    return iterate(self, ITER_KEYS);
}

static int
MapCore_traverse(MapCore *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->codec);
    Py_VISIT(self->table.index_owner);
    for (Py_ssize_t i = 0; i < self->table.n_exports; i++)
        Py_VISIT(self->table.exports[i].obj);
    return 0;
}

static int
MapCore_clear(MapCore *self)
{
    detach(self);
    Py_CLEAR(self->codec);
    return 0;
}

static void
MapCore_dealloc(MapCore *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    MapCore_clear(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type); /* instances of a heap type own a reference to it */
}

/* ---------------------------------------------------------------------------------------------
 * The methods
 */

static PyObject *
MapCore_get(MapCore *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *obj, *default_value;
    int64_t key;
    Py_ssize_t e = lookup_argument(self, "get", args, nargs, kwnames, &obj, &default_value, &key);
    if (e == -2)
        return NULL;
    if (e == -1)
        return Py_NewRef(default_value != NULL ? default_value : Py_None);
    return decode_word(self, value_at(self, e));
}

static PyObject *
MapCore_pop(MapCore *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *obj, *default_value;
    int64_t key;
    Py_ssize_t e = lookup_argument(self, "pop", args, nargs, kwnames, &obj, &default_value, &key);
    if (e == -2)
        return NULL;
    if (e == -1) {
        if (default_value == NULL)
            set_key_error(obj);
        return Py_XNewRef(default_value);
    }
    return take(self, key, e);
}

static PyObject *
MapCore_popitem(MapCore *self, PyObject *Py_UNUSED(ignored))
{
    if (!ATTACHED(self)) {
        closed_error();
        return NULL;
    }
    if (self->n == 0) {
        PyErr_SetString(PyExc_KeyError, "popitem(): LongHashMap is empty");
        return NULL;
    }
    if (check_used(self) < 0)
        return NULL;
    Py_ssize_t slot, e = self->used - 1;
    int64_t key = e >= 0 ? key_at(self, e) : 0;
    if (e < 0 || !is_live_at(self, e) || find(self, key, 1, &slot) != e) {
        if (!PyErr_Occurred())
            PyErr_Format(CorruptionError,
                         "LongHashMap entry %zd, the last in use, is not a live entry of the "
                         "index: the table is damaged", e);
        return NULL;
    }
    PyObject *key_object = PyLong_FromLongLong(key);
    if (key_object == NULL)
        return NULL;
    PyObject *value = take(self, key, e);
    if (value == NULL) {
        Py_DECREF(key_object);
        return NULL;
    }
    PyObject *item = PyTuple_Pack(2, key_object, value);
    Py_DECREF(key_object);
    Py_DECREF(value);
    return item;
}

static PyObject *
MapCore_setdefault(MapCore *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *obj, *default_value;
    int64_t key;
    Py_ssize_t e = lookup_argument(self, "setdefault", args, nargs, kwnames, &obj,
                                   &default_value, &key);
    if (e == -2)
        return NULL;
    if (e >= 0)
        return decode_word(self, value_at(self, e));
    if (default_value == NULL)
        default_value = Py_None;
    if (PyObject_SetItem((PyObject *)self, obj, default_value) < 0)
        return NULL;
    return Py_NewRef(default_value);
}

static PyObject *
MapCore_iter_values(MapCore *self, PyObject *Py_UNUSED(ignored))
{
    return iterate(self, ITER_VALUES);
}

static PyObject *
MapCore_iter_items(MapCore *self, PyObject *Py_UNUSED(ignored))
{
    return iterate(self, ITER_ITEMS);
}

static PyObject *
MapCore_lookup(MapCore *self, PyObject *obj)
{
    int64_t key;
    Py_ssize_t slot, e = lookup(self, obj, &key, &slot);
    return e == -2 ? NULL : PyLong_FromSsize_t(e);
}

static PyObject *
MapCore_find(MapCore *self, PyObject *obj)
{
    if (!ATTACHED(self)) {
        closed_error();
        return NULL;
    }
    if (!PyLong_Check(obj))
        return PyErr_Format(PyExc_TypeError, "_find() takes an int, not %.100s",
                            Py_TYPE(obj)->tp_name);
    int64_t key;
    int can_match = int_key(obj, &key);
    if (can_match < 0)
        return NULL;
    if (!can_match) /* beyond int64: probe for its low 64 bits, which equal no stored key */
        key = (int64_t)PyLong_AsUnsignedLongLongMask(obj);
    Py_ssize_t slot, e = find(self, key, can_match, &slot);
    return e == -2 ? NULL : Py_BuildValue("(nn)", slot, e);
}

static PyObject *
MapCore_put(MapCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "_put() takes a key and a word (%zd given)", nargs);
    if (!ATTACHED(self)) {
        closed_error();
        return NULL;
    }
    long long key = PyLong_AsLongLong(args[0]);
    if (key == -1 && PyErr_Occurred())
        return NULL;
    uint64_t bits;
    int width;
    if (word_of(self, args[1], &bits, &width) < 0 || put(self, key, bits, width) != PUT_STORED)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
MapCore_remove(MapCore *self, PyObject *obj)
{
    if (!ATTACHED(self)) {
        closed_error();
        return NULL;
    }
    long long key = PyLong_AsLongLong(obj);
    if (key == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t slot, e = find(self, key, 1, &slot);
    if (e < 0) {
        if (e == -1)
            set_key_error(obj);
        return NULL;
    }
    if (remove_at(self, slot, e) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
MapCore_key_of(MapCore *self, PyObject *arg)
{
    Py_ssize_t e = entry_arg(self, arg);
    return e < 0 ? NULL : PyLong_FromLongLong(key_at(self, e));
}

static PyObject *
MapCore_value_of(MapCore *self, PyObject *arg)
{
    Py_ssize_t e = entry_arg(self, arg);
    return e < 0 ? NULL : decode_word(self, value_at(self, e));
}

static PyObject *
MapCore_is_live(MapCore *self, PyObject *arg)
{
    Py_ssize_t e = entry_arg(self, arg);
    return e < 0 ? NULL : PyBool_FromLong(is_live_at(self, e));
}

static PyObject *
MapCore_get_index(MapCore *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(ATTACHED(self) ? self->table.index_owner : Py_None);
}

static PyMethodDef MapCore_methods[] = {
    {"_attach", (PyCFunction)(void (*)(void))MapCore_attach, METH_VARARGS | METH_KEYWORDS,
     "_attach(codec, index, key_chunks, value_chunks, live_chunks, homes, width)\n--\n\n"
     "Take the table: the value codec and C-contiguous buffers of the layout's item "
     "sizes (the uint32 index; per chunk int64 keys, values of width bytes or 8 for typed "
     "values, one live bit per key; every chunk but the last CHUNK_ENTRIES long). Holds their "
     "exports until _detach; releases the previous table's once the new one is taken."},
    {"_detach", (PyCFunction)MapCore_detach, METH_NOARGS,
     "Release the table's buffers (idempotent); operations raise ClosedError until the next "
     "attach."},
    {"get", (PyCFunction)(void (*)(void))MapCore_get, METH_FASTCALL | METH_KEYWORDS,
     "get(key, default=None)\n--\n\nThe value of key, or default."},
    {"pop", (PyCFunction)(void (*)(void))MapCore_pop, METH_FASTCALL | METH_KEYWORDS,
     "pop(key[, default])\n--\n\nRemove key and return its value; default, or KeyError, when "
     "absent."},
    {"popitem", (PyCFunction)MapCore_popitem, METH_NOARGS,
     "Remove and return the last inserted (key, value) pair; KeyError when empty."},
    {"setdefault", (PyCFunction)(void (*)(void))MapCore_setdefault, METH_FASTCALL | METH_KEYWORDS,
     "setdefault(key, default=None)\n--\n\nThe value of key; stores default first when absent."},
    {"_iter_values", (PyCFunction)MapCore_iter_values, METH_NOARGS, "Values in entry order."},
    {"_iter_items", (PyCFunction)MapCore_iter_items, METH_NOARGS,
     "(key, value) pairs in entry order."},
    {"_lookup", (PyCFunction)MapCore_lookup, METH_O,
     "The entry holding key, or -1 (also for keys the map cannot hold)."},
    {"_find", (PyCFunction)MapCore_find, METH_O,
     "(slot, entry) of an int key, or (slot where it would go, -1)."},
    {"_put", (PyCFunction)(void (*)(void))MapCore_put, METH_FASTCALL,
     "_put(key, word)\n--\n\nStore a codec word under an int64 key, calling _make_room until "
     "it fits; the caller owns the word until this returns."},
    {"_remove", (PyCFunction)MapCore_remove, METH_O,
     "Remove a present int64 key without releasing its word."},
    {"_key_of", (PyCFunction)MapCore_key_of, METH_O, "The key of entry e."},
    {"_value_of", (PyCFunction)MapCore_value_of, METH_O, "The value of entry e."},
    {"_is_live", (PyCFunction)MapCore_is_live, METH_O, "Whether entry e is live (not a hole)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef MapCore_members[] = {
    {"_n", T_PYSSIZET, offsetof(MapCore, n), 0, "Live entries."},
    {"_used", T_PYSSIZET, offsetof(MapCore, used), 0, "Entries including holes."},
    {"_mods", T_PYSSIZET, offsetof(MapCore, mods), 0,
     "Changed whenever the entries or their order change; iterators compare it."},
    {"_homes", T_PYSSIZET, offsetof(MapCore, homes), READONLY, "Home slots of the index."},
    {"_n_slots", T_PYSSIZET, offsetof(MapCore, n_slots), READONLY, "Index slots (homes + slack)."},
    {"_width", T_PYSSIZET, offsetof(MapCore, width), READONLY, "Bytes per value."},
    {"_capacity", T_PYSSIZET, offsetof(MapCore, capacity), READONLY, "Entries the regions hold."},
    {"_max_n", T_PYSSIZET, offsetof(MapCore, max_n), READONLY,
     "Live entries the index takes before it must grow."},
    {"_codec", T_OBJECT, offsetof(MapCore, codec), READONLY, "The value codec (ValueSlots)."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef MapCore_getset[] = {
    {"_index", (getter)MapCore_get_index, NULL,
     "The index buffer's owner while attached, None while detached.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* A heap type without Py_tp_new: it inherits object's tp_new and, like the reference class, has
 * no __new__ of its own to shadow one of a class after it in a subclass's MRO (a file map's,
 * which opens a reader for readonly=True). */
static PyType_Slot MapCore_slots[] = {
    {Py_tp_doc, "Probe, insert, delete and iterate one table (compiled; the reference is "
                "offheap.hashmap.core.MapCore)."},
    {Py_tp_dealloc, MapCore_dealloc},
    {Py_tp_traverse, MapCore_traverse},
    {Py_tp_clear, MapCore_clear},
    {Py_tp_iter, MapCore_iter},
    {Py_tp_methods, MapCore_methods},
    {Py_tp_members, MapCore_members},
    {Py_tp_getset, MapCore_getset},
    {Py_mp_length, MapCore_length},
    {Py_mp_subscript, MapCore_subscript},
    {Py_mp_ass_subscript, MapCore_ass_subscript},
    {Py_sq_contains, MapCore_contains},
    {0, NULL},
};

static PyType_Spec MapCore_spec = {
    .name = "offheap.hashmap._core.MapCore",
    .basicsize = sizeof(MapCore),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = MapCore_slots,
};

/* ---------------------------------------------------------------------------------------------
 * The iterator: the reference's generator step by step. It looks at the core at its first step
 * (ClosedError, the _mods snapshot), then at every step checks _mods (RuntimeError) and the
 * attachment (ClosedError) before the next live entry; once it has ended or raised, it stays
 * exhausted.
 */

static PyObject *
EntryIter_next(EntryIter *it)
{
    MapCore *core = it->core;
    if (core == NULL)
        return NULL;
    PyObject *result = NULL;
    if (!it->started) {
        if (!ATTACHED(core)) {
            closed_error();
            goto end;
        }
        it->mods = core->mods;
        it->started = 1;
    }
    if (core->mods != it->mods) {
        PyErr_SetString(PyExc_RuntimeError, "LongHashMap changed size during iteration");
        goto end;
    }
    if (!ATTACHED(core)) {
        closed_error();
        goto end;
    }
    const size_t limit = entry_limit(core);
    Py_ssize_t e = it->next;
    while ((size_t)e < limit && !is_live_at(core, e))
        e++;
    if ((size_t)e >= limit)
        goto end;
    it->next = e + 1;
    int64_t key = key_at(core, e);
    uint64_t word = value_at(core, e); /* copied out: decoding may run Python code */
    if (it->what == ITER_KEYS)
        return PyLong_FromLongLong(key);
    PyObject *value = decode_word(core, word);
    if (value == NULL || it->what == ITER_VALUES)
        result = value;
    else {
        PyObject *key_object = PyLong_FromLongLong(key);
        result = key_object == NULL ? NULL : PyTuple_Pack(2, key_object, value);
        Py_XDECREF(key_object);
        Py_DECREF(value);
    }
    if (result != NULL)
        return result;
end:
    Py_CLEAR(it->core);
    return result;
}

static int
EntryIter_traverse(EntryIter *it, visitproc visit, void *arg)
{
    Py_VISIT(it->core);
    return 0;
}

static int
EntryIter_clear(EntryIter *it)
{
    Py_CLEAR(it->core);
    return 0;
}

static void
EntryIter_dealloc(EntryIter *it)
{
    PyObject_GC_UnTrack(it);
    EntryIter_clear(it);
    PyObject_GC_Del(it);
}

static PyTypeObject EntryIterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "offheap.hashmap._core.EntryIterator",
    .tp_basicsize = sizeof(EntryIter),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Keys, values or items of a MapCore in entry order.",
    .tp_dealloc = (destructor)EntryIter_dealloc,
    .tp_traverse = (traverseproc)EntryIter_traverse,
    .tp_clear = (inquiry)EntryIter_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)EntryIter_next,
};

/* ---------------------------------------------------------------------------------------------
 * The module
 */

static PyObject *
import_attribute(const char *module_name, const char *name)
{
    PyObject *module = PyImport_ImportModule(module_name);
    if (module == NULL)
        return NULL;
    PyObject *attribute = PyObject_GetAttrString(module, name);
    Py_DECREF(module);
    return attribute;
}

/* The names the core uses from the layers below and from layout.py; ImportError when the
 * layout's chunk size is not the one compiled in. */
static int
import_names(void)
{
    static const struct { const char *module, *name; PyObject **target; } imports[] = {
        {"offheap.errors", "ClosedError", &ClosedError},
        {"offheap.errors", "CorruptionError", &CorruptionError},
        {"offheap.hashmap.layout", "as_key", &as_key_function},
        {"offheap.hashmap.layout", "lookup_key", &lookup_key_function},
        {"offheap.store.serializers", "INT64", &INT64},
        {"offheap.store.serializers", "FLOAT64", &FLOAT64},
        {"offheap.store.serializers", "OBJECT", &OBJECT},
        {"offheap.store.serializers", "STR", &STR},
        {"offheap.store.serializers", "BYTES", &BYTES},
    };
    for (size_t i = 0; i < sizeof imports / sizeof imports[0]; i++)
        if ((*imports[i].target = import_attribute(imports[i].module, imports[i].name)) == NULL)
            return -1;
    PyObject *load = import_attribute("offheap.hashmap.layout", "MAX_LOAD");
    PyObject *chunk_bits = load == NULL ? NULL : import_attribute("offheap.hashmap.layout",
                                                                  "CHUNK_BITS");
    max_load = load == NULL ? -1.0 : PyFloat_AsDouble(load);
    long layout_chunk_bits = chunk_bits == NULL ? -1 : PyLong_AsLong(chunk_bits);
    Py_XDECREF(load);
    Py_XDECREF(chunk_bits);
    if (PyErr_Occurred())
        return -1;
    if (layout_chunk_bits != CHUNK_BITS) {
        PyErr_Format(PyExc_ImportError, "offheap.hashmap._core was built for chunks of 2**%d "
                     "entries, layout.py has 2**%ld: rebuild it", CHUNK_BITS, layout_chunk_bits);
        return -1;
    }
    static const struct { const char *text; PyObject **target; } strings[] = {
        {"encode", &s_encode}, {"decode", &s_decode}, {"release", &s_release},
        {"width_of", &s_width_of}, {"_make_room", &s_make_room}, {"typed", &s_typed},
        {"serializer", &s_serializer},
    };
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
        if ((*strings[i].target = PyUnicode_InternFromString(strings[i].text)) == NULL)
            return -1;
    return 0;
}

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "offheap.hashmap._core",
    .m_doc = "The compiled scalar operations of a LongHashMap (layer 6): MapCore, the twin of "
             "offheap.hashmap.core.MapCore.",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__core(void)
{
    if (PyType_Ready(&EntryIterType) < 0 || import_names() < 0)
        return NULL;
    PyObject *module = PyModule_Create(&core_module);
    if (module == NULL)
        return NULL;
    PyObject *map_core = PyType_FromSpec(&MapCore_spec);
    if (map_core == NULL || PyModule_AddObject(module, "MapCore", map_core) < 0) {
        Py_XDECREF(map_core);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
