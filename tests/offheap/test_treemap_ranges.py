"""Range iteration of TreeMap on both paths: the compiled ``RangeItems`` and ``Descent.seek``
(offheap/treemap/csrc/ranges.c, descent.c) against the reference (``views.each_reference``,
``Cursor.seek``) and ``SortedDict.irange``: keys, values and items, both directions, bounds in
and between the keys, str keys, compressed and cached leaves; a change of size raises at the next
step, a closed map raises ClosedError, and the seek of every key finds the leaf the cursor finds.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st
from sortedcontainers import SortedDict

from offheap import TreeMap
from offheap.errors import ClosedError
from offheap.treemap import views
from offheap.treemap.cursor import Cursor

COMPILED = views._compiled is not None
KEYS = st.integers(-200, 200)
BOUND = st.one_of(st.none(), KEYS)


def _reference(tree: TreeMap, what: str, lo, hi, inclusive, reverse: bool) -> list:
    """The reference iteration of the same range: the Python ``each`` over the tree's chunks,
    with the compiled seek switched off."""
    descent, tree._tree.descent = tree._tree.descent, None
    try:
        source, name = tree._version_source()
        return list(views.each_reference(tree._chunks(lo, hi, inclusive, reverse, what != "keys"),
                                          what, source, name, tree._changed_error))
    finally:
        tree._tree.descent = descent


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(KEYS, max_size=150), lo=BOUND, hi=BOUND,
       inclusive=st.tuples(st.booleans(), st.booleans()), reverse=st.booleans(),
       options=st.fixed_dictionaries(dict(node_size=st.sampled_from([4, 7]),
                                          cache_size=st.sampled_from([8, 2048]),
                                          compression=st.sampled_from([None, "zlib"]))))
def test_ranges_agree_with_sorted_dict(keys, lo, hi, inclusive, reverse, options):
    oracle = SortedDict((k, f"v{k}") for k in keys)
    tree = TreeMap(oracle.items(), **options)
    expected_keys = list(oracle.irange(lo, hi, inclusive, reverse))
    expected = {"keys": expected_keys, "values": [oracle[k] for k in expected_keys],
                "items": [(k, oracle[k]) for k in expected_keys]}
    for what in ("keys", "values", "items"):
        assert list(views.each(tree, what, lo, hi, inclusive, reverse)) == expected[what]
        assert _reference(tree, what, lo, hi, inclusive, reverse) == expected[what]
    assert list(tree.irange(lo, hi, inclusive, reverse)) == expected_keys


def test_str_keys_both_directions():
    words = [f"k{i:03d}é" for i in range(300)]
    tree = TreeMap(((w, i) for i, w in enumerate(words)), key="str", node_size=5)
    assert list(tree.irange(words[10], words[200], (False, True))) == words[11:201]
    assert list(tree.irange(words[10], words[200], (True, False), reverse=True)) == words[10:200][::-1]
    assert list(tree.irange("k0105", "k2")) == [w for w in words if "k0105" <= w <= "k2"]
    assert list(tree.values(words[290])) == list(range(290, 300))


@pytest.mark.parametrize("change", ["insert", "delete", "clear"])
@pytest.mark.parametrize("what", ["keys", "values", "items"])
def test_a_change_of_size_raises_at_the_next_step(change, what):
    tree = TreeMap(((k, k) for k in range(100)), node_size=4)
    iterator = iter(getattr(tree, what)())
    next(iterator)
    {"insert": lambda: tree.__setitem__(1000, 0), "delete": lambda: tree.__delitem__(50),
     "clear": tree.clear}[change]()
    with pytest.raises(RuntimeError):
        next(iterator)


def test_an_overwrite_does_not_stop_the_iteration():
    tree = TreeMap(((k, k) for k in range(50)), node_size=4)
    seen = []
    for key in tree:
        tree[key] = -key
        seen.append(key)
    assert seen == list(range(50)) and tree[7] == -7


def test_a_closed_map_raises_closed_error_at_the_next_step():
    tree = TreeMap(((k, k) for k in range(100)), node_size=4)
    iterator = iter(tree.items())
    next(iterator)
    tree.close()
    with pytest.raises(ClosedError):
        list(iterator)


@pytest.mark.skipif(not COMPILED, reason="the compiled core is not loaded")
@settings(max_examples=30, deadline=None)
@given(keys=st.lists(KEYS, min_size=1, max_size=200), probes=st.lists(BOUND, max_size=20))
def test_seek_finds_the_leaf_and_bounds_the_cursor_finds(keys, probes):
    tree = TreeMap(((k, str(k)) for k in keys), node_size=4, cache_size=8)
    tree.flush()
    inner = tree._tree
    shape, cursor = inner.shape, Cursor(inner.cache)
    for key in probes:
        for below in (False, True):
            leaf = cursor.seek(shape, key, below)
            for with_values in (False, True):
                found = inner.descent.seek(shape.root, shape.height, key, below, with_values)
                assert found == (leaf.keys, leaf.values if with_values else None, cursor.lo,
                                 cursor.hi)
