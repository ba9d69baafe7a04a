"""The arena regions of one LongHashMap table and the numpy views over them (layer 6).

A :class:`Regions` is one table shape (``homes``, value ``width``, entry ``capacity``) and its four
regions (index, keys, values, live bits; :mod:`offheap.hashmap.layout`). It lives from
:meth:`Regions.allocate` (or :meth:`Regions.open` of a stored table) to :meth:`Regions.free`; a
table that grows gets a new Regions and the old one is freed once the entries moved. The views
must be dropped (:meth:`Regions.drop_views`) before the regions are freed or the store remaps,
and so must every buffer the map's core took from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from offheap.errors import CorruptionError
from offheap.hashmap.layout import SLACK, TableMeta
from offheap.store.records import RecordStore


@dataclass
class Regions:
    """One table's regions in a store: offsets, shape, and views (None once dropped)."""

    homes: int
    width: int
    capacity: int
    value_dtype: np.dtype
    offsets: tuple[int, int, int, int]  # index, keys, values, live
    index: np.ndarray | None = field(default=None, repr=False)
    keys: np.ndarray | None = field(default=None, repr=False)
    values: np.ndarray | None = field(default=None, repr=False)
    live: np.ndarray | None = field(default=None, repr=False)

    @property
    def n_slots(self) -> int:
        return self.homes + SLACK

    def byte_sizes(self) -> tuple[int, int, int, int]:
        return (self.n_slots * 4, self.capacity * 8, self.capacity * self.value_dtype.itemsize,
                self.capacity >> 3)

    @classmethod
    def allocate(cls, store: RecordStore, homes: int, width: int, capacity: int,
                 value_dtype: np.dtype) -> Regions:
        """Zeroed regions for this shape: all four or none (CapacityError)."""
        shape = cls(homes, width, capacity, np.dtype(value_dtype), (0, 0, 0, 0))
        offsets: list[int] = []
        try:
            for size in shape.byte_sizes():
                offsets.append(store.allocate_region(size))
        except BaseException:
            for offset in offsets:
                store.free_region(offset)
            raise
        shape.offsets = (offsets[0], offsets[1], offsets[2], offsets[3])
        shape.map_views(store)
        return shape

    def reshaped(self, store: RecordStore, homes: int, width: int, capacity: int,
                 value_dtype: np.dtype) -> Regions:
        """Regions of another shape that keep this table's index region if ``homes`` is the
        same, and its entry regions if ``width`` and ``capacity`` are; the others are new and
        zeroed (all of them or none: CapacityError)."""
        keep_index = homes == self.homes
        keep_entries = (width, capacity) == (self.width, self.capacity)
        shape = Regions(homes, width, capacity, np.dtype(value_dtype), self.offsets)
        sizes = shape.byte_sizes()
        wanted = [i for i, keep in enumerate((keep_index, keep_entries, keep_entries, keep_entries))
                  if not keep]
        offsets = list(self.offsets)
        made: list[int] = []
        try:
            for i in wanted:
                offsets[i] = store.allocate_region(sizes[i])
                made.append(offsets[i])
        except BaseException:
            for offset in made:
                store.free_region(offset)
            raise
        shape.offsets = (offsets[0], offsets[1], offsets[2], offsets[3])
        shape.map_views(store)
        return shape

    def free_new(self, store: RecordStore, base: Regions) -> None:
        """Free the regions of this reshaped table that ``base`` does not share (a reshape
        that failed)."""
        self.drop_views()
        for offset in set(self.offsets) - set(base.offsets):
            store.free_region(offset)

    def free_replaced(self, store: RecordStore, successor: Regions) -> None:
        """Free the regions of this table that ``successor`` does not keep."""
        self.drop_views()
        for offset in set(self.offsets) - set(successor.offsets):
            if offset:
                store.free_region(offset)

    @classmethod
    def open(cls, store: RecordStore, meta: TableMeta, value_dtype: np.dtype) -> Regions:
        """The regions a stored table's metadata names; CorruptionError if one is missing or
        short."""
        shape = cls(meta.homes, meta.width, meta.capacity, np.dtype(value_dtype), meta.regions)
        try:
            shape.map_views(store)
        except (KeyError, ValueError) as exc:
            raise CorruptionError(f"LongHashMap table region is missing or short: {exc}") from None
        return shape

    def map_views(self, store: RecordStore) -> None:
        index_off, keys_off, values_off, live_off = self.offsets
        self.index = store.region_array(index_off, np.uint32, self.n_slots)
        self.keys = store.region_array(keys_off, np.int64, self.capacity)
        self.values = store.region_array(values_off, self.value_dtype, self.capacity)
        self.live = store.region_array(live_off, np.uint8, self.capacity >> 3)

    def drop_views(self) -> None:
        self.index = self.keys = self.values = self.live = None

    def region_bytes(self, store: RecordStore) -> int:
        return sum(store.arena.payload_bytes(offset) for offset in self.offsets)
