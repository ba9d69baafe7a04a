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
 * room until it fits, as the reference's _put, in the turn of an operation (lock.c).
 * PUT_FAILED leaves the table as it was and the word to the caller; PUT_FAILED_AFTER_STORING
 * means the word is stored but releasing the word it replaced failed. */
int
put_turn(MapCore *self, int64_t key, uint64_t bits, int width, int *held)
{
    for (;;) {
        if (begin_turn(self, held) < 0)
            return PUT_FAILED;
        if (!ATTACHED(self))
            return closed_error(self);
        Py_ssize_t slot, e = find(self, key, 1, &slot);
        if (e == -2)
            return PUT_FAILED;
        int index_full = 0;
        if (e >= 0) {
            if (width <= self->width) {
                if (check_writable(self) < 0)
                    return PUT_FAILED;
                uint64_t old = value_at(self, e);
                if (owns_record(self, old)) { /* its release calls the codec */
                    int waited = hold_lock(self, held);
                    if (waited < 0)
                        return PUT_FAILED;
                    if (waited)
                        continue;
                }
                set_value_at(self, e, bits);
                if (owns_record(self, old) && release_word(self, old) < 0)
                    return PUT_FAILED_AFTER_STORING;
                return PUT_STORED;
            }
        }
        else if (width <= self->width && self->n < self->max_n && self->used < self->capacity) {
            if (check_writable(self) < 0 || check_used(self) < 0)
                return PUT_FAILED;
            Py_ssize_t end = empty_slot_from(self, slot);
            if (end >= 0) {
                append(self, slot, end, key, bits);
                return PUT_STORED;
            }
            index_full = 1;
        }
        int waited = hold_lock(self, held);
        if (waited < 0)
            return PUT_FAILED;
        if (!waited && make_room(self, width, index_full) < 0)
            return PUT_FAILED;
    }
}

/* put_turn as a whole operation (the bulk path's, under the map's lock). */
int
put(MapCore *self, int64_t key, uint64_t bits, int width)
{
    int held = 0;
    int status = put_turn(self, key, bits, width, &held);
    end_turn(self, held);
    return status;
}

/* self[key] = value once the key is admitted: encode (inline, or through the codec, whose
 * record is released again if the put fails), then put. */
int
store(MapCore *self, int64_t key, PyObject *value, int *held)
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

/* The entry of a looked-up key (>= 0), -1 for a miss, -2 with an exception set; *key and
 * *slot are set for a hit. ClosedError when detached, before or after admitting the key. The
 * admission may run Python code; the probe is in the operation's turn. */
Py_ssize_t
lookup(MapCore *self, PyObject *obj, int64_t *key, Py_ssize_t *slot, int *held)
{
    if (begin_turn(self, held) < 0)
        return -2;
    if (!ATTACHED(self))
        return closed_error(self) - 1;
    if (!PyLong_CheckExact(obj)) { /* the admission may run Python code: another turn after it */
        int admitted = lookup_key(obj, key);
        if (admitted <= 0)
            return admitted - 1;
        if (begin_turn(self, held) < 0)
            return -2;
        if (!ATTACHED(self))
            return closed_error(self) - 1;
    }
    else {
        int admitted = exact_int_key(obj, key); /* 0 outside int64: no key of the map */
        if (admitted <= 0)
            return admitted - 1;
    }
    return find(self, *key, 1, slot);
}

/* lookup(), with *word the entry's word, and the lock held when reading or dropping the word
 * calls the codec (the look-up is done again if other threads ran while it waited for it). */
Py_ssize_t
lookup_entry(MapCore *self, PyObject *obj, int64_t *key, Py_ssize_t *slot, uint64_t *word,
             int *held)
{
    for (;;) {
        Py_ssize_t e = lookup(self, obj, key, slot, held);
        if (e < 0)
            return e;
        *word = value_at(self, e);
        if (*held || !word_needs_codec(self, *word))
            return e;
        int waited = hold_lock(self, held);
        if (waited <= 0)
            return waited < 0 ? -2 : e;
    }
}

/* Decode entry e's value (`word`, read by lookup_entry in this turn), then remove the entry and
 * release its word (pop and popitem). The decoding may run Python code: the entry is removed
 * only if it still holds the same word. */
PyObject *
take(MapCore *self, int64_t key, Py_ssize_t e, uint64_t word)
{
    PyObject *value = decode_word(self, word);
    if (value == NULL)
        return NULL;
    if (!ATTACHED(self)) {
        Py_DECREF(value);
        closed_error(self);
        return NULL;
    }
    Py_ssize_t slot, found = find(self, key, 1, &slot);
    if (found != e || value_at(self, e) != word) {
        if (found != -2)
            PyErr_SetString(PyExc_RuntimeError,
                            "LongHashMap changed while a value was being taken out");
        Py_DECREF(value);
        return NULL;
    }
    if (remove_at(self, slot, e) < 0 || (owns_record(self, word) && release_word(self, word) < 0)) {
        Py_DECREF(value);
        return NULL;
    }
    return value;
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
                PyObject **obj, PyObject **default_value, int64_t *key,
                uint64_t *word, int *held)
{
    Py_ssize_t slot;
    if (key_and_default(method, args, nargs, obj, default_value) < 0)
        return -2;
    return lookup_entry(self, *obj, key, &slot, word, held);
}
