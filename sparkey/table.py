"""The slot table of an index (pure layer): build parameters per rule set, slot dtype, statistics.

A table is ``capacity`` slots of ``(hash, address)``; address 0 marks an empty slot and empty
slots hold hash 0. An occupant's *home* is ``hash % capacity`` (unsigned) and its displacement
``(slot - home) mod capacity``. Three rule sets choose the parameters:

============  ===============================  ====================================
parameter     ``"c"`` (libsparkey)             ``"java"`` and ``"canonical"``
============  ===============================  ====================================
capacity      ``1 | int(num_puts * 1.3)``      ``1 | int(num_puts * sparsity)``
hash_size     8 if capacity >= 2**23, else 4   8 if num_puts >= 2**23, else 4
block bits    ``bit_length(max_entries)``      ``ceil(log2(max_entries))``
address_size  4 if data_end < 2**(32 - bits)   4 if data_end <= 2**(30 - bits)
garbage       dead PUTs + every DELETE entry   dead PUTs
============  ===============================  ====================================

For uncompressed logs the block bits are always 0, whatever ``max_entries_per_block`` says:
sparkey-java writes 1 there and the C rule would then double every address, which the Java 22
reader does not expect.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from sparkey.format import Compression, LogHeader

RULES = ("c", "java", "canonical")
MIN_SPARSITY = 1.3


@dataclasses.dataclass(frozen=True)
class TableParameters:
    """Shape of the table an index build will produce."""

    capacity: int
    hash_size: int
    address_size: int
    entry_block_bits: int

    @property
    def slot_dtype(self) -> np.dtype:
        """The packed numpy dtype of one slot of this table."""
        return slot_dtype(self.hash_size, self.address_size)


def check_table_options(rules: str, hash_size: int | None, sparsity: float) -> None:
    """Raise ValueError unless the options are valid for table_parameters."""
    if rules not in RULES:
        raise ValueError(f"rules must be one of {RULES}, not {rules!r}")
    if hash_size not in (None, 4, 8) or isinstance(hash_size, bool):
        raise ValueError(f"hash_size must be None (automatic), 4 or 8, not {hash_size!r}")
    if isinstance(sparsity, bool) or not isinstance(sparsity, (int, float)) or not (
            MIN_SPARSITY <= sparsity < float("inf")):
        raise ValueError(f"sparsity must be a finite number >= {MIN_SPARSITY}, not {sparsity!r}")
    if rules == "c" and sparsity != MIN_SPARSITY:
        raise ValueError("rules='c' has a fixed sparsity of 1.3, as libsparkey has no such option")


def table_parameters(log_header: LogHeader, rules: str, hash_size: int | None = None,
                     sparsity: float = MIN_SPARSITY) -> TableParameters:
    """Parameters of an index over the log with header ``log_header`` under ``rules``."""
    check_table_options(rules, hash_size, sparsity)
    num_puts = log_header.num_puts
    capacity = 1 | int(num_puts * float(sparsity))
    per_block = log_header.max_entries_per_block
    if log_header.compression_type == Compression.NONE:
        bits = 0
    elif rules == "c":
        bits = per_block.bit_length()
    else:
        bits = (per_block - 1).bit_length() if per_block > 1 else 0
    if rules == "c":
        auto_hash_size = 8 if capacity >= 1 << 23 else 4
        small_addresses = bits <= 32 and log_header.data_end < 1 << (32 - bits)
    else:
        auto_hash_size = 8 if num_puts >= 1 << 23 else 4
        small_addresses = bits <= 30 and log_header.data_end <= 1 << (30 - bits)
    return TableParameters(capacity=capacity, hash_size=hash_size or auto_hash_size,
                           address_size=4 if small_addresses else 8, entry_block_bits=bits)


def slot_dtype(hash_size: int, address_size: int) -> np.dtype:
    """Packed little-endian numpy dtype of one slot."""
    return np.dtype([("hash", f"<u{hash_size}"), ("address", f"<u{address_size}")])


class TableStatistics:
    """Accumulates the header statistics of a table fed in slot order, chunk by chunk.

    ``hash_collisions`` reproduces both reference implementations: scanning slots in order, add
    one when the previous slot is occupied and its hash equals this slot's stored hash, even if
    this slot is empty (its hash is then 0); finally add one when slot 0 and the last slot are
    both occupied with equal hashes.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.num_entries = 0
        self.max_displacement = 0
        self.total_displacement = 0
        self.hash_collisions = 0
        self._next_slot = 0
        self._previous: tuple[bool, int] | None = None
        self._first: tuple[bool, int] | None = None

    def add(self, hashes: np.ndarray, addresses: np.ndarray) -> None:
        """Feed the next ``len(hashes)`` slots."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        occupied = np.asarray(addresses) != 0
        if not len(hashes):
            return
        start = self._next_slot
        slots = np.arange(start, start + len(hashes), dtype=np.uint64)
        capacity = np.uint64(self.capacity)
        homes = hashes[occupied] % capacity
        displacement = (slots[occupied] + capacity - homes) % capacity
        self.num_entries += int(occupied.sum())
        if len(displacement):
            self.max_displacement = max(self.max_displacement, int(displacement.max()))
            self.total_displacement += int(displacement.sum(dtype=np.uint64))
        self.hash_collisions += int(np.count_nonzero(occupied[:-1] & (hashes[:-1] == hashes[1:])))
        if self._previous is not None and self._previous[0] and self._previous[1] == hashes[0]:
            self.hash_collisions += 1
        if start == 0:
            self._first = (bool(occupied[0]), int(hashes[0]))
        self._previous = (bool(occupied[-1]), int(hashes[-1]))
        self._next_slot = start + len(hashes)

    def finish(self) -> TableStatistics:
        """Close the scan (all slots fed) and apply the wrap-around collision rule."""
        if self._next_slot != self.capacity:
            raise ValueError(f"statistics fed {self._next_slot} of {self.capacity} slots")
        assert self._first is not None and self._previous is not None  # capacity >= 1
        if self._first[0] and self._previous[0] and self._first[1] == self._previous[1]:
            self.hash_collisions += 1
        return self
