"""The keys of one keyed table in and out of their 16-byte slots (layer 6).

:class:`KeyCodec` is to a keyed table's keys what :class:`~offheap.hashmap.valueslots.ValueSlots`
is to its values: it turns a key into what the table stores (:mod:`offheap.hashmap.keyslots`
states the key bytes, the hash and the slot), turns a stored slot back into the key, and owns
the records of the long keys (16 key bytes and more) in the table's store.

A :class:`KeyProbe` is one key on its way into a probe: its key bytes, its hash and what a probe
compares. An inline key's slot *is* the key, so comparing slots compares keys; a long key is
matched on bytes 8..15 of its slot (the hash's top 56 bits and the ``LONG`` marker) and then on
its record's bytes.

Ownership: the record of a long key belongs to the entry whose slot names it, from
:meth:`KeyCodec.store_slot` (called once the insert cannot fail for want of room in the table)
to :meth:`KeyCodec.release_slot` (after the entry is removed).

Thread safety: none; the table's lock is held around every call (:mod:`offheap.hashmap.locking`).
"""

from __future__ import annotations

import numpy as np

from offheap.hashmap.keyslots import (
    INLINE_MAX,
    LONG,
    SLOT_BYTES,
    Unadmitted,
    inline_slot,
    key_bytes,
    key_hash,
    key_of,
    long_slot,
    lookup_bytes,
    parse_slot,
    slot_tag,
)
from offheap.kernels.siphash import SEED_BYTES
from offheap.store.records import RecordStore

_LONG_MARKER = bytes((LONG,))


class KeyProbe:
    """One key as a probe sees it: ``data`` (its key bytes), ``hash`` (the seeded hash) and
    ``compared``: the whole slot of an inline key, bytes 8..15 of a long key's slot.
    ``stored`` is the slot made for it ahead of its insert (a bulk put's), else None."""

    __slots__ = ("data", "hash", "compared", "long", "stored")

    def __init__(self, data: bytes, hash_value: int) -> None:
        self.data = data
        self.hash = hash_value
        self.long = len(data) > INLINE_MAX
        self.compared = slot_tag(hash_value) + _LONG_MARKER if self.long else inline_slot(data)
        self.stored: bytes | None = None


class KeyCodec:
    """The keys of one keyed table (see the module docstring): of ``key_type``, hashed under
    ``seed``, long ones kept as records of ``store``."""

    def __init__(self, key_type: str, seed: bytes, store: RecordStore) -> None:
        if len(seed) != SEED_BYTES:
            raise ValueError(f"a HashMap seed is {SEED_BYTES} bytes, got {len(seed)}")
        self.key_type = key_type
        self.seed = seed
        self.store = store

    def admit(self, key) -> KeyProbe:
        """The probe of a key to store: TypeError, ValueError or OverflowError (the built-in
        exception a dict-like store of a key it cannot hold raises) saying why not."""
        try:
            return self._probe(key_bytes(self.key_type, key))
        except Unadmitted as refused:
            raise refused.error from None

    def lookup(self, key) -> KeyProbe | None:
        """The probe of a key to look up, None when the table cannot hold such a key (a miss)."""
        data = lookup_bytes(self.key_type, key)
        return None if data is None else self._probe(data)

    def _probe(self, data: bytes) -> KeyProbe:
        return KeyProbe(data, key_hash(self.seed, data))

    def matches(self, slot: memoryview, probe: KeyProbe) -> bool:
        """Whether the stored ``slot`` holds the key of ``probe``."""
        if not probe.long:
            return slot == probe.compared
        return slot[8:] == probe.compared and \
            self.store.get_checked(int.from_bytes(slot[:8], "little")) == probe.data

    def store_slot(self, probe: KeyProbe) -> bytes:
        """The slot a new entry of this key stores: a long key's bytes become a record now
        (CapacityError: nothing made), unless one was made for it ahead (``probe.stored``);
        the entry owns it from here on."""
        if probe.stored is not None:
            return probe.stored
        if not probe.long:
            return probe.compared
        return self.long_slot_of(probe.data, probe.hash)

    def long_slot_of(self, data: bytes, hash_value: int) -> bytes:
        """The slot of a new long key of these bytes and hash: its record made now
        (CapacityError: nothing made), owned by the entry that stores the slot."""
        return long_slot(self.store.put(data), hash_value)

    def release_slot(self, slot: bytes | memoryview) -> None:
        """Free what a removed entry's slot owned: a long key's record."""
        if slot[INLINE_MAX] == LONG:
            self.store.delete(int.from_bytes(slot[:8], "little"))

    def data_of_slot(self, slot: bytes | memoryview) -> bytes:
        """The key bytes a stored slot holds; CorruptionError for a damaged slot or a long
        key's record outside its segment (as the compiled core reads it)."""
        data, recid = parse_slot(bytes(slot))
        return self.store.get_checked(recid) if data is None else data

    def key_of_slot(self, slot: bytes | memoryview):
        """The key a stored slot holds, as the map hands it out."""
        return key_of(self.key_type, self.data_of_slot(slot))

    def keys_of_slots(self, slots: np.ndarray) -> list:
        """The keys of an array of stored slots (``V16`` items), as :meth:`key_of_slot`."""
        raw = np.ascontiguousarray(slots).tobytes()
        return [self.key_of_slot(raw[at: at + SLOT_BYTES]) for at in range(0, len(raw), SLOT_BYTES)]

    def long_recids(self, slots: np.ndarray) -> np.ndarray:
        """The record ids of the long keys among stored slots (``V16`` items), as int64."""
        raw = np.ascontiguousarray(slots).view(np.uint8).reshape(-1, SLOT_BYTES)
        long = raw[raw[:, INLINE_MAX] == LONG, :8]
        return np.ascontiguousarray(long).view("<i8").reshape(-1)
