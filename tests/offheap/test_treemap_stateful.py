"""TreeMap against a SortedDict oracle: the dict machine of tests.contracts plus the sorted API
(ranges, neighbours, range deletes, popitem at both ends, bulk arrays) and close/reopen of a
file DB. Small nodes and a small cache make splits, merges and evictions frequent."""

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
