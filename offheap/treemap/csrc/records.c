/* The compiled twin of RecordStore.update (offheap/store/records.py) for the pages a TreeMap
 * writes around its node cache (around.c), and _pages.update_record for its tests (layer 6,
 * on the store's layer 4 internals).
 *
 * A leaf page written around the cache is rewritten in place when it keeps its size class, and
 * otherwise moves to a chunk of its new class taken from that class's free list or from the bump
 * segment, its old chunk going onto its old class's free list. Those are the cases here, made
 * with the same decisions, in the same order, on the same state as RecordStore.update: the
 * index arrays (_addr, _size), the segment views (_views), the free lists (_free_chunks, a dict
 * of lists), the bump position (_bump_seg, _bump_pos) and the byte counts (_chunk_bytes,
 * _live_bytes). Every other case (a closed store, a record id that is not live, an empty or large
 * record, a chunk that needs a larger free chunk split or a new segment, whose metadata a file
 * without transactions writes) returns 0 before changing anything, and the caller runs
 * RecordStore.update itself: the reference keeps every rule this code does not repeat.
 *
 * Thread safety: none of its own; the owning collection's lock is held (and the GIL).
 */
#include "slots.h"

enum { SMALL_CLASS_LIMIT = 4096, LARGE_RECORD_BYTES = 256 * 1024 };
static const uint64_t FREE_ADDR = UINT64_MAX, EMPTY_ADDR = UINT64_MAX - 1;

static PyObject *str_arena, *str_closed, *str_addr, *str_size, *str_views, *str_free_chunks,
    *str_bump_seg, *str_bump_pos, *str_chunk_bytes, *str_live_bytes, *str_large;

int
init_records(void)
{
    static const char *names[] = {"arena", "closed", "_addr", "_size", "_views", "_free_chunks",
                                  "_bump_seg", "_bump_pos", "_chunk_bytes", "_live_bytes",
                                  "_large"};
    PyObject **slots[] = {&str_arena, &str_closed, &str_addr, &str_size, &str_views,
                          &str_free_chunks, &str_bump_seg, &str_bump_pos, &str_chunk_bytes,
                          &str_live_bytes, &str_large};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (*slots[i] == NULL && (*slots[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return -1;
    return 0;
}

/* records.chunk_bytes: multiples of 8 up to 4 KiB, then 16 classes per power of two. */
static Py_ssize_t
chunk_bytes(Py_ssize_t size)
{
    if (size <= SMALL_CLASS_LIMIT)
        return (size + 7) & ~(Py_ssize_t)7;
    Py_ssize_t step = (Py_ssize_t)1 << (63 - __builtin_clzll((unsigned long long)size) + 1 - 5);
    return (size + step - 1) / step * step;
}

/* An int attribute as a Py_ssize_t; -1 with an exception. */
static int
get_number(PyObject *object, PyObject *name, Py_ssize_t *out)
{
    PyObject *value = PyObject_GetAttr(object, name);
    *out = value == NULL ? -1 : PyLong_AsSsize_t(value);
    Py_XDECREF(value);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static int
set_number_attribute(PyObject *object, PyObject *name, Py_ssize_t number)
{
    PyObject *value = PyLong_FromSsize_t(number);
    int status = value == NULL ? -1 : PyObject_SetAttr(object, name, value);
    Py_XDECREF(value);
    return status;
}

/* Copy `size` bytes into segment `seg_no` at `pos` through its view; -1 with an exception. */
static int
write_at(PyObject *views, uint64_t addr, const char *data, Py_ssize_t size)
{
    Py_ssize_t seg_no = (Py_ssize_t)(addr >> 32), pos = (Py_ssize_t)(addr & 0xFFFFFFFFu);
    PyObject *view = seg_no < PyList_GET_SIZE(views) ? PyList_GET_ITEM(views, seg_no) : Py_None;
    if (view == Py_None)
        return page_corrupt("a record address names segment %zd, which the store does not "
                            "hold", seg_no);
    Py_buffer segment;
    if (PyObject_GetBuffer(view, &segment, PyBUF_WRITABLE) < 0)
        return -1;
    int status = 0;
    if (pos > segment.len || size > segment.len - pos)
        status = page_corrupt("a record of %zd bytes at %zd runs past its segment of %zd bytes",
                              size, pos, segment.len);
    else
        memcpy((char *)segment.buf + pos, data, (size_t)size);
    PyBuffer_Release(&segment);
    return status;
}

int
update_record(PyObject *store, PyObject *recid_object, PyObject *data)
{
    int result = -1, status;
    PyObject *arena = NULL, *closed = NULL, *addr_array = NULL, *size_array = NULL, *views = NULL,
             *free_chunks = NULL, *large = NULL, *free = NULL, *old_list = NULL,
             *old_addr_object = NULL, *segment_number = NULL;
    Py_buffer addrs = {0}, sizes = {0};
    if (!PyBytes_Check(data))
        return 0;
    const char *bytes = PyBytes_AS_STRING(data);
    Py_ssize_t size = PyBytes_GET_SIZE(data);
    if ((arena = PyObject_GetAttr(store, str_arena)) == NULL
            || (closed = PyObject_GetAttr(arena, str_closed)) == NULL)
        goto done;
    if ((status = PyObject_IsTrue(closed)) != 0) {  /* ClosedError: the reference raises it */
        result = status < 0 ? -1 : 0;
        goto done;
    }
    if ((addr_array = PyObject_GetAttr(store, str_addr)) == NULL
            || (size_array = PyObject_GetAttr(store, str_size)) == NULL
            || (views = PyObject_GetAttr(store, str_views)) == NULL
            || (free_chunks = PyObject_GetAttr(store, str_free_chunks)) == NULL
            || (large = PyObject_GetAttr(store, str_large)) == NULL)
        goto done;
    if (!PyList_CheckExact(views) || !PyDict_CheckExact(free_chunks)) {
        result = 0;
        goto done;
    }
    if (PyObject_GetBuffer(addr_array, &addrs, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0
            || PyObject_GetBuffer(size_array, &sizes, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto done;
    Py_ssize_t recid = PyLong_AsSsize_t(recid_object);
    if (recid == -1 && PyErr_Occurred())
        goto done;
    Py_ssize_t capacity = addrs.len / 8 < sizes.len / 4 ? addrs.len / 8 : sizes.len / 4;
    uint64_t *addr_at = addrs.buf;
    uint32_t *size_at = sizes.buf;
    if (recid <= 0 || recid >= capacity || addr_at[recid] == FREE_ADDR
            || addr_at[recid] == EMPTY_ADDR || size == 0 || size > LARGE_RECORD_BYTES) {
        result = 0;  /* KeyError, or an empty or large record: the reference */
        goto done;
    }
    uint64_t old_addr = addr_at[recid];
    Py_ssize_t old_size = size_at[recid];
    if ((segment_number = PyLong_FromUnsignedLongLong(old_addr >> 32)) == NULL
            || (status = PySet_Contains(large, segment_number)) != 0) {
        result = status < 0 ? -1 : 0;  /* a record in a segment of its own */
        goto done;
    }
    Py_ssize_t chunk = chunk_bytes(size), old_chunk = chunk_bytes(old_size);
    if ((size <= SMALL_CLASS_LIMIT && (size + 7) >> 3 == (old_size + 7) >> 3) || chunk == old_chunk) {
        if (write_at(views, old_addr, bytes, size) < 0)  /* in place: the same chunk */
            goto done;
        size_at[recid] = (uint32_t)size;
    }
    else {
        /* a chunk of the new class: the free list's last, else the bump segment's next */
        Py_ssize_t bump_seg, bump_pos, chunk_total;
        uint64_t new_addr;
        PyObject *chunk_object = PyLong_FromSsize_t(chunk);
        free = chunk_object == NULL ? NULL : PyDict_GetItemWithError(free_chunks, chunk_object);
        Py_XDECREF(chunk_object);
        if (free == NULL && PyErr_Occurred())
            goto done;
        Py_XINCREF(free);
        if (free != NULL && (!PyList_CheckExact(free) || PyList_GET_SIZE(free) == 0))
            Py_CLEAR(free);
        if (get_number(store, str_bump_seg, &bump_seg) < 0
                || get_number(store, str_bump_pos, &bump_pos) < 0
                || get_number(store, str_chunk_bytes, &chunk_total) < 0)
            goto done;
        if (free != NULL) {
            Py_ssize_t last = PyList_GET_SIZE(free) - 1;
            new_addr = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(free, last));
            if (new_addr == (uint64_t)-1 && PyErr_Occurred())
                goto done;
            if (write_at(views, new_addr, bytes, size) < 0 || PyList_SetSlice(free, last, last + 1,
                                                                              NULL) < 0)
                goto done;
        }
        else {
            PyObject *bump_view = bump_seg >= 0 && bump_seg < PyList_GET_SIZE(views)
                ? PyList_GET_ITEM(views, bump_seg) : Py_None;
            Py_ssize_t bump_len = bump_view == Py_None ? -1 : PyObject_Length(bump_view);
            if (bump_len == -1 && PyErr_Occurred())
                goto done;
            if (bump_seg < 0 || bump_len < 0 || bump_pos + chunk > bump_len) {
                result = 0;  /* a larger chunk split, or a new segment: the reference */
                goto done;
            }
            new_addr = (uint64_t)bump_seg << 32 | (uint64_t)bump_pos;
            if (write_at(views, new_addr, bytes, size) < 0
                    || set_number_attribute(store, str_bump_pos, bump_pos + chunk) < 0)
                goto done;
        }
        addr_at[recid] = new_addr;
        size_at[recid] = (uint32_t)size;
        /* the old chunk onto its class's free list */
        PyObject *old_chunk_object = PyLong_FromSsize_t(old_chunk);
        if (old_chunk_object == NULL)
            goto done;
        old_list = PyDict_GetItemWithError(free_chunks, old_chunk_object);
        if (old_list == NULL && !PyErr_Occurred()) {
            old_list = PyList_New(0);
            if (old_list != NULL && PyDict_SetItem(free_chunks, old_chunk_object, old_list) < 0)
                Py_CLEAR(old_list);
        }
        else
            Py_XINCREF(old_list);
        Py_DECREF(old_chunk_object);
        if (old_list == NULL || (old_addr_object = PyLong_FromUnsignedLongLong(old_addr)) == NULL
                || PyList_Append(old_list, old_addr_object) < 0
                || set_number_attribute(store, str_chunk_bytes, chunk_total + chunk - old_chunk) < 0)
            goto done;
    }
    Py_ssize_t live;
    if (get_number(store, str_live_bytes, &live) < 0
            || set_number_attribute(store, str_live_bytes, live + size - old_size) < 0)
        goto done;
    result = 1;
done:
    if (sizes.obj)
        PyBuffer_Release(&sizes);
    if (addrs.obj)
        PyBuffer_Release(&addrs);
    Py_XDECREF(arena);
    Py_XDECREF(closed);
    Py_XDECREF(addr_array);
    Py_XDECREF(size_array);
    Py_XDECREF(views);
    Py_XDECREF(free_chunks);
    Py_XDECREF(large);
    Py_XDECREF(free);
    Py_XDECREF(old_list);
    Py_XDECREF(old_addr_object);
    Py_XDECREF(segment_number);
    return result;
}

PyObject *
update_record_function(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "update_record(store, recid, data) takes 3 arguments");
        return NULL;
    }
    int done = update_record(args[0], args[1], args[2]);
    return done < 0 ? NULL : PyBool_FromLong(done);
}
