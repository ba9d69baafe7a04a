"""LongHashSet: the set interface, foreign elements, the algebra and its fast paths, bulk paths,
limits, files, pickles and the table of width 0 (golden bytes), on both cores.

``golden/hashset_table.bin`` pins the bytes a fixed sequence of operations leaves in a set's
metadata, chunk list, index and chunks (no values region); both cores must write them.
"""

import copy
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest

from offheap import CapacityError, ClosedError, DB, LongHashMap, LongHashSet
from offheap.hashmap.layout import SET_VALUE_TYPE, chunk_bytes, parse_meta
from offheap.hashmap.longhashset import ReferenceLongHashSet

GOLDEN = Path(__file__).parent / "golden"
cores = pytest.mark.parametrize("cls", [LongHashSet, ReferenceLongHashSet],
                                ids=["default", "reference"])


@cores
def test_the_set_interface_matches_a_python_set(cls):
    s = cls([5, 3, 9, 3])
    assert len(s) == 3 and list(s) == [5, 3, 9]  # insertion order, duplicates once
    s.add(1)
    s.add(5)
    s.discard(3)
    s.discard(42)
    assert list(s) == [5, 9, 1]
    s.remove(9)
    with pytest.raises(KeyError):
        s.remove(9)
    assert s.pop() == 1 and list(s) == [5]
    s.clear()
    assert not s and len(s) == 0
    with pytest.raises(KeyError, match="empty"):
        s.pop()
    s._check()


@cores
def test_foreign_elements_are_misses_and_refused_when_added(cls):
    s = cls([1, 2])
    for foreign in ("a", 2**70, -(2**64), 1.5, None, (1,)):
        assert foreign not in s
        s.discard(foreign)
        with pytest.raises(KeyError):
            s.remove(foreign)
    assert (True in s) and (2.0 in s) == (2.0 in {1, 2})  # equal numbers, as in a set
    with pytest.raises(TypeError, match="LongHashSet elements are int64, not str"):
        s.add("a")
    with pytest.raises(OverflowError):
        s.add(2**70)
    with pytest.raises(TypeError, match="LongHashSet elements are int64"):
        s.add_many(["a", 3])
    assert list(s) == [1, 2]


@cores
def test_mapping_operations_are_not_part_of_a_set(cls):
    s = cls([1])
    with pytest.raises(TypeError, match="not subscriptable"):
        s[1]
    with pytest.raises(TypeError, match="item assignment"):
        s[1] = None
    with pytest.raises(TypeError, match="item deletion"):
        del s[1]
    for name in ("get", "setdefault", "popitem"):
        assert not hasattr(s, name)


@cores
def test_a_change_during_iteration_raises_at_the_next_step(cls):
    s = cls(range(10))
    it = iter(s)
    next(it)
    s.add(100)
    with pytest.raises(RuntimeError, match="LongHashSet changed size during iteration"):
        next(it)


@cores
@pytest.mark.parametrize("other_kind", ["ours", "set", "frozenset", "array", "list"])
def test_the_algebra_matches_python_sets(cls, other_kind):
    rng = np.random.default_rng(7)
    a_keys = rng.integers(-500, 500, 400)
    b_keys = rng.integers(-500, 500, 300)
    a, pa, pb = cls(a_keys), set(a_keys.tolist()), set(b_keys.tolist())
    b = {"ours": lambda: cls(b_keys), "set": lambda: set(pb), "frozenset": lambda: frozenset(pb),
         "array": lambda: b_keys.copy(), "list": lambda: b_keys.tolist()}[other_kind]
    assert set(a.union(b())) == pa | pb
    assert set(a.intersection(b())) == pa & pb
    assert set(a.difference(b())) == pa - pb
    assert set(a.symmetric_difference(b())) == pa ^ pb
    assert a.isdisjoint(b()) == pa.isdisjoint(pb)
    assert a.issubset(b()) == (pa <= pb) and a.issuperset(b()) == (pa >= pb)
    for update, expected in (("update", pa | pb), ("intersection_update", pa & pb),
                             ("difference_update", pa - pb),
                             ("symmetric_difference_update", pa ^ pb)):
        c = a.copy()
        getattr(c, update)(b())
        assert set(c) == expected, update
        c._check()
    if other_kind in ("ours", "set", "frozenset"):  # the operators take sets only, as set's do
        assert set(a | b()) == pa | pb and set(a & b()) == pa & pb
        assert set(a - b()) == pa - pb and set(a ^ b()) == pa ^ pb
        assert (a <= b()) == (pa <= pb) and (a < b()) == (pa < pb)
        assert (a >= b()) == (pa >= pb) and (a > b()) == (pa > pb)
        c = a.copy()
        c |= b()
        c &= b()
        c -= cls([b_keys[0]])
        assert set(c) == (pb - {int(b_keys[0])})
    elif other_kind == "list":
        with pytest.raises(TypeError):
            a | b()


@cores
def test_results_are_sets_of_the_same_class_and_options(cls):
    a = cls([1, 2, 3], limit=1 << 24)
    for result in (a | {4}, a & {1}, a - {1}, a ^ {9}, {4} | a, frozenset({7}) - a, {1} ^ a):
        assert type(result) is cls and result._store.arena.limit_bytes == 1 << 24
    assert list(a | cls([0, 4])) == [1, 2, 3, 0, 4]  # ours first, then the new ones in order
    assert set({1, 2, 9} - a) == {9} and set({1} ^ a) == {2, 3}


@cores
def test_equality_with_set_frozenset_and_other_sets(cls):
    a = cls([1, 2, 3])
    assert a == {3, 2, 1} and a == frozenset([1, 2, 3]) and {1, 2, 3} == a
    assert a != {1, 2} and a != [1, 2, 3] and a == cls([3, 1, 2]) and a == a
    with pytest.raises(TypeError):
        hash(a)


def test_algebra_between_two_sets_runs_on_columns(monkeypatch):
    """Between two LongHashSets the membership is the other's contains_many, one call per
    operand: no per-element Python call of ``__contains__``."""
    a, b = LongHashSet(np.arange(0, 1000)), LongHashSet(np.arange(500, 2000))
    calls = []
    real = LongHashSet.contains_many
    monkeypatch.setattr(LongHashSet, "contains_many",
                        lambda self, keys: calls.append(len(keys)) or real(self, keys))
    assert len(a & b) == 500 and len(a - b) == 500 and len(a ^ b) == 1500
    assert not a.isdisjoint(b) and not a <= b
    assert len(calls) == 5


@cores
def test_bulk_paths(cls):
    s = cls()
    s.add_many(np.arange(0, 100_000, 2))
    s.add_many([1, 3, 1])
    assert len(s) == 50_002
    assert s.contains_many(np.array([0, 1, 2, 5, -1])).tolist() == [True, True, True, False, False]
    assert s.discard_many(np.arange(0, 50_000)) == 25_002 and len(s) == 25_000
    assert s.discard_many([]) == 0
    s._check()


@cores
def test_a_capacity_error_leaves_the_set_unchanged(cls):
    s = cls(range(100), limit=1 << 20)
    with pytest.raises(CapacityError):
        s.add_many(np.arange(1000, 1000 + 200_000))
    assert set(s) == set(range(100))
    with pytest.raises(CapacityError):
        for k in range(1000, 1000 + 200_000):
            s.add(k)
    assert set(range(100)) <= set(s)
    s._check()


@cores
def test_copies_and_pickles(cls):
    s = cls([3, 1, 2], limit=1 << 24)
    for twin in (s.copy(), copy.copy(s), copy.deepcopy(s), pickle.loads(pickle.dumps(s))):
        assert type(twin) is cls and list(twin) == [3, 1, 2] and twin is not s
        twin.add(9)
        assert 9 not in s
    assert pickle.loads(pickle.dumps(cls())) == set()


def test_a_file_set_commits_rolls_back_and_reopens(tmp_path):
    path = tmp_path / "s"
    s = LongHashSet([1, 2], path=path)
    s.commit()
    s.add(3)
    s.rollback()
    assert list(s) == [1, 2]
    s.add(4)
    with pytest.raises(TypeError, match="does not pickle"):
        pickle.dumps(s)
    s.close()
    with pytest.raises(ClosedError, match="the LongHashSet is closed"):
        1 in s
    with LongHashSet(path=path) as again:
        assert list(again) == [1, 2, 4]
    with pytest.raises(ValueError, match="is a LongHashSet, not a LongHashMap"):
        LongHashMap(path=path)
    with pytest.raises(TypeError, match=r"LongHashSet\.reader\(path\)"):
        LongHashSet(path=path, readonly=True)


def test_a_set_in_a_db_follows_commit_and_rollback(tmp_path):
    with DB.file(tmp_path / "db") as db:
        s = db.hash_set("s")
        s.update([1, 2, 3])
        db.commit()
        s.discard(2)
        db.rollback()
        assert set(s) == {1, 2, 3}
        s.add(7)
    with DB.file(tmp_path / "db") as db:
        assert list(db.hash_set("s")) == [1, 2, 3, 7]


def test_an_element_costs_no_value_bytes():
    s = LongHashSet(np.arange(1 << 16))
    r = s._regions
    assert r.width == 0 and s.stats().n_entries == 1 << 16
    assert s._store.arena.payload_bytes(r.chunk_offsets[0]) >= chunk_bytes(1 << 16, 0) \
        == (1 << 16) * 8 + (1 << 13)
    assert parse_meta(s._store.get(s.meta_recid)).value == SET_VALUE_TYPE
    assert s.stats().bytes_per_entry < 16  # 8.125, the index at load 0.73, the store's own


def _golden_sequence(cls):
    s = cls()
    for k in range(-50, 150):
        s.add(k * 1_000_003)
    for k in range(-50, 150, 4):
        s.discard(k * 1_000_003)
    s.add_many(np.arange(10**6, 10**6 + 300))
    s.pop()
    s.discard_many(np.arange(10**6, 10**6 + 100))
    s.add(1)
    return s


def _table_bytes(s) -> bytes:
    meta = s._store.get(s.meta_recid)
    r = s._regions
    parts = [meta, s._store.get(parse_meta(meta).chunk_list_recid), r.index.tobytes()]
    parts += [s._store.arena.view(offset).tobytes() for offset in r.chunk_offsets]
    return b"".join(struct.pack("<Q", len(part)) + part for part in parts)


@cores
def test_table_bytes_match_the_golden_file(cls):
    s = _golden_sequence(cls)
    s.flush()
    assert _table_bytes(s) == (GOLDEN / "hashset_table.bin").read_bytes()
