/* MapLock, the re-entrant lock of a collection (or of all the collections of a DB), and its C
 * interface for other extensions: offheap.collection._lock defines the type; the hash map core
 * (offheap/hashmap/csrc/lock.c) reads its state, and the TreeMap's item slots take and give it
 * without a Python call (offheap/treemap/csrc/slots.c). An extension reaches the interface
 * through the capsule LOCK_API_CAPSULE (lock_api_import, with the GIL held).
 *
 * A MapLock is an owner thread and a depth, as threading.RLock: acquire() and release() from
 * the owner nest; the lock is free when the depth is 0. Its state changes only while the
 * changing thread holds the GIL, so a thread that holds the GIL reads a state no other thread is
 * changing, and taking a free lock is two stores: no atomic operation, no system call. A thread
 * that finds the lock held waits with the GIL given up, as threading.Condition's waiters do, on
 * a PyThread lock of its own, queued from first_waiter to last_waiter; each release to depth 0
 * wakes the oldest, which takes the lock if it is still free once it has the GIL back, or queues
 * again.
 *
 * acquire(lock, blocking, timeout, &waited): for the calling thread, re-entrantly; 1 held, 0
 * not taken (not blocking, or the timeout, in seconds, passed; timeout < 0: no limit), -1 with
 * the exception a signal handler raised while it waited with the GIL given up. `waited` is set
 * when other threads may have run meanwhile. release_held(lock): one level of the calling
 * thread's hold; precondition: it holds the lock. acquire_method and release_method tell a bound
 * lock.acquire or lock.release of a MapLock from any other callable by one comparison.
 */
#ifndef OFFHEAP_COLLECTION_LOCK_API_H
#define OFFHEAP_COLLECTION_LOCK_API_H

#include <Python.h>
#include <pythread.h>

#include "capsule.h"

#define LOCK_API_CAPSULE "offheap.collection._lock._C_API"

/* A thread waiting in acquire: `wake` is held by that thread until a release dequeues the
 * waiter and releases it. Lives on the waiting thread's stack; queued only while it waits. */
typedef struct LockWaiter {
    PyThread_type_lock wake;
    struct LockWaiter *next;
    int queued;
} LockWaiter;

typedef struct {
    PyObject_HEAD
    unsigned long owner;      /* the holding thread's ident while depth > 0 */
    Py_ssize_t depth;         /* the owner's nested acquires; 0: free */
    LockWaiter *first_waiter; /* the threads waiting for it, oldest first (NULL: none) */
    LockWaiter *last_waiter;
    long waiters_pid;         /* the process whose threads those are: a child forked while
                                 threads waited has not their threads, and their stacks may be
                                 reused, so it drops that queue unread */
} MapLock;

typedef struct {
    PyTypeObject *type;
    int (*acquire)(MapLock *lock, int blocking, double timeout, int *waited);
    void (*release_held)(MapLock *lock);
    const PyMethodDef *acquire_method; /* the type's acquire() and release(): a bound method */
    const PyMethodDef *release_method; /* whose definition is one of these is a MapLock's */
} LockApi;

/* The interface, or NULL with an exception. */
static inline const LockApi *
lock_api_import(void)
{
    return capsule_import("offheap.collection._lock", LOCK_API_CAPSULE);
}

static inline int
maplock_owned_by_caller(const MapLock *lock)
{
    return lock->depth > 0 && lock->owner == PyThread_get_thread_ident();
}

#endif
