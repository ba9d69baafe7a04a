"""A position in a TreeMap's B+tree and the descents that set it (layer 6, under the tree).

A :class:`Cursor` names one leaf and the key range ``[lo, hi)`` that the separators above it give
that leaf (None: unbounded on that side). The tree uses cursors three ways:

- the *hint*: the tree keeps one cursor at the last leaf a lookup or change reached, so a key in
  its range needs no descent (ascending inserts, nearby lookups);
- changes: :meth:`Cursor.descend` records the ``path`` of ``(inner node, child index)`` pairs
  from the root down, which an in-leaf change walks to keep the entry counts of the inner nodes
  exact and a split or merge walks back up;
- positions: :meth:`Cursor.descend_to_position` descends by the entry counts instead of the
  keys, and the position of a key is the sum of the counts left of the recorded path;
- scans and neighbour queries (``irange``, ``floor_key``, ...): :meth:`Cursor.seek` moves to
  the leaf of a key, or the last leaf below it; a scan (:mod:`offheap.treemap.scan`) steps leaf
  by leaf by seeking a bound of the last leaf, so it holds no node between two steps. A leaf
  that is not cached is decoded for the scan alone, so a long scan does not evict the working
  set.

Validity: a cursor is only as good as the nodes it names, its leaf and the inner nodes of its
path; the tree forgets its hint (:meth:`forget`) whenever a change could leave one of them no
longer the tree's (or no longer cached), and descends anew before every structural change.

Cost: a descent is O(height * log(node_size)) key comparisons and one cache lookup per level.

Compiled reads. :func:`compiled_descent` gives the tree a ``Descent`` of the compiled codec
(``offheap/treemap/csrc/descent.c``) when it is loaded: the descents of ``get``, the neighbour
queries and the positional reads in C, reading cached nodes in place, caching an uncached leaf
while the cache has room for it (:meth:`NodeCache.leaf_for_read`) and otherwise searching it in
its page bytes, evicting nothing. It answers as the descents here and a ``bisect`` of the leaf
do (differential tests hold them equal), reads inner nodes only through
:meth:`NodeCache.inner` (a cached one keeps its LRU place) and leaves through the cache's dict,
:meth:`NodeCache.leaf_for_read` or :meth:`NodeCache.read_leaf`, and records no path and no
hint. It
bisects compact C forms of the inner nodes it has read, which the cache drops whenever their
nodes leave it or change (``forms`` in :mod:`offheap.treemap.nodecache`).

Compiled changes. :meth:`Cursor.descend`, the descent of every insert and delete, runs its
inner levels through ``_pages.walk`` (``offheap/treemap/csrc/walk.c``) when the compiled codec
is loaded, else through :func:`_walk`, its reference: the same path of the same Inner objects,
the same range, and the same effect on the node cache (a cached inner node moves to the end of
the LRU order, a missing one is read by :meth:`NodeCache.inner`); differential tests hold them
equal.

Interface. A compiled cursor provides the same class: ``Cursor(cache)``, the attributes ``leaf``,
``lo``, ``hi`` and ``path``, and the methods below, reading nodes only through
:meth:`NodeCache.inner`, :meth:`NodeCache.leaf` and :meth:`NodeCache.read_leaf`, and ordering keys
as Python's ``<`` does. Thread safety: none; the tree's lock covers every call.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from itertools import accumulate

from offheap.errors import CorruptionError
from offheap.treemap.meta import TreeShape
from offheap.treemap.node import Inner, Leaf
from offheap.treemap.nodecache import NodeCache
from offheap.treemap.page import compiled_kinds
from offheap.kernels import native


Path = list[tuple[Inner, int]]  # (inner node, child index) pairs from the root down to a leaf


class _Extreme:
    """A key beyond every key of a tree: below them all, or above them all."""

    __slots__ = ("_above",)

    def __init__(self, above: bool) -> None:
        self._above = above

    def __lt__(self, other) -> bool:
        return not self._above

    def __gt__(self, other) -> bool:
        return self._above


_BELOW_ALL, _ABOVE_ALL = _Extreme(False), _Extreme(True)


class Cursor:
    """A leaf of the tree, its key range ``[lo, hi)``, and the path down to it."""

    __slots__ = ("_cache", "leaf", "lo", "hi", "path")

    def __init__(self, cache: NodeCache) -> None:
        self._cache = cache
        self.leaf: Leaf | None = None  # None: the cursor names no leaf
        self.lo = None
        self.hi = None
        self.path: Path = []  # recorded by the descents, not by seek

    def forget(self) -> None:
        """Name no leaf any more (the next lookup descends)."""
        self.leaf = None

    def descend(self, shape: TreeShape, key, around: Callable[[int], bool] | None = None,
                read: Leaf | None = None) -> Leaf:
        """Move to the leaf whose range holds ``key``, caching the nodes on the way and recording
        the path; return the leaf.

        ``around`` (a change's descent): when it says so for the leaf's record id, the leaf is
        decoded for the change alone and not cached (the change writes it around the cache,
        :mod:`offheap.treemap.writearound`); the cursor then records the path but names no
        leaf, which is how the caller tells the two apart. ``read``: the leaf :meth:`peek` just
        gave for ``key`` (nothing changed since), used instead of decoding it again."""
        cache = self._cache
        if _compiled_pages is not None:
            path, lo, hi, recid = _compiled_pages.walk(cache._inner, cache.inner, shape.root,
                                                       shape.height - 1, key)
        else:
            path, lo, hi, recid = _walk(cache.inner, shape.root, shape.height - 1, key)
        if around is not None and around(recid):
            self.path, self.leaf = path, None
            return read if read is not None else cache.read_leaf(recid)
        leaf = cache.leaf(recid, read)
        self.path, self.leaf, self.lo, self.hi = path, leaf, lo, hi
        return leaf

    def peek(self, shape: TreeShape, key) -> Leaf:
        """The leaf whose range holds ``key``, read as :meth:`NodeCache.read_inner` and
        :meth:`NodeCache.read_leaf` read: the cache (its nodes and LRU order) and this cursor
        stay as they are. A store that keeps a present key looks there before its descent, and
        hands the leaf on to it (:meth:`descend`'s ``read``). The cached leaf where the cache
        holds it, else one decoded for the caller alone."""
        cache = self._cache
        return cache.read_leaf(_walk(cache.read_inner, shape.root, shape.height - 1, key)[3])

    def descend_to_position(self, shape: TreeShape, index: int) -> tuple[Leaf, int]:
        """Move to the leaf that holds the entry at ``index`` (``0 <= index < entries``), as
        :meth:`descend` does; return the leaf and the entry's offset in it. O(height *
        node_size): the counts left of the path are summed level by level."""
        inner_of = self._cache.inner
        path: Path = []
        recid = shape.root
        for _ in range(shape.height - 1):
            node = inner_of(recid)
            ends = list(accumulate(node.counts))  # ends[i]: entries up to child i's last
            i = bisect_right(ends, index)
            if i == len(ends):
                raise CorruptionError(f"the entry counts of TreeMap node {recid} add up to "
                                      f"{ends[-1]}, not past position {index}")
            if i:
                index -= ends[i - 1]
            path.append((node, i))
            recid = node.children[i]
        leaf = self._cache.leaf(recid)
        if index >= len(leaf.keys):
            raise CorruptionError(f"the entry counts above TreeMap leaf {recid} exceed its "
                                  f"{len(leaf.keys)} entries")
        self.path, self.leaf = path, leaf
        self.lo, self.hi = _bounds(path)
        return leaf, index

    def position(self) -> int:
        """The number of entries in the leaves before this cursor's leaf (after a descent)."""
        return sum(sum(node.counts[:i]) for node, i in self.path)

    def descend_edge(self, shape: TreeShape, last: bool) -> Leaf:
        """:meth:`descend` to the first leaf (the last with ``last``)."""
        return self.descend(shape, _ABOVE_ALL if last else _BELOW_ALL)

    def seek(self, shape: TreeShape, key, below: bool) -> Leaf:
        """Move, for a scan, to the leaf whose range holds ``key`` or, with ``below``, to the last
        leaf whose range starts below ``key``; return the leaf. ``key`` None stands for -inf
        (the first leaf), with ``below`` for +inf (the last leaf). Records no path."""
        if key is None:
            key = _ABOVE_ALL if below else _BELOW_ALL
        inner_of = self._cache.inner
        lo = hi = None
        recid = shape.root
        for _ in range(shape.height - 1):
            node = inner_of(recid)
            separators = node.keys
            i = bisect_left(separators, key) if below else bisect_right(separators, key)
            if i:
                lo = separators[i - 1]
            if i < len(separators):
                hi = separators[i]
            recid = node.children[i]
        leaf = self._cache.leaf_for_read(recid)
        self.path, self.leaf, self.lo, self.hi = [], leaf, lo, hi
        return leaf


_compiled_pages = native.compiled_module("offheap.treemap._pages")


def compiled_descent(cache: NodeCache, nodes):
    """The compiled ``Descent`` over ``cache`` and the record store of ``nodes`` (a
    :class:`~offheap.treemap.nodestore.NodeStore`), or None when the compiled codec is not
    loaded or does not read this tree's leaves (a custom value serializer)."""
    kinds = compiled_kinds(nodes.key_kind, nodes.serializer)
    if _compiled_pages is None or kinds is None:
        return None
    return _compiled_pages.Descent(cache, nodes.store, *kinds)


def _walk(inner_of, root: int, levels: int, key) -> tuple[Path, object, object, int]:
    """The inner levels of :meth:`Cursor.descend` (the reference of ``_pages.walk``): the path
    down ``levels`` inner nodes from ``root``, the range ``lo, hi`` its separators give, and the
    record id it ends at."""
    path: Path = []
    lo = hi = None
    recid = root
    for _ in range(levels):
        node = inner_of(recid)
        separators = node.keys
        i = bisect_right(separators, key)
        if i:
            lo = separators[i - 1]
        if i < len(separators):
            hi = separators[i]
        path.append((node, i))
        recid = node.children[i]
    return path, lo, hi, recid


def _bounds(path: Path) -> tuple:
    """The key range ``(lo, hi)`` the separators on ``path`` give the leaf at its end: the
    nearest separator left and right of the path, the deepest one first (None: unbounded)."""
    lo = hi = None
    for node, i in reversed(path):
        if lo is None and i:
            lo = node.keys[i - 1]
        if hi is None and i < len(node.keys):
            hi = node.keys[i]
        if lo is not None and hi is not None:
            break
    return lo, hi
