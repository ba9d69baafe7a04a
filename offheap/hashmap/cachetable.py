"""The table of a :class:`~offheap.hashmap.cache.Cache`: a HashMap that knows its oldest entry,
keeps a time stamp per entry and grows within a byte budget (layer 6).

A cache keeps its entries in a :class:`CacheTable`, a :class:`~offheap.HashMap` whose entry
order is the cache's LRU order (the cache moves an entry to the newest end by deleting and
inserting it again). What the table adds:

- *The oldest live entry* (:meth:`CacheTable._oldest_entry`) without a scan of the whole
  table: ``_cursor`` is an entry number below which every entry is a hole (deleted), so the
  first live entry is the first set live bit at or after it. An eviction leaves a hole at the
  cursor and the next search goes on from there, so evicting every entry in turn reads each
  live bit once: O(1) amortized. Compaction (growth renumbers the live entries from 0) and
  ``clear`` set the cursor back to 0; an insert first lowers it to ``_used``, which a delete of
  the last entries may have lowered under it, since the new entry is numbered ``_used``.
- *Time stamps* (``_stamps``, with a ``ttl``): one float64 per entry number, the time of the
  entry's last write or access (the cache says which). A numpy array beside the table, on the
  Python heap (8 bytes an entry; a cache has no file to keep them in), grown with the table's
  capacity and compacted with it (:meth:`CacheTable._compact`). Holes' stamps are stale and
  never read.
- *A byte budget* (:class:`BudgetStore`): the table's own store refuses a region (an index, a
  chunk of entries) that would take the bytes it holds past ``max_bytes`` once the growth
  step ends (the regions the step replaces then freed) with a :class:`BudgetError`, the
  :class:`~offheap.errors.CapacityError` a full arena raises, before the table changes. So
  the table never outgrows the budget: the cache evicts its oldest entry and tries again, and
  the retry compacts holes or fits in the index it has.

Thread safety: none of its own; the cache runs every operation under the table's lock.
"""

from __future__ import annotations

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
    """A HashMap with an oldest-entry cursor, per-entry stamps and a byte budget (see the
    module docstring); made by :meth:`new`, used only by a :class:`~offheap.hashmap.cache.Cache`."""

    _cursor: int
    _stamps: np.ndarray | None

    @classmethod
    def new(cls, key: str, value, *, limit: ByteLimit, max_bytes: int | None,
            stamped: bool) -> CacheTable:
        """An empty anonymous table of ``key`` and ``value`` types in its own
        :class:`BudgetStore` (``limit``: the arena's, ``max_bytes``: the budget), with a stamp
        per entry if ``stamped``."""
        table = cls.__new__(cls)
        table._ask_key_type(key)
        table._cursor = 0
        table._stamps = np.zeros(0, np.float64) if stamped else None
        store = BudgetStore(Arena.anonymous(limit_bytes=limit), max_bytes)
        try:
            table._setup(store, get_serializer(value or "object"), meta_recid=None,
                         owns_store=True, allow_pickle=True)
        except BaseException:
            store.close(save=False)
            raise
        return table

    def _budget(self) -> BudgetStore:
        store = self._store
        assert isinstance(store, BudgetStore)
        return store

    @property
    def held_bytes(self) -> int:
        """The bytes the table holds in its store (:class:`BudgetStore`)."""
        return self._budget().held_bytes

    # -- the oldest entry ---------------------------------------------------------------------

    def _oldest_entry(self) -> int:
        """The first live entry number (the least recently used), -1 when empty."""
        if not self._n:
            return -1
        r = self._table()
        e = min(self._cursor, self._used)
        while True:  # a live entry lies at or after e, below _used
            chunk, at = e >> CHUNK_BITS, e & CHUNK_MASK
            bits = r.live_chunks[chunk]
            start = at >> 3
            window = bits[start: start + _SCAN_BYTES]
            set_bytes = np.flatnonzero(window)
            if set_bytes.size:
                byte = start + int(set_bytes[0])
                low_bit = int(bits[byte]) & -int(bits[byte])
                e = (chunk << CHUNK_BITS) + byte * 8 + low_bit.bit_length() - 1
                self._cursor = e
                return e
            e = (chunk << CHUNK_BITS) + (start + len(window)) * 8

    def _before_insert(self) -> None:
        """Keep the cursor at or below the entry number the next insert takes."""
        self._cursor = min(self._cursor, self._used)

    # -- stamps -------------------------------------------------------------------------------

    def _stamp(self, e: int) -> float:
        assert self._stamps is not None
        return float(self._stamps[e])

    def _set_stamp(self, e: int, stamp: float) -> None:
        """Set entry ``e``'s stamp, growing the stamps to the table's capacity."""
        stamps = self._stamps
        assert stamps is not None
        if e >= len(stamps):
            grown = np.zeros(max(self._table().capacity, e + 1), np.float64)
            grown[: len(stamps)] = stamps
            self._stamps = stamps = grown
        stamps[e] = stamp

    def _live_stamps(self) -> tuple[np.ndarray, np.ndarray]:
        """The live entry numbers, in entry order, and their stamps."""
        assert self._stamps is not None
        live = np.flatnonzero(self._table().live_mask(self._used))
        return live, self._stamps[live]

    # -- what the table changes in its map ------------------------------------------------------

    def _compact(self) -> None:
        """Compact the entries (:meth:`TableGrowth._compact`), their stamps with them; the
        cursor goes back to entry 0."""
        if self._stamps is not None and self._n != self._used:
            _, kept = self._live_stamps()
            super()._compact()
            self._stamps[: kept.size] = kept
        else:
            super()._compact()
        self._cursor = 0

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

    def clear(self) -> None:
        """Remove every entry (:meth:`HashMap.clear`) and set the cursor back to entry 0."""
        with self._lock:
            super().clear()
            self._cursor = 0

    def _check(self) -> None:
        """The map's invariants, and: entries below the cursor are holes, a stamp per entry."""
        with self._lock:
            super()._check()
            below = min(self._cursor, self._used)
            assert not self._table().live_mask(self._used)[:below].any(), "live entry below cursor"
            assert self._stamps is None or len(self._stamps) >= self._used, "stamps missing"
