/* The compiled LongHashMap core's bulk operations: the map's put_many, get_many, contains_many
 * and delete_many probe and change the table here (the pure-Python reference does the same work
 * with numpy, to the same bytes: offheap.hashmap.core and offheap.hashmap.bulk).
 *
 * Probes and deletes go one key after another in the batch's order, as the scalar operations
 * do. A put goes the same way when the batch is small against the map; a large one is planned
 * and built at once (build.c), which leaves the same bytes.
 *
 * Buffers. Every array argument is a C-contiguous buffer of 8-byte items (int64 keys, int64
 * entry numbers, slot words or raw typed values; found flags are 1-byte items), exported for the
 * whole call, so the caller's arrays cannot go away under it. A call never releases the GIL
 * while it probes: the table must not change under a probe. Only _put_words and _put_batch call
 * into Python (the map's _reserve, _make_room and _grow_index, the codec's release of a replaced
 * external word); they re-read the table after each such call, as put() does. */

#include "build.h"

/* A batch large against the map is built at once (build.c): at least BULK_MIN keys and at least
 * 1 / BULK_SHARE of the map's entries. Smaller ones are put key by key. */
#define BULK_MIN 512
#define BULK_SHARE 4

/* A probe batch of at least 1 / MERGE_SHARE of the map's entries, in a map of at least MERGE_MIN
 * entries, is answered by merging the two sorted by hash (build.c's find_by_merge) instead of a
 * probe per key. Measured on two 1M-element sets (contains_many, load 3.7-4.7, CPU time, min of
 * 9): the merge 87-115 ns a key, the probes 89-231 (they wait on the shared cache); at 100K-300K
 * entries, whose tables stay in cache, the probes won (49-55 ns against 68-77). */
#define MERGE_MIN (1 << 18)
#define MERGE_SHARE 2

/* An export of `obj` with `n` (or, for n < 0, any number of) items of `item_size` bytes; the item
 * count, or -1 with an error and nothing held. */
static Py_ssize_t
export_array(PyObject *obj, Py_buffer *view, Py_ssize_t item_size, int writable, Py_ssize_t n,
             const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    Py_ssize_t count = view->itemsize == item_size ? view->len / item_size : -1;
    if (count < 0 || view->len % item_size != 0 || (n >= 0 && count < n)) {
        PyErr_Format(PyExc_ValueError, "%s must be a buffer of %s%zd-byte items", what,
                     n >= 0 ? "enough " : "", item_size);
        PyBuffer_Release(view);
        return -1;
    }
    return count;
}

static Py_ssize_t
export_words(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t n, const char *what)
{
    return export_array(obj, view, 8, writable, n, what);
}

/* The keys argument of every call; ClosedError while detached, TypeError on a keyed table. */
static Py_ssize_t
export_keys(MapCore *self, PyObject *keys, Py_buffer *view)
{
    if (int64_table(self, "the bulk path") < 0)
        return -1;
    return export_words(keys, view, 0, -1, "keys");
}

/* Batches in the entries' order. The keys of a batch often come in the order they went in (a
 * map's keys looked up again, two maps loaded from one source), and the key after a hit at entry
 * e is then entry e + 1's. The probe loops of get_many and contains_many (here, and
 * find_in_turn_after for lists of keys) try that entry first: it sits next to the last hit in
 * memory, and a match needs no index slot, where a probe waits on one at random. A live entry
 * holding the key is its only one, so the answer is the probe's; a key in another order costs
 * one compare on a cache line the last hit brought in. */
static inline Py_ssize_t
find_after(const MapCore *self, int64_t key, Py_ssize_t previous, int *followed)
{
    Py_ssize_t slot;
    *followed = previous >= 0 && entry_holds(self, previous + 1, key, NULL);
    if (*followed)
        return previous + 1;
    return self->n ? find(self, key, 1, &slot) : -1;
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
    Py_ssize_t i = 0, e = -1;
    int followed = 0;
    if (self->n >= MERGE_MIN && n * MERGE_SHARE >= self->n)
        i = find_by_merge(self, keys, n, out) == 0 ? n : -1;
    for (; i >= 0 && i < n; i++) {
        if (!followed) /* a run in the entries' order needs no index slots ahead */
            prefetch_ahead(self, keys, i, n, 0);
        if ((e = find_after(self, keys[i], e, &followed)) == -2)
            break;
        out[i] = e;
    }
    PyBuffer_Release(&keys_view);
    PyBuffer_Release(&out_view);
    if (i < n) /* -1: the merge failed; else the probe of keys[i] */
        return NULL;
    Py_RETURN_NONE;
}

/* _encode_inline_prefix(values, out): out[i] = the inline word of values[i] for the longest
 * prefix of a list or tuple whose values the inline codec takes (encode_inline, the scalar set's
 * encoding: the same words as ValueSlots.encode); returns its length. It stops at the first value
 * that needs the value codec (a long or external value, another type), and takes nothing from a
 * typed map (its column is the values themselves) or from any other sequence. Unless the prefix
 * is the whole batch, ValueSlots.encode_many encodes the batch anew, so that its records are
 * made as the reference makes them. Nothing is stored here: nothing to release after an error. */
PyObject *
MapCore_encode_inline_prefix(MapCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "_encode_inline_prefix() takes values and out "
                            "(%zd given)", nargs);
    PyObject *values = args[0];
    if (!ATTACHED(self) || TYPED_CODEC(self->value_codec)
            || (!PyList_CheckExact(values) && !PyTuple_CheckExact(values)))
        return PyLong_FromSsize_t(0);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(values);
    Py_buffer out_view;
    if (export_words(args[1], &out_view, 1, n, "out") < 0)
        return NULL;
    uint64_t *out = out_view.buf;
    Py_ssize_t i = 0;
    int width, done = 1;
    for (; i < n; i++) { /* encode_inline runs no Python code: `values` cannot change */
        done = encode_inline(self, PySequence_Fast_GET_ITEM(values, i), &out[i], &width);
        if (done != 1)
            break;
    }
    PyBuffer_Release(&out_view);
    return done < 0 ? NULL : PyLong_FromSsize_t(i);
}

/* _find_values(keys, out, found): out[i] = the stored word (or raw typed value) of keys[i] and
 * found[i] = 1, or 0 and 0 for a missing key; returns how many are missing. */
PyObject *
MapCore_find_values(MapCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3)
        return PyErr_Format(PyExc_TypeError, "_find_values() takes keys, out and found "
                            "(%zd given)", nargs);
    Py_buffer keys_view, out_view, found_view;
    Py_ssize_t n = export_keys(self, args[0], &keys_view);
    if (n < 0)
        return NULL;
    if (export_words(args[1], &out_view, 1, n, "out") < 0) {
        PyBuffer_Release(&keys_view);
        return NULL;
    }
    if (export_array(args[2], &found_view, 1, 1, n, "found") < 0) {
        PyBuffer_Release(&keys_view);
        PyBuffer_Release(&out_view);
        return NULL;
    }
    const int64_t *keys = keys_view.buf;
    uint64_t *out = out_view.buf;
    uint8_t *found = found_view.buf;
    Py_ssize_t i = 0, e = -1, missing = 0;
    int followed = 0;
    for (; i < n; i++) {
        if (!followed)
            prefetch_ahead(self, keys, i, n, 1);
        if ((e = find_after(self, keys[i], e, &followed)) == -2)
            break;
        out[i] = e >= 0 ? value_at(self, e) : 0;
        found[i] = e >= 0;
        missing += e < 0;
    }
    PyBuffer_Release(&keys_view);
    PyBuffer_Release(&out_view);
    PyBuffer_Release(&found_view);
    if (i < n)
        return NULL;
    return PyLong_FromSsize_t(missing);
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

/* How many distinct keys of the batch the map does not hold; -1 with an error. */
static Py_ssize_t
count_absent(MapCore *self, const int64_t *keys, Py_ssize_t n)
{
    KeySet absent;
    if (keyset_init(&absent, n) < 0)
        return -1;
    Py_ssize_t count = 0, slot, e = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        prefetch_ahead(self, keys, i, n, 0);
        e = self->n ? find(self, keys[i], 1, &slot) : -1;
        if (e == -2)
            break;
        if (e == -1)
            count += keyset_add(&absent, keys[i]);
    }
    keyset_free(&absent);
    return e == -2 ? -1 : count;
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
    Py_ssize_t count = count_absent(self, keys_view.buf, n);
    PyBuffer_Release(&keys_view);
    return count < 0 ? NULL : PyLong_FromSsize_t(count);
}

/* Store words[i] under keys[i] one after another, done[0] counting the words stored: put()'s
 * status for the first that failed, else PUT_STORED. */
static int
put_each(MapCore *self, const int64_t *keys, const uint64_t *words, Py_ssize_t n, int64_t *done)
{
    const int typed = TYPED_CODEC(self->value_codec);
    for (Py_ssize_t i = 0; i < n; i++) {
        prefetch_ahead(self, keys, i, n, 0);
        Key key = {.int_key = keys[i]};
        int status = put(self, &key, words[i], typed ? (int)self->width : word_width(words[i]));
        if (status == PUT_FAILED_AFTER_STORING)
            done[0] = i + 1;
        if (status != PUT_STORED)
            return status;
        done[0] = i + 1;
    }
    return PUT_STORED;
}

/* The three arrays of _put_words and _put_batch (keys, words, done); the batch size, or -1 with
 * an error and nothing held. */
static Py_ssize_t
export_put_arguments(MapCore *self, PyObject *const *args, Py_buffer views[3])
{
    Py_ssize_t n = export_keys(self, args[0], &views[0]);
    if (n < 0)
        return -1;
    if (export_words(args[1], &views[1], 0, n, "words") < 0) {
        PyBuffer_Release(&views[0]);
        return -1;
    }
    if (export_words(args[2], &views[2], 1, 1, "done") < 0) {
        PyBuffer_Release(&views[0]);
        PyBuffer_Release(&views[1]);
        return -1;
    }
    return n;
}

static void
release_views(Py_buffer *views, int count)
{
    for (int i = 0; i < count; i++)
        PyBuffer_Release(&views[i]);
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
    Py_buffer views[3];
    Py_ssize_t n = export_put_arguments(self, args, views);
    if (n < 0)
        return NULL;
    int status = put_each(self, views[0].buf, views[1].buf, n, views[2].buf);
    release_views(views, 3);
    if (status != PUT_STORED)
        return NULL;
    Py_RETURN_NONE;
}

/* self.<method>(a, b) for the map's growth steps (_reserve, _grow_index); -1 with an error. */
static int
call_growth(MapCore *self, const char *method, Py_ssize_t a, Py_ssize_t b)
{
    PyObject *result = PyObject_CallMethod((PyObject *)self, method, "nn", a, b);
    Py_XDECREF(result);
    return result == NULL ? -1 : 0;
}

/* Release words the table gave up, all of them even when one release fails (the first error is
 * the one raised); -1 with an error. */
static int
release_all(MapCore *self, const uint64_t *words, Py_ssize_t n)
{
    PyObject *type = NULL, *value = NULL, *traceback = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (release_word(self, words[i]) == 0)
            continue;
        if (type == NULL)
            PyErr_Fetch(&type, &value, &traceback);
        else
            PyErr_Clear();
    }
    if (type == NULL)
        return 0;
    PyErr_Restore(type, value, traceback);
    return -1;
}

/* A large batch through build.c: plan, reserve the room, build (growing the index while the
 * placement overflows its slack). PUT_STORED, PUT_FAILED (the table unchanged, done[0] 0),
 * PUT_FAILED_AFTER_STORING (stored, a release failed), or BUILD_NO_ROOM when the room was not
 * there after the reserve (the table unchanged; the caller puts key by key). */
static int
put_built(MapCore *self, const int64_t *keys, const uint64_t *words, Py_ssize_t n,
          Py_ssize_t width, int64_t *done)
{
    BatchPlan plan;
    if (plan_batch(self, keys, words, n, &plan) < 0)
        return PUT_FAILED;
    uint64_t *released = PyMem_Malloc((n ? (size_t)n : 1) * sizeof(uint64_t));
    if (released == NULL) {
        free_plan(&plan);
        PyErr_NoMemory();
        return PUT_FAILED;
    }
    Py_ssize_t n_released = 0, n_new = 0;
    int status = call_growth(self, "_reserve", plan.n_absent, width) < 0 ? BUILD_FAILED
                                                                            : BUILD_OVERFLOW;
    while (status == BUILD_OVERFLOW) {
        if (!ATTACHED(self))
            status = closed_error(self);
        else if (check_writable(self) < 0 || check_used(self) < 0)
            status = BUILD_FAILED;
        else
            status = build_batch(self, &plan, released, &n_released, &n_new);
        if (status == BUILD_OVERFLOW) { /* the map's _outgrow_index(needed) */
            PyObject *grown = PyObject_CallMethod((PyObject *)self, "_outgrow_index", "n",
                                                  self->n + n_new);
            if (grown == NULL)
                status = BUILD_FAILED;
            Py_XDECREF(grown);
        }
    }
    free_plan(&plan);
    int result = status == BUILD_NO_ROOM ? BUILD_NO_ROOM : PUT_FAILED;
    if (status == BUILD_DONE) {
        done[0] = n;
        result = release_all(self, released, n_released) < 0 ? PUT_FAILED_AFTER_STORING
                                                             : PUT_STORED;
    }
    PyMem_Free(released);
    return result;
}

/* _put_batch(keys, words, width, done): put_many's whole change. Reserve the room for the
 * batch's new keys (the map's _reserve, values `width` bytes wide), then store words[i] under
 * keys[i] as _put_words does: a CapacityError from the reserve leaves the map as it was. done[0]
 * counts the words stored; on an error the words from done[0] on are still the caller's. */
PyObject *
MapCore_put_batch(MapCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4)
        return PyErr_Format(PyExc_TypeError, "_put_batch() takes keys, words, width and done "
                            "(%zd given)", nargs);
    Py_ssize_t width = PyLong_AsSsize_t(args[2]);
    if (width == -1 && PyErr_Occurred())
        return NULL;
    PyObject *put_args[3] = {args[0], args[1], args[3]};
    Py_buffer views[3];
    Py_ssize_t n = export_put_arguments(self, put_args, views);
    if (n < 0)
        return NULL;
    const int64_t *keys = views[0].buf;
    const uint64_t *words = views[1].buf;
    int64_t *done = views[2].buf;
    done[0] = 0;
    int status = BUILD_NO_ROOM;
    if (n >= BULK_MIN && n * BULK_SHARE >= self->n)
        status = put_built(self, keys, words, n, width, done);
    else {
        Py_ssize_t count = count_absent(self, keys, n);
        if (count < 0 || call_growth(self, "_reserve", count, width) < 0)
            status = PUT_FAILED;
    }
    if (status == BUILD_NO_ROOM)
        status = put_each(self, keys, words, n, done);
    release_views(views, 3);
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
        prefetch_ahead(self, keys, i, n, 0);
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

/* _place_entries(index, homes): fill index, an empty writable uint32 buffer of homes + SLACK
 * slots that is not the table's (a grown index), with the live entries placed for `homes` homes
 * (build.c's place_entries); False, the buffer untouched, when one would land past its end. */
PyObject *
MapCore_place_entries(MapCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "_place_entries() takes an index and homes "
                            "(%zd given)", nargs);
    if (!ATTACHED(self)) {
        closed_error(self);
        return NULL;
    }
    Py_ssize_t homes = PyLong_AsSsize_t(args[1]);
    if (homes == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    Py_ssize_t n_slots = export_array(args[0], &view, 4, 1, -1, "index");
    if (n_slots < 0)
        return NULL;
    int status = BUILD_FAILED;
    if (homes < 1 || homes > MAX_HOMES || homes > n_slots)
        PyErr_Format(PyExc_ValueError, "homes must be in [1, min(2**32, %zd slots)], not %zd",
                     n_slots, homes);
    else if (view.buf == (void *)self->table.index)
        PyErr_SetString(PyExc_ValueError, "_place_entries() fills a new index, not the table's");
    else
        status = place_entries(self, view.buf, n_slots, homes);
    PyBuffer_Release(&view);
    return status == BUILD_FAILED ? NULL : PyBool_FromLong(status == BUILD_DONE);
}
