/* offheap.treemap._pages.TreeSlots: the base type whose slots run a TreeMap's m[k], `k in m`,
 * m.get(k, default), m[k] = v and del m[k] (layer 6), the twin of offheap.treemap.slots.TreeSlots.
 *
 * Why a base type. A Python-level __getitem__ costs a frame, an RLock acquire and release
 * through method calls and half a dozen attribute loads: more than the compiled descent itself.
 * Here the mapping and sequence slots run the whole lookup in C: take the map's lock, run the
 * Descent over the shape the Tree last gave it, release the lock, and hand the value out fresh.
 * A store runs in C when Tree.put would only edit the leaf of the tree's hint: a map with the
 * write cache, no limit budget and no flush timer, a value stored as it is (a scalar of an
 * object tree, an exact str, bytes or float of a typed one), and a hint leaf that holds the key's range and has room. It then does what
 * Tree.put does: overwrite or insert in the leaf's lists, mark the leaf dirty, add one to the
 * entry counts along the hint's path (marking those nodes dirty) and to the tree's n_entries
 * and mods. Deletes, and every other store, go to the map's _delete_item / _put_item.
 *
 * Attachment. The map attaches what the slots need (_attach_slots: its lock's acquire and
 * release, the Descent, the NodeCache, the key type, the types handed out as they are, the
 * function that copies the others, and for stores the Tree, its hint and node size) once it is
 * set up, and detaches it (_detach_slots) when it closes. Everything the fast paths cannot
 * answer goes to the map's Python methods, the reference: a detached (closed or half-built) map,
 * a key not exactly of the key type, a node cache over capacity (whose trim the Python path
 * runs). So the answers, and the errors, are the reference's.
 *
 * Thread safety. The lock is held from before the Descent or the store runs until after it
 * returned; taking it may give up the GIL, so the attachment is read again after it (a close in
 * between sends the call to the Python path, which raises ClosedError). References to what the
 * call uses are held for the call, so a detach during it (the same thread, re-entering through
 * the node cache) frees nothing in use.
 */
#include "pages.h"

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
    PyObject *stored_types; /* a tuple: values of these exact types are stored as they are */
    PyObject *nodes;        /* the Tree's NodeStore, for stores around the cache; else NULL */
    PyObject *store;        /* its RecordStore */
    int key_kind;           /* the page kinds of the tree's keys and values */
    int value_kind;
} TreeSlots;

/* What a store uses, held (strong references) for the call once the lock is taken: a close
 * that detaches the slots meanwhile (re-entering through Python code the store calls) frees
 * nothing in use and leaves no field NULL under it. nodes and store are NULL when no store runs
 * around the cache. */
typedef struct {
    PyObject *tree, *cache, *hint, *descent, *nodes, *store;
    Py_ssize_t node_size;
    int key_kind, value_kind;
} Held;

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

static PyObject *str_lookup, *str_over_capacity, *missing, *str_put_item, *str_delete_item, *str_leaf,
    *str_lo, *str_hi, *str_path, *str_keys, *str_values, *str_counts, *str_dirty, *str_n_entries,
    *str_mods, *str_capacity, *str_shape, *str_root, *str_height, *str_leaves, *str_inner_nodes,
    *str_inner, *str_rewrite, *str_children, *str_recid, *str_forget, *str_reserve, *str_release,
    *str_with_nodes, *str_leaves_name, *str_public_shape;

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

/* Take the map's lock (its acquire() may give up the GIL while it waits): a new reference to its
 * release(), held so that a detach meanwhile cannot drop it, or NULL with an exception. */
static PyObject *
take_lock(TreeSlots *self)
{
    PyObject *release = Py_NewRef(self->release);
    PyObject *taken = PyObject_CallNoArgs(self->acquire);
    if (taken == NULL) {
        Py_DECREF(release);
        return NULL;
    }
    Py_DECREF(taken);
    return release;
}

/* Release the lock (`release` consumed), keeping the exception set before, if any: 0, or -1 with
 * release()'s own exception instead. */
static int
give_lock(PyObject *release)
{
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
        PyObject *over = PyObject_GetAttr(self->cache, str_over_capacity);
        slow = over == NULL ? -1 : PyObject_IsTrue(over);
        Py_XDECREF(over);
        if (slow == 0)
            value = descent_lookup(descent, key, missing);
    }
    int released = give_lock(release) == 0;
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

/* The place of `key` in the sorted list `keys` (bisect_left, in *at): 1 when the key is there,
 * 0 when not, -1 with an exception. A key above the last is found without a bisect (ascending
 * inserts). */
static int
find_key(PyObject *keys, PyObject *key, Py_ssize_t *at)
{
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

/* Add `delta` to the int at `list[at]`. */
static int
add_to_item(PyObject *list, Py_ssize_t at, long delta)
{
    if (!PyList_Check(list) || at < 0 || at >= PyList_GET_SIZE(list)) {
        PyErr_SetString(page_corruption_error, "a TreeMap path names a child its node lacks");
        return -1;
    }
    PyObject *one = PyLong_FromLong(delta);
    PyObject *sum = one == NULL ? NULL : PyNumber_Add(PyList_GET_ITEM(list, at), one);
    Py_XDECREF(one);
    if (sum == NULL)
        return -1;
    return PyList_SetItem(list, at, sum);
}

/* Add `delta` to an int attribute. */
static int
add_to_attribute(PyObject *object, PyObject *name, long delta)
{
    PyObject *value = PyObject_GetAttr(object, name);
    if (value == NULL)
        return -1;
    PyObject *step = PyLong_FromLong(delta);
    PyObject *sum = step == NULL ? NULL : PyNumber_Add(value, step);
    Py_DECREF(value);
    Py_XDECREF(step);
    if (sum == NULL)
        return -1;
    int status = PyObject_SetAttr(object, name, sum);
    Py_DECREF(sum);
    return status;
}

/* The bookkeeping of an insert (`delta` 1) or a delete (-1) in the leaf at the end of `path` (a
 * list of (Inner, child index) pairs): the counts along the path, whose nodes become dirty, and
 * the tree's n_entries take the change, and its mods one more. Fails only on a damaged tree or
 * without memory. */
static int
count_change(const Held *self, PyObject *path, long delta)
{
    if (!PyList_CheckExact(path)) {
        PyErr_SetString(PyExc_TypeError, "a TreeMap path is not a list");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(path); i++) {
        PyObject *step = PyList_GET_ITEM(path, i);
        if (!PyTuple_Check(step) || PyTuple_GET_SIZE(step) != 2) {
            PyErr_SetString(PyExc_TypeError, "a TreeMap path holds (node, index) pairs");
            return -1;
        }
        PyObject *node = PyTuple_GET_ITEM(step, 0);
        Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(step, 1));
        PyObject *counts = at == -1 && PyErr_Occurred() ? NULL : PyObject_GetAttr(node, str_counts);
        int status = counts == NULL ? -1 : add_to_item(counts, at, delta);
        Py_XDECREF(counts);
        if (status < 0 || PyObject_SetAttr(node, str_dirty, Py_True) < 0)
            return -1;
    }
    return add_to_attribute(self->tree, str_n_entries, delta) < 0
        || add_to_attribute(self->tree, str_mods, 1) < 0 ? -1 : 0;
}

/* The store in the hint's leaf, as Tree.put does it with the write cache when the leaf holds the
 * key's range and has room (the lock is held): 1 stored, 0 not this case (nothing changed), -1
 * with an exception. */
static int
store_in_hint(const Held *self, PyObject *key, PyObject *value)
{
    int result = -1;
    PyObject *over = NULL, *leaf = NULL, *lo = NULL, *hi = NULL, *keys = NULL, *values = NULL,
             *path = NULL;
    if ((over = PyObject_GetAttr(self->cache, str_over_capacity)) == NULL)
        goto done;
    int trim = PyObject_IsTrue(over);
    if (trim != 0) {
        result = trim < 0 ? -1 : 0;
        goto done;
    }
    if ((leaf = PyObject_GetAttr(self->hint, str_leaf)) == NULL)
        goto done;
    if (leaf == Py_None) {
        result = 0;
        goto done;
    }
    if ((lo = PyObject_GetAttr(self->hint, str_lo)) == NULL
            || (hi = PyObject_GetAttr(self->hint, str_hi)) == NULL)
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
    if ((keys = PyObject_GetAttr(leaf, str_keys)) == NULL
            || (values = PyObject_GetAttr(leaf, str_values)) == NULL)
        goto done;
    if (!PyList_CheckExact(keys) || !PyList_CheckExact(values)
            || PyList_GET_SIZE(keys) != PyList_GET_SIZE(values)) {
        PyErr_SetString(page_corruption_error, "a TreeMap leaf's keys and values differ");
        goto done;
    }
    Py_ssize_t n = PyList_GET_SIZE(keys), low;
    int found = find_key(keys, key, &low);
    if (found < 0)
        goto done;
    if (found) {  /* an overwrite */
        if (PyList_SetItem(values, low, Py_NewRef(value)) < 0
                || PyObject_SetAttr(leaf, str_dirty, Py_True) < 0)
            goto done;
        result = 1;
        goto done;
    }
    if (n >= self->node_size) {  /* a split: the tree's structure code */
        result = 0;
        goto done;
    }
    if ((path = PyObject_GetAttr(self->hint, str_path)) == NULL)
        goto done;
    if (PyList_Insert(keys, low, key) < 0)
        goto done;
    if (PyList_Insert(values, low, value) < 0) {
        PySequence_DelItem(keys, low);
        goto done;
    }
    /* the entry is in: what follows is bookkeeping that only fails on a damaged tree or
     * without memory, as its Python twin would */
    if (PyObject_SetAttr(leaf, str_dirty, Py_True) < 0)
        goto done;
    if (count_change(self, path, 1) < 0)
        goto done;
    result = 1;
done:
    Py_XDECREF(over);
    Py_XDECREF(leaf);
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(path);
    return result;
}

/* Whether the change of a leaf `recid` that the node cache does not hold goes around it, as
 * WriteAround.takes decides (NodeCache.would_evict_dirty): the cached leaves `leaves` are at
 * capacity and the least recently used one is dirty. 1 yes, 0 no, -1 with an exception. */
static int
goes_around(const Held *self, PyObject *leaves, PyObject *recid)
{
    PyObject *capacity = PyObject_GetAttr(self->cache, str_capacity);
    Py_ssize_t limit = capacity == NULL ? -1 : PyLong_AsSsize_t(capacity);
    Py_XDECREF(capacity);
    if (limit == -1 && PyErr_Occurred())
        return -1;
    if (PyDict_GET_SIZE(leaves) < limit)
        return 0;
    int cached = PyDict_Contains(leaves, recid);
    if (cached != 0)
        return cached < 0 ? -1 : 0;
    PyObject *order = PyObject_GetIter(leaves);  /* least recently used first */
    PyObject *oldest = order == NULL ? NULL : PyIter_Next(order);
    Py_XDECREF(order);
    if (oldest == NULL)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *node = PyDict_GetItemWithError(leaves, oldest);  /* borrowed */
    Py_DECREF(oldest);
    if (node == NULL)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *dirty = PyObject_GetAttr(node, str_dirty);
    int truth = dirty == NULL ? -1 : PyObject_IsTrue(dirty);
    Py_XDECREF(dirty);
    return truth;
}

/* The separator page.separator puts between int64 keys left_max < right_min: the one in
 * (left_max, right_min] with the most trailing zero bits. */
static long long
int64_separator(long long left_max, long long right_min)
{
    uint64_t gap = (uint64_t)right_min - (uint64_t)left_max;
    int bits = 64 - __builtin_clzll(gap);  /* gap >= 1 */
    for (; bits >= 0; bits--) {
        if (bits >= 64) {  /* Python's (right_min >> 64) << 64: 0, or -2**64 below every key */
            if (right_min >= 0 && 0 > left_max)
                return 0;
            continue;
        }
        long long candidate = (long long)(((uint64_t)(right_min >> bits)) << bits);
        if (candidate > left_max)
            return candidate;
    }
    return right_min;
}

/* A list item as a new Python int, or as a C long long. */
static int
list_word(PyObject *list, Py_ssize_t at, long long *out)
{
    *out = PyLong_AsLongLong(PyList_GET_ITEM(list, at));
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* Set list[at] to the int `number`. */
static int
set_number(PyObject *list, Py_ssize_t at, Py_ssize_t number)
{
    PyObject *item = PyLong_FromSsize_t(number);
    return item == NULL ? -1 : PyList_SetItem(list, at, item);
}

/* Store `page` as the leaf record `recid` (NodeStore.rewrite), whose raw page had `old_size`
 * bytes; 0, or -1 with an exception and nothing changed. */
static int
rewrite_leaf(const Held *self, PyObject *recid, PyObject *page, Py_ssize_t old_size)
{
    PyObject *size = PyLong_FromSsize_t(old_size);
    if (size == NULL)
        return -1;
    PyObject *args[] = {self->nodes, recid, page, size};
    PyObject *done = PyObject_VectorcallMethod(str_rewrite, args, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                               NULL);
    Py_DECREF(size);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

/* The insert of `key` -> `value` at `at` of the full leaf `recid` (its lists `keys`, `values`,
 * decoded from its raw page `page` of `page_size` bytes), which the cache does not hold, by
 * evening it out with a sibling that has two free slots or more, as Rebalancer._insert_via_sibling
 * does through WriteAround (int64 keys, a sibling the cache does not hold either): both pages are
 * written first, the leaf's then the sibling's (a failure of the second puts the first back),
 * then the parent takes the new separator and both counts, the path's counts grow, and the
 * parent's compact form is dropped. 1 done, 2 when neither sibling has room (the reference
 * splits the leaf), 0 not this case, -1 with an exception (nothing changed but for 1). */
static int
shift_into_sibling(const Held *self, PyObject *leaves, PyObject *path, PyObject *recid,
                   PyObject *keys, PyObject *values, Py_ssize_t at, PyObject *key,
                   PyObject *value, const uint8_t *page, Py_ssize_t page_size)
{
    Py_ssize_t depth = PyList_GET_SIZE(path), size = self->node_size;
    if (self->key_kind != 0 || depth == 0 || at == 0 || at >= size)
        return 0;
    PyObject *step = PyList_GET_ITEM(path, depth - 1);
    if (!PyTuple_Check(step) || PyTuple_GET_SIZE(step) != 2) {
        PyErr_SetString(PyExc_TypeError, "a TreeMap path holds (node, index) pairs");
        return -1;
    }
    PyObject *parent = PyTuple_GET_ITEM(step, 0);
    Py_ssize_t ci = PyLong_AsSsize_t(PyTuple_GET_ITEM(step, 1));
    if (ci == -1 && PyErr_Occurred())
        return -1;
    int result = -1;
    PyObject *separators = NULL, *children = NULL, *counts = NULL, *sibling_id = NULL,
             *entries = NULL, *merged_keys = NULL, *merged_values = NULL, *left_keys = NULL,
             *left_values = NULL, *right_keys = NULL, *right_values = NULL, *leaf_page = NULL,
             *sibling_page = NULL, *old_page = NULL, *parent_id = NULL, *forgotten = NULL;
    uint8_t small[2048], *bytes = NULL;
    Py_ssize_t sibling_size = 0, si = -1;
    if ((separators = node_list(parent, str_keys)) == NULL
            || (children = node_list(parent, str_children)) == NULL
            || (counts = node_list(parent, str_counts)) == NULL)
        goto done;
    Py_ssize_t n_children = PyList_GET_SIZE(children);
    if (ci < 0 || ci >= n_children || PyList_GET_SIZE(counts) != n_children
            || PyList_GET_SIZE(separators) != n_children - 1) {
        page_corrupt("a TreeMap path names a child its node lacks");
        goto done;
    }
    for (int side = 0; side < 2 && si < 0; side++) {
        Py_ssize_t candidate = side == 0 ? ci - 1 : ci + 1;
        if (candidate < 0 || candidate >= n_children)
            continue;
        Py_ssize_t count = PyLong_AsSsize_t(PyList_GET_ITEM(counts, candidate));
        if (count == -1 && PyErr_Occurred())
            goto done;
        if (count > size - 2)
            continue;
        PyObject *candidate_id = PyList_GET_ITEM(children, candidate);
        int cached = PyDict_Contains(leaves, candidate_id);
        if (cached != 0) {  /* cached (the reference edits it in the cache), or an error */
            result = cached < 0 ? -1 : 0;
            goto done;
        }
        int copied = copy_record_page(self->store, candidate_id, small, sizeof small, &bytes,
                                      &sibling_size);
        if (copied != 0) {
            result = copied < 0 ? -1 : 0;
            goto done;
        }
        PageReader reader = {bytes, sibling_size, 1};
        uint64_t n;
        if (read_varint(&reader, &n) < 0)
            goto done;
        if (n == 0 || n > (uint64_t)size) {  /* not a leaf this change can take */
            result = 0;
            goto done;
        }
        if ((entries = read_entries(&reader, (Py_ssize_t)n, self->key_kind, self->value_kind))
                == NULL)
            goto done;
        if (entries == Py_None) {
            result = 0;
            goto done;
        }
        if ((Py_ssize_t)n > size - 2) {  /* the reference passes it over too */
            Py_CLEAR(entries);
            continue;
        }
        si = candidate;
        sibling_id = Py_NewRef(candidate_id);
    }
    if (si < 0) {  /* no sibling has room: a split */
        result = 2;
        goto done;
    }
    if (PyList_Insert(keys, at, key) < 0 || PyList_Insert(values, at, value) < 0)
        goto done;
    PyObject *sibling_keys = PyTuple_GET_ITEM(entries, 0),
             *sibling_values = PyTuple_GET_ITEM(entries, 1);
    PyObject *first_keys = si < ci ? sibling_keys : keys, *first_values = si < ci ? sibling_values : values;
    PyObject *second_keys = si < ci ? keys : sibling_keys,
             *second_values = si < ci ? values : sibling_values;
    if ((merged_keys = PySequence_Concat(first_keys, second_keys)) == NULL
            || (merged_values = PySequence_Concat(first_values, second_values)) == NULL)
        goto done;
    Py_ssize_t total = PyList_GET_SIZE(merged_keys), half = total / 2;
    if ((left_keys = PyList_GetSlice(merged_keys, 0, half)) == NULL
            || (left_values = PyList_GetSlice(merged_values, 0, half)) == NULL
            || (right_keys = PyList_GetSlice(merged_keys, half, total)) == NULL
            || (right_values = PyList_GetSlice(merged_values, half, total)) == NULL)
        goto done;
    long long left_max, right_min;
    if (list_word(left_keys, half - 1, &left_max) < 0 || list_word(right_keys, 0, &right_min) < 0)
        goto done;
    /* the leaf's new lists are the left or right half, as the reference's redistribute leaves
     * them; each page is encoded from its half */
    PyObject *leaf_keys = si < ci ? right_keys : left_keys,
             *leaf_values = si < ci ? right_values : left_values;
    PyObject *new_sibling_keys = si < ci ? left_keys : right_keys,
             *new_sibling_values = si < ci ? left_values : right_values;
    if ((leaf_page = encode_leaf_page(leaf_keys, leaf_values, self->key_kind,
                                      self->value_kind)) == NULL
            || (sibling_page = encode_leaf_page(new_sibling_keys, new_sibling_values,
                                                self->key_kind, self->value_kind)) == NULL)
        goto done;
    if (leaf_page == Py_None || sibling_page == Py_None) {
        result = 0;
        goto done;
    }
    if ((old_page = PyBytes_FromStringAndSize((const char *)page, page_size)) == NULL)
        goto done;
    if (rewrite_leaf(self, recid, leaf_page, page_size) < 0)
        goto done;
    if (rewrite_leaf(self, sibling_id, sibling_page, sibling_size) < 0) {
        PyObject *type, *error, *trace;
        PyErr_Fetch(&type, &error, &trace);
        if (rewrite_leaf(self, recid, old_page, PyBytes_GET_SIZE(leaf_page)) < 0)
            PyErr_Clear();  /* the first error is the one to report */
        PyErr_Restore(type, error, trace);
        goto done;
    }
    /* both leaves are stored: what follows only fails on a damaged tree or without memory */
    PyObject *separator = PyLong_FromLongLong(int64_separator(left_max, right_min));
    if (separator == NULL || PyList_SetItem(separators, si < ci ? si : ci, separator) < 0)
        goto done;
    if (count_change(self, path, 1) < 0
            || set_number(counts, ci, PyList_GET_SIZE(leaf_keys)) < 0
            || set_number(counts, si, PyList_GET_SIZE(new_sibling_keys)) < 0)
        goto done;
    if ((parent_id = PyObject_GetAttr(parent, str_recid)) == NULL
            || (forgotten = PyObject_CallMethodOneArg(self->descent, str_forget, parent_id)) == NULL)
        goto done;
    result = 1;
done:
    if (bytes != small)
        PyMem_Free(bytes);
    Py_XDECREF(separators);
    Py_XDECREF(children);
    Py_XDECREF(counts);
    Py_XDECREF(sibling_id);
    Py_XDECREF(entries);
    Py_XDECREF(merged_keys);
    Py_XDECREF(merged_values);
    Py_XDECREF(left_keys);
    Py_XDECREF(left_values);
    Py_XDECREF(right_keys);
    Py_XDECREF(right_values);
    Py_XDECREF(leaf_page);
    Py_XDECREF(sibling_page);
    Py_XDECREF(old_page);
    Py_XDECREF(parent_id);
    Py_XDECREF(forgotten);
    return result;
}

/* A leaf the node cache does not hold, decoded for a change that goes around the cache. */
typedef struct {
    PyObject *walked;          /* Tree.put's walk: (path, lo, hi, leaf recid) */
    PyObject *leaves;          /* the cache's leaves */
    PyObject *entries;         /* (keys, values), new lists decoded from the page */
    uint8_t *page;             /* the page as it was (small, or PyMem) */
    Py_ssize_t size;
    uint8_t small[2048];
} AroundLeaf;

static void
around_close(AroundLeaf *leaf)
{
    Py_CLEAR(leaf->walked);
    Py_CLEAR(leaf->leaves);
    Py_CLEAR(leaf->entries);
    if (leaf->page != leaf->small)
        PyMem_Free(leaf->page);
    leaf->page = NULL;
}

/* Walk to the leaf of `key` as Tree.put and Tree.pop do (_pages.walk) and, when a change of it
 * goes around the cache (goes_around) and its page is a raw leaf the codec reads, decode it into
 * `leaf`: 1. 0 when not (nothing changed: the Python path decides), -1 with an exception. The
 * caller closes `leaf` either way. */
static int
around_open(const Held *self, PyObject *key, AroundLeaf *leaf)
{
    int result = -1, status;
    PyObject *over = NULL, *inner = NULL, *inner_of = NULL, *shape = NULL, *root = NULL,
             *height = NULL, *levels = NULL;
    leaf->walked = leaf->leaves = leaf->entries = NULL;
    leaf->page = NULL;
    if ((over = PyObject_GetAttr(self->cache, str_over_capacity)) == NULL)
        goto done;
    if ((status = PyObject_IsTrue(over)) != 0) {  /* the Python path trims first */
        result = status < 0 ? -1 : 0;
        goto done;
    }
    if ((shape = PyObject_GetAttr(self->tree, str_shape)) == NULL
            || (root = PyObject_GetAttr(shape, str_root)) == NULL
            || (height = PyObject_GetAttr(shape, str_height)) == NULL)
        goto done;
    Py_ssize_t n_levels = PyLong_AsSsize_t(height) - 1;
    if (n_levels == -2 && PyErr_Occurred())
        goto done;
    if (n_levels < 1) {  /* a single leaf: the root, which stays cached */
        result = 0;
        goto done;
    }
    if ((leaf->leaves = PyObject_GetAttr(self->cache, str_leaves)) == NULL
            || (inner = PyObject_GetAttr(self->cache, str_inner_nodes)) == NULL
            || (inner_of = PyObject_GetAttr(self->cache, str_inner)) == NULL
            || (levels = PyLong_FromSsize_t(n_levels)) == NULL)
        goto done;
    if (!PyDict_Check(leaf->leaves)) {
        PyErr_SetString(PyExc_TypeError, "the node cache's leaves are not a dict");
        goto done;
    }
    PyObject *walk_args[] = {inner, inner_of, root, levels, key};
    if ((leaf->walked = walk(NULL, walk_args, 5)) == NULL)
        goto done;
    PyObject *recid = PyTuple_GET_ITEM(leaf->walked, 3);
    if ((status = goes_around(self, leaf->leaves, recid)) != 1) {
        result = status;
        goto done;
    }
    if ((status = copy_record_page(self->store, recid, leaf->small, sizeof leaf->small,
                                   &leaf->page, &leaf->size)) != 0) {
        result = status < 0 ? -1 : 0;
        goto done;
    }
    PageReader reader = {leaf->page, leaf->size, 1};
    uint64_t count;
    if (read_varint(&reader, &count) < 0)
        goto done;
    if (count == 0 || count > PAGE_MAX_ENTRIES) {  /* not a leaf the tree writes around */
        result = 0;
        goto done;
    }
    if ((leaf->entries = read_entries(&reader, (Py_ssize_t)count, self->key_kind,
                                      self->value_kind)) == NULL)
        goto done;
    result = leaf->entries != Py_None;  /* None: declined, the reference decodes it */
done:
    Py_XDECREF(over);
    Py_XDECREF(inner);
    Py_XDECREF(inner_of);
    Py_XDECREF(shape);
    Py_XDECREF(root);
    Py_XDECREF(height);
    Py_XDECREF(levels);
    return result;
}

/* Store the lists of an AroundLeaf as its record (NodeStore.rewrite, the only step that can
 * fail with the store full, before anything else changed), then make the hint name no leaf, as
 * after the reference's descent. 1 stored, 0 declined by the codec, -1 with an exception. */
static int
around_write(const Held *self, AroundLeaf *leaf)
{
    PyObject *page = encode_leaf_page(PyTuple_GET_ITEM(leaf->entries, 0),
                                      PyTuple_GET_ITEM(leaf->entries, 1), self->key_kind,
                                      self->value_kind);
    if (page == NULL || page == Py_None) {
        Py_XDECREF(page);
        return page == NULL ? -1 : 0;
    }
    int status = rewrite_leaf(self, PyTuple_GET_ITEM(leaf->walked, 3), page, leaf->size);
    Py_DECREF(page);
    if (status < 0 || PyObject_SetAttr(self->hint, str_leaf, Py_None) < 0)
        return -1;
    return 1;
}

/* The insert of `key` -> `value` at `at` of the full leaf `recid` (lists `keys`, `values`,
 * decoded from its raw page `page` of `page_size` bytes), which the cache does not hold, by
 * splitting it as Rebalancer._split_insert does through WriteAround when the parent has room
 * (int64 keys): a record for the right half is reserved, the leaf is cut where the reference
 * cuts it (an append at the end keeps node_size entries on the left, an insert at the start one),
 * both pages are written, the leaf's then the new one's (a failure puts the first back and frees
 * the reserved record), then the parent takes the separator, the new child and both counts, the
 * path's counts grow, the shape counts one more leaf, and the parent's compact form is dropped.
 * 1 done, 0 not this case (nothing changed), -1 with an exception (nothing changed). */
static int
split_around(const Held *self, PyObject *path, PyObject *recid, PyObject *keys, PyObject *values,
             Py_ssize_t at, PyObject *key, PyObject *value, const uint8_t *page,
             Py_ssize_t page_size)
{
    Py_ssize_t depth = PyList_GET_SIZE(path), size = self->node_size;
    if (self->key_kind != 0 || depth == 0)
        return 0;
    PyObject *step = PyList_GET_ITEM(path, depth - 1);
    if (!PyTuple_Check(step) || PyTuple_GET_SIZE(step) != 2) {
        PyErr_SetString(PyExc_TypeError, "a TreeMap path holds (node, index) pairs");
        return -1;
    }
    PyObject *parent = PyTuple_GET_ITEM(step, 0);
    Py_ssize_t ci = PyLong_AsSsize_t(PyTuple_GET_ITEM(step, 1));
    if (ci == -1 && PyErr_Occurred())
        return -1;
    int result = -1;
    PyObject *separators = NULL, *children = NULL, *counts = NULL, *reserved = NULL,
             *right_keys = NULL, *right_values = NULL, *left_page = NULL, *right_page = NULL,
             *old_page = NULL, *parent_id = NULL, *forgotten = NULL, *shape = NULL,
             *grown = NULL;
    if ((separators = node_list(parent, str_keys)) == NULL
            || (children = node_list(parent, str_children)) == NULL
            || (counts = node_list(parent, str_counts)) == NULL)
        goto done;
    Py_ssize_t n_children = PyList_GET_SIZE(children);
    if (ci < 0 || ci >= n_children || PyList_GET_SIZE(counts) != n_children
            || PyList_GET_SIZE(separators) != n_children - 1) {
        page_corrupt("a TreeMap path names a child its node lacks");
        goto done;
    }
    if (n_children >= size) {  /* the parent splits too: the tree's structure code */
        result = 0;
        goto done;
    }
    PyObject *one = PyLong_FromLong(1);
    if (one == NULL)
        goto done;
    PyObject *reserve_args[] = {self->nodes, one};
    reserved = PyObject_VectorcallMethod(str_reserve, reserve_args,
                                         2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_DECREF(one);
    if (reserved == NULL)
        goto done;
    if (!PyList_CheckExact(reserved) || PyList_GET_SIZE(reserved) != 1) {
        PyErr_SetString(PyExc_TypeError, "NodeStore.reserve(1) gives a list of one record id");
        goto done;
    }
    PyObject *right_id = PyList_GET_ITEM(reserved, 0);
    if (PyList_Insert(keys, at, key) < 0 || PyList_Insert(values, at, value) < 0)
        goto release;
    Py_ssize_t total = PyList_GET_SIZE(keys);
    Py_ssize_t cut = at == size ? size : at == 0 ? 1 : (size + 1) / 2;
    long long left_max, right_min;
    if ((right_keys = PyList_GetSlice(keys, cut, total)) == NULL
            || (right_values = PyList_GetSlice(values, cut, total)) == NULL
            || PyList_SetSlice(keys, cut, total, NULL) < 0
            || PyList_SetSlice(values, cut, total, NULL) < 0
            || list_word(keys, cut - 1, &left_max) < 0 || list_word(right_keys, 0, &right_min) < 0)
        goto release;
    if ((left_page = encode_leaf_page(keys, values, self->key_kind, self->value_kind)) == NULL
            || (right_page = encode_leaf_page(right_keys, right_values, self->key_kind,
                                              self->value_kind)) == NULL)
        goto release;
    if (left_page == Py_None || right_page == Py_None) {
        result = 0;
        goto release;
    }
    if ((old_page = PyBytes_FromStringAndSize((const char *)page, page_size)) == NULL
            || rewrite_leaf(self, recid, left_page, page_size) < 0)
        goto release;
    if (rewrite_leaf(self, right_id, right_page, 0) < 0) {
        PyObject *type, *error, *trace;
        PyErr_Fetch(&type, &error, &trace);
        if (rewrite_leaf(self, recid, old_page, PyBytes_GET_SIZE(left_page)) < 0)
            PyErr_Clear();  /* the first error is the one to report */
        PyErr_Restore(type, error, trace);
        goto release;
    }
    /* both leaves are stored: what follows only fails on a damaged tree or without memory */
    PyObject *separator = PyLong_FromLongLong(int64_separator(left_max, right_min));
    if (separator == NULL || PyList_Insert(separators, ci, separator) < 0) {
        Py_XDECREF(separator);
        goto done;
    }
    Py_DECREF(separator);
    if (PyList_Insert(children, ci + 1, right_id) < 0 || count_change(self, path, 1) < 0
            || set_number(counts, ci, PyList_GET_SIZE(keys)) < 0)
        goto done;
    PyObject *right_count = PyLong_FromSsize_t(PyList_GET_SIZE(right_keys));
    int inserted = right_count == NULL ? -1 : PyList_Insert(counts, ci + 1, right_count);
    Py_XDECREF(right_count);
    if (inserted < 0)
        goto done;
    PyObject *kwnames = NULL;
    if ((shape = PyObject_GetAttr(self->tree, str_shape)) == NULL
            || (one = PyLong_FromLong(1)) == NULL)
        goto done;
    PyObject *grow_args[] = {shape, one};
    kwnames = PyTuple_Pack(1, str_leaves_name);
    grown = kwnames == NULL ? NULL
        : PyObject_VectorcallMethod(str_with_nodes, grow_args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                    kwnames);
    Py_XDECREF(kwnames);
    Py_DECREF(one);
    if (grown == NULL || PyObject_SetAttr(self->tree, str_public_shape, grown) < 0)
        goto done;
    if ((parent_id = PyObject_GetAttr(parent, str_recid)) == NULL
            || (forgotten = PyObject_CallMethodOneArg(self->descent, str_forget, parent_id)) == NULL
            || PyObject_SetAttr(self->hint, str_leaf, Py_None) < 0)
        goto done;
    result = 1;
    goto done;
release:  /* nothing stored: the reserved record goes back */
    {
        PyObject *type, *error, *trace;
        PyErr_Fetch(&type, &error, &trace);
        PyObject *release_args[] = {self->nodes, reserved};
        PyObject *released = PyObject_VectorcallMethod(str_release, release_args,
                                                       2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        if (released == NULL && type != NULL)
            PyErr_Clear();  /* the first error is the one to report */
        Py_XDECREF(released);
        if (type != NULL)
            PyErr_Restore(type, error, trace);
        else if (released == NULL)
            result = -1;
    }
done:
    Py_XDECREF(separators);
    Py_XDECREF(children);
    Py_XDECREF(counts);
    Py_XDECREF(reserved);
    Py_XDECREF(right_keys);
    Py_XDECREF(right_values);
    Py_XDECREF(left_page);
    Py_XDECREF(right_page);
    Py_XDECREF(old_page);
    Py_XDECREF(parent_id);
    Py_XDECREF(forgotten);
    Py_XDECREF(shape);
    Py_XDECREF(grown);
    return result;
}

/* The store of a leaf the node cache does not hold, written around it as WriteAround.put does
 * (offheap/treemap/writearound.py, the reference) when the change stays in the leaf, an
 * overwrite or an insert into a leaf with room, or when a sibling takes some of a full leaf
 * (shift_into_sibling); an insert then counts one more entry along the path. 1 stored, 0 not
 * this case (nothing changed), -1 with an exception (nothing changed if the store refused the
 * page). The lock is held. */
static int
store_around(const Held *self, PyObject *key, PyObject *value)
{
    AroundLeaf leaf;
    int result = around_open(self, key, &leaf);
    if (result != 1)
        goto done;
    result = -1;
    PyObject *path = PyTuple_GET_ITEM(leaf.walked, 0);
    PyObject *keys = PyTuple_GET_ITEM(leaf.entries, 0), *values = PyTuple_GET_ITEM(leaf.entries, 1);
    Py_ssize_t at;
    int found = find_key(keys, key, &at);
    if (found < 0)
        goto done;
    if (found) {
        if (PyList_SetItem(values, at, Py_NewRef(value)) < 0)
            goto done;
    }
    else if (PyList_GET_SIZE(keys) >= self->node_size) {  /* full: a sibling takes some */
        PyObject *recid = PyTuple_GET_ITEM(leaf.walked, 3);
        result = shift_into_sibling(self, leaf.leaves, path, recid, keys, values, at, key, value,
                                    leaf.page, leaf.size);
        if (result == 2)  /* or else a split */
            result = split_around(self, path, recid, keys, values, at, key, value, leaf.page,
                                  leaf.size);
        goto done;
    }
    else if (PyList_Insert(keys, at, key) < 0 || PyList_Insert(values, at, value) < 0)
        goto done;
    if ((result = around_write(self, &leaf)) == 1 && !found && count_change(self, path, 1) < 0)
        result = -1;
done:
    around_close(&leaf);
    return result;
}

/* del m[key] in a leaf the node cache does not hold, written around it as WriteAround.remove
 * does, when the leaf keeps at least min_entries entries (node_size // 4, at least 1): the
 * entry leaves the page, the page is stored, and the counts along the path lose one. 1 deleted,
 * 0 not this case (a key the leaf lacks, an underflow: the Python path), -1 with an exception.
 * The lock is held. */
static int
delete_around(const Held *self, PyObject *key)
{
    AroundLeaf leaf;
    int result = around_open(self, key, &leaf);
    if (result != 1)
        goto done;
    result = -1;
    PyObject *keys = PyTuple_GET_ITEM(leaf.entries, 0), *values = PyTuple_GET_ITEM(leaf.entries, 1);
    Py_ssize_t at, min_entries = self->node_size / 4 > 1 ? self->node_size / 4 : 1;
    int found = find_key(keys, key, &at);
    if (found <= 0 || PyList_GET_SIZE(keys) - 1 < min_entries) {
        result = found < 0 ? -1 : 0;
        goto done;
    }
    if (PySequence_DelItem(keys, at) < 0 || PySequence_DelItem(values, at) < 0)
        goto done;
    if ((result = around_write(self, &leaf)) == 1
            && count_change(self, PyTuple_GET_ITEM(leaf.walked, 0), -1) < 0)
        result = -1;
done:
    around_close(&leaf);
    return result;
}

/* Whether a key of the key type is one the fast paths take: an int in int64's range, or any str
 * or bytes; -1 with an exception. */
static int
key_in_range(PyObject *key)
{
    if (!PyLong_CheckExact(key))
        return 1;
    int overflow;
    long long word = PyLong_AsLongLongAndOverflow(key, &overflow);
    if (word == -1 && PyErr_Occurred())
        return -1;
    return !overflow;
}

/* m[key] = value, and del m[key] (value NULL): in the hint's leaf when that is all it takes, else
 * through the map's _put_item / _delete_item. */
static int
slots_ass_subscript(TreeSlots *self, PyObject *key, PyObject *value)
{
    if (value == NULL) {
        int deleted = 0;
        int in_range = self->nodes != NULL && (PyObject *)Py_TYPE(key) == self->key_type
            ? key_in_range(key) : 0;
        if (in_range < 0)
            return -1;
        if (in_range) {
            PyObject *release = take_lock(self);
            if (release == NULL)
                return -1;
            if (self->nodes != NULL) { /* still attached once the lock was taken */
                Held held;
                hold(self, &held);
                deleted = delete_around(&held, key);
                unhold(&held);
            }
            if (give_lock(release) < 0)
                return -1;
            if (deleted != 0)
                return deleted < 0 ? -1 : 0;
        }
        PyObject *args[] = {(PyObject *)self, key};
        PyObject *done = PyObject_VectorcallMethod(str_delete_item, args,
                                                   2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_XDECREF(done);
        return done == NULL ? -1 : 0;
    }
    int stored = 0;
    if (self->tree != NULL && (PyObject *)Py_TYPE(key) == self->key_type
            && is_scalar(self->stored_types, value)) {
        int in_range = key_in_range(key);
        if (in_range < 0)
            return -1;
        if (in_range) {
            PyObject *release = take_lock(self);
            if (release == NULL)
                return -1;
            if (self->tree != NULL) { /* still attached once the lock was taken */
                Held held;
                hold(self, &held);
                stored = store_in_hint(&held, key, value);
                if (stored == 0 && held.nodes != NULL)
                    stored = store_around(&held, key, value);
                unhold(&held);
            }
            if (give_lock(release) < 0)
                return -1;
            if (stored != 0)
                return stored < 0 ? -1 : 0;
        }
    }
    PyObject *args[] = {(PyObject *)self, key, value};
    PyObject *done = PyObject_VectorcallMethod(str_put_item, args, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                               NULL);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
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
"stored_types tuple in the leaf of its hint Cursor when that leaf holds the key's range and has\n"
"room (fewer than node_size entries), as Tree.put does with the write cache. With around a\n"
"tuple (nodes, key_kind, value_kind): the Tree's NodeStore, whose pages are raw, and the page\n"
"kinds of its keys and values, also store in a leaf the cache does not hold when WriteAround.put\n"
"would change only that leaf, as it does.");

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
    static const char *names[] = {"_lookup", "_put_item", "_delete_item", "leaf", "lo", "hi", "path",
                                  "keys", "values", "counts", "dirty", "n_entries", "mods",
                                  "capacity", "_shape", "root", "height", "_leaves", "_inner",
                                  "inner", "rewrite", "children", "recid", "forget", "reserve",
                                  "release", "with_nodes", "leaves", "shape"};
    PyObject **slots[] = {&str_lookup, &str_put_item, &str_delete_item, &str_leaf, &str_lo, &str_hi,
                          &str_path, &str_keys, &str_values, &str_counts, &str_dirty,
                          &str_n_entries, &str_mods, &str_capacity, &str_shape, &str_root,
                          &str_height, &str_leaves, &str_inner_nodes, &str_inner, &str_rewrite,
                          &str_children, &str_recid, &str_forget, &str_reserve, &str_release,
                          &str_with_nodes, &str_leaves_name, &str_public_shape};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (*slots[i] == NULL && (*slots[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return -1;
    if (str_over_capacity == NULL
            && (str_over_capacity = PyUnicode_InternFromString("over_capacity")) == NULL)
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
