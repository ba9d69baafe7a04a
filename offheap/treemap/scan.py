"""Range scans of a TreeMap's B+tree, leaf by leaf (layer 6, under the tree's facade).

A :class:`RangeScan` yields the keys (and values) of a key range one leaf at a time, in key
order or reversed. Between two leaves it remembers only a key, the bound of the last leaf, and
finds the next leaf by a fresh descent from the root (:meth:`Cursor.seek`, or the compiled
``Descent.seek`` when the tree has one: the same leaf and bounds), so the facade may
let go of its lock between leaves. Neighbour queries (``floor_key``, ``ceiling_key``,
``lower_key``, ``higher_key`` and their ``_item`` forms) are the first entry of a one-sided scan
(:meth:`RangeScan.first`).

The iteration of a TreeMap's ranges (``irange``, the views) runs this same walk in C when the
compiled core is loaded (``descent_scan_leaf`` in ``offheap/treemap/csrc/descent.c``, driven by
``_pages.scan``); this class serves the other scans (``_chunks``: positions, arrays, a reader's
ranges) and is the reference the differential tests hold it to.

Bounds: ``lo``/``hi`` None is unbounded; ``inclusive`` is a pair saying whether each bound
counts. Cost: one descent per leaf, O(height * log(node_size)), plus the slices it returns.
Thread safety: none; the facade holds the tree's lock around each call.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from offheap.treemap.cursor import Cursor
from offheap.treemap.meta import TreeShape
from offheap.treemap.nodecache import NodeCache
from offheap.treemap.page import key_list


class RangeScan:
    """The leaves of one key range, one :meth:`next_chunk` call each; ``done`` after the last."""

    __slots__ = ("_cursor", "_descent", "_lo", "_hi", "_lo_inclusive",
                 "_hi_inclusive", "_reverse", "_seek", "_seek_inclusive", "done")

    def __init__(self, cache: NodeCache, lo, hi, inclusive: tuple[bool, bool],
                 reverse: bool, descent=None) -> None:
        self._cursor = Cursor(cache)
        self._descent = descent  # the compiled Descent: its seek finds each leaf
        self._lo, self._hi = lo, hi
        self._lo_inclusive, self._hi_inclusive = inclusive
        self._reverse = reverse
        # where the next leaf starts: the near bound of the range, then the far bound of each leaf
        self._seek, self._seek_inclusive = (hi, inclusive[1]) if reverse else (lo, inclusive[0])
        self.done = False

    def next_chunk(self, shape: TreeShape, with_values: bool) -> tuple[list, list | None]:
        """The keys of the next leaf that lie in the range, in scan order, and their values
        (None unless ``with_values``): new lists, possibly empty. Sets :attr:`done` when no
        leaf after this one can hold a key of the range."""
        seek, seek_inclusive, lo, hi = self._seek, self._seek_inclusive, self._lo, self._hi
        below = self._reverse and (seek is None or not seek_inclusive)
        if self._descent is not None:
            keys, leaf_values, lower, upper = self._descent.seek(shape.root, shape.height, seek,
                                                                 below, with_values)
        else:
            cursor = self._cursor
            leaf = cursor.seek(shape, seek, below)
            keys, leaf_values, lower, upper = leaf.keys, leaf.values, cursor.lo, cursor.hi
        if self._reverse:
            end = len(keys) if seek is None else (bisect_right if seek_inclusive else bisect_left)(keys, seek)
            start = 0 if lo is None else (bisect_left if self._lo_inclusive else bisect_right)(keys, lo)
            self.done = lower is None or start > 0 or (lo is not None and lower <= lo)
            step = slice(end - 1, start - 1 if start else None, -1)
            self._seek, self._seek_inclusive = lower, False
        else:
            start = 0 if seek is None else (bisect_left if seek_inclusive else bisect_right)(keys, seek)
            end = len(keys) if hi is None else (bisect_right if self._hi_inclusive else bisect_left)(keys, hi)
            self.done = upper is None or end < len(keys) or (
                hi is not None and (hi < upper or (hi == upper and not self._hi_inclusive)))
            step = slice(start, end)
            self._seek, self._seek_inclusive = upper, True
        if start >= end:
            return [], None
        return key_list(keys[step]), leaf_values[step] if with_values else None

    def first(self, shape: TreeShape, with_value: bool = False):
        """The first key of the range in scan order (its ``(key, value)`` with ``with_value``),
        or None if the range is empty."""
        while True:
            keys, values = self.next_chunk(shape, with_value)
            if keys:
                return (keys[0], values[0]) if values is not None else keys[0]
            if self.done:
                return None
