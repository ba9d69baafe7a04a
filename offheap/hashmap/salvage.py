"""Reading a possibly damaged LongHashMap table defensively, for salvage (layer 6).

:func:`read_table` is the hash table's part of :func:`offheap.salvage`: it knows the table
format (:mod:`offheap.hashmap.layout`), the driver in :mod:`offheap.db.salvage` knows files and
reports. An entry is kept when all of this holds, and counted as skipped otherwise:

- an index slot points at it, the entry number is below ``used`` and its live bit is set, and no
  other slot points at the same entry and no other such entry holds the same key;
- a lookup of its key finds it (probing past the slots the rules above do not trust, which
  match no key);
- its value decodes (an external value's record must be readable and deserialize; a pickled
  value becomes its placeholder, :mod:`offheap.store.pickled`, and is never unpickled).

Index slots, keys, values and live bits on pages that failed their checksum are not read; the
entries they hold are counted apart (``damaged_entries``). Entries come out in entry order, so
the copy keeps the map's insertion order. A format-1 table (one Robin Hood table) is read by the
same rules with the distance byte in place of the index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from offheap.errors import CorruptionError
from offheap.hashmap.layout import SLACK, TableMeta, TableMetaV1, homes_of
from offheap.hashmap.layout import parse_chunk_list
from offheap.hashmap.placement import find_many
from offheap.hashmap.regions import Column, Regions
from offheap.hashmap.valueslots import EXTERNAL
from offheap.store.records import RecordStore
from offheap.hashmap.table import table_serializer

BATCH = 1 << 16


def read_table(store: RecordStore, meta: TableMeta | TableMetaV1, report,
               read_record: Callable[[int], bytes],
               damaged_record: type[Exception]) -> Iterator[tuple[np.ndarray, list | np.ndarray]]:
    """Yield ``(keys, values)`` batches of the entries that pass the checks of the module
    docstring; count what fails in ``report`` (``damaged_entries``, ``skipped_entries``,
    ``error``). ``read_record`` reads an external value's record, raising ``damaged_record``
    when it lies on a failed page."""
    serializer = table_serializer(meta.value)
    value_dtype = serializer.dtype if serializer.dtype is not None else np.dtype(f"<u{meta.width}")
    try:
        if isinstance(meta, TableMetaV1):
            keys, words = _v1_entries(store, meta, value_dtype, report)
        else:
            keys, words = _entries(store, meta, value_dtype, report, read_record)
    except Exception as exc:  # a missing or short region
        report.error = f"the table's arrays are unreadable: {exc}"
        return
    for start in range(0, len(keys), BATCH):
        batch_keys, batch_words = keys[start: start + BATCH], words[start: start + BATCH]
        if serializer.dtype is not None:
            yield batch_keys, batch_words
            continue
        good_keys, good_values = [], []
        for key, word in zip(batch_keys.tolist(), batch_words.tolist()):
            try:
                good_values.append(_decode_word(serializer, int(word), read_record))
            except damaged_record:
                report.damaged_entries += 1
                continue
            except Exception:  # a damaged record may fail in any decoder
                report.skipped_entries += 1
                continue
            good_keys.append(key)
        yield np.array(good_keys, np.int64), good_values


def _entries(store: RecordStore, meta: TableMeta, value_dtype: np.dtype, report,
             read_record: Callable[[int], bytes]):
    """The keys and value words of the entries a format-2 table shows consistent, in order."""
    arena = store.arena
    chunks = parse_chunk_list(read_record(meta.chunk_list_recid), meta.used, meta.first_capacity)
    table = Regions(meta.homes, meta.width, value_dtype, meta.first_capacity, meta.index_region,
                    chunks)
    table.map_views(store)
    n_slots = meta.homes + SLACK
    index = np.array(table.index)
    keys = Column([np.array(chunk) for chunk in table.key_chunks])
    words = Column([np.array(chunk) for chunk in table.value_chunks])
    live = table.live_mask(meta.used)
    failed_entries = np.concatenate([
        arena.damaged_items(offset, 8, n, 0)
        | (arena.damaged_items(offset, value_dtype.itemsize, n, n * 8) if value_dtype.itemsize
           else False)  # a set's chunk has no values region
        | np.repeat(arena.damaged_items(offset, 1, n >> 3, n * (8 + value_dtype.itemsize)), 8)
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
    for repeated in (entries, entry_keys):  # an entry two slots name, a key two entries hold
        unique, counts = np.unique(repeated[valid], return_counts=True)
        valid[valid] = ~np.isin(repeated[valid], unique[counts > 1])
    opaque = np.zeros(n_slots, bool)  # lookups probe past what cannot be read, matching none of it
    opaque[slots[~valid]] = True
    found = np.full(len(slots), -1, np.int64)
    found[valid] = find_many(index, keys, meta.homes, entry_keys[valid], opaque)
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
