"""HashMap(key=...) and HashSet(key=...) against dict and set: the contract, stateful oracles
with files and reopens, admission of each key type, long keys, seeds, bulk paths, limits."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offheap import CapacityError, HashMap, HashSet, LongHashMap
from offheap.errors import CorruptionError
from offheap.hashmap.keyedmap import ReferenceHashMap
from offheap.hashmap.keyslots import home_of, key_bytes, key_hash
from tests.contracts import MutableMappingContract, oracle_machine

LONG = "a key of more than fifteen bytes"


class TestStrHashMapContract(MutableMappingContract):
    keys = ["", "a", "user:1234567", "é" * 7, LONG, LONG + "!", "x" * 300] + \
        [f"k{i}" for i in range(150)]

    def make(self):
        return HashMap(key="str")


class TestObjectHashMapContract(MutableMappingContract):
    keys = [None, 0, -1, 2**70, 1.5, -0.0 + 2.5, "s", b"s", (1, "a"), (), ("x" * 40,)] + \
        list(range(100, 250))

    def make(self):
        return HashMap(key="object")


class TestBytesHashMapContract(MutableMappingContract):
    keys = [b"", b"\0", b"\0" * 15, b"\0" * 16, b"\xff" * 40] + [bytes([i]) * 3 for i in range(120)]

    def make(self):
        return HashMap(key="bytes")


str_keys = st.one_of(st.sampled_from(["", "a", "b", LONG, LONG + "x"]), st.text(max_size=24))
object_keys = st.one_of(st.none(), st.integers(-5, 5), st.integers(), st.booleans(),
                        st.floats(allow_nan=False), st.text(max_size=20),
                        st.binary(max_size=20), st.tuples(st.integers(-3, 3), st.text(max_size=3)))
values_strategy = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12),
                            st.binary(max_size=12), st.floats(allow_nan=False))

TestStrVersusDict = oracle_machine(lambda: HashMap(key="str"), str_keys, values_strategy,
                                   ordered=True).TestCase
TestStrVersusDict.settings = settings(max_examples=40, stateful_step_count=50, deadline=None)

TestObjectVersusDict = oracle_machine(lambda: HashMap(key="object"), object_keys,
                                      values_strategy, ordered=True).TestCase
TestObjectVersusDict.settings = settings(max_examples=40, stateful_step_count=50, deadline=None)


def test_file_map_versus_dict_with_reopen(tmp_path_factory):
    counter = iter(range(10**9))

    def make():
        return HashMap(key="str", path=tmp_path_factory.mktemp("hm") / f"m{next(counter)}")

    def reopen(old):
        path = old._store.arena.path
        old.close()
        return HashMap(path=path)

    machine = oracle_machine(make, str_keys, values_strategy, reopen=reopen, ordered=True)
    case = machine.TestCase()
    case.settings = settings(max_examples=20, stateful_step_count=40, deadline=None)
    case.runTest()


@pytest.mark.parametrize("key_type, good, bad", [
    ("str", ["", "a", "\ud800", LONG], [b"a", 1, None, ("a",)]),
    ("bytes", [b"", bytearray(b"ab"), memoryview(b"cd"), b"z" * 20], ["a", 1, None]),
    ("int64", [0, -(2**63), 2**63 - 1, True, np.int32(7)], ["1", 1.5, None]),
    ("object", [None, 1, 2.5, "s", b"s", (1, (2, "x")), np.int64(9)], [[1], {1}, float("nan")]),
])
def test_admission_stores_good_keys_and_refuses_bad_ones(key_type, good, bad):
    m = HashMap(key=key_type)
    for i, key in enumerate(good):
        m[key] = i
    assert len(m) == len(good)
    for i, key in enumerate(good):
        assert m[key] == i and key in m
    for key in bad:
        with pytest.raises((TypeError, ValueError)):
            m[key] = "x"
        assert key not in m and m.get(key, "miss") == "miss"
        with pytest.raises(KeyError):
            del m[key]
    assert len(m) == len(good)
    m._check()


def test_an_int64_map_refuses_ints_outside_int64_and_misses_them():
    m = HashMap(key="int64")
    with pytest.raises(OverflowError):
        m[2**63] = 1
    assert 2**63 not in m
    m[1] = "one"
    assert m[1.0] == m[True] == "one"  # a lookup finds the int a float or bool equals


def test_object_keys_that_are_equal_in_a_dict_are_one_key():
    m = HashMap(key="object")
    m[1] = "int"
    m[1.0] = "float"
    m[True] = "bool"
    m[np.float64(1.0)] = "numpy"
    assert len(m) == 1 and list(m.items()) == [(1, "numpy")]
    m[-0.0] = "zero"
    assert m[0] == "zero" and list(m)[-1] == 0
    m[(1, 2.0)] = "tuple"
    assert m[(True, 2)] == "tuple"
    assert dict(m) == {1: "numpy", 0: "zero", (1, 2): "tuple"}


def test_long_keys_live_in_records_that_deletes_and_clears_free():
    m = HashMap(key="str")
    records = len(m._store)
    keys = [LONG + str(i) for i in range(300)]
    for key in keys:
        m[key] = None
    assert len(m._store) == records + 300
    for key in keys[:100]:
        del m[key]
    assert len(m._store) == records + 200
    m.popitem()
    assert len(m._store) == records + 199
    m[keys[150]] = "v"  # overwritten: the key keeps its record, the value fits its slot
    assert len(m._store) == records + 199
    m.clear()
    assert len(m._store) == records and len(m) == 0
    m.put_many(keys[:50] + keys[:10], [None] * 60)  # one record a key, however often given
    assert len(m._store) == records + 50
    assert m.delete_many(keys) == 50 and len(m._store) == records
    m._check()


@pytest.mark.parametrize("str_map", [HashMap, ReferenceHashMap], ids=["default", "reference"])
def test_a_long_key_whose_record_points_outside_the_store_is_corruption(str_map):
    """A probe and an iteration read a long key's record at the address the store's index
    gives: a damaged address is a CorruptionError, never a read outside the segment."""
    m = str_map(key="str", value="int64")
    long_key = "a key too long for its slot, kept in a record"
    m[long_key] = 1
    m["short"] = 2
    store = m._keycodec.store
    (recid,) = [r for r in range(1, 64) if r in store and store.get(r) == long_key.encode()]
    store._size_at[recid] = 1 << 30
    with pytest.raises(CorruptionError, match="outside its segment"):
        long_key in m  # noqa: B015
    with pytest.raises(CorruptionError, match="outside its segment"):
        list(m)
    assert m["short"] == 2


@pytest.mark.parametrize("str_map", [HashMap, ReferenceHashMap], ids=["default", "reference"])
def test_long_keys_read_across_the_growth_of_their_store(str_map):
    """The compiled core keeps the store's index arrays and segment list between long-key reads
    while the store's attributes stay the same: reads after the store grew its index and added
    segments find the new ones, and closing still unmaps everything the store replaced."""
    m = str_map(key="str", value="int64")
    first = {f"{'early key ' * 4}{i}": i for i in range(50)}
    m.update(first)
    assert all(m[k] == v for k, v in first.items())
    store = m._keycodec.store
    capacity_before, segments_before = store._index_capacity, len(store._views)
    later = {f"{'later key ' * 4}{i}": -i for i in range(20_000)}
    m.update(later)
    assert store._index_capacity > capacity_before and len(store._views) > segments_before
    assert all(m[k] == v for k, v in first.items()) and all(m[k] == v for k, v in later.items())
    assert dict(m.items()) == {**first, **later}
    m.close()


def test_each_map_draws_its_own_seed_and_keeps_it_in_its_file(tmp_path):
    a, b = HashMap(key="str"), HashMap(key="str")
    assert a._keycodec.seed != b._keycodec.seed
    path = tmp_path / "m"
    with HashMap(key="str", path=path) as m:
        m["k"] = 1
        seed = m._keycodec.seed
    with HashMap(path=path) as m:
        assert m._keycodec.seed == seed and m["k"] == 1 and m.key_type == "str"


def test_keys_crafted_to_collide_under_one_seed_spread_under_the_maps_own():
    """Keys that all share one home under a known seed (what an attacker could craft without
    the map's seed) stay spread out in a map: its probe lengths stay short."""
    fixed = bytes(16)
    homes = 1 << 14
    crafted = [key for key in (f"user:{i}" for i in range(400_000))
               if home_of(key_hash(fixed, key_bytes("str", key)), homes) == 0][:20]
    assert len(crafted) == 20
    m = HashMap(key="str")
    for key in crafted:
        m[key] = 1
    spread = {home_of(key_hash(m._keycodec.seed, key_bytes("str", key)), m._homes)
              for key in crafted}
    assert len(spread) >= 15
    m._check()


def test_a_file_of_one_key_type_opened_as_another_says_which(tmp_path):
    path = tmp_path / "m"
    HashMap(key="str", path=path).close()
    with pytest.raises(ValueError, match='key="str"'):
        HashMap(key="bytes", path=path)
    with pytest.raises(ValueError, match="HashMap"):
        LongHashMap(path=path)
    other = tmp_path / "long"
    LongHashMap(path=other).close()
    with pytest.raises(ValueError, match="LongHashMap"):
        HashMap(path=other)
    with pytest.raises(ValueError, match="not a HashSet"):
        HashSet(path=path)


def test_bulk_paths_take_lists_and_numpy_arrays():
    m = HashMap(key="str")
    keys = np.array([f"user:{i}" for i in range(1000)])
    m.put_many(keys, list(range(1000)))
    assert m.get_many(keys[::100]) == list(range(0, 1000, 100))
    assert m.get_many(["nope", "user:5"], default=-1) == [-1, 5]
    assert m.contains_many(np.array(["user:1", "x"])).tolist() == [True, False]
    assert m.delete_many(["user:1", "user:1", "x"]) == 1
    m.put_many(["a", "b", "a"], [1, 2, 3])  # dict.update's order and last value
    assert list(m.items())[-2:] == [("a", 3), ("b", 2)]
    with pytest.raises(ValueError, match="2 keys but 1 values"):
        m.put_many(["a", "b"], [1])
    before = dict(m)
    with pytest.raises(TypeError):
        m.put_many(["fine", 5], [1, 2])  # admitted first: nothing stored
    assert dict(m) == before
    m._check()


def test_a_full_map_raises_capacity_error_and_keeps_its_entries():
    m = HashMap(key="str", limit=600_000)
    stored = {}
    with pytest.raises(CapacityError):
        for i in range(10**6):
            key = f"{LONG}{i}" if i % 3 else f"k{i}"
            m[key] = i
            stored[key] = i
    assert dict(m) == stored
    m._check()
    before = dict(m)
    with pytest.raises(CapacityError):
        m.put_many([f"{LONG}new{i}" for i in range(20_000)], list(range(20_000)))
    assert dict(m) == before
    m._check()


def test_copies_and_pickles_are_independent_and_keep_key_type_and_order():
    m = HashMap({LONG: [1], "b": 2}, key="str", value="object")
    for twin in (m.copy(), pickle.loads(pickle.dumps(m))):
        assert twin == m and twin.key_type == "str" and list(twin) == list(m)
        twin[LONG] = "changed"
        assert m[LONG] == [1]


def test_hashset_is_a_set_of_its_key_type():
    s = HashSet(["a", LONG, "b"], key="str")
    t = HashSet(["b", "c"], key="str")
    assert s | t == {"a", LONG, "b", "c"} and s & t == {"b"} and s - t == {"a", LONG}
    assert s ^ t == {"a", LONG, "c"} and not s.isdisjoint(t) and (s & t) <= s
    assert list(s | t) == ["a", LONG, "b", "c"]  # this set's order, then the other's
    s.add("d")
    s.discard("a")
    assert list(s) == [LONG, "b", "d"] and 5 not in s and s.pop() == "d"
    with pytest.raises(TypeError):
        s.add(5)
    s.add_many(np.array(["x", "y"]))
    assert s.contains_many(["x", "q"]).tolist() == [True, False]
    assert s.discard_many(["x", "q"]) == 1
    assert pickle.loads(pickle.dumps(s)) == s and s.copy() == s
    s._check()
    with pytest.raises(TypeError):
        s["a"]


set_elements = st.one_of(st.sampled_from(["a", LONG]), st.text(max_size=20))


def test_hashset_versus_set_on_random_operations():
    @st.composite
    def operations(draw):
        return draw(st.lists(st.tuples(st.sampled_from(["add", "discard", "pop", "update"]),
                                       st.lists(set_elements, max_size=4)), max_size=40))

    @given(operations())
    @settings(max_examples=40, deadline=None)
    def run(ops):
        s, oracle = HashSet(key="str"), {}
        for op, elements in ops:
            if op == "add" and elements:
                s.add(elements[0])
                oracle.setdefault(elements[0], None)
            elif op == "discard" and elements:
                s.discard(elements[0])
                oracle.pop(elements[0], None)
            elif op == "pop" and oracle:
                assert s.pop() == oracle.popitem()[0]
            elif op == "update":
                s.update(elements)
                for element in elements:
                    oracle.setdefault(element, None)
            assert list(s) == list(oracle)
        s._check()

    run()


def test_bulk_paths_take_numpy_string_arrays_of_every_kind():
    words = ["", "a", "user:1234567", "é" * 9, LONG]
    m = HashMap(key="str")
    m.put_many(np.array(words), list(range(len(words))))
    assert m.get_many(np.array(words, dtype=np.dtypes.StringDType())) == list(range(len(words)))
    assert m.contains_many(np.array(words, dtype=object)).all()
    b = HashMap(key="bytes")
    raw = np.array([w.encode() for w in words], dtype="S")  # numpy strips trailing NULs
    b.put_many(raw, list(range(len(words))))
    assert b.get_many([w.encode() for w in words]) == list(range(len(words)))
    assert b.delete_many(raw[:2]) == 2 and len(b) == len(words) - 2


def test_put_many_of_str_keys_stores_inline_and_long_values_as_the_reference_does():
    """The compiled core encodes the leading run of inline values in C; the words, and so the
    items, are those of the reference's Python encoding whatever the mix."""
    values = [""] * 300 + ["a value long enough to need a record", 7, None, "é", b"b"] * 40
    keys = [f"user:{i}" for i in range(len(values))]
    maps = [HashMap(key="str"), ReferenceHashMap(key="str")]
    for m in maps:
        m.put_many(keys, values)
        m._check()
    assert list(maps[0].items()) == list(maps[1].items()) == list(zip(keys, values))
    entries = np.arange(len(values))
    assert np.array_equal(*(m._table().values.take(entries) for m in maps))


@pytest.mark.parametrize("cls", [HashMap, ReferenceHashMap])
def test_get_many_in_the_entries_order_finds_keys_past_holes_long_keys_and_moved_keys(cls):
    """The compiled get_many tries the entry after the last hit first: a hole there holding the
    key (deleted, then put again at the end), a long key (whose slot holds only a tag) and keys
    in another order must still be found where they are."""
    keys = [f"k{i}" if i % 5 else f"a key long enough for a record of its own {i}"
            for i in range(600)]
    m = cls(key="str")
    m.put_many(keys, list(range(600)))
    for k in keys[100:109] + keys[110:120]:
        del m[k]
    m.put_many(keys[110:112], [-1, -2])  # at the end; their holes, after entry 109, keep them
    expected = {k: v for k, v in zip(keys, range(600)) if v == 109 or not 100 <= v < 120}
    expected.update({keys[110]: -1, keys[111]: -2})
    for order in (keys, keys[::-1], keys[:300] + keys[:300], [keys[0], "absent", keys[1]]):
        assert m.get_many(order, default=None) == [expected.get(k) for k in order]
    m._check()
