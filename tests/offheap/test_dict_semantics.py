"""Every map behaves as a dict where a dict user would notice: values stored by value, independent
copies and pickles, dict's constructors and operators, foreign keys as misses, mutation during
iteration caught at the next step, no reference cycles.

The LongHashMap runs on both cores (``LongHashMap`` on the compiled one when it is built, and
``ReferenceLongHashMap`` on the pure-Python reference); multiprocessing round trips run the
receiving process on each core.
"""

from __future__ import annotations

import copy
import gc
import math
import multiprocessing
import pickle
import weakref

import numpy as np
import pytest

from offheap import DB, LongHashMap, TreeMap
from offheap.hashmap.longhashmap import ReferenceLongHashMap

MAKERS = {
    "hash": LongHashMap,
    "hash-reference": ReferenceLongHashMap,
    "tree": lambda *args, **options: TreeMap(*args, node_size=4, cache_size=8, **options),
}


@pytest.fixture(params=sorted(MAKERS))
def make(request):
    return MAKERS[request.param]


# -- store by value, return a fresh object -----------------------------------------------------

def test_equal_mutable_values_are_separate_objects(make):
    m = make()
    m[1] = []
    m[2] = []
    m[1].append("x")
    assert m[1] == [] and m[2] == []
    assert m[1] is not m[1]
    groups = make()
    for key, item in [(1, "a"), (2, "b"), (1, "c"), (2, "d")]:
        groups[key] = groups.setdefault(key, []) + [item]  # the idiom that works
    assert dict(groups.items()) == {1: ["a", "c"], 2: ["b", "d"]}


def test_no_read_hands_out_the_stored_object(make):
    m = make()
    m.update((k, [k]) for k in range(40))
    reads = list(m.values()) + [v for _, v in m.items()] + [m.get(3), m[4], m.setdefault(5)]
    if hasattr(m, "get_many"):
        reads += m.get_many(range(40))
    if hasattr(m, "peekitem"):  # the sorted and positional reads of a TreeMap
        reads += [m.peekitem(6)[1], m.floor_item(7)[1], m.ceiling_item(8)[1], m.items()[9][1],
                  m.values()[10]] + m.values()[11:14]
    for value in reads:
        value.append("changed")
    assert dict(m.items()) == {k: [k] for k in range(40)}
    assert m.pop(5) == [5] and m.popitem()[1] in ([39], [0])


def test_tree_reads_do_not_depend_on_the_cache():
    tree = TreeMap(node_size=4, cache_size=8)
    tree[0] = ["kept"]
    tree[0].append("lost")
    assert tree[0] == ["kept"]
    tree.update((k, k) for k in range(1, 200))  # evicts the leaf of key 0
    assert tree[0] == ["kept"]


# -- copies and pickles ------------------------------------------------------------------------

def test_copies_are_independent(make):
    m = make()
    m.update((k, [k]) for k in range(100))
    for twin in (m.copy(), copy.copy(m), copy.deepcopy(m)):
        assert type(twin) is type(m) and twin == m
        twin[1000] = "new"
        twin.clear()
        assert len(m) == 100 and 1000 not in m and m[7] == [7]
    m._check()


def test_deepcopy_of_a_structure_holding_maps(make):
    m = make()
    m[1] = "one"
    outer = {"a": m, "b": m}
    twin = copy.deepcopy(outer)
    assert twin["a"] is twin["b"] and twin["a"] is not m and twin["a"] == m


def test_pickle_round_trip_keeps_class_options_and_order(make):
    m = make(value="object")
    m.update([(5, "five"), (1, [1]), (3, None), (2**40, b"x" * 100)])
    back = pickle.loads(pickle.dumps(m))
    assert type(back) is type(m) and list(back.items()) == list(m.items())
    back._check()
    typed = make(value="float64", limit=1 << 24)
    typed.put_many(np.arange(1000), np.arange(1000) / 4)
    back = pickle.loads(pickle.dumps(typed))
    assert back == typed and back.stats().n_entries == 1000
    assert back._store.arena.limit_bytes == 1 << 24


def test_pickle_is_packed_columns_not_objects(make):
    m = make(value="int64")
    m.put_many(np.arange(100_000), np.arange(100_000))
    data = pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL)
    assert len(data) < 100_000 * 16 + 1000  # two raw int64 columns and a header
    assert pickle.dumps(dict(m.items())).__len__() > len(data)


def test_str_keyed_tree_pickles():
    tree = TreeMap(key="str", value="str", alpha="a", beta="b")
    assert pickle.loads(pickle.dumps(tree)) == {"alpha": "a", "beta": "b"}


def test_a_map_in_a_file_refuses_to_pickle_and_says_what_to_do(make, tmp_path):
    with make(path=tmp_path / "map") as m:
        m[1] = 1
        with pytest.raises(TypeError, match=r"m.copy\(\).*reader\(path\)"):
            pickle.dumps(m)
        assert pickle.loads(pickle.dumps(m.copy())) == {1: 1}


def test_a_collection_of_a_memory_db_pickles_by_value():
    with DB.memory() as db:
        tree, table = db.tree_map("t"), db.hash_map("h")
        tree[1] = table[1] = "x"
        assert pickle.loads(pickle.dumps(tree)) == {1: "x"}
        assert pickle.loads(pickle.dumps(table)) == {1: "x"}


def _child_round_trip(data: bytes) -> tuple[bytes, bool]:
    import offheap

    m = pickle.loads(data)
    m[-1] = ["from the child"]
    return pickle.dumps(m), offheap.compiled


@pytest.mark.parametrize("pure", [True, False], ids=["child-reference", "child-compiled"])
def test_multiprocessing_round_trip(make, pure, monkeypatch):
    import offheap

    if not pure and not offheap.compiled:
        pytest.skip("the compiled core is not built")
    m = make()
    m.update((k, {"k": k}) for k in range(50))
    monkeypatch.setenv("OFFHEAP_PURE_PYTHON", "1") if pure else monkeypatch.delenv(
        "OFFHEAP_PURE_PYTHON", raising=False)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        data, compiled = pool.apply(_child_round_trip, (pickle.dumps(m),))
    back = pickle.loads(data)
    assert compiled is not pure
    assert back[-1] == ["from the child"] and len(back) == 51 and back[7] == {"k": 7}
    assert -1 not in m


# -- constructors and operators ----------------------------------------------------------------

def test_constructor_forms(make):
    assert dict(make({1: "a", 2: "b"}).items()) == {1: "a", 2: "b"}
    assert dict(make([(3, "c"), (1, "a"), (3, "d")]).items()) == {3: "d", 1: "a"}
    assert dict(make(make({1: "x"})).items()) == {1: "x"}
    assert make([(1, 2)], value="int64")[1] == 2
    with pytest.raises(ValueError, match="not a .key, value. pair"):
        make("int64")  # the value type is a keyword option, after the data, as dict("int64")


def test_str_tree_takes_keyword_entries():
    tree = TreeMap({"b": 2}, key="str", a=1, node_size=8)
    assert dict(tree.items()) == {"a": 1, "b": 2} and tree.options["node_size"] == 8
    with pytest.raises(TypeError, match="str keys"):
        TreeMap(a=1)


def test_fromkeys(make):
    m = type(make()).fromkeys([3, 1, 2], 0, value="int64")
    assert type(m) is type(make()) and dict(m.items()) == {1: 0, 2: 0, 3: 0}
    m = type(make()).fromkeys(range(3))
    assert dict(m.items()) == dict.fromkeys(range(3))


def test_or_operators(make):
    m = make({1: "a", 2: "b"})
    merged = m | {2: "B", 3: "C"}
    assert type(merged) is type(m) and merged == {1: "a", 2: "B", 3: "C"} and len(m) == 2
    left = {2: "x", 9: "y"} | m
    assert type(left) is type(m) and left == {2: "b", 9: "y", 1: "a"}
    alias = m
    m |= [(4, "d")]
    assert m is alias and m[4] == "d"
    with pytest.raises(TypeError):
        m | [(5, "e")]


def test_hash_map_reversed_is_reverse_insertion_order():
    for cls in (LongHashMap, ReferenceLongHashMap):
        m = cls([(5, "a"), (1, "b"), (3, "c")])
        del m[1]
        m[0] = "d"
        assert list(reversed(m)) == [0, 3, 5]
        assert list(reversed(m.values())) == ["d", "c", "a"]
        assert list(reversed(m.items())) == [(0, "d"), (3, "c"), (5, "a")]


def test_equality_is_identity_then_equality(make):
    m = make({1: float("nan")})
    assert m == m and not (m != m)
    assert math.isnan(m[1]) and m != make({1: float("nan")})  # two NaN objects differ
    assert make({1: 2}) == {1: 2} and make({1: 2}) != {1: 3} and make({1: 2}) != {2: 2}
    assert make({1: 2}) != [(1, 2)]


def test_update_means_what_it_means_for_a_dict(make):
    m = make()
    m.update((np.array([1, 2]), np.array([3, 4])))  # a sequence of two pairs
    assert dict(m.items()) == {1: 2, 3: 4}
    m.put_many(np.array([1, 2]), np.array([30, 40]))  # columns have their own call
    assert dict(m.items()) == {1: 30, 2: 40, 3: 4}
    m.put_many([7, 7], ["first", "last"])
    assert m[7] == "last"


# -- foreign keys ------------------------------------------------------------------------------

def test_get_pop_and_setdefault_take_positional_arguments_only(make):
    m, d = make({1: "a"}), {1: "a"}
    for mapping in (m, d):
        assert mapping.get(1) == "a" and mapping.get(2, "z") == "z"
        assert mapping.setdefault(3, "c") == "c" and mapping.pop(3) == "c"
        assert mapping.pop(4, "y") == "y"
        for call in (lambda: mapping.get(key=1), lambda: mapping.get(1, default=0),
                     lambda: mapping.setdefault(1, default=0)):
            with pytest.raises(TypeError):
                call()


@pytest.mark.parametrize("foreign", ["a", None, 2**63, -2**63 - 1, 1.5, b"1", (1,)])
def test_a_key_no_int64_key_can_equal_is_a_miss(make, foreign):
    m = make({1: "one"})
    assert foreign not in m and m.get(foreign) is None and m.get(foreign, 0) == 0
    assert m.pop(foreign, "dflt") == "dflt"
    with pytest.raises(KeyError):
        m[foreign]
    with pytest.raises(KeyError):
        del m[foreign]
    with pytest.raises((TypeError, OverflowError)):
        m[foreign] = 1
    assert dict(m.items()) == {1: "one"}


def test_keys_equal_to_an_int_find_it(make):
    m = make({1: "one", 0: "zero"})
    for key in (True, 1.0, np.int64(1), np.uint8(1)):
        assert key in m and m[key] == "one" and m.get(key) == "one"
    m[True] = "true"
    assert list(m) in ([1, 0], [0, 1]) and all(type(k) is int for k in m)  # stored as int64


EDGE_INTS = sorted({sign * (base + delta) for base in (0, 2**15, 2**30, 2**45, 2**60, 2**62)
                    for delta in (-1, 0, 1) for sign in (1, -1)} | {2**63 - 1, -2**63})


@pytest.mark.parametrize("value", ["object", "int64"])
def test_int_keys_and_values_at_every_digit_boundary(value):
    """Keys and values around each width of an int's digits, up to int64's ends, on both hash
    cores: stored, found, iterated and overwritten exactly; one past the ends is a miss, and
    storing it raises OverflowError."""
    for make in (MAKERS["hash"], MAKERS["hash-reference"]):
        m = make(value=value)
        for k in EDGE_INTS:
            m[k] = -1 - k if value == "int64" else k
        assert dict(m.items()) == {k: -1 - k if value == "int64" else k for k in EDGE_INTS}
        for k in EDGE_INTS:
            assert k in m and m[k] == m.get(k) == (-1 - k if value == "int64" else k)
        for outside in (2**63, -2**63 - 1, 2**64, -2**64 - 1):
            assert outside not in m and m.get(outside, "miss") == "miss"
            with pytest.raises(OverflowError):
                m[outside] = 1
            if value == "int64":
                with pytest.raises(OverflowError):
                    m[1] = outside
        m._check()


def test_str_tree_lookups_of_other_types_miss():
    tree = TreeMap(key="str", a=1)
    assert 1 not in tree and tree.get(b"a") is None and tree.pop(None, 5) == 5


# -- mutation during iteration -----------------------------------------------------------------

@pytest.mark.parametrize("maker", ["hash", "hash-reference", "tree", "str-hash"])
def test_items_kept_by_the_caller_never_change(maker):
    """The compiled items iterators reuse a (key, value) tuple only while nobody else holds it:
    items a loop keeps (every one, every other one, the last one) stay what they were."""
    entries = [(k, k * 3) for k in range(-300, 300)]
    if maker == "str-hash":
        from offheap import HashMap
        entries = [(f"key:{k}" * (1 + k % 3), k) for k, _ in entries]
        m = HashMap(entries, key="str", value="int64")
    else:
        m = {**MAKERS, "tree": TreeMap}[maker](entries)
    expected = list(dict(entries).items()) if maker != "tree" else sorted(entries)
    assert list(m.items()) == expected
    every_other = [item for i, item in enumerate(m.items()) if i % 2 == 0]
    assert every_other == expected[::2]
    last = None
    for item in m.items():
        assert last is None or last != item
        last = item
    assert last == expected[-1]
    pairs = iter(m.items())
    first, second, third = next(pairs), next(pairs), next(pairs)
    assert (first, second, third) == tuple(expected[:3])
    assert list(pairs) == expected[3:]


@pytest.mark.parametrize("change", ["insert", "delete"])
def test_mutation_during_iteration_raises_at_the_next_step(make, change):
    m = make((k, k) for k in range(1000))
    bodies = 0
    with pytest.raises(RuntimeError, match="changed size during iteration"):
        for key in m:
            bodies += 1
            if change == "insert":
                m[10_000 + key] = 0
            else:
                del m[key]
    assert bodies == 1


def test_tree_views_and_ranges_raise_at_the_next_step():
    tree = TreeMap(((k, k) for k in range(1000)), node_size=32)
    for iterate in (tree.values, tree.items, lambda: tree.irange(10, 500), lambda: reversed(tree)):
        iterator = iter(iterate())
        next(iterator)
        tree[-1 - len(tree)] = 0
        with pytest.raises(RuntimeError):
            next(iterator)


# -- no reference cycles -----------------------------------------------------------------------

def _freed_at_once(build) -> bool:
    gc.collect()
    gc.disable()
    try:
        obj = build()
        ref = weakref.ref(obj)
        del obj
        return ref() is None
    finally:
        gc.enable()


def _used(m):
    m.update((k, [k]) for k in range(100))
    list(m.items()), list(m.values()), m.keys(), m.get(3), m.copy()
    return m


@pytest.mark.parametrize("options", [{}, {"flush_delay": 10_000}, {"write_cache": False}])
def test_a_tree_is_freed_at_once(options):
    assert _freed_at_once(lambda: _used(TreeMap(**options)))


def test_hash_maps_and_dbs_are_freed_at_once():
    assert _freed_at_once(lambda: _used(LongHashMap()))
    assert _freed_at_once(lambda: _used(ReferenceLongHashMap()))

    def db_with_maps():
        db = DB.memory()
        _used(db.tree_map("t", flush_delay=10_000))
        _used(db.hash_map("h"))
        return db

    assert _freed_at_once(db_with_maps)
