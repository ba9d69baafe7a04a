"""The compiled cache core (CacheCore) against the reference one (ReferenceCache): the same
answers, counters, eviction order, stamps, marks and table bytes for the same random operations;
the in-place move of an LRU hit and the compaction on both table cores; and the core's safety (closed caches,
changes under live iterators, the table's columns; threads: test_cache.py)."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offheap import Cache, ClosedError, CorruptionError, HashMap, LongHashMap
from offheap.hashmap import keyedtable
from offheap.hashmap.cache import ReferenceCache
from offheap.hashmap.keyedmap import ReferenceHashMap
from offheap.hashmap.longhashmap import ReferenceLongHashMap
from offheap.kernels import native

compiled_only = pytest.mark.skipif(not native.compiled(), reason="the compiled core is not built")

SEED = bytes(range(16))
LONG = "a key of more than fifteen bytes, kept in a record"
KEYS = st.sampled_from([f"k{i}" for i in range(10)] + [LONG + str(i) for i in range(3)] + [b"k"])
VALUES = st.one_of(st.none(), st.integers(-5, 5), st.sampled_from(["v", "w" * 30, b"x"]),
                   st.just(lambda: 0))  # a long str and a lambda: a record, a pickling error
OPTIONS = [
    dict(max_entries=4),
    dict(max_entries=4, policy="clock"),
    dict(max_entries=5, ttl=3.0),
    dict(max_entries=5, ttl=3.0, expire_after="access"),
    dict(max_entries=5, ttl=3.0, expire_after="access", policy="clock"),
    dict(ttl=2.0, policy="clock"),
    dict(max_bytes=9000, max_entries=8),
    dict(limit="160KiB"),
]
OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("set"), KEYS, VALUES), st.tuples(st.just("get"), KEYS),
    st.tuples(st.just("getitem"), KEYS), st.tuples(st.just("in"), KEYS),
    st.tuples(st.just("del"), KEYS), st.tuples(st.just("pop"), KEYS),
    st.tuples(st.just("popitem")), st.tuples(st.just("wait"), st.sampled_from([0.5, 1.0, 2.5])),
    st.tuples(st.just("items")), st.tuples(st.just("len"))), max_size=80)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _apply(cache, clock: FakeClock, op):
    """The outcome of one operation: its result, or the name of the error it raised."""
    try:
        kind = op[0]
        if kind == "set":
            cache[op[1]] = op[2]
        elif kind == "get":
            return cache.get(op[1], "absent")
        elif kind == "getitem":
            return cache[op[1]]
        elif kind == "in":
            return op[1] in cache
        elif kind == "del":
            del cache[op[1]]
        elif kind == "pop":
            return cache.pop(op[1], "absent")
        elif kind == "popitem":
            return cache.popitem()
        elif kind == "wait":
            clock.now += op[1]
        elif kind == "items":
            return list(cache.items())
        elif kind == "len":
            return len(cache)
        return None
    except Exception as error:  # noqa: BLE001  # the outcome compared is the error's type
        return type(error).__name__


def _state(cache) -> tuple:
    """What the two cores must agree on beyond the answers: counters, order, hand, the stamps
    and marks of the live entries, and the table's bytes."""
    table = cache._table
    r = table._table()
    live = np.flatnonzero(r.live_mask(table._used))
    columns = [None if column is None else column[live].tolist()
               for column in (table._stamps, table._marks)]
    counters = (cache._hits, cache._misses, cache._size_evictions, cache._expiry_evictions,
                cache._oldest_stamp)
    return (counters, list(table.items()), table._hand, columns, table._n, table._used,
            r.index.tobytes(), [chunk.tobytes() for chunk in r.key_chunks],
            [chunk.tobytes() for chunk in r.value_chunks],
            [chunk.tobytes() for chunk in r.live_chunks])


def _run_both(options: dict, ops) -> None:
    clock = FakeClock()
    compiled = Cache(key="str", value="object", clock=clock, **options)
    reference = ReferenceCache(key="str", value="object", clock=clock, **options)
    for op in ops:
        assert _apply(compiled, clock, op) == _apply(reference, clock, op), op
        assert _state(compiled) == _state(reference), op
    compiled._check()
    reference._check()


@compiled_only
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_both_cores_give_the_same_answers_counters_order_and_bytes(options, monkeypatch):
    monkeypatch.setattr(keyedtable.os, "urandom", lambda n: SEED[:n])

    @given(OPERATIONS)
    @settings(max_examples=40, deadline=None)
    def check(ops):
        _run_both(options, ops)

    check()


@compiled_only
@pytest.mark.parametrize("options", OPTIONS[:5], ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_both_cores_agree_over_many_moves_compactions_and_reinserts(options, monkeypatch):
    """A long cache-aside run: LRU moves use up the free entries, so the table compacts, and a
    hit in a full table deletes and inserts again."""
    monkeypatch.setattr(keyedtable.os, "urandom", lambda n: SEED[:n])
    rng = random.Random(5)
    ops = []
    for _ in range(3000):
        key = f"k{int(rng.paretovariate(1.0)) % 40}" if rng.random() < 0.9 else LONG + "x"
        ops += [("get", key), ("set", key, "v")] if rng.random() < 0.7 else [("getitem", key)]
        if rng.random() < 0.02:
            ops.append(("wait", 1.0))
    _run_both(options, ops)


@pytest.mark.parametrize("cls", [HashMap, ReferenceHashMap])
def test_move_to_end_moves_an_entry_in_place_on_both_table_cores(cls, monkeypatch):
    monkeypatch.setattr(keyedtable.os, "urandom", lambda n: SEED[:n])
    m = cls(key="str")
    keys = [f"k{i}" for i in range(5)] + [LONG]
    for i, key in enumerate(keys):
        m[key] = "w" * 20 if i % 2 else i
    capacity = m._capacity
    assert m._move_to_end("k1") == len(keys) and m._move_to_end("absent") == -1
    assert m._move_to_end(LONG) == len(keys) + 1
    assert m._move_to_end(LONG) == len(keys) + 1  # already the last: stays
    assert list(m) == ["k0", "k2", "k3", "k4", "k1", LONG] and m[LONG] == "w" * 20
    assert m._n == len(keys) and m._used == len(keys) + 2 and m._capacity == capacity
    m._check()
    while m._used < m._capacity:
        m._move_to_end(next(iter(m)))
    with pytest.raises(ValueError, match="free entry"):
        m._move_to_end(next(iter(m)))


@compiled_only
def test_move_to_end_writes_the_same_bytes_on_both_table_cores(monkeypatch):
    monkeypatch.setattr(keyedtable.os, "urandom", lambda n: SEED[:n])
    maps = [HashMap(key="str"), ReferenceHashMap(key="str")]
    for m in maps:
        for i in range(40):
            m[f"k{i}" if i % 5 else f"{LONG}{i}"] = i if i % 2 else f"value {i}"
        for i in range(0, 40, 3):
            m._move_to_end(f"k{i}" if i % 5 else f"{LONG}{i}")
    r0, r1 = maps[0]._table(), maps[1]._table()
    assert list(maps[0].items()) == list(maps[1].items())
    assert r0.index.tobytes() == r1.index.tobytes()
    for name in ("key_chunks", "value_chunks", "live_chunks"):
        assert [c.tobytes() for c in getattr(r0, name)] == [c.tobytes() for c in getattr(r1, name)]


def _regions_bytes(m) -> tuple:
    r = m._table()
    return (m._n, m._used, r.index.tobytes(),
            *([c.tobytes() for c in getattr(r, name)]
              for name in ("key_chunks", "value_chunks", "live_chunks")))


@compiled_only
@pytest.mark.parametrize("classes", [(HashMap, ReferenceHashMap),
                                     (LongHashMap, ReferenceLongHashMap)])
def test_compaction_writes_the_same_bytes_on_both_table_cores(classes, monkeypatch):
    """The compiled ``_compact_entries`` (one pass in C) against the reference's numpy steps,
    over two chunks, with long keys' slots, values in records and a hole at the last entry."""
    monkeypatch.setattr(keyedtable.os, "urandom", lambda n: SEED[:n])
    keyed = classes[0] is HashMap
    maps = [cls(key="object") if keyed else cls() for cls in classes]

    def key(i):
        return f"{LONG}{i}" if keyed and i % 7 == 0 else i

    for m in maps:
        for i in range(70_000):
            m[key(i)] = i if i % 3 else f"value {i}"
        for i in list(range(0, 70_000, 3)) + [69_998]:
            del m[key(i)]
        assert m._n < m._used
        m._compact()
        assert m._n == m._used
        m._check()
    assert list(maps[0].items()) == list(maps[1].items())
    assert _regions_bytes(maps[0]) == _regions_bytes(maps[1])


@compiled_only
def test_compaction_refuses_an_index_slot_that_points_at_a_hole():
    m = HashMap({f"k{i}": i for i in range(10)}, key="str")
    del m["k3"]
    index = m._table().index
    slot = int(np.flatnonzero(index)[0])
    entry = int(index[slot]) - 1
    index[slot] = 4  # entry 3, a hole
    before = _regions_bytes(m)
    with pytest.raises(CorruptionError, match="not a live entry"):
        m._compact_entries()
    assert _regions_bytes(m) == before
    index[slot] = entry + 1


@pytest.mark.parametrize("cls", [Cache, ReferenceCache])
@pytest.mark.parametrize("options", [{}, dict(ttl=10.0), dict(ttl=10.0, clock=FakeClock())])
def test_a_closed_cache_raises_and_never_crashes(cls, options):
    cache = cls({"a": 1, LONG: 2}, key="str", max_entries=4, **options)
    items = iter(cache.items())
    assert next(items) == ("a", 1)
    cache.close()
    for action in (lambda: cache["a"], lambda: cache.get(LONG), lambda: "a" in cache,
                   lambda: cache.__setitem__("b", 1), lambda: cache.__delitem__("a"),
                   lambda: cache.pop("a"), lambda: len(cache), lambda: cache.stats(),
                   lambda: next(items)):
        with pytest.raises(ClosedError):
            action()


@pytest.mark.parametrize("cls", [Cache, ReferenceCache])
@pytest.mark.parametrize("policy", ["lru", "clock"])
def test_moves_and_growth_under_a_live_iterator_raise_at_its_next_step(cls, policy):
    cache = cls({f"k{i}": i for i in range(10)}, key="str", max_entries=200, ttl=100.0,
                policy=policy)
    items = iter(cache.items())
    assert next(items) == ("k0", 0)
    for _ in range(50):  # LRU: every hit moves an entry; the table compacts when full
        for i in range(10):
            assert cache[f"k{i}"] == i
    for i in range(150):  # the chunks and the columns grow
        cache[f"{LONG}{i}"] = i
    with pytest.raises(RuntimeError, match="changed size during iteration"):
        next(items)
    cache._check()
    assert [cache[f"k{i}"] for i in range(10)] == list(range(10))


@compiled_only
def test_the_table_columns_are_checked_before_the_core_writes_them():
    cache = Cache({"a": 1, "b": 2}, key="str", ttl=10.0, policy="clock")
    table = cache._table
    with pytest.raises(ValueError, match="items of 8 bytes"):
        table._stamps = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="contiguous"):
        table._marks = np.zeros(4, np.uint8)[::2]
    stamps = table._stamps
    table._stamps = np.zeros(1)  # shorter than the table: refused at the entry past its end
    with pytest.raises(RuntimeError, match="stamps column has no item for entry 1"):
        cache.get("b")
    table._stamps = stamps
    assert cache.get("b") == 2 and cache.stats().hits == 1


def test_the_default_clock_is_read_as_time_monotonic():
    cache = Cache(key="str", ttl=100.0)
    before = time.monotonic()
    cache["a"] = 1
    after = time.monotonic()
    assert before <= cache._table._stamps[0] <= after
    assert cache["a"] == 1
