"""TreeMap's item slots (offheap/treemap/csrc/slots.c, offheap/treemap/slots.py): ``m[k]``,
``k in m``, ``m.get(k, default)`` and ``m[k] = v`` run in C for keys of exactly the key type,
and by the map's Python methods for everything else, with the same answers, errors and trees on
both paths.

Each case runs on a map with the compiled slots attached and on the same map with them detached
(every call through the reference), and compares both with a dict: keys of other types (bool,
float, numpy ints, ints beyond int64, str in an int64 map), tuple keys in KeyError, mutable values
handed out as fresh copies, pickled values refused by ``[]`` but found by ``in``, a cache over
capacity, a close while another thread holds the lock; stores in order and at random with
overwrites, splits and deletes, values that need pickle, typed values, maps with a limit or a
flush timer (whose stores stay in Python).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from offheap import DB, TreeMap
from offheap.errors import ClosedError, PickleNotAllowedError
from offheap.treemap import slots

COMPILED = slots.TreeSlotsBase is not slots.TreeSlots


@pytest.fixture(params=["slots", "reference"])
def path(request):
    if request.param == "slots" and not COMPILED:
        pytest.skip("the compiled core is not loaded")
    return request.param


def _on(path: str, tree: TreeMap) -> TreeMap:
    if path == "reference":
        tree._detach_slots()
    return tree


PROBES = [0, 1, -1, 5, True, False, 1.0, 1.5, np.int64(3), np.int32(4), 1 << 70, -(1 << 70),
          "1", b"1", None, (1,)]


def test_int64_keys_of_every_type_answer_as_a_dict(path):
    expected = {k: f"v{k}" for k in range(-3, 10)}
    tree = _on(path, TreeMap(expected.items(), node_size=4))
    for key in PROBES:
        try:
            hash(key)
        except TypeError:
            continue
        assert (key in tree) == (key in expected), key
        assert tree.get(key) == expected.get(key), key
        assert tree.get(key, "d") == expected.get(key, "d"), key
        if key in expected:
            assert tree[key] == expected[key]
        else:
            with pytest.raises(KeyError) as raised:
                tree[key]
            assert raised.value.args == (key,)


def test_str_keys(path):
    expected = {"a": 1, "é": 2, "\U0001f600": 3, "": 4}
    tree = _on(path, TreeMap(expected.items(), key="str", node_size=4))
    for key in [*expected, "b", b"a", 1, None]:
        assert (key in tree) == (key in expected)
        assert tree.get(key, "d") == expected.get(key, "d")


def test_a_tuple_key_is_the_one_argument_of_key_error(path):
    tree = _on(path, TreeMap({1: ""}))
    with pytest.raises(KeyError) as raised:
        tree[(1, 2)]
    assert raised.value.args == ((1, 2),)


def test_get_takes_one_or_two_positional_arguments(path):
    tree = _on(path, TreeMap({1: "x"}))
    assert tree.get(1) == "x"
    with pytest.raises(TypeError):
        tree.get()
    with pytest.raises(TypeError):
        tree.get(1, 2, 3)
    with pytest.raises(TypeError):
        tree.get(1, default=2)


def test_mutable_values_are_fresh_copies(path):
    tree = _on(path, TreeMap({1: {"a": [1]}}))
    first, second = tree[1], tree.get(1)
    assert first == second == {"a": [1]} and first is not second
    first["a"].append(2)
    assert tree[1] == {"a": [1]}


def test_a_pickled_value_is_refused_but_its_key_is_found(tmp_path, path):
    with DB.file(tmp_path / "d.offheap", allow_pickle=True) as db:
        db.tree_map("t")[1] = {"a": 1}
    with DB.file(tmp_path / "d.offheap") as db:
        tree = _on(path, db.tree_map("t"))
        assert 1 in tree and 2 not in tree
        with pytest.raises(PickleNotAllowedError):
            tree[1]
        with pytest.raises(PickleNotAllowedError):
            tree.get(1)


def test_reads_through_a_cache_over_capacity(path):
    tree = _on(path, TreeMap(((k, k) for k in range(2000)), node_size=4, cache_size=8))
    assert [tree[k] for k in range(0, 2000, 7)] == list(range(0, 2000, 7))
    assert [k in tree for k in range(-5, 2005, 11)] == [0 <= k < 2000 for k in range(-5, 2005, 11)]
    tree._check()


def test_a_closed_map_raises_closed_error(path):
    tree = _on(path, TreeMap({1: ""}))
    tree.close()
    for read in (lambda: tree[1], lambda: tree.get(1), lambda: 1 in tree, lambda: tree[True]):
        with pytest.raises(ClosedError):
            read()


def test_a_close_while_a_reader_waits_for_the_lock_raises_closed_error(path):
    tree = _on(path, TreeMap({k: k for k in range(100)}))
    outcome: list = []
    tree._lock.acquire()
    reader = threading.Thread(target=lambda: outcome.append(_read_or_error(tree)))
    reader.start()
    reader.join(0.2)  # the reader now waits for the lock
    tree.close()
    tree._lock.release()
    reader.join()
    assert outcome == [ClosedError]


def test_a_reader_and_a_writer_wait_while_another_thread_holds_the_lock(path):
    tree = _on(path, TreeMap({k: k for k in range(100)}))
    if COMPILED:  # the lock the compiled item slots take without a Python call
        assert type(tree._lock).__name__ == "MapLock"
    done: list = []
    tree._lock.acquire()
    threads = [threading.Thread(target=lambda: done.append(tree[5])),
               threading.Thread(target=lambda: done.append(tree.__setitem__(200, 1)))]
    for thread in threads:
        thread.start()
    threads[0].join(0.2)
    assert done == [] and 200 not in tree  # the holder re-enters it: its own reads go in
    tree._lock.release()
    for thread in threads:
        thread.join()
    assert sorted(done, key=repr) == [5, None] and tree[200] == 1
    tree._check()


def _read_or_error(tree: TreeMap):
    try:
        return tree[5]
    except Exception as exc:  # the test compares the class
        return type(exc)


def test_threads_read_while_another_writes(path):
    tree = _on(path, TreeMap({k: k for k in range(0, 4000, 2)}, node_size=8, cache_size=16))
    errors: list = []

    def read():
        for _ in range(3):
            for k in range(0, 4000, 2):
                if tree.get(k) != k:
                    errors.append(k)

    def write():
        for k in range(1, 4000, 2):
            tree[k] = k
        for k in range(1, 4000, 2):
            del tree[k]

    threads = [threading.Thread(target=read), threading.Thread(target=read),
               threading.Thread(target=write)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(tree) == 2000
    tree._check()


@settings(max_examples=30, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["set", "del", "flush"]),
                              st.integers(-50, 50)), max_size=120),
       probes=st.lists(st.integers(-60, 60), max_size=30))
def test_slots_and_reference_agree_after_random_changes(ops, probes):
    tree, oracle = TreeMap(node_size=4, cache_size=8), {}
    for op, key in ops:
        if op == "set":
            tree[key] = oracle[key] = [key]
        elif op == "del" and key in oracle:
            del tree[key], oracle[key]
        elif op == "flush":
            tree.flush()
    slots = [(tree.get(k, "d"), k in tree) for k in probes]
    tree._detach_slots()
    reference = [(tree.get(k, "d"), k in tree) for k in probes]
    assert slots == reference == [(oracle.get(k, "d"), k in oracle) for k in probes]


def test_index_is_one_descent_with_the_answers_of_sorted_dict(path):
    from sortedcontainers import SortedDict

    oracle = SortedDict((k, "") for k in range(0, 600, 3))
    tree = _on(path, TreeMap(oracle.items(), node_size=4, cache_size=8))
    for key in range(-3, 603):
        for start, stop in ((None, None), (10, 50), (-20, None)):
            try:
                expected = oracle.index(key, start, stop)
            except ValueError:
                with pytest.raises(ValueError):
                    tree.index(key, start, stop)
            else:
                assert tree.index(key, start, stop) == expected


STORE_OPTIONS = [dict(), dict(node_size=4, cache_size=8), dict(write_cache=False),
                 dict(limit="64MiB"), dict(flush_delay=50.0), dict(value="int64"),
                 dict(value="str", node_size=4), dict(value="bytes"), dict(value="float64")]
VALUE_OF = {"object": lambda k: f"v{k}", "str": lambda k: f"v{k}", "bytes": lambda k: b"v%d" % k,
            "int64": lambda k: k * 3, "float64": lambda k: k / 4}


@pytest.mark.parametrize("options", STORE_OPTIONS, ids=lambda o: ",".join(o) or "default")
@settings(max_examples=25, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["set", "set", "del", "flush"]),
                              st.integers(-40, 40)), max_size=150),
       ascending=st.booleans())
def test_stores_leave_the_tree_the_reference_leaves(options, ops, ascending):
    if ascending:
        ops = [("set", k) for k in range(len(ops))] + ops
    value_of = VALUE_OF[options.get("value", "object")]
    trees = [TreeMap(**options), TreeMap(**options)]
    trees[1]._detach_slots()
    oracle: dict = {}
    for op, key in ops:
        for tree in trees:
            if op == "set":
                tree[key] = value_of(key)
            elif op == "del" and key in oracle:
                del tree[key]
            elif op == "flush":
                tree.flush()
        if op == "set":
            oracle[key] = value_of(key)
        elif op == "del":
            oracle.pop(key, None)
    for tree in trees:
        tree._check()
        assert dict(tree.items()) == oracle and len(tree) == len(oracle)
        assert tree.stats().n_leaves == trees[0].stats().n_leaves
    for tree in trees:
        tree.close()


def test_stored_values_of_every_kind(path):
    tree = _on(path, TreeMap(node_size=4))
    values = [None, True, 1, 1.5, "s", b"b", [1], {"a": 1}, (1, 2), 2 ** 80]
    for key, value in enumerate(values):
        tree[key] = value
    assert [tree[k] for k in range(len(values))] == values
    tree[6].append(2)  # a fresh copy: the stored list is unchanged
    assert tree[6] == [1]
    with pytest.raises(TypeError):
        tree["x"] = 1
    with pytest.raises((TypeError, OverflowError, ValueError)):
        tree[1 << 70] = 1
    tree[True] = "bool key"  # True == 1, as in a dict
    assert tree[1] == "bool key" and len(tree) == len(values)
    tree._check()


def test_a_store_into_a_closed_map_raises_closed_error(path):
    tree = _on(path, TreeMap({1: ""}))
    tree.close()
    with pytest.raises(ClosedError):
        tree[2] = ""
    with pytest.raises(ClosedError):
        del tree[1]


def test_a_typed_map_refuses_a_value_of_another_type_on_both_paths(path):
    tree = _on(path, TreeMap(value="int64"))
    tree[1] = 5
    with pytest.raises(Exception) as raised:
        tree[2] = "five"
    reference = TreeMap(value="int64")
    reference._detach_slots()
    with pytest.raises(type(raised.value)):
        reference[2] = "five"
    assert dict(tree.items()) == {1: 5}


def _pages_and_placement(tree: TreeMap) -> tuple:
    """Every record's page, where the record store put it, and its byte counts."""
    store = tree._tree.nodes.store
    pages = [bytes(store.view(recid)) for recid in sorted(tree._tree.all_recids())]
    return pages, store._addr.tolist(), store._size.tolist(), store.stats()


@settings(max_examples=30, deadline=None)
@given(runs=st.lists(st.tuples(st.integers(0, 3000), st.integers(1, 300)), min_size=1,
                     max_size=6),
       holes=st.lists(st.integers(0, 3300), max_size=40),
       options=st.sampled_from([dict(node_size=4, cache_size=8), dict(node_size=8, cache_size=8),
                                dict(node_size=16, cache_size=64), dict(write_cache=False,
                                                                        node_size=4)]))
def test_ascending_runs_split_the_hint_leaf_as_the_reference_does(runs, holes, options):
    """Runs of ascending keys split full leaves at their end in C (a sibling with room, a full
    parent and the root leaving it to the reference), deletes in between leave siblings with
    room; both paths write the same pages into the same places, through cache evictions."""
    trees = [TreeMap(**options), TreeMap(**options)]
    trees[1]._detach_slots()
    oracle: dict = {}
    for (start, length), hole in zip(runs, holes + [None] * len(runs)):
        for key in range(start, start + length):
            for tree in trees:
                tree[key] = ""
            oracle[key] = ""
        if hole is not None and hole in oracle:
            for tree in trees:
                del tree[hole]
            del oracle[hole]
    for tree in trees:
        tree._check()
        assert dict(tree.items()) == oracle and len(tree) == len(oracle)
        tree.flush()
    assert _pages_and_placement(trees[0]) == _pages_and_placement(trees[1])
    for tree in trees:
        tree.close()
