/* Page readers and writers of offheap.treemap._pages: varints, bit streams, and the int64 delta
 * and frame blocks of offheap.kernels.packing (see its module docstring for the layouts).
 *
 * Readers check the bytes left before every access (pages.h: untrusted input). Writers grow a
 * PyMem buffer by doubling; they are only fed values the caller checked, so they fail only for
 * want of memory. */
#include "pages.h"

#include <stdarg.h>

PyObject *page_corruption_error;

int
page_corrupt(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    PyObject *message = PyUnicode_FromFormatV(format, args);
    va_end(args);
    if (message != NULL) {
        PyErr_SetObject(page_corruption_error, message);
        Py_DECREF(message);
    }
    return -1;
}

static int
bit_length(uint64_t value)
{
    return value ? 64 - __builtin_clzll(value) : 0;
}

static uint64_t
zigzag(uint64_t bits)
{
    return (bits << 1) ^ (uint64_t)((int64_t)bits >> 63);
}

static uint64_t
unzigzag(uint64_t code)
{
    return (code >> 1) ^ (0 - (code & 1));
}

static Py_ssize_t
packed_size(Py_ssize_t count, int width)
{
    return (Py_ssize_t)(((uint64_t)count * (uint64_t)width + 7) / 8);
}

/* -- reading --------------------------------------------------------------------------------- */

int
read_byte(PageReader *reader, uint8_t *out, const char *what)
{
    if (reader->pos >= reader->size)
        return page_corrupt("%s at offset %zd is past the end of the %zd-byte page body: the "
                            "data is truncated", what, reader->pos, reader->size);
    *out = reader->data[reader->pos++];
    return 0;
}

int
read_varint(PageReader *reader, uint64_t *out)
{
    Py_ssize_t start = reader->pos;
    uint64_t value = 0;
    for (int group = 0; group < PAGE_MAX_VARINT_BYTES; group++) {
        if (reader->pos >= reader->size)
            return page_corrupt("varint at offset %zd runs past the end of the %zd-byte page "
                                "body: the data is truncated", start, reader->size);
        uint8_t byte = reader->data[reader->pos++];
        if (group == PAGE_MAX_VARINT_BYTES - 1 && byte > 1)
            return page_corrupt("varint at offset %zd is longer than %d bytes or does not fit "
                                "in 64 bits: the data is corrupt", start, PAGE_MAX_VARINT_BYTES);
        value |= (uint64_t)(byte & 0x7F) << (7 * group);
        if (byte < 0x80) {
            *out = value;
            return 0;
        }
    }
    return page_corrupt("varint at offset %zd is longer than %d bytes: the data is corrupt",
                        start, PAGE_MAX_VARINT_BYTES);
}

int
read_varints(PageReader *reader, Py_ssize_t count, uint64_t *out)
{
    for (Py_ssize_t i = 0; i < count; i++)
        if (read_varint(reader, &out[i]) < 0)
            return -1;
    return 0;
}

/* The up to 8 bytes at `p` (of which `left` > 0 exist) as a little-endian word, zeros beyond. */
static uint64_t
load_window(const uint8_t *p, Py_ssize_t left)
{
    uint64_t word = 0;
    Py_ssize_t n = left < 8 ? left : 8;
    for (Py_ssize_t i = n; i-- > 0;)
        word = (word << 8) | p[i];
    return word;
}

/* `count` values of `width` (1..64) bits at the reader, each plus `base` (wrapping) into out. */
static int
read_bits(PageReader *reader, Py_ssize_t count, int width, uint64_t base, uint64_t *out)
{
    Py_ssize_t n_bytes = packed_size(count, width);
    if (n_bytes > reader->size - reader->pos)
        return page_corrupt("bit-packed block of %zd values at %d bits needs %zd bytes at offset "
                            "%zd: the data is truncated", count, width, n_bytes, reader->pos);
    const uint8_t *packed = reader->data + reader->pos;
    uint64_t mask = width == 64 ? UINT64_MAX : ((uint64_t)1 << width) - 1;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t bit = (uint64_t)i * (uint64_t)width;
        Py_ssize_t byte = (Py_ssize_t)(bit >> 3);
        int shift = (int)(bit & 7);
        uint64_t window;
        if (n_bytes - byte >= 8) {  /* a whole word: one load (little-endian hosts) */
#if PY_LITTLE_ENDIAN
            memcpy(&window, packed + byte, 8);
#else
            window = load_window(packed + byte, 8);
#endif
        }
        else
            window = load_window(packed + byte, n_bytes - byte);
        uint64_t value = window >> shift;
        if (shift && width > 64 - shift && byte + 8 < n_bytes)
            value |= (uint64_t)packed[byte + 8] << (64 - shift);
        out[i] = base + (value & mask);
    }
    reader->pos += n_bytes;
    return 0;
}

/* The width byte at the reader, which must be `flag` plus a width of 0..64. */
static int
read_width(PageReader *reader, uint8_t flag, const char *what, int *width)
{
    uint8_t byte = 0; /* set unless read_byte fails */
    if (read_byte(reader, &byte, what) < 0)
        return -1;
    if ((byte ^ flag) > 64)
        return page_corrupt("%s has width byte %#04x at offset %zd, not %#04x + a bit width of "
                            "0..64: the data is corrupt", what, byte, reader->pos - 1, flag);
    *width = byte ^ flag;
    return 0;
}

int
read_above(PageReader *reader, Py_ssize_t count, int width, uint64_t base, uint64_t *out)
{
    if (width)
        return read_bits(reader, count, width, base, out);
    for (Py_ssize_t i = 0; i < count; i++)
        out[i] = base;
    return 0;
}

int
read_int64_deltas(PageReader *reader, Py_ssize_t count, uint64_t *out)
{
    uint64_t code;
    if (read_varint(reader, &code) < 0)
        return -1;
    out[0] = unzigzag(code);
    return read_int64_gaps(reader, count, out);
}

int
read_int64_gaps(PageReader *reader, Py_ssize_t count, uint64_t *out)
{
    uint64_t base;
    int width = 0;
    if (count == 1)
        return 0;
    if (read_width(reader, 0, "int64 delta block", &width) < 0 || read_varint(reader, &base) < 0
            || read_above(reader, count - 1, width, base, out + 1) < 0)
        return -1;
    for (Py_ssize_t i = 1; i < count; i++)
        out[i] += out[i - 1];
    return 0;
}

static int
read_int64_frame(PageReader *reader, Py_ssize_t count, uint64_t *out)
{
    uint64_t code;
    int width = 0;
    if (read_varint(reader, &code) < 0
            || read_width(reader, PAGE_FRAME_WIDTH_FLAG, "int64 frame block", &width) < 0)
        return -1;
    return read_above(reader, count, width, unzigzag(code), out);
}

int
read_int64_column(PageReader *reader, Py_ssize_t count, uint64_t *out)
{
    if (count > 1) {
        PageReader probe = *reader;
        uint64_t first;
        if (read_varint(&probe, &first) < 0)
            return -1;
        if (probe.pos < probe.size && probe.data[probe.pos] & PAGE_FRAME_WIDTH_FLAG)
            return read_int64_frame(reader, count, out);
    }
    return read_int64_deltas(reader, count, out);
}

/* -- writing --------------------------------------------------------------------------------- */

void
writer_free(PageWriter *writer)
{
    PyMem_Free(writer->data);
    writer->data = NULL;
    writer->size = writer->capacity = 0;
}

PyObject *
writer_finish(PageWriter *writer)
{
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)writer->data, writer->size);
    writer_free(writer);
    return bytes;
}

static int
reserve(PageWriter *writer, Py_ssize_t extra)
{
    if (extra <= writer->capacity - writer->size)
        return 0;
    Py_ssize_t capacity = writer->capacity ? writer->capacity : 64;
    while (capacity - writer->size < extra) {
        if (capacity > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        capacity *= 2;
    }
    uint8_t *data = PyMem_Realloc(writer->data, (size_t)capacity);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    writer->data = data;
    writer->capacity = capacity;
    return 0;
}

int
write_byte(PageWriter *writer, uint8_t byte)
{
    if (reserve(writer, 1) < 0)
        return -1;
    writer->data[writer->size++] = byte;
    return 0;
}

int
write_bytes(PageWriter *writer, const void *bytes, Py_ssize_t size)
{
    if (reserve(writer, size) < 0)
        return -1;
    if (size)
        memcpy(writer->data + writer->size, bytes, (size_t)size);
    writer->size += size;
    return 0;
}

Py_ssize_t
varint_size(uint64_t value)
{
    Py_ssize_t size = 1;
    while (value >= 0x80) {
        value >>= 7;
        size++;
    }
    return size;
}

int
write_varint(PageWriter *writer, uint64_t value)
{
    if (reserve(writer, PAGE_MAX_VARINT_BYTES) < 0)
        return -1;
    while (value >= 0x80) {
        writer->data[writer->size++] = (uint8_t)(value | 0x80);
        value >>= 7;
    }
    writer->data[writer->size++] = (uint8_t)value;
    return 0;
}

/* values[i] - base, each below 2**width (1..64), bit-packed: the stream's bytes go out in
 * little-endian words through an accumulator holding the `filled` low bits not yet written. */
static int
write_bits(PageWriter *writer, const uint64_t *values, Py_ssize_t count, int width, uint64_t base)
{
    if (reserve(writer, packed_size(count, width) + 8) < 0)
        return -1;
    uint8_t *out = writer->data + writer->size;
    uint64_t pending = 0;
    int filled = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t value = values[i] - base;
        pending |= value << filled;
        if (filled + width >= 64) {
            for (int b = 0; b < 8; b++)
                *out++ = (uint8_t)(pending >> (8 * b));
            pending = filled ? value >> (64 - filled) : 0;
            filled = filled + width - 64;
        }
        else {
            filled += width;
        }
    }
    for (int b = 0; b < (filled + 7) / 8; b++)
        *out++ = (uint8_t)(pending >> (8 * b));
    writer->size += packed_size(count, width);
    return 0;
}

int
write_packed(PageWriter *writer, const uint64_t *values, Py_ssize_t count, int width,
             uint64_t base)
{
    return width ? write_bits(writer, values, count, width, base) : 0;
}

typedef struct {
    uint64_t base;  /* smallest gap (deltas) or smallest value (frame, as int64 bits) */
    int width;      /* bit length of the spread above base */
    Py_ssize_t size;
} BlockPlan;

/* Gaps values[i+1] - values[i] (uint64, wrapping) of count >= 2 values, into gaps. */
static BlockPlan
plan_deltas(const uint64_t *values, Py_ssize_t count, uint64_t *gaps)
{
    uint64_t low = UINT64_MAX, high = 0;
    for (Py_ssize_t i = 0; i + 1 < count; i++) {
        gaps[i] = values[i + 1] - values[i];
        low = gaps[i] < low ? gaps[i] : low;
        high = gaps[i] > high ? gaps[i] : high;
    }
    /* base 0 where it makes the block strictly shorter (packing.delta_base) */
    BlockPlan plan = {low, bit_length(high - low), 0};
    Py_ssize_t kept = varint_size(low) + packed_size(count - 1, plan.width);
    if (low && 1 + packed_size(count - 1, bit_length(high)) < kept) {
        plan.base = 0;
        plan.width = bit_length(high);
        kept = 1 + packed_size(count - 1, plan.width);
    }
    plan.size = varint_size(zigzag(values[0])) + 1 + kept;
    return plan;
}

static BlockPlan
plan_frame(const uint64_t *values, Py_ssize_t count)
{
    int64_t low = INT64_MAX, high = INT64_MIN;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t value = (int64_t)values[i];
        low = value < low ? value : low;
        high = value > high ? value : high;
    }
    BlockPlan plan = {(uint64_t)low, bit_length((uint64_t)high - (uint64_t)low), 0};
    plan.size = varint_size(zigzag((uint64_t)low)) + 1 + packed_size(count, plan.width);
    return plan;
}

static int
write_planned_deltas(PageWriter *writer, const uint64_t *values, Py_ssize_t count,
                     const uint64_t *gaps, BlockPlan plan, int with_first)
{
    if (with_first && write_varint(writer, zigzag(values[0])) < 0)
        return -1;
    if (count == 1)
        return 0;
    if (write_byte(writer, (uint8_t)plan.width) < 0 || write_varint(writer, plan.base) < 0)
        return -1;
    return plan.width ? write_bits(writer, gaps, count - 1, plan.width, plan.base) : 0;
}

/* The delta block of `count` >= 1 values (without its first varint unless with_first) or,
 * when choose_frame is set and it is shorter, the frame block; the gaps go through a scratch
 * array (PyMem, freed here). */
static int
write_block(PageWriter *writer, const uint64_t *values, Py_ssize_t count, int choose_frame,
            int with_first)
{
    if (count == 1)
        return with_first ? write_varint(writer, zigzag(values[0])) : 0;
    uint64_t *gaps = PyMem_Malloc(sizeof(uint64_t) * (size_t)(count - 1));
    if (gaps == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    BlockPlan deltas = plan_deltas(values, count, gaps);
    int result;
    BlockPlan frame;
    if (choose_frame && (frame = plan_frame(values, count)).size < deltas.size) {
        result = (write_varint(writer, zigzag(frame.base)) < 0
                  || write_byte(writer, (uint8_t)(PAGE_FRAME_WIDTH_FLAG | frame.width)) < 0
                  || (frame.width && write_bits(writer, values, count, frame.width, frame.base) < 0))
                 ? -1 : 0;
    }
    else {
        result = write_planned_deltas(writer, values, count, gaps, deltas, with_first);
    }
    PyMem_Free(gaps);
    return result;
}

int
write_int64_deltas(PageWriter *writer, const uint64_t *values, Py_ssize_t count)
{
    return write_block(writer, values, count, 0, 1);
}

int
write_int64_gaps(PageWriter *writer, const uint64_t *values, Py_ssize_t count)
{
    return write_block(writer, values, count, 0, 0);
}

int
write_int64_column(PageWriter *writer, const uint64_t *values, Py_ssize_t count)
{
    return write_block(writer, values, count, 1, 1);
}
