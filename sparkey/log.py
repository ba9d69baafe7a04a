"""Sparkey log files (IO layer): ``LogWriter`` appends entries, ``LogReader`` reads them back.

Only this module and ``sparkey.index`` open Sparkey files. The byte layout is specified in
``sparkey.format``; the codecs live in ``sparkey.codec``.

Block splitting (compressed logs) follows the C library exactly, so that a log written here has
the block boundaries, entry indexes and header counters of a log written by libsparkey from the
same operations. With ``B`` the block size, ``used`` the bytes already in the current block and
``total`` the encoded entry size (header VLQs + key + value):

1. flush the current block first if the entry header does not fit in ``B - used``, or if the
   entry fits in a whole block (``total <= B``) but not in what is left of this one;
2. count the entry in the current block (its *entry index* is its rank among the entries that
   start there);
3. append header, key and value, flushing every time the block is full and bytes remain;
4. if step 3 flushed at least once, flush the tail block too, so the next entry starts a block.

Worked example, ``B = 16``: a 14-byte entry goes into an empty block (used 14); the next 14-byte
entry fits in a whole block but not in the 2 bytes left, so the first block is flushed and the
entry starts the second block. A 40-byte entry after the first one instead starts in the current
block (its 2-byte header fits in the 2 bytes left), fills it and the next two blocks, and its last
6 bytes go to a fourth block that is flushed at once (step 4).

sparkey-java splits differently (it moves an entry only if it is smaller than the data already in
the block); both layouts are readable by every reader.
"""

import array
import dataclasses
import mmap
import os
import secrets
import typing

import numpy as np

from sparkey.codec import codec_for
from sparkey.errors import ClosedError, IndexFormatError, LogFormatError
from sparkey.format import (
    LOG_HEADER_SIZE, MAX_ENTRY_PART_LEN, MIN_BLOCK_SIZE, Compression, EntryKind, LogHeader,
    delete_header, entry_bytes, put_header, vlq_decode, vlq_encode)

WRITE_CHUNK_BYTES = 1 << 20
"""Pending output is written to the file once it reaches this size (and on flush/close)."""

SCAN_CHUNK_ENTRIES = 1 << 20
"""Entries per EntryTable produced by LogReader.scan."""

_MAX_BLOCK_SIZE = 2**32 - 1


class LogEntry(typing.NamedTuple):
    """One raw log entry. ``value`` is None for a DELETE.

    ``position`` and ``entry_index`` locate the entry: for NONE logs the entry's file offset and
    0; for compressed logs the offset of the block its header starts in, and its rank among the
    entries starting in that block. ``format.encode_address`` turns them into a slot address.
    """

    kind: EntryKind
    key: bytes
    value: typing.Optional[bytes]
    position: int
    entry_index: int


@dataclasses.dataclass(frozen=True)
class EntryTable:
    """A run of consecutive log entries as columns, for bulk index building.

    Entry ``i`` has kind ``kind[i]`` (EntryKind codes), address parts ``position[i]`` and
    ``entry_index[i]``, and key bytes ``key_buffer[key_offset[i]:key_offset[i] + key_len[i]]``.
    ``key_buffer`` may be the log's own mapping: use the table only while its LogReader is open.
    """

    kind: np.ndarray
    position: np.ndarray
    entry_index: np.ndarray
    key_offset: np.ndarray
    key_len: np.ndarray
    value_len: np.ndarray
    key_buffer: typing.Any

    def __len__(self):
        return len(self.kind)

    def key(self, i):
        """The key of entry ``i`` as bytes."""
        start = int(self.key_offset[i])
        return bytes(self.key_buffer[start:start + int(self.key_len[i])])

    @property
    def entry_sizes(self):
        """Encoded size of every entry (PUT: both VLQs, key, value; DELETE: 0, VLQ, key)."""
        put = self.kind == EntryKind.PUT
        first = np.where(put, self.key_len + 1, 0)
        second = np.where(put, self.value_len, self.key_len)
        return _vlq_sizes(first) + _vlq_sizes(second) + self.key_len + self.value_len

    @classmethod
    def empty(cls):
        """A table of no entries."""
        integers = np.zeros(0, dtype=np.int64)
        return cls(kind=np.zeros(0, dtype=np.uint8), position=np.zeros(0, dtype=np.uint64),
                   entry_index=np.zeros(0, dtype=np.uint64), key_offset=integers,
                   key_len=integers, value_len=integers, key_buffer=b"")

    @classmethod
    def concat(cls, tables):
        """One table holding the entries of ``tables`` in order."""
        if len(tables) == 1:
            return tables[0]
        shared_buffer = all(t.key_buffer is tables[0].key_buffer for t in tables)
        if shared_buffer:
            key_buffer, key_offset = tables[0].key_buffer, [t.key_offset for t in tables]
        else:
            starts = np.cumsum([0] + [len(t.key_buffer) for t in tables[:-1]])
            key_buffer = b"".join(bytes(t.key_buffer) for t in tables)
            key_offset = [t.key_offset + start for t, start in zip(tables, starts)]
        columns = {name: np.concatenate([getattr(t, name) for t in tables])
                   for name in ("kind", "position", "entry_index", "key_len", "value_len")}
        return cls(key_offset=np.concatenate(key_offset), key_buffer=key_buffer, **columns)


def random_u32():
    """A random 32-bit value, as C draws file identifiers and seeds from /dev/urandom."""
    return secrets.randbits(32)


def read_log_header(path):
    """The validated header of the log at ``path`` (reads 84 bytes)."""
    with open(path, "rb") as file:
        return LogHeader.unpack(file.read(LOG_HEADER_SIZE))


# ------------------------------------------------------------------------------------ writer

class LogWriter:
    """Appends PUT and DELETE entries to a ``.spl`` log.

    One writer per log, used from one thread. The header on disk is rewritten on ``flush()`` and
    ``close()`` only, after the data it describes, so a crash or a failed write leaves the log as
    of the last flush. Keys and values are ``bytes``-like or ``str`` (stored as UTF-8).
    """

    def __init__(self, path, compression="none", block_size=4096, *, file_identifier=None,
                 fsync=False):
        """Create a new log at ``path``, deleting any existing file first (as libsparkey does).

        ``block_size`` is the largest uncompressed block of a compressed log (at least 10 bytes);
        it is ignored, and recorded as 0, for ``compression="none"``. ``file_identifier`` is
        random unless given. ``fsync=True`` syncs data and header to disk on every flush.
        """
        compression = Compression.parse(compression)
        if compression == Compression.NONE:
            block_size = 0
        elif (not isinstance(block_size, int) or isinstance(block_size, bool)
              or not MIN_BLOCK_SIZE <= block_size <= _MAX_BLOCK_SIZE):
            raise ValueError(f"block_size must be an int from {MIN_BLOCK_SIZE} to "
                             f"{_MAX_BLOCK_SIZE}, not {block_size!r}")
        if file_identifier is None:
            file_identifier = random_u32()
        elif not isinstance(file_identifier, int) or not 0 <= file_identifier < 2**32:
            raise ValueError(f"file_identifier must be an int in [0, 2**32), "
                             f"not {file_identifier!r}")
        header = LogHeader(file_identifier=file_identifier, compression_type=compression,
                           compression_block_size=block_size)
        path = os.fspath(path)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.pwrite(fd, header.pack(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._start(path, fd, header, fsync)

    @classmethod
    def append(cls, path, *, fsync=False):
        """Open an existing log to add entries after its ``data_end``.

        Bytes past ``data_end`` (left by a writer that did not flush) are truncated away first;
        counters and the file identifier continue from the stored header.
        """
        path = os.fspath(path)
        fd = os.open(path, os.O_RDWR)
        try:
            header = LogHeader.unpack(os.pread(fd, LOG_HEADER_SIZE, 0))
            size = os.fstat(fd).st_size
            if header.data_end > size:
                raise LogFormatError(f"log {path!r} is truncated: data_end is {header.data_end} "
                                     f"but the file has {size} bytes", "data_end")
            os.ftruncate(fd, header.data_end)
        except BaseException:
            os.close(fd)
            raise
        writer = cls.__new__(cls)
        writer._start(path, fd, header, fsync)
        return writer

    def _start(self, path, fd, header, fsync):
        self.path = path
        self._fd = fd
        self._fsync = fsync
        self._file_identifier = header.file_identifier
        self._compression = header.compression_type
        self._block_size = header.compression_block_size
        self._file_end = header.data_end
        self._pending = bytearray()
        self._num_puts = header.num_puts
        self._num_deletes = header.num_deletes
        self._max_key_len = header.max_key_len
        self._max_value_len = header.max_value_len
        self._put_size = header.put_size
        self._delete_size = header.delete_size
        self._max_entries_per_block = header.max_entries_per_block
        self._block = bytearray()
        self._block_entries = 0
        if self._compression == Compression.NONE:
            self._codec = None
        else:
            self._codec = codec_for(self._compression)

    # -- public API

    def put(self, key, value):
        """Append a PUT of ``key`` -> ``value``."""
        if key.__class__ is not bytes:
            key = entry_bytes(key, "key")
        if value.__class__ is not bytes:
            value = entry_bytes(value, "value")
        if self._fd < 0:
            raise ClosedError("put() on a closed LogWriter; open it again with LogWriter.append")
        key_len = len(key)
        value_len = len(value)
        if key_len < 0x7F and value_len < 0x80:
            size = key_len + value_len + 2
            if self._codec is None:
                pending = self._pending
                pending.append(key_len + 1)
                pending.append(value_len)
                pending += key
                pending += value
                if len(pending) >= WRITE_CHUNK_BYTES:
                    self._drain()
            else:
                self._append_to_blocks(bytes((key_len + 1, value_len)), key, value, size)
        else:
            if (key_len | value_len) > MAX_ENTRY_PART_LEN:
                entry_bytes(key if key_len > MAX_ENTRY_PART_LEN else value,
                            "key" if key_len > MAX_ENTRY_PART_LEN else "value")
            header = put_header(key_len, value_len)
            size = len(header) + key_len + value_len
            self._append_entry(header, key, value, size)
        self._num_puts += 1
        self._put_size += size
        if key_len > self._max_key_len:
            self._max_key_len = key_len
        if value_len > self._max_value_len:
            self._max_value_len = value_len

    def delete(self, key):
        """Append a DELETE of ``key``.

        A key longer than every key put so far (``max_key_len``) cannot be in the log, and is
        skipped without writing anything: sparkey-java cannot read logs holding such deletes.
        """
        if key.__class__ is not bytes:
            key = entry_bytes(key, "key")
        if self._fd < 0:
            raise ClosedError("delete() on a closed LogWriter; open it again with LogWriter.append")
        if len(key) > self._max_key_len:
            return
        header = delete_header(len(key))
        size = len(header) + len(key)
        self._append_entry(header, key, b"", size)
        self._num_deletes += 1
        self._delete_size += size

    def flush(self):
        """Close the current block, write pending data, then rewrite the header."""
        if self._fd < 0:
            raise ClosedError("flush() on a closed LogWriter")
        self._emit_block()
        self._drain()
        os.pwrite(self._fd, self.header.pack(), 0)
        if self._fsync:
            os.fsync(self._fd)

    def close(self):
        """Flush and close the file. Closing twice is allowed."""
        if self._fd < 0:
            return
        try:
            self.flush()
        finally:
            fd, self._fd = self._fd, -1
            os.close(fd)

    @property
    def closed(self):
        return self._fd < 0

    @property
    def header(self):
        """The header describing everything written so far, excluding an unflushed block."""
        return LogHeader(
            file_identifier=self._file_identifier, compression_type=self._compression,
            compression_block_size=self._block_size, num_puts=self._num_puts,
            num_deletes=self._num_deletes, data_end=self._file_end + len(self._pending),
            max_key_len=self._max_key_len, max_value_len=self._max_value_len,
            delete_size=self._delete_size, put_size=self._put_size,
            max_entries_per_block=self._max_entries_per_block)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __repr__(self):
        state = "closed" if self._fd < 0 else "open"
        return (f"<sparkey.LogWriter {self.path!r} {state} {self._compression.name} "
                f"puts={self._num_puts} deletes={self._num_deletes}>")

    # -- internals

    def _append_entry(self, header, key, value, size):
        if self._codec is None:
            pending = self._pending
            pending += header
            pending += key
            pending += value
            if len(pending) >= WRITE_CHUNK_BYTES:
                self._drain()
        else:
            self._append_to_blocks(header, key, value, size)

    def _append_to_blocks(self, header, key, value, total):
        """Add one entry to the current block following the C rules (module docstring)."""
        block = self._block
        block_size = self._block_size
        room = block_size - len(block)
        if room < len(header) or room < total <= block_size:
            self._emit_block()
            room = block_size
        self._block_entries += 1
        if total <= room:
            block += header
            block += key
            block += value
            return
        data = memoryview(b"".join((header, key, value)))
        done = 0
        flushed = False
        while done < total:
            room = block_size - len(block)
            if room == 0:
                self._emit_block()
                flushed = True
                room = block_size
            take = min(room, total - done)
            block += data[done:done + take]
            done += take
        if flushed and block:
            self._emit_block()

    def _emit_block(self):
        """Compress the current block (if any) into pending output as ``VLQ(len) payload``."""
        block = self._block
        if not block:
            return
        payload = self._codec.compress(block)
        pending = self._pending
        pending += vlq_encode(len(payload))
        pending += payload
        if self._block_entries > self._max_entries_per_block:
            self._max_entries_per_block = self._block_entries
        self._block_entries = 0
        block.clear()
        if len(pending) >= WRITE_CHUNK_BYTES:
            self._drain()

    def _drain(self):
        """Write pending output at the end of the file (past the header's data_end until flush)."""
        pending = self._pending
        if pending:
            view = memoryview(pending)
            written = 0
            while written < len(view):
                written += os.pwrite(self._fd, view[written:], self._file_end + written)
            view.release()
            self._file_end += len(pending)
            pending.clear()


# ------------------------------------------------------------------------------------ reader

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
        while pos < end:
            start = pos
            kind, key_len, value_len, pos = _parse_header(mm, pos, end)
            stop = pos + key_len + value_len
            if stop > end:
                raise _truncated(start, end)
            key = mm[pos:pos + key_len]
            value = mm[pos + key_len:stop] if kind == EntryKind.PUT else None
            pos = stop
            yield LogEntry(kind, key, value, start, 0)

    def _entries_compressed(self, mm, end):
        cursor = _BlockCursor(self, mm, end)
        while cursor.at_entry_start():
            position, entry_index = cursor.block_position, cursor.started
            cursor.started += 1
            kind, key_len, value_len = cursor.read_header()
            key = cursor.read(key_len)
            value = cursor.read(value_len) if kind == EntryKind.PUT else None
            yield LogEntry(kind, key, value, position, entry_index)

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
                        kind, key_len, value_len, pos = _parse_header(mm, pos, end)
                        pos += key_len + value_len
            except IndexError:
                raise _truncated(positions[-1] if positions else limit, end) from None
            if pos > end:
                raise _truncated(positions[-1], end)
            starts = np.frombuffer(positions, dtype=np.int64)
            first, after_first = _vlq_many(buf, starts, end)
            second, key_offset = _vlq_many(buf, after_first, end)
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
        cursor = _BlockCursor(self, mm, end)
        while cursor.at_entry_start():
            kinds, keys = bytearray(), bytearray()
            positions, indexes, key_offsets, key_lens, value_lens = (
                array.array("q") for _ in range(5))
            while len(kinds) < chunk_entries and cursor.at_entry_start():
                positions.append(cursor.block_position)
                indexes.append(cursor.started)
                cursor.started += 1
                kind, key_len, value_len = cursor.read_header()
                key_offsets.append(len(keys))
                keys += cursor.read(key_len)
                key_lens.append(key_len)
                if kind == EntryKind.PUT:
                    cursor.skip(value_len)
                kinds.append(kind)
                value_lens.append(value_len if kind == EntryKind.PUT else 0)
            yield EntryTable(
                kind=np.frombuffer(kinds, dtype=np.uint8),
                position=np.frombuffer(positions, dtype=np.int64).astype(np.uint64),
                entry_index=np.frombuffer(indexes, dtype=np.int64).astype(np.uint64),
                key_offset=np.frombuffer(key_offsets, dtype=np.int64),
                key_len=np.frombuffer(key_lens, dtype=np.int64),
                value_len=np.frombuffer(value_lens, dtype=np.int64),
                key_buffer=bytes(keys))

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
                kind, key_len, value_len, pos = _parse_header(mm, pos, end)
                if pos + key_len + value_len > end:
                    raise _truncated(start, end)
                key, value = mm[pos:pos + key_len], mm[pos + key_len:pos + key_len + value_len]
                pos += key_len + value_len
            return LogEntry(kind, key, value if kind == EntryKind.PUT else None, start, 0)
        cursor = _BlockCursor(self, mm, self.data_end, position)
        cursor.skip_entries(entry_index)
        if not cursor.at_entry_start():
            raise IndexFormatError(f"no entry {entry_index} in the block at {position}")
        kind, key_len, value_len = cursor.read_header()
        key = cursor.read(key_len)
        value = cursor.read(value_len) if kind == EntryKind.PUT else None
        return LogEntry(kind, key, value, position, entry_index)

    def _check_position(self, position):
        if not LOG_HEADER_SIZE <= position < self.data_end:
            raise IndexFormatError(f"address points at offset {position}, outside the log body "
                                   f"[{LOG_HEADER_SIZE}, {self.data_end})")

    def _value_for_compressed(self, position, entry_index, key):
        """value_for of compressed logs: decompress the block, skip, compare."""
        mm = self._mm
        self._check_position(position)
        block, _ = self._block_at(mm, position)
        size = len(block)
        try:
            pos = 0
            for _ in range(entry_index):
                a, pos = _vlq_at(block, pos, size)
                b, pos = _vlq_at(block, pos, size)
                pos += a - 1 + b if a else b
            a, pos = _vlq_at(block, pos, size)
            b, pos = _vlq_at(block, pos, size)
        except _SpansBlocks:
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

        NONE logs decode all entry headers with numpy and slice keys and values from the
        mapping; compressed logs decompress each distinct block once.
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
        end = self.data_end
        buf = np.frombuffer(mm, dtype=np.uint8)
        try:
            first, after_first = _vlq_many(buf, positions, end)
            if len(first) and not first.all():
                bad = int(positions[first == 0][0])
                raise IndexFormatError(f"index slot points at the DELETE entry at {bad}")
            second, key_start = _vlq_many(buf, after_first, end)
        finally:
            del buf
        key_end = key_start + first - 1
        value_end = key_end + second
        if len(value_end) and value_end.max() > end:
            raise _truncated(int(positions[value_end > end][0]), end)
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
            block, _ = self._block_at(mm, position)
            size = len(block)
            pos = 0
            current = 0
            while i < len(order) and positions_sorted[i] == position:
                wanted, target = indexes_sorted[i], order[i]
                i += 1
                try:
                    while current < wanted:
                        a, pos = _vlq_at(block, pos, size)
                        b, pos = _vlq_at(block, pos, size)
                        pos += a - 1 + b if a else b
                        current += 1
                    a, start = _vlq_at(block, pos, size)
                    b, start = _vlq_at(block, start, size)
                except _SpansBlocks:
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

    def _block_at(self, mm, position):
        """Decompressed block at ``position`` and the offset of the block after it."""
        end = self.data_end
        length, start = vlq_decode(mm, position, end)
        stop = start + length
        if stop > end:
            raise LogFormatError(f"block at offset {position} of {length} bytes runs past "
                                 f"data_end {end}; the log is truncated or corrupt")
        return self._codec.decompress(mm[start:stop], self._block_size), stop


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
            raise _truncated(position, end)
        b = mm[pos]
        if b < 0x80:
            pos += 1
        else:
            b, pos = vlq_decode(mm, pos, end)
        key_end = pos + a - 1
        stop = key_end + b
        if stop > end:
            raise _truncated(position, end)
        if mm[pos:key_end] != key:
            return None
        return mm[key_end:stop]
    return value_for


def _vlq_sizes(values):
    """Vectorized format.vlq_size over a non-negative int64 array."""
    sizes = np.ones(len(values), dtype=np.int64)
    for groups in range(1, 9):
        sizes += values >= (1 << (7 * groups))
    return sizes


def _vlq_many(buf, positions, end):
    """Vectorized vlq_decode at every offset of ``positions`` in the uint8 array ``buf``."""
    values = np.zeros(len(positions), dtype=np.int64)
    positions = positions.copy()
    active = np.arange(len(positions))
    for group in range(9):
        where = positions[active]
        if len(where) and where.max() >= end:
            bad = int(where[where >= end][0])
            raise LogFormatError(f"entry header at offset {bad} runs past data_end {end}; "
                                 "the log is truncated or corrupt")
        byte = buf[where].astype(np.int64)
        values[active] |= (byte & 0x7F) << (7 * group)
        positions[active] += 1
        active = active[byte >= 0x80]
        if not len(active):
            return values, positions
    raise LogFormatError(f"entry header at offset {int(positions[active[0]])} is too long for "
                         "a length; the log is corrupt")


class _SpansBlocks(Exception):
    """An entry read from one decompressed block continues in the next block."""


def _vlq_at(block, pos, size):
    """VLQ at ``block[pos]``; raises _SpansBlocks if the block ends first."""
    if pos < size:
        byte = block[pos]
        if byte < 0x80:
            return byte, pos + 1
    if pos >= size:
        raise _SpansBlocks
    try:
        return vlq_decode(block, pos, size)
    except LogFormatError:
        if size - pos < 10:
            raise _SpansBlocks from None
        raise


def _parse_header(buf, pos, end):
    """``(kind, key_len, value_len, payload_pos)`` of the entry at ``buf[pos]``."""
    a, pos = vlq_decode(buf, pos, end)
    b, pos = vlq_decode(buf, pos, end)
    if a:
        return EntryKind.PUT, a - 1, b, pos
    return EntryKind.DELETE, b, 0, pos


def _truncated(position, end):
    return LogFormatError(f"entry at offset {position} runs past data_end {end}; "
                          "the log is truncated or corrupt")


class _BlockCursor:
    """Reads the logical entry stream of a compressed log across block boundaries.

    ``block_position`` is the offset of the loaded block and ``started`` the number of entries
    that started in it, which is the entry index of the next entry that starts there.
    """

    __slots__ = ("_log", "_mm", "_end", "_block", "_offset", "_next_block", "block_position",
                 "started")

    def __init__(self, log, mm, end, position=LOG_HEADER_SIZE):
        self._log = log
        self._mm = mm
        self._end = end
        self._block = b""
        self._offset = 0
        self._next_block = position
        self.block_position = position
        self.started = 0

    def _load_next(self):
        if self._next_block >= self._end:
            return False
        self.block_position = self._next_block
        self._block, self._next_block = self._log._block_at(self._mm, self._next_block)
        self._offset = 0
        self.started = 0
        return True

    def at_entry_start(self):
        """Move past exhausted blocks; False at the end of the stream."""
        while self._offset >= len(self._block):
            if not self._load_next():
                return False
        return True

    def _byte(self):
        while self._offset >= len(self._block):
            if not self._load_next():
                raise _truncated(self.block_position, self._end)
        byte = self._block[self._offset]
        self._offset += 1
        return byte

    def _vlq(self):
        value = shift = 0
        for _ in range(10):
            byte = self._byte()
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
        raise LogFormatError(f"entry header in the block at {self.block_position} is longer "
                             "than 10 bytes; the log is corrupt")

    def read_header(self):
        """``(kind, key_len, value_len)`` of the entry starting here."""
        a = self._vlq()
        b = self._vlq()
        if a:
            return EntryKind.PUT, a - 1, b
        return EntryKind.DELETE, b, 0

    def read(self, length):
        """The next ``length`` bytes of the stream."""
        stop = self._offset + length
        if stop <= len(self._block):
            data = self._block[self._offset:stop]
            self._offset = stop
            return bytes(data)
        parts = []
        while length:
            if self._offset >= len(self._block) and not self._load_next():
                raise _truncated(self.block_position, self._end)
            take = min(length, len(self._block) - self._offset)
            parts.append(self._block[self._offset:self._offset + take])
            self._offset += take
            length -= take
        return b"".join(parts)

    def skip(self, length):
        """Advance ``length`` bytes without copying them."""
        while True:
            available = len(self._block) - self._offset
            if length <= available:
                self._offset += length
                return
            length -= available
            self._offset = len(self._block)
            if not self._load_next():
                raise _truncated(self.block_position, self._end)

    def skip_entries(self, count):
        """Skip ``count`` whole entries."""
        for _ in range(count):
            if not self.at_entry_start():
                return
            self.started += 1
            kind, key_len, value_len = self.read_header()
            self.skip(key_len + value_len)
