"""The pure-Python LongHashMap core against an older tree's, and both against dict, in one run.

    python benchmarks/pure_core_bench.py BASE_DIR [--sizes 10000 1000000] [--runs 5]

``BASE_DIR`` is a checkout of the code to compare with (e.g. a worktree of the commit before
the format change). Each run starts one child process per tree (this tree with
``OFFHEAP_PURE_PYTHON=1``, then ``BASE_DIR``, alternating which goes first) that builds a map
of int64 keys and int64 values and times each operation; a ``dict`` holding the same keys is
timed in the same child beside it. A figure is the min over the runs of the CPU time
(``time.process_time``, so other processes on a loaded machine count less) per operation, and
the table gives the ratios new/old, new/dict and old/dict. ``uptime``'s load is printed before
and after.

Operations, on a map of ``n`` random keys: ``insert`` (building it one key at a time, from
empty), ``get hit``, ``get miss``, ``in`` (hits), ``overwrite``, ``iter keys``, ``iter items``,
``get_many`` and ``put_many`` (numpy arrays of ``n // 10`` keys, absent ones for the put), and
``delete`` (the put keys again, one at a time: the map is back to ``n`` keys).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

OPERATIONS = ("insert", "get hit", "get miss", "in", "overwrite", "iter keys", "iter items",
              "get_many", "put_many", "delete")
_SAMPLE = 200_000  # scalar lookups timed per operation at most


def _timed(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def measure(n: int) -> dict[str, dict[str, float]]:
    """In a child process: ns per operation for the LongHashMap of the tree on sys.path and
    for dict, for each of :data:`OPERATIONS`. A small map repeats each operation until about
    ``_SAMPLE`` operations are timed."""
    from offheap import LongHashMap

    rng = np.random.default_rng(7)
    drawn = np.unique(rng.integers(-(2**63), 2**63 - 1, 2 * n + n // 10, dtype=np.int64))
    rng.shuffle(drawn)
    keys, misses, extra = drawn[:n].tolist(), drawn[n: 2 * n].tolist(), drawn[2 * n:]
    repeats = max(1, _SAMPLE // n)
    sample = (keys * repeats)[:_SAMPLE]
    miss_sample = (misses * repeats)[:_SAMPLE]
    lookup_array = np.array(keys[: n // 10], np.int64)
    extra_values = extra.copy()
    extra_list = extra.tolist()
    totals = {op: {"ours": 0.0, "dict": 0.0} for op in OPERATIONS}
    counts = dict.fromkeys(OPERATIONS, 0)

    def run(name: str, count: int, ours, peer) -> None:
        totals[name]["ours"] += _timed(ours)
        totals[name]["dict"] += _timed(peer)
        counts[name] += count

    for _ in range(repeats):
        m = LongHashMap(value="int64")
        d: dict[int, int] = {}
        run("insert", n, lambda: _fill(m, keys), lambda: _fill(d, keys))
    run("get hit", len(sample), lambda: _get_hits(m, sample), lambda: _get_hits(d, sample))
    run("get miss", len(sample), lambda: _get_misses(m, miss_sample),
        lambda: _get_misses(d, miss_sample))
    run("in", len(sample), lambda: _contains(m, sample), lambda: _contains(d, sample))
    run("overwrite", len(sample), lambda: _fill(m, sample), lambda: _fill(d, sample))
    for _ in range(repeats):
        run("iter keys", n, lambda: _iterate(m), lambda: _iterate(d))
        run("iter items", n, lambda: _iterate(m.items()), lambda: _iterate(d.items()))
        run("get_many", len(lookup_array), lambda: m.get_many(lookup_array),
            lambda: [d.get(k) for k in lookup_array.tolist()])
        run("put_many", len(extra), lambda: m.put_many(extra, extra_values),
            lambda: d.update(zip(extra.tolist(), extra_values.tolist())))
        run("delete", len(extra_list), lambda: _delete(m, extra_list),
            lambda: _delete(d, extra_list))
    assert len(m) == len(d) == n
    return {op: {who: seconds / counts[op] * 1e9 for who, seconds in figures.items()}
            for op, figures in totals.items()}


def _fill(target, keys: list[int]) -> None:
    for k in keys:
        target[k] = k


def _get_hits(target, keys: list[int]) -> None:
    for k in keys:
        target[k]


def _get_misses(target, keys: list[int]) -> None:
    get = target.get
    for k in keys:
        get(k)


def _contains(target, keys: list[int]) -> None:
    for k in keys:
        k in target  # noqa: B015 (the membership test is what is timed)


def _iterate(iterable) -> None:
    for _ in iterable:
        pass


def _delete(target, keys: list[int]) -> None:
    for k in keys:
        del target[k]


def _child(tree: Path, n: int, pure: bool) -> dict[str, dict[str, float]]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    if pure:
        env["OFFHEAP_PURE_PYTHON"] = "1"
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(n)], env=env, check=True,
                         capture_output=True, text=True, cwd=tree).stdout
    return json.loads(out.splitlines()[-1])


def _load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def compare(base: Path, sizes: list[int], runs: int) -> None:
    here = Path(__file__).resolve().parent.parent
    for n in sizes:
        print(f"n = {n:,}  ({_load()})", flush=True)
        best: dict[str, dict[str, float]] = {}
        for run in range(runs):
            trees = [("new", here, True), ("old", base, False)]
            for name, tree, pure in trees if run % 2 == 0 else trees[::-1]:
                for op, figures in _child(tree, n, pure).items():
                    for who, ns in figures.items():
                        key = f"{name} {who}"
                        best.setdefault(op, {})[key] = min(best.get(op, {}).get(key, ns), ns)
        print(f"{'operation':<11} {'new ns':>9} {'old ns':>9} {'new/old':>8} {'new/dict':>9} "
              f"{'old/dict':>9}")
        for op in OPERATIONS:
            row = best[op]
            new, old = row["new ours"], row["old ours"]
            peer = min(row["new dict"], row["old dict"])
            print(f"{op:<11} {new:9.0f} {old:9.0f} {new / old:8.2f} {new / peer:9.2f} "
                  f"{old / peer:9.2f}")
        print(f"  (after: {_load()})\n", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", nargs="?", type=Path, help="checkout of the code to compare with")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    if args.base is None:
        parser.error("give BASE_DIR, the checkout to compare with")
    compare(args.base.resolve(), args.sizes, args.runs)


if __name__ == "__main__":
    main()
