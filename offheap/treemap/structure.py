"""Structural change of a TreeMap's B+tree: splits, merges, rebalancing, root growth and shrink
(layer 6, under the tree).

Insert into a full leaf. The leaf is evened out with a sibling that has a free slot (as in a
B*-tree), wherever the new key goes in it; otherwise it splits in half, except when the new key
is its largest (smallest), where the left (right) part keeps ``node_size`` entries, so ascending
inserts leave full leaves behind: the leaf they fill is the last one, whose left sibling they
filled before. Random int64 keys fill leaves to 85% at node size 32 (82% when the sibling needed
two free slots and a new largest or smallest key always split). Example, node_size 4,
inserting 5 into the full rightmost leaf ``[1 2 3 4]``: the append split gives ``[1 2 3 4] [5]``
with separator 5, where a middle split would give ``[1 2] [3 4 5]`` and ascending keys would
leave every leaf half full. A split that overfills the parent splits it the same way, up to a
new root.

Delete. A leaf that drops below :func:`~offheap.treemap.node.min_entries` entries (an inner
node below :func:`~offheap.treemap.node.min_children` children) merges with a sibling when both
fit in one node, and otherwise takes entries from it until both are half full; a root with one
child is replaced by that child. So mass deletion leaves no empty leaves.

Entry counts. Every inner node keeps the entries under each child (:class:`~offheap.treemap.node.Inner`).
A change sets them exactly where it moves entries or children (the parent of two nodes it splits,
evens out or merges takes their new totals) and adds its net change (+1 for an insert, minus
the removed entries for a delete) to every ancestor above the levels it restructured.

Failure atomicity. Everything that can fail before the commit is done first: the records for
the nodes a split creates are reserved, the siblings a rebalance needs are loaded. Then the
nodes change in memory, which cannot fail, and :class:`~offheap.treemap.writethrough.NodeWriter`
commits them (undoing them if a write-through fails). Every change takes the shape before it
and returns the shape after it, which the tree installs only when the call returns.

Thread safety: none; the tree's lock covers every call.
"""

from __future__ import annotations

from typing import Protocol

from offheap.treemap.cursor import Path
from offheap.treemap.meta import TreeShape
from offheap.treemap.node import (
    Inner,
    Leaf,
    Node,
    merge_into,
    min_children,
    min_entries,
    n_entries,
    redistribute,
    split_off,
)
from offheap.treemap.nodestore import NodeStore

_RebalanceStep = tuple[Inner, int, int, Node, bool]  # parent, child, sibling index, sibling, merge


class NodeSource(Protocol):
    """Where a Rebalancer gets the siblings it needs: the node cache (:class:`~offheap.treemap.nodecache.NodeCache`), or a
    change written around it (:class:`~offheap.treemap.writearound.WriteAround`)."""

    def leaf(self, recid: int) -> Leaf: ...

    def inner(self, recid: int) -> Inner: ...


class Committer(Protocol):
    """What makes a Rebalancer's change stick: :class:`~offheap.treemap.writethrough.NodeWriter` (dirty in the cache, or
    written through), or a change written around the cache. ``changed`` nodes had their
    entries, separators or children edited; ``recounted`` inner nodes only their entry counts
    (the ancestors above the edit), which leaves what is derived from their separators and
    children (the compiled descent's forms) as it is."""

    def commit(self, changed: list[Node], created: list[Node], removed: list[Node],
               recounted: list[Inner]) -> None: ...


class Rebalancer:
    """Splits, merges and rebalancing of one tree whose nodes hold up to ``node_size`` entries
    (leaves) or children (inner nodes)."""

    def __init__(self, cache: NodeSource, nodes: NodeStore, writer: Committer,
                 node_size: int) -> None:
        self._cache = cache
        self._nodes = nodes
        self._writer = writer
        self._node_size = node_size
        self.min_entries = min_entries(node_size)
        self._min_children = min_children(node_size)

    # -- insert -------------------------------------------------------------------------------

    def insert_into_full(self, shape: TreeShape, path: Path, leaf: Leaf, i: int, key,
                         value) -> TreeShape:
        """Insert ``key`` at position ``i`` of the full ``leaf`` at the end of ``path``: into a
        sibling with room, else by a split; return the new shape."""
        if path and self._insert_via_sibling(path, leaf, i, key, value):
            return shape
        return self._split_insert(shape, path, leaf, i, key, value)

    def _insert_via_sibling(self, path: Path, leaf: Leaf, i: int, key, value) -> bool:
        """Insert by evening the leaf out with a sibling that has a free slot; False if neither
        sibling has room (nothing changed then)."""
        parent, ci = path[-1]
        for si in (ci - 1, ci + 1):
            # the parent's entry count of a leaf child is its length: a full sibling is
            # passed over without loading its page
            if not 0 <= si < len(parent.children) or parent.counts[si] >= self._node_size:
                continue
            sibling = self._cache.leaf(parent.children[si])
            leaf.keys.insert(i, key)
            leaf.values.insert(i, value)
            left, right, sep_index = (sibling, leaf, si) if si < ci else (leaf, sibling, ci)
            parent.keys[sep_index] = redistribute(left, right, None)
            parent.counts[ci], parent.counts[si] = len(leaf), len(sibling)
            self._writer.commit([leaf, sibling, parent], [], [], _add_to_counts(path[:-1], 1))
            return True
        return False

    def _split_insert(self, shape: TreeShape, path: Path, leaf: Leaf, i: int, key,
                      value) -> TreeShape:
        """Insert by splitting the leaf, and every full ancestor, up to a new root."""
        size = self._node_size
        n_full = 0
        while n_full < len(path) and len(path[-1 - n_full][0].children) >= size:
            n_full += 1
        recids = self._nodes.reserve(1 + n_full + (n_full == len(path)))  # + a new root
        leaf.keys.insert(i, key)
        leaf.values.insert(i, value)
        at = size if i == size else 1 if i == 0 else (size + 1) // 2
        right, separator = split_off(leaf, at, recids.pop())
        changed: list[Node] = [leaf]
        recounted: list[Inner] = []
        created = [right]
        shape = shape.with_nodes(leaves=1)
        left_half: Node = leaf
        right_half: Node = right
        level = len(path)
        while level:
            level -= 1
            parent, ci = path[level]
            parent.keys.insert(ci, separator)
            parent.children.insert(ci + 1, right_half.recid)
            parent.counts[ci] = n_entries(left_half)
            parent.counts.insert(ci + 1, n_entries(right_half))
            changed.append(parent)
            n_children = len(parent.children)
            if n_children <= size:
                recounted = _add_to_counts(path[:level], 1)
                break
            at = n_children - 2 if ci + 1 == n_children - 1 else 2 if ci == 0 else n_children // 2
            sibling, separator = split_off(parent, at, recids.pop())
            created.append(sibling)
            shape = shape.with_nodes(inner=1)
            left_half, right_half = parent, sibling
        else:
            root = Inner(recids.pop(), [separator], [shape.root, right_half.recid],
                         [n_entries(left_half), n_entries(right_half)])
            created.append(root)
            shape = shape.grown(root.recid)
        self._writer.commit(changed, created, [], recounted)
        return shape

    # -- delete -------------------------------------------------------------------------------

    def remove(self, shape: TreeShape, path: Path, leaf: Leaf, start: int,
               end: int) -> TreeShape:
        """Remove entries ``start:end`` of ``leaf``, at the end of the non-empty ``path``, and
        rebalance what underflows; return the new shape. Without the write cache this may raise
        CapacityError (a merged node has no room in a full store), changing nothing."""
        steps = self._plan(path, len(leaf) - (end - start))
        del leaf.keys[start:end], leaf.values[start:end]
        above = _add_to_counts(path[:len(path) - len(steps)], start - end)
        changed: dict[int, Node] = {leaf.recid: leaf}
        removed: list[Node] = []
        node: Node = leaf
        for parent, ci, si, sibling, merge in steps:
            changed[parent.recid] = parent
            changed[sibling.recid] = sibling
            left, right, sep_index = (sibling, node, si) if si < ci else (node, sibling, ci)
            if merge:
                merge_into(left, right, parent.keys[sep_index])
                del parent.keys[sep_index], parent.children[sep_index + 1]
                del parent.counts[sep_index + 1]
                parent.counts[sep_index] = n_entries(left)
                removed.append(right)
                del changed[right.recid]
                shape = shape.with_nodes(leaves=-1) if right.is_leaf else shape.with_nodes(inner=-1)
                node = parent
            else:
                parent.keys[sep_index] = redistribute(left, right, parent.keys[sep_index])
                parent.counts[sep_index] = n_entries(left)
                parent.counts[sep_index + 1] = n_entries(right)
        root = path[0][0]
        if len(root.children) == 1:
            removed.append(root)
            changed.pop(root.recid, None)
            shape = shape.shrunk(root.children[0])
        self._writer.commit(list(changed.values()), [], removed, above)
        return shape

    def _plan(self, path: Path, remaining: int) -> list[_RebalanceStep]:
        """The rebalancing a leaf left with ``remaining`` entries needs, bottom-up: at each
        level the sibling it pairs with and whether they merge. Loads the siblings (what can
        fail) before anything changes; only lengths decide, so the plan is exact."""
        steps: list[_RebalanceStep] = []
        size, minimum = remaining, self.min_entries
        for parent, ci in reversed(path):
            if size >= minimum:
                break
            si = ci - 1 if ci else ci + 1
            sibling: Node = (self._cache.inner(parent.children[si]) if steps
                             else self._cache.leaf(parent.children[si]))
            merge = size + len(sibling) <= self._node_size
            steps.append((parent, ci, si, sibling, merge))
            if not merge:
                break
            size, minimum = len(parent) - 1, self._min_children
        return steps


def _add_to_counts(path: Path, delta: int) -> list[Inner]:
    """Add ``delta`` to the count of the child each step of ``path`` goes down to; return the
    nodes of the path, which have changed."""
    for node, i in path:
        node.counts[i] += delta
    return [node for node, _ in path]
