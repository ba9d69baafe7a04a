/* The compiled LongHashMap core: key admission, the inline value codec and the calls into the codec object. */

#include "core.h"


/* ---------------------------------------------------------------------------------------------
 * Key admission (layout.lookup_key and layout.as_key)
 */

/* A float key that is_integer() and in int64: 1 with *key set, else 0 (a miss). */
static int
float_key(double v, int64_t *key)
{
    if (!isfinite(v) || floor(v) != v || v < -9223372036854775808.0 || v >= 9223372036854775808.0)
        return 0;
    *key = (int64_t)v;
    return 1;
}

/* An int's int64 value: 1 with *key set, 0 outside int64 (a miss), -1 on error. */
int
int_key(PyObject *value, int64_t *key)
{
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow)
        return 0;
    if (v == -1 && PyErr_Occurred())
        return -1;
    *key = v;
    return 1;
}

/* The int64 a lookup probes for: 1 with *key set, 0 when no key of a map can equal `obj`,
 * -1 on error. As layout.lookup_key: exact ints and floats here, float subclasses through it,
 * anything else through operator.index (a TypeError is a miss). May run Python code. */
int
lookup_key(PyObject *obj, int64_t *key)
{
    if (PyLong_CheckExact(obj))
        return exact_int_key(obj, key);
    if (PyFloat_CheckExact(obj))
        return float_key(PyFloat_AS_DOUBLE(obj), key);
    PyObject *admitted;
    if (PyFloat_Check(obj)) {
        if ((admitted = PyObject_CallOneArg(lookup_key_function, obj)) == NULL)
            return -1;
    }
    else if ((admitted = PyNumber_Index(obj)) == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    int found = admitted == Py_None ? 0 : int_key(admitted, key);
    Py_DECREF(admitted);
    return found;
}

/* The int64 key to store, or -1 with layout.as_key's TypeError or OverflowError: an exact int
 * of int64 here, anything else through as_key itself so that its messages stay its own. */
int
store_key(PyObject *obj, int64_t *key)
{
    if (PyLong_CheckExact(obj)) {
        int in_range = exact_int_key(obj, key);
        if (in_range != 0)
            return in_range == 1 ? 0 : -1;
    }
    PyObject *admitted = PyObject_CallOneArg(as_key_function, obj);
    if (admitted == NULL)
        return -1;
    long long v = PyLong_AsLongLong(admitted); /* as_key returns an int of int64 */
    Py_DECREF(admitted);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *key = v;
    return 0;
}

/* The inline word of an optional tag byte (tag < 0: none) and `size` bytes, tag + size <= 7. */
static uint64_t
inline_word(int tag, const char *data, Py_ssize_t size)
{
    uint64_t word = 0;
    int at = 1;
    if (tag >= 0)
        word |= (uint64_t)tag << (8 * at++);
    for (Py_ssize_t i = 0; i < size; i++)
        word |= (uint64_t)(unsigned char)data[i] << (8 * at++);
    return word | (uint64_t)(at - 1);
}

/* An exact str as an inline word (UTF-8, surrogatepass) after an optional tag: 1 with *word
 * set, 0 when it is too long, -1 on error. */
static int
encode_text(PyObject *text, int tag, uint64_t *word)
{
    const Py_ssize_t room = INLINE_MAX - (tag >= 0);
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0)
        return -1;
#endif
    if (PyUnicode_GET_LENGTH(text) > room) /* every code point takes at least one byte */
        return 0;
    if (PyUnicode_IS_ASCII(text)) {
        *word = inline_word(tag, (const char *)PyUnicode_1BYTE_DATA(text),
                            PyUnicode_GET_LENGTH(text));
        return 1;
    }
    PyObject *utf8 = PyUnicode_AsEncodedString(text, "utf-8", "surrogatepass");
    if (utf8 == NULL)
        return -1;
    int fits = PyBytes_GET_SIZE(utf8) <= room;
    if (fits)
        *word = inline_word(tag, PyBytes_AS_STRING(utf8), PyBytes_GET_SIZE(utf8));
    Py_DECREF(utf8);
    return fits;
}

static int
encode_object(PyObject *value, uint64_t *word)
{
    if (value == Py_None || value == Py_False || value == Py_True) {
        *word = inline_word(value == Py_None ? TAG_NONE : value == Py_False ? TAG_FALSE : TAG_TRUE,
                            NULL, 0);
        return 1;
    }
    if (PyLong_CheckExact(value)) {
        int64_t v;
        int in_range = exact_int_key(value, &v);
        if (in_range <= 0)
            return in_range; /* outside int64: tag 04, the codec's */
        uint64_t zigzag = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
        char varint[10];
        Py_ssize_t size = 0;
        for (; zigzag >= 0x80; zigzag >>= 7)
            varint[size++] = (char)((zigzag & 0x7F) | 0x80);
        varint[size++] = (char)zigzag;
        if (size > INLINE_MAX - 1)
            return 0; /* an external record, the codec's */
        *word = inline_word(TAG_INT, varint, size);
        return 1;
    }
    if (PyUnicode_CheckExact(value))
        return encode_text(value, TAG_TEXT, word);
    if (PyBytes_CheckExact(value) && PyBytes_GET_SIZE(value) < INLINE_MAX) {
        *word = inline_word(TAG_BYTES, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value));
        return 1;
    }
    return 0;
}

/* `value` as the word or raw value to store when the inline codec takes it: 1 with *bits and
 * *width set, 0 when the codec object must encode it, -1 on error. */
int
encode_inline(const MapCore *self, PyObject *value, uint64_t *bits, int *width)
{
    int done = 0;
    *width = 8;
    switch (self->value_codec) {
    case CODEC_INT64:
        if (PyLong_CheckExact(value)) {
            int64_t v = 0;
            done = exact_int_key(value, &v); /* outside int64: the codec's OverflowError */
            *bits = (uint64_t)v;
        }
        return done;
    case CODEC_FLOAT64:
        if (PyFloat_CheckExact(value)) {
            double v = PyFloat_AS_DOUBLE(value);
            memcpy(bits, &v, sizeof v);
            done = 1;
        }
        return done;
    case CODEC_EMPTY: /* None, stored as nothing; anything else is the codec's TypeError */
        *bits = 0;
        *width = 0;
        return value == Py_None;
    case CODEC_OBJECT:
        done = encode_object(value, bits);
        break;
    case CODEC_STR:
        done = PyUnicode_CheckExact(value) ? encode_text(value, -1, bits) : 0;
        break;
    case CODEC_BYTES:
        if (PyBytes_CheckExact(value) && PyBytes_GET_SIZE(value) <= INLINE_MAX) {
            *bits = inline_word(-1, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value));
            done = 1;
        }
        break;
    case CODEC_WORDS:
        break;
    }
    if (done == 1)
        *width = word_width(*bits);
    return done;
}

/* A str decoded from UTF-8 (surrogatepass), or NULL without an error for malformed bytes;
 * ASCII (the common keys and values) copied straight into a new str. */
PyObject *
decode_text(const unsigned char *data, Py_ssize_t size)
{
    uint64_t high = 0, word;
    Py_ssize_t i = 0;
    for (; i + 8 <= size; i += 8) {
        memcpy(&word, data + i, 8);
        high |= word;
    }
    for (; i < size; i++)
        high |= data[i];
    if (!(high & 0x8080808080808080ull)) {
        PyObject *ascii = PyUnicode_New(size, 127);
        if (ascii != NULL && size > 0)
            memcpy(PyUnicode_1BYTE_DATA(ascii), data, (size_t)size);
        return ascii;
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)data, size, "surrogatepass");
    if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        PyErr_Clear();
    return text;
}

/* `size` serialized bytes as an array: byte i is bits 8i..8i+7 of `bytes`. */
static inline void
unpack_bytes(uint64_t bytes, unsigned size, unsigned char *data)
{
    for (unsigned i = 0; i < size; i++)
        data[i] = (unsigned char)(bytes >> (8 * i));
}

/* An "object" value of `size` serialized bytes (byte i is bits 8i..8i+7 of `bytes`). */
static PyObject *
decode_object(uint64_t bytes, unsigned size)
{
    if (size == 0)
        return NULL;
    unsigned char data[INLINE_MAX];
    switch (bytes & 0xFF) {
    case TAG_NONE: return size == 1 ? Py_NewRef(Py_None) : NULL;
    case TAG_FALSE: return size == 1 ? Py_NewRef(Py_False) : NULL;
    case TAG_TRUE: return size == 1 ? Py_NewRef(Py_True) : NULL;
    case TAG_INT: {
        uint64_t code = 0;
        unsigned at = 1;
        for (unsigned shift = 0;; shift += 7) {
            if (at == size)
                return NULL; /* the varint runs past the end */
            unsigned byte = (unsigned)(bytes >> (8 * at++)) & 0xFF;
            code |= (uint64_t)(byte & 0x7F) << shift;
            if (byte < 0x80)
                break;
        }
        if (at != size)
            return NULL; /* bytes left after the varint */
        return PyLong_FromLongLong((int64_t)(code >> 1) ^ -(int64_t)(code & 1));
    }
    case TAG_TEXT:
        unpack_bytes(bytes >> 8, size - 1, data);
        return decode_text(data, size - 1);
    case TAG_BYTES:
        unpack_bytes(bytes >> 8, size - 1, data);
        return PyBytes_FromStringAndSize((const char *)data, size - 1);
    default: return NULL;
    }
}

/* The value of an inline word (a new object), or NULL without an error when the codec object
 * must decode it: external words, other tags and malformed words, which it reports. */
PyObject *
decode_inline(ValueCodec codec, uint64_t word)
{
    unsigned size = (unsigned)(word & 0xFF);
    if (size > INLINE_MAX || (size < INLINE_MAX && word >> (8 * (size + 1)) != 0))
        return NULL;
    unsigned char data[INLINE_MAX];
    switch (codec) {
    case CODEC_OBJECT:
        return decode_object(word >> 8, size);
    case CODEC_STR:
        unpack_bytes(word >> 8, size, data);
        return decode_text(data, size);
    case CODEC_BYTES:
        unpack_bytes(word >> 8, size, data);
        return PyBytes_FromStringAndSize((const char *)data, size);
    default:
        return NULL;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Calls into the codec object and the map; each may run any Python code
 */

PyObject *
codec_call(MapCore *self, PyObject *method, PyObject *arg)
{
    PyObject *codec = self->codec;
    if (codec == NULL) {
        closed_error(self);
        return NULL;
    }
    Py_INCREF(codec); /* the call may attach another codec */
    PyObject *result = PyObject_CallMethodOneArg(codec, method, arg);
    Py_DECREF(codec);
    return result;
}

/* The value a stored word or raw value stands for (a new reference). */
PyObject *
decode_word(MapCore *self, uint64_t word)
{
    if (self->value_codec == CODEC_INT64)
        return PyLong_FromLongLong((int64_t)word);
    if (self->value_codec == CODEC_EMPTY)
        Py_RETURN_NONE;
    if (self->value_codec == CODEC_FLOAT64) {
        double v;
        memcpy(&v, &word, sizeof v);
        return PyFloat_FromDouble(v);
    }
    PyObject *value = decode_inline(self->value_codec, word);
    if (value != NULL || PyErr_Occurred())
        return value;
    PyObject *number = PyLong_FromUnsignedLongLong(word);
    if (number == NULL)
        return NULL;
    value = codec_call(self, s_decode, number);
    Py_DECREF(number);
    return value;
}

/* codec.release(word) for a word the table held, once the table no longer does. */
int
release_word(MapCore *self, uint64_t word)
{
    PyObject *number = PyLong_FromUnsignedLongLong(word);
    if (number == NULL)
        return -1;
    PyObject *result = codec_call(self, s_release, number);
    Py_DECREF(number);
    Py_XDECREF(result);
    return result == NULL ? -1 : 0;
}

/* codec.release(made) for a word the codec made that the table did not take; the pending
 * exception stays set unless release raises one of its own. */
void
release_unstored(MapCore *self, PyObject *made)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *result = codec_call(self, s_release, made);
    if (result != NULL) {
        Py_DECREF(result);
        PyErr_Restore(type, value, traceback);
        return;
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
}

/* The bits and width of a word the codec object made (or the map passed to _put). */
int
word_of(MapCore *self, PyObject *word, uint64_t *bits, int *width)
{
    PyObject *w = codec_call(self, s_width_of, word);
    if (w == NULL)
        return -1;
    long width_bytes = PyLong_AsLong(w);
    Py_DECREF(w);
    if (width_bytes == -1 && PyErr_Occurred())
        return -1;
    if (self->value_codec == CODEC_EMPTY) { /* no value stored, whatever the word */
        *bits = 0;
        *width = 0;
        return 0;
    }
    if (width_bytes != 2 && width_bytes != 4 && width_bytes != 8) {
        PyErr_Format(PyExc_ValueError, "width_of gave %ld bytes; slots are 2, 4 or 8", width_bytes);
        return -1;
    }
    *width = (int)width_bytes;
    if (self->value_codec == CODEC_FLOAT64) {
        double v = PyFloat_AsDouble(word);
        if (v == -1.0 && PyErr_Occurred())
            return -1;
        memcpy(bits, &v, sizeof v);
        return 0;
    }
    if (self->value_codec == CODEC_INT64) {
        long long v = PyLong_AsLongLong(word);
        if (v == -1 && PyErr_Occurred())
            return -1;
        *bits = (uint64_t)v;
        return 0;
    }
    *bits = PyLong_AsUnsignedLongLong(word);
    if (*bits == (uint64_t)-1 && PyErr_Occurred())
        return -1;
    if (width_bytes < 8 && *bits >> (8 * width_bytes) != 0) {
        PyErr_Format(PyExc_ValueError, "slot word %#llx does not fit the %ld bytes width_of gave",
                     (unsigned long long)*bits, width_bytes);
        return -1;
    }
    return 0;
}
