"""Build of offheap's compiled core: the C extension modules beside their pure-Python references.

Metadata and packages are declared in pyproject.toml; this file only adds the extensions, so
that ``pip install -e ".[test]"`` compiles them. A build without a working C compiler or the
Python headers fails with the compiler's error: the pure-Python reference is selected on purpose
with ``OFFHEAP_PURE_PYTHON=1`` (:mod:`offheap.kernels.native`), never by a silent skip here.
"""

import sys

from setuptools import Extension, setup

FLAGS = [] if sys.platform == "win32" else ["-O2", "-Wall", "-Wextra", "-fvisibility=hidden"]
HASHMAP_SOURCES = ["offheap/hashmap/_core.c"] + [f"offheap/hashmap/csrc/{name}.c" for name in (
    "table", "values", "operations", "iterator", "bulk", "build", "lock", "siphash", "keys", "keyedbulk", "cache")]
SPARKEY_SOURCES = ["sparkey/_native.c"] + [f"sparkey/csrc/{name}.c" for name in (
    "arguments", "cutting", "lookups", "murmur", "entries", "scans", "slots", "table")]
PAIRS_HEADER = "offheap/kernels/csrc/pairs.h"
DICTTAG_HEADER = "offheap/kernels/csrc/dicttag.h"
CAPSULE_HEADER = "offheap/kernels/csrc/capsule.h"
RECORDS_HEADER = "offheap/store/csrc/records.h"
SPACE_API_HEADER = "offheap/store/csrc/space_api.h"
LOCK_API_HEADER = "offheap/collection/csrc/lock_api.h"
SHARED_HEADERS = ["offheap/kernels/csrc", "offheap/store/csrc", "offheap/collection/csrc"]
PAGES_SOURCES = ["offheap/treemap/_pages.c"] + [f"offheap/treemap/csrc/{name}.c" for name in (
    "stream", "strings", "columns", "fields", "descent", "forms", "slots", "setslots", "around", "ranges", "walk")]

setup(
    ext_modules=[
        Extension("offheap.collection._lock", ["offheap/collection/_lock.c"], depends=[LOCK_API_HEADER, CAPSULE_HEADER],
                  include_dirs=["offheap/collection/csrc", "offheap/kernels/csrc"],
                  extra_compile_args=FLAGS),
        Extension("offheap.hashmap._core", HASHMAP_SOURCES, depends=["offheap/hashmap/csrc/core.h", "offheap/hashmap/csrc/build.h",
                                                                    "offheap/hashmap/csrc/siphash.h", PAIRS_HEADER, RECORDS_HEADER, LOCK_API_HEADER,
                                                                    CAPSULE_HEADER,
                                                                    DICTTAG_HEADER],
                  include_dirs=SHARED_HEADERS,
                  extra_compile_args=FLAGS),
        Extension("offheap.store._space", ["offheap/store/_space.c"],
                  depends=[SPACE_API_HEADER, CAPSULE_HEADER], include_dirs=["offheap/kernels/csrc"],
                  extra_compile_args=FLAGS),
        Extension("offheap.treemap._pages", PAGES_SOURCES, depends=["offheap/treemap/csrc/pages.h",
                                                                       "offheap/treemap/csrc/slots.h", PAIRS_HEADER, RECORDS_HEADER, DICTTAG_HEADER, LOCK_API_HEADER,
                                                                       SPACE_API_HEADER, CAPSULE_HEADER],
                  include_dirs=SHARED_HEADERS,
                  extra_compile_args=FLAGS),
        Extension("sparkey._native", SPARKEY_SOURCES, depends=["sparkey/csrc/native.h"],
                  extra_compile_args=FLAGS),
    ],
)
