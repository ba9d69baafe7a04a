/* Argument handling shared by the functions of sparkey._native (runs with the GIL held).
 *
 * Integers are checked into range with messages naming the argument; arrays come through the
 * buffer protocol with their item size and kind checked; keys and values are taken as
 * sparkey.format.entry_bytes takes them. Every Py_buffer filled here is released by the caller
 * with sparkey_release, on every path. Each function is documented in native.h.
 */
#include "native.h"

void sparkey_release(Py_buffer *view)
{
    if (view->obj)
        PyBuffer_Release(view);
}

int sparkey_check_nargs(const char *name, Py_ssize_t nargs, Py_ssize_t low, Py_ssize_t high)
{
    if (nargs >= low && nargs <= high)
        return 0;
    PyErr_Format(PyExc_TypeError, "%s() takes %zd to %zd positional arguments (%zd given)",
                 name, low, high, nargs);
    return -1;
}

int sparkey_as_u64(PyObject *obj, const char *name, uint64_t *out)
{
#if ULONG_MAX == UINT64_MAX
    *out = PyLong_AsUnsignedLong(obj);  /* no detour through a byte array for multi-digit ints */
#else
    *out = PyLong_AsUnsignedLongLong(obj);
#endif
    if (*out == (uint64_t)-1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s must be an int in [0, 2**64), not %R", name, obj);
        }
        return -1;
    }
    return 0;
}

int sparkey_as_seed(PyObject *obj, uint32_t *seed)
{
    uint64_t value;
    if (sparkey_as_u64(obj, "seed", &value) < 0)
        return -1;
    if (value >> 32) {
        PyErr_Format(PyExc_ValueError, "seed must be an int in [0, 2**32), not %R", obj);
        return -1;
    }
    *seed = (uint32_t)value;
    return 0;
}

int sparkey_as_word_size(PyObject *obj, const char *name, unsigned *size)
{
    uint64_t value;
    if (sparkey_as_u64(obj, name, &value) < 0)
        return -1;
    if (value != 4 && value != 8) {
        PyErr_Format(PyExc_ValueError, "%s must be 4 or 8, not %R", name, obj);
        return -1;
    }
    *size = (unsigned)value;
    return 0;
}

int sparkey_get_array(PyObject *obj, Py_buffer *view, char kind, Py_ssize_t itemsize,
                     int writable, const char *name)
{
    int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0)
        return -1;
    const char *format = view->format ? view->format : "B";
    if (*format == '@' || *format == '=' || (*format == '<' && PY_LITTLE_ENDIAN))
        format++;
    const char *letters = kind == 'u' ? "BHILQ" : "bhilq";
    if (view->itemsize != itemsize || format[0] == '\0' || format[1] != '\0'
            || !strchr(letters, format[0])) {
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous array of %s%zd integers, not "
                     "format '%s' of %zd bytes", name, kind == 'u' ? "uint" : "int",
                     8 * itemsize, view->format ? view->format : "B", view->itemsize);
        sparkey_release(view);
        return -1;
    }
    return 0;
}

PyObject *sparkey_entry_bytes(const sparkey_errors *errors, PyObject *obj, const char *role)
{
    if (PyBytes_Check(obj))
        return Py_NewRef(obj);
    if (PyUnicode_Check(obj))
        return PyUnicode_AsUTF8String(obj);
    if (PyByteArray_Check(obj) || PyMemoryView_Check(obj))
        return PyBytes_FromObject(obj);
    PyErr_Format(errors->entry_type_error, "a %s must be bytes, bytearray, memoryview or str, "
                 "not %s", role, Py_TYPE(obj)->tp_name);
    return NULL;
}

#define GIL_FREE_SCAN_ITEMS 4096  /* tuples at least this long are type-checked without the GIL */

static int all_exact_bytes(PyObject *const *items, Py_ssize_t count)
{
    for (Py_ssize_t i = 0; i < count; i++)
        if (!PyBytes_CheckExact(items[i]))
            return 0;
    return 1;
}

PyObject *sparkey_pin_column(const sparkey_errors *errors, PyObject *seq, const char *role,
                             sparkey_column *column)
{
    memset(column, 0, sizeof(*column));
    if (PyTuple_CheckExact(seq)) {
        PyObject *const *items = &PyTuple_GET_ITEM(seq, 0);
        Py_ssize_t count = PyTuple_GET_SIZE(seq);
        int all_bytes;
        if (count >= GIL_FREE_SCAN_ITEMS) {
            Py_BEGIN_ALLOW_THREADS  /* the caller's tuple keeps its items while we run */
            all_bytes = all_exact_bytes(items, count);
            Py_END_ALLOW_THREADS
        } else {
            all_bytes = all_exact_bytes(items, count);
        }
        if (all_bytes) {
            column->items = items;
            column->count = count;
            return Py_NewRef(seq);
        }
    }
    PyObject *list = PySequence_List(seq);
    if (!list)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if (PyBytes_CheckExact(item))
            continue;
        PyObject *data = sparkey_entry_bytes(errors, item, role);
        if (!data) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, data);
        Py_DECREF(item);
    }
    column->items = &PyList_GET_ITEM(list, 0);
    column->count = PyList_GET_SIZE(list);
    return list;
}

int sparkey_rows_column(const Py_buffer *data, const Py_buffer *offsets, const char *role,
                        sparkey_column *column)
{
    const int64_t *offset = offsets->buf;
    Py_ssize_t count = offsets->len / 8 - 1;
    if (count < 0) {
        PyErr_Format(PyExc_ValueError, "%s offsets must hold len(column) + 1 positions", role);
        return -1;
    }
    for (Py_ssize_t i = 0; i <= count; i++) {
        if (offset[i] < (i ? offset[i - 1] : 0) || offset[i] > data->len) {
            PyErr_Format(PyExc_ValueError, "%s offsets must be non-decreasing and within the "
                         "%zd bytes of data; offset %zd is %lld", role, data->len, i,
                         (long long)offset[i]);
            return -1;
        }
    }
    column->items = NULL;
    column->data = data->buf;
    column->offsets = offset;
    column->count = count;
    return 0;
}
