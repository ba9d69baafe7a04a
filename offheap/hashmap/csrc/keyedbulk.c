/* The compiled core's bulk operations on a keyed table: lists of key objects, one C loop each.
 *
 * The twins of the reference's (offheap.hashmap.keyedcore.KeyedCore): the map's bulk paths
 * (offheap.hashmap.keyedtable.KeyedTable) call them under the map's lock with lists of keys;
 * each key is the scalar operation of the same name, with no Python frame between two keys.
 * put_many's order of steps (absent keys first, then records, then room, then the stores) is
 * the map's: _absent_keys admits every key before anything changes. */

#include "core.h"

/* A list argument: a borrowed list, or NULL with a TypeError. */
static PyObject *
list_argument(PyObject *obj, const char *method)
{
    if (PyList_CheckExact(obj))
        return obj;
    PyErr_Format(PyExc_TypeError, "%s() takes a list of keys, not %.100s", method,
                 Py_TYPE(obj)->tp_name);
    return NULL;
}

/* Keys admitted ahead of their probes: a ring of AHEAD keys whose home index slots are
 * prefetched when admitted, so that the misses of several probes overlap. */
#define AHEAD 8

typedef struct {
    Key keys[AHEAD];
    int admitted[AHEAD]; /* key_for_lookup's answer: 1, 0 (a miss), -1 (an error) */
} KeyRing;

/* Admit key i of the list into the ring (a lookup's admission) and prefetch its home slot. */
static void
ring_admit(MapCore *self, PyObject *keys, Py_ssize_t i, KeyRing *ring)
{
    Key *key = &ring->keys[i % AHEAD];
    memset(key, 0, sizeof *key);
    int admitted = PyErr_Occurred() ? -1 /* an earlier key's error, raised at its turn */
                   : i < PyList_GET_SIZE(keys) ? key_for_lookup(self, PyList_GET_ITEM(keys, i), key)
                                               : 0;
    ring->admitted[i % AHEAD] = admitted;
    if (admitted == 1 && ATTACHED(self))
        __builtin_prefetch(&self->table.index[KEYED(self)
            ? home_of_hash(key->hash & ~(uint64_t)0xFF, self->homes)
            : home_of(key->int_key, self->homes)]);
}

/* _get_keys(keys, default): the value of each key, or default, as a list. */
PyObject *
MapCore_get_keys(MapCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "_get_keys() takes keys and a default");
    PyObject *keys = list_argument(args[0], "_get_keys");
    if (keys == NULL)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    PyObject *out = PyList_New(n);
    KeyRing ring;
    Py_ssize_t admitted_to = 0; /* keys [i, admitted_to) are in the ring */
    Py_ssize_t previous = -1;   /* the last key's entry, where the next key is tried first */
    for (; out != NULL && admitted_to < AHEAD && admitted_to < n; admitted_to++)
        ring_admit(self, keys, admitted_to, &ring);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        Key *key = &ring.keys[i % AHEAD];
        int admitted = ring.admitted[i % AHEAD];
        PyObject *value = NULL;
        if (admitted >= 0) {
            uint64_t word;
            int held = 0;
            Py_ssize_t slot, e = admitted ? find_in_turn_after(self, key, previous, &slot, &held)
                                          : -1;
            e = entry_from(self, key, e, &slot, &word, &held);
            previous = e;
            if (e >= 0)
                value = decode_word(self, word);
            else if (e == -1)
                value = Py_NewRef(args[1]);
            end_turn(self, held);
        }
        key_clear(key);
        if (value == NULL || i >= PyList_GET_SIZE(out)) {
            Py_XDECREF(value);
            Py_CLEAR(out); /* an error: the keys still in the ring are dropped below */
            break;
        }
        PyList_SET_ITEM(out, i, value);
        if (admitted_to < n)
            ring_admit(self, keys, admitted_to++, &ring);
    }
    for (Py_ssize_t j = 0; j < AHEAD; j++) /* after an error; cleared keys own nothing */
        if (j < admitted_to)
            key_clear(&ring.keys[j]);
    return out;
}

/* Whether `obj` is in the table: 0 present, 1 absent (an inline key), 2 absent (a long key),
 * -1 with an error; *hash is an absent keyed key's hash. With for_store it is admitted as a
 * store admits it (the store's error), else a key no table holds is absent. */
static int
key_state(MapCore *self, PyObject *obj, int for_store, uint64_t *hash)
{
    Key key = {0};
    int held = 0, state = -1;
    Py_ssize_t slot, e = -2;
    if (!for_store)
        e = lookup(self, obj, &key, &slot, &held);
    else if (key_for_store(self, obj, &key) == 0 && begin_turn(self, &held) == 0)
        e = ATTACHED(self) ? key_find(self, &key, &slot) : closed_error(self) - 1;
    if (e >= -1)
        state = e >= 0 ? 0 : KEYED(self) && key.is_long ? 2 : 1;
    *hash = key.hash;
    key_clear(&key);
    end_turn(self, held);
    return state;
}

/* Whether two key objects are one key of the table (their key bytes equal): 1, 0, -1. */
static int
same_key(MapCore *self, PyObject *a, PyObject *b)
{
    Key first = {0}, second = {0};
    int same = -1;
    if (key_for_store(self, a, &first) == 0 && key_for_store(self, b, &second) == 0)
        same = first.len == second.len
               && memcmp(first.data, second.data, (size_t)first.len) == 0;
    key_clear(&first);
    key_clear(&second);
    return same;
}

/* The batch's keys absent from the table seen so far, by hash: an open-addressing set of
 * (hash, position) with position -1 for an empty slot. */
typedef struct {
    uint64_t hash;
    Py_ssize_t position;
} Seen;

/* _key_states(keys, for_store): key_state() of each key, one byte a key, as bytes; with
 * for_store, 3 for a key absent from the table that an earlier key of the batch already is
 * (a store of the batch appends it once, at its first place). */
PyObject *
MapCore_key_states(MapCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "_key_states() takes keys and for_store");
    PyObject *keys = list_argument(args[0], "_key_states");
    int for_store = keys == NULL ? -1 : PyObject_IsTrue(args[1]);
    if (for_store < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    size_t size = 8;
    while (for_store && size < 2 * (size_t)n)
        size *= 2;
    Seen *seen = for_store && KEYED(self) ? PyMem_Malloc(size * sizeof(Seen)) : NULL;
    if (for_store && KEYED(self) && seen == NULL)
        return PyErr_NoMemory();
    for (size_t i = 0; seen != NULL && i < size; i++)
        seen[i].position = -1;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    for (Py_ssize_t i = 0; out != NULL && i < n && i < PyList_GET_SIZE(keys); i++) {
        PyObject *obj = PyList_GET_ITEM(keys, i);
        uint64_t hash = 0;
        int state = key_state(self, obj, for_store, &hash);
        size_t at = (size_t)hash & (size - 1);
        for (; state > 0 && seen != NULL && seen[at].position >= 0; at = (at + 1) & (size - 1)) {
            if (seen[at].hash != hash || seen[at].position >= PyList_GET_SIZE(keys))
                continue;
            int same = same_key(self, PyList_GET_ITEM(keys, seen[at].position), obj);
            if (same != 0) {
                state = same < 0 ? -1 : 3;
                break;
            }
        }
        if ((state == 1 || state == 2) && seen != NULL)
            seen[at] = (Seen){hash, i};
        if (state < 0)
            Py_CLEAR(out);
        else
            PyBytes_AS_STRING(out)[i] = (char)state;
    }
    PyMem_Free(seen);
    return out;
}

/* _discard_keys(keys): remove the keys present (their keys' and words' records released);
 * how many went. */
PyObject *
MapCore_discard_keys(MapCore *self, PyObject *keys_argument)
{
    PyObject *keys = list_argument(keys_argument, "_discard_keys");
    if (keys == NULL)
        return NULL;
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
        int found = discard_key(self, PyList_GET_ITEM(keys, i));
        if (found < 0)
            return NULL;
        count += found;
    }
    return PyLong_FromSsize_t(count);
}

/* _put_key_words(keys, words, slots, done): store words[i] (8-byte items: codec words or raw
 * typed values) under keys[i] in order, a new long key taking slots[i] (made by the caller)
 * when slots is a list, with room reserved by the caller; done[0] counts the words stored (on
 * an error the rest are still the caller's, as are the slots not taken). */
PyObject *
MapCore_put_key_words(MapCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4)
        return PyErr_Format(PyExc_TypeError, "_put_key_words() takes keys, words, slots, done");
    PyObject *keys = list_argument(args[0], "_put_key_words"), *slots = args[2];
    if (keys == NULL)
        return NULL;
    if (slots != Py_None && (!PyList_CheckExact(slots) || PyList_GET_SIZE(slots) != PyList_GET_SIZE(keys)))
        return PyErr_Format(PyExc_TypeError, "_put_key_words()'s slots are None or a list as "
                            "long as the keys");
    Py_buffer words_view, done_view;
    if (PyObject_GetBuffer(args[1], &words_view, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[3], &done_view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&words_view);
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(keys);
    int status = PUT_STORED;
    if (words_view.itemsize != 8 || words_view.len != 8 * n || done_view.len < 8) {
        PyErr_SetString(PyExc_ValueError, "_put_key_words() takes one 8-byte word a key and an "
                        "8-byte done counter");
        status = PUT_FAILED;
    }
    const uint64_t *words = words_view.buf;
    int64_t *done = done_view.buf;
    const int typed = TYPED_CODEC(self->value_codec);
    for (Py_ssize_t i = 0; status == PUT_STORED && i < n && i < PyList_GET_SIZE(keys); i++) {
        Key key = {0};
        int held = 0;
        if (!ATTACHED(self)) {
            status = closed_error(self);
            break;
        }
        if (key_for_store(self, PyList_GET_ITEM(keys, i), &key) < 0) {
            status = PUT_FAILED;
            break;
        }
        PyObject *slot = slots == Py_None ? Py_None : PyList_GET_ITEM(slots, i);
        if (slot != Py_None && KEYED(self) && key.is_long && PyBytes_Check(slot)
            && PyBytes_GET_SIZE(slot) == SLOT_BYTES) {
            memcpy(key.slot, PyBytes_AS_STRING(slot), SLOT_BYTES);
            key.made = 2; /* the caller's record */
        }
        status = put_turn(self, &key, words[i], typed ? (int)self->width : word_width(words[i]),
                          &held);
        key_clear(&key);
        end_turn(self, held);
        if (status != PUT_FAILED)
            done[0] = i + 1;
    }
    PyBuffer_Release(&words_view);
    PyBuffer_Release(&done_view);
    if (status != PUT_STORED)
        return NULL;
    Py_RETURN_NONE;
}
