/* The compiled LongHashMap core: the turns the core's operations take with the map's MapLock
 * (offheap.collection._lock, whose state and interface collection/csrc/lock_api.h states).
 *
 * The rule. A table operation that calls no Python code runs without the lock when it is free:
 * it never gives up the GIL, so no other thread runs until it is done. Before it reads the
 * table it waits while another thread holds the lock (begin_turn), and before any call into
 * Python (the codec, _make_room, a key's __index__) it holds the lock (hold_lock) until the end
 * of the operation (end_turn). Every other method of the map holds the lock from start to end,
 * so an operation never sees another one half done. hold_lock reports when it had to wait:
 * other threads ran meanwhile, and the caller reads the table again.
 */

#include "core.h"

int
hold_lock(MapCore *self, int *held)
{
    int waited;
    MapLock *lock = self->lock;
    if (*held || lock == NULL || maplock_owned_by_caller(lock))
        return 0;
    Py_INCREF(lock); /* the wait runs other threads, which may set another lock */
    int taken = lock_api->acquire(lock, 1, -1.0, &waited);
    if (taken == 1 && lock != self->lock) { /* the map took another lock meanwhile: wait again */
        lock_api->release_held(lock);
        Py_DECREF(lock);
        return hold_lock(self, held);
    }
    Py_DECREF(lock);
    if (taken < 0)
        return -1;
    *held = 1;
    return waited;
}

void
end_turn(MapCore *self, int held)
{
    if (held)
        lock_api->release_held(self->lock);
}

