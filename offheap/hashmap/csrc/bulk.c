/* The compiled LongHashMap core's bulk operations: the map's put_many, get_many, contains_many
 * and delete_many probe and change the table here, one key after another in the batch's order,
 * as the scalar operations do (the pure-Python reference does the same work with numpy, to the
 * same bytes: offheap.hashmap.core).
 *
 * Buffers. Every array argument is a C-contiguous buffer of 8-byte items (int64 keys, int64
 * entry numbers, slot words or raw typed values), exported for the whole call, so the caller's
 * arrays cannot go away under it. A call never releases the GIL: the table must not change
 * under a probe. Only _put_words calls into Python (the map's _make_room, the codec's release of
 * a replaced external word); it re-reads the table after each such call, as put() does. */

#include "core.h"

/* An export of `obj` with `n` (or, for n < 0, any number of) 8-byte items; the item count, or
 * -1 with an error and nothing held. */
static Py_ssize_t
export_words(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t n, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    Py_ssize_t count = view->itemsize == 8 ? view->len / 8 : -1;
    if (count < 0 || view->len % 8 != 0 || (n >= 0 && count < n)) {
        PyErr_Format(PyExc_ValueError, "%s must be a buffer of %s8-byte items", what,
                     n >= 0 ? "enough " : "");
        PyBuffer_Release(view);
        return -1;
    }
    return count;
}

/* Prefetching. A batch of random keys is memory-bound: each probe waits on an index slot, then
 * on an entry's key. The loops below ask for both ahead of time, in two stages: the index slot of
 * the key AHEAD places on, then (the slot having arrived) the entry it names for the key
 * AHEAD / 2 places on, so the probe of the current key finds both in cache. Only addresses
 * inside the attached table are touched; a detached table is skipped. */
#define AHEAD 16

static inline void
prefetch_slot(const MapCore *self, int64_t key)
{
    if (ATTACHED(self))
        __builtin_prefetch(&self->table.index[home_of(key, self->homes)]);
}

static inline void
prefetch_entry(const MapCore *self, int64_t key)
{
    if (!ATTACHED(self))
        return;
    uint32_t ix = self->table.index[home_of(key, self->homes)];
    if (ix != 0 && (size_t)ix - 1 < entry_limit(self))
        __builtin_prefetch(&self->table.chunks[(ix - 1) >> CHUNK_BITS].keys[(ix - 1) & CHUNK_MASK]);
}

/* Both stages for the keys ahead of keys[i]. */
static inline void
prefetch_ahead(const MapCore *self, const int64_t *keys, Py_ssize_t i, Py_ssize_t n)
{
    if (i + AHEAD < n)
        prefetch_slot(self, keys[i + AHEAD]);
    if (i + AHEAD / 2 < n)
        prefetch_entry(self, keys[i + AHEAD / 2]);
}

/* The keys argument of every call; ClosedError while detached. */
static Py_ssize_t
export_keys(MapCore *self, PyObject *keys, Py_buffer *view)
{
    if (!ATTACHED(self))
        return closed_error();
    return export_words(keys, view, 0, -1, "keys");
}

/* _find_entries(keys, out): out[i] = the entry holding keys[i], or -1. */
PyObject *
MapCore_find_entries(MapCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "_find_entries() takes keys and out (%zd given)",
                            nargs);
    Py_buffer keys_view, out_view;
    Py_ssize_t n = export_keys(self, args[0], &keys_view);
    if (n < 0)
        return NULL;
    if (export_words(args[1], &out_view, 1, n, "out") < 0) {
        PyBuffer_Release(&keys_view);
        return NULL;
    }
    const int64_t *keys = keys_view.buf;
    int64_t *out = out_view.buf;
    Py_ssize_t i = 0, slot;
    for (; i < n; i++) {
        prefetch_ahead(self, keys, i, n);
        Py_ssize_t e = self->n ? find(self, keys[i], 1, &slot) : -1;
        if (e == -2)
            break;
        out[i] = e;
    }
    PyBuffer_Release(&keys_view);
    PyBuffer_Release(&out_view);
    if (i < n)
        return NULL;
    Py_RETURN_NONE;
}

/* A set of int64 keys for one call: open addressing over a power-of-two table, slot 0 of
 * `taken` telling an empty slot from a stored key 0. Owned by the call that made it. */
typedef struct {
    int64_t *keys;
    uint8_t *taken;
    size_t mask;
} KeySet;

static int
keyset_init(KeySet *set, Py_ssize_t most)
{
    size_t size = 16;
    while (size < (size_t)most * 2)
        size <<= 1;
    set->keys = PyMem_Malloc(size * sizeof(int64_t));
    set->taken = PyMem_Calloc(size, 1);
    set->mask = size - 1;
    if (set->keys == NULL || set->taken == NULL) {
        PyMem_Free(set->keys);
        PyMem_Free(set->taken);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Add `key`: 1 when it was not in the set, else 0. */
static int
keyset_add(KeySet *set, int64_t key)
{
    size_t at = (size_t)mix64((uint64_t)key) & set->mask;
    while (set->taken[at]) {
        if (set->keys[at] == key)
            return 0;
        at = (at + 1) & set->mask;
    }
    set->taken[at] = 1;
    set->keys[at] = key;
    return 1;
}

static void
keyset_free(KeySet *set)
{
    PyMem_Free(set->keys);
    PyMem_Free(set->taken);
}

/* _count_absent(keys): how many distinct keys of the batch the map does not hold (what a
 * put_many of them adds). */
PyObject *
MapCore_count_absent(MapCore *self, PyObject *keys_argument)
{
    Py_buffer keys_view;
    Py_ssize_t n = export_keys(self, keys_argument, &keys_view);
    if (n < 0)
        return NULL;
    const int64_t *keys = keys_view.buf;
    KeySet absent;
    if (keyset_init(&absent, n) < 0) {
        PyBuffer_Release(&keys_view);
        return NULL;
    }
    Py_ssize_t count = 0, slot, e = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        prefetch_ahead(self, keys, i, n);
        e = self->n ? find(self, keys[i], 1, &slot) : -1;
        if (e == -2)
            break;
        if (e == -1)
            count += keyset_add(&absent, keys[i]);
    }
    keyset_free(&absent);
    PyBuffer_Release(&keys_view);
    return e == -2 ? NULL : PyLong_FromSsize_t(count);
}

/* _put_words(keys, words, done): store words[i] under keys[i] in order (a later key equal to an
 * earlier one overwrites its value and keeps its place, as dict.update does), setting done[0]
 * to the number stored so far: on an error the words from done[0] on are still the caller's. */
PyObject *
MapCore_put_words(MapCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3)
        return PyErr_Format(PyExc_TypeError, "_put_words() takes keys, words and done "
                            "(%zd given)", nargs);
    Py_buffer keys_view, words_view, done_view;
    Py_ssize_t n = export_keys(self, args[0], &keys_view);
    if (n < 0)
        return NULL;
    if (export_words(args[1], &words_view, 0, n, "words") < 0) {
        PyBuffer_Release(&keys_view);
        return NULL;
    }
    if (export_words(args[2], &done_view, 1, 1, "done") < 0) {
        PyBuffer_Release(&keys_view);
        PyBuffer_Release(&words_view);
        return NULL;
    }
    const int64_t *keys = keys_view.buf;
    const uint64_t *words = words_view.buf;
    int64_t *done = done_view.buf;
    const int typed = self->value_codec <= CODEC_FLOAT64;
    int status = PUT_STORED;
    Py_ssize_t i = 0;
    for (; i < n; i++) {
        prefetch_ahead(self, keys, i, n);
        status = put(self, keys[i], words[i], typed ? 8 : word_width(words[i]));
        if (status != PUT_STORED)
            break;
        done[0] = i + 1;
    }
    if (status == PUT_FAILED_AFTER_STORING)
        done[0] = i + 1;
    PyBuffer_Release(&keys_view);
    PyBuffer_Release(&words_view);
    PyBuffer_Release(&done_view);
    if (status != PUT_STORED)
        return NULL;
    Py_RETURN_NONE;
}

/* _remove_keys(keys, removed): remove the keys present, in order; removed[j] is the word of the
 * j-th entry removed (still to be released by the caller); returns how many went. */
PyObject *
MapCore_remove_keys(MapCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "_remove_keys() takes keys and removed "
                            "(%zd given)", nargs);
    Py_buffer keys_view, removed_view;
    Py_ssize_t n = export_keys(self, args[0], &keys_view);
    if (n < 0)
        return NULL;
    if (export_words(args[1], &removed_view, 1, n, "removed") < 0) {
        PyBuffer_Release(&keys_view);
        return NULL;
    }
    const int64_t *keys = keys_view.buf;
    uint64_t *removed = removed_view.buf;
    Py_ssize_t count = 0, slot, i = 0;
    int failed = 0;
    for (; i < n && self->n; i++) {
        prefetch_ahead(self, keys, i, n);
        Py_ssize_t e = find(self, keys[i], 1, &slot);
        if (e == -1)
            continue;
        uint64_t word = e >= 0 ? value_at(self, e) : 0;
        if (e == -2 || remove_at(self, slot, e) < 0) {
            failed = 1;
            break;
        }
        removed[count++] = word;
    }
    PyBuffer_Release(&keys_view);
    PyBuffer_Release(&removed_view);
    return failed ? NULL : PyLong_FromSsize_t(count);
}
