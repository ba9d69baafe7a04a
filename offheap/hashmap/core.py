"""The scalar operations of a LongHashMap on its table, in pure Python (layer 6).

:class:`MapCore` is the reference implementation: the compiled core (``offheap.hashmap._core``,
C) is a type with the same attributes and methods and the same effect on every byte of the
table, and :mod:`offheap.hashmap.longhashmap` takes whichever :mod:`offheap.kernels.native`
selects as its base class, so ``m[k]`` reaches the compiled code through the type's slots. The
format is specified in :mod:`offheap.hashmap.layout`.

The contract between the core and the map built on it:

- The map *attaches* the table with :meth:`MapCore._attach` (the value codec, then writable
  buffers: the index, and per chunk its keys, values and live bits; a set's table, of width 0,
  has no values: every value reads as None and a write is dropped) and *detaches* it with
  :meth:`MapCore._detach` before any of those buffers' regions is freed or remapped. While
  detached every operation raises ClosedError. The compiled core holds the buffers (the buffer
  protocol's exports) while attached, so an extent cannot be unmapped under it.
- ``_n`` (live entries), ``_used`` (entries including holes) and ``_mods`` are the core's
  counters; the map sets them after a bulk change. ``_mods`` changes whenever the entries or
  their order change, and whenever the map changes the index other than by attaching a new
  table: an iterator raises RuntimeError at its next step once it has.
- When an insert needs room the core cannot make (a wider value column, a new chunk, a larger
  index), it calls the map's ``_make_room(width, index_full)`` and tries again; that method
  re-attaches the grown table, and moves entries to other index slots only by changing
  ``homes`` (compaction renumbers the entries in their slots). Values that do not fit inline go through the value codec
  (:class:`~offheap.hashmap.valueslots.ValueSlots`): ``encode``, ``decode``, ``release``.
- Failure atomicity: a value's record is made before the table changes and released if the insert
  fails; the table changes only once the insert cannot fail.
- The homes of keys of the key column come from the map's ``_homes_of(keys, homes)``
  (:func:`~offheap.hashmap.layout.homes_of` for int64 keys; a keyed table's from its key
  slots, :mod:`offheap.hashmap.keyedcore`).
- Growth asks the core to place the live entries into a grown index (``_place_entries``, a
  region not attached yet): the compiled core sorts them by hash in C, this reference places
  them with numpy over the current index; the same bytes. Likewise it asks the core to compact
  the entries in place (``_compact_entries``): one pass in C, or numpy here.
- The bulk operations (``_find_entries``, ``_count_absent``, ``_put_words``, ``_remove_keys``)
  take numpy arrays of 8-byte items and leave the table as the same scalar operations done in
  the batch's order would: the compiled core loops over the batch in C, this reference works
  on the whole batch with numpy through the map's vectorized steps (``_probe_many``,
  ``_place_words``, ``_remove_present``). Room for a put is reserved by the map first.

The probe. Format 2 keeps no distance per slot, and a probe passing an entry must know that
entry's home. This core keeps the *slot homes* beside the index, in Python memory (not in the
file): ``_slot_homes[s]`` is the home of the entry in index slot ``s``, and ``s`` itself for an
empty slot and for one extra slot past the end. In Robin Hood order that array never decreases
(an entry after an empty slot ``s`` has its home past ``s``), and one comparison per step tells
a probe for home ``h`` what it needs: below ``h`` the entry is passed, above ``h`` (an empty slot
past ``h`` included) the probe ends, and at ``h`` the slot is read (empty, or an entry whose key
is compared). The core shifts the slot homes with the index on insert and delete, and rebuilds
them with numpy (``O(n_slots)``) at the first operation after anything else may have changed the
index: an attach, or a change of ``_mods`` it did not make (the map's bulk steps).
``_homes_mods`` is the ``_mods`` they match, None when they match nothing. They cost 4 bytes a
slot (8 past ``2**32 - 1`` slots).

Thread safety: none here; the map runs every operation of this core under its MapLock
(``offheap.hashmap.locking.LockedReferenceCore``), so no two threads are ever inside it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from offheap.errors import ClosedError
from offheap.hashmap.layout import CHUNK_BITS, CHUNK_MASK, MAX_LOAD, as_key, lookup_key
from offheap.hashmap import placement
from offheap.hashmap.placement import find_in_groups, index_chunks, place
from offheap.hashmap.regions import Column, Regions
from offheap.hashmap.valueslots import width_for_word
from offheap.kernels.bounds import INT64_MAX, INT64_MIN
from offheap.kernels.mix import MASK64
from offheap.store.pickled import PickledValue

if TYPE_CHECKING:
    from collections.abc import Callable

    from offheap.hashmap.valueslots import ValueSlots

ProbeKey = Any
"""A key in the form the probe takes: an int64 here, a
:class:`~offheap.hashmap.keycodec.KeyProbe` in the keyed core."""

_MISSING = object()
_C1 = 0xFF51AFD7ED558CCD
_C2 = 0xC4CEB9FE1A85EC53
_FIRST_SCAN = 8  # index slots read first when looking for the next empty one (runs are short)
_RUN_SCAN = 64  # and then at a time
_ITER_RUN = 1024  # entries an iterator reads at a time
_VALUE_FORMATS: dict[str, Literal["q", "d", "H", "I", "Q"]] = {
    "int64": "q", "float64": "d", "uint16": "H", "uint32": "I", "uint64": "Q"}
"""The memoryview format of each dtype a value column has (typed values, then slot words)."""


class _NoValueColumn:
    """The value column of a table of width 0 (a set's): every read gives None, a write is
    dropped, as the compiled core's accessors do for its values of 0 bytes."""

    def __getitem__(self, at: int) -> None:
        return None

    def __setitem__(self, at: int, word: object) -> None:
        pass

    def release(self) -> None:
        pass


_NO_VALUES: memoryview = _NoValueColumn()  # type: ignore[assignment]  # a memoryview's part of its interface


class MapCore:
    """Probe, insert, delete and iterate one table (pure-Python reference)."""

    _kind = "LongHashMap"  # the class errors name (the compiled core: the type's name)
    _n: int  # the counters (see the module docstring): the map class sets them too
    _used: int
    _mods: int

    _index: memoryview | None = None  # detached until the map attaches its table
    _keys: list[memoryview]
    _values: list[memoryview[int] | memoryview[float]]
    _live: list[memoryview]
    _codec: ValueSlots
    _slot_homes: memoryview  # see the module docstring
    _slot_home_array: np.ndarray
    _homes_mods: int | None = None

    if TYPE_CHECKING:
        # the map class's: growth, and the vectorized bulk steps the reference's bulk methods use
        def _make_room(self, width: int, index_full: bool) -> None: ...

        def _probe_many(self, keys: np.ndarray) -> np.ndarray: ...

        def _place_words(self, keys: np.ndarray, words: np.ndarray) -> None: ...

        def _remove_present(self, keys: np.ndarray) -> np.ndarray: ...

        def _homes_of(self, keys: np.ndarray, homes: int) -> np.ndarray: ...

        def _table(self) -> Regions: ...

    def _attach(self, codec: ValueSlots, index: np.ndarray, key_chunks: list[np.ndarray],
                value_chunks: list[np.ndarray], live_chunks: list[np.ndarray], homes: int,
                width: int) -> None:
        """Take the table's buffers (numpy arrays of the layout's item types: the uint32 index,
        and per chunk its int64 keys, values of ``width`` bytes, uint8 live bits; every chunk
        but a lone chunk 0 is ``CHUNK_ENTRIES`` long) and the value codec."""
        self._codec = codec
        self._typed = codec.typed
        # a typed value's word is the validated value itself (ValueSlots.encode)
        self._encode: Callable = codec.serializer.validate if codec.typed else codec.encode
        self._index = index.data.cast("B").cast("I")
        self._keys = self._key_views(key_chunks)
        if width:
            fmt = _VALUE_FORMATS[codec.dtype_for_width(width).name]
            self._values = [chunk.data.cast("B").cast(fmt) for chunk in value_chunks]
        else:  # a set's table: no values region
            self._values = [_NO_VALUES] * len(value_chunks)
        self._live = [chunk.data.cast("B") for chunk in live_chunks]
        self._homes = homes
        self._n_slots = len(self._index)
        self._width = width
        self._capacity = sum(len(chunk) for chunk in key_chunks)
        self._max_n = int(MAX_LOAD * homes)
        self._homes_mods = None

    def _key_views(self, key_chunks: list[np.ndarray]) -> list[memoryview]:
        """The views the core reads and writes the keys through: int64 items."""
        return [chunk.data.cast("B").cast("q") for chunk in key_chunks]

    def _key_column(self) -> Column:
        """The key column as numpy arrays over the attached chunks (to be dropped before the
        call that made it returns)."""
        return Column([np.frombuffer(chunk, np.int64) for chunk in self._keys])

    def _detach(self) -> None:
        """Release the table's buffers (idempotent); operations raise ClosedError until the
        next attach."""
        self._homes_mods = None
        if self._index is None:
            return
        for view in (self._index, *self._keys, *self._values, *self._live):
            view.release()  # _NO_VALUES too: releasing it does nothing
        self._index = None
        self._keys, self._values, self._live = [], [], []

    def _closed_error(self) -> ClosedError:
        return ClosedError(f"the {self._kind} is closed")

    def _attached_index(self) -> memoryview:
        """The index of the attached table; ClosedError while detached (which every operation
        checks on entry, before it reaches a method that reads the index)."""
        if self._index is None:
            raise self._closed_error()
        return self._index

    def _sync_homes(self) -> None:
        """Rebuild the slot homes from the index and the keys; ClosedError while detached.
        Every probe calls this first when ``_homes_mods`` is not ``_mods``."""
        index = self._attached_index()
        n_slots = self._n_slots
        slots = np.frombuffer(index, np.uint32)
        occupied = np.flatnonzero(slots)
        entries = slots[occupied].astype(np.int64) - 1
        del slots  # no export of the index outlives this call
        key_column = self._key_column()
        code: Literal["I", "Q"] = "I" if n_slots < 1 << 32 else "Q"
        slot_homes = np.arange(n_slots + 1, dtype=code)
        slot_homes[occupied] = self._homes_of(key_column.take(entries), self._homes)
        del key_column
        self._slot_homes = slot_homes.data.cast("B").cast(code)
        self._slot_home_array = slot_homes  # the same memory, for the bulk probe
        self._homes_mods = self._mods

    # -- lookups ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, key):
        e = self._lookup(key)
        if e < 0:
            raise KeyError(key)
        word = self._values[e >> CHUNK_BITS][e & CHUNK_MASK]
        return word if self._typed else self._codec.decode(word)

    def __contains__(self, key) -> bool:
        return self._lookup(key) >= 0

    def get(self, key, default=None, /):
        e = self._lookup(key)
        if e < 0:
            return default
        word = self._values[e >> CHUNK_BITS][e & CHUNK_MASK]
        return word if self._typed else self._codec.decode(word)

    def _lookup(self, key) -> int:
        """The entry holding ``key``, or -1 (also for keys the map cannot hold). :meth:`_probe`
        with the key's admission, inlined: each call saved is worth several probe steps."""
        if self._homes_mods != self._mods:
            self._sync_homes()
        if type(key) is not int:
            key = lookup_key(key)
            if key is None:
                return -1
        h = key & MASK64  # mix64(key)
        h = ((h ^ (h >> 33)) * _C1) & MASK64
        h = ((h ^ (h >> 33)) * _C2) & MASK64
        home = slot = (h ^ (h >> 33)) * self._homes >> 64
        index, slot_homes = self._index, self._slot_homes
        assert index is not None  # attached: the check of _homes_mods raised otherwise
        while True:
            at = slot_homes[slot]
            if at == home:
                e = index[slot] - 1
                if e < 0:
                    return -1
                if self._keys[e >> CHUNK_BITS][e & CHUNK_MASK] == key:
                    return e
            elif at > home:
                return -1
            slot += 1

    def _find(self, key: int) -> tuple[int, int]:
        """``(slot, entry)`` of an int64 ``key``, or ``(slot where it would go, -1)``."""
        _, slot, e = self._probe(key)
        return slot, e

    def _probe(self, key: ProbeKey) -> tuple[int, int, int]:
        """``(home, slot, entry)`` of an int64 ``key``: the slot holding it, or the slot where
        it would go and -1. A step passes an entry of a lower home, compares the key of an entry
        of the same home, and stops at a higher home or an empty slot."""
        if self._homes_mods != self._mods:
            self._sync_homes()
        h = key & MASK64  # mix64(key), inlined: a call costs as much as the probe
        h = ((h ^ (h >> 33)) * _C1) & MASK64
        h = ((h ^ (h >> 33)) * _C2) & MASK64
        home = slot = (h ^ (h >> 33)) * self._homes >> 64
        index, slot_homes = self._index, self._slot_homes
        assert index is not None  # attached: the check of _homes_mods raised otherwise
        while True:
            at = slot_homes[slot]
            if at == home:
                e = index[slot] - 1
                if e < 0:
                    return home, slot, -1
                if self._keys[e >> CHUNK_BITS][e & CHUNK_MASK] == key:
                    return home, slot, e
            elif at > home:
                return home, slot, -1
            slot += 1

    def _value_of(self, e: int):
        word = self._values[e >> CHUNK_BITS][e & CHUNK_MASK]
        return word if self._typed else self._codec.decode(word)

    def _key_of(self, e: int) -> Any:
        return self._keys[e >> CHUNK_BITS][e & CHUNK_MASK]

    # -- changes ------------------------------------------------------------------------------

    def __setitem__(self, key, value) -> None:
        if self._index is None:
            raise self._closed_error()
        key = self._admit(key)
        word = self._encode(value)
        if self._typed:
            self._put(key, word)  # a typed word holds no record: nothing to release
            return
        try:
            self._put(key, word)
        except BaseException:
            self._codec.release(word)
            raise

    def _admit(self, key) -> ProbeKey:
        """The form of a key to store that the probe takes; the error a store of a key the
        table cannot hold raises."""
        if type(key) is not int or not INT64_MIN <= key <= INT64_MAX:
            key = as_key(key)
        return key

    def _lookup_form(self, key) -> ProbeKey | None:
        """The form of a key to look up that the probe takes, None for a key the table cannot
        hold (a miss)."""
        if type(key) is int and INT64_MIN <= key <= INT64_MAX:
            return key
        return lookup_key(key)

    def _put(self, key: ProbeKey, word) -> None:
        """Store ``word`` under ``key``; the caller owns ``word`` until this returns."""
        width = self._width if self._typed else width_for_word(word)
        while True:
            home, slot, e = self._probe(key)
            if e >= 0:
                if width <= self._width:
                    chunk = self._values[e >> CHUNK_BITS]
                    old = chunk[e & CHUNK_MASK]
                    chunk[e & CHUNK_MASK] = word
                    if not self._typed:
                        self._codec.release(old)
                    return
                self._grow(width, False)
                continue
            if width <= self._width and self._n < self._max_n and self._used < self._capacity:
                if slot < self._n_slots and not self._attached_index()[slot]:
                    end = slot
                else:
                    end = self._empty_slot_from(slot)
                if end >= 0:
                    self._append(home, slot, end, key, word)
                    return
                self._grow(width, True)
                continue
            self._grow(width, False)

    def _grow(self, width: int, index_full: bool) -> None:
        """The map's ``_make_room``; the slot homes still hold unless ``homes`` changed."""
        homes, in_sync = self._homes, self._homes_mods == self._mods
        self._make_room(width, index_full)
        if in_sync and self._homes == homes and self._index is not None:
            self._homes_mods = self._mods

    def _empty_slot_from(self, slot: int) -> int:
        """The first empty index slot at or after ``slot``, or -1 if the slack is full."""
        index = self._attached_index()
        scan = _FIRST_SCAN
        while slot < self._n_slots:
            run = index[slot: slot + scan].tolist()
            scan = _RUN_SCAN
            try:
                return slot + run.index(0)
            except ValueError:
                slot += len(run)
        return -1

    def _append(self, home: int, slot: int, end: int, key: ProbeKey, word) -> None:
        """Append entry ``used`` for ``key`` (of home ``home``) and point index slot ``slot``
        at it, moving the run ``slot..end-1`` one place right (``end`` is empty)."""
        e = self._used
        chunk, at = e >> CHUNK_BITS, e & CHUNK_MASK
        self._set_key(chunk, at, key)
        self._values[chunk][at] = word
        self._live[chunk][at >> 3] |= 1 << (at & 7)
        index, slot_homes = self._attached_index(), self._slot_homes
        if end > slot:
            index[slot + 1: end + 1] = index[slot: end]
            slot_homes[slot + 1: end + 1] = slot_homes[slot: end]
        index[slot] = e + 1
        slot_homes[slot] = home
        self._used = e + 1
        self._n += 1
        self._mods += 1
        self._homes_mods = self._mods

    def _set_key(self, chunk: int, at: int, key: ProbeKey) -> None:
        """Write the key of a new entry (position ``at`` of chunk ``chunk``)."""
        self._keys[chunk][at] = key

    def _add_key(self, key) -> None:
        """``self[key] = None``: the add of a set, whose values are all None (this core's
        ``__setitem__``, not the set's, which refuses item assignment)."""
        MapCore.__setitem__(self, key, None)

    def __delitem__(self, key) -> None:
        if not self._discard_key(key):
            raise KeyError(key)

    def _discard_key(self, key) -> bool:
        """Remove ``key`` (its word released): True, or False when it is absent."""
        slot, e = self._find_admitted(key)
        if e < 0:
            return False
        word = self._values[e >> CHUNK_BITS][e & CHUNK_MASK]
        self._remove_at(slot, e)
        if not self._typed:
            self._codec.release(word)
        return True

    def pop(self, key, default=_MISSING, /):
        slot, e = self._find_admitted(key)
        if e < 0:
            if default is _MISSING:
                raise KeyError(key)
            return default
        word = self._values[e >> CHUNK_BITS][e & CHUNK_MASK]
        value = self._codec.decode(word)
        self._remove_at(slot, e)
        self._codec.release(word)
        return value

    def _find_admitted(self, key) -> tuple[int, int]:
        """``(slot, entry)`` of ``key`` as a lookup admits it; ``(-1, -1)`` when absent."""
        if self._homes_mods != self._mods:
            self._sync_homes()  # ClosedError first, as for any key
        probed = self._lookup_form(key)
        if probed is None:
            return -1, -1
        _, slot, e = self._probe(probed)
        return slot, e

    def popitem(self):
        """Remove and return the last inserted ``(key, value)`` pair; KeyError when empty."""
        if self._index is None:
            raise self._closed_error()
        if not self._n:
            raise KeyError(f"popitem(): {self._kind} is empty")
        e = self._used - 1  # the last entry is never a hole
        key = self._key_of(e)
        word = self._values[e >> CHUNK_BITS][e & CHUNK_MASK]
        value = self._codec.decode(word)
        self._remove_at(self._find_admitted(key)[0], e)
        self._codec.release(word)
        return key, value

    def setdefault(self, key, default=None, /):
        e = self._lookup(key)
        if e >= 0:
            return self._value_of(e)
        self[key] = default
        return default

    def _remove(self, key: ProbeKey) -> None:
        """Remove present ``key`` (see :meth:`_remove_at`)."""
        _, slot, e = self._probe(key)
        self._remove_at(slot, e)

    def _remove_at(self, slot: int, e: int) -> None:
        """Remove entry ``e`` at index slot ``slot``: empty the slot by backward shift (the
        entries after it move one place left up to an empty slot or one at its home), clear the
        live bit, and drop the holes at the end of the entries. Does not release its value."""
        index, slot_homes = self._attached_index(), self._slot_homes
        end = slot + 1
        while slot_homes[end] < end:  # an empty slot's is ``end`` itself
            end += 1
        if end > slot + 1:
            index[slot: end - 1] = index[slot + 1: end]
            slot_homes[slot: end - 1] = slot_homes[slot + 1: end]
        index[end - 1] = 0
        slot_homes[end - 1] = end - 1
        chunk, at = e >> CHUNK_BITS, e & CHUNK_MASK
        self._live[chunk][at >> 3] &= ~(1 << (at & 7)) & 0xFF
        self._n -= 1
        self._mods += 1
        self._homes_mods = self._mods
        used = self._used
        while used and not self._is_live(used - 1):
            used -= 1
        self._used = used

    def _move_to_end(self, key) -> int:
        """Move ``key``'s entry to the end of the entries in place (a Cache's LRU hit): its key
        and word copied to entry ``_used``, its index slot pointed there, its old place a hole.
        No record is touched and no other slot moves (the entry keeps its home). Its new
        number, or -1 when absent; ValueError when no entry is free (make room first)."""
        slot, e = self._find_admitted(key)
        if e < 0 or e == self._used - 1:
            return e
        if self._used >= self._capacity:
            raise ValueError("_move_to_end() needs a free entry: make room first")
        to = self._used
        self._copy_key(e, to)
        source, at_source = self._values[e >> CHUNK_BITS], e & CHUNK_MASK
        self._values[to >> CHUNK_BITS][to & CHUNK_MASK:(to & CHUNK_MASK) + 1] = \
            source[at_source:at_source + 1]
        at = to & CHUNK_MASK
        self._live[to >> CHUNK_BITS][at >> 3] |= 1 << (at & 7)
        at = e & CHUNK_MASK
        self._live[e >> CHUNK_BITS][at >> 3] &= ~(1 << (at & 7)) & 0xFF
        self._attached_index()[slot] = to + 1
        self._used = to + 1
        self._mods += 1
        self._homes_mods = self._mods  # the slot keeps its home
        return to

    def _copy_key(self, e: int, to: int) -> None:
        """Entry ``to``'s key set to entry ``e``'s."""
        self._keys[to >> CHUNK_BITS][to & CHUNK_MASK] = self._keys[e >> CHUNK_BITS][e & CHUNK_MASK]

    def _is_live(self, e: int) -> bool:
        at = e & CHUNK_MASK
        return bool(self._live[e >> CHUNK_BITS][at >> 3] >> (at & 7) & 1)

    # -- bulk operations: numpy over the whole batch, through the map's vectorized methods ------

    def _find_entries(self, keys: np.ndarray, out: np.ndarray) -> None:
        """``out[i]`` = the entry holding ``keys[i]``, or -1."""
        out[:] = self._probe_slot_homes(keys)

    def _count_absent(self, keys: np.ndarray) -> int:
        """The number of distinct keys of the batch that the map does not hold."""
        return int(np.unique(keys[self._probe_slot_homes(keys) < 0]).size)

    def _probe_slot_homes(self, keys: np.ndarray) -> np.ndarray:
        """The entries of many int64 keys (-1 where absent), probing on the slot homes with
        numpy (:func:`~offheap.hashmap.placement.find_in_groups`). The arrays over the table's
        buffers live only during the call."""
        if self._homes_mods != self._mods:
            self._sync_homes()
        index = np.frombuffer(self._attached_index(), np.uint32)
        key_column = self._key_column()
        try:
            return find_in_groups(index, self._slot_home_array, key_column, self._homes, keys)
        finally:
            del index, key_column

    def _put_words(self, keys: np.ndarray, words: np.ndarray, done: np.ndarray) -> None:
        """Store ``words[i]`` under ``keys[i]`` as dict.update would (room reserved by the map);
        ``done[0]`` counts the words stored."""
        self._attached_index()
        self._place_words(keys, words)
        done[0] = len(keys)

    def _compact_entries(self) -> None:
        """Move the live entries to the front in order, where they are, zero the items past them
        and renumber the index in place (its slots stay where they are). Entries only move to
        lower numbers, so chunk by chunk each chunk's live entries are read before anything is
        written over them."""
        r = self._table()
        n, used = self._n, self._used
        live = r.live_mask(used)
        keys, values = r.keys, r.values
        write = 0
        for chunk in range(len(r.key_chunks)):
            start = chunk << CHUNK_BITS
            if start >= used:
                break
            kept = np.flatnonzero(live[start: start + len(r.key_chunks[chunk])])
            if kept.size:
                target = np.arange(write, write + kept.size)
                keys.put(target, r.key_chunks[chunk][kept].copy())
                values.put(target, r.value_chunks[chunk][kept].copy())
                write += kept.size
        tail = np.arange(n, used)
        keys.put(tail, np.zeros(len(tail), r.key_dtype))
        values.put(tail, np.zeros(len(tail), r.value_dtype))
        r.set_live(np.ones(n, bool))
        placement.renumber_index(r.index, np.cumsum(live, dtype=np.int64) - 1)
        self._used = n
        self._mods += 1

    def _place_entries(self, index: np.ndarray, homes: int) -> bool:
        """Fill ``index``, an empty array of ``homes + SLACK`` slots other than the table's (a
        grown index), with the live entries placed for ``homes`` homes, vectorized
        (:func:`~offheap.hashmap.placement.place` over the current index's slot order); False
        when one would land past its end."""
        current = np.frombuffer(self._attached_index(), np.uint32)
        key_column = self._key_column()
        try:
            chunks = index_chunks(current, lambda e: self._homes_of(key_column.take(e), self._homes))
            return place(index, ((e, self._homes_of(key_column.take(e), homes)) for e in chunks))
        finally:
            del current, key_column

    def _remove_keys(self, keys: np.ndarray, removed: np.ndarray) -> int:
        """Remove the keys present; ``removed[:count]`` are their words (not released)."""
        self._attached_index()
        words = self._remove_present(keys)
        removed[: len(words)] = words
        return len(words)

    # -- iteration ----------------------------------------------------------------------------

    def __iter__(self) -> Iterator[int]:
        return self._entries(0)

    def _iter_values(self) -> Iterator:
        return self._entries(1)

    def _iter_items(self) -> Iterator:
        return self._entries(2)

    def _entries(self, what: int) -> Iterator:
        """Keys (0), values (1) or items (2) in entry order; RuntimeError at the step after a
        change of the entries, ClosedError after a close. Entries are read a run of
        ``_ITER_RUN`` at a time (live positions, keys, words and their decoded values); a value
        is read again at its step, and decoded again if it was overwritten since."""
        if self._index is None:
            raise self._closed_error()
        mods = self._mods
        start = 0
        while True:
            if self._mods != mods or self._index is None:
                raise self._iteration_error()
            if start >= self._used:
                return
            chunk, at = start >> CHUNK_BITS, start & CHUNK_MASK
            stop = min(at + _ITER_RUN, len(self._live[chunk]) * 8, self._used - (chunk << CHUNK_BITS))
            positions, keys, words, values = self._run(chunk, at, stop, what != 0)
            if what == 0:
                for key in keys:
                    if self._mods != mods or self._index is None:
                        raise self._iteration_error()
                    yield key
            elif self._typed:  # a typed word is its value
                for i, key in zip(positions, keys):
                    if self._mods != mods or self._index is None:
                        raise self._iteration_error()
                    value = self._values[chunk][i]
                    yield value if what == 1 else (key, value)
            else:
                decode, hand_out = self._codec.decode, self._codec.hand_out
                for i, key, word, value in zip(positions, keys, words, values):
                    if self._mods != mods or self._index is None:
                        raise self._iteration_error()
                    now = self._values[chunk][i]
                    if now != word:
                        value = decode(now)
                    elif type(value) is PickledValue:  # unpickled at its own step
                        value = hand_out(value)
                    yield value if what == 1 else (key, value)
            start = (chunk << CHUNK_BITS) + stop

    def _keys_at(self, chunk: int, positions: np.ndarray) -> list:
        """The keys at these positions of chunk ``chunk``, as the map hands them out."""
        return np.frombuffer(self._keys[chunk], np.int64)[positions].tolist()

    def _iteration_error(self) -> Exception:
        """Why an iterator cannot go on: the map was closed, or its entries changed."""
        if self._index is None:
            return self._closed_error()
        return RuntimeError(f"{self._kind} changed size during iteration")

    def _run(self, chunk: int, at: int, stop: int, with_values: bool) -> tuple[list, list, list, list]:
        """Positions ``at <= i < stop`` of chunk ``chunk`` that are live, their keys, and with
        ``with_values`` their words and values as stored (``at`` a multiple of 8; pickled ones
        as placeholders, which the iterator unpickles at their step, as the compiled one
        decodes each value at its step), as lists: an
        iterator holds no buffer of the table between its steps, so a reshape can free the
        regions. Typed words are their own values: their list is left empty."""
        bits = np.frombuffer(self._live[chunk], np.uint8)[at >> 3: (stop + 7) >> 3]
        positions = np.flatnonzero(np.unpackbits(bits, bitorder="little")[: stop - at]) + at
        del bits
        keys = self._keys_at(chunk, positions)
        if not with_values or self._typed or not len(positions):
            return positions.tolist(), keys, [], []
        column = self._values[chunk]
        words = np.frombuffer(column.cast("B"), np.dtype(column.format))[positions]
        return positions.tolist(), keys, words.tolist(), self._codec.load_many(words).tolist()
