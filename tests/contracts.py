"""The MutableMapping contract every offheap map passes, with ``dict`` as the oracle.

A map's test module subclasses :class:`MutableMappingContract` (pytest collects the subclass,
named ``Test...``), and sets ``make`` (a factory of empty maps) and ``keys`` (a list of distinct
valid keys of the map's type) and ``values`` (sample values). :func:`oracle_machine` builds a
hypothesis state machine that drives a map and a dict with the same operations and compares them
after every step, calling the map's ``_check()``.
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from offheap.errors import ClosedError


class MutableMappingContract:
    keys: list = []
    values: list = [None, "", "x", 0, 1, -7, 3.5, b"", b"bytes", "a longer string value", (1, 2)]

    def make(self):
        raise NotImplementedError

    def filled(self, n=None):
        m, d = self.make(), {}
        for i, k in enumerate(self.keys[:n]):
            v = self.values[i % len(self.values)]
            m[k] = v
            d[k] = v
        return m, d

    def assert_same(self, m, d):
        assert len(m) == len(d)
        assert dict(m.items()) == d
        assert sorted(map(repr, m)) == sorted(map(repr, d))
        for k, v in d.items():
            assert m[k] == v and type(m[k]) is type(v)
        if hasattr(m, "_check"):
            m._check()

    def test_empty(self):
        m = self.make()
        assert len(m) == 0 and list(m) == [] and not m
        with pytest.raises(KeyError):
            m[self.keys[0]]
        assert self.keys[0] not in m
        assert m.get(self.keys[0]) is None and m.get(self.keys[0], 5) == 5

    def test_set_get_overwrite_delete(self):
        m, d = self.filled()
        self.assert_same(m, d)
        for k in self.keys[::2]:
            m[k] = d[k] = "overwritten"
        self.assert_same(m, d)
        for k in self.keys[::3]:
            del m[k]
            del d[k]
        self.assert_same(m, d)
        with pytest.raises(KeyError):
            del m[self.keys[0]]

    def test_views_and_iteration(self):
        m, d = self.filled()
        assert set(m.keys()) == set(d.keys())
        assert sorted(map(repr, m.values())) == sorted(map(repr, d.values()))
        assert set(m.items()) == set(d.items()) if all(
            isinstance(v, (str, int, float, bytes, type(None), tuple)) for v in d.values()) else True
        k = self.keys[0]
        assert k in m.keys() and (k, d[k]) in m.items()

    def test_pop_popitem_setdefault(self):
        m, d = self.filled(20)
        k = self.keys[0]
        assert m.pop(k) == d.pop(k)
        assert m.pop(k, "gone") == "gone"
        with pytest.raises(KeyError):
            m.pop(k)
        assert m.setdefault(k, "new") == "new" and m[k] == "new"
        d[k] = "new"
        assert m.setdefault(k, "other") == "new"
        popped = {}
        while m:
            pk, pv = m.popitem()
            popped[pk] = pv
        assert popped == d
        with pytest.raises(KeyError):
            m.popitem()

    def test_update_forms_and_clear(self):
        m, d = self.filled(10)
        extra = {k: "u" for k in self.keys[5:15]}
        m.update(extra)
        d.update(extra)
        self.assert_same(m, d)
        m.update(list({k: "p" for k in self.keys[15:20]}.items()))
        d.update({k: "p" for k in self.keys[15:20]})
        self.assert_same(m, d)
        m.clear()
        assert len(m) == 0 and list(m) == []
        m[self.keys[3]] = 1
        assert dict(m.items()) == {self.keys[3]: 1}

    def test_equality_and_copy(self):
        m, d = self.filled(30)
        assert m == d and d == m
        c = m.copy()
        assert c == m and c is not m
        c[self.keys[0]] = "changed"
        assert m[self.keys[0]] == d[self.keys[0]]
        assert m != {}

    def test_iteration_detects_mutation(self):
        m, _ = self.filled(50)
        with pytest.raises(RuntimeError):
            for k in m:
                m[self.keys[-1]] = 1
                del m[k]

    def test_repr_and_html(self):
        m, _ = self.filled(10)
        assert type(m).__name__ in repr(m)
        assert "<table" in m._repr_html_()
        stats = m.stats()
        assert stats.n_entries == 10 and stats.reserved_bytes > 0 and stats.bytes_per_entry > 0

    def test_closed_map_raises(self):
        m, _ = self.filled(5)
        m.close()
        m.close()
        for action in (lambda: m[self.keys[0]], lambda: m.__setitem__(self.keys[0], 1),
                       lambda: list(m), lambda: m.stats(), lambda: self.keys[0] in m):
            with pytest.raises(ClosedError):
                action()
        assert "closed" in repr(m)

    def test_context_manager(self):
        with self.make() as m:
            m[self.keys[0]] = 1
        assert m.closed

    def test_values_roundtrip_types(self):
        m = self.make()
        for k, v in zip(self.keys, self.values):
            m[k] = v
        for k, v in zip(self.keys, self.values):
            got = m[k]
            assert got == v and type(got) is type(v)
            assert pickle.dumps(got) == pickle.dumps(v)


def oracle_machine(make, keys_strategy, values_strategy, reopen=None, ordered=False):
    """A state machine comparing a map with a dict under inserts, overwrites, deletes, bulk
    calls, iteration, flush and (if ``reopen`` is given: map -> map) close and reopen.
    ``ordered``: the map keeps dict's insertion order (iteration, ``popitem()`` LIFO)."""

    class MapVersusDict(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.map = make()
            self.model = {}

        @rule(k=keys_strategy, v=values_strategy)
        def put(self, k, v):
            self.map[k] = v
            self.model[k] = v

        @rule(k=keys_strategy)
        def delete(self, k):
            if k in self.model:
                del self.map[k]
                del self.model[k]
            else:
                with pytest.raises(KeyError):
                    del self.map[k]

        @rule(k=keys_strategy)
        def lookup(self, k):
            assert self.map.get(k, "<absent>") == self.model.get(k, "<absent>")
            assert (k in self.map) == (k in self.model)

        @rule(data=st.data())
        def overwrite_existing(self, data):
            if self.model:
                k = data.draw(st.sampled_from(sorted(self.model, key=repr)))
                v = data.draw(values_strategy)
                self.map[k] = v
                self.model[k] = v

        @rule(pairs=st.lists(st.tuples(keys_strategy, values_strategy), max_size=40))
        def update_pairs(self, pairs):
            self.map.update(pairs)
            self.model.update(pairs)

        @rule()
        def popitem(self):
            if self.model:
                k, v = self.map.popitem()
                if ordered:
                    assert (k, v) == self.model.popitem()
                else:
                    assert self.model.pop(k) == v

        @rule()
        def iterate(self):
            if ordered:
                assert list(self.map.items()) == list(self.model.items())
            else:
                assert dict(self.map.items()) == self.model

        @rule()
        def flush(self):
            self.map.flush()

        @precondition(lambda self: reopen is not None)
        @rule()
        def close_and_reopen(self):
            self.map = reopen(self.map)

        @invariant()
        def agrees(self):
            assert len(self.map) == len(self.model)
            self.map._check()

        def teardown(self):
            self.map.close()

    return MapVersusDict


def run_racing_threads(target, seeds=(1, 2)) -> None:
    """Run ``target(seed)`` in one thread per seed at once, with the interpreter switching
    threads every microsecond, so that their operations interleave as finely as they can."""
    import sys
    import threading

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=target, args=(seed,)) for seed in seeds]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
