"""The HashMap issue's measures for ``HashMap(key="str")``: each against dict, both cores.

Part of ``python -m experiments maps-bench`` (:mod:`experiments.maps_bench`). Keys are str like
the issue's ``user:1234567`` (seven random digits, distinct), values ``""``. Every row times one
scalar idiom as a user writes it (the loops of :mod:`experiments.hashmap_goals`, on str keys)
for dict, the compiled HashMap and the pure-Python reference
(:class:`~offheap.hashmap.keyedmap.ReferenceHashMap`), interleaved round by round; each figure is
the fastest of the rounds; a ratio is ours / dict's time. The reference runs on ``pure_n`` keys
(its loops cost microseconds a key), dict and the compiled core on ``n``: each ratio compares
like with like, dict timed again on the reference's keys.

Memory: bytes per entry of the map (its store's reserved bytes) against dict's, measured with
``tracemalloc`` around building the dict and its str keys (what a program holding them pays),
in the same process.
"""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Callable

from experiments.hashmap_goals import close_map, scalar_timers, timed_insert
from experiments.treemap_goals import PeerGoal


GOALS = (
    PeerGoal("get hit", "<= 1.5x dict", "<= 2.5x"),
    PeerGoal("get miss", "<= 1.5x dict", "<= 2.5x"),
    PeerGoal("set (overwrite)", "<= 1.5x dict", "<= 2.5x"),
    PeerGoal("insert one by one", "<= 1.5x dict", "<= 2.5x"),
    PeerGoal("in (hit)", "<= 1.5x dict", "<= 2.5x"),
    PeerGoal("iterate items", "<= 1.5x dict", "<= 2.5x"),
)
BYTES_GOAL, BYTES_MUST = "<= 0.25x dict", "<= 0.4x"


def user_keys(n: int, seed: int) -> tuple[list[str], list[str]]:
    """n distinct keys ``user:DDDDDDD`` in random order, and n absent ones of the same form."""
    rng = random.Random(seed)
    numbers = rng.sample(range(10**6, 10**7), 2 * n) if 2 * n <= 9 * 10**6 else \
        rng.sample(range(10**6, 10**8), 2 * n)
    keys = [f"user:{i}" for i in numbers]
    return keys[:n], keys[n:]


def _makers(core: str) -> Callable[[], object]:
    from offheap import HashMap
    from offheap.hashmap.keyedmap import ReferenceHashMap

    if core == "compiled":
        if not HashMap(key="str")._compiled_core:
            raise RuntimeError("the compiled core is not built: run pip install -e . first")
        return lambda: HashMap(key="str", value="str")
    return lambda: ReferenceHashMap(key="str", value="str")


def _round(n: int, seed: int, makers: dict[str, Callable[[], object]]) -> dict[str, dict]:
    """Seconds per operation of every row for each map of ``makers`` on n fresh keys."""
    keys, misses = user_keys(n, seed)
    values = [""] * n
    out: dict[str, dict] = {}
    for name, make in makers.items():
        seconds, m = timed_insert(make, keys, values)
        cells = {"insert one by one": seconds}
        timers = scalar_timers(keys, misses, values)
        for goal in GOALS:
            if goal.name in timers:
                cells[goal.name] = timers[goal.name](m)
        close_map(m)
        out[name] = {row: s / n for row, s in cells.items()}
    return out


def bytes_per_entry(n: int) -> dict[str, float]:
    """Bytes per entry of a compiled-or-reference HashMap(key="str") of n keys -> "" (its
    store's reserved bytes) and of a dict of the same str keys (tracemalloc: the dict and its
    keys)."""
    from offheap import HashMap

    keys, _ = user_keys(n, seed=5)
    m = HashMap(key="str", value="str")
    m.put_many(keys, [""] * n)
    ours = m.stats().reserved_bytes / n
    m.close()
    numbers = [key[5:] for key in keys]
    del keys
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    d = {"user:" + number: "" for number in numbers}
    theirs = (tracemalloc.get_traced_memory()[0] - before) / n
    tracemalloc.stop()
    del d
    return {"HashMap": ours, "dict": theirs}


def run_goals(n: int, pure_n: int, *, repeat: int, compiled: bool, bytes_n: int | None,
              progress=print) -> dict:
    """The rows of :data:`GOALS` (seconds per operation, fastest of ``repeat`` rounds): dict and
    the compiled HashMap on n keys (when ``compiled``), dict and the reference on pure_n keys;
    with ``bytes_n``, the bytes/entry row."""
    best: dict[str, dict[str, dict[str, float]]] = {}
    sizes = {"compiled": n, "pure": pure_n} if compiled else {"pure": pure_n}
    for round_ in range(repeat):
        for core, size in sizes.items():
            progress(f"HashMap(key='str') goals, {core} core: {size:,} keys "
                     f"(round {round_ + 1} of {repeat})")
            result = _round(size, 31 + round_, {"dict": dict, core: _makers(core)})
            for name, cells in result.items():
                row = best.setdefault(core, {}).setdefault(name, {})
                for goal, seconds in cells.items():
                    row[goal] = min(seconds, row.get(goal, seconds))
    document: dict = {"n": sizes, "repeat": repeat, "seconds_per_op": best}
    if bytes_n:
        progress(f"HashMap(key='str') bytes/entry at {bytes_n:,} entries")
        document["bytes_per_entry"] = {"n": bytes_n, **bytes_per_entry(bytes_n),
                                       "goal": BYTES_GOAL, "must": BYTES_MUST}
    return document
