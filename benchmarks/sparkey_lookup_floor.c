/* The C floor of a scalar sparkey lookup: the compiled Lookup called from a C loop.
 *
 * benchmarks/sparkey_native_bench.py compiles this file into a throwaway shared library and
 * calls it through ctypes (with the GIL held), passing the address of sparkey._native's own
 * sparkey_lookup_value or sparkey_hash: the code timed is exactly the code reader.get,
 * reader[k] and `k in reader` run, for the same keys, minus the interpreter between calls.
 *
 * A free-running loop lets the processor start the next lookup's cache misses while the
 * current one waits for its own (as a C library's benchmark loop does); a fenced loop
 * (lfence after each lookup, x86-64 only) stops that overlap, as a Python caller's hundreds
 * of interpreter instructions between two calls do.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

typedef PyObject *(*lookup_value_fn)(PyObject *lookup, PyObject *key, int found_only);
typedef uint64_t (*hash_fn)(const uint8_t *key, size_t len, uint32_t seed, unsigned hash_size);

/* Whether lookup_loop can fence (1) on this processor. */
int can_fence(void)
{
#if defined(__x86_64__)
    return 1;
#else
    return 0;
#endif
}

/* Look up every key of the list `keys` in order, dropping each answer (found_only as
 * Lookup.contains passes it); with `fenced` (and can_fence()), wait for each lookup to
 * complete before the next starts. The number of keys found, or -1 with the error of the
 * first failing lookup set. */
Py_ssize_t lookup_loop(lookup_value_fn lookup_value, PyObject *lookup, PyObject *keys,
                       int found_only, int fenced)
{
    Py_ssize_t found = 0, count = PyList_GET_SIZE(keys);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *value = lookup_value(lookup, PyList_GET_ITEM(keys, i), found_only);
        if (!value)
            return -1;
        found += value != Py_None;
        Py_DECREF(value);
#if defined(__x86_64__)
        if (fenced)
            _mm_lfence();
#endif
    }
    return found;
}

/* The hashes of every bytes object of the list `keys`, summed (the hashing part of a lookup). */
uint64_t hash_loop(hash_fn hash, PyObject *keys, uint32_t seed, unsigned hash_size)
{
    uint64_t sum = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        sum += hash((const uint8_t *)PyBytes_AS_STRING(key), (size_t)PyBytes_GET_SIZE(key),
                    seed, hash_size);
    }
    return sum;
}
