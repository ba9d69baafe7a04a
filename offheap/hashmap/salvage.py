"""Reading a possibly damaged hash table defensively, for salvage (layer 6).

:func:`read_table` is the hash table's part of :func:`offheap.salvage`, for LongHashMap's and
LongHashSet's tables and the keyed tables of HashMap and HashSet: it knows the table formats
(:mod:`offheap.hashmap.layout`, :mod:`offheap.hashmap.keyedlayout`), the driver in
:mod:`offheap.db.salvage` knows files and reports. What differs between the two kinds of table
is their key column (:class:`KeyColumn`: int64 keys, or 16-byte key slots hashed under the
table's seed). An entry is kept when all of this holds, and counted as skipped otherwise:

- an index slot points at it, the entry number is below ``used`` and its live bit is set, and no
  other slot points at the same entry and no other such entry holds the same key item;
- a key slot is well formed (an inline length with zero padding, or a long key's marker);
- a lookup of its key finds it (probing past the slots the rules above do not trust, which
  match no key);
- its key and value decode: a long key's record must be readable, hold more than an inline
  key's bytes and hash to the tag its slot keeps; an external value's record must be readable
  and deserialize; a pickled value becomes its placeholder, :mod:`offheap.store.pickled`, and
  is never unpickled.

Index slots, keys, values and live bits on pages that failed their checksum are not read, nor
are the records of keys and values on such pages; the entries they hold are counted apart
(``damaged_entries``). Entries come out in entry order, so the copy keeps the map's insertion
order. A format-1 LongHashMap table (one Robin Hood table) is read by the same rules with the
distance byte in place of the index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from offheap.errors import CorruptionError
from offheap.hashmap.keyedlayout import KeyedMeta, homes_of_slots
from offheap.hashmap.keyslots import INLINE_MAX, LONG, SLOT_BYTES, key_hash, key_of, long_slot
from offheap.hashmap.keyslots import parse_slot
from offheap.hashmap.layout import SLACK, TableMeta, TableMetaV1, homes_of
from offheap.hashmap.layout import parse_chunk_list
from offheap.hashmap.placement import find_many
from offheap.hashmap.regions import Column, Regions
from offheap.hashmap.valueslots import EXTERNAL
from offheap.store.records import RecordStore
from offheap.hashmap.table import table_serializer

BATCH = 1 << 16


@dataclass(frozen=True)
class KeyColumn:
    """What salvage reads a table's key column with."""

    dtype: np.dtype  # an item of the column
    homes_of: Callable[[np.ndarray, int], np.ndarray]  # the homes of well-formed items
    well_formed: Callable[[np.ndarray], np.ndarray]  # a bool per item: may it be a key at all?
    decode: Callable[[Any, Callable[[int], bytes]], Any] | None
    """``decode(item, read_record)``: the key an item holds (reading a record through
    ``read_record``), raising for a damaged one; None: the items are the keys (int64)."""


INT64_KEYS = KeyColumn(np.dtype(np.int64), homes_of, lambda keys: np.ones(len(keys), bool), None)
"""The key column of a LongHashMap's or LongHashSet's table."""


def keyed_column(meta: KeyedMeta) -> KeyColumn:
    """The key column of a keyed table (HashMap, HashSet) whose metadata is ``meta``."""

    def decode(slot: np.void, read_record: Callable[[int], bytes]):
        data, recid = parse_slot(slot.tobytes())
        if data is None:
            data = read_record(recid)
            if len(data) <= INLINE_MAX or long_slot(recid, key_hash(meta.seed, data)) != \
                    slot.tobytes():
                raise CorruptionError(f"record {recid} is not the long key its slot names")
        return key_of(meta.key, data)

    return KeyColumn(np.dtype("V16"),
                     lambda slots, homes: homes_of_slots(slots.view(np.uint8), meta.seed, homes),
                     _well_formed_slots, decode)


def _well_formed_slots(slots: np.ndarray) -> np.ndarray:
    """A bool per 16-byte key slot: an inline length with zero padding after the key, or
    ``LONG`` (:mod:`offheap.hashmap.keyslots`)."""
    raw = slots.view(np.uint8).reshape(-1, SLOT_BYTES)
    marker = raw[:, INLINE_MAX]
    padding = np.arange(INLINE_MAX) >= marker[:, None]  # the bytes after an inline key
    clean = ~(raw[:, :INLINE_MAX].astype(bool) & padding).any(axis=1)
    return ((marker <= INLINE_MAX) & clean) | (marker == LONG)


def read_table(store: RecordStore, meta: TableMeta | TableMetaV1, report,
               read_record: Callable[[int], bytes], damaged_record: type[Exception],
               key_column: KeyColumn = INT64_KEYS) -> Iterator[tuple[Any, list | np.ndarray]]:
    """Yield ``(keys, values)`` batches of the entries that pass the checks of the module
    docstring; count what fails in ``report`` (``damaged_entries``, ``skipped_entries``,
    ``error``). ``read_record`` reads a long key's or an external value's record, raising
    ``damaged_record`` when it lies on a failed page. Keys come as an int64 array, or a list
    for a keyed table (``key_column`` :func:`keyed_column`)."""
    serializer = table_serializer(meta.value)
    value_dtype = serializer.dtype if serializer.dtype is not None else np.dtype(f"<u{meta.width}")
    try:
        if isinstance(meta, TableMetaV1):
            keys, words = _v1_entries(store, meta, value_dtype, report)
        else:
            keys, words = _entries(store, meta, value_dtype, report, read_record, key_column)
    except Exception as exc:  # a missing or short region
        report.error = f"the table's arrays are unreadable: {exc}"
        return
    for start in range(0, len(keys), BATCH):
        batch_keys, batch_words = keys[start: start + BATCH], words[start: start + BATCH]
        if serializer.dtype is not None and key_column.decode is None:
            yield batch_keys, batch_words
            continue
        good_keys, good_values = [], []
        for key, word in zip(batch_keys if key_column.decode else batch_keys.tolist(),
                             batch_words.tolist()):
            try:
                if key_column.decode is not None:
                    key = key_column.decode(key, read_record)
                good_values.append(word if serializer.dtype is not None
                                   else _decode_word(serializer, int(word), read_record))
            except damaged_record:
                report.damaged_entries += 1
                continue
            except Exception:  # a damaged record may fail in any decoder
                report.skipped_entries += 1
                continue
            good_keys.append(key)
        yield (good_keys if key_column.decode else np.array(good_keys, np.int64)), good_values


def _entries(store: RecordStore, meta: TableMeta, value_dtype: np.dtype, report,
             read_record: Callable[[int], bytes], key_column: KeyColumn):
    """The key items and value words of the entries a format-2 table shows consistent, in
    order."""
    arena = store.arena
    chunks = parse_chunk_list(read_record(meta.chunk_list_recid), meta.used, meta.first_capacity)
    table = Regions(meta.homes, meta.width, value_dtype, meta.first_capacity, meta.index_region,
                    chunks, key_column.dtype)
    key_bytes = key_column.dtype.itemsize
    table.map_views(store)
    n_slots = meta.homes + SLACK
    index = np.array(table.index)
    keys = Column([np.array(chunk) for chunk in table.key_chunks])
    words = Column([np.array(chunk) for chunk in table.value_chunks])
    live = table.live_mask(meta.used)
    failed_entries = np.concatenate([
        arena.damaged_items(offset, key_bytes, n, 0)
        | (arena.damaged_items(offset, value_dtype.itemsize, n, n * key_bytes)
           if value_dtype.itemsize else False)  # a set's chunk has no values region
        | np.repeat(arena.damaged_items(offset, 1, n >> 3, n * (key_bytes + value_dtype.itemsize)),
                    8)
        for offset, n in zip(chunks, [len(k) for k in table.key_chunks])])
    table.drop_views()
    slots = np.flatnonzero(index)
    entries = index[slots].astype(np.int64) - 1
    in_range = entries < meta.used
    safe = np.where(in_range, entries, 0)
    damaged = arena.damaged_items(meta.index_region, 4, n_slots)[slots] | (
        in_range & failed_entries[safe])
    report.damaged_entries += int(damaged.sum())
    valid = ~damaged & in_range
    valid[valid] = live[entries[valid]]
    entry_keys = keys.take(safe)
    valid[valid] = key_column.well_formed(entry_keys[valid])
    for repeated in (entries, entry_keys):  # an entry two slots name, a key two entries hold
        unique, counts = np.unique(repeated[valid], return_counts=True)
        valid[valid] = ~np.isin(repeated[valid], unique[counts > 1])
    opaque = np.zeros(n_slots, bool)  # lookups probe past what cannot be read, matching none of it
    opaque[slots[~valid]] = True
    found = np.full(len(slots), -1, np.int64)
    found[valid] = find_many(index, keys, meta.homes, entry_keys[valid], opaque,
                             key_column.homes_of)
    kept = valid & (found == entries)
    report.skipped_entries += int((~damaged & ~kept).sum())
    order = np.sort(entries[kept])
    return keys.take(order), words.take(order)


def _v1_entries(store: RecordStore, meta: TableMetaV1, value_dtype: np.dtype, report):
    """The keys and value words of the slots a format-1 table shows consistent."""
    arena = store.arena
    n_slots = meta.homes + SLACK
    keys_off, dist_off, vals_off = meta.regions
    keys = np.array(arena.array(keys_off, np.int64, n_slots))
    dist = np.array(arena.array(dist_off, np.uint8, n_slots))
    words = np.array(arena.array(vals_off, value_dtype, n_slots))
    occupied = np.flatnonzero(dist)
    on_failed_pages = (arena.damaged_items(keys_off, 8, n_slots)
                       | arena.damaged_items(dist_off, 1, n_slots)
                       | arena.damaged_items(vals_off, value_dtype.itemsize, n_slots))[occupied]
    report.damaged_entries += int(on_failed_pages.sum())
    occupied = occupied[~on_failed_pages]
    placed = homes_of(keys[occupied], meta.homes) + dist[occupied].astype(np.int64) - 1 == occupied
    report.skipped_entries += int((~placed).sum())
    occupied = occupied[placed]
    unique, counts = np.unique(keys[occupied], return_counts=True)
    once = ~np.isin(keys[occupied], unique[counts > 1])
    report.skipped_entries += int((~once).sum())
    occupied = occupied[once]
    return keys[occupied], words[occupied]


def _decode_word(serializer, word: int, read_record: Callable[[int], bytes]):
    length = word & 0xFF
    if length == EXTERNAL:
        return serializer.loads(read_record(word >> 8))
    if length > 7:
        raise CorruptionError(f"slot word with inline length {length}")
    return serializer.loads((word >> 8).to_bytes(length, "little"))
