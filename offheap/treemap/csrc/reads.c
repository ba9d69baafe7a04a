/* offheap.treemap._pages.TreeReads: the base type whose slots answer a TreeMap's m[k], `k in m`
 * and m.get(k, default) (layer 6), the twin of offheap.treemap.reads.TreeReads.
 *
 * Why a base type. A Python-level __getitem__ costs a frame, an RLock acquire and release
 * through method calls and half a dozen attribute loads: more than the compiled descent itself.
 * Here the mapping and sequence slots run the whole lookup in C: take the map's lock, run the
 * Descent over the shape the Tree last gave it, release the lock, and hand the value out fresh.
 *
 * Attachment. The map attaches what a lookup needs (_attach_reads: its lock's acquire and
 * release, the Descent, the NodeCache, the key type, the types handed out as they are and the
 * function that copies the others) once it is set up, and detaches it (_detach_reads) when it
 * closes. Everything the fast path cannot answer goes to the map's Python _lookup, the reference:
 * a detached (closed or half-built) map, a key not exactly of the key type, a node cache over
 * capacity (whose trim _lookup runs). So the answers, and the errors, are _lookup's.
 *
 * Thread safety. The lock is held from before the Descent runs until after it returned; taking
 * it may give up the GIL, so the attachment is read again after it (a close in between sends
 * the call to _lookup, which raises ClosedError). References to what the call uses are held
 * for the call, so a detach during it (the same thread, re-entering through the node cache)
 * frees nothing in use.
 */
#include "pages.h"

typedef struct {
    PyObject_HEAD
    PyObject *acquire;      /* the lock's bound acquire(), or NULL while detached */
    PyObject *release;      /* its release() */
    PyObject *descent;      /* the Tree's Descent */
    PyObject *cache;        /* the Tree's NodeCache: over_capacity */
    PyObject *key_type;     /* keys of exactly this type take the fast path */
    PyObject *scalar_types; /* a tuple: values of these exact types are handed out as they are */
    PyObject *fresh;        /* fresh(value): any other value, unpickled into a copy */
} TreeReads;

static PyObject *str_lookup, *str_over_capacity, *missing;

/* The reference path: self._lookup(key, dflt, stored). */
static PyObject *
slow_lookup(TreeReads *self, PyObject *key, PyObject *dflt, int stored)
{
    PyObject *args[] = {(PyObject *)self, key, dflt, stored ? Py_True : Py_False};
    return PyObject_VectorcallMethod(str_lookup, args, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

static int
is_scalar(PyObject *types, PyObject *value)
{
    PyObject *type = (PyObject *)Py_TYPE(value);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(types); i++)
        if (PyTuple_GET_ITEM(types, i) == type)
            return 1;
    return 0;
}

/* The value of `key`, or a new reference to `dflt`: as the leaf holds it with `stored` (a
 * membership test), else fresh. */
static PyObject *
reads_lookup(TreeReads *self, PyObject *key, PyObject *dflt, int stored)
{
    if (self->acquire == NULL || (PyObject *)Py_TYPE(key) != self->key_type)
        return slow_lookup(self, key, dflt, stored);
    PyObject *release = Py_NewRef(self->release);
    PyObject *taken = PyObject_CallNoArgs(self->acquire);
    if (taken == NULL) {
        Py_DECREF(release);
        return NULL;
    }
    Py_DECREF(taken);
    PyObject *value = NULL, *descent = NULL, *fresh = NULL, *scalar_types = NULL;
    int slow = self->acquire == NULL; /* closed while the lock was awaited */
    if (!slow) {
        descent = Py_NewRef(self->descent);
        fresh = Py_NewRef(self->fresh);
        scalar_types = Py_NewRef(self->scalar_types);
        PyObject *over = PyObject_GetAttr(self->cache, str_over_capacity);
        slow = over == NULL ? -1 : PyObject_IsTrue(over);
        Py_XDECREF(over);
        if (slow == 0)
            value = descent_lookup(descent, key, missing);
    }
    PyObject *type, *error, *traceback;
    PyErr_Fetch(&type, &error, &traceback);
    PyObject *released = PyObject_CallNoArgs(release);
    Py_DECREF(release);
    if (released == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(error);
        Py_XDECREF(traceback);
        Py_CLEAR(value);
    }
    else {
        Py_DECREF(released);
        PyErr_Restore(type, error, traceback);
    }
    if (released != NULL && slow > 0)
        value = slow_lookup(self, key, dflt, stored);
    else if (value == missing) {
        Py_SETREF(value, Py_NewRef(dflt));
    }
    else if (value != NULL && !stored && !is_scalar(scalar_types, value))
        Py_SETREF(value, PyObject_CallOneArg(fresh, value));
    Py_XDECREF(descent);
    Py_XDECREF(fresh);
    Py_XDECREF(scalar_types);
    return value;
}

/* TypeError unless min_args <= nargs <= max_args. */
static int
check_positional(const char *name, Py_ssize_t nargs, Py_ssize_t min_args, Py_ssize_t max_args)
{
    if (nargs >= min_args && nargs <= max_args)
        return 0;
    PyErr_Format(PyExc_TypeError, "%s expected %zd to %zd arguments, got %zd", name, min_args,
                 max_args, nargs);
    return -1;
}

static PyObject *
reads_subscript(TreeReads *self, PyObject *key)
{
    PyObject *value = reads_lookup(self, key, missing, 0);
    if (value != missing)
        return value;
    Py_DECREF(value);
    PyObject *args = PyTuple_Pack(1, key); /* a tuple key must not become the args */
    if (args != NULL) {
        PyErr_SetObject(PyExc_KeyError, args);
        Py_DECREF(args);
    }
    return NULL;
}

static int
reads_contains(TreeReads *self, PyObject *key)
{
    PyObject *value = reads_lookup(self, key, missing, 1);
    if (value == NULL)
        return -1;
    Py_DECREF(value);
    return value != missing;
}

PyDoc_STRVAR(get_doc,
"get(key, default=None, /)\n--\n\n"
"The value of key if the map holds it, else default.");

static PyObject *
reads_get(TreeReads *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_positional("get", nargs, 1, 2) < 0)
        return NULL;
    return reads_lookup(self, args[0], nargs > 1 ? args[1] : Py_None, 0);
}

static void
reads_detach(TreeReads *self)
{
    Py_CLEAR(self->acquire);
    Py_CLEAR(self->release);
    Py_CLEAR(self->descent);
    Py_CLEAR(self->cache);
    Py_CLEAR(self->key_type);
    Py_CLEAR(self->scalar_types);
    Py_CLEAR(self->fresh);
}

PyDoc_STRVAR(attach_doc,
"_attach_reads(lock, descent, cache, key_type, scalar_types, fresh)\n--\n\n"
"Answer lookups of keys of exactly key_type in C, under lock, through the Descent (whose shape\n"
"the Tree keeps current) unless the NodeCache is over capacity; values of the scalar_types\n"
"tuple as they are, others through fresh(value).");

static PyObject *
reads_attach(TreeReads *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_positional("_attach_reads", nargs, 6, 6) < 0)
        return NULL;
    if (!is_descent(args[1]) || !PyType_Check(args[3]) || !PyTuple_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "_attach_reads takes a lock, a Descent, a NodeCache, a type, a tuple of "
                        "types and a function");
        return NULL;
    }
    PyObject *acquire = PyObject_GetAttrString(args[0], "acquire");
    PyObject *release = acquire == NULL ? NULL : PyObject_GetAttrString(args[0], "release");
    if (release == NULL) {
        Py_XDECREF(acquire);
        return NULL;
    }
    reads_detach(self);
    self->acquire = acquire;
    self->release = release;
    self->descent = Py_NewRef(args[1]);
    self->cache = Py_NewRef(args[2]);
    self->key_type = Py_NewRef(args[3]);
    self->scalar_types = Py_NewRef(args[4]);
    self->fresh = Py_NewRef(args[5]);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(detach_doc,
"_detach_reads()\n--\n\n"
"Send every lookup to _lookup again (the map is closing).");

static PyObject *
reads_detach_method(TreeReads *self, PyObject *Py_UNUSED(ignored))
{
    reads_detach(self);
    Py_RETURN_NONE;
}

static int
reads_traverse(TreeReads *self, visitproc visit, void *arg)
{
    Py_VISIT(self->acquire);
    Py_VISIT(self->release);
    Py_VISIT(self->descent);
    Py_VISIT(self->cache);
    Py_VISIT(self->key_type);
    Py_VISIT(self->scalar_types);
    Py_VISIT(self->fresh);
    return 0;
}

static int
reads_clear(TreeReads *self)
{
    reads_detach(self);
    return 0;
}

static void
reads_dealloc(TreeReads *self)
{
    PyObject_GC_UnTrack(self);
    reads_detach(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef reads_methods[] = {
    {"get", (PyCFunction)(void (*)(void))reads_get, METH_FASTCALL, get_doc},
    {"_attach_reads", (PyCFunction)(void (*)(void))reads_attach, METH_FASTCALL, attach_doc},
    {"_detach_reads", (PyCFunction)reads_detach_method, METH_NOARGS, detach_doc},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods reads_mapping = {
    .mp_subscript = (binaryfunc)reads_subscript,
};

static PySequenceMethods reads_sequence = {
    .sq_contains = (objobjproc)reads_contains,
};

PyDoc_STRVAR(reads_doc,
"The read slots of a TreeMap: m[k], k in m and m.get(k, default) in C (see reads.c).");

static PyTypeObject reads_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "offheap.treemap._pages.TreeReads",
    .tp_basicsize = sizeof(TreeReads),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = reads_doc,
    .tp_new = PyType_GenericNew,
    .tp_traverse = (traverseproc)reads_traverse,
    .tp_clear = (inquiry)reads_clear,
    .tp_dealloc = (destructor)reads_dealloc,
    .tp_methods = reads_methods,
    .tp_as_mapping = &reads_mapping,
    .tp_as_sequence = &reads_sequence,
};

int
add_reads_type(PyObject *module)
{
    if (str_lookup == NULL && (str_lookup = PyUnicode_InternFromString("_lookup")) == NULL)
        return -1;
    if (str_over_capacity == NULL
            && (str_over_capacity = PyUnicode_InternFromString("over_capacity")) == NULL)
        return -1;
    if (missing == NULL && (missing = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type)) == NULL)
        return -1;
    if (PyType_Ready(&reads_type) < 0)
        return -1;
    Py_INCREF(&reads_type);
    if (PyModule_AddObject(module, "TreeReads", (PyObject *)&reads_type) < 0) {
        Py_DECREF(&reads_type);
        return -1;
    }
    return 0;
}
