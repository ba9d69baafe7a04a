"""Sequential Robin Hood table construction with libsparkey's or sparkey-java's rules (pure layer).

Replaying a log entry by entry the way a reference implementation does reproduces its index byte
for byte (given its seed), including the history-dependent layout and the statistics. It costs a
few microseconds per entry in Python; ``sparkey.canonical`` is the fast build.

PUT of (hash, address), starting at the home slot with displacement ``d = 0``:

1. empty slot: store there, one more entry;
2. while the entry being placed is still the original one, an occupant with the same hash and
   the same key is an overwrite: the slot takes the new address, the old PUT becomes garbage;
3. otherwise, if ``d`` exceeds the occupant's displacement (``"java"``: or equals it and the new
   address is smaller), the new entry takes the slot and the evicted occupant continues from
   here with its own displacement;
4. next slot, ``d + 1``.

Worked example, capacity 7, entries x (home 2), y (home 2), z (home 3): x lands in 2, y in 3
(d 1). z arrives at 3 with d 0 against y's 1, moves on to 4. A later w with home 2 reaches slot
3 with d 1, equal to y's: C passes on, Java swaps if w's address is smaller (never, since w came
later), so both continue: w reaches slot 4 with d 2 > z's 1 and evicts z, which lands in 5.

DELETE of a key finds it the same way (stopping at an empty slot or when ``d`` exceeds the
occupant's displacement), then shifts the following occupants back one slot until an empty slot
or an occupant at its home; C also counts every DELETE entry itself as garbage.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sparkey.format import EntryKind, delete_size, put_size

KeyOf = Callable[[int], bytes]
"""``key_of(i)``: the key of entry ``i`` as bytes."""


def replay(hashes: np.ndarray, addresses: np.ndarray, kinds: np.ndarray, key_lens: np.ndarray,
           value_lens: np.ndarray, key_of: KeyOf, capacity: int,
           rules: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Build the table from entries in log order; return ``(slot_hashes, slot_addresses, garbage)``.

    ``key_of(i)`` returns the key of entry ``i`` as bytes; it is only called when two hashes are
    equal. ``rules`` is ``"c"`` or ``"java"``.
    """
    if rules not in ("c", "java"):
        raise ValueError(f"replay rules must be 'c' or 'java', not {rules!r}")
    java = rules == "java"
    slot_hash = [0] * capacity
    slot_address = [0] * capacity
    slot_entry = [-1] * capacity
    key_len_list: list[int] = key_lens.tolist()
    value_len_list: list[int] = value_lens.tolist()
    garbage = 0
    for entry, (h, address, kind) in enumerate(zip(hashes.tolist(), addresses.tolist(),
                                                   kinds.tolist())):
        slot = h % capacity
        if kind == EntryKind.PUT:
            garbage += _insert(slot_hash, slot_address, slot_entry, slot, h, address, entry,
                               key_len_list, value_len_list, key_of, capacity, java)
        else:
            if not java:
                garbage += delete_size(key_len_list[entry])
            garbage += _remove(slot_hash, slot_address, slot_entry, slot, h, entry,
                               key_len_list, value_len_list, key_of, capacity)
    return (np.array(slot_hash, dtype=np.uint64), np.array(slot_address, dtype=np.uint64),
            garbage)


def _insert(slot_hash: list[int], slot_address: list[int], slot_entry: list[int], slot: int,
            h: int, address: int, entry: int, key_lens: list[int], value_lens: list[int],
            key_of: KeyOf, capacity: int, java: bool) -> int:
    """Place one PUT; return the garbage it creates (the size of an overwritten PUT)."""
    displacement = 0
    original = True
    while True:
        other_address = slot_address[slot]
        if not other_address:
            slot_hash[slot], slot_address[slot], slot_entry[slot] = h, address, entry
            return 0
        other_hash = slot_hash[slot]
        other_entry = slot_entry[slot]
        if (original and other_hash == h and key_lens[other_entry] == key_lens[entry]
                and key_of(other_entry) == key_of(entry)):
            slot_address[slot], slot_entry[slot] = address, entry
            return put_size(key_lens[other_entry], value_lens[other_entry])
        other_displacement = (slot - other_hash % capacity) % capacity
        if displacement > other_displacement or (
                java and displacement == other_displacement and address < other_address):
            slot_hash[slot], slot_address[slot], slot_entry[slot] = h, address, entry
            h, address, entry = other_hash, other_address, other_entry
            displacement = other_displacement
            original = False
        displacement += 1
        slot += 1
        if slot == capacity:
            slot = 0


def _remove(slot_hash: list[int], slot_address: list[int], slot_entry: list[int], slot: int,
            h: int, entry: int, key_lens: list[int], value_lens: list[int], key_of: KeyOf,
            capacity: int) -> int:
    """Apply one DELETE; return the garbage it creates (the size of the removed PUT)."""
    displacement = 0
    while True:
        if not slot_address[slot]:
            return 0
        other_hash = slot_hash[slot]
        other_entry = slot_entry[slot]
        if (other_hash == h and key_lens[other_entry] == key_lens[entry]
                and key_of(other_entry) == key_of(entry)):
            while True:
                following = slot + 1 if slot + 1 < capacity else 0
                if (not slot_address[following]
                        or slot_hash[following] % capacity == following):
                    break
                slot_hash[slot] = slot_hash[following]
                slot_address[slot] = slot_address[following]
                slot_entry[slot] = slot_entry[following]
                slot = following
            slot_hash[slot], slot_address[slot], slot_entry[slot] = 0, 0, -1
            return put_size(key_lens[other_entry], value_lens[other_entry])
        if displacement > (slot - other_hash % capacity) % capacity:
            return 0
        displacement += 1
        slot += 1
        if slot == capacity:
            slot = 0
