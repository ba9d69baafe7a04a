"""``python -m experiments maps-bench``: LongHashMap and TreeMap against dict and SortedDict.

One run times the same operations on N int64 keys for every map, so the ratios come from one
machine state:

- scalar: ``m[k] = v`` for every key, ``m[k]`` for every key (shuffled order), iteration over
  ``items()``, ``del m[k]`` for every key (shuffled);
- bulk: each map's bulk API where it has one (``put_many``/``get_many``/``delete_many``,
  TreeMap's ``put_many(keys, values)``), else what a user of that map writes for a batch:
  ``update(zip(keys, values))``, ``list(map(m.__getitem__, keys))``, a ``del`` loop.
  Which one ran is recorded per cell (``bulk_api``).

Results are seconds per operation; the report divides dict's (and, for TreeMap, SortedDict's)
time by each map's, so a ratio above 1 means faster than the peer. The garbage collector stays
on, as in a real program: its passes over millions of dict entries are part of their cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from experiments import keyed_goals as keyed
from experiments import treemap_goals
from experiments.hashmap_goals import run_goals
from experiments.keys import KeyStream
from experiments.machine import describe_machine
from experiments.partial import keeping_partial

OPERATIONS = ("put", "get", "iterate", "delete", "bulk put", "bulk get", "bulk delete")
VALUE_TYPES = ("int64", "object")


@dataclass(frozen=True)
class Batch:
    """The keys and values of a run, as arrays and as lists, plus a shuffled lookup order."""

    keys: np.ndarray
    values: np.ndarray
    lookups: np.ndarray

    @classmethod
    def make(cls, n: int, key_order: str, value_type: str, seed: int = 42) -> Batch:
        keys = KeyStream(key_order, seed).take(n)
        _, first = np.unique(keys, return_index=True)
        keys = keys[np.sort(first)]  # random keys may repeat; keep each once, in order
        rng = np.random.default_rng(seed + 1)
        values = keys.copy() if value_type == "int64" else np.full(n, "", dtype=object)
        return cls(keys=keys, values=values, lookups=rng.permutation(keys))


@dataclass(frozen=True)
class MapKind:
    """How to make one kind of map and run its bulk operations (None: it has no bulk API)."""

    name: str
    make: Callable[[str], object]
    put_many: Callable[[object, Batch], None] | None = None
    get_many: Callable[[object, np.ndarray], object] | None = None
    delete_many: Callable[[object, np.ndarray], None] | None = None


def _long_hash_map(value_type: str):
    from offheap import LongHashMap

    return LongHashMap(value=value_type)


def _reference_long_hash_map(value_type: str):
    from offheap.hashmap.longhashmap import ReferenceLongHashMap

    return ReferenceLongHashMap(value=value_type)


def _tree_map(value_type: str):
    from offheap import TreeMap

    return TreeMap(key="int64", value=value_type)


def _sorted_dict(value_type: str):
    from sortedcontainers import SortedDict

    return SortedDict()


MAP_KINDS = (
    MapKind("dict", lambda value_type: {}),
    MapKind("SortedDict", _sorted_dict),
    MapKind("LongHashMap", _long_hash_map,
            put_many=lambda m, batch: m.put_many(batch.keys, batch.values),
            get_many=lambda m, keys: m.get_many(keys),
            delete_many=lambda m, keys: m.delete_many(keys)),
    MapKind("LongHashMap (pure)", _reference_long_hash_map,
            put_many=lambda m, batch: m.put_many(batch.keys, batch.values),
            get_many=lambda m, keys: m.get_many(keys),
            delete_many=lambda m, keys: m.delete_many(keys)),
    MapKind("TreeMap", _tree_map,
            put_many=lambda m, batch: m.put_many(batch.keys, batch.values)),
)


def _timed(action: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def _check(condition: bool, kind: MapKind, what: str) -> None:
    if not condition:
        raise RuntimeError(f"{kind.name}: {what}; the benchmark would time a wrong result")


def bench_map(kind: MapKind, batch: Batch, value_type: str) -> dict[str, dict]:
    """Seconds of every operation on one map kind; each cell also says if a bulk API ran."""
    keys, values = batch.keys.tolist(), batch.values.tolist()
    lookups = batch.lookups.tolist()
    n = len(keys)
    cells = {}

    def scalar_put():
        mapping = kind.make(value_type)
        for key, value in zip(keys, values):
            mapping[key] = value
        return mapping

    seconds, mapping = _timed(scalar_put)
    cells["put"] = {"seconds": seconds}
    _check(len(mapping) == len(set(keys)), kind, "scalar puts lost keys")

    def scalar_get():
        for key in lookups:
            mapping[key]

    cells["get"] = {"seconds": _timed(scalar_get)[0]}

    def iterate():
        count = 0
        for _ in mapping.items():
            count += 1
        return count

    seconds, count = _timed(iterate)
    cells["iterate"] = {"seconds": seconds}
    _check(count == len(mapping), kind, "iteration skipped entries")

    def scalar_delete():
        for key in lookups:
            del mapping[key]

    cells["delete"] = {"seconds": _timed(scalar_delete)[0]}
    _check(len(mapping) == 0, kind, "scalar deletes left entries")
    _close(mapping)

    mapping = kind.make(value_type)
    if kind.put_many is not None:
        seconds = _timed(lambda: kind.put_many(mapping, batch))[0]
    else:
        seconds = _timed(lambda: mapping.update(zip(keys, values)))[0]
    cells["bulk put"] = {"seconds": seconds, "bulk_api": kind.put_many is not None}
    _check(len(mapping) == len(set(keys)), kind, "the bulk put lost keys")

    if kind.get_many is not None:
        seconds, found = _timed(lambda: kind.get_many(mapping, batch.lookups))
    else:
        seconds, found = _timed(lambda: list(map(mapping.__getitem__, lookups)))
    cells["bulk get"] = {"seconds": seconds, "bulk_api": kind.get_many is not None}
    _check(len(found) == n, kind, "the bulk get returned the wrong number of values")

    if kind.delete_many is not None:
        seconds = _timed(lambda: kind.delete_many(mapping, batch.lookups))[0]
    else:
        seconds = _timed(lambda: list(map(mapping.__delitem__, lookups)))[0]
    cells["bulk delete"] = {"seconds": seconds, "bulk_api": kind.delete_many is not None}
    _check(len(mapping) == 0, kind, "the bulk delete left entries")
    _close(mapping)
    for cell in cells.values():
        cell["ns_per_op"] = cell["seconds"] / n * 1e9
    return cells


def _close(mapping) -> None:
    close = getattr(mapping, "close", None)
    if close is not None:
        close()


def run_maps_bench(n: int, key_order: str, value_type: str, *, repeat: int = 1,
                   goals: tuple[int, int, int | None] | None = None,
                   tree_goals: tuple[int, int, int] | None = None,
                   keyed_goals: tuple[int, int, int] | None = None, progress=print) -> dict:
    """Every map kind on the same keys, ``repeat`` times (each cell keeps its fastest run);
    returns the results document. "LongHashMap (pure)" is the map on its pure-Python reference
    core, beside the compiled one, in the same run. ``goals`` (small and large key counts, and
    the entries of the bytes/entry row or None) adds :mod:`experiments.hashmap_goals`;
    ``tree_goals`` (the keys of the maps, the operations a row, the entries of the random
    one-by-one fill or 0) adds :mod:`experiments.treemap_goals`; ``keyed_goals`` (the keys of the
    compiled core's and the reference's rows, the entries of the bytes/entry row or 0) adds
    :mod:`experiments.keyed_goals`. A Ctrl-C or a failure ends the
    run with what was measured (:mod:`experiments.partial`)."""
    batch = Batch.make(n, key_order, value_type)
    document = {"experiment": "maps-bench", "machine": describe_machine(),
                "config": {"n": n, "keys": key_order, "value": value_type, "repeat": repeat},
                "operations": list(OPERATIONS), "results": {}}
    with keeping_partial(document, progress) as progress:
        for round_ in range(repeat):
            for kind in MAP_KINDS:
                progress(f"{kind.name}: {n:,} {key_order} keys (run {round_ + 1} of {repeat})")
                cells = bench_map(kind, batch, value_type)
                best = document["results"].setdefault(kind.name, cells)
                for operation, cell in cells.items():
                    if cell["seconds"] < best[operation]["seconds"]:
                        best[operation] = cell
        if goals is not None:
            small, large, bytes_n = goals
            document["hashmap_goals"] = run_goals(small, large, value_type, repeat=repeat,
                                                  bytes_n=bytes_n, progress=progress)
        if tree_goals is not None:
            large, ops, random_fill = tree_goals
            document["treemap_goals"] = treemap_goals.run_goals(
                large, ops, repeat=repeat, random_fill=random_fill, progress=progress)
        if keyed_goals is not None:
            from offheap import compiled

            n_keys, pure_keys, bytes_n = keyed_goals
            document["keyed_goals"] = keyed.run_goals(
                n_keys, pure_keys, repeat=repeat, compiled=compiled, bytes_n=bytes_n or None,
                progress=progress)
    return document
