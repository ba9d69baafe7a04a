"""``write_index``: build the ``.spi`` index of a ``.spl`` log (IO layer).

Slot layout and header rules are in ``sparkey.format``; the parameters per rule set in
``sparkey.table``; the two table builders in ``sparkey.robinhood`` (sequential, byte-identical
to libsparkey or sparkey-java) and ``sparkey.canonical`` (vectorized). This module reads the log
once, runs the chosen build and writes the file. With the compiled core, the sequential builds
and the in-memory canonical build place the slots with ``sparkey._native.fill_slots``, the
replay's exact counterpart (``sparkey.native`` chooses).

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

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Iterator, Sequence
from typing import IO, Any, Optional, Protocol

import numpy as np

from sparkey import canonical, native, robinhood
from sparkey.checksums import write_checksums
from sparkey.durable import fsync_parent
from sparkey.errors import LogFormatError
from sparkey.format import INDEX_HEADER_SIZE, EntryKind, IndexHeader, decode_address
from sparkey.log import SCAN_CHUNK_ENTRIES, EntryTable, LogReader, random_u32
from sparkey.murmur import hash_buffer
from sparkey.table import (
    MIN_SPARSITY, TableParameters, TableStatistics, check_table_options, table_parameters)

METHODS = ("memory", "sorting")
DEFAULT_MAX_MEMORY_BYTES = 256 << 20
SORTING_BYTES_PER_ENTRY = 160
"""RAM per entry of a partition being placed: its record, sort keys, positions and slots."""

STATISTICS_CHUNK_SLOTS = 1 << 20
"""Slots read back together to compute the header statistics."""

def _read_fully(fd: int, size: int, offset: int) -> bytes:
    """``size`` bytes of the file at ``offset`` (``os.pread`` may return fewer at once); a short
    file is an OSError, since the table was sized before it was written."""
    parts = []
    while size:
        part = os.pread(fd, size, offset)
        if not part:
            raise OSError(f"the index file ended {size} bytes short of its table")
        parts.append(part)
        size -= len(part)
        offset += len(part)
    return b"".join(parts)


_RECORD = np.dtype([("hash", "<u8"), ("address", "<u8"), ("size", "<u8"), ("kind", "u1")])


def write_index(index_path: str | os.PathLike[str], log_path: str | os.PathLike[str], *,
                hash_size: int | None = None, hash_seed: int | None = None,
                rules: str = "canonical", sparsity: float = MIN_SPARSITY, method: str = "memory",
                max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES,
                checksums: bool = False, fsync: bool = False) -> IndexHeader:
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
    ``checksums=True`` then writes the checksum sidecar of the log and the new index
    (:func:`sparkey.checksums.write_checksums`), which ``sparkey.open(..., verify=True)`` checks.
    ``fsync=True`` makes the index (and the sidecar) durable before returning: each file is
    synced before its rename and the directory after it (:mod:`sparkey.durable`); without it a
    power loss soon after may leave a damaged index, which ``write_index`` rebuilds from the log.
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
            if fsync:
                os.fsync(fd)
            os.close(fd)
            fd = -1
            os.replace(temp_path, index_path)
            if fsync:
                fsync_parent(index_path)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            os.unlink(temp_path)
            raise
    if checksums:
        write_checksums(log_path, index_path, fsync=fsync)
    return header


def check_index_options(*, hash_size: int | None = None, hash_seed: int | None = None,
                        rules: str = "canonical", sparsity: float = MIN_SPARSITY,
                        method: str = "memory",
                        max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES) -> dict[str, Any]:
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


class _Partitions(Protocol):
    """A split of the home slots ``[0, capacity)`` into ``count`` partitions, in slot order.

    Partition ``p`` covers slots ``[bounds[p], bounds[p + 1])``; ``live_records(p)`` returns
    the live entries homed there in log order; ``put_bytes`` is the size of every PUT scanned.
    """

    count: int
    bounds: list[int]
    put_bytes: int

    def live_records(self, part: int) -> _Records:
        """Live entries of partition ``part``, in log order."""


class _IndexBuilder:
    """State shared by the build steps of one index: the log, parameters, seed, output file."""

    def __init__(self, log: LogReader, params: TableParameters, seed: int, fd: int) -> None:
        self.log = log
        self.params = params
        self.seed = seed
        self.fd = fd
        self.capacity = params.capacity
        self.dtype = params.slot_dtype

    def tables(self, chunk_entries: int = SCAN_CHUNK_ENTRIES
               ) -> Iterator[tuple[EntryTable, np.ndarray, np.ndarray]]:
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

    def write_slots(self, first_slot: int, hashes: np.ndarray, addresses: np.ndarray) -> None:
        """Write consecutive slots starting at ``first_slot``."""
        slots = np.zeros(len(hashes), dtype=self.dtype)
        slots["hash"] = hashes
        slots["address"] = addresses
        self.write_table(first_slot, slots.data)

    def write_table(self, first_slot: int, packed: memoryview) -> None:
        """Write packed slots (``slot_dtype`` layout) starting at ``first_slot``."""
        data = packed.cast("B")
        offset = INDEX_HEADER_SIZE + first_slot * self.dtype.itemsize
        written = 0
        while written < len(data):
            written += os.pwrite(self.fd, data[written:], offset + written)

    def statistics(self) -> TableStatistics:
        """Header statistics, read back from the written table in chunks of copies (``pread``:
        no mapping of the file, whose close a live numpy view could make fail)."""
        stats = TableStatistics(self.capacity)
        slot_bytes = self.dtype.itemsize
        for lo in range(0, self.capacity, STATISTICS_CHUNK_SLOTS):
            count = min(STATISTICS_CHUNK_SLOTS, self.capacity - lo)
            chunk = np.frombuffer(_read_fully(self.fd, count * slot_bytes,
                                              INDEX_HEADER_SIZE + lo * slot_bytes), self.dtype)
            stats.add(chunk["hash"], chunk["address"])
        return stats.finish()

    def build_replayed(self, rules: str) -> int:
        """Sequential build with the C or Java rules; returns the garbage size."""
        parts = list(self.tables())
        table = EntryTable.concat([part[0] for part in parts])
        hashes = np.concatenate([part[1] for part in parts])
        addresses = np.concatenate([part[2] for part in parts])
        if native.module is not None:
            return self.fill_slots(hashes, addresses, rules, table)
        slot_hashes, slot_addresses, garbage = robinhood.replay(
            hashes, addresses, table.kind, table.key_len, table.value_len, table.key,
            self.capacity, rules)
        self.write_slots(0, slot_hashes, slot_addresses)
        return garbage

    def fill_slots(self, hashes: np.ndarray, addresses: np.ndarray, rules: str,
                   table: EntryTable | None = None) -> int:
        """The whole table by ``sparkey._native.fill_slots``, as ``robinhood.replay`` builds it
        from the entries of ``table`` (None: PUTs of distinct keys); returns the garbage size.

        Holds the packed table in memory (capacity x slot size bytes) and writes it at once.
        """
        assert native.module is not None  # called only when the compiled core runs
        slots = np.zeros(self.capacity * self.dtype.itemsize, dtype=np.uint8)
        columns = {} if table is None else dict(
            kinds=table.kind, key_buffer=table.key_buffer, key_offsets=table.key_offset,
            key_lengths=table.key_len, value_lengths=table.value_len)
        garbage: int = native.module.fill_slots(
            slots, self.params.hash_size, self.params.address_size, hashes, addresses, rules,
            **columns)
        self.write_table(0, slots.data)
        return garbage

    def build_canonical(self, partitions: _Partitions) -> int:
        """The partition loop of the module docstring; returns the garbage size.

        With the compiled core and the log in memory, ``fill_slots`` places the live entries by
        sparkey-java's rules instead, which for distinct keys in log order is the same table.
        A log of PUTs only is first replayed whole: without overwrites (no garbage) that is the
        table, and resolving the live entries (a sort of every hash) is skipped.
        """
        if native.module is not None and isinstance(partitions, _InMemoryPartitions):
            table, records = partitions.entries
            if (np.all(table.kind == EntryKind.PUT)
                    and self.fill_slots(records.hash, records.address, "java", table) == 0):
                return 0
            live = partitions.live_records(0)
            self.fill_slots(live.hash, live.address, "java")
            return partitions.put_bytes - int(live.size.sum(dtype=np.uint64))
        capacity = np.uint64(self.capacity)
        floor = 0
        carries_out: list[Optional[int]] = [None] * partitions.count
        live_bytes: dict[int, int] = {}
        wrapped: tuple[np.ndarray, np.ndarray] | None = None
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
            assert wrapped is not None  # the first pass always runs every partition
            if len(wrapped[0]) <= floor:
                break
            floor = len(wrapped[0])
        if len(wrapped[0]):
            self.write_slots(0, *wrapped)
        return partitions.put_bytes - sum(live_bytes.values())


class _Records:
    """Per-entry columns for the canonical build, in log order: hash, address, size, kind."""

    __slots__ = ("hash", "address", "size", "kind")

    def __init__(self, hash: np.ndarray, address: np.ndarray, size: np.ndarray,
                 kind: np.ndarray) -> None:
        self.hash, self.address, self.size, self.kind = hash, address, size, kind

    @classmethod
    def scanned(cls, table: EntryTable, hashes: np.ndarray, addresses: np.ndarray) -> _Records:
        """Records of a scanned EntryTable."""
        return cls(hashes, addresses, table.entry_sizes.astype(np.uint64), table.kind)

    @classmethod
    def concat(cls, parts: Sequence[_Records]) -> _Records:
        """The records of ``parts`` in order."""
        return cls(*(np.concatenate([getattr(part, name) for part in parts])
                     for name in cls.__slots__))

    @classmethod
    def from_bytes(cls, data: bytes) -> _Records:
        """Records unpacked from the spill file's 25-byte layout."""
        packed = np.frombuffer(data, dtype=_RECORD)
        return cls(*(np.ascontiguousarray(packed[name]) for name in cls.__slots__))

    def to_bytes(self) -> bytes:
        """The records in the spill file's 25-byte layout."""
        packed = np.empty(len(self.hash), dtype=_RECORD)
        for name in self.__slots__:
            packed[name] = getattr(self, name)
        return packed.tobytes()

    def take(self, indices: np.ndarray) -> _Records:
        """The records at ``indices``, in that order."""
        return _Records(*(getattr(self, name)[indices] for name in self.__slots__))

    def __len__(self) -> int:
        return len(self.hash)

    @property
    def put_bytes(self) -> int:
        """Encoded bytes of the PUT entries among the records."""
        return int(self.size[self.kind == EntryKind.PUT].sum(dtype=np.uint64))


class _InMemoryPartitions:
    """The whole log as one partition held in RAM (``method="memory"``)."""

    def __init__(self, builder: _IndexBuilder) -> None:
        parts = list(builder.tables())
        self._table = EntryTable.concat([table for table, _, _ in parts])
        self._records = _Records.concat([_Records.scanned(*part) for part in parts])
        self.put_bytes = self._records.put_bytes
        self.count = 1
        self.bounds = [0, builder.capacity]
        self._live: _Records | None = None

    @property
    def entries(self) -> tuple[EntryTable, _Records]:
        """Every entry of the log, in log order: its table and its records."""
        return self._table, self._records

    def live_records(self, part: int) -> _Records:
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

    def __init__(self, builder: _IndexBuilder, spill: IO[bytes], max_memory_bytes: int) -> None:
        header = builder.log.header
        per_partition = max(1, max_memory_bytes // SORTING_BYTES_PER_ENTRY)
        count = -(-(header.num_puts + header.num_deletes) // per_partition)
        self.count = max(1, min(count, builder.capacity))
        self.bounds = [p * builder.capacity // self.count for p in range(self.count + 1)]
        self._log = builder.log
        self._bits = builder.params.entry_block_bits
        self._fd = spill.fileno()
        self._runs: list[tuple[list[int], list[int]]] = []
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

    def live_records(self, part: int) -> _Records:
        """Live entries of partition ``part``, read back from the spill file."""
        data = b"".join(os.pread(self._fd, counts[part] * _RECORD.itemsize, starts[part])
                        for starts, counts in self._runs if counts[part])
        records = _Records.from_bytes(data)
        log, bits, addresses = self._log, self._bits, records.address

        def key_of(i: int) -> bytes:
            return log.entry_at(*decode_address(int(addresses[i]), bits)).key
        return records.take(canonical.live_entries(records.hash, records.kind, key_of))
