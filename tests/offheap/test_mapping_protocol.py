"""CPython's own mapping protocol tests (``test.mapping_tests``) for every map kind.

Each kind subclasses ``TestMappingProtocol`` (the LongHashMap, a hash map, also
``TestHashMappingProtocol``) with ``_reference()`` and ``_empty_mapping()`` giving keys of its
type. CPython writes some keys literally: str keys (``'a'``, ``'key'``) in tests that an int64
map cannot run, int keys (``{1: 2}``) in tests that a str map cannot run, objects with a failing
``__hash__`` or ``__eq__`` that no offheap key can be. Those tests are skipped by name, each with
its reason; ``tests/offheap/test_dict_semantics.py`` covers the same behaviours with keys of the
map's type. Without the ``test`` package the module is skipped.
"""

from __future__ import annotations

import unittest

import pytest

from offheap import DB, LongHashMap, TreeMap
from offheap.hashmap.longhashmap import ReferenceLongHashMap

mapping_tests = pytest.importorskip("test.mapping_tests")

_STR_LITERALS = "CPython writes this test's keys as str literals; this map has int64 keys"
_INT_LITERALS = "CPython writes this test's keys as int literals; this map has str keys"
_FOREIGN_OBJECTS = "the test's keys are objects with a failing __hash__/__eq__: not int64/str"
_REPR = "a map's repr is its summary (entries, bytes per entry), not dict's"
_BY_VALUE = ("values are stored by value: setdefault(k, []).append(v) changes a copy; the idiom "
             "is m[k] = m.setdefault(k, []) + [v] (docs/index.md, 'Values are stored by value')")
_RANGE_VIEWS = "a TreeMap's keys()/values()/items() take a key range: items(lo, hi)"
_POSITIONAL_POPITEM = ("TreeMap.popitem(index=-1) is SortedDict's: popitem(42) pops position 42, "
                       "where dict.popitem takes no argument")

_INT_REFERENCE = {1: "2", 11: "value1", 12: (1, 2, 3)}


def _skip(reason: str):
    return unittest.skip(reason)(lambda self: None)


def _int_keyed(base, factory):
    class IntKeyed(base):
        type2test = factory

        def _reference(self):
            return dict(_INT_REFERENCE)

        def _empty_mapping(self):
            return factory()

        test_bool = test_contains = test_keys = test_len = test_get = test_getitem = \
            test_pop = test_setdefault = test_update = test_constructor = test_fromkeys = \
            test_popitem = _skip(_STR_LITERALS)
        test_repr = test_repr_deep = _skip(_REPR)
        test_eq = _skip(_FOREIGN_OBJECTS)

    return IntKeyed


class TestLongHashMap(_int_keyed(mapping_tests.TestHashMappingProtocol, LongHashMap)):
    pass


class TestReferenceLongHashMap(_int_keyed(mapping_tests.TestHashMappingProtocol,
                                          ReferenceLongHashMap)):
    pass


def _int_tree(*args, **options):
    return TreeMap(*args, node_size=4, cache_size=8, **options)


class TestIntTreeMap(_int_keyed(mapping_tests.TestMappingProtocol, _int_tree)):
    test_values = test_items = _skip(_RANGE_VIEWS)


class _StrTree(TreeMap):
    """A str-keyed TreeMap whose constructor and ``fromkeys`` CPython's tests can call bare."""

    def __init__(self, data=(), /, **options) -> None:
        options = {"key": "str", "node_size": 4, "cache_size": 8, **options}
        super().__init__(data, **options)


class TestStrTreeMap(mapping_tests.TestMappingProtocol):
    type2test = _StrTree

    test_clear = test_copy = test_update = test_fromkeys = _skip(_INT_LITERALS)
    test_values = test_items = _skip(_RANGE_VIEWS)
    test_setdefault = _skip(_BY_VALUE)
    test_popitem = _skip(_POSITIONAL_POPITEM)


class _DBCollections:
    """Collections of a ``DB.memory()`` that lives as long as the test."""

    def setUp(self):
        self.db = DB.memory()
        self.addCleanup(self.db.close)
        self.names = iter(range(1 << 30))


class TestDBTreeMap(_DBCollections, _int_keyed(mapping_tests.TestMappingProtocol, None)):
    test_values = test_items = _skip(_RANGE_VIEWS)

    def _empty_mapping(self):
        return self.db.tree_map(f"t{next(self.names)}", node_size=4, cache_size=8)


class TestDBHashMap(_DBCollections, _int_keyed(mapping_tests.TestHashMappingProtocol, None)):
    def _empty_mapping(self):
        return self.db.hash_map(f"h{next(self.names)}")
