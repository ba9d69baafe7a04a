/* offheap.collection._lock: MapLock, the re-entrant lock of a collection or of a DB (layer 6,
 * below the collections themselves), and the capsule through which the compiled cores take it
 * without a Python call. The state, the rule of its changes and the interface: csrc/lock_api.h. Which lock
 * a map gets: offheap.collection.locks.new_lock.
 */
#include "lock_api.h"

#include <time.h>
#ifndef _WIN32
#include <unistd.h>
#endif

/* Seconds on the monotonic clock. */
static double
monotonic_seconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* The calling process's id (0 where processes do not fork). */
static long
process_id(void)
{
#ifndef _WIN32
    return (long)getpid();
#else
    return 0;
#endif
}

/* Drop a queue of waiters another process made (this one is a child forked meanwhile), without
 * reading it. */
static void
own_queue(MapLock *lock)
{
    if (lock->first_waiter != NULL && lock->waiters_pid != process_id())
        lock->first_waiter = lock->last_waiter = NULL;
}

static void
enqueue(MapLock *lock, LockWaiter *waiter)
{
    own_queue(lock);
    lock->waiters_pid = process_id();
    waiter->next = NULL;
    waiter->queued = 1;
    if (lock->last_waiter == NULL)
        lock->first_waiter = waiter;
    else
        lock->last_waiter->next = waiter;
    lock->last_waiter = waiter;
}

/* Take `waiter` out of the queue if it is still there. */
static void
dequeue(MapLock *lock, LockWaiter *waiter)
{
    if (!waiter->queued)
        return;
    waiter->queued = 0;
    LockWaiter *before = NULL, *w = lock->first_waiter;
    for (; w != NULL && w != waiter; w = w->next)
        before = w;
    if (w == NULL)
        return;
    if (before == NULL)
        lock->first_waiter = waiter->next;
    else
        before->next = waiter->next;
    if (lock->last_waiter == waiter)
        lock->last_waiter = before;
}

/* Wait, with the GIL given up, until the lock is free and take it (timeout < 0: no limit),
 * running the signal handlers when a signal interrupts the wait: 1 when taken, 0 when the
 * timeout passed, -1 with an exception (a handler's, or MemoryError). A waiter woken by a release
 * takes the lock if no other thread took it first, else it queues again at the end. */
static int
wait_and_take(MapLock *lock, unsigned long me, double timeout)
{
    LockWaiter waiter = {PyThread_allocate_lock(), NULL, 0};
    if (waiter.wake == NULL) {
        PyErr_SetString(PyExc_MemoryError, "cannot allocate a lock");
        return -1;
    }
    PyThread_acquire_lock(waiter.wake, WAIT_LOCK); /* its own: free, taken at once */
    double deadline = timeout < 0 ? 0.0 : monotonic_seconds() + timeout;
    int result;
    for (;;) {
        PY_TIMEOUT_T wait_us = -1;
        if (timeout >= 0) {
            double left = deadline - monotonic_seconds();
            wait_us = left > 0 ? (PY_TIMEOUT_T)(left * 1e6) : 0;
            if (wait_us > PY_TIMEOUT_MAX)
                wait_us = PY_TIMEOUT_MAX;
        }
        enqueue(lock, &waiter);
        PyLockStatus status;
        Py_BEGIN_ALLOW_THREADS
        status = PyThread_acquire_lock_timed(waiter.wake, wait_us, 1);
        Py_END_ALLOW_THREADS
        dequeue(lock, &waiter);
        if (lock->depth == 0) { /* free, even at the deadline: take it */
            lock->owner = me;
            lock->depth = 1;
            result = 1;
            break;
        }
        if (status == PY_LOCK_FAILURE) {
            result = 0;
            break;
        }
        if (status == PY_LOCK_INTR && Py_MakePendingCalls() < 0) {
            result = -1;
            break;
        }
    }
    PyThread_free_lock(waiter.wake);
    return result;
}

/* Acquire for the calling thread (re-entrant): 1 when it holds the lock, 0 when it did not get
 * it (not blocking, or the timeout passed), -1 with an error. *waited is set when other threads
 * may have run meanwhile. */
static int
maplock_acquire(MapLock *lock, int blocking, double timeout, int *waited)
{
    unsigned long me = PyThread_get_thread_ident();
    *waited = 0;
    if (lock->depth == 0) {
        lock->owner = me;
        lock->depth = 1;
        return 1;
    }
    if (lock->owner == me) {
        if (lock->depth == PY_SSIZE_T_MAX) {
            PyErr_SetString(PyExc_OverflowError, "MapLock acquired too many times");
            return -1;
        }
        lock->depth++;
        return 1;
    }
    if (!blocking)
        return 0;
    *waited = 1;
    return wait_and_take(lock, me, timeout);
}

/* One level of the calling thread's hold; precondition: it holds the lock. The release to depth
 * 0 wakes the oldest waiter. */
static void
maplock_release_held(MapLock *lock)
{
    if (--lock->depth > 0)
        return;
    lock->owner = 0;
    own_queue(lock);
    LockWaiter *waiter = lock->first_waiter;
    if (waiter != NULL) {
        dequeue(lock, waiter);
        PyThread_release_lock(waiter->wake);
    }
}


/* ---------------------------------------------------------------------------------------------
 * The type
 */

static PyObject *
MapLock_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, ":MapLock", names))
        return NULL;
    return type->tp_alloc(type, 0); /* free, no waiter */
}

static void
MapLock_dealloc(MapLock *lock) /* no waiter: each holds a reference through its acquire call */
{
    Py_TYPE(lock)->tp_free((PyObject *)lock);
}

static PyObject *
MapLock_acquire(MapLock *lock, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"blocking", "timeout", NULL};
    int blocking = 1, waited;
    double timeout = -1.0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|pd:acquire", names, &blocking, &timeout))
        return NULL;
    if (!blocking && timeout != -1.0) {
        PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
        return NULL;
    }
    if (timeout < 0 && timeout != -1.0) {
        PyErr_SetString(PyExc_ValueError, "timeout value must be a non-negative number");
        return NULL;
    }
    int taken = maplock_acquire(lock, blocking, timeout, &waited);
    return taken < 0 ? NULL : PyBool_FromLong(taken);
}

static PyObject *
MapLock_release(MapLock *lock, PyObject *Py_UNUSED(ignored))
{
    if (!maplock_owned_by_caller(lock)) {
        PyErr_SetString(PyExc_RuntimeError, "cannot release un-acquired lock");
        return NULL;
    }
    maplock_release_held(lock);
    Py_RETURN_NONE;
}

static PyObject *
MapLock_exit(MapLock *lock, PyObject *Py_UNUSED(args))
{
    return MapLock_release(lock, NULL);
}

static PyObject *
MapLock_is_owned(MapLock *lock, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(maplock_owned_by_caller(lock));
}

static PyObject *
MapLock_repr(MapLock *lock)
{
    return PyUnicode_FromFormat("<%s %s owner=%lu depth=%zd>", Py_TYPE(lock)->tp_name,
                                lock->depth ? "locked" : "unlocked", lock->owner, lock->depth);
}

static PyMethodDef MapLock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))MapLock_acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire(blocking=True, timeout=-1)\n--\n\nAcquire for this thread, re-entrantly, as "
     "threading.RLock.acquire: True when held."},
    {"release", (PyCFunction)MapLock_release, METH_NOARGS,
     "Release one level of this thread's hold; RuntimeError when it holds none."},
    {"__enter__", (PyCFunction)(void (*)(void))MapLock_acquire, METH_VARARGS | METH_KEYWORDS,
     "Acquire, blocking."},
    {"__exit__", (PyCFunction)MapLock_exit, METH_VARARGS, "Release."},
    {"_is_owned", (PyCFunction)MapLock_is_owned, METH_NOARGS,
     "Whether the calling thread holds the lock."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject MapLockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "offheap.collection._lock.MapLock",
    .tp_basicsize = sizeof(MapLock),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "MapLock()\n--\n\nThe re-entrant lock of a collection, or of all the collections of "
              "a DB: threading.RLock's interface, with a state the compiled cores read and take "
              "(offheap.collection.locks).",
    .tp_new = MapLock_new,
    .tp_dealloc = (destructor)MapLock_dealloc,
    .tp_repr = (reprfunc)MapLock_repr,
    .tp_methods = MapLock_methods,
};

static const LockApi lock_api = {&MapLockType, maplock_acquire, maplock_release_held,
                                 &MapLock_methods[0], &MapLock_methods[1]};

static struct PyModuleDef lock_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "offheap.collection._lock",
    .m_doc = "MapLock, the re-entrant lock of offheap's collections, and its C interface (the "
             "capsule _C_API) for the compiled cores.",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__lock(void)
{
    if (PyType_Ready(&MapLockType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&lock_module);
    if (module == NULL)
        return NULL;
    PyObject *capsule = PyCapsule_New((void *)&lock_api, LOCK_API_CAPSULE, NULL);
    if (capsule == NULL || PyModule_AddObject(module, "_C_API", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(module);
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "MapLock", (PyObject *)&MapLockType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
