/* Stores and deletes of int64 TreeMaps written around the node cache, in C (layer 6): the twin
 * of offheap/treemap/writearound.py for the cases that need no Python, reached from the item
 * slots (slots.c) with the map's lock held; and the walk that hands a change of a cached leaf to
 * the slots' in-cache store and delete.
 *
 * When. As WriteAround.takes decides (NodeCache.would_evict_dirty): the change's leaf is not
 * cached, the cache's leaves are at capacity and the least recently used one is dirty. The
 * descent is Tree.put's, made on the Descent's compact inner forms (descent_walk: the same path
 * of the same Inner objects, the same LRU moves as _pages.walk), so the two paths read, decide
 * and write alike. Any other leaf (one the cache holds; else read into it as NodeCache.leaf reads
 * it for the reference's descent, by descent_cache_leaf: with room, or past capacity when the
 * least recently used leaf is clean, the cache then marked over capacity and trimmed by the next
 * operation, slots.c: trim_leaves) becomes the hint's leaf and the change runs in the cache
 * (slots.c: store_in_hint, delete_in_hint), as Tree.put and Tree.pop run it there. That part
 * takes str and bytes keys too; the changes around the cache below take int64 keys only.
 *
 * What. The leaf's raw page is copied out of the store and decoded into 64-bit key words and a
 * list of values (no int object per key); then
 *   - an overwrite, an insert into a leaf with room, a delete that leaves the leaf at least
 *     min_entries (node_size // 4, at least 1) full: the page is encoded and stored;
 *   - an insert into a full leaf: evened out with a sibling that has a free slot
 *     (Rebalancer._insert_via_sibling; a cached sibling takes its half in the cache, dirty),
 *     else a split when the parent has room, or when the parent is full and the node above it
 *     has room, the parent splitting too (Rebalancer._split_insert), cut where the reference
 *     cuts;
 * and only once every page is stored do the inner nodes take the change (entry counts along the
 * path, a new separator, a new child, a new inner node) and the tree its counts (n_entries,
 * mods, the shape's leaves and inner nodes). Everything else returns 0 with nothing changed,
 * and the slot calls the map's Python method, whose WriteAround does the same steps in Python:
 * a key that is absent from the leaf of a delete, a delete that underflows, a split that
 * reaches higher, pages the codec declines.
 *
 * Failure atomicity. A page is stored as NodeStore.rewrite stores it: RecordStore.update, made by
 * the compiled store (offheap/store/_space.c, through its capsule, no Python call) when it can,
 * else by the Python method, which allocates before it changes anything. When the second page of a change fails, the first gets its old
 * page back (into the chunk its write released: no allocation) and a record reserved for a
 * split is released, so a CapacityError or a full disk leaves the map as it was, as
 * NodeWriter.write_through and WriteAround.commit leave it.
 *
 * Bytes. The pages are page.encode_leaf's, written in the reference's order (the changed leaf,
 * then the sibling or the new leaf), so both paths leave the same records and the same file.
 * Thread safety: the caller holds the map's lock and the references in Held for the call.
 */
#include "pages.h"
#include "slots.h"
#include "space_api.h"

enum { SMALL_WORDS = 130, SMALL_PAGE = 2048 };

static PyObject *str_shape, *str_public_shape, *str_rewrite, *str_release,
    *str_with_nodes, *str_leaves_name, *str_dirty, *str_leaf, *str_raw_bytes,
    *str_stored_bytes, *str_move_to_end, *str_inner_name, *str_add;
static const SpaceApi *space;  /* offheap.store._space's C interface */

int
init_around(void)
{
    static const char *names[] = {"_shape", "shape", "rewrite", "release",
                                  "with_nodes", "leaves", "dirty", "leaf",
                                  "raw_bytes", "stored_bytes", "move_to_end", "inner", "add"};
    PyObject **slots[] = {&str_shape, &str_public_shape, &str_rewrite,
                          &str_release, &str_with_nodes, &str_leaves_name,
                          &str_dirty, &str_leaf, &str_raw_bytes, &str_stored_bytes,
                          &str_move_to_end, &str_inner_name, &str_add};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (*slots[i] == NULL && (*slots[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return -1;
    if (space == NULL && (space = space_api_import()) == NULL)
        return -1;
    return 0;
}

/* -- one leaf, decoded -------------------------------------------------------------------------- */

/* A leaf the cache does not hold, decoded for one change: key words with room for one more,
 * and a new list of values. */
typedef struct {
    PyObject *recid;       /* borrowed from `walked` or the parent's children */
    PyObject *values;      /* new list */
    uint64_t *keys;        /* small_keys, or PyMem */
    Py_ssize_t count;
    uint8_t *page;         /* the page as it was: small_page, or PyMem */
    Py_ssize_t size;
    Py_ssize_t values_at;  /* where the page's value column begins */
    uint64_t small_keys[SMALL_WORDS];
    uint8_t small_page[SMALL_PAGE];
} Decoded;

static void
decoded_init(Decoded *leaf)
{
    leaf->recid = leaf->values = NULL;
    leaf->keys = NULL;
    leaf->page = NULL;
    leaf->count = 0;
}

static void
decoded_close(Decoded *leaf)
{
    Py_CLEAR(leaf->values);
    if (leaf->keys != leaf->small_keys)
        PyMem_Free(leaf->keys);
    if (leaf->page != leaf->small_page)
        PyMem_Free(leaf->page);
    leaf->keys = NULL;
    leaf->page = NULL;
}

/* Copy the raw leaf page of record `recid` (borrowed) into `leaf` and decode its keys, not yet
 * its values (decoded_values): 1, 0 when the reference must read it (a compressed page, an
 * empty one), -1 with an exception. */
static int
decoded_keys(const Held *self, PyObject *recid, Decoded *leaf)
{
    leaf->recid = recid;
    int status = copy_record_page(self->store, NULL, recid, leaf->small_page, SMALL_PAGE,
                                  &leaf->page, &leaf->size);
    if (status != 0)
        return status < 0 ? -1 : 0;
    PageReader reader = {leaf->page, leaf->size, 1};
    uint64_t count;
    if (read_varint(&reader, &count) < 0)
        return -1;
    if (count == 0 || count > PAGE_MAX_ENTRIES)  /* only a root is empty; the reference reads it */
        return 0;
    leaf->count = (Py_ssize_t)count;
    /* room for one more key, and as many words again for the value column's scratch */
    size_t words = 2 * (size_t)count + 2;
    leaf->keys = words <= SMALL_WORDS ? leaf->small_keys : PyMem_Malloc(words * sizeof(uint64_t));
    if (leaf->keys == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (read_int64_key_words(&reader, leaf->count, leaf->keys) < 0)
        return -1;
    leaf->values_at = reader.pos;
    return 1;
}

/* Decode the values of the leaf decoded_keys read: 1, 0 when the reference must (a declined
 * value column), -1 with an exception. */
static int
decoded_values(const Held *self, Decoded *leaf)
{
    PageReader reader = {leaf->page, leaf->size, leaf->values_at};
    leaf->values = read_values(&reader, leaf->count, self->value_kind,
                               leaf->keys + leaf->count + 1);
    if (leaf->values == NULL)
        return -1;
    return leaf->values != Py_None;
}

/* Copy and decode the raw leaf page of record `recid` (borrowed) into `leaf`, keys and values:
 * 1, 0 when the reference must read it, -1 with an exception. */
static int
decoded_read(const Held *self, PyObject *recid, Decoded *leaf)
{
    int status = decoded_keys(self, recid, leaf);
    return status == 1 ? decoded_values(self, leaf) : status;
}

/* The entries of the cached Leaf `node` of record `recid` (borrowed) into `leaf`, as if decoded
 * from its page (which may be older: the cache's copy is the current one): 1, or -1 with an
 * exception. */
static int
decoded_from_cached(PyObject *node, PyObject *recid, Decoded *leaf)
{
    leaf->recid = recid;
    PyObject *keys, *values;
    if (leaf_lists(node, &keys, &values) < 0)
        return -1;
    int result = -1;
    KeyWords words;
    if (key_words_open(keys, &words) < 0)
        goto done;
    Py_ssize_t count = words.count;
    if (count > PAGE_MAX_ENTRIES)
        page_corrupt("a cached TreeMap leaf holds more entries than a page");
    else if ((leaf->keys = (size_t)count + 1 <= SMALL_WORDS ? leaf->small_keys
              : PyMem_Malloc(((size_t)count + 1) * sizeof(uint64_t))) == NULL)
        PyErr_NoMemory();
    else
        memcpy(leaf->keys, words.words, (size_t)count * sizeof(uint64_t));
    key_words_close(&words);
    if (leaf->keys == NULL || (leaf->values = PyList_GetSlice(values, 0, count)) == NULL)
        goto done;
    leaf->count = count;
    result = 1;
done:
    Py_XDECREF(keys);
    Py_XDECREF(values);
    return result;
}

/* The entries keys[start:stop] (as ints) and values[start:stop] as the new contents of the
 * cached Leaf `node`, its lists changed in place, and the leaf dirty (as redistribute and the
 * commit leave it): 0, or -1 with an exception. */
static int
cached_takes(PyObject *node, const uint64_t *keys, PyObject *values, Py_ssize_t start,
             Py_ssize_t stop)
{
    PyObject *words = new_int64_column(keys + start, stop - start), *node_keys = NULL,
        *node_values = NULL;
    int result = -1;
    if (words == NULL || leaf_lists(node, &node_keys, &node_values) < 0
            || list_take(node_keys, words, 0, stop - start) < 0
            || list_take(node_values, values, start, stop) < 0
            || PyObject_SetAttr(node, str_dirty, Py_True) < 0)
        goto done;
    result = 0;
done:
    Py_XDECREF(words);
    Py_XDECREF(node_keys);
    Py_XDECREF(node_values);
    return result;
}

/* bisect_left of `key` in the leaf's keys (in *at): 1 when it is there, else 0. */
static int
decoded_find(const Decoded *leaf, int64_t key, Py_ssize_t *at)
{
    Py_ssize_t low = 0, high = leaf->count;
    while (low < high) {
        Py_ssize_t mid = low + (high - low) / 2;
        if ((int64_t)leaf->keys[mid] < key)
            low = mid + 1;
        else
            high = mid;
    }
    *at = low;
    return low < leaf->count && (int64_t)leaf->keys[low] == key;
}

/* The raw page of keys[start:stop] and values[start:stop] (values a list of the leaf's length):
 * a new bytes object, Py_None when the codec declines it, NULL with an exception. */
static PyObject *
encode_part(const Held *self, const uint64_t *keys, PyObject *values, Py_ssize_t start,
            Py_ssize_t stop)
{
    return encode_int64_leaf_page(keys + start, stop - start,
                                  PySequence_Fast_ITEMS(values) + start, self->value_kind);
}

/* The walk of a change: the (Inner, child) steps from the root and the leaf's record id. */
typedef struct {
    WalkStep steps[MAX_HEIGHT];
    Py_ssize_t n;
    PyObject *leaf;        /* the leaf's record id, a new reference (NULL before the walk) */
} Walk;

static void
walk_close(Walk *walk)
{
    walk_steps_clear(walk->steps, walk->n);
    walk->n = 0;
    Py_CLEAR(walk->leaf);
}

/* -- the steps every change shares --------------------------------------------------------------- */

/* Add `delta` to the NodeStore's raw_bytes and stored_bytes (a page stored raw counts the same
 * in both), as NodeStore.rewrite does: read and set in its instance dict, plain attributes. */
static int
count_rewrite(PyObject *nodes, Py_ssize_t delta)
{
    if (delta == 0)
        return 0;
    PyObject *attrs = PyObject_GenericGetDict(nodes, NULL);
    PyObject *change = attrs == NULL ? NULL : PyLong_FromSsize_t(delta);
    int status = change == NULL ? -1 : 0;
    PyObject *names[] = {str_raw_bytes, str_stored_bytes};
    for (int i = 0; i < 2 && status == 0; i++) {
        PyObject *value = PyDict_GetItemWithError(attrs, names[i]);
        if (value == NULL && !PyErr_Occurred())
            PyErr_SetObject(PyExc_AttributeError, names[i]);
        PyObject *sum = value == NULL ? NULL : PyNumber_Add(value, change);
        status = sum == NULL ? -1 : PyDict_SetItem(attrs, names[i], sum);
        Py_XDECREF(sum);
    }
    Py_XDECREF(change);
    Py_XDECREF(attrs);
    return status;
}

/* Store `page` as leaf record `recid` (NodeStore.rewrite), whose raw page had `old_size` bytes;
 * 0, or -1 with an exception and nothing changed. The compiled store makes the update when it
 * can, and the totals of the node store take the change as NodeStore.rewrite's do; else the
 * Python method does both. */
static int
rewrite_leaf(const Held *self, PyObject *recid, PyObject *page, Py_ssize_t old_size)
{
    Py_ssize_t id = PyLong_AsSsize_t(recid), delta = PyBytes_GET_SIZE(page) - old_size;
    if (id == -1 && PyErr_Occurred())
        return -1;
    int done = self->store == NULL ? 0
        : space->update(self->store, id, (const uint8_t *)PyBytes_AS_STRING(page),
                        PyBytes_GET_SIZE(page));
    if (done < 0)
        return -1;
    if (done)  /* stored: the totals follow, and fail only without memory */
        return count_rewrite(self->nodes, delta);
    PyObject *size = PyLong_FromSsize_t(old_size);
    if (size == NULL)
        return -1;
    PyObject *args[] = {self->nodes, recid, page, size};
    PyObject *rewritten = PyObject_VectorcallMethod(str_rewrite, args,
                                                    4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_DECREF(size);
    Py_XDECREF(rewritten);
    return rewritten == NULL ? -1 : 0;
}

static SlotField written_keys = SLOT_FIELD("keys"), written_values = SLOT_FIELD("values"),
    written_raw = SLOT_FIELD("raw_bytes"), written_stored = SLOT_FIELD("stored_bytes"),
    written_dirty = SLOT_FIELD("dirty");

/* slots.h */
int
write_cached_leaf(const Held *self, PyObject *recid, PyObject *node)
{
    if (self->store == NULL || self->key_kind != 0)
        return 0;
    PyObject *keys = node_key_column(node, &written_keys);
    PyObject *values = keys == NULL ? NULL : node_list(node, &written_values);
    PyObject *old_size = values == NULL ? NULL : field_get(&written_raw, node);
    Py_ssize_t old = old_size == NULL ? -1 : PyLong_AsSsize_t(old_size);
    PyObject *page = NULL;
    KeyWords words;
    if (!(old == -1 && PyErr_Occurred()) && old_size != NULL
            && key_words_open(keys, &words) == 0) {
        if (words.count != PyList_GET_SIZE(values))
            page_corrupt("TreeMap leaf %S has %zd keys and %zd values", recid, words.count,
                         PyList_GET_SIZE(values));
        else
            page = encode_int64_leaf_page((const uint64_t *)words.words, words.count,
                                          PySequence_Fast_ITEMS(values), self->value_kind);
        key_words_close(&words);
    }
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(old_size);
    int result = page == NULL ? -1 : page != Py_None;
    if (result == 1 && rewrite_leaf(self, recid, page, old) < 0)
        result = -1;
    PyObject *size = result == 1 ? PyLong_FromSsize_t(PyBytes_GET_SIZE(page)) : NULL;
    if (result == 1 && (size == NULL || field_set(&written_raw, node, size) < 0
                        || field_set(&written_stored, node, size) < 0
                        || field_set(&written_dirty, node, Py_False) < 0))
        result = -1;
    Py_XDECREF(size);
    Py_XDECREF(page);
    return result;
}

/* Store two pages, the first as record `first` (raw page of `first_size` bytes before, whose old
 * bytes are `first_old`), then the second as `second` (`second_size` before); when the second
 * fails, the first gets its old page back and the second's error is raised. 0, or -1 with
 * nothing changed. */
static int
rewrite_two(const Held *self, PyObject *first, PyObject *first_page, const Decoded *first_old,
            PyObject *second, PyObject *second_page, Py_ssize_t second_size)
{
    if (rewrite_leaf(self, first, first_page, first_old->size) < 0)
        return -1;
    if (rewrite_leaf(self, second, second_page, second_size) == 0)
        return 0;
    PyObject *type, *error, *trace;
    PyErr_Fetch(&type, &error, &trace);
    PyObject *old = PyBytes_FromStringAndSize((const char *)first_old->page, first_old->size);
    if (old == NULL || rewrite_leaf(self, first, old, PyBytes_GET_SIZE(first_page)) < 0)
        PyErr_Clear();  /* the first error is the one to report */
    Py_XDECREF(old);
    PyErr_Restore(type, error, trace);
    return -1;
}

enum { CACHE_HAS_ROOM = 2 };

/* Whether the change of a leaf the cache does not hold goes around the cache: the cache's
 * `leaves` are at capacity and the least recently used one is dirty. 1 yes; CACHE_HAS_ROOM no,
 * the leaves are below capacity (caching one more leaves the cache within it); 0 no, caching it
 * puts the cache over capacity; -1 with an exception. */
static int
goes_around(const Held *self, PyObject *leaves)
{
    if (descent_leaves_have_room(self->descent))
        return CACHE_HAS_ROOM;
    PyObject *oldest;
    PyObject *node = oldest_leaf(leaves, &oldest);  /* borrowed */
    Py_XDECREF(oldest);
    if (node == NULL)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *dirty = PyObject_GetAttr(node, str_dirty);
    int truth = dirty == NULL ? -1 : PyObject_IsTrue(dirty);
    Py_XDECREF(dirty);
    return truth;
}

/* slots.h */
int64_t
separator_between(int64_t left_max, int64_t right_min)
{
    uint64_t gap = (uint64_t)right_min - (uint64_t)left_max;
    for (int bits = 64 - __builtin_clzll(gap); bits >= 0; bits--) {
        if (bits == 64) {  /* Python's (right_min >> 64) << 64: 0, or -2**64 below every key */
            if (right_min >= 0 && left_max < 0)
                return 0;
            continue;
        }
        int64_t candidate = (int64_t)((uint64_t)(right_min >> bits) << bits);
        if (candidate > left_max)
            return candidate;
    }
    return right_min;
}

/* The parent at the end of a walk (borrowed) and the child index there, with new references to
 * its three lists, checked to agree; 0, or -1 with an exception. */
typedef struct {
    PyObject *node;
    NodeLists lists;
    int64_t recid;
    Py_ssize_t child;
} Parent;

static int
parent_open(const Walk *walk, Parent *parent)
{
    parent->node = walk->steps[walk->n - 1].node;
    parent->recid = walk->steps[walk->n - 1].recid;
    parent->child = walk->steps[walk->n - 1].child;
    if (nodelists_open(parent->node, &parent->lists) < 0)
        return -1;
    if (parent->child < 0 || parent->child >= PyList_GET_SIZE(parent->lists.children))
        return page_corrupt("a TreeMap path names a child its node lacks");
    return 0;
}

static void
parent_close(Parent *parent)
{
    nodelists_close(&parent->lists);
}

/* Make the hint name no leaf, as after the reference's descent of a structural change. */
static int
hint_forget(const Held *self)
{
    return PyObject_SetAttr(self->hint, str_leaf, Py_None);
}

/* -- structural changes ------------------------------------------------------------------------- */

/* Insert key -> value at `at` of the full `leaf` by evening it out with a sibling that has a
 * free slot (Rebalancer._insert_via_sibling): 1 done, 2 when neither sibling has room (a split
 * follows), 0 not this case, -1 with an exception (nothing changed). A sibling the cache holds
 * is read from the cache (its LRU place unchanged) and takes its half there, dirty, as the
 * reference's commit leaves it; only the leaf's page is written then. */
static int
shift_into_sibling(const Held *self, PyObject *leaves, const Walk *walk, Decoded *leaf,
                   Py_ssize_t at, int64_t key, PyObject *value)
{
    Py_ssize_t size = self->node_size;
    if (walk->n == 0)
        return 0;
    Parent parent;
    Decoded sibling;
    decoded_init(&sibling);
    int result = -1;
    PyObject *values = NULL, *leaf_page = NULL, *sibling_page = NULL, *cached = NULL;
    uint64_t small[2 * SMALL_WORDS], *keys = NULL;
    Py_ssize_t si = -1;
    if (parent_open(walk, &parent) < 0)
        goto done;
    Py_ssize_t ci = parent.child, n_children = PyList_GET_SIZE(parent.lists.children);
    for (int side = 0; side < 2 && si < 0; side++) {
        Py_ssize_t candidate = side == 0 ? ci - 1 : ci + 1;
        if (candidate < 0 || candidate >= n_children)
            continue;
        Py_ssize_t count = PyLong_AsSsize_t(PyList_GET_ITEM(parent.lists.counts, candidate));
        if (count == -1 && PyErr_Occurred())
            goto done;
        if (count >= size)  /* full by its count: passed over unread, as the reference does */
            continue;
        PyObject *candidate_id = PyList_GET_ITEM(parent.lists.children, candidate);
        cached = Py_XNewRef(PyDict_GetItemWithError(leaves, candidate_id));
        if (cached == NULL && PyErr_Occurred())
            goto done;
        int read = cached != NULL ? decoded_from_cached(cached, candidate_id, &sibling)
                                  : decoded_read(self, candidate_id, &sibling);
        if (read != 1) {
            result = read;
            goto done;
        }
        si = candidate;
    }
    if (si < 0) {
        result = 2;
        goto done;
    }
    /* the entries of both, in key order, with the new one: left's, then right's */
    Decoded *left = si < ci ? &sibling : leaf, *right = si < ci ? leaf : &sibling;
    Py_ssize_t total = left->count + right->count + 1, half = total / 2;
    Py_ssize_t inserted = si < ci ? left->count + at : at;  /* the new entry's place */
    keys = (size_t)total <= sizeof small / sizeof small[0] ? small
        : PyMem_Malloc((size_t)total * sizeof(uint64_t));
    if (keys == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if ((values = PySequence_Concat(left->values, right->values)) == NULL
            || PyList_Insert(values, inserted, value) < 0)
        goto done;
    memcpy(keys, left->keys, (size_t)left->count * sizeof(uint64_t));
    memcpy(keys + left->count, right->keys, (size_t)right->count * sizeof(uint64_t));
    memmove(keys + inserted + 1, keys + inserted, (size_t)(total - 1 - inserted) * sizeof(uint64_t));
    keys[inserted] = (uint64_t)key;
    /* the leaf keeps the half on its side of the sibling, as redistribute leaves them */
    Py_ssize_t leaf_start = si < ci ? half : 0, leaf_stop = si < ci ? total : half;
    Py_ssize_t sibling_start = si < ci ? 0 : half, sibling_stop = si < ci ? half : total;
    if ((leaf_page = encode_part(self, keys, values, leaf_start, leaf_stop)) == NULL
            || (sibling_page = leaf_page == Py_None || cached != NULL ? Py_NewRef(Py_None)
                : encode_part(self, keys, values, sibling_start, sibling_stop)) == NULL)
        goto done;
    if (leaf_page == Py_None || (sibling_page == Py_None && cached == NULL)) {
        result = 0;
        goto done;
    }
    if (cached != NULL) {
        if (rewrite_leaf(self, leaf->recid, leaf_page, leaf->size) < 0
                || cached_takes(cached, keys, values, sibling_start, sibling_stop) < 0)
            goto done;
    }
    else if (rewrite_two(self, leaf->recid, leaf_page, leaf, sibling.recid, sibling_page,
                         sibling.size) < 0)
        goto done;
    /* both leaves are stored: what follows only fails on a damaged tree or without memory */
    int64_t word = separator_between((int64_t)keys[half - 1], (int64_t)keys[half]);
    Py_ssize_t between = si < ci ? si : ci;
    PyObject *separator = PyLong_FromLongLong(word);
    if (separator == NULL || PyList_SetItem(parent.lists.keys, between, separator) < 0)
        goto done;
    descent_separator_set(self->descent, parent.recid, between, word);
    if (count_steps(self, walk->steps, walk->n, 1) < 0
            || set_number(parent.lists.counts, ci, si < ci ? total - half : half) < 0
            || set_number(parent.lists.counts, si, si < ci ? half : total - half) < 0
            || hint_forget(self) < 0)
        goto done;
    result = 1;
done:
    if (keys != small)
        PyMem_Free(keys);
    Py_XDECREF(values);
    Py_XDECREF(leaf_page);
    Py_XDECREF(sibling_page);
    Py_XDECREF(cached);
    decoded_close(&sibling);
    parent_close(&parent);
    return result;
}

/* Release a record reserved for a split that did not happen; the error set (if any) stays. */
static void
release_reserved(const Held *self, PyObject *reserved)
{
    PyObject *type, *error, *trace;
    PyErr_Fetch(&type, &error, &trace);
    PyObject *args[] = {self->nodes, reserved};
    PyObject *released = PyObject_VectorcallMethod(str_release, args,
                                                   2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_XDECREF(released);
    if (type != NULL) {
        PyErr_Clear();
        PyErr_Restore(type, error, trace);
    }
}

/* slots.h */
int
count_new_nodes(const Held *self, long inner)
{
    PyObject *shape = PyObject_GetAttr(self->tree, str_shape);
    PyObject *one = shape == NULL ? NULL : PyLong_FromLong(1);
    PyObject *more = one == NULL ? NULL : PyLong_FromLong(inner);
    PyObject *names = more == NULL ? NULL : PyTuple_Pack(2, str_leaves_name, str_inner_name);
    PyObject *args[] = {shape, one, more};
    PyObject *grown = names == NULL ? NULL
        : PyObject_VectorcallMethod(str_with_nodes, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                    names);
    int status = grown == NULL ? -1 : PyObject_SetAttr(self->tree, str_public_shape, grown);
    Py_XDECREF(shape);
    Py_XDECREF(one);
    Py_XDECREF(more);
    Py_XDECREF(names);
    Py_XDECREF(grown);
    return status;
}

/* The sum of a list of entry counts (n_entries of an Inner) in *total: 0, or -1 with an
 * exception. */
static int
sum_counts(PyObject *counts, Py_ssize_t *total)
{
    *total = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(counts); i++) {
        Py_ssize_t count = PyLong_AsSsize_t(PyList_GET_ITEM(counts, i));
        if (count == -1 && PyErr_Occurred())
            return -1;
        *total += count;
    }
    return 0;
}

/* slots.h */
int
split_inner(PyObject *node, const NodeLists *lists, Py_ssize_t child, PyObject *sibling_id,
            const NodeLists *grand, Py_ssize_t grand_child, PyObject **sibling,
            int64_t *middle_word)
{
    Py_ssize_t n = PyList_GET_SIZE(lists->children);
    Py_ssize_t cut = child + 1 == n - 1 ? n - 2 : child == 0 ? 2 : n / 2;
    PyObject *keys = NULL, *children = NULL, *counts = NULL, *middle = NULL;
    Py_ssize_t left_total, right_total;
    int result = -1;
    *sibling = NULL;
    if (grand_child < 0 || grand_child >= PyList_GET_SIZE(grand->children)) {
        page_corrupt("a TreeMap path names a child its node lacks");
        goto done;
    }
    if ((keys = PyList_GetSlice(lists->keys, cut, n)) == NULL
            || (children = PyList_GetSlice(lists->children, cut, n)) == NULL
            || (counts = PyList_GetSlice(lists->counts, cut, n)) == NULL)
        goto done;
    middle = Py_NewRef(PyList_GET_ITEM(lists->keys, cut - 1));
    *middle_word = PyLong_AsLongLong(middle);
    if ((*middle_word == -1 && PyErr_Occurred())
            || PyList_SetSlice(lists->keys, cut - 1, n, NULL) < 0
            || PyList_SetSlice(lists->children, cut, n, NULL) < 0
            || PyList_SetSlice(lists->counts, cut, n, NULL) < 0
            || sum_counts(lists->counts, &left_total) < 0 || sum_counts(counts, &right_total) < 0)
        goto done;
    if ((*sibling = PyObject_CallFunctionObjArgs((PyObject *)Py_TYPE(node), sibling_id, keys,
                                                 children, counts, NULL)) == NULL)
        goto done;
    PyObject *right_count = PyLong_FromSsize_t(right_total);
    int edited = right_count == NULL ? -1
        : PyList_Insert(grand->counts, grand_child + 1, right_count);
    Py_XDECREF(right_count);
    if (edited < 0 || PyList_Insert(grand->keys, grand_child, middle) < 0
            || PyList_Insert(grand->children, grand_child + 1, sibling_id) < 0
            || set_number(grand->counts, grand_child, left_total) < 0)
        goto done;
    result = 0;
done:
    if (result < 0)
        Py_CLEAR(*sibling);
    Py_XDECREF(keys);
    Py_XDECREF(children);
    Py_XDECREF(counts);
    Py_XDECREF(middle);
    return result;
}

/* Split `parent`, full by one child after the split of its child, as split_inner does, the
 * parent's own parent being the walk's step n - 2 (which has room); the three are dirty, the new
 * one cached (NodeCache.add), and the forms follow (the parent's dropped, its parent's edited,
 * or dropped when the edit failed). The leaf pages are stored already: this only fails on
 * a damaged tree or without memory. 0, or -1 with an exception. */
static int
split_parent(const Held *self, const Walk *walk, const Parent *parent, PyObject *sibling_id)
{
    const WalkStep *up = &walk->steps[walk->n - 2];
    NodeLists above;
    PyObject *sibling = NULL, *added = NULL;
    int64_t middle_word, sibling_word = PyLong_AsLongLong(sibling_id);
    int result = -1;
    descent_form_drop(self->descent, parent->recid);
    if (sibling_word == -1 && PyErr_Occurred())
        return -1;
    if (nodelists_open(up->node, &above) < 0)
        goto done;
    if (split_inner(parent->node, &parent->lists, parent->child, sibling_id, &above, up->child,
                    &sibling, &middle_word) < 0) {
        descent_form_drop(self->descent, up->recid);  /* perhaps half edited */
        goto done;
    }
    descent_child_inserted(self->descent, up->recid, up->child, middle_word, sibling_word);
    if (PyObject_SetAttr(parent->node, str_dirty, Py_True) < 0
            || PyObject_SetAttr(up->node, str_dirty, Py_True) < 0
            || PyObject_SetAttr(sibling, str_dirty, Py_True) < 0
            || (added = PyObject_CallMethodOneArg(self->cache, str_add, sibling)) == NULL)
        goto done;
    result = 0;
done:
    Py_XDECREF(sibling);
    Py_XDECREF(added);
    nodelists_close(&above);
    return result;
}

static SlotField room_children = SLOT_FIELD("children");

/* Whether inner `node` has room for one more child: 1, 0, -1 with an exception. */
static int
has_room_for_child(PyObject *node, Py_ssize_t node_size)
{
    PyObject *children = node_list(node, &room_children);
    if (children == NULL)
        return -1;
    int room = PyList_GET_SIZE(children) < node_size;
    Py_DECREF(children);
    return room;
}

/* Insert key -> value at `at` of the full `leaf` by splitting it when its parent has room, or
 * when the parent is full and its own parent has room, splitting the parent too
 * (Rebalancer._split_insert): 1 done, 0 not this case, -1 with an exception (nothing changed). */
static int
split_around(const Held *self, const Walk *walk, Decoded *leaf, Py_ssize_t at, int64_t key,
             PyObject *value)
{
    Py_ssize_t size = self->node_size;
    if (walk->n == 0)  /* the root splits: a new root, the reference's */
        return 0;
    Parent parent;
    int result = -1;
    PyObject *reserved = NULL, *left_page = NULL, *right_page = NULL;
    if (parent_open(walk, &parent) < 0)
        goto done;
    Py_ssize_t ci = parent.child;
    int parent_splits = PyList_GET_SIZE(parent.lists.children) >= size;
    if (parent_splits) {  /* the reference's when its parent is the root or full too */
        int room = walk->n < 2 ? 0 : has_room_for_child(walk->steps[walk->n - 2].node, size);
        if (room != 1) {
            result = room;
            goto done;
        }
    }
    /* the new entry in, then the cut: an append at the end keeps node_size entries on the
     * left (ascending keys), an insert at the start one (the leaf is this change's copy) */
    memmove(leaf->keys + at + 1, leaf->keys + at, (size_t)(leaf->count - at) * sizeof(uint64_t));
    leaf->keys[at] = (uint64_t)key;
    leaf->count++;
    if (PyList_Insert(leaf->values, at, value) < 0)
        goto done;
    Py_ssize_t total = leaf->count, cut = at == size ? size : at == 0 ? 1 : (size + 1) / 2;
    if ((left_page = encode_part(self, leaf->keys, leaf->values, 0, cut)) == NULL
            || (right_page = left_page == Py_None ? Py_NewRef(Py_None)
                : encode_part(self, leaf->keys, leaf->values, cut, total)) == NULL)
        goto done;
    if (left_page == Py_None || right_page == Py_None) {  /* declined: no record was reserved, */
        result = 0;                                       /* so the reference reserves the same */
        goto done;
    }
    if ((reserved = reserve_records(self->nodes, 1 + parent_splits)) == NULL)
        goto done;
    /* the leaf's new half takes the last record reserved, as the reference pops it first */
    PyObject *right_id = PyList_GET_ITEM(reserved, parent_splits);
    int64_t right_word = PyLong_AsLongLong(right_id);
    if (right_word == -1 && PyErr_Occurred())
        goto release;
    if (rewrite_two(self, leaf->recid, left_page, leaf, right_id, right_page, 0) < 0)
        goto release;
    /* both leaves are stored: what follows only fails on a damaged tree or without memory */
    int64_t word = separator_between((int64_t)leaf->keys[cut - 1], (int64_t)leaf->keys[cut]);
    PyObject *separator = PyLong_FromLongLong(word);
    int edited = separator == NULL ? -1 : PyList_Insert(parent.lists.keys, ci, separator);
    Py_XDECREF(separator);
    PyObject *right_count = edited < 0 ? NULL : PyLong_FromSsize_t(total - cut);
    edited = right_count == NULL ? -1 : PyList_Insert(parent.lists.counts, ci + 1, right_count);
    Py_XDECREF(right_count);
    if (edited == 0)
        edited = PyList_Insert(parent.lists.children, ci + 1, right_id);
    if (edited < 0) {  /* the parent is half edited (no memory): its form goes */
        descent_form_drop(self->descent, parent.recid);
        goto done;
    }
    if (parent_splits) {
        if (set_number(parent.lists.counts, ci, cut) < 0
                || split_parent(self, walk, &parent, PyList_GET_ITEM(reserved, 0)) < 0
                || count_steps(self, walk->steps, walk->n - 2, 1) < 0
                || count_new_nodes(self, 1) < 0 || hint_forget(self) < 0)
            goto done;
        result = 1;
        goto done;
    }
    descent_child_inserted(self->descent, parent.recid, ci, word, right_word);
    if (count_steps(self, walk->steps, walk->n, 1) < 0
            || set_number(parent.lists.counts, ci, cut) < 0
            || count_new_nodes(self, 0) < 0 || hint_forget(self) < 0)
        goto done;
    result = 1;
    goto done;
release:
    release_reserved(self, reserved);
done:
    Py_XDECREF(reserved);
    Py_XDECREF(left_page);
    Py_XDECREF(right_page);
    parent_close(&parent);
    return result;
}

/* -- the entry points ------------------------------------------------------------------------- */

enum { LEAF_CACHED = 2, KEY_KEPT = 4 };

/* Read leaf `recid` into the cache as Tree.put's and Tree.pop's descent reads it
 * (NodeCache.leaf): LEAF_CACHED, or -1 with an exception. `past_capacity`: the cache's leaves
 * were at capacity (its least recently used leaf is clean), so the cache is now over it, and
 * marked so: the next operation trims it first, writing nothing. */
static int
cache_walked_leaf(const Held *self, PyObject *recid, int past_capacity)
{
    PyObject *loaded = descent_cache_leaf(self->descent, recid);
    if (loaded == Py_None)
        Py_SETREF(loaded, PyObject_CallMethodOneArg(self->cache, str_leaf, recid));
    else if (loaded != NULL && past_capacity && mark_over_capacity(self->cache) < 0)
        Py_CLEAR(loaded);
    Py_XDECREF(loaded);
    return loaded == NULL ? -1 : LEAF_CACHED;
}

/* A change around the cache in progress: its key, walk and decoded leaf. */
typedef struct {
    int64_t word;
    Walk walk;
    PyObject *leaves;      /* the cache's leaves, a new reference (NULL before the walk) */
    Decoded leaf;
    int marked;            /* the walk read the leaf in past capacity (around_open) */
} Change;

/* For a store that keeps a present key (Held.keep_present), after the walk that left the LRU
 * order as it was: whether the walked leaf (record `recid`) holds `key`, as the reference reads
 * it (Cursor.peek: the cached leaf where the cache holds it, else its page, nothing cached):
 * descent_leaf_holds, or for int64 keys of a leaf not cached the keys of its page decoded into
 * the change's leaf, which the store then goes on with. KEY_KEPT when it does (nothing changed); else the
 * walk's inner nodes become the most recently used, as the store's descent leaves them, and 1
 * (the leaf decoded, values too, when it was read). 0 when the Python path must read the leaf (a
 * page the reference reads), -1 with an exception. */
static int
kept_present(const Held *self, PyObject *key, Change *change, int64_t recid, int cached)
{
    int present;
    if (cached || self->key_kind != 0)
        present = descent_leaf_holds(self->descent, recid, key);
    else {
        Py_ssize_t at;
        int status = decoded_keys(self, change->walk.leaf, &change->leaf);
        if (status != 1)
            return status;
        present = decoded_find(&change->leaf, change->word, &at);
        if (present == 0 && (status = decoded_values(self, &change->leaf)) != 1)
            return status;
    }
    if (present != 0)
        return present < 0 ? -1 : KEY_KEPT;
    return descent_walk_touch(self->descent, change->walk.steps, change->walk.n) < 0 ? -1 : 1;
}

/* Walk to the leaf of `key` (of the key type, an int in int64's range, its word in
 * change->word) as Tree.put and Tree.pop do (descent_walk) and, when its change goes around the
 * cache, decode it into change->leaf (int64 keys only: Decoded holds int64 words; for str and
 * bytes keys that change is Python's): 1; LEAF_CACHED when the cache holds the leaf, or now
 * holds it (cache_walked_leaf: read in as NodeCache.leaf reads it for the reference's descent,
 * with room, or past capacity and marked so when the least recently used leaf is clean: then
 * change->marked is 1); KEY_KEPT when the store keeps a present key and the leaf holds it
 * (kept_present: nothing changed); 0 when none of these (nothing changed but the walked inner
 * nodes' LRU places, which the Python path's walk gives them again), -1 with an exception.
 * change_end closes the change either way. */
static int
around_open(const Held *self, PyObject *key, Change *change)
{
    Walk *walk = &change->walk;
    int status, decoded = 0;
    int64_t recid;
    if ((status = over_capacity(self->cache)) != 0)  /* the Python path trims first */
        return status < 0 ? -1 : 0;
    if ((status = descent_walk(self->descent, key, walk->steps, &walk->n, &recid,
                               !self->keep_present)) != 1)
        return status;
    /* set: the walk checked the Descent */
    change->leaves = Py_NewRef(descent_leaves(self->descent));
    if (walk->n == 0)  /* a single leaf: the root, which stays cached */
        return 0;
    if ((walk->leaf = PyLong_FromLongLong(recid)) == NULL)
        return -1;
    int cached = PyDict_Contains(change->leaves, walk->leaf);
    if (cached < 0)
        return -1;
    if (self->keep_present) {
        if ((status = kept_present(self, key, change, recid, cached)) != 1)
            return status;
        decoded = !cached;
    }
    if (cached)
        return LEAF_CACHED;
    if ((status = goes_around(self, change->leaves)) < 0)
        return -1;
    if (status != 1) {
        change->marked = status == 0;
        return cache_walked_leaf(self, walk->leaf, status == 0);
    }
    if (self->key_kind != 0)
        return 0;
    return decoded ? 1 : decoded_read(self, walk->leaf, &change->leaf);
}

/* Store the whole of `leaf` as its record, then make the hint name no leaf: 1, 0 when the codec
 * declines the page (nothing changed), -1 with an exception (nothing changed). */
static int
around_write(const Held *self, Decoded *leaf)
{
    PyObject *page = encode_part(self, leaf->keys, leaf->values, 0, leaf->count);
    if (page == NULL || page == Py_None) {
        Py_XDECREF(page);
        return page == NULL ? -1 : 0;
    }
    int status = rewrite_leaf(self, leaf->recid, page, leaf->size);
    Py_DECREF(page);
    if (status < 0 || PyObject_SetAttr(self->hint, str_leaf, Py_None) < 0)
        return -1;
    return 1;
}

/* Whether the tree's keys are int64 and `key` an int in its range (its value in *word). */
static int
int64_key(const Held *self, PyObject *key, int64_t *word)
{
    if (self->key_kind != 0 || !PyLong_CheckExact(key))
        return 0;
    int overflow;
    *word = PyLong_AsLongLongAndOverflow(key, &overflow);
    return !overflow;
}

/* Begin the change of `key`, of the key type (around_open; an int key in int64's range): 1 when
 * it goes around the cache (int64 keys only: a change of str or bytes keys around the cache is
 * the Python path's), LEAF_CACHED when its leaf is cached, KEY_KEPT when a store that keeps a
 * present key found it, 0 none of these, -1 with an exception; change_end follows either way. */
static int
change_begin(const Held *self, PyObject *key, Change *change)
{
    change->walk.n = 0;
    change->walk.leaf = NULL;
    change->leaves = NULL;
    change->marked = 0;
    decoded_init(&change->leaf);
    if (self->key_kind == 0 && !int64_key(self, key, &change->word))
        return 0;
    return around_open(self, key, change);
}

/* The change's leaf is cached: make it the most recently used and the hint's leaf, as
 * Tree.put's and Tree.pop's descent (NodeCache.leaf, Cursor.descend) leave them, for
 * store_in_hint or delete_in_hint to change it in the cache. 0, or -1 with an exception. */
static int
hint_at_cached(const Held *self, const Change *change)
{
    PyObject *leaf = PyDict_GetItemWithError(change->leaves, change->walk.leaf);  /* borrowed */
    if (leaf == NULL)
        return PyErr_Occurred() ? -1 : page_corrupt("a cached TreeMap leaf left the cache");
    Py_INCREF(leaf);
    PyObject *moved = PyObject_CallMethodOneArg(change->leaves, str_move_to_end,
                                                change->walk.leaf);
    int status = moved == NULL ? -1
        : hint_at_leaf(self, change->walk.steps, change->walk.n, leaf);
    Py_XDECREF(moved);
    Py_DECREF(leaf);
    return status;
}

/* The result of the in-cache change (store_in_hint, delete_in_hint) of a cached leaf: as it is,
 * but a change left to the Python method after the walk read the leaf in past capacity is
 * CHANGE_IN_PYTHON_THEN_MARK, the cache's mark off (slots.h). */
static int
in_cache_result(const Held *self, const Change *change, int result)
{
    if (result != 0 || !change->marked)
        return result;
    return unmark_over_capacity(self->cache) < 0 ? -1 : CHANGE_IN_PYTHON_THEN_MARK;
}

static int
change_end(Change *change, int result)
{
    decoded_close(&change->leaf);
    walk_close(&change->walk);
    Py_CLEAR(change->leaves);
    return result;
}

int
store_around(const Held *self, PyObject *key, PyObject *value)
{
    Change change;
    int result = change_begin(self, key, &change);
    if (result == KEY_KEPT)
        return change_end(&change, 1);
    if (result == LEAF_CACHED)  /* changed in the cache, as Tree.put changes the hint's leaf */
        return change_end(&change, hint_at_cached(self, &change) < 0 ? -1
                                   : in_cache_result(self, &change,
                                                     store_in_hint(self, key, value)));
    if (result != 1)
        return change_end(&change, result);
    Decoded *leaf = &change.leaf;
    int64_t word = change.word;
    Py_ssize_t at;
    int found = decoded_find(leaf, word, &at);
    if (found) {
        if (PyList_SetItem(leaf->values, at, Py_NewRef(value)) < 0)
            return change_end(&change, -1);
    }
    else if (leaf->count >= self->node_size) {  /* full: a sibling takes some, or a split */
        result = shift_into_sibling(self, change.leaves, &change.walk, leaf, at, word, value);
        if (result == 2)
            result = split_around(self, &change.walk, leaf, at, word, value);
        return change_end(&change, result);
    }
    else {
        if (PyList_Insert(leaf->values, at, value) < 0)
            return change_end(&change, -1);
        memmove(leaf->keys + at + 1, leaf->keys + at, (size_t)(leaf->count - at) * sizeof(uint64_t));
        leaf->keys[at] = (uint64_t)word;
        leaf->count++;
    }
    if ((result = around_write(self, leaf)) == 1 && !found
            && count_steps(self, change.walk.steps, change.walk.n, 1) < 0)
        result = -1;
    return change_end(&change, result);
}

int
delete_around(const Held *self, PyObject *key)
{
    Change change;
    int result = change_begin(self, key, &change);
    if (result == LEAF_CACHED)  /* changed in the cache, as Tree.pop changes the hint's leaf */
        return change_end(&change, hint_at_cached(self, &change) < 0 ? -1
                                   : in_cache_result(self, &change, delete_in_hint(self, key)));
    if (result != 1)
        return change_end(&change, result);
    Decoded *leaf = &change.leaf;
    Py_ssize_t at, min_entries = self->node_size / 4 > 1 ? self->node_size / 4 : 1;
    if (!decoded_find(leaf, change.word, &at) || leaf->count - 1 < min_entries)
        return change_end(&change, 0);  /* absent, or an underflow: the reference */
    if (PySequence_DelItem(leaf->values, at) < 0)
        return change_end(&change, -1);
    memmove(leaf->keys + at, leaf->keys + at + 1, (size_t)(leaf->count - at - 1) * sizeof(uint64_t));
    leaf->count--;
    if ((result = around_write(self, leaf)) == 1
            && count_steps(self, change.walk.steps, change.walk.n, -1) < 0)
        result = -1;
    return change_end(&change, result);
}
