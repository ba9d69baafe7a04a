/* Front coding (offheap.kernels.packing.front_encode) and the str/bytes column of
 * offheap.store.serializers (forms 00 constant, 01 plain, 02 front) for offheap.treemap._pages.
 *
 * Decoding bounds every allocation by the page: counts are at most PAGE_MAX_ENTRIES, a length
 * is compared with the bytes left before it is used, and the one scratch buffer of front
 * decoding holds the longest key, which is at most the sum of the suffix lengths, themselves
 * checked against the bytes left. */
#include "pages.h"

enum { FORM_CONSTANT = 0, FORM_PLAIN = 1, FORM_FRONT = 2 };

/* A new bytes object, or a str decoded with surrogatepass (CorruptionError if not UTF-8). */
static PyObject *
make_string(const char *data, Py_ssize_t size, int as_text)
{
    if (!as_text)
        return PyBytes_FromStringAndSize(data, size);
    PyObject *text = PyUnicode_DecodeUTF8(data, size, "surrogatepass");
    if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        page_corrupt("a %zd-byte str in a page is not UTF-8: the data is corrupt", size);
    }
    return text;
}

/* -- reading --------------------------------------------------------------------------------- */

/* Checks the front-coding lengths of `count` keys against the `available` bytes after them;
 * the total of the suffixes in *total. */
static int
check_front_lengths(const uint64_t *prefixes, const uint64_t *suffixes, Py_ssize_t count,
                    Py_ssize_t available, Py_ssize_t *total)
{
    uint64_t sum = 0, previous_length = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (suffixes[i] > (uint64_t)available)
            return page_corrupt("a front-coded key has a suffix longer than the %zd bytes left: "
                                "the data is truncated or corrupt", available);
        if (prefixes[i] > previous_length || (i == 0 && prefixes[0]))
            return page_corrupt("front-coded keys share a prefix longer than the key before "
                                "them: the data is corrupt");
        previous_length = prefixes[i] + suffixes[i];
        sum += suffixes[i];
    }
    if (sum > (uint64_t)available)
        return page_corrupt("front-coded keys need %llu bytes of suffixes, but only %zd remain: "
                            "the data is truncated or corrupt", (unsigned long long)sum, available);
    *total = (Py_ssize_t)sum;
    return 0;
}

/* The keys, rebuilt one after the other in `scratch` (room for the longest), into a new list. */
static PyObject *
rebuild_front_keys(const uint64_t *prefixes, const uint64_t *suffixes, Py_ssize_t count,
                   const uint8_t *suffix_bytes, char *scratch, int as_text)
{
    PyObject *keys = PyList_New(count);
    if (keys == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        memcpy(scratch + prefixes[i], suffix_bytes, (size_t)suffixes[i]);
        suffix_bytes += suffixes[i];
        PyObject *key = make_string(scratch, (Py_ssize_t)(prefixes[i] + suffixes[i]), as_text);
        if (key == NULL) {
            Py_DECREF(keys);
            return NULL;
        }
        PyList_SET_ITEM(keys, i, key);
    }
    return keys;
}

PyObject *
read_front_coded(PageReader *reader, Py_ssize_t count, int as_text)
{
    uint64_t *lengths = PyMem_Malloc(sizeof(uint64_t) * 2 * (size_t)count + 1);
    char *scratch = NULL;
    PyObject *keys = NULL;
    Py_ssize_t total = 0;
    if (lengths == NULL)
        return PyErr_NoMemory();
    if (read_varints(reader, 2 * count, lengths) < 0
            || check_front_lengths(lengths, lengths + count, count, reader->size - reader->pos,
                                   &total) < 0)
        goto done;
    if ((scratch = PyMem_Malloc((size_t)total + 1)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    keys = rebuild_front_keys(lengths, lengths + count, count, reader->data + reader->pos,
                              scratch, as_text);
    if (keys != NULL)
        reader->pos += total;
done:
    PyMem_Free(scratch);
    PyMem_Free(lengths);
    return keys;
}

/* A list of `count` references to one new string of `size` bytes at the reader. */
static PyObject *
read_constant_column(PageReader *reader, Py_ssize_t count, int as_text)
{
    uint64_t size;
    if (read_varint(reader, &size) < 0)
        return NULL;
    if (size > (uint64_t)(reader->size - reader->pos)) {
        page_corrupt("a %llu-byte value at offset %zd runs past the end of the page body",
                     (unsigned long long)size, reader->pos);
        return NULL;
    }
    PyObject *value = make_string((const char *)reader->data + reader->pos, (Py_ssize_t)size,
                                  as_text);
    if (value == NULL)
        return NULL;
    reader->pos += (Py_ssize_t)size;
    PyObject *values = PyList_New(count);
    for (Py_ssize_t i = 0; values != NULL && i < count; i++) {
        Py_INCREF(value);
        PyList_SET_ITEM(values, i, value);
    }
    Py_DECREF(value);
    return values;
}

PyObject *
read_constant_string(PageReader *reader, int as_text)
{
    PageReader probe = *reader;
    uint8_t form;
    if (read_byte(&probe, &form, "column form byte") < 0)
        return NULL;
    if (form != FORM_CONSTANT)
        Py_RETURN_NONE;
    uint64_t size;
    if (read_varint(&probe, &size) < 0)
        return NULL;
    if (size > (uint64_t)(probe.size - probe.pos)) {
        page_corrupt("a %llu-byte value at offset %zd runs past the end of the page body",
                     (unsigned long long)size, probe.pos);
        return NULL;
    }
    PyObject *value = make_string((const char *)probe.data + probe.pos, (Py_ssize_t)size,
                                  as_text);
    if (value != NULL) {
        probe.pos += (Py_ssize_t)size;
        *reader = probe;
    }
    return value;
}

/* `count` varint lengths, then the values concatenated. */
static PyObject *
read_plain_column(PageReader *reader, Py_ssize_t count, int as_text)
{
    uint64_t *lengths = PyMem_Malloc(sizeof(uint64_t) * (size_t)count + 1);
    PyObject *values = NULL;
    if (lengths == NULL)
        return PyErr_NoMemory();
    if (read_varints(reader, count, lengths) < 0)
        goto done;
    uint64_t room = (uint64_t)(reader->size - reader->pos), total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        total += lengths[i];
        if (lengths[i] > room || total > room) {
            page_corrupt("%zd values at offset %zd run past the end of the page body", count,
                         reader->pos);
            goto done;
        }
    }
    if ((values = PyList_New(count)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *value = make_string((const char *)reader->data + reader->pos,
                                      (Py_ssize_t)lengths[i], as_text);
        if (value == NULL) {
            Py_CLEAR(values);
            goto done;
        }
        PyList_SET_ITEM(values, i, value);
        reader->pos += (Py_ssize_t)lengths[i];
    }
done:
    PyMem_Free(lengths);
    return values;
}

PyObject *
read_string_column(PageReader *reader, Py_ssize_t count, int as_text)
{
    uint8_t form;
    if (read_byte(reader, &form, "column form byte") < 0)
        return NULL;
    switch (form) {
    case FORM_CONSTANT:
        return read_constant_column(reader, count, as_text);
    case FORM_PLAIN:
        return read_plain_column(reader, count, as_text);
    case FORM_FRONT:
        return read_front_coded(reader, count, as_text);
    default:
        page_corrupt("unknown %s column form %d at offset %zd", as_text ? "str" : "bytes", form,
                     reader->pos - 1);
        return NULL;
    }
}

/* -- writing --------------------------------------------------------------------------------- */

int
borrow_strings(PyObject **items, Py_ssize_t count, int as_text, PageString *out)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = items[i];
        if (as_text ? !PyUnicode_CheckExact(item) : !PyBytes_CheckExact(item))
            return PAGE_NOT_HANDLED;
        if (!as_text) {
            out[i].data = PyBytes_AS_STRING(item);
            out[i].size = PyBytes_GET_SIZE(item);
            continue;
        }
        out[i].data = PyUnicode_AsUTF8AndSize(item, &out[i].size);
        if (out[i].data == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
                return -1;
            PyErr_Clear();  /* lone surrogates: the reference encodes them with surrogatepass */
            return PAGE_NOT_HANDLED;
        }
    }
    return 0;
}

static Py_ssize_t
shared_prefix(const PageString *left, const PageString *right)
{
    Py_ssize_t limit = left->size < right->size ? left->size : right->size, n = 0;
    while (n < limit && left->data[n] == right->data[n])
        n++;
    return n;
}

/* Shared prefix lengths (prefixes[0] = 0) and the size of the front coding of the strings. */
static Py_ssize_t
plan_front(const PageString *strings, Py_ssize_t count, Py_ssize_t *prefixes)
{
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        prefixes[i] = i ? shared_prefix(&strings[i - 1], &strings[i]) : 0;
        Py_ssize_t suffix = strings[i].size - prefixes[i];
        size += varint_size((uint64_t)prefixes[i]) + varint_size((uint64_t)suffix) + suffix;
    }
    return size;
}

static int
write_planned_front(PageWriter *writer, const PageString *strings, Py_ssize_t count,
                    const Py_ssize_t *prefixes)
{
    for (Py_ssize_t i = 0; i < count; i++)
        if (write_varint(writer, (uint64_t)prefixes[i]) < 0)
            return -1;
    for (Py_ssize_t i = 0; i < count; i++)
        if (write_varint(writer, (uint64_t)(strings[i].size - prefixes[i])) < 0)
            return -1;
    for (Py_ssize_t i = 0; i < count; i++)
        if (write_bytes(writer, strings[i].data + prefixes[i], strings[i].size - prefixes[i]) < 0)
            return -1;
    return 0;
}

static int
write_plain(PageWriter *writer, const PageString *strings, Py_ssize_t count)
{
    for (Py_ssize_t i = 0; i < count; i++)
        if (write_varint(writer, (uint64_t)strings[i].size) < 0)
            return -1;
    for (Py_ssize_t i = 0; i < count; i++)
        if (write_bytes(writer, strings[i].data, strings[i].size) < 0)
            return -1;
    return 0;
}

int
write_front_coded(PageWriter *writer, const PageString *strings, Py_ssize_t count)
{
    Py_ssize_t *prefixes = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)count + 1);
    if (prefixes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    plan_front(strings, count, prefixes);
    int result = write_planned_front(writer, strings, count, prefixes);
    PyMem_Free(prefixes);
    return result;
}

static int
all_equal(const PageString *strings, Py_ssize_t count)
{
    for (Py_ssize_t i = 1; i < count; i++)
        if (strings[i].size != strings[0].size
                || memcmp(strings[i].data, strings[0].data, (size_t)strings[0].size) != 0)
            return 0;
    return 1;
}

int
write_string_column(PageWriter *writer, const PageString *strings, Py_ssize_t count)
{
    if (all_equal(strings, count))
        return (write_byte(writer, FORM_CONSTANT) < 0
                || write_varint(writer, (uint64_t)strings[0].size) < 0
                || write_bytes(writer, strings[0].data, strings[0].size) < 0) ? -1 : 0;
    Py_ssize_t *prefixes = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)count);
    if (prefixes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t front_size = plan_front(strings, count, prefixes), plain_size = 0;
    for (Py_ssize_t i = 0; i < count; i++)
        plain_size += varint_size((uint64_t)strings[i].size) + strings[i].size;
    int result = front_size < plain_size
        ? (write_byte(writer, FORM_FRONT) < 0
           || write_planned_front(writer, strings, count, prefixes) < 0) ? -1 : 0
        : (write_byte(writer, FORM_PLAIN) < 0 || write_plain(writer, strings, count) < 0) ? -1 : 0;
    PyMem_Free(prefixes);
    return result;
}
