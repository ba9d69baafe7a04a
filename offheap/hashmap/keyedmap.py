"""HashMap: a hash map for keys of any of four key types, its entries in an arena (layer 6).

``HashMap(key="str" | "bytes" | "int64" | "object")`` is LongHashMap's table (the same index,
insertion order, growth, files, DB protocol) with a key column of 16-byte key slots and a
seeded hash, :mod:`offheap.hashmap.keyedlayout`; how a key becomes its bytes, which keys a
key type admits, and how ``1 == 1.0 == True`` are one key of an ``"object"`` map is
:mod:`offheap.hashmap.keyslots`. The parts:

- the core: LongHashMap's compiled core made a keyed table's (offheap/hashmap/csrc/keys.c), or
  its pure-Python reference :class:`~offheap.hashmap.keyedcore.KeyedCore` under the map's lock,
  as :mod:`offheap.kernels.native` selects;
- the key codec (:class:`~offheap.hashmap.keycodec.KeyCodec`): keys in and out of their slots,
  and the records of long keys;
- the facade shared with LongHashMap (:class:`~offheap.hashmap.longhashmap.HashMapFacade`), with
  what a keyed table changes in it (:class:`~offheap.hashmap.keyedtable.KeyedTable`: the
  metadata record, the key column's items, long keys' records, the bulk steps over columns of
  keys), and here the map's interface to them.

Failure atomicity: as LongHashMap's; a long key's record is made only once the table has room
for the entry, and ``put_many`` makes every record and all the room before it changes an entry.

Thread safety: as a dict's, by the map's one lock (:mod:`offheap.hashmap.locking`).
"""

from __future__ import annotations

import threading

import numpy as np

from offheap.hashmap.keyedcore import KeyedMapCore, LockedKeyedCore
from offheap.hashmap.keyedtable import KeyedTable
from offheap.hashmap.locking import locked
from offheap.hashmap.longhashmap import HashMapFacade
from offheap.hashmap.table import bind_core_methods
from offheap.kernels.sizes import ByteLimit
from offheap.store.records import RecordStore
from offheap.store.serializers import get_serializer


class KeyedFacade(KeyedTable, HashMapFacade):
    """Everything of a HashMap above its core (see the module docstring)."""

    _kind = "HashMap"

    def __init__(self, data=(), /, *, key: str | None = None, value=None, limit: ByteLimit = None,
                 path=None, durability: str = "commit", readonly: bool = False,
                 verify: bool = True, recover: bool = False, create: bool = True,
                 allow_pickle: bool = False, **kwargs) -> None:
        self._ask_key_type(key)
        super().__init__(data, value=value, limit=limit, path=path, durability=durability,
                         readonly=readonly, verify=verify, recover=recover, create=create,
                         allow_pickle=allow_pickle)
        if kwargs:
            self.update(**kwargs)

    @classmethod
    def in_store(cls, store: RecordStore, value="object", meta_recid: int | None = None,
                 lock: threading.RLock | None = None, *, allow_pickle: bool,
                 key: str | None = None):
        """A map kept in a shared store (a :class:`~offheap.db.DB`), as
        :meth:`LongHashMap.in_store <offheap.LongHashMap.in_store>`; ``key`` is a new map's key
        type (a stored one's is checked against it)."""
        hashmap = cls.__new__(cls)
        hashmap._ask_key_type(key)
        hashmap._setup(store, get_serializer(value), meta_recid=meta_recid, owns_store=False,
                       lock=lock, allow_pickle=allow_pickle)
        return hashmap

    @locked
    def update(self, other=(), /, **kwargs) -> None:
        """As ``dict.update``: a mapping or ``(key, value)`` pairs, then keyword arguments as
        str keys (of a map of "str" or "object" keys)."""
        if kwargs and self._keycodec.key_type not in ("str", "object"):
            raise TypeError(f'keyword arguments are str keys; a HashMap(key='
                            f'"{self._keycodec.key_type}") does not take them')
        super().update(other)
        if kwargs:
            self.put_many(list(kwargs), list(kwargs.values()))

    # -- bulk paths: keys as lists or numpy arrays ---------------------------------------------

    @locked
    def put_many(self, keys, values) -> None:
        """Insert or overwrite many entries, as ``dict.update`` with the pairs in order; all or
        nothing (:meth:`~offheap.hashmap.keyedtable.KeyedTable._put_column`)."""
        self._put_column(keys, values)

    @locked
    def get_many(self, keys, default=None):
        """The values of many keys (a list or numpy array of keys): a list, ``default`` for the
        missing ones; an ndarray for typed values, where missing keys without a default are a
        KeyError (None has no int64/float64 form), as LongHashMap's."""
        return self._get_column(keys, default)

    @locked
    def contains_many(self, keys) -> np.ndarray:
        """A bool array: which keys are in the map."""
        return self._contains_column(keys)

    @locked
    def delete_many(self, keys) -> int:
        """Remove the keys that are present (absent ones are ignored); return how many went."""
        return self._delete_column(keys)

    # -- what the facade asks of the map -------------------------------------------------------

    @locked
    def _export(self) -> tuple[list, object]:  # type: ignore[override]  # keys as a list
        """All keys (a list) and values (ndarray or list), in entry order."""
        keys, values = super()._export()
        return self._keycodec.keys_of_slots(keys), values

    def _twin_options(self) -> dict:
        return dict(super()._twin_options(), key=self._keycodec.key_type)

    def _column_serializers(self) -> tuple:
        return self._key_serializer(), self._slots.serializer

    def _types_text(self) -> str:
        return f"key={self._keycodec.key_type}, {super()._types_text()}"

    def _type_rows(self) -> list[tuple[str, str]]:
        return [("key type", self._keycodec.key_type), *super()._type_rows()]

    @locked
    def _copy_to(self, other: KeyedFacade) -> None:  # type: ignore[override]
        """Make ``other``, an empty map of the same key and value type in another store, hold
        this map's entries in the same order (long keys' and values' records copied), each
        value as stored: a pickled one as its placeholder, never unpickled."""
        self._check_open()
        keys, words = self._live_entries()
        values = self._slots.load_many(words)
        other.put_many(self._keys_out(keys), values if self._slots.typed else values.tolist())


class HashMap(KeyedMapCore, KeyedFacade):
    """A ``MutableMapping`` for keys of one key type, stored off the Python heap, in insertion
    order like a dict.

    ``key`` is the key type: ``"str"``, ``"bytes"`` (bytes, bytearray, memoryview; read back
    as bytes), ``"int64"`` or ``"object"`` (None, int, float, str, bytes and tuples of these,
    equal keys as in a dict: ``1``, ``1.0`` and ``True`` are one key; a NaN is refused). A new
    map without ``key=`` takes ``"object"``; a file remembers its key type, and ``key=`` when
    reopening it must name the same one. Keys are hashed with SipHash-1-3 under a random seed
    kept in the map, so keys crafted to collide cannot slow it down. The other options are
    :class:`~offheap.LongHashMap`'s; keyword arguments (``HashMap(key="str", a=1)``) are
    entries, as dict's.
    """


bind_core_methods(HashMap)  # dict's call speed for m.get(k) and the like


class ReferenceHashMap(LockedKeyedCore, KeyedFacade):
    """A HashMap on the keyed pure-Python reference core whatever :mod:`offheap.kernels.native`
    selected: what the differential tests hold the compiled core to. Its files are the same
    bytes."""
