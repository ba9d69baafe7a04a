/* offheap.hashmap._core: the compiled scalar operations of a LongHashMap (layer 6).
 *
 * MapCore is the C twin of the pure-Python reference offheap.hashmap.core.MapCore: the same
 * attributes and methods, the same results and the same effect on every byte of the table
 * (format: offheap.hashmap.layout; the contract with the map: the reference's module docstring).
 * offheap.kernels.native chooses between the two.
 *
 * Ownership. While attached, a MapCore holds a buffer export (PyObject_GetBuffer) of the index
 * and of every chunk's keys, values and live bits, so none of their regions can be unmapped under
 * it; _detach and deallocation release them all. The value codec is held from one attach to the
 * next. A table with a read-only buffer (a reader's) serves lookups; a change raises the
 * TypeError a write into read-only memory raises, before anything changed.
 *
 * Safety. Any call into Python (the codec's methods, _make_room, __index__, a garbage collection
 * that an allocation starts) may detach, re-attach or grow the table, or switch threads. So no
 * pointer into the table is kept across such a call: an operation copies the words it needs
 * into locals, makes the call, then re-reads the struct and checks that it is still attached.
 * Entry numbers read from the index are checked against min(_used, _capacity) and probes stop
 * at _n_slots: a damaged table raises CorruptionError, never reads or writes out of bounds.
 *
 * Values. The common values are encoded and decoded here, byte for byte as the serializers of
 * offheap.store.serializers do: for "object" None, False, True, ints of int64 and exact str and
 * bytes whose serialized form fits a word (<= 7 bytes); for "str" and "bytes" exact str and
 * bytes of <= 7 bytes; raw int64 and float64 for the typed codecs; nothing at all for the empty
 * codec of a set's table (item size 0: no values region is exported, every value reads as 0
 * and decodes to None, a write is dropped). Everything else (external
 * records, pickles, validation errors) goes through the codec object (ValueSlots), so there is
 * one implementation of it: a pickled value is unpickled there, or refused without
 * allow_pickle (offheap.store.pickled), exactly as on the reference core. Only external words
 * own a record: inline words and typed values need no release.
 *
 * The module also holds CacheCore (csrc/cache.c), a Cache's hit and miss paths over the MapCore
 * of its table, the twin of offheap.hashmap.cachecore.ReferenceCacheCore; the MapCore keeps the
 * cache's hand and a buffer export of its stamps and marks (_hand, _stamps, _marks).
 *
 * Thread safety: the map's MapLock (csrc/lock.c, offheap.hashmap.locking), whose state every
 * operation reads. An operation that calls no Python code runs under the GIL alone while the
 * lock is free; it waits while another thread holds the lock, and holds it itself from before
 * its first call into Python to its end, reading the table again if it had to wait.
 */

#include "csrc/core.h"
#include "csrc/siphash.h"

/* Imported once at module init. */
PyObject *ClosedError, *CorruptionError;
const LockApi *lock_api;
PyObject *as_key_function, *lookup_key_function; /* offheap.hashmap.layout */
PyObject *INT64, *FLOAT64, *EMPTY, *OBJECT, *STR, *BYTES; /* the serializer singletons */
double max_load;                                  /* layout.MAX_LOAD */
PyObject *s_encode, *s_decode, *s_release, *s_width_of, *s_make_room, *s_typed,
    *s_serializer;



static PyObject *
MapCore_attach(MapCore *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"codec", "index", "key_chunks", "value_chunks", "live_chunks",
                            "homes", "width", NULL};
    PyObject *codec, *index, *chunk_lists[3], *chunks[3] = {NULL, NULL, NULL};
    Py_ssize_t homes, width, n_slots, capacity;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOnn:_attach", names, &codec, &index,
                                     &chunk_lists[0], &chunk_lists[1], &chunk_lists[2], &homes,
                                     &width))
        return NULL;
    /* First everything that may run Python code, into locals. */
    ValueCodec value_codec;
    if (value_codec_of(codec, &value_codec) < 0)
        return NULL;
    int typed = TYPED_CODEC(value_codec);
    int item_size = value_codec == CODEC_EMPTY ? 0 : typed ? 8 : (int)width;
    if (!typed && width != 2 && width != 4 && width != 8)
        return PyErr_Format(PyExc_ValueError, "slot words are 2, 4 or 8 bytes wide, not %zd",
                            width);
    if (homes < 1 || homes > MAX_HOMES)
        return PyErr_Format(PyExc_ValueError, "homes must be in [1, 2**32], not %zd", homes);
    Table table;
    memset(&table, 0, sizeof table);
    for (int i = 0; i < 3; i++)
        if ((chunks[i] = PySequence_Tuple(chunk_lists[i])) == NULL)
            goto fail;
    if (export_table(index, chunks[0], chunks[1], chunks[2], KEY_SIZE(self), item_size, &table,
                     &n_slots, &capacity) < 0)
        goto fail;
    if (n_slots < homes) {
        PyErr_Format(PyExc_ValueError, "an index of %zd slots is shorter than its %zd homes",
                     n_slots, homes);
        goto fail;
    }
    /* Then the switch, which runs no Python code; the old exports and codec go afterwards. */
    Table old = self->table;
    PyObject *old_codec = self->codec;
    self->table = table;
    self->codec = Py_NewRef(codec);
    self->value_codec = value_codec;
    self->item_size = item_size;
    self->homes = homes;
    self->n_slots = n_slots;
    self->width = width;
    self->capacity = capacity;
    self->max_n = (Py_ssize_t)(max_load * (double)homes);
    for (int i = 0; i < 3; i++)
        Py_DECREF(chunks[i]);
    release_table(&old);
    Py_XDECREF(old_codec);
    Py_RETURN_NONE;
fail:
    for (int i = 0; i < 3; i++)
        Py_XDECREF(chunks[i]);
    release_table(&table);
    return NULL;
}

static PyObject *
MapCore_detach(MapCore *self, PyObject *Py_UNUSED(ignored))
{
    detach(self);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------------
 * The type's slots
 */

static Py_ssize_t
MapCore_length(MapCore *self)
{
    return self->n;
}

static PyObject *
MapCore_subscript(MapCore *self, PyObject *obj)
{
    Key key;
    key_init(&key);
    uint64_t word;
    int held = 0;
    PyObject *value = NULL;
    Py_ssize_t slot, e = lookup_entry(self, obj, &key, &slot, &word, &held);
    if (e >= 0)
        value = decode_word(self, word);
    else if (e == -1)
        set_key_error(obj);
    key_clear(&key);
    end_turn(self, held);
    return value;
}

static int
MapCore_contains(MapCore *self, PyObject *obj)
{
    Key key;
    key_init(&key);
    int held = 0;
    Py_ssize_t slot, e = lookup(self, obj, &key, &slot, &held);
    key_clear(&key);
    end_turn(self, held);
    return e == -2 ? -1 : e >= 0;
}

/* Remove the key `obj`: 1, 0 when absent, -1 with an error. */
int
discard_key(MapCore *self, PyObject *obj)
{
    Key key;
    key_init(&key);
    uint64_t word;
    int held = 0, status = -1;
    Py_ssize_t slot, e = lookup_entry(self, obj, &key, &slot, &word, &held);
    if (e >= 0)
        status = remove_entry(self, slot, e, word) < 0 ? -1 : 1;
    else if (e == -1)
        status = 0;
    key_clear(&key);
    end_turn(self, held);
    return status;
}

static int
MapCore_ass_subscript(MapCore *self, PyObject *obj, PyObject *value)
{
    if (value == NULL) {
        int found = discard_key(self, obj);
        if (found == 0)
            set_key_error(obj);
        return found == 1 ? 0 : -1;
    }
    Key key;
    key_init(&key);
    int held = 0, status = -1;
    key.owner = NULL;
    if (begin_turn(self, &held) < 0)
        return -1;
    if (!ATTACHED(self))
        closed_error(self);
    else if (key_for_store(self, obj, &key) == 0)
        status = store(self, &key, value, &held);
    key_clear(&key);
    end_turn(self, held);
    return status;
}

/* _add_key(key): self[key] = None, a set's add (one call, no frame of Python code). */
static PyObject *
MapCore_add_key(MapCore *self, PyObject *obj)
{
    return MapCore_ass_subscript(self, obj, Py_None) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *
MapCore_iter(MapCore *self)
{
    return iterate(self, ITER_KEYS);
}

static int
MapCore_traverse(MapCore *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->codec);
    Py_VISIT(self->keycodec);
    if (record_source_traverse(&self->key_records, visit, arg) != 0)
        return -1;
    Py_VISIT(self->lock);
    Py_VISIT(self->table.index_owner);
    Py_VISIT(self->stamps.obj);
    Py_VISIT(self->marks.obj);
    for (Py_ssize_t i = 0; i < self->table.n_exports; i++)
        Py_VISIT(self->table.exports[i].obj);
    return 0;
}

static int
MapCore_clear(MapCore *self)
{
    detach(self);
    release_columns(self);
    Py_CLEAR(self->codec);
    Py_CLEAR(self->keycodec);
    record_source_clear(&self->key_records);
    Py_CLEAR(self->lock);
    return 0;
}

static void
MapCore_dealloc(MapCore *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    MapCore_clear(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type); /* instances of a heap type own a reference to it */
}

/* ---------------------------------------------------------------------------------------------
 * The methods
 */

static PyObject *
MapCore_get(MapCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *obj, *default_value, *value = NULL;
    Key key;
    key_init(&key);
    uint64_t word;
    int held = 0;
    Py_ssize_t e = lookup_argument(self, "get", args, nargs, &obj, &default_value, &key,
                                   &word, &held);
    if (e >= 0)
        value = decode_word(self, word);
    else if (e == -1)
        value = Py_NewRef(default_value != NULL ? default_value : Py_None);
    key_clear(&key);
    end_turn(self, held);
    return value;
}

static PyObject *
MapCore_pop(MapCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *obj, *default_value, *value = NULL;
    Key key;
    key_init(&key);
    uint64_t word;
    int held = 0;
    Py_ssize_t e = lookup_argument(self, "pop", args, nargs, &obj, &default_value, &key,
                                   &word, &held);
    if (e >= 0)
        value = take(self, e, word);
    else if (e == -1) {
        if (default_value == NULL)
            set_key_error(obj);
        value = Py_XNewRef(default_value);
    }
    key_clear(&key);
    end_turn(self, held);
    return value;
}

/* The last entry in use, for popitem, in the operation's turn: its number (*word set), or -1
 * with an error; the lock is held when its key or word calls into Python. */
static Py_ssize_t
last_entry(MapCore *self, uint64_t *word, int *held)
{
    for (;;) {
        if (begin_turn(self, held) < 0)
            return -1;
        if (!ATTACHED(self))
            return closed_error(self);
        if (self->n == 0) {
            PyObject *kind = kind_name(self);
            if (kind != NULL) {
                PyErr_Format(PyExc_KeyError, "popitem(): %U is empty", kind);
                Py_DECREF(kind);
            }
            return -1;
        }
        if (check_used(self) < 0)
            return -1;
        Py_ssize_t e = self->used - 1;
        if (e < 0 || !is_live_at(self, e)) {
            PyErr_Format(CorruptionError, "entry %zd, the last in use, is not a live entry: "
                         "the table is damaged", e);
            return -1;
        }
        *word = value_at(self, e);
        if (*held || !entry_needs_lock(self, e, *word))
            return e;
        int waited = hold_lock(self, held);
        if (waited <= 0)
            return waited < 0 ? -1 : e;
    }
}

static PyObject *
MapCore_popitem(MapCore *self, PyObject *Py_UNUSED(ignored))
{
    uint64_t word = 0;
    int held = 0;
    PyObject *item = NULL, *key_object_ = NULL, *value = NULL;
    Py_ssize_t e = last_entry(self, &word, &held);
    if (e >= 0 && (key_object_ = key_object(self, e)) != NULL
        && (value = take(self, e, word)) != NULL)
        item = PyTuple_Pack(2, key_object_, value);
    Py_XDECREF(key_object_);
    Py_XDECREF(value);
    end_turn(self, held);
    return item;
}

static PyObject *
MapCore_setdefault(MapCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *obj, *default_value, *value = NULL;
    Key key;
    key_init(&key);
    uint64_t word;
    int held = 0;
    Py_ssize_t e;
    for (;;) {
        e = lookup_argument(self, "setdefault", args, nargs, &obj, &default_value, &key,
                            &word, &held);
        if (e != -1 || held)
            break;
        key_clear(&key);
        int waited = hold_lock(self, &held); /* the look-up and the store: one operation */
        if (waited <= 0) {
            e = waited < 0 ? -2 : -1;
            break;
        }
    }
    if (e >= 0)
        value = decode_word(self, word);
    else if (e == -1) {
        if (default_value == NULL)
            default_value = Py_None;
        if (PyObject_SetItem((PyObject *)self, obj, default_value) == 0)
            value = Py_NewRef(default_value);
    }
    key_clear(&key);
    end_turn(self, held);
    return value;
}

static PyObject *
MapCore_iter_values(MapCore *self, PyObject *Py_UNUSED(ignored))
{
    return iterate(self, ITER_VALUES);
}

static PyObject *
MapCore_iter_items(MapCore *self, PyObject *Py_UNUSED(ignored))
{
    return iterate(self, ITER_ITEMS);
}

static PyObject *
MapCore_lookup(MapCore *self, PyObject *obj)
{
    Key key;
    key_init(&key);
    int held = 0;
    Py_ssize_t slot, e = lookup(self, obj, &key, &slot, &held);
    key_clear(&key);
    end_turn(self, held);
    return e == -2 ? NULL : PyLong_FromSsize_t(e);
}

static PyObject *
MapCore_discard_key(MapCore *self, PyObject *obj)
{
    int found = discard_key(self, obj);
    return found < 0 ? NULL : PyBool_FromLong(found);
}

/* An attached table of int64 keys, for the methods that take int64 keys: 0, or -1 with an
 * error (ClosedError, or TypeError on a keyed table). */
int
int64_table(MapCore *self, const char *method)
{
    if (!ATTACHED(self))
        return closed_error(self);
    if (!KEYED(self))
        return 0;
    PyErr_Format(PyExc_TypeError, "%s() takes int64 keys: this table's keys are key slots",
                 method);
    return -1;
}

static PyObject *
MapCore_find(MapCore *self, PyObject *obj)
{
    if (int64_table(self, "_find") < 0)
        return NULL;
    if (!PyLong_Check(obj))
        return PyErr_Format(PyExc_TypeError, "_find() takes an int, not %.100s",
                            Py_TYPE(obj)->tp_name);
    int64_t key;
    int can_match = int_key(obj, &key);
    if (can_match < 0)
        return NULL;
    if (!can_match) /* beyond int64: probe for its low 64 bits, which equal no stored key */
        key = (int64_t)PyLong_AsUnsignedLongLongMask(obj);
    Py_ssize_t slot, e = find(self, key, can_match, &slot);
    return e == -2 ? NULL : Py_BuildValue("(nn)", slot, e);
}

static PyObject *
MapCore_put(MapCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "_put() takes a key and a word (%zd given)", nargs);
    if (int64_table(self, "_put") < 0)
        return NULL;
    Key key;
    key_init(&key);
    key.int_key = PyLong_AsLongLong(args[0]);
    if (key.int_key == -1 && PyErr_Occurred())
        return NULL;
    uint64_t bits;
    int width;
    if (word_of(self, args[1], &bits, &width) < 0 || put(self, &key, bits, width) != PUT_STORED)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
MapCore_remove(MapCore *self, PyObject *obj)
{
    if (int64_table(self, "_remove") < 0)
        return NULL;
    long long key = PyLong_AsLongLong(obj);
    if (key == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t slot, e = find(self, key, 1, &slot);
    if (e < 0) {
        if (e == -1)
            set_key_error(obj);
        return NULL;
    }
    if (remove_at(self, slot, e) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
MapCore_key_of(MapCore *self, PyObject *arg)
{
    Py_ssize_t e = entry_arg(self, arg);
    return e < 0 ? NULL : key_object(self, e);
}

static PyObject *
MapCore_value_of(MapCore *self, PyObject *arg)
{
    Py_ssize_t e = entry_arg(self, arg);
    return e < 0 ? NULL : decode_word(self, value_at(self, e));
}

static PyObject *
MapCore_is_live(MapCore *self, PyObject *arg)
{
    Py_ssize_t e = entry_arg(self, arg);
    return e < 0 ? NULL : PyBool_FromLong(is_live_at(self, e));
}

static PyObject *
MapCore_get_index(MapCore *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(ATTACHED(self) ? self->table.index_owner : Py_None);
}

static PyObject *
MapCore_get_lock(MapCore *self, void *Py_UNUSED(closure))
{
    if (self->lock == NULL) {
        PyErr_SetString(PyExc_AttributeError, "the map has no lock yet");
        return NULL;
    }
    return Py_NewRef(self->lock);
}

static int
MapCore_set_lock(MapCore *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value == NULL || !PyObject_TypeCheck(value, lock_api->type)) {
        PyErr_Format(PyExc_TypeError, "a compiled LongHashMap's lock is a MapLock "
                     "(offheap.collection.locks.new_lock()), not %.100s",
                     value == NULL ? "nothing" : Py_TYPE(value)->tp_name);
        return -1;
    }
    if (self->lock != NULL && self->lock->depth > 0) {
        PyErr_SetString(PyExc_RuntimeError, "a map's lock cannot change while it is held");
        return -1;
    }
    Py_XSETREF(self->lock, (MapLock *)Py_NewRef(value));
    return 0;
}

static PyMethodDef MapCore_methods[] = {
    {"_attach", (PyCFunction)(void (*)(void))MapCore_attach, METH_VARARGS | METH_KEYWORDS,
     "_attach(codec, index, key_chunks, value_chunks, live_chunks, homes, width)\n--\n\n"
     "Take the table: the value codec and C-contiguous buffers of the layout's item "
     "sizes (the uint32 index; per chunk int64 keys, values of width bytes or 8 for typed "
     "values, one live bit per key; every chunk but the last CHUNK_ENTRIES long). Holds their "
     "exports until _detach; releases the previous table's once the new one is taken."},
    {"_detach", (PyCFunction)MapCore_detach, METH_NOARGS,
     "Release the table's buffers (idempotent); operations raise ClosedError until the next "
     "attach."},
    {"_add_key", (PyCFunction)MapCore_add_key, METH_O,
     "_add_key(key)\n--\n\nself[key] = None: the add of a set, whose values are all None."},
    {"get", (PyCFunction)(void (*)(void))MapCore_get, METH_FASTCALL,
     "get($self, key, default=None, /)\n--\n\nThe value of key, or default."},
    {"pop", (PyCFunction)(void (*)(void))MapCore_pop, METH_FASTCALL,
     "pop(key[, default])\n\nRemove key and return its value; default, or KeyError, when absent."},
    {"popitem", (PyCFunction)MapCore_popitem, METH_NOARGS,
     "Remove and return the last inserted (key, value) pair; KeyError when empty."},
    {"setdefault", (PyCFunction)(void (*)(void))MapCore_setdefault, METH_FASTCALL,
     "setdefault($self, key, default=None, /)\n--\n\n"
     "The value of key; stores default first when absent."},
    {"_iter_values", (PyCFunction)MapCore_iter_values, METH_NOARGS, "Values in entry order."},
    {"_iter_items", (PyCFunction)MapCore_iter_items, METH_NOARGS,
     "(key, value) pairs in entry order."},
    {"_lookup", (PyCFunction)MapCore_lookup, METH_O,
     "The entry holding key, or -1 (also for keys the map cannot hold)."},
    {"_find", (PyCFunction)MapCore_find, METH_O,
     "(slot, entry) of an int key, or (slot where it would go, -1)."},
    {"_put", (PyCFunction)(void (*)(void))MapCore_put, METH_FASTCALL,
     "_put(key, word)\n--\n\nStore a codec word under an int64 key, calling _make_room until "
     "it fits; the caller owns the word until this returns."},
    {"_remove", (PyCFunction)MapCore_remove, METH_O,
     "Remove a present int64 key without releasing its word."},
    {"_discard_key", (PyCFunction)MapCore_discard_key, METH_O,
     "Remove key (its key and word released) and return True, or False when it is absent."},
    {"_get_keys", (PyCFunction)(void (*)(void))MapCore_get_keys, METH_FASTCALL,
     "_get_keys(keys, default)\n--\n\nThe value of each key of a list, or default, as a list."},
    {"_key_states", (PyCFunction)(void (*)(void))MapCore_key_states, METH_FASTCALL,
     "_key_states(keys, for_store)\n--\n\nA byte a key of a list: 0 present, 1 absent, 2 "
     "absent and long; for_store admits each as a store does."},
    {"_discard_keys", (PyCFunction)MapCore_discard_keys, METH_O,
     "Remove the keys of a list that are present; how many went."},
    {"_put_key_words", (PyCFunction)(void (*)(void))MapCore_put_key_words, METH_FASTCALL,
     "_put_key_words(keys, words, slots, done)\n--\n\nStore words[i] under keys[i] of a list "
     "(room reserved), a new long key taking slots[i]; done[0] counts the words stored."},
    {"_set_keys", (PyCFunction)MapCore_set_keys, METH_O,
     "_set_keys(keycodec)\n--\n\nMake this core a keyed table's, of the KeyCodec's key type "
     "and seed; before the first attach."},
    {"_find_entries", (PyCFunction)(void (*)(void))MapCore_find_entries, METH_FASTCALL,
     "_find_entries(keys, out)\n--\n\nout[i] = the entry holding keys[i], or -1 (int64 "
     "buffers)."},
    {"_count_absent", (PyCFunction)MapCore_count_absent, METH_O,
     "The number of distinct keys of an int64 buffer that the map does not hold."},
    {"_put_words", (PyCFunction)(void (*)(void))MapCore_put_words, METH_FASTCALL,
     "_put_words(keys, words, done)\n--\n\nStore words[i] under keys[i] in order, calling "
     "_make_room when an insert needs it; done[0] counts the words stored (on an error the "
     "rest are still the caller's)."},
    {"_find_values", (PyCFunction)(void (*)(void))MapCore_find_values, METH_FASTCALL,
     "_find_values(keys, out, found)\n--\n\nout[i] = the word (or typed value) stored under "
     "keys[i] and found[i] = 1, or 0 and 0; returns how many keys are missing."},
    {"_encode_inline_prefix", (PyCFunction)(void (*)(void))MapCore_encode_inline_prefix,
     METH_FASTCALL,
     "_encode_inline_prefix(values, out)\n--\n\nout[i] = the inline word of values[i] (a list "
     "or tuple) for as long as the inline codec takes them; returns how many it encoded."},
    {"_put_batch", (PyCFunction)(void (*)(void))MapCore_put_batch, METH_FASTCALL,
     "_put_batch(keys, words, width, done)\n--\n\nReserve room for the batch's new keys "
     "(the map's _reserve), then store words[i] under keys[i] as _put_words does; a large "
     "batch is built at once. done[0] counts the words stored."},
    {"_remove_keys", (PyCFunction)(void (*)(void))MapCore_remove_keys, METH_FASTCALL,
     "_remove_keys(keys, removed)\n--\n\nRemove the keys present, in order; removed[j] is "
     "the j-th removed entry's word, not released. Returns how many went."},
    {"_place_entries", (PyCFunction)(void (*)(void))MapCore_place_entries, METH_FASTCALL,
     "_place_entries(index, homes)\n--\n\nFill index, an empty uint32 buffer of homes + SLACK "
     "slots other than the table's, with the live entries placed for homes homes; False "
     "(index untouched) when one would land past its end."},
    {"_move_to_end", (PyCFunction)MapCore_move_to_end, METH_O,
     "_move_to_end(key)\n--\n\nMove key's entry to the end of the entries in place (its key "
     "and word copied, its index slot repointed, its old place a hole); its new number, or -1 "
     "when absent. ValueError when no entry is free."},
    {"_compact_entries", (PyCFunction)MapCore_compact_entries, METH_NOARGS,
     "Move the live entries to the front in order, zero the items past them and renumber the "
     "index in place (its slots stay); CorruptionError, the table unchanged, for a slot that "
     "points at no live entry."},
    {"_key_of", (PyCFunction)MapCore_key_of, METH_O, "The key of entry e."},
    {"_value_of", (PyCFunction)MapCore_value_of, METH_O, "The value of entry e."},
    {"_is_live", (PyCFunction)MapCore_is_live, METH_O, "Whether entry e is live (not a hole)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef MapCore_members[] = {
    {"_n", T_PYSSIZET, offsetof(MapCore, n), 0, "Live entries."},
    {"_used", T_PYSSIZET, offsetof(MapCore, used), 0, "Entries including holes."},
    {"_mods", T_PYSSIZET, offsetof(MapCore, mods), 0,
     "Changed whenever the entries or their order change; iterators compare it."},
    {"_homes", T_PYSSIZET, offsetof(MapCore, homes), READONLY, "Home slots of the index."},
    {"_n_slots", T_PYSSIZET, offsetof(MapCore, n_slots), READONLY, "Index slots (homes + slack)."},
    {"_width", T_PYSSIZET, offsetof(MapCore, width), READONLY, "Bytes per value."},
    {"_capacity", T_PYSSIZET, offsetof(MapCore, capacity), READONLY, "Entries the regions hold."},
    {"_max_n", T_PYSSIZET, offsetof(MapCore, max_n), READONLY,
     "Live entries the index takes before it must grow."},
    {"_codec", T_OBJECT, offsetof(MapCore, codec), READONLY, "The value codec (ValueSlots)."},
    {"_hand", T_PYSSIZET, offsetof(MapCore, hand), 0,
     "A Cache's table: the entry its next eviction looks at first."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef MapCore_getset[] = {
    {"_lock", (getter)MapCore_get_lock, (setter)MapCore_set_lock,
     "The map's MapLock (a DB's, shared by its collections): see lock.c for the rule.", NULL},
    {"_stamps", (getter)column_get, (setter)column_set,
     "A Cache's table: the float64 stamp of each entry number (an array), or None.",
     (void *)0},
    {"_marks", (getter)column_get, (setter)column_set,
     "A Cache's table: the uint8 CLOCK mark of each entry number (an array), or None.",
     (void *)1},
    {"_index", (getter)MapCore_get_index, NULL,
     "The index buffer's owner while attached, None while detached.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* A heap type without Py_tp_new: it inherits object's tp_new and, like the reference class, has
 * no __new__ of its own to shadow one of a class after it in a subclass's MRO (a file map's,
 * which opens a reader for readonly=True). */
static PyType_Slot MapCore_slots[] = {
    {Py_tp_doc, "Probe, insert, delete and iterate one table (compiled; the reference is "
                "offheap.hashmap.core.MapCore)."},
    {Py_tp_dealloc, MapCore_dealloc},
    {Py_tp_traverse, MapCore_traverse},
    {Py_tp_clear, MapCore_clear},
    {Py_tp_iter, MapCore_iter},
    {Py_tp_methods, MapCore_methods},
    {Py_tp_members, MapCore_members},
    {Py_tp_getset, MapCore_getset},
    {Py_mp_length, MapCore_length},
    {Py_mp_subscript, MapCore_subscript},
    {Py_mp_ass_subscript, MapCore_ass_subscript},
    {Py_sq_contains, MapCore_contains},
    {0, NULL},
};

static PyType_Spec MapCore_spec = {
    .name = "offheap.hashmap._core.MapCore",
    .basicsize = sizeof(MapCore),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = MapCore_slots,
};

/* ---------------------------------------------------------------------------------------------
 * The module
 */

static PyObject *
import_attribute(const char *module_name, const char *name)
{
    PyObject *module = PyImport_ImportModule(module_name);
    if (module == NULL)
        return NULL;
    PyObject *attribute = PyObject_GetAttrString(module, name);
    Py_DECREF(module);
    return attribute;
}

/* The names the core uses from the layers below and from layout.py; ImportError when the
 * layout's chunk size is not the one compiled in. */
static int
import_names(void)
{
    static const struct { const char *module, *name; PyObject **target; } imports[] = {
        {"offheap.errors", "ClosedError", &ClosedError},
        {"offheap.errors", "CorruptionError", &CorruptionError},
        {"offheap.hashmap.layout", "as_key", &as_key_function},
        {"offheap.hashmap.layout", "lookup_key", &lookup_key_function},
        {"offheap.store.serializers", "INT64", &INT64},
        {"offheap.store.serializers", "FLOAT64", &FLOAT64},
        {"offheap.store.serializers", "EMPTY", &EMPTY},
        {"offheap.store.serializers", "OBJECT", &OBJECT},
        {"offheap.store.serializers", "STR", &STR},
        {"offheap.store.serializers", "BYTES", &BYTES},
    };
    for (size_t i = 0; i < sizeof imports / sizeof imports[0]; i++)
        if ((*imports[i].target = import_attribute(imports[i].module, imports[i].name)) == NULL)
            return -1;
    PyObject *load = import_attribute("offheap.hashmap.layout", "MAX_LOAD");
    PyObject *chunk_bits = load == NULL ? NULL : import_attribute("offheap.hashmap.layout",
                                                                  "CHUNK_BITS");
    max_load = load == NULL ? -1.0 : PyFloat_AsDouble(load);
    long layout_chunk_bits = chunk_bits == NULL ? -1 : PyLong_AsLong(chunk_bits);
    Py_XDECREF(load);
    Py_XDECREF(chunk_bits);
    if (PyErr_Occurred())
        return -1;
    if (layout_chunk_bits != CHUNK_BITS) {
        PyErr_Format(PyExc_ImportError, "offheap.hashmap._core was built for chunks of 2**%d "
                     "entries, layout.py has 2**%ld: rebuild it", CHUNK_BITS, layout_chunk_bits);
        return -1;
    }
    static const struct { const char *text; PyObject **target; } strings[] = {
        {"encode", &s_encode}, {"decode", &s_decode}, {"release", &s_release},
        {"width_of", &s_width_of}, {"_make_room", &s_make_room}, {"typed", &s_typed},
        {"serializer", &s_serializer},
    };
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
        if ((*strings[i].target = PyUnicode_InternFromString(strings[i].text)) == NULL)
            return -1;
    return 0;
}

/* bind_methods(cls): cls's own descriptors of the methods of its compiled base (MapCore or
 * CacheCore). CPython specializes a call of a C method (get, pop, ...) only when the instance's
 * type is exactly the descriptor's type, so on an instance of a subclass every call takes the
 * generic path, ~15 ns more than dict's. The descriptors made here belong to cls: the
 * specialization applies to cls's instances, and the call itself is unchanged (the same C
 * function; the descriptor checks that self is a cls). Methods cls defines itself are left
 * alone; the base's come before the rest of cls's MRO, so the lookups find what they found
 * before. */
static PyObject *
bind_methods(PyObject *Py_UNUSED(module), PyObject *cls)
{
    PyMethodDef *methods = NULL;
    if (PyType_Check(cls) && PyType_IsSubtype((PyTypeObject *)cls, MapCoreType))
        methods = MapCore_methods;
    else if (PyType_Check(cls) && PyType_IsSubtype((PyTypeObject *)cls, CacheCoreType))
        methods = CacheCore_methods;
    else
        return PyErr_Format(PyExc_TypeError, "bind_methods() takes a subclass of MapCore or "
                            "CacheCore, not %R", cls);
    PyObject *own = ((PyTypeObject *)cls)->tp_dict;
    for (PyMethodDef *def = methods; def->ml_name != NULL; def++) {
        PyObject *name = PyUnicode_InternFromString(def->ml_name);
        if (name == NULL)
            return NULL;
        int defined = PyDict_Contains(own, name);
        PyObject *descriptor = defined != 0 ? NULL
                                            : PyDescr_NewMethod((PyTypeObject *)cls, def);
        int failed = defined < 0 || (defined == 0 && (descriptor == NULL
                                     || PyObject_SetAttr(cls, name, descriptor) < 0));
        Py_XDECREF(descriptor);
        Py_DECREF(name);
        if (failed)
            return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
core_siphash(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"seed", "data", "c_rounds", "d_rounds", NULL};
    Py_buffer seed, data;
    int c_rounds = 1, d_rounds = 3;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*y*|ii:siphash", names, &seed, &data,
                                     &c_rounds, &d_rounds))
        return NULL;
    PyObject *result = NULL;
    if (seed.len != SIPHASH_SEED_BYTES)
        PyErr_Format(PyExc_ValueError, "a SipHash seed is %d bytes, got %zd",
                     SIPHASH_SEED_BYTES, seed.len);
    else
        result = PyLong_FromUnsignedLongLong(siphash(seed.buf, data.buf, (size_t)data.len,
                                                     c_rounds, d_rounds));
    PyBuffer_Release(&seed);
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef core_functions[] = {
    {"siphash", (PyCFunction)(void (*)(void))core_siphash, METH_VARARGS | METH_KEYWORDS,
     "siphash(seed, data, c_rounds=1, d_rounds=3)\n--\n\nSipHash-c-d of the bytes-like data "
     "under the 16-byte seed, as offheap.kernels.siphash.siphash."},
    {"bind_methods", bind_methods, METH_O,
     "bind_methods(cls, /)\n--\n\nGive subclass cls its own descriptors of the methods of "
     "MapCore or CacheCore, so that CPython's call specialization applies to its instances "
     "(same functions)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "offheap.hashmap._core",
    .m_doc = "The compiled scalar operations of a LongHashMap (layer 6): MapCore, the twin of "
             "offheap.hashmap.core.MapCore; and CacheCore, a Cache's hit and miss paths, the twin "
             "of offheap.hashmap.cachecore.ReferenceCacheCore.",
    .m_size = -1,
    .m_methods = core_functions,
};

PyMODINIT_FUNC
PyInit__core(void)
{
    lock_api = lock_api_import();
    if (lock_api == NULL || PyType_Ready(&EntryIterType) < 0 || import_names() < 0
        || import_key_names() < 0 || import_cache_names() < 0)
        return NULL;
    PyObject *module = PyModule_Create(&core_module);
    if (module == NULL)
        return NULL;
    PyObject *map_core = PyType_FromSpec(&MapCore_spec);
    if (map_core == NULL || PyModule_AddObject(module, "MapCore", map_core) < 0) {
        Py_XDECREF(map_core);
        Py_DECREF(module);
        return NULL;
    }
    MapCoreType = (PyTypeObject *)map_core;
    PyObject *cache_core = PyType_FromSpec(&CacheCore_spec);
    CacheCoreType = (PyTypeObject *)cache_core;
    if (cache_core == NULL || PyModule_AddObject(module, "CacheCore", cache_core) < 0) {
        Py_XDECREF(cache_core);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
