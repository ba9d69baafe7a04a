"""The node cache's heap and the random-access time it buys.

Run as ``python -m experiments.nodecache_bench [--heap]``.

Heap: a TreeMap of ``n`` random int64 keys is built, its cache emptied, and random overwrites
(which decode leaves into the cache) and random gets (which cache only inner nodes) run under
memray (:mod:`experiments.heap_profile`); the heap at memray's peak divided by the nodes then
cached is the cost of a cached node. Time: random gets and random inserts of new keys in maps of
1M, 2M and 4M keys built in key order, each against a SortedDict of the same keys in the same
run (min of ``--runs``), for the default byte budget and for ``cache_size=2048`` nodes.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from sortedcontainers import SortedDict

from experiments.heap_profile import profile_heap
from offheap import TreeMap


def _random_keys(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).choice(1 << 40, size=n, replace=False).astype(np.int64)


def heap_per_node(n: int, node_size: int) -> dict:
    """Heap of a cache holding every node of a map of ``n`` random keys, per node and entry."""
    keys = _random_keys(n, 1).tolist()
    tree = TreeMap(key="int64", value="int64", node_size=node_size, cache_bytes=1 << 40)
    for k in keys:
        tree[k] = k
    tree.flush()
    cache = tree._tree.cache

    def fill() -> None:
        for k in keys:
            tree[k] = 1

    cache.clear()
    _, figures = profile_heap(fill, Path(tempfile.gettempdir()) / f"nodecache-{os.getpid()}.bin")
    n_leaves, n_inner = len(cache._leaves), len(cache._inner)
    stats = tree.stats()
    heap = figures["heap_at_peak_bytes"]
    return dict(n=n, node_size=node_size, cached_leaves=n_leaves, cached_inner=n_inner,
                heap_bytes=heap, per_node=heap / (n_leaves + n_inner), per_entry=heap / n,
                charged_bytes=cache.charged_bytes, offheap_used_bytes=stats.used_bytes)


def _best(work, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def access_ratios(n: int, runs: int, ops: int, **cache_options) -> dict:
    """Random get and insert time per op of a TreeMap of ``n`` keys, as ratios to SortedDict."""
    keys = np.sort(_random_keys(n, 2))
    tree = TreeMap(zip(keys.tolist(), keys.tolist()), key="int64", value="int64",
                   **cache_options)
    peer = SortedDict(zip(keys.tolist(), keys.tolist()))
    probe = np.random.default_rng(3).choice(keys, size=ops).tolist()
    fresh = np.random.default_rng(4).integers(1 << 41, 1 << 42, size=ops * runs).tolist()
    figures = dict(n=n, options=cache_options, inner=tree.stats().n_inner)
    for name, a, b in (("get", lambda: [tree.get(k) for k in probe],
                        lambda: [peer.get(k) for k in probe]),):
        figures[name] = _best(a, runs) / _best(b, runs)
    chunks = iter([fresh[i * ops:(i + 1) * ops] for i in range(runs)] * 2)

    def insert_into(target):
        def work():
            for k in next(chunks):
                target[k] = k
        return work

    figures["insert"] = _best(insert_into(tree), runs) / _best(insert_into(peer), runs)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heap", action="store_true", help="the heap per cached node")
    parser.add_argument("--sizes", default="1000000,2000000,4000000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ops", type=int, default=100_000)
    args = parser.parse_args()
    print("load", open("/proc/loadavg").read().split()[:3])
    if args.heap:
        for node_size in (32, 120):
            print(heap_per_node(1_000_000, node_size))
        return
    for n in map(int, args.sizes.split(",")):
        for options in ({}, {"cache_size": 2048}):
            print(access_ratios(n, args.runs, args.ops, **options), flush=True)


if __name__ == "__main__":
    main()
