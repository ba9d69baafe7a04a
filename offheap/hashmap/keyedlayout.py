"""The keyed hash table format (``HashMap(key=...)``), version 1 (layer 6): metadata, homes.

A keyed table is LongHashMap's table of format 2 (:mod:`offheap.hashmap.layout`: the index,
the entries in chunks, insertion order, Robin Hood order, growth) with two differences:

- The key column holds 16-byte *key slots* (:mod:`offheap.hashmap.keyslots`) instead of int64
  keys: a chunk of ``capacity`` entries is ``capacity`` key slots, ``capacity`` values of the
  value width (none for a set), then ``capacity / 8`` bytes of live bits
  (``layout.chunk_bytes(capacity, width, SLOT_BYTES)``). A new table's chunk 0 holds 128
  entries, whatever the value width, so that it fills one small region.
- A key's home is ``(siphash13(seed, key bytes) & ~0xFF) * homes >> 64`` under the table's
  seed, not ``mix64(key) * homes >> 64``: from the hash's top 56 bits, which a long key's slot
  holds, so the home of every slot is a function of the slot (:func:`homes_of_slots`).

The metadata record (:class:`KeyedMeta`, ``_META``, 104 bytes, little-endian): magic
``OHKHMAP1``, the key type (8 bytes, ASCII, NUL-padded), the value serializer's name (16
bytes), the seed (16 bytes), ``homes``, the value width in bytes (1 byte and 7 of padding),
``n_entries``, ``used``, chunk 0's capacity, the index region and the record id of the chunk
list, each 8 bytes: the fields of LongHashMap's record, in its order, after key type and seed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from offheap.errors import CorruptionError
from offheap.hashmap.keyslots import INLINE_MAX, KEY_TYPES, LONG, SLOT_BYTES
from offheap.hashmap.layout import TableMeta, check_ranges, name_of, scale_to_homes
from offheap.kernels.siphash import SEED_BYTES, siphash_array

_MAGIC = b"OHKHMAP1"
_META = struct.Struct("<8s8s16s16sQBxxxxxxxQQQQQ")  # magic, key type, value type, seed, homes,
#                                                     width, n, used, first chunk's capacity,
#                                                     index, chunk list record


@dataclass(frozen=True)
class KeyedMeta:
    """The metadata record of a keyed table: its key type and seed, and the fields it shares
    with LongHashMap's record (``table``)."""

    key: str  # the key type, one of keyslots.KEY_TYPES
    seed: bytes  # SEED_BYTES
    table: TableMeta


def pack_meta(meta: KeyedMeta) -> bytes:
    t = meta.table
    return _META.pack(_MAGIC, meta.key.encode(), t.value.encode(), meta.seed, t.homes, t.width,
                      t.n_entries, t.used, t.first_capacity, t.index_region, t.chunk_list_recid)


def parse_meta(record: bytes) -> KeyedMeta:
    """Decode a keyed table's metadata record; ValueError for a LongHashMap's record,
    CorruptionError for anything else or values out of range."""
    if record[:7] == b"OHLHMAP":  # offheap.hashmap.layout's magic: not damaged, another kind
        raise ValueError("the stored table is a LongHashMap's or LongHashSet's (int64 keys), not "
                         "a keyed one; open it as a LongHashMap or LongHashSet")
    if record[:8] != _MAGIC or len(record) != _META.size:
        raise CorruptionError("HashMap metadata is damaged (bad magic or size)")
    _, key, value, seed, homes, width, n, used, first, index_region, chunk_list = \
        _META.unpack(record)
    key_type, value_type = name_of(key), name_of(value)
    if key_type not in KEY_TYPES:
        raise CorruptionError(f"HashMap metadata names key type {key_type!r}, not one of "
                              f"{', '.join(KEY_TYPES)}")
    check_ranges("HashMap", value_type, homes, width, n, used, first)
    return KeyedMeta(key_type, seed, TableMeta(value_type, homes, width, n, used, first,
                                               index_region, chunk_list))


def homes_of_slots(slots: np.ndarray, seed: bytes, homes: int) -> np.ndarray:
    """The home of the key in each 16-byte key slot (a uint8 matrix of ``SLOT_BYTES`` columns),
    as int64: inline keys hashed together with numpy, long keys from the hash bits their slots
    keep. CorruptionError for a damaged slot."""
    if len(seed) != SEED_BYTES:
        raise CorruptionError(f"a HashMap seed is {SEED_BYTES} bytes, got {len(seed)}")
    return scale_to_homes(slot_hashes(slots, seed), homes)


def slot_hashes(slots: np.ndarray, seed: bytes) -> np.ndarray:
    """The hash of the key in each key slot with its low 8 bits cleared (what its home is
    computed from), as uint64; CorruptionError for a damaged slot."""
    slots = np.asarray(slots, np.uint8).reshape(-1, SLOT_BYTES)
    marker = slots[:, INLINE_MAX].astype(np.int64)
    inline = marker <= INLINE_MAX
    long = marker == LONG
    if not (inline | long).all():
        bad = int(marker[~(inline | long)][0])
        raise CorruptionError(f"damaged HashMap key slot: byte 15 is {bad}, neither an inline "
                              f"length (0..15) nor LONG (0x80)")
    hashes = np.empty(len(slots), np.uint64)
    try:
        hashes[inline] = siphash_array(seed, slots[inline, :INLINE_MAX], marker[inline])
    except ValueError:
        raise CorruptionError("damaged HashMap key slot: non-zero padding after an inline "
                              "key") from None
    tags = np.zeros((int(long.sum()), 8), np.uint8)
    tags[:, 1:] = slots[long, 8:INLINE_MAX]
    hashes[long] = tags.view("<u8").reshape(-1)
    return hashes & np.uint64(~0xFF & 0xFFFF_FFFF_FFFF_FFFF)
