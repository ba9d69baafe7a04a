/* What the item slots (slots.c) share with the stores written around the node cache
 * (around.c). */
#ifndef OFFHEAP_TREEMAP_SLOTS_H
#define OFFHEAP_TREEMAP_SLOTS_H

#include "pages.h"

/* What a store uses, held (strong references) for the call once the map's lock is taken: a
 * close that detaches the slots meanwhile (re-entering through Python code the store calls)
 * frees nothing in use and leaves no field NULL under it. nodes and store are NULL when no store
 * runs around the cache. */
typedef struct {
    PyObject *tree;         /* the Tree: shape, n_entries, mods */
    PyObject *cache;        /* its NodeCache */
    PyObject *hint;         /* its hint Cursor */
    PyObject *descent;      /* its Descent, whose inner forms a structural change drops */
    PyObject *nodes;        /* its NodeStore (rewrite, reserve, release), or NULL */
    PyObject *store;        /* that NodeStore's RecordStore, or NULL */
    Py_ssize_t node_size;
    int key_kind, value_kind;
    int keep_present;       /* a store of a key already present changes nothing (TreeSet.add) */
} Held;

/* NodeCache.over_capacity (a __slots__ member, read by its offset): 1, 0, or -1 with an
 * exception. (slots.c) */
int over_capacity(PyObject *cache);
/* NodeCache.over_capacity = True (a cache that took a leaf past its capacity, as NodeCache.leaf
 * marks it); 0, or -1 with an exception. */
int mark_over_capacity(PyObject *cache);
/* NodeCache.over_capacity = False; 0, or -1 with an exception. */
int unmark_over_capacity(PyObject *cache);

/* What a change in C (store_around, delete_around) returns, beside 1 done, 0 the Python method
 * follows and -1 an error, when it read its leaf in past capacity (marking the cache over it)
 * and then left the change to the Python method: the mark is off again, for the Python method
 * not to trim first where the reference's would not (its own read comes after its trim), and
 * the slot marks the cache again once the Python method returns, as the reference's read leaves
 * it. */
enum { CHANGE_IN_PYTHON_THEN_MARK = 3 };

/* The least recently used of the cache's `leaves` (borrowed), its record id in *recid (a new
 * reference, or NULL when there is none); NULL when there is none or on an error (set; *recid
 * may be set then, for the caller to release). (slots.c) */
PyObject *oldest_leaf(PyObject *leaves, PyObject **recid);

/* Write the dirty cached leaf `node` (record `recid`) as NodeStore.write writes it when the
 * pages are raw and the keys int64 (the stores around the cache run): its page stored, the node
 * store's totals and the node's sizes updated, the node clean. 1 written, 0 not this case (no
 * store around the cache, or the codec declines the page: nothing changed), -1 with an
 * exception (CapacityError from the store: nothing changed). (around.c) */
int write_cached_leaf(const Held *self, PyObject *recid, PyObject *node);

/* The bookkeeping of an insert (`delta` 1) or a delete (-1) in the leaf at the end of `path` (a
 * list of (Inner, child index) pairs): the counts along the path, whose nodes become dirty, and
 * the tree's n_entries take the change, and its mods one more. Fails only on a damaged tree or
 * without memory. (slots.c) */
int count_change(const Held *held, PyObject *path, long delta);
/* The same for a path of `n` WalkSteps (descent_walk's). */
int count_steps(const Held *held, const WalkStep *steps, Py_ssize_t n, long delta);

/* The store in the hint's leaf, as Tree.put does it with the write cache when the leaf holds the
 * key's range: in the leaf when it has room, else with a sibling or by a split that stays below
 * the parent's parent (the lock is held): 1 stored, 0 not this case (nothing changed), -1 with
 * an exception. (slots.c) */
int store_in_hint(const Held *held, PyObject *key, PyObject *value);
/* The delete in the hint's leaf, as Tree.pop does it with the write cache when the leaf holds
 * the key and keeps at least min_entries (node_size // 4, at least 1): 1 done, 0 not this case
 * (nothing changed), -1 with an exception. The hint holds the key's range: the caller just set
 * it (hint_at_leaf). (slots.c) */
int delete_in_hint(const Held *held, PyObject *key);
/* Make the hint name cached `leaf` at the end of the walk's `n` steps, with their path and the
 * range their separators give it, as Cursor.descend leaves it: 0, or -1 with an exception (the
 * hint then names no leaf). (slots.c) */
int hint_at_leaf(const Held *held, const WalkStep *steps, Py_ssize_t n, PyObject *leaf);

/* The separator page.separator puts between int64 keys left_max < right_min: the one in
 * (left_max, right_min] with the most trailing zero bits. (around.c) */
int64_t separator_between(int64_t left_max, int64_t right_min);
/* The tree's shape with one more leaf and `inner` more inner nodes (TreeShape.with_nodes), set
 * as Tree.shape; 0, or -1 with an exception. (around.c) */
int count_new_nodes(const Held *held, long inner);

/* The three lists of an Inner: its separators (keys), children and entry counts. */
typedef struct {
    PyObject *keys, *children, *counts;
} NodeLists;

/* The lists of inner `node` (new references), checked to agree: 0, or -1 with an exception
 * (some may be set then). nodelists_close drops them (NULL ones too). (slots.c) */
int nodelists_open(PyObject *node, NodeLists *lists);
void nodelists_close(NodeLists *lists);
/* The key column (a list, or an array('q') of int64 keys: columns.c) and the values list of Leaf
 * `leaf` (new references), checked to agree: 0, or -1 with an exception (neither set).
 * (slots.c) */
int leaf_lists(PyObject *leaf, PyObject **keys, PyObject **values);
/* The int64 value of the int `item`, a key of a node of an int64 tree, in *word: 0, or -1 with
 * an exception (CorruptionError for anything else). (slots.c) */
int key_word(PyObject *item, int64_t *word);
/* Replace the whole of `list` (a list or a key column) with items[start:stop] (of the same kind):
 * 0, or -1 with an exception. (slots.c) */
int list_take(PyObject *list, PyObject *items, Py_ssize_t start, Py_ssize_t stop);

/* Split inner `node` (`lists`), one child over node_size after its child `child` split, at
 * split_off's cut into a new node of its type and of record `sibling_id` (*sibling, a new
 * reference), which the node above it (`grand`, the node at its `grand_child`) takes beside it:
 * the middle separator (its word in *middle_word) and the new child go in, and the counts of
 * both are set, as Rebalancer._split_insert does one level up. Dirty flags, the cache and the
 * forms are the caller's. 0, or -1 with an exception (the lists may be half edited then: only
 * on a damaged tree or without memory). (around.c) */
int split_inner(PyObject *node, const NodeLists *lists, Py_ssize_t child, PyObject *sibling_id,
                const NodeLists *grand, Py_ssize_t grand_child, PyObject **sibling,
                int64_t *middle_word);

/* Set list[at] to the int `number`: 0, or -1 with an exception. (slots.c) */
int set_number(PyObject *list, Py_ssize_t at, Py_ssize_t number);

/* NodeStore.reserve(count) of `nodes`: the list of `count` record ids, or NULL with an
 * exception. (slots.c) */
PyObject *reserve_records(PyObject *nodes, Py_ssize_t count);

/* m[key] = value and del m[key] for a leaf the node cache does not hold, when the change goes
 * around it and needs no Python (around.c, whose header says which): 1 done, 0 not this case
 * (nothing changed: the map's Python method follows), -1 with an exception. The map's lock is
 * held. init_around interns the names they use (0, or -1 with an exception). */
int store_around(const Held *held, PyObject *key, PyObject *value);
int delete_around(const Held *held, PyObject *key);
int init_around(void);

/* tree[key] = value unless `key` is present (the map's _put_item(key, value, keep=True), a
 * TreeSet's add), `map` a TreeMap on the compiled item slots: in C when m[key] = value would
 * be, else through that method. 0, or -1 with an exception. (slots.c) */
int slots_put_absent(PyObject *map, PyObject *key, PyObject *value);

#endif
