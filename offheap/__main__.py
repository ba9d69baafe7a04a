"""``python -m offheap``: a few million int keys in a dict and in a LongHashMap, side by side.

Memory is the growth of this process's resident set while each map is filled (the LongHashMap
first, since closing it gives its memory back to the OS at once).
"""

import argparse
import time

import numpy as np

from offheap import LongHashMap
from offheap.kernels.bounds import INT64_MAX, INT64_MIN


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m offheap", description="LongHashMap vs dict memory")
    parser.add_argument("--n", type=int, default=3_000_000, help="entries (default 3M)")
    n = parser.parse_args(argv).n
    if n < 1:
        parser.error(f"--n must be at least 1 entry, got {n}")
    keys = np.random.default_rng(1).integers(INT64_MIN, INT64_MAX, n, dtype=np.int64)
    rows = []

    start, before = time.perf_counter(), _rss_bytes()
    hashmap = LongHashMap()
    hashmap.put_many(keys, [""] * n)
    rows.append(("LongHashMap (put_many)", _rss_bytes() - before, time.perf_counter() - start))
    print(repr(hashmap))
    hashmap.close()

    start, before = time.perf_counter(), _rss_bytes()
    plain = dict.fromkeys(keys.tolist(), "")
    rows.append(("dict", _rss_bytes() - before, time.perf_counter() - start))
    del plain

    print(f"{n:,} random int64 keys -> '' values")
    print(f"{'map':<24}{'RSS growth':>14}{'bytes/entry':>13}{'seconds':>9}")
    for name, grown, seconds in rows:
        print(f"{name:<24}{grown / 2**20:>10.1f} MiB{grown / n:>13.1f}{seconds:>9.2f}")


if __name__ == "__main__":
    main()
