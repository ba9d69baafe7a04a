/* The compiled cache core: a Cache's hit and miss paths (offheap.hashmap.cache), and what its
 * table (offheap.hashmap.cachetable) keeps in the MapCore struct.
 *
 * CacheCore is the C twin of offheap.hashmap.cachecore.ReferenceCacheCore: c[k], c.get(k),
 * c[k] = v, k in c and del c[k] as type slots and C methods, with the same counters, the same
 * evictions in the same order and the same effect on the table. The common cases run here, in
 * one C call: a hit (CLOCK: its mark set; LRU: its entry moved to the newest end in place), a
 * miss, an expired entry removed, and the insert of an absent key whose value encodes inline,
 * with the evictions max_entries asks for. The rest goes to the cache's Python methods, which are
 * the reference's: an overwrite (_store), a value kept in a record (_store), a cache with
 * max_bytes (_store), an insert the table's limit refuses (_insert, which evicts and tries
 * again), bulk expiry (_expire), an LRU move in a table with no free entry (_reinsert, which
 * deletes and inserts again) and deletion (_delete).
 *
 * The table's columns. A Cache's table sets `_stamps` and `_marks` (numpy arrays, one item per
 * entry number, at least _capacity long: cachetable.CacheTable keeps them so) and `_hand`; the
 * MapCore holds a buffer export of each array, so an array cannot be resized or freed while the
 * core reads it, and a new array replaces the export. Every read checks the entry number against
 * the export's length: a column too short raises RuntimeError, never reads out of bounds.
 *
 * Thread safety: the table's MapLock (lock.c), as for the map's own operations. A hit or miss
 * calls no Python code (an inline value, a short key, the default clock, time.monotonic, read
 * here) and runs under the GIL alone while the lock is free; with another clock (Python code),
 * and for every write, the operation holds the lock from its start to its end. */

#include "core.h"

PyTypeObject *MapCoreType, *CacheCoreType;
static PyObject *CapacityError, *time_monotonic;

static PyObject *s_store, *s_delete, *s_expire, *s_insert, *s_reinsert;

int
import_cache_names(void)
{
    static const struct { const char *text; PyObject **target; } strings[] = {
        {"_store", &s_store}, {"_delete", &s_delete}, {"_expire", &s_expire},
        {"_insert", &s_insert}, {"_reinsert", &s_reinsert},
    };
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
        if ((*strings[i].target = PyUnicode_InternFromString(strings[i].text)) == NULL)
            return -1;
    PyObject *errors = PyImport_ImportModule("offheap.errors");
    CapacityError = errors == NULL ? NULL : PyObject_GetAttrString(errors, "CapacityError");
    Py_XDECREF(errors);
    PyObject *time = PyImport_ImportModule("time");
    time_monotonic = time == NULL ? NULL : PyObject_GetAttrString(time, "monotonic");
    Py_XDECREF(time);
    return CapacityError == NULL || time_monotonic == NULL ? -1 : 0;
}

/* ---------------------------------------------------------------------------------------------
 * The table's columns and the in-place move (MapCore's side)
 */

enum { COLUMN_STAMPS, COLUMN_MARKS };

static Py_buffer *
column_of(MapCore *self, void *closure)
{
    return (intptr_t)closure == COLUMN_STAMPS ? &self->stamps : &self->marks;
}

/* _stamps / _marks: the array whose export the core holds, or None. */
PyObject *
column_get(MapCore *self, void *closure)
{
    Py_buffer *view = column_of(self, closure);
    return Py_NewRef(view->obj != NULL ? view->obj : Py_None);
}

/* Set _stamps (float64 items) or _marks (uint8 items): a writable C-contiguous array, or None. */
int
column_set(MapCore *self, PyObject *value, void *closure)
{
    Py_buffer *view = column_of(self, closure), taken;
    const Py_ssize_t itemsize = (intptr_t)closure == COLUMN_STAMPS ? 8 : 1;
    memset(&taken, 0, sizeof taken);
    if (value != NULL && value != Py_None) {
        if (PyObject_GetBuffer(value, &taken, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
            return -1;
        if (taken.itemsize != itemsize) {
            PyBuffer_Release(&taken);
            PyErr_Format(PyExc_ValueError, "a cache table's %s are items of %zd bytes, not %zd",
                         itemsize == 8 ? "stamps" : "marks", itemsize, taken.itemsize);
            return -1;
        }
    }
    Py_buffer old = *view;
    *view = taken;
    if (old.obj != NULL)
        PyBuffer_Release(&old);
    return 0;
}

void
release_columns(MapCore *self)
{
    column_set(self, NULL, (void *)(intptr_t)COLUMN_STAMPS);
    column_set(self, NULL, (void *)(intptr_t)COLUMN_MARKS);
}

/* Entry e's item of a column, or NULL with RuntimeError when the column is shorter. */
static inline char *
column_item(Py_buffer *view, Py_ssize_t e)
{
    if (view->obj == NULL || e >= view->len / view->itemsize) {
        PyErr_Format(PyExc_RuntimeError, "the cache table's %s column has no item for entry %zd",
                     view->itemsize == 8 ? "stamps" : "marks", e);
        return NULL;
    }
    return (char *)view->buf + e * view->itemsize;
}

/* Move live entry e, at index slot `slot`, to the end of the entries (number _used): its key and
 * word copied, the index slot pointed at the new number, the old place a hole. No record is
 * touched and no other slot moves (the entry keeps its home). Precondition: attached, writable,
 * _used < _capacity, e < _used - 1. */
static Py_ssize_t
move_to_end(MapCore *self, Py_ssize_t slot, Py_ssize_t e)
{
    Py_ssize_t to = self->used;
    if (KEYED(self))
        memcpy((uint8_t *)slot_at(self, to), slot_at(self, e), SLOT_BYTES);
    else
        self->table.chunks[to >> CHUNK_BITS].keys[to & CHUNK_MASK] = key_at(self, e);
    set_value_at(self, to, value_at(self, e));
    set_live_at(self, to, 1);
    set_live_at(self, e, 0);
    self->table.index[slot] = (uint32_t)(to + 1);
    self->used = to + 1;
    self->mods++;
    return to;
}

/* Whether entry e can move to the end in place: not already the last, and a free entry. */
static int
can_move(const MapCore *self, Py_ssize_t e)
{
    return e != self->used - 1 && self->used < self->capacity;
}

/* _move_to_end(key): move key's entry to the end of the entries in place; its new number, or
 * -1 when the key is absent. ValueError when the table has no free entry (the caller makes
 * room first). */
PyObject *
MapCore_move_to_end(MapCore *self, PyObject *obj)
{
    Key key;
    int held = 0;
    Py_ssize_t slot, e = lookup(self, obj, &key, &slot, &held);
    PyObject *result = NULL;
    if (e == -1)
        result = PyLong_FromLong(-1);
    else if (e >= 0 && check_writable(self) == 0 && check_used(self) == 0) {
        if (e == self->used - 1)
            result = PyLong_FromSsize_t(e);
        else if (self->used >= self->capacity)
            PyErr_SetString(PyExc_ValueError, "_move_to_end() needs a free entry: make room first");
        else
            result = PyLong_FromSsize_t(move_to_end(self, slot, e));
    }
    key_clear(&key);
    end_turn(self, held);
    return result;
}

/* The first live entry at or after e, below _used (and the capacity), or -1. */
static Py_ssize_t
live_from(const MapCore *self, Py_ssize_t e)
{
    const Py_ssize_t limit = (Py_ssize_t)entry_limit(self);
    while (e < limit) {
        Py_ssize_t at = e & CHUNK_MASK;
        const uint8_t *live = self->table.chunks[e >> CHUNK_BITS].live;
        unsigned byte = live[at >> 3] >> (at & 7);
        if (byte)
            return e + __builtin_ctz(byte) < limit ? e + __builtin_ctz(byte) : -1;
        e += 8 - (at & 7);
    }
    return -1;
}

/* The entry an eviction takes, as CacheTable._victim: the first live entry at or after the hand,
 * wrapping to entry 0 past the last; a marked one is unmarked and passed (CLOCK). -1 with an
 * error when the table holds none. Precondition: attached. */
static Py_ssize_t
victim(MapCore *self)
{
    for (;;) {
        Py_ssize_t e = live_from(self, self->hand < self->used ? self->hand : 0);
        if (e < 0)
            e = live_from(self, 0);
        if (e < 0) {
            PyErr_Format(CorruptionError, "the cache's table counts %zd entries but has no live "
                         "entry: the table is damaged", self->n);
            return -1;
        }
        self->hand = e;
        if (self->marks.obj == NULL)
            return e;
        char *mark = column_item(&self->marks, e);
        if (mark == NULL)
            return -1;
        if (!*mark)
            return e;
        *mark = 0;
        self->hand = e + 1;
    }
}

/* ---------------------------------------------------------------------------------------------
 * The cache core
 */

typedef struct {
    PyObject_HEAD
    MapCore *table;              /* _table: a CacheTable, NULL until _configure */
    PyObject *clock;             /* _clock */
    PyObject *max_entries_obj;   /* _max_entries: an int or None */
    PyObject *max_bytes_obj;     /* _max_bytes: an int or None */
    PyObject *ttl_obj;           /* _ttl: a number or None */
    Py_ssize_t max_entries;      /* -1: no bound */
    double ttl;
    char has_ttl, by_access, clock_policy, stamps_ordered;
    char monotonic;              /* the clock is time.monotonic: read here, no Python call */
    Py_ssize_t hits, misses, size_evictions, expiry_evictions;
    double oldest_stamp;         /* _oldest_stamp: at most the oldest stamp held */
} CacheCore;

/* The table of a configured cache, or NULL with an error. */
static MapCore *
table_of(CacheCore *self)
{
    if (self->table == NULL)
        PyErr_SetString(PyExc_RuntimeError, "the Cache was not set up (_configure)");
    return self->table;
}

/* The clock, in the operation's turn: time.monotonic's value read here (CLOCK_MONOTONIC in
 * seconds, as time.monotonic converts it), or another clock called with the lock held (it is
 * Python code: other threads may run). 0, or -1 with an error (ClosedError if the table was
 * closed meanwhile). */
static int
read_clock(CacheCore *self, MapCore *t, int *held, double *now)
{
    if (self->monotonic) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        *now = (double)((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec) / 1e9;
        return 0;
    }
    if (hold_lock(t, held) < 0)
        return -1;
    PyObject *result = PyObject_CallNoArgs(self->clock);
    if (result == NULL)
        return -1;
    *now = PyFloat_AsDouble(result);
    Py_DECREF(result);
    if (*now == -1.0 && PyErr_Occurred())
        return -1;
    return ATTACHED(t) ? 0 : closed_error(t);
}

/* The cache's method `name` (its reference code) with up to three arguments (NULL: fewer): 0,
 * or -1 with an error; the result goes to *result when it is not NULL. */
static int
call_cache(CacheCore *self, PyObject *name, PyObject **result, PyObject *a, PyObject *b,
           PyObject *c)
{
    PyObject *args[4] = {(PyObject *)self, a, b, c};
    size_t nargs = 1 + (a != NULL) + (b != NULL) + (c != NULL);
    PyObject *made = PyObject_VectorcallMethod(name, args, nargs, NULL);
    if (made == NULL)
        return -1;
    if (result != NULL)
        *result = made;
    else
        Py_DECREF(made);
    return 0;
}

/* A time as the reference's methods take it: a float, or None without a ttl. */
static PyObject *
time_object(const CacheCore *self, double now)
{
    return self->has_ttl ? PyFloat_FromDouble(now) : Py_NewRef(Py_None);
}

/* The live entry of a looked-up key (>= 0), -1 when absent or expired (then removed and
 * counted), -2 with an error; *word, *slot and *now (with a ttl: the clock, read once, with the
 * lock held) are set. As the reference's _find_live. */
static Py_ssize_t
find_live(CacheCore *self, MapCore *t, PyObject *obj, Key *key, Py_ssize_t *slot, uint64_t *word,
          int *held, double *now)
{
    key_init(key);
    if (self->has_ttl) { /* in the operation's turn: a growth under way detaches the table */
        if (begin_turn(t, held) < 0)
            return -2;
        if (!ATTACHED(t))
            return closed_error(t) - 1;
        if (read_clock(self, t, held, now) < 0)
            return -2;
    }
    Py_ssize_t e = lookup_entry(t, obj, key, slot, word, held);
    if (e < 0 || !self->has_ttl)
        return e;
    char *stamp = column_item(&t->stamps, e);
    if (stamp == NULL)
        return -2;
    if (*now - *(double *)stamp < self->ttl)
        return e;
    if (remove_entry(t, *slot, e, *word) < 0)
        return -2;
    self->expiry_evictions++;
    return -1;
}

/* A lookup as a hit or a miss (reference: _access): 1 with *value the value (counted; LRU: the
 * entry moved to the newest end, CLOCK: marked; with "access", stamped), 0 for a miss (counted),
 * -1 with an error. */
static int
access_entry(CacheCore *self, PyObject *obj, PyObject **value)
{
    MapCore *t = table_of(self);
    if (t == NULL)
        return -1;
    Key key;
    uint64_t word;
    int held = 0, status = -1;
    double now = 0.0;
    Py_ssize_t slot, e;
    for (;;) {
        e = find_live(self, t, obj, &key, &slot, &word, &held, &now);
        /* an LRU hit with no free entry calls the reference's _reinsert: the lock first */
        if (e < 0 || held || self->clock_policy || e == t->used - 1 || can_move(t, e))
            break;
        int waited = hold_lock(t, &held);
        if (waited < 0)
            goto done;
        if (!waited)
            break;
        key_clear(&key); /* other threads ran: look again */
    }
    if (e == -1) {
        self->misses++;
        status = 0;
    }
    if (e < 0)
        goto done;
    self->hits++;
    if (self->clock_policy) {
        char *mark = column_item(&t->marks, e);
        if (mark == NULL)
            goto done;
        *mark = 1;
    }
    else if (e != t->used - 1) { /* LRU: to the newest end, the stamp going along */
        double when = now;
        if (self->has_ttl && !self->by_access) {
            char *stamp = column_item(&t->stamps, e);
            if (stamp == NULL)
                goto done;
            when = *(double *)stamp;
        }
        if (!can_move(t, e)) { /* no free entry: delete and insert again */
            PyObject *stamp = time_object(self, when);
            if (stamp == NULL)
                goto done;
            status = call_cache(self, s_reinsert, value, obj, stamp, NULL) < 0 ? -1 : 1;
            Py_DECREF(stamp);
            goto done;
        }
        if (check_writable(t) < 0 || (self->has_ttl && column_item(&t->stamps, t->used) == NULL))
            goto done;
        if (t->hand >= t->used)
            t->hand = 0;
        e = move_to_end(t, slot, e);
        if (self->has_ttl) {
            *(double *)column_item(&t->stamps, e) = when;
            if (when < self->oldest_stamp)
                self->oldest_stamp = when;
        }
        *value = decode_word(t, word);
        status = *value == NULL ? -1 : 1;
        goto done;
    }
    if (self->by_access) {
        char *stamp = column_item(&t->stamps, e);
        if (stamp == NULL)
            goto done;
        *(double *)stamp = now;
    }
    *value = decode_word(t, word);
    status = *value == NULL ? -1 : 1;
done:
    key_clear(&key);
    end_turn(t, held);
    return status;
}

static PyObject *
CacheCore_subscript(CacheCore *self, PyObject *obj)
{
    PyObject *value = NULL;
    int found = access_entry(self, obj, &value);
    if (found == 0)
        set_key_error(obj);
    return found == 1 ? value : NULL;
}

static PyObject *
CacheCore_get(CacheCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2)
        return PyErr_Format(PyExc_TypeError, "get expected 1 or 2 arguments, got %zd", nargs);
    PyObject *value = NULL;
    int found = access_entry(self, args[0], &value);
    if (found == 0)
        value = Py_NewRef(nargs == 2 ? args[1] : Py_None);
    return found < 0 ? NULL : value;
}

static int
CacheCore_contains(CacheCore *self, PyObject *obj)
{
    MapCore *t = table_of(self);
    if (t == NULL)
        return -1;
    Key key;
    uint64_t word;
    int held = 0;
    double now;
    Py_ssize_t slot, e = find_live(self, t, obj, &key, &slot, &word, &held, &now);
    key_clear(&key);
    end_turn(t, held);
    return e == -2 ? -1 : e >= 0;
}

/* Remove every expired entry if one may have expired (the reference's _expire(now), called,
 * with the lock held, only when its cheap test would not return at once): 0, or -1 with an
 * error. */
static int
expire(CacheCore *self, MapCore *t, double now, int *held)
{
    if (!self->has_ttl || t->n == 0)
        return 0;
    if (self->stamps_ordered) { /* the oldest entry first, as the reference (LRU: no marks) */
        Py_ssize_t e = victim(t);
        char *stamp = e < 0 ? NULL : column_item(&t->stamps, e);
        if (stamp == NULL)
            return -1;
        if (now - *(double *)stamp < self->ttl)
            return 0;
    }
    else if (now - self->oldest_stamp < self->ttl)
        return 0;
    PyObject *when = time_object(self, now);
    int status = when == NULL || hold_lock(t, held) < 0
                 ? -1 : call_cache(self, s_expire, NULL, when, NULL, NULL);
    Py_XDECREF(when);
    return status;
}

/* Hold the lock from here on: 0 (*held set), 1 when other threads ran while it waited (what the
 * operation read of the table is stale: it starts again), -1 with an error. */
static int
hold_from_here(MapCore *t, int *held)
{
    return *held ? 0 : hold_lock(t, held);
}

/* Whether inserting an absent inline `key` (its probe just made) calls no Python code: a free
 * entry, a free index slot in its run, a wide enough value column; evictions only shorten the
 * run. */
static int
insert_needs_nothing(const MapCore *t, const Key *key, int width)
{
    return !key->is_long && width <= t->width && t->n < t->max_n && t->used < t->capacity
           && empty_slot_from(t, insert_slot(t, key)) >= 0;
}

/* c[k] = v as the reference's _store: an absent key with an inline value here, the rest there
 * (after the expiry, which is the same in both), with the lock held. A write that calls no
 * Python code (a short key, an inline value, victims whose key and value are inline, room for
 * the insert) runs under the GIL alone while the lock is free, as a map's put does; once it
 * needs the lock it holds it to its end, and starts again if other threads ran meanwhile. */
static int
store_entry(CacheCore *self, MapCore *t, PyObject *obj, PyObject *value, int *held)
{
    double now = Py_NAN;
    PyObject *when = NULL;
    Key key;
    key_init(&key);
    uint64_t bits;
    int width, status = -1, waited;
    Py_ssize_t slot, e = -1;
    if (self->max_bytes_obj != Py_None) /* the records' bytes are the table's: its code */
        return hold_lock(t, held) < 0 ? -1 : call_cache(self, s_store, NULL, obj, value, Py_None);
    if (begin_turn(t, held) < 0)
        return -1;
    if (!ATTACHED(t))
        return closed_error(t);
    if (self->has_ttl && (read_clock(self, t, held, &now) < 0 || expire(self, t, now, held) < 0))
        return -1;
    /* a refused key or value raises before any change; the admission may run Python code */
    int inline_done = key_for_store(t, obj, &key) < 0 ? -1 : encode_inline(t, value, &bits, &width);
    if (inline_done < 0 || (when = time_object(self, now)) == NULL)
        goto done;
again:
    if (begin_turn(t, held) < 0)
        goto done;
    if (!ATTACHED(t)) {
        closed_error(t);
        goto done;
    }
    if (inline_done && (e = key_find(t, &key, &slot)) == -2)
        goto done;
    if (!inline_done || e >= 0) { /* a value kept in a record, or an overwrite */
        if (hold_from_here(t, held) >= 0)
            status = call_cache(self, s_store, NULL, obj, value, when);
        goto done;
    }
    if (!*held && !insert_needs_nothing(t, &key, width)
        && (waited = hold_from_here(t, held)) != 0) {
        if (waited < 0)
            goto done;
        goto again;
    }
    while (self->max_entries >= 0 && t->n >= self->max_entries) {
        Py_ssize_t v = victim(t);
        if (v < 0)
            goto done;
        uint64_t word = value_at(t, v);
        if (!*held && entry_needs_lock(t, v, word) && (waited = hold_from_here(t, held)) != 0) {
            if (waited < 0)
                goto done;
            goto again;
        }
        Py_ssize_t at = slot_of_entry(t, v);
        if (at < 0 || remove_entry(t, at, v, word) < 0)
            goto done;
        self->size_evictions++;
    }
    if (t->hand >= t->used)
        t->hand = 0;
    if (put_turn(t, &key, bits, width, held) != PUT_STORED) {
        if (PyErr_ExceptionMatches(CapacityError) && hold_from_here(t, held) >= 0) {
            PyErr_Clear(); /* the limit: evict and try again */
            status = call_cache(self, s_insert, NULL, obj, value, when);
        }
        goto done;
    }
    e = t->used - 1;
    if (self->clock_policy) {
        char *mark = column_item(&t->marks, e);
        if (mark == NULL)
            goto done;
        *mark = 0;
    }
    if (self->has_ttl) {
        char *stamp = column_item(&t->stamps, e);
        if (stamp == NULL)
            goto done;
        *(double *)stamp = now;
        if (now < self->oldest_stamp)
            self->oldest_stamp = now;
    }
    status = 0;
done:
    Py_XDECREF(when);
    key_clear(&key);
    return status;
}

static int
CacheCore_ass_subscript(CacheCore *self, PyObject *obj, PyObject *value)
{
    MapCore *t = table_of(self);
    if (t == NULL)
        return -1;
    if (value == NULL)
        return call_cache(self, s_delete, NULL, obj, NULL, NULL);
    int held = 0;
    int status = store_entry(self, t, obj, value, &held);
    end_turn(t, held);
    return status;
}

/* _configure(table, max_entries, max_bytes, ttl, by_access, clock, clock_policy) */
static PyObject *
CacheCore_configure(CacheCore *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"table", "max_entries", "max_bytes", "ttl", "by_access", "clock",
                            "clock_policy", NULL};
    PyObject *table, *max_entries, *max_bytes, *ttl, *clock;
    int by_access, clock_policy;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOpOp:_configure", names, &table,
                                     &max_entries, &max_bytes, &ttl, &by_access, &clock,
                                     &clock_policy))
        return NULL;
    if (!PyObject_TypeCheck(table, MapCoreType))
        return PyErr_Format(PyExc_TypeError, "a Cache's table is a CacheTable, not %.100s",
                            Py_TYPE(table)->tp_name);
    Py_ssize_t bound = -1;
    if (max_entries != Py_None) {
        bound = PyLong_AsSsize_t(max_entries);
        if (bound == -1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError))
                return NULL;
            PyErr_Clear();
            bound = PY_SSIZE_T_MAX;
        }
    }
    double seconds = 0.0;
    if (ttl != Py_None && (seconds = PyFloat_AsDouble(ttl)) == -1.0 && PyErr_Occurred())
        return NULL;
    Py_XSETREF(self->table, (MapCore *)Py_NewRef(table));
    Py_XSETREF(self->clock, Py_NewRef(clock));
    Py_XSETREF(self->max_entries_obj, Py_NewRef(max_entries));
    Py_XSETREF(self->max_bytes_obj, Py_NewRef(max_bytes));
    Py_XSETREF(self->ttl_obj, Py_NewRef(ttl));
    self->max_entries = bound;
    self->ttl = seconds;
    self->has_ttl = ttl != Py_None;
    self->by_access = (char)by_access;
    self->clock_policy = (char)clock_policy;
    self->stamps_ordered = (char)(by_access && !clock_policy);
    self->monotonic = clock == time_monotonic;
    self->hits = self->misses = self->size_evictions = self->expiry_evictions = 0;
    self->oldest_stamp = Py_HUGE_VAL;
    Py_RETURN_NONE;
}

static int
CacheCore_traverse(CacheCore *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->table);
    Py_VISIT(self->clock);
    Py_VISIT(self->max_entries_obj);
    Py_VISIT(self->max_bytes_obj);
    Py_VISIT(self->ttl_obj);
    return 0;
}

static int
CacheCore_clear(CacheCore *self)
{
    Py_CLEAR(self->table);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->max_entries_obj);
    Py_CLEAR(self->max_bytes_obj);
    Py_CLEAR(self->ttl_obj);
    return 0;
}

static void
CacheCore_dealloc(CacheCore *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    CacheCore_clear(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

PyMethodDef CacheCore_methods[] = {
    {"get", (PyCFunction)(void (*)(void))CacheCore_get, METH_FASTCALL,
     "get($self, key, default=None, /)\n--\n\nThe value of key as a hit (LRU: moved to the "
     "newest end; CLOCK: marked), or default as a miss."},
    {"_configure", (PyCFunction)(void (*)(void))CacheCore_configure, METH_VARARGS | METH_KEYWORDS,
     "_configure(table, max_entries, max_bytes, ttl, by_access, clock, clock_policy)\n--\n\n"
     "Take the cache's table and options; the counters start at 0."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef CacheCore_members[] = {
    {"_table", T_OBJECT, offsetof(CacheCore, table), READONLY, "The CacheTable."},
    {"_clock", T_OBJECT, offsetof(CacheCore, clock), READONLY, "The clock, seconds."},
    {"_max_entries", T_OBJECT, offsetof(CacheCore, max_entries_obj), READONLY, "Or None."},
    {"_max_bytes", T_OBJECT, offsetof(CacheCore, max_bytes_obj), READONLY, "Or None."},
    {"_ttl", T_OBJECT, offsetof(CacheCore, ttl_obj), READONLY, "Seconds, or None."},
    {"_by_access", T_BOOL, offsetof(CacheCore, by_access), READONLY, "expire_after access."},
    {"_clock_policy", T_BOOL, offsetof(CacheCore, clock_policy), READONLY, "CLOCK, not LRU."},
    {"_stamps_ordered", T_BOOL, offsetof(CacheCore, stamps_ordered), READONLY,
     "The stamps grow along the entry order (LRU, expire after access)."},
    {"_hits", T_PYSSIZET, offsetof(CacheCore, hits), 0, "Lookups that found a live entry."},
    {"_misses", T_PYSSIZET, offsetof(CacheCore, misses), 0, "Lookups that did not."},
    {"_size_evictions", T_PYSSIZET, offsetof(CacheCore, size_evictions), 0, "By a bound."},
    {"_expiry_evictions", T_PYSSIZET, offsetof(CacheCore, expiry_evictions), 0, "By a ttl."},
    {"_oldest_stamp", T_DOUBLE, offsetof(CacheCore, oldest_stamp), 0,
     "At most the oldest stamp held (inf: none)."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot CacheCore_slots[] = {
    {Py_tp_doc, "A Cache's hit and miss paths (compiled; the reference is "
                "offheap.hashmap.cachecore.ReferenceCacheCore)."},
    {Py_tp_dealloc, CacheCore_dealloc},
    {Py_tp_traverse, CacheCore_traverse},
    {Py_tp_clear, CacheCore_clear},
    {Py_tp_methods, CacheCore_methods},
    {Py_tp_members, CacheCore_members},
    {Py_mp_subscript, CacheCore_subscript},
    {Py_mp_ass_subscript, CacheCore_ass_subscript},
    {Py_sq_contains, CacheCore_contains},
    {0, NULL},
};

PyType_Spec CacheCore_spec = {
    .name = "offheap.hashmap._core.CacheCore",
    .basicsize = sizeof(CacheCore),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = CacheCore_slots,
};
