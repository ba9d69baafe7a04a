"""LongHashSet and HashSet against a Python ``set`` and TreeSet against a ``SortedSet``: hypothesis state
machines interleaving add/discard/remove/pop, iteration, the algebra with another set and with
arrays, bulk paths, clear, and for file sets commit, rollback, close and reopen; ``_check()``
after every step. LongHashSet runs on both cores (its order, insertion order, is checked too)."""

from __future__ import annotations

import functools
import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from sortedcontainers import SortedSet

from offheap.hashmap.keyedset import HashSet, ReferenceHashSet
from offheap.hashmap.longhashset import LongHashSet, ReferenceLongHashSet
from offheap.treemap.treeset import TreeSet

from .test_treeset_slots import ReferenceTreeSet

ELEMENTS = st.integers(-40, 40)
FOREIGN = st.sampled_from(["a", 2**70, 1.5, None])
COLUMNS = st.lists(ELEMENTS, max_size=12)
OPERATORS = st.sampled_from(["|", "&", "-", "^", "<=", "<", ">=", "==", "isdisjoint",
                             "|=", "&=", "-=", "^="])
SETTINGS = settings(max_examples=30, stateful_step_count=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _apply(operator: str, left, right):
    """``left <operator> right``; in-place forms return the left operand."""
    if operator == "isdisjoint":
        return left.isdisjoint(right)
    if operator.endswith("=") and operator not in ("<=", ">=", "=="):
        name = {"|=": "__ior__", "&=": "__iand__", "-=": "__isub__", "^=": "__ixor__"}[operator]
        return getattr(left, name)(right)
    return {"|": lambda: left | right, "&": lambda: left & right, "-": lambda: left - right,
            "^": lambda: left ^ right, "<=": lambda: left <= right, "<": lambda: left < right,
            ">=": lambda: left >= right, "==": lambda: left == right}[operator]()


class _Files:
    """File sets in temporary directories; ``reopen`` closes and opens the file again."""

    def __init__(self, cls) -> None:
        self.cls = cls
        self.directory = tempfile.mkdtemp(prefix="set-state-")
        self.path = f"{self.directory}/set"

    def make(self):
        return self.cls(path=self.path)

    def reopen(self, s):
        s.close()
        return self.cls(path=self.path)

    def dispose(self, s) -> None:
        s.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def set_machine(make, oracle, ordered: bool, files: type[_Files] | None = None):
    """A machine holding ``self.s`` (from ``make()``) and ``self.model`` (``oracle()``);
    ``ordered``: the set iterates in insertion order (LongHashSet) — checked against a dict's
    keys — else in sorted order (TreeSet, checked by the SortedSet model itself)."""

    class SetMachine(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.files = files(make) if files is not None else None
            self.s = self.files.make() if self.files else make()
            self.model = oracle()
            self.order: dict[int, None] = {}  # insertion order, for LongHashSet
            self.committed: tuple | None = (set(), {}) if self.files else None

        def _model_add(self, elements) -> None:
            for e in elements:
                self.model.add(e)
                self.order.setdefault(e, None)

        def _model_discard(self, elements) -> None:
            for e in elements:
                self.model.discard(e)
                self.order.pop(e, None)

        @rule(e=ELEMENTS)
        def add(self, e):
            self.s.add(e)
            self._model_add([e])

        @rule(e=ELEMENTS)
        def discard(self, e):
            self.s.discard(e)
            self._model_discard([e])

        @rule(e=ELEMENTS)
        def remove(self, e):
            if e in self.model:
                self.s.remove(e)
                self._model_discard([e])
            else:
                with pytest.raises(KeyError):
                    self.s.remove(e)

        @rule()
        def pop(self):
            if not self.model:
                with pytest.raises((KeyError, IndexError)):
                    self.s.pop()
                return
            e = self.s.pop()
            expected = next(reversed(self.order)) if ordered else self.model[-1]
            assert e == expected
            self._model_discard([e])

        @rule(foreign=FOREIGN)
        def foreign_elements_are_misses(self, foreign):
            assert foreign not in self.s
            self.s.discard(foreign)
            with pytest.raises((TypeError, OverflowError)):
                self.s.add(foreign)

        @rule(column=COLUMNS, as_array=st.booleans())
        def add_many(self, column, as_array):
            self.s.add_many(np.array(column, np.int64) if as_array else column)
            self._model_add(column)

        @rule(column=COLUMNS)
        def discard_many(self, column):
            present = len(set(column) & set(self.model))
            assert self.s.discard_many(np.array(column, np.int64)) == present
            self._model_discard(column)

        @rule(column=COLUMNS)
        def contains_many(self, column):
            got = self.s.contains_many(np.array(column, np.int64)).tolist()
            assert got == [e in self.model for e in column]

        @rule(operator=OPERATORS, other=COLUMNS, kind=st.sampled_from(["ours", "set"]))
        def algebra(self, operator, other, kind):
            theirs = type(self.s)(other) if kind == "ours" else set(other)
            expected = _apply(operator, set(self.model), set(other))
            got = _apply(operator, self.s, theirs)
            if isinstance(expected, bool):
                assert got is expected or got == expected
                return
            assert set(got) == expected
            if got is self.s:  # an in-place form: the model follows
                self._model_discard([e for e in list(self.model) if e not in expected])
                self._model_add([e for e in theirs if e in expected])  # in the order added
            else:
                got._check()

        @rule(other=COLUMNS, name=st.sampled_from(["union", "intersection", "difference",
                                                   "symmetric_difference"]))
        def named_with_an_array(self, other, name):
            expected = getattr(set(self.model), name)(set(other))
            assert set(getattr(self.s, name)(np.array(other, np.int64))) == expected

        @rule()
        def iterate_and_change(self):
            it = iter(self.s)
            if not self.model:
                assert list(it) == []
                return
            next(it)
            if 1000 in self.model:  # a change of size either way
                self.s.remove(1000)
                self._model_discard([1000])
            else:
                self.s.add(1000)
                self._model_add([1000])
            with pytest.raises(RuntimeError):
                next(it)

        @rule()
        def clear(self):
            self.s.clear()
            self.model.clear()
            self.order.clear()

        @precondition(lambda self: self.files is not None)
        @rule()
        def commit(self):
            self.s.commit()
            self.committed = (set(self.model), dict(self.order))

        @precondition(lambda self: self.files is not None)
        @rule()
        def rollback(self):
            self.s.rollback()
            members, order = self.committed
            self.model.clear()
            self.order = dict(order)
            self._model_add(order if ordered else sorted(members))

        @precondition(lambda self: self.files is not None)
        @rule()
        def close_and_reopen(self):
            self.s = self.files.reopen(self.s)  # close commits
            self.committed = (set(self.model), dict(self.order))

        @invariant()
        def agrees(self):
            self.s._check()
            assert len(self.s) == len(self.model)
            assert list(self.s) == (list(self.order) if ordered else list(self.model))

        def teardown(self):
            if self.files is not None:
                self.files.dispose(self.s)
            else:
                self.s.close()

    return SetMachine


def _run(machine) -> None:
    machine.TestCase.settings = SETTINGS
    machine.TestCase().runTest()


@pytest.mark.parametrize("cls", [LongHashSet, ReferenceLongHashSet], ids=["default", "reference"])
def test_longhashset_behaves_as_a_set(cls):
    _run(set_machine(cls, set, ordered=True))


@pytest.mark.parametrize("cls", [LongHashSet, ReferenceLongHashSet], ids=["default", "reference"])
def test_a_file_longhashset_commits_and_reopens_as_a_set(cls):
    _run(set_machine(cls, set, ordered=True, files=_Files))


KEYED_SETS = [functools.partial(HashSet, key="int64"), functools.partial(ReferenceHashSet, key="int64")]
"""HashSets of int64 elements: the machine's foreign elements ("a", 2**70, 1.5, None) are none
of theirs, as for a LongHashSet (an "object" set would hold them)."""


@pytest.mark.parametrize("cls", KEYED_SETS, ids=["default", "reference"])
def test_hashset_behaves_as_a_set(cls):
    _run(set_machine(cls, set, ordered=True))


@pytest.mark.parametrize("cls", KEYED_SETS, ids=["default", "reference"])
def test_a_file_hashset_commits_and_reopens_as_a_set(cls):
    _run(set_machine(cls, set, ordered=True, files=_Files))


TREE_SETS = [TreeSet, ReferenceTreeSet]
"""TreeSet on its default element slots and on the reference's (test_treeset_slots)."""


def _small_tree_set(cls, **options):
    return cls(node_size=4, cache_size=8, **options)


def _tree_files(cls):
    class TreeFiles(_Files):
        def make(self):
            return cls(path=self.path, node_size=4, cache_size=8)

        def reopen(self, s):
            s.close()
            return cls(path=self.path, cache_size=8)

    return TreeFiles


@pytest.mark.parametrize("cls", TREE_SETS, ids=["default", "reference"])
def test_treeset_behaves_as_a_sorted_set(cls):
    _run(set_machine(functools.partial(_small_tree_set, cls), SortedSet, ordered=False))


@pytest.mark.parametrize("cls", TREE_SETS, ids=["default", "reference"])
def test_a_file_treeset_commits_and_reopens_as_a_sorted_set(cls):
    _run(set_machine(functools.partial(_small_tree_set, cls), SortedSet, ordered=False,
                     files=_tree_files(cls)))
