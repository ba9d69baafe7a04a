/* The version tag of a dict (CPython 3.11's ma_version_tag, PEP 509): every change of the dict
 * moves it to a value no dict had before, so an unchanged tag means an unchanged dict. The
 * compiled modules use it to keep what they read from an object's __dict__ (a map's version,
 * a store's arrays) until that dict changes.
 *
 * 0 where the interpreter keeps no tag (3.12 on): a remembered tag of 0 never matches, so every
 * check reads the dict again. */
#ifndef OFFHEAP_DICTTAG_H
#define OFFHEAP_DICTTAG_H

#include <Python.h>
#include <stdint.h>

static inline uint64_t
dict_tag(PyObject *dict)
{
#if PY_VERSION_HEX < 0x030C0000
    return ((PyDictObject *)dict)->ma_version_tag;
#else
    (void)dict;
    return 0;
#endif
}

#endif
