"""Decoded B+tree nodes and the cache that holds them (layer 6, used by :mod:`offheap.treemap.treemap`).

A node in memory is plain Python lists, so the scalar paths of the tree are ``bisect`` and
``list.insert`` with no numpy call per operation; pages are encoded and decoded with numpy once
per node write or read.

:class:`NodeCache` keeps recently used nodes, least recently used first, up to ``capacity``. It is
also the *write cache*: a node changed in memory is marked ``dirty`` and written (encoded once)
only when it is evicted or flushed, not on every change. Eviction happens only in :meth:`trim`,
which the tree calls before an operation changes anything, so a :class:`CapacityError` raised by a
write leaves every node (the failed one stays cached and dirty) and the tree as they were.

:func:`merge_into` and :func:`redistribute` are the two ways two sibling nodes are rebalanced.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable

from offheap.errors import CapacityError
from offheap.treemap.page import separator


class Leaf:
    """A leaf: sorted ``keys`` and their ``values``; ``recid`` is its record in the store."""

    __slots__ = ("recid", "keys", "values", "dirty", "raw_bytes", "stored_bytes")
    is_leaf = True

    def __init__(self, recid: int, keys: list, values: list) -> None:
        self.recid = recid
        self.keys = keys
        self.values = values
        self.dirty = False
        self.raw_bytes = 0  # sizes of the page last written for this node (0: never written)
        self.stored_bytes = 0

    def __len__(self) -> int:
        return len(self.keys)


class Inner:
    """An inner node: ``children[i]`` holds the keys ``k`` with ``keys[i-1] <= k < keys[i]``."""

    __slots__ = ("recid", "keys", "children", "dirty", "raw_bytes", "stored_bytes")
    is_leaf = False

    def __init__(self, recid: int, keys: list, children: list) -> None:
        self.recid = recid
        self.keys = keys
        self.children = children
        self.dirty = False
        self.raw_bytes = 0
        self.stored_bytes = 0

    def __len__(self) -> int:
        return len(self.children)


class NodeCache:
    """Decoded nodes by record id: up to ``capacity`` leaves and, apart, up to ``capacity`` inner
    nodes, each kind in least-recently-used order.

    Keeping the kinds apart keeps the inner nodes, which every descent passes through, from being
    pushed out by a stream of leaves: under random inserts a shared LRU would decode an inner
    node as well as a leaf for most operations. ``load(recid)`` decodes a node from the store;
    ``write(node)`` encodes and stores a dirty node and clears its flag (raising
    :class:`CapacityError` with nothing changed if the store is full). The cache may hold more
    than ``capacity`` nodes of a kind between two :meth:`trim` calls.
    """

    def __init__(self, capacity: int, load: Callable[[int], Leaf | Inner],
                 write: Callable[[Leaf | Inner], None]) -> None:
        if capacity < 8:
            raise ValueError(f"cache_size must be at least 8 nodes, got {capacity}")
        self.capacity = capacity
        self._leaves: OrderedDict[int, Leaf] = OrderedDict()
        self._inner: OrderedDict[int, Inner] = OrderedDict()
        self._load = load
        self._write = write

    def node(self, recid: int) -> Leaf | Inner:
        """The node ``recid``, decoded from the store if it is not cached; now most recent."""
        node = self._inner.get(recid)
        if node is not None:
            self._inner.move_to_end(recid)
            return node
        node = self._leaves.get(recid)
        if node is not None:
            self._leaves.move_to_end(recid)
            return node
        node = self._load(recid)
        self.add(node)
        return node

    def peek(self, recid: int) -> Leaf | Inner | None:
        """The cached node ``recid`` or None, without changing the LRU order."""
        node = self._leaves.get(recid)
        return self._inner.get(recid) if node is None else node

    def read(self, recid: int) -> Leaf | Inner:
        """The cached node ``recid``, or else one decoded for the caller alone (not cached, so a
        long scan does not evict the working set). LRU order does not change."""
        node = self.peek(recid)
        return self._load(recid) if node is None else node

    def add(self, node: Leaf | Inner) -> None:
        (self._leaves if node.is_leaf else self._inner)[node.recid] = node

    def discard(self, recid: int) -> None:
        if self._leaves.pop(recid, None) is None:
            self._inner.pop(recid, None)

    def over_capacity(self) -> bool:
        """Whether :meth:`trim` has work to do."""
        return len(self._leaves) > self.capacity or len(self._inner) > self.capacity

    def __len__(self) -> int:
        return len(self._leaves) + len(self._inner)

    def __contains__(self, recid: int) -> bool:
        return recid in self._leaves or recid in self._inner

    def __iter__(self):
        return itertools.chain(self._leaves.values(), self._inner.values())

    def trim(self, strict: bool = True) -> None:
        """Evict least recently used nodes down to ``capacity`` of each kind, writing dirty ones
        first.

        ``strict=False`` (read paths) keeps a node whose write fails and stops trimming, so
        reading never raises :class:`CapacityError`.
        """
        for nodes in (self._leaves, self._inner):
            while len(nodes) > self.capacity:
                recid, node = next(iter(nodes.items()))
                if node.dirty:
                    try:
                        self._write(node)
                    except CapacityError:
                        if strict:
                            raise
                        return
                del nodes[recid]

    def n_dirty(self) -> int:
        return sum(1 for node in self if node.dirty)

    def write_dirty(self) -> None:
        """Write every dirty node (in record-id order); the first failure propagates."""
        for node in sorted((n for n in self if n.dirty), key=lambda n: n.recid):
            self._write(node)

    def clear(self) -> None:
        self._leaves.clear()
        self._inner.clear()


def merge_into(left, right, parent_separator) -> None:
    """Append ``right``'s entries (children) to ``left``; for inner nodes the parent's
    separator comes down between them."""
    if left.is_leaf:
        left.keys += right.keys
        left.values += right.values
    else:
        left.keys += [parent_separator] + right.keys
        left.children += right.children


def redistribute(left, right, parent_separator):
    """Even out two siblings; return the new separator between them."""
    if left.is_leaf:
        keys, values = left.keys + right.keys, left.values + right.values
        half = len(keys) // 2
        left.keys[:], left.values[:] = keys[:half], values[:half]
        right.keys[:], right.values[:] = keys[half:], values[half:]
        return separator(left.keys[-1], right.keys[0])
    keys = left.keys + [parent_separator] + right.keys
    children = left.children + right.children
    half = len(children) // 2
    left.children[:], right.children[:] = children[:half], children[half:]
    left.keys[:], right.keys[:] = keys[:half - 1], keys[half:]
    return keys[half - 1]
