"""Cache against dict and an OrderedDict LRU cache, measured in the same run.

    python benchmarks/cache_bench.py --ops 200000 --universe 100000 --entries 10000 --rounds 3

The workload is the cache-aside loop: ``get`` a key drawn from a Zipf distribution (exponent
``--zipf`` over ``--universe`` keys like ``user:1234``), and on a miss ``set`` it, so eviction is
active once the cache holds ``--entries`` entries. Contenders, each fed the same key sequence:

- ``dict``: the same gets and sets on a plain dict, which never evicts (the speed reference);
- ``OrderedDict LRU``: the ``functools.lru_cache``-style cache in Python (``move_to_end`` on a
  hit, ``popitem(last=False)`` past the bound): the same LRU policy, so the same hit ratio;
- ``Cache``: ``offheap.Cache(key="str", value="str", max_entries=...)``, a second one with
  expiry after write on (``--ttl``: the clock never reaches it, the cost of the stamps), and a
  third with ``policy="clock"`` (a hit marks its entry in place instead of moving it: its hit
  ratio against LRU's is the policy's, its speed the cost of a hit without a move).

Each figure is the minimum of ``--rounds`` runs, in ns per operation (a get, plus the set of
a miss); the ratios divide by dict's and by the OrderedDict's of the same run. The load average
is printed first: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import OrderedDict

import numpy as np


def zipf_keys(ops: int, universe: int, exponent: float, seed: int = 7) -> list[str]:
    weights = 1.0 / np.arange(1, universe + 1) ** exponent
    ranks = np.random.default_rng(seed).choice(universe, size=ops, p=weights / weights.sum())
    return [f"user:{rank}" for rank in ranks.tolist()]


def cache_aside(cache, keys: list[str]) -> int:
    """Get each key, set it on a miss; the hits."""
    hits = 0
    for key in keys:
        value = cache.get(key)
        if value is None:
            cache[key] = "v"
        else:
            hits += 1
    return hits


def run_ordered_lru(keys: list[str], entries: int) -> int:
    cache: OrderedDict = OrderedDict()
    hits = 0
    for key in keys:
        value = cache.get(key)
        if value is None:
            cache[key] = "v"
            if len(cache) > entries:
                cache.popitem(last=False)
        else:
            cache.move_to_end(key)
            hits += 1
    return hits


def run_cache(keys: list[str], entries: int, ttl: float | None = None, policy: str = "lru") -> int:
    from offheap import Cache

    with Cache(key="str", value="str", max_entries=entries, ttl=ttl, policy=policy) as cache:
        hits = cache_aside(cache, keys)
        assert cache.stats().hits == hits
    return hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=200_000)
    parser.add_argument("--universe", type=int, default=100_000)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--zipf", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ttl", type=float, default=3600.0)
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    import offheap

    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"load average {' '.join(load)}; offheap core: "
          f"{'compiled' if offheap.compiled else 'pure-Python'} (HashMap's keyed table: "
          f"{'compiled' if not isinstance(offheap.HashMap(), offheap.hashmap.core.MapCore) else 'pure-Python'})")
    keys = zipf_keys(args.ops, args.universe, args.zipf)
    contenders = {
        "dict": lambda: cache_aside({}, keys),
        "OrderedDict LRU": lambda: run_ordered_lru(keys, args.entries),
        "Cache": lambda: run_cache(keys, args.entries),
        f"Cache, ttl={args.ttl:g}": lambda: run_cache(keys, args.entries, args.ttl),
        "Cache, CLOCK": lambda: run_cache(keys, args.entries, policy="clock"),
    }
    best: dict[str, float] = {}
    hit_ratio: dict[str, float] = {}
    for _ in range(args.rounds):
        for name, run in contenders.items():
            start = time.perf_counter()
            hits = run()
            elapsed = time.perf_counter() - start
            best[name] = min(best.get(name, float("inf")), elapsed / args.ops * 1e9)
            hit_ratio[name] = hits / args.ops
    print(f"{args.ops:,} ops, Zipf({args.zipf}) over {args.universe:,} keys, "
          f"max_entries {args.entries:,}, min of {args.rounds}")
    print(f"{'contender':<24}{'ns/op':>10}{'x dict':>9}{'x OrderedDict':>15}{'hit ratio':>11}")
    for name, ns in best.items():
        print(f"{name:<24}{ns:>10.0f}{ns / best['dict']:>9.2f}"
              f"{ns / best['OrderedDict LRU']:>15.2f}{hit_ratio[name]:>11.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(args=vars(args), load=load, ns_per_op=best, hit_ratio=hit_ratio), f,
                      indent=1)


if __name__ == "__main__":
    main()
