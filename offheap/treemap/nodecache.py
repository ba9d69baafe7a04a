"""The cache of decoded B+tree nodes, which is also the write cache (layer 6, under the tree).

:class:`NodeCache` keeps recently used nodes, leaves and inner nodes apart, least recently used
first, within a heap budget of ``cache_bytes`` (and, if given, at most ``cache_size`` nodes of
each kind). It is also the *write cache*: a node changed in
memory is marked ``dirty`` and written (encoded once) only when it is evicted or flushed, not on
every change. Eviction happens only in :meth:`NodeCache.trim`, which the tree calls before an
operation changes anything, so a :class:`CapacityError` raised by a write leaves every node (the
failed one stays cached and dirty) and the tree as they were.

Budget. Under a ``limit`` the bytes of keys and values put into dirty nodes since they were
last all written are counted (:meth:`NodeCache.admit`, an estimate made by
:meth:`~offheap.treemap.admission.Admission.held_bytes`); past ``budget_bytes``
(:func:`unwritten_budget`: an eighth of the limit, at least 1 MiB) the next :meth:`trim` writes
every dirty node into the store, where the limit holds. So what a map with the write cache holds
stays within ``limit`` plus that budget, and a store too full to take the writes raises
:class:`CapacityError` before the operation changes anything, as an eviction does.

Heap budget. Each cached node is charged what it costs decoded when full (:func:`node_costs`:
a measured estimate for int64 keys with shared values, such as small ints or ``""``; distinct
int values, and larger str, bytes or object entries cost more than it says), so the charge of the cache, ``charged_bytes``, changes only when
a node enters or leaves it. Inner nodes are kept first: every descent passes through them and
they are few (at ``node_size`` 32, 1,940 of them for 1M random keys beside 36,789 leaves), and
under random access a tree whose inner nodes do not all stay cached rebuilds their compact forms
on most walks. So they may take the whole budget but what :data:`MIN_NODES` leaves need, and
the leaves get the rest; only past that are inner nodes evicted. A trim brings the charge within
``cache_bytes``; between two trims (within an operation) it may exceed it by the nodes of one
path and a split. Measured with memray (``experiments/nodecache_bench.py``), 1M random int64
keys: every node cached costs 37.6 MiB of heap at memray's peak at ``node_size`` 32 and 47.5
MiB at 120, where the map's pages take 6.2 and 5.5 MiB off the heap (lists of int objects as
leaf keys cost 43 and 53 MiB). The default :data:`DEFAULT_CACHE_BYTES` (8 MiB charged) keeps
every inner node and 4,606 leaves at 32 (7.2 MiB of heap by tracemalloc) and 2,758 leaves at
120 (6.5 MiB), while random updates have grown the pages to 8.8 and 7.9 MiB. Past about 4,000
inner nodes at 32 (some 2M random keys) they no longer all fit, and a larger ``cache_bytes``
keeps them.

Interface. A descent asks for the kind of node it expects (:meth:`NodeCache.inner`,
:meth:`NodeCache.leaf`, :meth:`NodeCache.leaf_for_read` for reads that cache a leaf only
while the leaves are below capacity, and :meth:`NodeCache.read_inner`, :meth:`NodeCache.read_leaf`
for reads that leave the cache as it is); a page of the other kind there is a :class:`CorruptionError`. A
compiled descent keeps to these calls, or makes their effect itself on the same two
``OrderedDict`` objects: the compiled item slots read a leaf into ``_leaves`` as :meth:`leaf`
does (``descent_cache_leaf`` in ``offheap/treemap/csrc/descent.c``: the :class:`Leaf` that
:meth:`NodeStore.load <offheap.treemap.nodestore.NodeStore.load>` makes, from a raw page), and
evict leaves as :meth:`trim` does when that is all a trim has to do (``trim_leaves`` in
``offheap/treemap/csrc/slots.c``: no write budget, the inner nodes within capacity, a dirty leaf
written as :meth:`NodeStore.write <offheap.treemap.nodestore.NodeStore.write>` writes it), so
both code paths leave the same nodes in the same order.

Forms. The compiled descent keeps a compact form of each cached inner node it reads (its
separators and child record ids as C arrays: ``offheap/treemap/csrc/forms.c``), registered as
``forms``. The cache keeps them true: it drops the form of every inner node that leaves it
(eviction, :meth:`discard`, :meth:`clear`, an :meth:`add` in its place), and a structural change
reports the nodes whose separators or children it edited in place (:meth:`changed`, called by
the commit of every such change). Entry counts are not in the forms, so the count changes of
inserts and deletes need no report. Their memory, outside the store's ``limit``: at most one
form per cached inner node, 72 bytes plus 16 per child (24 with str or bytes keys), and the
table's 8 bytes a slot for at most 8 slots a form: about 1.2 MiB for 2,048 full inner nodes at
``node_size`` 32 (1.7 MiB with str keys), counted in the inner nodes' charge against
``cache_bytes``; more only while the cache holds more inner nodes than its budget (between two
trims).

Thread safety: none; the tree's lock covers every call.
"""

from __future__ import annotations

import itertools
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple, Protocol, TypeVar

from offheap.errors import CapacityError, CorruptionError
from offheap.treemap.node import Inner, Leaf, Node

AnyNode = TypeVar("AnyNode", Leaf, Inner)

MIN_UNWRITTEN_BUDGET_BYTES = 1 << 20

DEFAULT_CACHE_BYTES = 8 << 20
"""The default heap budget of a tree's decoded nodes (see the module docstring's figures)."""

MIN_NODES = 8
"""The fewest leaves (and inner nodes) a budget or a ``cache_size`` must hold."""

_NO_CAP = sys.maxsize

# Heap bytes of a decoded node, measured with memray and tracemalloc
# (experiments/nodecache_bench.py): a leaf of int64 keys ~16 bytes an entry (its key column's
# 8-byte word and a value list slot, values that are shared objects such as small ints or "";
# a distinct int value adds its own 32) and ~300 for its object, the two columns' headers and
# its place in the cache; str or bytes keys of a dozen characters ~90 an entry (an estimate);
# an inner node ~56 bytes a child (separator, child id, count and the compact form), and a few
# hundred bytes for each node's object and lists.
_LEAF_NODE_BYTES = 300
_LEAF_ENTRY_BYTES = {"int64": 20}
_LEAF_OBJECT_ENTRY_BYTES = 90
_INNER_NODE_BYTES = 300
_INNER_CHILD_BYTES = {"int64": 56}
_INNER_OBJECT_CHILD_BYTES = 100


class NodeCosts(NamedTuple):
    """The heap bytes a cached node is charged against ``cache_bytes``: its estimate when full."""

    leaf: int
    inner: int


def node_costs(node_size: int, key_kind: str) -> NodeCosts:
    """What a full leaf and a full inner node of ``node_size`` entries with keys of
    ``key_kind`` (``"int64"``, ``"str"``, ``"bytes"``) cost on the heap, decoded."""
    return NodeCosts(
        _LEAF_NODE_BYTES + node_size * _LEAF_ENTRY_BYTES.get(key_kind, _LEAF_OBJECT_ENTRY_BYTES),
        _INNER_NODE_BYTES + node_size * _INNER_CHILD_BYTES.get(key_kind,
                                                               _INNER_OBJECT_CHILD_BYTES))


class Forms(Protocol):
    """What a compiled descent derives from cached inner nodes, dropped by record id."""

    def forget(self, recid: int) -> None: ...

    def forget_all(self) -> None: ...


def unwritten_budget(limit_bytes: int | None) -> int | None:
    """The bytes of changes dirty nodes may hold beyond a store's ``limit_bytes``: an eighth of
    it, at least :data:`MIN_UNWRITTEN_BUDGET_BYTES`; None (no budget) without a limit."""
    if limit_bytes is None:
        return None
    return max(MIN_UNWRITTEN_BUDGET_BYTES, limit_bytes // 8)


class NodeCache:
    """Decoded nodes by record id, each kind in least-recently-used order.

    Keeping the kinds apart keeps the inner nodes, which every descent passes through, from being
    pushed out by a stream of leaves: under random inserts a shared LRU would decode an inner
    node as well as a leaf for most operations. ``load(recid)`` decodes a node from the store;
    ``write(node)`` encodes and stores a dirty node and clears its flag (raising
    :class:`CapacityError` with nothing changed if the store is full). ``costs`` are what a
    node of each kind is charged (:func:`node_costs`), ``cache_bytes`` the budget, and
    ``cache_size`` (None: no count) a cap on the nodes of each kind. The cache may hold more
    than its budget between two :meth:`trim` calls; ``over_capacity`` then says so (an
    attribute, not a call, since every operation reads it). It may stay True after
    :meth:`discard` brought the cache back within budget, until the next :meth:`trim`. The
    attributes are ``__slots__``, so the compiled item slots read ``over_capacity`` by its
    offset (``offheap/treemap/csrc/slots.c``).
    """

    __slots__ = ("cache_bytes", "cache_size", "costs", "_inner_cap", "over_capacity",
                 "budget_bytes", "unwritten_bytes", "_leaves", "_inner", "_load", "_write",
                 "forms")

    def __init__(self, load: Callable[[int], Node], write: Callable[[Node], None], *,
                 costs: NodeCosts, cache_bytes: int = DEFAULT_CACHE_BYTES,
                 cache_size: int | None = None, budget_bytes: int | None = None) -> None:
        if cache_size is not None and cache_size < MIN_NODES:
            raise ValueError(f"cache_size must be at least {MIN_NODES} nodes, got {cache_size}")
        least = MIN_NODES * (costs.leaf + costs.inner)
        if cache_bytes < least:
            raise ValueError(f"cache_bytes must be at least {least} ({MIN_NODES} leaves and "
                             f"{MIN_NODES} inner nodes of {costs.leaf} and {costs.inner} bytes), "
                             f"got {cache_bytes}")
        self.cache_bytes = cache_bytes
        self.cache_size = cache_size
        self.costs = costs
        # inner nodes may take the whole budget but what MIN_NODES leaves need
        self._inner_cap = min((cache_bytes - MIN_NODES * costs.leaf) // costs.inner,
                              _NO_CAP if cache_size is None else cache_size)
        self.over_capacity = False  # trim has work: a kind over capacity, or the budget spent
        self.budget_bytes = budget_bytes
        self.unwritten_bytes = 0  # admitted since every dirty node was last written
        self._leaves: OrderedDict[int, Leaf] = OrderedDict()
        self._inner: OrderedDict[int, Inner] = OrderedDict()
        self._load = load
        self._write = write
        self.forms: Forms | None = None  # the compiled descent's, registered by the tree

    @property
    def charged_bytes(self) -> int:
        """The cached nodes' heap as charged against ``cache_bytes`` (each at its full size)."""
        return len(self._leaves) * self.costs.leaf + len(self._inner) * self.costs.inner

    @property
    def capacity(self) -> int:
        """How many leaves the cache keeps now: what ``cache_bytes`` leaves beside the inner
        nodes kept (and at most ``cache_size``)."""
        return self._leaf_cap()

    def leaf_cap_terms(self) -> tuple[int, int, int, int, int]:
        """What :meth:`_leaf_cap` computes from beside the number of cached inner nodes, all
        fixed at creation: ``cache_bytes``, an inner node's and a leaf's cost, the inner nodes
        kept at most and the node cap (``sys.maxsize`` for none). The compiled write-around
        (``offheap/treemap/csrc/around.c``) reads them once and computes the leaves' capacity
        as :meth:`_leaf_cap` does, with no call per change."""
        return (self.cache_bytes, self.costs.inner, self.costs.leaf, self._inner_cap,
                _NO_CAP if self.cache_size is None else self.cache_size)

    def _leaf_cap(self) -> int:
        """How many leaves fit beside the inner nodes kept (at most ``_inner_cap`` of them)."""
        kept = min(len(self._inner), self._inner_cap)
        cap = (self.cache_bytes - kept * self.costs.inner) // self.costs.leaf
        return cap if self.cache_size is None else min(cap, self.cache_size)

    def _over(self) -> bool:
        return len(self._inner) > self._inner_cap or len(self._leaves) > self._leaf_cap()

    def inner(self, recid: int) -> Inner:
        """The inner node ``recid``, decoded from the store if it is not cached; now most recent."""
        node = self._inner.get(recid)
        if node is None:
            node = self._inner[recid] = _as_inner(self._load(recid), recid)
            if self._over():
                self.over_capacity = True
        else:
            self._inner.move_to_end(recid)
        return node

    def leaf(self, recid: int, read: Leaf | None = None) -> Leaf:
        """The leaf ``recid``, decoded from the store if it is not cached (or ``read``, the
        caller's decode of it that nothing else holds, :meth:`read_leaf`'s); now most recent."""
        node = self._leaves.get(recid)
        if node is None:
            node = self._leaves[recid] = read if read is not None else _as_leaf(self._load(recid),
                                                                                 recid)
            if self._over():
                self.over_capacity = True
        else:
            self._leaves.move_to_end(recid)
        return node

    def cached_leaf(self, recid: int) -> Leaf | None:
        """The cached leaf ``recid``, or None; LRU order does not change."""
        return self._leaves.get(recid)

    def would_evict_dirty(self, recid: int) -> bool:
        """Whether caching leaf ``recid`` now would push out a dirty leaf: it is not cached, the
        cached leaves are at capacity and the least recently used one is dirty."""
        leaves = self._leaves
        return (len(leaves) >= self._leaf_cap() and recid not in leaves
                and next(iter(leaves.values())).dirty)

    def read(self, recid: int) -> Node:
        """The cached node ``recid``, or else one decoded for the caller alone (not cached, so a
        long scan does not evict the working set). LRU order does not change."""
        node: Node | None = self._leaves.get(recid)
        if node is None:
            node = self._inner.get(recid)
        return self._load(recid) if node is None else node

    def read_inner(self, recid: int) -> Inner:
        """:meth:`read` where an inner node belongs."""
        node = self._inner.get(recid)
        return _as_inner(self._load(recid), recid) if node is None else node

    def read_leaf(self, recid: int) -> Leaf:
        """:meth:`read` where a leaf belongs."""
        node = self._leaves.get(recid)
        return _as_leaf(self._load(recid), recid) if node is None else node

    def leaf_for_read(self, recid: int) -> Leaf:
        """The leaf ``recid`` for a read: the cached one (its LRU place does not move), else
        decoded, and cached as the most recent while the leaves are below capacity. So a map
        whose leaves fit is read from decoded leaves after the first read of each, and no read
        evicts anything (a long scan does not push out the working set)."""
        node = self._leaves.get(recid)
        if node is not None:
            return node
        node = _as_leaf(self._load(recid), recid)
        if len(self._leaves) < self._leaf_cap():
            self._leaves[recid] = node
        return node

    def add(self, node: Node) -> None:
        if isinstance(node, Leaf):
            self._leaves[node.recid] = node
        else:
            if self.forms is not None:
                self.forms.forget(node.recid)
            self._inner[node.recid] = node
        if self._over():
            self.over_capacity = True

    def discard(self, recid: int) -> None:
        if self._leaves.pop(recid, None) is None and self._inner.pop(recid, None) is not None:
            if self.forms is not None:
                self.forms.forget(recid)

    def changed(self, nodes: Iterable[Node]) -> None:
        """Report cached nodes whose separators or children were edited in place (a split,
        merge or redistribution): what the forms derived from them is dropped. Every structural
        change reports its nodes before the tree's lock is released."""
        if self.forms is not None:
            for node in nodes:
                if not node.is_leaf:
                    self.forms.forget(node.recid)

    def __len__(self) -> int:
        return len(self._leaves) + len(self._inner)

    def __contains__(self, recid: int) -> bool:
        return recid in self._leaves or recid in self._inner

    def holds(self, leaf: Leaf, path: Iterable[tuple[Inner, int]]) -> bool:
        """Whether ``leaf`` and every inner node of ``path`` (a cursor's) are cached."""
        if leaf.recid not in self._leaves:
            return False
        inner = self._inner
        for node, _ in path:
            if node.recid not in inner:
                return False
        return True

    def __iter__(self) -> Iterator[Node]:
        return itertools.chain(self._leaves.values(), self._inner.values())

    def admit(self, nbytes: int) -> None:
        """Count ``nbytes`` of keys and values about to enter dirty nodes (see the module
        docstring); past the budget, the next :meth:`trim` writes every dirty node."""
        self.unwritten_bytes += nbytes
        if self.budget_bytes is not None and self.unwritten_bytes > self.budget_bytes:
            self.over_capacity = True

    def trim(self, strict: bool = True) -> None:
        """Write every dirty node if the budget is spent, then evict least recently used nodes,
        writing dirty ones first: leaves down to what ``cache_bytes`` leaves beside the inner
        nodes, then inner nodes only past what the budget less :data:`MIN_NODES` leaves holds.

        ``strict=False`` (read paths) keeps a node whose write fails and stops trimming, so
        reading never raises :class:`CapacityError`.
        """
        try:
            if (self._write_over_budget(strict)
                    and self._evict(self._leaves, self._leaf_cap(), strict)):
                self._evict(self._inner, self._inner_cap, strict)
        finally:
            self.over_capacity = self._over() or self._over_budget()

    def _over_budget(self) -> bool:
        return self.budget_bytes is not None and self.unwritten_bytes > self.budget_bytes

    def _write_over_budget(self, strict: bool) -> bool:
        """Write every dirty node when the budget is spent; False if a write failed
        (``strict=False``) and trimming stops."""
        if self.budget_bytes is None or self.unwritten_bytes <= self.budget_bytes:
            return True
        try:
            self.write_dirty()
        except CapacityError:
            if strict:
                raise
            return False
        return True

    def _evict(self, nodes: OrderedDict[int, AnyNode], cap: int, strict: bool) -> bool:
        """Trim one kind to ``cap`` nodes; False if a write failed (``strict=False``) and
        trimming stops."""
        forms = self.forms if nodes is self._inner else None
        while len(nodes) > cap:
            recid, node = next(iter(nodes.items()))
            if node.dirty:
                try:
                    self._write(node)
                except CapacityError:
                    if strict:
                        raise
                    return False
            del nodes[recid]
            if forms is not None:
                forms.forget(recid)
        return True

    def n_dirty(self) -> int:
        return sum(1 for node in self if node.dirty)

    def write_dirty(self) -> None:
        """Write every dirty node (in record-id order); the first failure propagates."""
        for node in sorted((n for n in self if n.dirty), key=lambda n: n.recid):
            self._write(node)
        self.unwritten_bytes = 0

    def clear(self) -> None:
        self._leaves.clear()
        self._inner.clear()
        if self.forms is not None:
            self.forms.forget_all()
        self.over_capacity = False
        self.unwritten_bytes = 0


def _as_inner(node: Node, recid: int) -> Inner:
    if not isinstance(node, Inner):
        raise CorruptionError(f"TreeMap node {recid} is a leaf where an inner node belongs")
    return node


def _as_leaf(node: Node, recid: int) -> Leaf:
    if not isinstance(node, Leaf):
        raise CorruptionError(f"TreeMap node {recid} is an inner node where a leaf belongs")
    return node
