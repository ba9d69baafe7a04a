"""LongHashMap: an int64-keyed hash map whose entries live in an arena (layer 6).

The table format (an insertion-ordered entry array under a Robin Hood index) is
:mod:`offheap.hashmap.layout`. The class is built from four parts:

- the *core* (:mod:`offheap.hashmap.core`, or its compiled twin ``offheap.hashmap._core``, chosen
  by :mod:`offheap.kernels.native`): the scalar dict operations, reached through the type's slots;
- the *regions* (:mod:`offheap.hashmap.regions`): one table shape's arena memory;
- the *table facade* (:mod:`offheap.hashmap.table`, shared with
  :class:`~offheap.LongHashSet`): construction and files, metadata, and what a DB, a reader,
  compaction and salvage need; with the bulk numpy paths (:mod:`offheap.hashmap.bulk`) and
  growth as mixins;
- this module: the dict interface beyond the core, stats and reprs.

Growth is :mod:`offheap.hashmap.growth`: a larger index, another chunk of entries, a wider value
column or the compaction of holes, each one step that allocates before it changes anything.

Failure atomicity: every step that allocates (a value record, a new shape) happens before the
table changes and is undone if a later step fails; a :class:`CapacityError` leaves the map
exactly as it was.

Thread safety: as a dict's. Each operation is atomic: the map's one re-entrant lock
(``_lock``; a DB's collections share the DB's) is held by every method of the facade and by the
core's steps that call Python code, and the compiled core's fast paths run without it only
while it is free, never giving up the GIL (:mod:`offheap.hashmap.locking` states the rule).
Threads writing disjoint keys, readers and iterators may share one map without a lock of their
own; an iterator raises RuntimeError at its next step once another thread changed the map's
size, as a dict's does.
"""

from __future__ import annotations

import os
import threading
from collections.abc import ItemsView, Iterator, KeysView, Mapping, MutableMapping, ValuesView
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from offheap.arena.arena import format_bytes
from offheap.collection.dictapi import DictAPI
from offheap.collection.display import html_table, setting_rows, settings_text
from offheap.collection.locks import new_lock
from offheap.collection.readers import open_file_reader
from offheap.hashmap.bulk import BulkOperations
from offheap.hashmap.locking import LockedReferenceCore, locked
from offheap.hashmap.reader import HashReader
from offheap.hashmap.table import (
    MapCore,
    TableFacade,
    bind_core_methods,
    own_store,
    standalone_meta_recid,
    table_serializer,
)
from offheap.kernels.sizes import ByteLimit
from offheap.store.records import RecordStore
from offheap.store.serializers import INT64, get_serializer

@dataclass(frozen=True)
class HashMapStats:
    """Size and memory figures of a :class:`LongHashMap`."""

    n_entries: int
    n_slots: int
    load_factor: float
    value_width_bytes: int
    external_values: int
    reserved_bytes: int
    used_bytes: int

    @property
    def bytes_per_entry(self) -> float:
        return self.reserved_bytes / self.n_entries if self.n_entries else float("nan")


class HashMapFacade(TableFacade, DictAPI, MutableMapping):
    """Everything of a LongHashMap above its core (see the module docstring); a concrete map
    class puts a core first in its bases."""

    if TYPE_CHECKING:
        def get(self, key: Any, default: Any = None, /) -> Any: ...

    _kind = "LongHashMap"

    _lock: threading.RLock  # the map's (or its DB's) lock: offheap.hashmap.locking

    # the bulk paths (offheap.hashmap.bulk), each call one operation under the lock
    put_many = locked(BulkOperations.put_many)
    get_many = locked(BulkOperations.get_many)
    contains_many = locked(BulkOperations.contains_many)
    delete_many = locked(BulkOperations.delete_many)

    def __init__(self, data=(), /, *, value=None, limit: ByteLimit = None, path=None,
                 durability: str = "commit", readonly: bool = False, verify: bool = True,
                 recover: bool = False, create: bool = True,
                 allow_pickle: bool = False) -> None:
        self._refuse_readonly(readonly)
        if path is None:
            store = own_store(limit)
            self._setup(store, get_serializer(value or "object"), meta_recid=None, owns_store=True,
                        allow_pickle=True)
        else:
            store = RecordStore.file(path, limit_bytes=limit, durability=durability,
                                     verify=verify, recover=recover, create=create)
            self._open_file(store, value, allow_pickle)
        if type(data) is not tuple or data:  # () adds nothing (an update costs ~20 us even so)
            self.update(data)

    @classmethod
    def reader(cls, path: str | os.PathLike[str], value=None, *, limit: ByteLimit = None,
               verify: bool = True, recover: bool = False,
               allow_pickle: bool = False) -> HashReader:
        """A read-only :class:`~offheap.hashmap.reader.HashReader` of the map file (of this
        class: LongHashMap, HashMap) at ``path``, beside the one writer process (:mod:`offheap.collection.readers`). ``value``
        is the constructor's (None: the file's); ``limit``, ``verify``, ``recover`` and
        ``allow_pickle`` apply to this open."""

        lock = new_lock()  # the map's and the read session's: one lock order

        def build(store: RecordStore) -> HashMapFacade:
            hashmap = cls.__new__(cls)
            meta_recid = standalone_meta_recid(store.root)
            serializer = get_serializer(value or table_serializer(
                cls._stored_value_type(store, meta_recid)))
            hashmap._setup(store, serializer, meta_recid=meta_recid, owns_store=True, lock=lock,
                           allow_pickle=allow_pickle)
            return hashmap

        return open_file_reader(path, build, HashReader, limit_bytes=limit, verify=verify,
                                recover=recover, lock=lock)

    @classmethod
    def in_store(cls, store: RecordStore, value="object", meta_recid: int | None = None,
                 lock: threading.RLock | None = None, *, allow_pickle: bool):
        """A map kept in a shared store (a :class:`~offheap.db.DB`); ``meta_recid`` reopens one.
        ``lock`` (from :func:`~offheap.collection.locks.new_lock`) is the store owner's, which
        every collection writing to the store holds; None gives the map its own.
        ``allow_pickle`` is the opener's (:class:`LongHashMap`): a file DB passes its own."""
        hashmap = cls.__new__(cls)
        hashmap._setup(store, get_serializer(value), meta_recid=meta_recid, owns_store=False,
                       lock=lock, allow_pickle=allow_pickle)
        return hashmap

    # -- the dict interface beyond the core ---------------------------------------------------

    def keys(self) -> KeysView:
        return _CoreKeysView(self)

    def __reversed__(self) -> Iterator:
        """The keys, last inserted first, as ``reversed(dict)``."""
        return self._reversed_entries(0)

    def values(self) -> ValuesView:
        return _CoreValuesView(self)

    def items(self) -> ItemsView:
        return _CoreItemsView(self)

    @locked
    def update(self, other=(), /, **kwargs) -> None:
        """As ``dict.update``: from a mapping (anything with ``keys()``) or ``(key, value)``
        pairs; a LongHashMap or a Mapping goes through :meth:`put_many` in one vectorized step.
        Columns of keys and values are :meth:`put_many`."""
        if kwargs:
            raise TypeError("LongHashMap keys are int64; keyword arguments would be str keys")
        if isinstance(other, HashMapFacade):
            self.put_many(*other._export())
        elif isinstance(other, Mapping) or hasattr(other, "keys"):
            keys = list(other.keys())
            self.put_many(keys, [other[k] for k in keys])
        else:
            keys, values = [], []
            for n, pair in enumerate(other):
                try:
                    key, value = pair
                except (TypeError, ValueError):
                    raise ValueError(f"update sequence element #{n} is not a (key, value) pair") from None
                keys.append(key)
                values.append(value)
            self.put_many(keys, values)

    def _twin_options(self) -> dict:
        return dict(value=self._slots.serializer, limit=self._store.arena.limit_bytes)

    def _column_serializers(self) -> tuple:
        return INT64, self._slots.serializer

    # -- introspection and lifetime -----------------------------------------------------------

    @locked
    def stats(self) -> HashMapStats:
        self._check_open()
        r = self._table()
        return HashMapStats(
            n_entries=self._n, n_slots=r.n_slots, load_factor=self._n / r.homes,
            value_width_bytes=r.width, external_values=self._count_external(),
            reserved_bytes=self._store.arena.reserved_bytes,
            used_bytes=self._store.arena.used_bytes)

    @locked
    def __repr__(self) -> str:
        if self._closed:
            return f"<{self._kind} (closed)>"
        s = self.stats()
        per_entry = f"{s.bytes_per_entry:.1f} B/entry" if self._n else "empty"
        return (f"<{self._kind} {self._n:,} entries, {self._types_text()}, "
                f"{format_bytes(s.reserved_bytes)} reserved, {per_entry}, load {s.load_factor:.2f}, "
                f"{'compiled' if self._compiled_core else 'pure-Python'} core"
                f"{settings_text(self._store.arena)}>")

    @locked
    def _repr_html_(self) -> str:
        if self._closed:
            return f"<p><b>{self._kind}</b> (closed)</p>"
        s = self.stats()
        rows = [("entries", f"{s.n_entries:,}"), *self._type_rows(),
                ("reserved", format_bytes(s.reserved_bytes)),
                ("bytes/entry", f"{s.bytes_per_entry:.2f}" if s.n_entries else "-"),
                ("slots", f"{s.n_slots:,}"), ("load factor", f"{s.load_factor:.3f}"),
                ("value slot width", f"{s.value_width_bytes} B"),
                ("core", "compiled" if self._compiled_core else "pure Python"),
                *setting_rows(self._store.arena)]
        return html_table(self._kind, rows)

    def _types_text(self) -> str:
        """The key and value types as the repr names them."""
        return f"value={self._slots.serializer.name}"

    def _type_rows(self) -> list[tuple[str, str]]:
        """The key and value types as rows of the HTML repr."""
        return [("value type", self._slots.serializer.name)]


    @locked
    def _export(self) -> tuple[np.ndarray, object]:
        """All keys (int64 array) and values (ndarray or list), in entry order."""
        self._check_open()
        keys, words = self._live_entries()
        values = self._slots.decode_many(words)
        return keys, values if self._slots.typed else values.tolist()



class LongHashMap(MapCore, HashMapFacade):
    """A ``MutableMapping[int, V]`` for int64 keys, stored off the Python heap, in insertion
    order like a dict.

    ``value`` names the value serializer: ``"object"`` (any picklable value; small ones inline),
    ``"int64"``, ``"float64"``, ``"str"`` or ``"bytes"``. ``limit`` caps the memory in bytes
    (:class:`CapacityError` beyond it).

    With ``path`` the map lives in that file and ``LongHashMap(path=...)`` alone opens it again:
    the file remembers ``value`` (another one is a ValueError). With
    ``durability="commit"`` (the default) :meth:`commit` makes every change durable at once,
    :meth:`rollback` drops the changes since, and :meth:`close` commits; ``durability="none"``
    writes through to the file, like MapDB without transactions (see ``docs/durability.md``).
    :meth:`reader` opens a read-only :class:`~offheap.hashmap.reader.HashReader` of the file,
    which follows the commits of the one writer process (``readonly=True`` here is a TypeError
    naming it). ``verify`` checks the page checksums on open; ``recover=True`` opens a file
    that was not closed cleanly (for :func:`offheap.salvage`); ``create=False`` opens an
    existing file only (:class:`~offheap.errors.MissingFileError` when the path names nothing).
    ``allow_pickle=True`` lets this open read and write ``"object"`` values stored with pickle,
    which a file's author could make run any code: without it they raise
    :class:`~offheap.errors.PickleNotAllowedError` (:mod:`offheap.store.pickled`); an anonymous
    map always allows them.
    """


bind_core_methods(LongHashMap)  # dict's call speed for m.get(k) and the like


class ReferenceLongHashMap(LockedReferenceCore, HashMapFacade):
    """A LongHashMap on the pure-Python reference core whatever :mod:`offheap.kernels.native`
    selected: what the differential tests and the benchmarks hold the compiled core to. Its
    files are the same bytes."""


class _CoreKeysView(KeysView):
    def __reversed__(self):
        return self._mapping._reversed_entries(0)


class _CoreValuesView(ValuesView):
    def __iter__(self):
        return self._mapping._iter_values()

    def __reversed__(self):
        return self._mapping._reversed_entries(1)


class _CoreItemsView(ItemsView):
    def __iter__(self):
        return self._mapping._iter_items()

    def __reversed__(self):
        return self._mapping._reversed_entries(2)


