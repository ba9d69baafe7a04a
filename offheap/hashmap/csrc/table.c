/* The compiled LongHashMap core: errors, the probe's changes (append, remove) and attaching a table. */

#include "core.h"

/* The name errors give the table's class: its _kind ("LongHashMap", "LongHashSet"), as the
 * reference core's; "LongHashMap" for a core without one. A new reference, never NULL unless
 * out of memory. */
PyObject *
kind_name(const MapCore *self)
{
    PyObject *kind = PyObject_GetAttrString((PyObject *)Py_TYPE(self), "_kind");
    if (kind != NULL && PyUnicode_Check(kind))
        return kind;
    Py_XDECREF(kind);
    PyErr_Clear();
    return PyUnicode_FromString("LongHashMap");
}

/* ClosedError naming the table's class (kind_name); returns -1. */
int
closed_error(const MapCore *self)
{
    PyObject *kind = kind_name(self);
    if (kind != NULL) {
        PyErr_Format(ClosedError, "the %U is closed", kind);
        Py_DECREF(kind);
    }
    return -1;
}

void
set_key_error(PyObject *key)
{
    PyObject *args = PyTuple_Pack(1, key); /* a tuple key must not become the args */
    if (args != NULL) {
        PyErr_SetObject(PyExc_KeyError, args);
        Py_DECREF(args);
    }
}

/* CorruptionError unless 0 <= _used <= _capacity (before appending or dropping holes). */
int
check_used(const MapCore *self)
{
    if (self->used >= 0 && self->used <= self->capacity)
        return 0;
    PyErr_Format(CorruptionError,
                 "LongHashMap counters are out of range: %zd entries used of a capacity of %zd",
                 self->used, self->capacity);
    return -1;
}

/* TypeError, as for a write into a read-only memoryview, when the table cannot change. */
int
check_writable(const MapCore *self)
{
    if (!self->table.readonly)
        return 0;
    PyErr_SetString(PyExc_TypeError, "cannot modify read-only memory");
    return -1;
}

int
corrupt_slot(const MapCore *self, Py_ssize_t slot, size_t entry)
{
    PyErr_Format(CorruptionError,
                 "LongHashMap index slot %zd points at entry %zu, but only %zu entries are in "
                 "use: the table is damaged", slot, entry, entry_limit(self));
    return -1;
}

/* The first empty index slot at or after `slot`, or -1 when the slack is full. */
Py_ssize_t
empty_slot_from(const MapCore *self, Py_ssize_t slot)
{
    const uint32_t *index = self->table.index;
    for (; slot < self->n_slots; slot++)
        if (index[slot] == 0)
            return slot;
    return -1;
}

/* Append entry _used for `key` and point index slot `slot` at it, moving the run slot..end-1
 * one place right. Preconditions: attached, 0 <= _used < _capacity, index[end] == 0, and a
 * long key's slot made (make_key_slot). */
void
append(MapCore *self, Py_ssize_t slot, Py_ssize_t end, const Key *key, uint64_t word)
{
    Py_ssize_t e = self->used;
    uint32_t *index = self->table.index;
    if (KEYED(self))
        memcpy((uint8_t *)slot_at(self, e), key->slot, SLOT_BYTES);
    else
        self->table.chunks[e >> CHUNK_BITS].keys[e & CHUNK_MASK] = key->int_key;
    set_value_at(self, e, word);
    set_live_at(self, e, 1);
    memmove(index + slot + 1, index + slot, (size_t)(end - slot) * sizeof(uint32_t));
    index[slot] = (uint32_t)(e + 1);
    self->used = e + 1;
    self->n++;
    self->mods++;
}

/* Remove entry `e`, found at index slot `slot`: empty the slot by backward shift, clear its live
 * bit and drop the holes at the end of the entries (its word is not released). -1 with
 * CorruptionError set, the table unchanged, if an entry on the way is out of range. */
int
remove_at(MapCore *self, Py_ssize_t slot, Py_ssize_t e)
{
    uint32_t *index = self->table.index;
    const size_t limit = entry_limit(self);
    if (check_writable(self) < 0 || check_used(self) < 0)
        return -1;
    Py_ssize_t end = slot + 1;
    for (; end < self->n_slots; end++) {
        uint32_t ix = index[end];
        if (ix == 0)
            break;
        if ((size_t)ix - 1 >= limit)
            return corrupt_slot(self, end, (size_t)ix - 1);
        if (home_of_hash(entry_hash(self, ix - 1), self->homes) == end)
            break;
    }
    memmove(index + slot, index + slot + 1, (size_t)(end - slot - 1) * sizeof(uint32_t));
    index[end - 1] = 0;
    set_live_at(self, e, 0);
    self->n--;
    self->mods++;
    Py_ssize_t used = self->used;
    while (used > 0 && !is_live_at(self, used - 1))
        used--;
    self->used = used;
    return 0;
}

/* _compact_entries(): move the live entries to the front, in order, zero the items past them,
 * and point every index slot at its entry's new number (the slots stay where they are), as the
 * reference's numpy steps do, byte for byte. The index is checked first: a slot pointing past
 * _used or at a hole raises CorruptionError with the table unchanged. Entries only move to
 * lower numbers, so each is read before anything is written over it. */
PyObject *
MapCore_compact_entries(MapCore *self, PyObject *Py_UNUSED(ignored))
{
    if (!ATTACHED(self) ? closed_error(self) : check_writable(self) < 0 || check_used(self) < 0)
        return NULL;
    const Py_ssize_t used = self->used, n = self->n;
    if (n == used)
        Py_RETURN_NONE;
    uint32_t *index = self->table.index;
    for (Py_ssize_t s = 0; s < self->n_slots; s++)
        if (index[s] != 0 && ((Py_ssize_t)index[s] - 1 >= used || !is_live_at(self, index[s] - 1))) {
            PyErr_Format(CorruptionError, "LongHashMap index slot %zd points at entry %zu, which "
                         "is not a live entry: the table is damaged", s, (size_t)index[s] - 1);
            return NULL;
        }
    uint32_t *renumber = PyMem_Malloc((size_t)used * sizeof(uint32_t)); /* new number + 1 */
    if (renumber == NULL)
        return PyErr_NoMemory();
    const size_t key_size = (size_t)KEY_SIZE(self);
    Py_ssize_t write = 0;
    for (Py_ssize_t e = 0; e < used; e++) {
        if (!is_live_at(self, e))
            continue;
        renumber[e] = (uint32_t)(write + 1);
        if (write != e) {
            memcpy((char *)self->table.chunks[write >> CHUNK_BITS].keys
                       + (size_t)(write & CHUNK_MASK) * key_size,
                   (const char *)self->table.chunks[e >> CHUNK_BITS].keys
                       + (size_t)(e & CHUNK_MASK) * key_size, key_size);
            set_value_at(self, write, value_at(self, e));
        }
        write++;
    }
    for (Py_ssize_t e = n; e < used; e++) {
        memset((char *)self->table.chunks[e >> CHUNK_BITS].keys
                   + (size_t)(e & CHUNK_MASK) * key_size, 0, key_size);
        set_value_at(self, e, 0);
    }
    for (Py_ssize_t e = 0; e < self->capacity; e += 8) /* a byte of live bits at a time */
        self->table.chunks[e >> CHUNK_BITS].live[(e & CHUNK_MASK) >> 3] =
            (uint8_t)(e + 8 <= n ? 0xFF : e >= n ? 0 : (1u << (n - e)) - 1);
    for (Py_ssize_t s = 0; s < self->n_slots; s++)
        if (index[s] != 0)
            index[s] = renumber[index[s] - 1];
    PyMem_Free(renumber);
    self->used = n;
    self->mods++;
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------------
 * Attaching and detaching
 */

/* Release the exports of a table that is no longer the struct's (may run Python code). */
void
release_table(Table *table)
{
    for (Py_ssize_t i = 0; i < table->n_exports; i++)
        if (table->exports[i].obj != NULL)
            PyBuffer_Release(&table->exports[i]);
    PyMem_Free(table->exports);
    PyMem_Free(table->chunks);
    Py_XDECREF(table->index_owner);
}

/* Detach: the struct forgets the table first, then its exports are released. */
void
detach(MapCore *self)
{
    Table old = self->table;
    memset(&self->table, 0, sizeof self->table);
    release_table(&old);
}

/* A C-contiguous export of `obj` with items of `item_size` bytes: their number, or -1 with an
 * error. */
static Py_ssize_t
export_items(PyObject *obj, Py_buffer *view, Py_ssize_t item_size, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->itemsize != item_size || view->len % item_size != 0) {
        PyErr_Format(PyExc_ValueError, "the %s must have %zd-byte items, not %zd-byte ones", what,
                     item_size, view->itemsize);
        return -1;
    }
    return view->len / item_size;
}

/* The value codec that `codec` (a ValueSlots) stands for; -1 with an error. */
int
value_codec_of(PyObject *codec, ValueCodec *value_codec)
{
    PyObject *typed = PyObject_GetAttr(codec, s_typed);
    if (typed == NULL)
        return -1;
    int is_typed = PyObject_IsTrue(typed);
    Py_DECREF(typed);
    PyObject *serializer = is_typed < 0 ? NULL : PyObject_GetAttr(codec, s_serializer);
    if (serializer == NULL)
        return -1;
    int known = 1;
    if (serializer == INT64)
        *value_codec = CODEC_INT64;
    else if (serializer == FLOAT64)
        *value_codec = CODEC_FLOAT64;
    else if (serializer == EMPTY)
        *value_codec = CODEC_EMPTY;
    else if (is_typed)
        known = 0;
    else if (serializer == OBJECT)
        *value_codec = CODEC_OBJECT;
    else if (serializer == STR)
        *value_codec = CODEC_STR;
    else if (serializer == BYTES)
        *value_codec = CODEC_BYTES;
    else
        *value_codec = CODEC_WORDS;
    Py_DECREF(serializer);
    if (!known)
        PyErr_SetString(PyExc_TypeError, "typed values are of the int64, float64 or empty serializer");
    return known ? 0 : -1;
}

/* The exports of one chunk's keys (items of key_size bytes), values and live bits
 * (exports[0..2]): its capacity, or -1 with an error. With value_size 0 (a set) the chunk has no values region: that export is not
 * held and chunk->values is NULL. */
static Py_ssize_t
export_chunk(PyObject *keys, PyObject *values, PyObject *live, Py_ssize_t key_size,
             Py_ssize_t value_size, Py_buffer *exports, Chunk *chunk)
{
    Py_ssize_t capacity = export_items(keys, &exports[0], key_size, "keys");
    Py_ssize_t n_values = capacity < 0 || value_size == 0
                              ? capacity
                              : export_items(values, &exports[1], value_size, "values");
    Py_ssize_t n_live = n_values < 0 ? -1 : export_items(live, &exports[2], 1, "live bits");
    if (n_live < 0)
        return -1;
    if (capacity == 0 || capacity > CHUNK_ENTRIES || capacity % 8 != 0 || n_values != capacity
        || n_live != capacity / 8) {
        PyErr_Format(PyExc_ValueError,
                     "a chunk holds 8 to %zd keys (a multiple of 8), as many values and one "
                     "live bit per key, not %zd keys, %zd values and %zd bytes of live bits",
                     CHUNK_ENTRIES, capacity, n_values, n_live);
        return -1;
    }
    chunk->keys = exports[0].buf;
    chunk->values = value_size ? exports[1].buf : NULL;
    chunk->live = exports[2].buf;
    return capacity;
}

/* The exports of the index and the chunks, into `table` (released by the caller on error). */
int
export_table(PyObject *index, PyObject *key_chunks, PyObject *value_chunks,
             PyObject *live_chunks, Py_ssize_t key_size, Py_ssize_t value_size, Table *table,
             Py_ssize_t *n_slots, Py_ssize_t *capacity)
{
    Py_ssize_t n_chunks = PyTuple_GET_SIZE(key_chunks);
    if (PyTuple_GET_SIZE(value_chunks) != n_chunks || PyTuple_GET_SIZE(live_chunks) != n_chunks) {
        PyErr_Format(PyExc_ValueError, "%zd key chunks, %zd value chunks and %zd live chunks",
                     n_chunks, PyTuple_GET_SIZE(value_chunks), PyTuple_GET_SIZE(live_chunks));
        return -1;
    }
    table->exports = PyMem_Calloc((size_t)(1 + 3 * n_chunks), sizeof(Py_buffer));
    table->chunks = PyMem_Calloc((size_t)(n_chunks ? n_chunks : 1), sizeof(Chunk));
    if (table->exports == NULL || table->chunks == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    table->n_exports = 1 + 3 * n_chunks;
    if ((*n_slots = export_items(index, &table->exports[0], 4, "index")) < 0)
        return -1;
    *capacity = 0;
    for (Py_ssize_t i = 0; i < n_chunks; i++) {
        Py_ssize_t chunk_capacity = export_chunk(
            PyTuple_GET_ITEM(key_chunks, i), PyTuple_GET_ITEM(value_chunks, i),
            PyTuple_GET_ITEM(live_chunks, i), key_size, value_size, &table->exports[1 + 3 * i],
            &table->chunks[i]);
        if (chunk_capacity < 0)
            return -1;
        if (i < n_chunks - 1 && chunk_capacity != CHUNK_ENTRIES) {
            PyErr_Format(PyExc_ValueError, "chunk %zd of %zd holds %zd entries: every chunk "
                         "but the last holds %zd", i, n_chunks, chunk_capacity, CHUNK_ENTRIES);
            return -1;
        }
        *capacity += chunk_capacity;
    }
    if ((size_t)*capacity > MAX_CAPACITY) {
        PyErr_Format(PyExc_ValueError, "%zd entries do not fit the index's entry numbers",
                     *capacity);
        return -1;
    }
    for (Py_ssize_t i = 0; i < table->n_exports; i++)
        table->readonly |= table->exports[i].readonly;
    table->index = table->exports[0].buf;
    table->index_owner = Py_NewRef(index);
    return 0;
}
