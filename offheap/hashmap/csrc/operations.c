/* The compiled LongHashMap core: put, store, lookup and take, and argument parsing of the methods. */

#include "core.h"


/* self._make_room(width, index_full): the map grows or reshapes the table and re-attaches it. */
int
make_room(MapCore *self, int width, int index_full)
{
    PyObject *w = PyLong_FromLong(width);
    if (w == NULL)
        return -1;
    PyObject *result = PyObject_CallMethodObjArgs((PyObject *)self, s_make_room, w,
                                                  index_full ? Py_True : Py_False, NULL);
    Py_DECREF(w);
    Py_XDECREF(result);
    return result == NULL ? -1 : 0;
}

/* ---------------------------------------------------------------------------------------------
 * The operations
 */


/* Store `bits` (a word of `width` bytes, or a raw typed value) under `key`, asking the map for
 * room until it fits, as the reference's _put, in the turn of an operation (lock.c). A new long
 * key's record is made once the table has room for it (make_key_slot), and dropped again if the
 * put fails. PUT_FAILED leaves the table as it was and the word to the caller;
 * PUT_FAILED_AFTER_STORING means the word is stored but releasing the word it replaced failed. */
int
put_turn(MapCore *self, Key *key, uint64_t bits, int width, int *held)
{
    int status = PUT_FAILED;
    for (;;) {
        if (begin_turn(self, held) < 0)
            break;
        if (!ATTACHED(self)) {
            closed_error(self);
            break;
        }
        Py_ssize_t slot, e = key_find(self, key, &slot);
        if (e == -2)
            break;
        int index_full = 0;
        if (e >= 0) {
            if (width <= self->width) {
                if (check_writable(self) < 0)
                    break;
                uint64_t old = value_at(self, e);
                if (owns_record(self, old)) { /* its release calls the codec */
                    int waited = hold_lock(self, held);
                    if (waited < 0)
                        break;
                    if (waited)
                        continue;
                }
                set_value_at(self, e, bits);
                drop_key_slot(self, key); /* a record made before another thread stored it */
                if (owns_record(self, old) && release_word(self, old) < 0)
                    return PUT_FAILED_AFTER_STORING;
                return PUT_STORED;
            }
        }
        else if (width <= self->width && self->n < self->max_n && self->used < self->capacity) {
            if (check_writable(self) < 0 || check_used(self) < 0)
                break;
            if (key->is_long && !key->made) { /* the record, then the probe again */
                int waited = hold_lock(self, held);
                if (waited < 0 || (!waited && make_key_slot(self, key) < 0))
                    break;
                continue;
            }
            if (KEYED(self))
                slot = insert_slot(self, key); /* a keyed miss names no place: find it */
            Py_ssize_t end = empty_slot_from(self, slot);
            if (end >= 0) {
                append(self, slot, end, key, bits);
                return PUT_STORED;
            }
            index_full = 1;
        }
        int waited = hold_lock(self, held);
        if (waited < 0)
            break;
        if (!waited && make_room(self, width, index_full) < 0)
            break;
    }
    drop_key_slot(self, key);
    return status;
}

/* put_turn as a whole operation (the bulk path's, under the map's lock). */
int
put(MapCore *self, Key *key, uint64_t bits, int width)
{
    int held = 0;
    int status = put_turn(self, key, bits, width, &held);
    end_turn(self, held);
    return status;
}

/* self[key] = value once the key is admitted: encode (inline, or through the codec, whose
 * record is released again if the put fails), then put. */
int
store(MapCore *self, Key *key, PyObject *value, int *held)
{
    uint64_t bits;
    int width;
    int inline_done = encode_inline(self, value, &bits, &width);
    if (inline_done < 0)
        return -1;
    if (inline_done)
        return put_turn(self, key, bits, width, held) == PUT_STORED ? 0 : -1;
    if (hold_lock(self, held) < 0) /* the codec puts a record into the store */
        return -1;
    PyObject *made = codec_call(self, s_encode, value);
    if (made == NULL)
        return -1;
    int status = word_of(self, made, &bits, &width) < 0 ? PUT_FAILED
                                                         : put_turn(self, key, bits, width, held);
    if (status == PUT_FAILED)
        release_unstored(self, made);
    Py_DECREF(made);
    return status == PUT_STORED ? 0 : -1;
}

/* The entry of a looked-up key (>= 0), -1 for a miss, -2 with an exception set; *key (which the
 * caller clears) and *slot are set for a hit. ClosedError when detached, before or after
 * admitting the key. The admission may run Python code; the probe is in the operation's turn. */
Py_ssize_t
lookup(MapCore *self, PyObject *obj, Key *key, Py_ssize_t *slot, int *held)
{
    key_init(key);
    if (begin_turn(self, held) < 0)
        return -2;
    if (!ATTACHED(self))
        return closed_error(self) - 1;
    if (KEYED(self) || !PyLong_CheckExact(obj)) { /* may run Python code: another turn after it */
        int admitted = key_for_lookup(self, obj, key);
        return admitted <= 0 ? admitted - 1 : find_in_turn(self, key, slot, held);
    }
    int admitted = exact_int_key(obj, &key->int_key); /* 0 outside int64: no key of the map */
    if (admitted <= 0)
        return admitted - 1;
    return find(self, key->int_key, 1, slot);
}

/* The entry of an admitted key (>= 0), -1 for a miss, -2 with an exception set, probed in the
 * operation's turn. */
Py_ssize_t
find_in_turn(MapCore *self, Key *key, Py_ssize_t *slot, int *held)
{
    if (begin_turn(self, held) < 0)
        return -2;
    if (!ATTACHED(self))
        return closed_error(self) - 1;
    return key_find(self, key, slot);
}

/* find_in_turn(), trying first the entry after `previous`, a batch's last hit (-1: none), as
 * bulk.c's find_after does; a long key's slot holds only a tag, so its probe is never skipped.
 * On that shortcut *slot is -1: the caller needs the entry only. */
Py_ssize_t
find_in_turn_after(MapCore *self, Key *key, Py_ssize_t previous, Py_ssize_t *slot, int *held)
{
    if (previous >= 0 && !(KEYED(self) && key->is_long)) {
        if (begin_turn(self, held) < 0)
            return -2;
        if (ATTACHED(self) && entry_holds(self, previous + 1, key->int_key,
                                          KEYED(self) ? key->slot : NULL)) {
            *slot = -1;
            return previous + 1;
        }
    }
    return find_in_turn(self, key, slot, held);
}

/* Entry e of a probe for `key` (or its -1 or -2), with *word the entry's word, and the lock
 * held when reading or dropping the word or the key calls into Python (the probe is made again
 * if other threads ran while it waited for it). */
Py_ssize_t
entry_from(MapCore *self, Key *key, Py_ssize_t e, Py_ssize_t *slot, uint64_t *word, int *held)
{
    for (;;) {
        if (e < 0)
            return e;
        *word = value_at(self, e);
        if (*held || !entry_needs_lock(self, e, *word))
            return e;
        int waited = hold_lock(self, held);
        if (waited <= 0)
            return waited < 0 ? -2 : e;
        e = find_in_turn(self, key, slot, held);
    }
}

/* lookup(), with *word the entry's word as entry_from() reads it. */
Py_ssize_t
lookup_entry(MapCore *self, PyObject *obj, Key *key, Py_ssize_t *slot, uint64_t *word,
             int *held)
{
    Py_ssize_t e = lookup(self, obj, key, slot, held);
    if (e >= 0) { /* the common case inline: a word read without the lock */
        *word = value_at(self, e);
        if (*held || !entry_needs_lock(self, e, *word))
            return e;
    }
    return entry_from(self, key, e, slot, word, held);
}

/* Decode entry e's value (`word`, read in this turn), then remove the entry and release what it
 * owned (pop and popitem). The decoding may run Python code: the entry is removed only if the
 * entries did not change meanwhile and it still holds the same word. */
PyObject *
take(MapCore *self, Py_ssize_t e, uint64_t word)
{
    Py_ssize_t mods = self->mods;
    PyObject *value = decode_word(self, word);
    if (value == NULL)
        return NULL;
    if (!ATTACHED(self)) {
        Py_DECREF(value);
        closed_error(self);
        return NULL;
    }
    if (self->mods != mods || value_at(self, e) != word) {
        PyErr_SetString(PyExc_RuntimeError, "the map changed while a value was being taken out");
        Py_DECREF(value);
        return NULL;
    }
    Py_ssize_t slot = slot_of_entry(self, e);
    if (slot < 0 || remove_entry(self, slot, e, word) < 0) {
        Py_DECREF(value);
        return NULL;
    }
    return value;
}

/* Remove entry e at index slot `slot` and release what it owned: its key's record (a long
 * key's) and its word's. The caller holds the lock when either calls into Python. */
int
remove_entry(MapCore *self, Py_ssize_t slot, Py_ssize_t e, uint64_t word)
{
    uint8_t stored[SLOT_BYTES];
    if (KEYED(self))
        memcpy(stored, slot_at(self, e), SLOT_BYTES);
    if (remove_at(self, slot, e) < 0)
        return -1;
    if (KEYED(self) && release_key_of(self, stored) < 0)
        return -1;
    return owns_record(self, word) ? release_word(self, word) : 0;
}

/* An entry number argument in [0, _capacity) of an attached table, or -1 with an error. */
Py_ssize_t
entry_arg(MapCore *self, PyObject *arg)
{
    if (!ATTACHED(self))
        return closed_error(self);
    Py_ssize_t e = PyLong_AsSsize_t(arg);
    if (e == -1 && PyErr_Occurred())
        return -1;
    if (e < 0 || e >= self->capacity) {
        PyErr_Format(PyExc_IndexError, "entry %zd is outside the table's %zd entries", e,
                     self->capacity);
        return -1;
    }
    return e;
}

/* The (key[, default]) arguments of get, pop and setdefault: positional only, as dict's. */
static int
key_and_default(const char *method, PyObject *const *args, Py_ssize_t nargs, PyObject **obj,
                PyObject **default_value)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_Format(PyExc_TypeError, "%s expected 1 or 2 arguments, got %zd", method, nargs);
        return -1;
    }
    *obj = args[0];
    *default_value = nargs == 2 ? args[1] : NULL;
    return 0;
}

/* The entry of the key argument of get, pop or setdefault, as lookup_entry() gives it (-2 also
 * for bad arguments); *obj and *default_value (NULL when not given) are the arguments. */
Py_ssize_t
lookup_argument(MapCore *self, const char *method, PyObject *const *args, Py_ssize_t nargs,
                PyObject **obj, PyObject **default_value, Key *key,
                uint64_t *word, int *held)
{
    Py_ssize_t slot;
    key_init(key);
    if (key_and_default(method, args, nargs, obj, default_value) < 0)
        return -2;
    return lookup_entry(self, *obj, key, &slot, word, held);
}
