"""SortedDict's positional API for a TreeMap (layer 6, shared by
:class:`~offheap.treemap.treemap.TreeMap`, :class:`~offheap.treemap.reader.TreeReader` and the
range views of :mod:`offheap.treemap.views`).

A position is an index into the keys in ascending order, as in ``SortedDict``: ``0`` is the
smallest key, ``-1`` the largest. Every inner node of the tree carries the entries under each
of its children (:class:`~offheap.treemap.node.Inner`), so the position of a key and the entry
at a position each cost one descent, O(height * node_size), not a scan. A run of positions is
one positional descent to its first entry and then a range scan from that key.

Thread safety: each primitive (``_position``, ``_item_at``, ``_chunks``) holds the map's lock;
an :meth:`PositionalAPI.islice` or a slice of a view is several of them, so a change between
them (another thread's) may shift the positions it reads, as a change during iteration would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING


def position_in(index: int, n_entries: int) -> int:
    """``index`` as a position in ``[0, n_entries)``, negative indexes counting from the end;
    IndexError, as a list gives, outside."""
    position = index + n_entries if index < 0 else index
    if not 0 <= position < n_entries:
        raise IndexError(f"index {index} is out of range for {n_entries} entries")
    return position


def position_run(primitives, start: int, stop: int, reverse: bool,
                 with_values: bool) -> Iterator[tuple[list, list | None]]:
    """``(keys, values)`` lists covering positions ``start:stop`` (``0 <= start``, ``stop <=
    len``) leaf by leaf, descending with ``reverse``; ``values`` None unless ``with_values``.
    ``primitives`` provides ``_item_at`` and ``_chunks``."""
    remaining = stop - start
    if remaining <= 0:
        return
    anchor = primitives._item_at(stop - 1 if reverse else start)[0]
    lo, hi = (None, anchor) if reverse else (anchor, None)
    for keys, values in primitives._chunks(lo, hi, (True, True), reverse, with_values):
        if len(keys) >= remaining:
            yield keys[:remaining], None if values is None else values[:remaining]
            return
        yield keys, values
        remaining -= len(keys)


class PositionalAPI:
    """``bisect_left``, ``bisect_right``, ``index``, ``peekitem`` and ``islice`` for a class that
    provides ``__len__``, ``_position(key, right)`` (how many keys are below ``key``, at or
    below with ``right``), ``_index_of(key)`` (its position, None when absent), ``_item_at(index)`` (the ``(key, value)`` there, IndexError outside)
    and the ``_chunks`` scan of :class:`~offheap.treemap.views.SortedRangeAPI`."""

    _position: Callable[[object, bool], int]
    _index_of: Callable[[object], int | None]
    _item_at: Callable[[int], tuple]
    _chunks: Callable[..., Iterator[tuple[list, list | None]]]

    if TYPE_CHECKING:
        def __len__(self) -> int: ...

    def bisect_left(self, key) -> int:
        """The position where ``key`` would go, before an equal key: how many keys are < it."""
        return self._position(key, False)

    def bisect_right(self, key) -> int:
        """The position where ``key`` would go, after an equal key: how many keys are <= it."""
        return self._position(key, True)

    bisect = bisect_right

    def index(self, key, start: int | None = None, stop: int | None = None) -> int:
        """The position of ``key``; ValueError if it is absent, or outside positions
        ``start:stop`` (a slice of the keys, as ``SortedDict.index`` takes them)."""
        position = self._index_of(key)
        if position is not None and start is None and stop is None:
            return position
        first, last, _ = slice(start, stop).indices(len(self))
        if position is not None and first <= position < last:
            return position
        raise ValueError(f"{key!r} is not in the TreeMap")

    def peekitem(self, index: int = -1) -> tuple:
        """The ``(key, value)`` at position ``index`` (default the largest key); IndexError
        outside the map."""
        return self._item_at(index)

    def islice(self, start: int | None = None, stop: int | None = None,
               reverse: bool = False) -> Iterator:
        """The keys at positions ``start:stop`` (as a slice takes them: None for an end,
        negative from the end), ascending, or descending with ``reverse``."""
        first, last, _ = slice(start, stop).indices(len(self))
        for keys, _ in position_run(self, first, last, reverse, False):
            yield from keys
