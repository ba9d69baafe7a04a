"""The scalar operations of a keyed table (``HashMap(key=...)``) in pure Python (layer 6).

:class:`KeyedCore` is LongHashMap's reference core (:mod:`offheap.hashmap.core`: the same
contract with the map, the same index, entries, Robin Hood order, slot homes and growth) over a
key column of 16-byte key slots (:mod:`offheap.hashmap.keyedlayout`) instead of int64 keys. What
differs is confined to the key: a key becomes a :class:`~offheap.hashmap.keycodec.KeyProbe`
(admission, key bytes, seeded hash) through the map's key codec (``_keycodec``, set before the
first attach), a probe compares slots (and a long key's record), a new entry's slot is made at
its append (a long key's record with it), a removed entry's slot is released, and the keys
handed out are decoded from their slots.

Failure atomicity: a long key's record is made at the append, before the entry is written, and
only once the table has room (growth happens before); a removed entry's record is freed after
the table changed.

Thread safety: none here, as the core it extends: the map runs every operation under its lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from offheap.hashmap.core import MapCore
from offheap.hashmap.locking import LockedReferenceCore
from offheap.hashmap.keycodec import KeyCodec, KeyProbe
from offheap.hashmap.keyedlayout import homes_of_slots
from offheap.hashmap.keyslots import SLOT_BYTES, home_of
from offheap.hashmap.layout import CHUNK_BITS, CHUNK_MASK
from offheap.hashmap.regions import Column
from offheap.kernels import native

KEY_SLOTS = np.dtype(f"V{SLOT_BYTES}")
"""The numpy dtype of a key slot: what a keyed table's key column holds."""


class KeyedCore(MapCore):
    """Probe, insert, delete and iterate one keyed table (pure-Python reference)."""

    _kind = "HashMap"
    _keycodec: KeyCodec  # the map's: its key type, seed and the store of its long keys

    # -- the key column -----------------------------------------------------------------------

    def _key_views(self, key_chunks: list[np.ndarray]) -> list[memoryview]:
        return [chunk.data.cast("B") for chunk in key_chunks]

    def _key_column(self) -> Column:
        return Column([np.frombuffer(chunk, KEY_SLOTS) for chunk in self._keys])

    def _homes_of(self, keys: np.ndarray, homes: int) -> np.ndarray:
        return homes_of_slots(keys.view(np.uint8), self._keycodec.seed, homes)

    def _slot_of(self, e: int) -> memoryview:
        """Entry ``e``'s key slot, in place."""
        at = (e & CHUNK_MASK) * SLOT_BYTES
        return self._keys[e >> CHUNK_BITS][at: at + SLOT_BYTES]

    def _set_key(self, chunk: int, at: int, key: KeyProbe) -> None:
        at *= SLOT_BYTES
        self._keys[chunk][at: at + SLOT_BYTES] = self._keycodec.store_slot(key)

    def _copy_key(self, e: int, to: int) -> None:
        at = (to & CHUNK_MASK) * SLOT_BYTES
        self._keys[to >> CHUNK_BITS][at: at + SLOT_BYTES] = self._slot_of(e)

    def _key_of(self, e: int):
        return self._keycodec.key_of_slot(self._slot_of(e))

    def _keys_at(self, chunk: int, positions: np.ndarray) -> list:
        return self._keycodec.keys_of_slots(np.frombuffer(self._keys[chunk], KEY_SLOTS)[positions])

    # -- probing ------------------------------------------------------------------------------

    def _set_keys(self, keycodec: KeyCodec) -> None:
        """Take the map's key codec (the compiled core reads its key type and seed)."""
        self._keycodec = keycodec

    def _put_key(self, key, word, slot: bytes | None) -> None:
        """Store ``word`` under ``key``; a new long key takes ``slot`` (made by the caller with
        :meth:`KeyCodec.long_slot_of`), or None to make its own record."""
        probe = self._admit(key)
        if probe.long:
            probe.stored = slot
        self._put(probe, word)

    # -- the bulk steps over a column of keys (offheap.hashmap.keyedtable), key by key ----------

    def _key_states(self, keys: list, for_store: bool) -> bytes:
        """A byte a key: 0 present, 1 absent, 2 absent and long; ``for_store`` admits each key
        as a store does (its error), and gives 3 for an absent key that an earlier key of the
        batch already is; else a key no table holds is absent."""
        states = bytearray()
        new: set[bytes] = set()
        for key in keys:
            probe = self._admit(key) if for_store else self._lookup_form(key)
            if probe is not None and self._probe(probe)[2] >= 0:
                states.append(0)
            elif probe is not None and for_store and probe.data in new:
                states.append(3)
            else:
                if probe is not None and for_store:
                    new.add(probe.data)
                states.append(2 if probe is not None and probe.long else 1)
        return bytes(states)

    def _get_keys(self, keys: list, default) -> list:
        return [MapCore.get(self, key, default) for key in keys]

    def _discard_keys(self, keys: list) -> int:
        return sum(1 for key in keys if MapCore._discard_key(self, key))

    def _put_key_words(self, keys: list, words: np.ndarray, slots: list | None,
                       done: np.ndarray) -> None:
        """Store ``words[i]`` under ``keys[i]`` (room reserved), a new long key taking
        ``slots[i]``; ``done[0]`` counts the words stored."""
        for i, (key, word) in enumerate(zip(keys, words.tolist())):
            self._put_key(key, word, None if slots is None else slots[i])
            done[0] = i + 1

    def _admit(self, key) -> KeyProbe:
        return self._keycodec.admit(key)

    def _lookup_form(self, key) -> KeyProbe | None:
        return self._keycodec.lookup(key)

    def _lookup(self, key) -> int:
        return self._find_admitted(key)[1]

    def _probe(self, key: KeyProbe) -> tuple[int, int, int]:
        """``(home, slot, entry)`` of a key, as the int64 probe: past lower homes, comparing
        the slots of its own home, stopping at a higher home or an empty slot."""
        if self._homes_mods != self._mods:
            self._sync_homes()
        home = slot = home_of(key.hash, self._homes)
        index, slot_homes, keys = self._index, self._slot_homes, self._keys
        assert index is not None  # attached: the check of _homes_mods raised otherwise
        matches = self._keycodec.matches
        while True:
            at = slot_homes[slot]
            if at == home:
                e = index[slot] - 1
                if e < 0:
                    return home, slot, -1
                start = (e & CHUNK_MASK) * SLOT_BYTES
                if matches(keys[e >> CHUNK_BITS][start: start + SLOT_BYTES], key):
                    return home, slot, e
            elif at > home:
                return home, slot, -1
            slot += 1

    # -- changes ------------------------------------------------------------------------------

    def _remove_at(self, slot: int, e: int) -> None:
        """Remove entry ``e`` (:meth:`MapCore._remove_at`) and release its key slot."""
        stored = bytes(self._slot_of(e))
        super()._remove_at(slot, e)
        self._keycodec.release_slot(stored)


class LockedKeyedCore(LockedReferenceCore, KeyedCore):
    """The keyed reference core with each operation under the map's lock: what a HashMap or
    HashSet takes when the compiled core is not selected."""


if TYPE_CHECKING:
    KeyedMapCore = LockedKeyedCore  # the compiled type mirrors the reference's interface
else:
    _compiled = native.compiled_module("offheap.hashmap._core")
    KeyedMapCore = LockedKeyedCore if _compiled is None else _compiled.MapCore
"""The core a HashMap or HashSet is built on: LongHashMap's compiled core, made a keyed
table's by ``_set_keys`` (offheap/hashmap/csrc/keys.c), when :mod:`offheap.kernels.native`
selects it, else the keyed reference core under the table's lock."""
