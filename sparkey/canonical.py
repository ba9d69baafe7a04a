"""Vectorized construction of the canonical Robin Hood table (pure layer).

The canonical table holds the live entries (each key's last PUT, unless a later DELETE removed
it) ordered along every cluster by ``(home, address)``; addresses grow in log order, so this is
``(home, log order)``. It is a valid Robin Hood table, readable
by libsparkey and sparkey-java alike, and for a log without overwrites or deletes it is exactly
the table sparkey-java builds (Java's tie-break on addresses makes its layout history-free).

Placement, entries sorted by ``(home, address)``: ``pos[i] = max(home[i], pos[i-1] + 1)``, which
is ``max over j <= i of (home[j] + i - j)``, a cumulative maximum of ``home - i``. Entries whose
position reaches ``capacity`` wrap to slots ``0, 1, ...`` ahead of the entries homed there, so the
placement is redone with a *floor*: no unwrapped entry may sit below the ``k`` wrapped ones.
More floor can only push entries further, so ``k`` grows until it is stable (usually one round).

Worked example, capacity 5, homes [0, 3, 4, 4]: positions 0, 3, 4, 5; the last wraps (k = 1), so
redo with floor 1: 1 (the home-0 entry moves up behind the wrapped one), 3, 4, 5 -> slots
[1, 3, 4, 0].
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sparkey.format import EntryKind


def live_entries(hashes: np.ndarray, kinds: np.ndarray,
                 key_of: Callable[[int], bytes]) -> np.ndarray:
    """Indices, in log order, of the live entries among log entries given in log order.

    An entry is live if it is a PUT and no later entry has the same key. Only entries whose
    hash occurs more than once are compared by key, through ``key_of(i) -> bytes``; all other
    PUTs are live. Every entry of a key must be present. O(n log n) numpy plus O(shared) Python.
    """
    sorted_hashes = np.sort(hashes)
    repeated = sorted_hashes[1:][sorted_hashes[1:] == sorted_hashes[:-1]]
    is_put = kinds == EntryKind.PUT
    if not len(repeated):
        return np.flatnonzero(is_put)
    repeated = np.unique(repeated)
    shared = repeated[np.minimum(np.searchsorted(repeated, hashes), len(repeated) - 1)] == hashes
    live = [np.flatnonzero(is_put & ~shared)]
    grouped = np.flatnonzero(shared)
    grouped = grouped[np.argsort(hashes[grouped], kind="stable")]
    group_starts = np.flatnonzero(np.diff(hashes[grouped])) + 1
    survivors: list[int] = []
    for group in np.split(grouped, group_starts):
        last_by_key: dict[bytes, int] = {}
        for i in group.tolist():
            last_by_key[key_of(i)] = i
        survivors.extend(i for i in last_by_key.values() if is_put[i])
    live.append(np.array(survivors, dtype=np.int64))
    return np.sort(np.concatenate(live))


def order_by_home(homes: np.ndarray) -> np.ndarray:
    """Permutation sorting entries (given in log order) by ``(home, log order)``."""
    count = len(homes)
    if count and int(homes.max()) < (1 << 63) // count:
        return np.argsort(homes.astype(np.int64) * count + np.arange(count), kind="quicksort")
    return np.argsort(homes, kind="stable")


def place(homes: np.ndarray, floor: int = 0) -> np.ndarray:
    """Positions of entries sorted by home, none below ``floor`` (positions may pass capacity)."""
    steps = np.arange(len(homes), dtype=np.int64)
    positions = np.maximum.accumulate(homes.astype(np.int64) - steps) + steps
    return np.maximum(positions, floor + steps)


def place_wrapped(homes: np.ndarray, capacity: int) -> np.ndarray:
    """Slots of entries sorted by home in a table of ``capacity`` slots, wrapping past the end."""
    floor = 0
    while True:
        positions = place(homes, floor)
        wrapped = int(np.count_nonzero(positions >= capacity))
        if wrapped <= floor:
            return positions % capacity
        floor = wrapped
