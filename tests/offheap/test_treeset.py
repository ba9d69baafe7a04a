"""TreeSet: SortedSet's sorted and positional API, str and bytes elements, foreign elements,
the algebra, bulk paths, limits, files, the DB and the constant value column it stores."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedSet

from offheap import CapacityError, DB, TreeMap, TreeSet
from offheap.treemap.treeset import TREE_SET_VALUE


@settings(max_examples=40, deadline=None)
@given(elements=st.lists(st.integers(-100, 100), max_size=60), probe=st.integers(-110, 110),
       i=st.integers(-70, 70), j=st.integers(-70, 70), step=st.sampled_from([1, 2, -1, -3]))
def test_the_sorted_api_matches_sortedset(elements, probe, i, j, step):
    s, model = TreeSet(elements, node_size=4), SortedSet(elements)
    assert list(s) == list(model) and list(reversed(s)) == list(reversed(model))
    assert s.bisect_left(probe) == model.bisect_left(probe)
    assert s.bisect_right(probe) == model.bisect_right(probe)
    assert list(s.irange(probe, probe + 20)) == list(model.irange(probe, probe + 20))
    assert list(s.irange(None, probe, (False, False), True)) == \
        list(model.irange(None, probe, (False, False), True))
    assert list(s.islice(i, j)) == list(model.islice(i, j))
    assert s[i:j:step] == model[i:j:step]
    if -len(model) <= i < len(model):
        assert s[i] == model[i]
    else:
        with pytest.raises(IndexError):
            s[i]
    if probe in model:
        assert s.index(probe) == model.index(probe)
    else:
        with pytest.raises(ValueError):
            s.index(probe)
    below = [e for e in model if e <= probe]
    above = [e for e in model if e >= probe]
    assert s.floor(probe) == (below[-1] if below else None)
    assert s.ceiling(probe) == (above[0] if above else None)
    assert s.lower(probe) == next((e for e in reversed(model) if e < probe), None)
    assert s.higher(probe) == next((e for e in model if e > probe), None)
    if model:
        assert s.first() == model[0] and s.last() == model[-1]
        assert s.pop(0) == model.pop(0)
        assert list(s) == list(model)
    else:
        with pytest.raises(KeyError):
            s.first()
        with pytest.raises(IndexError):
            s.pop()
    s._check()


@pytest.mark.parametrize("key, elements, foreign", [
    ("str", ["b", "a", "ccc"], [1, b"a", None]),
    ("bytes", [b"b", b"a", b""], ["a", 1, None]),
    ("int64", [3, -1, 2**62], ["a", 2**70, 1.5]),
])
def test_element_types_and_foreign_elements(key, elements, foreign):
    s = TreeSet(elements, key=key)
    assert list(s) == sorted(elements)
    for element in foreign:
        assert element not in s
        s.discard(element)
        with pytest.raises((TypeError, OverflowError)):
            s.add(element)
    assert s.contains_many(elements + foreign).tolist() == [True] * 3 + [False] * 3
    assert s == set(elements) and s == SortedSet(elements)
    assert pickle.loads(pickle.dumps(s)) == s
    assert set(s | {elements[0]}) == set(elements)
    assert set(s & SortedSet(elements[:1])) == {elements[0]}
    s._check()


def test_the_algebra_between_treesets_and_with_python_sets():
    a, b = TreeSet(range(0, 100, 2)), TreeSet(range(0, 100, 3))
    pa, pb = set(range(0, 100, 2)), set(range(0, 100, 3))
    assert list(a | b) == sorted(pa | pb) and list(a & b) == sorted(pa & pb)
    assert list(a - b) == sorted(pa - pb) and list(a ^ b) == sorted(pa ^ pb)
    assert (a <= b) is False and a >= TreeSet(range(0, 10, 2)) and a.isdisjoint({1, 3})
    assert type(a | pb) is TreeSet and type(pb | a) is TreeSet
    a ^= pb
    assert set(a) == pa ^ pb
    assert a.discard_many(np.arange(100)) == len(pa ^ pb) and not a


def test_bulk_paths_and_a_capacity_error_leaves_the_set_unchanged():
    s = TreeSet(limit=1 << 22)
    s.add_many(np.arange(1000))
    with pytest.raises(CapacityError):
        s.add_many(np.random.default_rng(1).integers(2**40, 2**62, 2_000_000))
    assert list(s) == list(range(1000))
    s._check()


def test_a_file_treeset_and_a_db_treeset(tmp_path):
    with TreeSet(["x", "a"], key="str", path=tmp_path / "t") as s:
        s.commit()
        s.add("m")
        s.rollback()
    with TreeSet(path=tmp_path / "t") as s:
        assert list(s) == ["a", "x"] and s.options["key"] == "str"
    with TreeMap(path=tmp_path / "t") as tree:  # a TreeSet file is a TreeMap of b"" values
        assert dict(tree.items()) == {"a": b"", "x": b""}
        assert tree.options["value"] == TREE_SET_VALUE
    with DB.file(tmp_path / "db") as db:
        t = db.tree_set("t", key="bytes", node_size=8)
        t.update([b"q", b"p"])
        db.commit()
        t.add(b"r")
        db.rollback()
        assert list(t) == [b"p", b"q"]
    with DB.file(tmp_path / "db", readonly=True) as db:
        reader = db.tree_set("t")
        assert list(reader) == [b"p", b"q"] and b"p" in reader and len(reader) == 2


def test_a_constant_value_column_costs_almost_nothing():
    n = 100_000
    s = TreeSet(np.arange(n) * 7)
    s.flush()
    tree = TreeMap(key="int64", value="bytes")
    tree.put_many(np.arange(n) * 7, [b"x" * 3] * n)  # three bytes a value, for scale
    tree.flush()
    per_element = s.stats().stored_page_bytes / n
    assert per_element < 1.5
    assert tree.stats().stored_page_bytes / n > per_element
