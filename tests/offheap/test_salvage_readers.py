"""The defensive readers of salvage on damaged stores: what they return is always right, what
they cannot show consistent is skipped and counted, and no damage makes them hang or crash."""

from __future__ import annotations

import numpy as np
import pytest

from offheap.db.database import DB
from offheap.hashmap.layout import parse_meta as parse_table_meta
from offheap.hashmap.salvage import read_table
from offheap.db.salvage import CollectionReport, _DamagedRecord
from offheap.treemap.salvage import read_tree
from offheap.treemap.meta import parse_meta as parse_tree_meta

N = 400


def _tree_db(node_size=4, value="object"):
    db = DB.memory()
    tree = db.tree_map("t", node_size=node_size, value=value)
    tree.update({k: f"v{k}" for k in range(0, 2 * N, 2)})
    db.flush()
    return db, tree


def _read_tree(db, tree):
    store = db._store
    report = CollectionReport("t", "tree_map")
    meta = parse_tree_meta(store.get(tree.meta_recid))
    entries = [kv for keys, values in read_tree(store, meta, report) for kv in zip(keys, values)]
    return entries, report


def _pages(db, tree, leaves: bool) -> list[int]:
    store = db._store
    return [r for r in tree._tree.all_recids() if bool(store.get(r)[0] & 1) != leaves]


def test_intact_tree_reads_whole():
    db, tree = _tree_db()
    entries, report = _read_tree(db, tree)
    assert entries == list(tree.items())
    assert report.skipped_records == report.skipped_entries == 0


def _assert_subset_in_order(entries, truth: dict):
    keys = [k for k, _ in entries]
    assert keys == sorted(set(keys)), "salvaged keys must rise"
    for key, value in entries:
        assert truth[key] == value, f"key {key} salvaged with a wrong value"


def test_swapped_leaves_are_skipped_not_copied():
    db, tree = _tree_db()
    truth = dict(tree.items())
    first, second = _pages(db, tree, leaves=True)[3], _pages(db, tree, leaves=True)[20]
    lost = _leaf_len(tree, first) + _leaf_len(tree, second)
    store = db._store
    page_a, page_b = store.get(first), store.get(second)
    store.update(first, page_b)
    store.update(second, page_a)
    entries, report = _read_tree(db, tree)
    _assert_subset_in_order(entries, truth)
    assert report.skipped_records == 2 and len(entries) == N - lost


def _leaf_len(tree, recid):
    return len(tree._tree.nodes.load(recid).keys)


@pytest.mark.parametrize("garbage", [b"", b"\x00", b"\x00\xff\xff\xff\xff\x0f", bytes(range(256)),
                                     b"\x06" + bytes(40)])
def test_garbage_leaf_is_skipped(garbage):
    db, tree = _tree_db()
    truth = dict(tree.items())
    leaf = _pages(db, tree, leaves=True)[5]
    lost = _leaf_len(tree, leaf)
    db._store.update(leaf, garbage)
    entries, report = _read_tree(db, tree)
    _assert_subset_in_order(entries, truth)
    assert report.skipped_records == 1 and len(entries) == N - lost


def test_damaged_inner_node_loses_its_subtree_only():
    db, tree = _tree_db()
    truth = dict(tree.items())
    inner = [r for r in _pages(db, tree, leaves=False) if r != tree._tree.shape.root][0]
    db._store.update(inner, b"\x01\x05garbage")
    entries, report = _read_tree(db, tree)
    _assert_subset_in_order(entries, truth)
    assert report.skipped_records == 1 and 0 < len(entries) < N


def test_cycle_does_not_hang():
    db, tree = _tree_db()
    truth = dict(tree.items())
    store = db._store
    inner = tree._tree.nodes.load(tree._tree.shape.root)
    child = tree._tree.nodes.load(inner.children[0])
    assert not child.is_leaf
    from offheap.treemap.page import encode_inner
    child.children[0] = tree._tree.shape.root  # the first subtree points back at the root
    store.update(child.recid, encode_inner(child.keys, child.children, child.counts, "int64"))
    entries, report = _read_tree(db, tree)
    _assert_subset_in_order(entries, truth)
    assert report.skipped_records >= 1


def _hash_db(value="object"):
    db = DB.memory()
    table = db.hash_map("h", value=value)
    keys = np.arange(N, dtype=np.int64) * 7919
    values = [("x" * (k % 20)) if value == "object" else int(k) for k in keys.tolist()]
    table.put_many(keys, values)
    db.flush()
    return db, table


def _read_table(db, table):
    store = db._store
    report = CollectionReport("h", "hash_map")
    meta = parse_table_meta(store.get(table.meta_recid))
    entries = [kv for keys, values in read_table(store, meta, report, store.get_checked,
                                                 _DamagedRecord)
               for kv in zip(np.asarray(keys).tolist(), list(values))]
    return dict(entries), report


@pytest.mark.parametrize("value", ["object", "int64"])
def test_intact_table_reads_whole(value):
    db, table = _hash_db(value)
    entries, report = _read_table(db, table)
    assert entries == dict(table.items())
    assert report.skipped_entries == report.skipped_records == 0


def test_misplaced_keys_are_skipped():
    db, table = _hash_db()
    truth = dict(table.items())
    keys = table._regions.key_chunks[0]
    keys[10], keys[200] = keys[200], keys[10]  # each now sits far from its home
    entries, report = _read_table(db, table)
    assert all(truth[k] == v for k, v in entries.items())
    assert report.skipped_entries == 2 and len(entries) == N - 2


def test_duplicated_key_is_skipped_both_times():
    db, table = _hash_db()
    truth = dict(table.items())
    keys = table._regions.key_chunks[0]
    keys[30] = keys[20]  # two entries now claim one key
    entries, report = _read_table(db, table)
    assert int(keys[20]) not in entries
    assert report.skipped_entries == 2 and len(entries) == N - 2
    assert all(truth[k] == v for k, v in entries.items())


def test_entries_keep_their_insertion_order():
    db, table = _hash_db()
    table.delete_many(np.arange(0, N, 3) * 7919)
    table.put_many([-5, -9, -1], ["a", "b", "c"])
    db.flush()
    entries, report = _read_table(db, table)
    assert list(entries) == list(table)


def test_bad_external_value_is_skipped():
    db, table = _hash_db()
    truth = dict(table.items())
    words = table._live_words().astype(np.uint64)
    external = words[(words & np.uint64(0xFF)) == 0xFF]
    recid = int(external[0]) >> 8
    db._store.update(recid, b"\x80\x05garbage that is no pickle")
    entries, report = _read_table(db, table)
    assert all(truth[k] == v for k, v in entries.items())
    assert report.skipped_entries == 1 and len(entries) == N - 1
