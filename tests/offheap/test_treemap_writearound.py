"""Changes written around the node cache (offheap/treemap/writearound.py and its compiled store in
offheap/treemap/csrc/slots.c, on the compiled record store offheap/store/_space.c or its
reference): the same tree, pages and answers as changes kept in the cache, on
the compiled slots and on the reference (a map whose slots are detached runs every store through
TreeMap._put_item), and a failed page write leaves the map as it was."""

from __future__ import annotations

import collections
import random

import pytest
from hypothesis import given, settings, strategies as st

import offheap
from offheap import TreeMap
from offheap.errors import CapacityError
from offheap.store.records import RecordStore
from offheap.treemap.tree import Tree

SMALL = dict(node_size=4, cache_size=8)  # 8 cached leaves of at most 4 entries: most go around

OPS = st.lists(st.tuples(st.sampled_from(["set", "set", "set", "del", "get", "flush"]),
                         st.integers(-300, 300)), max_size=400)


def _pages(tree: TreeMap) -> list[bytes]:
    store = tree._tree.nodes.store
    return [bytes(store.view(recid)) for recid in sorted(tree._tree.all_recids())]


def _placement(tree: TreeMap) -> tuple:
    """Where the record store put every record, and its byte counts: the decisions of the
    allocator, which the same writes in the same order make alike."""
    store = tree._tree.nodes.store
    return store._addr.tolist(), store._size.tolist(), store.stats()


def _cache_order(tree: TreeMap) -> tuple[list, list]:
    """The record ids of the cached leaves and inner nodes, least recently used first."""
    cache = tree._tree.cache
    return list(cache._leaves), list(cache._inner)


def _apply(tree: TreeMap, oracle: dict, op: str, key) -> None:
    if op == "set":
        tree[key] = f"v{key}"
    elif op == "del" and key in oracle:
        del tree[key]
    elif op == "get":
        assert tree.get(key) == oracle.get(key)
    elif op == "flush":
        tree.flush()


def _oracle_step(oracle: dict, op: str, key) -> None:
    if op == "set":
        oracle[key] = f"v{key}"
    elif op == "del":
        oracle.pop(key, None)


@settings(max_examples=40, deadline=None)
@given(ops=OPS, key_kind=st.sampled_from(["int64", "str"]))
def test_around_the_cache_the_compiled_store_and_the_reference_build_one_tree(ops, key_kind):
    def key_of(k):
        return k if key_kind == "int64" else f"k{k:+05d}"

    compiled, reference, cached = (TreeMap(key=key_kind, **SMALL) for _ in range(3))
    reference._detach_slots()
    cached._detach_slots()
    cached._tree.around = None  # every change kept in the cache, as before writes went around
    oracle: dict = {}
    for op, k in ops:
        for tree in (compiled, reference, cached):
            _apply(tree, oracle, op, key_of(k))
        _oracle_step(oracle, op, key_of(k))
    for tree in (compiled, reference, cached):
        tree._check()
        assert dict(tree.items()) == oracle and len(tree) == len(oracle)
    # the same decisions: the same shape and, with every dirty node written, the same pages
    assert compiled.stats().n_leaves == reference.stats().n_leaves == cached.stats().n_leaves
    compiled.flush()
    reference.flush()
    assert _pages(compiled) == _pages(reference)
    assert _placement(compiled) == _placement(reference)
    assert compiled._tree.nodes.raw_bytes == reference._tree.nodes.raw_bytes
    for tree in (compiled, reference, cached):
        tree.close()


@pytest.mark.parametrize("store", ["compiled", "reference"])
@pytest.mark.parametrize("seed", range(4))
def test_thousands_of_changes_around_the_cache_build_the_reference_tree(seed, store, monkeypatch):
    """Long enough that most changes go around the cache, through every structural case; the
    reference map on the compiled record store, or on the reference store (whose free space
    and update are Python's, so the compiled store's pages and addresses are checked too)."""
    rng = random.Random(seed)
    compiled = TreeMap(node_size=8, cache_size=8)
    if store == "reference":
        compiled._tree.nodes.store._compiled = RecordStore._compiled
        monkeypatch.setattr(RecordStore, "_compiled", None)
    reference = TreeMap(node_size=8, cache_size=8)
    reference._detach_slots()
    oracle: dict = {}
    for step in range(3000):
        key = rng.randint(0, 5000)
        op = "set" if rng.random() < 0.75 else "del"
        for tree in (compiled, reference):
            _apply(tree, oracle, op, key)
        _oracle_step(oracle, op, key)
        if step % 50 == 0:  # the same nodes cached, in the same LRU order
            assert _cache_order(compiled) == _cache_order(reference)
    for tree in (compiled, reference):
        tree.flush()
        tree._check()
        assert dict(tree.items()) == oracle
    assert compiled.stats().n_leaves == reference.stats().n_leaves
    assert _pages(compiled) == _pages(reference)
    assert _placement(compiled) == _placement(reference)


KEY_OF = {"int64": lambda k: k, "str": lambda k: f"k{k:06d}", "bytes": lambda k: b"k%06d" % k}


@pytest.mark.parametrize("key_type, value_type, node_size, values, cache_bytes", [
    ("int64", "object", 32, ("v",), 1 << 16),
    ("int64", "object", 5, ("", "x", 1, 2.5, b"b"), 1 << 16),
    ("int64", "int64", 32, (0, 7, -(1 << 63), (1 << 63) - 1, 1 << 40), 1 << 16),
    ("str", "object", 32, ("v", ""), 1 << 20), ("bytes", "object", 8, ("v", 1), 1 << 20)])
def test_random_changes_to_a_bulk_loaded_map_build_the_reference_tree(key_type, value_type,
                                                                     node_size, values,
                                                                     cache_bytes):
    """Full leaves and full inner nodes at the start (put_many) and a small cache, as a
    benchmark's map: changes of cached leaves and of leaves around the cache, splits of full
    parents and shifts into cached siblings, in C, leave what the reference leaves, down to the
    record ids and the cache's LRU order. Values of mixed types make the compiled codec decline
    some pages (the reference writes those), which must happen before any record is reserved;
    int64 values, int64's extremes among them, are stored in C as they are. With str and bytes
    keys the changes of cached leaves (and of leaves read into the cache) run in C, the changes
    around the cache in Python; their cache of 1 MiB lets about a third of the stores run in
    C."""
    rng = random.Random(11)
    key_of = KEY_OF[key_type]
    keys = [key_of(k) for k in range(0, 90_000, 3)]
    maps = [TreeMap(key=key_type, value=value_type, node_size=node_size, cache_bytes=cache_bytes)
            for _ in range(2)]
    compiled, reference = maps
    reference._detach_slots()
    first = values[0]
    oracle = dict.fromkeys(keys, first)
    for tree in maps:
        tree.put_many(keys, [first] * len(keys))
    for step in range(4000):
        key = key_of(rng.randrange(90_000))
        if rng.random() < 0.8:
            value = rng.choice(values)
            for tree in maps:
                tree[key] = value
            oracle[key] = value
        elif key in oracle:
            for tree in maps:
                del tree[key]
            del oracle[key]
        if step % 100 == 0:
            assert _cache_order(compiled) == _cache_order(reference)
    assert compiled._tree.shape == reference._tree.shape
    for tree in maps:
        tree.flush()
        tree._check()
        assert dict(tree.items()) == oracle
    assert _pages(compiled) == _pages(reference)
    assert _placement(compiled) == _placement(reference)
    for tree in maps:
        tree.close()


@pytest.mark.parametrize("slots", ["compiled", "reference"])
def test_once_the_cache_holds_dirty_leaves_other_changes_leave_it_as_it_is(slots):
    tree = TreeMap(**SMALL)
    if slots == "reference":
        tree._detach_slots()
    tree.update({k: "" for k in range(0, 4000, 2)})
    tree.flush()
    cache = tree._tree.cache
    for k in range(1, 400, 2):  # the first leaves: cached (a clean leaf leaves for free), dirty
        tree[k] = "first"
    held = list(cache._leaves)
    assert len(held) == cache.capacity and all(leaf.dirty for leaf in cache._leaves.values())
    for k in range(2001, 4000, 38):  # leaves far from those: written around the cache
        tree[k] = "new"
    for k in range(2400, 3600, 40):
        del tree[k]
    assert list(cache._leaves) == held and all(leaf.dirty for leaf in cache._leaves.values())
    assert all(tree[k] == "new" for k in range(2001, 4000, 38))
    assert all(k not in tree for k in range(2400, 3600, 40))
    tree._check()


@pytest.mark.parametrize("slots", ["compiled", "reference"])
@settings(max_examples=30, deadline=None)
@given(fail_at=st.integers(0, 6), ops=st.lists(st.tuples(st.sampled_from(["set", "del"]),
                                                       st.integers(-300, 300)), min_size=1,
                                             max_size=60))
def test_a_failed_page_write_leaves_the_map_as_it_was(slots, fail_at, ops):
    tree = TreeMap(**SMALL)
    if slots == "reference":
        tree._detach_slots()
    oracle = {k: f"v{k}" for k in range(-300, 300, 2)}
    tree.update(oracle)
    tree.flush()
    store = tree._tree.nodes.store
    update = store.update
    calls = [0]

    def failing_update(recid, data):  # one write fails; a restore puts a page back in the
        calls[0] += 1                    # chunk its write released, which cannot fail
        if calls[0] == fail_at + 1:
            raise CapacityError("the store is full (a test)")
        update(recid, data)

    for op, key in ops:
        calls[0] = 0
        store.update = failing_update
        try:
            if op == "set":
                tree[key] = f"v{key}"
            elif key in oracle:
                del tree[key]
        except CapacityError:
            pass
        else:
            _oracle_step(oracle, op, key)
        finally:
            store.update = update
        assert len(tree) == len(oracle)
    tree._check()
    assert dict(tree.items()) == oracle
    tree.flush()
    tree._check()
    assert dict(tree.items()) == oracle


def _cached_leaves(tree: TreeMap) -> list[tuple]:
    """Every cached leaf as its fields: what a leaf read into the cache in C must equal."""
    return [(recid, list(leaf.keys), leaf.values, leaf.dirty, leaf.raw_bytes, leaf.stored_bytes)
            for recid, leaf in tree._tree.cache._leaves.items()]


def _flush_check_and_close(compiled: TreeMap, reference: TreeMap, oracle: dict) -> None:
    """Flush both maps and check them: consistent, holding the oracle's items, their pages the
    same bytes; then close them."""
    for tree in (compiled, reference):
        tree.flush()
        tree._check()
        assert dict(tree.items()) == oracle
    assert _pages(compiled) == _pages(reference)
    for tree in (compiled, reference):
        tree.close()


def _read_bulk_loaded_pair(keys: list, read_every: int,
                           **options) -> tuple[TreeMap, TreeMap, dict]:
    """A compiled map and a reference map (``options``) of ``keys`` -> "" loaded by put_many,
    then every ``read_every``-th key read, which fills their caches with clean leaves; and the
    oracle."""
    compiled, reference = (TreeMap(value="object", **options) for _ in range(2))
    reference._detach_slots()
    for tree in (compiled, reference):
        tree.put_many(keys, [""] * len(keys))
        for key in keys[::read_every]:
            assert tree[key] == ""
    return compiled, reference, dict.fromkeys(keys, "")


@pytest.mark.parametrize("codec, key_type", [(None, "int64"), ("zlib", "int64"), (None, "str"),
                                             (None, "bytes")])
def test_changes_past_a_cache_of_clean_leaves_cache_and_trim_as_the_reference(codec, key_type,
                                                                              monkeypatch):
    """Reads fill the cache with clean leaves; a change of a leaf not cached then reads it in
    past capacity (the least recently used leaf is clean, so nothing goes around), marks the
    cache over capacity, and the next change trims it first, writing the leaves it evicts that
    changes made dirty: in C (descent_cache_leaf, trim_leaves) the cache holds what the
    reference's holds after every step, down to each leaf's fields, and the node store counts
    the same bytes (compressed pages: the reference decodes and writes those). With str and
    bytes keys the changes of leaves cached or read into the cache run in C, the trims that
    write in Python."""
    rng = random.Random(5)
    key_of = KEY_OF[key_type]
    keys = [key_of(k) for k in range(0, 60_000, 2)]
    compiled, reference, oracle = _read_bulk_loaded_pair(
        keys, 7, key=key_type, node_size=16, cache_bytes=1 << 19, compression=codec)
    maps = [compiled, reference]
    assert not any(leaf.dirty for leaf in compiled._tree.cache._leaves.values())
    assert _cached_leaves(compiled) == _cached_leaves(reference)
    passed_capacity = evicted_dirty = 0
    caches = [tree._tree.cache for tree in maps]
    python_trims: collections.Counter = collections.Counter()  # the compiled map's, by op
    op = ""
    trim = Tree.trim

    def counted_trim(tree: Tree, strict: bool = True) -> None:
        if tree is compiled._tree:
            python_trims[op] += 1
        trim(tree, strict)

    monkeypatch.setattr(Tree, "trim", counted_trim)
    for _ in range(3000):
        key = rng.randrange(60_000)
        op = rng.choice(["set", "set", "del", "get", "fill"] * 20 + ["flush"])  # flush: all clean
        dirty = {recid for recid, leaf in caches[0]._leaves.items() if leaf.dirty}
        change, changed = (("set", [key_of(k) for k in range(key | 1, key + 16, 2)])
                           if op == "fill" else (op, [key_of(key)]))
        for k in changed:  # a fill sets 8 absent keys in a row: it splits a leaf
            for tree in maps:
                _apply(tree, oracle, change, k)
            _oracle_step(oracle, change, k)
        assert caches[0].over_capacity == caches[1].over_capacity
        passed_capacity += len(caches[0]._leaves) > caches[0].capacity
        evicted_dirty += len(dirty - set(caches[0]._leaves))  # written as they left
        assert _cached_leaves(compiled) == _cached_leaves(reference)
        assert _cache_order(compiled) == _cache_order(reference)
        assert ((compiled._tree.nodes.raw_bytes, compiled._tree.nodes.stored_bytes)
                == (reference._tree.nodes.raw_bytes, reference._tree.nodes.stored_bytes))
    assert passed_capacity > 100 and evicted_dirty > 20  # the cases under test happened
    if codec is None and key_type == "int64" and offheap.compiled:
        # ... and changes trimmed in C (reads call Tree.trim; so do the trims that write the
        # leaves of str and bytes keys)
        changes = sum(python_trims[name] for name in ("set", "fill", "del"))
        assert changes < passed_capacity // 10
    _flush_check_and_close(compiled, reference, oracle)


@pytest.mark.parametrize("key_type", ["int64", "str"])
def test_a_change_left_to_python_after_a_read_past_capacity_trims_where_the_reference_does(
        key_type):
    """A change reads its leaf in past capacity in C (the least recently used leaf is clean),
    then leaves the change to the Python method (an insert into a full leaf whose split reaches
    higher, a delete that underflows; for str keys any full leaf): the method must not trim
    first, since the reference's trim comes before its read. With node size 5 these happen
    within a few steps; the caches must agree after every one (node size 5, seed 1 differed at
    step 7 before the slot marked the cache again after the method)."""
    key_of = KEY_OF[key_type]
    rng = random.Random(1)
    keys = [key_of(k) for k in range(0, 20_000, 2)]
    compiled, reference, oracle = _read_bulk_loaded_pair(keys, 5, key=key_type, node_size=5,
                                                         cache_bytes=1 << 17)
    maps = [compiled, reference]
    caches = [tree._tree.cache for tree in maps]
    for _ in range(1500):
        at = rng.randrange(20_000)
        op = rng.choice(["set", "del", "del", "get", "fill"])
        changed = [key_of(k) for k in range(at | 1, at + 12, 2)] if op == "fill" else [key_of(at)]
        for key in changed:
            change = "set" if op == "fill" else op
            for tree in maps:
                _apply(tree, oracle, change, key)
            _oracle_step(oracle, change, key)
            assert caches[0].over_capacity == caches[1].over_capacity
            assert _cache_order(compiled) == _cache_order(reference)
    _flush_check_and_close(compiled, reference, oracle)
