"""The compiled read path of TreeMap (offheap/treemap/csrc/descent.c) against the Python one.

Every read the compiled ``Descent`` answers (get, the neighbour queries, positions, the entry at a
position, get_many) is asked of the same tree twice, once with the descent and once with it
switched off (the Python cursor and bisect), and both answers are held against a ``SortedDict``:
random trees with and without the write cache, dirty nodes, deletes, int64 and str keys, typed
and object values, compressed pages, a cache too small to hold the leaves, and a reopened file.
Damaged pages raise CorruptionError on both paths; a closed map's reads raise ClosedError.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st
from sortedcontainers import SortedDict

from offheap import TreeMap
from offheap.errors import ClosedError, CorruptionError
from offheap.treemap import page

pytestmark = pytest.mark.skipif(not page.COMPILED, reason="the compiled page codec is not loaded")

INT_KEYS = st.integers(-(1 << 63), (1 << 63) - 1)
SMALL_INT_KEYS = st.integers(-300, 300)
MISSING_INT = -999_999  # get_many's default of an int64-valued tree: no test value is this
STR_KEYS = st.text(alphabet="abcdé\U0001f600", max_size=5)


def _reads(tree: TreeMap, probes: list) -> list:
    """Every read the compiled descent answers, for each probe key and each position."""
    answers: list = []
    for key in probes:
        answers.append((tree.get(key, "absent"), key in tree, tree.floor_key(key),
                        tree.ceiling_key(key), tree.lower_key(key), tree.higher_key(key),
                        tree.floor_item(key), tree.ceiling_item(key), tree.lower_item(key),
                        tree.higher_item(key), tree.bisect_left(key), tree.bisect_right(key)))
    answers.append([tree.peekitem(i) for i in range(-len(tree), len(tree))])
    answers.append([tree.index(key) for key in list(tree)[::3]])
    found = tree.get_many(probes, default=MISSING_INT if tree.options["value"] == "int64" else "absent")
    answers.append([("absent" if v == MISSING_INT else v) for v in
                    (found.tolist() if hasattr(found, "tolist") else found)])
    return answers


def _oracle_reads(oracle: SortedDict, probes: list) -> list:
    keys = oracle.keys()

    def at(i):
        return (keys[i], oracle[keys[i]]) if 0 <= i < len(keys) else None

    answers: list = []
    for key in probes:
        left, right = oracle.bisect_left(key), oracle.bisect_right(key)
        floor, ceiling, lower, higher = at(right - 1), at(left), at(left - 1), at(right)
        answers.append((oracle.get(key, "absent"), key in oracle,
                        *(None if item is None else item[0] for item in (floor, ceiling, lower, higher)),
                        floor, ceiling, lower, higher, left, right))
    answers.append([oracle.peekitem(i) for i in range(-len(oracle), len(oracle))])
    answers.append([oracle.index(key) for key in list(oracle)[::3]])
    answers.append([oracle.get(key, "absent") for key in probes])
    return answers


def on_python_path(reads, tree: TreeMap, probes: list) -> list:
    """``reads(tree, probes)`` on the Python path: the same tree with its descent switched off
    (and the compiled item slots, which use it, detached)."""
    descent, tree._tree.descent = tree._tree.descent, None
    tree._detach_slots()
    try:
        return reads(tree, probes)
    finally:
        tree._tree.descent = descent
        tree._bind_slots()


def _python_reads(tree: TreeMap, probes: list) -> list:
    return on_python_path(_reads, tree, probes)


def _check_all(tree: TreeMap, oracle: SortedDict, probes: list) -> None:
    assert tree._tree.descent is not None
    expected = _oracle_reads(oracle, probes)
    assert _reads(tree, probes) == expected
    assert _python_reads(tree, probes) == expected
    tree._check()


OPTIONS = st.fixed_dictionaries(dict(
    node_size=st.sampled_from([4, 5, 8]),
    write_cache=st.booleans(),
    cache_size=st.sampled_from([8, 2048]),
    compression=st.sampled_from([None, "zlib"]),
))


@settings(max_examples=40, deadline=None)
@given(options=OPTIONS, value=st.sampled_from(["object", "int64", "str"]),
       inserts=st.lists(SMALL_INT_KEYS, max_size=80), deletes=st.lists(SMALL_INT_KEYS, max_size=40),
       probes=st.lists(SMALL_INT_KEYS, max_size=20), flush=st.booleans())
def test_int64_trees_read_alike(options, value, inserts, deletes, probes, flush):
    make = {"object": lambda k: ("v", k) if k % 3 else "", "int64": lambda k: k * 7,
            "str": lambda k: f"s{k}"}[value]
    tree, oracle = TreeMap(key="int64", value=value, **options), SortedDict()
    for key in inserts:
        tree[key] = oracle[key] = make(key)
    for key in deletes:
        tree.pop(key, None)
        oracle.pop(key, None)
    if flush:
        tree.flush()  # clean pages in the store; else dirty nodes only in the cache
    _check_all(tree, oracle, probes + inserts[:5] + [-(1 << 63), (1 << 63) - 1])
    tree.close()


@settings(max_examples=25, deadline=None)
@given(options=OPTIONS, inserts=st.lists(STR_KEYS, max_size=80),
       deletes=st.lists(STR_KEYS, max_size=30), probes=st.lists(STR_KEYS, max_size=15))
def test_str_trees_read_alike(options, inserts, deletes, probes):
    tree, oracle = TreeMap(key="str", value="object", **options), SortedDict()
    for key in inserts:
        tree[key] = oracle[key] = len(key)
    for key in deletes:
        tree.pop(key, None)
        oracle.pop(key, None)
    tree.flush()
    _check_all(tree, oracle, probes + [""])
    tree.close()


def test_large_keys_and_misses_beyond_int64():
    keys = [-(1 << 63), -1, 0, 1, (1 << 63) - 1]
    tree = TreeMap(((k, k) for k in keys), node_size=4, cache_size=8)
    tree.flush()
    assert tree.get(1 << 64) is None and (1 << 70) not in tree and tree[(1 << 63) - 1] == keys[-1]
    _check_all(tree, SortedDict((k, k) for k in keys), keys)


def test_reopened_file_reads_alike(tmp_path):
    path = tmp_path / "tree.offheap"
    oracle = SortedDict((k * 5, str(k)) for k in range(2000))
    with TreeMap(oracle.items(), path=path, key="int64", value="str", node_size=8):
        pass
    with TreeMap(path=path, cache_size=8) as tree:
        _check_all(tree, oracle, [-3, 0, 4, 5, 6, 9999, 10000, 12345])
        assert len(tree._tree.cache._leaves) <= 8  # reads of uncached leaves cached nothing


def test_reads_cache_leaves_while_there_is_room_and_evict_nothing():
    tree = TreeMap(((k, "") for k in range(50_000)), cache_size=8)
    tree.flush()
    cache = tree._tree.cache
    cache.clear()
    probes = range(0, 50_000, 97)
    for key in probes:
        assert tree[key] == "" and tree.floor_key(key) == key and tree.index(key) == key
    filled = list(cache._leaves)
    assert len(filled) == cache.capacity  # the first leaves read, in the order read
    assert filled == sorted(filled, key=lambda recid: min(cache._leaves[recid].keys))
    for key in reversed(probes):  # full: every other leaf is read from its page
        assert tree[key] == "" and tree.floor_key(key) == key and tree.index(key) == key
    assert list(cache._leaves) == filled
    tree._tree.check()


def test_a_small_map_is_read_from_cached_leaves():
    tree = TreeMap(((k, str(k)) for k in range(2000)), node_size=16)
    tree.flush()
    cache = tree._tree.cache
    cache.clear()
    assert [tree[k] for k in range(0, 2000, 7)] == [str(k) for k in range(0, 2000, 7)]
    assert len(cache._leaves) == tree._tree.shape.n_leaves
    assert not cache.over_capacity and not any(leaf.dirty for leaf in cache._leaves.values())
    tree._tree.check()


def test_dirty_nodes_are_read_from_the_cache():
    tree = TreeMap(((k, k) for k in range(1000)), value="int64", node_size=8)
    tree.flush()
    for key in range(0, 1000, 2):
        tree[key] = -key  # dirty leaves: their pages in the store still hold the old values
    assert tree._tree.cache.n_dirty()
    assert [tree[key] for key in range(10)] == [0, 1, -2, 3, -4, 5, -6, 7, -8, 9]
    assert tree.peekitem(4) == (4, -4) and tree.floor_item(6) == (6, -6)


def _damage_a_leaf(tree: TreeMap) -> None:
    """Overwrite the body of one leaf page in the store with bytes no leaf can hold."""
    tree.flush()
    tree._tree.cache.clear()
    tree._tree.hint.forget()
    store, shape = tree._store, tree._tree.shape
    leaf_recid = next(r for r in tree._tree.all_recids() if r != shape.root
                      and not page.is_inner(store.get(r)))
    size = len(store.get(leaf_recid))
    store.update(leaf_recid, bytes((0, 8)) + b"\xff" * (size - 2))


@pytest.mark.parametrize("compiled", [True, False])
def test_damaged_pages_raise_corruption_on_both_paths(compiled):
    tree = TreeMap(((k, "x") for k in range(200)), node_size=8)
    _damage_a_leaf(tree)
    if not compiled:
        tree._tree.descent = None
        tree._detach_slots()
    failures = 0
    for key in range(200):
        try:
            tree.get(key)
            tree.floor_key(key)
            tree.index(key) if key in tree else None
        except CorruptionError:
            failures += 1
    assert failures > 0


def test_descent_refuses_keys_of_another_type():
    tree = TreeMap(((k, "") for k in range(10)))
    shape = tree._tree.shape
    with pytest.raises(TypeError):
        tree._tree.descent.get(shape.root, shape.height, "1", None)
    with pytest.raises(CorruptionError):
        tree._tree.descent.get(shape.root, 0, 1, None)


READS = [
    lambda t: t[1], lambda t: t.get(1), lambda t: 1 in t, lambda t: t.floor_key(1),
    lambda t: t.ceiling_item(1), lambda t: t.lower_key(1), lambda t: t.higher_item(1),
    lambda t: t.index(1), lambda t: t.bisect_left(1), lambda t: t.peekitem(0),
    lambda t: t.get_many([1, 2]), lambda t: list(t.irange(0, 5)), lambda t: list(t),
]


@pytest.mark.parametrize("read", READS)
def test_every_read_of_a_closed_map_raises(read):
    tree = TreeMap(((k, "") for k in range(100)), node_size=4)
    read(tree)
    tree.close()
    with pytest.raises(ClosedError):
        read(tree)
