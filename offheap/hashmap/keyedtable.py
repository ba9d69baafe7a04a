"""What a keyed table changes in the facade of a hash table (layer 6): HashMap's and HashSet's.

:class:`KeyedTable` is a mixin before :class:`~offheap.hashmap.table.TableFacade` (through the
map's or the set's facade) in the bases of :class:`~offheap.hashmap.keyedmap.HashMap` and
:class:`~offheap.hashmap.keyedset.HashSet`. It overrides the facade's hooks where a keyed table
differs from LongHashMap's (:mod:`offheap.hashmap.keyedlayout`): the metadata record (key type
and seed), the key column's items (16-byte key slots, decoded by the key codec), the records of
long keys (freed by ``clear``, counted in the map's bytes, copied by compaction), and the bulk
steps over columns of keys of any key type: lists or numpy arrays.

Failure atomicity of :meth:`KeyedTable._put_column`: every key is admitted, every record
(values, long keys) made and the room for the new keys reserved before an entry changes; a
failure releases what was made and leaves the table as it was.

Thread safety: every method holds the table's lock (:func:`~offheap.hashmap.locking.locked`).
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from offheap.hashmap.core import MapCore as ReferenceCore
from offheap.hashmap.keycodec import KeyCodec, KeyProbe
from offheap.hashmap.keyedcore import KEY_SLOTS, KeyedCore
from offheap.hashmap.keyedlayout import KeyedMeta, pack_meta, parse_meta
from offheap.hashmap.keyslots import check_key_type
from offheap.hashmap.layout import TableMeta
from offheap.hashmap.locking import locked
from offheap.kernels.siphash import SEED_BYTES
from offheap.store.records import RecordStore
from offheap.store.serializers import Serializer, get_serializer

if TYPE_CHECKING:
    from offheap.hashmap.table import TableFacade as _FacadeBase  # what super() reaches
else:
    _FacadeBase = object

_COLUMN_SERIALIZERS = {"str": "str", "bytes": "bytes", "int64": "int64", "object": "object"}
"""The serializer that packs a column of each key type's keys (a pickle of the map or set)."""

_ABSENT = object()


class KeyedTable(_FacadeBase):
    """The keyed table's side of a hash map's or set's facade (see the module docstring)."""

    _key_dtype = KEY_SLOTS
    _keycodec: KeyCodec
    _key_type: str | None = None  # the key type asked for: a new table's, or None (a reader's
    #                               too) to take a file's

    if TYPE_CHECKING:
        # the core's (offheap.hashmap.keyedcore)
        def _probe(self, key: KeyProbe) -> tuple[int, int, int]: ...

        def _put(self, key: Any, word) -> None: ...  # a KeyProbe here

        def _encode(self, value): ...

        def _find_admitted(self, key) -> tuple[int, int]: ...

        _width: int

    def _ask_key_type(self, key: str | None) -> None:
        """Take the key type asked for (None: ``"object"`` for a new table, else the file's)."""
        self._key_type = None if key is None else check_key_type(key)

    @property
    def key_type(self) -> str:
        """The key type: ``"str"``, ``"bytes"``, ``"int64"`` or ``"object"``."""
        return self._keycodec.key_type

    # -- the table's hooks ---------------------------------------------------------------------

    def _setup(self, store: RecordStore, serializer, *, meta_recid, owns_store: bool,
               allow_pickle: bool, lock: threading.RLock | None = None) -> None:
        if meta_recid is None:  # a new table: a new seed; a stored one's comes with its record
            self._keycodec = KeyCodec(self._key_type or "object", os.urandom(SEED_BYTES), store)
        super()._setup(store, serializer, meta_recid=meta_recid, owns_store=owns_store,
                       allow_pickle=allow_pickle, lock=lock)

    def _meta_bytes(self, meta: TableMeta) -> bytes:
        return pack_meta(KeyedMeta(self._keycodec.key_type, self._keycodec.seed, meta))

    def _parse_meta(self, record: bytes) -> TableMeta:
        meta = parse_meta(record)
        if self._key_type is not None and meta.key != self._key_type:
            raise ValueError(f'the stored table has key="{meta.key}", not key="{self._key_type}"; '
                             f'open it with key="{meta.key}" (or no key=)')
        self._keycodec = KeyCodec(meta.key, meta.seed, self._store)
        return meta.table

    def _of_format_1(self, record: bytes) -> bool:
        return False  # keyed tables start at their format 1, after LongHashMap's 2

    @staticmethod
    def _stored_value_type(store: RecordStore, meta_recid: int | None) -> str:
        if meta_recid is None:
            return "object"
        try:
            return parse_meta(store.get(meta_recid)).table.value
        except (KeyError, ValueError):
            return "object"  # the metadata load that follows raises with the file's story

    def _keys_out(self, keys: np.ndarray) -> list:
        return self._keycodec.keys_of_slots(keys)

    def _homes_of(self, keys: np.ndarray, homes: int) -> np.ndarray:
        return KeyedCore._homes_of(self, keys, homes)  # type: ignore[arg-type]  # has the codec

    def _key_serializer(self) -> Serializer:
        """The serializer of a column of this table's keys."""
        return get_serializer(_COLUMN_SERIALIZERS[self._keycodec.key_type])

    def _live_keys(self) -> list:
        """The keys, in entry order."""
        return self._keys_out(self._live_of(self._table().keys)[0])

    def _long_key_records(self) -> np.ndarray:
        return self._keycodec.long_recids(self._live_of(self._table().keys)[0])

    @locked
    def clear(self) -> None:
        """Remove every entry (long keys' records too) and shrink the table back."""
        self._check_open()
        long_keys = self._long_key_records()
        super().clear()
        for recid in long_keys.tolist():
            self._store.delete(recid)

    @locked
    def _live_bytes(self) -> int:
        """Bytes this table holds in its store: the table, value records, long keys' records."""
        return super()._live_bytes() + self._store.record_bytes(self._long_key_records())

    # -- columns of keys -----------------------------------------------------------------------

    def _put_column(self, keys, values) -> None:
        """Insert or overwrite many entries, as ``dict.update`` with the pairs in order (a key
        given twice takes its place from its first occurrence, its value from its last); all
        or nothing (module docstring). Lock held by the caller."""
        self._check_open()
        keys, values = as_list(keys), as_list(values)
        if len(values) != len(keys):
            raise ValueError(f"{len(keys)} keys but {len(values)} values")
        last: dict[bytes, int] = {}
        probes: dict[bytes, KeyProbe] = {}
        for i, key in enumerate(keys):
            probe = self._keycodec.admit(key)
            probes.setdefault(probe.data, probe)
            last[probe.data] = i
        new = [probe for probe in probes.values() if self._probe(probe)[2] < 0]
        words: list = []
        slots: list[bytes] = []
        try:
            for probe in probes.values():
                words.append(self._encode(values[last[probe.data]]))
            for probe in new:
                slots.append(self._keycodec.store_slot(probe))
            self._reserve(len(new), max(map(self._width_of_word, words), default=self._width))
        except BaseException:
            for slot in slots:
                self._keycodec.release_slot(slot)
            if not self._slots.typed:
                self._slots.release_many(np.array(words, np.uint64))
            raise
        for probe, slot in zip(new, slots):
            probe.stored = slot
        for probe, word in zip(probes.values(), words):
            self._put(probe, word)

    def _width_of_word(self, word) -> int:
        if self._slots.typed:
            return self._width
        return self._slots.width_of_many(np.array([word], np.uint64))

    def _contains_column(self, keys) -> np.ndarray:
        self._check_open()
        return np.array([self._find_admitted(key)[1] >= 0 for key in as_list(keys)], bool)

    def _delete_column(self, keys) -> int:
        """Remove the keys that are present; how many went. Lock held by the caller."""
        self._check_open()
        removed = [ReferenceCore.pop(self, key, _ABSENT) for key in as_list(keys)]  # type: ignore[arg-type]
        return len(removed) - sum(1 for value in removed if value is _ABSENT)

def as_list(items) -> list:
    """Keys or values given as a list, a numpy array (its items as Python objects) or any
    iterable."""
    return items.tolist() if isinstance(items, np.ndarray) else list(items)
