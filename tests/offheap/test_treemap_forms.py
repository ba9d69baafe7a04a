"""The compact forms of inner nodes that the compiled descent bisects (offheap/treemap/csrc/forms.c).

A form copies an inner node's separators and children, so every change of the tree must drop the
forms it makes stale, or edit them as it edits the node (the compiled write-around's splits and
shifts do). These tests interleave reads, which make forms, with the changes that must
drop them (inserts that split and grow the root, deletes that merge and shrink it, overwrites,
``clear``, bulk loads, a DB's rollback, a reopen, eviction from a small cache, the undo of
writes a full store refused), and hold every read against a ``SortedDict`` and against the
Python path; ``_check`` asserts after each step that every form is that of a cached inner node
as it stands. Also: the prefix order of str and bytes separators, the memory bound, and a closed
map.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from sortedcontainers import SortedDict

from offheap import DB, TreeMap
from offheap.errors import CapacityError, ClosedError
from offheap.treemap import page
from tests.offheap.test_treemap_descent import on_python_path

pytestmark = pytest.mark.skipif(not page.COMPILED, reason="the compiled page codec is not loaded")

INT_KEYS = st.integers(-200, 200)
# shared prefixes longer than the 8 bytes a form keeps, NUL, multi-byte and astral code points
STR_KEYS = st.text(alphabet="a\x00é\U0001f600", max_size=12).map(lambda s: "prefix:" + s)
BYTES_KEYS = st.binary(max_size=12).map(lambda b: b"\x00\x00head" + b)
KEYS = {"int64": INT_KEYS, "str": STR_KEYS, "bytes": BYTES_KEYS}


def _reads(tree: TreeMap, probes: list) -> list:
    """The reads the compiled descent answers, each through the forms of the inner nodes."""
    answers = [(tree.get(key, "absent"), tree.floor_key(key), tree.ceiling_key(key),
                tree.lower_key(key), tree.higher_key(key), tree.bisect_left(key),
                tree.bisect_right(key)) for key in probes]
    answers.append([tree.peekitem(i) for i in range(0, len(tree), 3)])
    return answers


def _oracle_reads(oracle: SortedDict, probes: list) -> list:
    keys = oracle.keys()

    def key_at(i):
        return keys[i] if 0 <= i < len(keys) else None

    answers = []
    for key in probes:
        left, right = oracle.bisect_left(key), oracle.bisect_right(key)
        answers.append((oracle.get(key, "absent"), key_at(right - 1), key_at(left),
                        key_at(left - 1), key_at(right), left, right))
    answers.append([oracle.peekitem(i) for i in range(0, len(oracle), 3)])
    return answers


def _python_reads(tree: TreeMap, probes: list) -> list:
    return on_python_path(_reads, tree, probes)


def _check_reads(tree: TreeMap, oracle: SortedDict, probes: list) -> None:
    expected = _oracle_reads(oracle, probes)
    assert _reads(tree, probes) == expected
    assert _python_reads(tree, probes) == expected
    tree._check()


def _operations(keys):
    return st.lists(st.one_of(
        st.tuples(st.just("put"), st.lists(keys, max_size=12)),
        st.tuples(st.just("pop"), st.lists(keys, max_size=12)),
        st.tuples(st.just("overwrite"), st.just(None)),
        st.tuples(st.just("delete_range"), st.tuples(keys, keys)),
        st.tuples(st.just("put_many"), st.lists(keys, max_size=40)),
        st.tuples(st.just("clear"), st.just(None)),
        st.tuples(st.just("flush"), st.just(None)),
    ), max_size=14)


def _apply(tree: TreeMap, oracle: SortedDict, operation: str, argument) -> None:
    if operation == "put":
        for key in argument:
            tree[key] = oracle[key] = len(oracle)
    elif operation == "pop":
        for key in argument:
            assert tree.pop(key, None) == oracle.pop(key, None)
    elif operation == "overwrite":
        for key in list(oracle)[::2]:
            tree[key] = oracle[key] = -1
    elif operation == "delete_range":
        lo, hi = sorted(argument)
        removed = list(oracle.irange(lo, hi))
        assert tree.delete_range(lo, hi) == len(removed)
        for key in removed:
            del oracle[key]
    elif operation == "put_many":
        batch = dict.fromkeys(sorted(argument), "bulk")
        tree.update(batch)
        oracle.update(batch)
    elif operation == "clear":
        tree.clear()
        oracle.clear()
    else:
        tree.flush()


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["int64", "str", "bytes"]), data=st.data(),
       node_size=st.sampled_from([4, 5, 8]), write_cache=st.booleans(),
       cache_size=st.sampled_from([8, 2048]))
def test_forms_follow_every_change(kind, data, node_size, write_cache, cache_size):
    keys = KEYS[kind]
    tree = TreeMap(key=kind, value="object", node_size=node_size, write_cache=write_cache,
                   cache_size=cache_size)
    oracle = SortedDict()
    initial = data.draw(st.lists(keys, max_size=60), label="initial")
    for key in initial:
        tree[key] = oracle[key] = 0
    probes = data.draw(st.lists(keys, max_size=10), label="probes")
    _check_reads(tree, oracle, probes + initial[:4])
    for operation, argument in data.draw(_operations(keys), label="operations"):
        _apply(tree, oracle, operation, argument)
        _check_reads(tree, oracle, probes + list(oracle)[:3] + list(oracle)[-3:])
    assert tree._tree.descent.form_bytes >= 0
    tree.close()


def test_splits_and_root_growth_drop_forms():
    tree, oracle = TreeMap(node_size=4, cache_size=8), SortedDict()
    for key in range(300):  # reads between inserts: every split edits nodes that have forms
        tree[key * 3] = oracle[key * 3] = key
        assert tree.get(key * 3) == key and tree.floor_key(key * 3 + 1) == key * 3
        assert tree.index(key * 3) == key and tree.peekitem(-1) == (key * 3, key)
    assert tree._tree.shape.height >= 4
    _check_reads(tree, oracle, list(range(-1, 900, 7)))
    for key in range(0, 900, 3):  # merges and root shrink, reads between deletes
        del tree[key], oracle[key]
        assert tree.get(key) is None and tree.ceiling_key(key) == (key + 3 if oracle else None)
        if oracle:
            assert tree.peekitem(0) == oracle.peekitem(0)
    assert tree._tree.shape.height == 1
    _check_reads(tree, oracle, [0, 5])


def test_the_write_around_edits_the_forms_of_the_parents_it_changes():
    """A split or a shift of a leaf the cache does not hold, in C (around.c), edits its parent's
    separators and children, and the parent's form follows the edit in place: it is still there
    after the change, says what the node says, and the table's byte count follows its size."""
    keys = np.arange(0, 100_000, 10)
    tree = TreeMap(key="int64", value="object", cache_bytes=1 << 18)  # about 230 leaves cached
    tree.put_many(keys, [""] * len(keys))  # full leaves and parents
    oracle = SortedDict.fromkeys(keys.tolist(), "")
    descent, rng = tree._tree.descent, random.Random(5)
    for _ in range(2000):  # splits of full parents, in Python, leave parents with room
        key = rng.randrange(100_000)
        tree[key] = oracle[key] = "x"
    grown = shifted = 0
    for _ in range(1500):
        key = rng.randrange(100_000)
        before = {recid: (separators, children) for recid, _, separators, children
                  in descent.forms()}
        tree[key] = oracle[key] = "x"
        forms = descent.forms()
        for recid, node, separators, children in forms:
            assert separators == node.keys and children == node.children
            if recid in before and before[recid] != (separators, children):
                grown += len(children) > len(before[recid][1])
                shifted += len(children) == len(before[recid][1])
        table = descent.form_bytes - sum(72 + 16 * len(children) for *_, children in forms)
        assert table == 0 or (table >= 128 and table & (table - 1) == 0)  # the slot array
    assert grown >= 5 and shifted >= 20  # both edits happened in place, many times
    tree._check()
    assert dict(tree.items()) == dict(oracle)
    tree.close()


def test_forms_are_bounded_by_the_cached_inner_nodes():
    tree = TreeMap(((k, "") for k in range(100_000)), node_size=4, cache_size=8)
    cache = tree._tree.cache
    for key in range(0, 100_000, 37):
        assert tree[key] == ""
        tree._tree.trim()
    forms = tree._tree.descent.forms()
    assert forms and len(forms) <= len(cache._inner) <= cache.capacity + tree._tree.shape.height
    tree._check()
    assert tree._tree.descent.form_bytes < 64 * 1024  # 8-odd forms of 4 children and the table


def test_a_db_rollback_and_a_reopen_drop_forms(tmp_path):
    path = tmp_path / "db.offheap"
    with DB.file(path) as db:
        tree = db.tree_map("t", node_size=4)
        tree.update((k, k) for k in range(0, 400, 2))
        db.commit()
        assert tree[200] == 200 and tree.floor_key(201) == 200  # forms of the committed tree
        tree.clear()
        tree.update((k, -k) for k in range(1, 400, 2))
        assert tree[201] == -201 and tree.get(200) is None  # forms of the tree rolled back
        db.rollback()
        assert tree[200] == 200 and tree.get(201) is None and tree.floor_key(201) == 200
        assert tree.index(200) == 100 and tree.peekitem(100) == (200, 200)
        tree._check()
        tree[201] = 1
        db.commit()
    with DB.file(path) as db:
        tree = db.tree_map("t")
        assert tree[201] == 1 and tree.floor_key(203) == 202 and tree.index(202) == 102
        tree._check()


@pytest.mark.parametrize("kind, keys", [
    ("str", ["", "\x00", "\x00\x00", "a", "a\x00", "a\x00b", "abcdefgh", "abcdefgh\x00",
             "abcdefghi", "abcdefgi", "é", "\ud800", "\ud7ff", "\ue000", "\uffff",
             "\U00010000", "\U0010ffff", "aaaaaaaé", "aaaaaaa\U0001f600", "aaaaaaaz"]),
    ("bytes", [b"", b"\x00", b"\x00\x00", b"a", b"a\x00", b"abcdefgh", b"abcdefgh\x00",
               b"abcdefghi", b"\xff" * 9, b"\xff" * 8, b"\x7f\xff"]),
])
def test_prefix_words_order_as_the_keys_do(kind, keys):
    keys = sorted(keys)
    tree = TreeMap(((k, i) for i, k in enumerate(keys)), key=kind, node_size=4)
    tree.flush()
    oracle = SortedDict((k, i) for i, k in enumerate(keys))
    probes = keys + [k + ("\x00" if kind == "str" else b"\x00") for k in keys]
    _check_reads(tree, oracle, probes)
    assert tree._tree.descent.forms()  # the reads went through forms


def test_reads_of_a_closed_map_raise_and_its_forms_are_gone():
    tree = TreeMap(((k, "") for k in range(1000)), node_size=4)
    assert tree[5] == "" and tree._tree.descent.forms()
    descent = tree._tree.descent
    tree.close()
    assert descent.forms() == [] and descent.form_bytes == 0
    for read in (lambda: tree[5], lambda: tree.floor_key(5), lambda: tree.index(5),
                 lambda: tree.peekitem(0)):
        with pytest.raises(ClosedError):
            read()


def test_forget_is_safe_for_any_record_id():
    tree = TreeMap(((k, "") for k in range(1000)), node_size=4)
    descent = tree._tree.descent
    assert tree[5] == ""
    for recid in (0, 1, -1, 1 << 62, tree._tree.shape.root):
        descent.forget(recid)
    descent.forget_all()
    descent.forget_all()
    assert tree[5] == "" and tree.peekitem(999) == (999, "")
    with pytest.raises(OverflowError):
        descent.forget(1 << 64)


@pytest.mark.parametrize("write_cache", [False, True])
def test_a_full_store_undoes_changes_and_their_forms(write_cache):
    tree = TreeMap(value="bytes", limit=1 << 18, node_size=4, cache_size=8,
                   write_cache=write_cache)
    oracle = SortedDict()
    failures = 0
    for key in range(0, 140_000, 7):
        try:
            tree[key] = b"v" * 60
            oracle[key] = b"v" * 60
        except CapacityError:
            failures += 1
            if failures > 3:
                break
        # reads between the writes, so that the undone nodes had forms
        assert tree.get(key) == oracle.get(key)
        assert tree.floor_key(key) == oracle.keys()[oracle.bisect_right(key) - 1]
    assert failures
    for key in list(oracle)[::5]:  # deletes of a full store: merges that may fail too
        try:
            del tree[key]
            del oracle[key]
        except CapacityError:
            pass
        assert tree.ceiling_key(key) == (oracle.keys()[oracle.bisect_left(key)]
                                         if oracle.bisect_left(key) < len(oracle) else None)
    _check_reads(tree, oracle, list(range(-7, 3000, 61)))
