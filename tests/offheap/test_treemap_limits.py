"""A TreeMap's ``limit`` with the write cache on (unwritten changes stay within the budget of
:func:`offheap.treemap.nodecache.unwritten_budget`), and ``update()`` under CapacityError:
all or nothing, with the write cache on and off."""

from __future__ import annotations

import os
import random

import pytest

from offheap import TreeMap
from offheap.errors import CapacityError
from offheap.treemap.nodecache import MIN_UNWRITTEN_BUDGET_BYTES, unwritten_budget


def test_the_budget_is_an_eighth_of_the_limit_and_at_least_one_mib():
    assert unwritten_budget(None) is None
    assert unwritten_budget(1 << 20) == MIN_UNWRITTEN_BUDGET_BYTES
    assert unwritten_budget(1 << 30) == 1 << 27


@pytest.mark.parametrize("value", ["bytes", "object"])
def test_the_write_cache_holds_no_more_than_limit_plus_budget(value):
    limit = 1 << 20
    tree = TreeMap(value=value, limit=limit)
    accepted = 0
    with pytest.raises(CapacityError):
        for key in range(100_000):
            tree[key] = os.urandom(1000)
            accepted += 1000
    assert accepted <= limit + unwritten_budget(limit)
    assert tree._tree.cache.unwritten_bytes <= unwritten_budget(limit) + 1100
    tree._check()


def test_update_batches_count_against_the_budget():
    limit = 1 << 20
    tree = TreeMap(value="bytes", limit=limit)
    tree.update({i: b"" for i in range(2000)})
    with pytest.raises(CapacityError):
        for start in range(0, 2000, 100):
            tree.update({i: os.urandom(2000) for i in range(start, start + 100)})
    assert tree._tree.cache.unwritten_bytes <= unwritten_budget(limit) + 100 * 2100
    tree._check()


@pytest.mark.parametrize("write_cache", [False, True])
def test_update_raising_capacity_error_keeps_nothing_of_its_batch(write_cache):
    rng = random.Random(1)
    failures = 0
    for trial in range(60):
        tree = TreeMap(value=rng.choice(["bytes", "object"]), write_cache=write_cache,
                       limit=rng.choice([1 << 18, 1 << 19]), node_size=rng.choice([4, 8, 32]))
        try:
            tree.update({3 * i: os.urandom(rng.choice([10, 100, 1000])) for i in range(1000)})
        except CapacityError:
            continue
        before = dict(tree.items())
        batch = {rng.randrange(5000): os.urandom(rng.choice([1000, 5000, 20000]))
                 for _ in range(rng.choice([40, 200]))}
        try:
            tree.update(batch)
        except CapacityError:
            failures += 1
            assert dict(tree.items()) == before
        else:
            assert dict(tree.items()) == {**before, **batch}
        tree._check()
    assert failures > 5  # the trials do reach the limit
