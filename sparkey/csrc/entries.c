/* Log entries: VLQs, PUT framing, and entry reads with every bound checked (pure, no IO).
 *
 * An entry is VLQ(A) VLQ(B) payload: a PUT has A = len(key) + 1, B = len(value); a DELETE has
 * A = 0, B = len(key). The readers mirror sparkey.log.reader line by line (the same checks in
 * the same order, the same messages), so that a lookup here answers or fails exactly as the
 * Python reader does. A VLQ longer than 64 bits saturates at UINT64_MAX, which compares as the
 * reference's larger integer does with every length a buffer can have.
 */
#include "native.h"

int sparkey_vlq_decode(const uint8_t *buf, uint64_t pos, uint64_t end, uint64_t *value,
                       uint64_t *next)
{
    uint64_t result = 0, start = pos;
    unsigned shift = 0;
    int saturated = 0;
    while (pos < end) {
        uint64_t bits = buf[pos] & 0x7F;
        int more = buf[pos] >= 0x80;
        pos++;
        if (bits && (shift >= 64 || bits > (UINT64_MAX >> shift)))
            saturated = 1;
        else if (bits)
            result |= bits << shift;
        if (!more) {
            *value = saturated ? UINT64_MAX : result;
            *next = pos;
            return 0;
        }
        shift += 7;
        if (pos - start >= SPARKEY_MAX_VLQ_BYTES)
            break;
    }
    return -1;
}

static unsigned vlq_size(uint64_t value)
{
    unsigned size = 1;
    while (value >= 0x80) {
        value >>= 7;
        size++;
    }
    return size;
}

static uint8_t *write_vlq(uint8_t *out, uint64_t value)
{
    while (value >= 0x80) {
        *out++ = (uint8_t)(value | 0x80);
        value >>= 7;
    }
    *out++ = (uint8_t)value;
    return out;
}

uint64_t sparkey_put_size(uint64_t key_len, uint64_t value_len)
{
    return vlq_size(key_len + 1) + vlq_size(value_len) + key_len + value_len;
}

uint64_t sparkey_delete_size(uint64_t key_len)
{
    return 1 + vlq_size(key_len) + key_len;
}

uint8_t *sparkey_write_put(uint8_t *out, const uint8_t *key, size_t key_len,
                           const uint8_t *value, size_t value_len)
{
    out = write_vlq(out, (uint64_t)key_len + 1);
    out = write_vlq(out, value_len);
    memcpy(out, key, key_len);
    memcpy(out + key_len, value, value_len);
    return out + key_len + value_len;
}

/* ---- errors, with the reference's messages */

static PyObject *vlq_error(const sparkey_errors *errors, uint64_t offset)
{
    PyErr_Format(errors->log_format_error, "entry header at offset %llu is truncated or longer "
                 "than %d bytes; the log is corrupt", (unsigned long long)offset,
                 SPARKEY_MAX_VLQ_BYTES);
    return NULL;
}

static PyObject *truncated_error(const sparkey_errors *errors, uint64_t offset, uint64_t end)
{
    PyErr_Format(errors->log_format_error, "entry at offset %llu runs past data_end %llu; the "
                 "log is truncated or corrupt", (unsigned long long)offset,
                 (unsigned long long)end);
    return NULL;
}

static PyObject *outside_body_error(const sparkey_errors *errors, uint64_t position,
                                    uint64_t end)
{
    PyErr_Format(errors->index_format_error, "address points at offset %llu, outside the log "
                 "body [%d, %llu)", (unsigned long long)position, SPARKEY_LOG_HEADER_SIZE,
                 (unsigned long long)end);
    return NULL;
}

static PyObject *delete_in_block_error(const sparkey_errors *errors, uint64_t position)
{
    PyErr_Format(errors->index_format_error, "index slot points at a DELETE entry in the block "
                 "at %llu", (unsigned long long)position);
    return NULL;
}

static PyObject *value_if_key(const uint8_t *data, uint64_t key_start, const uint8_t *key,
                              size_t key_len, uint64_t value_len, int found_only)
{
    if (memcmp(data + key_start, key, key_len) != 0)
        Py_RETURN_NONE;
    if (found_only)
        Py_RETURN_TRUE;
    return PyBytes_FromStringAndSize((const char *)data + key_start + key_len,
                                     (Py_ssize_t)value_len);
}

/* ---- uncompressed logs */

/* LogReader.entry_at then _value_for_entry: walk entry_index + 1 entries from position. */
static PyObject *walked_entry_value(const sparkey_errors *errors, const sparkey_log *log,
                                    uint64_t position, uint64_t entry_index,
                                    const uint8_t *key, size_t key_len, int found_only)
{
    const uint8_t *data = log->data;
    uint64_t end = log->end, pos = position, a = 0, b = 0, payload = 0;
    if (position < SPARKEY_LOG_HEADER_SIZE || position >= end)
        return outside_body_error(errors, position, end);
    for (uint64_t walked = 0;; walked++) {
        uint64_t start = pos;
        if (sparkey_vlq_decode(data, pos, end, &a, &pos) < 0)
            return vlq_error(errors, start);
        uint64_t second = pos;
        if (sparkey_vlq_decode(data, second, end, &b, &pos) < 0)
            return vlq_error(errors, second);
        payload = pos;
        uint64_t stop = a ? sat_add(sat_add(pos, a - 1), b) : sat_add(pos, b);
        if (stop > end)
            return truncated_error(errors, start, end);
        pos = stop;
        if (walked == entry_index)
            break;
    }
    if (!a)
        return delete_in_block_error(errors, position);
    if (a - 1 != key_len)
        Py_RETURN_NONE;
    return value_if_key(data, payload, key, key_len, b, found_only);
}

PyObject *sparkey_log_value(const sparkey_errors *errors, const sparkey_log *log,
                            uint64_t position, uint64_t entry_index,
                            const uint8_t *key, size_t key_len, int found_only)
{
    const uint8_t *data = log->data;
    uint64_t end = log->end, a, b, pos;
    if (entry_index || position < SPARKEY_LOG_HEADER_SIZE || position >= end)
        return walked_entry_value(errors, log, position, entry_index, key, key_len, found_only);
    if (data[position] < 0x80) {
        a = data[position];
        pos = position + 1;
    } else if (sparkey_vlq_decode(data, position, end, &a, &pos) < 0) {
        return vlq_error(errors, position);
    }
    if (!a) {
        PyErr_Format(errors->index_format_error, "index slot points at the DELETE entry at %llu",
                     (unsigned long long)position);
        return NULL;
    }
    if (a - 1 != key_len)
        Py_RETURN_NONE;
    if (pos >= end)
        return truncated_error(errors, position, end);
    if (data[pos] < 0x80) {
        b = data[pos++];
    } else {
        uint64_t second = pos;
        if (sparkey_vlq_decode(data, second, end, &b, &pos) < 0)
            return vlq_error(errors, second);
    }
    if (sat_add(pos + key_len, b) > end)
        return truncated_error(errors, position, end);
    return value_if_key(data, pos, key, key_len, b, found_only);
}

/* ---- compressed logs */

int sparkey_block_payload(const sparkey_errors *errors, const sparkey_log *log,
                          uint64_t position, uint64_t *start, uint64_t *stop)
{
    uint64_t end = log->end, length;
    if (position < SPARKEY_LOG_HEADER_SIZE || position >= end) {
        outside_body_error(errors, position, end);
        return -1;
    }
    if (sparkey_vlq_decode(log->data, position, end, &length, start) < 0) {
        vlq_error(errors, position);
        return -1;
    }
    *stop = sat_add(*start, length);
    if (*stop > end) {
        PyErr_Format(errors->log_format_error, "block at offset %llu of %llu bytes runs past "
                     "data_end %llu; the log is truncated or corrupt",
                     (unsigned long long)position, (unsigned long long)length,
                     (unsigned long long)end);
        return -1;
    }
    return 0;
}

enum { IN_BLOCK = 0, SPANS = 1, CORRUPT = -1 };

/* blocks.vlq_in_block: IN_BLOCK, SPANS when the block ends first, or CORRUPT (error set). */
static int vlq_in_block(const sparkey_errors *errors, const uint8_t *block, uint64_t pos,
                        uint64_t size, uint64_t *value, uint64_t *next)
{
    if (pos >= size)
        return SPANS;
    if (block[pos] < 0x80) {
        *value = block[pos];
        *next = pos + 1;
        return IN_BLOCK;
    }
    if (sparkey_vlq_decode(block, pos, size, value, next) == 0)
        return IN_BLOCK;
    if (size - pos < SPARKEY_MAX_VLQ_BYTES)
        return SPANS;
    vlq_error(errors, pos);
    return CORRUPT;
}

/* Both header VLQs of the entry at *pos; *pos moves to its payload. */
static int header_in_block(const sparkey_errors *errors, const uint8_t *block, uint64_t size,
                           uint64_t *pos, uint64_t *a, uint64_t *b)
{
    int status = vlq_in_block(errors, block, *pos, size, a, pos);
    if (status == IN_BLOCK)
        status = vlq_in_block(errors, block, *pos, size, b, pos);
    return status;
}

/* blocks.skip_in_block: once an entry ends past the block every later step reports SPANS,
 * so the walk stops there. Entries with one-byte VLQs take two byte reads. */
static int skip_in_block(const sparkey_errors *errors, const uint8_t *block, uint64_t size,
                         uint64_t *pos, uint64_t count)
{
    for (uint64_t i = 0; i < count; i++) {
        uint64_t a, b;
        if (*pos + 1 < size && block[*pos] < 0x80 && block[*pos + 1] < 0x80) {
            a = block[*pos];
            b = block[*pos + 1];
            *pos += a ? a + b + 1 : b + 2;
            if (*pos > size)
                return SPANS;
            continue;
        }
        int status = header_in_block(errors, block, size, pos, &a, &b);
        if (status != IN_BLOCK)
            return status;
        *pos = a ? sat_add(sat_add(*pos, a - 1), b) : sat_add(*pos, b);
        if (*pos > size)
            return SPANS;
    }
    return IN_BLOCK;
}

PyObject *sparkey_block_value(const sparkey_errors *errors, const uint8_t *block, uint64_t size,
                              uint64_t position, uint64_t entry_index,
                              const uint8_t *key, size_t key_len)
{
    uint64_t pos = 0, a = 0, b = 0;
    int status = skip_in_block(errors, block, size, &pos, entry_index);
    if (status == IN_BLOCK)
        status = header_in_block(errors, block, size, &pos, &a, &b);
    if (status == CORRUPT)
        return NULL;
    if (status == IN_BLOCK) {
        if (!a)
            return delete_in_block_error(errors, position);
        if (a - 1 != key_len)
            Py_RETURN_NONE;
        if (sat_add(pos + key_len, b) <= size)
            return value_if_key(block, pos, key, key_len, b, 0);
    }
    PyErr_Format(errors->spans_blocks, "entry %llu of the block at %llu continues past the "
                 "block; read it with LogReader.entry_at", (unsigned long long)entry_index,
                 (unsigned long long)position);
    return NULL;
}

int64_t sparkey_walk_block(const sparkey_errors *errors, const uint8_t *block, uint64_t *pos,
                           uint64_t stop, uint64_t limit, int64_t *offsets)
{
    uint64_t at = *pos, count = 0;
    for (; count < limit && at + 1 < stop; count++) {
        uint64_t a = block[at], b = block[at + 1], end, start = at;
        if (a < 0x80 && b < 0x80) {
            end = a ? at + 1 + a + b : at + 2 + b;
        } else {
            int status = header_in_block(errors, block, stop, &start, &a, &b);
            if (status == CORRUPT)
                return -1;
            if (status == SPANS)
                break;
            end = a ? sat_add(sat_add(start, a - 1), b) : sat_add(start, b);
        }
        if (end > stop)
            break;
        offsets[count] = (int64_t)at;
        at = end;
    }
    *pos = at;
    return (int64_t)count;
}
