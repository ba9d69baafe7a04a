/* The (key, value) tuples of the compiled items iterators (LongHashMap/HashMap entries,
 * TreeMap ranges), reused while nobody else holds them.
 *
 * An iterator keeps the last two tuples it handed out. A `for k, v in m.items()` loop holds the
 * previous item while the next is made, so one of the two is free again at every step; dict's
 * items iterator keeps one and so makes a new tuple every other step. A reused tuple has its old
 * items dropped (which may run Python code, as any decref) and is tracked by the GC again if it
 * had been untracked. Owned by one iterator: its traverse and clear visit both tuples. */

#ifndef OFFHEAP_PAIRS_H
#define OFFHEAP_PAIRS_H

#include <Python.h>

typedef struct {
    PyObject *tuples[2];
} ItemPairs;

/* The tuple (first, second), stealing both references (dropped on failure): a kept tuple that
 * only `pairs` holds, else a new one, kept when there is room. NULL with MemoryError. */
static inline PyObject *
item_pair(ItemPairs *pairs, PyObject *first, PyObject *second)
{
    for (int i = 0; i < 2; i++) {
        PyObject *pair = pairs->tuples[i];
        if (pair == NULL || Py_REFCNT(pair) != 1)
            continue;
        PyObject *old_first = PyTuple_GET_ITEM(pair, 0), *old_second = PyTuple_GET_ITEM(pair, 1);
        PyTuple_SET_ITEM(pair, 0, first);
        PyTuple_SET_ITEM(pair, 1, second);
        Py_DECREF(old_first);
        Py_DECREF(old_second);
        if (!PyObject_GC_IsTracked(pair))
            PyObject_GC_Track(pair);
        return Py_NewRef(pair);
    }
    PyObject *pair = PyTuple_New(2);
    if (pair == NULL) {
        Py_DECREF(first);
        Py_DECREF(second);
        return NULL;
    }
    PyTuple_SET_ITEM(pair, 0, first);
    PyTuple_SET_ITEM(pair, 1, second);
    for (int i = 0; i < 2; i++) {
        if (pairs->tuples[i] == NULL) {
            pairs->tuples[i] = Py_NewRef(pair);
            break;
        }
    }
    return pair;
}

static inline int
item_pairs_traverse(ItemPairs *pairs, visitproc visit, void *arg)
{
    Py_VISIT(pairs->tuples[0]);
    Py_VISIT(pairs->tuples[1]);
    return 0;
}

static inline void
item_pairs_clear(ItemPairs *pairs)
{
    Py_CLEAR(pairs->tuples[0]);
    Py_CLEAR(pairs->tuples[1]);
}

#endif
