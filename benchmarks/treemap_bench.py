"""TreeMap benchmark: the capacity experiment's bytes/entry, and speed against SortedDict.

    python benchmarks/treemap_bench.py capacity --n 10000000 --variant cache
    python benchmarks/treemap_bench.py capacity --n 10000000 --all     # one subprocess each
    python benchmarks/treemap_bench.py speed --n 1000000 --bulk-n 10000000

``capacity`` inserts ``int64 -> ""`` one key at a time, as the seed experiment does, then flushes
and reports reserved arena bytes per entry (the figure the goals are about) and the growth of
this process's resident set per entry (a cross-check: it also counts the node cache). Variants:

    plain           node_size=32, write_cache=False          (MapDB 16.4 B/entry, goal <= 3)
    cache           node_size=32, write cache                (MapDB 9.27, goal <= 1.5)
    node120-zstd    node_size=120, write cache, zstd pages   (MapDB 4.86, goal <= 0.5)
    random          random 64-bit keys, write cache          (MapDB 24.7, goal <= 6.5)
    random-node120  random 64-bit keys, node_size=120, write cache (no MapDB figure)

``speed`` times, in one process so the ratios share the machine's state: scalar insert and
get of random and sequential keys against ``SortedDict`` (random keys twice: with the default
node cache, and with one large enough to hold every leaf), a bulk load of sorted keys, and
iterating a range of ``--n // 2`` entries against ``SortedDict.irange``.

``positions`` times the positional API and a neighbour query on ``--n`` random keys against
``SortedDict``, the fastest of ``--repeat`` runs of ``--probes`` calls each: ``index(key)`` of
present keys, ``peekitem(i)`` of random positions, and ``floor_key(k)`` of random probes
(``SortedDict`` has no floor_key: its figure is ``keys[bisect_right(k) - 1]``). The TreeMap is
bulk-loaded from the sorted keys, and timed twice: with the default node cache, and with one
that holds every node.

``random`` times what the compiled page codec is for: insert of ``--n`` random int64 keys one at
a time, then a get of each (all hits, in another random order), on a TreeMap with the default
node cache and on a SortedDict, ``--repeat`` times; each cell keeps its fastest run, and the
output says which page codec ran (``OFFHEAP_PURE_PYTHON=1`` selects the reference) and the
machine's load average before and after::

    python benchmarks/treemap_bench.py random --n 1000000 --repeat 3
    OFFHEAP_PURE_PYTHON=1 python benchmarks/treemap_bench.py random --n 1000000 --repeat 3

``writes`` times the write path against ``SortedDict`` in CPU time (``time.process_time``, so
a shared machine's load counts less; gc off while timed), TreeMap and SortedDict runs
interleaved, the fastest of ``--repeat`` each: ``--ops`` random inserts into a map of ``--n``
random keys (built one by one), ``--ops`` deletes of its keys, ``--n`` sequential inserts into
an empty map, and the same without the write cache (every insert written through; SortedDict
is the same peer)::

    python benchmarks/treemap_bench.py writes --n 1000000 --ops 100000 --repeat 3

``pages`` times one leaf page's encode and decode on the compiled codec and on the reference
in one process (``--entries`` random int64 keys, the fill of a random-key leaf of node size 32,
with ``""`` values; then the same with int64 values), min of ``--repeat`` runs.

``reads`` times the read path on ``--n`` random int64 keys bulk-loaded (values ``""``) against a
``SortedDict`` of the same entries: ``t[k]`` of ``--probes`` present keys, ``floor_key``,
``index`` and ``peekitem`` of as many probes, and ``irange`` (both directions), plain iteration
and ``items()`` over ``--probes`` entries. Ours and the peer's runs are interleaved and timed in process CPU time
(``time.process_time``, robust to other processes on a loaded machine); each cell keeps the
fastest of ``--repeat`` runs, and the output gives the page codec, the ratios and the load
average before and after::

    python benchmarks/treemap_bench.py reads --n 1000000 --probes 100000 --repeat 3
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import subprocess
import sys
import time

WHOLE_TREE_CACHE = dict(cache_bytes=1 << 40)  # a node cache budget no benchmark tree fills

# The seed experiment's write cache is asyncFlushDelay(100): here write_cache with a 100 ms timer.
VARIANTS = {
    "plain": dict(keys="sequential", options=dict(node_size=32, write_cache=False), mapdb=16.4, goal=3.0),
    "cache": dict(keys="sequential", options=dict(node_size=32, write_cache=True, flush_delay=100),
                  mapdb=9.27, goal=1.5),
    "node120-zstd": dict(keys="sequential", options=dict(node_size=120, write_cache=True, flush_delay=100,
                                                         compression="zstd"), mapdb=4.86, goal=0.5),
    "random": dict(keys="random", options=dict(node_size=32, write_cache=True, flush_delay=100),
                   mapdb=24.7, goal=6.5),
    "random-node120": dict(keys="random", options=dict(node_size=120, write_cache=True, flush_delay=100),
                           mapdb=None, goal=None),
}


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def key_stream(kind: str, n: int, seed: int = 42):
    """Keys one by one without materializing a list (which would distort the RSS figure)."""
    if kind == "sequential":
        return iter(range(n))
    bits = random.Random(seed).getrandbits
    return (bits(64) - (1 << 63) for _ in range(n))


def run_capacity(variant: str, n: int) -> dict:
    from offheap.treemap.treemap import TreeMap

    spec = VARIANTS[variant]
    gc.collect()
    tree = TreeMap(key="int64", value="object", **spec["options"])
    rss_before = rss_bytes()
    started = time.perf_counter()
    progress = max(n // 10, 1)
    for count, key in enumerate(key_stream(spec["keys"], n), 1):
        tree[key] = ""
        if count % progress == 0:
            print(f"  {variant}: {count:,} keys, {time.perf_counter() - started:.0f} s",
                  file=sys.stderr, flush=True)
    tree.flush()
    elapsed = time.perf_counter() - started
    stats = tree.stats()
    rss_after = rss_bytes()
    result = dict(variant=variant, n=len(tree), seconds=round(elapsed, 1),
                  us_per_insert=round(elapsed / n * 1e6, 2),
                  bytes_per_entry=round(stats.bytes_per_entry, 3),
                  rss_bytes_per_entry=round((rss_after - rss_before) / len(tree), 3),
                  reserved_bytes=stats.reserved_bytes, stored_page_bytes=stats.stored_page_bytes,
                  height=stats.height, leaves=stats.n_leaves, inner=stats.n_inner,
                  leaf_fill=round(stats.leaf_fill, 3),
                  compression_ratio=round(stats.compression_ratio, 2),
                  mapdb_bytes_per_entry=spec["mapdb"], goal=spec["goal"])
    store = tree._store.stats()  # where the reserved bytes go, per entry
    result["per_entry"] = {name: round(nbytes / len(tree), 3) for name, nbytes in (
        ("records", store.live_bytes), ("chunk rounding", store.chunk_bytes - store.live_bytes),
        ("free", store.free_bytes), ("record index", store.index_bytes),
        ("other", store.reserved_bytes - store.segment_bytes - store.index_bytes))}
    tree.close()
    return result


def _per_op(seconds: float, n: int) -> float:
    return round(seconds / n * 1e9)


def run_speed(n: int, bulk_n: int) -> dict:
    import numpy as np
    from sortedcontainers import SortedDict

    from offheap.treemap.treemap import TreeMap

    results = {}
    rnd = random.Random(1)
    random_keys = [rnd.getrandbits(64) - (1 << 63) for _ in range(n)]
    cases = (("sequential", list(range(n)), {}), ("random", random_keys, {}),
             ("random, cache holds the tree", random_keys, WHOLE_TREE_CACHE))
    for label, keys, options in cases:
        sorted_dict, tree = SortedDict(), TreeMap(**options)
        started = time.perf_counter()
        for k in keys:
            sorted_dict[k] = ""
        sd_insert = time.perf_counter() - started
        started = time.perf_counter()
        for k in keys:
            tree[k] = ""
        tree_insert = time.perf_counter() - started
        lookups = keys[::-1] if label == "sequential" else random.Random(2).sample(keys, len(keys))
        started = time.perf_counter()
        for k in lookups:
            sorted_dict[k]
        sd_get = time.perf_counter() - started
        started = time.perf_counter()
        for k in lookups:
            tree[k]
        tree_get = time.perf_counter() - started
        results[label] = dict(
            options=options,
            sorteddict_insert_ns=_per_op(sd_insert, n), treemap_insert_ns=_per_op(tree_insert, n),
            insert_ratio=round(tree_insert / sd_insert, 2),
            sorteddict_get_ns=_per_op(sd_get, n), treemap_get_ns=_per_op(tree_get, n),
            get_ratio=round(tree_get / sd_get, 2))
        if label == "sequential":
            lo, hi = n // 4, n // 4 + n // 2
            started = time.perf_counter()
            count_sd = sum(1 for _ in sorted_dict.irange(lo, hi))
            sd_iter = time.perf_counter() - started
            started = time.perf_counter()
            count_tree = sum(1 for _ in tree.irange(lo, hi))
            tree_iter = time.perf_counter() - started
            assert count_sd == count_tree
            results["range_iteration"] = dict(
                entries=count_tree, sorteddict_ns=_per_op(sd_iter, count_tree),
                treemap_ns=_per_op(tree_iter, count_tree), ratio=round(tree_iter / sd_iter, 2))
        tree.close()
        del sorted_dict
    keys = np.arange(bulk_n, dtype=np.int64)
    values = [""] * bulk_n
    tree = TreeMap()
    started = time.perf_counter()
    tree.put_many(keys, values)
    bulk = time.perf_counter() - started
    stats = tree.stats()
    results["bulk_load"] = dict(entries=bulk_n, seconds=round(bulk, 2),
                                bytes_per_entry=round(stats.bytes_per_entry, 3))
    tree.close()
    return results


def page_codec_compiled() -> bool:
    from offheap.treemap import page

    return page.COMPILED


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run_random(n: int, repeat: int) -> dict:
    from sortedcontainers import SortedDict

    from offheap.treemap.treemap import TreeMap

    rnd = random.Random(1)
    keys = [rnd.getrandbits(64) - (1 << 63) for _ in range(n)]
    lookups = random.Random(2).sample(keys, len(keys))
    best: dict[str, float] = {}
    load_before = load_average()

    def timed(cell: str, operation) -> None:
        gc.collect()
        started = time.perf_counter()
        operation()
        best[cell] = min(best.get(cell, float("inf")), time.perf_counter() - started)

    for _ in range(repeat):
        sorted_dict, tree = SortedDict(), TreeMap()
        timed("sorteddict_insert", lambda: [sorted_dict.__setitem__(k, "") for k in keys])
        timed("treemap_insert", lambda: [tree.__setitem__(k, "") for k in keys])
        timed("sorteddict_get", lambda: [sorted_dict[k] for k in lookups])
        timed("treemap_get", lambda: [tree[k] for k in lookups])
        tree.close()
        del sorted_dict
    ns = {cell: _per_op(seconds, n) for cell, seconds in best.items()}
    return dict(n=n, repeat=repeat, page_codec="compiled" if page_codec_compiled() else "reference",
                load_before=load_before, load_after=load_average(), **{f"{c}_ns": v for c, v in ns.items()},
                insert_ratio=round(best["treemap_insert"] / best["sorteddict_insert"], 2),
                get_ratio=round(best["treemap_get"] / best["sorteddict_get"], 2))


def _cpu_seconds(operation) -> float:
    """The CPU time of ``operation()``, with the garbage collector off meanwhile."""
    gc.collect()
    gc.disable()
    try:
        started = time.process_time()
        operation()
        return time.process_time() - started
    finally:
        gc.enable()


def run_writes(n: int, n_ops: int, repeat: int) -> dict:
    from sortedcontainers import SortedDict

    from offheap.treemap.treemap import TreeMap

    rnd = random.Random(7)
    base = [rnd.getrandbits(64) - (1 << 63) for _ in range(n)]
    inserts = [rnd.getrandbits(64) - (1 << 63) for _ in range(n_ops)]
    deletes = rnd.sample(base, n_ops)
    best: dict[str, float] = {}
    load_before = load_average()

    def keep(cell: str, seconds: float, count: int) -> None:
        best[cell] = min(best.get(cell, float("inf")), seconds / count)

    def insert_all(target, keys):
        return lambda: [target.__setitem__(k, "") for k in keys]

    def delete_all(target, keys):
        return lambda: [target.__delitem__(k) for k in keys]

    for _ in range(repeat):
        for name, make in (("sorteddict", SortedDict), ("treemap", TreeMap),
                           ("treemap_plain", lambda: TreeMap(write_cache=False))):
            if name != "treemap_plain":
                target = make()
                insert_all(target, base)()
                keep(f"{name}_random_insert", _cpu_seconds(insert_all(target, inserts)), n_ops)
                keep(f"{name}_random_delete", _cpu_seconds(delete_all(target, deletes)), n_ops)
                del target
            target = make()
            keep(f"{name}_sequential_insert", _cpu_seconds(insert_all(target, range(n))), n)
            if name != "sorteddict":
                target.close()
            del target
    peer = {cell: best[cell.replace("treemap_plain", "sorteddict").replace("treemap", "sorteddict")]
            for cell in best}
    return dict(n=n, ops=n_ops, repeat=repeat, clock="process_time",
                page_codec="compiled" if page_codec_compiled() else "reference",
                load_before=load_before, load_after=load_average(),
                **{f"{cell}_ns": round(seconds * 1e9) for cell, seconds in best.items()},
                **{f"{cell}_ratio": round(best[cell] / peer[cell], 2)
                   for cell in best if not cell.startswith("sorteddict")})


def run_pages(entries: int, repeat: int) -> dict:
    import timeit

    from offheap.store.serializers import get_serializer
    from offheap.treemap import page

    rnd = random.Random(3)
    keys = sorted({rnd.getrandbits(64) - (1 << 63) for _ in range(entries)})
    compiled = page._compiled_pages
    results: dict = dict(entries=entries, repeat=repeat, load_before=load_average())
    for value, values in (("object", [""] * entries), ("int64", [rnd.getrandbits(20) for _ in keys])):
        serializer = get_serializer(value)
        data = page.encode_leaf(keys, values, "int64", serializer)
        for path, module in (("compiled", compiled), ("reference", None)):
            page._compiled_pages = module
            number = 2000
            for operation, call in (("encode", lambda: page.encode_leaf(keys, values, "int64", serializer)),
                                    ("decode", lambda: page.decode_leaf(data, "int64", serializer))):
                seconds = min(timeit.repeat(call, number=number, repeat=repeat)) / number
                results[f"{value} {operation} {path} ns"] = round(seconds * 1e9)
        page._compiled_pages = compiled
        for operation in ("encode", "decode"):
            results[f"{value} {operation} reference/compiled"] = round(
                results[f"{value} {operation} reference ns"] / results[f"{value} {operation} compiled ns"], 1)
    results["load_after"] = load_average()
    return results


def _fastest(call, probes: list, repeat: int) -> float:
    """The fastest of ``repeat`` passes of ``call`` over ``probes``, in seconds per call."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for probe in probes:
            call(probe)
        best = min(best, time.perf_counter() - started)
    return best / len(probes)


def run_positions(n: int, n_probes: int, repeat: int) -> dict:
    import numpy as np
    from sortedcontainers import SortedDict

    from offheap.treemap.treemap import TreeMap

    rnd = random.Random(5)
    keys = sorted({rnd.getrandbits(64) - (1 << 63) for _ in range(n)})
    present = rnd.sample(keys, n_probes)
    positions = [rnd.randrange(len(keys)) for _ in range(n_probes)]
    probes = [rnd.getrandbits(64) - (1 << 63) for _ in range(n_probes)]
    sorted_dict = SortedDict(zip(keys, [""] * len(keys)))
    sd_keys = sorted_dict.keys()

    def sd_floor(k):
        i = sorted_dict.bisect_right(k)
        return sd_keys[i - 1] if i else None

    cases = {"index": (sorted_dict.index, present), "peekitem": (sorted_dict.peekitem, positions),
             "floor_key": (sd_floor, probes)}
    results: dict = dict(entries=len(keys), probes=n_probes, repeat=repeat)
    baseline = {name: _fastest(call, args, repeat) for name, (call, args) in cases.items()}
    for label, options in (("default cache", {}), ("cache holds the tree", WHOLE_TREE_CACHE)):
        tree = TreeMap(**options)
        tree.put_many(np.array(keys, np.int64), [""] * len(keys))
        calls = {"index": tree.index, "peekitem": tree.peekitem, "floor_key": tree.floor_key}
        row = {}
        for name, (_, args) in cases.items():
            seconds = _fastest(calls[name], args, repeat)
            row[name] = dict(sorteddict_ns=round(baseline[name] * 1e9),
                             treemap_ns=round(seconds * 1e9),
                             ratio=round(seconds / baseline[name], 2))
        results[label] = row
        tree.close()
    return results


def _cpu_fastest(call, probes, repeat: int) -> float:
    """The fastest of ``repeat`` passes of ``call`` over ``probes``, in CPU seconds per call."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        started = time.process_time()
        for probe in probes:
            call(probe)
        best = min(best, time.process_time() - started)
    return best / len(probes)


def run_reads(n: int, n_probes: int, repeat: int) -> dict:
    import itertools

    import numpy as np
    from sortedcontainers import SortedDict

    from offheap.treemap.treemap import TreeMap

    rnd = random.Random(7)
    keys = sorted({rnd.getrandbits(64) - (1 << 63) for _ in range(n)})
    present = rnd.sample(keys, n_probes)
    positions = [rnd.randrange(len(keys)) for _ in range(n_probes)]
    probes = [rnd.getrandbits(64) - (1 << 63) for _ in range(n_probes)]
    lo, hi = keys[len(keys) // 3], keys[len(keys) // 3 + n_probes - 1]
    sorted_dict = SortedDict(zip(keys, [""] * len(keys)))
    tree = TreeMap()
    tree.put_many(np.array(keys, np.int64), [""] * len(keys))
    sd_keys = sorted_dict.keys()

    def sd_floor(k):
        i = sorted_dict.bisect_right(k)
        return sd_keys[i - 1] if i else None

    def drain(iterable) -> None:
        for _ in iterable:
            pass

    cases = {
        "get": (sorted_dict.__getitem__, tree.__getitem__, present),
        "floor_key": (sd_floor, tree.floor_key, probes),
        "index": (sorted_dict.index, tree.index, present),
        "peekitem": (sorted_dict.peekitem, tree.peekitem, positions),
        "irange": (lambda _: drain(sorted_dict.irange(lo, hi)),
                   lambda _: drain(tree.irange(lo, hi)), [None]),
        "irange_reverse": (lambda _: drain(sorted_dict.irange(lo, hi, reverse=True)),
                           lambda _: drain(tree.irange(lo, hi, reverse=True)), [None]),
        "items": (lambda _: drain(itertools.islice(sorted_dict.items(), n_probes)),
                  lambda _: drain(itertools.islice(tree.items(), n_probes)), [None]),
        "iteration": (lambda _: drain(itertools.islice(sorted_dict, n_probes)),
                      lambda _: drain(itertools.islice(tree, n_probes)), [None]),
    }
    results: dict = dict(entries=len(keys), probes=n_probes, repeat=repeat,
                         page_codec="compiled" if page_codec_compiled() else "reference",
                         load_before=load_average())
    for name, (peer, ours, args) in cases.items():
        best_peer = best_ours = float("inf")
        for _ in range(repeat):  # interleaved, so both see the same machine
            best_peer = min(best_peer, _cpu_fastest(peer, args, 1))
            best_ours = min(best_ours, _cpu_fastest(ours, args, 1))
        per = n_probes if args == [None] else 1
        results[name] = dict(sorteddict_ns=round(best_peer / per * 1e9),
                             treemap_ns=round(best_ours / per * 1e9),
                             ratio=round(best_ours / best_peer, 2))
    results["load_after"] = load_average()
    tree.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    capacity = sub.add_parser("capacity", help="bytes/entry of one-at-a-time inserts")
    capacity.add_argument("--n", type=int, default=10_000_000)
    capacity.add_argument("--variant", choices=sorted(VARIANTS), action="append")
    capacity.add_argument("--all", action="store_true", help="every variant, one subprocess each")
    speed = sub.add_parser("speed", help="scalar, bulk and range speed against SortedDict")
    speed.add_argument("--n", type=int, default=1_000_000)
    speed.add_argument("--bulk-n", type=int, default=10_000_000)
    random_keys = sub.add_parser("random", help="insert and get of random int64 keys against SortedDict")
    random_keys.add_argument("--n", type=int, default=1_000_000)
    random_keys.add_argument("--repeat", type=int, default=3)
    writes = sub.add_parser("writes", help="random insert and delete, sequential insert, against SortedDict")
    writes.add_argument("--n", type=int, default=1_000_000)
    writes.add_argument("--ops", type=int, default=100_000)
    writes.add_argument("--repeat", type=int, default=3)
    pages = sub.add_parser("pages", help="one leaf's encode and decode, compiled against the reference")
    pages.add_argument("--entries", type=int, default=28)
    pages.add_argument("--repeat", type=int, default=5)
    positions = sub.add_parser("positions", help="index, peekitem, floor_key against SortedDict")
    positions.add_argument("--n", type=int, default=1_000_000)
    positions.add_argument("--probes", type=int, default=100_000)
    positions.add_argument("--repeat", type=int, default=3)
    reads = sub.add_parser("reads", help="get, floor_key, index, peekitem, irange against SortedDict")
    reads.add_argument("--n", type=int, default=1_000_000)
    reads.add_argument("--probes", type=int, default=100_000)
    reads.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.command == "reads":
        print(json.dumps(run_reads(args.n, args.probes, args.repeat), indent=1))
        return
    if args.command == "writes":
        print(json.dumps(run_writes(args.n, args.ops, args.repeat), indent=1))
        return
    if args.command == "positions":
        print(json.dumps(run_positions(args.n, args.probes, args.repeat), indent=1))
        return
    if args.command == "pages":
        if not page_codec_compiled():
            sys.exit("pages: the compiled page codec is not loaded (built? OFFHEAP_PURE_PYTHON set?)")
        print(json.dumps(run_pages(args.entries, args.repeat), indent=1))
        return
    if args.command == "random":
        print(json.dumps(run_random(args.n, args.repeat)))
        return
    if args.command == "speed":
        print(json.dumps(run_speed(args.n, args.bulk_n), indent=1))
        return
    variants = sorted(VARIANTS) if args.all else (args.variant or ["cache"])
    if len(variants) == 1:
        print(json.dumps(run_capacity(variants[0], args.n)))
        return
    for variant in variants:  # a fresh process each, so RSS growth is this variant's alone
        subprocess.run([sys.executable, __file__, "capacity", "--n", str(args.n),
                        "--variant", variant], check=True)


if __name__ == "__main__":
    main()
