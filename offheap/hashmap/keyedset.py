"""HashSet: a set of elements of one key type in a keyed table without values (layer 6).

``HashSet(key="str" | "bytes" | "int64" | "object")`` is to :class:`~offheap.HashMap` what
:class:`~offheap.LongHashSet` is to :class:`~offheap.LongHashMap`: the keyed table
(:mod:`offheap.hashmap.keyedlayout`) with a value width of 0, each element an entry's key slot,
so an element costs its 16-byte slot and a live bit (a long element's record besides) before
the index's 4 bytes a slot. Admission and equality of elements are the key type's
(:mod:`offheap.hashmap.keyslots`); the set operations, algebra, comparisons, copies and pickles
are LongHashSet's (:mod:`offheap.collection.setapi`), on columns that are lists of elements.

Thread safety: as LongHashSet's, every operation under the set's lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from offheap.hashmap.keyedcore import KeyedMapCore, LockedKeyedCore
from offheap.hashmap.keyedtable import KeyedTable, as_list
from offheap.hashmap.locking import locked
from offheap.hashmap.longhashset import HashSetFacade, SetOperations
from offheap.kernels.sizes import ByteLimit
from offheap.store.records import RecordStore
from offheap.store.serializers import EMPTY, Serializer


class KeyedSetFacade(KeyedTable, HashSetFacade):
    """Everything of a HashSet above its core (see the module docstring)."""

    _kind = "HashSet"

    def __init__(self, elements: Iterable[Any] = (), /, *, key: str | None = None,
                 limit: ByteLimit = None, path=None, durability: str = "commit",
                 readonly: bool = False, verify: bool = True, recover: bool = False,
                 create: bool = True) -> None:
        self._ask_key_type(key)
        super().__init__(elements, limit=limit, path=path, durability=durability,
                         readonly=readonly, verify=verify, recover=recover, create=create)

    @classmethod
    def in_store(cls, store: RecordStore, meta_recid: int | None = None,
                 lock: threading.RLock | None = None, *, key: str | None = None):
        """A set kept in a shared store (a :class:`~offheap.db.DB`); ``key`` as for
        :meth:`HashMap.in_store <offheap.HashMap.in_store>`."""
        hashset = cls.__new__(cls)
        hashset._ask_key_type(key)
        hashset._setup(store, EMPTY, meta_recid=meta_recid, owns_store=False, lock=lock,
                       allow_pickle=False)
        return hashset

    @locked
    def add_many(self, elements) -> None:
        """Add a column of elements (a list, a numpy array or any iterable) as one operation:
        all or nothing."""
        elements = as_list(elements)
        self._put_column(elements, [None] * len(elements))

    @locked
    def contains_many(self, elements) -> np.ndarray:
        """A bool array: which elements are in the set."""
        return self._contains_column(elements)

    @locked
    def discard_many(self, elements) -> int:
        """Remove the elements of a column that are present; return how many went."""
        return self._delete_column(elements)

    def copy(self):
        """A new anonymous set with the same elements in the same order and the same options."""
        twin = type(self)(**self._twin_options())
        twin.add_many(self._elements())
        return twin

    __copy__ = copy

    @locked
    def _copy_to(self, other: KeyedSetFacade) -> None:  # type: ignore[override]
        """Make ``other``, an empty set of the same key type in another store (a compacted
        DB's), hold this set's elements in the same order; long elements get records there."""
        other.add_many(self._elements())

    def _column(self, elements) -> list:  # type: ignore[override]  # str/bytes columns are lists
        return as_list(elements)

    @locked
    def _elements(self) -> list:  # type: ignore[override]  # as _column
        self._check_open()
        return self._live_keys()

    def _twin_options(self) -> dict:
        return dict(super()._twin_options(), key=self._keycodec.key_type)

    def _element_serializer(self) -> Serializer:
        return self._key_serializer()


class HashSet(SetOperations, KeyedMapCore, KeyedSetFacade):
    """A ``MutableSet`` of elements of one key type (``key=``: ``"str"``, ``"bytes"``,
    ``"int64"``, ``"object"``, as :class:`~offheap.HashMap`'s keys), stored off the Python heap
    in the order they were added (``pop()`` takes the last). The options, files, algebra and
    bulk paths are :class:`~offheap.LongHashSet`'s; an element the key type cannot hold is
    never in the set, and adding one raises the TypeError (or ValueError) a dict key would.
    """

    _kind = "HashSet"
    add = KeyedMapCore._add_key  # the core's method itself: ``s.add(x)`` runs no Python frame


class ReferenceHashSet(SetOperations, LockedKeyedCore, KeyedSetFacade):
    """A HashSet on the keyed pure-Python reference core whatever :mod:`offheap.kernels.native`
    selected: what the differential tests hold the compiled core to."""

    _kind = "HashSet"
    add = LockedKeyedCore._add_key
