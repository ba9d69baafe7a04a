"""What a keyed table changes in the facade of a hash table (layer 6): HashMap's and HashSet's.

:class:`KeyedTable` is a mixin before :class:`~offheap.hashmap.table.TableFacade` (through the
map's or the set's facade) in the bases of :class:`~offheap.hashmap.keyedmap.HashMap` and
:class:`~offheap.hashmap.keyedset.HashSet`. It overrides the facade's hooks where a keyed table
differs from LongHashMap's (:mod:`offheap.hashmap.keyedlayout`): the metadata record (key type
and seed), the key column's items (16-byte key slots, decoded by the key codec), the records of
long keys (freed by ``clear``, counted in the map's bytes, copied by compaction), and the bulk
steps over columns of keys of any key type: lists or numpy arrays.

The bulk steps hand a whole column (a list of keys) to one call of the core
(``_key_states``, ``_get_keys``, ``_discard_keys``, ``_put_key_words``: C loops in the compiled
core, the scalar operations in the reference). Failure atomicity of
:meth:`KeyedTable._put_column`: every key is admitted, every record (values, long keys) made and
the room for the new keys reserved before an entry changes; a failure releases what was made
and leaves the table as it was.

Thread safety: every method holds the table's lock (:func:`~offheap.hashmap.locking.locked`).
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from offheap.errors import CorruptionError
from offheap.hashmap.keycodec import KeyCodec
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

_ABSENT = object()

_COLUMN_SERIALIZERS = {"str": "str", "bytes": "bytes", "int64": "int64", "object": "object"}
"""The serializer that packs a column of each key type's keys (a pickle of the map or set)."""


class KeyedTable(_FacadeBase):
    """The keyed table's side of a hash map's or set's facade (see the module docstring)."""

    _key_dtype = KEY_SLOTS
    _keycodec: KeyCodec
    _key_type: str | None = None  # the key type asked for: a new table's, or None (a reader's
    #                               too) to take a file's

    if TYPE_CHECKING:
        # the core's (offheap.hashmap.keyedcore, or the compiled one)
        def _set_keys(self, keycodec: KeyCodec) -> None: ...

        def _key_states(self, keys: list, for_store: bool) -> bytes: ...

        def _get_keys(self, keys: list, default: Any) -> list: ...

        def _discard_keys(self, keys: list) -> int: ...

        def _put_key_words(self, keys: list, words: np.ndarray, slots: list | None,
                           done: np.ndarray) -> None: ...

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
            self._take_keycodec(KeyCodec(self._key_type or "object", os.urandom(SEED_BYTES),
                                         store))
        super()._setup(store, serializer, meta_recid=meta_recid, owns_store=owns_store,
                       allow_pickle=allow_pickle, lock=lock)

    def _meta_bytes(self, meta: TableMeta) -> bytes:
        return pack_meta(KeyedMeta(self._keycodec.key_type, self._keycodec.seed, meta))

    def _parse_meta(self, record: bytes) -> TableMeta:
        meta = parse_meta(record)
        if self._key_type is not None and meta.key != self._key_type:
            raise ValueError(f'the stored table has key="{meta.key}", not key="{self._key_type}"; '
                             f'open it with key="{meta.key}" (or no key=)')
        held = getattr(self, "_keycodec", None)
        if held is not None and (held.key_type, held.seed) == (meta.key, meta.seed):
            return meta.table
        if self._regions is not None:  # a check of the table held (a commit's), not a load
            raise CorruptionError("HashMap metadata names another key type or seed than the "
                                  "table the map holds")
        self._take_keycodec(KeyCodec(meta.key, meta.seed, self._store))
        return meta.table

    def _take_keycodec(self, keycodec: KeyCodec) -> None:
        """Use ``keycodec`` for this table's keys, and give it to the core (detached)."""
        self._keycodec = keycodec
        self._set_keys(keycodec)

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

    # -- columns of keys: one call of the core's for the whole column ----------------------

    def _put_column(self, keys, values) -> None:
        """Insert or overwrite many entries, as ``dict.update`` with the pairs in order (a key
        given twice takes its place from its first occurrence, its value from its last); all
        or nothing (module docstring). Lock held by the caller."""
        self._check_open()
        keys, values = as_list(keys), as_list(values)
        if len(values) != len(keys):
            raise ValueError(f"{len(keys)} keys but {len(values)} values")
        # every key admitted; 3: an earlier key of the batch, which the puts in order give
        # dict's rule (the first place, the last value)
        states = np.frombuffer(self._key_states(keys, True), np.uint8)
        words = self._slots.encode_many(values, self._encode_inline_prefix)
        slots: list[bytes | None] | None = None
        try:
            long_new = np.flatnonzero(states == 2).tolist()
            if long_new:
                slots = [None] * len(keys)
                for i in long_new:
                    slots[i] = self._keycodec.store_slot(self._keycodec.admit(keys[i]))
            new = int(np.count_nonzero((states == 1) | (states == 2)))
            self._reserve(new, self._slots.width_of_many(words))
        except BaseException:
            self._release_made(slots, words, 0)
            raise
        done = np.zeros(1, np.int64)
        try:
            self._put_key_words(keys, np.ascontiguousarray(words), slots, done)
        except BaseException:
            self._release_made(slots, words, int(done[0]))
            raise

    def _release_made(self, slots: list | None, words: np.ndarray, done: int) -> None:
        """Free the records a failed put of a column made and did not store: the long keys'
        slots and the value words from position ``done`` on."""
        for slot in (slots or [])[done:]:
            if slot is not None:
                self._keycodec.release_slot(slot)
        self._slots.release_many(words[done:])

    def _get_column(self, keys, default):
        """The values of a column of keys: a list (``default`` for the missing), or for typed
        values an ndarray (KeyError for missing keys without a default)."""
        self._check_open()
        keys = as_list(keys)
        if not self._slots.typed:
            return self._get_keys(keys, default)
        values = self._get_keys(keys, _ABSENT)
        missing = [key for key, value in zip(keys, values) if value is _ABSENT]
        if missing and default is None:
            raise KeyError(f"{len(missing)} keys are missing (first: {missing[0]!r}); pass "
                           f"default= to fill them")
        return np.array([default if value is _ABSENT else value for value in values],
                        self._slots.serializer.dtype)

    def _contains_column(self, keys) -> np.ndarray:
        self._check_open()
        return np.frombuffer(self._key_states(as_list(keys), False), np.uint8) == 0

    def _delete_column(self, keys) -> int:
        """Remove the keys that are present; how many went. Lock held by the caller."""
        self._check_open()
        return self._discard_keys(as_list(keys))

def as_list(items) -> list:
    """Keys or values given as a list, a numpy array (its items as Python objects) or any
    iterable."""
    return items.tolist() if isinstance(items, np.ndarray) else list(items)
