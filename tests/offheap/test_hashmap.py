"""LongHashMap against dict: the contract, a stateful oracle, bulk paths, limits and files."""

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st

from offheap import CapacityError, CorruptionError, LongHashMap
from offheap.hashmap.layout import CHUNK_ENTRIES, INITIAL_HOMES
from tests.contracts import MutableMappingContract, oracle_machine

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
EDGE_KEYS = [0, 1, -1, INT64_MIN, INT64_MAX, INT64_MIN + 1, INT64_MAX - 1, 2**32, -(2**32)]


class TestLongHashMapContract(MutableMappingContract):
    keys = EDGE_KEYS + list(range(100, 400, 3)) + [7 << 40, 9 << 56]

    def make(self):
        return LongHashMap()


keys_strategy = st.one_of(st.integers(-40, 40), st.sampled_from(EDGE_KEYS),
                          st.integers(INT64_MIN, INT64_MAX))
values_strategy = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12),
                            st.binary(max_size=12), st.floats(allow_nan=False))

TestAnonymousVersusDict = oracle_machine(LongHashMap, keys_strategy, values_strategy,
                                         ordered=True).TestCase
TestAnonymousVersusDict.settings = settings(max_examples=60, stateful_step_count=50, deadline=None)


def _file_map_factory(tmp_path_factory):
    counter = iter(range(10**9))

    def make():
        path = tmp_path_factory.mktemp("lhm") / f"m{next(counter)}.offheap"
        return LongHashMap(path=path)

    def reopen(old):
        path = old._store.arena.path
        old.close()
        return LongHashMap(path=path)

    return make, reopen


def test_file_map_versus_dict_with_reopen(tmp_path_factory):
    make, reopen = _file_map_factory(tmp_path_factory)
    machine = oracle_machine(make, keys_strategy, values_strategy, reopen=reopen, ordered=True)
    case = machine.TestCase()
    case.settings = settings(max_examples=25, stateful_step_count=40, deadline=None)
    case.runTest()


TestTypedInt64VersusDict = oracle_machine(
    lambda: LongHashMap(value="int64"), keys_strategy, st.integers(INT64_MIN, INT64_MAX),
    ordered=True).TestCase
TestTypedInt64VersusDict.settings = settings(max_examples=30, stateful_step_count=40, deadline=None)


def test_bad_keys_raise_on_store_and_miss_on_lookup():
    m = LongHashMap()
    m[5] = "five"
    for bad, error in [("5", TypeError), (5.5, TypeError), (None, TypeError),
                       (2**63, OverflowError), (-(2**63) - 1, OverflowError)]:
        with pytest.raises(error):
            m[bad] = "x"
        with pytest.raises(KeyError):
            m[bad]
        assert bad not in m
        assert m.get(bad, "default") == "default"
        assert m.pop(bad, "default") == "default"
        with pytest.raises(KeyError):
            del m[bad]
    with pytest.raises(TypeError):
        m.put_many(np.array([1.5, 2.5]), ["a", "b"])
    with pytest.raises(OverflowError):
        m.put_many(np.array([1, 2**64 - 1], dtype=np.uint64), ["a", "b"])
    with pytest.raises(OverflowError):
        m.put_many([1, 2**70], ["a", "b"])
    assert dict(m.items()) == {5: "five"}
    m._check()


def test_numpy_integer_keys_are_ints():
    m = LongHashMap()
    m[np.int32(7)] = "seven"
    assert m[7] == "seven" and m[np.uint8(7)] == "seven"
    assert [type(k) for k in m] == [int]


def test_bulk_paths_match_dict():
    rng = np.random.default_rng(7)
    keys = rng.integers(INT64_MIN, INT64_MAX, 20_000, dtype=np.int64)
    keys[::97] = keys[5]  # duplicates: the last one wins
    values = [f"v{i}" if i % 3 else i for i in range(len(keys))]
    m, d = LongHashMap(), {}
    m.put_many(keys, values)
    d.update(zip(keys.tolist(), values))
    assert dict(m.items()) == d
    m._check()
    probe = np.concatenate([keys[:500], rng.integers(0, 1000, 500)])
    assert m.get_many(probe, default="absent") == [d.get(k, "absent") for k in probe.tolist()]
    assert list(m.contains_many(probe)) == [k in d for k in probe.tolist()]
    small = keys[1000:1100]  # a small batch takes the one-by-one path
    m.put_many(small, ["small"] * len(small))
    d.update(dict.fromkeys(small.tolist(), "small"))
    assert dict(m.items()) == d
    gone = m.delete_many(np.concatenate([keys[:7000], [123456789]]))
    for k in set(keys[:7000].tolist()):
        d.pop(k, None)
    assert gone == len(set(keys[:7000].tolist()))
    assert dict(m.items()) == d
    m.delete_many(keys[7000:7010])
    for k in keys[7000:7010].tolist():
        d.pop(k, None)
    assert dict(m.items()) == d
    m._check()


def test_update_fast_paths():
    keys = np.arange(0, 5000, dtype=np.int64)
    values = np.arange(5000, dtype=np.int64) * 2
    m = LongHashMap(value="int64")
    m.put_many(keys, values)
    assert m[4999] == 9998 and len(m) == 5000
    other = LongHashMap(value="int64")
    other.update(m)
    assert other == m
    other.update({1: 5, 2: 6})
    assert other[1] == 5
    with pytest.raises(TypeError):
        other.update(a=1)
    with pytest.raises(ValueError):
        other.update([(1, 2, 3)])


def test_typed_get_many():
    m = LongHashMap(value="float64")
    m.put_many(np.arange(10), np.linspace(0, 1, 10))
    out = m.get_many(np.arange(10))
    assert isinstance(out, np.ndarray) and out.dtype == np.float64 and out[-1] == 1.0
    with pytest.raises(KeyError):
        m.get_many([1, 99])
    assert list(m.get_many([1, 99], default=-1.0)) == [out[1], -1.0]
    with pytest.raises(TypeError):
        m[3] = "not a float"
    assert m[3] == out[3]


def test_long_values_go_external_and_are_reused():
    m = LongHashMap()
    m[1] = "x" * 1000
    m[2] = "short"
    assert m.stats().external_values == 1
    for i in range(50):
        m[1] = "y" * (1000 + i)
    assert m.stats().external_values == 1
    before = m.stats().reserved_bytes
    for i in range(200):
        m[1] = "z" * 1000
        del m[1]
    assert m.stats().reserved_bytes == before
    m._check()


def test_value_column_widens_in_place():
    m = LongHashMap()
    m.put_many(np.arange(1000), [""] * 1000)
    assert m.stats().value_width_bytes == 2
    m[5] = "abc"
    assert m.stats().value_width_bytes == 8
    assert m[5] == "abc" and m[6] == "" and len(m) == 1000
    m._check()


def test_capacity_error_leaves_map_unchanged_and_usable():
    m = LongHashMap(limit=1 << 20)
    d = {}
    with pytest.raises(CapacityError):
        for k in range(10**6):
            m[k] = ""
            d[k] = ""
    assert dict(m.items()) == d  # the failed insert left no trace
    m._check()
    with pytest.raises(CapacityError):
        m.put_many(np.arange(10**6, 2 * 10**6), [""] * 10**6)
    assert dict(m.items()) == d
    m.delete_many(np.arange(1000))
    m[-5] = None  # fits the 2-byte slot: a longer value would need memory the limit does not have
    assert m[-5] is None
    m._check()


def test_growth_under_a_limit_uses_the_room_left():
    """A doubling that cannot fit is replaced by the largest table that does."""
    limit = 4 << 20
    m = LongHashMap(limit=limit)
    with pytest.raises(CapacityError):
        m.put_many(np.arange(10**6), [""] * 10**6)
    n = 0
    with pytest.raises(CapacityError):
        for n in range(10**6):
            m[n] = ""
    stats = m.stats()
    assert m._regions.homes % INITIAL_HOMES  # not a size of the growth steps: the largest that fit
    assert stats.load_factor > 0.7 and stats.n_entries >= 4 * CHUNK_ENTRIES
    assert stats.reserved_bytes > limit * 0.45  # a table of the doubling steps alone gets < 1/3
    m._check()


def test_file_map_persists(tmp_path):
    path = tmp_path / "m.offheap"
    with LongHashMap(path=path) as m:
        m.put_many(np.arange(10_000), [str(i) for i in range(10_000)])
        m[-1] = "x" * 100
    with LongHashMap(path=path) as m:
        assert len(m) == 10_001 and m[9999] == "9999" and m[-1] == "x" * 100
        m._check()
        del m[0]
    with LongHashMap(path=path) as m:
        assert 0 not in m and len(m) == 10_000
    with pytest.raises(ValueError, match="object"):
        LongHashMap(value="int64", path=path)


@pytest.mark.parametrize("damage", ["not_ours", "truncated", "empty"])
def test_damaged_files_raise_corruption(tmp_path, damage):
    path = tmp_path / "m.offheap"
    with LongHashMap(path=path) as m:
        m.put_many(np.arange(5000), [""] * 5000)
    data = bytearray(path.read_bytes())
    if damage == "not_ours":
        data = bytearray(b"#!/bin/sh\necho hello\n" * 300)
    elif damage == "truncated":
        data = data[: len(data) - 9000]
    else:
        data = bytearray(4096)
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptionError):
        LongHashMap(path=path)


def test_values_whose_high_bytes_are_zero_still_widen_the_column():
    m = LongHashMap()
    m[1] = ""
    m[2] = 0  # tag and one zero byte: two serialized bytes, numerically small
    m[3] = "\0\0"
    assert (m[1], m[2], m[3]) == ("", 0, "\0\0")
    m._check()


def test_equal_long_values_in_a_batch_get_records_of_their_own():
    m = LongHashMap()
    long_value = "a value too long to sit in the slot"
    m.put_many([1, 2, 2], [long_value] * 3)
    assert m.stats().external_values == 2
    m[1] = None  # frees the first record only
    assert m[2] == long_value
    m._check()


@pytest.mark.parametrize("keys", ["sequential", "random", "clustered"])
def test_growth_moves_the_table_chunk_by_chunk(monkeypatch, keys):
    """Scalar growth and a widening value column re-place the table's own entries in chunks of
    a few slots, so chunk boundaries fall everywhere; the map must equal dict throughout."""
    from offheap.hashmap import placement

    monkeypatch.setattr(placement, "REBUILD_CHUNK", 7)
    rng = np.random.default_rng(len(keys))
    population = {"sequential": np.arange(3000),
                  "random": rng.integers(-(1 << 63), (1 << 63) - 1, 3000),
                  "clustered": np.repeat(rng.integers(0, 1 << 40, 60), 50) + np.tile(np.arange(50), 60)}
    m, expected = LongHashMap(value="object"), {}
    for i, key in enumerate(population[keys].tolist()):
        value = "" if i % 3 else "x" * (i % 11)  # long values widen the column now and then
        m[key] = expected[key] = value
        if i % 500 == 499:
            m._check()
    m._check()
    assert dict(m.items()) == expected
    assert m.stats().n_slots > 3000


def test_a_slightly_larger_table_keeps_runs_that_cross_chunk_boundaries(monkeypatch):
    """At a high load a run of entries can spill past a chunk boundary in the new table; the
    next chunk must start after it (the carried slot), never on top of it."""
    from offheap.hashmap import placement

    monkeypatch.setattr(placement, "REBUILD_CHUNK", 5)
    m = LongHashMap(value="int64")
    keys = np.random.default_rng(7).integers(-(1 << 62), 1 << 62, 20_000)
    m.put_many(keys, keys)
    while len(m) < 0.85 * m.stats().n_slots:
        extra = np.random.default_rng(len(m)).integers(-(1 << 62), 1 << 62, 500)
        m.put_many(extra, extra)
        keys = np.concatenate([keys, extra])
    for factor in (1.01, 1.03, 1.1):
        m._grow_index(int(m._homes * factor), len(m))
        m._check()
        assert np.array_equal(m.get_many(keys), keys)


def test_external_value_count_is_kept_through_every_kind_of_change():
    """stats() counts external records once and then keeps the count; _check() compares it
    with a scan of the table after every step."""
    rng = np.random.default_rng(3)
    m = LongHashMap(value="object")
    assert m.stats().external_values == 0
    long_value, short_value = "long value " * 3, "s"
    steps = [
        lambda: m.__setitem__(int(rng.integers(100)), long_value),
        lambda: m.__setitem__(int(rng.integers(100)), short_value),
        lambda: m.pop(int(rng.integers(100)), None),
        lambda: m.put_many(rng.integers(0, 100, 20), [long_value, short_value] * 10),
        lambda: m.delete_many(rng.integers(0, 100, 10)),
        lambda: m.popitem() if m else None,
        lambda: m.update({int(k): long_value for k in rng.integers(0, 100, 5)}),
    ]
    for i in range(400):
        steps[int(rng.integers(len(steps)))]()
        m._check()
        if i == 300:
            m.clear()
    assert m.stats().external_values == sum(value == long_value for value in m.values())
