"""``LogReader``: ordered iteration, random access and bulk scans of a ``.spl`` log (IO layer)."""

import array
import mmap
import os

import numpy as np

from sparkey.codec import codec_for
from sparkey.errors import ClosedError, IndexFormatError, LogFormatError
from sparkey.format import (
    LOG_HEADER_SIZE, Compression, EntryKind, LogHeader, delete_header, put_header, vlq_decode)
from sparkey.log.blocks import BlockCursor, SpansBlocks, skip_in_block, vlq_in_block
from sparkey.log.entries import EntryTable, LogEntry, parse_header, truncated_error, vlq_many

SCAN_CHUNK_ENTRIES = 1 << 20
"""Entries per EntryTable produced by LogReader.scan."""

BULK_CHUNK_ENTRIES = 1024
"""Entries decoded together by values_for_many: small enough that the log cache lines touched by
the numpy header decode are still cached when the same entries are sliced (measured: 1024 halves
the cost of one pass over 200k random entries of a 24 MB log)."""


def read_log_header(path):
    """The validated header of the log at ``path`` (reads 84 bytes)."""
    with open(path, "rb") as file:
        return LogHeader.unpack(file.read(LOG_HEADER_SIZE))


class LogReader:
    """Read-only access to a ``.spl`` log: ordered iteration, random access, bulk scans.

    The file is mapped read-only up to ``data_end`` as of opening; entries appended later are
    not seen. A reader may be shared by threads (every call keeps its state in locals); each
    iterator belongs to one thread. ``close()`` unmaps the file; later calls raise ClosedError.

    ``value_for(position, entry_index, key)`` is the lookup hot path: the value of the PUT at
    that address if its key is ``key``, else None; IndexFormatError if the address is outside
    the log or names a DELETE.
    """

    def __init__(self, path):
        path = os.fspath(path)
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            header = LogHeader.unpack(os.pread(fd, LOG_HEADER_SIZE, 0))
            if header.data_end > size:
                raise LogFormatError(f"log {path!r} is truncated: data_end is {header.data_end} "
                                     f"but the file has {size} bytes", "data_end")
            self._mm = mmap.mmap(fd, header.data_end, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        self.path = path
        self.header = header
        self.data_end = header.data_end
        self._block_size = header.compression_block_size
        if header.compression_type == Compression.NONE:
            self._codec = None
            self.value_for = _uncompressed_value_reader(self._mm, self.data_end,
                                                        self._value_for_entry)
        else:
            self._codec = codec_for(header.compression_type)
            self.value_for = self._value_for_compressed

    # -- lifecycle

    def close(self):
        """Unmap the log. Idempotent."""
        mm = self._mm
        if mm is None:
            return
        self._mm = None
        self.value_for = self._closed
        try:
            mm.close()
        except BufferError:
            pass  # a scan's numpy view is still alive; the mapping goes away with it

    @property
    def closed(self):
        return self._mm is None

    def _closed(self, *args):
        raise ClosedError("the log reader is closed; open the file again")

    def _map(self):
        mm = self._mm
        if mm is None:
            self._closed()
        return mm

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __repr__(self):
        state = "closed" if self._mm is None else "open"
        return (f"<sparkey.LogReader {self.path!r} {state} "
                f"{self.header.compression_type.name} puts={self.header.num_puts} "
                f"deletes={self.header.num_deletes}>")

    # -- sequential access

    def __iter__(self):
        """All entries (PUT and DELETE) in log order."""
        return self.entries()

    def entries(self, end=None):
        """Entries in log order, stopping at file offset ``end`` (default ``data_end``)."""
        mm = self._map()
        end = self._end(end)
        if self._codec is None:
            return self._entries_uncompressed(mm, end)
        return self._entries_compressed(mm, end)

    def _end(self, end):
        if end is None:
            return self.data_end
        if not LOG_HEADER_SIZE <= end <= self.data_end:
            raise IndexFormatError(f"data_end {end} lies outside the log body "
                                   f"[{LOG_HEADER_SIZE}, {self.data_end}]", "data_end")
        return end

    @staticmethod
    def _entries_uncompressed(mm, end):
        pos = LOG_HEADER_SIZE
        put = EntryKind.PUT
        while pos < end:
            start = pos
            a = mm[pos]
            b = mm[pos + 1] if pos + 1 < end else 0x80
            if a < 0x80 and b < 0x80:
                kind, key_len, value_len = (put, a - 1, b) if a else (EntryKind.DELETE, b, 0)
                pos += 2
            else:
                kind, key_len, value_len, pos = parse_header(mm, pos, end)
            stop = pos + key_len + value_len
            if stop > end:
                raise truncated_error(start, end)
            key = mm[pos:pos + key_len]
            value = mm[pos + key_len:stop] if kind is put else None
            pos = stop
            yield LogEntry(kind, key, value, start, 0)

    def _entries_compressed(self, mm, end):
        cursor = BlockCursor(self, mm, end)
        while cursor.at_entry_start():
            position, first_index, block = cursor.block_position, cursor.started, cursor.block
            size = len(block)
            for entry_index, offset in enumerate(cursor.walk_block(size), first_index):
                kind, key_len, value_len, start = parse_header(block, offset, size)
                stop = start + key_len
                value = block[stop:stop + value_len] if kind == EntryKind.PUT else None
                yield LogEntry(kind, block[start:stop], value, position, entry_index)
            if cursor.inside_block():  # the next entry continues into the following blocks
                yield _read_entry(cursor)

    def scan(self, end=None, chunk_entries=SCAN_CHUNK_ENTRIES):
        """Entries up to ``end`` as EntryTable chunks of at most ``chunk_entries`` rows.

        At least one table is produced (an empty one for an empty log). For NONE logs the
        tables point into the mapping instead of copying keys; keep them only while the reader
        is open.
        """
        mm = self._map()
        end = self._end(end)
        if self._codec is None:
            tables = self._scan_uncompressed(mm, end, chunk_entries)
        else:
            tables = self._scan_compressed(mm, end, chunk_entries)
        first = next(tables, None)
        yield EntryTable.empty() if first is None else first
        yield from tables

    @staticmethod
    def _scan_uncompressed(mm, end, chunk_entries):
        """Walk entry starts in Python (the one sequential step), decode headers with numpy."""
        pos = LOG_HEADER_SIZE
        buf = np.frombuffer(mm, dtype=np.uint8)
        while pos < end:
            positions = array.array("q")
            add = positions.append
            limit = pos
            try:
                while pos < end and len(positions) < chunk_entries:
                    a = mm[pos]
                    b = mm[pos + 1]
                    add(pos)
                    if a < 0x80 and b < 0x80:
                        pos += a + b + 1 if a else b + 2
                    else:
                        kind, key_len, value_len, pos = parse_header(mm, pos, end)
                        pos += key_len + value_len
            except IndexError:
                raise truncated_error(positions[-1] if positions else limit, end) from None
            if pos > end:
                raise truncated_error(positions[-1], end)
            starts = np.frombuffer(positions, dtype=np.int64)
            first, after_first = vlq_many(buf, starts, end)
            second, key_offset = vlq_many(buf, after_first, end)
            is_put = first != 0
            yield EntryTable(
                kind=np.where(is_put, EntryKind.PUT, EntryKind.DELETE).astype(np.uint8),
                position=starts.astype(np.uint64),
                entry_index=np.zeros(len(starts), dtype=np.uint64),
                key_offset=key_offset,
                key_len=np.where(is_put, first - 1, second),
                value_len=np.where(is_put, second, 0),
                key_buffer=mm)

    def _scan_compressed(self, mm, end, chunk_entries):
        """Entries within one block are located by ``walk_block`` and decoded with numpy from
        the concatenated blocks; an entry spanning blocks is read by the cursor and its header
        and key re-encoded into the same buffer."""
        cursor = BlockCursor(self, mm, end)
        while cursor.at_entry_start():
            pieces, headers, positions, indexes = [], [], [], []
            stream_size = count = 0
            while count < chunk_entries and cursor.at_entry_start():
                position, first_index, block = cursor.block_position, cursor.started, cursor.block
                offsets = np.frombuffer(cursor.walk_block(chunk_entries - count), dtype=np.int64)
                if len(offsets):
                    pieces.append(block)
                    headers.append(offsets + stream_size)
                    positions.append(np.full(len(offsets), position, dtype=np.int64))
                    indexes.append(np.arange(first_index, first_index + len(offsets)))
                    stream_size += len(block)
                    count += len(offsets)
                if count < chunk_entries and cursor.inside_block():
                    positions.append(np.array([cursor.block_position]))
                    indexes.append(np.array([cursor.started]))
                    cursor.started += 1
                    kind, key_len, value_len = cursor.read_header()
                    header = (put_header(key_len, value_len) if kind == EntryKind.PUT
                              else delete_header(key_len))
                    pieces.append(header + cursor.read(key_len))
                    cursor.skip(value_len)
                    headers.append(np.array([stream_size]))
                    stream_size += len(pieces[-1])
                    count += 1
            stream = b"".join(pieces)
            starts = np.concatenate(headers).astype(np.int64)
            buf = np.frombuffer(stream, dtype=np.uint8)
            first, after_first = vlq_many(buf, starts, len(stream))
            second, key_offset = vlq_many(buf, after_first, len(stream))
            del buf
            is_put = first != 0
            yield EntryTable(
                kind=np.where(is_put, EntryKind.PUT, EntryKind.DELETE).astype(np.uint8),
                position=np.concatenate(positions).astype(np.uint64),
                entry_index=np.concatenate(indexes).astype(np.uint64),
                key_offset=key_offset,
                key_len=np.where(is_put, first - 1, second),
                value_len=np.where(is_put, second, 0),
                key_buffer=stream)

    # -- random access

    def entry_at(self, position, entry_index=0):
        """The entry at an address's ``(position, entry_index)``."""
        mm = self._map()
        self._check_position(position)
        if self._codec is None:
            end = self.data_end
            pos = position
            for _ in range(entry_index + 1):
                start = pos
                kind, key_len, value_len, pos = parse_header(mm, pos, end)
                if pos + key_len + value_len > end:
                    raise truncated_error(start, end)
                key, value = mm[pos:pos + key_len], mm[pos + key_len:pos + key_len + value_len]
                pos += key_len + value_len
            return LogEntry(kind, key, value if kind == EntryKind.PUT else None, start, 0)
        cursor = BlockCursor(self, mm, self.data_end, position)
        cursor.skip_entries(entry_index)
        if not cursor.at_entry_start():
            raise IndexFormatError(f"no entry {entry_index} in the block at {position}")
        entry = _read_entry(cursor)
        return entry._replace(position=position, entry_index=entry_index)

    def _check_position(self, position):
        if not LOG_HEADER_SIZE <= position < self.data_end:
            raise IndexFormatError(f"address points at offset {position}, outside the log body "
                                   f"[{LOG_HEADER_SIZE}, {self.data_end})")

    def _value_for_compressed(self, position, entry_index, key):
        """value_for of compressed logs: decompress the block, skip, compare."""
        mm = self._mm
        self._check_position(position)
        block, _ = self.block_at(mm, position)
        size = len(block)
        try:
            pos = 0
            pos = skip_in_block(block, pos, entry_index)
            a, pos = vlq_in_block(block, pos, size)
            b, pos = vlq_in_block(block, pos, size)
        except SpansBlocks:
            return self._value_for_entry(position, entry_index, key)
        if not a:
            raise IndexFormatError(f"index slot points at a DELETE entry in the block at "
                                   f"{position}")
        if a - 1 != len(key):
            return None
        key_end = pos + a - 1
        stop = key_end + b
        if stop > size:
            return self._value_for_entry(position, entry_index, key)
        if block[pos:key_end] != key:
            return None
        return block[key_end:stop]

    def _value_for_entry(self, position, entry_index, key):
        """value_for through entry_at: any entry index, entries spanning blocks, checks."""
        entry = self.entry_at(position, entry_index)
        if entry.kind != EntryKind.PUT:
            raise IndexFormatError(f"index slot points at a DELETE entry in the block at "
                                   f"{position}")
        return entry.value if entry.key == key else None

    def values_for_many(self, positions, entry_indexes, keys):
        """values_for over arrays of addresses, as a list (bulk path of ``get_many``).

        NONE logs decode entry headers with numpy, BULK_CHUNK_ENTRIES at a time, and slice keys
        and values from the mapping; compressed logs decompress each distinct block once.
        """
        mm = self._map()
        positions = np.asarray(positions, dtype=np.int64)
        if len(positions) and (positions.min() < LOG_HEADER_SIZE
                               or positions.max() >= self.data_end):
            bad = positions[(positions < LOG_HEADER_SIZE) | (positions >= self.data_end)][0]
            self._check_position(int(bad))
        if self._codec is not None:
            return self._values_for_many_compressed(mm, positions, entry_indexes, keys)
        entry_indexes = np.asarray(entry_indexes, dtype=np.int64)
        if entry_indexes.any():  # entry bits over an uncompressed log: not worth a fast path
            return [self._value_for_entry(position, index, key) for position, index, key in
                    zip(positions.tolist(), entry_indexes.tolist(), keys)]
        values = []
        buf = np.frombuffer(mm, dtype=np.uint8)
        try:
            for lo in range(0, len(positions), BULK_CHUNK_ENTRIES):
                values += self._values_at(mm, buf, positions[lo:lo + BULK_CHUNK_ENTRIES],
                                          keys[lo:lo + BULK_CHUNK_ENTRIES])
        finally:
            del buf
        return values

    def _values_at(self, mm, buf, positions, keys):
        """values_for_many of one chunk of an uncompressed log (buf: the mapping as uint8)."""
        end = self.data_end
        first, after_first = vlq_many(buf, positions, end)
        if len(first) and not first.all():
            bad = int(positions[first == 0][0])
            raise IndexFormatError(f"index slot points at the DELETE entry at {bad}")
        second, key_start = vlq_many(buf, after_first, end)
        key_end = key_start + first - 1
        value_end = key_end + second
        if len(value_end) and value_end.max() > end:
            raise truncated_error(int(positions[value_end > end][0]), end)
        return [mm[stop:value_stop] if mm[start:stop] == key else None
                for start, stop, value_stop, key in zip(
                    key_start.tolist(), key_end.tolist(), value_end.tolist(), keys)]

    def _values_for_many_compressed(self, mm, positions, entry_indexes, keys):
        values = [None] * len(keys)
        entry_indexes = np.asarray(entry_indexes, dtype=np.int64)
        order = np.lexsort((entry_indexes, positions))
        positions_sorted = positions[order].tolist()
        indexes_sorted = entry_indexes[order].tolist()
        order = order.tolist()
        i = 0
        while i < len(order):
            position = positions_sorted[i]
            block, _ = self.block_at(mm, position)
            size = len(block)
            pos = 0
            current = 0
            while i < len(order) and positions_sorted[i] == position:
                wanted, target = indexes_sorted[i], order[i]
                i += 1
                try:
                    pos = skip_in_block(block, pos, wanted - current)
                    current = wanted
                    a, start = vlq_in_block(block, pos, size)
                    b, start = vlq_in_block(block, start, size)
                except SpansBlocks:
                    values[target] = self._value_for_entry(position, wanted, keys[target])
                    continue
                if not a:
                    raise IndexFormatError(f"index slot points at a DELETE entry in the block "
                                           f"at {position}")
                key_end = start + a - 1
                if key_end + b > size:
                    values[target] = self._value_for_entry(position, wanted, keys[target])
                elif block[start:key_end] == keys[target]:
                    values[target] = block[key_end:key_end + b]
        return values

    def block_at(self, mm, position):
        """Decompressed block at ``position`` and the offset of the block after it."""
        end = self.data_end
        length, start = vlq_decode(mm, position, end)
        stop = start + length
        if stop > end:
            raise LogFormatError(f"block at offset {position} of {length} bytes runs past "
                                 f"data_end {end}; the log is truncated or corrupt")
        return self._codec.decompress(mm[start:stop], self._block_size), stop


def _read_entry(cursor):
    """The entry at a BlockCursor, read byte by byte across blocks."""
    position, entry_index = cursor.block_position, cursor.started
    cursor.started += 1
    kind, key_len, value_len = cursor.read_header()
    key = cursor.read(key_len)
    value = cursor.read(value_len) if kind == EntryKind.PUT else None
    return LogEntry(kind, key, value, position, entry_index)


def _uncompressed_value_reader(mm, end, fallback):
    """value_for of an uncompressed log: the hot path of every lookup, as a closure.

    Returns the value of the PUT at ``position`` if its key is ``key``, else None. Entry
    indexes other than 0 (an index written with entry bits over an uncompressed log) and
    positions outside the body take ``fallback``, which checks and raises.
    """
    def value_for(position, entry_index, key):
        if entry_index or not LOG_HEADER_SIZE <= position < end:
            return fallback(position, entry_index, key)
        a = mm[position]
        if a < 0x80:
            pos = position + 1
        else:
            a, pos = vlq_decode(mm, position, end)
        if not a:
            raise IndexFormatError(f"index slot points at the DELETE entry at {position}")
        if a - 1 != len(key):
            return None
        if pos >= end:
            raise truncated_error(position, end)
        b = mm[pos]
        if b < 0x80:
            pos += 1
        else:
            b, pos = vlq_decode(mm, pos, end)
        key_end = pos + a - 1
        stop = key_end + b
        if stop > end:
            raise truncated_error(position, end)
        if mm[pos:key_end] != key:
            return None
        return mm[key_end:stop]
    return value_for
