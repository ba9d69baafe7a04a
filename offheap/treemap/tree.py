"""The B+tree under a TreeMap: lookups, changes, scans and bulk replacement (layer 6, under the
facade :mod:`offheap.treemap.treemap`).

Layout. Every node is one store record (:mod:`offheap.treemap.page`): leaves hold up to
``node_size`` sorted keys with their values, inner nodes up to ``node_size`` children and the
separators between them. A separator ``s`` between two children satisfies
``max(left) < s <= min(right)`` and is chosen short (:func:`offheap.treemap.page.separator`).
All leaves are at the same depth; ``height`` counts levels, 1 when the root is a leaf.

Parts. Decoded nodes live in a :class:`~offheap.treemap.nodecache.NodeCache` (also the write
cache) over a :class:`~offheap.treemap.nodestore.NodeStore`; :class:`~offheap.treemap.cursor.Cursor`
descends; :class:`~offheap.treemap.structure.Rebalancer` splits and merges;
:class:`~offheap.treemap.writethrough.NodeWriter` commits changes, with undo when they are
written through; :mod:`offheap.treemap.bulk` builds whole trees.

Insert. The scalar path is ``bisect`` and ``list.insert`` on the decoded leaf. The last leaf a
lookup or change reached and its key range are the *hint*: a key inside that range skips the
descent, so ascending keys and nearby lookups cost one ``bisect``.

A :class:`Tree` assumes what its facade guarantees: keys already checked and normalized
(:mod:`offheap.treemap.admission`), the map open, and the map's lock held for every call (it has
no lock of its own and is not thread-safe). Its counters are exact after every call that
returns; a call that raises leaves them, and the tree, as they were (module docstring of
:mod:`offheap.treemap.writethrough` for the write-through case).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable

import numpy as np

from offheap.errors import CapacityError
from offheap.treemap.bulk import build_tree, merge_sorted
from offheap.treemap.cursor import Cursor, compiled_descent
from offheap.treemap.meta import TreeMeta, TreeShape, encode_meta
from offheap.treemap.node import Inner, Leaf, Node
from offheap.treemap.nodecache import NodeCache, node_costs, unwritten_budget
from offheap.treemap.nodestore import NodeStore
from offheap.treemap.page import key_column
from offheap.treemap.scan import RangeScan
from offheap.treemap.structure import Rebalancer
from offheap.treemap.writearound import WriteAround
from offheap.treemap.writethrough import NodeWriter

_EXPORT_RUN = 1 << 20  # keys gathered as Python ints before they are packed into an array


def _pairs(keys, values):
    """``(key, value)`` pairs of a batch as Python objects (arrays become lists first)."""
    return zip(keys.tolist() if isinstance(keys, np.ndarray) else keys,
               values.tolist() if isinstance(values, np.ndarray) else values)


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()
"""What :meth:`Tree.pop` returns for an absent key (None may be a value)."""


class Tree:
    """One B+tree in a record store: its shape, entry count and nodes.

    ``shape`` (a :class:`~offheap.treemap.meta.TreeShape`) and ``n_entries`` describe the tree;
    ``mods`` counts changes of size and whole-tree replacements, so that a scan can tell that
    the tree changed under it. ``hint`` is the cursor at the last leaf reached. The attributes
    are ``__slots__``: the compiled item slots count ``n_entries`` and ``mods`` by their offsets
    (``offheap/treemap/csrc/slots.c``).
    """

    __slots__ = ("nodes", "node_size", "write_cache", "cache", "hint", "descent", "writer",
                 "rebalancer", "around", "_shape", "n_entries", "mods")

    def __init__(self, nodes: NodeStore, node_size: int, cache_bytes: int,
                 cache_size: int | None, write_cache: bool) -> None:
        self.nodes = nodes
        self.node_size = node_size
        self.write_cache = write_cache
        self.cache = NodeCache(
            nodes.load, nodes.write, costs=node_costs(node_size, nodes.key_kind),
            cache_bytes=cache_bytes, cache_size=cache_size,
            budget_bytes=unwritten_budget(nodes.store.arena.limit_bytes) if write_cache else None)
        self.hint = Cursor(self.cache)
        self.descent = compiled_descent(self.cache, nodes)  # None: the Python reads below
        self.cache.forms = self.descent  # its compact inner forms, kept true by the cache
        self.writer = NodeWriter(self.cache, nodes, self.hint, write_cache)
        self.rebalancer = Rebalancer(self.cache, nodes, self.writer, node_size)
        # changes to leaves the cache does not hold: with the write cache only, whose inner
        # nodes may stay dirty (a write-through tree writes them with every change), and
        # without a limit, under which a change kept in the cache cannot fail on a delete
        self.around = (WriteAround(self.cache, nodes, self.writer, node_size)
                       if write_cache and nodes.store.arena.limit_bytes is None else None)
        self._shape = TreeShape.single_leaf(0)  # until create() or install()
        self.n_entries = 0
        self.mods = 0

    @property
    def shape(self) -> TreeShape:
        """The tree's root and height (:class:`~offheap.treemap.meta.TreeShape`); setting it
        also gives it to the compiled descent, whose shape-free lookups (the map's compiled
        item slots, :mod:`offheap.treemap.slots`) read that copy."""
        return self._shape

    @shape.setter
    def shape(self, shape: TreeShape) -> None:
        self._shape = shape
        if self.descent is not None:
            self.descent.set_shape(shape.root, shape.height)

    def _empty_leaf(self) -> Leaf:
        """A new empty leaf in a newly reserved record."""
        return Leaf(self.nodes.reserve(1)[0], key_column(self.nodes.key_kind), [])

    def create(self) -> None:
        """Make this an empty tree: one empty root leaf, written."""
        root = self._empty_leaf()
        self.shape = TreeShape.single_leaf(root.recid)
        self.cache.add(root)
        self.nodes.write(root)

    @property
    def fixed_options(self) -> dict:
        """The options the tree keeps for life (:data:`~offheap.treemap.meta.FIXED_OPTIONS`)."""
        return {"key": self.nodes.key_kind, "value": self.nodes.serializer.name,
                "node_size": self.node_size}

    def meta_record(self) -> bytes:
        """The tree's metadata record as it stands (:mod:`offheap.treemap.meta`)."""
        return encode_meta(self.shape, self.n_entries, self.nodes.raw_bytes,
                           self.nodes.stored_bytes, self.fixed_options)

    def install(self, meta: TreeMeta) -> None:
        """Take shape, counts and page-byte totals from a metadata record, into a tree that
        holds no decoded node (new, or released); ValueError if the record was written for
        other fixed options."""
        meta.check_matches(self.fixed_options)
        self.shape, self.n_entries = meta.shape, meta.n_entries
        self.nodes.raw_bytes, self.nodes.stored_bytes = meta.raw_bytes, meta.stored_bytes

    def release(self) -> None:
        """Drop every decoded node, dirty ones included; scans in progress fail their next
        step (``mods`` moves)."""
        self.cache.clear()
        self.hint.forget()
        self.mods += 1

    def trim(self, strict: bool = True) -> None:
        """Evict cached nodes down to the cache's capacity (:meth:`NodeCache.trim`)."""
        cache, hint = self.cache, self.hint
        cache.trim(strict)
        if hint.leaf is not None and not cache.holds(hint.leaf, hint.path):
            hint.forget()

    # -- lookups ------------------------------------------------------------------------------

    def leaf_for(self, key) -> Leaf:
        """The leaf whose range holds ``key``, by a descent that leaves the hint there (read
        paths: the cache may stay over capacity when the store is full)."""
        if self.cache.over_capacity:
            self.trim(strict=False)
        return self.hint.descend(self.shape, key)

    def get_sorted(self, keys: list, missing) -> list:
        """The values of ascending ``keys`` (``missing`` for an absent one): the keys of one
        leaf are found in the hint's leaf, one descent for them all (one compiled descent each
        when there is one)."""
        if self.descent is not None:
            if self.cache.over_capacity:
                self.trim(strict=False)
            find, root, height = self.descent.get, self.shape.root, self.shape.height
            return [find(root, height, key, missing) for key in keys]
        hint = self.hint
        values = []
        for key in keys:
            leaf = hint.leaf
            if (leaf is None or (hint.lo is not None and key < hint.lo)
                    or (hint.hi is not None and key >= hint.hi)):
                leaf = self.leaf_for(key)
            leaf_keys = leaf.keys
            i = bisect_left(leaf_keys, key)
            values.append(leaf.values[i] if i < len(leaf_keys) and leaf_keys[i] == key else missing)
        return values

    def edge_key(self, last: bool):
        """The smallest key (largest with ``last``) of a tree that is not empty."""
        return self.hint.descend_edge(self.shape, last).keys[-1 if last else 0]

    def neighbour(self, key, above: bool, inclusive: bool, with_value: bool):
        """By the compiled descent: the smallest key above ``key`` (``above``) or the largest
        below it, ``key`` itself counting if ``inclusive``, or its ``(key, value)`` with
        ``with_value``; None when there is none."""
        if self.cache.over_capacity:
            self.trim(strict=False)
        shape = self.shape
        return self.descent.neighbour(shape.root, shape.height, key, above, inclusive, with_value)

    def scan(self, lo, hi, inclusive: tuple[bool, bool], reverse: bool) -> RangeScan:
        """A scan of the keys in a range (:mod:`offheap.treemap.scan`), started at need."""
        return RangeScan(self.cache, lo, hi, inclusive, reverse, self.descent)

    # -- positions ----------------------------------------------------------------------------

    def position(self, key, right: bool) -> int:
        """How many keys are below ``key`` (at or below it with ``right``): one descent that
        sums the entry counts left of its path, O(height * node_size)."""
        if self.cache.over_capacity:
            self.trim(strict=False)
        if self.descent is not None:
            return self.descent.position(self.shape.root, self.shape.height, key, right)
        leaf = self.hint.descend(self.shape, key)
        return self.hint.position() + (bisect_right if right else bisect_left)(leaf.keys, key)

    def index_of(self, key) -> int | None:
        """The position of ``key``, None when the tree does not hold it: one descent."""
        if self.cache.over_capacity:
            self.trim(strict=False)
        if self.descent is not None:
            position = self.descent.index(self.shape.root, self.shape.height, key)
            return None if position < 0 else position
        leaf = self.hint.descend(self.shape, key)
        keys = leaf.keys
        i = bisect_left(keys, key)
        return self.hint.position() + i if i < len(keys) and keys[i] == key else None

    def item_at(self, index: int) -> tuple:
        """The ``(key, value)`` at position ``index``, ``0 <= index < n_entries``."""
        if self.cache.over_capacity:
            self.trim(strict=False)
        if self.descent is not None:
            return self.descent.item_at(self.shape.root, self.shape.height, index)
        leaf, i = self.hint.descend_to_position(self.shape, index)
        return leaf.keys[i], leaf.values[i]

    def pop_at(self, index: int, take: Callable) -> tuple:
        """Remove the entry at position ``index``, ``0 <= index < n_entries``, and return its
        ``(key, take(value))``; ``take`` runs first, so if it raises nothing is removed."""
        if self.cache.over_capacity:
            self.trim(strict=False)
        leaf, i = self.hint.descend_to_position(self.shape, index)
        item = leaf.keys[i], take(leaf.values[i])
        self._remove(leaf, i, i + 1)
        return item

    # -- changes ------------------------------------------------------------------------------

    def put(self, key, value, keep: bool = False) -> bool:
        """Map ``key`` to ``value``; True if the key is new. With ``keep`` a key already present
        keeps its value and nothing changes past the trim (a TreeSet's ``add``): the hint's leaf
        is searched, else the leaf a read that changes nothing finds (:meth:`Cursor.peek`, whose
        leaf the store's descent then takes). A key above the hint leaf's last
        is appended without a ``bisect`` (ascending inserts), and with the write cache an
        in-place change only marks the leaf and its path dirty, here rather than through
        :meth:`NodeWriter.commit_leaf` (the same effect, one call less per insert). After an
        insert into a full leaf the hint descends to the key's leaf again (all of its path is
        cached: the change just committed it), so the next ascending key finds it there."""
        if self.cache.over_capacity:
            self.trim()
        hint = self.hint
        leaf = hint.leaf
        if (leaf is None or (hint.lo is not None and key < hint.lo)
                or (hint.hi is not None and key >= hint.hi)):
            read = None
            if keep:
                read = hint.peek(self.shape, key)
                i = bisect_left(read.keys, key)
                if i < len(read.keys) and read.keys[i] == key:
                    return False
            around = self.around
            leaf = hint.descend(self.shape, key, None if around is None else around.takes, read)
            if hint.leaf is None:  # not cached: written around the cache
                assert around is not None
                shape, added = around.put(self.shape, hint.path, leaf, key, value)
                if shape is not self.shape:
                    self.shape = shape
                if added:
                    self.n_entries += 1
                    self.mods += 1
                return added
        keys = leaf.keys
        n = len(keys)
        if n and key > keys[-1]:
            i = n
        else:
            i = bisect_left(keys, key)
            if i < n and keys[i] == key:
                if not keep:
                    leaf.values[i] = value
                    self.writer.commit_leaf(leaf, hint.path, 0)
                return False
        if n >= self.node_size:
            path = hint.path
            hint.forget()
            self.shape = self.rebalancer.insert_into_full(self.shape, path, leaf, i, key, value)
            hint.descend(self.shape, key)  # ascending inserts go on in the leaf the key went to
        else:
            if i == n:
                keys.append(key)
                leaf.values.append(value)
            else:
                keys.insert(i, key)
                leaf.values.insert(i, value)
            if self.write_cache:
                leaf.dirty = True
                for node, at in hint.path:
                    node.counts[at] += 1
                    node.dirty = True
            else:
                self.writer.commit_leaf(leaf, hint.path, 1)
        self.n_entries += 1
        self.mods += 1
        return True

    def pop(self, key, take: Callable | None = None):
        """Remove ``key`` and return ``take(value)`` (the value itself without ``take``), or
        :data:`MISSING` if it is absent; ``take`` runs first, so if it raises nothing is
        removed."""
        if self.cache.over_capacity:
            self.trim(strict=False)
        hint, around = self.hint, self.around
        leaf = hint.descend(self.shape, key, None if around is None else around.takes)
        i = bisect_left(leaf.keys, key)
        if i == len(leaf.keys) or leaf.keys[i] != key:
            return MISSING
        value = leaf.values[i] if take is None else take(leaf.values[i])
        if hint.leaf is None:  # not cached: written around the cache
            assert around is not None
            shape = around.remove(self.shape, hint.path, leaf, i, i + 1)
            if shape is not self.shape:
                self.shape = shape
            self.n_entries -= 1
            self.mods += 1
        else:
            self._remove(leaf, i, i + 1)
        return value

    def delete_range(self, lo, hi, inclusive: tuple[bool, bool]) -> int:
        """Remove every key in a range (bounds as in a scan); return how many went. Leaf by
        leaf, each removal whole; a CapacityError (no write cache) stops it between leaves."""
        removed = 0
        seek, seek_inclusive = lo, inclusive[0]
        hint = self.hint
        while self.n_entries:
            if self.cache.over_capacity:
                self.trim(strict=False)
            leaf = (hint.descend_edge(self.shape, False) if seek is None
                    else hint.descend(self.shape, seek))
            upper = hint.hi
            keys = leaf.keys
            start = 0 if seek is None else (bisect_left if seek_inclusive else bisect_right)(keys, seek)
            end = len(keys) if hi is None else (bisect_right if inclusive[1] else bisect_left)(keys, hi)
            range_ends_here = end < len(keys) or upper is None or (
                hi is not None and (upper > hi or (upper == hi and not inclusive[1])))
            if start < end:
                self._remove(leaf, start, end)
                removed += end - start
            if range_ends_here:
                break
            seek, seek_inclusive = upper, True
        return removed

    def _remove(self, leaf: Leaf, start: int, end: int) -> None:
        """Remove entries ``start:end`` of ``leaf``, the hint's leaf, and rebalance.

        Without the write cache, a full store may have no room for a merged node; the entries
        are then removed from their leaf alone (left under-full but not empty), so that a full
        map can still shrink.
        """
        count, hint = end - start, self.hint
        if len(leaf.keys) - count >= self.rebalancer.min_entries or self.shape.height == 1:
            self._remove_in_leaf(leaf, start, end)
        else:
            anchor, empties, path = leaf.keys[start], count == len(leaf.keys), hint.path
            hint.forget()
            try:
                self.shape = self.rebalancer.remove(self.shape, path, leaf, start, end)
            except CapacityError:
                if self.write_cache or empties:
                    raise
                leaf = hint.descend(self.shape, anchor)  # the undone nodes, read back
                start = bisect_left(leaf.keys, anchor)
                self._remove_in_leaf(leaf, start, start + count)
        self.n_entries -= count
        self.mods += 1

    def _remove_in_leaf(self, leaf: Leaf, start: int, end: int) -> None:
        """Remove entries ``start:end`` of ``leaf``, the hint's leaf, leaving it at least
        :func:`~offheap.treemap.node.min_entries` full (or the root, or the fallback of a full
        store); a failed write-through leaves it, and the nodes above it, to be read back."""
        del leaf.keys[start:end], leaf.values[start:end]
        self.writer.commit_leaf(leaf, self.hint.path, start - end)

    def clear(self) -> None:
        """Remove every entry: the tree's records are freed and an empty root leaf remains."""
        root = self._empty_leaf()
        self.replace(TreeShape.single_leaf(root.recid), 0, 0, 0)
        self.cache.add(root)
        self.nodes.write(root)

    # -- bulk ---------------------------------------------------------------------------------

    def merge(self, keys, values, parallelism: int = 1, held_bytes: int = 0) -> None:
        """Put a sorted batch (keys sorted, unique, not empty) into the tree, all or nothing:
        into an empty tree, or a batch at least as large as the tree, by a bulk build of the
        merged entries (:meth:`rebuild`), else key by key (:meth:`insert_sorted`,
        :meth:`insert_through`). ``held_bytes`` is the batch's size for the write cache's
        budget."""
        if not self.n_entries or len(keys) >= self.n_entries:
            self.rebuild(keys, values, parallelism)
        elif self.write_cache:
            self.insert_sorted(keys, values, held_bytes)
        else:
            self.insert_through(keys, values)

    def insert_sorted(self, keys, values, held_bytes: int = 0) -> None:
        """Insert a sorted batch key by key into the write cache, its ``held_bytes`` admitted
        to the budget at the end (a spent budget writes the dirty nodes then); on failure the
        keys already done are undone in the cache alone (no eviction, so no write can fail)."""
        undo = []  # (key, previous value or MISSING)
        try:
            for key, value in _pairs(keys, values):
                leaf = self.leaf_for(key)
                i = bisect_left(leaf.keys, key)
                found = i < len(leaf.keys) and leaf.keys[i] == key
                previous = leaf.values[i] if found else MISSING
                self.put(key, value)
                undo.append((key, previous))
            self.cache.admit(held_bytes)
            if self.cache.over_capacity:
                self.trim()
        except BaseException:
            for key, previous in reversed(undo):
                self.cache.over_capacity = False
                if previous is MISSING:
                    self.pop(key)
                else:
                    self.put(key, previous)
            self.cache.over_capacity = True  # trim again before the next change
            raise

    def insert_through(self, keys, values) -> None:
        """Insert a sorted batch without the write cache, all or nothing: the batch changes
        cached nodes only (none evicted meanwhile), then they are written all or none
        (:meth:`NodeWriter.write_batch`); if that fails, the changed nodes
        leave the cache (to be read back as they were), the records reserved for new nodes are
        freed and the shape and counters are as before."""
        before = (self.shape, self.n_entries, self.nodes.raw_bytes, self.nodes.stored_bytes)
        changed: list[Node] = []
        try:
            self.write_cache = self.writer.write_cache = True
            try:
                for key, value in _pairs(keys, values):
                    self.cache.over_capacity = False  # no eviction writes a node of the batch
                    self.put(key, value)
            finally:
                self.write_cache = self.writer.write_cache = False
                self.cache.over_capacity = True  # trim before the next change
            changed = [node for node in self.cache if node.dirty]
            self.writer.write_batch(changed)
        except BaseException:  # a reservation for a split, or a write, failed
            self.writer.forget_batch(changed or [node for node in self.cache if node.dirty])
            self.shape, self.n_entries, self.nodes.raw_bytes, self.nodes.stored_bytes = before
            self.mods += 1
            raise

    def rebuild(self, keys, values, parallelism: int = 1) -> None:
        """Replace the tree by one bulk-built from its entries merged with a sorted batch (keys
        sorted, unique, not empty). All or nothing."""
        if self.n_entries:
            old_keys, old_values = self.export()
            keys, values = merge_sorted(old_keys, old_values, keys, values)
        shape, raw_bytes, stored_bytes = build_tree(self.nodes, keys, values, self.node_size,
                                                    parallelism)
        self.replace(shape, len(keys), raw_bytes, stored_bytes)

    def replace(self, shape: TreeShape, n_entries: int, raw_bytes: int,
                stored_bytes: int) -> None:
        """Install a tree already in the store and free every record of the current one."""
        old = self.all_recids()
        self.release()
        self.nodes.release(old)
        self.shape, self.n_entries = shape, n_entries
        self.nodes.raw_bytes, self.nodes.stored_bytes = raw_bytes, stored_bytes

    def export(self) -> tuple[list | np.ndarray, list]:
        """All keys (an int64 array for int64 keys, built leaf run by leaf run so a large map
        never becomes one list of Python ints) and all values, in key order."""
        int64 = self.nodes.key_kind == "int64"
        runs: list[np.ndarray] = []
        keys: list = []
        values: list = []
        scan = self.scan(None, None, (True, True), False)
        while not scan.done:
            chunk_keys, chunk_values = scan.next_chunk(self.shape, True)
            if chunk_values is not None:
                keys += chunk_keys
                values += chunk_values
            if int64 and len(keys) >= _EXPORT_RUN:
                runs.append(np.array(keys, np.int64))
                keys = []
        if not int64:
            return keys, values
        runs.append(np.array(keys, np.int64))
        return np.concatenate(runs), values

    def all_recids(self) -> list[int]:
        """Record ids of every node, found by walking the inner nodes."""
        recids = [self.shape.root]
        frontier = [self.shape.root]
        for _ in range(self.shape.height - 1):
            children: list[int] = []
            for recid in frontier:
                children += self.cache.read_inner(recid).children
            recids += children
            frontier = children
        return recids

    # -- invariants ---------------------------------------------------------------------------

    def check(self) -> list[int]:
        """Assert the tree's invariants: key order, separator bounds, node fill, equal depth,
        counts (the tree's and every inner node's entries under each child), that every clean
        cached node equals its stored page, and that every compact form of the compiled descent
        is that of a cached inner node as it stands. Returns the record ids of the tree's
        nodes."""
        counts = {"entries": 0, "leaves": 0, "inner": 0}
        recids: list[int] = []
        shape, node_size = self.shape, self.node_size

        def visit(recid, depth, lo, hi):
            recids.append(recid)
            node = self.cache.read(recid)
            keys = node.keys
            assert all(a < b for a, b in zip(keys, keys[1:])), f"node {recid}: keys out of order"
            if keys:
                assert lo is None or lo <= keys[0], f"node {recid}: key below its separator"
                assert hi is None or keys[-1] < hi, f"node {recid}: key at/above its separator"
            if isinstance(node, Leaf):
                assert depth == shape.height, f"leaf {recid} at depth {depth} of {shape.height}"
                assert len(keys) == len(node.values)
                assert len(keys) <= node_size, f"leaf {recid} overfull"
                assert recid == shape.root or keys, f"leaf {recid} is empty"
                counts["entries"] += len(keys)
                counts["leaves"] += 1
                return len(keys)
            assert len(node.children) == len(keys) + 1 == len(node.counts)
            assert 2 <= len(node.children) <= node_size, \
                f"inner node {recid} has {len(node.children)} children"
            counts["inner"] += 1
            bounds = [lo] + keys + [hi]
            for i, child in enumerate(node.children):
                below = visit(child, depth + 1, bounds[i], bounds[i + 1])
                assert node.counts[i] == below, \
                    f"inner node {recid} counts {node.counts[i]} entries under child {i}, not {below}"
            return sum(node.counts)

        visit(shape.root, 1, None, None)
        assert counts["entries"] == self.n_entries, (counts["entries"], self.n_entries)
        assert counts["leaves"] == shape.n_leaves, (counts["leaves"], shape.n_leaves)
        assert counts["inner"] == shape.n_inner, (counts["inner"], shape.n_inner)
        assert len(set(recids)) == len(recids), "a record is shared by two nodes"
        for recid in recids:
            assert recid in self.nodes.store, f"node record {recid} is missing"
        for cached in self.cache:
            assert cached.recid in recids, f"cached node {cached.recid} is not in the tree"
            if not cached.dirty:
                _assert_same_node(cached, self.nodes.load(cached.recid))
        if not self.write_cache:
            assert not any(node.dirty for node in self.cache), "dirty node without write cache"
        if self.descent is not None:
            for recid, node, separators, children in self.descent.forms():
                inner = self.cache.read(recid) if recid in self.cache else None
                assert isinstance(inner, Inner) and inner is node, \
                    f"the compact form of inner node {recid} outlived its cached node"
                assert separators == inner.keys and children == inner.children, \
                    f"the compact form of inner node {recid} is stale"
        return recids


def _assert_same_node(cached: Node, stored: Node) -> None:
    recid = cached.recid
    assert stored.keys == cached.keys, f"clean node {recid} differs from its page"
    assert type(stored) is type(cached), f"clean node {recid} is not of its page's kind"
    if isinstance(cached, Inner) and isinstance(stored, Inner):
        assert stored.children == cached.children, f"clean node {recid} differs from its page"
        assert stored.counts == cached.counts, f"clean node {recid} differs from its page"
    if isinstance(cached, Leaf) and isinstance(stored, Leaf):
        assert stored.values == cached.values, f"clean node {recid} differs from its page"
