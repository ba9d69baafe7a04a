/* Block cutting of bulk writes in sparkey._native: cut_blocks, the counterpart of
 * sparkey.log.framing.BlockCutter.cut (libsparkey's block rules, sparkey.log.writer).
 *
 * The inputs are two int64 arrays exported for the duration of the call; the walk over them
 * runs with the GIL released (it touches no Python object) into two scratch arrays owned by
 * the call, which are then returned as new bytes objects.
 */
#include "native.h"

/* The blocks closed by appending entries of `sizes` (with their `header_sizes`) to an open
 * block of *used bytes holding *started entries: their end offsets in the chunk's stream and
 * the entries starting in each. Returns how many blocks closed; *used and *started describe
 * the block left open. `ends` and `counts` hold room for count * (1 + largest / block) + 1. */
static Py_ssize_t cut(const int64_t *sizes, const int64_t *header_sizes, Py_ssize_t count,
                      uint64_t block, uint64_t *used, uint64_t *started, int64_t *ends,
                      int64_t *counts)
{
    uint64_t fill = *used, in_block = *started, offset = 0;
    Py_ssize_t closed = 0;
    for (Py_ssize_t j = 0; j < count; j++) {
        uint64_t size = (uint64_t)sizes[j], room = block - fill;
        if (room < (uint64_t)header_sizes[j] || (room < size && size <= block)) {
            if (fill) {
                ends[closed] = (int64_t)offset;
                counts[closed++] = (int64_t)in_block;
                fill = in_block = 0;
            }
            room = block;
        }
        in_block++;
        if (size <= room) {
            fill += size;
            offset += size;
            continue;
        }
        int flushed = 0;
        for (uint64_t done = 0; done < size;) {
            if (fill == block) {
                ends[closed] = (int64_t)(offset + done);
                counts[closed++] = (int64_t)in_block;
                fill = in_block = 0;
                flushed = 1;
            }
            uint64_t take = block - fill < size - done ? block - fill : size - done;
            fill += take;
            done += take;
        }
        offset += size;
        if (flushed && fill) {
            ends[closed] = (int64_t)offset;
            counts[closed++] = (int64_t)in_block;
            fill = in_block = 0;
        }
    }
    *used = fill;
    *started = in_block;
    return closed;
}

PyDoc_STRVAR(cut_blocks_doc,
"cut_blocks($module, sizes, header_sizes, block_size, used, started, /)\n--\n\n"
"(ends, counts, used, started): BlockCutter.cut of a chunk. sizes and header_sizes are int64\n"
"arrays of the entries' encoded and header sizes, block_size the log's, used and started the\n"
"bytes and entries of the block left open by the previous chunk. ends (offsets in the chunk's\n"
"stream) and counts (entries starting in each closed block) are native int64 words in new\n"
"bytes objects; used and started describe the block left open. Runs without the GIL.");

static PyObject *native_cut_blocks(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Py_buffer sizes = {0}, headers = {0};
    uint64_t block, used, started;
    int64_t *scratch = NULL;
    PyObject *result = NULL;
    if (sparkey_check_nargs("cut_blocks", nargs, 5, 5) < 0
            || sparkey_get_array(args[0], &sizes, 'i', 8, 0, "sizes") < 0
            || sparkey_get_array(args[1], &headers, 'i', 8, 0, "header_sizes") < 0
            || sparkey_as_u64(args[2], "block_size", &block) < 0
            || sparkey_as_u64(args[3], "used", &used) < 0
            || sparkey_as_u64(args[4], "started", &started) < 0)
        goto done;
    Py_ssize_t count = sizes.len / 8;
    const int64_t *size = sizes.buf, *header = headers.buf;
    if (headers.len != sizes.len || block < 2 || used > block) {
        PyErr_Format(PyExc_ValueError, "cut_blocks needs as many header sizes as sizes (%zd, "
                     "%zd), a block size of at least 2 and used <= block_size", count,
                     headers.len / 8);
        goto done;
    }
    uint64_t capacity = 1;  /* blocks that can close: one per entry plus one per full block */
    for (Py_ssize_t i = 0; i < count; i++) {
        if (size[i] < 2 || header[i] < 2 || header[i] > size[i]) {
            PyErr_Format(PyExc_ValueError, "entry %zd: size %lld with a header of %lld bytes "
                         "is not an entry's", i, (long long)size[i], (long long)header[i]);
            goto done;
        }
        capacity += 2 + (uint64_t)size[i] / block;
    }
    if (capacity > PY_SSIZE_T_MAX / 16 || !(scratch = PyMem_Malloc(capacity * 16))) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t closed;
    Py_BEGIN_ALLOW_THREADS
    closed = cut(size, header, count, block, &used, &started, scratch, scratch + capacity);
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(y#y#KK)", (const char *)scratch, closed * 8,
                           (const char *)(scratch + capacity), closed * 8,
                           (unsigned long long)used, (unsigned long long)started);
done:
    PyMem_Free(scratch);
    sparkey_release(&sizes);
    sparkey_release(&headers);
    return result;
}

PyMethodDef sparkey_cutting_methods[] = {
    {"cut_blocks", (PyCFunction)(void (*)(void))native_cut_blocks, METH_FASTCALL,
     cut_blocks_doc},
    {NULL, NULL, 0, NULL},
};
