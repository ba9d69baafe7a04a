"""Range views of a TreeMap, and the sorted-map API built on them (layer 6, shared by
:class:`~offheap.treemap.treemap.TreeMap` and :class:`~offheap.treemap.reader.TreeReader`).

``tree.keys(lo, hi, inclusive, reverse)``, ``values(...)`` and ``items(...)`` return these: live
views of a key range that iterate leaf by leaf through the tree's ``_chunks`` generator, so they
reflect later changes and raise RuntimeError, like a dict view, at the step after the map's size
changed (:func:`each`, which compares the map's ``_version()`` before every item).
"""

from __future__ import annotations

from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, ValuesView
from typing import TYPE_CHECKING


_ABSENT = object()


def each(tree: SortedRangeAPI, what: str, lo, hi, inclusive, reverse: bool) -> Iterator:
    """The ``what`` ("keys", "values" or "items") of a range of ``tree``, one at a time from its
    leaf chunks; RuntimeError before the next item once ``tree._version()`` moved, as a dict
    raises at the step after a change of its size."""
    version = tree._version
    start = version()
    for keys, values in tree._chunks(lo, hi, inclusive, reverse, what != "keys"):
        run: Iterable = keys if values is None else values if what == "values" else zip(keys, values)
        for item in run:
            if version() != start:
                raise tree._changed_error()
            yield item


class _RangeView:
    """A range of a TreeMap: iterable (in key order, or reversed), sized, and checked for
    membership by lookup. Live: it reflects later changes to the map."""

    _what = "keys"

    def __init__(self, tree, lo, hi, inclusive, reverse: bool) -> None:
        self._mapping = tree
        self._range = (lo, hi, tuple(inclusive), reverse)

    def _iterate(self, reverse: bool):
        lo, hi, inclusive, _ = self._range
        return each(self._mapping, self._what, lo, hi, inclusive, reverse)

    def __iter__(self):
        return self._iterate(self._range[3])

    def __reversed__(self):
        return self._iterate(not self._range[3])

    def __len__(self) -> int:
        lo, hi, inclusive, _ = self._range
        if lo is None and hi is None:
            return len(self._mapping)
        return sum(len(keys) for keys, _ in self._mapping._chunks(lo, hi, inclusive, False, False))

    def _in_range(self, key) -> bool:
        lo, hi, (lo_inclusive, hi_inclusive), _ = self._range
        try:
            if lo is not None and (key < lo or (key == lo and not lo_inclusive)):
                return False
            if hi is not None and (key > hi or (key == hi and not hi_inclusive)):
                return False
        except TypeError:
            return False
        return True

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


class TreeKeysView(_RangeView, KeysView):
    _what = "keys"

    def __contains__(self, key) -> bool:
        return self._in_range(key) and key in self._mapping


class TreeValuesView(_RangeView, ValuesView):
    _what = "values"

    def __contains__(self, value) -> bool:
        return any(v is value or v == value for v in self)


class TreeItemsView(_RangeView, ItemsView):
    _what = "items"

    def __contains__(self, item) -> bool:
        key, value = item
        if not self._in_range(key):
            return False
        found = self._mapping.get(key, _ABSENT)
        return found is not _ABSENT and (found is value or found == value)


class SortedRangeAPI:
    """Key-ordered iteration, range views and neighbour queries for a class that provides
    ``_chunks(lo, hi, inclusive, reverse, with_values)``, yielding ``(keys, values)`` lists leaf
    by leaf, ``_version()``, ``_edge_key(last)`` and ``_first_in(lo, hi, inclusive, reverse)``, the first key
    of a range in scan order or None: TreeMap, TreeReader."""

    _chunks: Callable[..., Iterator[tuple[list, list | None]]]
    _version: Callable[[], object]
    """A token that changes whenever the entries change in size or are reloaded."""
    if TYPE_CHECKING:
        def _changed_error(self) -> Exception:
            """What an iteration raises once ``_version()`` moved under it."""
    _edge_key: Callable[[bool], object]
    _first_in: Callable[[object, object, tuple[bool, bool], bool], object]

    def first_key(self):
        """The smallest key; KeyError when empty."""
        return self._edge_key(False)

    def last_key(self):
        """The largest key; KeyError when empty."""
        return self._edge_key(True)

    def floor_key(self, key):
        """The largest key ``<= key``, or None."""
        return self._first_in(None, key, (True, True), True)

    def ceiling_key(self, key):
        """The smallest key ``>= key``, or None."""
        return self._first_in(key, None, (True, True), False)

    def lower_key(self, key):
        """The largest key ``< key``, or None."""
        return self._first_in(None, key, (True, False), True)

    def higher_key(self, key):
        """The smallest key ``> key``, or None."""
        return self._first_in(key, None, (False, True), False)

    def irange(self, lo=None, hi=None, inclusive=(True, True), reverse: bool = False) -> Iterator:
        """Keys ``k`` with ``lo <= k <= hi`` (``inclusive`` says which bounds count; None is
        unbounded) in ascending order, or descending with ``reverse``."""
        return each(self, "keys", lo, hi, inclusive, reverse)

    def __iter__(self) -> Iterator:
        return self.irange()

    def __reversed__(self) -> Iterator:
        return self.irange(reverse=True)

    def reversed(self) -> Iterator:
        """Keys in descending order."""
        return self.irange(reverse=True)

    def keys(self, lo=None, hi=None, inclusive=(True, True), reverse: bool = False):
        """A view of the keys in a range (all keys by default), in key order."""
        return TreeKeysView(self, lo, hi, inclusive, reverse)

    def values(self, lo=None, hi=None, inclusive=(True, True), reverse: bool = False):
        """A view of the values of the keys in a range, in key order."""
        return TreeValuesView(self, lo, hi, inclusive, reverse)

    def items(self, lo=None, hi=None, inclusive=(True, True), reverse: bool = False):
        """A view of the ``(key, value)`` pairs in a range, in key order."""
        return TreeItemsView(self, lo, hi, inclusive, reverse)
