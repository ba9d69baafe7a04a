/* The C interface of offheap.store._space for other extensions, reached through the capsule
 * SPACE_API_CAPSULE (space_api_import, with the GIL held).
 *
 * update(store, recid, data, size): RecordStore.update of record `recid` of `store` (a
 * RecordStore whose free space is the compiled FreeSpace) to the `size` bytes at `data`, when
 * they are neither empty nor large, the record is not large and no new segment is needed:
 * 1 done, 0 declined with nothing changed (RecordStore.update makes it), -1 with an exception.
 */
#ifndef OFFHEAP_STORE_SPACE_API_H
#define OFFHEAP_STORE_SPACE_API_H

#include <Python.h>
#include <stdint.h>

#include "capsule.h"

#define SPACE_API_CAPSULE "offheap.store._space._C_API"

typedef struct {
    int (*update)(PyObject *store, Py_ssize_t recid, const uint8_t *data, Py_ssize_t size);
} SpaceApi;

/* The interface, or NULL with an exception. */
static inline const SpaceApi *
space_api_import(void)
{
    return capsule_import("offheap.store._space", SPACE_API_CAPSULE);
}

#endif
