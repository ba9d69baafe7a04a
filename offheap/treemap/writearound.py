"""Changes to leaves the node cache does not hold, written around it (layer 6, under the tree).

Why. With the write cache a changed leaf stays cached and dirty until it is evicted. A random
change to a map many times larger than the cache misses it nearly every time, and caching the
leaf it changes pushes out the least recently used leaf, which is dirty too: every insert paid a
decode into lists, the cache's bookkeeping, and the encode and store write of *another* leaf.
Written around the cache, the leaf is decoded for the change alone, changed, and written back at
once: the same decode, encode and store write, and the cache stays as it was.

Which trees. Those with the write cache (a write-through tree writes every change at once
anyway) and without a ``limit``: under one, a change kept in the cache never fails on a delete
(a full map can always shrink), where a leaf written at once needs a chunk of its new size.

When (:meth:`WriteAround.takes`). A change goes around the cache when its leaf is not cached
and caching it would push out a dirty leaf: the cache's leaves are at capacity and the least
recently used one is dirty. A clean one leaves for free, so the leaf is cached as before: after a
flush, or while reads keep the cache, the working set still comes into it.

What. An in-leaf change (an overwrite, an insert into a leaf with room, a delete that leaves the
leaf at least :func:`~offheap.treemap.node.min_entries` full) writes the leaf, then adds its net
change to the entry counts of the inner nodes of its path, which are cached and become dirty. A
structural change (an insert into a full leaf, a delete that underflows) runs the tree's rules
(a :class:`~offheap.treemap.structure.Rebalancer`) with this object as its node source and its
committer: a sibling leaf that is not cached is decoded for the change alone, every leaf not
cached is written at the commit, and inner nodes, cached leaves and new inner nodes are dirty in
the cache. The decisions are the Rebalancer's either way, so the tree is the same one the cache
would have built; its leaves reach the store earlier.

Compiled twin. For int64 keys the map's item slots make the common cases in C
(``offheap/treemap/csrc/around.c``: in-leaf changes, an insert via a sibling, a split whose
parent has room or whose parent splits into a node above it that has room), with the same
decisions, writes and failure behaviour; this module is their reference and makes every other
case.

Failure atomicity. Writing leaves is the only step that can fail (a full store's
:class:`CapacityError`, a full disk). An in-leaf change writes its leaf before anything else
changes, and the decoded copy is dropped. A structural change first snapshots every cached node
it will edit (the inner nodes of its path, and a cached sibling when the Rebalancer asks for
one); a failed write restores the records already written
(:meth:`~offheap.treemap.writethrough.NodeWriter.write_through`), the snapshots, and frees the
records reserved for new nodes, so the tree is as it was and the caller keeps its old shape.

Thread safety: none; the tree's lock covers every call.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

from offheap.treemap.cursor import Path
from offheap.treemap.meta import TreeShape
from offheap.treemap.node import Inner, Leaf, Node
from offheap.treemap.nodecache import NodeCache
from offheap.treemap.nodestore import NodeStore
from offheap.treemap.structure import Rebalancer
from offheap.treemap.writethrough import NodeWriter

_Snapshot = tuple[Node, list, list, list | None, bool]  # node, keys, values or children, counts, dirty


class WriteAround:
    """The changes of one tree whose leaves the cache does not hold (see the module docstring)."""

    def __init__(self, cache: NodeCache, nodes: NodeStore, writer: NodeWriter,
                 node_size: int) -> None:
        self._cache = cache
        self._nodes = nodes
        self._writer = writer
        self._node_size = node_size
        self._rebalancer = Rebalancer(self, nodes, self, node_size)
        self._undo: list[_Snapshot] = []  # cached nodes the structural change in progress edits

    def takes(self, recid: int) -> bool:
        """Whether a change to leaf ``recid`` goes around the cache (the module docstring)."""
        return self._cache.would_evict_dirty(recid)

    # -- changes ------------------------------------------------------------------------------

    def put(self, shape: TreeShape, path: Path, leaf: Leaf, key, value) -> tuple[TreeShape, bool]:
        """Map ``key`` to ``value`` in ``leaf``, a decoded copy at the end of ``path``; return the
        new shape and whether the key is new."""
        keys = leaf.keys
        i = bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            leaf.values[i] = value
            self._nodes.write(leaf)
            return shape, False
        if len(keys) < self._node_size:
            keys.insert(i, key)
            leaf.values.insert(i, value)
            self._nodes.write(leaf)
            _add_to_counts(path, 1)
            return shape, True
        return self._restructure(path, lambda: self._rebalancer.insert_into_full(
            shape, path, leaf, i, key, value)), True

    def remove(self, shape: TreeShape, path: Path, leaf: Leaf, start: int, end: int) -> TreeShape:
        """Remove entries ``start:end`` of ``leaf``, a decoded copy at the end of ``path``, and
        rebalance what underflows; return the new shape."""
        if len(leaf.keys) - (end - start) >= self._rebalancer.min_entries or not path:
            del leaf.keys[start:end], leaf.values[start:end]
            self._nodes.write(leaf)
            _add_to_counts(path, start - end)
            return shape
        return self._restructure(path, lambda: self._rebalancer.remove(
            shape, path, leaf, start, end))

    def _restructure(self, path: Path, change: Callable[[], TreeShape]) -> TreeShape:
        self._undo = [_snapshot(node) for node, _ in path]
        try:
            return change()
        finally:
            self._undo = []

    # -- the Rebalancer's node source and committer --------------------------------------------

    def leaf(self, recid: int) -> Leaf:
        """Leaf ``recid``: the cached one (snapshot first), else decoded for this change alone."""
        node = self._cache.cached_leaf(recid)
        if node is None:
            return self._cache.read_leaf(recid)
        self._undo.append(_snapshot(node))
        return node

    def inner(self, recid: int) -> Inner:
        """Inner node ``recid``, cached as every inner node a change reaches (snapshot first)."""
        node = self._cache.inner(recid)
        self._undo.append(_snapshot(node))
        return node

    def commit(self, changed: list[Node], created: list[Node], removed: list[Node],
               recounted: list[Inner]) -> None:
        """Write the leaves of a structural change that are not cached, make the rest dirty in
        the cache, then free the records of ``removed`` nodes; a failed write undoes it all
        (arguments as :meth:`NodeWriter.commit` takes them)."""
        cache = self._cache
        cache.changed(changed)
        touched = changed + recounted + created
        around: list[Node] = [node for node in touched
                              if isinstance(node, Leaf) and cache.cached_leaf(node.recid) is not node]
        for node in touched:
            node.dirty = True  # a leaf written around is clean again once written
        try:
            self._writer.write_through(around)
        except BaseException:
            for snapshot in reversed(self._undo):
                _restore(snapshot)
            self._nodes.release([node.recid for node in created])
            raise
        for node in created:
            if isinstance(node, Inner):
                cache.add(node)
        for node in removed:
            cache.discard(node.recid)
            self._nodes.free(node)


def _add_to_counts(path: Path, delta: int) -> None:
    for node, i in path:
        node.counts[i] += delta
        node.dirty = True


def _snapshot(node: Node) -> _Snapshot:
    if isinstance(node, Leaf):
        return node, node.keys[:], node.values[:], None, node.dirty
    return node, node.keys[:], node.children[:], node.counts[:], node.dirty


def _restore(snapshot: _Snapshot) -> None:
    node, keys, second, counts, dirty = snapshot
    node.keys[:] = keys
    if isinstance(node, Leaf):
        node.values[:] = second
    else:
        assert counts is not None
        node.children[:] = second
        node.counts[:] = counts
    node.dirty = dirty
