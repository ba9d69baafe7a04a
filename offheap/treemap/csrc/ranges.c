/* offheap.treemap._pages.RangeItems: the item-by-item iteration of a TreeMap range, the twin of
 * offheap.treemap.views.each (the reference).
 *
 * Two sources of leaves. Made by scan(), a RangeItems walks the tree itself: for each leaf it
 * takes the map's lock, checks the map's version, lets the Descent find the leaf that holds the
 * next key (descent_scan_leaf: a fresh seek from the root, the leaf's page decoded straight from
 * the store, int64 keys into a C array, or a cached Leaf's lists sliced), and lets the lock go; it
 * keeps only a key (where the next leaf starts) between two leaves, as
 * offheap.treemap.scan.RangeScan does, and a keys-only scan decodes no values. Made by
 * RangeItems(chunks, ...), it takes the leaves as (keys, values) lists from a _chunks generator
 * (values None for keys alone), as the reference does.
 *
 * Either way it hands out keys, values or (key, value) tuples, creating only those, and before
 * every item compares the map's version (getattr(source, name), an int that moves when the map
 * changes size, is reloaded or closed) with its value when the iteration began: once it moved,
 * the next step raises changed_error(), as a dict's iterator raises at the step after a change,
 * and the iteration is over (an error ends it, as it ends the reference's generator). The version
 * is read at its offset when it is a __slots__ member of the holder; when it is a plain entry of
 * the holder's __dict__, it is read there, and only when that dict changed since the last read
 * (its ma_version_tag, CPython 3.11). The walk checks the version again under the lock before
 * each leaf and after the last one, as the _chunks generator does. Values go out as the map
 * hands them out: a value whose type is not in scalar_types through fresh(value), for the whole
 * leaf before its first item (as Admission.fresh_many).
 *
 * Ownership: the current leaf's entries are this iterator's own (new lists, or words in its
 * buffer), so a change of the map cannot free or shift them under it; items are new references.
 * Thread safety: the GIL, and the map's lock for each leaf of a walk (taking it may give up the
 * GIL); a RangeItems used by two threads at once raises ValueError in the second, as a generator
 * does, rather than share its leaf.
 */
#include "pages.h"
#include "dicttag.h"
#include "pairs.h"

enum { WHAT_KEYS = 0, WHAT_VALUES = 1, WHAT_ITEMS = 2 };

typedef struct {
    PyObject_HEAD
    PyObject *chunks;        /* the (keys, values) iterator, NULL once exhausted or for a walk */
    PyObject *descent;       /* a walk's Descent, NULL once the walk ended */
    PyObject *acquire;       /* a walk: the map's lock's acquire() ... */
    PyObject *release;       /* ... and release() */
    PyObject *scalar_types;  /* a walk: values of these exact types go out as they are ... */
    PyObject *fresh;         /* ... others as fresh(value); NULL: every value as it is */
    ScanBounds bounds;       /* a walk's range, and where its next leaf starts */
    PyObject *source;        /* the version's holder ... */
    PyObject *name;          /* ... and its attribute */
    PyTypeObject *holder_type; /* the holder's type when the version is a __slots__ member ... */
    Py_ssize_t slot_offset;  /* ... kept at this offset in it; else -1 */
    PyObject *holder_dict;   /* the holder's __dict__ when the version is a plain entry of it */
    uint64_t dict_tag;       /* its ma_version_tag when the version last read the start value */
    PyObject *start;         /* the version when the iteration began */
    PyObject *changed_error; /* () -> the exception to raise once the version moved */
    ScanChunk chunk;         /* the current leaf's entries: keys (a list, or words) and values */
    Py_ssize_t next;         /* the position of the next item in the chunk */
    ItemPairs pairs;         /* the item tuples handed out last (pairs.h) */
    int what;
    int busy;                /* a walk is reading a leaf (and may have let the GIL go) */
} RangeItems;

/* 0 while the version is the one the iteration began with; -1 with the changed error set. */
static int
check_version(RangeItems *self)
{
    if (self->holder_dict != NULL && self->dict_tag != 0
            && dict_tag(self->holder_dict) == self->dict_tag)
        return 0; /* the holder's __dict__ has not changed since the version read the same */
    PyObject *now = NULL;
    if (self->slot_offset >= 0 && Py_TYPE(self->source) == self->holder_type)
        now = Py_XNewRef(*(PyObject **)((char *)self->source + self->slot_offset));
    else if (self->holder_dict != NULL)
        now = Py_XNewRef(PyDict_GetItemWithError(self->holder_dict, self->name));
    if (now == NULL && !PyErr_Occurred()) /* an unset slot raises its AttributeError here */
        now = PyObject_GetAttr(self->source, self->name);
    if (now == NULL)
        return -1;
    int same = now == self->start ? 1 : PyObject_RichCompareBool(now, self->start, Py_EQ);
    Py_DECREF(now);
    if (same > 0 && self->holder_dict != NULL)
        self->dict_tag = dict_tag(self->holder_dict);
    if (same != 0)
        return same < 0 ? -1 : 0;
    PyObject *error = PyObject_CallNoArgs(self->changed_error);
    if (error != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(error), error);
        Py_DECREF(error);
    }
    return -1;
}

static void
chunk_clear(RangeItems *self)
{
    Py_CLEAR(self->chunk.keys);
    Py_CLEAR(self->chunk.values);
    self->chunk.count = 0;
    self->next = 0;
}

/* Take the next chunk of the chunks iterator: 1 taken, 0 none left, -1 with an exception. */
static int
next_chunk(RangeItems *self)
{
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
    self->chunk.keys = Py_NewRef(PyTuple_GET_ITEM(chunk, 0));
    if (PyTuple_GET_ITEM(chunk, 1) != Py_None)
        self->chunk.values = Py_NewRef(PyTuple_GET_ITEM(chunk, 1));
    self->chunk.count = PyList_GET_SIZE(self->chunk.keys);
    Py_DECREF(chunk);
    return 1;
}

/* The chunk's values as the map hands them out: fresh(value) in place of each value whose type
 * is not one of scalar_types. */
static int
fresh_values(RangeItems *self)
{
    PyObject *values = self->chunk.values;
    if (self->fresh == NULL || values == NULL)
        return 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(values); i++) {
        PyObject *value = PyList_GET_ITEM(values, i), *type = (PyObject *)Py_TYPE(value);
        int scalar = 0;
        for (Py_ssize_t t = 0; !scalar && t < PyTuple_GET_SIZE(self->scalar_types); t++)
            scalar = PyTuple_GET_ITEM(self->scalar_types, t) == type;
        if (scalar)
            continue;
        PyObject *fresh = PyObject_CallOneArg(self->fresh, value);
        if (fresh == NULL || PyList_SetItem(values, i, fresh) < 0)
            return -1;
    }
    return 0;
}

/* One step of a walk under the map's lock: the version checked, then the next leaf read. */
static int
walk_step(RangeItems *self, int read)
{
    PyObject *release = lock_take(self->acquire, self->release);
    if (release == NULL)
        return -1;
    int status = check_version(self);
    if (status == 0 && read)
        status = descent_scan_leaf(self->descent, &self->bounds, self->what != WHAT_KEYS,
                                   &self->chunk);
    if (lock_give(release) < 0)
        status = -1;
    return status;
}

/* Read the walk's next leaf that holds entries of the range: 1 read, 0 none left (the version
 * checked once more), -1 with an exception. */
static int
next_leaf(RangeItems *self)
{
    if (self->descent == NULL)
        return 0;
    self->busy = 1;
    int status = 0;
    while (status == 0 && !self->bounds.done) {
        status = walk_step(self, 1);
        if (status == 0 && self->chunk.count > 0)
            status = fresh_values(self) < 0 ? -1 : 1;
    }
    if (status == 0 && (status = walk_step(self, 0)) == 0)
        Py_CLEAR(self->descent);
    self->busy = 0;
    return status;
}

/* The next item of the chunk, or of the next chunk; NULL with an exception, or at the end. */
static PyObject *
range_item(RangeItems *self)
{
    for (;;) {
        ScanChunk *chunk = &self->chunk;
        if (self->next < chunk->count) {
            if (check_version(self) < 0)
                return NULL;
            Py_ssize_t i = self->next;
            /* a version check may have run Python code: read the lists as they are now */
            if ((chunk->keys != NULL && i >= PyList_GET_SIZE(chunk->keys))
                    || (chunk->values != NULL && i >= PyList_GET_SIZE(chunk->values))) {
                chunk->count = i;
                continue;
            }
            self->next = i + 1;
            if (self->what == WHAT_VALUES)
                return Py_NewRef(PyList_GET_ITEM(chunk->values, i));
            PyObject *key = chunk->keys != NULL ? Py_NewRef(PyList_GET_ITEM(chunk->keys, i))
                            : PyLong_FromLongLong((int64_t)chunk->words[i]);
            if (key == NULL || self->what == WHAT_KEYS)
                return key;
            return item_pair(&self->pairs, key, Py_NewRef(PyList_GET_ITEM(chunk->values, i)));
        }
        chunk_clear(self);
        int taken = self->descent != NULL ? next_leaf(self) : next_chunk(self);
        if (taken <= 0)
            return NULL; /* the error, or the end (the version was checked after the last leaf) */
    }
}

/* The next item; after an error, as after the end, the iteration is over (StopIteration), as a
 * generator's is: the reference is one. */
static PyObject *
range_next(RangeItems *self)
{
    if (self->busy) {
        PyErr_SetString(PyExc_ValueError, "a TreeMap range iterator is already executing");
        return NULL;
    }
    PyObject *item = range_item(self);
    if (item == NULL) {
        Py_CLEAR(self->chunks);
        Py_CLEAR(self->descent);
        chunk_clear(self);
    }
    return item;
}

/* The version and what is handed out, common to both sources. */
static int
range_set(RangeItems *self, int what, PyObject *source, PyObject *name, PyObject *changed_error)
{
    if (what < WHAT_KEYS || what > WHAT_ITEMS) {
        PyErr_Format(PyExc_ValueError, "RangeItems: what is 0, 1 or 2, not %d", what);
        return -1;
    }
    PyObject *start = PyObject_GetAttr(source, name);
    if (start == NULL)
        return -1;
    /* A __slots__ member is read at its offset; an attribute that no class attribute (a
     * property, a slot) stands for is the entry of the holder's __dict__. Read there, the check
     * of every item skips the attribute machinery. */
    Py_CLEAR(self->holder_dict);
    self->dict_tag = 0;
    Py_XSETREF(self->holder_type, (PyTypeObject *)Py_NewRef(Py_TYPE(source)));
    self->slot_offset = member_offset(Py_TYPE(source), name);
    if (self->slot_offset < 0 && _PyType_Lookup(Py_TYPE(source), name) == NULL) {
        PyObject *dict = PyObject_GenericGetDict(source, NULL);
        if (dict != NULL && PyDict_CheckExact(dict) && PyDict_GetItemWithError(dict, name) == start)
            self->holder_dict = Py_NewRef(dict);
        Py_XDECREF(dict);
        PyErr_Clear();
    }
    Py_XSETREF(self->source, Py_NewRef(source));
    Py_XSETREF(self->name, Py_NewRef(name));
    Py_XSETREF(self->start, start);
    Py_XSETREF(self->changed_error, Py_NewRef(changed_error));
    chunk_clear(self);
    self->what = what;
    return 0;
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
    if (self->busy || self->descent != NULL) {
        PyErr_SetString(PyExc_ValueError, "RangeItems: a walk cannot be initialized again");
        return -1;
    }
    PyObject *iterator = PyObject_GetIter(chunks);
    if (iterator == NULL)
        return -1;
    if (range_set(self, what, source, name, changed_error) < 0) {
        Py_DECREF(iterator);
        return -1;
    }
    Py_XSETREF(self->chunks, iterator);
    return 0;
}

static int
range_traverse(RangeItems *self, visitproc visit, void *arg)
{
    Py_VISIT(self->chunks);
    Py_VISIT(self->descent);
    Py_VISIT(self->acquire);
    Py_VISIT(self->release);
    Py_VISIT(self->scalar_types);
    Py_VISIT(self->fresh);
    Py_VISIT(self->bounds.lo);
    Py_VISIT(self->bounds.hi);
    Py_VISIT(self->bounds.seek);
    Py_VISIT(self->source);
    Py_VISIT(self->name);
    Py_VISIT(self->holder_type);
    Py_VISIT(self->holder_dict);
    Py_VISIT(self->start);
    Py_VISIT(self->changed_error);
    Py_VISIT(self->chunk.keys);
    Py_VISIT(self->chunk.values);
    return item_pairs_traverse(&self->pairs, visit, arg);
}

static int
range_clear(RangeItems *self)
{
    Py_CLEAR(self->chunks);
    Py_CLEAR(self->descent);
    Py_CLEAR(self->acquire);
    Py_CLEAR(self->release);
    Py_CLEAR(self->scalar_types);
    Py_CLEAR(self->fresh);
    Py_CLEAR(self->bounds.lo);
    Py_CLEAR(self->bounds.hi);
    Py_CLEAR(self->bounds.seek);
    Py_CLEAR(self->source);
    Py_CLEAR(self->name);
    Py_CLEAR(self->holder_type);
    Py_CLEAR(self->holder_dict);
    Py_CLEAR(self->start);
    Py_CLEAR(self->changed_error);
    Py_CLEAR(self->chunk.keys);
    Py_CLEAR(self->chunk.values);
    item_pairs_clear(&self->pairs);
    self->chunk.count = 0;
    return 0;
}

static void
range_dealloc(RangeItems *self)
{
    PyObject_GC_UnTrack(self);
    range_clear(self);
    PyMem_Free(self->chunk.words);
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

PyObject *
range_scan(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"descent", "lock", "lo", "hi", "lo_inclusive", "hi_inclusive",
                            "reverse", "what", "source", "name", "changed_error",
                            "scalar_types", "fresh", NULL};
    PyObject *descent, *lock, *lo, *hi, *source, *name, *changed_error, *scalar_types, *fresh;
    int lo_inclusive, hi_inclusive, reverse, what;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOpppiOUOO!O:scan", names, &descent, &lock,
                                     &lo, &hi, &lo_inclusive, &hi_inclusive, &reverse, &what,
                                     &source, &name, &changed_error, &PyTuple_Type, &scalar_types,
                                     &fresh))
        return NULL;
    if (!is_descent(descent)) {
        PyErr_SetString(PyExc_TypeError, "scan: descent is a _pages.Descent");
        return NULL;
    }
    RangeItems *self = PyObject_GC_New(RangeItems, &range_type);
    if (self == NULL)
        return NULL;
    memset((char *)self + sizeof(PyObject), 0, sizeof(RangeItems) - sizeof(PyObject));
    PyObject_GC_Track(self);
    if (range_set(self, what, source, name, changed_error) < 0
            || (self->acquire = PyObject_GetAttrString(lock, "acquire")) == NULL
            || (self->release = PyObject_GetAttrString(lock, "release")) == NULL
            || (self->chunk.words = PyMem_Malloc(sizeof(uint64_t) * PAGE_MAX_ENTRIES)) == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        Py_DECREF(self);
        return NULL;
    }
    self->descent = Py_NewRef(descent);
    self->scalar_types = Py_NewRef(scalar_types);
    self->fresh = fresh == Py_None ? NULL : Py_NewRef(fresh);
    self->bounds.lo = lo == Py_None ? NULL : Py_NewRef(lo);
    self->bounds.hi = hi == Py_None ? NULL : Py_NewRef(hi);
    self->bounds.lo_inclusive = lo_inclusive;
    self->bounds.hi_inclusive = hi_inclusive;
    self->bounds.reverse = reverse;
    self->bounds.seek = Py_XNewRef(reverse ? self->bounds.hi : self->bounds.lo);
    self->bounds.seek_inclusive = reverse ? hi_inclusive : lo_inclusive;
    return (PyObject *)self;
}

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
