"""The arena memory of one LongHashMap table and the numpy views over it (layer 6).

A :class:`Regions` is one table: the index region and the chunk regions of the entries
(:mod:`offheap.hashmap.layout`), with numpy views of each part. The map changes it as the table
grows (:mod:`offheap.hashmap.longhashmap`): it allocates the new parts first and swaps them in
(assigning the offsets and calling :meth:`Regions.map_views`) only once they are filled, so a
CapacityError leaves the table as it was. Every view of a part (the map's, and the buffers its
core took) must be dropped before that part is freed or the store remaps.

:class:`Column` gathers and scatters one per-entry column (keys or values) across the chunks by
entry number, vectorized: one fancy-index per chunk touched.
"""

from __future__ import annotations

import numpy as np

from offheap.errors import ClosedError, CorruptionError
from offheap.hashmap.layout import CHUNK_BITS, CHUNK_ENTRIES, CHUNK_MASK, SLACK, capacity_of, chunk_bytes
from offheap.store.records import RecordStore

INT64_KEYS = np.dtype(np.int64)


class Column:
    """One column of the entries (a view per chunk) addressed by entry number."""

    def __init__(self, chunks: list[np.ndarray]) -> None:
        self.chunks = chunks

    def take(self, entries: np.ndarray) -> np.ndarray:
        """The column's items at these entry numbers (a new array)."""
        if len(self.chunks) == 1:
            return self.chunks[0][entries]
        out = np.empty(len(entries), self.chunks[0].dtype)
        for chunk, where in self._by_chunk(entries):
            out[where] = self.chunks[chunk][entries[where] & CHUNK_MASK]
        return out

    def put(self, entries: np.ndarray, items: np.ndarray) -> None:
        """Set the column's items at these entry numbers."""
        if len(self.chunks) == 1:
            self.chunks[0][entries] = items
            return
        for chunk, where in self._by_chunk(entries):
            self.chunks[chunk][entries[where] & CHUNK_MASK] = items[where]

    def span(self, start: int, stop: int) -> np.ndarray:
        """Items ``start..stop-1`` as one array (a copy when they cross chunks)."""
        if stop <= start:
            return self.chunks[0][:0]
        first, last = start >> CHUNK_BITS, (stop - 1) >> CHUNK_BITS
        parts = [self.chunks[c][(start & CHUNK_MASK) if c == first else 0:
                                ((stop - 1) & CHUNK_MASK) + 1 if c == last else None]
                 for c in range(first, last + 1)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def head(self, stop: int) -> np.ndarray:
        """Items ``0..stop-1`` as a new array, never a view of the table: one copy per chunk
        (a gather of the live entries costs ~50 ns an entry; this, a memory copy)."""
        part = self.span(0, stop)
        return part.copy() if stop <= len(self.chunks[0]) else part  # span copied when it crossed

    def _by_chunk(self, entries: np.ndarray):
        """``(chunk, positions in entries)`` for each chunk the entry numbers fall in."""
        chunk_of = (entries >> CHUNK_BITS).astype(np.uint32)
        order = np.argsort(chunk_of, kind="stable")
        bounds = np.searchsorted(chunk_of[order], np.arange(len(self.chunks) + 1))
        for chunk in range(len(self.chunks)):
            if bounds[chunk] < bounds[chunk + 1]:
                yield chunk, order[bounds[chunk]: bounds[chunk + 1]]


class Regions:
    """One table's regions in a store and views over them (none once dropped).

    ``index_offset`` and ``chunk_offsets`` are arena extents; ``first_capacity`` is chunk 0's
    capacity (``CHUNK_ENTRIES`` once there are other chunks); ``value_dtype`` the values' dtype
    (``width`` bytes); ``key_dtype`` the keys': int64, or the 16-byte key slots (``V16``) of a
    keyed table (:mod:`offheap.hashmap.keyedlayout`).
    """

    def __init__(self, homes: int, width: int, value_dtype: np.dtype, first_capacity: int,
                 index_offset: int, chunk_offsets: list[int],
                 key_dtype: np.dtype = INT64_KEYS) -> None:
        self.homes = homes
        self.width = width
        self.value_dtype = np.dtype(value_dtype)
        self.key_dtype = np.dtype(key_dtype)
        self.first_capacity = first_capacity
        self.index_offset = index_offset
        self.chunk_offsets = chunk_offsets
        self._index: np.ndarray | None = None
        self.key_chunks: list[np.ndarray] = []
        self.value_chunks: list[np.ndarray] = []
        self.live_chunks: list[np.ndarray] = []

    @property
    def index(self) -> np.ndarray:
        """The view of the index region; ClosedError once the views are dropped (a closed
        map)."""
        if self._index is None:
            raise ClosedError("the LongHashMap is closed")
        return self._index

    @property
    def n_slots(self) -> int:
        return self.homes + SLACK

    @property
    def capacity(self) -> int:
        return capacity_of(len(self.chunk_offsets), self.first_capacity)

    @property
    def keys(self) -> Column:
        return Column(self.key_chunks)

    @property
    def values(self) -> Column:
        return Column(self.value_chunks)

    # -- lifetime ------------------------------------------------------------------------------

    @classmethod
    def allocate(cls, store: RecordStore, homes: int, width: int, value_dtype,
                 capacity: int, key_dtype: np.dtype = INT64_KEYS) -> Regions:
        """A new empty table: an index and chunk 0 of ``capacity`` entries (CapacityError:
        nothing allocated)."""
        index_offset = store.allocate_region((homes + SLACK) * 4)
        try:
            chunk = store.allocate_region(chunk_bytes(capacity, np.dtype(value_dtype).itemsize,
                                                      np.dtype(key_dtype).itemsize))
        except BaseException:
            store.free_region(index_offset)
            raise
        regions = cls(homes, width, value_dtype, capacity, index_offset, [chunk], key_dtype)
        regions.map_views(store)
        return regions

    def map_views(self, store: RecordStore) -> None:
        """(Re)make every view; KeyError/ValueError if a region is missing or short."""
        self._index = store.region_array(self.index_offset, np.uint32, self.n_slots)
        self.key_chunks, self.value_chunks, self.live_chunks = [], [], []
        for chunk, offset in enumerate(self.chunk_offsets):
            self.map_chunk(store, offset, CHUNK_ENTRIES if chunk else self.first_capacity)

    def map_chunk(self, store: RecordStore, offset: int, capacity: int) -> None:
        key_bytes = capacity * self.key_dtype.itemsize
        self.key_chunks.append(store.region_array(offset, self.key_dtype, capacity))
        self.value_chunks.append(store.region_array(offset, self.value_dtype, capacity,
                                                    key_bytes))
        self.live_chunks.append(store.region_array(offset, np.uint8, capacity >> 3,
                                                   key_bytes + capacity * self.value_dtype.itemsize))

    def checked_views(self, store: RecordStore) -> None:
        """:meth:`map_views` for a stored table: a missing or short region is CorruptionError."""
        try:
            self.map_views(store)
        except (KeyError, ValueError) as exc:
            raise CorruptionError(f"LongHashMap table region is missing or short: {exc}") from None

    def drop_views(self) -> None:
        self._index = None
        self.key_chunks, self.value_chunks, self.live_chunks = [], [], []

    def free(self, store: RecordStore) -> None:
        """Free every region (views dropped first)."""
        self.drop_views()
        for offset in [self.index_offset, *self.chunk_offsets]:
            store.free_region(offset)

    def live_mask(self, used: int) -> np.ndarray:
        """Which of the first ``used`` entries are live."""
        bits = self.live_chunks[0] if len(self.live_chunks) == 1 else np.concatenate(self.live_chunks)
        return np.unpackbits(bits[: (used + 7) >> 3], bitorder="little")[:used].astype(bool)

    def count_live(self, used: int) -> tuple[int, int]:
        """How many of the first ``used`` entries are live, and how many after them: a
        popcount of the live bits, chunk by chunk, O(capacity / 64) words."""
        before = after = 0
        for chunk, bits in enumerate(self.live_chunks):
            first = chunk << CHUNK_BITS
            split = min(max(used - first, 0), len(bits) * 8)  # entries of the chunk before used
            whole = split >> 3
            before += _popcount(bits[:whole])
            after += _popcount(bits[whole:])
            if split & 7:
                low = int(bits[whole]) & ((1 << (split & 7)) - 1)
                before += low.bit_count()
                after -= low.bit_count()
        return before, after

    def set_live(self, mask: np.ndarray) -> None:
        """Make the live bits say ``mask`` for the first ``len(mask)`` entries, 0 after them."""
        for chunk, bits in enumerate(self.live_chunks):
            part = mask[chunk << CHUNK_BITS: (chunk << CHUNK_BITS) + len(bits) * 8]
            packed = np.packbits(part, bitorder="little")
            bits[: len(packed)] = packed
            bits[len(packed):] = 0

    def region_bytes(self, store: RecordStore) -> int:
        return sum(store.arena.payload_bytes(offset)
                   for offset in [self.index_offset, *self.chunk_offsets])


def _popcount(bits: np.ndarray) -> int:
    """Set bits in a uint8 array, eight bytes at a time where it can."""
    words = len(bits) >> 3
    count = int(np.bitwise_count(bits[words << 3:]).sum(dtype=np.int64))
    if words:
        count += int(np.bitwise_count(bits[: words << 3].view(np.uint64)).sum(dtype=np.int64))
    return count
