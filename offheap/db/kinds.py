"""The kinds of collection a DB holds (layer 7): one :class:`CollectionKind` record per kind.

A DB's catalog names each collection's kind by a string; :data:`KINDS` maps that string to the
record that says everything the DB, compaction and salvage need of the kind: the class and its
reader, the options and which of them are fixed at creation, how to build or reopen one in a
shared store, how a standalone file of it names its metadata, how compaction copies it and how
many bytes it keeps outside store records. The collection itself is reached only through
:class:`~offheap.collection.protocol.StoredCollection`; mypy checks each registered class
against it through the bound of ``CollectionKind``'s type parameter.

A new kind is one more record here (and a ``DB`` method that opens it by name, as
:meth:`~offheap.DB.tree_map` does). The keyed hash kinds (``keyed_hash_map``,
``keyed_hash_set``: :class:`~offheap.HashMap`, :class:`~offheap.HashSet`) have no method of
their own: :meth:`~offheap.DB.hash_map` and :meth:`~offheap.DB.hash_set` open them when given
``key=`` or when the catalog names them, so ``hash_map``/``hash_set`` without ``key=`` keep
meaning a LongHashMap/LongHashSet, in every file written before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic

from offheap.collection.protocol import CollectionT
from offheap.collection.readers import ReaderT
from offheap.errors import CorruptionError
from offheap.hashmap.keyedmap import HashMap
from offheap.hashmap.keyedset import HashSet
from offheap.hashmap.longhashmap import LongHashMap
from offheap.hashmap.table import standalone_meta_recid as hash_meta_recid
from offheap.hashmap.longhashset import LongHashSet
from offheap.hashmap.reader import HashReader, HashSetReader
from offheap.store.records import RecordStore
from offheap.treemap.reader import TreeReader
from offheap.treemap.treemap import NEW_MAP_DEFAULTS, TreeMap
from offheap.treemap.treeset import TreeSet, TreeSetReader, new_set_defaults
from offheap.treemap.meta import standalone_meta_recid as tree_meta_recid
from offheap.treemap.nodecache import DEFAULT_CACHE_BYTES


@dataclass(frozen=True)
class CollectionKind(Generic[CollectionT, ReaderT]):
    """One kind of collection, as a DB registers it. Immutable and shared by every DB."""

    name: str  # the kind in the catalog ("tree_map"), also the DB method that opens one (the
    #            keyed hash kinds: that of the int64 kind they extend, with key=)
    collection: type[CollectionT]
    reader: type[ReaderT]  # ``reader(collection, session, owns_session)`` wraps one read-only
    defaults: Mapping[str, Any]  # every option, with its default: what the catalog stores
    fixed: tuple[str, ...]  # options a reopen may not change (the format of the stored data)
    in_store: Callable[[RecordStore, dict[str, Any], int | None, threading.RLock, bool],
                       CollectionT]
    """``in_store(store, options, meta_recid, lock, allow_pickle)``: build a new collection in
    ``store`` (``meta_recid`` None) or reopen one; ``lock`` is the DB's, for kinds that
    serialize; ``allow_pickle`` the DB opener's (:mod:`offheap.store.pickled`)."""
    standalone_meta_recid: Callable[[bytes], int]
    """The metadata record named by the store root of a standalone file of this kind;
    CorruptionError for a root of another kind."""
    copy_compacted: Callable[[CollectionT, CollectionT], None]
    """``copy_compacted(source, target)``: fill ``target``, empty and of the same options in
    another store, with ``source``'s entries in its most compact form."""
    region_bytes: Callable[[CollectionT], int]
    """Bytes the collection keeps in arena regions of its own rather than in store records."""
    derived_defaults: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None
    """Defaults that depend on other options (a TreeSet's node size on its key): given the
    merged options, the values of those not given."""

    @property
    def class_name(self) -> str:
        return self.collection.__name__

    def check_option_names(self, options: Mapping[str, Any]) -> None:
        """TypeError naming the options this kind does not have."""
        unknown = set(options) - set(self.defaults)
        if unknown:
            raise TypeError(f"unknown {self.class_name} option(s): {', '.join(sorted(unknown))}")

    def new_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The catalog options of a new collection: every default, overridden by ``options``,
        with a serializer given as an object kept by its name."""
        merged = {**self.defaults, **options}
        if self.derived_defaults is not None:
            merged.update({name: value for name, value in self.derived_defaults(merged).items()
                           if name not in options})
        if "value" in merged and not isinstance(merged["value"], str):
            merged["value"] = merged["value"].name
        return merged


def _tree_in_store(store: RecordStore, options: dict[str, Any], meta_recid: int | None,
                   lock: threading.RLock, allow_pickle: bool) -> TreeMap:
    return TreeMap.in_store(store, meta_recid=meta_recid, lock=lock, allow_pickle=allow_pickle,
                            **options)


def _copy_tree_in_key_order(source: TreeMap, target: TreeMap) -> None:
    """Ascending appends leave full leaves behind, each page written once; pickled values go
    across as placeholders, their bytes, never unpickled."""
    for keys, values in source._stored_chunks(None, None, (True, True), False, True):
        for key, value in zip(keys, values):
            target[key] = value


def _no_region_bytes(tree: TreeMap) -> int:
    """A tree keeps every node in a store record."""
    return 0


def _hash_in_store(store: RecordStore, options: dict[str, Any], meta_recid: int | None,
                   lock: threading.RLock, allow_pickle: bool) -> LongHashMap:
    return LongHashMap.in_store(store, options["value"], meta_recid, lock=lock,
                                allow_pickle=allow_pickle)


TREE_MAP = CollectionKind(
    name="tree_map", collection=TreeMap, reader=TreeReader,
    defaults=MappingProxyType(dict(NEW_MAP_DEFAULTS, compression=None,
                                   write_cache=True, flush_delay=None,
                                   cache_bytes=DEFAULT_CACHE_BYTES, cache_size=None)),
    fixed=("key", "value", "node_size"), in_store=_tree_in_store,
    standalone_meta_recid=tree_meta_recid, copy_compacted=_copy_tree_in_key_order,
    region_bytes=_no_region_bytes)

HASH_MAP = CollectionKind(
    name="hash_map", collection=LongHashMap, reader=HashReader,
    defaults=MappingProxyType(dict(value="object")), fixed=("value",), in_store=_hash_in_store,
    standalone_meta_recid=hash_meta_recid, copy_compacted=LongHashMap._copy_to,
    region_bytes=LongHashMap._table_bytes)  # the hash table's three arrays

def _tree_set_in_store(store: RecordStore, options: dict[str, Any], meta_recid: int | None,
                       lock: threading.RLock, allow_pickle: bool) -> TreeSet:
    """A set's values are ``b""``: nothing of it is ever pickled, whatever the DB allows."""
    return TreeSet.in_store(store, meta_recid, lock=lock, **options)


def _hash_set_in_store(store: RecordStore, options: dict[str, Any], meta_recid: int | None,
                       lock: threading.RLock, allow_pickle: bool) -> LongHashSet:
    """A set has no values: nothing of it is ever pickled, whatever the DB allows."""
    return LongHashSet.in_store(store, meta_recid, lock=lock)


def _tree_set_region_bytes(treeset: TreeSet) -> int:
    """A tree set keeps every node in a store record, as a tree does."""
    return 0


TREE_SET = CollectionKind(
    name="tree_set", collection=TreeSet, reader=TreeSetReader,
    defaults=MappingProxyType(dict(key="int64", node_size=new_set_defaults(None)["node_size"],
                                   compression=None,
                                   write_cache=True, flush_delay=None,
                                   cache_bytes=DEFAULT_CACHE_BYTES, cache_size=None)),
    fixed=("key", "node_size"), in_store=_tree_set_in_store,
    standalone_meta_recid=tree_meta_recid, copy_compacted=TreeSet._copy_compacted,
    region_bytes=_tree_set_region_bytes,
    derived_defaults=lambda merged: {"node_size": new_set_defaults(merged["key"])["node_size"]})

HASH_SET = CollectionKind(
    name="hash_set", collection=LongHashSet, reader=HashSetReader,
    defaults=MappingProxyType({}), fixed=(), in_store=_hash_set_in_store,
    standalone_meta_recid=hash_meta_recid, copy_compacted=LongHashSet._copy_to,
    region_bytes=LongHashSet._table_bytes)


def _keyed_hash_in_store(store: RecordStore, options: dict[str, Any], meta_recid: int | None,
                         lock: threading.RLock, allow_pickle: bool) -> HashMap:
    return HashMap.in_store(store, options["value"], meta_recid, lock=lock,
                            allow_pickle=allow_pickle, key=options["key"])


def _keyed_set_in_store(store: RecordStore, options: dict[str, Any], meta_recid: int | None,
                        lock: threading.RLock, allow_pickle: bool) -> HashSet:
    """A set has no values: nothing of it is ever pickled, whatever the DB allows."""
    return HashSet.in_store(store, meta_recid, lock=lock, key=options["key"])


KEYED_HASH_MAP = CollectionKind(
    name="keyed_hash_map", collection=HashMap, reader=HashReader,
    defaults=MappingProxyType(dict(key="object", value="object")), fixed=("key", "value"),
    in_store=_keyed_hash_in_store, standalone_meta_recid=hash_meta_recid,
    copy_compacted=HashMap._copy_to, region_bytes=HashMap._table_bytes)

KEYED_HASH_SET = CollectionKind(
    name="keyed_hash_set", collection=HashSet, reader=HashSetReader,
    defaults=MappingProxyType(dict(key="object")), fixed=("key",),
    in_store=_keyed_set_in_store, standalone_meta_recid=hash_meta_recid,
    copy_compacted=HashSet._copy_to, region_bytes=HashSet._table_bytes)

KINDS: Mapping[str, CollectionKind[Any, Any]] = MappingProxyType(
    {kind.name: kind for kind in (TREE_MAP, HASH_MAP, TREE_SET, HASH_SET, KEYED_HASH_MAP,
                                  KEYED_HASH_SET)})
"""Every kind by its catalog name; salvage tries a standalone file's root on each in this order
(every standalone hash file's root is a LongHashMap's: salvage tells the four hash kinds
apart by the metadata, :func:`offheap.db.salvage._standalone_kind`)."""


def kind_named(name: str) -> CollectionKind[Any, Any]:
    """The registered kind called ``name`` in a catalog; CorruptionError for an unknown one."""
    try:
        return KINDS[name]
    except KeyError:
        raise CorruptionError(f"the DB catalog names an unknown collection kind {name!r}; "
                              f"known: {', '.join(KINDS)}") from None
