"""LongHashMap and HashMap under the conditions that crash careless native code, on both cores: a closed
map, a table regrown, cleared or rolled back under live iterators, numpy results kept past the
memory they came from, a fork, two threads. Each must give an exception or a correct answer,
never a crash (a crash fails the whole run, so these tests also run in CI on the pure core)."""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest

from offheap import HashMap, LongHashMap
from offheap.errors import ClosedError
from offheap.hashmap.core import MapCore as ReferenceCore
from offheap.hashmap.keyedmap import ReferenceHashMap
from offheap.hashmap.longhashmap import ReferenceLongHashMap
from tests.contracts import run_racing_threads

CORES = [pytest.param(ReferenceLongHashMap, id="pure"),
         pytest.param(functools.partial(ReferenceHashMap, key="int64"), id="keyed-pure")]
if not issubclass(LongHashMap, ReferenceCore):  # the compiled core was built and selected
    CORES[:0] = [pytest.param(LongHashMap, id="compiled"),
                 pytest.param(functools.partial(HashMap, key="int64"), id="keyed-compiled")]
"""LongHashMap, and HashMap(key="int64") (the keyed table: 16-byte key slots, seeded hashes,
the keyed core), on each core."""


@pytest.fixture(params=CORES)
def map_class(request):
    return request.param


def filled(map_class, n: int = 1000, value: str = "object", **options):
    m = map_class(value=value, **options)
    m.put_many(np.arange(n), [f"v{i}" for i in range(n)] if value == "object" else np.arange(n))
    return m


def iterators(m):
    """One live iterator of every kind, each advanced one step."""
    its = [iter(m), iter(m.keys()), iter(m.values()), iter(m.items()), reversed(list(m))]
    for it in its[:4]:
        next(it)
    return its[:4]


def test_every_operation_on_a_closed_map_raises_closed_error(map_class):
    m = filled(map_class)
    live = iterators(m)
    m.close()
    m.close()  # idempotent
    operations = [lambda: m[1], lambda: m.get(1), lambda: 1 in m, lambda: m.__setitem__(1, "x"),
                  lambda: m.__delitem__(1), lambda: m.pop(1), lambda: m.popitem(),
                  lambda: m.setdefault(1), lambda: list(m), lambda: list(m.items()),
                  lambda: m.get_many([1, 2]), lambda: m.put_many([1], ["x"]),
                  lambda: m.delete_many([1]), lambda: m.contains_many([1]), lambda: m.clear(),
                  lambda: m.update({1: "x"}), lambda: m.stats(), lambda: m.copy()]
    operations += [(lambda it=it: next(it)) for it in live]
    for operation in operations:
        with pytest.raises(ClosedError):
            operation()
    assert "closed" in repr(m)


@pytest.mark.parametrize("change", ["grow", "widen", "clear", "compact", "delete_many", "put_many"])
def test_a_table_reshaped_under_live_iterators(map_class, change):
    """Every reshape frees the regions the iterators were reading: their next step raises
    RuntimeError, and the map stays whole."""
    m = filled(map_class)
    if change == "widen":  # values of one byte: a slot of 2 bytes, until a long one comes
        m.close()
        m = map_class(value="object")
        m.put_many(np.arange(1000), [None] * 1000)
        assert m.stats().value_width_bytes == 2
    live = iterators(m)
    if change == "grow":
        for k in range(1000, 70_000):  # past chunk 0's full size and several index doublings
            m[k] = "g"
    elif change == "widen":
        m[5] = "a value too long for a narrow slot"
        m[6] = 2**40
    elif change == "clear":
        m.clear()
    elif change == "compact":
        for k in range(0, 1000, 2):
            del m[k]
        for k in range(2000, 2600):
            m[k] = "c"
    elif change == "delete_many":
        m.delete_many(np.arange(0, 1000, 3))
    else:
        m.put_many(np.arange(5000, 9000), ["p"] * 4000)
    for it in live:
        with pytest.raises(RuntimeError, match="changed size during iteration"):
            next(it)
        assert list(it) == []
    m._check()
    assert sum(1 for _ in m.items()) == len(m)
    m.close()


def test_a_rollback_under_live_iterators(map_class, tmp_path):
    m = filled(map_class, path=tmp_path / "m.offheap")
    m.commit()
    for k in range(1000, 5000):
        m[k] = "new"
    live = iterators(m)
    m.rollback()
    for it in live:
        with pytest.raises(RuntimeError):
            next(it)
    assert len(m) == 1000 and m[999] == "v999"
    m._check()
    m.close()


def test_numpy_results_outlive_the_table_they_came_from(map_class):
    m = filled(map_class, value="int64")
    values = m.get_many(np.arange(1000))
    found = m.contains_many(np.arange(2000))
    for k in range(1000, 100_000):
        m[k] = k  # the regions the results were read from are freed and replaced
    m.close()
    assert values.tolist() == list(range(1000))
    assert found.sum() == 1000 and found[:1000].all()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_works_on_its_own_copy(map_class):
    """The child reads the whole map, changes it and exits; the parent's map is as it was
    (anonymous memory is private, copy-on-write, like the rest of the process)."""
    m = filled(map_class)
    before = dict(m.items())
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status, never raise past here
        status = 1
        try:
            ok = dict(m.items()) == before
            for k in range(1000):
                m[k] = "child"
            for k in range(0, 1000, 2):
                del m[k]
            for k in range(10_000, 80_000):
                m[k] = "grown"
            m._check()
            status = 0 if ok and len(m) == 500 + 70_000 else 2
        finally:
            os.write(write, bytes([status]))
            os._exit(status)
    os.close(write)
    _, exit_status = os.waitpid(pid, 0)
    assert os.read(read, 1) == b"\x00" and exit_status == 0
    os.close(read)
    assert dict(m.items()) == before
    m._check()
    m.close()


def test_two_threads_on_one_map_never_crash(map_class):
    """Without a lock a map is not promised to be consistent under two writers, but no mix of
    operations may crash the interpreter or break the C API (SystemError); whatever state they
    leave is readable or raises an offheap error."""
    m = map_class(value="object")
    errors = []

    def hammer(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for k in rng.integers(0, 3000, 3000).tolist():
            try:
                action = k % 6
                if action == 0:
                    m.pop(k, None)
                elif action == 1:
                    m.get(k)
                elif action == 2:
                    sum(1 for _ in m.items())
                elif action == 3:
                    m.put_many([k, k + 1], ["a long external value", k])
                else:
                    m[k] = "an external value of some length" if k % 3 else k
            except Exception as exc:  # consistency is not promised here, only no crash
                errors.append(exc)

    run_racing_threads(hammer)
    assert not [exc for exc in errors if isinstance(exc, SystemError)]
    try:
        sum(1 for _ in m.items())
    except Exception as exc:
        assert not isinstance(exc, SystemError)
    m.close()
