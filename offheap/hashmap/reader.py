"""HashReader and HashSetReader: a read-only hash map or set (LongHashMap, HashMap; LongHashSet,
HashSet) over a file another process writes (layer 6).

The reading machinery (session, reload, refusal of writes) is :mod:`offheap.collection.readers`;
this module adds the chunked iteration and bulk reads of a hash table.

Iteration reads :data:`READ_CHUNK_ENTRIES` entries per read section, so a commit the writer made
meanwhile is noticed within that many steps (RuntimeError, as for a TreeReader at its next leaf),
and a section never holds the writer's next commit back for longer than a chunk takes to read.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, ValuesView
from typing import TYPE_CHECKING

from offheap.collection.readers import ChunkItemsView, ChunkValuesView, MapReader, SetReader

if TYPE_CHECKING:
    from offheap.hashmap.longhashmap import HashMapFacade
    from offheap.hashmap.longhashset import HashSetFacade

READ_CHUNK_ENTRIES = 1024
"""Entries an iteration step of a reader reads in one section: the section's cost (a look at the
file's header) spread over them; measured as fast as
65,536-entry chunks (0.98x, 1M int64 items)."""


class HashReader(MapReader["HashMapFacade"]):
    """A read-only LongHashMap or HashMap: lookups, iteration and the bulk reads of
    :class:`~offheap.LongHashMap` (:class:`~offheap.HashMap`)."""

    def _chunks(self, with_values: bool) -> Iterator:
        return self._guarded(lambda: self._map._chunks(with_values, READ_CHUNK_ENTRIES))

    def __iter__(self) -> Iterator:
        for keys, _ in self._chunks(False):
            yield from keys

    def items(self) -> ItemsView:
        return ChunkItemsView(self)

    def values(self) -> ValuesView:
        return ChunkValuesView(self)

    def get_many(self, keys, default=None):
        with self._session.section():
            return self._map.get_many(keys, default)

    def contains_many(self, keys):
        with self._session.section():
            return self._map.contains_many(keys)

    put_many = delete_many = MapReader._refuse


class HashSetReader(SetReader["HashSetFacade"]):
    """A read-only LongHashSet or HashSet: ``in``, ``len``, iteration in the set's order (a chunk of
    :data:`READ_CHUNK_ENTRIES` elements per read section, as :class:`HashReader`) and
    ``contains_many``."""

    def __iter__(self) -> Iterator:
        chunks = self._guarded(lambda: self._map._chunks(False, READ_CHUNK_ENTRIES))
        for keys, _ in chunks:
            yield from keys
