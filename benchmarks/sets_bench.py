"""Sets benchmark: LongHashSet memory and algebra against Python sets, TreeSet against SortedSet.

    python benchmarks/sets_bench.py memory --n 10000000
    python benchmarks/sets_bench.py algebra --n 1000000 --repeat 5
    python benchmarks/sets_bench.py tree --n 1000000 --ops 100000 --repeat 3

``memory`` adds ``--n`` random int64 elements to a LongHashSet (one bulk add, and again in
batches of 100,000) and reports its reserved arena bytes per element, against a Python ``set``
of the same ints measured with ``tracemalloc`` (the set's table and its int objects).

``algebra`` times ``a & b`` and ``a | b`` of two ``--n``-element sets of random int64 elements
(half of each in the other), LongHashSet against ``set``, in one process, each the fastest of
``--repeat`` runs (``time.perf_counter``, gc off while timed); it also times
``a.intersection(array)`` with a numpy array.

``tree`` fills a TreeSet (bulk) and a SortedSet with ``--n`` random int64 elements, then times
``--ops`` random adds of new elements, ``--ops`` ``in`` of present ones, ``irange`` over
``--ops // 100`` ranges of about 100 elements (ns per element), then ``--ops`` adds of present
elements, discards of the new ones and discards of absent ones, the fastest of ``--repeat``
runs each, TreeSet and SortedSet interleaved. Every command prints the load average before and
after, and which core ran (``OFFHEAP_PURE_PYTHON=1`` selects the reference).
"""

from __future__ import annotations

import argparse
import gc
import os
import time
import tracemalloc

import numpy as np
from sortedcontainers import SortedSet

import offheap
from offheap import LongHashSet, TreeSet


def _load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


def _fastest(run, repeat: int) -> float:
    """The fastest of ``repeat`` runs of ``run()`` (which returns its own seconds)."""
    return min(run() for _ in range(repeat))


def _timed(action) -> float:
    gc.disable()
    try:
        start = time.perf_counter()
        action()
        return time.perf_counter() - start
    finally:
        gc.enable()


def memory(n: int) -> None:
    keys = np.random.default_rng(1).integers(-2**63, 2**63 - 1, n, dtype=np.int64)
    bulk = LongHashSet()
    bulk.add_many(keys)
    batches = LongHashSet()
    for start in range(0, n, 100_000):
        batches.add_many(keys[start: start + 100_000])
    elements = keys.tolist()
    tracemalloc.start()
    python_set = set(elements)
    python_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del elements
    python_bytes += 32 * len(python_set)  # the ints it holds were made before tracing
    print(f"memory, {n:,} random int64 ({'compiled' if offheap.compiled else 'pure'} core)")
    print(f"  LongHashSet, one bulk add:     {bulk.stats().bytes_per_entry:6.2f} B/element "
          f"(load {bulk.stats().load_factor:.2f})")
    print(f"  LongHashSet, batches of 100k:  {batches.stats().bytes_per_entry:6.2f} B/element "
          f"(load {batches.stats().load_factor:.2f})")
    print(f"  Python set:                    {python_bytes / len(python_set):6.2f} B/element")


def algebra(n: int, repeat: int) -> None:
    rng = np.random.default_rng(2)
    shared = rng.integers(-2**63, 2**63 - 1, n // 2, dtype=np.int64)
    a_keys = np.concatenate([shared, rng.integers(-2**63, 2**63 - 1, n - n // 2, dtype=np.int64)])
    b_keys = np.concatenate([shared, rng.integers(-2**63, 2**63 - 1, n - n // 2, dtype=np.int64)])
    a, b = LongHashSet(a_keys), LongHashSet(b_keys)
    pa, pb = set(a_keys.tolist()), set(b_keys.tolist())
    print(f"algebra, two sets of {n:,} random int64, half shared, fastest of {repeat} "
          f"({'compiled' if offheap.compiled else 'pure'} core; {_load()})")
    print(f"  {'operation':<28} {'set ms':>9} {'LongHashSet ms':>15} {'speedup':>8}")
    cases = [("a & b", lambda: pa & pb, lambda: a & b),
             ("a | b", lambda: pa | pb, lambda: a | b),
             ("a - b", lambda: pa - pb, lambda: a - b),
             ("a.intersection(array)", lambda: pa.intersection(b_keys.tolist()),
              lambda: a.intersection(b_keys))]
    for name, python_op, ours in cases:
        python_s = _fastest(lambda: _timed(python_op), repeat)
        ours_s = _fastest(lambda: _timed(ours), repeat)
        print(f"  {name:<28} {python_s * 1e3:9.1f} {ours_s * 1e3:15.1f} "
              f"{python_s / ours_s:7.2f}x")
    print(f"  ({_load()})")


def tree(n: int, ops: int, repeat: int) -> None:
    rng = np.random.default_rng(3)
    keys = np.unique(rng.integers(-2**62, 2**62, n, dtype=np.int64))
    new = rng.integers(-2**62, 2**62, ops, dtype=np.int64).tolist()
    probes = rng.choice(keys, ops).tolist()
    absent = rng.integers(-2**62, 2**62, ops, dtype=np.int64).tolist()
    starts = rng.choice(keys, max(ops // 100, 1)).tolist()
    width = int((2**63 / len(keys)) * 100)  # about 100 elements a range
    print(f"TreeSet against SortedSet, {len(keys):,} random int64, {ops:,} ops, fastest of "
          f"{repeat} ({'compiled' if offheap.compiled else 'pure'} core; {_load()})")
    results: dict[str, list[float]] = {}
    for _ in range(repeat):
        for kind in ("SortedSet", "TreeSet"):
            if kind == "SortedSet":
                s = SortedSet(keys.tolist())
            else:
                s = TreeSet()
                s.add_many(keys)
            add = _timed(lambda: [s.add(k) for k in new]) / ops
            hit = _timed(lambda: [k in s for k in probes]) / ops
            counted = [0]

            def ranges():
                for lo in starts:
                    for _ in s.irange(lo, lo + width):
                        counted[0] += 1

            per_element = _timed(ranges) / max(counted[0], 1)
            add_present = _timed(lambda: [s.add(k) for k in probes]) / ops
            discard = _timed(lambda: [s.discard(k) for k in new]) / ops
            discard_absent = _timed(lambda: [s.discard(k) for k in absent]) / ops
            for name, value in (("add", add), ("in", hit), ("irange, per element", per_element),
                                ("add, present", add_present), ("discard", discard),
                                ("discard, absent", discard_absent)):
                best = results.setdefault(f"{kind} {name}", [float("inf")])
                best[0] = min(best[0], value)
    print(f"  {'operation':<22} {'SortedSet ns':>13} {'TreeSet ns':>11} {'ratio':>7}")
    for name in ("add", "in", "irange, per element", "add, present", "discard",
                 "discard, absent"):
        theirs, ours = results[f"SortedSet {name}"][0], results[f"TreeSet {name}"][0]
        print(f"  {name:<22} {theirs * 1e9:13,.0f} {ours * 1e9:11,.0f} {ours / theirs:6.2f}x")
    print(f"  ({_load()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("memory")
    command.add_argument("--n", type=int, default=10_000_000)
    command = commands.add_parser("algebra")
    command.add_argument("--n", type=int, default=1_000_000)
    command.add_argument("--repeat", type=int, default=5)
    command = commands.add_parser("tree")
    command.add_argument("--n", type=int, default=1_000_000)
    command.add_argument("--ops", type=int, default=100_000)
    command.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.command == "memory":
        memory(args.n)
    elif args.command == "algebra":
        algebra(args.n, args.repeat)
    else:
        tree(args.n, args.ops, args.repeat)


if __name__ == "__main__":
    main()
