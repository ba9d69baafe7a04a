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
} Held;

/* The bookkeeping of an insert (`delta` 1) or a delete (-1) in the leaf at the end of `path` (a
 * list of (Inner, child index) pairs): the counts along the path, whose nodes become dirty, and
 * the tree's n_entries take the change, and its mods one more. Fails only on a damaged tree or
 * without memory. (slots.c) */
int count_change(const Held *held, PyObject *path, long delta);
/* The same for a path of `n` WalkSteps (descent_walk's). */
int count_steps(const Held *held, const WalkStep *steps, Py_ssize_t n, long delta);

/* The separator page.separator puts between int64 keys left_max < right_min: the one in
 * (left_max, right_min] with the most trailing zero bits. (around.c) */
int64_t separator_between(int64_t left_max, int64_t right_min);
/* The tree's shape with one more leaf (TreeShape.with_nodes(leaves=1)), set as Tree.shape; 0,
 * or -1 with an exception. (around.c) */
int count_new_leaf(const Held *held);

/* NodeStore.reserve(1) of `nodes`: the list of one record id, or NULL with an exception.
 * (slots.c) */
PyObject *reserve_record(PyObject *nodes);

/* m[key] = value and del m[key] for a leaf the node cache does not hold, when the change goes
 * around it and needs no Python (around.c, whose header says which): 1 done, 0 not this case
 * (nothing changed: the map's Python method follows), -1 with an exception. The map's lock is
 * held. init_around interns the names they use (0, or -1 with an exception). */
int store_around(const Held *held, PyObject *key, PyObject *value);
int delete_around(const Held *held, PyObject *key);
int init_around(void);

#endif
