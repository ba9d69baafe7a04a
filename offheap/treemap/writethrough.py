"""How a change to decoded nodes reaches the store, and its undo (layer 6, under the tree).

With the write cache a changed node is only marked dirty: it is written later, when evicted or
flushed, and nothing here can fail. Without it every changed node is written at once, and a
failed write (:class:`CapacityError`: the store is full) must leave the tree exactly as it was.
:class:`NodeWriter` does that with an undo log of two levels:

- records: before a node's record is overwritten its old page is kept (:meth:`NodeStore.snapshot`);
  if a later write of the same change fails, the records already written get their old pages
  back, into the chunks their writes just released, so the restore allocates nothing;
- nodes: the changed nodes are then dropped from the cache, to be read back from their records
  as they were, and the records reserved for new nodes are freed. The tree installs the new
  :class:`~offheap.treemap.meta.TreeShape` only after a commit returns, so the old one stands.

The tree's hint names a leaf in the cache; whatever the undo drops, the hint forgets.
Thread safety: none; the tree's lock covers every call.
"""

from __future__ import annotations

from offheap.treemap.cursor import Cursor, Path
from offheap.treemap.node import Inner, Leaf, Node
from offheap.treemap.nodecache import NodeCache
from offheap.treemap.nodestore import NodeSnapshot, NodeStore


class NodeWriter:
    """Commits changes to nodes: dirty in the write cache, or written through with undo."""

    def __init__(self, cache: NodeCache, nodes: NodeStore, hint: Cursor,
                 write_cache: bool) -> None:
        self._cache = cache
        self._nodes = nodes
        self._hint = hint
        self.write_cache = write_cache

    def commit_leaf(self, leaf: Leaf, path: Path, delta: int) -> None:
        """Make an in-place change of ``leaf`` stick: its entries grew by ``delta`` (negative:
        shrank), which the entry counts along ``path``, the inner nodes above it, take on. Dirty
        with the write cache; else written through, and if that fails the leaf and the nodes of
        the path leave the cache, so that they are read back as they were."""
        if self.write_cache:
            leaf.dirty = True
            if delta:
                for node, i in path:
                    node.counts[i] += delta
                    node.dirty = True
            return
        for node, i in path:
            node.counts[i] += delta
        above = [node for node, _ in path] if delta else []
        try:
            self.write_through([leaf, *above])
        except BaseException:
            self._cache.discard(leaf.recid)
            for node in above:
                self._cache.discard(node.recid)
            self._hint.forget()
            raise

    def commit(self, changed: list[Node], created: list[Node], removed: list[Node],
               recounted: list[Inner]) -> None:
        """Make a structural change stick: ``changed`` nodes edited in place, ``recounted``
        ones whose entry counts alone changed, ``created`` ones new (in records from
        :meth:`NodeStore.reserve`), ``removed`` ones gone from the tree, whose records are freed
        once the rest is committed. A failed write-through undoes it all before the error
        propagates. The cache hears of the ``changed`` nodes first (:meth:`NodeCache.changed`),
        so no form of their old separators outlives the call."""
        self._cache.changed(changed)
        for node in created:
            self._cache.add(node)
        edited = changed + recounted
        if self.write_cache:
            for node in edited:
                node.dirty = True
            for node in created:
                node.dirty = True
        else:
            try:
                self.write_through(edited + created)
            except BaseException:
                self._undo(edited + removed, created)
                raise
        for node in removed:
            self._cache.discard(node.recid)
            self._nodes.free(node)

    def write_batch(self, nodes: list[Node]) -> None:
        """Write the nodes a batch changed in the cache, all or none
        (:meth:`NodeStore.write_all`): a failure leaves every record as it was."""
        self._nodes.write_all(nodes)

    def forget_batch(self, nodes: list[Node]) -> None:
        """After :meth:`write_batch` failed: drop the batch's nodes from the cache and free the
        records reserved for its new nodes (still empty, since nothing of the batch was written)."""
        empty = {node.recid for node in nodes if not len(self._nodes.store.view(node.recid))}
        self._undo([node for node in nodes if node.recid not in empty],
                   [node for node in nodes if node.recid in empty])

    def _undo(self, changed: list[Node], created: list[Node]) -> None:
        """Forget an in-memory change: its nodes are read back from the store, as they were."""
        for node in changed:
            self._cache.discard(node.recid)
        for node in created:
            self._cache.discard(node.recid)
        self._nodes.release([node.recid for node in created])
        self._hint.forget()

    def write_through(self, nodes: list[Node]) -> None:
        """Write ``nodes`` now; if one write fails, restore the records already written."""
        done: list[tuple[Node, NodeSnapshot]] = []
        try:
            for node in nodes:
                snapshot = self._nodes.snapshot(node)
                self._nodes.write(node)
                done.append((node, snapshot))
        except BaseException:
            for node, snapshot in reversed(done):
                self._nodes.restore(node, snapshot)
            raise
