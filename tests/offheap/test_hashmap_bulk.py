"""LongHashMap's bulk paths on both cores: against dict, and the bytes a bulk build leaves.

A ``put_many`` large against the map is built at once by the compiled core (sorted by hash,
appended and placed in one pass) where smaller ones go key by key; the pure-Python reference
rebuilds the index with numpy. All three must leave the same table: the index, the chunks'
keys, values and live bits, the shape and the counters. ``incremental_put_many`` drives the
compiled core key by key, as every put_many did before the build existed, as the oracle.

Without the compiled module the compiled half is skipped (``OFFHEAP_PURE_PYTHON``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offheap import LongHashMap
from offheap.errors import CapacityError
from offheap.hashmap.layout import SLACK, homes_of
from offheap.hashmap.longhashmap import ReferenceLongHashMap

COMPILED = LongHashMap(value="int64")._compiled_core
needs_compiled = pytest.mark.skipif(not COMPILED, reason="the compiled core is not built")
CORES = [pytest.param(LongHashMap, id="compiled", marks=needs_compiled),
         pytest.param(ReferenceLongHashMap, id="reference")]
LONG = "a value too long for a slot word, so it lives in a record of its own"


def table_state(m) -> tuple:
    """Everything of the table that a change can touch: shape, counters and every byte."""
    r = m._table()
    chunks = tuple((k.tobytes(), v.tobytes(), live.tobytes())
                   for k, v, live in zip(r.key_chunks, r.value_chunks, r.live_chunks))
    return (r.homes, r.width, r.first_capacity, len(r.chunk_offsets), m._n, m._used,
            r.index.tobytes(), chunks, len(m._store))


def incremental_put_many(m, keys, values) -> None:
    """put_many as the compiled core did it key by key: reserve, then one put per key."""
    keys = np.asarray(keys, np.int64)
    words = m._slots.encode_many(values)
    m._reserve(m._count_absent(keys), m._slots.width_of_many(words))
    m._put_words(keys, np.ascontiguousarray(words), np.zeros(1, np.int64))


def batch(rng, n: int, key_range: int, value: str):
    keys = rng.integers(-key_range, key_range, n, dtype=np.int64)
    if value == "int64":
        return keys, rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)
    return keys, [LONG + str(i) if i % 7 == 0 else i % 5 for i in range(n)]


@needs_compiled
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_base=st.sampled_from([0, 10, 300, 2000, 9000]),
       n_batch=st.sampled_from([600, 1500, 5000]), key_range=st.sampled_from([800, 10**4, 2**62]),
       n_deleted=st.integers(0, 200), value=st.sampled_from(["int64", "object"]))
def test_a_bulk_build_leaves_the_bytes_of_the_incremental_path(seed, n_base, n_batch, key_range,
                                                               n_deleted, value):
    rng = np.random.default_rng(seed)
    base_keys, base_values = batch(rng, n_base, key_range, value)
    keys, values = batch(rng, n_batch, key_range, value)
    gone = base_keys[:n_deleted]
    built, oracle, reference = LongHashMap(value=value), LongHashMap(value=value), \
        ReferenceLongHashMap(value=value)
    for m in (built, oracle, reference):
        put = incremental_put_many if m is oracle else type(m).put_many
        put(m, base_keys, base_values)
        m.delete_many(gone)
        put(m, keys, values)
        m._check()
    assert table_state(built) == table_state(oracle) == table_state(reference)
    expected = dict(zip(base_keys.tolist(), list(base_values)))
    for k in gone.tolist():
        expected.pop(k, None)
    expected.update(zip(keys.tolist(), list(values)))
    assert list(built.items()) == list(expected.items())


@needs_compiled
def test_a_build_whose_placement_overflows_the_slack_grows_the_index_until_it_fits():
    rng = np.random.default_rng(3)
    candidates = rng.integers(-(2**63), 2**63 - 1, 200_000, dtype=np.int64)
    keys = candidates[homes_of(candidates, 1024) >= 1000][:600]  # 600 keys in the last 24 homes
    assert len(keys) == 600
    built, oracle, reference = LongHashMap(value="int64"), LongHashMap(value="int64"), \
        ReferenceLongHashMap(value="int64")
    built.put_many(keys, keys)
    incremental_put_many(oracle, keys, keys)
    reference.put_many(keys, keys)
    assert built._table().homes > 1024
    assert table_state(built) == table_state(oracle) == table_state(reference)
    built._check()


def unmix64(h: int) -> int:
    """The int64 key whose mix64 is ``h``: mix64's xor-shifts by 33 are their own inverses and
    its odd multipliers have inverses modulo 2**64."""
    mask = 2**64 - 1
    for multiplier in (0xC4CEB9FE1A85EC53, 0xFF51AFD7ED558CCD):
        h ^= h >> 33
        h = h * pow(multiplier, -1, 2**64) & mask
    h ^= h >> 33
    return h - 2**64 if h >= 2**63 else h


@needs_compiled
def test_keys_whose_hashes_share_their_top_bits_in_large_groups_build_the_bytes_of_the_incremental_path():
    """Groups of 50 keys with the top 20 bits of their hashes equal: the bulk sort's radix digits
    leave each group unsorted and the index runs are 50 long, so both finish by sorting group by
    group instead of by insertion over the whole array."""
    rng = np.random.default_rng(11)

    def grouped(groups: int) -> np.ndarray:
        prefixes = rng.integers(0, 2**20, groups).tolist()
        low = rng.integers(0, 2**44, groups * 50).tolist()
        return np.array([unmix64(prefixes[i // 50] << 44 | low[i]) for i in range(groups * 50)],
                        np.int64)

    first, second = grouped(60), grouped(20)
    second = np.concatenate([second, first[::7], second[:30]])  # keys present, keys repeated
    built, oracle, reference = LongHashMap(value="int64"), LongHashMap(value="int64"), \
        ReferenceLongHashMap(value="int64")
    for keys in (first, second):
        values = rng.integers(-(2**63), 2**63 - 1, len(keys), dtype=np.int64)
        built.put_many(keys, values)
        incremental_put_many(oracle, keys, values)
        reference.put_many(keys, values)
        assert table_state(built) == table_state(oracle) == table_state(reference)
    built._check()


@pytest.mark.parametrize("core", CORES)
@settings(max_examples=25, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(["put", "get", "contains", "delete"]),
                                st.integers(0, 2**32 - 1), st.sampled_from([5, 700, 3000])),
                      min_size=1, max_size=8),
       value=st.sampled_from(["int64", "object"]))
def test_bulk_calls_behave_as_dict(core, steps, value):
    m, d = core(value=value), {}
    for op, seed, n in steps:
        rng = np.random.default_rng(seed)
        keys, values = batch(rng, n, 2000, value)
        if op == "put":
            m.put_many(keys, values)
            d.update(zip(keys.tolist(), list(values)))
        elif op == "get":
            got = m.get_many(keys, default=-1 if value == "int64" else None)
            assert list(got) == [d.get(k, -1 if value == "int64" else None) for k in keys.tolist()]
        elif op == "contains":
            assert m.contains_many(keys).tolist() == [k in d for k in keys.tolist()]
        else:
            present = {k for k in keys.tolist() if k in d}
            assert m.delete_many(keys) == len(present)
            for k in present:
                del d[k]
        m._check()
        assert list(m.items()) == list(d.items())


@pytest.mark.parametrize("core", CORES)
def test_a_batch_of_one_key_many_times_keeps_its_first_place_and_last_value(core):
    m = core(value="object")
    m[5] = "before"
    keys = np.array([7] * 3000 + [5] * 3000 + [9], np.int64)
    values = [LONG + str(i) for i in range(len(keys))]
    m.put_many(keys, values)
    assert list(m.items()) == [(5, values[5999]), (7, values[2999]), (9, values[6000])]
    m._check()
    assert len(m._store) - 2 == 3  # the meta and chunk list records, and one per live value


@pytest.mark.parametrize("core", CORES)
def test_strided_keys_and_a_typed_miss(core):
    m = core(value="float64")
    keys = np.arange(4000, dtype=np.int64)[::2]
    m.put_many(keys, keys * 0.5)
    assert np.array_equal(m.get_many(keys), keys * 0.5)
    with pytest.raises(KeyError, match="1 keys are missing"):
        m.get_many([2, 3])
    assert list(m.get_many(keys[:3][::-1], default=-1.0)) == [2.0, 1.0, 0.0]
    assert m.delete_many(keys[::2]) == 1000
    m._check()


@pytest.mark.parametrize("core", CORES)
def test_capacity_error_in_a_bulk_build_leaves_the_map_unchanged(core):
    m = core(value="object", limit=4 << 20)
    m.put_many(np.arange(1000), [LONG] * 1000)
    before, items = table_state(m), list(m.items())
    with pytest.raises(CapacityError):
        m.put_many(np.arange(10**5, 10**6), [LONG] * (10**6 - 10**5))
    assert table_state(m) == before and list(m.items()) == items
    m._check()
    m.put_many(np.arange(1000, 3000), ["small"] * 2000)
    assert len(m) == 3000


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("n_base", [0, 3000])
def test_keys_changed_while_the_room_is_reserved_leave_a_whole_map(core, n_base):
    """The map's _reserve runs Python code between the plan of a bulk build and its writes,
    where another thread may write the caller's key array. The map must come out whole: its
    index and entries agree, and it holds the batch either as given (the compiled core's bulk
    build keeps each key's hash, never a pointer to the array) or as rewritten (a batch put key
    by key reads each key after the reserve)."""
    rng = np.random.default_rng(n_base)
    keys = rng.integers(-2**63, 2**63 - 1, 5000, dtype=np.int64)
    given = keys.copy()

    class Scribbled(core):
        armed = False

        def _reserve(self, n_new, width):
            if self.armed:
                keys[:] = rng.integers(-2**63, 2**63 - 1, len(keys), dtype=np.int64)
            super()._reserve(n_new, width)

    m = Scribbled(value="int64")
    base = rng.integers(-2**63, 2**63 - 1, n_base, dtype=np.int64)
    m.put_many(base, base)
    m.armed = True
    m.put_many(keys, np.arange(len(keys)))
    m._check()
    held = list(m.items())
    assert all(m[k] == v for k, v in held)
    as_given, as_rewritten = (dict(zip(base.tolist(), base.tolist())) for _ in range(2))
    as_given.update(zip(given.tolist(), range(len(given))))
    as_rewritten.update(zip(keys.tolist(), range(len(keys))))
    assert held in (list(as_given.items()), list(as_rewritten.items()))


@needs_compiled
@pytest.mark.parametrize("n_base", [0, 3000])
def test_a_build_whose_words_are_too_wide_for_the_values_leaves_them_to_the_key_by_key_path(n_base):
    """A bulk build checks each word against the value width as it reads it; a word too wide
    (here: the reserve was asked for 2-byte values), found after 100 values were written past
    the entries, gives the batch to the key-by-key path, which widens the values itself: the
    table comes out as key by key."""
    class Narrow(LongHashMap):
        def _reserve(self, n_new, width):
            super()._reserve(n_new, 2)

    rng = np.random.default_rng(n_base)
    base_keys = batch(rng, n_base, 2**62, "object")[0]
    keys, values = batch(rng, 5000, 2**62, "object")
    values[:40] = [None, True] * 20  # 2-byte words: the first one too wide is the 41st's
    keys[-100:], values[-100:] = keys[:100], [True] * 100  # duplicates: first place, last value
    keys[200:200 + n_base // 10] = base_keys[: n_base // 10]  # keys present or deleted
    built, oracle = Narrow(value="object"), LongHashMap(value="object")
    for m, put in ((built, LongHashMap.put_many), (oracle, incremental_put_many)):
        put(m, base_keys, [None] * n_base)
        m.delete_many(base_keys[::3])
        put(m, keys, values)
        m._check()
    assert table_state(built) == table_state(oracle)
    expected = dict.fromkeys(base_keys.tolist())
    for k in base_keys[::3].tolist():
        expected.pop(k, None)
    expected.update(zip(keys.tolist(), values))
    assert list(built.items()) == list(expected.items())


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("view", ["keys", "items", "values"])
def test_a_bulk_build_under_a_live_iterator_stops_it(core, view):
    m = core(value="object")
    m.put_many(np.arange(100), ["x"] * 100)
    it = iter(getattr(m, view)())
    next(it)
    m.put_many(np.arange(50, 20_000), ["y"] * 19_950)  # overwrites, new keys, growth
    with pytest.raises(RuntimeError):
        next(it)
    m._check()
    assert len(m) == 20_000


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("n_wanted", [1 << 17, 300_000])
def test_a_probe_batch_large_against_a_large_map_finds_each_key_at_its_entry(core, n_wanted):
    """The compiled core answers a batch of at least half the map's entries, in a map of at
    least 2**18, by merging both sorted by hash (bulk.c, build.c's find_by_merge), and smaller
    ones probe by probe: each key's entry, -1 for absent ones, repeats and the holes of deleted
    entries, as the reference's probes and the scalar lookup say."""
    rng = np.random.default_rng(n_wanted)
    keys = rng.integers(-2**63, 2**63 - 1, 400_000, dtype=np.int64)  # 342,857 live
    m = core(value="int64")
    m.put_many(keys, np.arange(len(keys)))
    deleted = keys[::7]
    m.delete_many(deleted)
    repeats = n_wanted - n_wanted // 2 - n_wanted // 4 - n_wanted // 8
    wanted = np.concatenate([keys[:n_wanted // 2], rng.integers(-2**63, 2**63 - 1, n_wanted // 4),
                             deleted[: n_wanted // 8], keys[:repeats]])
    rng.shuffle(wanted)
    entries = m._find_many(wanted)
    held = set(keys.tolist()) - set(deleted.tolist())
    assert np.array_equal(entries >= 0, np.fromiter(map(held.__contains__, wanted.tolist()), bool))
    sample = rng.choice(len(wanted), 2000)
    assert [m._lookup(k) for k in wanted[sample].tolist()] == entries[sample].tolist()
    hits = wanted[entries >= 0]
    assert np.array_equal(keys[m.get_many(hits)], hits)  # each value is its key's position
    m._check()


@needs_compiled
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.sampled_from([0, 1, 100, 3000, 70_000]),
       factor=st.sampled_from([1.25, 2, 4]))
def test_both_cores_place_the_entries_into_a_grown_index_to_the_same_bytes(seed, n, factor):
    """Growth asks the core to place the live entries into the grown index (_place_entries):
    sorted by hash in C, or by numpy over the old index in the reference; holes and any growth
    factor included. Too small an index is refused by both."""
    rng = np.random.default_rng(seed)
    keys = rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64)
    maps = LongHashMap(value="int64"), ReferenceLongHashMap(value="int64")
    for m in maps:
        m.put_many(keys, keys)
        m.delete_many(keys[::5])
    homes = int(maps[0]._regions.homes * factor)
    indexes = [np.zeros(homes + SLACK, np.uint32) for _ in maps]
    assert all(m._place_entries(index, homes) for m, index in zip(maps, indexes))
    assert np.array_equal(indexes[0], indexes[1])
    assert np.count_nonzero(indexes[0]) == len(maps[0])
    if len(maps[0]) > 2 * SLACK:
        assert not any(m._place_entries(np.zeros(2 * SLACK, np.uint32), SLACK) for m in maps)


INLINE_KINDS = [None, True, False, 0, -1, 2**40, -2**63, 2**63, "", "abc", "é", "\ud800", "x" * 7,
                b"", b"\x00\xff", 1.5, (1, "t"), 2**70, LONG]


@needs_compiled
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_inline=st.sampled_from([0, 1, 40, 2000]),
       value=st.sampled_from(["object", "str", "bytes"]), as_tuple=st.booleans())
def test_values_encoded_in_c_are_the_words_of_the_reference(seed, n_inline, value, as_tuple):
    """The compiled put_many encodes a leading run of values inline in C and hands the rest to
    ValueSlots: every kind of value, inline or not, in any order, leaves the table bytes of the
    reference (which encodes them all in Python)."""
    rng = np.random.default_rng(seed)
    kinds = {"object": INLINE_KINDS, "str": ["", "abc", "é", "\ud800", "x" * 7, "y" * 8, LONG],
             "bytes": [b"", b"\x00\xff", b"z" * 7, b"z" * 8]}[value]
    inline = [k for k in kinds if len(repr(k)) < 8 and k is not LONG][:3]
    values = [inline[i % len(inline)] for i in range(n_inline)]
    values += [kinds[i] for i in rng.integers(0, len(kinds), 300)]
    keys = rng.permutation(len(values)).astype(np.int64)
    maps = LongHashMap(value=value), ReferenceLongHashMap(value=value)
    for m in maps:
        m.put_many(keys, tuple(values) if as_tuple else values)
        m._check()
    assert table_state(maps[0]) == table_state(maps[1])
    assert list(maps[0].items()) == list(zip(keys.tolist(), values))


@pytest.mark.parametrize("core", CORES)
def test_a_value_that_cannot_be_stored_after_a_run_of_inline_ones_leaves_the_map_unchanged(core):
    m = core(value="object")
    m.put_many(np.arange(10), ["kept"] * 10)
    before, items = table_state(m), list(m.items())
    values = ["a"] * 500 + [LONG] + [lambda: 0] + ["b"] * 10  # the lambda cannot be pickled
    with pytest.raises(TypeError, match="does not pickle"):
        m.put_many(np.arange(100, 100 + len(values)), values)
    assert table_state(m) == before and list(m.items()) == items  # the LONG record released
    m._check()


@pytest.mark.parametrize("core", CORES)
def test_keys_in_the_entries_order_are_found_past_holes_and_moved_keys(core):
    """The compiled probe loops try the entry after the last hit first: a hole there holding the
    key (deleted, then put again at the end) or a key of another map order must still be
    found where it is."""
    m = core(value="int64")
    keys = np.arange(0, 3000, 3, dtype=np.int64)
    m.put_many(keys, keys * 2)
    m.delete_many(keys[10:20])
    m.put_many(keys[15:17], keys[15:17] * 5)  # entries at the end; holes keep the old keys
    expected = {k: v for k, v in zip(keys.tolist(), (keys * 2).tolist()) if not 30 <= k < 60}
    expected.update({45: 225, 48: 240})
    for order in (keys, keys[::-1], np.concatenate([keys[:500], keys[:500]])):
        found = m.contains_many(order)
        assert found.tolist() == [k in expected for k in order.tolist()]
        assert m.get_many(order, default=-1).tolist() == [expected.get(k, -1)
                                                         for k in order.tolist()]
    m._check()


@needs_compiled
@pytest.mark.parametrize("head", [[], [None], ["", 7], ["x"] * 600])
@pytest.mark.parametrize("tail", [[LONG + "a", LONG + "b", LONG + "a"], [LONG] * 3,
                                  ["0\x80\x80\x80", "0000000"], [2.5, "x"]])
def test_a_batch_whose_inline_run_ends_makes_its_records_as_the_reference_does(head, tail):
    """The C encoder's run of inline values stops at the first value that needs a record; the
    batch is then encoded as the reference encodes it (whose path depends on the types of the
    whole batch), so the records, and the table's words naming them, come out the same."""
    values = head + tail
    keys = np.arange(len(values), dtype=np.int64) % max(1, len(values) - 1)  # one key twice
    maps = LongHashMap(value="object"), ReferenceLongHashMap(value="object")
    for m in maps:
        m.put_many(keys, values)
        m._check()
    assert table_state(maps[0]) == table_state(maps[1])
