"""The table of a :class:`~offheap.hashmap.cache.Cache`: a HashMap with a hand over its
entries, a time stamp and a mark per entry, growing within a byte budget (layer 6).

A cache keeps its entries in a :class:`CacheTable`, a :class:`~offheap.HashMap` whose entry
order is the cache's order: with LRU the recency order (a hit moves the entry to the newest
end: the core's ``_move_to_end``, or a delete and an insert when no entry is free), with CLOCK
the order of writes. What the table adds:

- *The hand* (``_hand``, an entry number) and :meth:`CacheTable._victim`, the entry an
  eviction takes, found without a scan of the whole table: the first live entry at or after
  the hand (the first set live bit, read ``_SCAN_BYTES`` at a time), wrapping to entry 0 past
  the last one. With LRU every entry below the hand is a hole (the hand only ever moves to the
  first live entry, and entries are only appended), so the victim is the least recently used
  entry and evicting every entry in turn reads each live bit once: O(1) amortized. With CLOCK
  a marked victim is unmarked and passed, the hand going on after it (a second chance), so a
  sweep passes each entry at most twice. Compaction renumbers the entries and moves the hand
  with them; an insert past a hand at or past the last entry first sends the hand back to 0
  (the new entry, numbered ``_used``, is then reached last).
- *Stamps* (``_stamps``, with a ``ttl``): one float64 per entry number, the time of the
  entry's last write or access (the cache says which), and *marks* (``_marks``, with CLOCK):
  one byte per entry number, 1 once a hit marked it. Numpy arrays beside the table, on the
  Python heap (a cache has no file to keep them in), set at every insert, at least
  ``_capacity`` long (grown with the chunks) and compacted with the entries
  (:meth:`CacheTable._compact`). Holes' items are stale and never read. The hand, stamps and
  marks are attributes of the table's core: on the compiled core, fields of its struct, which
  holds a buffer export of each array (offheap/hashmap/csrc/cache.c), so the compiled cache
  core reads and writes them in place.
- *A reserved index*: a cache of ``max_entries`` without ``max_bytes`` grows its index at
  once to hold them at :data:`RESERVED_LOAD`, if the limit leaves room for it.
- *A byte budget* (:class:`BudgetStore`): the table's own store refuses a region (an index, a
  chunk of entries) that would take the bytes it holds past ``max_bytes`` once the growth
  step ends (the regions the step replaces then freed) with a :class:`BudgetError`, the
  :class:`~offheap.errors.CapacityError` a full arena raises, before the table changes. So
  the table never outgrows the budget: the cache evicts and tries again, and the retry
  compacts holes or fits in the index it has.

Thread safety: none of its own; the cache runs every operation under the table's lock.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from offheap.arena.arena import Arena, format_bytes
from offheap.errors import CapacityError
from offheap.hashmap.keyedmap import HashMap
from offheap.hashmap.layout import CHUNK_BITS, CHUNK_ENTRIES, CHUNK_MASK
from offheap.hashmap.table import OWN_STORE_RECORDS
from offheap.kernels.sizes import ByteLimit
from offheap.store.records import RecordStore
from offheap.store.serializers import get_serializer

_SCAN_BYTES = 64
"""Bytes of live bits (512 entries) the search for the oldest entry reads at a time."""

RESERVED_LOAD = 0.25
"""The load of the index a cache of ``max_entries`` (and no ``max_bytes``) reserves when it is
made: at most this many entries a home once full. An eviction and an insert each shift a
Robin Hood run of the index, which a lower load keeps short (the slots of a keyed table hash
their key again to find its home). The index of a map grows at up to ``MAX_LOAD``."""

RESERVED_HOMES_MAX = 1 << 22
"""The largest index reserved that way (16 MiB); a larger cache's index grows as a map's."""


class BudgetError(CapacityError):
    """A growth of the table that its byte budget (``max_bytes``) refuses."""


class BudgetStore(RecordStore):
    """A table's own record store whose regions and records together stay within
    ``budget`` bytes when a region is allocated (None: no budget, the arena's limit only).

    ``held_bytes`` is what the table holds: the payload of its regions and the live bytes of
    its records (values and long keys that do not fit a slot, the metadata records). Records
    are not refused here: the cache evicts after a write that took it past the budget."""

    def __init__(self, arena: Arena, budget: int | None) -> None:
        super().__init__(arena, index_capacity=OWN_STORE_RECORDS)
        self.budget = budget
        self.region_bytes = 0
        self._replaced_bytes = 0  # freed when the growth step under way ends

    @contextmanager
    def replacing(self, nbytes: int) -> Iterator[None]:
        """A growth step that frees regions of ``nbytes`` once its new ones are made: the
        budget holds for the bytes after the step (the old and new regions exist together
        while it copies)."""
        self._replaced_bytes = nbytes
        try:
            yield
        finally:
            self._replaced_bytes = 0

    @property
    def held_bytes(self) -> int:
        return self.region_bytes + self._live_bytes

    def allocate_region(self, nbytes: int) -> int:
        offset = super().allocate_region(nbytes)
        size = self.arena.payload_bytes(offset)
        if self.budget is not None and \
                self.held_bytes - self._replaced_bytes + size > self.budget:
            super().free_region(offset)
            raise BudgetError(f"max_bytes of {format_bytes(self.budget)} reached: "
                                f"{format_bytes(self.held_bytes)} held, a region of "
                                f"{format_bytes(size)} asked for")
        self.region_bytes += size
        return offset

    def free_region(self, offset: int) -> None:
        size = self.arena.payload_bytes(offset)
        super().free_region(offset)
        self.region_bytes -= size


class CacheTable(HashMap):
    """A HashMap with a hand over its entries, per-entry stamps and marks, and a byte budget
    (see the module docstring); made by :meth:`new`, used only by a
    :class:`~offheap.hashmap.cache.Cache`."""

    _hand: int
    _stamps: np.ndarray | None
    _marks: np.ndarray | None

    @classmethod
    def new(cls, key: str, value, *, limit: ByteLimit, max_bytes: int | None,
            max_entries: int | None, stamped: bool, marked: bool) -> CacheTable:
        """An empty anonymous table of ``key`` and ``value`` types in its own
        :class:`BudgetStore` (``limit``: the arena's, ``max_bytes``: the budget), with a stamp
        per entry if ``stamped`` and a mark per entry if ``marked``, and an index for
        ``max_entries`` at :data:`RESERVED_LOAD` when there is no budget and the limit leaves
        room for it."""
        table = cls.__new__(cls)
        table._ask_key_type(key)
        table._hand = 0
        table._stamps = np.zeros(0, np.float64) if stamped else None
        table._marks = np.zeros(0, np.uint8) if marked else None
        store = BudgetStore(Arena.anonymous(limit_bytes=limit), max_bytes)
        try:
            table._setup(store, get_serializer(value or "object"), meta_recid=None,
                         owns_store=True, allow_pickle=True)
        except BaseException:
            store.close(save=False)
            raise
        table._fit_columns()
        if max_entries is not None and max_bytes is None:
            homes = min(RESERVED_HOMES_MAX, math.ceil(max_entries / RESERVED_LOAD))
            try:
                if homes > table._homes:
                    table._grow_index(homes, 0)
            except CapacityError:  # the limit: the index grows with the entries instead
                pass
        return table

    def _budget(self) -> BudgetStore:
        store = self._store
        assert isinstance(store, BudgetStore)
        return store

    @property
    def held_bytes(self) -> int:
        """The bytes the table holds in its store (:class:`BudgetStore`)."""
        return self._budget().held_bytes

    # -- the hand -----------------------------------------------------------------------------

    def _victim(self) -> int:
        """The entry an eviction takes (the table is not empty): the first live entry at or
        after the hand, wrapping to entry 0 past the last; with marks, a marked one is
        unmarked and passed (CLOCK's second chance)."""
        assert self._n, "no victim in an empty table"
        marks = self._marks
        while True:
            e = self._live_from(self._hand if self._hand < self._used else 0)
            if e < 0:
                e = self._live_from(0)
            self._hand = e
            if marks is None or e >= len(marks) or not marks[e]:
                return e
            marks[e] = 0
            self._hand = e + 1

    def _live_from(self, e: int) -> int:
        """The first live entry at or after ``e``, or -1: the live bits read
        ``_SCAN_BYTES`` at a time."""
        r = self._table()
        while e < self._used:
            chunk, at = e >> CHUNK_BITS, e & CHUNK_MASK
            bits = r.live_chunks[chunk]
            start = at >> 3
            window = bits[start: start + _SCAN_BYTES]
            if at & 7:  # the bits of the first byte below e do not count
                window = window.copy()
                window[0] &= 0xFF << (at & 7) & 0xFF
            set_bytes = np.flatnonzero(window)
            if set_bytes.size:
                byte = int(window[set_bytes[0]])
                found = (chunk << CHUNK_BITS) + (start + int(set_bytes[0])) * 8 + \
                    (byte & -byte).bit_length() - 1
                return found if found < self._used else -1
            e = (chunk << CHUNK_BITS) + (start + len(window)) * 8
        return -1

    def _before_insert(self) -> None:
        """Send a hand past the last entry back to entry 0 before an insert appends the entry
        numbered ``_used``: the hand then reaches the new entry last."""
        if self._hand >= self._used:
            self._hand = 0

    # -- stamps and marks ---------------------------------------------------------------------

    def _fit_columns(self) -> None:
        """Grow the stamps and marks to the table's capacity (they are never shorter: the
        compiled cache core writes them by entry number)."""
        for name in ("_stamps", "_marks"):
            column = getattr(self, name)
            if column is not None and len(column) < self._capacity:
                grown = np.zeros(self._capacity, column.dtype)
                grown[: len(column)] = column
                setattr(self, name, grown)

    def _live_stamps(self) -> tuple[np.ndarray, np.ndarray]:
        """The live entry numbers, in entry order, and their stamps."""
        assert self._stamps is not None
        live = np.flatnonzero(self._table().live_mask(self._used))
        return live, self._stamps[live]

    # -- what the table changes in its map ------------------------------------------------------

    def _compact(self) -> None:
        """Compact the entries (:meth:`TableGrowth._compact`), their stamps and marks with
        them; the hand moves with the entry it points at."""
        if self._n == self._used:
            return
        live = np.flatnonzero(self._table().live_mask(self._used))
        columns = [column for column in (self._stamps, self._marks) if column is not None]
        kept = [column[live] for column in columns]  # every entry has its stamp and mark
        super()._compact()
        for column, items in zip(columns, kept):
            column[: len(items)] = items
        self._hand = int(np.searchsorted(live, self._hand))

    def _widen(self, width: int) -> None:
        """:meth:`TableGrowth._widen`, whose new chunks replace every chunk."""
        r = self._table()
        with self._budget().replacing(sum(map(self._store.arena.payload_bytes, r.chunk_offsets))):
            super()._widen(width)

    def _grow_index(self, homes: int, needed: int) -> None:
        """:meth:`TableGrowth._grow_index`, whose new index replaces the old one."""
        with self._budget().replacing(self._store.arena.payload_bytes(self._table().index_offset)):
            super()._grow_index(homes, needed)

    def _add_capacity(self, needed: int) -> None:
        """:meth:`TableGrowth._add_capacity`, which replaces a lone chunk 0 not yet full-size."""
        r = self._table()
        alone = len(r.chunk_offsets) == 1 and r.first_capacity < CHUNK_ENTRIES
        with self._budget().replacing(
                self._store.arena.payload_bytes(r.chunk_offsets[0]) if alone else 0):
            super()._add_capacity(needed)
        self._fit_columns()

    def clear(self) -> None:
        """Remove every entry (:meth:`HashMap.clear`) and set the hand back to entry 0."""
        with self._lock:
            super().clear()
            self._hand = 0

    def _check(self) -> None:
        """The map's invariants, and a stamp and a mark per entry where the cache keeps them."""
        with self._lock:
            super()._check()
            for column in (self._stamps, self._marks):
                assert column is None or len(column) >= self._capacity, "stamps or marks missing"
