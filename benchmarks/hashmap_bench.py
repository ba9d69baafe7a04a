"""LongHashMap against dict, measured in the same run: memory per entry and speed.

    python benchmarks/hashmap_bench.py memory --n 10000000   # one fresh process per case
    python benchmarks/hashmap_bench.py speed --n 1000000
    python benchmarks/hashmap_bench.py bulk --n 1000000 --rounds 5   # bulk calls vs dict loops

Memory: RSS growth of a fresh process while it inserts ``n`` int64 keys with ``""`` values one
at a time (as the capacity experiment does), and for LongHashMap also ``stats()``.
Speed: scalar set/get ns per operation, and the bulk calls against the dict idioms a user would
write with the same numpy arrays (a lookup loop, ``dict.update(zip(...))``).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import subprocess
import sys
import time

import numpy as np


def rss_bytes() -> int:
    """Resident bytes after a collection and after glibc gives freed heap pages back, so that
    temporaries already freed (the key list, numpy scratch arrays) do not count."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def make_keys(n: int, order: str) -> np.ndarray:
    if order == "sequential":
        return np.arange(n, dtype=np.int64)
    return np.random.default_rng(42).integers(-(2**63), 2**63 - 1, n, dtype=np.int64)


def memory_case(kind: str, order: str, n: int) -> dict:
    """Run in a child process: build the map, report RSS growth (and stats for LongHashMap)."""
    from offheap import LongHashMap

    keys = make_keys(n, order)
    before = rss_bytes()
    start = time.perf_counter()
    m = {} if kind == "dict" else LongHashMap()
    for key in keys.tolist():
        m[key] = ""
    seconds = time.perf_counter() - start
    result = {"kind": kind, "order": order, "n": n, "seconds": seconds,
              "rss_bytes_per_entry": (rss_bytes() - before) / n}
    if kind != "dict":
        stats = m.stats()
        result["stats_bytes_per_entry"] = stats.bytes_per_entry
        result["load_factor"] = stats.load_factor
    return result


def run_memory(n: int) -> list[dict]:
    results = []
    for order in ("sequential", "random"):
        for kind in ("dict", "LongHashMap"):
            out = subprocess.run([sys.executable, __file__, "_child", kind, order, str(n)],
                                 check=True, capture_output=True, text=True).stdout
            results.append(json.loads(out))
            print(json.dumps(results[-1]), flush=True)
    return results


def best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def run_speed(n: int) -> dict:
    from offheap import LongHashMap

    keys = make_keys(n, "random")
    key_list = keys.tolist()
    values = [""] * n
    out = {}
    d = {}
    lhm = LongHashMap()

    def scalar_set(m):
        def go():
            for k in key_list:
                m[k] = ""
        return go

    def scalar_get(m):
        def go():
            for k in key_list:
                m[k]
        return go

    out["dict_set_ns"] = best_of(3, scalar_set(d)) / n * 1e9
    out["lhm_set_ns"] = best_of(3, scalar_set(lhm)) / n * 1e9
    out["dict_get_ns"] = best_of(3, scalar_get(d)) / n * 1e9
    out["lhm_get_ns"] = best_of(3, scalar_get(lhm)) / n * 1e9
    fresh = LongHashMap()
    out["lhm_first_fill_set_ns"] = best_of(1, scalar_set(fresh)) / n * 1e9
    out["dict_lookup_loop_s"] = best_of(3, lambda: [d.get(k) for k in keys.tolist()])
    out["lhm_get_many_s"] = best_of(3, lambda: lhm.get_many(keys))
    out["dict_update_s"] = best_of(3, lambda: {}.update(zip(keys.tolist(), values)))
    out["lhm_put_many_s"] = best_of(3, lambda: LongHashMap().put_many(keys, values))
    typed = LongHashMap(value="int64")
    out["lhm_int64_put_many_s"] = best_of(3, lambda: LongHashMap(value="int64").put_many(keys, keys))
    typed.put_many(keys, keys)
    out["lhm_int64_get_many_s"] = best_of(3, lambda: typed.get_many(keys))
    out["set_ratio"] = out["lhm_set_ns"] / out["dict_set_ns"]
    out["get_ratio"] = out["lhm_get_ns"] / out["dict_get_ns"]
    out["get_many_speedup"] = out["dict_lookup_loop_s"] / out["lhm_get_many_s"]
    out["put_many_speedup"] = out["dict_update_s"] / out["lhm_put_many_s"]
    return out


def _cpu_seconds(fn) -> float:
    """CPU seconds of one call (``time.process_time``: other processes' load does not count)."""
    start = time.process_time()
    fn()
    return time.process_time() - start


def run_bulk(n: int, rounds: int, value: str) -> dict:
    """The bulk rows of the Compiled core goals against their dict loops, as in
    ``experiments.hashmap_goals``: ``get_many`` vs ``[d[k] for k in keys]``, ``put_many`` into a
    fresh map vs a ``for`` insert loop into a fresh dict, plus ``contains_many``, ``delete_many``
    (vs ``k in d`` and ``del d[k]`` loops) and ``put_many`` into a map holding as many other keys.
    Every round times each pair back to back in CPU time; a figure is the fastest round, and
    each ratio is dict loop / bulk call of those figures. ``uptime`` goes beside the result."""
    from offheap import LongHashMap

    rng = np.random.default_rng(5)
    keys_array = np.unique(rng.integers(-(2**63), 2**63 - 1, 2 * n, dtype=np.int64))
    keys_array = keys_array[rng.permutation(keys_array.size)]
    keys_array, others = keys_array[:n], keys_array[n: 2 * n]
    values_array = keys_array.copy() if value == "int64" else np.full(n, "", object)
    keys, values = keys_array.tolist(), values_array.tolist()
    bulk_values = values_array if value == "int64" else values
    d = dict(zip(keys, values))
    m = LongHashMap(value=value)
    m.put_many(keys_array, bulk_values)
    best: dict[str, float] = {}

    def record(name: str, seconds: float) -> None:
        best[name] = min(seconds, best.get(name, seconds))

    def dict_insert() -> None:
        fresh = {}
        for k, v in zip(keys, values):
            fresh[k] = v

    def dict_delete() -> None:
        copy = dict(d)
        started = time.process_time()
        for k in keys:
            del copy[k]
        record("delete dict loop", time.process_time() - started)

    def map_delete() -> None:
        copy = LongHashMap(value=value)
        copy.put_many(keys_array, bulk_values)
        started = time.process_time()
        copy.delete_many(keys_array)
        record("delete_many", time.process_time() - started)
        copy.close()

    def map_insert(base: np.ndarray | None):
        def go() -> None:
            fresh = LongHashMap(value=value)
            if base is not None:
                fresh.put_many(base, bulk_values)
            started = time.process_time()
            fresh.put_many(keys_array, bulk_values)
            record("put_many" if base is None else "put_many, half new", time.process_time() - started)
            fresh.close()
        return go

    for _ in range(rounds):
        record("get dict loop", _cpu_seconds(lambda: [d[k] for k in keys]))
        record("get_many", _cpu_seconds(lambda: m.get_many(keys_array)))
        record("put dict loop", _cpu_seconds(dict_insert))
        map_insert(None)()
        map_insert(others)()
        record("in dict loop", _cpu_seconds(lambda: [k in d for k in keys]))
        record("contains_many", _cpu_seconds(lambda: m.contains_many(keys_array)))
        dict_delete()
        map_delete()
    ns = {name: seconds / n * 1e9 for name, seconds in best.items()}
    return {
        "n": n, "value": value, "rounds": rounds, "load": os.getloadavg(), "ns_per_key": ns,
        "get_many_speedup": ns["get dict loop"] / ns["get_many"],
        "put_many_speedup": ns["put dict loop"] / ns["put_many"],
        "put_many_half_new_speedup": ns["put dict loop"] / ns["put_many, half new"],
        "contains_many_speedup": ns["in dict loop"] / ns["contains_many"],
        "delete_many_speedup": ns["delete dict loop"] / ns["delete_many"],
    }


def main() -> None:
    if sys.argv[1:2] == ["_child"]:
        kind, order, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
        print(json.dumps(memory_case(kind, order, n)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["memory", "speed", "bulk"])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5, help="bulk: interleaved rounds")
    parser.add_argument("--value", default="int64", help="bulk: the value serializer")
    args = parser.parse_args()
    if args.what == "memory":
        run_memory(args.n)
    elif args.what == "bulk":
        print(json.dumps(run_bulk(args.n, args.rounds, args.value), indent=1))
    else:
        print(json.dumps(run_speed(args.n), indent=1))


if __name__ == "__main__":
    main()
