/* offheap.treemap._pages.TreeSlots: the base type whose slots run a TreeMap's m[k], `k in m`,
 * m.get(k, default), m[k] = v and del m[k] (layer 6), the twin of offheap.treemap.slots.TreeSlots.
 *
 * Why a base type. A Python-level __getitem__ costs a frame, a lock acquire and release
 * through method calls and half a dozen attribute loads: more than the compiled descent itself.
 * Here the mapping and sequence slots run the whole lookup in C: take the map's lock (a MapLock
 * through its C interface, lock_take), run the Descent over the shape the Tree last gave it,
 * release the lock, and hand the value out fresh.
 * A store runs in C on a map with the write cache, no limit budget and no flush timer, for a
 * value stored as it is (a scalar of an object tree, an exact str, bytes or float of a typed
 * one). It begins as Tree.put does, by trimming a node cache over capacity (Tree.trim). When
 * the hint leaf holds the key's range and has room it then does what Tree.put does: overwrite
 * or insert in the leaf's lists, mark the leaf dirty, add one to the entry counts along the
 * hint's path (marking those nodes dirty) and to the tree's n_entries and mods. A full int64
 * hint leaf is evened out with a sibling or split here (the parent too when the node above it
 * has room) as Rebalancer.insert_into_full would change it (insert_into_full_hint: ascending
 * inserts take its append split), and the hint descends to the key's leaf again as Tree.put
 * has it do. Otherwise the walk of around.c finds the key's leaf: around the cache, or a cached
 * leaf made the hint's for the same steps (and delete_in_hint for a delete). The rest goes to
 * the map's _put_item or _delete_item. The Python classes Cursor, Leaf and Inner keep
 * the attributes the store path touches in __slots__ members, which it reads at their offsets
 * (SlotField).
 *
 * Attachment. The map attaches what the slots need (_attach_slots: its lock's acquire and
 * release, the Descent, the NodeCache, the key type, the types handed out as they are, the
 * function that copies the others, and for stores the Tree, its hint and node size) once it is
 * set up, and detaches it (_detach_slots) when it closes. Everything the fast paths cannot
 * answer goes to the map's Python methods, the reference: a detached (closed or half-built) map,
 * a key not exactly of the key type, a lookup while the node cache is over capacity (whose
 * trim the Python path runs). So the answers, and the errors, are the reference's.
 *
 * Thread safety. The lock is held from before the Descent or the store runs until after it
 * returned; taking it may give up the GIL, so the attachment is read again after it (a close in
 * between sends the call to the Python path, which raises ClosedError). References to what the
 * call uses are held for the call, so a detach during it (the same thread, re-entering through
 * the node cache) frees nothing in use.
 */
#include "slots.h"

static PyTypeObject slots_type;

typedef struct {
    PyObject_HEAD
    PyObject *acquire;      /* the lock's bound acquire(), or NULL while detached */
    PyObject *release;      /* its release() */
    PyObject *descent;      /* the Tree's Descent */
    PyObject *cache;        /* the Tree's NodeCache: over_capacity */
    PyObject *key_type;     /* keys of exactly this type take the fast path */
    PyObject *scalar_types; /* a tuple: values of these exact types are handed out as they are */
    PyObject *fresh;        /* fresh(value): any other value, unpickled into a copy */
    PyObject *tree;         /* the Tree, for stores (n_entries, mods); NULL: stores go to _put_item */
    PyObject *hint;         /* its hint Cursor (leaf, lo, hi, path) */
    Py_ssize_t node_size;
    PyObject *stored_types; /* a tuple: values of these exact types are stored as they are (an
                               int only within int64) */
    PyObject *nodes;        /* the Tree's NodeStore, for stores around the cache; else NULL */
    PyObject *store;        /* its RecordStore */
    int key_kind;           /* the page kinds of the tree's keys and values */
    int value_kind;
} TreeSlots;

static void
hold(const TreeSlots *slots, Held *held)
{
    held->tree = Py_NewRef(slots->tree);
    held->cache = Py_NewRef(slots->cache);
    held->hint = Py_NewRef(slots->hint);
    held->descent = Py_NewRef(slots->descent);
    held->nodes = Py_XNewRef(slots->nodes);
    held->store = Py_XNewRef(slots->store);
    held->node_size = slots->node_size;
    held->key_kind = slots->key_kind;
    held->value_kind = slots->value_kind;
    held->keep_present = 0;
}

static void
unhold(Held *held)
{
    Py_DECREF(held->tree);
    Py_DECREF(held->cache);
    Py_DECREF(held->hint);
    Py_DECREF(held->descent);
    Py_XDECREF(held->nodes);
    Py_XDECREF(held->store);
}

static PyObject *str_lookup, *missing, *str_put_item, *str_delete_item,
    *str_trim, *str_nodes,
    *str_reserve, *str_writer, *str_commit, *str_descend, *str_shape, *str_leaf_name;

/* -- slot fields ------------------------------------------------------------------------------ */

/* The attributes the store path reads or writes on every call (fields.c). */
static SlotField hint_leaf = SLOT_FIELD("leaf"), hint_lo = SLOT_FIELD("lo"),
    hint_hi = SLOT_FIELD("hi"), hint_path = SLOT_FIELD("path"), leaf_keys = SLOT_FIELD("keys"),
    leaf_values = SLOT_FIELD("values"), leaf_dirty = SLOT_FIELD("dirty"),
    inner_keys = SLOT_FIELD("keys"), inner_counts = SLOT_FIELD("counts"),
    inner_dirty = SLOT_FIELD("dirty"), cache_over = SLOT_FIELD("over_capacity"),
    cache_over_set = SLOT_FIELD("over_capacity"),
    tree_entries = SLOT_FIELD("n_entries"), tree_mods = SLOT_FIELD("mods"),
    split_keys = SLOT_FIELD("keys"), split_children = SLOT_FIELD("children"),
    split_counts = SLOT_FIELD("counts"), recount_counts = SLOT_FIELD("counts");

/* slots.h */
int
over_capacity(PyObject *cache)
{
    PyObject *over = field_get(&cache_over, cache);
    int status = over == NULL ? -1 : PyObject_IsTrue(over);
    Py_XDECREF(over);
    return status;
}

/* slots.h */
int
mark_over_capacity(PyObject *cache)
{
    return field_set(&cache_over_set, cache, Py_True);
}

/* slots.h */
int
unmark_over_capacity(PyObject *cache)
{
    return field_set(&cache_over_set, cache, Py_False);
}

/* The reference path: self._lookup(key, dflt, stored). */
static PyObject *
slow_lookup(TreeSlots *self, PyObject *key, PyObject *dflt, int stored)
{
    PyObject *args[] = {(PyObject *)self, key, dflt, stored ? Py_True : Py_False};
    return PyObject_VectorcallMethod(str_lookup, args, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

static int
is_scalar(PyObject *types, PyObject *value)
{
    PyObject *type = (PyObject *)Py_TYPE(value);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(types); i++)
        if (PyTuple_GET_ITEM(types, i) == type)
            return 1;
    return 0;
}

static const LockApi *lock_api;  /* offheap.collection._lock's, imported by add_slots_type */

/* The MapLock whose bound method `method` (of definition `definition`, the interface's
 * acquire_method or release_method) is, or NULL for any other callable (an RLock's, on a map
 * whose lock is not compiled): such a lock is taken and given through lock_api, without a
 * Python call. */
static MapLock *
bound_maplock(PyObject *method, const PyMethodDef *definition)
{
    if (!PyCFunction_Check(method) || ((PyCFunctionObject *)method)->m_ml != definition)
        return NULL;
    return (MapLock *)PyCFunction_GET_SELF(method);
}

PyObject *
lock_take(PyObject *acquire, PyObject *release)
{
    MapLock *lock = bound_maplock(acquire, lock_api->acquire_method);
    Py_INCREF(release);  /* held across the wait, in which a close may detach the methods; a
                            bound release() holds its lock */
    if (lock != NULL) {
        int waited, taken = lock_api->acquire(lock, 1, -1.0, &waited);
        if (taken == 1)
            return release;
        if (taken == 0)  /* blocking without a timeout: not expected */
            PyErr_SetString(PyExc_RuntimeError, "a TreeMap's MapLock was not taken");
        Py_DECREF(release);
        return NULL;
    }
    PyObject *taken = PyObject_CallNoArgs(acquire);
    if (taken == NULL) {
        Py_DECREF(release);
        return NULL;
    }
    Py_DECREF(taken);
    return release;
}

int
lock_give(PyObject *release)
{
    MapLock *lock = bound_maplock(release, lock_api->release_method);
    if (lock != NULL && maplock_owned_by_caller(lock)) {
        lock_api->release_held(lock);
        Py_DECREF(release);
        return 0;
    }
    PyObject *type, *error, *traceback;
    PyErr_Fetch(&type, &error, &traceback);
    PyObject *released = PyObject_CallNoArgs(release);
    Py_DECREF(release);
    if (released == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(error);
        Py_XDECREF(traceback);
        return -1;
    }
    Py_DECREF(released);
    PyErr_Restore(type, error, traceback);
    return 0;
}

/* Take the map's lock: a new reference to its release(), held so that a detach meanwhile cannot
 * drop it, or NULL with an exception. */
static PyObject *
take_lock(TreeSlots *self)
{
    return lock_take(self->acquire, self->release);
}

/* The value of `key`, or a new reference to `dflt`: as the leaf holds it with `stored` (a
 * membership test), else fresh. */
static PyObject *
slots_lookup(TreeSlots *self, PyObject *key, PyObject *dflt, int stored)
{
    if (self->acquire == NULL || (PyObject *)Py_TYPE(key) != self->key_type)
        return slow_lookup(self, key, dflt, stored);
    PyObject *release = take_lock(self);
    if (release == NULL)
        return NULL;
    PyObject *value = NULL, *descent = NULL, *fresh = NULL, *scalar_types = NULL;
    int slow = self->acquire == NULL; /* closed while the lock was awaited */
    if (!slow) {
        descent = Py_NewRef(self->descent);
        fresh = Py_NewRef(self->fresh);
        scalar_types = Py_NewRef(self->scalar_types);
        slow = over_capacity(self->cache);
        if (slow == 0)
            value = descent_lookup(descent, key, missing);
    }
    int released = lock_give(release) == 0;
    if (!released)
        Py_CLEAR(value);
    if (released && slow > 0)
        value = slow_lookup(self, key, dflt, stored);
    else if (value == missing) {
        Py_SETREF(value, Py_NewRef(dflt));
    }
    else if (value != NULL && !stored && !is_scalar(scalar_types, value))
        Py_SETREF(value, PyObject_CallOneArg(fresh, value));
    Py_XDECREF(descent);
    Py_XDECREF(fresh);
    Py_XDECREF(scalar_types);
    return value;
}

/* TypeError unless min_args <= nargs <= max_args. */
static int
check_positional(const char *name, Py_ssize_t nargs, Py_ssize_t min_args, Py_ssize_t max_args)
{
    if (nargs >= min_args && nargs <= max_args)
        return 0;
    PyErr_Format(PyExc_TypeError, "%s expected %zd to %zd arguments, got %zd", name, min_args,
                 max_args, nargs);
    return -1;
}

static PyObject *
slots_subscript(TreeSlots *self, PyObject *key)
{
    PyObject *value = slots_lookup(self, key, missing, 0);
    if (value != missing)
        return value;
    Py_DECREF(value);
    PyObject *args = PyTuple_Pack(1, key); /* a tuple key must not become the args */
    if (args != NULL) {
        PyErr_SetObject(PyExc_KeyError, args);
        Py_DECREF(args);
    }
    return NULL;
}

static int
slots_contains(TreeSlots *self, PyObject *key)
{
    PyObject *value = slots_lookup(self, key, missing, 1);
    if (value == NULL)
        return -1;
    Py_DECREF(value);
    return value != missing;
}


/* -- stores ---------------------------------------------------------------------------------- */

/* `key` compared with a bound of the hint (an object of the key type): -1 below, 0 equal, 1
 * above; -2 with an exception. */
static int
compare_keys(PyObject *key, PyObject *other)
{
    if (PyLong_CheckExact(key) && PyLong_CheckExact(other)) {
        int overflow_a, overflow_b;
        long long a = PyLong_AsLongLongAndOverflow(key, &overflow_a);
        long long b = PyLong_AsLongLongAndOverflow(other, &overflow_b);
        if (!overflow_a && !overflow_b)
            return a < b ? -1 : a > b;
        if (PyErr_Occurred())
            return -2;
    }
    int below = PyObject_RichCompareBool(key, other, Py_LT);
    if (below != 0)
        return below < 0 ? -2 : -1;
    int above = PyObject_RichCompareBool(key, other, Py_GT);
    return above < 0 ? -2 : above;
}

/* find_key in an int64 key column: `key` an int in int64's range. */
static int
find_word(PyObject *keys, PyObject *key, Py_ssize_t *at)
{
    int64_t word;
    KeyWords words;
    if (key_word(key, &word) < 0 || key_words_open(keys, &words) < 0)
        return -1;
    Py_ssize_t n = words.count, low = n && word > words.words[n - 1] ? n : 0, high = n;
    while (low < high) {
        Py_ssize_t mid = low + (high - low) / 2;
        if (words.words[mid] < word)
            low = mid + 1;
        else
            high = mid;
    }
    int found = low < n && words.words[low] == word;
    key_words_close(&words);
    *at = low;
    return found;
}

/* The place of `key` in the sorted key column `keys` (bisect_left, in *at): 1 when the key is
 * there, 0 when not, -1 with an exception. A key above the last is found without a bisect
 * (ascending inserts). */
static int
find_key(PyObject *keys, PyObject *key, Py_ssize_t *at)
{
    if (!PyList_CheckExact(keys))
        return find_word(keys, key, at);
    Py_ssize_t n = PyList_GET_SIZE(keys), low = 0, high = n;
    int side;
    if (n) {
        if ((side = compare_keys(key, PyList_GET_ITEM(keys, n - 1))) == -2)
            return -1;
        if (side > 0)
            low = n;
    }
    while (low < high) {
        Py_ssize_t mid = low + (high - low) / 2;
        if ((side = compare_keys(PyList_GET_ITEM(keys, mid), key)) == -2)
            return -1;
        if (side < 0)
            low = mid + 1;
        else
            high = mid;
    }
    *at = low;
    if (low == n)
        return 0;
    side = compare_keys(PyList_GET_ITEM(keys, low), key);
    return side == -2 ? -1 : side == 0;
}

/* `number` + `delta`, a new int; NULL with an exception (TypeError for a non-int: a damaged
 * tree). Counts stay far inside int64. */
static PyObject *
added(PyObject *number, long delta)
{
    if (!PyLong_Check(number)) {
        PyErr_Format(PyExc_TypeError, "a TreeMap count is an int, not %.100s",
                     Py_TYPE(number)->tp_name);
        return NULL;
    }
    long long value = PyLong_AsLongLong(number);
    return value == -1 && PyErr_Occurred() ? NULL : PyLong_FromLongLong(value + delta);
}

/* Add `delta` to the int at `list[at]`. */
static int
add_to_item(PyObject *list, Py_ssize_t at, long delta)
{
    if (!PyList_Check(list) || at < 0 || at >= PyList_GET_SIZE(list)) {
        PyErr_SetString(page_corruption_error, "a TreeMap path names a child its node lacks");
        return -1;
    }
    PyObject *sum = added(PyList_GET_ITEM(list, at), delta);
    return sum == NULL ? -1 : PyList_SetItem(list, at, sum);
}

/* Add `delta` to the int in `field` of `object`. */
static int
add_to_field(SlotField *field, PyObject *object, long delta)
{
    PyObject *value = field_get(field, object);
    PyObject *sum = value == NULL ? NULL : added(value, delta);
    Py_XDECREF(value);
    if (sum == NULL)
        return -1;
    int status = field_set(field, object, sum);
    Py_DECREF(sum);
    return status;
}

/* The (Inner, child index) pair `step` of a path: the node borrowed, the index in *child; NULL with
 * an exception. */
static PyObject *
path_step(PyObject *step, Py_ssize_t *child)
{
    if (!PyTuple_Check(step) || PyTuple_GET_SIZE(step) != 2) {
        PyErr_SetString(PyExc_TypeError, "a TreeMap path holds (node, index) pairs");
        return NULL;
    }
    *child = PyLong_AsSsize_t(PyTuple_GET_ITEM(step, 1));
    return *child == -1 && PyErr_Occurred() ? NULL : PyTuple_GET_ITEM(step, 0);
}

/* slots.h */
/* Add `delta` to the entry count of child `at` of Inner `node`, which becomes dirty. */
static int
add_to_count(PyObject *node, Py_ssize_t at, long delta)
{
    PyObject *counts = field_get(&inner_counts, node);
    int status = counts == NULL ? -1 : add_to_item(counts, at, delta);
    Py_XDECREF(counts);
    return status < 0 || field_set(&inner_dirty, node, Py_True) < 0 ? -1 : 0;
}

/* The tree's n_entries take `delta`, its mods one more. */
static int
count_in_tree(const Held *self, long delta)
{
    return add_to_field(&tree_entries, self->tree, delta) < 0
        || add_to_field(&tree_mods, self->tree, 1) < 0 ? -1 : 0;
}

int
count_change(const Held *self, PyObject *path, long delta)
{
    if (!PyList_CheckExact(path)) {
        PyErr_SetString(PyExc_TypeError, "a TreeMap path is not a list");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(path); i++) {
        Py_ssize_t at;
        PyObject *node = path_step(PyList_GET_ITEM(path, i), &at);
        if (node == NULL || add_to_count(node, at, delta) < 0)
            return -1;
    }
    return count_in_tree(self, delta);
}

int
count_steps(const Held *self, const WalkStep *steps, Py_ssize_t n, long delta)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (add_to_count(steps[i].node, steps[i].child, delta) < 0)
            return -1;
    return count_in_tree(self, delta);
}

/* Whether the child `at` of a node whose entry counts are `counts` exists and has a free slot
 * (Rebalancer._insert_via_sibling's test): 1, 0, -1 with an exception. */
static int
has_room(PyObject *counts, Py_ssize_t at, Py_ssize_t node_size)
{
    if (at < 0 || at >= PyList_GET_SIZE(counts))
        return 0;
    Py_ssize_t count = PyLong_AsSsize_t(PyList_GET_ITEM(counts, at));
    if (count == -1 && PyErr_Occurred())
        return -1;
    return count < node_size;
}

/* `object`.name(*args), nargs at most 4: the result, a new reference, or NULL with an
 * exception. */
static PyObject *
call_method(PyObject *object, PyObject *name, PyObject *const *args, size_t nargs)
{
    PyObject *all[5] = {object};
    if (nargs > 4) {
        PyErr_SetString(PyExc_SystemError, "call_method takes at most 4 arguments");
        return NULL;
    }
    for (size_t i = 0; i < nargs; i++)
        all[i + 1] = args[i];
    return PyObject_VectorcallMethod(name, all, (nargs + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* slots.h */
PyObject *
reserve_records(PyObject *nodes, Py_ssize_t count)
{
    PyObject *number = PyLong_FromSsize_t(count);
    PyObject *reserved = number == NULL ? NULL : call_method(nodes, str_reserve, &number, 1);
    Py_XDECREF(number);
    if (reserved != NULL && (!PyList_CheckExact(reserved) || PyList_GET_SIZE(reserved) != count)) {
        PyErr_Format(PyExc_TypeError, "NodeStore.reserve(%zd) gives a list of %zd record ids",
                     count, count);
        Py_CLEAR(reserved);
    }
    return reserved;
}

/* slots.h */
int
leaf_lists(PyObject *leaf, PyObject **keys, PyObject **values)
{
    *values = NULL;
    if ((*keys = field_get(&leaf_keys, leaf)) != NULL
            && (*values = field_get(&leaf_values, leaf)) != NULL) {
        if ((PyList_CheckExact(*keys) || is_int64_column(*keys)) && PyList_CheckExact(*values)
                && key_column_size(*keys) == PyList_GET_SIZE(*values))
            return 0;
        PyErr_SetString(page_corruption_error, "a TreeMap leaf's keys and values differ");
    }
    Py_CLEAR(*keys);
    Py_CLEAR(*values);
    return -1;
}

/* Insert key -> value at `at` of a leaf's `keys` column and `values` list, both or neither: 0,
 * or -1 with an exception. */
static int
insert_entry(PyObject *keys, PyObject *values, Py_ssize_t at, PyObject *key, PyObject *value)
{
    if (key_column_insert(keys, at, key) < 0)
        return -1;
    if (PyList_Insert(values, at, value) < 0) {
        PySequence_DelItem(keys, at);
        return -1;
    }
    return 0;
}

/* slots.h */
int
set_number(PyObject *list, Py_ssize_t at, Py_ssize_t number)
{
    PyObject *item = PyLong_FromSsize_t(number);
    return item == NULL ? -1 : PyList_SetItem(list, at, item);
}

/* slots.h */
int
key_word(PyObject *item, int64_t *word)
{
    int overflow = 0;
    long long value = PyLong_CheckExact(item) ? PyLong_AsLongLongAndOverflow(item, &overflow) : 0;
    if (!PyLong_CheckExact(item) || overflow) {
        PyErr_SetString(page_corruption_error, "an int64 TreeMap node holds a key outside int64");
        return -1;
    }
    *word = value;
    return value == -1 && PyErr_Occurred() ? -1 : 0;
}

/* The int64 key at `i` of a leaf's key column in *word: 0, or -1 with an exception. */
static int
column_word(PyObject *keys, Py_ssize_t i, int64_t *word)
{
    PyObject *item = key_column_item(keys, i);
    int status = item == NULL ? -1 : key_word(item, word);
    Py_XDECREF(item);
    return status;
}

/* The separator of the int64 keys left[-1] < right[0] (key columns of the two leaves): a new
 * int, or NULL with an exception. */
static PyObject *
separator_of(PyObject *left, PyObject *right)
{
    int64_t left_max, right_min;
    Py_ssize_t left_size = key_column_size(left), right_size = key_column_size(right);
    if (left_size < 0 || right_size < 0)
        return NULL;
    if (left_size == 0 || right_size == 0) {
        PyErr_SetString(page_corruption_error, "a TreeMap split left an empty leaf");
        return NULL;
    }
    if (column_word(left, left_size - 1, &left_max) < 0 || column_word(right, 0, &right_min) < 0)
        return NULL;
    return PyLong_FromLongLong(separator_between(left_max, right_min));
}

/* slots.h */
int
list_take(PyObject *list, PyObject *items, Py_ssize_t start, Py_ssize_t stop)
{
    if (PyList_CheckExact(list) && PyList_CheckExact(items)) {
        PyObject *part = PyList_GetSlice(items, start, stop);
        int status = part == NULL ? -1 : PyList_SetSlice(list, 0, PyList_GET_SIZE(list), part);
        Py_XDECREF(part);
        return status;
    }
    Py_ssize_t size = PySequence_Size(list);
    PyObject *part = size < 0 ? NULL : PySequence_GetSlice(items, start, stop);
    int status = part == NULL ? -1 : PySequence_SetSlice(list, 0, size, part);
    Py_XDECREF(part);
    return status;
}

/* Even out the full hint `leaf` (its `keys` and `values` given, key -> value inserted at `low`)
 * with its sibling `si` under `parent`, which has a free slot, as Rebalancer._insert_via_sibling
 * does: the sibling read through NodeCache.leaf (cached and most recent, as there), the entries
 * of both split in half in place (node.redistribute), the separator between them and both counts
 * in the parent. The nodes edited go into `changed`. 0, or -1 with an exception. */
static int
shift_into_cached(const Held *self, PyObject *leaf, PyObject *keys, PyObject *values,
                  Py_ssize_t low, PyObject *key, PyObject *value, PyObject *parent,
                  const NodeLists *lists, Py_ssize_t ci, Py_ssize_t si, PyObject *changed)
{
    PyObject *sibling = NULL, *sibling_keys = NULL, *sibling_values = NULL, *all_keys = NULL,
        *all_values = NULL, *separator = NULL;
    int result = -1;
    PyObject *id = PyList_GET_ITEM(lists->children, si);
    if ((sibling = PyObject_CallMethodOneArg(self->cache, str_leaf_name, id)) == NULL
            || leaf_lists(sibling, &sibling_keys, &sibling_values) < 0
            || insert_entry(keys, values, low, key, value) < 0)
        goto done;
    int left_is_sibling = si < ci;
    PyObject *left_keys = left_is_sibling ? sibling_keys : keys,
        *right_keys = left_is_sibling ? keys : sibling_keys,
        *left_values = left_is_sibling ? sibling_values : values,
        *right_values = left_is_sibling ? values : sibling_values;
    if ((all_keys = PySequence_Concat(left_keys, right_keys)) == NULL
            || (all_values = PySequence_Concat(left_values, right_values)) == NULL)
        goto done;
    Py_ssize_t total = key_column_size(all_keys), half = total / 2;
    /* the entry is in: what follows only fails on a damaged tree or without memory, as its
     * Python twin would */
    if (list_take(left_keys, all_keys, 0, half) < 0
            || list_take(left_values, all_values, 0, half) < 0
            || list_take(right_keys, all_keys, half, total) < 0
            || list_take(right_values, all_values, half, total) < 0
            || (separator = separator_of(left_keys, right_keys)) == NULL
            || PyList_SetItem(lists->keys, left_is_sibling ? si : ci, Py_NewRef(separator)) < 0
            || set_number(lists->counts, ci, key_column_size(keys)) < 0
            || set_number(lists->counts, si, key_column_size(sibling_keys)) < 0
            || PyList_Append(changed, leaf) < 0 || PyList_Append(changed, sibling) < 0
            || PyList_Append(changed, parent) < 0)
        goto done;
    result = 0;
done:
    Py_XDECREF(sibling);
    Py_XDECREF(sibling_keys);
    Py_XDECREF(sibling_values);
    Py_XDECREF(all_keys);
    Py_XDECREF(all_values);
    Py_XDECREF(separator);
    return result;
}

/* Split the full hint `leaf` (its `keys` and `values` given) with key -> value inserted at
 * `low` under `parent` (`lists`, the leaf its child `ci`) as Rebalancer._split_insert does:
 * the records reserved (what can fail, before anything changes), the cut of split_off (an
 * append keeps node_size entries on the left, an insert at the start one, any other half), the
 * new leaf taking the rest, the parent the separator, the new child and the counts of both;
 * with `grand_node` (the parent full, the node above it, `grand`, with room, the parent its
 * child `grand_child`) the parent then splits too (split_inner). The nodes edited go into
 * `changed`, the new ones into `created`, and the tree's shape counts them. 0, or -1 with an
 * exception. */
static int
split_cached(const Held *self, PyObject *leaf, PyObject *keys, PyObject *values, Py_ssize_t low,
             PyObject *key, PyObject *value, PyObject *parent, const NodeLists *lists,
             Py_ssize_t ci, PyObject *grand_node, const NodeLists *grand, Py_ssize_t grand_child,
             PyObject *changed, PyObject *created)
{
    Py_ssize_t size = self->node_size, splits = grand_node != NULL;
    PyObject *nodes = NULL, *reserved = NULL, *right_keys = NULL, *right_values = NULL,
        *right = NULL, *separator = NULL, *sibling = NULL;
    int result = -1;
    if ((nodes = PyObject_GetAttr(self->tree, str_nodes)) == NULL
            || (reserved = reserve_records(nodes, 1 + splits)) == NULL)
        goto done;
    /* the records are reserved: what follows only fails on a damaged tree or without memory,
     * as its Python twin would; the leaf's new half takes the last, as the reference pops it */
    PyObject *right_id = PyList_GET_ITEM(reserved, splits);
    if (insert_entry(keys, values, low, key, value) < 0)
        goto done;
    Py_ssize_t total = size + 1, cut = low == size ? size : low == 0 ? 1 : (size + 1) / 2;
    if ((right_keys = PySequence_GetSlice(keys, cut, total)) == NULL
            || (right_values = PyList_GetSlice(values, cut, total)) == NULL
            || PySequence_DelSlice(keys, cut, total) < 0
            || PyList_SetSlice(values, cut, total, NULL) < 0)
        goto done;
    PyObject *args[] = {right_id, right_keys, right_values};
    if ((right = PyObject_Vectorcall((PyObject *)Py_TYPE(leaf), args, 3, NULL)) == NULL
            || (separator = separator_of(keys, right_keys)) == NULL
            || PyList_Insert(lists->keys, ci, separator) < 0
            || PyList_Insert(lists->children, ci + 1, right_id) < 0
            || set_number(lists->counts, ci, cut) < 0)
        goto done;
    PyObject *right_count = PyLong_FromSsize_t(total - cut);
    int inserted = right_count == NULL ? -1 : PyList_Insert(lists->counts, ci + 1, right_count);
    Py_XDECREF(right_count);
    if (inserted < 0 || PyList_Append(changed, leaf) < 0 || PyList_Append(changed, parent) < 0
            || PyList_Append(created, right) < 0)
        goto done;
    if (splits) {
        int64_t middle;
        if (split_inner(parent, lists, ci, PyList_GET_ITEM(reserved, 0), grand, grand_child,
                        &sibling, &middle) < 0
                || PyList_Append(changed, grand_node) < 0 || PyList_Append(created, sibling) < 0)
            goto done;
    }
    if (count_new_nodes(self, splits) < 0)
        goto done;
    result = 0;
done:
    Py_XDECREF(nodes);
    Py_XDECREF(reserved);
    Py_XDECREF(right_keys);
    Py_XDECREF(right_values);
    Py_XDECREF(right);
    Py_XDECREF(separator);
    Py_XDECREF(sibling);
    return result;
}

/* slots.h */
int
nodelists_open(PyObject *node, NodeLists *lists)
{
    lists->keys = lists->children = lists->counts = NULL;
    if ((lists->keys = node_list(node, &split_keys)) == NULL
            || (lists->children = node_list(node, &split_children)) == NULL
            || (lists->counts = node_list(node, &split_counts)) == NULL)
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(lists->children);
    if (PyList_GET_SIZE(lists->counts) != n || PyList_GET_SIZE(lists->keys) != n - 1)
        return page_corrupt("a TreeMap inner node's separators, children and counts differ");
    return 0;
}

/* slots.h */
void
nodelists_close(NodeLists *lists)
{
    Py_CLEAR(lists->keys);
    Py_CLEAR(lists->children);
    Py_CLEAR(lists->counts);
}

/* Insert key -> value at `low` of the full int64 hint `leaf` (its `keys` and `values` lists
 * given) when Rebalancer.insert_into_full changes the leaf and its parent, or the parent's own
 * parent too, only: the leaf is not the root, and a sibling has a free slot
 * (shift_into_cached), or else the parent has room or the node above it has (split_cached). As
 * Tree.put then does: the hint forgets its leaf first, NodeWriter.commit marks the nodes dirty
 * (the ancestors above the edit, which take one more entry, among them) and caches the new
 * ones, the tree takes one more entry and mod, and the hint descends to the key's leaf again.
 * 1 done, 0 not this case (nothing changed: the split goes higher, in Python), -1 with an
 * exception. */
static int
insert_into_full_hint(const Held *self, PyObject *leaf, PyObject *keys, PyObject *values,
                      Py_ssize_t low, PyObject *key, PyObject *value)
{
    Py_ssize_t size = self->node_size, ci, gi = 0;
    if (key_column_size(keys) != size || !PyLong_CheckExact(key))
        return 0;
    int result = -1;
    NodeLists lists = {NULL, NULL, NULL}, grand = {NULL, NULL, NULL};
    PyObject *path = NULL, *changed = NULL, *created = NULL, *removed = NULL, *recounted = NULL,
             *writer = NULL, *shape = NULL, *grand_node = NULL;
    if ((path = field_get(&hint_path, self->hint)) == NULL)
        goto done;
    if (!PyList_CheckExact(path) || PyList_GET_SIZE(path) == 0) {  /* the root: a new root */
        result = PyList_CheckExact(path) ? 0 : -1;
        if (result < 0)
            PyErr_SetString(PyExc_TypeError, "a TreeMap path is not a list");
        goto done;
    }
    Py_ssize_t depth = PyList_GET_SIZE(path), edited = 1;  /* path levels edited */
    PyObject *parent = path_step(PyList_GET_ITEM(path, depth - 1), &ci);
    if (parent == NULL || nodelists_open(parent, &lists) < 0)
        goto done;
    Py_ssize_t n_children = PyList_GET_SIZE(lists.children);
    if (ci < 0 || ci >= n_children) {
        page_corrupt("a TreeMap path names a child its node lacks");
        goto done;
    }
    int left_room = has_room(lists.counts, ci - 1, size), right_room = 0;
    if (left_room == 0)
        right_room = has_room(lists.counts, ci + 1, size);
    if (left_room < 0 || right_room < 0)
        goto done;
    if (!left_room && !right_room && n_children >= size) {  /* the parent splits too */
        if (depth < 2) {  /* a new root: the reference's */
            result = 0;
            goto done;
        }
        grand_node = path_step(PyList_GET_ITEM(path, depth - 2), &gi);
        if (grand_node == NULL || nodelists_open(grand_node, &grand) < 0)
            goto done;
        if (PyList_GET_SIZE(grand.children) >= size) {  /* and the node above it: Python's */
            result = 0;
            goto done;
        }
        edited = 2;
    }
    if ((changed = PyList_New(0)) == NULL || (created = PyList_New(0)) == NULL
            || (removed = PyList_New(0)) == NULL
            || field_set(&hint_leaf, self->hint, Py_None) < 0)
        goto done;
    if (left_room || right_room ? shift_into_cached(self, leaf, keys, values, low, key, value,
                                                    parent, &lists, ci,
                                                    left_room ? ci - 1 : ci + 1, changed)
                                : split_cached(self, leaf, keys, values, low, key, value,
                                               parent, &lists, ci, grand_node, &grand, gi,
                                               changed, created))
        goto done;
    if ((recounted = PyList_New(depth - edited)) == NULL)
        goto done;
    for (Py_ssize_t level = 0; level < depth - edited; level++) {  /* one more entry above */
        Py_ssize_t at;
        PyObject *node = path_step(PyList_GET_ITEM(path, level), &at);
        PyObject *above = node == NULL ? NULL : node_list(node, &recount_counts);
        int status = above == NULL ? -1 : add_to_item(above, at, 1);
        Py_XDECREF(above);
        if (status < 0)
            goto done;
        PyList_SET_ITEM(recounted, level, Py_NewRef(node));
    }
    if ((writer = PyObject_GetAttr(self->tree, str_writer)) == NULL)
        goto done;
    PyObject *commit_args[] = {changed, created, removed, recounted};
    PyObject *committed = call_method(writer, str_commit, commit_args, 4);
    Py_XDECREF(committed);
    if (committed == NULL || count_in_tree(self, 1) < 0
            || (shape = PyObject_GetAttr(self->tree, str_shape)) == NULL)
        goto done;
    PyObject *descend_args[] = {shape, key};
    PyObject *descended = call_method(self->hint, str_descend, descend_args, 2);
    Py_XDECREF(descended);
    result = descended == NULL ? -1 : 1;
done:
    Py_XDECREF(path);
    nodelists_close(&lists);
    nodelists_close(&grand);
    Py_XDECREF(changed);
    Py_XDECREF(created);
    Py_XDECREF(removed);
    Py_XDECREF(recounted);
    Py_XDECREF(writer);
    Py_XDECREF(shape);
    return result;
}

/* The hint's leaf and its keys and values lists (new references, checked to agree): 1, 0 when
 * the hint names no leaf (nothing set), -1 with an exception (nothing set). */
static int
hint_leaf_lists(const Held *self, PyObject **leaf, PyObject **keys, PyObject **values)
{
    *keys = *values = NULL;
    if ((*leaf = field_get(&hint_leaf, self->hint)) == NULL)
        return -1;
    if (*leaf == Py_None) {
        Py_CLEAR(*leaf);
        return 0;
    }
    if (leaf_lists(*leaf, keys, values) == 0)
        return 1;
    Py_CLEAR(*leaf);
    return -1;
}

/* slots.h */
int
store_in_hint(const Held *self, PyObject *key, PyObject *value)
{
    PyObject *leaf, *lo = NULL, *hi = NULL, *keys, *values, *path = NULL;
    int result = hint_leaf_lists(self, &leaf, &keys, &values);
    if (result != 1)
        return result;
    result = -1;
    if ((lo = field_get(&hint_lo, self->hint)) == NULL
            || (hi = field_get(&hint_hi, self->hint)) == NULL)
        goto done;
    int side;
    if (lo != Py_None && (side = compare_keys(key, lo)) < 0) {  /* below the leaf's range */
        result = side == -2 ? -1 : 0;
        goto done;
    }
    if (hi != Py_None && (side = compare_keys(key, hi)) != -1) {  /* at or above its end */
        result = side == -2 ? -1 : 0;
        goto done;
    }
    Py_ssize_t n = key_column_size(keys), low;
    int found = find_key(keys, key, &low);
    if (found < 0)
        goto done;
    if (found && self->keep_present) {  /* kept as it is */
        result = 1;
        goto done;
    }
    if (found) {  /* an overwrite */
        if (PyList_SetItem(values, low, Py_NewRef(value)) < 0
                || field_set(&leaf_dirty, leaf, Py_True) < 0)
            goto done;
        result = 1;
        goto done;
    }
    if (n >= self->node_size) {  /* a sibling takes some, or a split */
        result = insert_into_full_hint(self, leaf, keys, values, low, key, value);
        goto done;
    }
    if ((path = field_get(&hint_path, self->hint)) == NULL
            || insert_entry(keys, values, low, key, value) < 0)
        goto done;
    /* the entry is in: what follows is bookkeeping that only fails on a damaged tree or
     * without memory, as its Python twin would */
    if (field_set(&leaf_dirty, leaf, Py_True) < 0)
        goto done;
    if (count_change(self, path, 1) < 0)
        goto done;
    result = 1;
done:
    Py_XDECREF(leaf);
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(path);
    return result;
}

/* slots.h */
int
hint_at_leaf(const Held *self, const WalkStep *steps, Py_ssize_t n, PyObject *leaf)
{
    int result = -1;
    PyObject *path = PyList_New(n), *lo = NULL, *hi = NULL, *keys = NULL;
    if (path == NULL || field_set(&hint_leaf, self->hint, Py_None) < 0)  /* set last */
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *step = Py_BuildValue("(On)", steps[i].node, steps[i].child);
        if (step == NULL)
            goto done;
        PyList_SET_ITEM(path, i, step);
    }
    /* the range the separators on the path give the leaf: the nearest one on each side, the
     * deepest first (as cursor._bounds finds it) */
    for (Py_ssize_t i = n - 1; i >= 0 && (lo == NULL || hi == NULL); i--) {
        Py_CLEAR(keys);
        if ((keys = field_get(&inner_keys, steps[i].node)) == NULL)
            goto done;
        Py_ssize_t at = steps[i].child;
        if (!PyList_CheckExact(keys) || at < 0 || at > PyList_GET_SIZE(keys)) {
            page_corrupt("a TreeMap path names a child its node lacks");
            goto done;
        }
        if (lo == NULL && at > 0)
            lo = Py_NewRef(PyList_GET_ITEM(keys, at - 1));
        if (hi == NULL && at < PyList_GET_SIZE(keys))
            hi = Py_NewRef(PyList_GET_ITEM(keys, at));
    }
    if (field_set(&hint_path, self->hint, path) < 0
            || field_set(&hint_lo, self->hint, lo == NULL ? Py_None : lo) < 0
            || field_set(&hint_hi, self->hint, hi == NULL ? Py_None : hi) < 0
            || field_set(&hint_leaf, self->hint, leaf) < 0)
        goto done;
    result = 0;
done:
    Py_XDECREF(path);
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    Py_XDECREF(keys);
    return result;
}

/* slots.h */
int
delete_in_hint(const Held *self, PyObject *key)
{
    PyObject *leaf, *keys, *values, *path = NULL;
    int result = hint_leaf_lists(self, &leaf, &keys, &values);
    if (result != 1)
        return result;
    result = -1;
    Py_ssize_t at, min_entries = self->node_size / 4 > 1 ? self->node_size / 4 : 1;
    int found = find_key(keys, key, &at);
    if (found <= 0 || key_column_size(keys) - 1 < min_entries) {  /* absent, or an underflow */
        result = found < 0 ? -1 : 0;
        goto done;
    }
    if ((path = field_get(&hint_path, self->hint)) == NULL
            || PySequence_DelItem(keys, at) < 0)
        goto done;
    /* the entry is out: what follows is bookkeeping that only fails on a damaged tree or
     * without memory, as its Python twin would */
    if (PySequence_DelItem(values, at) < 0 || field_set(&leaf_dirty, leaf, Py_True) < 0
            || count_change(self, path, -1) < 0)
        goto done;
    result = 1;
done:
    Py_XDECREF(leaf);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(path);
    return result;
}

/* Whether a key of the key type, or a value of a stored type, is one the fast paths take: an int
 * in int64's range, or any object of another type; -1 with an exception. (An int value beyond
 * int64 is an int64 tree's OverflowError, or an "object" tree's big int: its Python method's.) */
static int
in_int64_range(PyObject *object)
{
    if (!PyLong_CheckExact(object))
        return 1;
    int overflow;
    long long word = PyLong_AsLongLongAndOverflow(object, &overflow);
    if (word == -1 && PyErr_Occurred())
        return -1;
    return !overflow;
}

static SlotField trim_budget = SLOT_FIELD("budget_bytes"), trim_dirty = SLOT_FIELD("dirty"),
    trim_hint_leaf = SLOT_FIELD("leaf");

/* slots.h */
PyObject *
oldest_leaf(PyObject *leaves, PyObject **recid)
{
    PyObject *order = PyObject_GetIter(leaves);  /* least recently used first */
    *recid = order == NULL ? NULL : PyIter_Next(order);
    Py_XDECREF(order);
    return *recid == NULL ? NULL : PyDict_GetItemWithError(leaves, *recid);
}

/* Evict the least recently used leaf as NodeCache._evict does (written first if dirty), unless it
 * is `hint_leaf`, or dirty without `writes`: 1 done, 0 not this case (nothing changed), -1 with
 * an exception. */
static int
evict_oldest_leaf(const Held *self, PyObject *leaves, PyObject *hint_leaf, int writes)
{
    PyObject *recid;
    PyObject *node = oldest_leaf(leaves, &recid);
    if (recid == NULL)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *dirty = node == NULL || node == hint_leaf ? NULL : field_get(&trim_dirty, node);
    int result = dirty == NULL ? (PyErr_Occurred() ? -1 : 0)
                 : dirty == Py_False ? 1 : writes ? write_cached_leaf(self, recid, node) : 0;
    if (result == 1 && PyObject_DelItem(leaves, recid) < 0)  /* the OrderedDict's own */
        result = -1;
    Py_XDECREF(dirty);
    Py_DECREF(recid);
    return result;
}

/* Tree.trim when all it has to do is evict leaves: no write budget, the inner nodes within their
 * capacity, and none of the leaves to evict the hint's or one the compiled write declines (what
 * the cache holds after a change took it one leaf past capacity: around.c, cache_walked_leaf;
 * or a split cached a new leaf). It evicts them as NodeCache.trim does, least recently used
 * first, each dirty one written first (without `writes`, a dirty one is Tree.trim's), then
 * clears over_capacity, as its last step does. 1 done, 0 the rest is Tree.trim's (the leaves
 * evicted so far are those it would have evicted first), -1 with an exception (CapacityError
 * from a write: the leaf stays cached and dirty, as the reference leaves it). */
static int
trim_leaves(const Held *self, int writes)
{
    if (descent_inner_over_capacity(self->descent))
        return 0;
    PyObject *budget = field_get(&trim_budget, self->cache);
    PyObject *hint_leaf = budget == NULL ? NULL : field_get(&trim_hint_leaf, self->hint);
    int result = hint_leaf == NULL ? -1 : budget == Py_None;
    PyObject *leaves = descent_leaves(self->descent);
    while (result == 1 && PyDict_GET_SIZE(leaves) > descent_leaf_capacity(self->descent))
        result = evict_oldest_leaf(self, leaves, hint_leaf, writes);
    Py_XDECREF(hint_leaf);
    Py_XDECREF(budget);
    if (result == 1 && field_set(&cache_over_set, self->cache, Py_False) < 0)
        result = -1;
    return result;
}

/* Tree.put's first step: trim the node cache when it is over capacity (Tree.trim: here when it
 * only evicts leaves); 0, or -1 with an exception (CapacityError from a write, as the
 * reference raises it). */
static int
trim_first(const Held *self)
{
    int trim = over_capacity(self->cache);
    if (trim <= 0)
        return trim;
    if ((trim = trim_leaves(self, 1)) != 0)
        return trim < 0 ? -1 : 0;
    PyObject *done = call_method(self->tree, str_trim, NULL, 0);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

/* m[key] = value in C: the cache trimmed first, as Tree.put does, then in the hint's leaf, else
 * around the cache (around.c). */
static int
store_in_c(const Held *held, PyObject *key, PyObject *value)
{
    if (trim_first(held) < 0)
        return -1;
    int stored = store_in_hint(held, key, value);
    return stored == 0 && held->nodes != NULL ? store_around(held, key, value) : stored;
}

/* del m[key] in C: the cache trimmed first as Tree.pop trims it when that only drops clean
 * leaves (its trim is strict=False: a write that fails stops it quietly, which the reference
 * does), then around the cache (around.c); `value` is NULL. */
static int
delete_in_c(const Held *held, PyObject *key, PyObject *Py_UNUSED(value))
{
    int trim = over_capacity(held->cache);
    if (trim > 0)
        trim = trim_leaves(held, 0);
    return trim < 0 ? -1 : delete_around(held, key);
}

/* Run `change` (store_in_c or delete_in_c) under the map's lock with what it uses held (and
 * `keep_present`, Held's), when the slots are attached for it (`needed`: the Tree, or the
 * NodeStore, is there once the lock is taken) and the key is of the key type and in range: 1
 * done, 0 the Python method follows, -1 with an exception. */
static int
change_in_c(TreeSlots *self, PyObject **needed, PyObject *key, PyObject *value,
            int (*change)(const Held *, PyObject *, PyObject *), int keep_present)
{
    int in_range = *needed != NULL && (PyObject *)Py_TYPE(key) == self->key_type
        ? in_int64_range(key) : 0;
    if (in_range <= 0)
        return in_range;
    PyObject *release = take_lock(self);
    if (release == NULL)
        return -1;
    int done = 0;
    if (*needed != NULL) {  /* still attached once the lock was taken */
        Held held;
        hold(self, &held);
        held.keep_present = keep_present;
        done = change(&held, key, value);
        unhold(&held);
    }
    return lock_give(release) < 0 ? -1 : done;
}

/* map._put_item(key, value) (map._put_item(key, value, True) with `keep_present`), or
 * map._delete_item(key) for value NULL: 0, or -1 with an exception. */
static int
call_change_method(PyObject *map, PyObject *key, PyObject *value, int keep_present)
{
    PyObject *args[] = {map, key, value, Py_True};
    size_t nargs = value == NULL ? 2 : keep_present ? 4 : 3;
    PyObject *done = PyObject_VectorcallMethod(value == NULL ? str_delete_item : str_put_item, args,
                                               nargs | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

/* The map's Python method of the change (call_change_method); with `then_mark`
 * (CHANGE_IN_PYTHON_THEN_MARK) the cache is marked over capacity again afterwards, whatever the
 * method's outcome, under the map's lock when the slots are still attached. 0, or -1 with an
 * exception (the method's first). */
static int
python_change(TreeSlots *self, PyObject *key, PyObject *value, int then_mark, int keep_present)
{
    int result = call_change_method((PyObject *)self, key, value, keep_present);
    if (!then_mark)
        return result;
    PyObject *type, *error, *trace;
    PyErr_Fetch(&type, &error, &trace);
    int marked = 0;
    if (self->acquire != NULL) {  /* else detached meanwhile: the map is closed */
        PyObject *release = take_lock(self);
        marked = release == NULL ? -1 : self->cache == NULL ? 0 : mark_over_capacity(self->cache);
        if (release != NULL && lock_give(release) < 0)
            marked = -1;
    }
    if (type != NULL) {  /* the method's exception first */
        if (marked < 0)
            PyErr_Clear();
        PyErr_Restore(type, error, trace);
        return -1;
    }
    return marked < 0 ? -1 : result;
}

/* m[key] = value (with `keep_present`, unless key is present), and del m[key] (value NULL): in
 * C when that is all it takes, else through the map's _put_item / _delete_item. */
static int
change_item(TreeSlots *self, PyObject *key, PyObject *value, int keep_present)
{
    int changed = 0;
    if (value == NULL)
        changed = change_in_c(self, &self->nodes, key, NULL, delete_in_c, 0);
    else if (self->tree != NULL && is_scalar(self->stored_types, value)) {
        changed = in_int64_range(value);
        if (changed > 0)
            changed = change_in_c(self, &self->tree, key, value, store_in_c, keep_present);
    }
    if (changed < 0)
        return -1;
    if (changed != 0 && changed != CHANGE_IN_PYTHON_THEN_MARK)
        return 0;
    return python_change(self, key, value, changed == CHANGE_IN_PYTHON_THEN_MARK, keep_present);
}

static int
slots_ass_subscript(TreeSlots *self, PyObject *key, PyObject *value)
{
    return change_item(self, key, value, 0);
}

/* slots.h */
int
slots_put_absent(PyObject *map, PyObject *key, PyObject *value)
{
    return PyObject_TypeCheck(map, &slots_type) ? change_item((TreeSlots *)map, key, value, 1)
                                                : call_change_method(map, key, value, 1);
}

PyDoc_STRVAR(get_doc,
"get(key, default=None, /)\n--\n\n"
"The value of key if the map holds it, else default.");

static PyObject *
slots_get(TreeSlots *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_positional("get", nargs, 1, 2) < 0)
        return NULL;
    return slots_lookup(self, args[0], nargs > 1 ? args[1] : Py_None, 0);
}

static void
slots_detach(TreeSlots *self)
{
    Py_CLEAR(self->tree);
    Py_CLEAR(self->hint);
    Py_CLEAR(self->nodes);
    Py_CLEAR(self->store);
    Py_CLEAR(self->stored_types);
    Py_CLEAR(self->acquire);
    Py_CLEAR(self->release);
    Py_CLEAR(self->descent);
    Py_CLEAR(self->cache);
    Py_CLEAR(self->key_type);
    Py_CLEAR(self->scalar_types);
    Py_CLEAR(self->fresh);
}

PyDoc_STRVAR(attach_doc,
"_attach_slots(lock, descent, cache, key_type, scalar_types, fresh, tree, hint, node_size,\n"
"              stored_types, around)\n--\n\n"
"Answer lookups of keys of exactly key_type in C, under lock, through the Descent (whose shape\n"
"the Tree keeps current) unless the NodeCache is over capacity; values of the scalar_types\n"
"tuple as they are, others through fresh(value). With a Tree (not None), store values of the\n"
"stored_types tuple (an int only within int64) in the leaf of its hint Cursor when that leaf\n"
"holds the key's range and has room (fewer than node_size entries), or split it when full for a\n"
"key above its last, as Tree.put does with the write cache, after trimming the cache as it does.\n"
"With around a tuple (nodes, key_kind, value_kind): the Tree's NodeStore, whose pages are raw,\n"
"and the page kinds of its keys and values, also store in a leaf the cache does not hold when\n"
"WriteAround.put would change only that leaf, as it does.");

static PyObject *
slots_attach(TreeSlots *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_positional("_attach_slots", nargs, 11, 11) < 0)
        return NULL;
    PyObject *around = args[10], *store = NULL;
    int key_kind = 0, value_kind = 0;
    if (around != Py_None) {
        if (!PyTuple_Check(around) || PyTuple_GET_SIZE(around) != 3 || args[6] == Py_None) {
            PyErr_SetString(PyExc_TypeError, "_attach_slots: around is (nodes, key_kind, "
                            "value_kind) with a Tree, or None");
            return NULL;
        }
        key_kind = (int)PyLong_AsLong(PyTuple_GET_ITEM(around, 1));
        value_kind = (int)PyLong_AsLong(PyTuple_GET_ITEM(around, 2));
        if (PyErr_Occurred())
            return NULL;
        if ((store = PyObject_GetAttrString(PyTuple_GET_ITEM(around, 0), "store")) == NULL)
            return NULL;
    }
    Py_ssize_t node_size = PyLong_AsSsize_t(args[8]);
    if (node_size == -1 && PyErr_Occurred())
        return NULL;
    if (!is_descent(args[1]) || !PyType_Check(args[3]) || !PyTuple_Check(args[4])
            || !PyTuple_Check(args[9])) {
        PyErr_SetString(PyExc_TypeError,
                        "_attach_slots takes a lock, a Descent, a NodeCache, a type, a tuple of "
                        "types, a function, a Tree or None, a Cursor, a size and a tuple of types");
        return NULL;
    }
    PyObject *acquire = PyObject_GetAttrString(args[0], "acquire");
    PyObject *release = acquire == NULL ? NULL : PyObject_GetAttrString(args[0], "release");
    if (release == NULL) {
        Py_XDECREF(acquire);
        Py_XDECREF(store);
        return NULL;
    }
    slots_detach(self);
    self->acquire = acquire;
    self->release = release;
    self->descent = Py_NewRef(args[1]);
    self->cache = Py_NewRef(args[2]);
    self->key_type = Py_NewRef(args[3]);
    self->scalar_types = Py_NewRef(args[4]);
    self->fresh = Py_NewRef(args[5]);
    if (args[6] != Py_None) {
        self->tree = Py_NewRef(args[6]);
        self->hint = Py_NewRef(args[7]);
        self->node_size = node_size;
        self->stored_types = Py_NewRef(args[9]);
        if (store != NULL) {
            self->nodes = Py_NewRef(PyTuple_GET_ITEM(around, 0));
            self->store = store;
            self->key_kind = key_kind;
            self->value_kind = value_kind;
        }
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(detach_doc,
"_detach_slots()\n--\n\n"
"Send every lookup to _lookup again (the map is closing).");

static PyObject *
slots_detach_method(TreeSlots *self, PyObject *Py_UNUSED(ignored))
{
    slots_detach(self);
    Py_RETURN_NONE;
}

static int
slots_traverse(TreeSlots *self, visitproc visit, void *arg)
{
    Py_VISIT(self->acquire);
    Py_VISIT(self->release);
    Py_VISIT(self->descent);
    Py_VISIT(self->cache);
    Py_VISIT(self->key_type);
    Py_VISIT(self->scalar_types);
    Py_VISIT(self->fresh);
    Py_VISIT(self->tree);
    Py_VISIT(self->hint);
    Py_VISIT(self->stored_types);
    Py_VISIT(self->nodes);
    Py_VISIT(self->store);
    return 0;
}

static int
slots_clear(TreeSlots *self)
{
    slots_detach(self);
    return 0;
}

static void
slots_dealloc(TreeSlots *self)
{
    PyObject_GC_UnTrack(self);
    slots_detach(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef slots_methods[] = {
    {"get", (PyCFunction)(void (*)(void))slots_get, METH_FASTCALL, get_doc},
    {"_attach_slots", (PyCFunction)(void (*)(void))slots_attach, METH_FASTCALL, attach_doc},
    {"_detach_slots", (PyCFunction)slots_detach_method, METH_NOARGS, detach_doc},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods slots_mapping = {
    .mp_subscript = (binaryfunc)slots_subscript,
    .mp_ass_subscript = (objobjargproc)slots_ass_subscript,
};

static PySequenceMethods slots_sequence = {
    .sq_contains = (objobjproc)slots_contains,
};

PyDoc_STRVAR(slots_doc,
"The item slots of a TreeMap: m[k], k in m, m.get(k, default), m[k] = v and del m[k]\n"
"(see offheap/treemap/csrc/slots.c).");

static PyTypeObject slots_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "offheap.treemap._pages.TreeSlots",
    .tp_basicsize = sizeof(TreeSlots),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = slots_doc,
    .tp_new = PyType_GenericNew,
    .tp_traverse = (traverseproc)slots_traverse,
    .tp_clear = (inquiry)slots_clear,
    .tp_dealloc = (destructor)slots_dealloc,
    .tp_methods = slots_methods,
    .tp_as_mapping = &slots_mapping,
    .tp_as_sequence = &slots_sequence,
};

int
add_slots_type(PyObject *module)
{
    if ((lock_api = lock_api_import()) == NULL)
        return -1;
    static const char *names[] = {"_lookup", "_put_item", "_delete_item",
                                  "trim", "nodes", "reserve",
                                  "writer", "commit", "descend", "shape", "leaf"};
    PyObject **slots[] = {&str_lookup, &str_put_item, &str_delete_item,
                          &str_trim, &str_nodes,
                          &str_reserve, &str_writer, &str_commit, &str_descend, &str_shape,
                          &str_leaf_name};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (*slots[i] == NULL && (*slots[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return -1;
    if (init_around() < 0)
        return -1;
    if (missing == NULL && (missing = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type)) == NULL)
        return -1;
    if (PyType_Ready(&slots_type) < 0)
        return -1;
    Py_INCREF(&slots_type);
    if (PyModule_AddObject(module, "TreeSlots", (PyObject *)&slots_type) < 0) {
        Py_DECREF(&slots_type);
        return -1;
    }
    return 0;
}
