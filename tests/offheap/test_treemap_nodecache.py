"""The node cache's byte budget (offheap/treemap/nodecache.py): the nodes it holds never cost more
than ``cache_bytes`` once trimmed (as every operation starts), inner nodes are kept before
leaves, ``cache_size`` still caps the node count, and a map with a tiny budget answers as a SortedDict does, on the compiled
slots and on the reference (a map whose slots are detached)."""

from __future__ import annotations

import random
from array import array

import pytest
from hypothesis import given, settings, strategies as st
from sortedcontainers import SortedDict

from offheap import TreeMap, TreeSet
from offheap.db.database import DB
from offheap.errors import CorruptionError
from offheap.treemap import page
from offheap.treemap.nodecache import DEFAULT_CACHE_BYTES, MIN_NODES, node_costs

COSTS = node_costs(4, "int64")
LEAST = MIN_NODES * (COSTS.leaf + COSTS.inner)

OPS = st.lists(st.tuples(st.sampled_from(["set", "set", "del", "get", "floor", "flush"]),
                         st.integers(-400, 400)), max_size=300)


def _check_budget(tree: TreeMap) -> None:
    """An operation brings in at most its path and the nodes of a split; the trim that starts
    the next one (run here) brings the cache within its budget."""
    cache, height = tree._tree.cache, tree.stats().height
    assert cache.charged_bytes <= cache.cache_bytes + (height + 2) * max(COSTS)
    cache.trim()
    assert cache.charged_bytes <= cache.cache_bytes
    assert len(cache._leaves) <= cache.capacity


@pytest.mark.parametrize("reference", [False, True])
@settings(max_examples=60, deadline=None)
@given(ops=OPS, extra=st.integers(0, 6 * COSTS.leaf))
def test_a_tiny_budget_answers_as_sorteddict_and_stays_within_it(reference, ops, extra):
    tree, oracle = TreeMap(node_size=4, cache_bytes=LEAST + extra), SortedDict()
    if reference:
        tree._detach_slots()
    for op, key in ops:
        if op == "set":
            tree[key] = oracle[key] = key * 3
        elif op == "del":
            assert tree.pop(key, None) == oracle.pop(key, None)
        elif op == "get":
            assert tree.get(key) == oracle.get(key)
        elif op == "floor":
            i = oracle.bisect_right(key)
            assert tree.floor_key(key) == (oracle.keys()[i - 1] if i else None)
        else:
            tree.flush()
        _check_budget(tree)
    tree._check()
    assert list(tree.items()) == list(oracle.items())


@pytest.mark.parametrize("reference", [False, True])
def test_inner_nodes_are_kept_while_leaves_are_evicted(reference):
    """A budget that holds every inner node and a few leaves: after random writes and a read
    of every key, every inner node is cached, and only leaves were evicted."""
    tree = TreeMap(node_size=4, cache_bytes=400 * COSTS.inner + 20 * COSTS.leaf)
    if reference:
        tree._detach_slots()
    keys = list(range(2000))
    random.Random(1).shuffle(keys)
    for k in keys:
        tree[k] = k
        _check_budget(tree)
    for k in keys:
        assert tree[k] == k
    stats, cache = tree.stats(), tree._tree.cache
    assert stats.n_inner < 400 and stats.n_leaves > 400
    assert len(cache._inner) == stats.n_inner
    _check_budget(tree)
    assert 0 < len(cache._leaves) <= cache.capacity < stats.n_leaves


def test_inner_nodes_past_the_budget_are_evicted_too():
    tree = TreeMap(node_size=4, cache_bytes=LEAST)
    for k in range(3000):
        tree[k * 7 % 3001] = k
        _check_budget(tree)
    assert len(tree._tree.cache._inner) <= MIN_NODES < tree.stats().n_inner
    tree._check()


def test_cache_size_still_caps_the_nodes_of_each_kind():
    tree = TreeMap(node_size=4, cache_size=10)
    for k in range(3000):
        tree[k * 7 % 3001] = k
        cache = tree._tree.cache
        cache.trim()
        assert len(cache._leaves) <= 10 and len(cache._inner) <= 10
    assert tree.options["cache_size"] == 10
    assert tree.options["cache_bytes"] == DEFAULT_CACHE_BYTES


def test_a_budget_below_the_least_is_refused_with_the_figures():
    with pytest.raises(ValueError, match="cache_bytes must be at least"):
        TreeMap(node_size=4, cache_bytes=LEAST - 1)
    with pytest.raises(ValueError, match="cache_size must be at least 8"):
        TreeMap(cache_size=7)


def test_the_options_reach_sets_and_db_collections(tmp_path):
    s = TreeSet(range(100), node_size=4, cache_bytes=LEAST)
    assert s._tree.options["cache_bytes"] == LEAST
    with DB.file(tmp_path / "db") as db:
        m = db.tree_map("m", node_size=4, cache_bytes=LEAST + 1)
        m.update((k, str(k)) for k in range(500))
        assert m._tree.cache.cache_bytes == LEAST + 1
        assert db.tree_set("s").options["cache_bytes"] == DEFAULT_CACHE_BYTES
        db.commit()
    with DB.file(tmp_path / "db") as db:
        assert db.tree_map("m")._tree.cache.cache_bytes == LEAST + 1


@pytest.mark.parametrize("key_kind, make", [("int64", lambda i: i * 7919 % 100_003),
                                            ("str", lambda i: f"k{i * 7919 % 100_003}")])
def test_decoded_leaves_keep_int64_keys_as_arrays_and_others_as_lists(key_kind, make):
    """Every path that makes, decodes, splits, evens out or merges a leaf leaves it the key column
    of its kind: inserts (splits), deletes (merges), flush and reads after a clear (decodes)."""
    tree = TreeMap(key=key_kind, node_size=8, cache_size=MIN_NODES)
    oracle = SortedDict()
    for i in range(3000):
        tree[make(i)] = oracle[make(i)] = i
    for i in range(0, 3000, 3):
        del tree[make(i)], oracle[make(i)]
    tree.flush()
    tree._tree.cache.clear()
    assert list(tree.items()) == list(oracle.items())
    expected = array if key_kind == "int64" else list
    leaves = tree._tree.cache._leaves.values()
    assert leaves and all(type(leaf.keys) is expected for leaf in leaves)
    tree._tree.check()


@pytest.mark.skipif(not page.COMPILED, reason="the compiled core checks the column it reads")
def test_the_compiled_read_refuses_a_leaf_whose_keys_are_not_a_key_column():
    tree = TreeMap(((k, "") for k in range(100)), key="int64")
    assert tree[50] == ""  # the read caches its leaf
    leaf = next(iter(tree._tree.cache._leaves.values()))
    leaf.keys = tuple(leaf.keys)
    with pytest.raises(CorruptionError, match="array"):
        tree.get(50)
