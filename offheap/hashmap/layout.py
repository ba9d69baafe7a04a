"""The LongHashMap table format, version 2 (layer 6): constants, metadata record, key admission.

A table is an *index* over *entries*, the layout of CPython's compact dict, with Robin Hood
linear probing in the index:

    index     uint32[homes + SLACK]   0 = empty, else 1 + the number of the entry it points to
    entries   in chunks               per entry: its int64 key, its value (a typed value or a
                                      2/4/8-byte slot word, :mod:`offheap.hashmap.valueslots`;
                                      nothing for a set) and a live bit (0 = the entry was
                                      deleted: a hole)

Entries are numbered in insertion order: a new key is appended as entry ``used`` (``used`` counts
the holes too), so iterating the entries in number order, skipping holes, gives dict's order, and
``popitem()`` takes the last entry. Deleting a key clears its live bit and its index slot; holes
at the end of the entries are dropped at once (entry ``used - 1`` is always live), the others when
the entries are *compacted*: renumbered densely in the same order, with the index rewritten to
match, when the entries are full and at least a quarter of them are holes.

Entry ``e`` lives in chunk ``e >> CHUNK_BITS`` at position ``e & CHUNK_MASK``. A chunk is one
arena region of ``capacity`` entries: ``capacity`` int64 keys, then ``capacity`` values, then
``capacity / 8`` bytes of live bits (bit ``i % 8`` of byte ``i // 8`` for position ``i``).

A set (:class:`~offheap.hashmap.longhashset.LongHashSet`) is this table with a value width of 0:
the value type ``"empty"`` (:data:`~offheap.store.serializers.EMPTY`, every value None) and no
values region, so a chunk is ``capacity`` int64 keys then the live bits, ``capacity * 8 +
capacity / 8`` bytes. Width 0 goes with the value type ``"empty"`` and no other; nothing else of
the format changes (index, order, probing, growth, the chunk list). Example, a set holding 5
then 7 in a 16-entry chunk 0: bytes 0..7 of the chunk are ``05 00 .. 00``, bytes 8..15
``07 00 .. 00``, bytes 16..127 zero, byte 128 (the live bits) ``03``, byte 129 ``00``.

Every
chunk holds ``CHUNK_ENTRIES`` entries except chunk 0 while it is the only one: a power of two of
at least ``MIN_CAPACITY`` entries, copied to a larger size when full, up to ``CHUNK_ENTRIES``;
later chunks are added whole and never move. So a small map costs little, and a large one grows
one chunk at a time: it never needs room for a copy of its entries, and under a limit it can
fill all but the last chunk's worth of it.

Sizes of a new table and its growth (the writer's choice: any table within the ranges above
opens, and a table written with another schedule reads the same). A new table's index and chunk
0 each fill one small region, ``SMALL_REGION_BYTES`` (a 4 KiB page less the arena's tag, fixed so
the bytes are the same on every machine): ``INITIAL_HOMES`` = 752 homes, and chunk 0 of
:func:`initial_capacity` entries (256, or 128 for 8-byte values). While chunk 0 is alone it
grows ``SMALL_GROWTH`` = 4 times (256, 1024, 4096, 16384, 65536), and so does an index while
four times its homes stay within ``SMALL_HOMES`` (752, 3008, 12032, 48128); a larger index grows
by its table's growth factor (below). Ten thousand keys so take five growth steps, not twenty.

A key's *home* is ``mix64(key) * homes >> 64``: the hash scaled to ``[0, homes)``, so homes are in
hash order for any table size. The index is in Robin Hood order: along it, entries are sorted by
home and, within a home, by entry number, each as close to its home as that order allows. The
*distance* of an occupied slot ``s`` is ``s - home(key)``; a probe for a key with home ``h``
stops at the first slot that is empty or whose distance is less than ``s - h`` (the key would sit
before that entry). Probing never wraps around: the ``SLACK`` slots past the last home take the
overflow, and a table whose overflow would pass them grows. Since the order is a function of the
keys and their entry numbers alone, the index of a given set of entries is the same bytes however
it was built: one insert at a time, or by the vectorized rebuild (sort the entries by home, then
``slot[j] = j + cummax(home[j] - j)``).

Insert. Probe to the first slot ``s`` that is empty or holds an entry of a later home, move the
run ``s..t-1`` up to the next empty slot ``t`` one place right, and write the new entry at ``s``.
Example, entries A, B (home 3) and C (home 4), and a new D of home 3::

    slot   3   4   5   6           3   4   5   6   7
    before A   B   C   -     after A   B   D   C   -

Delete (backward shift, no tombstones in the index). Empty slot ``s`` and move each following
entry one place left until an empty slot or an entry at its home.

Growth multiplies ``homes`` (by ``SMALL_GROWTH`` while small, then by 2 for a map and 1.25 for a
set) when ``n_entries`` would pass ``MAX_LOAD * homes``. When the grown index would cross the
arena's limit, it grows instead to the largest size that fits beside the old one.

The metadata record (:class:`TableMeta`, ``_META``): magic ``OHLHMAP2``, the value serializer's
name, ``homes``, the value width in bytes, ``n_entries`` (live), ``used`` (entries including
holes), chunk 0's capacity, the index region, and the record id of the *chunk list*: the arena
offset (``<Q``) of each chunk's region, in chunk order. A table of format 1 (magic ``OHLHMAP1``: keys,
distances and values in one Robin Hood table, no insertion order) is read by :func:`parse_meta_v1`
and converted to format 2 by the first writer that opens it, its entries numbered in slot order.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from offheap.errors import CorruptionError
from offheap.kernels.bounds import INT64_MAX, as_int64, lookup_key  # noqa: F401 (lookup_key: see below)
from offheap.kernels.mix import mix64_array

SLACK = 256
MAX_LOAD = 0.875
MIN_HOMES = 16
MAX_HOMES = 1 << 32  # the vectorized home computation multiplies 32-bit halves
CHUNK_BITS = 16
CHUNK_ENTRIES = 1 << CHUNK_BITS
CHUNK_MASK = CHUNK_ENTRIES - 1
MIN_CAPACITY = 16  # the smallest chunk 0 a stored table may have
SMALL_REGION_BYTES = 4096 - 64  # a 4 KiB page less the arena's tag (offheap.arena.format)
INITIAL_HOMES = SMALL_REGION_BYTES // 4 - SLACK  # 752: a new index fills one small region
SMALL_GROWTH = 4  # the growth factor of chunk 0 and of a small index
SMALL_HOMES = CHUNK_ENTRIES  # an index grows SMALL_GROWTH-fold while the result stays within this
MAX_ENTRIES = (1 << 32) - 2  # entry numbers + 1 fit an index word
KEY_BYTES = 8  # an int64 key
VALUE_WIDTHS = (0, 2, 4, 8)  # 0: a set's table, of the value type "empty" alone
SET_VALUE_TYPE = "empty"

_MAGIC = b"OHLHMAP2"
_MAGIC_V1 = b"OHLHMAP1"
_META = struct.Struct("<8s16sQBxxxxxxxQQQQQ")  # magic, value type, homes, width, n, used,
#                                                first chunk's capacity, index, chunk list record
_META_V1 = struct.Struct("<8s16sQBxxxxxxxQQQQ")  # magic, value type, homes, width, n, 3 regions


@dataclass(frozen=True)
class TableMeta:
    """The metadata record of a format-2 LongHashMap."""

    value: str
    homes: int
    width: int  # bytes per value
    n_entries: int  # live entries
    used: int  # entries including holes
    first_capacity: int  # entries chunk 0 holds
    index_region: int
    chunk_list_recid: int


@dataclass(frozen=True)
class TableMetaV1:
    """The metadata record of a format-1 LongHashMap (one Robin Hood table, no entry order)."""

    value: str
    homes: int
    width: int
    n_entries: int
    regions: tuple[int, int, int]  # arena offsets of the keys, distances and values arrays


def pack_meta(meta: TableMeta) -> bytes:
    return _META.pack(_MAGIC, meta.value.encode(), meta.homes, meta.width, meta.n_entries,
                      meta.used, meta.first_capacity, meta.index_region, meta.chunk_list_recid)


def meta_version(meta: bytes) -> int:
    """1 or 2 for a LongHashMap metadata record of that format; ValueError for a keyed table's
    record, CorruptionError for anything else."""
    if meta[:8] == _MAGIC and len(meta) == _META.size:
        return 2
    if meta[:8] == _MAGIC_V1 and len(meta) == _META_V1.size:
        return 1
    if meta[:7] == b"OHKHMAP":  # offheap.hashmap.keyedlayout's magic: not damaged, another kind
        raise ValueError("the stored table is a keyed one (a HashMap or HashSet), not a "
                         "LongHashMap's or LongHashSet's; open it as a HashMap or HashSet")
    raise CorruptionError("LongHashMap metadata is damaged (bad magic or size)")


def parse_meta(meta: bytes) -> TableMeta:
    """Decode a format-2 metadata record; CorruptionError if it is not one or out of range."""
    if meta_version(meta) != 2:
        raise CorruptionError("LongHashMap metadata is of format 1, not 2")
    _, name, homes, width, n, used, first, index_region, chunk_list = _META.unpack(meta)
    check_ranges("LongHashMap", name_of(name), homes, width, n, used, first)
    return TableMeta(name_of(name), homes, width, n, used, first, index_region, chunk_list)


def check_ranges(kind: str, value: str, homes: int, width: int, n: int, used: int,
                 first: int) -> None:
    """CorruptionError unless a metadata record's sizes are ones a table of this format has
    (shared by the keyed table's format, :mod:`offheap.hashmap.keyedlayout`)."""
    if not (MIN_HOMES <= homes <= MAX_HOMES and width in VALUE_WIDTHS
            and (width == 0) == (value == SET_VALUE_TYPE) and n <= used
            and n <= homes and used <= MAX_ENTRIES and MIN_CAPACITY <= first <= CHUNK_ENTRIES
            and first & (first - 1) == 0 and (used <= first or first == CHUNK_ENTRIES)):
        raise CorruptionError(f"{kind} metadata is out of range (homes={homes}, width={width}, "
                              f"n={n}, used={used}, first chunk={first})")


def parse_meta_v1(meta: bytes) -> TableMetaV1:
    """Decode a format-1 metadata record; CorruptionError if it is not one or out of range."""
    if meta_version(meta) != 1:
        raise CorruptionError("LongHashMap metadata is of format 2, not 1")
    _, name, homes, width, n, keys_off, dist_off, vals_off = _META_V1.unpack(meta)
    if not MIN_HOMES <= homes <= MAX_HOMES or width not in VALUE_WIDTHS or not width or n > homes:
        raise CorruptionError(f"LongHashMap metadata is out of range (homes={homes}, "
                              f"width={width}, n={n})")
    return TableMetaV1(name_of(name), homes, width, n, (keys_off, dist_off, vals_off))


def name_of(raw: bytes) -> str:
    return raw.rstrip(b"\0").decode("ascii", "replace")


def pack_chunk_list(offsets: list[int]) -> bytes:
    return struct.pack(f"<{len(offsets)}Q", *offsets)


def parse_chunk_list(data: bytes, used: int, first_capacity: int) -> list[int]:
    """The chunks' region offsets; CorruptionError unless they hold ``used`` entries (chunks
    past chunk 0 only once chunk 0 is full-size)."""
    n_chunks = len(data) // 8
    if len(data) % 8 or not n_chunks or (n_chunks > 1 and first_capacity != CHUNK_ENTRIES) \
            or capacity_of(n_chunks, first_capacity) < used:
        raise CorruptionError(f"LongHashMap chunk list of {len(data)} bytes does not fit "
                              f"{used} entries")
    return list(struct.unpack(f"<{n_chunks}Q", data))


def capacity_of(n_chunks: int, first_capacity: int) -> int:
    """Entries that ``n_chunks`` chunks hold."""
    return first_capacity if n_chunks == 1 else n_chunks * CHUNK_ENTRIES


def chunk_bytes(capacity: int, value_itemsize: int, key_itemsize: int = KEY_BYTES) -> int:
    """The region size of a chunk: keys, values (none for a set: itemsize 0), live bits.
    ``key_itemsize`` is 8 here; a keyed table's chunks (:mod:`offheap.hashmap.keyedlayout`)
    hold 16-byte key slots in the same layout."""
    return capacity * (key_itemsize + value_itemsize) + (capacity >> 3)


def initial_capacity(value_itemsize: int, key_itemsize: int = KEY_BYTES) -> int:
    """Chunk 0's capacity in a new table: the largest power of two of entries whose chunk fits
    ``SMALL_REGION_BYTES`` (256 for values of 0 to 4 bytes, 128 for 8; 128 for every value
    width beside 16-byte key slots)."""
    capacity = MIN_CAPACITY
    while chunk_bytes(capacity * 2, value_itemsize, key_itemsize) <= SMALL_REGION_BYTES:
        capacity *= 2
    return capacity


def homes_of(keys: np.ndarray, homes: int) -> np.ndarray:
    """``mix64(key) * homes >> 64`` for every key (int64 result), exact for ``homes <= 2**32``:
    the 64x32-bit product is formed from the hash's two 32-bit halves."""
    return scale_to_homes(mix64_array(keys), homes)


def scale_to_homes(h: np.ndarray, homes: int) -> np.ndarray:
    """``h * homes >> 64`` for every uint64 hash (int64 result), exact for ``homes <= 2**32``:
    the 64x32-bit product is formed from the hash's two 32-bit halves."""
    n = np.uint64(homes)
    low = (h & np.uint64(0xFFFF_FFFF)) * n
    high = (h >> np.uint64(32)) * n + (low >> np.uint64(32))
    return (high >> np.uint64(32)).astype(np.int64)


def as_key(key) -> int:
    """``key`` as a Python int in the int64 range to store, or TypeError/OverflowError.

    Ints and what ``operator.index`` accepts (bool, numpy integers) are keys; a bool is stored as
    the int it equals, so ``m[True] = x`` sets key ``1``, as a dict whose key 1 came first would.
    """
    return as_int64(key, "LongHashMap keys and LongHashSet elements are int64")


# A lookup admits keys by :func:`offheap.kernels.bounds.lookup_key` (imported above), which both
# cores take from this module as the lookup half of the key admission of this table format.


def as_key_array(keys) -> np.ndarray:
    """Keys as an int64 array, or TypeError/OverflowError naming the first bad key."""
    array = keys if isinstance(keys, np.ndarray) else np.asarray(keys)
    if array.ndim != 1:
        array = array.reshape(-1) if array.ndim == 0 or array.size == 0 else array
        if array.ndim != 1:
            raise ValueError(f"keys must be one-dimensional, got shape {array.shape}")
    if array.dtype.kind == "i":
        return array.astype(np.int64, copy=False)
    if array.dtype.kind == "u":
        if array.size and int(array.max()) > INT64_MAX:
            raise OverflowError(f"key {int(array.max())} is outside the int64 range")
        return array.astype(np.int64)
    if array.dtype.kind == "O" or (array.size == 0 and array.dtype.kind == "f"):
        return np.fromiter((as_key(k) for k in array.tolist()), np.int64, len(array))
    raise TypeError(f"LongHashMap keys and LongHashSet elements are int64, got an array of "
                    f"{array.dtype}")
