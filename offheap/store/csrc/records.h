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
 * A free id is a KeyError, as RecordStore.get says.
 *
 * A caller that reads many records of one store keeps a RecordSource: the three attributes,
 * read once and used again while the store's __dict__ is unchanged (dicttag.h), instead of
 * three attribute lookups per record. The store assigns a new array or list to these
 * attributes when its index grows or it closes, which changes the dict; a segment added or
 * freed changes the list `_views` in place, which is read at every record_open. The buffers
 * are taken for every read, as without a source, so a view released meanwhile raises. */

#ifndef OFFHEAP_RECORDS_H
#define OFFHEAP_RECORDS_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "dicttag.h"

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

/* The store attributes record_open reads, kept by a caller between reads (see the top). Owned
 * by one holder, which clears and traverses it with its own references; zeroed: nothing kept.
 *
 * Only the dict is a strong reference: the three objects are borrowed from it, alive while its
 * tag is unchanged. Holding them would keep a view the store dropped, and with it an export of
 * a mapping the arena must be able to unmap. */
typedef struct RecordSource {
    PyObject *dict;                 /* the store's __dict__ when they were read */
    uint64_t tag;                   /* its tag then (dicttag.h) */
    PyObject *addrs, *sizes, *views; /* borrowed from `dict` */
} RecordSource;

static inline void
record_source_clear(RecordSource *source)
{
    Py_CLEAR(source->dict);
    source->tag = 0;
    source->addrs = source->sizes = source->views = NULL;
}

static inline int
record_source_traverse(RecordSource *source, visitproc visit, void *arg)
{
    Py_VISIT(source->dict);
    return 0;
}

/* New references to the store's _addr_at, _size_at and _views: the ones `source` kept while the
 * store's __dict__ is unchanged, else read now (and kept, with a source). 0, or -1 with an
 * error and nothing set. */
static inline int
record_store_arrays(PyObject *store, RecordSource *source, PyObject **addrs, PyObject **sizes,
                    PyObject **views)
{
    static PyObject *s_addr, *s_size, *s_views;
    PyObject *dict = source == NULL ? NULL : PyObject_GenericGetDict(store, NULL);
    if (source != NULL && dict == NULL)
        PyErr_Clear();  /* no __dict__: the attributes are read without a source */
    if (dict != NULL && dict == source->dict && source->tag != 0
            && dict_tag(dict) == source->tag) {
        Py_DECREF(dict);
        *addrs = Py_NewRef(source->addrs);
        *sizes = Py_NewRef(source->sizes);
        *views = Py_NewRef(source->views);
        return 0;
    }
    *addrs = record_store_attribute(store, "_addr_at", &s_addr);
    *sizes = *addrs ? record_store_attribute(store, "_size_at", &s_size) : NULL;
    *views = *sizes ? record_store_attribute(store, "_views", &s_views) : NULL;
    if (*views == NULL) {
        Py_CLEAR(*addrs);
        Py_CLEAR(*sizes);
        Py_XDECREF(dict);
        return -1;
    }
    if (source == NULL)
        return 0;
    record_source_clear(source);
    /* kept only when the three are the dict's own entries (not computed by a property), as
     * the tag then vouches for them */
    if (dict != NULL && PyDict_GetItemWithError(dict, s_addr) == *addrs
            && PyDict_GetItemWithError(dict, s_size) == *sizes
            && PyDict_GetItemWithError(dict, s_views) == *views) {
        source->dict = dict;
        source->tag = dict_tag(dict);
        source->addrs = *addrs;
        source->sizes = *sizes;
        source->views = *views;
        return 0;
    }
    PyErr_Clear();  /* a failed dict lookup only means nothing is kept */
    Py_XDECREF(dict);
    return 0;
}

/* Point `read` at record `recid` of `store`, through `source` (NULL: none kept): 0, or -1 with
 * KeyError (a free or unknown id) or `corruption` set (and nothing held). */
static inline int
record_open(PyObject *store, RecordSource *source, int64_t recid, PyObject *corruption,
            RecordRead *read)
{
    memset(read, 0, sizeof *read);
    PyObject *addr_array, *size_array, *views;
    if (record_store_arrays(store, source, &addr_array, &size_array, &views) < 0)
        return -1;
    int status = -1;
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
