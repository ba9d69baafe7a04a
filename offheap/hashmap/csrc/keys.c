/* The compiled core's keys: an int64 table's int64 keys and a keyed table's key slots.
 *
 * A keyed table (HashMap, HashSet: offheap.hashmap.keyedlayout) stores a 16-byte key slot per
 * entry (offheap.hashmap.keyslots states the key bytes of each key type, the seeded hash and the
 * slot). This file turns a key object into a Key (its key bytes, hash and slot), probes for it,
 * and turns a stored slot back into the key, as offheap.hashmap.keycodec.KeyCodec does, byte for
 * byte. The common keys are handled here: exact str ("str", and "object" up to 14 UTF-8 bytes),
 * exact bytes, exact ints of int64 ("int64", "object") and None ("object"); every other key goes
 * through the map's KeyCodec (admit, lookup, key_of_slot), so the admission rules and their
 * errors have one implementation. A long key (more than 15 key bytes) lives in a record of the
 * store: the KeyCodec makes it (long_slot_of) and frees it (release_slot), under the map's lock;
 * probes compare it, and a str or bytes key is handed out, straight from the store's memory
 * (offheap/store/csrc/records.h), which calls no Python code.
 *
 * A long key's slot keeps the top 56 bits of its hash, so a probe compares those first and reads
 * the record only for an equal tag (a different key with an equal tag: about one in 2**56). */

#include "core.h"
#include "records.h"

/* The "object" key type's tags (offheap.hashmap.keyslots) that are encoded and decoded here. */
enum { KEY_TAG_NONE = 0, KEY_TAG_INT = 1, KEY_TAG_STR = 3, KEY_TAG_BYTES = 4 };

static PyObject *s_admit, *s_lookup, *s_key_of_slot, *s_long_slot_of, *s_release_slot, *s_data,
    *s_key_type, *s_seed, *s_store;

/* The interned method and attribute names used here (module init). */
int
import_key_names(void)
{
    static const struct { const char *text; PyObject **target; } strings[] = {
        {"admit", &s_admit}, {"lookup", &s_lookup}, {"key_of_slot", &s_key_of_slot},
        {"long_slot_of", &s_long_slot_of}, {"release_slot", &s_release_slot}, {"data", &s_data},
        {"key_type", &s_key_type}, {"seed", &s_seed}, {"store", &s_store},
    };
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
        if ((*strings[i].target = PyUnicode_InternFromString(strings[i].text)) == NULL)
            return -1;
    return 0;
}

void
key_clear(Key *key)
{
    Py_CLEAR(key->owner);
}

/* ---------------------------------------------------------------------------------------------
 * Key bytes, hash and slot
 */

/* Set the hash and the slot of a keyed key whose data and len are set. */
static void
finish_key(const MapCore *self, Key *key)
{
    key->hash = siphash(self->seed, (const unsigned char *)key->data, (size_t)key->len, 1, 3);
    key->is_long = key->len > SLOT_INLINE_MAX;
    key->made = 0;
    memset(key->slot, 0, SLOT_BYTES);
    if (!key->is_long) {
        memcpy(key->slot, key->data, (size_t)key->len);
        key->slot[SLOT_INLINE_MAX] = (uint8_t)key->len;
        return;
    }
    uint64_t tag = key->hash >> 8;
    for (int i = 8; i < SLOT_INLINE_MAX; i++, tag >>= 8)
        key->slot[i] = (uint8_t)tag;
    key->slot[SLOT_INLINE_MAX] = SLOT_LONG;
}

/* An exact int of int64 as "object" key bytes (tag 1, then (bit_length + 8) // 8 bytes of
 * two's complement, none for 0) into key->buffer. */
static void
object_int_bytes(int64_t v, Key *key)
{
    uint64_t magnitude = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    int bits = 0;
    while (bits < 64 && magnitude >> bits)
        bits++;
    int n = (bits + 8) / 8;
    key->buffer[0] = KEY_TAG_INT;
    for (int i = 0; i < n; i++)
        key->buffer[1 + i] = (char)(i < 8 ? (uint64_t)v >> (8 * i) : (v < 0 ? 0xFF : 0));
    key->data = key->buffer;
    key->len = 1 + (v == 0 ? 0 : n);
}

/* The key bytes of an exact str, borrowed from its UTF-8 cache: 1, or 0 when it has none (a
 * lone surrogate: the KeyCodec encodes it with surrogatepass), -1 on error. */
static int
utf8_of(PyObject *text, const char **data, Py_ssize_t *len)
{
    *data = PyUnicode_AsUTF8AndSize(text, len);
    if (*data != NULL)
        return 1;
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
        return -1;
    PyErr_Clear();
    return 0;
}

/* The key bytes of the common keys, borrowed or in key->buffer: 1, or 0 for a key the KeyCodec
 * must admit, -1 on error. Runs no Python code. */
static int
common_key_bytes(const MapCore *self, PyObject *obj, Key *key)
{
    switch (self->key_kind) {
    case KEYED_STR:
        return PyUnicode_CheckExact(obj) ? utf8_of(obj, &key->data, &key->len) : 0;
    case KEYED_BYTES:
        if (!PyBytes_CheckExact(obj))
            return 0;
        key->data = PyBytes_AS_STRING(obj);
        key->len = PyBytes_GET_SIZE(obj);
        return 1;
    case KEYED_INT64: {
        int64_t v;
        if (!PyLong_CheckExact(obj) || exact_int_key(obj, &v) != 1)
            return PyErr_Occurred() ? -1 : 0;
        for (int i = 0; i < 8; i++)
            key->buffer[i] = (char)((uint64_t)v >> (8 * i));
        key->data = key->buffer;
        key->len = 8;
        return 1;
    }
    case KEYED_OBJECT: {
        int64_t v;
        const char *text;
        Py_ssize_t len;
        if (obj == Py_None) {
            key->buffer[0] = KEY_TAG_NONE;
            key->data = key->buffer;
            key->len = 1;
            return 1;
        }
        if (PyLong_CheckExact(obj)) {
            int in_range = exact_int_key(obj, &v);
            if (in_range == 1)
                object_int_bytes(v, key);
            return in_range;
        }
        int tagged = PyUnicode_CheckExact(obj) ? utf8_of(obj, &text, &len) : 0;
        if (tagged < 0)
            return -1;
        if (!tagged && PyBytes_CheckExact(obj)) {
            text = PyBytes_AS_STRING(obj);
            len = PyBytes_GET_SIZE(obj);
            tagged = 2;
        }
        if (!tagged || len >= SLOT_INLINE_MAX) /* a long tagged key: through the KeyCodec */
            return 0;
        key->buffer[0] = (char)(tagged == 1 ? KEY_TAG_STR : KEY_TAG_BYTES);
        memcpy(key->buffer + 1, text, (size_t)len);
        key->data = key->buffer;
        key->len = len + 1;
        return 1;
    }
    default:
        return 0;
    }
}

/* A keyed key of `obj`: 1 with *key set, 0 when no key of the table can equal it (a lookup's
 * miss), -1 on error (a store's refusal: the KeyCodec's TypeError, ValueError or
 * OverflowError). May run Python code (the KeyCodec). */
static int
keyed_key(MapCore *self, PyObject *obj, Key *key, int for_store)
{
    key->owner = NULL;
    int common = common_key_bytes(self, obj, key);
    if (common < 0)
        return -1;
    if (!common) {
        PyObject *probe = PyObject_CallMethodOneArg(self->keycodec,
                                                    for_store ? s_admit : s_lookup, obj);
        if (probe == NULL)
            return -1;
        if (probe == Py_None) {
            Py_DECREF(probe);
            return 0;
        }
        key->owner = PyObject_GetAttr(probe, s_data);
        Py_DECREF(probe);
        if (key->owner == NULL)
            return -1;
        if (!PyBytes_Check(key->owner)) {
            PyErr_SetString(PyExc_TypeError, "a KeyProbe's data is bytes");
            key_clear(key);
            return -1;
        }
        key->data = PyBytes_AS_STRING(key->owner);
        key->len = PyBytes_GET_SIZE(key->owner);
    }
    finish_key(self, key);
    return 1;
}

/* The key a lookup of `obj` probes for: 1, 0 when no key of the table can equal it (a miss),
 * -1 on error. May run Python code. */
int
key_for_lookup(MapCore *self, PyObject *obj, Key *key)
{
    key->owner = NULL;
    if (KEYED(self))
        return keyed_key(self, obj, key, 0);
    return lookup_key(obj, &key->int_key);
}

/* The key a store of `obj` puts: 0, or -1 with the error a store of it raises. May run Python
 * code. */
int
key_for_store(MapCore *self, PyObject *obj, Key *key)
{
    key->owner = NULL;
    if (!KEYED(self))
        return store_key(obj, &key->int_key);
    return keyed_key(self, obj, key, 1) == 1 ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------------
 * Probing, and the records of long keys
 */

/* A new bytes object of a stored slot (copied out of the table before a call into Python). */
static PyObject *
slot_bytes(const uint8_t *slot)
{
    return PyBytes_FromStringAndSize((const char *)slot, SLOT_BYTES);
}

/* Open the record of a long key's slot in place (records.h): 0, or -1 with an error. No Python
 * code may run until record_close(). */
static int
open_long_key(MapCore *self, const uint8_t *stored, RecordRead *read)
{
    uint64_t recid = 0;
    for (int i = 7; i >= 0; i--) /* little-endian, as keyslots' _LONG_SLOT */
        recid = recid << 8 | stored[i];
    PyObject *store = PyObject_GetAttr(self->keycodec, s_store);
    if (store == NULL)
        return -1;
    int status = record_open(store, &self->key_records, (int64_t)recid, CorruptionError, read);
    Py_DECREF(store);
    return status;
}

/* Whether a long key candidate's record holds the key's bytes: 1, 0, -1 on error. Reads the
 * store in place and calls no Python code, so it needs no lock beyond the operation's turn. */
static int
long_key_equal(MapCore *self, const uint8_t *stored, const Key *key)
{
    RecordRead read;
    if (open_long_key(self, stored, &read) < 0)
        return -1;
    int equal = read.size == key->len && memcmp(read.data, key->data, (size_t)key->len) == 0;
    record_close(&read);
    return equal;
}

/* key_find() in a keyed table: a long key's candidate is confirmed against its record. */
Py_ssize_t
keyed_find(MapCore *self, Key *key, Py_ssize_t *slot)
{
    Py_ssize_t from = home_of_hash(key->hash & ~(uint64_t)0xFF, self->homes);
    for (;;) {
        Py_ssize_t e = find_slot(self, key, from, slot);
        if (e < 0 || !key->is_long)
            return e;
        int equal = long_key_equal(self, slot_at(self, e), key);
        if (equal < 0)
            return -2;
        if (equal)
            return e;
        from = *slot + 1; /* an equal tag of another key: probe on */
    }
}

/* Make the record of a new long key (the KeyCodec's long_slot_of) and take its slot: 0, or -1
 * with an error (CapacityError: nothing made). Calls into Python: the caller holds the lock. */
int
make_key_slot(MapCore *self, Key *key)
{
    PyObject *data = PyBytes_FromStringAndSize(key->data, key->len);
    PyObject *hash = data == NULL ? NULL : PyLong_FromUnsignedLongLong(key->hash);
    PyObject *slot = hash == NULL ? NULL
                                  : PyObject_CallMethodObjArgs(self->keycodec, s_long_slot_of,
                                                               data, hash, NULL);
    Py_XDECREF(data);
    Py_XDECREF(hash);
    if (slot == NULL)
        return -1;
    int ok = PyBytes_Check(slot) && PyBytes_GET_SIZE(slot) == SLOT_BYTES;
    if (ok) {
        memcpy(key->slot, PyBytes_AS_STRING(slot), SLOT_BYTES);
        key->made = 1;
    }
    else
        PyErr_SetString(PyExc_TypeError, "KeyCodec.long_slot_of returns a 16-byte slot");
    Py_DECREF(slot);
    return ok ? 0 : -1;
}

/* drop_key_slot() of a slot made here (key->made == 1). */
void
drop_made_slot(MapCore *self, Key *key)
{
    key->made = 0;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (release_key_of(self, key->slot) < 0)
        PyErr_WriteUnraisable(self->keycodec);
    PyErr_Restore(type, value, traceback);
}

/* Free what a removed entry's slot owned (a long key's record): 0, or -1 with an error. Calls
 * into Python for a long key: the caller holds the lock. */
int
release_key_of(MapCore *self, const uint8_t stored[SLOT_BYTES])
{
    if (stored[SLOT_INLINE_MAX] != SLOT_LONG)
        return 0;
    PyObject *slot = slot_bytes(stored);
    PyObject *done = slot == NULL ? NULL
                                  : PyObject_CallMethodOneArg(self->keycodec, s_release_slot, slot);
    Py_XDECREF(slot);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

/* Whether handing out entry e's key decodes it here (1) or through the KeyCodec (0). */
static int
key_decodes_here(const MapCore *self, const uint8_t *slot)
{
    uint8_t n = slot[SLOT_INLINE_MAX];
    switch (self->key_kind) {
    case KEYED_STR:
    case KEYED_BYTES:
        return n <= SLOT_INLINE_MAX;
    case KEYED_INT64:
        return n == 8;
    case KEYED_OBJECT: /* None, ints of up to 8 body bytes, str, bytes */
        return (n == 1 && slot[0] == KEY_TAG_NONE) || (n >= 1 && n <= 9 && slot[0] == KEY_TAG_INT)
               || (n >= 1 && n <= SLOT_INLINE_MAX
                   && (slot[0] == KEY_TAG_STR || slot[0] == KEY_TAG_BYTES));
    default:
        return 1;
    }
}

/* Whether a key of this slot is a long str or bytes key, which key_object() reads from its
 * record in place (the "object" type's long keys are decoded by the KeyCodec). */
static int
long_key_read_here(const MapCore *self, const uint8_t *slot)
{
    return slot[SLOT_INLINE_MAX] == SLOT_LONG
           && (self->key_kind == KEYED_STR || self->key_kind == KEYED_BYTES);
}

/* Whether handing out or dropping entry e's key of a keyed table calls into Python (the
 * KeyCodec; dropping a long key frees its record), and so needs the lock. */
int
key_needs_lock(const MapCore *self, Py_ssize_t e)
{
    return !key_decodes_here(self, slot_at(self, e));
}

/* Whether handing out entry e's key (key_object) calls into Python, and so needs the lock. */
int
key_read_needs_lock(const MapCore *self, Py_ssize_t e)
{
    const uint8_t *slot = slot_at(self, e);
    return !key_decodes_here(self, slot) && !long_key_read_here(self, slot);
}


/* An "object" key's int body (1..8 bytes of two's complement, little-endian) as an int. */
static PyObject *
int_of_body(const uint8_t *body, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | body[i];
    if (n < 8 && (body[n - 1] & 0x80))
        v |= ~(uint64_t)0 << (8 * n); /* sign extension */
    return PyLong_FromLongLong((long long)v);
}

/* A common key decoded from its inline slot (key_decodes_here), or NULL: with an error, or
 * with none for key bytes that are not UTF-8 (a damaged slot, which the KeyCodec reports). */
static PyObject *
common_key_of(const MapCore *self, const uint8_t *slot)
{
    const char *data = (const char *)slot;
    uint8_t n = slot[SLOT_INLINE_MAX];
    switch (self->key_kind) {
    case KEYED_STR:
        return decode_text(slot, n);
    case KEYED_BYTES:
        return PyBytes_FromStringAndSize(data, n);
    case KEYED_INT64:
        return int_of_body(slot, 8);
    default:
        if (slot[0] == KEY_TAG_NONE)
            return Py_NewRef(Py_None);
        if (slot[0] == KEY_TAG_BYTES)
            return PyBytes_FromStringAndSize(data + 1, n - 1);
        if (slot[0] == KEY_TAG_INT)
            return n == 1 ? PyLong_FromLong(0) : int_of_body(slot + 1, n - 1);
        return decode_text(slot + 1, n - 1);
    }
}

/* A long str or bytes key read from its record, or NULL: with an error, or with none for key
 * bytes that are not UTF-8 (a damaged record, which the KeyCodec reports). The new object is a
 * str or bytes, whose allocation runs no Python code (they are not tracked by the GC). */
static PyObject *
long_key_of(MapCore *self, const uint8_t *slot)
{
    RecordRead read;
    if (open_long_key(self, slot, &read) < 0)
        return NULL;
    PyObject *key = self->key_kind == KEYED_STR
                        ? decode_text(read.data, read.size)
                        : PyBytes_FromStringAndSize((const char *)read.data, read.size);
    record_close(&read);
    return key;
}

/* Entry e's key as the map hands it out (a new reference), or NULL with an error. An int64
 * table's int; a keyed table's common keys decoded here, the others by the KeyCodec (the
 * caller holds the lock for those: entry_needs_lock; a damaged inline slot goes to it too, for
 * its CorruptionError, reading nothing but the slot). */
PyObject *
key_object(MapCore *self, Py_ssize_t e)
{
    if (!KEYED(self))
        return PyLong_FromLongLong(key_at(self, e));
    uint8_t slot[SLOT_BYTES];
    memcpy(slot, slot_at(self, e), SLOT_BYTES);
    if (key_decodes_here(self, slot)) {
        PyObject *key = common_key_of(self, slot);
        if (key != NULL || PyErr_Occurred())
            return key;
    }
    else if (long_key_read_here(self, slot)) {
        PyObject *key = long_key_of(self, slot);
        if (key != NULL || PyErr_Occurred())
            return key;
    }
    PyObject *stored = slot_bytes(slot);
    PyObject *key = stored == NULL ? NULL
                                   : PyObject_CallMethodOneArg(self->keycodec, s_key_of_slot, stored);
    Py_XDECREF(stored);
    return key;
}

/* Where a new key goes in a keyed table's index: the first slot from its home that is empty
 * or holds an entry of a later home (the place find_slot passes a miss by). Precondition:
 * attached, the key absent. */
Py_ssize_t
insert_slot(const MapCore *self, const Key *key)
{
    const uint32_t *index = self->table.index;
    const Py_ssize_t home = home_of_hash(key->hash & ~(uint64_t)0xFF, self->homes);
    const size_t limit = entry_limit(self); /* the probe checked these entries already */
    Py_ssize_t s = home;
    for (; s < self->n_slots && index[s] != 0 && (size_t)index[s] - 1 < limit; s++)
        if (home_of_hash(entry_hash(self, (Py_ssize_t)index[s] - 1), self->homes) > home)
            break;
    return s;
}

/* The index slot pointing at live entry e, or -1 with CorruptionError set (none does). */
Py_ssize_t
slot_of_entry(const MapCore *self, Py_ssize_t e)
{
    const uint32_t *index = self->table.index;
    for (Py_ssize_t s = home_of_hash(entry_hash(self, e), self->homes); s < self->n_slots; s++) {
        if (index[s] == (uint32_t)(e + 1))
            return s;
        if (index[s] == 0)
            break;
    }
    PyErr_Format(CorruptionError, "entry %zd, a live entry, is not in the index: the table is "
                 "damaged", e);
    return -1;
}

/* _set_keys(keycodec): make this core a keyed table's, of the KeyCodec's key type and seed.
 * Only while detached, before the first attach of a keyed table. */
PyObject *
MapCore_set_keys(MapCore *self, PyObject *keycodec)
{
    static const char *const kinds[] = {"str", "bytes", "int64", "object"};
    if (ATTACHED(self))
        return PyErr_Format(PyExc_ValueError, "_set_keys() before the table is attached");
    PyObject *key_type = PyObject_GetAttr(keycodec, s_key_type);
    PyObject *seed = key_type == NULL ? NULL : PyObject_GetAttr(keycodec, s_seed);
    KeyKind kind = KEYS_INT64;
    for (int i = 0; key_type != NULL && PyUnicode_Check(key_type) && i < 4; i++)
        if (PyUnicode_CompareWithASCIIString(key_type, kinds[i]) == 0)
            kind = (KeyKind)(KEYED_STR + i);
    PyObject *result = NULL;
    if (seed != NULL && kind == KEYS_INT64)
        PyErr_Format(PyExc_ValueError, "unknown key type %R", key_type);
    else if (seed != NULL && (!PyBytes_Check(seed) || PyBytes_GET_SIZE(seed) != SIPHASH_SEED_BYTES))
        PyErr_Format(PyExc_ValueError, "a seed is %d bytes", SIPHASH_SEED_BYTES);
    else if (seed != NULL) {
        memcpy(self->seed, PyBytes_AS_STRING(seed), SIPHASH_SEED_BYTES);
        self->key_kind = kind;
        Py_XSETREF(self->keycodec, Py_NewRef(keycodec));
        result = Py_NewRef(Py_None);
    }
    Py_XDECREF(key_type);
    Py_XDECREF(seed);
    return result;
}
