/* The lookups of sparkey._native: get and get_many over uncompressed stores, find_block and
 * value_in_block over block-compressed ones (HashIndex.get with LogReader.value_for).
 *
 * Each call exports the index and the log for its duration only; an exported mmap cannot be
 * closed, so a lookup racing with close() reads a live mapping or fails to export a closed one
 * (ValueError), never unmapped memory. The GIL is held throughout: values are new bytes objects.
 */
#include "native.h"

#define PROBE_BATCH 16  /* keys of get_many in flight: their slots, then entries, prefetched */

/* The buffers and parameters of one lookup call. */
typedef struct {
    const sparkey_errors *errors;
    Py_buffer index, log;
    sparkey_table table;
    sparkey_log entries;
} lookup;

static void close_lookup(lookup *l)
{
    sparkey_release(&l->index);
    sparkey_release(&l->log);
}

/* Export both files and check the layout tuple against them; on failure nothing is held. */
static int open_lookup(PyObject *module, PyObject *index, PyObject *log, PyObject *layout,
                       lookup *l)
{
    uint64_t capacity, probe_limit, bits, data_end;
    memset(l, 0, sizeof(*l));
    l->errors = sparkey_errors_of(module);
    if (!PyTuple_Check(layout) || PyTuple_GET_SIZE(layout) != 7) {
        PyErr_SetString(PyExc_TypeError, "layout must be a tuple (hash_seed, hash_size, "
                        "address_size, hash_capacity, probe_limit, entry_block_bits, "
                        "data_end)");
        return -1;
    }
    sparkey_table *t = &l->table;
    PyObject *const *field = &PyTuple_GET_ITEM(layout, 0);
    if (sparkey_as_seed(field[0], &t->seed) < 0
            || sparkey_as_word_size(field[1], "hash_size", &t->hash_size) < 0
            || sparkey_as_word_size(field[2], "address_size", &t->address_size) < 0
            || sparkey_as_u64(field[3], "hash_capacity", &capacity) < 0
            || sparkey_as_u64(field[4], "probe_limit", &probe_limit) < 0
            || sparkey_as_u64(field[5], "entry_block_bits", &bits) < 0
            || sparkey_as_u64(field[6], "data_end", &data_end) < 0)
        return -1;
    if (bits >= 8 * t->address_size || capacity == 0) {
        PyErr_Format(PyExc_ValueError, "entry_block_bits %llu must be below 8 * address_size "
                     "and hash_capacity at least 1", (unsigned long long)bits);
        return -1;
    }
    if (PyObject_GetBuffer(index, &l->index, PyBUF_SIMPLE) < 0
            || PyObject_GetBuffer(log, &l->log, PyBUF_SIMPLE) < 0) {
        close_lookup(l);
        return -1;
    }
    uint64_t slot_size = t->hash_size + t->address_size;
    uint64_t index_len = (uint64_t)l->index.len, log_len = (uint64_t)l->log.len;
    if (index_len < SPARKEY_INDEX_HEADER_SIZE
            || (index_len - SPARKEY_INDEX_HEADER_SIZE) / slot_size < capacity) {
        PyErr_Format(l->errors->index_format_error, "the index buffer of %llu bytes cannot hold "
                     "%llu slots of %llu bytes after its header", (unsigned long long)index_len,
                     (unsigned long long)capacity, (unsigned long long)slot_size);
        close_lookup(l);
        return -1;
    }
    if (data_end < SPARKEY_LOG_HEADER_SIZE || data_end > log_len) {
        PyErr_Format(l->errors->log_format_error, "data_end %llu lies outside the log buffer "
                     "of %llu bytes", (unsigned long long)data_end, (unsigned long long)log_len);
        close_lookup(l);
        return -1;
    }
    t->slots = (const uint8_t *)l->index.buf + SPARKEY_INDEX_HEADER_SIZE;
    t->capacity = capacity;
    t->probe_limit = probe_limit < capacity ? probe_limit : capacity - 1;
    t->entry_block_bits = (unsigned)bits;
    l->entries.data = l->log.buf;
    l->entries.end = data_end;
    return 0;
}

/* The rest of an uncompressed lookup whose probe is under way: the value, None, or NULL. */
static PyObject *probe_values(const lookup *l, sparkey_probe *probe, const uint8_t *key,
                              size_t key_len)
{
    unsigned bits = l->table.entry_block_bits;
    uint64_t address, mask = ((uint64_t)1 << bits) - 1;
    while (sparkey_probe_next(&l->table, probe, &address)) {
        PyObject *value = sparkey_log_value(l->errors, &l->entries, address >> bits,
                                            address & mask, key, key_len);
        if (value != Py_None)
            return value;
        Py_DECREF(value);
    }
    Py_RETURN_NONE;
}

#define LAYOUT_DOC \
"layout is (hash_seed, hash_size, address_size, hash_capacity, probe_limit,\n" \
"entry_block_bits, data_end) from the validated headers (probe_limit, the largest\n" \
"displacement probed, is held below hash_capacity); index is the whole .spi file and\n" \
"log the .spl file from offset 0 up to at least data_end (the mappings HashIndex and\n" \
"LogReader hold). The table size is checked against the index buffer; every offset read\n" \
"from either file is checked before use, so damage raises LogFormatError or\n" \
"IndexFormatError, as the Python reader does.\n"

PyDoc_STRVAR(get_doc,
"get($module, index, log, key, layout, /)\n--\n\n"
"The value stored for key in an uncompressed store (a new bytes object), or None:\n"
"HashIndex.get with LogReader.value_for. key is taken as hash_key takes it.\n" LAYOUT_DOC
"Cost: one hash, the probed slots, one entry read.");

static PyObject *native_get(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    lookup l;
    if (sparkey_check_nargs("get", nargs, 4, 4) < 0
            || open_lookup(module, args[0], args[1], args[3], &l) < 0)
        return NULL;
    PyObject *value = NULL, *key = sparkey_entry_bytes(l.errors, args[2], "key");
    if (key) {
        const uint8_t *data = (const uint8_t *)PyBytes_AS_STRING(key);
        size_t size = (size_t)PyBytes_GET_SIZE(key);
        sparkey_probe probe;
        sparkey_probe_start(&l.table, &probe,
                            sparkey_hash(data, size, l.table.seed, l.table.hash_size), 0);
        value = probe_values(&l, &probe, data, size);
        Py_DECREF(key);
    }
    close_lookup(&l);
    return value;
}

PyDoc_STRVAR(get_many_doc,
"get_many($module, index, log, keys, layout, /)\n--\n\n"
"get for every key of a sequence, as a new list (None where absent). Keys are probed\n"
"PROBE_BATCH at a time, prefetching their slots and then their entries, so the cache misses\n"
"of a batch overlap. The first error raised by a key propagates.\n" LAYOUT_DOC);

static PyObject *native_get_many(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    lookup l;
    if (sparkey_check_nargs("get_many", nargs, 4, 4) < 0
            || open_lookup(module, args[0], args[1], args[3], &l) < 0)
        return NULL;
    sparkey_column keys;
    PyObject *values = NULL, *holder = sparkey_pin_column(l.errors, args[2], "key", &keys);
    if (!holder)
        goto done;
    Py_ssize_t count = keys.count;
    if (!(values = PyList_New(count)))
        goto done;
    const sparkey_table *t = &l.table;
    unsigned slot_size = t->hash_size + t->address_size, bits = t->entry_block_bits;
    for (Py_ssize_t first = 0; first < count; first += PROBE_BATCH) {
        Py_ssize_t batch = count - first < PROBE_BATCH ? count - first : PROBE_BATCH;
        sparkey_probe probes[PROBE_BATCH];
        uint64_t addresses[PROBE_BATCH];
        int found[PROBE_BATCH];
        for (Py_ssize_t j = 0; j < batch; j++) {
            const uint8_t *key;
            size_t size;
            sparkey_row(&keys, first + j, &key, &size);
            sparkey_probe_start(t, &probes[j], sparkey_hash(key, size, t->seed, t->hash_size), 0);
            __builtin_prefetch(t->slots + probes[j].slot * slot_size);
        }
        for (Py_ssize_t j = 0; j < batch; j++) {
            found[j] = sparkey_probe_next(t, &probes[j], &addresses[j]);
            if (found[j] && (addresses[j] >> bits) < l.entries.end)
                __builtin_prefetch(l.entries.data + (addresses[j] >> bits));
        }
        for (Py_ssize_t j = 0; j < batch; j++) {
            const uint8_t *key;
            size_t size;
            sparkey_row(&keys, first + j, &key, &size);
            PyObject *value = Py_NewRef(Py_None);
            if (found[j]) {
                uint64_t mask = ((uint64_t)1 << bits) - 1;
                Py_DECREF(value);
                value = sparkey_log_value(l.errors, &l.entries, addresses[j] >> bits,
                                          addresses[j] & mask, key, size);
                if (value == Py_None) {
                    Py_DECREF(value);
                    value = probe_values(&l, &probes[j], key, size);
                }
            }
            if (!value) {
                Py_CLEAR(values);
                goto done;
            }
            PyList_SET_ITEM(values, first + j, value);
        }
    }
done:
    Py_XDECREF(holder);
    close_lookup(&l);
    return values;
}

PyDoc_STRVAR(find_block_doc,
"find_block($module, index, log, key, layout, displacement=0, /)\n--\n\n"
"The first candidate entry of key in a block-compressed store, from `displacement` slots\n"
"past its home slot: (position, entry_index, payload_start, payload_stop, resume), or None\n"
"when no slot holds the key's hash. log[payload_start:payload_stop] is the compressed block\n"
"whose length prefix is at position (checked against data_end, as LogReader.block_at);\n"
"decompress it, then call value_in_block. If that entry holds another key, call again with\n"
"displacement=resume, unless resume is None (the probe ended at this slot).\n" LAYOUT_DOC);

static PyObject *native_find_block(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    lookup l;
    uint64_t displacement = 0, address, start, stop;
    if (sparkey_check_nargs("find_block", nargs, 4, 5) < 0
            || (nargs == 5 && sparkey_as_u64(args[4], "displacement", &displacement) < 0)
            || open_lookup(module, args[0], args[1], args[3], &l) < 0)
        return NULL;
    PyObject *result = NULL, *key = sparkey_entry_bytes(l.errors, args[2], "key");
    if (!key)
        goto done;
    sparkey_probe probe;
    sparkey_probe_start(&l.table, &probe,
                        sparkey_hash((const uint8_t *)PyBytes_AS_STRING(key),
                                     (size_t)PyBytes_GET_SIZE(key), l.table.seed,
                                     l.table.hash_size), displacement);
    Py_DECREF(key);
    if (!sparkey_probe_next(&l.table, &probe, &address)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    unsigned bits = l.table.entry_block_bits;
    uint64_t position = address >> bits;
    if (sparkey_block_payload(l.errors, &l.entries, position, &start, &stop) < 0)
        goto done;
    PyObject *resume = probe.finished ? Py_NewRef(Py_None)
                                      : PyLong_FromUnsignedLongLong(probe.displacement);
    if (resume)
        result = Py_BuildValue("(KKKKN)", (unsigned long long)position,
                               (unsigned long long)(address & (((uint64_t)1 << bits) - 1)),
                               (unsigned long long)start, (unsigned long long)stop, resume);
done:
    close_lookup(&l);
    return result;
}

PyDoc_STRVAR(value_in_block_doc,
"value_in_block($module, block, position, entry_index, key, /)\n--\n\n"
"The value of entry entry_index of a decompressed block (read at log offset position) when\n"
"it is a PUT of key: a new bytes object, or None for another key. Raises SpansBlocks when\n"
"the entry continues past the block (read it with LogReader.entry_at), IndexFormatError for\n"
"a DELETE and LogFormatError for a corrupt header, as LogReader.value_for does.");

static PyObject *native_value_in_block(PyObject *module, PyObject *const *args,
                                       Py_ssize_t nargs)
{
    uint64_t position, entry_index;
    Py_buffer block = {0};
    if (sparkey_check_nargs("value_in_block", nargs, 4, 4) < 0
            || sparkey_as_u64(args[1], "position", &position) < 0
            || sparkey_as_u64(args[2], "entry_index", &entry_index) < 0)
        return NULL;
    const sparkey_errors *errors = sparkey_errors_of(module);
    PyObject *value = NULL, *key = sparkey_entry_bytes(errors, args[3], "key");
    if (key && PyObject_GetBuffer(args[0], &block, PyBUF_SIMPLE) == 0)
        value = sparkey_block_value(errors, block.buf, (uint64_t)block.len, position,
                                    entry_index, (const uint8_t *)PyBytes_AS_STRING(key),
                                    (size_t)PyBytes_GET_SIZE(key));
    Py_XDECREF(key);
    sparkey_release(&block);
    return value;
}

PyMethodDef sparkey_lookup_methods[] = {
    {"get", (PyCFunction)(void (*)(void))native_get, METH_FASTCALL, get_doc},
    {"get_many", (PyCFunction)(void (*)(void))native_get_many, METH_FASTCALL, get_many_doc},
    {"find_block", (PyCFunction)(void (*)(void))native_find_block, METH_FASTCALL,
     find_block_doc},
    {"value_in_block", (PyCFunction)(void (*)(void))native_value_in_block, METH_FASTCALL,
     value_in_block_doc},
    {NULL, NULL, 0, NULL},
};
