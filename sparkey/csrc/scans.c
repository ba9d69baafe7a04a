/* The log scan of sparkey._native: walk_block and decode_headers, the two per-entry steps of
 * LogReader.scan (sparkey.log.blocks.walk_block and sparkey.log.entries.decode_headers).
 *
 * Both read a buffer (a log mapping or a decompressed block) exported for the duration of the
 * call only and return new bytes objects of native int64 words; the GIL is held throughout
 * (a scan step over 1M entries takes milliseconds). Every offset is checked against the
 * buffer before it is read, so a damaged log raises the reference's LogFormatError.
 */
#include "native.h"

/* Read one integer argument into [0, 2**63). */
static int as_offset(PyObject *obj, const char *name, uint64_t *out)
{
    if (sparkey_as_u64(obj, name, out) < 0)
        return -1;
    if (*out >> 63) {
        PyErr_Format(PyExc_ValueError, "%s must be below 2**63, not %R", name, obj);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(walk_block_doc,
"walk_block($module, block, pos, stop, limit, /)\n--\n\n"
"(offsets, next_pos): the offsets in block of the next entries (at most limit) from pos that\n"
"lie wholly before stop, as native int64 words in a new bytes object, and the offset after\n"
"them: sparkey.log.blocks.walk_block. The walk stops at stop or at an entry that continues\n"
"past it; a corrupt header raises LogFormatError. stop must lie within the block.");

static PyObject *native_walk_block(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t pos, stop, limit;
    Py_buffer block = {0};
    PyObject *offsets = NULL, *result = NULL;
    if (sparkey_check_nargs("walk_block", nargs, 4, 4) < 0
            || as_offset(args[1], "pos", &pos) < 0 || as_offset(args[2], "stop", &stop) < 0
            || sparkey_as_u64(args[3], "limit", &limit) < 0
            || PyObject_GetBuffer(args[0], &block, PyBUF_SIMPLE) < 0)
        return NULL;
    if (stop > (uint64_t)block.len) {
        PyErr_Format(PyExc_ValueError, "stop %llu lies past the block of %zd bytes",
                     (unsigned long long)stop, block.len);
        goto done;
    }
    uint64_t room = pos < stop ? (stop - pos) / 2 : 0;  /* an entry takes at least 2 bytes */
    if (limit > room)
        limit = room;
    offsets = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(limit * sizeof(int64_t)));
    if (!offsets)
        goto done;
    int64_t count = sparkey_walk_block(sparkey_errors_of(module), block.buf, &pos, stop, limit,
                                       (int64_t *)PyBytes_AS_STRING(offsets));
    if (count < 0 || _PyBytes_Resize(&offsets, (Py_ssize_t)(count * 8)) < 0)
        goto done;
    result = Py_BuildValue("(OK)", offsets, (unsigned long long)pos);
done:
    Py_XDECREF(offsets);
    sparkey_release(&block);
    return result;
}

/* The first failure of vlq_many over `count` headers, in the order the reference meets them:
 * the earliest byte group at which a header runs past `end` (the first such entry), else the
 * first header longer than SPARKEY_MANY_VLQ_BYTES. Fills values and next offsets otherwise. */
static int vlq_many(const sparkey_errors *errors, const uint8_t *buf, uint64_t end,
                    const int64_t *starts, int64_t *values, int64_t *next, Py_ssize_t count)
{
    Py_ssize_t past_entry = -1, long_entry = -1;
    unsigned past_group = SPARKEY_MANY_VLQ_BYTES;
    uint64_t past_offset = 0, long_offset = 0;  /* starts may be next: offsets kept here */
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t start = (uint64_t)starts[i], value = 0;
        unsigned group = 0;
        for (; group < SPARKEY_MANY_VLQ_BYTES; group++) {
            if (start + group >= end) {
                if (group < past_group) {
                    past_group = group;
                    past_entry = i;
                    past_offset = start + group;
                }
                break;
            }
            uint8_t byte = buf[start + group];
            value |= (uint64_t)(byte & 0x7F) << (7 * group);
            if (byte < 0x80)
                break;
        }
        if (group == SPARKEY_MANY_VLQ_BYTES && long_entry < 0) {
            long_entry = i;
            long_offset = start + group;
        }
        values[i] = (int64_t)value;
        next[i] = (int64_t)(start + group + 1);
    }
    if (past_entry >= 0) {
        PyErr_Format(errors->log_format_error, "entry header at offset %llu runs past data_end "
                     "%llu; the log is truncated or corrupt", (unsigned long long)past_offset,
                     (unsigned long long)end);
        return -1;
    }
    if (long_entry >= 0) {
        PyErr_Format(errors->log_format_error, "entry header at offset %llu is too long for a "
                     "length; the log is corrupt", (unsigned long long)long_offset);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(decode_headers_doc,
"decode_headers($module, stream, starts, /)\n--\n\n"
"The two header VLQs of the entries starting at the int64 offsets starts in the buffer\n"
"stream, and the offset of each payload, as 3 * len(starts) native int64 words in a new bytes\n"
"object (all first VLQs, then all second ones, then the payload offsets): the two vlq_many\n"
"calls of sparkey.log.entries.decode_headers, failing with the same LogFormatError.");

static PyObject *native_decode_headers(PyObject *module, PyObject *const *args,
                                       Py_ssize_t nargs)
{
    Py_buffer stream = {0}, starts = {0};
    PyObject *out = NULL;
    if (sparkey_check_nargs("decode_headers", nargs, 2, 2) < 0
            || PyObject_GetBuffer(args[0], &stream, PyBUF_SIMPLE) < 0
            || sparkey_get_array(args[1], &starts, 'i', 8, 0, "starts") < 0)
        goto done;
    Py_ssize_t count = starts.len / 8;
    const int64_t *start = starts.buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (start[i] < 0) {
            PyErr_Format(PyExc_ValueError, "start %zd is negative (%lld)", i,
                         (long long)start[i]);
            goto done;
        }
    }
    out = PyBytes_FromStringAndSize(NULL, 3 * count * (Py_ssize_t)sizeof(int64_t));
    if (!out)
        goto done;
    int64_t *first = (int64_t *)PyBytes_AS_STRING(out), *second = first + count;
    int64_t *payload = second + count;
    const sparkey_errors *errors = sparkey_errors_of(module);
    /* the second VLQs start where the first ones end: payload holds those offsets meanwhile */
    if (vlq_many(errors, stream.buf, (uint64_t)stream.len, start, first, payload, count) < 0
            || vlq_many(errors, stream.buf, (uint64_t)stream.len, payload, second, payload,
                        count) < 0)
        Py_CLEAR(out);
done:
    sparkey_release(&stream);
    sparkey_release(&starts);
    return out;
}

PyMethodDef sparkey_scan_methods[] = {
    {"walk_block", (PyCFunction)(void (*)(void))native_walk_block, METH_FASTCALL,
     walk_block_doc},
    {"decode_headers", (PyCFunction)(void (*)(void))native_decode_headers, METH_FASTCALL,
     decode_headers_doc},
    {NULL, NULL, 0, NULL},
};
