/* offheap.treemap._pages.RangeItems: the item-by-item iteration of a TreeMap range, the twin of
 * offheap.treemap.views.each (the reference).
 *
 * The range comes leaf by leaf from the map's _chunks generator as (keys, values) lists (values
 * None for keys alone); this iterator hands out their keys, values or (key, value) tuples, and
 * before every item compares the map's version (getattr(source, name), an int that moves when
 * the map changes size or is reloaded) with its value when the iteration began: once it moved,
 * the next step raises changed_error(), as a dict's iterator raises at the step after a change.
 * A generator frame per item cost more than the rest of an irange together; here an item costs
 * one attribute load, one comparison and a list read.
 *
 * Ownership: the current chunk's lists are held (strong references) until the next chunk, so a
 * change of the map cannot free them under the iterator; items are new references. Thread
 * safety: the GIL; the chunks generator takes the map's lock for each leaf.
 */
#include "pages.h"

enum { WHAT_KEYS = 0, WHAT_VALUES = 1, WHAT_ITEMS = 2 };

typedef struct {
    PyObject_HEAD
    PyObject *chunks;        /* the (keys, values) iterator, NULL once exhausted */
    PyObject *source;        /* the version's holder ... */
    PyObject *name;          /* ... and its attribute */
    PyObject *start;         /* the version when the iteration began */
    PyObject *changed_error; /* () -> the exception to raise once the version moved */
    PyObject *keys;          /* the current chunk: a list, or NULL */
    PyObject *values;        /* its values: a list, or NULL */
    Py_ssize_t next;         /* the position of the next item in the chunk */
    int what;
} RangeItems;

/* 0 while the version is the one the iteration began with; -1 with the changed error set. */
static int
check_version(RangeItems *self)
{
    PyObject *now = PyObject_GetAttr(self->source, self->name);
    if (now == NULL)
        return -1;
    int same = now == self->start ? 1 : PyObject_RichCompareBool(now, self->start, Py_EQ);
    Py_DECREF(now);
    if (same != 0)
        return same < 0 ? -1 : 0;
    PyObject *error = PyObject_CallNoArgs(self->changed_error);
    if (error != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(error), error);
        Py_DECREF(error);
    }
    return -1;
}

/* Take the next chunk: 1 taken, 0 none left, -1 with an exception. */
static int
next_chunk(RangeItems *self)
{
    Py_CLEAR(self->keys);
    Py_CLEAR(self->values);
    self->next = 0;
    if (self->chunks == NULL)
        return 0;
    PyObject *chunk = PyIter_Next(self->chunks);
    if (chunk == NULL) {
        Py_CLEAR(self->chunks);
        return PyErr_Occurred() ? -1 : 0;
    }
    if (!PyTuple_Check(chunk) || PyTuple_GET_SIZE(chunk) != 2
            || !PyList_Check(PyTuple_GET_ITEM(chunk, 0))
            || !(PyTuple_GET_ITEM(chunk, 1) == Py_None || PyList_Check(PyTuple_GET_ITEM(chunk, 1)))
            || (self->what != WHAT_KEYS && PyTuple_GET_ITEM(chunk, 1) == Py_None)) {
        Py_DECREF(chunk);
        PyErr_SetString(PyExc_TypeError, "RangeItems: a chunk is a (keys, values) pair of lists");
        return -1;
    }
    self->keys = Py_NewRef(PyTuple_GET_ITEM(chunk, 0));
    if (PyTuple_GET_ITEM(chunk, 1) != Py_None)
        self->values = Py_NewRef(PyTuple_GET_ITEM(chunk, 1));
    Py_DECREF(chunk);
    return 1;
}

static PyObject *
range_next(RangeItems *self)
{
    for (;;) {
        if (self->keys != NULL && self->next < PyList_GET_SIZE(self->keys)) {
            if (check_version(self) < 0)
                return NULL;
            Py_ssize_t i = self->next;
            /* a version check may have run Python code: read the lists as they are now */
            if (i >= PyList_GET_SIZE(self->keys)
                    || (self->values != NULL && i >= PyList_GET_SIZE(self->values)))
                continue;
            self->next = i + 1;
            PyObject *key = PyList_GET_ITEM(self->keys, i);
            switch (self->what) {
            case WHAT_KEYS: return Py_NewRef(key);
            case WHAT_VALUES: return Py_NewRef(PyList_GET_ITEM(self->values, i));
            default: return PyTuple_Pack(2, key, PyList_GET_ITEM(self->values, i));
            }
        }
        int taken = next_chunk(self);
        if (taken <= 0)
            return NULL; /* the error, or the end (the chunks generator checked the version) */
    }
}

static int
range_init(RangeItems *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"chunks", "what", "source", "name", "changed_error", NULL};
    PyObject *chunks, *source, *name, *changed_error;
    int what;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OiOUO:RangeItems", names, &chunks, &what,
                                     &source, &name, &changed_error))
        return -1;
    if (what < WHAT_KEYS || what > WHAT_ITEMS) {
        PyErr_Format(PyExc_ValueError, "RangeItems: what is 0, 1 or 2, not %d", what);
        return -1;
    }
    PyObject *iterator = PyObject_GetIter(chunks);
    if (iterator == NULL)
        return -1;
    PyObject *start = PyObject_GetAttr(source, name);
    if (start == NULL) {
        Py_DECREF(iterator);
        return -1;
    }
    Py_XSETREF(self->chunks, iterator);
    Py_XSETREF(self->source, Py_NewRef(source));
    Py_XSETREF(self->name, Py_NewRef(name));
    Py_XSETREF(self->start, start);
    Py_XSETREF(self->changed_error, Py_NewRef(changed_error));
    Py_CLEAR(self->keys);
    Py_CLEAR(self->values);
    self->next = 0;
    self->what = what;
    return 0;
}

static int
range_traverse(RangeItems *self, visitproc visit, void *arg)
{
    Py_VISIT(self->chunks);
    Py_VISIT(self->source);
    Py_VISIT(self->name);
    Py_VISIT(self->start);
    Py_VISIT(self->changed_error);
    Py_VISIT(self->keys);
    Py_VISIT(self->values);
    return 0;
}

static int
range_clear(RangeItems *self)
{
    Py_CLEAR(self->chunks);
    Py_CLEAR(self->source);
    Py_CLEAR(self->name);
    Py_CLEAR(self->start);
    Py_CLEAR(self->changed_error);
    Py_CLEAR(self->keys);
    Py_CLEAR(self->values);
    return 0;
}

static void
range_dealloc(RangeItems *self)
{
    PyObject_GC_UnTrack(self);
    range_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(range_doc,
"RangeItems(chunks, what, source, name, changed_error)\n\n"
"The keys (what 0), values (1) or (key, value) tuples (2) of the (keys, values) chunks, checking\n"
"before each that getattr(source, name) is still what it was, else raising changed_error().");

static PyTypeObject range_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "offheap.treemap._pages.RangeItems",
    .tp_basicsize = sizeof(RangeItems),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = range_doc,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)range_init,
    .tp_traverse = (traverseproc)range_traverse,
    .tp_clear = (inquiry)range_clear,
    .tp_dealloc = (destructor)range_dealloc,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)range_next,
};

int
add_range_type(PyObject *module)
{
    if (PyType_Ready(&range_type) < 0)
        return -1;
    Py_INCREF(&range_type);
    if (PyModule_AddObject(module, "RangeItems", (PyObject *)&range_type) < 0) {
        Py_DECREF(&range_type);
        return -1;
    }
    return 0;
}
