/* The key columns of decoded leaves (layer 6): an array('q') of int64 keys, a list of str or
 * bytes keys, as offheap.treemap.page.key_column makes them.
 *
 * An int64 leaf keeps its keys as an array('q'), 8 bytes a key, where a list holds a pointer and
 * an int object of 32 bytes: a cached leaf costs about a quarter of the heap, and the C paths
 * bisect its words with no int object per probe. The array type is the standard library's;
 * its words are read through the buffer protocol (KeyWords: the buffer is held only for the
 * read, as the array refuses to resize while a buffer is exported), and it is changed through
 * the sequence protocol and its own insert method, so this code depends on no private layout.
 *
 * Everything here runs with the GIL held. Functions returning int return 0 on success and -1 with
 * an exception set.
 */
#include "pages.h"

static PyObject *array_type;  /* array.array, strong, for the life of the process */
static PyObject *int64_typecode;
static PyObject *array_insert;  /* array.array.insert, the method descriptor: no lookup per call */

int
init_key_columns(void)
{
    if (array_type != NULL)
        return 0;
    PyObject *module = PyImport_ImportModule("array");
    if (module == NULL)
        return -1;
    array_type = PyObject_GetAttrString(module, "array");
    Py_DECREF(module);
    if (array_type == NULL || (int64_typecode = PyUnicode_InternFromString("q")) == NULL
            || (array_insert = PyObject_GetAttrString(array_type, "insert")) == NULL)
        return -1;
    return 0;
}

int
is_int64_column(PyObject *column)
{
    return Py_IS_TYPE(column, (PyTypeObject *)array_type);
}

PyObject *
new_int64_column(const uint64_t *words, Py_ssize_t count)
{
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)words,
                                               count * (Py_ssize_t)sizeof *words);
    if (bytes == NULL)
        return NULL;
    PyObject *column = PyObject_CallFunctionObjArgs(array_type, int64_typecode, bytes, NULL);
    Py_DECREF(bytes);
    return column;
}

int
key_words_open(PyObject *column, KeyWords *out)
{
    if (!is_int64_column(column)) {
        page_corrupt("a TreeMap leaf's int64 keys are a %.100s, not an array('q')",
                     Py_TYPE(column)->tp_name);
        return -1;
    }
    if (PyObject_GetBuffer(column, &out->view, PyBUF_FORMAT) < 0)
        return -1;
    if (out->view.itemsize != (Py_ssize_t)sizeof(int64_t) || out->view.format == NULL
            || strcmp(out->view.format, "q") != 0) {
        PyBuffer_Release(&out->view);
        page_corrupt("a TreeMap leaf's int64 keys are an array of another type than 'q'");
        return -1;
    }
    out->words = out->view.buf;
    out->count = out->view.len / (Py_ssize_t)sizeof(int64_t);
    return 0;
}

void
key_words_close(KeyWords *words)
{
    PyBuffer_Release(&words->view);
    words->words = NULL;
    words->count = 0;
}

Py_ssize_t
key_column_size(PyObject *column)
{
    return PyList_CheckExact(column) ? PyList_GET_SIZE(column) : PySequence_Size(column);
}

PyObject *
key_column_item(PyObject *column, Py_ssize_t i)
{
    if (PyList_CheckExact(column)) {
        if (i < 0 || i >= PyList_GET_SIZE(column)) {
            PyErr_SetString(PyExc_IndexError, "TreeMap leaf key index out of range");
            return NULL;
        }
        return Py_NewRef(PyList_GET_ITEM(column, i));
    }
    return PySequence_GetItem(column, i);
}

int
key_column_insert(PyObject *column, Py_ssize_t at, PyObject *key)
{
    if (PyList_CheckExact(column))
        return PyList_Insert(column, at, key);
    PyObject *where = PyLong_FromSsize_t(at);
    if (where == NULL)
        return -1;
    PyObject *args[] = {column, where, key};
    PyObject *done = PyObject_Vectorcall(array_insert, args, 3, NULL);
    Py_DECREF(where);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}
