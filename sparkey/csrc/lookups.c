/* sparkey._native.Lookup: the lookups of one open store (HashIndex.get with LogReader.value_for).
 *
 * A Lookup validates the table layout once and holds buffer exports of the index and the log
 * for its life, so each get is one C call with no argument parsing beyond the key. An exported
 * mmap cannot be closed: the owners call release() first (HashIndex.close, LogReader.close),
 * which drops both exports; every later call raises ClosedError. Uncompressed stores are read
 * with the GIL held and no call into Python, so release() cannot run in the middle of one. A
 * compressed store calls its codec (Python) once per block read and LogReader.value_across_blocks
 * for an entry that continues past its block: those calls can let another thread release the
 * lookup, so `released` is checked after each before the index or the log is touched again, and
 * the payload handed to the codec is a copy, never a view of the mapping.
 *
 * The last decompressed block is kept (position and block) and reused by the next read of the
 * same block: a scan in log order decompresses each block once. It is replaced under the GIL.
 */
#include "native.h"

#define PROBE_BATCH 16  /* keys of get_many in flight: their slots, then entries, prefetched */
#define SNAPPY_MAX_RATIO 22  /* sparkey.codec.SNAPPY_MAX_RATIO */

typedef struct {
    PyObject_HEAD
    PyObject *module;           /* holds the errors below alive */
    const sparkey_errors *errors;
    Py_buffer index, log;       /* zeroed once released */
    int released;
    sparkey_table table;
    sparkey_log entries;
    /* compressed stores only */
    PyObject *decompress;       /* codec.decompress(payload, block_size), or raw snappy */
    int snappy;                 /* decompress is raw snappy; the preamble is checked here */
    uint64_t block_size;
    PyObject *across_blocks;    /* LogReader.value_across_blocks */
    uint64_t cached_position;
    PyObject *cached_block;     /* the decompressed block at cached_position, or NULL */
    PyObject *closed_message;
} lookup_object;

static int closed_error(lookup_object *self)
{
    PyErr_SetObject(self->errors->closed_error, self->closed_message);
    return -1;
}

static int parse_layout(lookup_object *self, PyObject *layout)
{
    uint64_t capacity, probe_limit, bits, data_end;
    sparkey_table *t = &self->table;
    if (!PyTuple_Check(layout) || PyTuple_GET_SIZE(layout) != 7) {
        PyErr_SetString(PyExc_TypeError, "layout must be a tuple (hash_seed, hash_size, "
                        "address_size, hash_capacity, probe_limit, entry_block_bits, "
                        "data_end)");
        return -1;
    }
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
    uint64_t slot_size = t->hash_size + t->address_size;
    uint64_t index_len = (uint64_t)self->index.len, log_len = (uint64_t)self->log.len;
    if (index_len < SPARKEY_INDEX_HEADER_SIZE
            || (index_len - SPARKEY_INDEX_HEADER_SIZE) / slot_size < capacity) {
        PyErr_Format(self->errors->index_format_error, "the index buffer of %llu bytes cannot "
                     "hold %llu slots of %llu bytes after its header",
                     (unsigned long long)index_len, (unsigned long long)capacity,
                     (unsigned long long)slot_size);
        return -1;
    }
    if (data_end < SPARKEY_LOG_HEADER_SIZE || data_end > log_len) {
        PyErr_Format(self->errors->log_format_error, "data_end %llu lies outside the log "
                     "buffer of %llu bytes", (unsigned long long)data_end,
                     (unsigned long long)log_len);
        return -1;
    }
    t->slots = (const uint8_t *)self->index.buf + SPARKEY_INDEX_HEADER_SIZE;
    t->capacity = capacity;
    t->probe_limit = probe_limit < capacity ? probe_limit : capacity - 1;
    t->home_multiplier = sparkey_home_multiplier(capacity, t->hash_size);
    t->entry_block_bits = (unsigned)bits;
    self->entries.data = self->log.buf;
    self->entries.end = data_end;
    return 0;
}

static void release_buffers(lookup_object *self)
{
    self->released = 1;
    sparkey_release(&self->index);
    sparkey_release(&self->log);
    memset(&self->index, 0, sizeof(self->index));
    memset(&self->log, 0, sizeof(self->log));
    memset(&self->table, 0, sizeof(self->table));
    memset(&self->entries, 0, sizeof(self->entries));
    Py_CLEAR(self->cached_block);
}

PyDoc_STRVAR(lookup_doc,
"Lookup(index, log, layout, /, *, block_size=0, decompress=None, snappy=False,\n"
"       across_blocks=None, closed_message='the store is closed')\n--\n\n"
"The lookups of one store: index is the whole .spi file and log the .spl file from offset\n"
"0 up to at least data_end (the mappings HashIndex and LogReader hold), both exported for\n"
"the life of the Lookup or until release(). layout is (hash_seed, hash_size, address_size,\n"
"hash_capacity, probe_limit, entry_block_bits, data_end) from the validated headers\n"
"(probe_limit, the largest displacement probed, is held below hash_capacity); the table\n"
"size is checked against the index buffer here, and every offset read from either file is\n"
"checked before use, so damage raises LogFormatError or IndexFormatError, as the Python\n"
"reader does.\n\n"
"A block-compressed store passes decompress: codec.decompress(payload, block_size), or with\n"
"snappy=True a raw snappy decoder decompress(payload), whose length preamble is checked here\n"
"against block_size first; and across_blocks(position, entry_index, key), which reads an\n"
"entry continuing past its block. After release() every method raises ClosedError with\n"
"closed_message. Thread safety: methods may run in many threads at once.");

static int lookup_init(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"", "", "", "block_size", "decompress", "snappy",
                               "across_blocks", "closed_message", NULL};
    lookup_object *self = (lookup_object *)op;
    PyObject *index, *log, *layout, *block_size = NULL, *decompress = Py_None;
    PyObject *across_blocks = Py_None, *closed_message = NULL;
    int snappy = 0;
    if (self->module) {
        PyErr_SetString(PyExc_TypeError, "a Lookup is initialised once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|$OOpOU:Lookup", keywords, &index, &log,
                                     &layout, &block_size, &decompress, &snappy, &across_blocks,
                                     &closed_message))
        return -1;
    PyObject *module = PyType_GetModule(Py_TYPE(op));
    if (!module)
        return -1;
    self->module = Py_NewRef(module);
    self->errors = sparkey_errors_of(module);
    if ((block_size && sparkey_as_u64(block_size, "block_size", &self->block_size) < 0))
        return -1;
    if ((decompress == Py_None) != (across_blocks == Py_None)
            || (decompress != Py_None && (!PyCallable_Check(decompress)
                                          || !PyCallable_Check(across_blocks)))) {
        PyErr_SetString(PyExc_TypeError, "decompress and across_blocks are two callables, or "
                        "both None for an uncompressed store");
        return -1;
    }
    self->closed_message = closed_message ? Py_NewRef(closed_message)
                                          : PyUnicode_FromString("the store is closed");
    if (!self->closed_message)
        return -1;
    if (decompress != Py_None) {
        self->decompress = Py_NewRef(decompress);
        self->across_blocks = Py_NewRef(across_blocks);
        self->snappy = snappy;
    }
    if (PyObject_GetBuffer(index, &self->index, PyBUF_SIMPLE) < 0)
        goto fail;
    if (PyObject_GetBuffer(log, &self->log, PyBUF_SIMPLE) < 0)
        goto fail;
    if (parse_layout(self, layout) == 0)
        return 0;
fail:
    release_buffers(self);
    return -1;
}

static int lookup_traverse(PyObject *op, visitproc visit, void *arg)
{
    lookup_object *self = (lookup_object *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(self->module);
    Py_VISIT(self->decompress);
    Py_VISIT(self->across_blocks);
    Py_VISIT(self->cached_block);
    Py_VISIT(self->index.obj);
    Py_VISIT(self->log.obj);
    return 0;
}

static int lookup_clear(PyObject *op)
{
    lookup_object *self = (lookup_object *)op;
    release_buffers(self);
    Py_CLEAR(self->decompress);
    Py_CLEAR(self->across_blocks);
    Py_CLEAR(self->closed_message);
    Py_CLEAR(self->module);
    return 0;
}

static void lookup_dealloc(PyObject *op)
{
    PyTypeObject *type = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    lookup_clear(op);
    type->tp_free(op);
    Py_DECREF(type);
}

/* ---- uncompressed stores */

/* The rest of an uncompressed lookup whose probe is under way: the value (True with
 * found_only), None, or NULL. */
static PyObject *probe_values(const lookup_object *self, sparkey_probe *probe,
                              const uint8_t *key, size_t key_len, int found_only)
{
    unsigned bits = self->table.entry_block_bits;
    uint64_t address, mask = ((uint64_t)1 << bits) - 1;
    while (sparkey_probe_next(&self->table, probe, &address)) {
        PyObject *value = sparkey_log_value(self->errors, &self->entries, address >> bits,
                                            address & mask, key, key_len, found_only);
        if (value != Py_None)
            return value;
        Py_DECREF(value);
    }
    Py_RETURN_NONE;
}

/* ---- compressed stores */

static PyObject *corrupt_block(lookup_object *self, const char *detail)
{
    PyErr_Format(self->errors->log_format_error, "snappy block does not decompress to at most "
                 "%llu bytes (%s); the log is corrupt", (unsigned long long)self->block_size,
                 detail);
    return NULL;
}

/* SnappyCodec.decompress: the preamble bounded by block_size and the payload's ratio, then
 * the raw decoder; its failures become LogFormatError. */
static PyObject *decompress_snappy(lookup_object *self, PyObject *payload)
{
    const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(payload);
    Py_ssize_t len = PyBytes_GET_SIZE(payload), pos = 0;
    uint64_t declared = 0;
    for (unsigned shift = 0;; shift += 7) {
        if (pos >= len || pos >= 5)
            return corrupt_block(self, "bad length preamble");
        uint8_t byte = p[pos++];
        declared |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80)
            break;
    }
    if (declared > self->block_size || declared > SNAPPY_MAX_RATIO * (uint64_t)len) {
        char detail[48];
        snprintf(detail, sizeof(detail), "declares %llu bytes", (unsigned long long)declared);
        return corrupt_block(self, detail);
    }
    PyObject *block = PyObject_CallOneArg(self->decompress, payload);
    if (!block && PyErr_ExceptionMatches(PyExc_Exception)) {
        PyObject *type, *cause, *traceback;
        PyErr_Fetch(&type, &cause, &traceback);
        PyErr_NormalizeException(&type, &cause, &traceback);
        PyObject *text = PyUnicode_FromFormat("%s: %S", ((PyTypeObject *)type)->tp_name, cause);
        if (text) {
            const char *detail = PyUnicode_AsUTF8(text);
            corrupt_block(self, detail ? detail : ((PyTypeObject *)type)->tp_name);
            Py_DECREF(text);
            PyObject *error_type, *error, *error_traceback;
            PyErr_Fetch(&error_type, &error, &error_traceback);
            PyErr_NormalizeException(&error_type, &error, &error_traceback);
            if (traceback)
                PyException_SetTraceback(cause, traceback);
            PyException_SetCause(error, cause);  /* steals the reference to cause */
            PyErr_Restore(error_type, error, error_traceback);
            Py_DECREF(type);
            Py_XDECREF(traceback);
        } else {
            Py_DECREF(type);
            Py_XDECREF(cause);
            Py_XDECREF(traceback);
        }
    }
    return block;
}

/* The decompressed block at `position` (a new reference), from the cache or the codec. */
static PyObject *block_at(lookup_object *self, uint64_t position)
{
    uint64_t start, stop;
    if (self->cached_block && self->cached_position == position)
        return Py_NewRef(self->cached_block);
    if (sparkey_block_payload(self->errors, &self->entries, position, &start, &stop) < 0)
        return NULL;
    PyObject *payload = PyBytes_FromStringAndSize((const char *)self->entries.data + start,
                                                  (Py_ssize_t)(stop - start));
    if (!payload)
        return NULL;
    PyObject *block;
    if (self->snappy) {
        block = decompress_snappy(self, payload);
    } else {
        PyObject *size = PyLong_FromUnsignedLongLong(self->block_size);
        block = size ? PyObject_CallFunctionObjArgs(self->decompress, payload, size, NULL) : NULL;
        Py_XDECREF(size);
    }
    Py_DECREF(payload);
    if (block && !self->released) {
        Py_XSETREF(self->cached_block, Py_NewRef(block));
        self->cached_position = position;
    }
    return block;
}

/* The value of the entry at (position, entry_index) when it is a PUT of `key`, or None:
 * read in its decompressed block, or by across_blocks when it continues past the block. */
static PyObject *compressed_value(lookup_object *self, uint64_t position, uint64_t entry_index,
                                  PyObject *key)
{
    PyObject *block = block_at(self, position);
    if (!block)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(block, &view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(block);
        return NULL;
    }
    PyObject *value = sparkey_block_value(self->errors, view.buf, (uint64_t)view.len, position,
                                          entry_index, (const uint8_t *)PyBytes_AS_STRING(key),
                                          (size_t)PyBytes_GET_SIZE(key));
    PyBuffer_Release(&view);
    Py_DECREF(block);
    if (!value && PyErr_ExceptionMatches(self->errors->spans_blocks)) {
        PyErr_Clear();
        if (self->released) {
            closed_error(self);
            return NULL;
        }
        value = PyObject_CallFunction(self->across_blocks, "KKO", (unsigned long long)position,
                                      (unsigned long long)entry_index, key);
    }
    return value;
}

/* A lookup in a compressed store: probe, then read each candidate's block. */
static PyObject *compressed_get(lookup_object *self, PyObject *key)
{
    const uint8_t *data = (const uint8_t *)PyBytes_AS_STRING(key);
    size_t size = (size_t)PyBytes_GET_SIZE(key);
    unsigned bits = self->table.entry_block_bits;
    uint64_t address, mask = ((uint64_t)1 << bits) - 1;
    sparkey_probe probe;
    sparkey_probe_start(&self->table, &probe,
                        sparkey_hash(data, size, self->table.seed, self->table.hash_size));
    while (1) {
        if (self->released) {  /* a codec call let another thread close the store */
            closed_error(self);
            return NULL;
        }
        if (!sparkey_probe_next(&self->table, &probe, &address))
            Py_RETURN_NONE;
        PyObject *value = compressed_value(self, address >> bits, address & mask, key);
        if (value != Py_None)
            return value;
        Py_DECREF(value);
    }
}

/* ---- methods */

/* The value of `key` (any object entry_bytes takes), None when absent, NULL on error. With
 * found_only, an uncompressed store answers True for a present key without copying its value
 * (a compressed one still returns the value: the block is decompressed either way). */
static PyObject *lookup_value(lookup_object *self, PyObject *key_object, int found_only);

int sparkey_is_lookup(PyObject *object)
{
    return Py_TYPE(object)->tp_dealloc == lookup_dealloc;
}

PyObject *sparkey_lookup_value(PyObject *lookup, PyObject *key, int found_only)
{
    return lookup_value((lookup_object *)lookup, key, found_only);
}

static PyObject *lookup_value(lookup_object *self, PyObject *key_object, int found_only)
{
    PyObject *value, *key = sparkey_entry_bytes(self->errors, key_object, "key");
    if (!key)
        return NULL;
    if (self->released) {
        value = NULL;
        closed_error(self);
    } else if (self->decompress) {
        value = compressed_get(self, key);
    } else {
        const uint8_t *data = (const uint8_t *)PyBytes_AS_STRING(key);
        size_t size = (size_t)PyBytes_GET_SIZE(key);
        sparkey_probe probe;
        sparkey_probe_start(&self->table, &probe,
                            sparkey_hash(data, size, self->table.seed, self->table.hash_size));
        value = probe_values(self, &probe, data, size, found_only);
    }
    Py_DECREF(key);
    return value;
}

PyDoc_STRVAR(get_doc,
"get($self, key, default=None, /)\n--\n\n"
"The value stored for key (a new bytes object), or default. key is bytes, or str,\n"
"bytearray or memoryview taken as entry_bytes takes them (EntryTypeError otherwise).\n"
"Cost: one hash, the probed slots, one entry read (and one block decompression when\n"
"compressed, unless the block is the one read last).");

static PyObject *lookup_get(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    if (sparkey_check_nargs("get", nargs, 1, 2) < 0)
        return NULL;
    PyObject *value = lookup_value((lookup_object *)op, args[0], 0);
    if (value == Py_None && nargs == 2) {
        Py_DECREF(value);
        return Py_NewRef(args[1]);
    }
    return value;
}

PyDoc_STRVAR(getitem_doc,
"getitem($self, key, /)\n--\n\n"
"The value stored for key; KeyError(key) when absent (Mapping.__getitem__).");

static PyObject *lookup_getitem(PyObject *op, PyObject *key)
{
    PyObject *value = lookup_value((lookup_object *)op, key, 0);
    if (value == Py_None) {
        Py_DECREF(value);
        PyErr_SetObject(PyExc_KeyError, key);
        return NULL;
    }
    return value;
}

PyDoc_STRVAR(contains_doc,
"contains($self, key, /)\n--\n\n"
"Whether key is stored (Mapping.__contains__); keys of other types raise EntryTypeError.\n"
"An uncompressed store compares the key in place and copies no value.");

static PyObject *lookup_contains(PyObject *op, PyObject *key)
{
    PyObject *value = lookup_value((lookup_object *)op, key, 1);
    if (!value)
        return NULL;
    int found = value != Py_None;
    Py_DECREF(value);
    return PyBool_FromLong(found);
}

/* get_many of an uncompressed store: PROBE_BATCH keys at a time, prefetching their slots and
 * then their entries, so the cache misses of a batch overlap. */
static int uncompressed_many(lookup_object *self, const sparkey_column *keys, PyObject *values)
{
    const sparkey_table *t = &self->table;
    unsigned slot_size = t->hash_size + t->address_size, bits = t->entry_block_bits;
    uint64_t mask = ((uint64_t)1 << bits) - 1;
    Py_ssize_t count = keys->count;
    for (Py_ssize_t first = 0; first < count; first += PROBE_BATCH) {
        Py_ssize_t batch = count - first < PROBE_BATCH ? count - first : PROBE_BATCH;
        sparkey_probe probes[PROBE_BATCH];
        uint64_t addresses[PROBE_BATCH];
        int found[PROBE_BATCH];
        for (Py_ssize_t j = 0; j < batch; j++) {
            const uint8_t *key;
            size_t size;
            sparkey_row(keys, first + j, &key, &size);
            sparkey_probe_start(t, &probes[j], sparkey_hash(key, size, t->seed, t->hash_size));
            __builtin_prefetch(t->slots + probes[j].slot * slot_size);
        }
        for (Py_ssize_t j = 0; j < batch; j++) {
            found[j] = sparkey_probe_next(t, &probes[j], &addresses[j]);
            if (found[j] && (addresses[j] >> bits) < self->entries.end)
                __builtin_prefetch(self->entries.data + (addresses[j] >> bits));
        }
        for (Py_ssize_t j = 0; j < batch; j++) {
            const uint8_t *key;
            size_t size;
            sparkey_row(keys, first + j, &key, &size);
            PyObject *value;
            if (!found[j]) {
                value = Py_NewRef(Py_None);
            } else {
                value = sparkey_log_value(self->errors, &self->entries, addresses[j] >> bits,
                                          addresses[j] & mask, key, size, 0);
                if (value == Py_None) {
                    Py_DECREF(value);
                    value = probe_values(self, &probes[j], key, size, 0);
                }
            }
            if (!value)
                return -1;
            PyList_SET_ITEM(values, first + j, value);
        }
    }
    return 0;
}

PyDoc_STRVAR(get_many_doc,
"get_many($self, keys, /)\n--\n\n"
"get for every key of a sequence, as a new list (None where absent); the first error\n"
"raised by a key propagates. Uncompressed stores probe 16 keys at a time so that their\n"
"cache misses overlap; compressed ones read key by key, reusing the last block read.");

static PyObject *lookup_get_many(PyObject *op, PyObject *keys_object)
{
    lookup_object *self = (lookup_object *)op;
    if (self->released) {
        closed_error(self);
        return NULL;
    }
    sparkey_column keys;
    PyObject *holder = sparkey_pin_column(self->errors, keys_object, "key", &keys);
    if (!holder)
        return NULL;
    PyObject *values = PyList_New(keys.count);
    if (!values)
        goto done;
    if (self->released) {  /* iterating a generator of keys ran Python code */
        closed_error(self);
        Py_CLEAR(values);
    } else if (!self->decompress) {
        if (uncompressed_many(self, &keys, values) < 0)
            Py_CLEAR(values);
    } else {
        for (Py_ssize_t i = 0; i < keys.count; i++) {
            PyObject *value = compressed_get(self, keys.items[i]);
            if (!value) {
                Py_CLEAR(values);
                break;
            }
            PyList_SET_ITEM(values, i, value);
        }
    }
done:
    Py_DECREF(holder);
    return values;
}

PyDoc_STRVAR(release_doc,
"release($self, /)\n--\n\n"
"Drop the exports of both files (the mmaps can then be closed); later calls raise\n"
"ClosedError. Idempotent.");

static PyObject *lookup_release(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    release_buffers((lookup_object *)op);
    Py_RETURN_NONE;
}

static PyObject *lookup_released(PyObject *op, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(((lookup_object *)op)->released);
}

static PyMethodDef lookup_methods[] = {
    {"get", (PyCFunction)(void (*)(void))lookup_get, METH_FASTCALL, get_doc},
    {"getitem", lookup_getitem, METH_O, getitem_doc},
    {"contains", lookup_contains, METH_O, contains_doc},
    {"get_many", lookup_get_many, METH_O, get_many_doc},
    {"release", lookup_release, METH_NOARGS, release_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef lookup_getset[] = {
    {"released", lookup_released, NULL, "Whether release() was called.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot lookup_slots[] = {
    {Py_tp_doc, (void *)lookup_doc},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, lookup_init},
    {Py_tp_dealloc, lookup_dealloc},
    {Py_tp_traverse, lookup_traverse},
    {Py_tp_clear, lookup_clear},
    {Py_tp_methods, lookup_methods},
    {Py_tp_getset, lookup_getset},
    {0, NULL},
};

static PyType_Spec lookup_spec = {
    .name = "sparkey._native.Lookup",
    .basicsize = sizeof(lookup_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = lookup_slots,
};

int sparkey_add_lookup_type(PyObject *module)
{
    PyObject *type = PyType_FromModuleAndSpec(module, &lookup_spec, NULL);
    if (!type)
        return -1;
    int status = PyModule_AddObjectRef(module, "Lookup", type);
    Py_DECREF(type);
    return status;
}
