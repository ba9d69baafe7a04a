/* offheap.treemap._pages: the compiled codec of B+tree leaf bodies (layer 6, pure).
 *
 * The C twin of the leaf half of offheap.treemap.page: encode_leaf writes, and decode_leaf
 * reads, a raw leaf page (flags 00, varint count, then the body: the key block and the value
 * column) byte for byte as page.encode_leaf / decode_leaf do through encode_keys / decode_keys
 * and the value serializers' pack_column / unpack_column; decode_leaf_body reads the body of a
 * page that page.py decompressed. Codecs stay with page.py, which calls these functions and
 * keeps the Python code as the reference and the fallback.
 *
 * Kinds are small ints: keys 0 int64, 1 str, 2 bytes (page.KEY_KINDS order); values 0 int64,
 * 1 float64, 2 str, 3 bytes, 4 object (the serializers of offheap.store.serializers).
 *
 * Declining. Both functions return None, having changed nothing, for what the reference handles
 * alone: keys or values that are not exact int/float/str/bytes objects (numpy scalars,
 * subclasses), ints outside int64 as values, str with lone surrogates, object columns of mixed
 * types (the tagged "constant" and "mixed" forms, which may hold pickles). The caller then runs
 * the reference, so every page still has one meaning.
 *
 * Ownership: the lists returned are new and belong to the caller; the body buffer is borrowed
 * for the call only. Thread safety: the GIL is held throughout; no state is shared between
 * calls besides the CorruptionError class.
 */
#include "csrc/pages.h"

enum { KEY_INT64 = 0, KEY_STR = 1, KEY_BYTES = 2 };
enum { VALUE_INT64 = 0, VALUE_FLOAT64 = 1, VALUE_STR = 2, VALUE_BYTES = 3, VALUE_OBJECT = 4 };
/* Forms of an object column (offheap.store.serializers) that this module reads and writes. */
enum { OBJECT_INT = 1, OBJECT_FLOAT = 2, OBJECT_STR = 3, OBJECT_BYTES = 4 };
enum { OBJECT_CONSTANT = 0, OBJECT_MIXED = 5 };

/* -- int64 words of Python objects ----------------------------------------------------------- */

/* The exact ints of `items` as int64 bits in `out`; PAGE_NOT_HANDLED for anything else. */
static int
borrow_int64s(PyObject **items, Py_ssize_t count, uint64_t *out)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        int overflow;
        if (!PyLong_CheckExact(items[i]))
            return PAGE_NOT_HANDLED;
        long long value = PyLong_AsLongLongAndOverflow(items[i], &overflow);
        if (overflow)
            return PAGE_NOT_HANDLED;
        if (value == -1 && PyErr_Occurred())
            return -1;
        out[i] = (uint64_t)value;
    }
    return 0;
}

/* The exact floats of `items` as their IEEE bit patterns; PAGE_NOT_HANDLED for anything else. */
static int
borrow_float64s(PyObject **items, Py_ssize_t count, uint64_t *out)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!PyFloat_CheckExact(items[i]))
            return PAGE_NOT_HANDLED;
        double value = PyFloat_AS_DOUBLE(items[i]);
        memcpy(&out[i], &value, sizeof value);
    }
    return 0;
}

/* A new list of `count` ints (as_float 0) or floats (1) from 64-bit words. */
static PyObject *
list_of_words(const uint64_t *words, Py_ssize_t count, int as_float)
{
    PyObject *list = PyList_New(count);
    for (Py_ssize_t i = 0; list != NULL && i < count; i++) {
        double real;
        memcpy(&real, &words[i], sizeof real);
        PyObject *item = as_float ? PyFloat_FromDouble(real) : PyLong_FromLongLong((int64_t)words[i]);
        if (item == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, item);
    }
    return list;
}

/* -- key blocks ------------------------------------------------------------------------------ */

/* The number of low zero bits all keys share, 63 at most (and for all-zero keys). */
static int
common_shift(const uint64_t *keys, Py_ssize_t count)
{
    uint64_t merged = 0;
    for (Py_ssize_t i = 0; i < count; i++)
        merged |= keys[i];
    return merged ? (__builtin_ctzll(merged) < 63 ? __builtin_ctzll(merged) : 63) : 63;
}

#define KEY_RAW_FIRST 0x40  /* in the shift byte: page._RAW_FIRST */

/* u8 shift s, then the delta block of keys >> s (arithmetic), its first key as 8 bytes and
 * KEY_RAW_FIRST in the shift byte where its varint would be longer: page.encode_keys for
 * int64. */
static int
write_int64_keys(PageWriter *writer, uint64_t *keys, Py_ssize_t count)
{
    int shift = common_shift(keys, count);
    for (Py_ssize_t i = 0; i < count; i++)
        keys[i] = (uint64_t)((int64_t)keys[i] >> shift);
    uint64_t first = keys[0];
    if (varint_size((first << 1) ^ (uint64_t)((int64_t)first >> 63)) <= 8)
        return write_byte(writer, (uint8_t)shift) < 0 ? -1 : write_int64_deltas(writer, keys, count);
    uint8_t raw[8];
    for (int b = 0; b < 8; b++)
        raw[b] = (uint8_t)(first >> (8 * b));
    return (write_byte(writer, (uint8_t)(shift | KEY_RAW_FIRST)) < 0
            || write_bytes(writer, raw, 8) < 0) ? -1 : write_int64_gaps(writer, keys, count);
}

int
read_int64_key_words(PageReader *reader, Py_ssize_t count, uint64_t *out)
{
    uint8_t flags;
    if (read_byte(reader, &flags, "int64 key block shift") < 0)
        return -1;
    int shift = flags & ~KEY_RAW_FIRST;
    if (shift > 63)
        return page_corrupt("int64 key block shift %d is above 63: the data is corrupt", shift);
    if (flags & KEY_RAW_FIRST) {
        if (reader->size - reader->pos < 8)
            return page_corrupt("int64 key block's first key at offset %zd is past the end of "
                                "the %zd-byte page body: the data is truncated", reader->pos,
                                reader->size);
        uint64_t first = 0;
        for (int b = 7; b >= 0; b--)
            first = (first << 8) | reader->data[reader->pos + b];
        reader->pos += 8;
        out[0] = first;
        if (read_int64_gaps(reader, count, out) < 0)
            return -1;
    }
    else if (read_int64_deltas(reader, count, out) < 0)
        return -1;
    int64_t low = INT64_MIN >> shift, high = INT64_MAX >> shift;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t key = (int64_t)out[i];
        if (key < low || key > high)
            return page_corrupt("int64 key %lld << %d does not fit in int64: the data is "
                                "corrupt", (long long)key, shift);
        out[i] = (uint64_t)key << shift;
    }
    return 0;
}

/* `count` int64 keys: a new array('q') with `as_column`, else a new list. */
static PyObject *
read_int64_keys(PageReader *reader, Py_ssize_t count, uint64_t *scratch, int as_column)
{
    if (read_int64_key_words(reader, count, scratch) < 0)
        return NULL;
    return as_column ? new_int64_column(scratch, count) : list_of_words(scratch, count, 0);
}

static int
write_keys(PageWriter *writer, PyObject **keys, Py_ssize_t count, int key_kind, void *scratch)
{
    if (key_kind == KEY_INT64) {
        int status = borrow_int64s(keys, count, scratch);
        return status ? status : write_int64_keys(writer, scratch, count);
    }
    int status = borrow_strings(keys, count, key_kind == KEY_STR, scratch);
    return status ? status : write_front_coded(writer, scratch, count);
}

/* `count` keys: with `as_column` a leaf's key column (columns.c), else a list. */
static PyObject *
read_keys(PageReader *reader, Py_ssize_t count, int key_kind, uint64_t *scratch, int as_column)
{
    if (key_kind == KEY_INT64)
        return read_int64_keys(reader, count, scratch, as_column);
    return read_front_coded(reader, count, key_kind == KEY_STR);
}

/* -- value columns --------------------------------------------------------------------------- */

static int
write_word_column(PageWriter *writer, PyObject **values, Py_ssize_t count, int as_float,
                  uint64_t *scratch)
{
    int status = as_float ? borrow_float64s(values, count, scratch)
                          : borrow_int64s(values, count, scratch);
    return status ? status : write_int64_column(writer, scratch, count);
}

static int
write_text_column(PageWriter *writer, PyObject **values, Py_ssize_t count, int as_text,
                  PageString *scratch)
{
    int status = borrow_strings(values, count, as_text, scratch);
    return status ? status : write_string_column(writer, scratch, count);
}

/* The object column of values all of one exact type among int, float, str, bytes. */
static int
write_object_column(PageWriter *writer, PyObject **values, Py_ssize_t count, void *scratch)
{
    PyTypeObject *type = Py_TYPE(values[0]);
    for (Py_ssize_t i = 1; i < count; i++)
        if (Py_TYPE(values[i]) != type)
            return PAGE_NOT_HANDLED;
    int form = type == &PyLong_Type ? OBJECT_INT : type == &PyFloat_Type ? OBJECT_FLOAT
             : type == &PyUnicode_Type ? OBJECT_STR : type == &PyBytes_Type ? OBJECT_BYTES : -1;
    if (form < 0)
        return PAGE_NOT_HANDLED;
    PageWriter column = {0};
    int status = form <= OBJECT_FLOAT
        ? write_word_column(&column, values, count, form == OBJECT_FLOAT, scratch)
        : write_text_column(&column, values, count, form == OBJECT_STR, scratch);
    if (status == 0)
        status = (write_byte(writer, (uint8_t)form) < 0
                  || write_bytes(writer, column.data, column.size) < 0) ? -1 : 0;
    writer_free(&column);
    return status;
}

static int
write_values(PageWriter *writer, PyObject **values, Py_ssize_t count, int value_kind,
             void *scratch)
{
    switch (value_kind) {
    case VALUE_INT64:
    case VALUE_FLOAT64:
        return write_word_column(writer, values, count, value_kind == VALUE_FLOAT64, scratch);
    case VALUE_STR:
    case VALUE_BYTES:
        return write_text_column(writer, values, count, value_kind == VALUE_STR, scratch);
    default:
        return write_object_column(writer, values, count, scratch);
    }
}

PyObject *
read_values(PageReader *reader, Py_ssize_t count, int value_kind, uint64_t *scratch)
{
    uint8_t form;
    switch (value_kind) {
    case VALUE_INT64:
    case VALUE_FLOAT64:
        if (read_int64_column(reader, count, scratch) < 0)
            return NULL;
        return list_of_words(scratch, count, value_kind == VALUE_FLOAT64);
    case VALUE_STR:
    case VALUE_BYTES:
        return read_string_column(reader, count, value_kind == VALUE_STR);
    default:
        if (read_byte(reader, &form, "object column form byte") < 0)
            return NULL;
        if (form == OBJECT_INT || form == OBJECT_FLOAT)
            return read_values(reader, count, form == OBJECT_INT ? VALUE_INT64 : VALUE_FLOAT64,
                               scratch);
        if (form == OBJECT_STR || form == OBJECT_BYTES)
            return read_string_column(reader, count, form == OBJECT_STR);
        if (form == OBJECT_CONSTANT || form == OBJECT_MIXED)
            Py_RETURN_NONE;
        page_corrupt("unknown object column form %d at offset %zd", form, reader->pos - 1);
        return NULL;
    }
}

PyObject *
read_value_at(PageReader *reader, Py_ssize_t count, int value_kind, Py_ssize_t index,
              uint64_t *scratch)
{
    int kind = value_kind;
    if (kind == VALUE_OBJECT) {
        PageReader probe = *reader;
        uint8_t form;
        if (read_byte(&probe, &form, "object column form byte") < 0)
            return NULL;
        if (form == OBJECT_INT || form == OBJECT_FLOAT) {
            *reader = probe;
            kind = form == OBJECT_INT ? VALUE_INT64 : VALUE_FLOAT64;
        }
    }
    if (kind == VALUE_INT64 || kind == VALUE_FLOAT64) {
        if (read_int64_column(reader, count, scratch) < 0)
            return NULL;
        if (kind == VALUE_INT64)
            return PyLong_FromLongLong((int64_t)scratch[index]);
        double real;
        memcpy(&real, &scratch[index], sizeof real);
        return PyFloat_FromDouble(real);
    }
    if (kind == VALUE_OBJECT) {
        PageReader probe = *reader;
        uint8_t form;
        if (read_byte(&probe, &form, "object column form byte") < 0)
            return NULL;
        if (form == OBJECT_STR || form == OBJECT_BYTES) {
            *reader = probe;
            kind = form == OBJECT_STR ? VALUE_STR : VALUE_BYTES;
        }
    }
    if (kind == VALUE_STR || kind == VALUE_BYTES) {
        PyObject *value = read_constant_string(reader, kind == VALUE_STR);
        if (value != Py_None)
            return value;  /* the one value of a constant column, or NULL */
        Py_DECREF(value);
    }
    PyObject *values = read_values(reader, count, kind, scratch);
    if (values == NULL || values == Py_None)
        return values;
    PyObject *value = Py_NewRef(PyList_GET_ITEM(values, index));
    Py_DECREF(values);
    return value;
}

/* -- module functions ------------------------------------------------------------------------ */

static int
check_kinds(int key_kind, int value_kind)
{
    if (key_kind < KEY_INT64 || key_kind > KEY_BYTES || value_kind < VALUE_INT64
            || value_kind > VALUE_OBJECT) {
        PyErr_Format(PyExc_ValueError, "unknown key kind %d or value kind %d", key_kind,
                     value_kind);
        return -1;
    }
    return 0;
}

/* Scratch for `count` words or strings (the larger of the two), PyMem, freed by the caller. */
static void *
new_scratch(Py_ssize_t count)
{
    size_t item = sizeof(PageString) > sizeof(uint64_t) ? sizeof(PageString) : sizeof(uint64_t);
    void *scratch = PyMem_Malloc(item * (size_t)count + 1);
    if (scratch == NULL)
        PyErr_NoMemory();
    return scratch;
}

PyDoc_STRVAR(encode_leaf_doc,
"encode_leaf(keys, values, key_kind, value_kind) -> bytes | None\n\n"
"The raw leaf page (flags 00, varint count, body) of the non-empty keys (a list, or an\n"
"array('q') of int64 keys) and the list of their values, as offheap.treemap.page writes it;\n"
"None when the reference must encode it.");

/* The raw leaf page of a writer that holds its header and keys (`status` 0; -1 failed, 1 the
 * keys were declined), with the `count` values after them; frees `scratch`. */
static PyObject *
finish_leaf_page(PageWriter *writer, int status, PyObject **values, Py_ssize_t count,
                 int value_kind, void *scratch)
{
    if (status == 0)
        status = write_values(writer, values, count, value_kind, scratch);
    PyMem_Free(scratch);
    if (status == 0)
        return writer_finish(writer);
    writer_free(writer);
    if (status < 0)
        return NULL;
    Py_RETURN_NONE;
}

static int
start_leaf_page(PageWriter *writer, Py_ssize_t count)
{
    return write_byte(writer, 0) < 0 || write_varint(writer, (uint64_t)count) < 0 ? -1 : 0;
}

/* The keys of a leaf page: a list of any kind's keys, or an int64 column's words. */
static int
write_leaf_keys(PageWriter *writer, PyObject *keys, int key_kind, void *scratch)
{
    if (PyList_CheckExact(keys))
        return write_keys(writer, PySequence_Fast_ITEMS(keys), PyList_GET_SIZE(keys), key_kind,
                          scratch);
    KeyWords words;
    if (key_kind != KEY_INT64) {
        PyErr_SetString(PyExc_TypeError, "encode_leaf: str and bytes keys come as a list");
        return -1;
    }
    if (key_words_open(keys, &words) < 0)
        return -1;
    memcpy(scratch, words.words, (size_t)words.count * sizeof(uint64_t));
    Py_ssize_t count = words.count;
    key_words_close(&words);
    return write_int64_keys(writer, scratch, count);
}

static PyObject *
encode_leaf_page(PyObject *keys, PyObject *values, int key_kind, int value_kind)
{
    Py_ssize_t count = key_column_size(keys);
    if (count < 0)
        return NULL;
    if (count < 1 || PyList_GET_SIZE(values) != count) {
        PyErr_Format(PyExc_ValueError, "a leaf page needs as many values as keys, at least one: "
                     "got %zd keys and %zd values", count, PyList_GET_SIZE(values));
        return NULL;
    }
    void *scratch = new_scratch(count);
    if (scratch == NULL)
        return NULL;
    PageWriter writer = {0};
    int status = start_leaf_page(&writer, count) < 0 ? -1
        : write_leaf_keys(&writer, keys, key_kind, scratch);
    return finish_leaf_page(&writer, status, PySequence_Fast_ITEMS(values), count, value_kind,
                            scratch);
}

PyObject *
encode_int64_leaf_page(const uint64_t *keys, Py_ssize_t count, PyObject **values, int value_kind)
{
    uint64_t *scratch = new_scratch(count);
    if (scratch == NULL)
        return NULL;
    memcpy(scratch, keys, (size_t)count * sizeof(uint64_t));  /* write_int64_keys shifts them */
    PageWriter writer = {0};
    int status = start_leaf_page(&writer, count) < 0 ? -1
        : write_int64_keys(&writer, scratch, count);
    return finish_leaf_page(&writer, status, values, count, value_kind, scratch);
}

static PyObject *
encode_leaf(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *keys, *values;
    int key_kind, value_kind;
    if (!PyArg_ParseTuple(args, "OO!ii:encode_leaf", &keys, &PyList_Type, &values, &key_kind,
                          &value_kind) || check_kinds(key_kind, value_kind) < 0)
        return NULL;
    if (!PyList_CheckExact(keys) && !is_int64_column(keys)) {
        PyErr_SetString(PyExc_TypeError, "encode_leaf: keys are a list or an array('q')");
        return NULL;
    }
    return encode_leaf_page(keys, values, key_kind, value_kind);
}

PyObject *
read_entries(PageReader *reader, Py_ssize_t count, int key_kind, int value_kind, int key_column)
{
    if (count > PAGE_MAX_ENTRIES) {
        page_corrupt("leaf page counts %zd entries, more than a page holds (%d): the data is "
                     "corrupt", count, PAGE_MAX_ENTRIES);
        return NULL;
    }
    uint64_t *scratch = PyMem_Malloc(sizeof(uint64_t) * (size_t)count + 1);
    if (scratch == NULL)
        return PyErr_NoMemory();
    PyObject *result = NULL, *keys, *values = NULL;
    if ((keys = read_keys(reader, count, key_kind, scratch, key_column)) != NULL
            && (values = read_values(reader, count, value_kind, scratch)) != NULL)
        result = values == Py_None ? Py_NewRef(Py_None) : PyTuple_Pack(2, keys, values);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    PyMem_Free(scratch);
    return result;
}

PyDoc_STRVAR(decode_leaf_doc,
"decode_leaf(page, key_kind, value_kind) -> (keys, values) | None\n\n"
"The keys and values of a raw leaf page (flags 00): a new key column (page.key_column) and a\n"
"new list; None for any other flags\n"
"(a compressed page, or not a leaf's) and when the reference must decode the page (an object\n"
"column of mixed types). CorruptionError for a damaged page or a count above MAX_ENTRIES.");

static PyObject *
decode_leaf(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer page;
    int key_kind, value_kind;
    if (!PyArg_ParseTuple(args, "y*ii:decode_leaf", &page, &key_kind, &value_kind))
        return NULL;
    PyObject *result = NULL;
    PageReader reader = {page.buf, page.len, 1};
    uint64_t count;
    if (check_kinds(key_kind, value_kind) < 0)
        goto done;
    if (page.len == 0 || reader.data[0] != 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (read_varint(&reader, &count) < 0)
        goto done;
    if (count == 0) {
        PyObject *keys = key_kind == KEY_INT64 ? new_int64_column(NULL, 0) : PyList_New(0);
        result = keys == NULL ? NULL : Py_BuildValue("(N[])", keys);
    }
    else
        result = read_entries(&reader, count > PY_SSIZE_T_MAX ? PY_SSIZE_T_MAX : (Py_ssize_t)count,
                              key_kind, value_kind, 1);
done:
    PyBuffer_Release(&page);
    return result;
}

PyDoc_STRVAR(decode_leaf_body_doc,
"decode_leaf_body(body, offset, count, key_kind, value_kind) -> (keys, values) | None\n\n"
"decode_leaf for the body of count >= 1 entries at body[offset:], as a decompressed page has\n"
"it.");

static PyObject *
decode_leaf_body(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer body;
    Py_ssize_t offset, count;
    int key_kind, value_kind;
    if (!PyArg_ParseTuple(args, "y*nnii:decode_leaf_body", &body, &offset, &count, &key_kind,
                          &value_kind))
        return NULL;
    PyObject *result = NULL;
    PageReader reader = {body.buf, body.len, offset};
    if (check_kinds(key_kind, value_kind) < 0)
        goto done;
    if (offset < 0 || offset > body.len || count < 1)
        PyErr_Format(PyExc_ValueError, "offset %zd and count %zd do not name a leaf body in %zd "
                     "bytes", offset, count, body.len);
    else
        result = read_entries(&reader, count, key_kind, value_kind, 1);
done:
    PyBuffer_Release(&body);
    return result;
}

/* -- inner nodes ------------------------------------------------------------------------------ */

#define INNER_SMALL_KEYS 256 /* offheap.kernels.smallpack.SMALL_BLOCK_VALUES: larger int64
                                separator blocks are left to the reference */

/* A column of page.py's _pack_column at the reader: varint base, u8 width, `count` offsets of
 * that width; a new list of ints. */
static PyObject *
read_packed_column(PageReader *reader, Py_ssize_t count, uint64_t *scratch)
{
    uint64_t base;
    uint8_t width;
    if (read_varint(reader, &base) < 0 || read_byte(reader, &width, "column width") < 0)
        return NULL;
    if (width > 64) {
        page_corrupt("column width %d is over 64: the data is corrupt", width);
        return NULL;
    }
    if (read_above(reader, count, width, base, scratch) < 0)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++)
        if (scratch[i] < base) {
            page_corrupt("a column value overflows 64 bits: the data is corrupt");
            return NULL;
        }
    PyObject *list = PyList_New(count);
    for (Py_ssize_t i = 0; list != NULL && i < count; i++) {
        PyObject *item = PyLong_FromUnsignedLongLong(scratch[i]);
        if (item == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, item);
    }
    return list;
}

PyDoc_STRVAR(pack_column_doc,
"pack_column(numbers) -> bytes | None\n\n"
"page.py's _pack_column of a non-empty list of ints in [0, 2**64): varint base (the smallest),\n"
"u8 width, the bit-packed offsets above it; None for anything else (the reference packs it).");

static PyObject *
pack_column(PyObject *Py_UNUSED(module), PyObject *numbers)
{
    if (!PyList_CheckExact(numbers) || PyList_GET_SIZE(numbers) == 0
            || PyList_GET_SIZE(numbers) > PAGE_MAX_ENTRIES + 1)
        Py_RETURN_NONE;
    Py_ssize_t count = PyList_GET_SIZE(numbers);
    uint64_t words[PAGE_MAX_ENTRIES + 1], low = UINT64_MAX, high = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyList_GET_ITEM(numbers, i);
        if (!PyLong_CheckExact(item))
            Py_RETURN_NONE;
        words[i] = PyLong_AsUnsignedLongLong(item);
        if (words[i] == (uint64_t)-1 && PyErr_Occurred()) {
            PyErr_Clear();  /* negative, or 2**64 and above: the reference decides */
            Py_RETURN_NONE;
        }
        low = words[i] < low ? words[i] : low;
        high = words[i] > high ? words[i] : high;
    }
    int width = 0;
    for (uint64_t spread = high - low; spread; spread >>= 1)
        width++;
    PageWriter writer = {0};
    if (write_varint(&writer, low) < 0 || write_byte(&writer, (uint8_t)width) < 0
            || write_packed(&writer, words, count, width, low) < 0) {
        writer_free(&writer);
        return NULL;
    }
    return writer_finish(&writer);
}

PyDoc_STRVAR(decode_inner_body_doc,
"decode_inner_body(body, offset, count, key_kind) -> (separators, children, counts) | None\n\n"
"The lists of an inner page of count >= 2 children whose body (decompressed) is body[offset:],\n"
"as page.decode_inner reads a format 2 page; None for what the reference reads alone (int64\n"
"separator blocks above 256 keys).");

static PyObject *
decode_inner_body(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer body;
    Py_ssize_t offset, count;
    int key_kind;
    if (!PyArg_ParseTuple(args, "y*nni:decode_inner_body", &body, &offset, &count, &key_kind))
        return NULL;
    PyObject *result = NULL, *separators = NULL, *children = NULL, *counts = NULL;
    uint64_t *scratch = NULL;
    PageReader reader = {body.buf, body.len, offset};
    if (check_kinds(key_kind, 0) < 0)
        goto done;
    if (offset < 0 || offset > body.len || count < 2 || count > PAGE_MAX_ENTRIES) {
        PyErr_Format(PyExc_ValueError, "offset %zd and count %zd do not name an inner body in "
                     "%zd bytes", offset, count, body.len);
        goto done;
    }
    if (key_kind == KEY_INT64 && count - 1 > INNER_SMALL_KEYS) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if ((scratch = PyMem_Malloc(sizeof(uint64_t) * (size_t)count)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if ((separators = read_keys(&reader, count - 1, key_kind, scratch, 0)) == NULL
            || (children = read_packed_column(&reader, count, scratch)) == NULL
            || (counts = read_packed_column(&reader, count, scratch)) == NULL)
        goto done;
    result = PyTuple_Pack(3, separators, children, counts);
done:
    Py_XDECREF(separators);
    Py_XDECREF(children);
    Py_XDECREF(counts);
    PyMem_Free(scratch);
    PyBuffer_Release(&body);
    return result;
}

PyDoc_STRVAR(walk_doc,
"walk(inner_nodes, inner_of, root, levels, key) -> (path, lo, hi, recid)\n\n"
"The loop of cursor.Cursor.descend (csrc/walk.c): down ``levels`` inner nodes from ``root``,\n"
"each read as NodeCache.inner does (``inner_nodes`` its OrderedDict, ``inner_of`` the method),\n"
"the (node, child index) path, the leaf's range [lo, hi) and its record id.");

PyDoc_STRVAR(scan_doc,
"scan(descent, lock, lo, hi, lo_inclusive, hi_inclusive, reverse, what, source, name,\n"
"     changed_error, scalar_types, fresh) -> RangeItems\n\n"
"The keys (what 0), values (1) or (key, value) tuples (2) of a range of the tree the Descent\n"
"reads (bounds as RangeScan takes them, None unbounded), walked leaf by leaf in C under lock\n"
"(a threading lock of the map); RuntimeError-like changed_error() once getattr(source, name)\n"
"moved; values of types outside the scalar_types tuple go out as fresh(value) (fresh None:\n"
"every value as it is).");

static PyMethodDef pages_methods[] = {
    {"encode_leaf", encode_leaf, METH_VARARGS, encode_leaf_doc},
    {"decode_leaf", decode_leaf, METH_VARARGS, decode_leaf_doc},
    {"decode_leaf_body", decode_leaf_body, METH_VARARGS, decode_leaf_body_doc},
    {"decode_inner_body", decode_inner_body, METH_VARARGS, decode_inner_body_doc},
    {"pack_column", pack_column, METH_O, pack_column_doc},
    {"walk", (PyCFunction)(void (*)(void))walk, METH_FASTCALL, walk_doc},
    {"scan", (PyCFunction)(void (*)(void))range_scan, METH_VARARGS | METH_KEYWORDS, scan_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef pages_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "offheap.treemap._pages",
    .m_doc = "The compiled codec of B+tree leaf bodies (layer 6): the twin of the leaf half of "
             "offheap.treemap.page.",
    .m_size = -1,
    .m_methods = pages_methods,
};

PyMODINIT_FUNC
PyInit__pages(void)
{
    if (page_corruption_error == NULL) {
        PyObject *errors = PyImport_ImportModule("offheap.errors");
        if (errors == NULL)
            return NULL;
        page_corruption_error = PyObject_GetAttrString(errors, "CorruptionError");
        Py_DECREF(errors);
        if (page_corruption_error == NULL)
            return NULL;
    }
    if (init_key_columns() < 0)
        return NULL;
    PyObject *module = PyModule_Create(&pages_module);
    if (module != NULL && (PyModule_AddIntConstant(module, "MAX_ENTRIES", PAGE_MAX_ENTRIES) < 0
                           || add_descent_type(module) < 0
                           || add_slots_type(module) < 0
                           || add_set_slots_type(module) < 0
                           || add_range_type(module) < 0))
        Py_CLEAR(module);
    return module;
}
