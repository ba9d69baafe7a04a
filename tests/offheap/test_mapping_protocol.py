"""CPython's own mapping protocol tests (``test.mapping_tests``) for every map kind.

Each kind subclasses ``TestMappingProtocol`` (the LongHashMap, a hash map, also
``TestHashMappingProtocol``) with ``_reference()`` and ``_empty_mapping()`` giving keys of its
type. CPython writes some keys literally as str (``'a'``, ``'key'``) and uses objects with a
failing ``__hash__`` or ``__eq__`` as keys; for the int64-keyed maps :class:`_IntKeyCases`
runs each of those tests again with int keys in their place, and with a key whose ``__index__``
fails where CPython's ``__hash__`` fails (an int64 map admits a key by ``__index__``, as a dict
does by ``__hash__``), keeping every check the map's rules allow and saying where they differ
(docs/index.md, "Dict semantics"). The str-keyed TreeMap skips the tests CPython writes with
int literals; ``tests/offheap/test_dict_semantics.py`` covers the same behaviours. Every skip
names its reason. Without the ``test`` package the module is skipped.
"""

from __future__ import annotations

import unittest

import pytest

from offheap import DB, HashMap, LongHashMap, TreeMap
from offheap.hashmap.longhashmap import ReferenceLongHashMap

mapping_tests = pytest.importorskip("test.mapping_tests")


_INT_REFERENCE = {1: "2", 11: "value1", 12: (1, 2, 3)}


def _skip(reason: str):
    return unittest.skip(reason)(lambda self: None)


class Failure(Exception):
    """What the failing keys and values below raise."""


class FailingIndex:
    """A key that admits as ``value`` until ``fail`` is set, then raises: CPython's BadHash."""

    def __init__(self, value: int) -> None:
        self.value = value
        self.fail = False

    def __index__(self) -> int:
        if self.fail:
            raise Failure()
        return self.value


class FailingEquality:
    """A value (module-level, so it pickles) whose ``==`` raises: CPython's BadCmp."""

    def __eq__(self, other):
        raise Failure()

    __hash__ = object.__hash__


class _IntKeyCases:
    """CPython's tests that write str keys, with int keys (see the module docstring); mixed in
    before a ``test.mapping_tests`` class, whose methods the ``super()`` calls reach."""

    def _map_class(self):
        return type(self._empty_mapping())

    def _is_tree(self) -> bool:
        return isinstance(self._empty_mapping(), TreeMap)

    def test_constructor(self):
        mapping_tests.BasicTestMappingProtocol.test_constructor(self)
        self.assertTrue(self._empty_mapping() is not self._empty_mapping())
        self.assertEqual(self._map_class()({1: 1, 2: 2}), {1: 1, 2: 2})
        self.assertRaises(TypeError, self._map_class(), x=1, y=2)  # str keys: not int64

    def test_bool(self):
        mapping_tests.BasicTestMappingProtocol.test_bool(self)
        self.assertTrue(not self._empty_mapping())
        self.assertTrue(self._full_mapping({24: "y"}))
        self.assertTrue(bool(self._empty_mapping()) is False)
        self.assertTrue(bool(self._full_mapping({24: "y"})) is True)

    def test_keys(self):
        mapping_tests.BasicTestMappingProtocol.test_keys(self)
        d = self._full_mapping({1: 1, 2: 2})
        k = d.keys()
        self.assertIn(1, k)
        self.assertIn(2, k)
        self.assertNotIn(3, k)

    def test_contains(self):
        d = self._empty_mapping()
        self.assertNotIn(1, d)
        self.assertTrue(not (1 in d))
        self.assertTrue(1 not in d)
        d = self._full_mapping({1: 1, 2: 2})
        self.assertIn(1, d)
        self.assertIn(2, d)
        self.assertNotIn(3, d)
        self.assertNotIn("a", d)  # a key of another type is a miss, as in a dict
        self.assertRaises(TypeError, d.__contains__)

    def test_len(self):
        mapping_tests.BasicTestMappingProtocol.test_len(self)
        self.assertEqual(len(self._full_mapping({1: 1, 2: 2})), 2)

    def test_getitem(self):
        mapping_tests.BasicTestMappingProtocol.test_getitem(self)
        d = self._full_mapping({1: 1, 2: 2})
        self.assertEqual(d[1], 1)
        self.assertEqual(d[2], 2)
        d[3] = 3
        d[1] = 4
        self.assertEqual(d[3], 3)
        self.assertEqual(d[1], 4)
        del d[2]
        self.assertEqual(d, {1: 4, 3: 3})
        self.assertRaises(TypeError, d.__getitem__)
        d = self._empty_mapping()  # BadEq: a key object is admitted by value, never compared
        d[FailingIndex(24)] = 42
        self.assertRaises(KeyError, d.__getitem__, 23)
        self.assertEqual(d[24], 42)
        d = self._empty_mapping()  # BadHash
        x = FailingIndex(42)
        d[x] = 42
        x.fail = True
        self.assertRaises(Failure, d.__getitem__, x)

    def test_update(self):
        mapping_tests.BasicTestMappingProtocol.test_update(self)
        d = self._empty_mapping()
        d.update({1: 100})
        d.update({2: 20})
        d.update({1: 1, 2: 2, 3: 3})
        self.assertEqual(d, {1: 1, 2: 2, 3: 3})
        d.update()
        self.assertEqual(d, {1: 1, 2: 2, 3: 3})
        self.assertRaises(TypeError, d.update, x=100)  # keyword arguments are str keys
        d = self._empty_mapping()
        d.update([(24, 100), (25, 20)])
        self.assertEqual(d, {24: 100, 25: 20})
        d = self._full_mapping({1: 3, 2: 4})
        d.update(self._full_mapping({1: 2, 3: 4, 5: 6}).items())
        self.assertEqual(d, {1: 2, 2: 4, 3: 4, 5: 6})

        class SimpleUserDict:
            def __init__(self):
                self.d = {1: 1, 2: 2, 3: 3}

            def keys(self):
                return self.d.keys()

            def __getitem__(self, i):
                return self.d[i]

        d.clear()
        d.update(SimpleUserDict())
        self.assertEqual(d, {1: 1, 2: 2, 3: 3})

    def test_fromkeys(self):
        cls = self._map_class()
        self.assertEqual(cls.fromkeys([1, 2, 3]), {1: None, 2: None, 3: None})
        d = self._empty_mapping()
        self.assertTrue(not (d.fromkeys([1, 2, 3]) is d))
        self.assertEqual(d.fromkeys([1, 2, 3]), {1: None, 2: None, 3: None})
        self.assertEqual(d.fromkeys((4, 5), 0), {4: 0, 5: 0})
        self.assertEqual(d.fromkeys([]), {})

        def g():
            yield 1

        self.assertEqual(d.fromkeys(g()), {1: None})
        self.assertRaises(TypeError, cls.fromkeys, 3)

        class dictlike(cls):
            pass

        self.assertEqual(dictlike.fromkeys([1]), {1: None})
        self.assertEqual(dictlike().fromkeys([1]), {1: None})
        self.assertTrue(type(dictlike.fromkeys([1])) is dictlike)
        self.assertTrue(type(dictlike().fromkeys([1])) is dictlike)

        class baddict1(cls):
            def __init__(self, *args, **kwargs):
                raise Failure()

        self.assertRaises(Failure, baddict1.fromkeys, [1])

        class BadSeq:
            def __iter__(self):
                return self

            def __next__(self):
                raise Failure()

        self.assertRaises(Failure, cls.fromkeys, BadSeq())
        # CPython's mydict (a __new__ returning a UserDict) and baddict2 (a failing
        # __setitem__) assume fromkeys stores key by key; ours is one put_many bulk load
        # (docs/index.md), which is what a subclass overriding __setitem__ sees:
        class baddict2(cls):
            def __setitem__(self, key, value):
                raise Failure()

        self.assertEqual(baddict2.fromkeys([1]), {1: None})

    def test_get(self):
        mapping_tests.BasicTestMappingProtocol.test_get(self)
        d = self._empty_mapping()
        self.assertTrue(d.get(3) is None)
        self.assertEqual(d.get(3, 3), 3)
        d = self._full_mapping({1: 1, 2: 2})
        self.assertTrue(d.get(3) is None)
        self.assertEqual(d.get(3, 3), 3)
        self.assertEqual(d.get(1), 1)
        self.assertEqual(d.get(1, 3), 1)
        self.assertEqual(d.get("a", 3), 3)  # a key of another type is a miss

    def test_setdefault(self):
        mapping_tests.BasicTestMappingProtocol.test_setdefault(self)
        d = self._empty_mapping()
        self.assertTrue(d.setdefault(10) is None)
        d.setdefault(10, [])
        self.assertTrue(d.setdefault(10) is None)
        # values are stored by value: CPython's setdefault(k, []).append(v) changes a copy, so
        # the idiom that works assigns the new value (docs/index.md)
        d[11] = d.setdefault(11, []) + [3]
        self.assertEqual(d[11][0], 3)
        d[11] = d.setdefault(11, []) + [4]
        self.assertEqual(len(d[11]), 2)
        d.setdefault(12, []).append(5)
        self.assertEqual(d[12], [])
        d = self._empty_mapping()  # BadHash
        x = FailingIndex(42)
        d[x] = 42
        x.fail = True
        self.assertRaises(Failure, d.setdefault, x, [])

    def test_popitem(self):
        d = self._empty_mapping()
        self.assertRaises(KeyError, d.popitem)
        if self._is_tree():  # SortedDict's popitem(index): a position, not a TypeError
            self.assertRaises(KeyError, d.popitem, 42)
        else:
            self.assertRaises(TypeError, d.popitem, 42)
        for copymode in -1, +1:
            for log2size in range(12):
                size = 2**log2size
                a = self._empty_mapping()
                b = self._empty_mapping()
                for i in range(size):
                    a[i] = i
                    if copymode < 0:
                        b[i] = i
                if copymode > 0:
                    b = a.copy()
                for i in range(size):
                    ka, va = ta = a.popitem()
                    self.assertEqual(va, ka)
                    kb, vb = tb = b.popitem()
                    self.assertEqual(vb, kb)
                    self.assertTrue(not (copymode < 0 and ta != tb))
                self.assertTrue(not a)
                self.assertTrue(not b)

    def test_pop(self):
        mapping_tests.BasicTestMappingProtocol.test_pop(self)
        d = self._empty_mapping()
        k, v = 7, "def"
        self.assertEqual(d.pop(k, v), v)
        d[k] = v
        self.assertEqual(d.pop(k, 1), v)
        d = self._empty_mapping()  # BadHash
        x = FailingIndex(42)
        d[x] = 42
        x.fail = True
        self.assertRaises(Failure, d.pop, x)

    def test_repr(self):
        """A map's repr is its summary (entries, bytes per entry), not dict's; it never calls
        a value's repr, so a failing one (CPython's BadRepr) does not reach it."""
        d = self._empty_mapping()
        name = "TreeMap" if self._is_tree() else d._kind
        self.assertIn(f"{name} 0 entries", repr(d))
        d[1] = 2
        self.assertIn(f"{name} 1 entries", repr(d))
        self.assertIn(f"{name} 1 entries", repr(self._full_mapping({1: FailingEquality()})))

    def test_eq(self):
        self.assertEqual(self._empty_mapping(), self._empty_mapping())
        self.assertEqual(self._full_mapping({1: 2}), self._full_mapping({1: 2}))
        d1 = self._full_mapping({1: FailingEquality()})  # BadCmp: as a value, keys are ints
        d2 = self._full_mapping({1: 1})
        self.assertRaises(Failure, lambda: FailingEquality() == 1)
        self.assertRaises(Failure, lambda: d1 == d2)

    test_repr_deep = _skip("a map's repr is a summary that never recurses into its values, and a "
                           "value is a serialized copy: nested maps are no deep structure")


def _int_keyed(base, factory):
    class IntKeyed(_IntKeyCases, base):
        type2test = factory

        def _reference(self):
            return dict(_INT_REFERENCE)

        def _empty_mapping(self):
            return factory()

    return IntKeyed


class TestLongHashMap(_int_keyed(mapping_tests.TestHashMappingProtocol, LongHashMap)):
    pass


class TestReferenceLongHashMap(_int_keyed(mapping_tests.TestHashMappingProtocol,
                                          ReferenceLongHashMap)):
    pass


def _int_tree(*args, **options):
    return TreeMap(*args, node_size=4, cache_size=8, **options)


class _TreeViews:
    """CPython's test_values and test_items, but for ``values(None)``: a TreeMap's views take a
    key range (``items(lo, hi)``), and None is an open end, not a TypeError. ``_key(i)`` is
    the i-th key of the tree's type, in order."""

    def _key(self, i: int):
        return i

    def test_values(self):
        self.assertEqual(list(self._empty_mapping().values()), [])
        d = self._full_mapping({self._key(1): 2, self._key(3): 4})
        self.assertEqual(list(d.values()), [2, 4])
        self.assertEqual(list(d.values(None)), list(d.values()))
        self.assertEqual(list(d.values(self._key(2))), [4])

    def test_items(self):
        self.assertEqual(list(self._empty_mapping().items()), [])
        one, three = self._key(1), self._key(3)
        d = self._full_mapping({one: 2, three: 4})
        self.assertEqual(list(d.items()), [(one, 2), (three, 4)])
        self.assertEqual(list(d.items(None)), list(d.items()))
        self.assertEqual(list(d.items(None, self._key(2))), [(one, 2)])


class TestIntTreeMap(_TreeViews, _int_keyed(mapping_tests.TestMappingProtocol, _int_tree)):
    pass


class _StrTree(TreeMap):
    """A str-keyed TreeMap whose constructor and ``fromkeys`` CPython's tests can call bare."""

    def __init__(self, data=(), /, **options) -> None:
        options = {"key": "str", "node_size": 4, "cache_size": 8, **options}
        super().__init__(data, **options)


class _StrKeyCases:
    """CPython's tests that write int keys, with str keys in their place; mixed in before a
    ``test.mapping_tests`` class whose ``type2test`` takes str keys."""

    def _key(self, i: int):
        return f"k{i}"

    def test_clear(self):
        d = self._full_mapping({"1": 1, "2": 2, "3": 3})
        d.clear()
        self.assertEqual(d, {})
        self.assertRaises(TypeError, d.clear, None)

    def test_copy(self):
        d = self._full_mapping({"1": 1, "2": 2, "3": 3})
        self.assertEqual(d.copy(), {"1": 1, "2": 2, "3": 3})
        d = self._empty_mapping()
        self.assertEqual(d.copy(), d)
        self.assertIsInstance(d.copy(), d.__class__)
        self.assertRaises(TypeError, d.copy, None)

    def test_update(self):
        mapping_tests.BasicTestMappingProtocol.test_update(self)
        d = self._empty_mapping()
        d.update({"1": 100})
        d.update({"2": 20})
        d.update({"1": 1, "2": 2, "3": 3})
        self.assertEqual(d, {"1": 1, "2": 2, "3": 3})
        d = self._empty_mapping()
        d.update(x=100)
        d.update(x=1, y=2, z=3)
        self.assertEqual(d, {"x": 1, "y": 2, "z": 3})
        d = self._empty_mapping()
        d.update([("x", 100), ("y", 20)], x=1, y=2)
        self.assertEqual(d, {"x": 1, "y": 2})
        d = self._full_mapping({"1": 3, "2": 4})
        d.update(self._full_mapping({"1": 2, "3": 4, "5": 6}).items())
        self.assertEqual(d, {"1": 2, "2": 4, "3": 4, "5": 6})

    def test_fromkeys(self):
        cls = self.type2test
        self.assertEqual(cls.fromkeys("abc"), {"a": None, "b": None, "c": None})
        d = self._empty_mapping()
        self.assertTrue(not (d.fromkeys("abc") is d))
        self.assertEqual(d.fromkeys(("4", "5"), 0), {"4": 0, "5": 0})
        self.assertEqual(d.fromkeys([]), {})
        self.assertRaises(TypeError, cls.fromkeys, 3)

        class dictlike(cls):
            pass

        self.assertTrue(type(dictlike.fromkeys("a")) is dictlike)
        self.assertEqual(dictlike().fromkeys("a"), {"a": None})

    def test_setdefault(self):
        mapping_tests.BasicTestMappingProtocol.test_setdefault(self)
        d = self._empty_mapping()
        self.assertTrue(d.setdefault("key0") is None)
        d["key"] = d.setdefault("key", []) + [3]  # stored by value: see _IntKeyCases
        d["key"] = d.setdefault("key", []) + [4]
        self.assertEqual(d["key"], [3, 4])

    def test_popitem(self):
        d = self._empty_mapping()
        self.assertRaises(KeyError, d.popitem)
        if isinstance(d, TreeMap):  # SortedDict's popitem(index): a position
            self.assertRaises(KeyError, d.popitem, 42)
        else:
            self.assertRaises(TypeError, d.popitem, 42)
        for size in (1, 7, 300):
            a = self._full_mapping({repr(i): i for i in range(size)})
            b = a.copy()
            for _ in range(size):
                ka, va = ta = a.popitem()
                self.assertEqual(va, int(ka))
                self.assertEqual(b.popitem(), ta)
            self.assertTrue(not a and not b)


class TestStrTreeMap(_StrKeyCases, _TreeViews, mapping_tests.TestMappingProtocol):
    type2test = _StrTree


class _StrHashMap(HashMap):
    """A str-keyed HashMap that CPython's tests can construct bare."""

    def __init__(self, data=(), /, **options) -> None:
        super().__init__(data, **{"key": "str", **options})


class TestStrHashMap(_StrKeyCases, mapping_tests.TestHashMappingProtocol):
    type2test = _StrHashMap

    def test_repr(self):
        self.assertIn("HashMap 0 entries, key=str", repr(self._empty_mapping()))
        self.assertIn("HashMap 1 entries", repr(self._full_mapping({"a": FailingEquality()})))

    test_repr_deep = _IntKeyCases.test_repr_deep

    def test_getitem(self):
        mapping_tests.BasicTestMappingProtocol.test_getitem(self)
        d = self._full_mapping({"a": 1, "b": 2})
        del d["a"]
        self.assertEqual(d, {"b": 2})
        self.assertRaises(KeyError, d.__getitem__, 1)  # a key of another type is a miss
        self.assertRaises(TypeError, d.__setitem__, 1, 1)  # and no key to store

    def test_eq(self):
        d1 = self._full_mapping({"a": FailingEquality()})
        self.assertRaises(Failure, lambda: d1 == self._full_mapping({"a": 1}))

    def test_pop(self):
        mapping_tests.BasicTestMappingProtocol.test_pop(self)
        d = self._full_mapping({"a": 1})
        self.assertEqual(d.pop(1, "absent"), "absent")

    def test_values(self):
        mapping_tests.BasicTestMappingProtocol.test_values(self)
        self.assertEqual(list(self._full_mapping({"a": 2}).values()), [2])

    def test_items(self):
        mapping_tests.BasicTestMappingProtocol.test_items(self)
        self.assertEqual(list(self._full_mapping({"a": 2}).items()), [("a", 2)])

    def test_mutatingiteration(self):
        d = self._full_mapping({"a": 1})
        with self.assertRaises(RuntimeError):
            for key in d:
                d[key + "a"] = 1


class _ObjectHashMap(HashMap):
    """An "object"-keyed HashMap that CPython's tests can construct bare."""

    def __init__(self, data=(), /, **options) -> None:
        super().__init__(data, **{"key": "object", **options})


class TestObjectHashMap(_int_keyed(mapping_tests.TestHashMappingProtocol, _ObjectHashMap)):
    """Any hashable keys of the "object" key type: int keys where CPython writes str ones, so
    that the failing ``__index__`` keys stand for CPython's failing ``__hash__``, as a key of
    an "object" map is admitted by ``__index__`` when it is no int, float, str, bytes or tuple."""

    def test_constructor(self):
        mapping_tests.BasicTestMappingProtocol.test_constructor(self)
        self.assertEqual(self._map_class()(x=1, y=2), {"x": 1, "y": 2})

    def test_update(self):
        mapping_tests.BasicTestMappingProtocol.test_update(self)
        d = self._full_mapping({1: 3})
        d.update([(1, 100), ("x", 20)], x=1, y=2)
        self.assertEqual(d, {1: 100, "x": 1, "y": 2})
        d.update({1.0: 7, True: 8})  # one key, as in a dict
        self.assertEqual(d, {1: 8, "x": 1, "y": 2})


class _DBCollections:
    """Collections of a ``DB.memory()`` that lives as long as the test."""

    def setUp(self):
        self.db = DB.memory()
        self.addCleanup(self.db.close)
        self.names = iter(range(1 << 30))


class TestDBTreeMap(_DBCollections, _TreeViews,
                    _int_keyed(mapping_tests.TestMappingProtocol, None)):

    def _empty_mapping(self):
        return self.db.tree_map(f"t{next(self.names)}", node_size=4, cache_size=8)


class TestDBHashMap(_DBCollections, _int_keyed(mapping_tests.TestHashMappingProtocol, None)):
    def _empty_mapping(self):
        return self.db.hash_map(f"h{next(self.names)}")
