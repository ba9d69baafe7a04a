"""Vectorized work on a format-2 table (layer 6): many probes at once, index rebuilds.

Pure numpy functions over the arrays of :mod:`offheap.hashmap.layout`; the map decides when to
call them. Shared by the compiled and the pure-Python code paths, so both build the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np

from offheap.hashmap.layout import homes_of
from offheap.hashmap.regions import Column

REBUILD_CHUNK = 1 << 18  # index slots per chunk when an index moves its entries to a larger one
_JUMP_ROUND = 3  # the round of find_in_groups that jumps the probes left by binary search,
_JUMP_SLOTS = 1 << 18  # in an index of at most this many slots (1 MiB of slot homes)


def find_many(index: np.ndarray, keys: Column, homes: int, wanted: np.ndarray,
              opaque: np.ndarray | None = None,
              homes_of_keys: Callable[[np.ndarray, int], np.ndarray] = homes_of) -> np.ndarray:
    """Entry numbers of many keys (-1 where absent): one vectorized round per probe step.

    A probe goes on past a slot while the entry there has a home at or before the key's own, and
    past every slot flagged in ``opaque`` (a damaged one whose entry cannot be read: salvage).
    Keys are compared as items of the key column; ``homes_of_keys`` gives their homes (int64
    keys': :func:`~offheap.hashmap.layout.homes_of`; a keyed table's slots have their own).
    """
    entries = np.full(len(wanted), -1, np.int64)
    pending = np.arange(len(wanted))
    home = homes_of_keys(wanted, homes)
    slot = home.copy()
    while pending.size:
        ix = index[slot].astype(np.int64)
        occupied = ix != 0
        blind = np.zeros(len(slot), bool) if opaque is None else opaque[slot]
        readable = occupied & ~blind
        e = ix - 1
        found = keys.take(np.where(readable, e, 0))
        hit = readable & (found == wanted[pending])
        entries[pending[hit]] = e[hit]
        going = readable & ~hit
        going[going] = homes_of_keys(found[going], homes) <= home[going]
        going |= blind
        pending, slot, home = pending[going], slot[going] + 1, home[going]
    return entries


def find_in_groups(index: np.ndarray, slot_homes: np.ndarray, keys: Column, homes: int,
                   wanted: np.ndarray) -> np.ndarray:
    """:func:`find_many` with the home of every index slot known: ``slot_homes[s]`` the home of
    the entry in slot ``s``, ``s`` for an empty slot, and one more item past the last slot (the
    pure-Python core's array, :mod:`offheap.hashmap.core`). A round moves each probe past a
    slot of a lower home, or compares the key at a slot of its own home; no hash is computed
    after the first. That array never decreases, so in a small index the probes still passing
    lower homes after a few rounds (few, but each costs a round) jump by binary search to their
    home's first slot; in a large one each step of that search is a cache miss, and the rounds
    cost less (both measured with benchmarks/pure_core_bench.py).
    """
    entries = np.full(len(wanted), -1, np.int64)
    home = homes_of(wanted, homes).astype(slot_homes.dtype)
    slot = home.astype(np.int64)
    pending = np.arange(len(wanted))
    rounds = 0
    while pending.size:
        rounds += 1
        if rounds == _JUMP_ROUND and len(slot_homes) <= _JUMP_SLOTS:
            slot = np.maximum(slot, np.searchsorted(slot_homes, home))
        at = slot_homes[slot]  # never past the index's end: the last item is n_slots
        going = at < home
        same = np.flatnonzero(at == home)
        e = index[slot[same]].astype(np.int64) - 1
        occupied = e >= 0
        same, e = same[occupied], e[occupied]
        hit = keys.take(e) == wanted[pending[same]]
        entries[pending[same[hit]]] = e[hit]
        going[same[~hit]] = True
        pending, slot, home = pending[going], slot[going] + 1, home[going]
    return entries


def place(index: np.ndarray, chunks: Iterable[tuple[np.ndarray, np.ndarray]]) -> bool:
    """Fill an empty index from ``(entry numbers, their homes in it)`` chunks; False when an
    entry would land past the slack (the index must be larger).

    The chunks' homes must not decrease from one chunk to the next (inside a chunk any order);
    a home may run on into the next chunk. Robin Hood placement without wrap-around: with the
    entries sorted by home and, within a home, by entry number (the layout's order), entry ``j``
    takes slot ``max(home[j], slot[j-1] + 1)``, i.e. ``j + max(carry, cummax(home - j))``. The
    entries of a chunk's last home wait for the next chunk, which may hold more of that home
    (an index grown by a factor other than 2 can split one new home between two chunks of the
    old index's slots).
    """
    carry = 0  # the first slot the next entries may use
    held_entries = np.zeros(0, np.int64)  # the last home's entries so far, not placed yet
    held_homes = np.zeros(0, np.int64)
    for entries, entry_homes in chunks:
        if not len(entries):
            continue
        entries = np.concatenate([held_entries, entries])
        home = np.concatenate([held_homes, entry_homes])
        # stable: timsort, fast on keys that come (as from an old index) nearly in home order
        order = np.argsort(home.astype(np.uint64) << np.uint64(32) | entries.astype(np.uint64),
                           kind="stable")
        home, entries = home[order], entries[order]
        cut = int(np.searchsorted(home, home[-1]))  # the last home's first entry
        held_entries, held_homes = entries[cut:], home[cut:]
        carry = _place_sorted(index, home[:cut], entries[:cut], carry)
        if carry < 0:
            return False
    return _place_sorted(index, held_homes, held_entries, carry) >= 0


def _place_sorted(index: np.ndarray, home: np.ndarray, entries: np.ndarray, carry: int) -> int:
    """Place entries sorted by (home, entry) from slot ``carry`` on: the first slot after them,
    or -1 when one would land past the slack."""
    if not len(home):
        return carry
    j = np.arange(len(home), dtype=np.int64)
    slots = j + np.maximum(np.maximum.accumulate(home - j), carry)
    if slots[-1] >= len(index):
        return -1
    index[slots] = (entries + 1).astype(np.uint32)
    return int(slots[-1]) + 1


def index_chunks(index: np.ndarray, homes_here: Callable[[np.ndarray], np.ndarray]
                 ) -> Iterator[np.ndarray]:
    """An index's entry numbers in slot order, in chunks of about ``REBUILD_CHUNK`` slots, for
    :func:`place` into a larger index; ``homes_here`` gives entries' homes in this index.

    Chunks are cut before a slot that is empty or holds an entry at its home, so no home has
    entries in two chunks. Slot order is home order and a home in any larger table grows with
    the hash, so homes never decrease from one chunk to the next.
    """
    n_slots = len(index)
    start = 0
    while start < n_slots:
        stop = min(start + REBUILD_CHUNK, n_slots)
        while stop < n_slots and index[stop] and \
                int(homes_here(index[stop: stop + 1].astype(np.int64) - 1)[0]) != stop:
            stop += 1
        ix = index[start:stop]
        yield ix[ix != 0].astype(np.int64) - 1
        start = stop


def renumber_index(index: np.ndarray, renumber: np.ndarray) -> None:
    """Point every occupied slot of ``index`` at the entry's new number, in place."""
    for start in range(0, len(index), REBUILD_CHUNK):
        part = index[start: start + REBUILD_CHUNK]
        occupied = np.flatnonzero(part)
        part[occupied] = (renumber[part[occupied].astype(np.int64) - 1] + 1).astype(np.uint32)


