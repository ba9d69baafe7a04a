"""LongHashSet: a set of int64 elements in a LongHashMap table without values (layer 6).

A set is the table of :mod:`offheap.hashmap.layout` with a value width of 0: each element is an
entry's int64 key, and a chunk holds the keys and the live bits only (8.125 bytes an entry
before the index's 4 bytes a slot). The probe, insertion order, growth, files, metadata and the
collection protocol are the map's (:mod:`offheap.hashmap.table`, on the same compiled or
pure-Python core); this module adds ``MutableSet``, the bulk paths under a set's names and the
set algebra of :mod:`offheap.collection.setapi`.

The core's mapping operations that a set has no use for are not part of the class: ``s[x]``,
``s[x] = v`` and ``del s[x]`` raise the TypeError a ``set`` raises, and ``get``, ``setdefault``,
``popitem``, ``values`` and ``items`` are no attributes of it.

Thread safety: as LongHashMap's (the table's MapLock): each operation is atomic, ``in`` and
``len`` run in the compiled core without taking the lock while it is free.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, MutableSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from offheap.arena.arena import format_bytes
from offheap.collection.display import html_table, setting_rows, settings_text
from offheap.collection.locks import new_lock
from offheap.collection.readers import open_file_reader
from offheap.collection.setapi import SetAPI
from offheap.hashmap.bulk import BulkOperations
from offheap.hashmap.layout import as_key_array
from offheap.hashmap.locking import LockedReferenceCore, locked
from offheap.hashmap.reader import HashSetReader
from offheap.hashmap.table import MapCore, TableFacade, own_store, standalone_meta_recid
from offheap.kernels.sizes import ByteLimit
from offheap.store.records import RecordStore
from offheap.store.serializers import EMPTY, INT64, Serializer

if TYPE_CHECKING:
    from offheap.hashmap.core import MapCore as _CoreBase  # what super() reaches
else:
    _CoreBase = object


@dataclass(frozen=True)
class HashSetStats:
    """Size and memory figures of a :class:`LongHashSet`."""

    n_entries: int
    n_slots: int
    load_factor: float
    reserved_bytes: int
    used_bytes: int

    @property
    def bytes_per_entry(self) -> float:
        return self.reserved_bytes / self.n_entries if self.n_entries else float("nan")


class _NotASetAttribute:
    """A core method that a set does not have: reading it raises AttributeError, as for a name
    the class never defined."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, instance: object, owner: type | None = None) -> NoReturn:
        kind = (owner or type(instance)).__name__
        raise AttributeError(f"'{kind}' object has no attribute '{self._name}'")


class SetOperations(_CoreBase):
    """The set's operations on its core, first in a set class's bases: they replace the core's
    mapping operations (module docstring) and reach the core through ``super()``, the next class
    in the order (the compiled or the reference core)."""

    _kind = "LongHashSet"  # before the reference core's "LongHashMap" in the bases

    if TYPE_CHECKING:
        def _check_open(self) -> None: ...

    def discard(self, element) -> None:
        super().pop(element, None)

    def remove(self, element) -> None:
        """Remove ``element``; KeyError if it is not present."""
        super().__delitem__(element)

    @locked
    def pop(self) -> int:  # type: ignore[override]  # set's pop replaces the mapping's
        """Remove and return the last element added (the table's order); KeyError when empty."""
        self._check_open()
        if not len(self):
            raise KeyError(f"pop from an empty {self._kind}")
        return super().popitem()[0]

    def __getitem__(self, element) -> NoReturn:
        raise TypeError(f"'{type(self).__name__}' object is not subscriptable")

    def __setitem__(self, element, value) -> NoReturn:
        raise TypeError(f"'{type(self).__name__}' object does not support item assignment")

    def __delitem__(self, element) -> NoReturn:
        raise TypeError(f"'{type(self).__name__}' object doesn't support item deletion")

    get = setdefault = popitem = _iter_values = _iter_items = _NotASetAttribute()


class HashSetFacade(TableFacade, SetAPI, MutableSet):
    """Everything of a LongHashSet above its core (see the module docstring); a concrete set
    class puts :class:`SetOperations` and a core first in its bases."""

    index_growth = 1.25  # offheap.hashmap.growth: the index is a third of a set's memory

    def __init__(self, elements: Iterable[Any] = (), /, *, limit: ByteLimit = None, path=None,
                 durability: str = "commit", readonly: bool = False, verify: bool = True,
                 recover: bool = False, create: bool = True) -> None:
        self._refuse_readonly(readonly)
        if path is None:
            store = own_store(limit)
            self._setup(store, EMPTY, meta_recid=None, owns_store=True, allow_pickle=False)
        else:
            store = RecordStore.file(path, limit_bytes=limit, durability=durability,
                                     verify=verify, recover=recover, create=create)
            self._open_file(store, EMPTY, False)  # a set has no values to unpickle
        if type(elements) is not tuple or elements:  # () adds nothing (an update costs ~20 us)
            self.update(elements)

    @classmethod
    def reader(cls, path: str | os.PathLike[str], *, limit: ByteLimit = None,
               verify: bool = True, recover: bool = False) -> HashSetReader:
        """A read-only :class:`~offheap.hashmap.reader.HashSetReader` of the set file (of this
        class: LongHashSet, HashSet) at ``path``, beside the one writer process
        (:mod:`offheap.collection.readers`)."""
        lock = new_lock()

        def build(store: RecordStore) -> HashSetFacade:
            hashset = cls.__new__(cls)
            hashset._setup(store, EMPTY, meta_recid=standalone_meta_recid(store.root),
                           owns_store=True, lock=lock, allow_pickle=False)
            return hashset

        return open_file_reader(path, build, HashSetReader, limit_bytes=limit, verify=verify,
                                recover=recover, lock=lock)

    @classmethod
    def in_store(cls, store: RecordStore, meta_recid: int | None = None,
                 lock: threading.RLock | None = None):
        """A set kept in a shared store (a :class:`~offheap.db.DB`); ``meta_recid`` reopens one;
        ``lock`` as for :meth:`LongHashMap.in_store <offheap.LongHashMap.in_store>`."""
        hashset = cls.__new__(cls)
        hashset._setup(store, EMPTY, meta_recid=meta_recid, owns_store=False, lock=lock,
                       allow_pickle=False)
        return hashset

    # -- bulk paths ---------------------------------------------------------------------------

    @locked
    def add_many(self, elements) -> None:
        """Add a column of int64 elements (a numpy integer array or any sequence), as one
        operation: all or nothing under a CapacityError."""
        self._check_open()
        keys = np.ascontiguousarray(as_key_array(elements))
        self._put_batch(keys, np.zeros(len(keys), np.uint64), 0, np.zeros(1, np.int64))

    contains_many = locked(BulkOperations.contains_many)

    @locked
    def discard_many(self, elements) -> int:
        """Remove the elements of a column that are present; return how many went."""
        self._check_open()
        keys = np.ascontiguousarray(as_key_array(elements))
        return self._remove_keys(keys, np.empty(len(keys), np.uint64))

    def copy(self):
        """A new anonymous set with the same elements in the same order and the same options:
        the table's index and chunks copied as they are (memory copies, no probing), since a
        set's table holds no value records."""
        self._check_open()
        twin = type(self)(**self._twin_options())
        with self._lock:
            self._check_open()
            twin._copy_regions_of(self)
        return twin

    __copy__ = copy

    def _column(self, elements) -> np.ndarray:
        return as_key_array(elements if isinstance(elements, np.ndarray) else list(elements))

    @locked
    def _elements(self) -> np.ndarray:
        self._check_open()
        return self._live_entries()[0]

    def _twin_options(self) -> dict:
        return dict(limit=self._store.arena.limit_bytes)

    def _element_serializer(self) -> Serializer:
        return INT64

    # -- introspection ------------------------------------------------------------------------

    @locked
    def stats(self) -> HashSetStats:
        self._check_open()
        r = self._table()
        return HashSetStats(n_entries=len(self), n_slots=r.n_slots, load_factor=len(self) / r.homes,
                            reserved_bytes=self._store.arena.reserved_bytes,
                            used_bytes=self._store.arena.used_bytes)

    @locked
    def __repr__(self) -> str:
        if self._closed:
            return f"<{self._kind} (closed)>"
        s = self.stats()
        per_entry = f"{s.bytes_per_entry:.1f} B/element" if s.n_entries else "empty"
        return (f"<{self._kind} {s.n_entries:,} elements, {format_bytes(s.reserved_bytes)} "
                f"reserved, {per_entry}, load {s.load_factor:.2f}, "
                f"{'compiled' if self._compiled_core else 'pure-Python'} core"
                f"{settings_text(self._store.arena)}>")

    @locked
    def _repr_html_(self) -> str:
        if self._closed:
            return f"<p><b>{self._kind}</b> (closed)</p>"
        s = self.stats()
        rows = [("elements", f"{s.n_entries:,}"), ("reserved", format_bytes(s.reserved_bytes)),
                ("bytes/element", f"{s.bytes_per_entry:.2f}" if s.n_entries else "-"),
                ("slots", f"{s.n_slots:,}"), ("load factor", f"{s.load_factor:.3f}"),
                ("core", "compiled" if self._compiled_core else "pure Python"),
                *setting_rows(self._store.arena)]
        return html_table(self._kind, rows)


class LongHashSet(SetOperations, MapCore, HashSetFacade):
    """A ``MutableSet[int]`` of int64 elements stored off the Python heap, in the order they
    were added (iteration, ``pop()`` takes the last), at about 12 bytes an element.

    ``LongHashSet(elements, /, *, limit=None, path=None, durability="commit", verify=True,
    recover=False)``: ``elements`` is any iterable of ints (a numpy integer array is one bulk
    add). ``limit`` caps the memory in bytes (:class:`CapacityError` beyond it, the set
    unchanged). With ``path`` the set lives in that file, with LongHashMap's durability rules:
    :meth:`commit`, :meth:`rollback`, :meth:`close` commits; :meth:`reader` opens a read-only
    view of it in another process. ``x in s`` for an ``x`` that cannot be an int64 element
    (``"a"``, ``2**70``, ``1.5``) is False; adding one is a TypeError or OverflowError. Set
    algebra, comparisons, copies and pickles: :mod:`offheap.collection.setapi`; between two
    LongHashSets, or with a numpy array, they run on whole columns through the compiled bulk
    probe.
    """

    add = MapCore._add_key  # the core's method itself: ``s.add(x)`` runs no Python frame


class ReferenceLongHashSet(SetOperations, LockedReferenceCore, HashSetFacade):
    """A LongHashSet on the pure-Python reference core whatever :mod:`offheap.kernels.native`
    selected: what the differential tests hold the compiled core to. Its files are the same
    bytes."""

    add = LockedReferenceCore._add_key
