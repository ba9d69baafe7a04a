"""LongHashMap: an int64-keyed hash map whose entries live in an arena (layer 6).

Layout. Three arrays of ``homes + SLACK`` slots each, every one an arena region:

    keys   int64   the key
    dist   uint8   0 = empty, else 1 + the slot's distance from the key's home slot
    values         typed values or 2/4/8-byte slot words (:mod:`offheap.hashmap.valueslots`)

A key's *home* is ``mix64(key) * homes >> 64``: the hash scaled to ``[0, homes)``, which
keeps homes in hash order for any table size. Collisions are resolved by linear
probing in Robin Hood order: along the table, entries are sorted by home slot, and each sits as
close to its home as that order allows. Probing never wraps around: the ``SLACK`` extra slots at
the end take the overflow of the last homes, and a probe distance above ``MAX_DIST`` grows the
table instead. So a lookup stops at the first slot whose distance is shorter than its own (the key
would have displaced that entry), and the whole table can be rebuilt with numpy: sort the entries
by home, then ``slot[i] = i + cummax(home[j] - j for j <= i)``.

Insert (Robin Hood by shifting). Probe to the first slot ``i`` holding an entry richer than the
new key (a smaller distance), shift the run ``i..j-1`` up to the next empty slot ``j`` one place
right (each moved entry's distance grows by one), and write the key at ``i``. Example, keys
A(home 3) B(home 3) C(home 4) and a new D with home 3::

    slot   3   4   5   6           3   4   5   6   7
    before A:1 B:2 C:2 -     after A:1 B:2 D:3 C:3 -

Delete (backward shift, no tombstones). Remove the entry at ``i`` and move the following entries
one place left until an empty slot or an entry already at its home.

Growth doubles ``homes`` (load factor above ``MAX_LOAD``) with the vectorized rebuild. When a
doubled table would cross the arena's limit, the table grows instead to the largest size that
fits beside the old one, so a map under a limit is not stuck at a third of it. Bulk
calls (``put_many``, ``get_many``, ``contains_many``, ``delete_many``) probe all keys at once,
one numpy round per probe distance, and large batches rebuild the table instead of inserting one
by one.

Failure atomicity: every step that allocates (a value record, a wider or larger table) happens
before the table changes, and is undone if a later step fails; a :class:`CapacityError` leaves the
map exactly as it was.

Thread safety: none. Guard a map shared between threads with a lock; reads alone are safe only
while no thread writes.
"""

from __future__ import annotations

import operator
import os
import struct
from contextlib import nullcontext
from collections.abc import ItemsView, Iterator, KeysView, Mapping, MutableMapping, ValuesView
from dataclasses import dataclass

import numpy as np

from offheap.errors import CapacityError, ClosedError, CorruptionError
from offheap.arena.arena import Arena, format_bytes
from offheap.kernels.mix import MASK64, mix64, mix64_array
from offheap.collection.readers import ChunkItemsView, ChunkValuesView, open_file_reader
from offheap.hashmap.reader import HashReader
from offheap.store.serializers import get_serializer
from offheap.store.records import RecordStore
from offheap.collection.filemap import StandaloneFileMap
from offheap.hashmap.valueslots import EXTERNAL, ValueSlots

MAX_LOAD = 0.875
MAX_DIST = 250
SLACK = 256
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_SCAN_BYTES = 256
_FIRST_SCAN_BYTES = 16  # most runs end within a few slots
_SHORT_RUN = 4
_ITER_CHUNK = 1 << 16
_REHASH_CHUNK = 1 << 18  # slots per chunk when a table moves its own entries to a new table
_INCREMENT = bytes(min(b + 1, 255) for b in range(256))
_DECREMENT = bytes(max(b - 1, 0) for b in range(256))
_AT_HOME_OR_EMPTY = bytes(0 if b <= 1 else 1 for b in range(256))
_META_MAGIC = b"OHLHMAP1"
_META = struct.Struct("<8s16sQBxxxxxxxQQQQ")  # magic, value type, homes, width, n, 3 regions
_MIN_HOMES = 16
_MAX_HOMES = 1 << 32  # the vectorized home computation multiplies 32-bit halves
_WORD_FORMATS = {"uint16": "H", "uint32": "I", "uint64": "Q", "int64": "q", "float64": "d"}


def _as_key(key) -> int:
    """``key`` as a Python int in the int64 range, or TypeError/OverflowError."""
    if type(key) is not int:
        try:
            key = operator.index(key)
        except TypeError:
            raise TypeError(f"LongHashMap keys are int64, not {type(key).__name__}") from None
    if not _INT64_MIN <= key <= _INT64_MAX:
        raise OverflowError(f"key {key} is outside the int64 range [-2**63, 2**63)")
    return key


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
        if array.size and int(array.max()) > _INT64_MAX:
            raise OverflowError(f"key {int(array.max())} is outside the int64 range")
        return array.astype(np.int64)
    if array.dtype.kind == "O" or (array.size == 0 and array.dtype.kind == "f"):
        return np.fromiter((_as_key(k) for k in array.tolist()), np.int64, len(array))
    raise TypeError(f"LongHashMap keys are int64, got an array of {array.dtype}")


@dataclass(frozen=True)
class HashMapStats:
    """Size and memory figures of a :class:`LongHashMap`."""

    n_entries: int
    n_slots: int
    load_factor: float
    value_width_bytes: int
    external_values: int
    reserved_bytes: int
    used_bytes: int

    @property
    def bytes_per_entry(self) -> float:
        return self.reserved_bytes / self.n_entries if self.n_entries else float("nan")


class LongHashMap(StandaloneFileMap, MutableMapping):
    """A ``MutableMapping[int, V]`` for int64 keys, stored off the Python heap.

    ``value`` names the value serializer: ``"object"`` (any picklable value; small ones inline),
    ``"int64"``, ``"float64"``, ``"str"`` or ``"bytes"``. ``limit`` caps the memory in bytes
    (:class:`CapacityError` beyond it).

    With ``path`` the map lives in that file and ``LongHashMap(path=...)`` opens it again. With
    ``durability="commit"`` (the default) :meth:`commit` makes every change durable at once,
    :meth:`rollback` drops the changes since, and :meth:`close` commits; ``durability="none"``
    writes through to the file, like MapDB without transactions (see ``docs/durability.md``).
    :meth:`reader` opens a read-only :class:`~offheap.hashmap.reader.HashReader` of the file,
    which follows the commits of the one writer process (``readonly=True`` here is a TypeError
    naming it). ``verify`` checks the page checksums on open; ``recover=True`` opens a file
    that was not closed cleanly (for :func:`offheap.salvage`).
    """

    _lock = nullcontext()  # not thread-safe: commit and rollback take no lock

    def __init__(self, value="object", *, limit: int | None = None, path=None,
                 durability: str = "commit", readonly: bool = False, verify: bool = True,
                 recover: bool = False) -> None:
        self._refuse_readonly(readonly)
        serializer = get_serializer(value)
        if path is None:
            store = RecordStore(Arena.anonymous(limit_bytes=limit))
            self._setup(store, serializer, meta_recid=None, owns_store=True)
            return
        store = RecordStore.file(path, limit_bytes=limit, durability=durability, verify=verify,
                                 recover=recover)
        try:
            meta_recid = standalone_meta_recid(store.root) if store.root else None
            self._setup(store, serializer, meta_recid=meta_recid, owns_store=True)
            if meta_recid is None:
                store.root = struct.pack("<Q", self._meta_recid)
                self.commit()  # a new file holds an empty map from its first moment on disk
        except BaseException:
            store.arena.close()
            raise

    @classmethod
    def reader(cls, path: str | os.PathLike[str], value="object", *, limit: int | None = None,
               verify: bool = True, recover: bool = False) -> HashReader:
        """A read-only :class:`~offheap.hashmap.reader.HashReader` of the LongHashMap file at
        ``path``, beside the one writer process (:mod:`offheap.collection.readers`). ``value``
        is the constructor's; ``limit``, ``verify`` and ``recover`` apply to this open."""
        serializer = get_serializer(value)

        def build(store: RecordStore) -> LongHashMap:
            hashmap = cls.__new__(cls)
            hashmap._setup(store, serializer, meta_recid=standalone_meta_recid(store.root),
                           owns_store=True)
            return hashmap

        return open_file_reader(path, build, HashReader, limit_bytes=limit, verify=verify,
                                recover=recover)

    @classmethod
    def in_store(cls, store: RecordStore, value="object", meta_recid: int | None = None) -> LongHashMap:
        """A map kept in a shared store (a :class:`~offheap.db.DB`); ``meta_recid`` reopens one."""
        hashmap = cls.__new__(cls)
        hashmap._setup(store, get_serializer(value), meta_recid=meta_recid, owns_store=False)
        return hashmap

    def _setup(self, store: RecordStore, serializer, *, meta_recid, owns_store: bool) -> None:
        self._store = store
        self._owns_store = owns_store
        self._values = ValueSlots(serializer, store)
        self._encode = self._values.encode
        self._closed = False
        self._mods = 0
        self._keys_off = self._dist_off = self._vals_off = 0
        if meta_recid is None:
            self._meta_recid = store.put(b"")
            width = self._values.initial_width
            offsets = self._allocate_table(_MIN_HOMES, width)
            self._install(_MIN_HOMES, width, 0, *offsets)
            self._write_meta()
        else:
            self._meta_recid = meta_recid
            self._load_meta(serializer)

    # -- the scalar dict interface ------------------------------------------------------------

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, key):
        slot, missing = self._probe(key)
        if missing:
            raise KeyError(key)
        return self._values.decode(self._vm[slot])

    def __contains__(self, key) -> bool:
        return not self._probe(key)[1]

    def get(self, key, default=None):
        slot, missing = self._probe(key)
        return default if missing else self._values.decode(self._vm[slot])

    def __setitem__(self, key, value) -> None:
        if type(key) is not int:
            key = _as_key(key)
        slot, d = self._probe(key)
        word = self._encode(value)
        if self._narrow and word & 0xFF >= self._width:  # inline length (or 0xFF) too long
            pass  # the value column must widen first: the general path below
        elif not d:
            old = self._vm[slot]
            self._vm[slot] = word
            if self._serialized and old & 0xFF == 0xFF:
                self._values.release(old)
            return
        elif self._n < self._max_n and d <= MAX_DIST and (
                self._dm[slot] == 0 or self._shift_right(slot)):
            self._km[slot] = key
            self._dm[slot] = d
            self._vm[slot] = word
            self._n += 1
            self._mods += 1
            return
        try:
            self._insert(key, word)
        except BaseException:
            self._values.release(word)
            raise

    def __delitem__(self, key) -> None:
        slot, missing = self._probe(key)
        if missing:
            raise KeyError(key)
        word = self._vm[slot]
        self._remove_slot(slot)
        self._values.release(word)

    def __iter__(self) -> Iterator[int]:
        for keys, _ in self._chunks(with_values=False):
            yield from keys

    def keys(self) -> KeysView:
        return KeysView(self)

    def values(self) -> ValuesView:
        return ChunkValuesView(self)

    def items(self) -> ItemsView:
        return ChunkItemsView(self)

    def popitem(self):
        """Remove and return some ``(key, value)`` pair; KeyError when empty."""
        self._check_open()
        if not self._n:
            raise KeyError("popitem(): LongHashMap is empty")
        for end in range(self._slots, 0, -_ITER_CHUNK):
            occupied = np.flatnonzero(self._d[max(0, end - _ITER_CHUNK): end])
            if occupied.size:
                slot = max(0, end - _ITER_CHUNK) + int(occupied[-1])
                break
        key, word = self._km[slot], self._vm[slot]
        value = self._values.decode(word)
        self._remove_slot(slot)
        self._values.release(word)
        return key, value

    def clear(self) -> None:
        """Remove every entry and shrink the table back to its initial size."""
        self._check_open()
        old_words = self._v[self._d != 0].copy()
        width = self._values.initial_width
        offsets = self._allocate_table(_MIN_HOMES, width)
        self._replace_table(_MIN_HOMES, width, 0, offsets)
        self._values.release_many(old_words)

    def update(self, other=(), /, **kwargs) -> None:
        """Like ``dict.update``; a LongHashMap, a Mapping or a ``(keys, values)`` pair of numpy
        arrays goes through :meth:`put_many` in one vectorized step."""
        if kwargs:
            raise TypeError("LongHashMap keys are int64; keyword arguments would be str keys")
        if isinstance(other, LongHashMap):
            self.put_many(*other._export())
        elif isinstance(other, tuple) and len(other) == 2 and all(
                isinstance(part, np.ndarray) for part in other):
            self.put_many(*other)
        elif isinstance(other, Mapping) or hasattr(other, "keys"):
            keys = list(other.keys())
            self.put_many(keys, [other[k] for k in keys])
        else:
            keys, values = [], []
            for n, pair in enumerate(other):
                try:
                    key, value = pair
                except (TypeError, ValueError):
                    raise ValueError(f"update sequence element #{n} is not a (key, value) pair") from None
                keys.append(key)
                values.append(value)
            self.put_many(keys, values)

    def copy(self) -> LongHashMap:
        """A new anonymous LongHashMap with the same entries, value type and limit."""
        self._check_open()
        twin = LongHashMap(self._values.serializer, limit=self._store.arena.limit_bytes)
        twin.put_many(*self._export())
        return twin

    # -- bulk numpy interface -----------------------------------------------------------------

    def put_many(self, keys, values) -> None:
        """Insert or overwrite many entries; for duplicate keys the last one wins."""
        self._check_open()
        keys = as_key_array(keys)
        if len(values) != len(keys):
            raise ValueError(f"{len(keys)} keys but {len(values)} values")
        words = self._values.encode_many(values)
        try:
            keys, words = self._last_wins(keys, words)
            slots = self._find_many(keys) if self._n else np.full(len(keys), -1, np.int64)
            found = slots >= 0
            n_new = int(len(keys) - found.sum())
            width = max(self._width, self._values.width_of_many(words))
            if (width > self._width or self._n + n_new > self._max_n
                    or n_new * 8 >= max(self._n, 1024)):
                self._rebuild_with(keys, words, replaced_slots=slots[found])
            else:
                self._insert_new(keys[~found], words[~found])
                slots = self._find_many(keys[found])  # the inserts shifted entries
                old = self._v[slots].copy()
                self._v[slots] = words[found]
                self._values.release_many(old)
        except BaseException:
            self._values.release_many(words)
            raise

    def get_many(self, keys, default=None):
        """Values of many keys: an ndarray for typed values, else a list.

        Missing keys give ``default``; a typed map with missing keys and ``default=None`` raises
        KeyError, since None has no int64/float64 form.
        """
        self._check_open()
        keys = as_key_array(keys)
        slots = self._find_many(keys)
        found = slots >= 0
        values = self._values.decode_many(self._v[slots[found]])
        if self._values.typed:
            if found.all():
                return values
            if default is None:
                missing = int(keys[~found][0])
                raise KeyError(f"{int((~found).sum())} keys are missing (first: {missing}); "
                               f"pass default= to fill them")
            out = np.full(len(keys), default, dtype=values.dtype)
            out[found] = values
            return out
        if found.all():
            return values.tolist()
        fill = np.empty(1, object)
        fill[0] = default  # a one-element object array repeats any default, tuples included
        out = fill[np.zeros(len(keys), np.intp)]
        out[found] = values
        return out.tolist()

    def contains_many(self, keys) -> np.ndarray:
        """A bool array: which keys are in the map."""
        self._check_open()
        return self._find_many(as_key_array(keys)) >= 0

    def delete_many(self, keys) -> int:
        """Remove the keys that are present (absent ones are ignored); return how many went."""
        self._check_open()
        keys = np.unique(as_key_array(keys))
        slots = self._find_many(keys)
        present = slots >= 0
        keys, slots = keys[present], slots[present]
        if not slots.size:
            return 0
        removed_words = self._v[slots].copy()
        if slots.size * 8 >= self._n:
            keep = np.ones(self._slots, bool)
            keep[slots] = False
            keep &= self._d != 0
            self._rebuild(self._homes, self._width, self._k[keep].copy(), self._v[keep].copy())
        else:
            for key in keys.tolist():  # slots move as entries shift: find each one afresh
                self._remove_slot(self._probe(key)[0])
        self._values.release_many(removed_words)
        return int(slots.size)

    # -- introspection and lifetime -----------------------------------------------------------

    def stats(self) -> HashMapStats:
        self._check_open()
        return HashMapStats(
            n_entries=self._n, n_slots=self._slots,
            load_factor=self._n / self._homes, value_width_bytes=self._width,
            external_values=self._count_external(),
            reserved_bytes=self._store.arena.reserved_bytes,
            used_bytes=self._store.arena.used_bytes)

    def __repr__(self) -> str:
        if self._closed:
            return "<LongHashMap (closed)>"
        s = self.stats()
        per_entry = f"{s.bytes_per_entry:.1f} B/entry" if self._n else "empty"
        return (f"<LongHashMap {self._n:,} entries, value={self._values.serializer.name}, "
                f"{format_bytes(s.reserved_bytes)} reserved, {per_entry}, load {s.load_factor:.2f}>")

    def _repr_html_(self) -> str:
        if self._closed:
            return "<p><b>LongHashMap</b> (closed)</p>"
        s = self.stats()
        rows = [("entries", f"{s.n_entries:,}"), ("value type", self._values.serializer.name),
                ("reserved", format_bytes(s.reserved_bytes)),
                ("bytes/entry", f"{s.bytes_per_entry:.2f}" if s.n_entries else "-"),
                ("slots", f"{s.n_slots:,}"), ("load factor", f"{s.load_factor:.3f}"),
                ("value slot width", f"{s.value_width_bytes} B")]
        body = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{v}</td></tr>" for k, v in rows)
        return f"<table><caption><b>LongHashMap</b></caption>{body}</table>"

    def flush(self) -> None:
        """Write the map's metadata into the store; a file map without transactions also pushes
        its pages to the file (with ``durability="commit"`` nothing is durable before
        :meth:`commit`)."""
        self._check_open()
        self._write_meta()
        if self._owns_store:
            self._store.flush()

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

    def _check(self) -> None:
        """Assert the table's invariants (used by the stateful tests after every step)."""
        self._check_open()
        occupied = np.flatnonzero(self._d)
        assert occupied.size == self._n, (occupied.size, self._n)
        keys = self._k[occupied]
        home = homes_of(keys, self._homes)
        assert np.array_equal(home + self._d[occupied].astype(np.int64) - 1, occupied), "misplaced"
        assert np.all(self._d[1:].astype(np.int64) <= self._d[:-1].astype(np.int64) + 1), \
            "Robin Hood order broken"
        assert np.unique(keys).size == keys.size, "duplicate keys"
        assert self._n <= self._max_n
        if not self._values.typed:
            words = self._v[occupied].astype(np.uint64)
            assert self._values.width_of_many(words) <= self._width
            for word in words[(words & np.uint64(0xFF)) == 0xFF].tolist():
                assert (word >> 8) in self._store, f"external value {word >> 8} is missing"
            counted = self._values.external_count
            assert counted is None or counted == self._scan_external(), "external count drifted"
        self._store._check()

    # -- probing ------------------------------------------------------------------------------

    def _probe(self, key) -> tuple[int, int]:
        """Where ``key`` is: ``(slot, 0)`` if present, else ``(slot, d)`` with the slot where
        it would go and its distance from home plus one there."""
        if self._closed:
            raise ClosedError("the LongHashMap is closed")
        if type(key) is not int or not _INT64_MIN <= key <= _INT64_MAX:
            key = _as_key(key)
        h = key & MASK64  # mix64(key), inlined: a call costs as much as the probe
        h = ((h ^ (h >> 33)) * 0xFF51AFD7ED558CCD) & MASK64
        h = ((h ^ (h >> 33)) * 0xC4CEB9FE1A85EC53) & MASK64
        slot = (h ^ (h >> 33)) * self._homes >> 64
        dm, km = self._dm, self._km
        d = 1
        while dm[slot] >= d:
            if km[slot] == key:
                return slot, 0
            slot += 1
            d += 1
        return slot, d

    def _find_many(self, keys: np.ndarray) -> np.ndarray:
        """Slots of many keys (-1 where absent): one vectorized round per probe distance."""
        result = np.full(len(keys), -1, np.int64)
        pending = np.arange(len(keys))
        slot = homes_of(keys, self._homes)
        wanted = keys
        d = 1
        while pending.size:
            alive = self._d[slot] >= d
            hit = alive & (self._k[slot] == wanted)
            result[pending[hit]] = slot[hit]
            going = alive & ~hit
            pending, slot, wanted = pending[going], slot[going] + 1, wanted[going]
            d += 1
        return result

    # -- structural changes -------------------------------------------------------------------

    def _insert(self, key: int, word) -> None:
        """Set ``key`` to ``word`` (a new slot or an overwrite); grows the table when needed."""
        if self._values.width_of(word) > self._width:
            self._rebuild(self._homes, self._values.width_of(word))
        while True:
            home = mix64(key) * self._homes >> 64
            slot, d = home, 1
            dm, km = self._dm, self._km
            while dm[slot] >= d:
                if km[slot] == key:
                    old = self._vm[slot]
                    self._vm[slot] = word
                    self._values.release(old)
                    return
                slot += 1
                d += 1
            if self._n < self._max_n and d <= MAX_DIST and self._shift_right(slot):
                km[slot] = key
                dm[slot] = d
                self._vm[slot] = word
                self._n += 1
                self._mods += 1
                return
            self._grow(self._homes * 2)

    def _shift_right(self, slot: int) -> bool:
        """Open slot ``slot`` by moving the run up to the next empty slot one place right.

        False (nothing moved) if there is no empty slot or a moved distance would pass MAX_DIST.
        """
        dm = self._dm
        run_dists = b""
        start = slot
        while True:
            chunk = bytes(dm[start: start + (_SCAN_BYTES if run_dists else _FIRST_SCAN_BYTES)])
            empty = chunk.find(b"\0")
            if empty >= 0:
                run_dists += chunk[:empty]
                break
            if not chunk:
                return False
            run_dists += chunk
            start += len(chunk)
        run = len(run_dists)
        if run == 0:
            return True
        if max(run_dists) >= MAX_DIST:
            return False
        km, vm = self._km, self._vm
        end = slot + run
        if run <= _SHORT_RUN:  # element by element beats three slice copies for short runs
            for j in range(end, slot, -1):
                km[j] = km[j - 1]
                vm[j] = vm[j - 1]
        else:
            km[slot + 1: end + 1] = km[slot: end]
            vm[slot + 1: end + 1] = vm[slot: end]
        dm[slot + 1: end + 1] = run_dists.translate(_INCREMENT)
        return True

    def _remove_slot(self, slot: int) -> None:
        """Empty ``slot`` by backward shift; does not release the value it held."""
        dm = self._dm
        start = slot + 1
        run = 0
        while True:
            chunk = bytes(dm[start: start + _SCAN_BYTES])
            stop = chunk.translate(_AT_HOME_OR_EMPTY).find(b"\0")
            if stop >= 0 or not chunk:
                run += stop if stop >= 0 else 0
                break
            run += len(chunk)
            start += len(chunk)
        if run:
            end = slot + run
            self._km[slot: end] = self._km[slot + 1: end + 1]
            self._vm[slot: end] = self._vm[slot + 1: end + 1]
            dm[slot: end] = bytes(dm[slot + 1: end + 1]).translate(_DECREMENT)
        dm[slot + run] = 0
        self._n -= 1
        self._mods += 1

    def _insert_new(self, keys: np.ndarray, words: np.ndarray) -> None:
        """Insert keys known to be absent one by one; all or none of them on failure."""
        done = []
        try:
            for key, word in zip(keys.tolist(), words.tolist()):
                self._insert(key, word)
                done.append(key)
        except BaseException:
            for key in done:
                self._remove_slot(self._probe(key)[0])
            raise

    def _rebuild_with(self, keys: np.ndarray, words: np.ndarray, replaced_slots: np.ndarray) -> None:
        """Rebuild the table holding its entries, those at ``replaced_slots`` overwritten by (and
        the rest joined with) a batch of distinct keys."""
        keep = self._d != 0
        keep[replaced_slots] = False
        replaced_words = self._v[replaced_slots].copy()
        all_keys = np.concatenate([self._k[keep], keys])
        all_words = np.concatenate([self._v[keep].astype(words.dtype), words])
        width = max(self._width, self._values.width_of_many(words))
        homes = self._homes
        while len(all_keys) > MAX_LOAD * homes:
            homes *= 2
        self._grow(homes, all_keys, all_words, width)
        self._values.release_many(replaced_words)

    def _grow(self, homes: int, keys: np.ndarray | None = None, words: np.ndarray | None = None,
              width: int | None = None) -> None:
        """Rebuild with ``homes`` home slots holding these entries (None: the table's own) or,
        when that table would cross the arena's limit, with the largest table that fits them."""
        width = width or self._width
        n = self._n if keys is None else len(keys)
        try:
            self._rebuild(homes, width, keys, words)
        except CapacityError:
            fitting = self._homes_that_fit(width)
            if fitting is None or fitting >= homes or n > MAX_LOAD * fitting:
                raise
            self._rebuild(fitting, width, keys, words)

    def _homes_that_fit(self, width: int) -> int | None:
        """The most home slots a new table of ``width``-byte values may have beside the old one
        within the limit, or None when that is no more than now. The arena says what its three
        regions really reserve (whole pages, tags, the checksum extent growing with the file);
        a binary search below the byte count alone asks it O(log limit) times."""
        arena = self._store.arena
        if arena.limit_bytes is None:
            return None
        room = arena.limit_bytes - arena.reserved_bytes

        def fits(homes: int) -> bool:
            n_slots = homes + SLACK
            return arena.reservation_bytes(n_slots * 8, n_slots, n_slots * width) <= room

        fitting, too_many = self._homes, max(self._homes, room // (8 + 1 + width) - SLACK) + 1
        while too_many - fitting > 1:
            middle = (fitting + too_many) // 2
            fitting, too_many = (middle, too_many) if fits(middle) else (fitting, middle)
        return fitting if fitting > self._homes else None

    def _rebuild(self, homes: int, width: int, keys: np.ndarray | None = None,
                 words: np.ndarray | None = None) -> None:
        """Replace the table by one of ``homes`` home slots (more if some probe would run past
        MAX_DIST or the slack) holding exactly ``keys``/``words`` or, when they are None, the
        table's own entries, moved chunk by chunk so the heap holds one chunk at a time."""
        n = self._n if keys is None else len(keys)
        while True:
            if homes > _MAX_HOMES:
                raise CapacityError(f"a LongHashMap holds at most {int(MAX_LOAD * _MAX_HOMES):,} entries")
            offsets = self._allocate_table(homes, width)
            try:
                placed = self._place(homes, width, offsets,
                                     self._table_chunks() if keys is None else [(keys, words)])
            except BaseException:
                self._free_regions(offsets)
                raise
            if placed:
                break
            self._free_regions(offsets)
            homes *= 2
        self._replace_table(homes, width, n, offsets)

    def _place(self, homes: int, width: int, offsets, chunks) -> bool:
        """Write entry chunks into a new table's regions, each chunk's entries after the last
        one's; False when an entry would land past the slack or MAX_DIST from its home.

        Robin Hood placement without wrap-around: with entries sorted by home, entry ``j`` takes
        slot ``max(home[j], slot[j-1] + 1)``, i.e. ``j + max(carry, cummax(home - j))``.
        """
        n_slots = homes + SLACK
        k = self._store.region_array(offsets[0], np.int64, n_slots)
        d = self._store.region_array(offsets[1], np.uint8, n_slots)
        v = self._store.region_array(offsets[2], self._values.dtype_for_width(width), n_slots)
        carry = 0  # the first slot the next chunk may use
        for keys, words in chunks:
            if not len(keys):
                continue
            home = homes_of(keys, homes)
            order = np.argsort(home, kind="stable")  # equal homes may sit in any order
            home = home[order]
            index = np.arange(len(keys), dtype=np.int64)
            slots = index + np.maximum(np.maximum.accumulate(home - index), carry)
            if slots[-1] >= n_slots or int((slots - home).max()) >= MAX_DIST:
                return False
            k[slots] = keys[order]
            d[slots] = (slots - home + 1).astype(np.uint8)
            v[slots] = words[order]
            carry = int(slots[-1]) + 1
        return True

    def _table_chunks(self):
        """The table's (keys, words) in slot order, in chunks of about ``_REHASH_CHUNK`` slots.

        Chunks are cut before a slot that is empty or holds an entry at its home, so no home has
        entries in two chunks. Slot order is home order (no wrap-around) and a home in any table
        size grows with the hash, so entries of different old homes keep their order in the new
        table: sorting each chunk by new home sorts the whole sequence.
        """
        dm = self._dm
        start = 0
        while start < self._slots:
            stop = min(start + _REHASH_CHUNK, self._slots)
            while stop < self._slots and dm[stop] > 1:
                stop += 1
            occupied = np.flatnonzero(self._d[start:stop]) + start
            yield self._k[occupied], self._v[occupied]
            start = stop

    def _live_entries(self) -> tuple[np.ndarray, np.ndarray]:
        occupied = self._d != 0
        return self._k[occupied].copy(), self._v[occupied].copy()

    def _last_wins(self, keys: np.ndarray, words: np.ndarray):
        """Drop all but the last occurrence of each key in a batch (releasing dropped words)."""
        ordered = np.sort(keys)
        if not np.any(ordered[1:] == ordered[:-1]):
            return keys, words
        reverse_first = np.unique(keys[::-1], return_index=True)[1]
        keep = np.zeros(keys.size, bool)
        keep[keys.size - 1 - reverse_first] = True
        self._values.release_many(words[~keep])
        return keys[keep], words[keep]

    # -- table memory -------------------------------------------------------------------------

    def _allocate_table(self, homes: int, width: int) -> tuple[int, int, int]:
        """Regions for keys, distances and values; all three or none (CapacityError)."""
        n_slots = homes + SLACK
        sizes = (n_slots * 8, n_slots, n_slots * width)
        offsets = []
        try:
            for size in sizes:
                offsets.append(self._store.allocate_region(size))
        except BaseException:
            self._free_regions(offsets)
            raise
        return tuple(offsets)

    def _free_regions(self, offsets) -> None:
        for offset in offsets:
            self._store.free_region(offset)

    def _replace_table(self, homes: int, width: int, n: int, offsets) -> None:
        old = (self._keys_off, self._dist_off, self._vals_off)
        self._drop_views()
        for offset in old:
            if offset:
                self._store.free_region(offset)
        self._install(homes, width, n, *offsets)
        self._mods += 1

    def _install(self, homes: int, width: int, n: int, keys_off: int, dist_off: int,
                 vals_off: int) -> None:
        n_slots = homes + SLACK
        self._homes, self._slots = homes, n_slots
        self._width, self._n = width, n
        self._max_n = int(MAX_LOAD * homes)
        self._serialized = not self._values.typed
        self._narrow = self._serialized and width < 8  # a word may need a wider column
        self._keys_off, self._dist_off, self._vals_off = keys_off, dist_off, vals_off
        dtype = self._values.dtype_for_width(width)
        self._k = self._store.region_array(keys_off, np.int64, n_slots)
        self._d = self._store.region_array(dist_off, np.uint8, n_slots)
        self._v = self._store.region_array(vals_off, dtype, n_slots)
        self._km = memoryview(self._k).cast("B").cast("q")
        self._dm = memoryview(self._d).cast("B")
        self._vm = memoryview(self._v).cast("B").cast(_WORD_FORMATS[dtype.name])

    def _drop_views(self) -> None:
        for name in ("_km", "_dm", "_vm"):
            view = getattr(self, name, None)
            if view is not None:
                view.release()
        self._k = self._d = self._v = self._km = self._dm = self._vm = None

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the LongHashMap is closed")

    def _release(self) -> None:
        """Drop the table views before the store rolls back or remaps (see :meth:`_reload`)."""
        self._drop_views()

    def _reload(self, meta_recid: int | None = None) -> None:
        """Re-read the table from the metadata record (``meta_recid`` when it moved, as in a
        compacted file), dropping the old views: after a rollback, or when a reader's arena
        picked up another process's commit. Iterators in progress raise RuntimeError on their
        next step."""
        self._drop_views()
        self._mods += 1
        if meta_recid is not None:
            self._meta_recid = meta_recid
        self._values.external_count = None
        self._load_meta(self._values.serializer)

    def _copy_to(self, other: LongHashMap) -> None:
        """Make ``other``, an empty map of the same value type in another store, hold this
        map's entries: the slot words are copied as arrays (external values record by record)
        and placed by one vectorized rebuild at the smallest table size that holds them, so
        compaction neither decodes values nor grows the table step by step."""
        self._check_open()
        keys, words = self._live_entries()
        if not self._values.typed:
            words = words.astype(np.uint64)
            for i in np.flatnonzero((words & np.uint64(0xFF)) == EXTERNAL).tolist():
                data = self._store.view(int(words[i]) >> 8)
                words[i] = EXTERNAL | other._store.put(data) << 8
            other._values.external_count = None  # records put around the slots: count anew
        homes = _MIN_HOMES
        while len(keys) > MAX_LOAD * homes:
            homes *= 2
        other._rebuild(homes, self._width, keys, words)

    def _table_bytes(self) -> int:
        """Bytes of the three table arrays' extents."""
        return sum(self._store.arena.payload_bytes(offset)
                   for offset in (self._keys_off, self._dist_off, self._vals_off))

    def _live_bytes(self) -> int:
        """Bytes this map holds in its store: the table arrays and the external value records."""
        self._check_open()
        if self._values.typed:
            return self._table_bytes()
        words = self._v[self._d != 0].astype(np.uint64)
        external = (words[(words & np.uint64(0xFF)) == 0xFF] >> np.uint64(8)).astype(np.int64)
        return self._table_bytes() + self._store.record_bytes(external)

    def _invalidate(self) -> None:
        """Close without writing anything: the store no longer holds this map (a rollback
        dropped it, having been created after the last commit)."""
        self._drop_views()
        self._closed = True

    def _count_external(self) -> int:
        """External value records: counted by one scan of the table, then kept by the slots."""
        if self._values.typed:
            return 0
        if self._values.external_count is None:
            self._values.external_count = self._scan_external()
        return self._values.external_count

    def _scan_external(self) -> int:
        words = self._v[self._d != 0].astype(np.uint64)
        return int(np.count_nonzero((words & np.uint64(0xFF)) == 0xFF))

    def _chunks(self, with_values: bool):
        """Yield (keys, values) lists chunk by chunk; RuntimeError if the map changes meanwhile."""
        self._check_open()
        mods = self._mods
        for start in range(0, self._slots, _ITER_CHUNK):
            if self._mods != mods:
                raise RuntimeError("LongHashMap changed size during iteration")
            self._check_open()
            occupied = np.flatnonzero(self._d[start: start + _ITER_CHUNK]) + start
            keys = self._k[occupied].tolist()
            values = self._values.decode_many(self._v[occupied]).tolist() if with_values else None
            yield keys, values
        if self._mods != mods:
            raise RuntimeError("LongHashMap changed size during iteration")

    def _export(self) -> tuple[np.ndarray, object]:
        """All keys (int64 array) and values (ndarray or list), in slot order."""
        self._check_open()
        occupied = self._d != 0
        values = self._values.decode_many(self._v[occupied])
        return self._k[occupied].copy(), values if self._values.typed else values.tolist()

    # -- persistence --------------------------------------------------------------------------

    def _write_meta(self) -> None:
        name = self._values.serializer.name.encode()
        meta = _META.pack(_META_MAGIC, name, self._homes, self._width, self._n,
                          self._keys_off, self._dist_off, self._vals_off)
        self._store.update(self._meta_recid, meta)

    def _load_meta(self, serializer) -> None:
        try:
            meta = parse_meta(self._store.get(self._meta_recid))
        except KeyError:
            raise CorruptionError(f"LongHashMap metadata record {self._meta_recid} is missing") from None
        if meta.value != serializer.name:
            raise ValueError(f"the stored map holds {meta.value!r} values, not {serializer.name!r}; "
                             f"open it with value={meta.value!r}")
        try:
            self._install(meta.homes, meta.width, meta.n_entries, *meta.regions)
        except (KeyError, ValueError) as exc:
            raise CorruptionError(f"LongHashMap table region is missing or short: {exc}") from None
        if int(np.count_nonzero(self._d)) != meta.n_entries:
            raise CorruptionError(f"LongHashMap holds {np.count_nonzero(self._d)} entries, "
                                  f"its metadata says {meta.n_entries}")


@dataclass(frozen=True)
class TableMeta:
    """The metadata record of a LongHashMap: value type, table shape, where its arrays live."""

    value: str
    homes: int
    width: int  # bytes per value slot
    n_entries: int
    regions: tuple[int, int, int]  # arena offsets of the keys, dist and values arrays


def parse_meta(meta: bytes) -> TableMeta:
    """Decode a LongHashMap metadata record; CorruptionError if it is not one or out of range."""
    if len(meta) != _META.size or meta[:8] != _META_MAGIC:
        raise CorruptionError("LongHashMap metadata is damaged (bad magic or size)")
    _, name, homes, width, n, keys_off, dist_off, vals_off = _META.unpack(meta)
    if not _MIN_HOMES <= homes <= _MAX_HOMES or width not in (2, 4, 8) or n > homes:
        raise CorruptionError(f"LongHashMap metadata is out of range (homes={homes}, "
                              f"width={width}, n={n})")
    value = name.rstrip(b"\0").decode("ascii", "replace")
    return TableMeta(value, homes, width, n, (keys_off, dist_off, vals_off))


def standalone_meta_recid(root: bytes) -> int:
    """The metadata record named by the store root of a standalone LongHashMap file."""
    if len(root) != 8:
        raise CorruptionError(f"the file holds no LongHashMap (store root of {len(root)} bytes)")
    return struct.unpack("<Q", root)[0]


def homes_of(keys: np.ndarray, homes: int) -> np.ndarray:
    """``mix64(key) * homes >> 64`` for every key (int64 result), exact for ``homes <= 2**32``:
    the 64x32-bit product is formed from the hash's two 32-bit halves."""
    h = mix64_array(keys)
    n = np.uint64(homes)
    low = (h & np.uint64(0xFFFF_FFFF)) * n
    high = (h >> np.uint64(32)) * n + (low >> np.uint64(32))
    return (high >> np.uint64(32)).astype(np.int64)
