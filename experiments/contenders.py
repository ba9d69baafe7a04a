"""The maps the capacity experiment fills, how each is built within a budget and how it is weighed.

A :class:`Contender` names a map configuration, says which MapDB run of the blog it answers, and
builds a *target*: the map wrapped in what the fill loop (:mod:`experiments.child`) needs.

``insert(keys, batch)``
    Insert ``key -> ""`` for the keys in order, one ``m[k] = ""`` at a time (the blog's loop) or
    through the map's bulk API, and return how many keys went in. Fewer than ``len(keys)`` means
    the budget stopped it: the map holds exactly the first ones, and a bulk insert that would cross
    the budget inserts none.
``memory_bytes()``
    What the map costs, by the measure named in ``measured_by``:

    - ``"rss"``: Python-heap maps (dict, SortedDict) are charged with the peak RSS growth of the
      child process since the fill began. The fill loop reads it, so these targets return None.
      The budget is enforced by that loop, which stops at the first check above the budget.
    - ``"arena"``: off-heap maps report their arena's reserved bytes; the arena's hard ``limit``
      equals the budget, so the map raises CapacityError instead of crossing it.
    - ``"disk"``: Sparkey is charged with its log plus index bytes (its memory is the page cache of
      those files); it stops before a put whose log entry and index slot would not fit.
``finish()``, ``close()``
    Complete the structure before the final measurement (write a write cache back, build an
    index), then free it.
``bulk``, ``bulk_step(default)``, ``details()``
    Whether batch mode has a bulk API to call; how many keys the next bulk insert should take
    (optional); the structure's own figures for the results file (optional).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path

import numpy as np

EMPTY = ""


@dataclass(frozen=True)
class MapdbFigure:
    """One run of the blog: the map, its key order and how many entries fit in 15 GiB."""

    label: str
    keys: str
    entries: int


MAPDB_JAVA_TREEMAP = MapdbFigure("java.util.TreeMap (heap)", "sequential", 172_000_000)
MAPDB_JAVA_HASHMAP = MapdbFigure("java.util.HashMap (heap)", "sequential", 182_000_000)
MAPDB_LONGHASHMAP = MapdbFigure("MapDB LongHashMap (heap)", "sequential", 276_000_000)
MAPDB_TREEMAP_DIRECT = MapdbFigure("MapDB TreeMap, direct, no write cache", "sequential", 980_000_000)
MAPDB_TREEMAP_CACHE = MapdbFigure("MapDB TreeMap + write cache", "sequential", 1_738_000_000)
MAPDB_TREEMAP_COMPRESSED = MapdbFigure("MapDB TreeMap node 120 + compression", "sequential",
                                       3_315_000_000)
MAPDB_TREEMAP_RANDOM = MapdbFigure("MapDB TreeMap + write cache, random keys", "random", 651_000_000)
MAPDB_BUDGET_BYTES = 15 << 30  # -Xmx15G / -XX:MaxDirectMemorySize=15G


@dataclass(frozen=True)
class Contender:
    """A map configuration in the capacity experiment."""

    name: str
    label: str
    requires: str
    build: Callable[[int, Path], object]
    mapdb: tuple[MapdbFigure, ...] = ()
    keys: str | None = None  # a key order this contender always uses, whatever --keys says
    repeats: str | None = None  # the contender this one equals when --keys is its own order

    def key_order(self, requested: str) -> str:
        return self.keys or requested

    def mapdb_figure(self, keys: str) -> MapdbFigure | None:
        """The blog's figure for this configuration: with the same key order if the blog ran it."""
        for figure in self.mapdb:
            if figure.keys == keys:
                return figure
        return self.mapdb[0] if self.mapdb else None

    def unavailable_reason(self) -> str | None:
        """None if the package this contender needs imports, else why it does not."""
        try:
            importlib.import_module(self.requires)
        except Exception as error:  # noqa: BLE001 - any import failure makes it unavailable
            return f"{self.requires} does not import: {type(error).__name__}: {error}"
        return None


def int_keys(keys: np.ndarray) -> list[int]:
    """The key stream's int64 keys as Python ints: what most contenders store."""
    return keys.tolist()


def user_keys(keys: np.ndarray) -> list[str]:
    """``f"user:{k}"`` for each key: the str keys of a typical dict (``user:1234567``)."""
    return [f"user:{key}" for key in keys.tolist()]


def store_each(container, keys: list, is_set: bool) -> int:
    """The blog's loop, ``m[k] = ""`` for each key (``s.add(k)`` for a set), until the end or
    until an off-heap map raises CapacityError; returns how many keys went in.

    The map is left as it was before the failing key, so the count is exact; the loop body
    stays a bare store, since it is what is being timed.
    """
    from offheap.errors import CapacityError

    key = None
    try:
        if is_set:
            add = container.add
            for key in keys:
                add(key)
        else:
            for key in keys:
                container[key] = EMPTY
    except CapacityError:
        return keys.index(key)  # its first place: a repeat of a stored key allocates nothing
    return len(keys)


class HeapTarget:
    """A map or set on the Python heap (dict, SortedDict, set), weighed by the child's RSS
    growth. ``key_form`` turns the stream's int64 keys into the keys stored."""

    measured_by = "rss"
    bulk = True

    def __init__(self, mapping, *, key_form: Callable[[np.ndarray], list] = int_keys,
                 is_set: bool = False) -> None:
        self.map = mapping
        self._key_form = key_form
        self._is_set = is_set

    def __len__(self) -> int:
        return len(self.map)

    def insert(self, keys: np.ndarray, batch: bool) -> int:
        key_list = self._key_form(keys)
        if not batch:
            store_each(self.map, key_list, self._is_set)
        elif self._is_set:
            self.map.update(key_list)
        else:
            self.map.update(zip(key_list, repeat(EMPTY)))
        return len(keys)

    def memory_bytes(self) -> None:
        return None

    def finish(self) -> None:
        pass

    def close(self) -> None:
        self.map = None


class ArenaTarget:
    """An offheap map with ``limit=budget``, weighed by its arena's reserved bytes.

    ``bulk_insert(map, keys)`` is the map's bulk path (all or nothing). ``grow_batches``: the
    bulk path only builds pages directly for a batch at least as large as the map (TreeMap's
    ``update``), so batches grow with the map (doubling it) until the budget refuses one.
    """

    measured_by = "arena"
    bulk = True

    def __init__(self, mapping, bulk_insert: Callable[[object, list | np.ndarray], None], *,
                 grow_batches: bool = False,
                 key_form: Callable[[np.ndarray], list] = int_keys, is_set: bool = False) -> None:
        self.map = mapping
        self._bulk_insert = bulk_insert
        self._grow_batches = grow_batches
        self._key_form = key_form
        self._is_set = is_set
        self.flush_error: str | None = None

    def __len__(self) -> int:
        return len(self.map)

    def insert(self, keys: np.ndarray, batch: bool) -> int:
        from offheap.errors import CapacityError

        if not batch:
            return store_each(self.map, self._key_form(keys), self._is_set)
        try:
            self._bulk_insert(self.map, keys if self._key_form is int_keys else self._key_form(keys))
        except CapacityError:
            return 0
        return len(keys)

    def bulk_step(self, default: int) -> int:
        """Keys for the next bulk insert."""
        return max(default, len(self.map)) if self._grow_batches else default

    def memory_bytes(self) -> int:
        return self.map.stats().reserved_bytes

    def finish(self) -> None:
        """Write a write cache back. If the full arena refuses that, the entries stay counted and
        the failure is reported (``details``): the dirty pages then sit on the heap, in RSS."""
        from offheap.errors import CapacityError

        try:
            self.map.flush()
        except CapacityError as error:
            self.flush_error = str(error)

    def details(self) -> dict:
        """The map's own stats (load factor, leaf fill, compression, dirty nodes...)."""
        stats = self.map.stats()
        figures = {name: getattr(stats, name) for name in stats.__dataclass_fields__}
        for name in ("compression_ratio", "leaf_fill"):
            if hasattr(stats, name):
                figures[name] = getattr(stats, name)
        if self.flush_error is not None:
            figures["flush_error"] = self.flush_error
        return figures

    def close(self) -> None:
        self.map.close()


class SparkeyTarget:
    """A Sparkey log of 8-byte big-endian keys and empty values, weighed by its files' bytes.

    Before the index exists, its size is projected exactly from the log header
    (``sparkey.table.table_parameters``), and a chunk is cut to the keys whose log entries and
    index slots still fit the budget. ``finish()`` closes the log and builds the index by
    sorting (RAM stays bounded however large the log); the final figure is the two files' size.
    Sparkey has no bulk put, so batch mode appends one put at a time too (``bulk`` False).
    """

    measured_by = "disk"
    bulk = False
    INDEX_METHOD = "sorting"

    def __init__(self, budget_bytes: int, workdir: Path) -> None:
        import sparkey

        self.budget_bytes = budget_bytes
        self.log_path = workdir / "capacity.spl"
        self.index_path = workdir / "capacity.spi"
        self.log = sparkey.LogWriter(self.log_path, compression="none")
        self._n = 0
        self._finished = False

    def __len__(self) -> int:
        return self._n

    def projected_bytes(self, more_puts: int) -> int:
        """Log plus index bytes after ``more_puts`` more puts of an 8-byte key and empty value."""
        from sparkey.format import INDEX_HEADER_SIZE, put_size
        from sparkey.table import table_parameters

        header = self.log.header
        header = dataclasses.replace(header, num_puts=header.num_puts + more_puts,
                                     data_end=header.data_end + more_puts * put_size(8, 0))
        table = table_parameters(header, "canonical")
        return (header.data_end + INDEX_HEADER_SIZE
                + table.capacity * (table.hash_size + table.address_size))

    def insert(self, keys: np.ndarray, batch: bool) -> int:
        fitting, too_many = 0, len(keys) + 1  # bisect: projected(fitting) <= budget < projected(too_many)
        if self.projected_bytes(len(keys)) <= self.budget_bytes:
            fitting = len(keys)
        else:
            while too_many - fitting > 1:
                middle = (fitting + too_many) // 2
                if self.projected_bytes(middle) <= self.budget_bytes:
                    fitting = middle
                else:
                    too_many = middle
        put = self.log.put
        for key in keys[:fitting].tolist():
            put(key.to_bytes(8, "big", signed=True), b"")
        self._n += fitting
        return fitting

    def memory_bytes(self) -> int:
        if self._finished:
            return self.log_path.stat().st_size + self.index_path.stat().st_size
        return self.projected_bytes(0)

    def details(self) -> dict:
        figures = {"log_bytes": self.log_path.stat().st_size, "index_method": self.INDEX_METHOD}
        if self._finished:
            figures["index_bytes"] = self.index_path.stat().st_size
        return figures

    def finish(self) -> None:
        import sparkey

        self.log.close()
        sparkey.write_index(self.index_path, self.log_path, method=self.INDEX_METHOD)
        self._finished = True

    def close(self) -> None:
        self.log.close()


def _empty_values(n: int) -> list[str]:
    return [EMPTY] * n


def _build_dict(budget_bytes: int, workdir: Path) -> HeapTarget:
    return HeapTarget({})


def _build_sorted_dict(budget_bytes: int, workdir: Path) -> HeapTarget:
    from sortedcontainers import SortedDict

    return HeapTarget(SortedDict())


def _build_long_hash_map(budget_bytes: int, workdir: Path) -> ArenaTarget:
    from offheap import LongHashMap

    def put_many(mapping, keys):
        mapping.put_many(keys, _empty_values(len(keys)))

    return ArenaTarget(LongHashMap(value="object", limit=budget_bytes), put_many)


def _build_dict_of_user_keys(budget_bytes: int, workdir: Path) -> HeapTarget:
    return HeapTarget({}, key_form=user_keys)


def _build_hash_map_of_user_keys(budget_bytes: int, workdir: Path) -> ArenaTarget:
    from offheap import HashMap

    def put_many(mapping, keys):
        mapping.put_many(keys, _empty_values(len(keys)))

    return ArenaTarget(HashMap(key="str", value="str", limit=budget_bytes), put_many,
                       key_form=user_keys)


def _build_hash_set_of_user_keys(budget_bytes: int, workdir: Path) -> ArenaTarget:
    from offheap import HashSet

    return ArenaTarget(HashSet(key="str", limit=budget_bytes), lambda s, keys: s.add_many(keys),
                       key_form=user_keys, is_set=True)


def _build_set_of_user_keys(budget_bytes: int, workdir: Path) -> HeapTarget:
    return HeapTarget(set(), key_form=user_keys, is_set=True)


def _build_set(budget_bytes: int, workdir: Path) -> HeapTarget:
    return HeapTarget(set(), is_set=True)


def _build_long_hash_set(budget_bytes: int, workdir: Path) -> ArenaTarget:
    from offheap import LongHashSet

    return ArenaTarget(LongHashSet(limit=budget_bytes), lambda s, keys: s.add_many(keys),
                       is_set=True)


def _tree_map_builder(**options) -> Callable[[int, Path], ArenaTarget]:
    """A builder of ``TreeMap(value="object", limit=budget, **options)`` targets."""

    def build(budget_bytes: int, workdir: Path) -> ArenaTarget:
        from offheap import TreeMap

        def update(mapping, keys):
            mapping.put_many(keys, _empty_values(len(keys)))

        return ArenaTarget(TreeMap(key="int64", value="object", limit=budget_bytes, **options), update,
                           grow_batches=True)

    return build


# The blog's asyncFlushDelay(100) and "zlib style" page compression (LZF in MapDB's code).
FLUSH_DELAY_MS = 100
COMPRESSION = "zlib"

CONTENDERS: dict[str, Contender] = {
    contender.name: contender
    for contender in (
        Contender("dict", "dict", "builtins", _build_dict, (MAPDB_JAVA_HASHMAP,)),
        Contender("sorteddict", "SortedDict", "sortedcontainers", _build_sorted_dict,
                  (MAPDB_JAVA_TREEMAP,)),
        Contender("longhashmap", "LongHashMap", "offheap", _build_long_hash_map,
                  (MAPDB_LONGHASHMAP,)),
        Contender("treemap-plain", "TreeMap, no write cache", "offheap",
                  _tree_map_builder(node_size=32, write_cache=False), (MAPDB_TREEMAP_DIRECT,)),
        Contender("treemap-cache", "TreeMap + write cache", "offheap",
                  _tree_map_builder(node_size=32, write_cache=True, flush_delay=FLUSH_DELAY_MS),
                  (MAPDB_TREEMAP_CACHE, MAPDB_TREEMAP_RANDOM)),
        Contender("treemap-node120-zlib", "TreeMap node 120 + zlib", "offheap",
                  _tree_map_builder(node_size=120, write_cache=True, flush_delay=FLUSH_DELAY_MS,
                                    compression=COMPRESSION), (MAPDB_TREEMAP_COMPRESSED,)),
        Contender("treemap-random", "TreeMap + write cache", "offheap",
                  _tree_map_builder(node_size=32, write_cache=True, flush_delay=FLUSH_DELAY_MS),
                  (MAPDB_TREEMAP_RANDOM,), keys="random", repeats="treemap-cache"),
        Contender("sparkey", "Sparkey (log + index)", "sparkey", SparkeyTarget),
        Contender("dict-str", 'dict, keys f"user:{k}"', "builtins", _build_dict_of_user_keys),
        Contender("hashmap-str", 'HashMap(key="str"), keys f"user:{k}"', "offheap",
                  _build_hash_map_of_user_keys),
        Contender("set", "set (int64 elements)", "builtins", _build_set),
        Contender("longhashset", "LongHashSet", "offheap", _build_long_hash_set),
        Contender("set-str", 'set, elements f"user:{k}"', "builtins", _build_set_of_user_keys),
        Contender("hashset-str", 'HashSet(key="str"), elements f"user:{k}"', "offheap",
                  _build_hash_set_of_user_keys),
    )
}


def resolve(names: list[str] | None) -> list[Contender]:
    """The contenders named (all, in table order, for None); ValueError lists the known names."""
    if not names:
        return list(CONTENDERS.values())
    unknown = [name for name in names if name not in CONTENDERS]
    if unknown:
        raise ValueError(f"unknown contender(s) {', '.join(unknown)}; "
                         f"choose from {', '.join(CONTENDERS)}")
    return [CONTENDERS[name] for name in names]


def default_contenders(keys: str) -> list[Contender]:
    """All contenders, less those that would only repeat another one under this key order."""
    return [contender for contender in CONTENDERS.values()
            if not (contender.repeats and contender.keys == keys)]
