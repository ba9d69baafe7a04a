"""Range views of a TreeMap, and the sorted-map API built on them (layer 6, shared by
:class:`~offheap.treemap.treemap.TreeMap` and :class:`~offheap.treemap.reader.TreeReader`).

``tree.keys(lo, hi, inclusive, reverse)``, ``values(...)`` and ``items(...)`` return these: live
views of a key range that iterate leaf by leaf (a TreeMap's compiled walk, else the tree's
``_chunks`` generator: :func:`each`), so they reflect later changes and raise RuntimeError, like
a dict view, if the map's size changes while one is being iterated (at the step after the
change: :func:`each` compares the map's version before every item). A view is also a sequence, as SortedDict's views are: ``view[i]`` (negative
from the end, IndexError outside) and ``view[a:b:step]`` (a list) read the entries at those
positions of the view, and ``len(view)`` costs two descents, not a scan
(:mod:`offheap.treemap.positions`).
"""

from __future__ import annotations

from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, ValuesView
from typing import TYPE_CHECKING


from offheap.kernels import native
from offheap.treemap.arrays import ArrayAPI
from offheap.treemap.positions import PositionalAPI, position_run

_ABSENT = object()


_WHAT = {"keys": 0, "values": 1, "items": 2}
_compiled = native.compiled_module("offheap.treemap._pages")


def each(tree: SortedRangeAPI, what: str, lo, hi, inclusive, reverse: bool) -> Iterator:
    """The ``what`` ("keys", "values" or "items") of a range of ``tree``, one at a time from its
    leaf chunks; RuntimeError before the next item once the tree's version
    (``tree._version_source()``: an object and the name of its version attribute) moved, as a
    dict raises at the step after a change of its size. When the core is loaded: the tree's
    compiled walk (``tree._walk``: a ``RangeItems`` that reads leaf after leaf in C) if it has
    one, else a ``RangeItems`` over its chunks; else :func:`each_reference`. The same items and
    errors every way."""
    if _compiled is not None:
        walk = tree._walk(_WHAT[what], lo, hi, inclusive, reverse)
        if walk is not None:
            return walk
    chunks = tree._chunks(lo, hi, inclusive, reverse, what != "keys")
    source, name = tree._version_source()
    if _compiled is None:
        return each_reference(chunks, what, source, name, tree._changed_error)
    return _compiled.RangeItems(chunks, _WHAT[what], source, name, tree._changed_error)


def each_reference(chunks: Iterator[tuple[list, list | None]], what: str, source, name: str,
                   changed_error: Callable[[], Exception]) -> Iterator:
    """:func:`each` in Python: the items of ``chunks``, checking the version before each."""
    start = getattr(source, name)
    for keys, values in chunks:
        run: Iterable = keys if values is None else values if what == "values" else zip(keys, values)
        for item in run:
            if getattr(source, name) != start:
                raise changed_error()
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
        return len(self._positions())

    def _positions(self) -> range:
        """The positions in the map of this view's entries, in the view's order."""
        lo, hi, (lo_inclusive, hi_inclusive), reverse = self._range
        mapping = self._mapping
        start = 0 if lo is None else mapping._position(lo, not lo_inclusive)
        stop = len(mapping) if hi is None else mapping._position(hi, hi_inclusive)
        positions = range(start, max(start, stop))
        return positions[::-1] if reverse else positions

    def __getitem__(self, index):
        """The entry at a position of the view, or a list of those at a slice of them."""
        positions = self._positions()
        if not isinstance(index, slice):
            try:
                position = positions[index]
            except IndexError:
                raise IndexError(f"index {index} is out of range for a view of "
                                 f"{len(positions)} entries") from None
            key, value = self._mapping._item_at(position)
            return self._shown([key], [value])[0]
        chosen = positions[index]
        if len(chosen) > 1 and abs(chosen.step) != 1:
            items = [self._mapping._item_at(position) for position in chosen]
            return self._shown([key for key, _ in items], [value for _, value in items])
        shown: list = []
        first = min(chosen[0], chosen[-1]) if chosen else 0
        for keys, values in position_run(self._mapping, first, first + len(chosen),
                                         chosen.step < 0, self._what != "keys"):
            shown += self._shown(keys, values)
        return shown

    def _shown(self, keys: list, values: list | None) -> list:
        """What this view shows of entries given as parallel lists (``values`` may be None
        for a keys view)."""
        if self._what == "keys":
            return keys
        assert values is not None
        return values if self._what == "values" else list(zip(keys, values))

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


class SortedRangeAPI(PositionalAPI, ArrayAPI):
    """Key-ordered iteration, range views and neighbour queries for a class that provides
    ``_chunks(lo, hi, inclusive, reverse, with_values)``, yielding ``(keys, values)`` lists leaf
    by leaf, ``_version_source()``, ``_edge_key(last)`` and ``_first_in(lo, hi, inclusive, reverse,
    with_value)``, the first key (``(key, value)`` with ``with_value``) of a range in scan order
    or None, and the primitives of :class:`~offheap.treemap.positions.PositionalAPI` and
    :class:`~offheap.treemap.arrays.ArrayAPI`: TreeMap, TreeReader."""

    _chunks: Callable[..., Iterator[tuple[list, list | None]]]
    if TYPE_CHECKING:
        def _version_source(self) -> tuple[object, str]:
            """An object and the name of its attribute that changes whenever the entries change
            in size or are reloaded (the version an iteration compares before every item)."""

        def _changed_error(self) -> Exception:
            """What an iteration raises once the version moved under it."""
    _edge_key: Callable[[bool], object]
    _first_in: Callable[..., object]

    def _walk(self, what: int, lo, hi, inclusive, reverse: bool) -> Iterator | None:
        """The compiled iteration of a range that walks the tree itself (``_pages.scan``;
        ``what`` 0 keys, 1 values, 2 items), or None: iterate :meth:`_chunks` instead."""
        return None

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

    def floor_item(self, key):
        """The ``(key, value)`` with the largest key ``<= key``, or None."""
        return self._first_in(None, key, (True, True), True, True)

    def ceiling_item(self, key):
        """The ``(key, value)`` with the smallest key ``>= key``, or None."""
        return self._first_in(key, None, (True, True), False, True)

    def lower_item(self, key):
        """The ``(key, value)`` with the largest key ``< key``, or None."""
        return self._first_in(None, key, (True, False), True, True)

    def higher_item(self, key):
        """The ``(key, value)`` with the smallest key ``> key``, or None."""
        return self._first_in(key, None, (False, True), False, True)

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
