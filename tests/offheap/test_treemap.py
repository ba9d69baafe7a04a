"""TreeMap: the MutableMapping contract, the sorted-map API, structure, failure atomicity."""

from __future__ import annotations

import random
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedDict

from offheap.errors import CapacityError, ClosedError
from offheap.treemap.page import separator
from offheap.treemap.bulk import separators
from offheap.treemap.treemap import TreeMap
from tests.contracts import MutableMappingContract

_KEYS = random.Random(7).sample(range(-10**12, 10**12), 120)


class TestTreeMapContract(MutableMappingContract):
    keys = _KEYS

    def make(self):
        return TreeMap(node_size=4, cache_size=8)


class TestTreeMapWriteThroughContract(MutableMappingContract):
    keys = _KEYS

    def make(self):
        return TreeMap(node_size=4, cache_size=8, write_cache=False)


def _filled(n=500, node_size=8, **options):
    tree = TreeMap(node_size=node_size, cache_size=16, **options)
    model = SortedDict()
    rnd = random.Random(n)
    for _ in range(n):
        k = rnd.randrange(-3 * n, 3 * n)
        tree[k] = model[k] = f"v{k}"
    return tree, model


@pytest.mark.parametrize("write_cache", [True, False])
def test_iteration_is_in_key_order_both_ways(write_cache):
    tree, model = _filled(write_cache=write_cache)
    assert list(tree) == list(model)
    assert list(reversed(tree)) == list(reversed(model)) == list(tree.reversed())
    assert list(tree.items()) == list(model.items())
    assert list(tree.values()) == list(model.values())
    tree._check()


@pytest.mark.parametrize("inclusive", [(True, True), (True, False), (False, True), (False, False)])
def test_irange_and_range_views_match_sorteddict(inclusive):
    tree, model = _filled()
    rnd = random.Random(3)
    for _ in range(8):
        lo, hi = sorted(rnd.randrange(-1600, 1600) for _ in range(2))
        for bounds in ((lo, hi), (None, hi), (lo, None), (None, None)):
            for reverse in (False, True):
                expected = list(model.irange(*bounds, inclusive, reverse))
                assert list(tree.irange(*bounds, inclusive, reverse)) == expected
                assert list(tree.keys(*bounds, inclusive, reverse)) == expected
                assert list(tree.values(*bounds, inclusive, reverse)) == [model[k] for k in expected]
                assert list(tree.items(*bounds, inclusive, reverse)) == [(k, model[k]) for k in expected]
            view = tree.items(lo, hi, inclusive)
            assert len(view) == len(list(model.irange(lo, hi, inclusive)))
            assert list(reversed(view)) == list(reversed(list(view)))


def test_range_view_membership():
    tree = TreeMap()
    tree.update({k: k * 2 for k in range(10)})
    view = tree.items(2, 5)
    assert (3, 6) in view and (3, 7) not in view and (7, 14) not in view
    keys = tree.keys(2, 5, (False, False))
    assert 3 in keys and 2 not in keys and 5 not in keys and "x" not in keys
    assert 8 in tree.values(2, 5) and 18 not in tree.values(2, 5)


def test_neighbour_queries():
    tree, model = _filled()
    keys = list(model)
    for probe in range(-1600, 1600, 7):
        i = model.bisect_left(probe)
        j = model.bisect_right(probe)
        assert tree.ceiling_key(probe) == (keys[i] if i < len(keys) else None)
        assert tree.higher_key(probe) == (keys[j] if j < len(keys) else None)
        assert tree.floor_key(probe) == (keys[j - 1] if j else None)
        assert tree.lower_key(probe) == (keys[i - 1] if i else None)
    assert tree.first_key() == keys[0] and tree.last_key() == keys[-1]
    empty = TreeMap()
    with pytest.raises(KeyError):
        empty.first_key()
    with pytest.raises(KeyError):
        empty.last_key()
    assert empty.floor_key(3) is None and empty.ceiling_key(3) is None


@pytest.mark.parametrize("write_cache", [True, False])
def test_popitem_both_ends(write_cache):
    tree, model = _filled(200, write_cache=write_cache)
    while model:
        last = len(model) % 3 != 0
        expected = model.popitem(-1 if last else 0)
        assert tree.popitem(last=last) == expected
    tree._check()
    with pytest.raises(KeyError):
        tree.popitem()


@pytest.mark.parametrize("write_cache", [True, False])
def test_delete_range(write_cache):
    tree, model = _filled(800, write_cache=write_cache)
    rnd = random.Random(5)
    for _ in range(30):
        lo, hi = sorted(rnd.randrange(-2400, 2400) for _ in range(2))
        inclusive = (rnd.random() < 0.5, rnd.random() < 0.5)
        doomed = list(model.irange(lo, hi, inclusive))
        assert tree.delete_range(lo, hi, inclusive) == len(doomed)
        for k in doomed:
            del model[k]
        assert list(tree) == list(model)
        tree._check()
    assert tree.delete_range() == len(model)
    assert len(tree) == 0 and list(tree) == []
    tree._check()


def test_mass_deletion_leaves_no_empty_or_sparse_leaves():
    tree = TreeMap(node_size=32)
    tree.put_many(np.arange(100_000), [""] * 100_000)
    leaves_full = tree.stats().n_leaves
    for k in range(0, 100_000, 10):
        tree.delete_range(k, k + 8)  # keep one key in ten
    tree._check()
    stats = tree.stats()
    assert stats.n_entries == 10_000
    assert stats.n_leaves <= leaves_full // 4  # merged, not 3125 leaves of 3 keys
    assert stats.leaf_fill >= 0.25


def test_sequential_inserts_leave_full_leaves():
    for node_size in (4, 32, 120):
        tree = TreeMap(node_size=node_size)
        for k in range(5000):
            tree[k] = ""
        tree._check()
        assert tree.stats().n_leaves == -(-5000 // node_size)
        descending = TreeMap(node_size=node_size)
        for k in range(5000, 0, -1):
            descending[k] = ""
        descending._check()
        assert descending.stats().n_leaves == -(-5000 // node_size)


def test_random_inserts_fill_leaves_to_84_percent():
    """A full leaf evens out with a sibling that has a free slot, wherever the new key goes in
    it, before it splits (at 82% when the sibling needed two free slots and a new largest or
    smallest key always split)."""
    tree = TreeMap(node_size=32, cache_size=64)
    rnd = random.Random(11)
    for _ in range(20_000):
        tree[rnd.getrandbits(63)] = ""
    tree._check()
    assert tree.stats().leaf_fill >= 0.84  # 0.855 with this seed (0.816 before)


def test_ascending_runs_between_existing_keys_keep_the_tree_valid():
    tree = TreeMap(node_size=8)
    for k in range(0, 4000, 100):
        tree[k] = ""
    for start in range(0, 4000, 100):  # each run fills the gap after one existing key
        for k in range(start + 1, start + 60):
            tree[k] = ""
    tree._check()
    assert len(tree) == 40 * 60 and tree.stats().leaf_fill > 0.7


def test_random_inserts_keep_tree_valid_and_reasonably_full():
    tree = TreeMap(node_size=32, cache_size=64)
    rnd = random.Random(11)
    for _ in range(8000):
        tree[rnd.getrandbits(63)] = ""
    tree._check()
    assert tree.stats().leaf_fill > 0.6


@pytest.mark.parametrize("key,samples", [
    ("str", ["", "a", "ab", "abc", "b", "ba", "é", "日本", "\U0001f600", "zz" * 30]),
    ("bytes", [b"", b"\x00", b"\x00\x01", b"a", b"ab", b"\xff", b"\xff\xff" * 20]),
])
def test_str_and_bytes_keys(key, samples):
    rnd = random.Random(2)
    keys = sorted({s + suffix for s in samples for suffix in (samples[0][:0], samples[3] * 2)}
                  | {type(samples[0])(rnd.randrange(256) for _ in range(4)) if key == "bytes"
                     else "".join(chr(rnd.randrange(32, 0x3000)) for _ in range(4))
                     for _ in range(300)})
    tree = TreeMap(key=key, node_size=6, cache_size=8)
    shuffled = keys[:]
    rnd.shuffle(shuffled)
    for k in shuffled:
        tree[k] = len(k)
    tree._check()
    assert list(tree) == keys
    assert all(tree[k] == len(k) for k in keys)
    lo, hi = keys[10], keys[200]
    assert list(tree.irange(lo, hi)) == keys[10:201]
    assert tree.delete_range(lo, hi) == 191
    tree._check()
    assert list(tree) == keys[:10] + keys[201:]
    with pytest.raises(TypeError):
        tree[1] = 1


def test_key_validation():
    tree = TreeMap()
    with pytest.raises(TypeError):
        tree["x"] = 1
    with pytest.raises(OverflowError):
        tree[2**63] = 1
    assert tree.get(1.5) is None  # a lookup no key can match is a miss, as in a dict
    tree[np.int64(5)] = "numpy key"
    tree[-2**63] = "min"
    tree[2**63 - 1] = "max"
    assert list(tree) == [-2**63, 5, 2**63 - 1] and type(next(iter(tree))) is int
    with pytest.raises(ValueError):
        TreeMap(key="float")
    with pytest.raises(ValueError):
        TreeMap(node_size=2)
    with pytest.raises(ValueError):
        TreeMap(flush_delay=0)


def test_object_values_are_copied_like_a_serialized_map():
    tree = TreeMap()
    value = [1, 2]
    tree[1] = value
    value.append(3)
    assert tree[1] == [1, 2]
    with pytest.raises(Exception):
        tree[2] = lambda: None  # not serializable: rejected now, not when the page is written
    assert 2 not in tree


def test_a_bulk_load_leaves_room_in_its_leaves_for_keys_that_can_come_between():
    keys = np.arange(0, 100_000, 3, dtype=np.int64)
    tree = TreeMap(node_size=32)
    tree.put_many(keys, [""] * len(keys))
    tree._check()
    stats = tree.stats()
    assert stats.n_entries == len(keys) and stats.n_leaves == -(-len(keys) // 28)  # 4 free of 32
    assert list(tree.irange(30, 45)) == [30, 33, 36, 39, 42, 45]
    tree.update({k: "" for k in range(1, 28 * 4, 28)})  # a key into the first four leaves
    tree._check()
    assert tree.stats().n_leaves == stats.n_leaves  # each went into its leaf's room: no split


def test_a_bulk_load_of_consecutive_keys_builds_full_leaves():
    keys = np.arange(-50_000, 50_000, dtype=np.int64)  # nothing can come between them
    tree = TreeMap(node_size=32)
    tree.put_many(keys, [""] * len(keys))
    tree._check()
    assert tree.stats().n_leaves == -(-len(keys) // 32)


def test_update_from_unsorted_arrays_sorts_and_last_wins():
    tree = TreeMap(value="object")
    tree.put_many(np.array([5, 1, 3, 1, 5], dtype=np.int64), ["a", "b", "c", "d", "e"])
    assert list(tree.items()) == [(1, "d"), (3, "c"), (5, "e")]
    tree._check()
    with pytest.raises(ValueError):
        tree.put_many(np.array([1, 2]), ["only one"])
    with pytest.raises(TypeError):
        tree.put_many(np.array([1.5, 2.5]), ["a", "b"])
    with pytest.raises(ValueError):
        tree.put_many(np.zeros((2, 2), np.int64), ["a", "b"])
    assert list(tree.items()) == [(1, "d"), (3, "c"), (5, "e")]


def test_update_merges_into_existing_tree():
    tree, model = _filled(300)
    small = {k: "small" for k in range(0, 60, 7)}
    tree.update(small)
    model.update(small)
    assert list(tree.items()) == list(model.items())
    big = {k: "big" for k in range(-2000, 2000, 3)}
    tree.update(big)
    model.update(big)
    assert list(tree.items()) == list(model.items())
    tree._check()
    tree.put_many(np.arange(10_000, 10_005), np.array(["x"] * 5, dtype=object))
    assert tree[10_004] == "x"
    tree._check()


def test_clear_frees_records():
    tree, _ = _filled(1000)
    before = len(tree._store)
    tree.clear()
    tree._check()
    assert len(tree) == 0 and len(tree._store) == 2 < before
    tree[1] = "again"
    assert dict(tree.items()) == {1: "again"}


def test_stats_repr_html():
    tree, model = _filled(1000)
    tree.flush()
    stats = tree.stats()
    assert stats.n_entries == len(model) and stats.height >= 2 and stats.dirty_nodes == 0
    assert stats.n_leaves + stats.n_inner == len(tree._store) - 1
    assert stats.stored_page_bytes > 0 and stats.compression_ratio == 1.0
    assert f"{len(model):,} entries" in repr(tree) and "height" in tree._repr_html_()
    tree.close()
    assert "closed" in repr(tree) and "closed" in tree._repr_html_()


def test_compression_is_kept_only_where_it_helps():
    tree = TreeMap(value="str", node_size=64, compression="zlib")
    for k in range(5000):
        tree[k] = f"{k % 5} a fairly repetitive value " * 3
    tree.flush()
    stats = tree.stats()
    assert stats.compression_ratio > 3
    assert all(tree[k] == f"{k % 5} a fairly repetitive value " * 3 for k in range(0, 5000, 97))
    tree._check()


def _fill_until_full(tree, model, rnd):
    failures = 0
    while failures < 20:
        k = rnd.randrange(10**9)
        v = bytes(rnd.randrange(256) for _ in range(rnd.randrange(40)))
        try:
            tree[k] = v
        except CapacityError:
            failures += 1
            continue
        model[k] = v
    assert len(tree) == len(model)
    assert list(tree.items()) == list(model.items())
    tree._check()


@pytest.mark.parametrize("write_cache", [True, False])
def test_capacity_error_leaves_tree_unchanged_and_usable(write_cache):
    tree = TreeMap(value="bytes", node_size=8, cache_size=8, write_cache=write_cache,
                   limit=200_000)
    model = SortedDict()
    rnd = random.Random(1)
    _fill_until_full(tree, model, rnd)
    for k in list(model)[: len(model) // 2]:
        try:
            del tree[k]
        except CapacityError:
            # without the write cache even a smaller page needs a chunk of its size class
            assert not write_cache
            break
        del model[k]
    assert list(tree.items()) == list(model.items())
    tree._check()
    if not write_cache:
        tree.clear()
        model.clear()
    tree[1] = b"fits again"
    model[1] = b"fits again"
    tree.flush()
    assert list(tree.items()) == list(model.items())
    tree._check()


def test_capacity_error_in_bulk_load_changes_nothing():
    tree = TreeMap(limit=300_000)
    tree.update({k: "kept" for k in range(100)})
    rnd = np.random.default_rng(3)
    keys = rnd.integers(-2**62, 2**62, 200_000)
    with pytest.raises(CapacityError):
        tree.put_many(keys, [""] * len(keys))
    assert dict(tree.items()) == {k: "kept" for k in range(100)}
    tree._check()


def test_file_tree_roundtrip(tmp_path):
    path = tmp_path / "tree.offheap"
    with TreeMap(key="str", value="object", node_size=8, path=path) as tree:
        for i in range(500):
            tree[f"key{i:04d}"] = i
    with TreeMap(key="str", value="object", node_size=8, path=path) as tree:
        assert len(tree) == 500 and tree["key0042"] == 42
        assert tree.first_key() == "key0000" and tree.last_key() == "key0499"
        tree._check()
        del tree["key0000"]
    with pytest.raises(ValueError, match="key="):
        TreeMap(key="int64", value="object", node_size=8, path=path)
    with TreeMap(key="str", node_size=8, path=path) as tree:
        assert len(tree) == 499


def test_closed_tree_raises():
    tree, _ = _filled(50)
    it = iter(tree)
    next(it)
    tree.close()
    with pytest.raises(ClosedError):
        list(it)  # the leaf already fetched may still be served; the next one is not
    for action in (tree.first_key, lambda: tree.irange(0, 5).__next__(), tree.flush,
                   lambda: tree.delete_range(0, 1), lambda: tree.update({1: 2})):
        with pytest.raises(ClosedError):
            action()


def test_flush_delay_timer_writes_dirty_nodes():
    tree = TreeMap(node_size=8, flush_delay=20)
    for k in range(100):
        tree[k] = "x"
    assert tree.stats().dirty_nodes > 0
    deadline = time.monotonic() + 10
    while tree.stats().dirty_nodes and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tree.stats().dirty_nodes == 0
    tree._check()
    tree.close()


def test_threads_see_whole_operations():
    tree = TreeMap(node_size=8, flush_delay=1)
    errors = []

    def writer(offset):
        try:
            for k in range(offset, offset + 2000):
                tree[k] = k
        except Exception as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i * 10_000,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(tree) == 6000
    tree._check()
    tree.close()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-2**63, 2**63 - 1), min_size=2, max_size=40, unique=True))
def test_bulk_separators_match_the_scalar_rule(keys):
    keys = sorted(keys)
    left, right = np.array(keys[:-1], np.int64), np.array(keys[1:], np.int64)
    assert separators(left, right) == [separator(a, b) for a, b in zip(keys, keys[1:])]
