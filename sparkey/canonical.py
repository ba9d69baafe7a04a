"""Vectorized construction of the canonical Robin Hood table (pure layer).

The canonical table holds the live entries (each key's last PUT, unless a later DELETE removed
it) ordered along every cluster by ``(home, address)``. It is a valid Robin Hood table, readable
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

import numpy as np

from sparkey.format import EntryKind


def live_entries(hashes, addresses, kinds, key_of):
    """Indices of the live entries among log entries given as columns.

    An entry is live if it is a PUT and no later entry (higher address) has the same key.
    Entries are grouped by hash with one sort; only entries sharing a hash with another entry
    are compared by key, through ``key_of(i) -> bytes``. Every entry of a key must be present.
    """
    order = np.lexsort((addresses, hashes))
    sorted_hashes = hashes[order]
    same_as_next = sorted_hashes[1:] == sorted_hashes[:-1]
    shared = np.zeros(len(order), dtype=bool)
    shared[1:] |= same_as_next
    shared[:-1] |= same_as_next
    singles = order[~shared]
    live = [singles[kinds[singles] == EntryKind.PUT]]
    grouped = order[shared]
    if len(grouped):
        group_starts = np.flatnonzero(np.diff(hashes[grouped])) + 1
        kinds_list = kinds.tolist()
        survivors = []
        for group in np.split(grouped, group_starts):
            last_by_key = {}
            for i in group.tolist():
                last_by_key[key_of(i)] = i
            survivors.extend(i for i in last_by_key.values() if kinds_list[i] == EntryKind.PUT)
        live.append(np.array(survivors, dtype=order.dtype))
    return np.concatenate(live)


def place(homes, floor=0):
    """Positions of entries sorted by home, none below ``floor`` (positions may pass capacity)."""
    steps = np.arange(len(homes), dtype=np.int64)
    positions = np.maximum.accumulate(homes.astype(np.int64) - steps) + steps
    return np.maximum(positions, floor + steps)


def place_wrapped(homes, capacity):
    """Slots of entries sorted by home in a table of ``capacity`` slots, wrapping past the end."""
    floor = 0
    while True:
        positions = place(homes, floor)
        wrapped = int(np.count_nonzero(positions >= capacity))
        if wrapped <= floor:
            return positions % capacity
        floor = wrapped
