"""The bulk numpy paths of a LongHashMap (layer 6): the batch half of the map class.

:class:`BulkOperations` is a base of :class:`~offheap.hashmap.longhashmap.LongHashMap`, beside
:class:`~offheap.hashmap.growth.TableGrowth`. Its public methods (``put_many``, ``get_many``,
``contains_many``, ``delete_many``) hand the whole batch to the core's bulk operations
(:mod:`offheap.hashmap.core`): the compiled core loops over it in C; the pure-Python reference
calls back into the vectorized steps below (``_probe_many``, ``_place_words``,
``_remove_present``), which work on the whole batch with numpy
(:mod:`offheap.hashmap.placement`). Both leave the same bytes.

Failure atomicity: ``put_many`` reserves the room for every new key before it changes anything,
so a CapacityError leaves the map as it was; the records of values not stored are released.

Thread safety: the map's lock is held for each whole call (the facade wraps these methods;
see ``offheap.hashmap.locking``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from offheap.hashmap import placement
from offheap.hashmap.layout import as_key_array, homes_of
from offheap.hashmap.valueslots import InlinePrefix, ValueSlots

if TYPE_CHECKING:
    from offheap.hashmap.regions import Regions

_BULK_FRACTION = 8  # a batch of at least 1/8 of the map rebuilds the index instead of probing


class BulkOperations:
    """The bulk paths of a LongHashMap (see the module docstring)."""

    _n: int  # the core's counters
    _used: int
    _mods: int
    _slots: ValueSlots  # the map class's
    _encode_inline_prefix: InlinePrefix | None = None
    """The compiled core's C encoder of a batch's inline values (its method of this name, first
    in the map's bases; see :meth:`ValueSlots.encode_many`). The reference has none: every value
    goes through ValueSlots, to the same words."""

    if TYPE_CHECKING:
        # the core's bulk and scalar operations (offheap.hashmap.core)
        def _find_entries(self, keys: np.ndarray, out: np.ndarray) -> None: ...

        def _count_absent(self, keys: np.ndarray) -> int: ...

        def _put_words(self, keys: np.ndarray, words: np.ndarray, done: np.ndarray) -> None: ...

        def _remove_keys(self, keys: np.ndarray, removed: np.ndarray) -> int: ...

        def _put(self, key: int, word: int | float) -> None: ...

        def _remove(self, key: int) -> None: ...

        # the map class's and TableGrowth's
        def _check_open(self) -> None: ...

        def _table(self) -> Regions: ...

        def _reserve(self, n_new: int, width: int) -> None: ...

        def _grow_index(self, homes: int, needed: int) -> None: ...

        def _outgrow_index(self, needed: int) -> None: ...

    def put_many(self, keys, values) -> None:
        """Insert or overwrite many entries. As with ``dict.update``, a key given twice takes
        its place in the order from its first occurrence and its value from its last.

        All or nothing: the room for the new keys is reserved first, so a CapacityError leaves
        the map as it was."""
        self._check_open()
        keys = as_key_array(keys)
        if len(values) != len(keys):
            raise ValueError(f"{len(keys)} keys but {len(values)} values")
        words = self._slots.encode_many(values, self._encode_inline_prefix)
        done = np.zeros(1, np.int64)
        try:
            self._put_batch(np.ascontiguousarray(keys), np.ascontiguousarray(words),  # 8-byte items
                            self._slots.width_of_many(words), done)
        except BaseException:
            self._slots.release_many(words[int(done[0]):])
            raise

    def get_many(self, keys, default=None):
        """Values of many keys: an ndarray for typed values, else a list.

        Missing keys give ``default``; a typed map with missing keys and ``default=None`` raises
        KeyError, since None has no int64/float64 form.
        """
        self._check_open()
        keys = np.ascontiguousarray(as_key_array(keys))
        typed = self._slots.typed
        words = np.empty(len(keys), self._slots.dtype_for_width(8) if typed else np.uint64)
        found = np.empty(len(keys), bool)
        missing = self._find_values(keys, words, found)
        if typed and not missing:
            return words  # typed values are the words: a fresh array already
        if not typed:  # the column's own width, which decode_many reads fastest
            words = words.astype(self._table().value_dtype, copy=False)
        values = self._slots.decode_many(words if not missing else words[found])
        if typed:
            if default is None:
                raise KeyError(f"{missing} keys are missing (first: {int(keys[~found][0])}); "
                               f"pass default= to fill them")
            out = np.full(len(keys), default, dtype=values.dtype)
            out[found] = values
            return out
        if not missing:
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
        keys = np.ascontiguousarray(as_key_array(keys))
        removed = np.empty(len(keys), np.uint64)
        count = self._remove_keys(keys, removed)
        if not self._slots.typed:
            self._slots.release_many(removed[:count])
        return count

    # -- probing and changes in bulk ----------------------------------------------------------

    def _homes_of(self, keys: np.ndarray, homes: int) -> np.ndarray:
        """The homes of an array of keys (items of the key column) in a table of ``homes``."""
        return homes_of(keys, homes)

    def _find_many(self, keys: np.ndarray) -> np.ndarray:
        """The entry of each int64 key, -1 where absent (the core's probe)."""
        entries = np.empty(len(keys), np.int64)
        self._find_entries(np.ascontiguousarray(keys, np.int64), entries)
        return entries

    # Bulk operations of the core that the pure-Python reference composes from its others; the
    # compiled core, first in the map's bases, has its own (offheap/hashmap/csrc/bulk.c).

    def _put_batch(self, keys: np.ndarray, words: np.ndarray, width: int, done: np.ndarray) -> None:
        """Reserve room for the batch's new keys (values ``width`` bytes wide), then store
        ``words[i]`` under ``keys[i]``; ``done[0]`` counts the words stored."""
        self._reserve(self._count_absent(keys), width)
        self._put_words(keys, words, done)

    def _find_values(self, keys: np.ndarray, out: np.ndarray, found: np.ndarray) -> int:
        """``out[i]`` = the word (typed value) stored under ``keys[i]`` and ``found[i]`` True,
        or 0 and False; returns how many keys are missing."""
        entries = self._find_many(keys)
        found[:] = entries >= 0
        out[:] = 0
        out[found] = self._table().values.take(entries[found])
        return int(len(keys) - np.count_nonzero(found))

    # The pure-Python core's bulk operations (offheap.hashmap.core): numpy over the whole batch.

    def _probe_many(self, keys: np.ndarray) -> np.ndarray:
        """:meth:`_find_many` vectorized (one numpy round per probe step)."""
        if not self._n:
            return np.full(len(keys), -1, np.int64)
        r = self._table()
        return placement.find_many(r.index, r.keys, r.homes, keys)

    def _place_words(self, keys: np.ndarray, words: np.ndarray) -> None:
        """Store the batch's words (room reserved): duplicates reduced to their first place and
        last value, present keys overwritten, the new ones appended. The words given up are
        released in the order the key-by-key path releases them, so that the store's free
        record ids, and later ones handed out, are the same on both cores."""
        keys, words, first, given_up = self._first_place_last_value(keys, words)
        entries = self._probe_many(keys)
        found = entries >= 0
        if found.any():
            column = self._table().values
            old = column.take(entries[found])
            column.put(entries[found], words[found])
            given_up.append((first[found], old))
        self._append_many(keys[~found], words[~found])
        if self._slots.typed:
            return  # typed words hold no records (nor, for a set's, any bytes to convert)
        times = np.concatenate([t for t, _ in given_up])
        released = np.concatenate([w.astype(np.uint64) for _, w in given_up])
        self._slots.release_many(released[np.argsort(times, kind="stable")])

    def _remove_present(self, keys: np.ndarray) -> np.ndarray:
        """Remove the batch's keys that are present; their words (not released), as uint64, in
        the order of the keys' first occurrences, as the key-by-key path removes them."""
        keys = keys[np.sort(np.unique(keys, return_index=True)[1])]
        entries = self._probe_many(keys)
        present = entries >= 0
        keys, entries = keys[present], entries[present]
        if not entries.size:
            return np.empty(0, np.uint64)
        r = self._table()
        # a set's table has no words: the compiled core reports 0 for each
        removed_words = r.values.take(entries) if r.width else np.zeros(entries.size, np.uint64)
        if entries.size * _BULK_FRACTION >= self._n:
            self._remove_entries(entries)
        else:
            for key in keys.tolist():
                self._remove(key)
        return removed_words if self._slots.typed else removed_words.astype(np.uint64)

    def _first_place_last_value(self, keys: np.ndarray, words: np.ndarray):
        """One entry per distinct key of a batch, in the order of first occurrences: the keys,
        their last words, their first positions, and the words dropped as ``[(positions,
        words)]``: each word of an earlier occurrence, with the position of the next
        occurrence of its key, which replaces it."""
        order = np.argsort(keys, kind="stable")  # by key, then position
        grouped = keys[order]
        same_as_next = grouped[1:] == grouped[:-1]
        dropped = [(order[1:][same_as_next], words[order[:-1][same_as_next]])]
        if not same_as_next.any():
            return keys, words, np.arange(len(keys)), dropped
        starts = np.flatnonzero(np.concatenate([[True], ~same_as_next]))
        ends = np.concatenate([starts[1:], [len(keys)]]) - 1
        by_first = np.argsort(order[starts])
        first, last = order[starts][by_first], order[ends][by_first]
        return keys[first], words[last], first, dropped

    def _append_many(self, keys: np.ndarray, words: np.ndarray) -> None:
        """Append distinct absent keys as new entries (room reserved by :meth:`_reserve`): a
        large batch is placed with the whole index rebuilt, a small one key by key."""
        if not len(keys):
            return
        if len(keys) * _BULK_FRACTION < max(self._n, 1024):
            done = []
            try:
                for key, word in zip(keys.tolist(), words.tolist()):
                    self._put(key, word)
                    done.append(key)
            except BaseException:
                for key in done:
                    self._remove(key)
                self._slots.release_many(words[len(done):])
                raise
            return
        r = self._table()
        start, stop = self._used, self._used + len(keys)
        new_entries = np.arange(start, stop)
        r.keys.put(new_entries, keys)
        live = r.live_mask(start)
        entries = np.concatenate([np.flatnonzero(live), new_entries])
        index = np.zeros(r.n_slots, np.uint32)
        if not placement.place(index, [(entries, self._homes_of(r.keys.take(entries), r.homes))]):
            r.keys.put(new_entries, np.zeros(len(keys), r.key_dtype))  # undo, grow, append again
            self._outgrow_index(self._n + len(keys))
            return self._append_many(keys, words)
        r.values.put(new_entries, words)
        r.index[:] = index
        r.set_live(np.concatenate([live, np.ones(len(keys), bool)]))
        self._used = stop
        self._n += len(keys)
        self._mods += 1

    def _remove_entries(self, entries: np.ndarray) -> None:
        """Remove many present entries at once: clear their live bits and place the rest anew."""
        r = self._table()
        live = r.live_mask(self._used)
        live[entries] = False
        kept = np.flatnonzero(live)
        used = int(kept[-1]) + 1 if kept.size else 0
        r.index[:] = 0
        placement.place(r.index, [(kept, self._homes_of(r.keys.take(kept), r.homes))])  # fewer fit
        r.set_live(live[:used])
        self._used, self._n = used, len(kept)
        self._mods += 1

