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
    """A read-only TreeMap: the lookups, ranges, neighbours and positions of
    :class:`~offheap.TreeMap`."""

    def _chunks(self, lo, hi, inclusive, reverse: bool, with_values: bool) -> Iterator:
        return self._guarded(lambda: self._map._chunks(lo, hi, inclusive, reverse, with_values))

    def _changed_error(self) -> RuntimeError:
        return MapReader._changed_error(self)  # the reader's message, not the sorted API's

    def _version_source(self) -> tuple[object, str]:
        return self._session, "epoch"  # a reader's tree changes only when it picks up a commit

    def _one(self, name: str, *args):
        with self._session.section():
            return getattr(self._map, name)(*args)

    def _edge_key(self, last: bool):
        return self._one("_edge_key", last)

    def _first_in(self, lo, hi, inclusive: tuple[bool, bool], reverse: bool,
                  with_value: bool = False):
        return self._one("_first_in", lo, hi, inclusive, reverse, with_value)

    def get_many(self, keys, default=None):
        return self._one("get_many", keys, default)

    def _array_dtypes(self):
        return self._map._array_dtypes()

    def _position(self, key, right: bool) -> int:
        return self._one("_position", key, right)

    def _index_of(self, key) -> int | None:
        return self._one("_index_of", key)

    def _item_at(self, index: int) -> tuple:
        return self._one("_item_at", index)

    @property
    def options(self) -> dict:
        return self._map.options

    delete_range = MapReader._refuse
