"""How a LongHashMap table changes shape (layer 6): the growth half of the map class.

:class:`TableGrowth` is a base of :class:`~offheap.hashmap.longhashmap.LongHashMap`; it works on
the map's :class:`~offheap.hashmap.regions.Regions` (``self._regions``), its store, its value
slots and its core's counters (``_n``, ``_used``, ``_mods``). Each change is one step that keeps
the map's content and allocates before it changes anything, so a CapacityError at any step leaves
the map as it was (a step that succeeded before it only left a larger shape):

- :meth:`_grow_index`: a larger index, placed anew from the old one in chunks (vectorized);
  when the arena's limit has no room for the size asked, the largest size that fits. A small
  index grows ``SMALL_GROWTH`` = 4 times (:mod:`offheap.hashmap.layout`: few steps for a small
  map, each costing tens of microseconds of Python whatever the size); past ``SMALL_HOMES`` a
  map doubles ``homes`` and a set grows it by :attr:`TableGrowth.index_growth` = 1.25 (its
  entries are 8 bytes where a map's are 10 to 16, so the index is a third of its memory, and
  the load after a growth, 0.7 rather than 0.44, is what keeps it under 14 bytes an element);
- :meth:`_add_capacity`: more entries: chunk 0 copied to a ``SMALL_GROWTH`` times larger size
  while it is the only chunk, then new chunks; the entries never move otherwise;
- :meth:`_widen`: a wider value column: every chunk copied to chunks of the new width;
- :meth:`_compact`: the live entries moved to the front, in order, where they are, and the index
  renumbered: no allocation, so it also makes room where the limit leaves none.

Swapping a part in detaches the core first and attaches it again after (:meth:`_swap`), so no
buffer of a freed region is left anywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from offheap.errors import CapacityError, ClosedError
from offheap.hashmap.layout import (
    CHUNK_ENTRIES,
    MAX_ENTRIES,
    MAX_HOMES,
    MAX_LOAD,
    SLACK,
    SMALL_GROWTH,
    SMALL_HOMES,
    chunk_bytes,
)
from offheap.hashmap.regions import Regions
from offheap.hashmap.valueslots import ValueSlots
from offheap.store.records import RecordStore


class TableGrowth:
    """Growth steps of a LongHashMap table (see the module docstring)."""

    index_growth = 2.0
    """The factor by which ``homes`` grows when the index is full (module docstring)."""

    # The core's (offheap.hashmap.core, first in the map class's bases): the counters it keeps
    # and the map sets.
    _n: int
    _used: int
    _mods: int
    # The map class's (offheap.hashmap.longhashmap.HashMapFacade); no regions before the first
    # table and after a reload that failed.
    _store: RecordStore
    _slots: ValueSlots
    _regions: Regions | None

    if TYPE_CHECKING:
        def _detach(self) -> None: ...  # the core's: releases the table's buffers

        def _attach_regions(self) -> None: ...  # the map class's: attaches them again

        def _place_entries(self, index: np.ndarray, homes: int) -> bool: ...  # the core's

        def _compact_entries(self) -> None: ...  # the core's

    def _table(self) -> Regions:
        """The map's regions; ClosedError when it has none (its metadata failed to load)."""
        if self._regions is None:
            raise ClosedError("the LongHashMap has no table: its metadata failed to load; "
                              "close it and open it again")
        return self._regions

    def _make_room(self, width: int, index_full: bool) -> None:
        """Called by the core when one more insert needs a new shape."""
        r = self._table()
        if width > r.width:
            self._widen(width)
        if self._used >= r.capacity:
            holes = self._used - self._n
            if holes * 4 >= self._used:
                self._compact()
            else:
                try:
                    self._add_capacity(self._used + 1)
                except CapacityError:
                    if not holes:
                        raise
                    self._compact()
        if index_full or self._n + 1 > MAX_LOAD * r.homes:
            self._grow_index(self._grown(r.homes), self._n + 1)

    def _reserve(self, n_new: int, width: int) -> None:
        """Grow, if needed, so that ``n_new`` more entries with values ``width`` bytes wide fit
        without another allocation."""
        n = self._n + n_new
        if n > MAX_ENTRIES:
            raise CapacityError(f"a LongHashMap holds at most {MAX_ENTRIES:,} entries")
        r = self._table()
        if width > r.width:
            self._widen(width)
        if self._used + n_new > r.capacity:
            if self._used > self._n:
                self._compact()
            if self._used + n_new > r.capacity:
                self._add_capacity(self._used + n_new)
        homes = r.homes
        while n > MAX_LOAD * homes:
            homes = self._grown(homes)
        if homes != r.homes:
            self._grow_index(homes, n)

    def _outgrow_index(self, needed: int) -> None:
        """The next size of index (:meth:`_grown`) for ``needed`` entries: what a bulk build
        asks for when its placement overflowed the slack."""
        self._grow_index(self._grown(self._table().homes), needed)

    def _grown(self, homes: int) -> int:
        """The next size of an index of ``homes`` homes: ``SMALL_GROWTH`` times as many while
        that stays within ``SMALL_HOMES``, else ``index_growth`` times as many."""
        if homes * SMALL_GROWTH <= SMALL_HOMES:
            return homes * SMALL_GROWTH
        return max(homes + 1, int(homes * self.index_growth))

    def _swap(self, change: Callable[[Regions], None]) -> None:
        """Detach the core, let ``change`` install new parts (freeing the replaced ones), remap
        the views and attach again."""
        r = self._table()
        self._detach()
        r.drop_views()
        try:
            change(r)
        finally:
            r.map_views(self._store)
            self._attach_regions()
            self._mods += 1

    # -- the index ---------------------------------------------------------------------------

    def _grow_index(self, homes: int, needed: int) -> None:
        """Place the entries in an index of ``homes`` homes (or the largest that fits the limit
        and holds ``needed`` entries)."""
        r, store = self._table(), self._store
        if homes > MAX_HOMES:
            raise CapacityError(f"a LongHashMap holds at most {int(MAX_LOAD * MAX_HOMES):,} entries")
        try:
            offset = store.allocate_region((homes + SLACK) * 4)
        except CapacityError:
            fitting = self._largest_fitting(r.homes, homes, lambda h: ((h + SLACK) * 4,))
            if fitting is None or needed > MAX_LOAD * fitting:
                raise
            homes = fitting
            offset = store.allocate_region((homes + SLACK) * 4)
        try:
            if not self._place_into(offset, homes):
                raise CapacityError("a LongHashMap index overflowed its slack when it grew")
        except BaseException:
            store.free_region(offset)
            raise

        def install(regions: Regions) -> None:
            store.free_region(regions.index_offset)
            regions.index_offset, regions.homes = offset, homes

        self._swap(install)

    def _place_into(self, offset: int, homes: int) -> bool:
        """Place the entries into the index region at ``offset`` (whose view is gone when this
        returns, so the region can be freed): the core's ``_place_entries`` (the compiled one
        sorts the entries by hash in C, ~20x faster than numpy's placement on a small table)."""
        self._table()
        index = self._store.region_array(offset, np.uint32, homes + SLACK)
        try:
            return self._place_entries(index, homes)
        finally:
            del index

    def _largest_fitting(self, low: int, high: int, sizes) -> int | None:
        """The largest ``x`` in ``(low, high)`` whose regions of ``sizes(x)`` bytes fit in the
        room the limit leaves (None if none does or there is no limit): a binary search asking
        the arena what the regions would really reserve (whole pages, tags, checksums)."""
        arena = self._store.arena
        if arena.limit_bytes is None:
            return None
        room = arena.limit_bytes - arena.reserved_bytes
        fitting, too_many = low, high
        while too_many - fitting > 1:
            middle = (fitting + too_many) // 2
            if arena.reservation_bytes(*sizes(middle)) <= room:
                fitting = middle
            else:
                too_many = middle
        return fitting if fitting > low else None

    # -- the entries -------------------------------------------------------------------------

    def _add_capacity(self, needed: int) -> None:
        """Chunks for at least ``needed`` entries: a larger chunk 0 while it is alone and not
        full-size (its entries copied), then new full-size chunks."""
        r = self._table()
        first = r.first_capacity
        if len(r.chunk_offsets) == 1:
            while first < min(needed, CHUNK_ENTRIES):
                first = min(first * SMALL_GROWTH, CHUNK_ENTRIES)
        extra = max(0, -(-(needed - first) // CHUNK_ENTRIES)) if first == CHUNK_ENTRIES else 0
        extra -= len(r.chunk_offsets) - 1
        replace_first = first != r.first_capacity
        capacities = ([first] if replace_first else []) + [CHUNK_ENTRIES] * max(0, extra)
        offsets = self._new_chunks(capacities, r.value_dtype)
        if replace_first:
            keys, values, live = self._chunk_views(offsets[:1], [first], r.value_dtype)
            used = self._used
            keys[0][:used] = r.key_chunks[0][:used]
            values[0][:used] = r.value_chunks[0][:used]
            live[0][: len(r.live_chunks[0])] = r.live_chunks[0]
            del keys, values, live

        def install(regions: Regions) -> None:
            chunks = list(regions.chunk_offsets)
            if replace_first:
                self._store.free_region(chunks[0])
                chunks[0] = offsets[0]
            regions.chunk_offsets = chunks + offsets[1 if replace_first else 0:]
            regions.first_capacity = first

        self._swap(install)

    def _widen(self, width: int) -> None:
        """Copy every chunk to chunks whose values are ``width`` bytes wide (a slot word keeps its
        value: the layout is little-endian and a narrow word's high bytes are 0)."""
        r = self._table()
        dtype = self._slots.dtype_for_width(width)
        capacities = [r.first_capacity] + [CHUNK_ENTRIES] * (len(r.chunk_offsets) - 1)
        offsets = self._new_chunks(capacities, dtype)
        keys, values, live = self._chunk_views(offsets, capacities, dtype)
        for chunk in range(len(capacities)):
            keys[chunk][:] = r.key_chunks[chunk]
            values[chunk][:] = r.value_chunks[chunk]
            live[chunk][:] = r.live_chunks[chunk]
        del keys, values, live

        def install(regions: Regions) -> None:
            for offset in regions.chunk_offsets:
                self._store.free_region(offset)
            regions.chunk_offsets = offsets
            regions.width, regions.value_dtype = width, np.dtype(dtype)

        self._swap(install)

    def _compact(self) -> None:
        """Move the live entries to the front in order, where they are, and renumber the index:
        the core's ``_compact_entries`` (compiled: one pass in C; the reference: numpy)."""
        if self._n != self._used:
            self._compact_entries()

    def _new_chunks(self, capacities: list[int], value_dtype: np.dtype) -> list[int]:
        """Zeroed chunk regions of these capacities, for the table's keys: all or none
        (CapacityError)."""
        key_dtype = self._table().key_dtype
        offsets: list[int] = []
        try:
            for capacity in capacities:
                offsets.append(self._store.allocate_region(
                    chunk_bytes(capacity, value_dtype.itemsize, key_dtype.itemsize)))
        except BaseException:
            for offset in offsets:
                self._store.free_region(offset)
            raise
        return offsets

    def _chunk_views(self, offsets: list[int], capacities: list[int], value_dtype: np.dtype):
        """Views (keys, values, live bits) of chunk regions not installed yet."""
        views = Regions(0, 0, value_dtype, 0, 0, [], self._table().key_dtype)
        for offset, capacity in zip(offsets, capacities):
            views.map_chunk(self._store, offset, capacity)
        return views.key_chunks, views.value_chunks, views.live_chunks
