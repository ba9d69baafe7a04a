"""TreeSet's element slots (offheap/treemap/csrc/setslots.c, offheap/treemap/setslots.py):
``x in s``, ``len(s)``, ``s.add(x)``, ``s.discard(x)`` and ``s.remove(x)`` as one C call into the
tree's item slots, and by the reference's Python methods, with the same answers, errors, sets
and pages.

The reference runs on a :class:`ReferenceTreeSet`: the reference slots on a tree whose own slots
are detached (every call through TreeMap's Python methods); the compiled side is a TreeSet as
built (its compiled slots when the core is loaded). Sequences of operations with elements of
the set's type and foreign ones (str, floats, ints beyond int64, None) on small nodes and a small
cache, so that stores and deletes go through the cache, around it and through splits.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st
from sortedcontainers import SortedSet

import offheap
from offheap import TreeMap, TreeSet
from offheap.errors import ClosedError
from offheap.treemap import setslots

SMALL = dict(node_size=4, cache_size=8)


class ReferenceTreeSet(TreeSet):
    """A TreeSet on the reference element slots, its tree's item slots detached when it is
    built (a reload attaches them again)."""

    __len__ = setslots.SetSlots.__len__
    __contains__ = setslots.SetSlots.__contains__
    add = setslots.SetSlots.add
    discard = setslots.SetSlots.discard
    remove = setslots.SetSlots.remove

    def __init__(self, *args, **options) -> None:
        super().__init__(*args, **options)
        self._tree._detach_slots()


ELEMENTS = st.one_of(st.integers(-200, 200), st.sampled_from(["a", 1.5, 2**70, None, True]))
OPS = st.lists(st.tuples(st.sampled_from(["add", "add", "add", "discard", "remove", "in", "len"]),
                         ELEMENTS), max_size=300)


def _outcome(action):
    """What ``action()`` returned, or the type and text of what it raised."""
    try:
        return action()
    except Exception as error:  # noqa: BLE001 - the errors are what is compared
        return type(error), str(error)


def _step(s, op: str, element):
    if op == "in":
        return element in s
    if op == "len":
        return len(s)
    return getattr(s, op)(element)


def _pages(s: TreeSet) -> list[bytes]:
    tree = s._tree._tree
    store = tree.nodes.store
    return [bytes(store.view(recid)) for recid in sorted(tree.all_recids())]


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_both_slots_answer_alike_and_build_the_same_pages(ops):
    ours, reference, oracle = TreeSet(**SMALL), ReferenceTreeSet(**SMALL), SortedSet()
    for op, element in ops:
        expected = _outcome(lambda: _step(reference, op, element))
        assert _outcome(lambda: _step(ours, op, element)) == expected, (op, element)
        if isinstance(element, int) and -2**63 <= element < 2**63:
            if op == "add":
                oracle.add(element)
            elif op in ("discard", "remove"):
                oracle.discard(element)
    for s in (ours, reference):
        s._check()
        assert list(s) == list(oracle)
    ours.flush()
    reference.flush()
    assert _pages(ours) == _pages(reference)


@pytest.mark.parametrize("cls", [TreeSet, ReferenceTreeSet])
def test_an_absent_element_a_foreign_one_and_a_closed_set(cls):
    s = cls([1, 2, 3], **SMALL)
    s.discard(7)
    s.discard("a")
    with pytest.raises(KeyError) as raised:
        s.remove(7)
    assert raised.value.args == (7,)
    with pytest.raises(TypeError, match="int64 keys, not str"):
        s.add("a")
    assert "a" not in s and 7 not in s and len(s) == 3
    s.close()
    for action in (lambda: 1 in s, lambda: s.add(4), lambda: s.discard(1), lambda: s.remove(1)):
        with pytest.raises(ClosedError):
            action()


@pytest.mark.parametrize("cls", [setslots.SetSlots, setslots.SetSlotsBase],
                         ids=["reference", "default"])
def test_slots_without_a_tree_raise_attribute_error(cls):
    bare = cls()
    for action in (lambda: 1 in bare, lambda: len(bare), lambda: bare.add(1),
                   lambda: bare.discard(1), lambda: bare.remove(1)):
        with pytest.raises(AttributeError, match="_tree"):
            action()


@pytest.mark.parametrize("cls", [TreeSet, ReferenceTreeSet])
def test_adding_a_present_element_or_discarding_an_absent_one_changes_nothing(cls):
    s = cls(range(0, 400, 2), **SMALL)
    s.flush()
    pages, mods, cached = _pages(s), s._tree._tree.mods, _cache_state(s)
    for element in range(0, 400, 2):
        s.add(element)
    assert _cache_state(s) == cached  # no node read in, none moved in the LRU order
    for element in range(0, 400, 2):
        s.discard(element + 1)
    assert s.stats().dirty_nodes == 0
    assert s._tree._tree.mods == mods
    s.flush()
    assert _pages(s) == pages


def _cache_state(s: TreeSet) -> tuple:
    """Every cached node in LRU order (a leaf with its keys and dirty flag), the mark of a cache
    over capacity, the hint's leaf and the tree's mods: what an add changes besides the pages."""
    tree = s._tree._tree
    cache = tree.cache
    leaves = [(recid, list(leaf.keys), leaf.dirty) for recid, leaf in cache._leaves.items()]
    hint = tree.hint.leaf
    return (leaves, list(cache._inner), cache.over_capacity,
            None if hint is None else hint.recid, tree.mods)


@pytest.mark.parametrize("key, cache_bytes, in_c", [
    ("int64", 1 << 16, False), ("int64", 1 << 18, True), ("str", 1 << 16, False),
    ("str", 1 << 22, True)], ids=["int64-inner-nodes-not-all-cached", "int64-in-c",
                                  "str-inner-nodes-not-all-cached", "str-leaves-cached-in-c"])
def test_an_add_is_one_store_that_keeps_a_present_element_as_the_reference(key, cache_bytes, in_c,
                                                                          monkeypatch):
    """Adds of present and absent elements, and discards, into a bulk-loaded set whose cache
    first holds clean leaves read in and then the dirty leaves of the adds: the compiled add
    (one store that keeps a present key, in C: one walk, whose LRU moves wait until the leaf is
    known not to hold the element) leaves the cache, its order, the hint, the mods and, flushed,
    the pages and their places as the reference's (the tree's Python
    ``_put_item(x, b"", keep=True)``), with the present elements' leaves clean. A cache too
    small for the inner nodes sends most adds to that Python method (with ``keep``); with str
    keys the adds of leaves the cache does not hold are Python's too, so their C case is a cache
    that holds every leaf."""
    rng = random.Random(11)
    element_of = (lambda k: k) if key == "int64" else (lambda k: f"e{k:06d}")
    elements = [element_of(k) for k in range(0, 80_000, 4)]
    sets = ours, reference = TreeSet(key=key, node_size=16, cache_bytes=cache_bytes), \
        ReferenceTreeSet(key=key, node_size=16, cache_bytes=cache_bytes)
    python_puts = [0]
    put_item = TreeMap._put_item

    def counted_put_item(tree, key, value, keep=False):
        python_puts[0] += tree is ours._tree
        return put_item(tree, key, value, keep)

    monkeypatch.setattr(TreeMap, "_put_item", counted_put_item)
    for s in sets:
        s.add_many(elements)
        for element in elements[::9]:
            assert element in s
    oracle = SortedSet(elements)
    assert _cache_state(ours) == _cache_state(reference)
    for step in range(3_000):
        element = element_of(rng.randrange(0, 80_000))
        op = "discard" if step % 10 == 9 else "add"
        for s in sets:
            getattr(s, op)(element)
        getattr(oracle, op)(element)
        assert _cache_state(ours) == _cache_state(reference), (step, op, element)
    if offheap.compiled:  # of some 2,700 adds: most in C, or most in Python
        assert python_puts[0] < 500 if in_c else python_puts[0] > 1_000
    for s in sets:
        s.flush()
        s._check()
        assert list(s) == list(oracle)
    assert _pages(ours) == _pages(reference)
    stores = [s._tree._tree.nodes.store for s in sets]
    assert stores[0]._addr.tolist() == stores[1]._addr.tolist()


@pytest.mark.parametrize("cls", [TreeSet, ReferenceTreeSet])
def test_an_equal_element_of_another_type_or_under_a_limit_is_kept_as_present(cls):
    """``add(True)`` or ``add(1.0)`` with 1 present is no error and no change, as in a set; under
    a ``limit`` a present element's add counts nothing against the unwritten budget."""
    s = cls([1, 2, 3], **SMALL)
    s.add(True)
    s.add(1.0)
    assert list(s) == [1, 2, 3]
    with pytest.raises(TypeError, match="int64 keys, not float"):
        s.add(4.0)
    limited = cls(range(100), limit=1 << 22)
    limited.flush()
    cache = limited._tree._tree.cache
    unwritten = cache.unwritten_bytes
    for element in range(100):
        limited.add(element)
    assert cache.unwritten_bytes == unwritten and limited.stats().dirty_nodes == 0
    limited.add(100)
    assert cache.unwritten_bytes > unwritten and 100 in limited
