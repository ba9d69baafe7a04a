"""The lock of a LongHashMap, and how its operations take it (layer 6).

Every map has one re-entrant lock, ``_lock``; the collections of a :class:`~offheap.DB` share
the DB's (they write to one store). :func:`~offheap.collection.locks.new_lock` makes one: the
compiled ``MapLock``, whose state the compiled core reads, or ``threading.RLock`` when the
compiled core is not selected. Both have RLock's interface.

The rule, on both cores:

- A scalar operation of the compiled core that calls no Python code (int keys, values that fit a
  slot word, no growth) runs without taking the lock when it is free: it never gives up the GIL,
  so it is atomic the way a dict's is. It waits while another thread holds the lock.
- Every step that may call Python code (the value codec and the store, growth, a key's
  ``__index__``) and every method made of several steps holds the lock from start to end: the
  compiled core's slow paths take it themselves; the map's methods above the core (bulk paths,
  ``clear``, ``update``, ``stats``, commits, views' iteration) are wrapped by :func:`locked`,
  generators step by step by :func:`locked_steps`; the pure-Python core's operations are
  wrapped here (:class:`LockedReferenceCore`), since every one of them runs Python code.

So two threads writing, reading and iterating one map without a lock of their own never
corrupt it, lose a key or crash; an iterator still raises RuntimeError at its next step once
the map changed size, as a dict's does.

Cost: a free lock costs the compiled fast paths one load and one branch; a held one, a
``PyThread`` lock acquire and release (about 50 ns).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from offheap.hashmap.core import MapCore as ReferenceCore

_Method = TypeVar("_Method", bound=Callable[..., Any])


class _LockHolder(Protocol):
    _lock: threading.RLock


def locked(method: _Method) -> _Method:
    """``method`` holding ``self._lock`` from start to end."""

    @functools.wraps(method)
    def run_locked(self: _LockHolder, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return cast(_Method, run_locked)


def locked_steps(lock: threading.RLock, steps: Iterator) -> Iterator:
    """The items of ``steps``, each step taken under ``lock`` (not held between steps, so other
    threads run while the consumer works on an item)."""
    while True:
        with lock:
            try:
                item = next(steps)
            except StopIteration:
                return
        yield item


def locked_generator(method: Callable[..., Iterator]) -> Callable[..., Iterator]:
    """A generator method whose every step holds ``self._lock``."""

    @functools.wraps(method)
    def run_locked(self: _LockHolder, *args, **kwargs) -> Iterator:
        with self._lock:
            steps = method(self, *args, **kwargs)
        return locked_steps(self._lock, steps)

    return run_locked


class LockedReferenceCore(ReferenceCore):
    """The pure-Python core with each operation under the map's lock (see the module
    docstring): the core a LongHashMap takes when the compiled one is not selected. The
    core's helpers (``_lookup`` and the rest) run only inside these operations, already under
    the lock, so they are not wrapped again."""

    _lock: threading.RLock

    if not TYPE_CHECKING:
        __getitem__ = locked(ReferenceCore.__getitem__)
        __setitem__ = locked(ReferenceCore.__setitem__)
        __delitem__ = locked(ReferenceCore.__delitem__)
        __contains__ = locked(ReferenceCore.__contains__)
        get = locked(ReferenceCore.get)
        pop = locked(ReferenceCore.pop)
        popitem = locked(ReferenceCore.popitem)
        setdefault = locked(ReferenceCore.setdefault)
        _add_key = locked(ReferenceCore._add_key)
        _discard_key = locked(ReferenceCore._discard_key)
        __iter__ = locked_generator(ReferenceCore.__iter__)
        _iter_values = locked_generator(ReferenceCore._iter_values)
        _iter_items = locked_generator(ReferenceCore._iter_items)
