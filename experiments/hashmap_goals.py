"""The Compiled core's measures for LongHashMap: each against dict, both cores side by side.

Part of ``python -m experiments maps-bench`` (:mod:`experiments.maps_bench`). Every row times one
scalar idiom as a user writes it (a ``for`` loop in a function, locals only) on the same random
int64 keys for dict, the compiled LongHashMap and the pure-Python reference
(:class:`~offheap.hashmap.longhashmap.ReferenceLongHashMap`), interleaved round by round; each
figure is the fastest of the rounds. A ratio is ours / dict's time (below 1: faster than dict),
except the bulk rows, which give how many times faster the bulk call is than a dict loop doing
the same work. The garbage collector stays on, as in a real program.

Rows (the goal and the bar each must reach): get hit and miss, ``in`` and overwrite on a small
map (cache-resident), one-by-one inserts, get hit and iteration on a large one (memory-bound;
get hit twice: in the order the keys went in, where dict reads its entries and key objects in
order and only its index at random, and in another order, where every lookup of either map
reads memory at random),
``get_many``/``put_many`` against dict loops (``get_many`` twice: the keys in the order they
went in, where the dict loop reads its key objects in the order they were allocated, and in
another order, as lookups of a real program come), and bytes per entry of ``int64 -> ""`` (the
store's reserved bytes over entries, the same for both cores since their files are the same
bytes).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from experiments.keys import KeyStream

CORES = ("compiled", "pure")


@dataclass(frozen=True)
class Goal:
    """One row: what is timed, at which size, and the bars (ratios as in the module docstring)."""

    name: str
    size: str  # "small" or "large"
    goal: str
    must: str


GOALS = (
    Goal("get hit", "small", "<= 1.5x dict", "<= 2x"),
    Goal("get miss", "small", "<= 1.5x dict", "<= 2x"),
    Goal("in (hit)", "small", "<= 1.5x dict", "<= 2x"),
    Goal("in (miss)", "small", "<= 1.5x dict", "<= 2x"),
    Goal("set (overwrite)", "small", "<= 1.5x dict", "<= 2x"),
    Goal("insert one by one", "large", "<= 2x dict", "<= 3x"),
    Goal("get hit, random", "large", "<= 1.0x dict", "<= 1.2x"),
    Goal("get hit, random, another order", "large", "<= 1.0x dict", "<= 1.2x"),
    Goal("iterate items", "large", "<= 2x dict", "<= 3x"),
    Goal("get_many vs a dict loop", "large", ">= 5x faster", ">= 5x"),
    Goal("get_many vs a dict loop, another order", "large", ">= 5x faster", ">= 5x"),
    Goal("put_many vs a dict loop", "large", ">= 5x faster", ">= 5x"),
)
BULK = ("get_many vs a dict loop", "get_many vs a dict loop, another order",
        "put_many vs a dict loop")


def _make(core: str, value: str):
    from offheap import LongHashMap
    from offheap.hashmap.longhashmap import ReferenceLongHashMap

    if core == "compiled":
        if LongHashMap is ReferenceLongHashMap or not LongHashMap(value=value)._compiled_core:
            raise RuntimeError("the compiled core is not built: run pip install -e . first")
        return LongHashMap(value=value)
    return ReferenceLongHashMap(value=value)


def scalar_timers(keys: list, misses: list, values: list, shuffled: list | None = None) -> dict:
    """The scalar loops of the table, each a function of a filled map returning seconds;
    ``shuffled`` (the keys in another order) adds the get hit in another order."""

    def get_hits(order: list):
        def get_hit(m):
            started = time.perf_counter()
            for k in order:
                m[k]
            return time.perf_counter() - started
        return get_hit

    get_hit = get_hits(keys)

    def get_miss(m):
        started = time.perf_counter()
        for k in misses:
            m.get(k)
        return time.perf_counter() - started

    def in_hit(m):
        started = time.perf_counter()
        for k in keys:
            k in m  # noqa: B015 - the lookup is what is timed
        return time.perf_counter() - started

    def in_miss(m):
        started = time.perf_counter()
        for k in misses:
            k in m  # noqa: B015
        return time.perf_counter() - started

    def overwrite(m):
        started = time.perf_counter()
        for k, v in zip(keys, values):
            m[k] = v
        return time.perf_counter() - started

    def iterate(m):
        started = time.perf_counter()
        for _ in m.items():
            pass
        return time.perf_counter() - started

    timers = {"get hit": get_hit, "get miss": get_miss, "in (hit)": in_hit, "in (miss)": in_miss,
              "set (overwrite)": overwrite, "get hit, random": get_hit, "iterate items": iterate}
    if shuffled is not None:
        timers["get hit, random, another order"] = get_hits(shuffled)
    return timers


def timed_insert(make: Callable[[], object], keys: list, values: list) -> tuple[float, object]:
    m = make()
    started = time.perf_counter()
    for k, v in zip(keys, values):
        m[k] = v
    return time.perf_counter() - started, m


def close_map(m) -> None:
    close = getattr(m, "close", None)
    if close is not None:
        close()


def _round(n: int, stream: KeyStream, value: str, cores: tuple[str, ...]) -> dict[str, dict]:
    """Seconds per operation of every row for dict and each core, on n fresh keys."""
    keys_array = stream.take(n)
    keys_array = np.unique(keys_array)[np.random.default_rng(n).permutation(
        np.unique(keys_array).size)]
    keys = keys_array.tolist()
    misses = (keys_array ^ 1).tolist()  # int64 keys next to each hit, absent with ~certainty
    shuffled_array = keys_array[np.random.default_rng(n + 1).permutation(len(keys_array))]
    shuffled = shuffled_array.tolist()  # the keys in another order than they went in
    values_array = keys_array.copy() if value == "int64" else np.full(len(keys), "", object)
    values = values_array.tolist()
    makers: dict[str, Callable[[], object]] = {"dict": dict}
    makers.update({core: (lambda core=core: _make(core, value)) for core in cores})
    out: dict[str, dict] = {}
    for name, make in makers.items():
        seconds, m = timed_insert(make, keys, values)
        cells = {"insert one by one": seconds}
        for row, timer in scalar_timers(keys, misses, values, shuffled).items():
            cells[row] = timer(m)
        if name == "dict":
            started = time.perf_counter()
            [m[k] for k in keys]
            cells["get_many vs a dict loop"] = time.perf_counter() - started
            started = time.perf_counter()
            [m[k] for k in shuffled]
            cells["get_many vs a dict loop, another order"] = time.perf_counter() - started
            fresh = {}
            started = time.perf_counter()
            for k, v in zip(keys, values):
                fresh[k] = v
            cells["put_many vs a dict loop"] = time.perf_counter() - started
        else:
            started = time.perf_counter()
            m.get_many(keys_array)
            cells["get_many vs a dict loop"] = time.perf_counter() - started
            started = time.perf_counter()
            m.get_many(shuffled_array)
            cells["get_many vs a dict loop, another order"] = time.perf_counter() - started
            fresh = make()
            started = time.perf_counter()
            fresh.put_many(keys_array, values_array if value == "int64" else values)
            cells["put_many vs a dict loop"] = time.perf_counter() - started
            close_map(fresh)
        close_map(m)
        out[name] = {row: seconds / len(keys) for row, seconds in cells.items()}
    return out


def bytes_per_entry(n: int) -> float:
    """Reserved bytes per entry of a compiled-or-reference LongHashMap holding n random int64
    keys with ``""`` values, filled in batches as a bulk load does."""
    from offheap import LongHashMap

    m = LongHashMap(value="object")
    stream = KeyStream("random", seed=7)
    batch = 1 << 20
    while len(m) < n:
        keys = stream.take(min(batch, n - len(m)))
        m.put_many(keys, [""] * len(keys))
    figure = m.stats().bytes_per_entry
    m.close()
    return figure


def available_cores() -> tuple[str, ...]:
    """Both cores, or only the pure one when the compiled core is not built or not selected."""
    from offheap import compiled

    return CORES if compiled else ("pure",)


def run_goals(small: int, large: int, value: str, *, repeat: int,
              cores: tuple[str, ...] | None = None, bytes_n: int | None = None,
              progress=print) -> dict:
    """The rows of :data:`GOALS` (seconds per operation, fastest of ``repeat`` rounds) for dict
    and each core (default: :func:`available_cores`); ``bytes_n`` entries for the bytes/entry
    row (None skips it)."""
    cores = available_cores() if cores is None else cores
    best: dict[str, dict[str, float]] = {}
    for round_ in range(repeat):
        for size, n in (("small", small), ("large", large)):
            progress(f"LongHashMap goals: {n:,} keys, {value} values (round {round_ + 1} of {repeat})")
            result = _round(n, KeyStream("random", seed=11 + round_), value, cores)
            for name, cells in result.items():
                for goal in GOALS:
                    if goal.size != size:
                        continue
                    seconds = cells[goal.name]
                    row = best.setdefault(name, {})
                    row[goal.name] = min(seconds, row.get(goal.name, seconds))
    document = {"small": small, "large": large, "value": value, "repeat": repeat,
                "seconds_per_op": best}
    if bytes_n:
        progress(f"LongHashMap bytes/entry at {bytes_n:,} entries")
        document["bytes_per_entry"] = {"n": bytes_n, "value": bytes_per_entry(bytes_n),
                                       "goal": "<= 16", "must": "<= 18.8"}
    return document


def ratio(goal_name: str, ours: float, dict_seconds: float) -> float:
    """ours / dict for scalar rows, dict loop / bulk call for the bulk rows (see the module)."""
    return dict_seconds / ours if goal_name in BULK else ours / dict_seconds
