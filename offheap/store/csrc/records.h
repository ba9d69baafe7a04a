/* Reading a record of a RecordStore (offheap/store/records.py) from C, as RecordStore.view does.
 *
 * The store's recid index is two arrays exposed as the memoryviews `_addr_at` (uint64 per recid:
 * segment number << 32 | position, FREE_ADDR for a free id, EMPTY_ADDR for an empty record) and
 * `_size_at` (uint32 per recid), and its segments as the list `_views` (a memoryview per
 * segment, None for a freed one). record_open() takes buffers of the three and points at the
 * record's bytes inside its segment; record_close() gives them back.
 *
 * Ownership and lifetime: the bytes are valid only until record_close(), and no Python code may
 * run in between (a call into Python could write to the store or remap its segments). A caller
 * that holds the GIL and calls nothing in between reads a consistent store as long as no other
 * thread is inside one of the store's Python methods, which the map's lock rules out: read
 * only in an operation's turn (the lock free or held by the caller).
 *
 * Damage: every id, address and size is checked against the arrays and the segment, so a
 * damaged index raises `corruption` (the caller's CorruptionError), never reads out of bounds.
 * A free id is a KeyError, as RecordStore.get says. */

#ifndef OFFHEAP_RECORDS_H
#define OFFHEAP_RECORDS_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#define RECORD_FREE_ADDR UINT64_MAX
#define RECORD_EMPTY_ADDR (UINT64_MAX - 1)

typedef struct {
    Py_buffer addrs, sizes, segment; /* held between record_open and record_close */
    const uint8_t *data;             /* the record's bytes (NULL for an empty record) */
    Py_ssize_t size;
} RecordRead;

/* The store attribute `name`, interned on first use. */
static inline PyObject *
record_store_attribute(PyObject *store, const char *name, PyObject **interned)
{
    if (*interned == NULL && (*interned = PyUnicode_InternFromString(name)) == NULL)
        return NULL;
    return PyObject_GetAttr(store, *interned);
}

static inline void
record_close(RecordRead *read)
{
    if (read->segment.obj)
        PyBuffer_Release(&read->segment);
    if (read->sizes.obj)
        PyBuffer_Release(&read->sizes);
    if (read->addrs.obj)
        PyBuffer_Release(&read->addrs);
    read->data = NULL;
    read->size = 0;
}

/* Point `read` at record `recid` of `store`: 0, or -1 with KeyError (a free or unknown id) or
 * `corruption` set (and nothing held). */
static inline int
record_open(PyObject *store, int64_t recid, PyObject *corruption, RecordRead *read)
{
    static PyObject *s_addr, *s_size, *s_views;
    memset(read, 0, sizeof *read);
    PyObject *addr_array = record_store_attribute(store, "_addr_at", &s_addr);
    PyObject *size_array = addr_array ? record_store_attribute(store, "_size_at", &s_size) : NULL;
    PyObject *views = size_array ? record_store_attribute(store, "_views", &s_views) : NULL;
    int status = -1;
    if (views == NULL)
        goto done;
    if (!PyList_CheckExact(views)) {
        PyErr_SetString(PyExc_TypeError, "the record store's segment views are not a list");
        goto done;
    }
    if (PyObject_GetBuffer(addr_array, &read->addrs, PyBUF_C_CONTIGUOUS) < 0
            || PyObject_GetBuffer(size_array, &read->sizes, PyBUF_C_CONTIGUOUS) < 0)
        goto done;
    int64_t n = read->addrs.len / 8 < read->sizes.len / 4 ? read->addrs.len / 8
                                                          : read->sizes.len / 4;
    uint64_t addr = RECORD_FREE_ADDR;
    uint32_t size = 0;
    if (recid > 0 && recid < n) {
        memcpy(&addr, (const char *)read->addrs.buf + 8 * recid, 8);
        memcpy(&size, (const char *)read->sizes.buf + 4 * recid, 4);
    }
    if (addr == RECORD_FREE_ADDR) {
        PyErr_Format(PyExc_KeyError, "record id %lld does not exist", (long long)recid);
        goto done;
    }
    if (addr == RECORD_EMPTY_ADDR) {
        status = 0;
        goto done;
    }
    Py_ssize_t seg_no = (Py_ssize_t)(addr >> 32), pos = (Py_ssize_t)(addr & 0xFFFFFFFFu);
    PyObject *view = seg_no < PyList_GET_SIZE(views) ? PyList_GET_ITEM(views, seg_no) : Py_None;
    if (view == Py_None) {
        PyErr_Format(corruption, "record %lld names segment %zd, which the store does not hold",
                     (long long)recid, seg_no);
        goto done;
    }
    if (PyObject_GetBuffer(view, &read->segment, PyBUF_SIMPLE) < 0)
        goto done;
    if (pos > read->segment.len || (Py_ssize_t)size > read->segment.len - pos) {
        PyErr_Format(corruption, "record %lld points outside its segment (segment %zd, "
                     "position %zd, %u bytes)", (long long)recid, seg_no, pos, size);
        goto done;
    }
    read->data = (const uint8_t *)read->segment.buf + pos;
    read->size = (Py_ssize_t)size;
    status = 0;
done:
    if (status < 0)
        record_close(read);
    Py_XDECREF(views);
    Py_XDECREF(size_array);
    Py_XDECREF(addr_array);
    return status;
}

#endif
