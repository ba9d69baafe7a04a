"""The lock of a collection (layer 6, below the collections themselves): :func:`new_lock`.

Each map has one re-entrant lock; the collections of a :class:`~offheap.DB` share the DB's
(they write to one store). With the compiled core it is a ``MapLock``
(``offheap/collection/_lock.c``, state and C interface in ``offheap/collection/csrc/lock_api.h``):
the hash map core reads its state to run a scalar operation without taking it when it is free,
and the TreeMap's item slots take and give it without a Python call. With the pure-Python
reference it is a ``threading.RLock``. Both have RLock's interface: ``acquire(blocking=True,
timeout=-1)``, ``release()`` and the context manager.
"""

from __future__ import annotations

import threading
from typing import cast

from offheap.kernels import native

_compiled = native.compiled_module("offheap.collection._lock")


def new_lock() -> threading.RLock:
    """A new collection lock: a ``MapLock`` when the compiled core is selected, else an
    RLock."""
    if _compiled is None:
        return threading.RLock()
    return cast(threading.RLock, _compiled.MapLock())
