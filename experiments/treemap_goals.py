"""The TreeMap core's measures: TreeMap against SortedDict on both code paths.

Part of ``python -m experiments maps-bench`` (:mod:`experiments.maps_bench`). Every row times one
idiom as a user writes it (a ``for`` loop in a function, locals only) on a TreeMap and on a
``SortedDict`` holding the same random int64 keys, interleaved round by round; each figure is the
fastest of the rounds, and a ratio is ours / SortedDict's time (below 1: faster).

The compiled path is timed in this process. The pure-Python reference cannot be chosen beside it
in one process (the choice is made at import, :mod:`offheap.kernels.native`), so it is timed by a
child process started with ``OFFHEAP_PURE_PYTHON=1`` right after, which times its own SortedDict:
each ratio comes from one process and one stretch of time.

Rows (the maps hold ``large`` random keys with ``""`` values, bulk loaded from sorted arrays;
``ops`` operations are timed per row; SortedDict's side in parentheses where it differs):

- get hit, first pass: ``m[k]`` of present keys in random order, the first lookups after the
  bulk load (a TreeMap builds the compact forms of the inner nodes they pass, and the CPU's
  caches hold neither map's lookup path yet): no goal, shown beside the steady state;
- get hit: the same lookups again, right after the first pass (the steady state a program
  doing lookups sees);
- insert into random keys: ``m[k] = ""`` of absent random keys, one by one;
- delete random keys: ``del m[k]`` of present keys;
- sequential insert: ``m[k] = ""`` for ``k`` in ``range(large)`` into a new map, per insert;
- irange: the keys of ``m.irange(lo, hi)`` spanning ``ops`` entries, per key;
- iterate: ``for k, v in m.items()`` over the whole map, per entry;
- floor_key: ``m.floor_key(k)`` of random int64 (``keys[sd.bisect_right(k) - 1]``);
- index: ``m.index(k)`` of present keys;
- peekitem: ``m.peekitem(i)`` of random positions.

Bytes per entry, from the maps' own ``stats()``: the sequential fill of the default TreeMap
(node 32, write cache), and when asked (``random_fill``) a one-by-one fill of random keys
(node 32, write cache), the issue's capacity measure; it takes minutes at 2M.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from experiments.keys import KeyStream

PATHS = ("compiled", "pure")
SMALLEST = -(1 << 63)


@dataclass(frozen=True)
class PeerGoal:
    """One row: what is timed and the bars (ratios of ours to the peer's time: SortedDict's
    here, dict's in :mod:`experiments.keyed_goals`)."""

    name: str
    goal: str
    must: str


GOALS = (
    PeerGoal("get hit, random, first pass", "(no goal)", "(none)"),
    PeerGoal("get hit, random", "<= 1.5x SortedDict", "<= 2x"),
    PeerGoal("insert into random keys", "<= 1.0x", "<= 2x"),
    PeerGoal("delete random keys", "<= 1.0x", "<= 2x"),
    PeerGoal("sequential insert", "<= 1.0x and <= 300 ns", "<= 1.5x"),
    PeerGoal("irange", "<= 2x", "<= 3x"),
    PeerGoal("iterate", "<= 2x", "<= 3x"),
    PeerGoal("floor_key", "<= 1.5x", "<= 2x"),
    PeerGoal("index", "<= 1.5x", "<= 2x"),
    PeerGoal("peekitem", "<= 1.5x", "<= 2x"),
)


@dataclass(frozen=True)
class Workload:
    """The keys of one round: the map's, and the operands of every row."""

    keys: np.ndarray      # sorted, unique: the maps' contents
    hits: list            # present keys, random order
    absent: list          # keys not in the maps, random order
    probes: list          # random int64 for floor_key
    positions: list       # random positions for peekitem
    span: tuple           # (lo, hi) of an irange over ops entries

    @classmethod
    def make(cls, large: int, ops: int, seed: int) -> Workload:
        drawn = np.unique(KeyStream("random", seed).take(large + ops))
        rng = np.random.default_rng(seed)
        order = rng.permutation(drawn.size)
        keys, absent = np.sort(drawn[order[:large]]), drawn[order[large:large + ops]]
        ops = min(ops, keys.size)
        first = int(rng.integers(0, keys.size - ops + 1))
        hi = int(keys[first + ops]) if first + ops < keys.size else None
        return cls(keys=keys, hits=rng.choice(keys, ops, replace=False).tolist(),
                   absent=absent.tolist(),
                   probes=KeyStream("random", seed + 1).take(ops).tolist(),
                   positions=rng.integers(0, keys.size, ops).tolist(),
                   span=(int(keys[first]), hi))


def _seconds(loop: Callable[[], int]) -> float:
    """Seconds per operation of ``loop``, which returns how many operations it ran."""
    started = time.perf_counter()
    count = loop()
    return (time.perf_counter() - started) / max(count, 1)


def _timers(work: Workload, floor_key: Callable, sequential: Callable[[], object]) -> dict:
    """The rows of :data:`GOALS` as functions of a filled map (ours or SortedDict), each
    returning seconds per operation. ``floor_key(m)`` gives the map's floor_key function;
    ``sequential()`` a new empty map of the same kind."""
    hits, absent, probes, positions = work.hits, work.absent, work.probes, work.positions
    lo, hi = work.span

    def get_hit(m):
        def loop():
            for k in hits:
                m[k]
            return len(hits)
        return _seconds(loop)

    def insert(m):
        def loop():
            for k in absent:
                m[k] = ""
            return len(absent)
        return _seconds(loop)

    def delete(m):
        def loop():
            for k in absent:
                del m[k]
            return len(absent)
        return _seconds(loop)

    def sequential_insert(m):
        fresh = sequential()
        n = len(work.keys)

        def loop():
            for k in range(n):
                fresh[k] = ""
            return n
        seconds = _seconds(loop)
        _close(fresh)
        return seconds

    def irange(m):
        def loop():
            count = 0
            for _ in m.irange(lo, hi, inclusive=(True, False)):
                count += 1
            return count
        return _seconds(loop)

    def iterate(m):
        def loop():
            count = 0
            for _ in m.items():
                count += 1
            return count
        return _seconds(loop)

    def floor(m):
        find = floor_key(m)

        def loop():
            for k in probes:
                find(k)
            return len(probes)
        return _seconds(loop)

    def index(m):
        def loop():
            for k in hits:
                m.index(k)
            return len(hits)
        return _seconds(loop)

    def peekitem(m):
        def loop():
            for i in positions:
                m.peekitem(i)
            return len(positions)
        return _seconds(loop)

    return {"get hit, random, first pass": get_hit, "get hit, random": get_hit,
            "insert into random keys": insert,
            "delete random keys": delete, "sequential insert": sequential_insert,
            "irange": irange, "iterate": iterate, "floor_key": floor, "index": index,
            "peekitem": peekitem}


def _sorted_dict_floor_key(sd):
    keys, bisect_right = sd.keys(), sd.bisect_right

    def floor_key(k):
        i = bisect_right(k)
        return keys[i - 1] if i else None
    return floor_key


def _close(m) -> None:
    close = getattr(m, "close", None)
    if close is not None:
        close()


def _round(large: int, ops: int, seed: int) -> dict[str, dict[str, float]]:
    """Seconds per operation of every row for SortedDict and TreeMap on one workload. The
    rows run in :data:`GOALS` order on each map, so inserts and deletes leave it as it was."""
    from sortedcontainers import SortedDict

    from offheap import TreeMap

    work = Workload.make(large, ops, seed)
    values = [""] * len(work.keys)
    out: dict[str, dict[str, float]] = {}
    sorted_dict = SortedDict(zip(work.keys.tolist(), values))
    out["SortedDict"] = {row: timer(sorted_dict) for row, timer in _timers(
        work, _sorted_dict_floor_key, SortedDict).items()}
    tree = TreeMap(key="int64", value="object")
    tree.put_many(work.keys, values)
    out["TreeMap"] = {row: timer(tree) for row, timer in _timers(
        work, lambda m: m.floor_key, lambda: TreeMap(key="int64", value="object")).items()}
    if len(tree) != len(work.keys):
        raise RuntimeError("TreeMap lost entries during the rounds: the figures would be wrong")
    _close(tree)
    return out


def bytes_per_entry(n: int, key_order: str, **options) -> float:
    """Reserved bytes per entry of a TreeMap filled one key at a time with ``n`` keys
    (``"sequential"``: 0..n-1; ``"random"``: random int64) and ``""`` values."""
    from offheap import TreeMap

    keys = range(n) if key_order == "sequential" else KeyStream("random", 7).take(n).tolist()
    tree = TreeMap(key="int64", value="object", **options)
    for k in keys:
        tree[k] = ""
    tree.flush()
    figure = tree.stats().bytes_per_entry
    _close(tree)
    return figure


def measure(large: int, ops: int, *, repeat: int, random_fill: int = 0,
            progress=print) -> dict:
    """This process's rows (fastest of ``repeat`` rounds) and bytes per entry."""
    from offheap import compiled

    best: dict[str, dict[str, float]] = {}
    for round_ in range(repeat):
        progress(f"TreeMap goals ({'compiled' if compiled else 'pure'}): {large:,} keys, "
                 f"{ops:,} operations a row (round {round_ + 1} of {repeat})")
        for name, cells in _round(large, ops, seed=21 + round_).items():
            row = best.setdefault(name, {})
            for goal, seconds in cells.items():
                row[goal] = min(seconds, row.get(goal, seconds))
    sizes = {"sequential, node 32, write cache": bytes_per_entry(large, "sequential",
                                                                 node_size=32)}
    if random_fill:
        progress(f"TreeMap bytes/entry: {random_fill:,} random keys one by one")
        sizes[f"random ({random_fill:,}), node 32, write cache"] = bytes_per_entry(
            random_fill, "random", node_size=32)
    return {"seconds_per_op": best, "bytes_per_entry": sizes}


def run_goals(large: int, ops: int, *, repeat: int, random_fill: int = 0,
              progress=print) -> dict:
    """The rows on the compiled path here (when it is built and chosen) and on the pure path in
    a child process; the document maps each path to :func:`measure`'s result."""
    from offheap import compiled

    paths: dict[str, dict] = {}
    if compiled:
        paths["compiled"] = measure(large, ops, repeat=repeat, random_fill=random_fill,
                                    progress=progress)
    progress("TreeMap goals (pure): in a child process with OFFHEAP_PURE_PYTHON=1")
    child = subprocess.run(
        [sys.executable, "-m", "experiments.treemap_goals", str(large), str(ops), str(repeat),
         str(random_fill)],
        env={**os.environ, "OFFHEAP_PURE_PYTHON": "1"},
        stdout=subprocess.PIPE, text=True, check=False)  # its progress goes to our stderr
    if child.returncode:
        raise RuntimeError(f"the pure-path TreeMap goals failed (exit {child.returncode}; its "
                           f"error is printed above)")
    paths["pure"] = json.loads(child.stdout)
    return {"large": large, "ops": ops, "repeat": repeat, "paths": paths}


def ratio(ours: float, sorted_dict: float) -> float:
    """Ours / SortedDict's time: below 1 is faster than SortedDict."""
    return ours / sorted_dict


if __name__ == "__main__":  # the pure path's child: measure, then the result as JSON
    large_n, ops_n, repeat_n, random_n = map(int, sys.argv[1:5])
    print(json.dumps(measure(large_n, ops_n, repeat=repeat_n, random_fill=random_n,
                             progress=lambda text: print(text, file=sys.stderr))))
