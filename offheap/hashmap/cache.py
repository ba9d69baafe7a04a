"""Cache: a bounded, expiring mapping on a HashMap, evicting by LRU or CLOCK (layer 6).

MapDB's HTreeMap doubles as a cache (``expireMaxSize``, ``expireStoreSize``,
``expireAfterWrite/Access``); :class:`Cache` is that for offheap: a ``MutableMapping`` whose
entries live in a :class:`~offheap.hashmap.cachetable.CacheTable` (a HashMap of the same key
and value types) and leave it when the cache is full or when they expire.

Composition, not a subclass: the cache *holds* its table. A HashMap's interface (bulk paths,
``popitem`` of the newest, ``reversed``, files, DB and readers) would let entries in and out
past the cache's rules (counts, stamps, stats), so the cache offers only what it can keep
consistent: the dict interface, ``stats()``, ``copy()``, ``close()``.

Policy and order. A write deletes the entry and inserts it again at the newest end of the
table's entry order. With ``policy="lru"`` (the default) a hit (``c[k]``, ``c.get(k)``) moves
its entry to the newest end too (in place: :mod:`offheap.hashmap.cachecore`), so the order is
the recency order and an eviction takes the least recently used entry. With ``policy="clock"`` a hit only marks its entry; the eviction hand sweeps the entry
order, unmarking and passing marked entries and evicting the first unmarked one (CLOCK, a
second chance): a hit costs one probe and no write to the table. ``k in c``, iteration,
``len`` and ``pop`` neither move nor mark an entry, nor count as a hit. Iteration runs in the
entry order (LRU: least recently used first), and ``popitem()`` takes the entry an eviction
would take (as ``cachetools``' LRU cache, where a dict takes the newest).

Bounds, checked by every write; evictions by them count as ``size_evictions``:

- ``max_entries``: a new key first evicts entries until there is room for it.
- ``max_bytes`` (an int or a size such as ``"64MiB"``): the bytes the table holds in its store,
  its regions (index and entries) and its records (values and keys that do not fit a slot).
  The table never grows past it (:class:`~offheap.hashmap.cachetable.BudgetStore`: the
  growth is refused, the cache evicts and retries), and after a write the cache evicts until
  the records fit again: an entry too large for the bound on its own is evicted at once.
- ``limit``: the arena's hard limit. Where a HashMap raises CapacityError, the cache evicts an
  entry and tries again; a failed attempt leaves the table as it was (the table's failure
  atomicity). Only a write that fails with the cache empty raises CapacityError, the key then
  absent.

A key or value the table refuses (the TypeError of a wrong type) raises before the cache
changes anything; an ``"object"`` value that fails to pickle raises after the evictions and
the removal of the entry it overwrites.

Expiry, with ``ttl`` (seconds, on ``clock``, ``time.monotonic`` unless given, never going
back; tests pass a fake clock and never sleep): an entry expires ``ttl`` after its last write
(``expire_after="write"``) or its last write or hit (``"access"``): ``now - stamp >= ttl``.
An expired entry is never seen: a lookup of it removes it and misses (lazily), and every
write, ``len``, iteration, ``popitem``, ``copy`` and ``stats`` first remove every expired
entry (in bulk), counted as ``expiry_evictions``. With LRU and ``"access"`` the stamps grow
along the entry order, so the expired entries are the oldest ones and the bulk removal stops
at the first live one: O(expired). Otherwise (a hit keeps the stamp of an entry it moves, or
CLOCK moves nothing) the cache keeps a lower bound of the oldest stamp held, and only once
that has expired does one numpy pass over the stamps (O(n)) find every expired entry and the
new bound.

The parts: the core (:mod:`offheap.hashmap.cachecore`: ``c[k]``, ``c.get(k)``, ``c[k] = v``,
``k in c``, ``del c[k]``, compiled in offheap/hashmap/csrc/cache.c as one C call each, or its
pure-Python reference) and :class:`CacheFacade`, everything else, including the steps the
compiled core leaves to Python (an overwrite, a value kept in a record, ``max_bytes``, the
limit's retries, bulk expiry).

Cost: a hit is one probe of the table and a decode (LRU: and the move of its entry, a copy of
its key and word), a miss one probe; a write of a new key adds the eviction's delete. The table
of a cache of ``max_entries`` reserves its index at a low load
(:data:`~offheap.hashmap.cachetable.RESERVED_LOAD`) so that the deletes and inserts shift
short runs (docs/cache.md has figures).

Thread safety: every operation holds the table's lock (:mod:`offheap.hashmap.locking`) from
start to end, or, in the compiled core, runs under the GIL alone while it calls no Python code
(as a HashMap's operations do), so it is atomic; iterators take the lock step by step and raise
RuntimeError at the step after another operation changed the cache, as a dict's do.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, ItemsView, Iterator, KeysView, MutableMapping, ValuesView
from dataclasses import dataclass
from typing import TYPE_CHECKING, Self

import numpy as np

from offheap.arena.arena import format_bytes
from offheap.collection.display import html_table, setting_rows, settings_text
from offheap.errors import CapacityError, ClosedError
from offheap.hashmap.cachecore import CacheCore, CacheState, ReferenceCacheCore
from offheap.hashmap.cachetable import BudgetError, CacheTable
from offheap.hashmap.locking import locked, locked_steps
from offheap.hashmap.table import bind_core_methods
from offheap.kernels.sizes import ByteLimit, byte_limit

_MISSING = object()
_EXPIRE_AFTER = ("write", "access")
_POLICIES = ("lru", "clock")


@dataclass(frozen=True)
class CacheStats:
    """Counters and sizes of a :class:`Cache`. ``hits`` and ``misses`` count lookups
    (``c[k]``, ``c.get(k)``); evictions count entries the cache removed by itself, by a bound
    (``size_evictions``) or by expiry (``expiry_evictions``)."""

    n_entries: int
    hits: int
    misses: int
    size_evictions: int
    expiry_evictions: int
    held_bytes: int  # what max_bytes bounds: the table's regions and records
    reserved_bytes: int  # the whole arena, what limit bounds

    @property
    def hit_ratio(self) -> float:
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else float("nan")

    @property
    def bytes_per_entry(self) -> float:
        return self.reserved_bytes / self.n_entries if self.n_entries else float("nan")


class CacheFacade(CacheState, MutableMapping):
    """Everything of a :class:`Cache` but its hit and miss paths (the core's,
    :mod:`offheap.hashmap.cachecore`): options, bulk expiry, eviction, the rest of the dict
    interface, stats and lifetime."""

    _lock: threading.RLock

    if TYPE_CHECKING:  # the core's (ReferenceCacheCore, or the compiled CacheCore)
        def _configure(self, table: CacheTable, max_entries: int | None,
                       max_bytes: int | None, ttl: float | None, by_access: bool,
                       clock: Callable[[], float], clock_policy: bool) -> None: ...

    def __init__(self, data=(), /, *, key: str = "str", value=None,
                 max_entries: int | None = None, max_bytes: ByteLimit = None,
                 ttl: float | None = None, expire_after: str = "write",
                 clock: Callable[[], float] = time.monotonic, limit: ByteLimit = None,
                 policy: str = "lru") -> None:
        if max_entries is not None and (type(max_entries) is not int or max_entries < 1):
            raise ValueError(f"max_entries is a number of entries of at least 1 (or None), "
                             f"not {max_entries!r}")
        if ttl is not None and not (isinstance(ttl, (int, float)) and 0 < ttl < math.inf):
            raise ValueError(f"ttl is a positive number of seconds (or None), not {ttl!r}")
        if expire_after not in _EXPIRE_AFTER:
            raise ValueError(f'expire_after is "write" or "access", not {expire_after!r}')
        if policy not in _POLICIES:
            raise ValueError(f'policy is "lru" or "clock", not {policy!r}')
        self._options = dict(key=key, value=value, max_entries=max_entries, max_bytes=max_bytes,
                             ttl=ttl, expire_after=expire_after, clock=clock, limit=limit,
                             policy=policy)
        max_bytes = byte_limit(max_bytes)
        table = CacheTable.new(key, value, limit=limit, max_bytes=max_bytes,
                               max_entries=max_entries,
                               stamped=ttl is not None, marked=policy == "clock")
        self._configure(table, max_entries, max_bytes, ttl, expire_after == "access", clock,
                        policy == "clock")
        self._lock = table._lock
        self.update(data)

    @locked
    def __len__(self) -> int:
        self._expire()
        return len(self._table)

    def __iter__(self) -> Iterator:
        return self._entries(0)

    def keys(self) -> KeysView:
        return KeysView(self)

    def values(self) -> ValuesView:
        return _CacheValuesView(self)

    def items(self) -> ItemsView:
        return _CacheItemsView(self)

    def _entries(self, what: int) -> Iterator:
        """Keys (0), values (1) or items (2) in entry order (LRU: least recently used first),
        after the expired entries went; the table's iterator, each step under the lock."""
        with self._lock:
            self._expire()
            table = self._table
            steps = iter(table) if what == 0 else iter(table.values() if what == 1 else
                                                        table.items())
        return locked_steps(self._lock, steps)

    # -- changes ------------------------------------------------------------------------------

    def _find_live(self, key) -> tuple[int, float | None]:
        """The entry of ``key`` (-1 if absent; an expired entry is removed and counted) and the
        clock, read before the probe (None without a ttl): the compiled core's find_live
        (csrc/cache.c) in Python. Lock held by the caller."""
        table = self._table
        table._check_open()
        now = self._clock() if self._ttl is not None else None
        e = table._lookup(key)
        if e < 0 or now is None:
            return e, now
        stamps = table._stamps
        assert stamps is not None  # a cache with a ttl stamps its entries
        if now - stamps[e] >= self._ttl:
            del table[key]
            self._expiry_evictions += 1
            return -1, now
        return e, now

    def _store(self, key, value, now: float | None) -> None:
        """``self[key] = value``, ``now`` the clock as the caller read it (None: read here,
        with a ttl). Lock held by the caller."""
        table = self._table
        table._check_open()
        if now is None and self._ttl is not None:
            now = self._clock()
        self._expire(now)
        table._keycodec.admit(key)  # a refused key or value: no change
        table._slots.serializer.validate(value)
        if table._lookup(key) >= 0:
            del table[key]
        elif self._max_entries is not None and len(table) >= self._max_entries:
            while len(table) >= self._max_entries:
                self._evict()
        self._insert(key, value, now)
        if self._max_bytes is not None:
            while table.held_bytes > self._max_bytes and len(table):
                self._evict()

    def _reinsert(self, key, stamp: float | None):
        """Delete present ``key`` and insert it again at the newest end with ``stamp``; its
        value (an LRU hit in a table with no free entry). Lock held by the caller."""
        value = self._table.pop(key)
        self._insert(key, value, stamp)
        return value

    def _insert(self, key, value, stamp: float | None) -> None:
        """Insert absent ``key`` at the newest end with ``stamp`` (unmarked), evicting entries
        while the table raises CapacityError (its limit, or a growth
        ``max_bytes`` refuses). An entry that ``max_bytes`` refuses with the cache empty is
        not stored (a size eviction); one the limit refuses raises. Lock held by the caller."""
        table = self._table
        while True:
            table._before_insert()
            try:
                table[key] = value
                break
            except CapacityError as exc:
                if len(table):
                    self._evict()
                elif isinstance(exc, BudgetError):
                    self._size_evictions += 1
                    return
                else:
                    raise CapacityError(f"the entry does not fit the Cache's limit even with "
                                        f"every other entry evicted ({exc}); raise limit= or "
                                        f"store smaller values") from exc
        if table._marks is not None:  # the CLOCK policy's column
            table._marks[table._used - 1] = 0
        if stamp is not None:
            assert table._stamps is not None  # only a cache with a ttl passes a stamp
            table._stamps[table._used - 1] = stamp
            self._oldest_stamp = min(self._oldest_stamp, stamp)

    def _evict(self) -> None:
        """Remove the entry the policy evicts (LRU: the least recently used), counted as a
        size eviction."""
        table = self._table
        del table[table._key_of(table._victim())]
        self._size_evictions += 1

    def _expire(self, now: float | None = None) -> None:
        """Remove every expired entry (module docstring), ``now`` the clock if the caller read
        it; lock held by the caller."""
        table = self._table
        table._check_open()
        if self._ttl is None or not len(table):
            return
        if now is None:
            now = self._clock()
        if self._stamps_ordered:
            while len(table):
                e = table._victim()
                stamps = table._stamps  # read again: a delete may compact the columns
                assert stamps is not None  # a cache with a ttl stamps its entries
                if now - stamps[e] < self._ttl:
                    return
                del table[table._key_of(e)]
                self._expiry_evictions += 1
            return
        if now - self._oldest_stamp < self._ttl:
            return
        live, stamps = table._live_stamps()
        expired = now - stamps >= self._ttl
        if expired.any():
            for key in table._keys_out(table._table().keys.take(live[expired])):
                del table[key]
            self._expiry_evictions += int(expired.sum())
        kept = stamps[~expired]
        self._oldest_stamp = float(kept.min()) if kept.size else math.inf

    @locked
    def _delete(self, key) -> None:
        """``del self[key]``."""
        if self._find_live(key)[0] < 0:
            raise KeyError(key)
        del self._table[key]

    @locked
    def pop(self, key, default=_MISSING, /):
        if self._find_live(key)[0] < 0:
            if default is _MISSING:
                raise KeyError(key)
            return default
        return self._table.pop(key)

    @locked
    def popitem(self):
        """Remove and return the ``(key, value)`` an eviction would take (LRU: the least
        recently used); KeyError when empty."""
        self._expire()
        table = self._table
        if not len(table):
            raise KeyError("popitem(): the Cache is empty")
        key = table._key_of(table._victim())
        return key, table.pop(key)

    @locked
    def clear(self) -> None:
        """Remove every entry (not counted as evictions); the counters stay."""
        self._table.clear()
        self._oldest_stamp = math.inf

    @locked
    def copy(self) -> Self:
        """A new Cache with the same options, entries, order and stamps, entry by entry under
        the same bounds (a table grown another way may hold fewer within ``max_bytes`` or
        ``limit``: the oldest then go); its CLOCK marks and counters start at 0."""
        self._expire()
        twin = type(self)(**self._options)
        table = self._table
        stamps = table._live_stamps()[1].tolist() if self._ttl is not None else None
        for i, (key, value) in enumerate(table.items()):
            twin._insert(key, value, None if stamps is None else stamps[i])
        twin._size_evictions = 0
        return twin

    __copy__ = copy

    # -- introspection and lifetime -----------------------------------------------------------

    @locked
    def stats(self) -> CacheStats:
        self._expire()
        table = self._table
        return CacheStats(n_entries=len(table), hits=self._hits, misses=self._misses,
                          size_evictions=self._size_evictions,
                          expiry_evictions=self._expiry_evictions,
                          held_bytes=table.held_bytes,
                          reserved_bytes=table._store.arena.reserved_bytes)

    def _policy_name(self) -> str:
        return "CLOCK" if self._clock_policy else "LRU"

    def _bounds_text(self) -> str:
        parts = [f"{name}={value}" for name, value in (
            ("max_entries", self._max_entries),
            ("max_bytes", self._max_bytes and format_bytes(self._max_bytes)),
            ("ttl", self._ttl)) if value is not None]
        if self._ttl is not None:
            parts.append(f"expire_after={'access' if self._by_access else 'write'}")
        return ", ".join(parts) or "unbounded"

    @locked
    def __repr__(self) -> str:
        if self._table.closed:
            return "<Cache (closed)>"
        s = self.stats()
        ratio = f"{s.hit_ratio:.1%}" if s.hits + s.misses else "-"
        return (f"<Cache {s.n_entries:,} entries, {self._table._types_text()}, "
                f"{self._policy_name()}, "
                f"{self._bounds_text()}, hits {ratio}, "
                f"{s.size_evictions + s.expiry_evictions:,} evicted, "
                f"{format_bytes(s.held_bytes)} held{settings_text(self._table._store.arena)}>")

    @locked
    def _repr_html_(self) -> str:
        if self._table.closed:
            return "<p><b>Cache</b> (closed)</p>"
        s = self.stats()
        rows = [("entries", f"{s.n_entries:,}"), *self._table._type_rows(),
                ("policy", self._policy_name()), ("bounds", self._bounds_text()),
                ("hits", f"{s.hits:,}"), ("misses", f"{s.misses:,}"),
                ("hit ratio", f"{s.hit_ratio:.3f}" if s.hits + s.misses else "-"),
                ("evicted by size", f"{s.size_evictions:,}"),
                ("evicted by expiry", f"{s.expiry_evictions:,}"),
                ("held", format_bytes(s.held_bytes)), ("reserved", format_bytes(s.reserved_bytes)),
                *setting_rows(self._table._store.arena)]
        return html_table("Cache", rows)

    @property
    def closed(self) -> bool:
        return self._table.closed

    def close(self) -> None:
        """Release the memory; later use raises ClosedError. Idempotent."""
        self._table.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __reduce__(self):
        raise TypeError("a Cache does not pickle (its clock and counters are its process's); "
                        "pickle dict(cache.items()) to send its entries")

    @locked
    def _check(self) -> None:
        """Assert the cache's invariants (the stateful tests call it after every step)."""
        table = self._table
        if table.closed:
            raise ClosedError("the Cache is closed")
        table._check()
        if self._max_entries is not None:
            assert len(table) <= self._max_entries, (len(table), self._max_entries)
        if self._max_bytes is not None:
            assert table.held_bytes <= self._max_bytes, (table.held_bytes, self._max_bytes)
        if self._ttl is not None and len(table):
            stamps = table._live_stamps()[1]
            if self._stamps_ordered:
                assert np.all(np.diff(stamps) >= 0), "stamps out of LRU order"
            else:
                assert self._oldest_stamp <= stamps.min(), "oldest stamp bound too high"


class Cache(CacheCore, CacheFacade):
    """A ``MutableMapping`` off the Python heap that evicts entries (``policy="lru"``: the least
    recently used; ``"clock"``: CLOCK's second chance) to stay within ``max_entries`` entries,
    ``max_bytes`` bytes and the arena's ``limit``, and drops entries ``ttl`` seconds after
    their last write (or access, ``expire_after="access"``).

    ``key`` and ``value`` are :class:`~offheap.HashMap`'s key and value types; ``clock`` is a
    function returning seconds (``time.monotonic``). The module docstring gives the rules.
    """


bind_core_methods(Cache)  # dict's call speed for c.get(k)


class ReferenceCache(ReferenceCacheCore, CacheFacade):
    """A Cache on the pure-Python cache core whatever :mod:`offheap.kernels.native` selected:
    what the differential tests hold the compiled cache core to (over the same kind of table)."""


class _CacheValuesView(ValuesView):
    """The values, read from the table (neither a hit nor a move)."""

    _mapping: Cache

    def __iter__(self):
        return self._mapping._entries(1)


class _CacheItemsView(ItemsView):
    """The items, read from the table (neither a hit nor a move)."""

    _mapping: Cache

    def __iter__(self):
        return self._mapping._entries(2)

    def __contains__(self, item) -> bool:
        key, value = item
        with self._mapping._lock:
            if key not in self._mapping:
                return False
            stored = self._mapping._table[key]
        return stored is value or stored == value
