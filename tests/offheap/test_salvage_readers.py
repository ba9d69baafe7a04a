"""The defensive readers of salvage on damaged stores: what they return is always right, what
they cannot show consistent is skipped and counted, and no damage makes them hang or crash.
Trees, LongHashMap tables, and keyed tables (HashMap, HashSet: damaged key slots and long
keys' records besides)."""

from __future__ import annotations

import numpy as np
import pytest

from offheap import HashMap, HashSet
from offheap.db.database import DB
from offheap.hashmap.keyedlayout import parse_meta as parse_keyed_meta
from offheap.hashmap.layout import parse_meta as parse_table_meta
from offheap.hashmap.salvage import INT64_KEYS, keyed_column, read_table
from offheap.db.salvage import CollectionReport, _DamagedRecord
from offheap.treemap.salvage import read_tree
from offheap.treemap.meta import parse_meta as parse_tree_meta
from tests.offheap.test_hashmap_keyed_format import fixed_seed  # noqa: F401 (a fixture)

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
    """The entries the defensive reader gives of ``table`` (a LongHashMap's, or a HashMap's or
    HashSet's: a set's entries hold None), and its report."""
    store = db._store
    report = CollectionReport("h", "hash_map")
    record = store.get(table.meta_recid)
    if isinstance(table, (HashMap, HashSet)):
        keyed = parse_keyed_meta(record)
        meta, column = keyed.table, keyed_column(keyed)
    else:
        meta, column = parse_table_meta(record), INT64_KEYS
    entries = [kv for keys, values in read_table(store, meta, report, store.get_checked,
                                                 _DamagedRecord, column)
               for kv in zip(keys if isinstance(keys, list) else keys.tolist(),
                             [None] * len(keys) if isinstance(table, HashSet) else list(values))]
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


# -- keyed tables ------------------------------------------------------------------------------
# under a fixed seed (the fixture), so that the homes and what a damage costs are the same in
# every run

LONG = "a key of more than fifteen bytes"


def _key(i: int) -> str:
    return f"{LONG} {i}" if i % 4 == 0 else f"k{i}"


def _keyed_db(kind: str = "map"):
    db = DB.memory()
    if kind == "map":
        table = db.hash_map("h", key="str")
        table.put_many([_key(i) for i in range(N)],
                       [("x" * (i % 20)) if i % 3 else i for i in range(N)])
    else:
        table = db.hash_set("h", key="str")
        table.add_many([_key(i) for i in range(N)])
    db.flush()
    return db, table


def _truth(table) -> dict:
    return dict(table.items()) if isinstance(table, HashMap) else dict.fromkeys(table)


def _assert_right(entries: dict, truth: dict) -> None:
    assert all(key in truth and truth[key] == value for key, value in entries.items())


def _slots(table) -> np.ndarray:
    """Chunk 0's key slots, in place, as a matrix of bytes."""
    return table._regions.key_chunks[0].view(np.uint8).reshape(-1, 16)


@pytest.mark.parametrize("kind", ["map", "set"])
@pytest.mark.usefixtures("fixed_seed")
def test_an_intact_keyed_table_reads_whole_in_order(kind):
    db, table = _keyed_db(kind)
    table.discard_many([_key(i) for i in range(0, N, 7)]) if kind == "set" else \
        table.delete_many([_key(i) for i in range(0, N, 7)])
    db.flush()
    entries, report = _read_table(db, table)
    assert entries == _truth(table) and list(entries) == list(table)
    assert report.skipped_entries == report.damaged_entries == 0 and report.error is None


@pytest.mark.usefixtures("fixed_seed")
def test_swapped_slots_are_skipped():
    db, table = _keyed_db()
    truth = _truth(table)
    slots = _slots(table)
    slots[[10, 201]] = slots[[201, 10]]  # each key now sits far from its home
    entries, report = _read_table(db, table)
    _assert_right(entries, truth)
    assert report.skipped_entries == 2 and len(entries) == N - 2
    assert _key(10) not in entries and _key(201) not in entries


@pytest.mark.usefixtures("fixed_seed")
def test_a_duplicated_slot_is_skipped_both_times():
    db, table = _keyed_db()
    truth = _truth(table)
    slots = _slots(table)
    slots[30] = slots[20]  # two entries now claim one key (20 is a long key's slot)
    entries, report = _read_table(db, table)
    _assert_right(entries, truth)
    assert _key(20) not in entries and report.skipped_entries == 2 and len(entries) == N - 2


@pytest.mark.parametrize("damage, skipped", [
    (lambda slot: slot.__setitem__(15, 0x42), 1),  # neither an inline length nor LONG
    (lambda slot: slot.__setitem__(14, 1), 1),  # padding after an inline key
    # another key's bytes, away from its home: the probes of two keys behind it stop there
    (lambda slot: slot.__setitem__(0, slot[0] ^ 1), 3),
], ids=["marker", "padding", "key-bytes"])
@pytest.mark.usefixtures("fixed_seed")
def test_a_damaged_inline_slot_is_skipped(damage, skipped):
    db, table = _keyed_db()
    truth = _truth(table)
    damage(_slots(table)[5])
    entries, report = _read_table(db, table)
    _assert_right(entries, truth)
    assert report.skipped_entries == skipped and len(entries) == N - skipped
    assert _key(5) not in entries


@pytest.mark.parametrize("record", [b"short", b"another key of more than fifteen bytes", None],
                         ids=["too-short", "other-key", "missing"])
@pytest.mark.usefixtures("fixed_seed")
def test_a_long_key_whose_record_is_not_its_key_is_skipped(record):
    db, table = _keyed_db()
    truth = _truth(table)
    recid = int(_slots(table)[8, :8].view("<i8")[0])
    assert db._store.get(recid) == _key(8).encode()
    if record is None:
        db._store.delete(recid)
    else:
        db._store.update(recid, record)
    entries, report = _read_table(db, table)
    _assert_right(entries, truth)
    assert report.skipped_entries == 1 and len(entries) == N - 1 and _key(8) not in entries


@pytest.mark.usefixtures("fixed_seed")
def test_a_bad_external_value_is_skipped():
    db, table = _keyed_db()
    truth = _truth(table)
    words = table._live_words().astype(np.uint64)
    recid = int(words[(words & np.uint64(0xFF)) == 0xFF][0]) >> 8
    db._store.update(recid, b"\x80\x05garbage that is no pickle")
    entries, report = _read_table(db, table)
    _assert_right(entries, truth)
    assert report.skipped_entries == 1 and len(entries) == N - 1
