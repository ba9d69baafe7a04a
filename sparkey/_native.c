/* sparkey._native: the compiled hot paths of sparkey (pure layer: buffers in, values out).
 *
 * Each function mirrors a pure-Python reference that stays the specification and the
 * fallback, answering and failing as it does:
 *
 *   hash_key, hash_keys, hash_buffer   sparkey.murmur
 *   Lookup                             HashIndex.get / get_many over one open store, its
 *                                      files exported for its life (csrc/lookups.c)
 *   LookupSlots                        sparkey.lookup.LookupSlots: a reader's r[k] and `k in r`
 *                                      through its Lookup (csrc/slots.c)
 *   walk_block, decode_headers         BlockCursor.walk_block and entries.decode_headers,
 *                                      the per-entry steps of LogReader.scan (csrc/scans.c)
 *   frame_puts, frame_packed           the PUT entries LogWriter.put appends
 *   split_pairs                        the two columns of put_many's (key, value) pairs
 *   cut_blocks                         BlockCutter.cut (csrc/cutting.c)
 *   fill_slots                         sparkey.robinhood.replay, into a packed slot table
 *
 * Ownership: the functions export buffers (bytes, bytearray, mmap, numpy arrays) for the duration
 * of a call and release them on every path; only a Lookup keeps exports, until its release().
 * Thread safety: no shared
 * state; hash_keys, hash_buffer, frame_puts and fill_slots release the GIL for their loops,
 * after pinning their inputs (a private list of the items, buffer exports). This file holds
 * the module with the hashing, framing and index-build functions; the lookups, the argument
 * handling and the algorithms are in csrc/ (see native.h).
 */
#include "csrc/native.h"

/* ---- hashing */

/* The trailing (seed, hash_size) arguments of the hash functions, after `leading` others. */
static int hash_arguments(const char *name, PyObject *const *args, Py_ssize_t nargs,
                          Py_ssize_t leading, uint32_t *seed, unsigned *hash_size)
{
    if (sparkey_check_nargs(name, nargs, leading + 2, leading + 2) < 0
            || sparkey_as_seed(args[leading], seed) < 0
            || sparkey_as_word_size(args[leading + 1], "hash_size", hash_size) < 0)
        return -1;
    return 0;
}

PyDoc_STRVAR(hash_key_doc,
"hash_key($module, key, seed, hash_size, /)\n--\n\n"
"The index hash of one key: MurmurHash3_x86_32 (hash_size 4) or the first word of\n"
"MurmurHash3_x64_128 (hash_size 8) with the 32-bit seed, as sparkey.murmur.scalar_hasher.\n"
"key is bytes, bytearray, memoryview or str (UTF-8).");

static PyObject *native_hash_key(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    uint32_t seed;
    unsigned hash_size;
    if (hash_arguments("hash_key", args, nargs, 1, &seed, &hash_size) < 0)
        return NULL;
    PyObject *key = sparkey_entry_bytes(sparkey_errors_of(module), args[0], "key");
    if (!key)
        return NULL;
    uint64_t hash = sparkey_hash((const uint8_t *)PyBytes_AS_STRING(key),
                                 (size_t)PyBytes_GET_SIZE(key), seed, hash_size);
    Py_DECREF(key);
    return PyLong_FromUnsignedLongLong(hash);
}

PyDoc_STRVAR(hash_keys_doc,
"hash_keys($module, keys, seed, hash_size, /)\n--\n\n"
"The hashes of a sequence of keys (as hash_key takes them) as native uint64 words in a new\n"
"bytes object: np.frombuffer(result, np.uint64) equals sparkey.murmur.hash_keys. The GIL is\n"
"released while hashing.");

static PyObject *native_hash_keys(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    uint32_t seed;
    unsigned hash_size;
    if (hash_arguments("hash_keys", args, nargs, 1, &seed, &hash_size) < 0)
        return NULL;
    sparkey_column keys;
    PyObject *holder = sparkey_pin_column(sparkey_errors_of(module), args[0], "key", &keys);
    if (!holder)
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, keys.count * (Py_ssize_t)sizeof(uint64_t));
    if (out) {
        uint64_t *hashes = (uint64_t *)PyBytes_AS_STRING(out);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < keys.count; i++) {
            const uint8_t *key;
            size_t size;
            sparkey_row(&keys, i, &key, &size);
            hashes[i] = sparkey_hash(key, size, seed, hash_size);
        }
        Py_END_ALLOW_THREADS
    }
    Py_DECREF(holder);
    return out;
}

PyDoc_STRVAR(hash_buffer_doc,
"hash_buffer($module, buffer, offsets, lengths, seed, hash_size, /)\n--\n\n"
"The hashes of the keys buffer[offsets[i]:offsets[i] + lengths[i]] (offsets and lengths\n"
"int64 arrays) as native uint64 words in a new bytes object, as sparkey.murmur.hash_buffer.\n"
"Every range is checked against the buffer (ValueError); the GIL is released while hashing.");

static PyObject *native_hash_buffer(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    uint32_t seed;
    unsigned hash_size;
    Py_buffer data = {0}, offsets = {0}, lengths = {0};
    PyObject *out = NULL;
    if (hash_arguments("hash_buffer", args, nargs, 3, &seed, &hash_size) < 0
            || PyObject_GetBuffer(args[0], &data, PyBUF_SIMPLE) < 0
            || sparkey_get_array(args[1], &offsets, 'i', 8, 0, "offsets") < 0
            || sparkey_get_array(args[2], &lengths, 'i', 8, 0, "lengths") < 0)
        goto done;
    Py_ssize_t count = offsets.len / 8;
    const int64_t *offset = offsets.buf, *length = lengths.buf;
    if (lengths.len != offsets.len) {
        PyErr_Format(PyExc_ValueError, "%zd offsets but %zd lengths", count, lengths.len / 8);
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (offset[i] < 0 || length[i] < 0 || length[i] > data.len - offset[i]) {
            PyErr_Format(PyExc_ValueError, "key %zd at offset %lld of %lld bytes lies outside "
                         "the buffer of %zd bytes", i, (long long)offset[i],
                         (long long)length[i], data.len);
            goto done;
        }
    }
    out = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(uint64_t));
    if (out) {
        uint64_t *hashes = (uint64_t *)PyBytes_AS_STRING(out);
        const uint8_t *base = data.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < count; i++)
            hashes[i] = sparkey_hash(base + offset[i], (size_t)length[i], seed, hash_size);
        Py_END_ALLOW_THREADS
    }
done:
    sparkey_release(&data);
    sparkey_release(&offsets);
    sparkey_release(&lengths);
    return out;
}

/* ---- writing */

/* The encoded size of the PUTs of two columns of equal length; *too_long is the first row
 * whose key or value is longer than SPARKEY_MAX_ENTRY_PART_LEN, or -1. Runs without the GIL. */
static uint64_t framed_size(const sparkey_column *keys, const sparkey_column *values,
                            Py_ssize_t *too_long)
{
    uint64_t total = 0;
    *too_long = -1;
    for (Py_ssize_t i = 0; i < keys->count; i++) {
        const uint8_t *key, *value;
        size_t key_size, value_size;
        sparkey_row(keys, i, &key, &key_size);
        sparkey_row(values, i, &value, &value_size);
        if (key_size > SPARKEY_MAX_ENTRY_PART_LEN || value_size > SPARKEY_MAX_ENTRY_PART_LEN) {
            *too_long = i;
            break;
        }
        total += sparkey_put_size(key_size, value_size);
    }
    return total;
}

/* The PUT entries of two columns as a new bytes object, sized and written without the GIL;
 * the lengths go to key_lengths and value_lengths (filled int64 views, or zeroed ones). */
static PyObject *frame_columns(const sparkey_errors *errors, const sparkey_column *keys,
                               const sparkey_column *values, const Py_buffer *key_lengths,
                               const Py_buffer *value_lengths)
{
    Py_ssize_t count = keys->count, too_long;
    if (values->count != count) {
        PyErr_Format(PyExc_ValueError, "%zd keys but %zd values", count, values->count);
        return NULL;
    }
    if ((key_lengths->obj && key_lengths->len != count * 8)
            || (value_lengths->obj && value_lengths->len != count * 8)) {
        PyErr_Format(PyExc_ValueError, "key_lengths and value_lengths must hold %zd entries",
                     count);
        return NULL;
    }
    uint64_t total;
    Py_BEGIN_ALLOW_THREADS
    total = framed_size(keys, values, &too_long);
    Py_END_ALLOW_THREADS
    if (too_long >= 0) {
        const uint8_t *data;
        size_t key_size, value_size;
        sparkey_row(keys, too_long, &data, &key_size);
        sparkey_row(values, too_long, &data, &value_size);
        int key = key_size > SPARKEY_MAX_ENTRY_PART_LEN;
        PyErr_Format(errors->entry_size_error, "a %s of %zu bytes is longer than %u bytes, the "
                     "largest that sparkey-java can read; split it or store it elsewhere",
                     key ? "key" : "value", key ? key_size : value_size,
                     SPARKEY_MAX_ENTRY_PART_LEN);
        return NULL;
    }
    if (total > PY_SSIZE_T_MAX)
        return PyErr_NoMemory();
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!out)
        return NULL;
    uint8_t *at = (uint8_t *)PyBytes_AS_STRING(out);
    int64_t *key_length = key_lengths->buf, *value_length = value_lengths->buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++) {
        const uint8_t *key, *value;
        size_t key_size, value_size;
        sparkey_row(keys, i, &key, &key_size);
        sparkey_row(values, i, &value, &value_size);
        at = sparkey_write_put(at, key, key_size, value, value_size);
        if (key_length)
            key_length[i] = (int64_t)key_size;
        if (value_length)
            value_length[i] = (int64_t)value_size;
    }
    Py_END_ALLOW_THREADS
    return out;
}

PyDoc_STRVAR(frame_puts_doc,
"frame_puts($module, keys, values, key_lengths=None, value_lengths=None)\n--\n\n"
"The PUT entries of keys[i] -> values[i] back to back, VLQ(len(key) + 1) VLQ(len(value))\n"
"key value each: the bytes LogWriter.put appends to an uncompressed log (and to the entry\n"
"stream of a compressed one), as a new bytes object. Items are taken as entry_bytes takes\n"
"them; a key or value longer than 2**31 - 1 bytes raises EntrySizeError. key_lengths and\n"
"value_lengths, if given, are writable int64 arrays of len(keys) entries that receive the\n"
"lengths (for header counters and block cutting). Entries are sized and written with the GIL\n"
"released; tuples of bytes are read in place, other sequences are first copied into a\n"
"private list with the GIL held (a pass over the items that two threads cannot share).");

static PyObject *native_frame_puts(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"keys", "values", "key_lengths", "value_lengths", NULL};
    PyObject *key_seq, *value_seq, *key_lengths_obj = Py_None, *value_lengths_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OO:frame_puts", names, &key_seq,
                                     &value_seq, &key_lengths_obj, &value_lengths_obj))
        return NULL;
    const sparkey_errors *errors = sparkey_errors_of(module);
    Py_buffer key_lengths = {0}, value_lengths = {0};
    sparkey_column keys, values;
    PyObject *out = NULL, *value_holder = NULL;
    PyObject *key_holder = sparkey_pin_column(errors, key_seq, "key", &keys);
    if (key_holder && (value_holder = sparkey_pin_column(errors, value_seq, "value", &values))
            && (key_lengths_obj == Py_None || sparkey_get_array(
                    key_lengths_obj, &key_lengths, 'i', 8, 1, "key_lengths") == 0)
            && (value_lengths_obj == Py_None || sparkey_get_array(
                    value_lengths_obj, &value_lengths, 'i', 8, 1, "value_lengths") == 0))
        out = frame_columns(errors, &keys, &values, &key_lengths, &value_lengths);
    Py_XDECREF(key_holder);
    Py_XDECREF(value_holder);
    sparkey_release(&key_lengths);
    sparkey_release(&value_lengths);
    return out;
}

PyDoc_STRVAR(frame_packed_doc,
"frame_packed($module, key_data, key_offsets, value_data, value_offsets, /)\n--\n\n"
"frame_puts of two PackedBytes columns: key i is key_data[key_offsets[i]:key_offsets[i + 1]]\n"
"(key_data any buffer, key_offsets an int64 array of len + 1 non-decreasing offsets), and\n"
"likewise the values. After the offsets are checked (ValueError), the whole call runs with\n"
"the GIL released but for allocating the result.");

static PyObject *native_frame_packed(PyObject *module, PyObject *const *args,
                                     Py_ssize_t nargs)
{
    Py_buffer views[4] = {{0}}, no_lengths = {0};
    sparkey_column keys, values;
    PyObject *out = NULL;
    if (sparkey_check_nargs("frame_packed", nargs, 4, 4) == 0
            && PyObject_GetBuffer(args[0], &views[0], PyBUF_SIMPLE) == 0
            && sparkey_get_array(args[1], &views[1], 'i', 8, 0, "key_offsets") == 0
            && PyObject_GetBuffer(args[2], &views[2], PyBUF_SIMPLE) == 0
            && sparkey_get_array(args[3], &views[3], 'i', 8, 0, "value_offsets") == 0
            && sparkey_rows_column(&views[0], &views[1], "key", &keys) == 0
            && sparkey_rows_column(&views[2], &views[3], "value", &values) == 0)
        out = frame_columns(sparkey_errors_of(module), &keys, &values, &no_lengths,
                            &no_lengths);
    for (int i = 0; i < 4; i++)
        sparkey_release(&views[i]);
    return out;
}

/* ---- the index build */

/* The optional key columns of fill_slots, checked against each other and the key buffer. */
PyDoc_STRVAR(split_pairs_doc,
"split_pairs($module, pairs, /)\n--\n\n"
"(keys, values), two new tuples, from a list of (key, value) 2-tuples: the zip(*pairs) of\n"
"put_many's pairs in one C pass. None when an item is not a 2-tuple (the caller then takes\n"
"the general path); the items themselves are checked by frame_puts.");

static PyObject *native_split_pairs(PyObject *Py_UNUSED(module), PyObject *pairs)
{
    if (!PyList_Check(pairs))
        Py_RETURN_NONE;
    Py_ssize_t count = PyList_GET_SIZE(pairs);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *pair = PyList_GET_ITEM(pairs, i);
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2)
            Py_RETURN_NONE;
    }
    PyObject *keys = PyTuple_New(count), *values = PyTuple_New(count);
    if (!keys || !values) {
        Py_XDECREF(keys);
        Py_XDECREF(values);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {  /* no Python code runs: the list cannot change */
        PyObject *pair = PyList_GET_ITEM(pairs, i);
        PyTuple_SET_ITEM(keys, i, Py_NewRef(PyTuple_GET_ITEM(pair, 0)));
        PyTuple_SET_ITEM(values, i, Py_NewRef(PyTuple_GET_ITEM(pair, 1)));
    }
    return Py_BuildValue("(NN)", keys, values);
}

static int get_key_columns(PyObject *const objs[5], Py_buffer views[5], Py_ssize_t count,
                           sparkey_entries *e)
{
    static const char *names[] = {"kinds", "key_buffer", "key_offsets", "key_lengths",
                                  "value_lengths"};
    if (sparkey_get_array(objs[0], &views[0], 'u', 1, 0, names[0]) < 0
            || PyObject_GetBuffer(objs[1], &views[1], PyBUF_SIMPLE) < 0)
        return -1;
    for (int i = 2; i < 5; i++)
        if (sparkey_get_array(objs[i], &views[i], 'i', 8, 0, names[i]) < 0)
            return -1;
    for (int i = 0; i < 5; i++) {
        if (i != 1 && views[i].len / views[i].itemsize != count) {
            PyErr_Format(PyExc_ValueError, "%s holds %zd entries, not %zd", names[i],
                         views[i].len / views[i].itemsize, count);
            return -1;
        }
    }
    e->kinds = views[0].buf;
    e->keys = views[1].buf;
    e->key_offsets = views[2].buf;
    e->key_lengths = views[3].buf;
    e->value_lengths = views[4].buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t offset = e->key_offsets[i], length = e->key_lengths[i];
        if (offset < 0 || length < 0 || length > views[1].len - offset
                || e->value_lengths[i] < 0) {
            PyErr_Format(PyExc_ValueError, "entry %zd: key at offset %lld of %lld bytes (value "
                         "of %lld bytes) lies outside the key buffer of %zd bytes", i,
                         (long long)offset, (long long)length, (long long)e->value_lengths[i],
                         views[1].len);
            return -1;
        }
    }
    return 0;
}

PyDoc_STRVAR(fill_slots_doc,
"fill_slots($module, slots, hash_size, address_size, hashes, addresses, rules, kinds=None,\n"
"           key_buffer=None, key_offsets=None, key_lengths=None, value_lengths=None)\n--\n\n"
"Overwrite slots, a writable buffer of packed little-endian (hash, address) slots (the part\n"
"of a .spi after its header), with the Robin Hood table that inserting the entries in order\n"
"builds under rules 'c' (libsparkey) or 'java' (sparkey-java); return the garbage bytes, as\n"
"sparkey.robinhood.replay returns them. hashes and addresses are uint64 arrays in log order.\n"
"With kinds (uint8 EntryKind codes), key_buffer and the int64 key_offsets, key_lengths and\n"
"value_lengths columns (an EntryTable's), equal keys overwrite and DELETEs remove, exactly as\n"
"the replay; without them every entry is a PUT of a distinct key, which with rules 'java'\n"
"gives the canonical table of those entries. Inputs are validated first (ValueError), then\n"
"the table is built with the GIL released: O(entries x mean probe length), plus one word per\n"
"slot of scratch memory when keys are given.");

static PyObject *native_fill_slots(PyObject *module, PyObject *args, PyObject *kwargs)
{
    (void)module;
    static char *names[] = {"slots", "hash_size", "address_size", "hashes", "addresses",
                            "rules", "kinds", "key_buffer", "key_offsets", "key_lengths",
                            "value_lengths", NULL};
    PyObject *slots_obj, *hash_size_obj, *address_size_obj, *hashes_obj, *addresses_obj;
    PyObject *keys[5] = {Py_None, Py_None, Py_None, Py_None, Py_None};
    const char *rules;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOs|OOOOO:fill_slots", names,
                                     &slots_obj, &hash_size_obj, &address_size_obj,
                                     &hashes_obj, &addresses_obj, &rules, &keys[0], &keys[1],
                                     &keys[2], &keys[3], &keys[4]))
        return NULL;
    unsigned hash_size, address_size;
    Py_buffer slots = {0}, hashes = {0}, addresses = {0}, key_views[5] = {{0}};
    sparkey_entries e = {0};
    PyObject *result = NULL;
    int java = strcmp(rules, "java") == 0, given = 0;
    for (int i = 0; i < 5; i++)
        given += keys[i] != Py_None;
    if (!java && strcmp(rules, "c") != 0) {
        PyErr_Format(PyExc_ValueError, "rules must be 'c' or 'java', not '%s'", rules);
        goto done;
    }
    if (given != 0 && given != 5) {
        PyErr_SetString(PyExc_TypeError, "kinds, key_buffer, key_offsets, key_lengths and "
                        "value_lengths go together: give all five or none");
        goto done;
    }
    if (sparkey_as_word_size(hash_size_obj, "hash_size", &hash_size) < 0
            || sparkey_as_word_size(address_size_obj, "address_size", &address_size) < 0
            || PyObject_GetBuffer(slots_obj, &slots, PyBUF_WRITABLE) < 0
            || sparkey_get_array(hashes_obj, &hashes, 'u', 8, 0, "hashes") < 0
            || sparkey_get_array(addresses_obj, &addresses, 'u', 8, 0, "addresses") < 0)
        goto done;
    Py_ssize_t count = hashes.len / 8, slot_size = hash_size + address_size;
    uint64_t capacity = (uint64_t)(slots.len / slot_size);
    if (addresses.len != hashes.len) {
        PyErr_Format(PyExc_ValueError, "%zd hashes but %zd addresses", count,
                     addresses.len / 8);
        goto done;
    }
    if (capacity == 0 || slots.len % slot_size) {
        PyErr_Format(PyExc_ValueError, "slots of %zd bytes is not a whole, non-empty number of "
                     "%zd-byte slots", slots.len, slot_size);
        goto done;
    }
    e.count = (size_t)count;
    e.hashes = hashes.buf;
    e.addresses = addresses.buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        if ((hash_size == 4 && e.hashes[i] >> 32) || e.addresses[i] == 0
                || (address_size == 4 && e.addresses[i] >> 32)) {
            PyErr_Format(PyExc_ValueError, "entry %zd: hash %llu or address %llu does not fit a "
                         "slot of a %u-byte hash and a non-zero %u-byte address", i,
                         (unsigned long long)e.hashes[i], (unsigned long long)e.addresses[i],
                         hash_size, address_size);
            goto done;
        }
    }
    if (given && get_key_columns(keys, key_views, count, &e) < 0)
        goto done;
    uint64_t garbage;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = sparkey_fill_slots(slots.buf, capacity, hash_size, address_size, &e, java,
                                &garbage);
    Py_END_ALLOW_THREADS
    if (status == -1)
        PyErr_NoMemory();
    else if (status < 0)
        PyErr_Format(PyExc_ValueError, "the entries do not fit in %llu slots",
                     (unsigned long long)capacity);
    else
        result = PyLong_FromUnsignedLongLong(garbage);
done:
    sparkey_release(&slots);
    sparkey_release(&hashes);
    sparkey_release(&addresses);
    for (int i = 0; i < 5; i++)
        sparkey_release(&key_views[i]);
    return result;
}

/* ---- the module */

static PyMethodDef native_methods[] = {
    {"hash_key", (PyCFunction)(void (*)(void))native_hash_key, METH_FASTCALL, hash_key_doc},
    {"hash_keys", (PyCFunction)(void (*)(void))native_hash_keys, METH_FASTCALL, hash_keys_doc},
    {"hash_buffer", (PyCFunction)(void (*)(void))native_hash_buffer, METH_FASTCALL,
     hash_buffer_doc},
    {"frame_puts", (PyCFunction)(void (*)(void))native_frame_puts,
     METH_VARARGS | METH_KEYWORDS, frame_puts_doc},
    {"frame_packed", (PyCFunction)(void (*)(void))native_frame_packed, METH_FASTCALL,
     frame_packed_doc},
    {"split_pairs", native_split_pairs, METH_O, split_pairs_doc},
    {"fill_slots", (PyCFunction)(void (*)(void))native_fill_slots,
     METH_VARARGS | METH_KEYWORDS, fill_slots_doc},
    {NULL, NULL, 0, NULL},
};

static int native_exec(PyObject *module)
{
    if (PyModule_AddFunctions(module, sparkey_scan_methods) < 0
            || PyModule_AddFunctions(module, sparkey_cutting_methods) < 0)
        return -1;
    sparkey_errors *errors = sparkey_errors_of(module);
    PyObject *classes = PyImport_ImportModule("sparkey.errors");
    if (!classes)
        return -1;
    errors->log_format_error = PyObject_GetAttrString(classes, "LogFormatError");
    errors->index_format_error = PyObject_GetAttrString(classes, "IndexFormatError");
    errors->entry_type_error = PyObject_GetAttrString(classes, "EntryTypeError");
    errors->entry_size_error = PyObject_GetAttrString(classes, "EntrySizeError");
    errors->closed_error = PyObject_GetAttrString(classes, "ClosedError");
    Py_DECREF(classes);
    if (!errors->log_format_error || !errors->index_format_error
            || !errors->entry_type_error || !errors->entry_size_error || !errors->closed_error)
        return -1;
    errors->spans_blocks = PyErr_NewExceptionWithDoc(
        "sparkey._native.SpansBlocks",
        "An entry continues past the block it was looked for in.", NULL, NULL);
    if (!errors->spans_blocks)
        return -1;
    if (sparkey_add_lookup_type(module) < 0)
        return -1;
    return sparkey_add_slots_type(module);
}

static int native_traverse(PyObject *module, visitproc visit, void *arg)
{
    sparkey_errors *errors = sparkey_errors_of(module);
    Py_VISIT(errors->log_format_error);
    Py_VISIT(errors->index_format_error);
    Py_VISIT(errors->entry_type_error);
    Py_VISIT(errors->entry_size_error);
    Py_VISIT(errors->closed_error);
    Py_VISIT(errors->spans_blocks);
    return 0;
}

static int native_clear(PyObject *module)
{
    sparkey_errors *errors = sparkey_errors_of(module);
    Py_CLEAR(errors->log_format_error);
    Py_CLEAR(errors->index_format_error);
    Py_CLEAR(errors->entry_type_error);
    Py_CLEAR(errors->entry_size_error);
    Py_CLEAR(errors->closed_error);
    Py_CLEAR(errors->spans_blocks);
    return 0;
}

static void native_free(void *module)
{
    native_clear((PyObject *)module);
}

static PyModuleDef_Slot native_slots[] = {
    {Py_mod_exec, native_exec},
    {0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "sparkey._native",
    .m_doc = "Compiled hot paths of sparkey: hashing, lookups, PUT framing and the sequential "
             "index build, each the exact counterpart of its pure-Python reference.",
    .m_size = sizeof(sparkey_errors),
    .m_methods = native_methods,
    .m_slots = native_slots,
    .m_traverse = native_traverse,
    .m_clear = native_clear,
    .m_free = native_free,
};

PyMODINIT_FUNC PyInit__native(void)
{
    return PyModuleDef_Init(&native_module);
}
