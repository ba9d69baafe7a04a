/* The C interface another extension module exports as a capsule, imported with the GIL held. */
#ifndef OFFHEAP_KERNELS_CAPSULE_H
#define OFFHEAP_KERNELS_CAPSULE_H

#include <Python.h>

/* The pointer in capsule `capsule_name` of module `module_name`, or NULL with an exception. The
 * module is imported first: PyCapsule_Import only looks up attributes of modules already
 * imported, and a core may load before the module it uses (the pure-Python path selected, or a
 * test importing one extension alone). */
static inline void *
capsule_import(const char *module_name, const char *capsule_name)
{
    PyObject *module = PyImport_ImportModule(module_name);
    Py_XDECREF(module);
    return module == NULL ? NULL : PyCapsule_Import(capsule_name, 0);
}

#endif
