"""TreeMap under several threads: any mix of operations on one map, or on the TreeMaps of one
DB, never crashes, corrupts the tree or loses an acknowledged write; ``_check()`` after it."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest

from offheap import DB, TreeMap

N_THREADS = 4
N_STEPS = 800


def _worker(maps, tid: int, kept: dict, errors: list, start: threading.Barrier) -> None:
    """Mixed operations on keys ``tid (mod N_THREADS)`` of each map, recording in ``kept``
    what each map must hold at the end; iteration and range reads span every thread's keys."""
    rng = random.Random(tid)
    start.wait()
    try:
        for step in range(N_STEPS):
            m = maps[step % len(maps)]
            mine = kept[id(m)]
            key = rng.randrange(500) * N_THREADS + tid
            op = rng.random()
            if op < 0.4:
                m[key] = mine[key] = [tid, step]
            elif op < 0.55:
                assert m.pop(key, None) == mine.pop(key, None)
            elif op < 0.65:
                keys = [rng.randrange(500) * N_THREADS + tid for _ in range(20)]
                m.put_many(np.array(keys), [step] * 20)
                mine.update(dict.fromkeys(keys, step))
            elif op < 0.75:
                m.update({key: "u"})
                mine[key] = "u"
            elif op < 0.8:
                assert m.setdefault(key, "s") == mine.setdefault(key, "s")
            elif op < 0.85:
                try:
                    count = sum(1 for _ in m.irange(key - 50, key + 50))
                    assert count <= 101
                except RuntimeError:
                    pass  # another thread changed the size: dict's rule
            elif op < 0.9:
                m.floor_key(key), m.first_key() if len(m) else None
            else:
                assert m.get(key, "absent") == mine.get(key, "absent")
    except BaseException as exc:  # reported by the main thread
        errors.append(exc)


def _run(maps) -> None:
    kept_per_thread = [{id(m): {} for m in maps} for _ in range(N_THREADS)]
    errors: list = []
    start = threading.Barrier(N_THREADS)
    threads = [threading.Thread(target=_worker, args=(maps, t, kept_per_thread[t], errors, start))
               for t in range(N_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for m in maps:
        m._check()
        expected = {}
        for kept in kept_per_thread:
            expected.update(kept[id(m)])
        assert dict(m.items()) == expected


@pytest.mark.parametrize("options", [dict(), dict(write_cache=False), dict(flush_delay=1)])
def test_threads_on_one_tree(options):
    _run([TreeMap(node_size=8, cache_size=8, **options)])


def test_threads_on_the_trees_of_one_db():
    with DB.memory() as db:
        _run([db.tree_map("a", node_size=8, cache_size=8), db.tree_map("b", flush_delay=1)])
