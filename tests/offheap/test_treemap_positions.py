"""TreeMap's positional API and bulk reads beside SortedDict: positions of keys, entries at
positions, view indexing and slicing, popitem by index, get_many, range arrays and neighbour
items. The stateful machine (test_treemap_stateful.py) drives the same calls against the
oracle through inserts, deletes and reopening; these tests pin the edges and the errors."""

from __future__ import annotations

import numpy as np
import pytest
from sortedcontainers import SortedDict

from offheap.errors import ClosedError
from offheap.treemap.treemap import TreeMap

N = 2000


@pytest.fixture(params=[dict(node_size=4, cache_size=8), dict(node_size=32),
                        dict(node_size=5, cache_size=8, write_cache=False)],
                ids=["node-4", "node-32", "write-through"])
def pair(request):
    keys = np.random.default_rng(7).choice(10 * N, N, replace=False)
    tree = TreeMap(**request.param)
    model = SortedDict()
    for k in keys.tolist():
        tree[k] = f"v{k}"
        model[k] = f"v{k}"
    yield tree, model
    tree.close()


def test_positions_of_keys_match_sorteddict(pair):
    tree, model = pair
    for k in range(-3, 10 * N + 3, 37):
        assert tree.bisect_left(k) == model.bisect_left(k)
        assert tree.bisect_right(k) == model.bisect_right(k)
        assert tree.bisect(k) == model.bisect(k)
    for k in model.keys()[::97]:
        assert tree.index(k) == model.index(k)


def test_index_of_an_absent_key_or_outside_the_slice_is_a_value_error(pair):
    tree, model = pair
    absent = next(k for k in range(10 * N) if k not in model)
    with pytest.raises(ValueError, match="not in the TreeMap"):
        tree.index(absent)
    first = model.keys()[0]
    assert tree.index(first, 0, 1) == 0
    with pytest.raises(ValueError):
        tree.index(first, 1)


def test_entries_at_positions_and_view_indexing(pair):
    tree, model = pair
    for i in list(range(-N, N, 131)) + [0, -1, N - 1]:
        assert tree.peekitem(i) == model.peekitem(i)
        assert tree.keys()[i] == model.keys()[i]
        assert tree.values()[i] == model.values()[i]
        assert tree.items()[i] == model.items()[i]
    assert tree.peekitem() == model.peekitem()
    for bad in (N, -N - 1):
        with pytest.raises(IndexError):
            tree.peekitem(bad)
        with pytest.raises(IndexError):
            tree.keys()[bad]


def test_view_slices_and_islice(pair):
    tree, model = pair
    for window in (slice(None), slice(10, 500), slice(-300, -20, 3), slice(None, None, -1),
                   slice(900, 100, -7), slice(5, 5), slice(N + 5, None)):
        assert tree.keys()[window] == model.keys()[window]
        assert tree.values()[window] == model.values()[window]
        assert tree.items()[window] == model.items()[window]
    for start, stop in ((None, None), (3, 40), (-50, None), (100, 10), (None, -1995)):
        for reverse in (False, True):
            assert list(tree.islice(start, stop, reverse)) == list(model.islice(start, stop, reverse))


def test_range_views_are_sequences_of_their_range(pair):
    tree, model = pair
    lo, hi = model.keys()[100], model.keys()[300]
    for inclusive in ((True, True), (False, False)):
        for reverse in (False, True):
            expected = list(model.irange(lo, hi, inclusive, reverse))
            view = tree.keys(lo, hi, inclusive, reverse)
            assert len(view) == len(expected)
            assert view[0] == expected[0] and view[-1] == expected[-1]
            assert view[5:50:2] == expected[5:50:2]
            assert tree.items(lo, hi, inclusive, reverse)[-3:] == \
                [(k, model[k]) for k in expected[-3:]]
    assert len(tree.keys(hi, lo)) == 0 and tree.keys(hi, lo)[:] == []


def test_popitem_by_index_and_by_end(pair):
    tree, model = pair
    for index in (0, -1, 17, -250, 999):
        assert tree.popitem(index) == model.popitem(index)
    assert tree.popitem(last=False) == model.popitem(0)
    assert tree.popitem(last=True) == model.popitem(-1)
    with pytest.raises(IndexError):
        tree.popitem(len(model))
    with pytest.raises(TypeError, match="last="):
        tree.popitem(True)
    tree._check()
    assert list(tree.items()) == list(model.items())


def test_popitem_of_an_empty_map_is_a_key_error():
    with TreeMap() as tree:
        with pytest.raises(KeyError):
            tree.popitem(0)
        with pytest.raises(IndexError):
            tree.peekitem()
        assert tree.bisect_left(5) == 0 and list(tree.islice()) == [] and tree.keys()[:] == []


def test_counts_exact_after_bulk_load_and_deletes():
    tree = TreeMap(node_size=4, cache_size=8)
    tree.put_many(np.arange(0, 3000, 3, dtype=np.int64), ["x"] * 1000)
    tree._check()
    assert tree.peekitem(500) == (1500, "x") and tree.index(2997) == 999
    tree.delete_range(300, 2400)
    tree._check()
    assert tree.peekitem(100) == (2403, "x")  # 300..2400 went, both ends included
    for _ in range(150):
        tree.popitem(len(tree) // 2)
    tree._check()


def test_get_many_in_the_order_given(pair):
    tree, model = pair
    probes = np.random.default_rng(3).integers(-5, 10 * N, 500)
    assert tree.get_many(probes) == [model.get(k) for k in probes.tolist()]
    assert tree.get_many(probes.tolist(), default=0) == [model.get(k, 0) for k in probes.tolist()]
    assert tree.get_many([]) == []


def test_get_many_of_typed_values_is_an_array():
    with TreeMap(value="float64") as tree:
        tree.update({k: k / 2 for k in range(100)})
        values = tree.get_many(np.array([9, 3, 3]))
        assert isinstance(values, np.ndarray) and values.dtype == np.float64
        assert values.tolist() == [4.5, 1.5, 1.5]
        with pytest.raises(KeyError, match="default="):
            tree.get_many([1, 1000])
        assert tree.get_many([1, 1000], default=-1.0).tolist() == [0.5, -1.0]
        with pytest.raises(TypeError):
            tree.get_many(["a"])


def test_get_many_of_str_keys_and_of_a_closed_map():
    tree = TreeMap(key="str")
    tree.update({"b": 2, "a": 1})
    assert tree.get_many(["b", "c", "a"]) == [2, None, 1]
    tree.close()
    with pytest.raises(ClosedError):
        tree.get_many(["a"])


def test_range_arrays(pair):
    tree, model = pair
    lo, hi = 1000, 5000
    keys = tree.keys_array(lo, hi, (False, True))
    assert keys.dtype == np.int64 and keys.tolist() == list(model.irange(lo, hi, (False, True)))
    keys, values = tree.items_array(reverse=True)
    assert keys.tolist() == list(reversed(model)) and values.dtype == object
    assert values.tolist() == [model[k] for k in keys.tolist()]
    assert tree.keys_array(hi, lo).shape == (0,)


def test_range_arrays_of_typed_and_bytes_maps():
    with TreeMap(key="bytes", value="int64") as tree:
        tree.update({b"b": 2, b"a": 1, b"c": 3})
        keys, values = tree.items_array(b"b")
        assert keys.dtype == object and keys.tolist() == [b"b", b"c"]
        assert values.dtype == np.int64 and values.tolist() == [2, 3]


def test_neighbour_items(pair):
    tree, model = pair
    for k in range(-3, 10 * N + 3, 53):
        i, j = model.bisect_left(k), model.bisect_right(k)
        assert tree.floor_item(k) == (model.peekitem(j - 1) if j else None)
        assert tree.lower_item(k) == (model.peekitem(i - 1) if i else None)
        assert tree.ceiling_item(k) == (model.peekitem(i) if i < len(model) else None)
        assert tree.higher_item(k) == (model.peekitem(j) if j < len(model) else None)


def test_a_reader_has_the_positional_api_and_the_arrays(tmp_path):
    path = str(tmp_path / "t.offheap")
    with TreeMap(path=path, node_size=4) as tree:
        tree.update({k: k * 2 for k in range(0, 200, 2)})
    with TreeMap.reader(path, node_size=4) as reader:
        assert reader.index(10) == 5 and reader.peekitem(-1) == (198, 396)
        assert reader.keys()[3:6] == [6, 8, 10] and list(reader.islice(0, 2)) == [0, 2]
        assert reader.get_many([4, 5]) == [8, None] and reader.floor_item(5) == (4, 8)
        assert reader.keys_array(0, 6).tolist() == [0, 2, 4, 6]
