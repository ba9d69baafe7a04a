"""LongHashMap and HashMap shared by threads without a lock of their own, on both cores: writers of disjoint
keys (inline values, values through the codec, growth from an empty table), writers against
readers and iterators, every operation mixed, and the collections of one DB. Each must leave the
union of what the threads wrote, pass ``_check()``, and never crash or raise anything but an
iterator's RuntimeError (a dict's rule for a size changed during iteration)."""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import time

import numpy as np
import pytest

from offheap import DB, HashMap, LongHashMap
from offheap.hashmap.core import MapCore as ReferenceCore
from offheap.collection.locks import new_lock
from offheap.hashmap.keyedmap import ReferenceHashMap
from offheap.hashmap.longhashmap import ReferenceLongHashMap
from tests.contracts import run_racing_threads

CORES = [pytest.param(ReferenceLongHashMap, id="pure"),
         pytest.param(functools.partial(ReferenceHashMap, key="object"), id="keyed-pure")]
if not issubclass(LongHashMap, ReferenceCore):  # the compiled core was built and selected
    CORES[:0] = [pytest.param(LongHashMap, id="compiled"),
                 pytest.param(functools.partial(HashMap, key="object"), id="keyed-compiled")]
"""LongHashMap, and HashMap(key="object") holding the same int keys (the keyed table and its
core), on each core."""

SEEDS = (0, 1, 2)
LONG = "a value too long for a slot word, so it is a record of the store"


@pytest.fixture(params=CORES)
def map_class(request):
    return request.param


def race(target, seeds=SEEDS) -> None:
    """run_racing_threads, with every exception of a thread raised here afterwards."""
    errors: list[BaseException] = []

    def guarded(seed: int) -> None:
        try:
            target(seed)
        except BaseException as exc:
            errors.append(exc)

    run_racing_threads(guarded, seeds)
    if errors:
        raise errors[0]


def own_keys(seed: int, n: int) -> list[int]:
    """Keys of thread ``seed`` only (residue ``seed`` modulo 8), in a random order."""
    rng = np.random.default_rng(seed)
    return (rng.permutation(n) * 8 + seed).tolist()


def value_of(key: int, kind: str):
    if kind == "int":
        return key
    if kind == "object":
        return f"{LONG} {key}" if key % 3 else (key, "tuple")  # records and pickles
    return [key] if key % 2 else key  # mixed: slot words and records


def copy_items_while_written(m, stable: dict, seen_sizes: list[int], rounds: int) -> None:
    """Copy the map's items `rounds` times while another thread writes: a copy either completes,
    holding every entry of `stable` (its size goes to `seen_sizes`), or raises RuntimeError."""
    for _ in range(rounds):
        try:
            items = dict(m.items())
        except RuntimeError:  # the writer changed the size meanwhile: dict's rule
            continue
        seen_sizes.append(len(items))
        assert all(items[key] == value for key, value in stable.items())


@pytest.mark.parametrize("kind", ["int", "object", "mixed"])
def test_disjoint_writers_from_an_empty_map_leave_the_union(map_class, kind):
    """Every insert races the others' and the table grows many times under them."""
    m = map_class(value="object")
    n = 3000

    def write(seed: int) -> None:
        for key in own_keys(seed, n):
            m[key] = value_of(key, kind)

    race(write)
    expected = {key: value_of(key, kind) for seed in SEEDS for key in own_keys(seed, n)}
    assert len(m) == len(expected)
    assert dict(m.items()) == expected
    m._check()
    m.close()


def test_writers_deleters_and_popping_threads_keep_exactly_their_own_keys(map_class):
    m = map_class(value="object")

    def churn(seed: int) -> None:
        keys = own_keys(seed, 1500)
        for i, key in enumerate(keys):
            m[key] = value_of(key, "mixed")
            if i % 3 == 0:
                del m[key]
            elif i % 3 == 1:
                assert m.pop(key) == value_of(key, "mixed")
                assert m.setdefault(key, LONG) == LONG
        for key in keys[::5]:
            m[key] = key

    race(churn)
    expected = {}
    for seed in SEEDS:
        keys = own_keys(seed, 1500)
        for i, key in enumerate(keys):
            if i % 3 == 1:
                expected[key] = LONG
            elif i % 3 == 2:
                expected[key] = value_of(key, "mixed")
        for key in keys[::5]:
            expected[key] = key
    assert dict(m.items()) == expected
    m._check()
    m.close()


def test_a_writer_against_readers_and_iterators(map_class):
    """Thread 0 writes, thread 1 reads its keys back, thread 2 iterates everything."""
    m = map_class(value="object")
    stable = {key: value_of(key, "mixed") for key in own_keys(7, 2000)}
    m.update(stable)
    seen_sizes: list[int] = []

    def work(seed: int) -> None:
        if seed == 0:
            for key in own_keys(0, 4000):
                m[key] = value_of(key, "object")
            for key in own_keys(0, 4000)[::2]:
                del m[key]
        elif seed == 1:
            for _ in range(3):
                for key, value in stable.items():
                    assert m[key] == value and m.get(key) == value and key in m
        else:
            copy_items_while_written(m, stable, seen_sizes, rounds=20)

    race(work)
    expected = dict(stable)
    expected.update({key: value_of(key, "object") for key in own_keys(0, 4000)[1::2]})
    assert dict(m.items()) == expected
    assert all(len(stable) <= size <= len(stable) + 4000 for size in seen_sizes)
    m._check()
    m.close()


STR_CORES = [pytest.param(functools.partial(ReferenceHashMap, key="str"), id="pure")]
if not issubclass(LongHashMap, ReferenceCore):
    STR_CORES[:0] = [pytest.param(functools.partial(HashMap, key="str"), id="compiled")]


@pytest.mark.parametrize("str_map", STR_CORES)
def test_long_keys_read_while_another_thread_makes_and_frees_their_records(str_map):
    """Long keys live in records of the store, which the compiled core reads in place for a
    probe and for iteration: a writer making and freeing long keys' records (so the store grows
    segments and reuses chunks) against readers and iterators of other long keys."""
    m = str_map(value="int64")
    stable = {f"stable key {key} {'x' * (key % 40)}": key for key in range(1500)}
    m.update(stable)
    seen_sizes: list[int] = []

    def work(seed: int) -> None:
        if seed == 0:
            for round_ in range(3):
                for key in range(3000):
                    m[f"written key {key} {'y' * (key % 50)}"] = key + round_
                for key in range(0, 3000, 2):
                    del m[f"written key {key} {'y' * (key % 50)}"]
        elif seed == 1:
            for _ in range(3):
                for key, value in stable.items():
                    assert m[key] == value and key in m and m.get(key + "?") is None
        else:
            copy_items_while_written(m, stable, seen_sizes, rounds=10)

    race(work)
    expected = dict(stable)
    expected.update({f"written key {key} {'y' * (key % 50)}": key + 2 for key in range(1, 3000, 2)})
    assert dict(m.items()) == expected
    assert all(len(stable) <= size <= len(expected) + 1500 for size in seen_sizes)
    m._check()
    m.close()


def test_every_operation_mixed(map_class):
    """Scalar, bulk and whole-map operations of several threads on their own keys; each thread
    checks every answer against its own dict, and the map ends as their union."""
    m = map_class(value="object")
    kept = {seed: {} for seed in SEEDS}

    def mixed(seed: int) -> None:
        rng = np.random.default_rng(seed + 10)
        mine = kept[seed]
        for step in range(1500):
            key = int(rng.integers(600)) * 8 + seed
            op = step % 10
            if op < 3:
                m[key] = mine[key] = value_of(key + step, "mixed")
            elif op == 3:
                assert m.pop(key, None) == mine.pop(key, None)
            elif op == 4:
                keys = [int(k) * 8 + seed for k in rng.integers(600, size=10)]
                m.put_many(keys, [LONG] * 10)
                mine.update(dict.fromkeys(keys, LONG))
            elif op == 5:
                keys = [int(k) * 8 + seed for k in rng.integers(600, size=5)]
                assert m.delete_many(keys) == len(set(keys) & mine.keys())
                for k in keys:
                    mine.pop(k, None)
            elif op == 6:
                assert m.get_many([key], "absent") == [mine.get(key, "absent")]
            elif op == 7:
                assert m.setdefault(key, step) == mine.setdefault(key, step)
            elif op == 8:
                m.update({key: "u"})
                mine[key] = "u"
            else:
                try:
                    assert len(list(reversed(m))) <= len(m) + 8 * 600
                except RuntimeError:
                    pass
                m.stats()

    race(mixed)
    union = {key: value for mine in kept.values() for key, value in mine.items()}
    assert dict(m.items()) == union
    m._check()
    m.close()


def test_typed_values_race_through_the_fast_path(map_class):
    m = map_class(value="int64")
    race(lambda seed: [m.__setitem__(key, -key) for key in own_keys(seed, 5000)])
    assert dict(m.items()) == {key: -key for seed in SEEDS for key in own_keys(seed, 5000)}
    m._check()
    m.close()


def test_the_collections_of_a_db_share_its_lock_and_race_safely():
    with DB.memory() as db:
        hashes = [db.hash_map("a"), db.hash_map("b")]
        tree = db.tree_map("t")
        assert all(h._lock is db.lock for h in hashes) and tree._lock is db.lock

        def write(seed: int) -> None:
            for key in own_keys(seed, 1000):
                hashes[key % 2][key] = value_of(key, "object")
                tree[key] = key

        race(write)
        keys = [key for seed in SEEDS for key in own_keys(seed, 1000)]
        for i, h in enumerate(hashes):
            assert dict(h.items()) == {k: value_of(k, "object") for k in keys if k % 2 == i}
            h._check()
        assert dict(tree.items()) == {k: k for k in keys}


def test_an_operation_waits_while_another_thread_holds_the_lock(map_class):
    """Even the fast path (an int key, an int value) waits for a holder, and sees its work
    whole; the lock is the map's, re-entrant for its holder."""
    m = map_class(value="int64")
    done = []

    def write() -> None:
        m[1] = m.get(0, -1) + 1
        done.append(True)

    with m._lock:
        writer = threading.Thread(target=write)
        writer.start()
        writer.join(0.2)
        assert writer.is_alive() and not done and 1 not in m  # blocked on the lock
        m[0] = 41  # the holder's own operations take the lock again
    writer.join()
    assert m[1] == 42
    m.close()


def test_the_lock_type_is_a_reentrant_lock():
    lock = new_lock()
    assert lock.acquire() and lock.acquire(blocking=False)
    outcome = []
    other = threading.Thread(target=lambda: outcome.append(
        (lock.acquire(blocking=False), lock.acquire(timeout=0.01))))
    other.start()
    other.join()
    assert outcome == [(False, False)]
    refused = []

    def release_elsewhere() -> None:
        try:
            lock.release()
        except RuntimeError:
            refused.append(True)

    other = threading.Thread(target=release_elsewhere)
    other.start()
    other.join()
    assert refused == [True]
    lock.release()
    lock.release()
    with pytest.raises(RuntimeError):
        lock.release()  # not held any more
    with lock:
        assert lock._is_owned()
    assert not lock._is_owned()


def test_waiters_take_the_lock_in_turn_and_one_that_times_out_leaves_the_queue():
    """Threads that find the lock held wait on locks of their own and each release wakes the
    oldest: every increment made under the lock survives (no two holders at once), every waiter
    gets it (no wakeup lost), and a waiter whose timeout passes leaves the queue behind it."""
    lock, counter, timed_out = new_lock(), [0], []

    def increment() -> None:
        for _ in range(50):
            with lock:
                seen = counter[0]
                time.sleep(0)  # let another thread run while the lock is held
                counter[0] = seen + 1

    lock.acquire()
    workers = [threading.Thread(target=increment) for _ in range(4)]
    impatient = threading.Thread(target=lambda: timed_out.append(lock.acquire(timeout=0.05)))
    for thread in (*workers, impatient):
        thread.start()
    impatient.join()
    assert timed_out == [False]
    time.sleep(0.05)
    lock.release()
    for thread in workers:
        thread.join()
    assert counter == [200]
    assert lock.acquire(blocking=False)
    lock.release()


@pytest.mark.skipif(sys.platform == "win32", reason="needs SIGALRM")
def test_a_signal_handler_runs_while_the_main_thread_waits_for_the_lock():
    """A handler that raises ends the wait with its exception, and the waiter leaves the
    queue: the holder's release later wakes nobody, and the lock is taken again normally."""
    lock, holding, release = new_lock(), threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            holding.set()
            release.wait()

    class Alarm(Exception):
        pass

    def ring(signum, frame):
        raise Alarm

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait()
    previous = signal.signal(signal.SIGALRM, ring)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(Alarm):
            lock.acquire()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not lock._is_owned()
    release.set()
    holder.join()
    assert lock.acquire(timeout=1)
    lock.release()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_while_threads_waited_wakes_its_own_waiters():
    """A fork copies the lock with its queue of waiters, whose threads the child has not (and
    whose stacks it may reuse): the child drops that queue unread, and its release wakes the
    child's own waiting thread at once, not at the waiter's timeout."""
    lock = new_lock()
    lock.acquire()
    waiting = [threading.Thread(target=lambda: lock.acquire(timeout=10) and lock.release())
               for _ in range(2)]
    for thread in waiting:
        thread.start()
    time.sleep(0.1)  # both queued behind the main thread's hold
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            got = []
            child_waiter = threading.Thread(target=lambda: got.append(lock.acquire(timeout=5)))
            child_waiter.start()
            time.sleep(0.1)
            released = time.monotonic()
            lock.release()
            child_waiter.join()
            status = 0 if got == [True] and time.monotonic() - released < 2 else 2
        finally:
            os._exit(status)
    lock.release()
    for thread in waiting:
        thread.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
