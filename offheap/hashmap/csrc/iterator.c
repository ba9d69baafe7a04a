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
    PyObject_GC_Track(it);
    return (PyObject *)it;
}
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

int
EntryIter_traverse(EntryIter *it, visitproc visit, void *arg)
{
    Py_VISIT(it->core);
    return 0;
}

int
EntryIter_clear(EntryIter *it)
{
    Py_CLEAR(it->core);
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
