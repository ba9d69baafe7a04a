/* offheap.treemap._pages.walk: the inner levels of a change's descent (layer 6).
 *
 * The twin of the loop of offheap.treemap.cursor.Cursor.descend: from the root down through
 * `levels` inner nodes, at each one bisect_right of the key in its separators (Python's `<`,
 * as the bisect module orders), recording the (node, child index) path and the nearest
 * separators left and right of it. Nodes are read as NodeCache.inner reads them: a cached one
 * (in the cache's OrderedDict) moves to the end of the LRU order, a missing one is decoded and
 * cached by calling cache.inner(recid) itself. Unlike the read-only Descent (descent.c) it
 * works on the Inner objects, so what it records is what a change then edits.
 *
 * A node whose lists do not agree (fewer children than the bisect needs) raises CorruptionError.
 * Thread safety: none of its own; the tree's lock covers every call (the GIL is held).
 */
#include "pages.h"

static SlotField walk_keys = SLOT_FIELD("keys"), walk_children = SLOT_FIELD("children");
static PyObject *str_move_to_end, *bisect_right_function;

/* The inner node `recid` (a new reference): as NodeCache.inner returns it. */
static PyObject *
walk_inner(PyObject *inner_nodes, PyObject *inner_of, PyObject *recid)
{
    PyObject *node = PyDict_GetItemWithError(inner_nodes, recid);
    if (node == NULL)
        return PyErr_Occurred() ? NULL : PyObject_CallOneArg(inner_of, recid);
    Py_INCREF(node);
    PyObject *moved = PyObject_CallMethodOneArg(inner_nodes, str_move_to_end, recid);
    if (moved == NULL) {
        Py_DECREF(node);
        return NULL;
    }
    Py_DECREF(moved);
    return node;
}

/* bisect.bisect_right(items, key) (the bisect module's own, so the order is exactly
 * Python's); -1 on error. */
static Py_ssize_t
bisect_right_list(PyObject *items, PyObject *key)
{
    if (bisect_right_function == NULL) {
        PyObject *bisect = PyImport_ImportModule("bisect");
        if (bisect == NULL)
            return -1;
        bisect_right_function = PyObject_GetAttrString(bisect, "bisect_right");
        Py_DECREF(bisect);
        if (bisect_right_function == NULL)
            return -1;
    }
    PyObject *args[] = {items, key};
    PyObject *index = PyObject_Vectorcall(bisect_right_function, args, 2, NULL);
    if (index == NULL)
        return -1;
    Py_ssize_t i = PyLong_AsSsize_t(index);
    Py_DECREF(index);
    return i;
}

/* One level: append (node, i) to `path`, move `*lo`, `*hi` and `*recid` (strong references). */
static int
walk_level(PyObject *node, PyObject *key, PyObject *path, PyObject **lo, PyObject **hi,
           PyObject **recid)
{
    PyObject *separators = node_list(node, &walk_keys), *children = NULL, *step = NULL;
    int status = -1;
    if (separators == NULL || (children = node_list(node, &walk_children)) == NULL)
        goto done;
    Py_ssize_t i = bisect_right_list(separators, key);
    if (i < 0)
        goto done;
    if (i >= PyList_GET_SIZE(children)) {
        page_corrupt("a TreeMap inner node has %zd children and %zd separators",
                     PyList_GET_SIZE(children), PyList_GET_SIZE(separators));
        goto done;
    }
    if ((step = Py_BuildValue("(On)", node, i)) == NULL || PyList_Append(path, step) < 0)
        goto done;
    if (i)
        Py_XSETREF(*lo, Py_NewRef(PyList_GET_ITEM(separators, i - 1)));
    if (i < PyList_GET_SIZE(separators))
        Py_XSETREF(*hi, Py_NewRef(PyList_GET_ITEM(separators, i)));
    Py_XSETREF(*recid, Py_NewRef(PyList_GET_ITEM(children, i)));
    status = 0;
done:
    Py_XDECREF(step);
    Py_XDECREF(children);
    Py_XDECREF(separators);
    return status;
}

PyObject *
walk(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "walk(inner_nodes, inner_of, root, levels, key) takes 5 arguments");
        return NULL;
    }
    PyObject *inner_nodes = args[0], *inner_of = args[1], *key = args[4];
    if (!PyDict_Check(inner_nodes)) {
        PyErr_SetString(PyExc_TypeError, "walk: inner_nodes must be the node cache's dict");
        return NULL;
    }
    Py_ssize_t levels = PyLong_AsSsize_t(args[3]);
    if (levels == -1 && PyErr_Occurred())
        return NULL;
    if (str_move_to_end == NULL
            && (str_move_to_end = PyUnicode_InternFromString("move_to_end")) == NULL)
        return NULL;
    PyObject *path = PyList_New(0), *lo = Py_NewRef(Py_None), *hi = Py_NewRef(Py_None);
    PyObject *recid = Py_NewRef(args[2]), *result = NULL;
    if (path == NULL)
        goto done;
    for (Py_ssize_t level = 0; level < levels; level++) {
        PyObject *node = walk_inner(inner_nodes, inner_of, recid);
        if (node == NULL)
            goto done;
        int status = walk_level(node, key, path, &lo, &hi, &recid);
        Py_DECREF(node);
        if (status < 0)
            goto done;
    }
    result = PyTuple_Pack(4, path, lo, hi, recid);
done:
    Py_XDECREF(path);
    Py_DECREF(lo);
    Py_DECREF(hi);
    Py_DECREF(recid);
    return result;
}
