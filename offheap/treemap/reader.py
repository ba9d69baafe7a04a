"""TreeReader: a read-only TreeMap over a file another process writes (layer 6).

The reading machinery (session, reload, refusal of writes) is :mod:`offheap.collection.readers`;
this module adds the sorted-map reads that only a tree has.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from offheap.collection.readers import MapReader
from offheap.treemap.views import SortedRangeAPI

if TYPE_CHECKING:
    from offheap.treemap.treemap import TreeMap


class TreeReader(SortedRangeAPI, MapReader["TreeMap"]):
    """A read-only TreeMap: the lookups, ranges and neighbours of :class:`~offheap.TreeMap`."""

    def _chunks(self, lo, hi, inclusive, reverse: bool, with_values: bool) -> Iterator:
        return self._guarded(lambda: self._map._chunks(lo, hi, inclusive, reverse, with_values))

    def _one(self, name: str, *args):
        with self._session.section():
            return getattr(self._map, name)(*args)

    def first_key(self):
        return self._one("first_key")

    def last_key(self):
        return self._one("last_key")

    def floor_key(self, key):
        return self._one("floor_key", key)

    def ceiling_key(self, key):
        return self._one("ceiling_key", key)

    def lower_key(self, key):
        return self._one("lower_key", key)

    def higher_key(self, key):
        return self._one("higher_key", key)

    @property
    def options(self) -> dict:
        return self._map.options

    delete_range = MapReader._refuse
