"""Small maps benchmark: constructing and filling small LongHashMaps and LongHashSets against dict
and set, in one process.

    python benchmarks/small_maps_bench.py --repeat 30

For each size (0, 100 and 10,000 keys ``i * 7919``, inserted one by one with ``m[k] = i`` or
``s.add(k)``) it times building a new container of that size, ours and the peer interleaved,
each the fastest of ``--repeat`` rounds (a round builds enough containers to last about 20 ms;
``time.perf_counter``, gc off while timed), and prints microseconds per container and the ratio
ours / peer. The load average is printed before and after, and which core ran
(``OFFHEAP_PURE_PYTHON=1`` selects the reference).
"""

from __future__ import annotations

import argparse
import gc
import os
import time

import offheap
from offheap import LongHashMap, LongHashSet

SIZES = (0, 100, 10_000)


def _load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


def _fill_map(cls, n: int):
    def build():
        m = cls()
        for i in range(n):
            m[i * 7919] = i
        return m
    return build


def _fill_set(cls, n: int):
    def build():
        s = cls()
        for i in range(n):
            s.add(i * 7919)
        return s
    return build


def _round(build, count: int) -> float:
    """Seconds per container over ``count`` builds (each dropped before the next is built)."""
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(count):
            build()
        return (time.perf_counter() - start) / count
    finally:
        gc.enable()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    print(f"small containers, keys i * 7919 one by one, fastest of {args.repeat} "
          f"({'compiled' if offheap.compiled else 'pure'} core; {_load()})")
    print(f"  {'container':<28} {'peer us':>10} {'ours us':>10} {'ours/peer':>10}")
    for ours, peer, fill in ((LongHashMap, dict, _fill_map), (LongHashSet, set, _fill_set)):
        for n in SIZES:
            builds = fill(ours, n), fill(peer, n)
            count = max(1, int(0.02 / max(_round(builds[0], 1), 1e-6)))
            best = [float("inf"), float("inf")]
            for _ in range(args.repeat):
                for side, build in enumerate(builds):
                    best[side] = min(best[side], _round(build, count))
            name = f"{ours.__name__}, {n:,} keys"
            print(f"  {name:<28} {best[1] * 1e6:10.1f} {best[0] * 1e6:10.1f} "
                  f"{best[0] / best[1]:9.1f}x")
    print(f"  ({_load()})")


if __name__ == "__main__":
    main()
