/* The compiled LongHashMap core's iterator over keys, values or items in entry order. */

#include "core.h"

PyObject *
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
    it->pairs = (ItemPairs){{NULL, NULL}};
    PyObject_GC_Track(it);
    return (PyObject *)it;
}
/* ---------------------------------------------------------------------------------------------
 * The iterator: the reference's generator step by step. It looks at the core at its first step
 * (ClosedError, the _mods snapshot), then at every step checks _mods (RuntimeError) and the
 * attachment (ClosedError) before the next live entry; once it has ended or raised, it stays
 * exhausted.
 */

/* The next step, in the core's turn (lock.c); the lock is held for a value that the codec
 * decodes, and the step starts again if other threads ran while it waited for it. */
static PyObject *
next_in_turn(EntryIter *it, int *held)
{
    MapCore *core = it->core;
    for (;;) {
        if (begin_turn(core, held) < 0)
            return NULL;
        if (!it->started) {
            if (!ATTACHED(core))
                return closed_error(core), NULL;
            it->mods = core->mods;
            it->started = 1;
        }
        if (core->mods != it->mods) {
            PyObject *kind = kind_name(core);
            if (kind != NULL) {
                PyErr_Format(PyExc_RuntimeError, "%U changed size during iteration", kind);
                Py_DECREF(kind);
            }
            return NULL;
        }
        if (!ATTACHED(core))
            return closed_error(core), NULL;
        const size_t limit = entry_limit(core);
        Py_ssize_t e = it->next;
        while ((size_t)e < limit && !is_live_at(core, e))
            e++;
        if ((size_t)e >= limit)
            return NULL;
        uint64_t word = value_at(core, e); /* copied out: decoding may run Python code */
        int calls_python = (it->what != ITER_KEYS && word_needs_codec(core, word))
                           || (it->what != ITER_VALUES && KEYED(core) && key_read_needs_lock(core, e));
        if (calls_python && !*held) {
            int waited = hold_lock(core, held);
            if (waited < 0)
                return NULL;
            if (waited)
                continue;
        }
        it->next = e + 1;
        PyObject *key = it->what == ITER_VALUES ? NULL : key_object(core, e);
        if (it->what == ITER_KEYS || (key == NULL && it->what == ITER_ITEMS))
            return key;
        PyObject *value = decode_word(core, word);
        if (value == NULL || it->what == ITER_VALUES) {
            Py_XDECREF(key);
            return value;
        }
        return item_pair(&it->pairs, key, value);
    }
}

static PyObject *
EntryIter_next(EntryIter *it)
{
    MapCore *core = it->core;
    if (core == NULL)
        return NULL;
    int held = 0;
    Py_INCREF(core); /* ending the iteration drops the iterator's reference */
    PyObject *result = next_in_turn(it, &held);
    end_turn(core, held);
    Py_DECREF(core);
    if (result == NULL) {
        Py_CLEAR(it->core);
        item_pairs_clear(&it->pairs);
    }
    return result;
}

int
EntryIter_traverse(EntryIter *it, visitproc visit, void *arg)
{
    Py_VISIT(it->core);
    return item_pairs_traverse(&it->pairs, visit, arg);
}

int
EntryIter_clear(EntryIter *it)
{
    Py_CLEAR(it->core);
    item_pairs_clear(&it->pairs);
    return 0;
}

void
EntryIter_dealloc(EntryIter *it)
{
    PyObject_GC_UnTrack(it);
    EntryIter_clear(it);
    PyObject_GC_Del(it);
}

PyTypeObject EntryIterType = {
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
