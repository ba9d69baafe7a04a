"""Range iteration of TreeMap on both paths: the compiled walk (``_pages.scan``: a ``RangeItems``
that reads leaf after leaf in C) and ``Descent.seek`` (offheap/treemap/csrc/ranges.c,
descent.c) against the reference (``views.each_reference`` over ``_chunks``, ``Cursor.seek``)
and ``SortedDict.irange``: keys, values and items, both directions, bounds in and between the
keys, int64, str and bytes keys, every value serializer, compressed, cached and written-through
leaves; changes in the middle of an iteration (inserts, deletes, overwrites, clear, close) give
the same items and the same error at the same step on both paths; a closed map raises
ClosedError; threads sharing an iterator or writing under one never crash it; and the seek of
every key finds the leaf the cursor finds.
"""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings, strategies as st
from sortedcontainers import SortedDict

from offheap import TreeMap
from offheap.errors import ClosedError
from offheap.treemap import views
from offheap.treemap.cursor import Cursor
from offheap.treemap.page import key_list

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


@pytest.mark.parametrize("what", ["keys", "values", "items"])
def test_an_iteration_that_raised_is_over(what):
    tree = TreeMap(((k, k) for k in range(100)), node_size=4)
    iterator = iter(getattr(tree, what)(reverse=True))
    next(iterator)
    del tree[10]
    with pytest.raises(RuntimeError):
        next(iterator)
    tree[10] = 10  # the size is back: the iteration stays over, as a generator's does
    assert list(iterator) == []


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
                assert found == (key_list(leaf.keys), leaf.values if with_values else None,
                                 cursor.lo, cursor.hi)


# -- the compiled walk against the reference, changes in the middle included ---------------------

INT64 = st.one_of(st.integers(-300, 300), st.integers(-(1 << 63), (1 << 63) - 1))
KINDS = {
    "int64": INT64,
    "str": st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
    "bytes": st.binary(max_size=12),
}
VALUES = {
    "object": st.one_of(st.integers(-5, 5), st.text(max_size=4), st.none(),
                        st.lists(st.integers(), max_size=2)),  # lists go pickled
    "int64": st.integers(-(1 << 63), (1 << 63) - 1),
    "float64": st.floats(allow_nan=False),
    "str": st.text(max_size=6),
    "bytes": st.binary(max_size=6),
}
CHANGES = ("insert", "delete", "overwrite", "clear", "close", "none")


def _drive(iterator, steps: int, change) -> tuple[list, type | None]:
    """The items of ``iterator``, calling ``change()`` after ``steps`` of them, and the type of
    the error that stopped it (None: it ran out)."""
    seen: list = []
    try:
        for item in iterator:
            seen.append(item)
            if len(seen) == steps:
                change()
    except Exception as error:  # the type is what the paths must agree on
        return seen, type(error)
    return seen, None


@st.composite
def scenarios(draw):
    kind = draw(st.sampled_from(sorted(KINDS)))
    value = draw(st.sampled_from(sorted(VALUES)))
    keys = draw(st.lists(KINDS[kind], max_size=120, unique=True))
    bounds = st.one_of(st.none(), st.sampled_from(keys) if keys else st.none(), KINDS[kind])
    return dict(kind=kind, value=value, entries=[(k, draw(VALUES[value])) for k in keys],
                lo=draw(bounds), hi=draw(bounds), inclusive=draw(st.tuples(st.booleans(), st.booleans())),
                reverse=draw(st.booleans()), what=draw(st.sampled_from(["keys", "values", "items"])),
                steps=draw(st.integers(1, 40)), change=draw(st.sampled_from(CHANGES)),
                key=draw(st.sampled_from(keys) if keys and draw(st.booleans()) else KINDS[kind]),
                new_value=draw(VALUES[value]),
                options=draw(st.fixed_dictionaries(dict(
                    node_size=st.sampled_from([4, 7, 32]), cache_size=st.sampled_from([8, 2048]),
                    compression=st.sampled_from([None, "zlib"]), write_cache=st.booleans()))))


def _tree(scenario) -> TreeMap:
    tree = TreeMap(key=scenario["kind"], value=scenario["value"], **scenario["options"])
    tree.update(scenario["entries"])
    tree.flush()
    return tree


def _change(tree: TreeMap, scenario):
    key, new_value = scenario["key"], scenario["new_value"]
    return {"insert": lambda: tree.__setitem__(key, new_value),
            "delete": lambda: tree.pop(key, None),
            "overwrite": lambda: tree.__setitem__(key, new_value) if key in tree else None,
            "clear": tree.clear, "close": tree.close, "none": lambda: None}[scenario["change"]]


@pytest.mark.skipif(not COMPILED, reason="the compiled core is not loaded")
@settings(max_examples=150, deadline=None)
@given(scenario=scenarios())
def test_the_walk_agrees_with_the_reference_through_changes(scenario):
    walked, referenced = _tree(scenario), _tree(scenario)
    referenced._tree.descent = None  # its ranges go through _chunks and Cursor.seek
    args = (scenario["lo"], scenario["hi"], scenario["inclusive"], scenario["reverse"])
    what = scenario["what"]
    oracle = SortedDict(scenario["entries"])
    expected_keys = list(oracle.irange(*args))
    assert walked._walk(views._WHAT[what], *args) is not None  # the walk is what runs
    got = _drive(views.each(walked, what, *args), scenario["steps"], _change(walked, scenario))
    source, name = referenced._version_source()
    want = _drive(views.each_reference(referenced._chunks(*args, what != "keys"), what, source,
                                       name, referenced._changed_error),
                  scenario["steps"], _change(referenced, scenario))
    assert got == want
    if scenario["change"] == "none":
        assert got[0] == [k if what == "keys" else oracle[k] if what == "values" else (k, oracle[k])
                          for k in expected_keys]
    for tree in (walked, referenced):
        tree.close()


@pytest.mark.skipif(not COMPILED, reason="the compiled core is not loaded")
def test_a_walk_caches_leaves_only_while_there_is_room():
    tree = TreeMap(((k, str(k)) for k in range(5000)), node_size=16, cache_size=8)
    tree.flush()
    cache = tree._tree.cache
    cache.clear()
    assert list(tree.irange(100, 4000, reverse=True)) == list(range(4000, 99, -1))
    filled = list(cache._leaves)
    assert len(filled) == cache.capacity  # the first leaves the walk reached
    assert all(3000 < min(cache._leaves[recid].keys) <= 4000 for recid in filled)
    assert list(tree.items(10, 20)) == [(k, str(k)) for k in range(10, 21)]
    assert list(cache._leaves) == filled  # full: the other leaves were read from their pages
    tree._tree.check()


@pytest.mark.skipif(not COMPILED, reason="the compiled core is not loaded")
def test_pages_moved_by_overwrites_under_a_walk_are_read_where_they_went():
    """Without the write cache every overwrite rewrites a page, which moves it in the store and
    grows the store's segments: the walk finds each leaf anew through the store's index."""
    tree = TreeMap(((k, b"") for k in range(3000)), value="bytes", node_size=8, write_cache=False)
    seen = []
    for key, value in tree.items():
        seen.append((key, value))
        tree[(key + 500) % 3000] = bytes(200)  # a later leaf grows, moves and is read again
    assert [k for k, _ in seen] == list(range(3000))
    assert all(v == bytes(200) for k, v in seen if k >= 500)


def test_two_threads_on_one_iterator_and_a_writer_never_crash():
    tree = TreeMap(((k, k) for k in range(20000)), node_size=8, cache_size=16)
    iterator = iter(tree.items())
    outcomes: list = []

    def read():
        try:
            for _ in iterator:
                pass
            outcomes.append(None)
        except (RuntimeError, ValueError) as error:  # changed size, or already executing
            outcomes.append(type(error))

    def write():
        for k in range(20000, 20200):
            tree[k] = k

    threads = [threading.Thread(target=work) for work in (read, read, write)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(outcomes) == 2 and len(tree) == 20200
    assert list(tree.irange(19990, 20010)) == list(range(19990, 20011))
