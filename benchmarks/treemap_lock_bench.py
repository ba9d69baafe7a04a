"""The cost of a TreeMap's lock on single-threaded get and put: the same map timed with its own
lock (a MapLock on the compiled core, which the item slots take without a Python call), with an
RLock and with a lock that does nothing (min of several runs, ns per operation).

    python benchmarks/treemap_lock_bench.py [n_keys] [repeat]
"""

from __future__ import annotations

import os
import sys
import threading
import timeit

import numpy as np

from offheap import TreeMap


class _NoLock:
    """A stand-in with the lock's interface that does nothing (measurement only)."""

    def acquire(self) -> bool:
        return True

    def release(self) -> None:
        pass

    def __enter__(self) -> bool:
        return True

    def __exit__(self, *exc) -> None:
        pass


def _ns_per_op(action, keys, repeat: int) -> float:
    return min(timeit.repeat(lambda: action(keys), number=1, repeat=repeat)) / len(keys) * 1e9


def main(n: int = 200_000, repeat: int = 7) -> None:
    keys = np.random.default_rng(1).permutation(n).tolist()
    print(f"load: {os.getloadavg()}; {n:,} int64 keys, min of {repeat} runs")
    for name, make_lock in (("own lock", None), ("RLock", threading.RLock), ("no lock", _NoLock)):
        tree = TreeMap(value="int64")
        if make_lock is not None:
            tree._lock = make_lock()
            tree._bind_slots()  # the item slots take the lock they were attached with

        def put(ks, tree=tree):
            for k in ks:
                tree[k] = k

        def get(ks, tree=tree):
            for k in ks:
                tree[k]

        put_ns = _ns_per_op(put, keys, repeat)
        get_ns = _ns_per_op(get, keys, repeat)
        print(f"{name:8s} put {put_ns:7.1f} ns/op   get {get_ns:7.1f} ns/op")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:]))
