"""The part of a LongHashMap or LongHashSet above its core: one table in a store (layer 6).

:class:`TableFacade` is everything of :class:`~offheap.LongHashMap` and
:class:`~offheap.LongHashSet` that is not their interface: files and stores, the metadata record,
loading and checking a stored table, the invariants, clearing, closing, and what a DB, a reader,
compaction and salvage need (:mod:`offheap.collection.protocol`). The map and the set add their
interface (a ``MutableMapping``, a ``MutableSet``) and put a core first in their bases
(:data:`MapCore`: the compiled one when :mod:`offheap.kernels.native` selects it, else the
pure-Python reference under the lock). The table format is :mod:`offheap.hashmap.layout`; a
set's table has a value width of 0.

Thread safety: every method here is one operation under the table's lock (``_lock``, a DB's
collections share the DB's), as :mod:`offheap.hashmap.locking` states.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from offheap.arena.arena import Arena
from offheap.collection.filemap import StandaloneFileMap, check_reopenable
from offheap.collection.locks import new_lock
from offheap.errors import ClosedError, CorruptionError
from offheap.hashmap.bulk import BulkOperations
from offheap.hashmap.core import MapCore as ReferenceCore
from offheap.hashmap.growth import TableGrowth
from offheap.hashmap.layout import (
    CHUNK_BITS,
    CHUNK_ENTRIES,
    CHUNK_MASK,
    INITIAL_HOMES,
    MAX_LOAD,
    SET_VALUE_TYPE,
    SLACK,
    TableMeta,
    initial_capacity,
    meta_version,
    pack_chunk_list,
    pack_meta,
    parse_chunk_list,
    parse_meta,
    parse_meta_v1,
)
from offheap.hashmap.locking import LockedReferenceCore, locked, locked_generator
from offheap.hashmap.regions import Column, Regions
from offheap.hashmap.valueslots import EXTERNAL, ValueSlots
from offheap.kernels import native
from offheap.kernels.sizes import ByteLimit
from offheap.store.records import RecordStore
from offheap.store.serializers import EMPTY, Serializer, get_serializer

if TYPE_CHECKING:
    MapCore = ReferenceCore  # the compiled type mirrors the reference's interface
else:
    _compiled = native.compiled_module("offheap.hashmap._core")
    MapCore = LockedReferenceCore if _compiled is None else _compiled.MapCore
"""The core a map or set is built on: compiled when available (:mod:`offheap.kernels.native`),
else the pure-Python one under the table's lock."""


def bind_core_methods(cls: type) -> None:
    """Give ``cls`` (a class with :data:`MapCore`, or a Cache's core, first in its bases) its own
    descriptors of the compiled core's methods, the same C functions: CPython specializes a
    call such as ``m.get(k)`` only when the instance's type is exactly the descriptor's
    (``bind_methods`` in offheap/hashmap/_core.c). Nothing to do on the reference core."""
    if not TYPE_CHECKING and _compiled is not None:
        _compiled.bind_methods(cls)


OWN_STORE_RECORDS = (4096 - 64) // 12
"""The record index of an anonymous map's or set's own store starts with room for this many
records (one 4 KiB page with its arena tag, at 12 bytes a record): the table needs two, and
values in records grow it by a quarter at a time (the store's default, 1024, costs three pages
to fill on every construction)."""


def own_store(limit: ByteLimit) -> RecordStore:
    """A new anonymous store for one map or set, with ``limit`` (:class:`LongHashMap`'s)."""
    return RecordStore(Arena.anonymous(limit_bytes=limit), index_capacity=OWN_STORE_RECORDS)


ITER_CHUNK = 1 << 16
"""Entries a chunked iteration (:meth:`TableFacade._chunks`) reads at a time by default."""


class TableFacade(BulkOperations, TableGrowth, StandaloneFileMap):
    """Everything of a LongHashMap or LongHashSet above its core and below its interface (see
    the module docstring)."""

    if TYPE_CHECKING:
        # The core's (offheap.hashmap.core), beyond what TableGrowth names, and the map's or
        # set's interface that the collection protocol names.
        def _attach(self, codec: ValueSlots, index: np.ndarray, key_chunks: list[np.ndarray],
                    value_chunks: list[np.ndarray], live_chunks: list[np.ndarray], homes: int,
                    width: int) -> None: ...

        def _put(self, key: int, word: int | float) -> None: ...

        def _remove(self, key: int) -> None: ...

        def __len__(self) -> int: ...

        def __contains__(self, key: object) -> bool: ...

        def stats(self) -> object: ...

        def _repr_html_(self) -> str: ...

    _lock: threading.RLock  # the table's (or its DB's) lock: offheap.hashmap.locking
    _kind: str  # the class name that errors give: "LongHashMap", "LongHashSet"
    _key_dtype = np.dtype(np.int64)  # the key column's items

    def _open_file(self, store: RecordStore, value, allow_pickle: bool) -> None:
        """Set up on the store of a map's own file: the map it holds (``value`` None: of the
        value type the file names), or a new empty one."""
        try:
            meta_recid = standalone_meta_recid(store.root) if store.root else None
            serializer = get_serializer(value or table_serializer(
                self._stored_value_type(store, meta_recid)))
            self._setup(store, serializer, meta_recid=meta_recid, owns_store=True,
                        allow_pickle=allow_pickle)
            if meta_recid is None:
                store.root = struct.pack("<Q", self._meta_recid)
                self.commit()  # a new file holds an empty map from its first moment on disk
        except BaseException:
            store.arena.close()
            raise
        self._track_file()

    def _setup(self, store: RecordStore, serializer, *, meta_recid, owns_store: bool,
               allow_pickle: bool, lock: threading.RLock | None = None) -> None:
        self._lock = new_lock() if lock is None else lock
        self._store = store
        self._owns_store = owns_store
        self._slots = ValueSlots(serializer, store, allow_pickle)
        self._closed = False
        self._regions = None
        self._n = self._used = self._mods = 0
        if meta_recid is None:
            self._meta_recid = store.put(b"")
            self._chunk_list_recid = store.put(b"")
            self._replace_table(self._new_table())
            self._write_meta()
        else:
            self._meta_recid = meta_recid
            self._load_meta(serializer)

    @locked
    def clear(self) -> None:
        """Remove every entry and shrink the table back to its initial size."""
        self._check_open()
        old_words = self._live_words()
        self._replace_table(self._new_table())
        self._n = self._used = 0
        self._mods += 1
        self._slots.release_many(old_words)


    @property
    def _compiled_core(self) -> bool:
        return not isinstance(self, ReferenceCore)

    @locked
    def flush(self) -> None:
        """Write the map's metadata into the store; a file map without transactions also pushes
        its pages to the file (with ``durability="commit"`` nothing is durable before
        :meth:`commit`)."""
        self._check_open()
        self._write_meta()
        if self._owns_store:
            self._store.flush()

    @locked
    def close(self) -> None:
        """Release the memory (a file map is committed first, or flushed with
        ``durability="none"``); later use raises ClosedError. Idempotent."""
        if self._closed:
            return
        written = False
        try:
            if not self._store.arena.readonly and (
                    not self._owns_store or self._store.arena.path is not None):
                self._write_meta()
                check_reopenable(self, self._store)
            written = True
        finally:
            self._drop_views()
            self._closed = True
            if self._owns_store:
                self._store.close(save=written)

    def _write_back(self) -> None:
        self._write_meta()

    def _discard(self) -> None:
        self._drop_views()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def meta_recid(self) -> int:
        """The store record holding this map's metadata: what reopens it with :meth:`in_store`."""
        return self._meta_recid

    @locked
    def _check(self) -> None:
        """Assert the table's invariants (used by the stateful tests after every step)."""
        self._check_open()
        r = self._table()
        assert self._used <= r.capacity and len(r.chunk_offsets) >= 1
        live = r.live_mask(r.capacity)
        assert int(live.sum()) == self._n, (int(live.sum()), self._n)
        assert not live[self._used:].any(), "live bits past used"
        assert self._used == 0 or live[self._used - 1], "the last entry is a hole"
        occupied = np.flatnonzero(r.index)
        assert occupied.size == self._n, (occupied.size, self._n)
        entries = r.index[occupied].astype(np.int64) - 1
        assert np.array_equal(np.sort(entries), np.flatnonzero(live)), "index and live bits differ"
        keys = r.keys.take(entries)
        home = self._homes_of(keys, r.homes)
        assert np.all(home <= occupied), "an entry sits before its home"
        assert np.all(home[1:] >= home[:-1]), "Robin Hood order broken"
        gaps = np.flatnonzero(np.diff(occupied) > 1)
        assert np.all(home[gaps + 1] >= occupied[gaps] + 1), "an entry is cut off from its home"
        assert np.unique(keys).size == keys.size, "duplicate keys"
        assert self._n <= MAX_LOAD * r.homes
        if not self._slots.typed:
            words = r.values.take(entries).astype(np.uint64)
            assert self._slots.width_of_many(words) <= r.width
            for word in words[(words & np.uint64(0xFF)) == EXTERNAL].tolist():
                assert (word >> 8) in self._store, f"external value {word >> 8} is missing"
            counted = self._slots.external_count
            assert counted is None or counted == self._scan_external(), "external count drifted"
        self._store._check()

    def _attach_regions(self) -> None:
        r = self._table()
        self._attach(self._slots, r.index, r.key_chunks, r.value_chunks, r.live_chunks, r.homes,
                     r.width)

    def _keys_out(self, keys: np.ndarray) -> list:
        """Items of the key column as the map hands its keys out."""
        return keys.tolist()

    def _new_table(self) -> Regions:
        width = self._slots.initial_width
        dtype = self._slots.dtype_for_width(width)
        return Regions.allocate(self._store, INITIAL_HOMES, width, dtype,
                                initial_capacity(dtype.itemsize, self._key_dtype.itemsize),
                                self._key_dtype)

    def _replace_table(self, new: Regions) -> None:
        """Detach the core, free the current table, attach ``new``."""
        old = self._regions
        self._detach()
        if old is not None:
            old.free(self._store)
        self._regions = new
        self._attach_regions()

    def _drop_views(self) -> None:
        self._detach()
        if self._regions is not None:
            self._regions.drop_views()

    # -- what DB, readers, compaction and salvage use ------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"the {self._kind} is closed")

    @locked
    def _release(self) -> None:
        """Drop the table views before the store rolls back or remaps (see :meth:`_reload`)."""
        self._drop_views()

    @locked
    def _reload(self, meta_recid: int | None = None) -> None:
        """Re-read the table from the metadata record (``meta_recid`` when it moved, as in a
        compacted file), dropping the old views: after a rollback, or when a reader's arena
        picked up another process's commit. Iterators in progress raise RuntimeError on their
        next step."""
        self._drop_views()
        self._regions = None
        self._mods += 1
        if meta_recid is not None:
            self._meta_recid = meta_recid
        self._slots.external_count = None
        self._load_meta(self._slots.serializer)

    @locked
    def _copy_to(self, other: TableFacade) -> None:
        """Make ``other``, an empty map of the same value type in another store, hold this
        map's entries in the same order: the value words are copied as arrays (external values
        record by record) and placed at the smallest index that holds them, so compaction
        neither decodes values nor grows the table step by step."""
        self._check_open()
        keys, words = self._live_entries()
        if not self._slots.typed:
            words = words.astype(np.uint64)
            for i in np.flatnonzero((words & np.uint64(0xFF)) == EXTERNAL).tolist():
                data = self._store.view(int(words[i]) >> 8)
                words[i] = EXTERNAL | other._store.put(data) << 8
            other._slots.external_count = None  # records put around the slots: count anew
        other._reserve(len(keys), self._table().width)
        other._append_many(keys, words.astype(other._table().value_dtype))

    @locked
    def _copy_regions_of(self, source: TableFacade) -> None:
        """Make this table, an empty one of the same value type in another store, a copy of
        ``source``'s, byte for byte: an index and chunks of the same shape, filled by memory
        copies, and the counters. For tables of typed values only (a set's): the words of
        serialized values would name records of the other store. All or nothing: a
        CapacityError leaves this table as it was."""
        self._check_open()
        r = source._table()
        assert self._slots.typed and self._n == 0, "a copy of typed values into an empty table"
        new = Regions.allocate(self._store, r.homes, r.width, r.value_dtype, r.first_capacity)
        try:
            new.chunk_offsets += self._new_chunks([CHUNK_ENTRIES] * (len(r.chunk_offsets) - 1),
                                                  r.value_dtype)
        except BaseException:
            new.free(self._store)
            raise
        new.map_views(self._store)
        new.index[:] = r.index
        for parts, copies in ((r.key_chunks, new.key_chunks), (r.value_chunks, new.value_chunks),
                              (r.live_chunks, new.live_chunks)):
            for part, copied in zip(parts, copies):
                copied[:] = part
        self._replace_table(new)
        self._n, self._used = source._n, source._used
        self._mods += 1

    @locked
    def _table_bytes(self) -> int:
        """Bytes of the table's regions."""
        return self._table().region_bytes(self._store)

    @locked
    def _live_bytes(self) -> int:
        """Bytes this map holds in its store: the table regions and the external value records."""
        self._check_open()
        if self._slots.typed:
            return self._table_bytes()
        words = self._live_words().astype(np.uint64)
        external = (words[(words & np.uint64(0xFF)) == EXTERNAL] >> np.uint64(8)).astype(np.int64)
        return self._table_bytes() + self._store.record_bytes(external)

    @locked
    def _invalidate(self) -> None:
        """Close without writing anything: the store no longer holds this map (a rollback
        dropped it, having been created after the last commit)."""
        self._drop_views()
        self._closed = True

    @locked
    def _count_external(self) -> int:
        """External value records: counted by one scan of the table, then kept by the slots."""
        if self._slots.typed:
            return 0
        if self._slots.external_count is None:
            self._slots.external_count = self._scan_external()
        return self._slots.external_count

    def _scan_external(self) -> int:
        words = self._live_words().astype(np.uint64)
        return int(np.count_nonzero((words & np.uint64(0xFF)) == EXTERNAL))

    def _live_words(self) -> np.ndarray:
        return self._live_of(self._table().values)[0]

    def _live_entries(self) -> tuple[np.ndarray, np.ndarray]:
        r = self._table()
        keys, values = self._live_of(r.keys, r.values)
        return keys, values

    def _live_of(self, *columns: Column) -> list[np.ndarray]:
        """The live entries' items of each column (new arrays), in entry order; without holes,
        the first ``used`` of each copied at memory speed, else gathered by the live bits."""
        if self._n == self._used:
            return [column.head(self._used) for column in columns]
        live = np.flatnonzero(self._table().live_mask(self._used))
        return [column.take(live) for column in columns]

    @locked_generator
    def _chunks(self, with_values: bool, chunk_entries: int = ITER_CHUNK):
        """Yield (keys, values) lists of ``chunk_entries`` entries at a time (a power of two
        dividing a table chunk) in entry order; RuntimeError if the map changes meanwhile. A
        step costs O(chunk_entries), whatever the map's size."""
        if chunk_entries & (chunk_entries - 1) or not 8 <= chunk_entries <= CHUNK_ENTRIES:
            raise ValueError(f"chunk_entries is a power of two in [8, {CHUNK_ENTRIES}], "
                             f"not {chunk_entries}")
        self._check_open()
        mods = self._mods
        start = 0
        while True:
            if self._mods != mods:
                raise RuntimeError(f"{self._kind} changed size during iteration")
            self._check_open()
            if start >= self._used:
                return
            r = self._table()
            chunk, at = start >> CHUNK_BITS, start & CHUNK_MASK
            stop = min(at + chunk_entries, self._used - (chunk << CHUNK_BITS))
            bits = r.live_chunks[chunk][at >> 3: (stop + 7) >> 3]
            live = np.flatnonzero(np.unpackbits(bits, bitorder="little")[: stop - at]) + at
            keys = self._keys_out(r.key_chunks[chunk].take(live))
            values = self._slots.decode_many(r.value_chunks[chunk].take(live)).tolist() \
                if with_values else None
            yield keys, values
            start = (chunk << CHUNK_BITS) + stop

    @locked_generator
    def _reversed_entries(self, what: int) -> Iterator:
        """Keys (0), values (1) or items (2) in reverse entry order, decoded a chunk at a time;
        RuntimeError at the step after a change of the entries, as the core's iterators."""
        self._check_open()
        mods = self._mods
        stop = self._used
        while stop:
            start = max(0, stop - ITER_CHUNK)
            r = self._table()
            live = (np.flatnonzero(r.live_mask(stop)[start:]) + start)[::-1]
            keys = self._keys_out(r.keys.take(live))
            values = self._slots.decode_many(r.values.take(live)).tolist() if what else keys
            for key, value in zip(keys, values):
                if self._mods != mods:
                    raise RuntimeError(f"{self._kind} changed size during iteration")
                yield key if what == 0 else value if what == 1 else (key, value)
            stop = start
        if self._mods != mods:
            raise RuntimeError(f"{self._kind} changed size during iteration")

    # -- persistence --------------------------------------------------------------------------

    def _write_meta(self) -> None:
        r = self._table()
        meta = TableMeta(self._slots.serializer.name, r.homes, r.width, self._n, self._used,
                         r.first_capacity, r.index_offset, self._chunk_list_recid)
        self._store.update(self._chunk_list_recid, pack_chunk_list(r.chunk_offsets))
        self._store.update(self._meta_recid, self._meta_bytes(meta))

    def _meta_bytes(self, meta: TableMeta) -> bytes:
        """The metadata record of this table, whose shared fields are ``meta``."""
        return pack_meta(meta)

    @staticmethod
    def _stored_value_type(store: RecordStore, meta_recid: int | None) -> str:
        """:func:`stored_value_type` of this kind of table."""
        return stored_value_type(store, meta_recid)

    def _load_meta(self, serializer) -> None:
        record = self._meta_record()
        if self._of_format_1(record):
            self._convert_v1(record, serializer)
            return
        meta, regions = self._stored_table(record, serializer)
        regions.checked_views(self._store)
        _check_live_count(regions, meta)
        self._chunk_list_recid = meta.chunk_list_recid
        self._replace_table(regions)
        self._n, self._used = meta.n_entries, meta.used

    def _check_stored(self) -> None:
        """CorruptionError unless the metadata record passes the checks a reopen makes and
        names the table this map holds: what a commit runs before it publishes the table, so
        that a commit never writes a map that would not open. Two small records read, the
        geometry compared, the live bits counted: O(chunks + capacity / 64) words, about 0.2 ms
        per million entries."""
        self._check_open()
        meta, stored = self._stored_table(self._meta_record(), self._slots.serializer)
        r = self._table()
        if (stored.homes, stored.width, stored.first_capacity, stored.index_offset,
                stored.chunk_offsets) != (r.homes, r.width, r.first_capacity, r.index_offset,
                                          r.chunk_offsets):
            raise CorruptionError("LongHashMap metadata does not name the table the map holds")
        _check_live_count(r, meta)

    def _meta_record(self) -> bytes:
        try:
            return self._store.get(self._meta_recid)
        except KeyError:
            raise CorruptionError(f"LongHashMap metadata record {self._meta_recid} is missing") from None

    def _stored_table(self, record: bytes, serializer) -> tuple[TableMeta, Regions]:
        """The format-2 table a metadata record names (no views made yet), checked: the
        record and its chunk list in range, the value type ``serializer``'s."""
        meta = self._parse_meta(record)
        _check_value_type(meta.value, serializer, self._kind)
        try:
            chunk_list = self._store.get(meta.chunk_list_recid)
        except KeyError:
            raise CorruptionError(f"LongHashMap chunk list record {meta.chunk_list_recid} is "
                                  f"missing") from None
        chunks = parse_chunk_list(chunk_list, meta.used, meta.first_capacity)
        return meta, Regions(meta.homes, meta.width, self._slots.dtype_for_width(meta.width),
                             meta.first_capacity, meta.index_region, chunks, self._key_dtype)

    def _parse_meta(self, record: bytes) -> TableMeta:
        """The fields of a metadata record (CorruptionError if it is not this kind's)."""
        return parse_meta(record)

    def _of_format_1(self, record: bytes) -> bool:
        """Whether a metadata record is of LongHashMap's format 1 (converted on open)."""
        return meta_version(record) == 1

    def _convert_v1(self, record: bytes, serializer) -> None:
        """Rebuild a format-1 table as format 2 (entries numbered in slot order) and free the
        old arrays; a reader cannot, and says what to do."""
        meta = parse_meta_v1(record)
        _check_value_type(meta.value, serializer, self._kind)
        if self._store.arena.readonly:
            raise CorruptionError(
                "this LongHashMap was written in table format 1 by an older offheap; this "
                "version reads format 2. Open it once for writing (LongHashMap(path=...) or "
                "DB.file(path)) to convert it, then read it again")
        n_slots = meta.homes + SLACK
        keys_off, dist_off, vals_off = meta.regions
        old_dtype = self._slots.dtype_for_width(meta.width)
        occupied = np.flatnonzero(self._store.region_array(dist_off, np.uint8, n_slots))
        keys = self._store.region_array(keys_off, np.int64, n_slots)[occupied].copy()
        words = self._store.region_array(vals_off, old_dtype, n_slots)[occupied].copy()
        if len(keys) != meta.n_entries:
            raise CorruptionError(f"LongHashMap holds {len(keys)} entries, its metadata says "
                                  f"{meta.n_entries}")
        self._chunk_list_recid = self._store.put(b"")
        self._replace_table(self._new_table())
        self._reserve(len(keys), meta.width)
        self._append_many(keys, words)
        for offset in meta.regions:
            self._store.free_region(offset)
        self._write_meta()

def _check_live_count(regions: Regions, meta: TableMeta) -> None:
    """CorruptionError unless the live bits of ``regions`` (views made) count the entries
    ``meta`` says, none of them past ``meta.used``."""
    live, past_used = regions.count_live(meta.used)
    if live != meta.n_entries or past_used:
        raise CorruptionError(f"LongHashMap holds {live} entries, its metadata says "
                              f"{meta.n_entries}" + (f" ({past_used} more past the {meta.used} "
                                                     f"used)" if past_used else ""))


def _check_value_type(stored: str, serializer, kind: str) -> None:
    """ValueError unless the stored table's value type is ``serializer``'s and fits ``kind``
    (the opener's class name): a set's table (:data:`~offheap.hashmap.layout.SET_VALUE_TYPE`)
    opens only as a set (LongHashSet, HashSet), a map's only as a map (LongHashMap, HashMap)."""
    held = kind.replace("Map", "Set") if stored == SET_VALUE_TYPE else kind.replace("Set", "Map")
    if held != kind:
        raise ValueError(f"the stored table is a {held}, not a {kind}; open it as a {held}")
    if stored == serializer.name:
        return
    raise ValueError(f"the stored map holds {stored!r} values, not {serializer.name!r}; "
                     f"open it with value={stored!r}")


def standalone_meta_recid(root: bytes) -> int:
    """The metadata record named by the store root of a standalone LongHashMap file."""
    if len(root) != 8:
        raise CorruptionError(f"the file holds no LongHashMap (store root of {len(root)} bytes)")
    return struct.unpack("<Q", root)[0]


def stored_value_type(store: RecordStore, meta_recid: int | None) -> str:
    """The value serializer's name that the map whose metadata is record ``meta_recid`` was
    made with (``"object"`` for a new map, ``meta_recid`` None): what ``LongHashMap(path=...)``
    without ``value=`` opens it with. A missing or damaged record is reported by the load."""
    if meta_recid is None:
        return "object"
    try:
        record = store.get(meta_recid)
        meta = parse_meta_v1(record) if meta_version(record) == 1 else parse_meta(record)
    except (KeyError, ValueError, struct.error):
        return "object"  # the metadata load that follows raises with the file's story
    return meta.value


def table_serializer(name: str) -> Serializer:
    """The value serializer a stored table's value type names: :data:`EMPTY` for a set's
    (:data:`~offheap.hashmap.layout.SET_VALUE_TYPE`), else the one :func:`get_serializer`
    knows (ValueError for an unknown name)."""
    return EMPTY if name == SET_VALUE_TYPE else get_serializer(name)
