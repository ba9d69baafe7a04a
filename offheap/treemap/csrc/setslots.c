/* offheap.treemap._pages.SetSlots: the base type whose slots run a TreeSet's `x in s`, len(s),
 * s.add(x), s.discard(x) and s.remove(x) (layer 6), the twin of
 * offheap.treemap.setslots.SetSlots (the reference).
 *
 * Why a base type. A TreeSet keeps its elements as the keys of a TreeMap (its `_tree`) whose
 * values are all b"". A Python-level method costs a frame and two attribute loads before it
 * reaches the tree's own compiled slots (slots.c); here each operation is C calls into those
 * slots: `x in s` is the tree's sq_contains, remove its deletion; add is one store of b"" that
 * keeps a present key (slots_put_absent: an element already present is not stored again, which
 * would dirty its leaf and write its page, and one walk serves both cases, its LRU moves held
 * until the element is known absent: around.c's kept_present);
 * discard first tests membership, as SortedSet does, and deletes only when the element is
 * there, so an absent one is not looked for by a deletion (the tree's Python path). A KeyError
 * from the deletion of a discard (another thread removed the element in between) ends it
 * quietly. Everything else is the tree's: its lock, its fast paths and the Python methods they
 * fall back to, so the answers and the errors are the reference's.
 *
 * Ownership: `_tree` is a strong reference, set once by the TreeSet (a member, as the reference's
 * __slots__ entry); a call holds it for its duration, so a reassignment meanwhile frees nothing
 * in use. Unset, every operation raises the AttributeError the reference's `self._tree` raises.
 * Thread safety: the tree's.
 */
#include "slots.h"

#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject *tree;         /* the TreeMap, or NULL before the TreeSet sets it */
} SetSlots;

static PyObject *no_value;  /* b"", every element's value */

/* A new reference to the set's tree, or NULL with AttributeError. */
static PyObject *
set_tree(const SetSlots *self)
{
    if (self->tree == NULL) {
        PyErr_Format(PyExc_AttributeError, "'%.100s' object has no attribute '_tree'",
                     Py_TYPE(self)->tp_name);
        return NULL;
    }
    return Py_NewRef(self->tree);
}

static Py_ssize_t
set_length(SetSlots *self)
{
    PyObject *tree = set_tree(self);
    if (tree == NULL)
        return -1;
    Py_ssize_t length = PyObject_Size(tree);
    Py_DECREF(tree);
    return length;
}

static int
set_contains(SetSlots *self, PyObject *element)
{
    PyObject *tree = set_tree(self);
    if (tree == NULL)
        return -1;
    int found = PySequence_Contains(tree, element);
    Py_DECREF(tree);
    return found;
}

PyDoc_STRVAR(add_doc,
"add(element, /)\n--\n\n"
"Add element (a TypeError if no element of the set's type can equal it).");

static PyObject *
set_add(SetSlots *self, PyObject *element)
{
    PyObject *tree = set_tree(self);
    if (tree == NULL)
        return NULL;
    int stored = slots_put_absent(tree, element, no_value);
    Py_DECREF(tree);
    if (stored < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* del tree[element]: 1 removed, 0 absent (with `absent_ok`, else KeyError), -1 with an
 * exception. With `absent_ok` an absent element is found by a lookup, not by a deletion, and a
 * KeyError of the deletion (the element went in between) is an absent element too. */
static int
set_delete(SetSlots *self, PyObject *element, int absent_ok)
{
    PyObject *tree = set_tree(self);
    if (tree == NULL)
        return -1;
    int found = absent_ok ? PySequence_Contains(tree, element) : 1;
    if (found > 0 && PyObject_DelItem(tree, element) < 0)
        found = absent_ok && PyErr_ExceptionMatches(PyExc_KeyError) ? 0 : -1;
    Py_DECREF(tree);
    if (found == 0)
        PyErr_Clear();  /* the deletion's KeyError, if any */
    return found;
}

PyDoc_STRVAR(discard_doc,
"discard(element, /)\n--\n\n"
"Remove element if it is present.");

static PyObject *
set_discard(SetSlots *self, PyObject *element)
{
    if (set_delete(self, element, 1) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(remove_doc,
"remove(element, /)\n--\n\n"
"Remove element; KeyError if it is not present.");

static PyObject *
set_remove(SetSlots *self, PyObject *element)
{
    if (set_delete(self, element, 0) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static int
set_traverse(SetSlots *self, visitproc visit, void *arg)
{
    Py_VISIT(self->tree);
    return 0;
}

static int
set_clear(SetSlots *self)
{
    Py_CLEAR(self->tree);
    return 0;
}

static void
set_dealloc(SetSlots *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->tree);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef set_methods[] = {
    {"add", (PyCFunction)set_add, METH_O, add_doc},
    {"discard", (PyCFunction)set_discard, METH_O, discard_doc},
    {"remove", (PyCFunction)set_remove, METH_O, remove_doc},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef set_members[] = {
    {"_tree", T_OBJECT_EX, offsetof(SetSlots, tree), 0, "The TreeMap whose keys are the elements."},
    {NULL, 0, 0, 0, NULL},
};

static PySequenceMethods set_sequence = {
    .sq_length = (lenfunc)set_length,
    .sq_contains = (objobjproc)set_contains,
};

PyDoc_STRVAR(set_doc,
"The element slots of a TreeSet: x in s, len(s), s.add(x), s.discard(x) and s.remove(x)\n"
"(see offheap/treemap/csrc/setslots.c).");

static PyTypeObject set_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "offheap.treemap._pages.SetSlots",
    .tp_basicsize = sizeof(SetSlots),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = set_doc,
    .tp_new = PyType_GenericNew,
    .tp_traverse = (traverseproc)set_traverse,
    .tp_clear = (inquiry)set_clear,
    .tp_dealloc = (destructor)set_dealloc,
    .tp_methods = set_methods,
    .tp_members = set_members,
    .tp_as_sequence = &set_sequence,
};

int
add_set_slots_type(PyObject *module)
{
    if (no_value == NULL && (no_value = PyBytes_FromStringAndSize(NULL, 0)) == NULL)
        return -1;
    if (PyType_Ready(&set_type) < 0)
        return -1;
    Py_INCREF(&set_type);
    if (PyModule_AddObject(module, "SetSlots", (PyObject *)&set_type) < 0) {
        Py_DECREF(&set_type);
        return -1;
    }
    return 0;
}
