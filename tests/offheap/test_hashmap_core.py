"""The compiled MapCore against the pure-Python reference: same results, same bytes, no crash.

Both cores run under one harness (:class:`Table`): numpy arrays for the four regions of
:mod:`offheap.hashmap.layout`, a :class:`~offheap.hashmap.valueslots.ValueSlots` codec over an
in-memory record store, and a ``_make_room`` that reshapes the table as the layout says (a larger
index rebuilt from the entries, entries compacted into ``grown_capacity`` or in place, a wider
value column). The same operations go to both cores; every result, every exception and every
byte of index, keys, values, live bits and records must agree after every step.

Without the compiled module these tests fail, unless ``OFFHEAP_PURE_PYTHON`` is set: then the
compiled half is skipped and the reference runs alone.
"""

from __future__ import annotations

import gc
import importlib
import mmap
import os
import struct
import time
import timeit

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offheap import LongHashMap
from offheap.errors import ClosedError, CorruptionError
from offheap.hashmap import core as reference
from offheap.hashmap.layout import (
    CHUNK_ENTRIES,
    MAX_LOAD,
    MIN_CAPACITY,
    MIN_HOMES,
    SLACK,
    homes_of,
)
from offheap.hashmap.valueslots import ValueSlots
from offheap.kernels import native
from offheap.store.serializers import get_serializer
from tests.contracts import run_racing_threads

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def compiled_base():
    """The compiled MapCore; a skip only when it is missing and the reference was chosen."""
    if native.PURE_PYTHON:
        return pytest.importorskip("offheap.hashmap._core").MapCore
    return importlib.import_module("offheap.hashmap._core").MapCore


class MemoryRecords:
    """The record store interface ValueSlots uses (put, view, delete), in a dict; record ids
    count up from 1, so two stores fed the same puts hand out the same ids."""

    def __init__(self) -> None:
        self.records: dict[int, bytes] = {}
        self.last_id = 0

    def put(self, data) -> int:
        self.last_id += 1
        self.records[self.last_id] = bytes(data)
        return self.last_id

    def view(self, recid: int) -> memoryview:
        return memoryview(self.records[recid])

    def delete(self, recid: int) -> None:
        del self.records[recid]  # a KeyError is a double release


def rebuilt_index(keys: np.ndarray, entries: np.ndarray, homes: int, n_slots: int) -> np.ndarray:
    """The index over ``entries`` (entry numbers, ascending) whose keys are ``keys``, in Robin
    Hood order: sorted by home, then entry number, the j-th at slot ``j + cummax(home[j] - j)``."""
    index = np.zeros(n_slots, np.uint32)
    if len(entries):
        home = homes_of(keys, homes)
        order = np.argsort(home, kind="stable")
        rank = np.arange(len(entries))
        slots = rank + np.maximum.accumulate(home[order] - rank)
        assert slots[-1] < n_slots, "the slack overflowed"
        index[slots] = entries[order] + 1
    return index


class Table:
    """The regions of one table as numpy arrays, and the map's side of the contract with the
    core (mixed into a subclass of either MapCore)."""

    def __init__(self, value: str = "object", slack: int = SLACK, pause=None) -> None:
        self.records = MemoryRecords()
        self.codec = ValueSlots(get_serializer(value), self.records, allow_pickle=True)
        self.slack = slack
        self.pause = pause  # called at the start of _make_room (threads switch there)
        width = self.codec.initial_width
        self.chunks = [self.new_chunk(MIN_CAPACITY, width)]
        self.index = np.zeros(MIN_HOMES + slack, np.uint32)
        self._n = self._used = self._mods = 0
        self.reattach(MIN_HOMES, width)

    def new_chunk(self, capacity: int, width: int) -> list[np.ndarray]:
        return [np.zeros(capacity, np.int64), np.zeros(capacity, self.codec.dtype_for_width(width)),
                np.zeros(capacity // 8, np.uint8)]

    def _make_room(self, width: int, index_full: bool) -> None:
        """The map's policy: double the homes when the index is full or at its load, widen the
        value column, and when the entries are full compact them in place if a quarter are
        holes, else copy a lone chunk 0 to twice its size or add a chunk."""
        if self.pause is not None:
            self.pause()
        homes = self._homes * 2 if index_full or self._n + 1 > MAX_LOAD * self._homes else self._homes
        width = max(width, self._width)
        for chunk in self.chunks:
            chunk[1] = chunk[1].astype(self.codec.dtype_for_width(width))
        if self._used >= self._capacity:
            if (self._used - self._n) * 4 >= self._used:
                self.compact()
            elif len(self.chunks) == 1 and self._capacity < CHUNK_ENTRIES:
                grown = self.new_chunk(2 * self._capacity, width)
                for new, old in zip(grown, self.chunks[0]):
                    new[: len(old)] = old
                self.chunks = [grown]
            else:
                self.chunks.append(self.new_chunk(CHUNK_ENTRIES, width))
        self.index = np.zeros(homes + self.slack, np.uint32)
        self.reattach(homes, width)

    def _homes_of(self, keys: np.ndarray, homes: int) -> np.ndarray:
        return homes_of(keys, homes)

    def compact(self) -> None:
        """Renumber the live entries densely, in order, in the chunks they are in."""
        live, n = self.live_mask(), self._n
        keys, values = (np.concatenate([chunk[i] for chunk in self.chunks]) for i in (0, 1))
        keys[:n], values[:n] = keys[: self._used][live], values[: self._used][live]
        keys[n:], values[n:] = 0, 0
        bits = np.packbits(np.arange(len(keys)) < n, bitorder="little")
        start = 0
        for chunk in self.chunks:
            size = len(chunk[0])
            chunk[0][:], chunk[1][:] = keys[start: start + size], values[start: start + size]
            chunk[2][:] = bits[start // 8: (start + size) // 8]
            start += size
        self._used = n
        self._mods += 1

    def reattach(self, homes: int, width: int) -> None:
        """Attach the chunks under an index rebuilt from their live entries."""
        self._detach()
        entries = np.flatnonzero(self.live_mask())
        self.index[:] = rebuilt_index(self.all_keys()[entries], entries, homes, len(self.index))
        key_chunks, value_chunks, live_chunks = zip(*self.chunks)
        self._attach(self.codec, self.index, key_chunks, value_chunks, live_chunks, homes, width)

    def all_keys(self) -> np.ndarray:
        return np.concatenate([chunk[0] for chunk in self.chunks])

    def live_mask(self) -> np.ndarray:
        bits = np.concatenate([chunk[2] for chunk in self.chunks])
        return np.unpackbits(bits, bitorder="little")[: self._used].astype(bool)

    def state(self) -> tuple:
        """Everything the core may change, as comparable values."""
        return (self._n, self._used, self._mods, self._homes, self._n_slots, self._width,
                self._capacity, self._max_n, self.index.tobytes(),
                [b"".join(array.tobytes() for array in chunk) for chunk in self.chunks],
                self.records.records)

    def check(self) -> None:
        """The layout's invariants: the live entries are indexed in canonical order, the last
        entry is live, the counters match."""
        live = self.live_mask()
        assert self._n == int(live.sum())
        assert self._used == 0 or live[-1]
        entries = np.flatnonzero(live)
        expected = rebuilt_index(self.all_keys()[entries], entries, self._homes, self._n_slots)
        assert self.index.tobytes() == expected.tobytes()


def table_class(base: type) -> type:
    return type(f"Table_{base.__module__.rsplit('.', 1)[-1]}", (Table, base), {})


@pytest.fixture(params=["reference", "compiled"])
def make_table(request):
    base = reference.MapCore if request.param == "reference" else compiled_base()
    return table_class(base)


# -- the same operations on both cores ---------------------------------------------------------

class Big(int):
    """An int subclass: an 'object' value that is pickled, a key admitted by operator.index."""


class Indexable:
    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


SMALL_KEYS = st.integers(-24, 24)  # few enough to hit, enough to grow the index and chunk 0
ODD_KEYS = st.one_of(
    st.integers(INT64_MIN, INT64_MAX),
    st.sampled_from([INT64_MIN, INT64_MAX, 2**63, -(2**63) - 1, 2**70, 1.0, 2.5, -0.0,
                     float("nan"), float("inf"), 2.0**63, True, False, np.int64(5),
                     np.uint64(7), Indexable(3), Big(4), "a", None, b"1", (1,)]),
)


class Present:
    """A key of the table: the ``i``-th live one (see :func:`resolved`)."""

    def __init__(self, i: int) -> None:
        self.i = i


def resolved(key, table):
    if not isinstance(key, Present):
        return key
    live = [table._key_of(e) for e in range(table._used) if table._is_live(e)]
    return live[key.i % len(live)] if live else key.i


KEYS = st.integers(0, 9).flatmap(
    lambda draw: SMALL_KEYS if draw < 4 else st.builds(Present, st.integers(0, 50)) if draw < 8
    else ODD_KEYS)
TEXT = st.one_of(st.text(max_size=3), st.text(max_size=10),
                 st.sampled_from(["\ud800", "a\udfff", "é", "€uro", "😀", "abcdefg"]))
SMALL_INTS = st.one_of(st.integers(-(2**41), 2**41), st.integers(-300, 300))
VALUES = {
    "object": st.one_of(st.none(), st.booleans(), SMALL_INTS, st.integers(), TEXT,
                        st.binary(max_size=9), st.floats(), st.tuples(st.integers()),
                        st.sampled_from([Big(3), np.int64(2), bytearray(b"ab"), 2**64])),
    "str": st.one_of(TEXT, st.sampled_from([b"x", 1, None])),
    "bytes": st.one_of(st.binary(max_size=10), st.sampled_from([bytearray(b"ab"), memoryview(b"c"),
                                                                "x", 1])),
    "int64": st.one_of(SMALL_INTS, st.integers(INT64_MIN, INT64_MAX),
                       st.sampled_from([2**63, True, 1.5, np.int64(-3), np.uint8(9), "1"])),
    "float64": st.one_of(st.floats(), st.sampled_from([1, -(2**70), True, np.float32(0.5),
                                                       float("nan"), -0.0, "1.0"])),
}


def operation(value: str):
    values = VALUES[value]
    return st.one_of(
        st.tuples(st.just("set"), KEYS, values), st.tuples(st.just("set"), SMALL_KEYS, values),
        st.tuples(st.just("set"), SMALL_KEYS, values),
        st.tuples(st.sampled_from(["get", "getitem", "contains", "del", "pop", "pop_default",
                                   "lookup", "setdefault"]), KEYS, values),
        st.tuples(st.sampled_from(["popitem", "len", "entries", "detached", "find"]),
                  SMALL_KEYS, st.just(None)),
        st.tuples(st.sampled_from(["keys", "values", "items"]),
                  st.sampled_from(["all", "set", "del", "get"]), SMALL_KEYS),
    )


def run(table, op, key, value):
    """One operation: its result, or the type and message of the exception it raised."""
    try:
        return ("ok", apply(table, op, key, value))
    except Exception as exc:  # the exception is the result to compare
        return ("raised", type(exc).__name__, str(exc))


def apply(t, op, key, value):
    if op == "set":
        t[key] = value
        return None
    if op == "get":
        return t.get(key), t.get(key, "default")
    if op == "getitem":
        return t[key]
    if op == "contains":
        return key in t
    if op == "del":
        del t[key]
        return None
    if op == "pop":
        return t.pop(key)
    if op == "pop_default":
        return t.pop(key, "default")
    if op == "lookup":
        return t._lookup(key)
    if op == "setdefault":
        return t.setdefault(key, value)
    if op == "popitem":
        return t.popitem()
    if op == "len":
        return len(t)
    if op == "find":
        return [t._find(k) for k in (key, key << 60, 2**64 + key)]
    if op == "entries":
        return [(t._key_of(e), t._value_of(e), t._is_live(e)) for e in range(t._used)]
    if op == "detached":
        t._detach()
        try:
            return [run(t, op, 1, 1) for op in ("set", "get", "getitem", "del", "popitem")] + \
                [run_iteration(t, what, "all", 1) for what in ("keys", "values", "items")]
        finally:
            t.reattach(t._homes, t._width)
    return run_iteration(t, op, key, value)


def run_iteration(t, what, change, key):
    """Iterate keys, values or items, changing the table after the first step."""
    it = {"keys": lambda: iter(t), "values": t._iter_values, "items": t._iter_items}[what]()
    steps = []
    for step in range(t._used + 2):
        if step == 1 and change != "all":
            steps.append(run(t, change, key, "changed"))
        try:
            steps.append(next(it))
        except StopIteration:
            steps.append("stop")
            break
        except Exception as exc:
            steps.append((type(exc).__name__, str(exc)))
    return steps


def comparable(x):
    """``x`` with floats as bit patterns (NaN payloads, -0.0) and types made explicit."""
    if isinstance(x, float):
        return "float", struct.pack("<d", x)
    if isinstance(x, (tuple, list)):
        return type(x).__name__, [comparable(item) for item in x]
    return type(x).__name__, x


@pytest.mark.parametrize("value", sorted(VALUES))
def test_compiled_core_matches_the_reference_byte_for_byte(value):
    compiled, pure = table_class(compiled_base()), table_class(reference.MapCore)

    @settings(max_examples=100, deadline=None)
    @given(st.lists(operation(value), min_size=20, max_size=120))
    def check(ops):
        a, b = compiled(value), pure(value)
        for op, key, arg in ops:
            key = resolved(key, b)
            got, expected = run(a, op, key, arg), run(b, op, key, arg)
            assert comparable(got) == comparable(expected), (op, key, arg)
            assert a.state() == b.state(), (op, key, arg)
            a.check()

    check()


def test_key_admission_matches_the_reference():
    """Lookups admit what layout.lookup_key does (misses, never errors, for the rest); stores
    raise layout.as_key's errors."""
    lookups = [2, 2.0, 2.5, -0.0, True, False, np.int64(2), np.uint64(2), Indexable(2), Big(2),
               2**64 + 2, -(2**63) - 1, float("nan"), float("inf"), 2.0**63, "2", None, (2,)]
    tables = [table_class(compiled_base())(), table_class(reference.MapCore)()]
    for t in tables:
        t[0], t[1], t[2] = "zero", "one", "two"
    results = [[run(t, op, key, "stored") for key in lookups
                for op in ("getitem", "contains", "get", "lookup", "set")] for t in tables]
    assert comparable(results[0]) == comparable(results[1])
    assert tables[0].state() == tables[1].state()


def test_many_entries_and_every_growth_path():
    """Past two chunks (index doublings, chunk 0 copied to its full size, chunks added,
    compaction, widening), then deleting most keys: the same bytes throughout."""
    compiled, pure = table_class(compiled_base())("object"), table_class(reference.MapCore)("object")
    rng = np.random.default_rng(7)
    keys = rng.integers(INT64_MIN, INT64_MAX, 2 * CHUNK_ENTRIES).tolist() + list(range(-500, 500))
    values = [None, True, 5, -(2**40), "ab", "abcdef", b"xyz", "a long text value", 2.5, (1, 2)]
    for step, key in enumerate(keys):
        for t in (compiled, pure):
            t[key] = values[step % len(values)]
        if step % 7 == 3:
            for t in (compiled, pure):
                del t[keys[step // 2]]
        if step in (100, 5000, CHUNK_ENTRIES + 10):
            assert compiled.state() == pure.state()
    assert len(compiled.chunks) > 2 and compiled.state() == pure.state()
    for key in keys[::3]:
        assert comparable(compiled.pop(key, None)) == comparable(pure.pop(key, None))
    while len(pure) > 100:
        assert comparable(compiled.popitem()) == comparable(pure.popitem())
    assert compiled.state() == pure.state()
    assert comparable(list(compiled._iter_items())) == comparable(list(pure._iter_items()))
    compiled.check()


# -- closed tables, changes during iteration ---------------------------------------------------

def test_a_detached_core_raises_closed_error(make_table):
    t = make_table()
    t[1] = "one"
    values = t._iter_values()
    t._detach()
    t._detach()  # idempotent
    assert t._index is None and len(t) == 1
    for operation_on_closed in (lambda: t[1], lambda: t.get(1), lambda: 1 in t,
                                lambda: t.__setitem__(2, "two"), lambda: t.__delitem__(1),
                                lambda: t.pop(1), lambda: t.popitem(), lambda: t.setdefault(1),
                                lambda: t._lookup(1), lambda: next(values), lambda: list(t)):
        with pytest.raises(ClosedError, match="the LongHashMap is closed"):
            operation_on_closed()
    t.reattach(t._homes, t._width)
    assert t._index is not None and t[1] == "one" and list(t) == [1]


def test_an_iterator_after_a_change_raises_runtime_error(make_table):
    t = make_table()
    for k in range(5):
        t[k] = k
    it = iter(t)
    assert next(it) == 0
    t[1] = 7  # an overwrite that fits the column is no change of the entries
    assert next(it) == 1
    t[10] = 10
    with pytest.raises(RuntimeError, match="LongHashMap changed size during iteration"):
        next(it)
    assert list(it) == []  # an iterator that raised has ended
    items = t._iter_items()
    del t[10]  # before the first step: the iteration starts from the table as it is then
    assert list(items) == [(0, 0), (1, 7), (2, 2), (3, 3), (4, 4)]


def test_a_read_only_table_serves_lookups_and_refuses_changes():
    """A reader's table: lookups and iteration work, a change raises what a write into read-only
    memory raises, and nothing changes."""
    tables = [table_class(compiled_base())(), table_class(reference.MapCore)()]
    for t in tables:
        for k in range(20):
            t[k] = "a long value, in a record" if k % 4 else k
        for array in [t.index, *(array for chunk in t.chunks for array in chunk)]:
            array.flags.writeable = False
        t._attach(t.codec, t.index, *zip(*t.chunks), t._homes, t._width)
    ops = [("getitem", 3, None), ("get", 4, None), ("items", "all", 0), ("set", 3, 7),
           ("set", 99, 1), ("del", 5, None), ("pop", 6, None), ("popitem", 0, None),
           ("setdefault", 50, 1), ("contains", 7, None)]
    results = [[run(t, *op) for op in ops] for t in tables]
    assert comparable(results[0]) == comparable(results[1])
    assert results[0][3] == ("raised", "TypeError", "cannot modify read-only memory")
    assert tables[0].state() == tables[1].state()


def test_the_core_leaves_new_to_the_classes_after_it():
    """As the reference, MapCore defines no __new__: a mixin's (a file map's readonly=True
    opening a reader) runs."""

    class Opener:
        def __new__(cls, *args, reader=False):
            return "a reader" if reader else super().__new__(cls)

    for base in (compiled_base(), reference.MapCore):
        cls = type("Opened", (base, Opener), {"__init__": lambda self, reader=False: None})
        assert cls(reader=True) == "a reader" and isinstance(cls(), base)


# -- the compiled core's safety ----------------------------------------------------------------

def compiled_table(value="object", **options):
    return table_class(compiled_base())(value, **options)


def test_a_damaged_index_raises_corruption_error():
    t = compiled_table()
    for k in range(10):
        t[k] = k
    slot, entry = t._find(3)
    t.index[slot] = t._used + 5  # an entry number past the entries in use
    for damaged in (lambda: t[3], lambda: 3 in t, lambda: t.__setitem__(3, 0),
                    lambda: t.__delitem__(3), lambda: t._find(3)):
        with pytest.raises(CorruptionError, match="the table is damaged"):
            damaged()
    t.index[slot] = entry + 1
    t._used = -1  # counters the table cannot have
    with pytest.raises(CorruptionError):
        t[100] = 1
    t._used = t._capacity + 1
    for damaged in (t.popitem, lambda: t.__delitem__(3)):
        with pytest.raises(CorruptionError, match="out of range"):
            damaged()
    t._used = 10
    t.chunks[0][2][1] = 0  # the last entry a hole
    with pytest.raises(CorruptionError, match="the last in use"):
        t.popitem()


def test_a_probe_past_the_last_slot_asks_for_a_larger_index():
    """With 2 slots of slack, keys of the last home fill it and the slots after it; the next
    one passes the last slot, which is where it would go, and the index must grow."""
    t = compiled_table(slack=2)
    keys = np.arange(10_000)
    last_home = keys[homes_of(keys, MIN_HOMES) == MIN_HOMES - 1][:4].tolist()
    for k in last_home[:3]:
        t[k] = k
    assert t._find(last_home[3]) == (t._n_slots, -1) and t._homes == MIN_HOMES
    t[last_home[3]] = 0
    assert t._homes == 2 * MIN_HOMES and [t[k] for k in last_home] == last_home[:3] + [0]


def test_attach_checks_its_buffers_and_keeps_the_old_table_on_failure():
    t = compiled_table()
    t[5] = "five"
    keys, values, live = t.chunks[0]
    args = [t.codec, t.index, [keys], [values], [live], t._homes, t._width]
    bad = {1: t.index.astype(np.uint64), 2: [keys[:-8]], 3: [values.astype(np.uint32)],
           4: [live[:-1]], 5: len(t.index) + 1, 6: 3}
    bad_chunks = [([keys, keys], [values], [live]),
                  ([keys, np.zeros(CHUNK_ENTRIES, np.int64)], [values] * 2, [live] * 2)]
    for at, wrong in bad.items():
        with pytest.raises(ValueError):
            t._attach(*args[:at], wrong, *args[at + 1:])
    for chunks in bad_chunks:
        with pytest.raises(ValueError, match="chunk"):
            t._attach(t.codec, t.index, *chunks, t._homes, t._width)
    with pytest.raises(TypeError):
        t._attach(*args[:-1])
    assert t[5] == "five" and t._index is t.index


def test_attach_holds_the_buffers_until_detach():
    """Regions in a mapping, as the arena's: while attached it cannot be closed."""
    mapping = mmap.mmap(-1, 4096)
    t = compiled_table()
    t._detach()
    sizes = [(np.uint32, MIN_HOMES + SLACK), (np.int64, 16), (np.uint16, 16), (np.uint8, 2)]
    offsets = np.cumsum([0] + [np.dtype(dtype).itemsize * n for dtype, n in sizes])
    index, keys, values, live = (np.frombuffer(mapping, dtype, n, int(offset))
                                 for (dtype, n), offset in zip(sizes, offsets))
    t._attach(t.codec, index, [keys], [values], [live], MIN_HOMES, 2)
    del index, keys, values, live
    t._n = t._used = 0
    t[1] = None
    with pytest.raises(BufferError):
        mapping.close()
    t._detach()
    gc.collect()
    mapping.close()


def test_cycles_through_the_core_are_collected():
    t = compiled_table()
    t[1] = 1
    t.itself = t
    t.iterator = iter(t)
    del t
    gc.collect()


def test_two_threads_hammering_one_core_never_crash():
    """Each _make_room sleeps halfway, so the other thread runs while the table is being
    reshaped and finds it re-attached afterwards, or attached to a stale copy. The harness does
    not serialize access as the map does, so operations may fail (a record released twice, a
    table whose counters ran ahead of it), but with Python exceptions only: a SystemError
    would be the core breaking the C API."""
    t = compiled_table(pause=lambda: time.sleep(0))
    outcomes = []

    def hammer(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for k in rng.integers(-2000, 2000, 4000).tolist():
            try:
                action = k % 5
                if action == 0:
                    t.pop(k, None)
                elif action == 1:
                    t.get(k)
                elif action == 2:
                    list(t._iter_items())
                else:
                    t[k] = "a value too long to be inline" if k % 3 else k
            except Exception as exc:
                outcomes.append(exc)

    run_racing_threads(hammer)
    assert not [exc for exc in outcomes if isinstance(exc, SystemError)]
    try:
        list(t._iter_items())
    except Exception as exc:
        assert not isinstance(exc, SystemError)


# -- speed -------------------------------------------------------------------------------------

def per_op_ns(statement: str, namespace: dict, number: int) -> float:
    return min(timeit.repeat(statement, globals=namespace, number=number, repeat=5)) / number * 1e9


@pytest.mark.bench
@pytest.mark.parametrize("size", [10_000, 1_000_000])
def test_per_operation_cost_against_dict(size):
    """ns per operation (min of 5 runs, the loop's own cost taken off) of dict, the compiled
    and the reference core under the harness, and LongHashMap on the core it selected; int
    values, 10,000 keys hit or missed at random."""
    keys = np.random.default_rng(3).permutation(size * 2)[:size].tolist()
    hit, miss = keys[::max(1, size // 10_000)], [k + size * 2 for k in keys[:10_000]]
    cores = {"dict": dict, "compiled": table_class(compiled_base()),
             "reference": table_class(reference.MapCore), "LongHashMap": LongHashMap}
    figures = {}
    for name, make in cores.items():
        m = make()
        for k in keys:
            m[k] = k
        namespace = {"m": m, "hit": hit, "miss": miss, "keys": keys, "make": make}
        loop = per_op_ns("for k in hit: pass", namespace, 1)  # taken off every figure
        figures[name] = {
            "get hit": (per_op_ns("for k in hit: m[k]", namespace, 1) - loop) / len(hit),
            "get miss": (per_op_ns("for k in miss: k in m", namespace, 1) - loop) / len(miss),
            "set (overwrite)": (per_op_ns("for k in hit: m[k] = k", namespace, 1) - loop)
            / len(hit),
            "insert": (per_op_ns("n = make()\nfor k in keys: n[k] = k", namespace, 1)
                       - loop * len(keys) / len(hit)) / len(keys),
        }
    print(f"\nns per operation, {size:,} keys; load {os.getloadavg()[0]:.2f}")
    print(f"{'':16}" + "".join(f"{name:>12}" for name in figures))
    for what in figures["dict"]:
        print(f"{what:16}" + "".join(f"{figures[name][what]:12.1f}" for name in figures))


def test_bind_methods_gives_a_subclass_its_own_descriptors_of_the_same_functions():
    core = importlib.import_module(compiled_base().__module__)
    if not native.PURE_PYTHON:
        assert LongHashMap.get.__objclass__ is LongHashMap  # bound when the class is made
    with pytest.raises(TypeError, match="subclass of MapCore"):
        core.bind_methods(dict)

    class Defined(compiled_base()):
        def get(self, key, default=None, /):
            return "own"

    core.bind_methods(Defined)
    assert Defined.get(Defined(), 1) == "own"  # a method the class defines is left alone
    assert Defined.pop.__objclass__ is Defined
