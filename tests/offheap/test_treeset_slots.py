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

import pytest
from hypothesis import given, settings, strategies as st
from sortedcontainers import SortedSet

from offheap import TreeSet
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
    pages, mods = _pages(s), s._tree._tree.mods
    for element in range(0, 400, 2):
        s.add(element)
        s.discard(element + 1)
    assert s.stats().dirty_nodes == 0
    assert s._tree._tree.mods == mods
    s.flush()
    assert _pages(s) == pages
