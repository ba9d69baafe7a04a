"""A Cache's hit and miss paths in pure Python: the reference of the compiled cache core (layer 6).

:class:`ReferenceCacheCore` holds what a :class:`~offheap.hashmap.cache.Cache` does on every
operation, ``c[k]``, ``c.get(k)``, ``c[k] = v``, ``k in c`` and ``del c[k]``, and the options
and counters they read and write (``_configure``). Its compiled twin, ``CacheCore``
(offheap/hashmap/csrc/cache.c), does the same in one C call through type slots: the same answers,
counters, evictions in the same order and the same effect on the table. The compiled core runs
the common cases itself and calls the cache's methods (``_store``, ``_insert``, ``_expire``,
``_reinsert``, ``_delete``) for the others, so those have one implementation, in
:mod:`offheap.hashmap.cache`.

A hit under LRU moves its entry to the newest end in place (the table core's ``_move_to_end``:
its key and word copied to a free entry, its index slot repointed, no probe of another slot and
no record touched); a table with no free entry deletes the entry and inserts it again
(``_reinsert``), which compacts the holes. A hit under CLOCK sets the entry's mark. With a
``ttl`` the clock is read once an operation, before the probe.

Thread safety: every method runs under the table's lock (the compiled core: as the map's own
operations, see offheap/hashmap/csrc/lock.c).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from offheap.hashmap.locking import locked
from offheap.kernels import native

if TYPE_CHECKING:
    import threading

    from offheap.hashmap.cachetable import CacheTable

_MISSING = object()


class CacheState:
    """The options and counters a cache's core keeps (set by ``_configure``), which the rest of
    the cache reads and writes too: attributes of the reference core, members of the compiled
    one."""

    _table: CacheTable
    _max_entries: int | None
    _max_bytes: int | None
    _ttl: float | None
    _by_access: bool
    _clock: Callable[[], float]
    _clock_policy: bool
    _stamps_ordered: bool  # the stamps grow along the entry order: every access moves its entry
    _hits: int
    _misses: int
    _size_evictions: int
    _expiry_evictions: int
    _oldest_stamp: float  # at most the oldest stamp held (the cache's module docstring)


class ReferenceCacheCore(CacheState):
    """A Cache's hit and miss paths (pure-Python reference; the compiled one is ``CacheCore``)."""

    _lock: threading.RLock

    if TYPE_CHECKING:  # the cache's, shared with the compiled core
        def _store(self, key, value, now: float | None) -> None: ...

        def _reinsert(self, key, stamp: float | None): ...

        def _expire(self, now: float | None = None) -> None: ...

        def _delete(self, key) -> None: ...

        def _find_live(self, key) -> tuple[int, float | None]: ...

    def _configure(self, table: CacheTable, max_entries: int | None, max_bytes: int | None,
                   ttl: float | None, by_access: bool, clock: Callable[[], float],
                   clock_policy: bool) -> None:
        """Take the cache's table and options; the counters start at 0."""
        self._table = table
        self._max_entries, self._max_bytes, self._ttl = max_entries, max_bytes, ttl
        self._by_access, self._clock, self._clock_policy = by_access, clock, clock_policy
        self._stamps_ordered = by_access and not clock_policy
        self._hits = self._misses = self._size_evictions = self._expiry_evictions = 0
        self._oldest_stamp = math.inf

    @locked
    def __getitem__(self, key):
        value = self._access(key)
        if value is _MISSING:
            raise KeyError(key)
        return value

    @locked
    def get(self, key, default=None, /):
        value = self._access(key)
        return default if value is _MISSING else value

    @locked
    def __contains__(self, key) -> bool:
        return self._find_live(key)[0] >= 0

    @locked
    def __setitem__(self, key, value) -> None:
        self._store(key, value, None)

    def __delitem__(self, key) -> None:
        self._delete(key)

    def _access(self, key):
        """The value of ``key`` as a hit (counted; LRU: moved to the newest end, CLOCK:
        marked; with "access", stamped), or _MISSING as a miss (an expired entry removed)."""
        table = self._table
        e, now = self._find_live(key)
        if e < 0:
            self._misses += 1
            return _MISSING
        self._hits += 1
        if self._clock_policy:
            table._marks[e] = 1
        elif e != table._used - 1:
            when = now if self._by_access or now is None else float(table._stamps[e])
            if table._used >= table._capacity:  # no free entry: delete and insert again
                return self._reinsert(key, when)
            table._before_insert()
            e = table._move_to_end(key)
            if when is not None:
                table._stamps[e] = when
                self._oldest_stamp = min(self._oldest_stamp, when)
            return table._value_of(e)
        if self._by_access:
            table._stamps[e] = now
        return table._value_of(e)


if TYPE_CHECKING:
    CacheCore = ReferenceCacheCore  # the compiled type mirrors the reference's interface
else:
    _compiled = native.compiled_module("offheap.hashmap._core")
    CacheCore = ReferenceCacheCore if _compiled is None else _compiled.CacheCore
"""The core a Cache is built on: the compiled ``CacheCore`` when :mod:`offheap.kernels.native`
selects it, else :class:`ReferenceCacheCore`."""
