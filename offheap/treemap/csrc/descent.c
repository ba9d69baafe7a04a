/* offheap.treemap._pages.Descent: the compiled read path of a TreeMap's B+tree (layer 6).
 *
 * A Descent walks from the root to a leaf and answers a read there without building the leaf's
 * Python lists: get, the neighbour queries (floor, lower, ceiling, higher), the position of a
 * key and the entry at a position. It is the twin of offheap.treemap.cursor's descents plus the
 * bisect the tree's facade runs on the leaf, and gives the same answers.
 *
 * Nodes. An inner node is read through its compact form (forms.c: its separators and child
 * record ids as C arrays, kept in this Descent's table by record id), made from the NodeCache's
 * Inner at the first read of it: a cached Inner is read in place (its LRU place does not move),
 * an uncached one is decoded and cached by cache.inner(recid), as a Python descent does. The
 * node cache drops a form when its Inner leaves the cache or a structural change edits it
 * (forget, forget_all), and the entry counts are read from the live Inner, so a form is never
 * stale. A leaf is the cached Leaf when there is one (dirty leaves live only there, so the cache
 * is always consulted first). An uncached leaf is decoded and cached while the cache's leaves are
 * below their capacity (descent_leaves_have_room, then descent_cache_leaf: the Leaf that
 * cache.leaf_for_read would make, made here from a raw page), so a map whose leaves
 * fit in the cache is read from decoded leaves after the first read of each; no read evicts
 * anything. Past that, its page is copied out of the record store (the memoryviews
 * _addr_at/_size_at of the store's index arrays, which are cheaper to take a buffer of than the
 * arrays, and its segment views, as RecordStore.view reads them) and searched here: int64 keys are
 * decoded into a C array and bisected, str/bytes keys into a list, and only the value asked for
 * becomes an object; the cache stays as it is, as NodeCache.read_leaf leaves it. A page this code
 * does not read (compressed, or an object column of the constant or mixed forms) is handed to
 * cache.read_leaf(recid), whose Leaf is then used the same way.
 *
 * Pickled values. The columns read here hold no pickles (those are the mixed and constant forms,
 * read through the cache), and a value taken from a Leaf is returned as the Leaf holds it: a
 * pickled one as its placeholder (offheap.store.pickled), which the TreeMap facade unpickles
 * or refuses, as it does for the Python descent. So no path here ever unpickles.
 *
 * Lifetime and damage. Store buffers are held only while a page is copied (no Python code runs
 * then); every recid, position and size is checked against the index and the segment, and the
 * copy is decoded with the checks of the page codec, so a damaged page raises CorruptionError,
 * never reads out of bounds. Lists of cached nodes are held by strong references and indexed
 * with their size re-read, and each level holds a reference to its form, so a node changing
 * under a call cannot make it read freed memory.
 *
 * Thread safety: none of its own; the tree's lock covers every call (the GIL is held).
 */
#include "pages.h"
#include "records.h"

#define SMALL_PAGE_BYTES 2048   /* pages up to this size are copied onto the C stack */
#define SMALL_LEAF_ENTRIES 256  /* int64 keys of leaves up to this size are decoded there */

enum { KEY_INT64 = 0, KEY_STR = 1, KEY_BYTES = 2 };

typedef struct {
    PyObject_HEAD
    PyObject *inner_nodes;  /* the cache's OrderedDict of Inner nodes by recid */
    PyObject *move_inner;   /* its bound move_to_end, which a change's walk calls per level */
    PyObject *leaves;       /* the cache's OrderedDict of Leaf nodes by recid */
    PyObject *load_inner;   /* cache.inner: decode, cache and return an inner node */
    PyObject *read_leaf;    /* cache.read_leaf: a leaf for this read alone */
    PyObject *load_leaf;    /* cache.leaf_for_read: a leaf, cached while there is room */
    PyObject *store;        /* the RecordStore holding the pages */
    RecordSource records;   /* the store's arrays, kept between page reads (records.h) */
    int key_kind;
    int value_kind;
    int64_t root;           /* the tree's shape as the Tree last set it (set_shape); height 0: */
    Py_ssize_t height;      /* not set yet, and lookup() refuses to run */
    FormTable forms;        /* compact forms of cached inner nodes (forms.c) */
    /* what NodeCache._leaf_cap computes the leaves' capacity from beside the cached inner
     * nodes (NodeCache.leaf_cap_terms, fixed at the cache's creation) */
    Py_ssize_t cap_budget, cap_inner_cost, cap_leaf_cost, cap_inner_kept, cap_nodes;
} Descent;

static PyTypeObject descent_type;
static int ready(Descent *self);

static SlotField level_counts_field = SLOT_FIELD("counts"), leaf_keys_field = SLOT_FIELD("keys"),
    leaf_values_field = SLOT_FIELD("values");

/* -- inner nodes ----------------------------------------------------------------------------- */

/* One level of a descent: the form of an inner node (a reference held) and the child taken. */
typedef struct {
    InnerForm *form;
    Py_ssize_t child;
} Level;

static void
level_clear(Level *level)
{
    form_release(level->form);
    level->form = NULL;
}

/* The form of inner node `recid` into `level` (child unset): the table's, or one made from the
 * cached Inner (decoded and cached by cache.inner if need be) and kept in the table. */
static int
inner_open(Descent *self, int64_t recid, Level *level)
{
    InnerForm *form = form_table_find(&self->forms, recid);
    if (form == NULL) {
        PyObject *key = PyLong_FromLongLong(recid), *node = NULL;
        if (key == NULL)
            return -1;
        node = PyDict_GetItemWithError(self->inner_nodes, key);
        if (node != NULL)
            Py_INCREF(node);
        else if (!PyErr_Occurred())
            node = PyObject_CallOneArg(self->load_inner, key);
        Py_DECREF(key);
        if (node == NULL)
            return -1;
        form = form_make(recid, node, self->key_kind);
        Py_DECREF(node);
        if (form == NULL)
            return -1;
        if (form_table_insert(&self->forms, form) < 0) {
            form_release(form);
            return -1;
        }
    }
    form->refs++;
    level->form = form;
    return 0;
}

/* The child `level->child` (< the form's n) of a level. */
static int64_t
level_child(const Level *level)
{
    return level->form->children[level->child];
}

/* The live entry counts of a level's Inner (a new reference), one per child of its form. */
static PyObject *
level_counts(const Level *level)
{
    PyObject *counts = node_list(level->form->node, &level_counts_field);
    if (counts != NULL && PyList_GET_SIZE(counts) != level->form->n) {
        page_corrupt("TreeMap inner node %lld has %zd children and %zd entry counts",
                     (long long)level->form->recid, level->form->n, PyList_GET_SIZE(counts));
        Py_CLEAR(counts);
    }
    return counts;
}

/* -- keys ------------------------------------------------------------------------------------ */

/* The key of a call: the object, and its int64 value (int64 trees) or its 8-byte prefix (str,
 * bytes: forms.c). */
typedef struct {
    PyObject *object;
    int64_t word;
    uint64_t prefix;
} Key;

/* 0: `object` is a key of the tree's kind; 1: an int outside int64, which no key equals; -1:
 * TypeError for any other object. */
static int
key_of(Descent *self, PyObject *object, Key *key)
{
    key->object = object;
    if (self->key_kind == KEY_INT64) {
        int overflow;
        if (!PyLong_CheckExact(object))
            goto wrong_type;
        key->word = PyLong_AsLongLongAndOverflow(object, &overflow);
        if (overflow)
            return 1;
        return key->word == -1 && PyErr_Occurred() ? -1 : 0;
    }
    if (self->key_kind == KEY_STR && PyUnicode_CheckExact(object)) {
        key->prefix = str_prefix(object);
        return 0;
    }
    if (self->key_kind == KEY_BYTES && PyBytes_CheckExact(object)) {
        key->prefix = bytes_prefix((const unsigned char *)PyBytes_AS_STRING(object),
                                   PyBytes_GET_SIZE(object));
        return 0;
    }
wrong_type:
    PyErr_Format(PyExc_TypeError, "a Descent key must be an exact %s, not %.100s",
                 self->key_kind == KEY_INT64 ? "int" : self->key_kind == KEY_STR ? "str" : "bytes",
                 Py_TYPE(object)->tp_name);
    return -1;
}

/* key_of for the methods whose keys were checked to lie in int64: OverflowError outside. */
static int
checked_key(Descent *self, PyObject *object, Key *key)
{
    int status = key_of(self, object, key);
    if (status > 0) {
        PyErr_SetString(PyExc_OverflowError, "an int64 TreeMap key is outside int64");
        return -1;
    }
    return status;
}

/* Whether `item` (a key of a node) is below `key` (below: 1, not: 0, error: -1); `reversed`
 * asks whether `key` is below `item` instead. */
static int
item_below(Descent *self, PyObject *item, const Key *key, int reversed)
{
    if (self->key_kind == KEY_INT64) {
        int overflow;
        if (!PyLong_CheckExact(item))
            return page_corrupt("an int64 TreeMap node holds a %.100s key", Py_TYPE(item)->tp_name);
        long long word = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (overflow || (word == -1 && PyErr_Occurred()))
            return overflow ? page_corrupt("an int64 TreeMap node holds a key outside int64") : -1;
        return reversed ? key->word < word : word < key->word;
    }
    Py_INCREF(item);
    int below = reversed ? PyObject_RichCompareBool(key->object, item, Py_LT)
                         : PyObject_RichCompareBool(item, key->object, Py_LT);
    Py_DECREF(item);
    return below;
}

/* bisect_right (right 1) or bisect_left (0) of `key` in the list `items`; -1 on error. */
static Py_ssize_t
bisect_list(Descent *self, PyObject *items, const Key *key, int right)
{
    Py_ssize_t lo = 0, hi = PyList_GET_SIZE(items);
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (mid >= PyList_GET_SIZE(items))
            return page_corrupt("a TreeMap node changed during a read");
        /* right: go left when key < item; left: go right when item < key */
        int below = item_below(self, PyList_GET_ITEM(items, mid), key, right);
        if (below < 0)
            return -1;
        if (right ? below : !below)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* bisect_right (right 1) or bisect_left (0) of `key` in the separators of an inner node's form;
 * -1 on error. Words decide alone for int64 keys, and for str/bytes keys whose prefixes differ. */
static Py_ssize_t
form_bisect_side(Descent *self, const InnerForm *form, const Key *key, int right)
{
    const uint64_t *words = form->words;
    Py_ssize_t lo = 0, hi = form->n - 1;
    if (self->key_kind == KEY_INT64) {
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (right ? key->word < (int64_t)words[mid] : key->word <= (int64_t)words[mid])
                hi = mid;
            else
                lo = mid + 1;
        }
        return lo;
    }
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        int below = right ? key->prefix < words[mid] : key->prefix <= words[mid];
        if (key->prefix == words[mid]
                && (below = PyObject_RichCompareBool(key->object, form->separators[mid],
                                                     right ? Py_LT : Py_LE)) < 0)
            return -1;
        if (below)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* bisect_right of `key` in the separators of a form. */
static Py_ssize_t
form_bisect(Descent *self, const InnerForm *form, const Key *key)
{
    return form_bisect_side(self, form, key, 1);
}

/* Separator `i` of a form as a new key object. */
static PyObject *
form_separator(Descent *self, const InnerForm *form, Py_ssize_t i)
{
    if (self->key_kind == KEY_INT64)
        return PyLong_FromLongLong((int64_t)form->words[i]);
    return Py_NewRef(form->separators[i]);
}

/* -- leaves ---------------------------------------------------------------------------------- */

/* A leaf being read: a Leaf's lists, or a page copied out of the store and its decoded keys. */
typedef struct {
    PyObject *recid;       /* strong */
    PyObject *keys;        /* strong: the str/bytes keys of a Leaf or a page; NULL for int64 keys */
    PyObject *values;      /* strong: the Leaf's values; NULL for a page */
    Py_ssize_t count;
    uint64_t *words;       /* int64 keys of a page or a Leaf (small_words or PyMem) */
    uint8_t *page;         /* the page copy (small_page or PyMem) */
    PageReader value_column;
    uint64_t small_words[SMALL_LEAF_ENTRIES];
    uint8_t small_page[SMALL_PAGE_BYTES];
} Leaf;

/* A leaf that holds nothing yet (leaf_close may follow); the scratch arrays stay unset. */
static void
leaf_init(Leaf *leaf)
{
    leaf->recid = leaf->keys = leaf->values = NULL;
    leaf->words = NULL;
    leaf->page = NULL;
    leaf->count = 0;
}

static void
leaf_close(Leaf *leaf)
{
    Py_CLEAR(leaf->recid);
    Py_CLEAR(leaf->keys);
    Py_CLEAR(leaf->values);
    if (leaf->words != leaf->small_words)
        PyMem_Free(leaf->words);
    if (leaf->page != leaf->small_page)
        PyMem_Free(leaf->page);
    leaf->words = NULL;
    leaf->page = NULL;
}

/* Room for `count` int64 keys in leaf->words (the stack array when they fit), dropping any. */
static int
leaf_words_reserve(Leaf *leaf, Py_ssize_t count)
{
    if (leaf->words != leaf->small_words)
        PyMem_Free(leaf->words);
    leaf->words = count <= SMALL_LEAF_ENTRIES ? leaf->small_words
                                              : PyMem_Malloc(sizeof(uint64_t) * (size_t)count);
    if (leaf->words == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* The keys of a Leaf's key column into the leaf: an int64 column's words are copied into
 * leaf->words (so no buffer stays open while Python code may run), a list is held. */
static int
leaf_take_keys(Leaf *leaf, PyObject *column)
{
    if (!is_int64_column(column)) {
        leaf->keys = Py_NewRef(column);
        leaf->count = PyList_GET_SIZE(column);
        return 0;
    }
    KeyWords words;
    if (key_words_open(column, &words) < 0)
        return -1;
    int status = leaf_words_reserve(leaf, words.count);
    if (status == 0) {
        memcpy(leaf->words, words.words, (size_t)words.count * sizeof(uint64_t));
        leaf->count = words.count;
    }
    key_words_close(&words);
    return status;
}

/* Take the keys and values of a Leaf object (a new reference, consumed; NULL: the error of the
 * call that gave it). */
static int
leaf_take_node(Leaf *leaf, PyObject *node)
{
    if (node == NULL)
        return -1;
    PyObject *keys = node_key_column(node, &leaf_keys_field);
    leaf->values = keys ? node_list(node, &leaf_values_field) : NULL;
    Py_DECREF(node);
    int status = leaf->values == NULL ? -1 : leaf_take_keys(leaf, keys);
    Py_XDECREF(keys);
    if (status < 0)
        return -1;
    if (PyList_GET_SIZE(leaf->values) != leaf->count)
        return page_corrupt("TreeMap leaf %S has %zd keys and %zd values", leaf->recid,
                            leaf->count, PyList_GET_SIZE(leaf->values));
    return 0;
}

/* The Leaf that cache.read_leaf gives (a compressed page, or one the reference decodes). */
static int
leaf_from_reference(Descent *self, Leaf *leaf)
{
    Py_CLEAR(leaf->keys);
    Py_CLEAR(leaf->values);
    return leaf_take_node(leaf, PyObject_CallOneArg(self->read_leaf, leaf->recid));
}

int
copy_record_page(PyObject *store, RecordSource *source, PyObject *recid_object, uint8_t *small,
                 Py_ssize_t small_size, uint8_t **page_out, Py_ssize_t *size_out)
{
    long long recid = PyLong_Check(recid_object) ? PyLong_AsLongLong(recid_object) : -1;
    if (recid == -1 && PyErr_Occurred())
        return -1;
    RecordRead read;
    if (record_open(store, source, recid, page_corruption_error, &read) < 0)
        return -1;
    int status = -1;
    if (read.size == 0)
        page_corrupt("TreeMap node record %S is empty", recid_object);
    else if (read.data[0] != 0) /* compressed, or not a leaf's flags: the reference decides */
        status = 1;
    else {
        uint8_t *page = read.size <= small_size ? small : PyMem_Malloc(read.size);
        if (page == NULL)
            PyErr_NoMemory();
        else {
            memcpy(page, read.data, read.size);
            *page_out = page;
            *size_out = read.size;
            status = 0;
        }
    }
    record_close(&read);
    return status;
}

/* Copy the page of record `leaf->recid` into the leaf; 1 when it is not a raw leaf page (the
 * reference reads it), 0 when copied, -1 on error. */
static int
copy_page(Descent *self, Leaf *leaf, Py_ssize_t *size_out)
{
    return copy_record_page(self->store, &self->records, leaf->recid, leaf->small_page,
                            SMALL_PAGE_BYTES, &leaf->page, size_out);
}

/* Decode the header and keys of the copied raw leaf page. */
static int
read_page_keys(Descent *self, Leaf *leaf, Py_ssize_t size)
{
    PageReader reader = {leaf->page, size, 1};
    uint64_t count;
    if (read_varint(&reader, &count) < 0)
        return -1;
    if (count > PAGE_MAX_ENTRIES)
        return page_corrupt("page counts %llu entries, more than a page holds (%d): the data "
                            "is corrupt", (unsigned long long)count, PAGE_MAX_ENTRIES);
    leaf->count = (Py_ssize_t)count;
    if (leaf_words_reserve(leaf, leaf->count) < 0)
        return -1;
    if (count == 0) {
        leaf->value_column = reader;
        return 0;
    }
    if (self->key_kind == KEY_INT64) {
        if (read_int64_key_words(&reader, leaf->count, leaf->words) < 0)
            return -1;
    }
    else if ((leaf->keys = read_front_coded(&reader, leaf->count,
                                            self->key_kind == KEY_STR)) == NULL)
        return -1;
    leaf->value_column = reader;
    return 0;
}

static PyObject *leaf_class; /* offheap.treemap.node.Leaf, imported by the first descent_init */
static SlotField new_leaf_raw_field = SLOT_FIELD("raw_bytes"),
    new_leaf_stored_field = SLOT_FIELD("stored_bytes");

/* The Leaf object of the raw page copied into `leaf` (`size` bytes), as NodeStore.load makes it
 * (decode_node: Leaf(recid, key column, values list), both byte sizes the page's); Py_None for
 * a page whose entries the reference decodes (an empty leaf, values the codec declines). */
static PyObject *
new_leaf_node(Descent *self, Leaf *leaf, Py_ssize_t size)
{
    PageReader reader = {leaf->page, size, 1};
    uint64_t count;
    if (read_varint(&reader, &count) < 0)
        return NULL;
    if (count == 0)
        Py_RETURN_NONE;
    PyObject *entries = read_entries(&reader, count > PAGE_MAX_ENTRIES ? PAGE_MAX_ENTRIES + 1
                                                                        : (Py_ssize_t)count,
                                     self->key_kind, self->value_kind, 1);
    if (entries == NULL || entries == Py_None)
        return entries;
    PyObject *args[3] = {leaf->recid, PyTuple_GET_ITEM(entries, 0), PyTuple_GET_ITEM(entries, 1)};
    PyObject *node = PyObject_Vectorcall(leaf_class, args, 3, NULL);
    Py_DECREF(entries);
    PyObject *bytes = node == NULL ? NULL : PyLong_FromSsize_t(size);
    int status = bytes == NULL ? -1
        : (field_set(&new_leaf_raw_field, node, bytes) < 0
           || field_set(&new_leaf_stored_field, node, bytes) < 0) ? -1 : 0;
    Py_XDECREF(bytes);
    if (status < 0)
        Py_CLEAR(node);
    return node;
}

/* Leaf `recid` (an int), which the cache does not hold, read into the cache as its most recent
 * leaf as NodeCache.leaf reads it: decoded here from a raw page as NodeStore.load decodes it.
 * Py_None (nothing cached) for a page the reference decodes (a compressed one, an empty leaf,
 * values the codec declines): the caller asks the cache. Whether the cache is now over capacity
 * is the caller's to mark. A new reference, NULL with an exception (nothing cached then). */
PyObject *
descent_cache_leaf(PyObject *descent, PyObject *recid)
{
    Descent *self = (Descent *)descent;
    Leaf leaf;
    leaf_init(&leaf);
    leaf.recid = Py_NewRef(recid);
    Py_ssize_t size = 0;
    int copied = copy_page(self, &leaf, &size);
    PyObject *node = copied > 0 ? Py_NewRef(Py_None)
                     : copied == 0 ? new_leaf_node(self, &leaf, size) : NULL;
    leaf_close(&leaf);
    if (node != NULL && node != Py_None
            && PyObject_SetItem(self->leaves, recid, node) < 0)  /* the OrderedDict's own */
        Py_CLEAR(node);
    return node;
}

/* A leaf read into the cache while it has room (descent_leaves_have_room): leaf_for_read's. */
static PyObject *
cache_leaf_with_room(Descent *self, PyObject *recid)
{
    PyObject *node = descent_cache_leaf((PyObject *)self, recid);
    if (node == Py_None)
        Py_SETREF(node, PyObject_CallOneArg(self->load_leaf, recid));
    return node;
}

/* Open leaf `recid` for reading; with `may_cache`, a leaf not cached is read into the cache
 * while it has room (NodeCache.leaf_for_read), else it is read as NodeCache.read_leaf does. */
static int
leaf_open_as(Descent *self, int64_t recid, Leaf *leaf, int may_cache)
{
    leaf_init(leaf);
    if ((leaf->recid = PyLong_FromLongLong(recid)) == NULL)
        return -1;
    PyObject *node = PyDict_GetItemWithError(self->leaves, leaf->recid);
    if (node != NULL)
        return leaf_take_node(leaf, Py_NewRef(node));
    if (PyErr_Occurred())
        return -1;
    if (may_cache && descent_leaves_have_room((PyObject *)self))  /* as a Python descent does */
        return leaf_take_node(leaf, cache_leaf_with_room(self, leaf->recid));
    Py_ssize_t size = 0;
    int copied = copy_page(self, leaf, &size);
    if (copied < 0)
        return -1;
    if (copied > 0)
        return leaf_from_reference(self, leaf);
    return read_page_keys(self, leaf, size);
}

static int
leaf_open(Descent *self, int64_t recid, Leaf *leaf)
{
    return leaf_open_as(self, recid, leaf, 1);
}

/* bisect_right (right 1) or bisect_left (0) of `key` in the leaf's keys. */
static Py_ssize_t
leaf_bisect(Descent *self, Leaf *leaf, const Key *key, int right)
{
    if (leaf->keys != NULL)
        return bisect_list(self, leaf->keys, key, right);
    Py_ssize_t lo = 0, hi = leaf->count;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        int64_t word = (int64_t)leaf->words[mid];
        if (right ? key->word < word : !(word < key->word))
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* The key at `i` < count, a new reference. */
static PyObject *
leaf_key(Leaf *leaf, Py_ssize_t i)
{
    if (leaf->keys == NULL)
        return PyLong_FromLongLong((int64_t)leaf->words[i]);
    if (i >= PyList_GET_SIZE(leaf->keys))
        return page_corrupt("a TreeMap leaf changed during a read"), NULL;
    return Py_NewRef(PyList_GET_ITEM(leaf->keys, i));
}

/* Whether the key at `i` equals `key` (1, 0, -1 on error); False past the end. */
static int
leaf_holds(Leaf *leaf, Py_ssize_t i, const Key *key)
{
    if (i >= leaf->count)
        return 0;
    if (leaf->keys == NULL)
        return (int64_t)leaf->words[i] == key->word;
    if (i >= PyList_GET_SIZE(leaf->keys))
        return 0;
    PyObject *item = Py_NewRef(PyList_GET_ITEM(leaf->keys, i));
    int equal = PyObject_RichCompareBool(item, key->object, Py_EQ);
    Py_DECREF(item);
    return equal;
}

/* bisect_left of `key` in the leaf's keys, in *at: 1 when the key is there, 0 when not, -1
 * with an exception. */
static int
leaf_find(Descent *self, Leaf *leaf, const Key *key, Py_ssize_t *at)
{
    *at = leaf_bisect(self, leaf, key, 0);
    return *at < 0 ? -1 : leaf_holds(leaf, *at, key);
}

/* pages.h */
int
descent_leaf_holds(PyObject *descent, int64_t recid, PyObject *key_object)
{
    Descent *self = (Descent *)descent;
    Key key;
    Leaf leaf;
    leaf_init(&leaf);
    int holds = -1;
    Py_ssize_t at;
    if (checked_key(self, key_object, &key) == 0 && leaf_open_as(self, recid, &leaf, 0) == 0)
        holds = leaf_find(self, &leaf, &key, &at);
    leaf_close(&leaf);
    return holds;
}

/* The value at `i` < count, a new reference. */
static PyObject *
leaf_value(Descent *self, Leaf *leaf, Py_ssize_t i)
{
    if (leaf->values == NULL) {
        PageReader column = leaf->value_column;
        PyObject *value = read_value_at(&column, leaf->count, self->value_kind, i, leaf->words);
        if (value != Py_None)
            return value;
        Py_DECREF(value);  /* a column the reference decodes */
        if (leaf_from_reference(self, leaf) < 0)
            return NULL;
    }
    if (i >= PyList_GET_SIZE(leaf->values))
        return page_corrupt("a TreeMap leaf changed during a read"), NULL;
    return Py_NewRef(PyList_GET_ITEM(leaf->values, i));
}

/* -- descents -------------------------------------------------------------------------------- */

/* A path from the root: `n` levels (height - 1), then the leaf: the last level's child, or the
 * root. */
typedef struct {
    Level levels[MAX_HEIGHT];
    int n;
} Path;

static void
path_clear(Path *path)
{
    for (int i = 0; i < path->n; i++)
        level_clear(&path->levels[i]);
    path->n = 0;
}

static int
check_shape(Py_ssize_t height)
{
    if (height < 1 || height > MAX_HEIGHT)
        return page_corrupt("a TreeMap of height %zd: the metadata is corrupt", height);
    return 0;
}

/* The recid the path ends at: its last level's child, or `root` for a leaf root. */
static int64_t
path_end(const Path *path, int64_t root)
{
    return path->n ? level_child(&path->levels[path->n - 1]) : root;
}

/* Descend from level `from` (whose node is `recid`) to the leaf, taking the child of each node
 * that `choose` picks: by key (bisect_right of the separators), first or last child. */
enum { BY_KEY, FIRST_CHILD, LAST_CHILD };

static int
descend_from(Descent *self, Path *path, int64_t recid, Py_ssize_t height, int choose,
             const Key *key)
{
    while (path->n < height - 1) {
        Level *level = &path->levels[path->n];
        if (inner_open(self, recid, level) < 0)
            return -1;
        path->n++;
        if (choose == BY_KEY) {
            if ((level->child = form_bisect(self, level->form, key)) < 0)
                return -1;
        }
        else
            level->child = choose == FIRST_CHILD ? 0 : level->form->n - 1;
        recid = level_child(level);
    }
    return 0;
}

/* Move the path to the next leaf (forward 1) or the previous one (0); 0 moved, 1 no such leaf. */
static int
step_leaf(Descent *self, Path *path, Py_ssize_t height, int forward)
{
    int depth = path->n - 1;
    while (depth >= 0) {
        Level *level = &path->levels[depth];
        Py_ssize_t next = level->child + (forward ? 1 : -1);
        if (next >= 0 && next < level->form->n) {
            level->child = next;
            break;
        }
        depth--;
    }
    if (depth < 0)
        return 1;
    while (path->n > depth + 1)
        level_clear(&path->levels[--path->n]);
    return descend_from(self, path, level_child(&path->levels[depth]), height,
                        forward ? FIRST_CHILD : LAST_CHILD, NULL);
}

/* -- methods --------------------------------------------------------------------------------- */

static int
parse_shape(PyObject *const *args, int64_t *root, Py_ssize_t *height)
{
    long long recid = PyLong_AsLongLong(args[0]);
    if (recid == -1 && PyErr_Occurred())
        return -1;
    *root = recid;
    *height = PyLong_AsSsize_t(args[1]);
    if (*height == -1 && PyErr_Occurred())
        return -1;
    return check_shape(*height);
}

static int
check_nargs(const char *name, Py_ssize_t nargs, Py_ssize_t wanted)
{
    if (nargs == wanted)
        return 0;
    PyErr_Format(PyExc_TypeError, "Descent.%s takes %zd arguments (%zd given)", name, wanted,
                 nargs);
    return -1;
}

PyDoc_STRVAR(get_doc,
"get(root, height, key, default) -> value\n\n"
"The value of key in the tree of that root and height, or default.");

/* The value of `key` (an object of the tree's key type) in the tree of that root and height, or
 * a new reference to `dflt`. */
static PyObject *
get_in(Descent *self, int64_t root, Py_ssize_t height, PyObject *key_object, PyObject *dflt)
{
    PyObject *result = NULL;
    Key key;
    Path path;
    Leaf leaf;
    path.n = 0;
    leaf_init(&leaf);
    int admitted = key_of(self, key_object, &key);
    if (admitted < 0)
        return NULL;
    if (admitted > 0)
        return Py_NewRef(dflt);
    if (descend_from(self, &path, root, height, BY_KEY, &key) == 0
            && leaf_open(self, path_end(&path, root), &leaf) == 0) {
        Py_ssize_t i;
        int holds = leaf_find(self, &leaf, &key, &i);
        if (holds > 0)
            result = leaf_value(self, &leaf, i);
        else if (holds == 0)
            result = Py_NewRef(dflt);
    }
    leaf_close(&leaf);
    path_clear(&path);
    return result;
}

static PyObject *
descent_get(Descent *self, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t root;
    Py_ssize_t height;
    if (check_nargs("get", nargs, 4) < 0 || parse_shape(args, &root, &height) < 0)
        return NULL;
    return get_in(self, root, height, args[2], args[3]);
}

int
is_descent(PyObject *object)
{
    return PyObject_TypeCheck(object, &descent_type);
}

PyObject *
descent_lookup(PyObject *descent, PyObject *key, PyObject *dflt)
{
    Descent *self = (Descent *)descent;
    if (ready(self) < 0)
        return NULL;
    if (self->height == 0) {
        PyErr_SetString(PyExc_ValueError, "the Descent has no shape: set_shape was not called");
        return NULL;
    }
    return get_in(self, self->root, self->height, key, dflt);
}

/* Whether inner node `recid` is cached: its form is made (no int object needed), or it is in
 * the cache's dict. 1, 0, or -1 with an exception. */
static int
inner_cached(Descent *self, int64_t recid)
{
    if (form_table_find(&self->forms, recid) != NULL)
        return 1;
    PyObject *id = PyLong_FromLongLong(recid);
    int cached = id == NULL ? -1 : PyDict_Contains(self->inner_nodes, id);
    Py_XDECREF(id);
    return cached;
}

/* Make inner node `recid` the most recently used, as NodeCache.inner does: 0, or -1 with an
 * exception. */
static int
touch_inner(Descent *self, int64_t recid)
{
    PyObject *id = PyLong_FromLongLong(recid);
    PyObject *moved = id == NULL ? NULL : PyObject_CallOneArg(self->move_inner, id);
    Py_XDECREF(id);
    Py_XDECREF(moved);
    return moved == NULL ? -1 : 0;
}

/* pages.h */
int
descent_walk_touch(PyObject *descent, const WalkStep *steps, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (touch_inner((Descent *)descent, steps[i].recid) < 0)
            return -1;
    return 0;
}

int
descent_walk(PyObject *descent, PyObject *key, WalkStep *steps, Py_ssize_t *n_steps,
             int64_t *leaf, int touch)
{
    Descent *self = (Descent *)descent;
    Key checked;
    if (ready(self) < 0 || check_shape(self->height) < 0 || checked_key(self, key, &checked) < 0)
        return -1;
    int64_t recid = self->root;
    Py_ssize_t n = 0;
    for (; n < self->height - 1; n++) {
        Level level = {NULL, 0};
        int cached = inner_cached(self, recid);
        if (cached == 0) {  /* loading it may fill the cache: the reference's walk does that */
            walk_steps_clear(steps, n);
            return 0;
        }
        Py_ssize_t child = -1;
        /* with `touch`, as NodeCache.inner: the node is now the most recently used */
        if (cached == 1 && inner_open(self, recid, &level) == 0
                && (!touch || touch_inner(self, recid) == 0))
            child = form_bisect(self, level.form, &checked);
        if (child >= 0) {
            steps[n].node = Py_NewRef(level.form->node);
            steps[n].recid = recid;
            steps[n].child = child;
            recid = level.form->children[child];
        }
        level_clear(&level);
        if (child < 0) {
            walk_steps_clear(steps, n);
            return -1;
        }
    }
    *n_steps = n;
    *leaf = recid;
    return 1;
}

void
walk_steps_clear(WalkStep *steps, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        Py_CLEAR(steps[i].node);
}

void
descent_separator_set(PyObject *descent, int64_t recid, Py_ssize_t at, int64_t separator)
{
    form_table_set_separator(&((Descent *)descent)->forms, recid, at, separator);
}

void
descent_child_inserted(PyObject *descent, int64_t recid, Py_ssize_t at, int64_t separator,
                       int64_t child)
{
    form_table_insert_child(&((Descent *)descent)->forms, recid, at, separator, child);
}

void
descent_form_drop(PyObject *descent, int64_t recid)
{
    form_table_forget(&((Descent *)descent)->forms, recid);
}

PyObject *
descent_inner_nodes(PyObject *descent)
{
    return ((Descent *)descent)->inner_nodes;
}

PyObject *
descent_leaves(PyObject *descent)
{
    return ((Descent *)descent)->leaves;
}

Py_ssize_t
descent_leaf_capacity(PyObject *descent)
{
    const Descent *self = (const Descent *)descent;
    Py_ssize_t kept = PyDict_GET_SIZE(self->inner_nodes);
    if (kept > self->cap_inner_kept)
        kept = self->cap_inner_kept;
    Py_ssize_t capacity = (self->cap_budget - kept * self->cap_inner_cost) / self->cap_leaf_cost;
    return capacity > self->cap_nodes ? self->cap_nodes : capacity;
}

int
descent_inner_over_capacity(PyObject *descent)
{
    const Descent *self = (const Descent *)descent;
    return PyDict_GET_SIZE(self->inner_nodes) > self->cap_inner_kept;
}

int
descent_leaves_have_room(PyObject *descent)
{
    return PyDict_GET_SIZE(((Descent *)descent)->leaves) < descent_leaf_capacity(descent);
}

/* The keys of a leaf opened from its page (leaf_open), as a new list. */
static PyObject *
page_key_list(Leaf *leaf)
{
    if (leaf->keys != NULL)
        return PyList_GetSlice(leaf->keys, 0, leaf->count);
    PyObject *list = PyList_New(leaf->count);
    for (Py_ssize_t i = 0; list != NULL && i < leaf->count; i++) {
        PyObject *key = PyLong_FromLongLong((int64_t)leaf->words[i]);
        if (key == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, key);
    }
    return list;
}

/* The (keys, values) lists of leaf `recid`, a new tuple, values None unless `with_values`: the
 * cached Leaf's own lists (a new list of its keys when they are an int64 column), else new ones decoded from its raw page (the keys alone when that is
 * all that is asked), else those of the Leaf cache.read_leaf gives (a compressed page, or one
 * the reference decodes). Nothing enters the cache. */
static PyObject *
leaf_lists(Descent *self, int64_t recid, int with_values)
{
    Leaf leaf;
    PyObject *result = NULL;
    leaf_init(&leaf);
    if ((leaf.recid = PyLong_FromLongLong(recid)) == NULL)
        return NULL;
    PyObject *node = PyDict_GetItemWithError(self->leaves, leaf.recid);
    Py_ssize_t size = 0;
    int copied = node != NULL ? 1 : PyErr_Occurred() ? -1 : copy_page(self, &leaf, &size);
    if (copied == 0 && !with_values) {
        PyObject *keys = read_page_keys(self, &leaf, size) < 0 ? NULL : page_key_list(&leaf);
        if (keys != NULL)
            result = PyTuple_Pack(2, keys, Py_None);
        Py_XDECREF(keys);
    }
    else if (copied == 0) {
        PageReader reader = {leaf.page, size, 1};
        uint64_t count;
        if (read_varint(&reader, &count) == 0) {
            result = count == 0 ? Py_BuildValue("([][])")
                     : read_entries(&reader, count > PAGE_MAX_ENTRIES ? PAGE_MAX_ENTRIES + 1
                                                                       : (Py_ssize_t)count,
                                    self->key_kind, self->value_kind, 0);
            if (result == Py_None) {
                Py_CLEAR(result);
                copied = 1;
            }
        }
    }
    if (copied > 0) {
        int status = node != NULL ? leaf_take_node(&leaf, Py_NewRef(node))
                                  : leaf_from_reference(self, &leaf);
        PyObject *keys = status < 0 ? NULL
            : leaf.keys != NULL ? Py_NewRef(leaf.keys) : page_key_list(&leaf);
        if (keys != NULL)
            result = PyTuple_Pack(2, keys, with_values ? leaf.values : Py_None);
        Py_XDECREF(keys);
    }
    leaf_close(&leaf);
    return result;
}

PyDoc_STRVAR(seek_doc,
"seek(root, height, key, below, with_values) -> (keys, values, lo, hi)\n\n"
"For a range scan: the keys and values lists of the leaf whose range holds key or, with below,\n"
"of the last leaf whose range starts below key (key None: the first leaf, with below the last),\n"
"and the separators around it (lo <= its keys < hi; None where unbounded), as Cursor.seek\n"
"finds them; values None unless with_values. The lists are the cached Leaf's own when it is\n"
"cached: the caller copies what it keeps. Nothing enters the cache.");

/* The leaf a scan's seek reaches (seek_doc): its record id, and new references to the separators
 * around it (Py_None where unbounded). `key` NULL: the first leaf, with `below` the last. The
 * nearest separator on each side is remembered as a level (a form, held, and an index) and made
 * an object once, at the end. */
static int
seek_leaf(Descent *self, int64_t recid, Py_ssize_t height, const Key *key, int below,
          int64_t *leaf_out, PyObject **lo_out, PyObject **hi_out)
{
    Level lo = {NULL, 0}, hi = {NULL, 0}; /* child: the separator's index in the form */
    int status = -1;
    for (Py_ssize_t depth = 0; depth < height - 1; depth++) {
        Level level;
        if (inner_open(self, recid, &level) < 0)
            goto done;
        InnerForm *form = level.form;
        Py_ssize_t i = key == NULL ? (below ? form->n - 1 : 0)
                       : form_bisect_side(self, form, key, !below);
        if (i < 0) {
            level_clear(&level);
            goto done;
        }
        Level *sides[] = {i > 0 ? &lo : NULL, i < form->n - 1 ? &hi : NULL};
        for (int side = 0; side < 2; side++) {
            if (sides[side] == NULL)
                continue;
            level_clear(sides[side]);
            form->refs++;
            sides[side]->form = form;
            sides[side]->child = side == 0 ? i - 1 : i;
        }
        recid = form->children[i];
        level_clear(&level);
    }
    *lo_out = lo.form == NULL ? Py_NewRef(Py_None) : form_separator(self, lo.form, lo.child);
    *hi_out = *lo_out == NULL ? NULL
              : hi.form == NULL ? Py_NewRef(Py_None) : form_separator(self, hi.form, hi.child);
    if (*hi_out == NULL)
        Py_CLEAR(*lo_out);
    else {
        *leaf_out = recid;
        status = 0;
    }
done:
    level_clear(&lo);
    level_clear(&hi);
    return status;
}

static PyObject *
descent_seek(Descent *self, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t root, recid;
    Py_ssize_t height;
    Key key;
    int below, with_values;
    PyObject *lo, *hi;
    if (check_nargs("seek", nargs, 5) < 0 || parse_shape(args, &root, &height) < 0
            || (below = PyObject_IsTrue(args[3])) < 0
            || (with_values = PyObject_IsTrue(args[4])) < 0
            || (args[2] != Py_None && checked_key(self, args[2], &key) < 0)
            || seek_leaf(self, root, height, args[2] == Py_None ? NULL : &key, below, &recid,
                         &lo, &hi) < 0)
        return NULL;
    PyObject *lists = leaf_lists(self, recid, with_values);
    if (lists == NULL) {
        Py_DECREF(lo);
        Py_DECREF(hi);
        return NULL;
    }
    PyObject *result = Py_BuildValue("(OONN)", PyTuple_GET_ITEM(lists, 0), PyTuple_GET_ITEM(lists, 1),
                                     lo, hi);
    Py_DECREF(lists);
    return result;
}

/* Open leaf `recid` for a scan (leaf_open) and, with `with_values`, its values as a list in
 * leaf->values: the cached Leaf's, its page's column read into a new list, or those of the Leaf
 * cache.read_leaf gives when the reference decodes that column. `scratch` has room for
 * PAGE_MAX_ENTRIES words. */
static int
leaf_open_scan(Descent *self, int64_t recid, int with_values, Leaf *leaf, uint64_t *scratch)
{
    if (leaf_open(self, recid, leaf) < 0)
        return -1;
    if (!with_values || leaf->values != NULL)
        return 0;
    if (leaf->count == 0)
        return (leaf->values = PyList_New(0)) == NULL ? -1 : 0;
    PageReader column = leaf->value_column;
    PyObject *values = read_values(&column, leaf->count, self->value_kind, scratch);
    if (values == NULL)
        return -1;
    if (values != Py_None) {
        leaf->values = values;
        return 0;
    }
    Py_DECREF(values);
    return leaf_from_reference(self, leaf);
}

/* `items[start:end]` as a new list, reversed with `reverse`. */
static PyObject *
scan_slice(PyObject *items, Py_ssize_t start, Py_ssize_t end, int reverse)
{
    if (end > PyList_GET_SIZE(items))
        return page_corrupt("a TreeMap leaf changed during a read"), NULL;
    PyObject *slice = PyList_GetSlice(items, start, end);
    if (slice != NULL && reverse && PyList_Reverse(slice) < 0)
        Py_CLEAR(slice);
    return slice;
}

int
descent_scan_leaf(PyObject *descent, ScanBounds *scan, int with_values, ScanChunk *out)
{
    Descent *self = (Descent *)descent;
    Key seek, lo, hi;
    int64_t recid;
    PyObject *lower = NULL, *upper = NULL;
    Leaf leaf;
    int status = -1;
    leaf_init(&leaf);
    out->count = 0;
    if (ready(self) < 0)
        return -1;
    if (self->height == 0) {
        PyErr_SetString(PyExc_ValueError, "the Descent has no shape: set_shape was not called");
        return -1;
    }
    int below = scan->reverse && (scan->seek == NULL || !scan->seek_inclusive);
    if ((scan->seek != NULL && checked_key(self, scan->seek, &seek) < 0)
            || (scan->lo != NULL && checked_key(self, scan->lo, &lo) < 0)
            || (scan->hi != NULL && checked_key(self, scan->hi, &hi) < 0)
            || seek_leaf(self, self->root, self->height, scan->seek ? &seek : NULL, below,
                         &recid, &lower, &upper) < 0
            || leaf_open_scan(self, recid, with_values, &leaf, out->words) < 0)
        goto done;
    /* The entries [start, end) of the leaf lie in the range, as RangeScan.next_chunk finds them,
     * with two bisects spared: the far bound is compared with the leaf's far separator first (a
     * leaf wholly inside the range needs no bisect for it), and a seek for the separator the leaf
     * starts at (the object the last leaf ended at) starts at its first key. */
    Py_ssize_t start, end;
    int past; /* whether the range goes on past this leaf's far bound */
    if (scan->reverse) {
        past = lower != Py_None;
        if (past && scan->lo != NULL) {
            int at_or_below = PyObject_RichCompareBool(lower, scan->lo, Py_LE);
            if (at_or_below < 0)
                goto done;
            past = !at_or_below; /* else every key >= lower > lo */
        }
        start = scan->lo == NULL || past ? 0 : leaf_bisect(self, &leaf, &lo, !scan->lo_inclusive);
        end = scan->seek == NULL || (scan->seek == upper && !scan->seek_inclusive) ? leaf.count
              : leaf_bisect(self, &leaf, &seek, scan->seek_inclusive);
        Py_XSETREF(scan->seek, lower == Py_None ? NULL : Py_NewRef(lower));
        scan->seek_inclusive = 0;
    }
    else {
        past = upper != Py_None;
        if (past && scan->hi != NULL) {
            int below_upper = PyObject_RichCompareBool(scan->hi, upper,
                                                       scan->hi_inclusive ? Py_LT : Py_LE);
            if (below_upper < 0)
                goto done;
            past = !below_upper; /* else every key < upper <= hi */
        }
        end = scan->hi == NULL || past ? leaf.count : leaf_bisect(self, &leaf, &hi, scan->hi_inclusive);
        start = scan->seek == NULL || (scan->seek == lower && scan->seek_inclusive) ? 0
                : leaf_bisect(self, &leaf, &seek, !scan->seek_inclusive);
        Py_XSETREF(scan->seek, upper == Py_None ? NULL : Py_NewRef(upper));
        scan->seek_inclusive = 1;
    }
    if (start < 0 || end < 0)
        goto done;
    scan->done = !past;
    if (start < end) {
        if (leaf.keys != NULL) {
            if ((out->keys = scan_slice(leaf.keys, start, end, scan->reverse)) == NULL)
                goto done;
        }
        else
            for (Py_ssize_t j = 0; j < end - start; j++)
                out->words[j] = leaf.words[scan->reverse ? end - 1 - j : start + j];
        if (with_values
                && (out->values = scan_slice(leaf.values, start, end, scan->reverse)) == NULL)
            goto done;
        out->count = end - start;
    }
    status = 0;
done:
    Py_XDECREF(lower);
    Py_XDECREF(upper);
    leaf_close(&leaf);
    return status;
}

PyDoc_STRVAR(set_shape_doc,
"set_shape(root, height)\n\n"
"The tree's shape, for lookups that do not name one (TreeSlots); the Tree sets it whenever\n"
"its shape changes.");

static PyObject *
descent_set_shape(Descent *self, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t root;
    Py_ssize_t height;
    if (check_nargs("set_shape", nargs, 2) < 0 || parse_shape(args, &root, &height) < 0)
        return NULL;
    self->root = root;
    self->height = height;
    Py_RETURN_NONE;
}

/* The entry at `i` of the leaf as the caller asked: its key, or (key, value). */
static PyObject *
entry(Descent *self, Leaf *leaf, Py_ssize_t i, int with_value)
{
    PyObject *key = leaf_key(leaf, i);
    if (key == NULL || !with_value)
        return key;
    PyObject *value = leaf_value(self, leaf, i);
    if (value == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    PyObject *pair = PyTuple_Pack(2, key, value);
    Py_DECREF(key);
    Py_DECREF(value);
    return pair;
}

PyDoc_STRVAR(neighbour_doc,
"neighbour(root, height, key, above, inclusive, with_value) -> key | (key, value) | None\n\n"
"The smallest key above key (above true) or the largest below it, key itself counting with\n"
"inclusive: ceiling (1, 1), higher (1, 0), floor (0, 1), lower (0, 0); None when there is none.");

static PyObject *
descent_neighbour(Descent *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *result = NULL;
    int64_t root;
    Py_ssize_t height;
    Key key;
    Path path;
    Leaf leaf;
    path.n = 0;
    leaf_init(&leaf);
    int above, inclusive, with_value;
    if (check_nargs("neighbour", nargs, 6) < 0 || parse_shape(args, &root, &height) < 0
            || checked_key(self, args[2], &key) < 0 || (above = PyObject_IsTrue(args[3])) < 0
            || (inclusive = PyObject_IsTrue(args[4])) < 0
            || (with_value = PyObject_IsTrue(args[5])) < 0)
        return NULL;
    if (descend_from(self, &path, root, height, BY_KEY, &key) < 0)
        goto done;
    /* ceiling/lower: keys from bisect_left on; higher/floor: from bisect_right on */
    if (leaf_open(self, path_end(&path, root), &leaf) < 0)
        goto done;
    Py_ssize_t i = leaf_bisect(self, &leaf, &key, above != inclusive);
    if (i < 0)
        goto done;
    for (;;) {
        Py_ssize_t at = above ? i : i - 1;
        if (at >= 0 && at < leaf.count) {
            result = entry(self, &leaf, at, with_value);
            goto done;
        }
        int moved = step_leaf(self, &path, height, above);
        if (moved < 0)
            goto done;
        if (moved > 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        leaf_close(&leaf);
        if (leaf_open(self, path_end(&path, root), &leaf) < 0)
            goto done;
        i = above ? 0 : leaf.count;
    }
done:
    leaf_close(&leaf);
    path_clear(&path);
    return result;
}

/* The sum of the entry counts left of the path's children. */
static int
counts_left(const Path *path, Py_ssize_t *out)
{
    Py_ssize_t total = 0;
    for (int d = 0; d < path->n; d++) {
        const Level *level = &path->levels[d];
        PyObject *counts = level_counts(level);
        if (counts == NULL)
            return -1;
        for (Py_ssize_t c = 0; c < level->child; c++) {
            Py_ssize_t count = PyLong_AsSsize_t(PyList_GET_ITEM(counts, c));
            if (count == -1 && PyErr_Occurred()) {
                Py_DECREF(counts);
                return -1;
            }
            total += count;
        }
        Py_DECREF(counts);
    }
    *out = total;
    return 0;
}

PyDoc_STRVAR(position_doc,
"position(root, height, key, right) -> int\n\n"
"How many keys are below key (at or below it with right).");

/* One descent to `key`: how many keys are below it (at or below it with `right`) in *position
 * and, when `holds` is not NULL, whether the tree holds it. 0, or -1 with an exception. */
static int
position_of(Descent *self, int64_t root, Py_ssize_t height, PyObject *key_object, int right,
            Py_ssize_t *position, int *holds)
{
    int status = -1;
    Py_ssize_t before, i;
    Key key;
    Path path;
    Leaf leaf;
    path.n = 0;
    leaf_init(&leaf);
    if (checked_key(self, key_object, &key) < 0)
        return -1;
    if (descend_from(self, &path, root, height, BY_KEY, &key) == 0
            && counts_left(&path, &before) == 0
            && leaf_open(self, path_end(&path, root), &leaf) == 0
            && (i = leaf_bisect(self, &leaf, &key, right)) >= 0
            && (holds == NULL || (*holds = leaf_holds(&leaf, i, &key)) >= 0)) {
        *position = before + i;
        status = 0;
    }
    leaf_close(&leaf);
    path_clear(&path);
    return status;
}

static PyObject *
descent_position(Descent *self, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t root;
    Py_ssize_t height, position;
    int right;
    if (check_nargs("position", nargs, 4) < 0 || parse_shape(args, &root, &height) < 0
            || (right = PyObject_IsTrue(args[3])) < 0
            || position_of(self, root, height, args[2], right, &position, NULL) < 0)
        return NULL;
    return PyLong_FromSsize_t(position);
}

PyDoc_STRVAR(index_doc,
"index(root, height, key) -> int\n\n"
"The position of key (how many keys are below it), or -1 when the tree does not hold it.");

static PyObject *
descent_index(Descent *self, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t root;
    Py_ssize_t height, position;
    int holds;
    if (check_nargs("index", nargs, 3) < 0 || parse_shape(args, &root, &height) < 0
            || position_of(self, root, height, args[2], 0, &position, &holds) < 0)
        return NULL;
    return PyLong_FromSsize_t(holds ? position : -1);
}

/* The child of a level that holds the entry at `*index` of its subtree, found by the live
 * counts; `*index` becomes the entry's index in that child. */
static int
child_at(const Level *level, Py_ssize_t *index, Py_ssize_t *child)
{
    PyObject *counts = level_counts(level);
    if (counts == NULL)
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(counts), c = 0;
    for (; c < n; c++) {
        Py_ssize_t count = PyLong_AsSsize_t(PyList_GET_ITEM(counts, c));
        if (count == -1 && PyErr_Occurred()) {
            Py_DECREF(counts);
            return -1;
        }
        if (*index < count)
            break;
        *index -= count;
    }
    Py_DECREF(counts);
    if (c == n)
        return page_corrupt("the entry counts of TreeMap node %lld do not reach the position "
                            "asked", (long long)level->form->recid);
    *child = c;
    return 0;
}

PyDoc_STRVAR(item_at_doc,
"item_at(root, height, index) -> (key, value)\n\n"
"The entry at position index, 0 <= index < the tree's entries, found by the entry counts of\n"
"the inner nodes; CorruptionError when they do not lead to it.");

static PyObject *
descent_item_at(Descent *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *result = NULL;
    int64_t recid;
    Py_ssize_t height, index;
    Path path;
    Leaf leaf;
    path.n = 0;
    leaf_init(&leaf);
    if (check_nargs("item_at", nargs, 3) < 0 || parse_shape(args, &recid, &height) < 0)
        return NULL;
    if ((index = PyLong_AsSsize_t(args[2])) == -1 && PyErr_Occurred())
        return NULL;
    while (path.n < height - 1) {
        Level *level = &path.levels[path.n];
        if (inner_open(self, recid, level) < 0)
            goto done;
        path.n++;
        if (child_at(level, &index, &level->child) < 0)
            goto done;
        recid = level_child(level);
    }
    if (leaf_open(self, recid, &leaf) < 0)
        goto done;
    if (index < 0 || index >= leaf.count)
        page_corrupt("the entry counts above TreeMap leaf %lld exceed its %zd entries",
                     (long long)recid, leaf.count);
    else
        result = entry(self, &leaf, index, 1);
done:
    leaf_close(&leaf);
    path_clear(&path);
    return result;
}

PyDoc_STRVAR(forget_doc,
"forget(recid)\n\n"
"Drop the compact form of inner node recid, if there is one: the node left the cache, or its\n"
"separators or children changed.");

static PyObject *
descent_forget(Descent *self, PyObject *recid)
{
    long long value = PyLong_AsLongLong(recid);
    if (value == -1 && PyErr_Occurred())
        return NULL;
    form_table_forget(&self->forms, value);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(forget_all_doc,
"forget_all()\n\n"
"Drop every compact form (the cache was cleared).");

static PyObject *
descent_forget_all(Descent *self, PyObject *Py_UNUSED(ignored))
{
    form_table_clear(&self->forms);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(forms_doc,
"forms() -> list of (recid, node, separators, children)\n\n"
"The compact forms held, as the cached Inner each was made from and its separators and\n"
"children read back from the form (for checks of the invariant, O(forms)).");

static PyObject *
form_as_tuple(Descent *self, const InnerForm *form)
{
    PyObject *separators = PyList_New(form->n - 1), *children = PyList_New(form->n);
    for (Py_ssize_t i = 0; separators != NULL && children != NULL && i < form->n; i++) {
        PyObject *item;
        if ((item = PyLong_FromLongLong(form->children[i])) == NULL)
            goto failed;
        PyList_SET_ITEM(children, i, item);
        if (i == form->n - 1)
            break;
        item = self->key_kind == KEY_INT64 ? PyLong_FromLongLong((int64_t)form->words[i])
                                           : Py_NewRef(form->separators[i]);
        if (item == NULL)
            goto failed;
        PyList_SET_ITEM(separators, i, item);
    }
    if (separators != NULL && children != NULL)
        return Py_BuildValue("LONN", (long long)form->recid, form->node, separators, children);
failed:
    Py_XDECREF(separators);
    Py_XDECREF(children);
    return NULL;
}

static PyObject *
descent_forms(Descent *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *list = PyList_New(0);
    for (Py_ssize_t i = 0; list != NULL && i < self->forms.capacity; i++) {
        InnerForm *form = self->forms.slots[i];
        if (form == NULL)
            continue;
        PyObject *item = form_as_tuple(self, form);
        if (item == NULL || PyList_Append(list, item) < 0)
            Py_CLEAR(list);
        Py_XDECREF(item);
    }
    return list;
}

static PyObject *
descent_form_bytes(Descent *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->forms.form_bytes
                              + self->forms.capacity * (Py_ssize_t)sizeof(InnerForm *));
}

/* -- the type -------------------------------------------------------------------------------- */

/* The attribute `name` of the node cache: a new reference, TypeError unless it is a dict when
 * `dict` says so. */
static PyObject *
cache_part(PyObject *cache, const char *name, int dict)
{
    PyObject *part = PyObject_GetAttrString(cache, name);
    if (part != NULL && dict && !PyDict_Check(part)) {
        PyErr_Format(PyExc_TypeError, "Descent: the node cache's %s is not a dict", name);
        Py_CLEAR(part);
    }
    return part;
}

static int
descent_init(Descent *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"cache", "store", "key_kind", "value_kind", NULL};
    PyObject *cache, *store;
    int key_kind, value_kind;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOii:Descent", names, &cache, &store,
                                     &key_kind, &value_kind))
        return -1;
    if (key_kind < KEY_INT64 || key_kind > KEY_BYTES || value_kind < 0 || value_kind > 4) {
        PyErr_Format(PyExc_ValueError, "unknown key kind %d or value kind %d", key_kind,
                     value_kind);
        return -1;
    }
    Py_ssize_t budget, inner_cost, leaf_cost, inner_kept, nodes;
    PyObject *parts[6] = {NULL}, *terms = PyObject_CallMethod(cache, "leaf_cap_terms", NULL);
    int parsed = terms != NULL && PyArg_ParseTuple(
        terms, "nnnnn;NodeCache.leaf_cap_terms() gives five ints", &budget, &inner_cost,
        &leaf_cost, &inner_kept, &nodes);
    Py_XDECREF(terms);
    if (!parsed)
        return -1;
    if (leaf_class == NULL) {
        PyObject *module = PyImport_ImportModule("offheap.treemap.node");
        leaf_class = module == NULL ? NULL : PyObject_GetAttrString(module, "Leaf");
        Py_XDECREF(module);
        if (leaf_class == NULL)
            return -1;
    }
    if (leaf_cost <= 0) {
        PyErr_SetString(PyExc_ValueError, "NodeCache.leaf_cap_terms(): a leaf costs nothing");
        return -1;
    }
    if ((parts[0] = cache_part(cache, "_inner", 1)) == NULL
            || (parts[1] = PyObject_GetAttrString(parts[0], "move_to_end")) == NULL
            || (parts[2] = cache_part(cache, "_leaves", 1)) == NULL
            || (parts[3] = cache_part(cache, "inner", 0)) == NULL
            || (parts[4] = cache_part(cache, "read_leaf", 0)) == NULL
            || (parts[5] = cache_part(cache, "leaf_for_read", 0)) == NULL) {
        for (int i = 0; i < 6; i++)
            Py_XDECREF(parts[i]);
        return -1;
    }
    Py_XSETREF(self->inner_nodes, parts[0]);
    Py_XSETREF(self->move_inner, parts[1]);
    Py_XSETREF(self->leaves, parts[2]);
    Py_XSETREF(self->load_inner, parts[3]);
    Py_XSETREF(self->read_leaf, parts[4]);
    Py_XSETREF(self->load_leaf, parts[5]);
    Py_XSETREF(self->store, Py_NewRef(store));
    self->key_kind = key_kind;
    self->value_kind = value_kind;
    self->cap_budget = budget;
    self->cap_inner_cost = inner_cost;
    self->cap_leaf_cost = leaf_cost;
    self->cap_inner_kept = inner_kept;
    self->cap_nodes = nodes;
    form_table_clear(&self->forms);
    return 0;
}

static int
descent_traverse(Descent *self, visitproc visit, void *arg)
{
    Py_VISIT(self->inner_nodes);
    Py_VISIT(self->move_inner);
    Py_VISIT(self->leaves);
    Py_VISIT(self->load_inner);
    Py_VISIT(self->read_leaf);
    Py_VISIT(self->load_leaf);
    Py_VISIT(self->store);
    if (record_source_traverse(&self->records, visit, arg) != 0)
        return -1;
    return form_table_traverse(&self->forms, visit, arg);
}

static int
descent_clear(Descent *self)
{
    Py_CLEAR(self->inner_nodes);
    Py_CLEAR(self->move_inner);
    Py_CLEAR(self->leaves);
    Py_CLEAR(self->load_inner);
    Py_CLEAR(self->read_leaf);
    Py_CLEAR(self->load_leaf);
    Py_CLEAR(self->store);
    record_source_clear(&self->records);
    form_table_clear(&self->forms);
    return 0;
}

static void
descent_dealloc(Descent *self)
{
    PyObject_GC_UnTrack(self);
    descent_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
ready(Descent *self)
{
    if (self->store != NULL)
        return 0;
    PyErr_SetString(PyExc_ValueError, "the Descent was not initialized");
    return -1;
}

#define GUARDED(name) \
    static PyObject *guarded_##name(PyObject *self, PyObject *const *args, Py_ssize_t nargs) \
    { return ready((Descent *)self) < 0 ? NULL : descent_##name((Descent *)self, args, nargs); }
GUARDED(get)
GUARDED(neighbour)
GUARDED(position)
GUARDED(item_at)
GUARDED(seek)
GUARDED(index)

static PyMethodDef descent_methods[] = {
    {"get", (PyCFunction)(void (*)(void))guarded_get, METH_FASTCALL, get_doc},
    {"neighbour", (PyCFunction)(void (*)(void))guarded_neighbour, METH_FASTCALL, neighbour_doc},
    {"position", (PyCFunction)(void (*)(void))guarded_position, METH_FASTCALL, position_doc},
    {"item_at", (PyCFunction)(void (*)(void))guarded_item_at, METH_FASTCALL, item_at_doc},
    {"index", (PyCFunction)(void (*)(void))guarded_index, METH_FASTCALL, index_doc},
    {"seek", (PyCFunction)(void (*)(void))guarded_seek, METH_FASTCALL, seek_doc},
    {"set_shape", (PyCFunction)(void (*)(void))descent_set_shape, METH_FASTCALL, set_shape_doc},
    {"forget", (PyCFunction)descent_forget, METH_O, forget_doc},
    {"forget_all", (PyCFunction)descent_forget_all, METH_NOARGS, forget_all_doc},
    {"forms", (PyCFunction)descent_forms, METH_NOARGS, forms_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef descent_getset[] = {
    {"form_bytes", (getter)descent_form_bytes, NULL,
     "Heap bytes held by the compact forms of inner nodes and their table.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(descent_doc,
"Descent(inner_nodes, leaves, load_inner, read_leaf, store, key_kind, value_kind)\n\n"
"The compiled read path of one TreeMap's B+tree over its NodeCache (the dicts of inner nodes\n"
"and leaves, cache.inner and cache.read_leaf) and its RecordStore; kinds as _pages numbers\n"
"them. Keys must be exact objects of the key kind. Not thread-safe: the tree's lock covers\n"
"every call.");

static PyTypeObject descent_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "offheap.treemap._pages.Descent",
    .tp_basicsize = sizeof(Descent),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = descent_doc,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)descent_init,
    .tp_traverse = (traverseproc)descent_traverse,
    .tp_clear = (inquiry)descent_clear,
    .tp_dealloc = (destructor)descent_dealloc,
    .tp_methods = descent_methods,
    .tp_getset = descent_getset,
};

int
add_descent_type(PyObject *module)
{
    if (PyType_Ready(&descent_type) < 0)
        return -1;
    Py_INCREF(&descent_type);
    if (PyModule_AddObject(module, "Descent", (PyObject *)&descent_type) < 0) {
        Py_DECREF(&descent_type);
        return -1;
    }
    return 0;
}
