/* sparkey._native.LookupSlots: the base type whose slots answer a reader's r[k] and `k in r`,
 * the twin of sparkey.lookup.LookupSlots.
 *
 * A Python-level __getitem__ costs a frame and two attribute loads before the Lookup's C code
 * runs: about as much as the lookup itself in a store that fits the page cache. A reader on the
 * compiled core attaches its Lookup (_attach_lookup) and the mapping and sequence slots call it
 * directly; a reader without one (the reference, or a reader of several stores) keeps the
 * reference's behaviour: every lookup goes through its `_lookup(key)` (bytes, or None when
 * absent). The Lookup itself raises ClosedError once its reader closed it, so the slots need
 * no state of their own besides the reference they hold, which keeps the Lookup alive.
 */
#include "native.h"

typedef struct {
    PyObject_HEAD
    PyObject *lookup; /* the reader's Lookup, or NULL: the reader's _lookup answers */
} slots_object;

static PyObject *str_lookup;

/* The value of `key`: bytes (or, with found_only, any object but None), None when absent,
 * NULL on error. */
static PyObject *slots_value(slots_object *self, PyObject *key, int found_only)
{
    if (self->lookup) {
        PyObject *lookup = Py_NewRef(self->lookup);
        PyObject *value = sparkey_lookup_value(lookup, key, found_only);
        Py_DECREF(lookup);
        return value;
    }
    PyObject *args[] = {(PyObject *)self, key};
    return PyObject_VectorcallMethod(str_lookup, args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

static PyObject *slots_subscript(PyObject *op, PyObject *key)
{
    PyObject *value = slots_value((slots_object *)op, key, 0);
    if (value != Py_None)
        return value;
    Py_DECREF(value);
    PyObject *args = PyTuple_Pack(1, key); /* a tuple key must not become the args */
    if (args) {
        PyErr_SetObject(PyExc_KeyError, args);
        Py_DECREF(args);
    }
    return NULL;
}

static int slots_contains(PyObject *op, PyObject *key)
{
    PyObject *value = slots_value((slots_object *)op, key, 1);
    if (!value)
        return -1;
    Py_DECREF(value);
    return value != Py_None;
}

PyDoc_STRVAR(attach_doc,
"_attach_lookup($self, lookup, /)\n--\n\n"
"Answer r[k] and `k in r` through this Lookup from now on.");

static PyObject *slots_attach(PyObject *op, PyObject *lookup)
{
    if (!sparkey_is_lookup(lookup)) {
        PyErr_Format(PyExc_TypeError, "_attach_lookup takes a sparkey._native.Lookup, not %.100s",
                     Py_TYPE(lookup)->tp_name);
        return NULL;
    }
    Py_XSETREF(((slots_object *)op)->lookup, Py_NewRef(lookup));
    Py_RETURN_NONE;
}

static int slots_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(((slots_object *)op)->lookup);
    return 0;
}

static int slots_clear(PyObject *op)
{
    Py_CLEAR(((slots_object *)op)->lookup);
    return 0;
}

static void slots_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    slots_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyMethodDef slots_methods[] = {
    {"_attach_lookup", slots_attach, METH_O, attach_doc},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods slots_mapping = {.mp_subscript = slots_subscript};
static PySequenceMethods slots_sequence = {.sq_contains = slots_contains};

static PyTypeObject slots_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sparkey._native.LookupSlots",
    .tp_basicsize = sizeof(slots_object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The read slots of a sparkey reader: r[k] and `k in r` (see csrc/slots.c).",
    .tp_new = PyType_GenericNew,
    .tp_traverse = slots_traverse,
    .tp_clear = slots_clear,
    .tp_dealloc = slots_dealloc,
    .tp_methods = slots_methods,
    .tp_as_mapping = &slots_mapping,
    .tp_as_sequence = &slots_sequence,
};

int sparkey_add_slots_type(PyObject *module)
{
    if (!str_lookup && !(str_lookup = PyUnicode_InternFromString("_lookup")))
        return -1;
    if (PyType_Ready(&slots_type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "LookupSlots", (PyObject *)&slots_type);
}
