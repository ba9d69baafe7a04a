"""TreeMap.update(parallelism=p): the same pages and tree as p=1, all or nothing, forkpool."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedDict

from offheap.treemap import bulk
from offheap.treemap.forkpool import encode_in_workers
from offheap.treemap.treemap import TreeMap


@pytest.fixture(autouse=True)
def few_leaves_go_parallel(monkeypatch):
    """Small maps take the forked path too (it starts at 2,048 leaves by default)."""
    monkeypatch.setattr(bulk, "PARALLEL_MIN_LEAVES", 2)


def _pages(tree: TreeMap) -> list[bytes]:
    """Every node's stored page, in tree order (root first, level by level)."""
    tree.flush()
    return [bytes(tree._store.get(recid)) for recid in tree._tree.all_recids()]


def _batch(key_kind: str, n: int):
    rng = np.random.default_rng(n)
    numbers = np.unique(rng.integers(-10**9, 10**9, n))
    if key_kind == "int64":
        return numbers, numbers * 2
    keys = [str(k) for k in numbers.tolist()]
    if key_kind == "bytes":
        keys = [k.encode() for k in keys]
    return keys, [f"v{k}" for k in numbers.tolist()]


@pytest.mark.parametrize("key_kind, value", [("int64", "int64"), ("int64", "object"),
                                             ("str", "str"), ("bytes", "object")])
@pytest.mark.parametrize("compression", [None, "zlib", "zstd"])
def test_parallel_build_gives_the_same_tree(key_kind, value, compression):
    keys, values = _batch(key_kind, 3000)
    trees = []
    for parallelism in (1, 2, 3):
        tree = TreeMap(key=key_kind, value=value, node_size=8, compression=compression)
        if key_kind == "int64" and value == "object":
            values = values.astype(object)
        tree.put_many(keys, values, parallelism=parallelism)
        tree._check()
        trees.append(tree)
    assert _pages(trees[1]) == _pages(trees[0]) == _pages(trees[2])
    assert trees[1].stats() == trees[0].stats()
    expected = SortedDict(zip(keys.tolist() if key_kind == "int64" else keys,
                              values.tolist() if key_kind == "int64" else values))
    assert list(trees[1].items()) == list(expected.items())


@settings(max_examples=25, deadline=None)
@given(old=st.dictionaries(st.integers(-1000, 1000), st.integers(0, 99), max_size=60),
       new=st.dictionaries(st.integers(-1000, 1000), st.integers(100, 199), min_size=1,
                           max_size=200))
def test_merge_rebuild_in_workers_matches_sorteddict(old, new):
    tree = TreeMap(key="int64", value="int64", node_size=4)
    tree.update(old)
    reference = TreeMap(key="int64", value="int64", node_size=4)
    reference.update(old)
    tree.put_many(list(new), list(new.values()), parallelism=2)
    reference.update(new)
    tree._check()
    expected = SortedDict(old)
    expected.update(new)
    assert list(tree.items()) == list(expected.items())
    assert _pages(tree) == _pages(reference)


def test_failure_in_a_worker_leaves_the_map_unchanged(monkeypatch):
    tree = TreeMap(key="int64", value="int64", node_size=4)
    tree.update({k: k for k in range(0, 100, 3)})
    before = _pages(tree)
    original = bulk.encode_leaf

    def encode_leaf(keys, *args):
        if 1500 in list(keys):
            raise RuntimeError("leaf with key 1500 failed")
        return original(keys, *args)

    monkeypatch.setattr(bulk, "encode_leaf", encode_leaf)  # forked workers inherit it
    with pytest.raises(RuntimeError, match="key 1500 failed"):
        tree.put_many(np.arange(3000), np.arange(3000), parallelism=2)
    tree._check()
    assert _pages(tree) == before
    assert dict(tree.items()) == {k: k for k in range(0, 100, 3)}


@pytest.mark.parametrize("parallelism", [0, -1, 1.5, True])
def test_parallelism_must_be_a_positive_int(parallelism):
    with pytest.raises(ValueError, match="parallelism must be an int >= 1"):
        TreeMap().put_many([1], [2], parallelism=parallelism)


def test_encode_in_workers_keeps_order_and_raises_worker_errors():
    payload = np.arange(500)

    def encode(i):
        if i == 377:
            raise KeyError(f"item {i}")
        return bytes(int(payload[i]) % 7 for _ in range(i % 5))

    with pytest.raises(KeyError, match="item 377"):
        list(encode_in_workers(encode, 500, 3))
    assert list(encode_in_workers(encode, 377, 3)) == [encode(i) for i in range(377)]
    assert list(encode_in_workers(encode, 0, 2)) == []
