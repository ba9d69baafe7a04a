"""``HashIndex``: lookups through a ``.spi`` index into its log (IO layer).

The index is mapped read-only beside its ``LogReader``; slot layout and header rules are in
``sparkey.format``. A lookup hashes the key (``sparkey.murmur``), probes the Robin Hood table
from the key's home slot and asks the log for the value at each address with an equal hash.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sparkey.errors import ClosedError, IndexFormatError
from sparkey.format import (
    INDEX_HEADER_SIZE, REBUILD_INDEX_HINT, BytesOrStr, Compression, EntryKind, IndexHeader,
    decode_address, entry_bytes, key_list)
from sparkey import native
from sparkey.index.compiled import native_lookup, probe_limit
from sparkey.log import LogReader
from sparkey.murmur import hash_key_array, hash_keys, scalar_hasher
from sparkey.table import TableStatistics, slot_dtype

PROBE_CHUNK_KEYS = 16384
"""Keys probed together by get_many on uncompressed stores: the slot rounds of a chunk revisit
cache lines the previous round loaded (measured: 0.19 -> 0.14 us/key for 200k keys, 1M slots)."""

_STRUCT_CODES = {4: "I", 8: "Q"}


def read_index_header(path: str | os.PathLike[str]) -> IndexHeader:
    """The validated header of the index at ``path`` (reads 112 bytes)."""
    with open(path, "rb") as file:
        return IndexHeader.unpack(file.read(INDEX_HEADER_SIZE))



class HashIndex:
    """Lookups through a ``.spi`` index into its log.

    The index file is mapped read-only; slots are read with ``struct`` for single lookups and
    through numpy views for batches. Probing follows libsparkey: it stops at an empty slot or at
    the Robin Hood early exit (an occupant less displaced than the probe), which in a valid table
    comes at most ``max_displacement + 1`` slots from home; the header's ``max_displacement``
    itself is not trusted (a lowered one would hide present keys), so a lookup in a corrupt table
    visits at most one turn of the table, ``hash_capacity`` slots (``probe_limit``). Safe to
    share between threads for reads; a ``close()`` racing with them makes them raise
    ClosedError, never crash. The LogReader passed in stays owned by the caller.

    ``get(key)`` returns the value stored for ``key`` (bytes or str), or None.
    """

    get: Callable[[BytesOrStr], bytes | None]

    def __init__(self, index_path: str | os.PathLike[str], log: LogReader) -> None:
        index_path = os.fspath(index_path)
        fd = os.open(index_path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            header = IndexHeader.unpack(os.pread(fd, INDEX_HEADER_SIZE, 0))
            header.check_log(log.header)
            if size != header.file_size:
                raise IndexFormatError(
                    f"index {index_path!r} has {size} bytes but its header describes "
                    f"{header.file_size} ({header.hash_capacity} slots of {header.slot_size} "
                    f"bytes); {REBUILD_INDEX_HINT}", "hash_capacity")
            mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        self.path = index_path
        self.header = header
        self._mm: mmap.mmap | None = mm
        self._log = log
        self._seed = header.hash_seed
        self._hash = scalar_hasher(header.hash_size)
        self._capacity = header.hash_capacity
        self._slot_size = header.slot_size
        self._bits = header.entry_block_bits
        self._mask = (1 << header.entry_block_bits) - 1
        self._probe_limit = probe_limit(header)
        self._unpack_slot = struct.Struct(
            "<" + _STRUCT_CODES[header.hash_size] + _STRUCT_CODES[header.address_size]).unpack_from
        slots = np.frombuffer(mm, dtype=slot_dtype(header.hash_size, header.address_size),
                              offset=INDEX_HEADER_SIZE, count=header.hash_capacity)
        self._slot_hashes: np.ndarray | None = slots["hash"]
        self._slot_addresses: np.ndarray | None = slots["address"]
        self.native: Any = None
        """The ``sparkey._native.Lookup`` answering ``get`` and ``get_many`` when compiled, else
        None (chosen at opening); released by ``close()``."""
        if native.module is None:
            self.get = self._lookup_function(mm)
        else:
            self.native = native_lookup(native.module, mm, log, header,
                                        str(self._closed_error()))
            self.get = self.native.get

    @property
    def compiled(self) -> bool:
        """Whether lookups run through ``sparkey._native``."""
        return self.native is not None

    def close(self) -> None:
        """Unmap the index (the log is closed by its owner). Idempotent."""
        mm = self._mm
        if mm is None:
            return
        self._mm = None
        self.get = self._raise_closed
        self._slot_hashes = self._slot_addresses = None
        if self.native is not None:
            self.native.release()  # its exports would keep the mapping from closing
        try:
            mm.close()
        except BufferError:
            pass  # a racing get_many still holds a view; the mapping goes away with it

    @property
    def closed(self) -> bool:
        return self._mm is None

    def _closed_error(self) -> ClosedError:
        return ClosedError("the index is closed; open the store again with sparkey.open")

    def _raise_closed(self, *args: object) -> None:
        raise self._closed_error()

    def _slots(self) -> tuple[np.ndarray, np.ndarray]:
        """The numpy views of the slot hashes and addresses; ClosedError once closed."""
        hashes, addresses = self._slot_hashes, self._slot_addresses
        if hashes is None or addresses is None:
            raise self._closed_error()
        return hashes, addresses

    def _lookup_function(self, mm: mmap.mmap) -> Callable[[BytesOrStr], bytes | None]:
        """``get(key)``: the value stored for ``key`` (bytes or str), or None.

        A closure over the mapping and the table geometry: it runs for every lookup, and cell
        variables cost less than attribute loads.
        """
        index = self
        unpack = self._unpack_slot
        hasher = self._hash
        value_for = self._log.value_for
        seed, capacity, slot_size = self._seed, self._capacity, self._slot_size
        bits, mask, limit = self._bits, self._mask, self._probe_limit
        first_slot = INDEX_HEADER_SIZE

        def get(key: Any) -> bytes | None:  # any object: entry_bytes converts or rejects it
            if key.__class__ is not bytes:
                key = entry_bytes(key, "key")
            try:
                h = hasher(key, seed)
                slot = h % capacity
                offset = first_slot + slot * slot_size
                displacement = 0
                while True:
                    other_hash, address = unpack(mm, offset)
                    if not address:
                        return None
                    if other_hash == h:
                        value = value_for(address >> bits, address & mask, key)
                        if value is not None:
                            return value
                    if (displacement >= limit
                            or displacement > (slot - other_hash % capacity) % capacity):
                        return None
                    displacement += 1
                    slot += 1
                    offset += slot_size
                    if slot == capacity:
                        slot = 0
                        offset = first_slot
            except (TypeError, ValueError):
                if index._mm is None:  # closed under a racing lookup
                    raise index._closed_error() from None
                raise
        return get

    def get_many(self, keys: Sequence[BytesOrStr] | np.ndarray) -> list[bytes | None]:
        """Values for a sequence of keys (None where absent), hashing and probing in bulk.

        ``keys`` is a sequence of bytes/str, or a numpy ``S`` array (whose elements, as numpy
        defines them, carry no trailing NUL bytes). Hash-equal slots whose key differs (rare)
        fall back to the scalar probe. When compiled, the batch is one C call (``native``).
        """
        if self.native is not None:
            return self.native.get_many(keys.tolist() if isinstance(keys, np.ndarray) else keys)
        hashes, keys = self._hash_many(keys)
        chunk = max(len(keys), 1)
        if self._log.header.compression_type == Compression.NONE:
            chunk = PROBE_CHUNK_KEYS  # compressed logs rather share decompressed blocks
        try:
            values: list[bytes | None] = []
            for lo in range(0, len(keys), chunk):
                values += self._get_many(hashes[lo:lo + chunk], keys[lo:lo + chunk])
            return values
        except (TypeError, ValueError):
            if self._mm is None:
                raise self._closed_error() from None
            raise

    def _hash_many(self, keys: Sequence[BytesOrStr] | np.ndarray) -> tuple[np.ndarray, list[bytes]]:
        """Hashes of ``keys`` and the keys as a list of bytes."""
        seed, hash_size = self._seed, self.header.hash_size
        if isinstance(keys, np.ndarray):
            return hash_key_array(keys, seed, hash_size), keys.tolist()
        key_bytes = key_list(keys)
        return hash_keys(key_bytes, seed, hash_size), key_bytes

    def _get_many(self, hashes: np.ndarray, keys: list[bytes]) -> list[bytes | None]:
        """get_many of one chunk: every key probed at once, one numpy round per displacement."""
        capacity = np.uint64(self._capacity)
        slot_hashes, slot_addresses = self._slots()
        candidates = np.zeros(len(keys), dtype=np.uint64)
        pending = np.arange(len(keys))
        slots = (hashes % capacity).astype(np.int64)
        displacement = 0
        while len(pending):
            where = slots[pending]
            addresses = slot_addresses[where].astype(np.uint64)
            other_hashes = slot_hashes[where].astype(np.uint64)
            match = (addresses != 0) & (other_hashes == hashes[pending])
            candidates[pending[match]] = addresses[match]
            other_displacement = (where.astype(np.uint64) + capacity
                                  - other_hashes % capacity) % capacity
            stop = (match | (addresses == 0) | (displacement > other_displacement)
                    | (displacement >= self._probe_limit))
            pending = pending[~stop]
            slots[pending] = (slots[pending] + 1) % self._capacity
            displacement += 1
        found = np.flatnonzero(candidates)
        if len(found) == len(keys):
            found_keys = keys
        else:
            found_keys = [keys[i] for i in found.tolist()]
            candidates = candidates[found]
        bits = np.uint64(self._bits)
        found_values = self._log.values_for_many(
            (candidates >> bits).astype(np.int64),
            (candidates & np.uint64(self._mask)).astype(np.int64), found_keys)
        if None in found_values:  # a slot with an equal hash held another key
            found_values = [self.get(key) if value is None else value
                            for key, value in zip(found_keys, found_values)]
        if len(found) == len(keys):
            return found_values
        values = np.full(len(keys), None, dtype=object)
        values[found] = found_values
        return values.tolist()

    def _check(self) -> None:
        """Assert every table invariant (O(capacity) plus a log read per entry; for tests).

        Statistics equal the header; empty slots are all zero; the table is Robin Hood ordered
        (an occupant displaced by ``d > 0`` follows an occupant displaced by at least
        ``d - 1``), which is what makes the early exit of lookups correct; every occupant names
        a PUT of a distinct key whose hash is the slot's, and a lookup of that key finds it.
        """
        header = self.header
        slot_hashes, slot_addresses = self._slots()
        hashes = slot_hashes.astype(np.uint64)
        addresses = slot_addresses.astype(np.uint64)
        stats = TableStatistics(header.hash_capacity)
        stats.add(hashes, addresses)
        stats.finish()
        assert (stats.num_entries, stats.max_displacement, stats.total_displacement,
                stats.hash_collisions) == (header.num_entries, header.max_displacement,
                                           header.total_displacement, header.hash_collisions)
        occupied = addresses != 0
        assert not hashes[~occupied].any()
        capacity = np.uint64(header.hash_capacity)
        slots = np.arange(header.hash_capacity, dtype=np.uint64)
        displacement = (slots + capacity - hashes % capacity) % capacity
        previous = np.roll(np.arange(header.hash_capacity), 1)
        displaced = occupied & (displacement > 0)
        assert occupied[previous][displaced].all()
        assert (displacement[previous][displaced] + 1 >= displacement[displaced]).all()
        keys: set[bytes] = set()
        for slot in np.flatnonzero(occupied).tolist():
            entry = self._log.entry_at(*decode_address(int(addresses[slot]), self._bits))
            assert entry.kind == EntryKind.PUT
            assert self._hash(entry.key, self._seed) == hashes[slot]
            assert entry.key not in keys
            keys.add(entry.key)
            assert self.get(entry.key) == entry.value

    def live_addresses(self) -> np.ndarray:
        """Sorted addresses of all occupied slots (a copy, safe to keep)."""
        _, addresses = self._slots()
        return np.sort(addresses[addresses != 0].astype(np.uint64))
