"""The compiled keyed core against the keyed reference core: the same answers, errors and table
bytes for the same random operations on every key type; and its safety (closed maps, changes
under iterators, threads)."""

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offheap import ClosedError, HashMap, HashSet
from offheap.hashmap import keyedtable
from offheap.hashmap.keyedmap import ReferenceHashMap
from offheap.hashmap.keyedset import ReferenceHashSet
from offheap.kernels import native
from tests.contracts import run_racing_threads

compiled_only = pytest.mark.skipif(not native.compiled(), reason="the compiled core is not built")

LONG = "a key of more than fifteen bytes"
SEED = bytes(range(16))

KEYS = {
    "str": st.one_of(st.sampled_from(["", "a", "b", "ab", LONG, LONG + "!", "\ud800", "é" * 8]),
                     st.text(max_size=20)),
    "bytes": st.one_of(st.sampled_from([b"", b"\0", b"x" * 15, b"x" * 16]), st.binary(max_size=20)),
    "int64": st.one_of(st.integers(-3, 3), st.integers(-(2**63), 2**63 - 1), st.booleans(),
                       st.just(2**63), st.just("1")),
    "object": st.one_of(st.none(), st.integers(-300, 300), st.integers(), st.booleans(),
                        st.floats(), st.text(max_size=18), st.binary(max_size=18),
                        st.tuples(st.integers(-2, 2), st.text(max_size=3)), st.just([1])),
}
VALUES = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10),
                   st.binary(max_size=10), st.floats(allow_nan=False))


def _operations(key_type):
    keys = KEYS[key_type]
    return st.lists(st.one_of(
        st.tuples(st.just("set"), keys, VALUES), st.tuples(st.just("get"), keys),
        st.tuples(st.just("del"), keys), st.tuples(st.just("pop"), keys),
        st.tuples(st.just("in"), keys), st.tuples(st.just("setdefault"), keys, VALUES),
        st.tuples(st.just("popitem")), st.tuples(st.just("items")),
        st.tuples(st.just("put_many"), st.lists(st.tuples(keys, VALUES), max_size=6)),
        st.tuples(st.just("delete_many"), st.lists(keys, max_size=6)),
        st.tuples(st.just("clear"))), max_size=60)


def _apply(m, op):
    """The outcome of one operation: its result, or the type of the exception it raised."""
    try:
        kind = op[0]
        if kind == "set":
            m[op[1]] = op[2]
        elif kind == "get":
            return m.get(op[1], "absent")
        elif kind == "del":
            del m[op[1]]
        elif kind == "pop":
            return m.pop(op[1], "absent")
        elif kind == "in":
            return op[1] in m
        elif kind == "setdefault":
            return m.setdefault(op[1], op[2])
        elif kind == "popitem":
            return m.popitem()
        elif kind == "items":
            return list(m.items())
        elif kind == "put_many":
            m.put_many([k for k, _ in op[1]], [v for _, v in op[1]])
        elif kind == "delete_many":
            return m.delete_many(op[1])
        elif kind == "clear":
            m.clear()
        return None
    except Exception as error:  # noqa: BLE001  # the outcome compared is the error's type
        return type(error).__name__


def _table_bytes(m) -> tuple:
    r = m._table()
    keys = np.concatenate([chunk.view(np.uint8) for chunk in r.key_chunks]).tobytes()
    long_keys = [m._store.get(recid) for recid in m._long_key_records().tolist()]
    return (m._n, m._used, r.index.tobytes(), keys, long_keys,
            [chunk.tobytes() for chunk in r.value_chunks],
            [chunk.tobytes() for chunk in r.live_chunks])


@compiled_only
@pytest.mark.parametrize("key_type", sorted(KEYS))
def test_compiled_and_reference_give_the_same_answers_and_bytes(key_type, monkeypatch):
    monkeypatch.setattr(keyedtable.os, "urandom", lambda n: SEED[:n])

    @given(_operations(key_type))
    @settings(max_examples=60, deadline=None)
    def check(ops):
        compiled, reference = HashMap(key=key_type), ReferenceHashMap(key=key_type)
        assert compiled._compiled_core and not reference._compiled_core
        for op in ops:
            assert _apply(compiled, op) == _apply(reference, op), op
        assert _table_bytes(compiled) == _table_bytes(reference)
        compiled._check()

    check()


@compiled_only
def test_the_same_file_bytes_on_both_cores(tmp_path, monkeypatch):
    monkeypatch.setattr(keyedtable.os, "urandom", lambda n: SEED[:n])
    files = []
    for cls in (HashMap, ReferenceHashMap):
        path = tmp_path / cls.__name__
        with cls(key="str", path=path, durability="none") as m:
            for i in range(3000):
                m[f"user:{i}" if i % 3 else f"{LONG}{i}"] = i if i % 2 else f"value {i}"
            for i in range(0, 3000, 7):
                del m[f"user:{i}" if i % 3 else f"{LONG}{i}"]
        files.append(path.read_bytes())
    assert files[0] == files[1]


@compiled_only
def test_sets_on_both_cores_hold_the_same_elements_in_the_same_bytes(monkeypatch):
    monkeypatch.setattr(keyedtable.os, "urandom", lambda n: SEED[:n])
    sets = [cls(key="object") for cls in (HashSet, ReferenceHashSet)]
    for s in sets:
        s.update([1, "one", b"one", (1, "one"), 2.5, LONG, None])
        s.discard("one")
        s.add(True)
    assert list(sets[0]) == list(sets[1]) == [1, b"one", (1, "one"), 2.5, LONG, None]
    assert _table_bytes(sets[0]) == _table_bytes(sets[1])


@pytest.mark.parametrize("cls", [HashMap, ReferenceHashMap])
def test_a_closed_map_raises_and_never_crashes(cls):
    m = cls({"a": 1, LONG: 2}, key="str")
    keys, items = iter(m), iter(m.items())
    assert next(keys) == "a"
    m.close()
    for action in (lambda: m["a"], lambda: m.get(LONG), lambda: "a" in m, lambda: m.pop("a"),
                   lambda: m.__setitem__("b", 1), lambda: m.popitem(), lambda: next(keys),
                   lambda: next(items), lambda: len(list(m))):
        with pytest.raises(ClosedError):
            action()


@pytest.mark.parametrize("cls", [HashMap, ReferenceHashMap])
def test_growth_under_a_live_iterator_raises_at_its_next_step(cls):
    m = cls({f"k{i}": i for i in range(10)}, key="str")
    items = iter(m.items())
    assert next(items) == ("k0", 0)
    for i in range(5000):  # regrows the index and the chunks: the iterator's table is gone
        m[f"{LONG}{i}"] = i
    with pytest.raises(RuntimeError, match="changed size during iteration"):
        next(items)
    m._check()


@pytest.mark.parametrize("cls", [HashMap, ReferenceHashMap])
def test_threads_writing_disjoint_keys_lose_nothing(cls):
    m = cls(key="str")
    errors = []

    def writer(seed):
        try:
            for i in range(2000):
                key = f"{seed}:{i}" if i % 2 else f"{LONG}{seed}:{i}"
                m[key] = i
                assert m[key] == i
                if i % 5 == 0:
                    del m[key]
        except Exception as error:  # noqa: BLE001  # reported below
            errors.append(error)

    run_racing_threads(writer, seeds=(1, 2, 3))
    assert not errors
    expected = {(f"{s}:{i}" if i % 2 else f"{LONG}{s}:{i}"): i
                for s in (1, 2, 3) for i in range(2000) if i % 5}
    assert dict(m) == expected
    m._check()


def test_a_keyed_table_refuses_the_int64_bulk_paths_of_its_core():
    m = HashMap(key="str")
    if not m._compiled_core:
        pytest.skip("the compiled core's guard")
    with pytest.raises(TypeError, match="int64 keys"):
        m._find_entries(np.zeros(1, np.int64), np.zeros(1, np.int64))


def test_reading_while_another_thread_iterates_gives_consistent_items():
    m = HashMap({f"k{i}": i for i in range(3000)}, key="str")
    stop = threading.Event()
    seen = []

    def reader():
        while not stop.is_set():
            seen.append(sum(v for _, v in m.items()))

    thread = threading.Thread(target=reader)
    thread.start()
    while len(seen) < 3:  # until the reader has iterated while the writer overwrote
        for i in range(3000):
            m[f"k{i}"] = i  # overwrites: the sum stays
    stop.set()
    thread.join()
    assert set(seen) == {sum(range(3000))}


@compiled_only
@pytest.mark.parametrize("key_type", sorted(KEYS))
def test_bulk_paths_agree_on_both_cores(key_type, monkeypatch):
    monkeypatch.setattr(keyedtable.os, "urandom", lambda n: SEED[:n])

    @given(st.lists(st.tuples(KEYS[key_type], VALUES), max_size=40),
           st.lists(KEYS[key_type], max_size=20))
    @settings(max_examples=40, deadline=None)
    def check(pairs, others):
        keys, values = [k for k, _ in pairs], [v for _, v in pairs]
        maps = [HashMap(key=key_type), ReferenceHashMap(key=key_type)]
        outcomes = []
        for m in maps:
            outcome = [_apply(m, ("put_many", pairs))]
            outcome.append(_apply(m, ("put_many", list(zip(others, range(len(others)))))))
            for probe in (keys + others,):
                try:
                    outcome += [m.get_many(probe, "absent"), m.contains_many(probe).tolist()]
                except Exception as error:  # noqa: BLE001  # compared below
                    outcome.append(type(error).__name__)
            outcome.append(_apply(m, ("delete_many", others)))
            outcomes.append(outcome)
        assert outcomes[0] == outcomes[1]
        assert _table_bytes(maps[0]) == _table_bytes(maps[1])
        maps[0]._check()

    check()


def test_typed_get_many_gives_an_array_and_refuses_missing_keys_without_a_default():
    m = HashMap({"a": 1, "b": 2}, key="str", value="int64")
    assert m.get_many(["b", "a"]).tolist() == [2, 1]
    assert m.get_many(np.array(["a", "zz"]), default=-1).tolist() == [1, -1]
    with pytest.raises(KeyError, match="1 keys are missing"):
        m.get_many(["a", "zz"])


class FailingIndex:
    def __index__(self):
        raise ZeroDivisionError("this key's __index__ fails")


@pytest.mark.parametrize("cls", [HashMap, ReferenceHashMap])
def test_get_many_raises_the_error_of_the_first_key_that_fails_and_keeps_the_map(cls):
    m = cls({i: str(i) for i in range(50)}, key="object")
    keys = list(range(20)) + [FailingIndex()] + list(range(20, 40)) + [FailingIndex()]
    with pytest.raises(ZeroDivisionError):
        m.get_many(keys)
    assert m.get_many(list(range(45)), "absent") == [str(i) for i in range(45)]
    m._check()
