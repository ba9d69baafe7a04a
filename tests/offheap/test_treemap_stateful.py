"""TreeMap against a SortedDict oracle: the dict machine of tests.contracts plus the sorted API
(ranges, neighbours, range deletes, popitem at both ends and at positions, positions of keys,
entries at positions and slices of the views, bulk arrays in and out, batch lookups) and close/reopen of a file DB; the
machine's ``_check`` asserts that every inner node counts the entries under it exactly. Small nodes and a small cache make splits, merges and evictions frequent."""

from __future__ import annotations

import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import rule
from sortedcontainers import SortedDict

from offheap.db.database import DB
from offheap.treemap.treemap import TreeMap
from tests.contracts import oracle_machine

KEYS = st.integers(-60, 60)
VALUES = st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=3), st.binary(max_size=3))
BOUNDS = st.one_of(st.none(), KEYS)
INCLUSIVE = st.tuples(st.booleans(), st.booleans())
SETTINGS = settings(max_examples=40, stateful_step_count=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


class _FileDBTrees:
    """TreeMaps in file DBs in a temporary directory; reopening closes and reopens the DB."""

    def __init__(self, **options) -> None:
        self.options = options
        self.dbs: dict[int, tuple[DB, str]] = {}

    def make(self) -> TreeMap:
        directory = tempfile.mkdtemp(prefix="treemap-state-")
        db = DB.file(f"{directory}/db.offheap")
        tree = db.tree_map("t", **self.options)
        self.dbs[id(tree)] = (db, directory)
        return tree

    def reopen(self, tree: TreeMap) -> TreeMap:
        db, directory = self.dbs.pop(id(tree))
        db.close()
        db = DB.file(f"{directory}/db.offheap")
        tree = db.tree_map("t")
        self.dbs[id(tree)] = (db, directory)
        return tree

    def dispose(self, tree: TreeMap) -> None:
        db, directory = self.dbs.pop(id(tree))
        db.close()
        shutil.rmtree(directory, ignore_errors=True)


def sorted_machine(trees: _FileDBTrees):
    base = oracle_machine(trees.make, KEYS, VALUES, reopen=trees.reopen)

    class TreeVersusSortedDict(base):
        def __init__(self):
            super().__init__()
            self.model = SortedDict()

        @rule(lo=BOUNDS, hi=BOUNDS, inclusive=INCLUSIVE, reverse=st.booleans())
        def ranges(self, lo, hi, inclusive, reverse):
            expected = list(self.model.irange(lo, hi, inclusive, reverse))
            assert list(self.map.irange(lo, hi, inclusive, reverse)) == expected
            assert list(self.map.items(lo, hi, inclusive, reverse)) == [(k, self.model[k]) for k in expected]
            assert len(self.map.keys(lo, hi, inclusive)) == len(expected)

        @rule(k=KEYS)
        def neighbours(self, k):
            model = self.model
            i, j = model.bisect_left(k), model.bisect_right(k)
            keys = model.keys()
            assert self.map.ceiling_key(k) == (keys[i] if i < len(keys) else None)
            assert self.map.higher_key(k) == (keys[j] if j < len(keys) else None)
            assert self.map.floor_key(k) == (keys[j - 1] if j else None)
            assert self.map.lower_key(k) == (keys[i - 1] if i else None)
            if model:
                assert self.map.first_key() == keys[0] and self.map.last_key() == keys[-1]

        @rule(lo=BOUNDS, hi=BOUNDS, inclusive=INCLUSIVE)
        def delete_range(self, lo, hi, inclusive):
            doomed = list(self.model.irange(lo, hi, inclusive))
            assert self.map.delete_range(lo, hi, inclusive) == len(doomed)
            for k in doomed:
                del self.model[k]

        @rule(last=st.booleans())
        def popitem_end(self, last):
            if self.model:
                assert self.map.popitem(last=last) == self.model.popitem(-1 if last else 0)

        @rule(keys=st.lists(KEYS, max_size=60), value=VALUES)
        def update_arrays(self, keys, value):
            self.map.put_many(np.array(keys, dtype=np.int64), [value] * len(keys))
            self.model.update((k, value) for k in keys)

        @rule(k=KEYS)
        def positions_of_keys(self, k):
            model = self.model
            assert self.map.bisect_left(k) == model.bisect_left(k)
            assert self.map.bisect_right(k) == model.bisect_right(k)
            if k in model:
                assert self.map.index(k) == model.index(k)
            else:
                with pytest.raises(ValueError):
                    self.map.index(k)

        @rule(i=st.integers(-70, 70))
        def entries_at_positions(self, i):
            model = self.model
            if -len(model) <= i < len(model):
                assert self.map.peekitem(i) == model.peekitem(i)
                assert self.map.keys()[i] == model.keys()[i]
                assert self.map.values()[i] == model.values()[i]
                assert self.map.items()[i] == model.items()[i]
            else:
                with pytest.raises(IndexError):
                    self.map.peekitem(i)
                with pytest.raises(IndexError):
                    self.map.items()[i]

        @rule(start=st.one_of(st.none(), st.integers(-70, 70)),
              stop=st.one_of(st.none(), st.integers(-70, 70)),
              step=st.one_of(st.none(), st.sampled_from([1, -1, 2, -3])), reverse=st.booleans())
        def slices(self, start, stop, step, reverse):
            model = self.model
            assert list(self.map.islice(start, stop, reverse)) == list(model.islice(start, stop, reverse))
            window = slice(start, stop, step)
            assert self.map.keys()[window] == model.keys()[window]
            assert self.map.items()[window] == model.items()[window]
            assert self.map.values()[window] == model.values()[window]

        @rule(i=st.integers(-70, 70))
        def popitem_at(self, i):
            model = self.model
            if not model:
                with pytest.raises(KeyError):
                    self.map.popitem(i)
            elif -len(model) <= i < len(model):
                assert self.map.popitem(i) == model.popitem(i)
            else:
                with pytest.raises(IndexError):
                    self.map.popitem(i)

        @rule(lo=BOUNDS, hi=BOUNDS, inclusive=INCLUSIVE, reverse=st.booleans(),
              probes=st.lists(KEYS, max_size=8))
        def arrays_and_items(self, lo, hi, inclusive, reverse, probes):
            model = self.model
            expected = list(model.irange(lo, hi, inclusive, reverse))
            assert self.map.keys_array(lo, hi, inclusive, reverse).tolist() == expected
            keys, values = self.map.items_array(lo, hi, inclusive, reverse)
            assert keys.tolist() == expected and list(values) == [model[k] for k in expected]
            assert self.map.get_many(probes, default="absent") == [model.get(k, "absent") for k in probes]
            for k in probes[:2]:
                floor, ceiling = self.map.floor_key(k), self.map.ceiling_key(k)
                assert self.map.floor_item(k) == (None if floor is None else (floor, model[floor]))
                assert self.map.ceiling_item(k) == (None if ceiling is None else (ceiling, model[ceiling]))

        @rule()
        def ordered(self):
            assert list(self.map) == list(self.model)
            assert list(reversed(self.map)) == list(reversed(self.model))

        def teardown(self):
            trees.dispose(self.map)

    return TreeVersusSortedDict


@pytest.mark.parametrize("options", [
    dict(node_size=4, cache_size=8),
    dict(node_size=5, cache_size=8, write_cache=False),
    dict(node_size=6, cache_size=16, compression="zlib"),
], ids=["write-cache", "write-through", "zlib"])
def test_treemap_against_sorteddict(options):
    machine = sorted_machine(_FileDBTrees(**options))
    machine.TestCase.settings = SETTINGS
    machine.TestCase().runTest()
