"""Sparkey index files (IO layer): ``write_index`` builds a ``.spi``, ``HashIndex`` answers lookups.

Only this module and the ``sparkey.log`` package open Sparkey files. Slot layout and header
rules are in ``sparkey.format``; the parameters per rule set in ``sparkey.table``; the two table
builders in ``sparkey.robinhood`` (sequential, byte-identical to libsparkey or sparkey-java) and
``sparkey.canonical`` (vectorized).

Building the canonical table by partitions
------------------------------------------
Both build methods of the canonical table run the same loop over *partitions*: ranges of home
slots ``[lo, hi)``. ``method="memory"`` has a single partition held in RAM; ``method="sorting"``
scans the log once, spilling one 25-byte record per entry (hash, address, entry size, kind) to a
temporary file grouped by partition, then loads one partition at a time, so that memory stays
near ``max_memory_bytes`` whatever the log size. For each partition in slot order: resolve the
live entries (all entries of a key share its home, hence its partition), sort them by
``(home, address)``, place them after the entries *carried* from the previous partition (those
whose cluster ran past its ``hi``), and write slots ``[lo, hi)``. Entries carried past the last
slot wrap to slots ``0..k-1``; the pass is then repeated with a floor of ``k`` (no entry below
slot ``k``) until ``k`` is stable, stopping early once a partition hands on the same carry as
in the previous pass.
"""

import mmap
import os
import secrets
import struct
import tempfile

import numpy as np

from sparkey import canonical, robinhood
from sparkey.errors import ClosedError, EntryTypeError, IndexFormatError, LogFormatError
from sparkey.format import (
    INDEX_HEADER_SIZE, Compression, EntryKind, IndexHeader, decode_address, entry_bytes)
from sparkey.log import SCAN_CHUNK_ENTRIES, EntryTable, LogReader, random_u32
from sparkey.murmur import hash_buffer, hash_keys, scalar_hasher
from sparkey.table import (
    MIN_SPARSITY, TableStatistics, check_table_options, slot_dtype, table_parameters)

METHODS = ("memory", "sorting")
DEFAULT_MAX_MEMORY_BYTES = 256 << 20
SORTING_BYTES_PER_ENTRY = 160
"""RAM per entry of a partition being placed: its record, sort keys, positions and slots."""

STATISTICS_CHUNK_SLOTS = 1 << 20
PROBE_CHUNK_KEYS = 16384
"""Keys probed together by get_many on uncompressed stores: the slot rounds of a chunk revisit
cache lines the previous round loaded (measured: 0.19 -> 0.14 us/key for 200k keys, 1M slots)."""

_STRUCT_CODES = {4: "I", 8: "Q"}
_RECORD = np.dtype([("hash", "<u8"), ("address", "<u8"), ("size", "<u8"), ("kind", "u1")])


def write_index(index_path, log_path, *, hash_size=None, hash_seed=None, rules="canonical",
                sparsity=MIN_SPARSITY, method="memory",
                max_memory_bytes=DEFAULT_MAX_MEMORY_BYTES):
    """Build the index ``index_path`` for the log ``log_path``; return its IndexHeader.

    ``rules="c"`` or ``"java"`` replay the log with that implementation's Robin Hood rules, so
    the file equals the reference output for the same ``hash_seed`` (slow: microseconds per
    entry). ``"canonical"`` (default) is the vectorized build, readable by both; it equals
    sparkey-java's output for logs without overwrites or deletes. ``hash_size`` 4 or 8 overrides
    the automatic choice; ``hash_seed`` is random unless given; ``sparsity`` (>= 1.3) scales the
    capacity. ``method="sorting"`` (canonical rules only) spills partitions to a temporary file
    next to the index and keeps RAM near ``max_memory_bytes``.

    The file is written under a temporary name and renamed over ``index_path``, so readers
    holding the old index keep a consistent file and a failed build leaves no partial index.
    """
    check_index_options(hash_size=hash_size, hash_seed=hash_seed, rules=rules,
                        sparsity=sparsity, method=method, max_memory_bytes=max_memory_bytes)
    if hash_seed is None:
        hash_seed = random_u32()
    index_path = os.fspath(index_path)
    with LogReader(log_path) as log:
        params = table_parameters(log.header, rules, hash_size, sparsity)
        temp_path = f"{index_path}.tmp-{secrets.token_hex(8)}"
        fd = os.open(temp_path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.ftruncate(fd, INDEX_HEADER_SIZE + params.capacity * params.slot_dtype.itemsize)
            builder = _IndexBuilder(log, params, hash_seed, fd)
            if rules == "canonical":
                if method == "memory":
                    garbage = builder.build_canonical(_InMemoryPartitions(builder))
                else:
                    with tempfile.TemporaryFile(
                            dir=os.path.dirname(os.path.abspath(index_path))) as spill:
                        garbage = builder.build_canonical(
                            _SpilledPartitions(builder, spill, max_memory_bytes))
            else:
                garbage = builder.build_replayed(rules)
            stats = builder.statistics()
            header = IndexHeader(
                file_identifier=log.header.file_identifier, hash_seed=hash_seed,
                data_end=log.header.data_end, max_key_len=log.header.max_key_len,
                max_value_len=log.header.max_value_len, num_puts=log.header.num_puts,
                garbage_size=garbage, num_entries=stats.num_entries,
                address_size=params.address_size, hash_size=params.hash_size,
                hash_capacity=params.capacity, max_displacement=stats.max_displacement,
                entry_block_bits=params.entry_block_bits, hash_collisions=stats.hash_collisions,
                total_displacement=stats.total_displacement)
            os.pwrite(fd, header.pack(), 0)
            os.close(fd)
            fd = -1
            os.replace(temp_path, index_path)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            os.unlink(temp_path)
            raise
    return header


def read_index_header(path):
    """The validated header of the index at ``path`` (reads 112 bytes)."""
    with open(path, "rb") as file:
        return IndexHeader.unpack(file.read(INDEX_HEADER_SIZE))


def check_index_options(*, hash_size=None, hash_seed=None, rules="canonical",
                        sparsity=MIN_SPARSITY, method="memory",
                        max_memory_bytes=DEFAULT_MAX_MEMORY_BYTES):
    """Validate write_index's keyword options; return them as a dict (raises ValueError)."""
    check_table_options(rules, hash_size, sparsity)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    if method == "sorting" and rules != "canonical":
        raise ValueError("method='sorting' builds the canonical table; use rules='canonical'")
    if (not isinstance(max_memory_bytes, int) or isinstance(max_memory_bytes, bool)
            or max_memory_bytes < 1 << 20):
        raise ValueError(f"max_memory_bytes must be an int of at least 1 MiB, "
                         f"not {max_memory_bytes!r}")
    if hash_seed is not None and (not isinstance(hash_seed, int) or isinstance(hash_seed, bool)
                                  or not 0 <= hash_seed < 2**32):
        raise ValueError(f"hash_seed must be None or an int in [0, 2**32), not {hash_seed!r}")
    return dict(hash_size=hash_size, hash_seed=hash_seed, rules=rules, sparsity=sparsity,
                method=method, max_memory_bytes=max_memory_bytes)


class _IndexBuilder:
    """State shared by the build steps of one index: the log, parameters, seed, output file."""

    def __init__(self, log, params, seed, fd):
        self.log = log
        self.params = params
        self.seed = seed
        self.fd = fd
        self.capacity = params.capacity
        self.dtype = params.slot_dtype

    def tables(self, chunk_entries=SCAN_CHUNK_ENTRIES):
        """Scan the log; yield ``(table, hashes, addresses)`` per chunk of entries."""
        bits = self.params.entry_block_bits
        puts = 0
        for table in self.log.scan(chunk_entries=chunk_entries):
            if len(table) and int(table.entry_index.max()) >> bits:
                raise LogFormatError(
                    f"a block holds more entries than max_entries_per_block "
                    f"{self.log.header.max_entries_per_block} says", "max_entries_per_block")
            puts += int(np.count_nonzero(table.kind == EntryKind.PUT))
            if puts > self.log.header.num_puts:  # the table could overflow: capacity follows it
                raise LogFormatError(f"the log holds more PUT entries than its num_puts "
                                     f"{self.log.header.num_puts}", "num_puts")
            hashes = hash_buffer(table.key_buffer, table.key_offset, table.key_len, self.seed,
                                 self.params.hash_size)
            addresses = (table.position << np.uint64(bits)) | table.entry_index
            yield table, hashes, addresses

    def write_slots(self, first_slot, hashes, addresses):
        """Write consecutive slots starting at ``first_slot``."""
        slots = np.zeros(len(hashes), dtype=self.dtype)
        slots["hash"] = hashes
        slots["address"] = addresses
        data = memoryview(slots).cast("B")
        offset = INDEX_HEADER_SIZE + first_slot * self.dtype.itemsize
        written = 0
        while written < len(data):
            written += os.pwrite(self.fd, data[written:], offset + written)

    def statistics(self):
        """Header statistics, read back from the written table in chunks."""
        stats = TableStatistics(self.capacity)
        with mmap.mmap(self.fd, 0, access=mmap.ACCESS_READ) as mm:
            table = np.frombuffer(mm, dtype=self.dtype, offset=INDEX_HEADER_SIZE,
                                  count=self.capacity)
            for lo in range(0, self.capacity, STATISTICS_CHUNK_SLOTS):
                chunk = table[lo:lo + STATISTICS_CHUNK_SLOTS]
                stats.add(chunk["hash"], chunk["address"])
            del table, chunk
        return stats.finish()

    def build_replayed(self, rules):
        """Sequential build with the C or Java rules; returns the garbage size."""
        parts = list(self.tables())
        table = EntryTable.concat([part[0] for part in parts])
        hashes = np.concatenate([part[1] for part in parts])
        addresses = np.concatenate([part[2] for part in parts])
        slot_hashes, slot_addresses, garbage = robinhood.replay(
            hashes, addresses, table.kind, table.key_len, table.value_len, table.key,
            self.capacity, rules)
        self.write_slots(0, slot_hashes, slot_addresses)
        return garbage

    def build_canonical(self, partitions):
        """The partition loop of the module docstring; returns the garbage size."""
        capacity = np.uint64(self.capacity)
        floor = 0
        carries_out = [None] * partitions.count
        live_bytes = {}
        wrapped = None
        empty = np.zeros(0, dtype=np.uint64)
        while True:
            carry_hashes = carry_addresses = empty
            for part in range(partitions.count):
                lo, hi = partitions.bounds[part], partitions.bounds[part + 1]
                live = partitions.live_records(part)
                if part not in live_bytes:
                    live_bytes[part] = int(live.size.sum(dtype=np.uint64))
                homes = live.hash % capacity
                order = canonical.order_by_home(homes)
                hashes = np.concatenate((carry_hashes, live.hash[order]))
                addresses = np.concatenate((carry_addresses, live.address[order]))
                positions = canonical.place(
                    np.concatenate((carry_hashes % capacity, homes[order])), max(lo, floor))
                inside = positions < hi
                slot_hashes = np.zeros(hi - lo, dtype=np.uint64)
                slot_addresses = np.zeros(hi - lo, dtype=np.uint64)
                slot_hashes[positions[inside] - lo] = hashes[inside]
                slot_addresses[positions[inside] - lo] = addresses[inside]
                self.write_slots(lo, slot_hashes, slot_addresses)
                carry_hashes, carry_addresses = hashes[~inside], addresses[~inside]
                unchanged = wrapped is not None and carries_out[part] == len(carry_hashes)
                carries_out[part] = len(carry_hashes)
                if unchanged and floor <= hi:
                    break
            else:
                wrapped = carry_hashes, carry_addresses
            if len(wrapped[0]) <= floor:
                break
            floor = len(wrapped[0])
        if len(wrapped[0]):
            self.write_slots(0, *wrapped)
        return partitions.put_bytes - sum(live_bytes.values())


class _Records:
    """Per-entry columns for the canonical build, in log order: hash, address, size, kind."""

    __slots__ = ("hash", "address", "size", "kind")

    def __init__(self, hash, address, size, kind):
        self.hash, self.address, self.size, self.kind = hash, address, size, kind

    @classmethod
    def scanned(cls, table, hashes, addresses):
        """Records of a scanned EntryTable."""
        return cls(hashes, addresses, table.entry_sizes.astype(np.uint64), table.kind)

    @classmethod
    def concat(cls, parts):
        return cls(*(np.concatenate([getattr(part, name) for part in parts])
                     for name in cls.__slots__))

    @classmethod
    def from_bytes(cls, data):
        packed = np.frombuffer(data, dtype=_RECORD)
        return cls(*(np.ascontiguousarray(packed[name]) for name in cls.__slots__))

    def to_bytes(self):
        packed = np.empty(len(self.hash), dtype=_RECORD)
        for name in self.__slots__:
            packed[name] = getattr(self, name)
        return packed.tobytes()

    def take(self, indices):
        return _Records(*(getattr(self, name)[indices] for name in self.__slots__))

    def __len__(self):
        return len(self.hash)

    @property
    def put_bytes(self):
        return int(self.size[self.kind == EntryKind.PUT].sum(dtype=np.uint64))


class _InMemoryPartitions:
    """The whole log as one partition held in RAM (``method="memory"``)."""

    def __init__(self, builder):
        parts = list(builder.tables())
        self._table = EntryTable.concat([table for table, _, _ in parts])
        self._records = _Records.concat([_Records.scanned(*part) for part in parts])
        self.put_bytes = self._records.put_bytes
        self.count = 1
        self.bounds = [0, builder.capacity]
        self._live = None

    def live_records(self, part):
        """Live entries of the partition (computed once)."""
        if self._live is None:
            records = self._records
            self._live = records.take(
                canonical.live_entries(records.hash, records.kind, self._table.key))
        return self._live


class _SpilledPartitions:
    """Partitions of home slots spilled to a temporary file (``method="sorting"``).

    The scan writes one run per chunk of entries, each run sorted by partition (stably, so each
    segment stays in log order); partition ``p`` is the concatenation of its segments in run
    order. Keys are read back from the log only for entries that share a hash with another.
    """

    def __init__(self, builder, spill, max_memory_bytes):
        header = builder.log.header
        per_partition = max(1, max_memory_bytes // SORTING_BYTES_PER_ENTRY)
        count = -(-(header.num_puts + header.num_deletes) // per_partition)
        self.count = max(1, min(count, builder.capacity))
        self.bounds = [p * builder.capacity // self.count for p in range(self.count + 1)]
        self._log = builder.log
        self._bits = builder.params.entry_block_bits
        self._fd = spill.fileno()
        self._runs = []
        self.put_bytes = 0
        inner_bounds = np.array(self.bounds[1:-1], dtype=np.uint64)
        offset = 0
        for part in builder.tables(min(SCAN_CHUNK_ENTRIES, per_partition)):
            records = _Records.scanned(*part)
            partition = np.searchsorted(
                inner_bounds, records.hash % np.uint64(builder.capacity), side="right")
            records = records.take(np.argsort(partition, kind="stable"))
            counts = np.bincount(partition, minlength=self.count)
            data = records.to_bytes()
            written = 0
            while written < len(data):
                written += os.pwrite(self._fd, data[written:], offset + written)
            starts = offset + _RECORD.itemsize * np.concatenate(([0], np.cumsum(counts)[:-1]))
            self._runs.append((starts.tolist(), counts.tolist()))
            offset += len(data)
            self.put_bytes += records.put_bytes

    def live_records(self, part):
        """Live entries of partition ``part``, read back from the spill file."""
        data = b"".join(os.pread(self._fd, counts[part] * _RECORD.itemsize, starts[part])
                        for starts, counts in self._runs if counts[part])
        records = _Records.from_bytes(data)
        log, bits, addresses = self._log, self._bits, records.address

        def key_of(i):
            return log.entry_at(*decode_address(int(addresses[i]), bits)).key
        return records.take(canonical.live_entries(records.hash, records.kind, key_of))


class HashIndex:
    """Lookups through a ``.spi`` index into its log.

    The index file is mapped read-only; slots are read with ``struct`` for single lookups and
    through numpy views for batches. Probing follows libsparkey's Robin Hood early exit and also
    stops at the header's ``max_displacement`` (sparkey-java's bound), so a lookup visits at most
    ``max_displacement + 1`` slots even in a corrupt file. Safe to share between threads for
    reads; a ``close()`` racing with them makes them raise ClosedError, never crash. The
    LogReader passed in stays owned by the caller.

    ``get(key)`` returns the value stored for ``key`` (bytes or str), or None.
    """

    def __init__(self, index_path, log):
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
                    "bytes); rebuild it with sparkey.write_index", "hash_capacity")
            mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        self.path = index_path
        self.header = header
        self._mm = mm
        self._log = log
        self._seed = header.hash_seed
        self._hash = scalar_hasher(header.hash_size)
        self._capacity = header.hash_capacity
        self._slot_size = header.slot_size
        self._bits = header.entry_block_bits
        self._mask = (1 << header.entry_block_bits) - 1
        self._max_displacement = header.max_displacement
        self._unpack_slot = struct.Struct(
            "<" + _STRUCT_CODES[header.hash_size] + _STRUCT_CODES[header.address_size]).unpack_from
        slots = np.frombuffer(mm, dtype=slot_dtype(header.hash_size, header.address_size),
                              offset=INDEX_HEADER_SIZE, count=header.hash_capacity)
        self._slot_hashes = slots["hash"]
        self._slot_addresses = slots["address"]
        self.get = self._lookup_function()

    def close(self):
        """Unmap the index (the log is closed by its owner). Idempotent."""
        mm = self._mm
        if mm is None:
            return
        self._mm = None
        self.get = self._raise_closed
        self._slot_hashes = self._slot_addresses = None
        try:
            mm.close()
        except BufferError:
            pass  # a racing get_many still holds a view; the mapping goes away with it

    @property
    def closed(self):
        return self._mm is None

    def _closed_error(self):
        return ClosedError("the index is closed; open the store again with sparkey.open")

    def _raise_closed(self, *args):
        raise self._closed_error()

    def _lookup_function(self):
        """``get(key)``: the value stored for ``key`` (bytes or str), or None.

        A closure over the mapping and the table geometry: it runs for every lookup, and cell
        variables cost less than attribute loads.
        """
        index = self
        mm = self._mm
        unpack = self._unpack_slot
        hasher = self._hash
        value_for = self._log.value_for
        seed, capacity, slot_size = self._seed, self._capacity, self._slot_size
        bits, mask, max_displacement = self._bits, self._mask, self._max_displacement
        first_slot = INDEX_HEADER_SIZE

        def get(key):
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
                    if (displacement >= max_displacement
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

    def get_many(self, keys):
        """Values for a sequence of keys (None where absent), hashing and probing in bulk.

        ``keys`` is a sequence of bytes/str, or a numpy ``S`` array (whose elements, as numpy
        defines them, carry no trailing NUL bytes). Hash-equal slots whose key differs (rare)
        fall back to the scalar probe.
        """
        hashes, keys = self._hash_many(keys)
        chunk = max(len(keys), 1)
        if self._log.header.compression_type == Compression.NONE:
            chunk = PROBE_CHUNK_KEYS  # compressed logs rather share decompressed blocks
        try:
            values = []
            for lo in range(0, len(keys), chunk):
                values += self._get_many(hashes[lo:lo + chunk], keys[lo:lo + chunk])
            return values
        except (TypeError, ValueError):
            if self._mm is None:
                raise self._closed_error() from None
            raise

    def _hash_many(self, keys):
        seed, hash_size = self._seed, self.header.hash_size
        if isinstance(keys, np.ndarray):
            if keys.dtype.kind != "S" or keys.ndim != 1:
                raise EntryTypeError(f"a key array must be one-dimensional with dtype 'S', "
                                     f"not {keys.ndim}-d {keys.dtype}")
            keys = np.ascontiguousarray(keys)
            width = keys.dtype.itemsize
            lengths = np.char.str_len(keys) if width else np.zeros(len(keys), dtype=np.int64)
            offsets = np.arange(len(keys), dtype=np.int64) * width
            return hash_buffer(keys.view(np.uint8), offsets, lengths, seed, hash_size), \
                keys.tolist()
        if not isinstance(keys, list) or set(map(type, keys)) - {bytes}:
            keys = [key if key.__class__ is bytes else entry_bytes(key, "key") for key in keys]
        return hash_keys(keys, seed, hash_size), keys

    def _get_many(self, hashes, keys):
        capacity = np.uint64(self._capacity)
        slot_hashes, slot_addresses = self._slot_hashes, self._slot_addresses
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
                    | (displacement >= self._max_displacement))
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

    def _check(self):
        """Assert every table invariant (O(capacity) plus a log read per entry; for tests).

        Statistics equal the header; empty slots are all zero; the table is Robin Hood ordered
        (an occupant displaced by ``d > 0`` follows an occupant displaced by at least
        ``d - 1``), which is what makes the early exit of lookups correct; every occupant names
        a PUT of a distinct key whose hash is the slot's, and a lookup of that key finds it.
        """
        header = self.header
        hashes = self._slot_hashes.astype(np.uint64)
        addresses = self._slot_addresses.astype(np.uint64)
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
        keys = set()
        for slot in np.flatnonzero(occupied).tolist():
            entry = self._log.entry_at(*decode_address(int(addresses[slot]), self._bits))
            assert entry.kind == EntryKind.PUT
            assert self._hash(entry.key, self._seed) == hashes[slot]
            assert entry.key not in keys
            keys.add(entry.key)
            assert self.get(entry.key) == entry.value

    def live_addresses(self):
        """Sorted addresses of all occupied slots (a copy, safe to keep)."""
        if self._mm is None:
            raise self._closed_error()
        addresses = self._slot_addresses
        return np.sort(addresses[addresses != 0].astype(np.uint64))
