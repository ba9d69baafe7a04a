"""DB: one record store holding named collections (layer 7), the analogue of MapDB's ``DBMaker``.

    with DB.file("data.offheap") as db:
        prices = db.tree_map("prices", key="int64", value="float64", compression="zstd")
        seen = db.hash_map("seen", value="object")

The *catalog* (name -> kind, options, metadata record) is the store's ``root`` blob, JSON after a
magic, written by :meth:`DB.flush` and :meth:`DB.close`. Reopening a file DB and asking for a
name returns that collection with the options it was created with; the options that only steer
the runtime behaviour (write cache, flush delay, cache size, compression of pages written from
now on) may be given anew, while a different key, value type or node size is an error.

Ownership: the DB owns its store and arena; collections it hands out share them and are closed
by :meth:`DB.close`.

Thread safety: the DB has one re-entrant :attr:`DB.lock`, which every TreeMap in it uses as its
own lock, so TreeMaps of one DB never write to the store at the same time, and a TreeMap's
``flush_delay`` timer thread waits for the other TreeMaps' operations. A LongHashMap does not
take that lock: in a DB that also holds a TreeMap with ``flush_delay``, call the LongHashMap's
methods while holding ``db.lock``, since the timer may write to the shared store at any moment.
Open and close collections from one thread.
"""

from __future__ import annotations

import json
import os
import threading

from offheap.errors import ClosedError, CorruptionError
from offheap.hashmap import LongHashMap
from offheap.memory import Arena, format_bytes
from offheap.store import RecordStore
from offheap.treemap import TreeMap

_CATALOG_MAGIC = b"OHDBCAT1"
_TREE_FIXED = ("key", "value", "node_size")
_TREE_DEFAULTS = dict(key="int64", value="object", node_size=32, compression=None,
                      write_cache=True, flush_delay=None, cache_size=2048)
_HASH_DEFAULTS = dict(value="object")


class DB:
    """Named collections in one store: build with :meth:`memory` or :meth:`file`."""

    def __init__(self, store: RecordStore) -> None:
        self._store = store
        self._catalog: dict[str, dict] = {}
        self._open: dict[str, TreeMap | LongHashMap] = {}
        self._open_options: dict[str, dict] = {}  # the options each open collection was given
        self._closed = False
        self.lock = threading.RLock()
        if store.root:
            self._catalog = _load_catalog(store.root)

    @classmethod
    def memory(cls, limit: int | None = None) -> DB:
        """A DB in anonymous memory, gone when closed; ``limit`` caps it in bytes."""
        return cls(RecordStore(Arena.anonymous(limit_bytes=limit)))

    @classmethod
    def file(cls, path: str | os.PathLike, limit: int | None = None) -> DB:
        """The DB in file ``path``, created if missing."""
        arena = Arena.file(path, limit_bytes=limit)
        try:
            if arena.root:
                store = RecordStore.open(arena)
            else:
                store = RecordStore(arena)
            return cls(store)
        except BaseException:
            arena.close()
            raise

    # -- collections --------------------------------------------------------------------------

    def tree_map(self, name: str, **options) -> TreeMap:
        """The :class:`TreeMap` called ``name``, created with ``options`` if it does not exist."""
        unknown = set(options) - set(_TREE_DEFAULTS)
        if unknown:
            raise TypeError(f"unknown TreeMap option(s): {', '.join(sorted(unknown))}")
        return self._collection(name, "tree_map", options, _TREE_DEFAULTS, _TREE_FIXED)

    def hash_map(self, name: str, **options) -> LongHashMap:
        """The :class:`LongHashMap` called ``name``, created with ``options`` if it does not exist."""
        unknown = set(options) - set(_HASH_DEFAULTS)
        if unknown:
            raise TypeError(f"unknown LongHashMap option(s): {', '.join(sorted(unknown))}")
        return self._collection(name, "hash_map", options, _HASH_DEFAULTS, tuple(_HASH_DEFAULTS))

    def _collection(self, name: str, kind: str, options: dict, defaults: dict, fixed: tuple):
        self._check_open()
        if not isinstance(name, str) or not name:
            raise TypeError(f"a collection name is a non-empty str, not {name!r}")
        entry = self._catalog.get(name)
        if entry is not None and entry["kind"] != kind:
            raise ValueError(f"{name!r} is a {entry['kind']}, not a {kind}")
        existing = self._open.get(name)
        if existing is not None and not existing.closed:
            _check_same(name, self._open_options[name], options, tuple(defaults))
            return existing
        if entry is None:
            merged = {**defaults, **options}
            if not isinstance(merged["value"], str):
                merged["value"] = merged["value"].name
            collection = self._create(kind, merged)
            meta_recid = collection.meta_recid
            self._catalog[name] = {"kind": kind, "options": merged, "meta_recid": meta_recid}
        else:
            _check_same(name, entry["options"], options, fixed)
            merged = {**entry["options"], **options}
            collection = self._reopen(kind, merged, entry["meta_recid"])
        self._open[name] = collection
        self._open_options[name] = merged
        return collection

    def _create(self, kind: str, options: dict):
        if kind == "tree_map":
            return TreeMap.in_store(self._store, lock=self.lock, **options)
        return LongHashMap.in_store(self._store, options["value"])

    def _reopen(self, kind: str, options: dict, meta_recid: int):
        if kind == "tree_map":
            return TreeMap.in_store(self._store, meta_recid=meta_recid, lock=self.lock, **options)
        return LongHashMap.in_store(self._store, options["value"], meta_recid)

    def names(self) -> list[str]:
        """Names of the collections in this DB, sorted."""
        self._check_open()
        return sorted(self._catalog)

    def __contains__(self, name: str) -> bool:
        return name in self._catalog

    # -- lifetime -----------------------------------------------------------------------------

    def flush(self) -> None:
        """Flush every open collection, write the catalog, and push a file DB to its file."""
        with self.lock:
            self._check_open()
            for collection in self._open.values():
                if not collection.closed:
                    collection.flush()
            self._store.root = _CATALOG_MAGIC + json.dumps(self._catalog, sort_keys=True).encode()
            self._store.flush()

    def close(self) -> None:
        """Close every collection, then the store (a file DB is flushed first). Idempotent."""
        with self.lock:
            if self._closed:
                return
            try:
                for collection in self._open.values():
                    collection.close()
                self._store.root = _CATALOG_MAGIC + json.dumps(self._catalog, sort_keys=True).encode()
            finally:
                self._closed = True
                self._open.clear()
                self._store.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> DB:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._closed:
            return "<DB (closed)>"
        where = self._store.arena.path or "memory"
        listing = ", ".join(f"{n} ({e['kind']})" for n, e in sorted(self._catalog.items()))
        return (f"<DB {where}: {format_bytes(self._store.arena.reserved_bytes)} reserved; "
                f"{listing or 'no collections'}>")

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the DB is closed")


def _check_same(name: str, stored: dict, given: dict, fixed: tuple) -> None:
    """ValueError if ``given`` changes one of the ``fixed`` options of collection ``name``."""
    for option in fixed:
        if option in given and given[option] != stored.get(option):
            raise ValueError(f"{name!r} was created with {option}={stored.get(option)!r}; "
                             f"it cannot be reopened with {option}={given[option]!r}")


def _load_catalog(root: bytes) -> dict:
    if not root.startswith(_CATALOG_MAGIC):
        raise CorruptionError("this store holds no DB catalog (a standalone map's file?)")
    try:
        catalog = json.loads(root[len(_CATALOG_MAGIC):])
    except ValueError:
        raise CorruptionError("the DB catalog is damaged (not JSON)") from None
    if not isinstance(catalog, dict) or not all(
            isinstance(e, dict) and {"kind", "options", "meta_recid"} <= set(e) for e in catalog.values()):
        raise CorruptionError("the DB catalog is damaged (bad entries)")
    return catalog
