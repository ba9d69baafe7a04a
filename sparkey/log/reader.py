"""``LogReader``: ordered iteration, random access and bulk reads of a ``.spl`` log (IO layer).

The reader is a facade with one code path per operation over the two body formats of
``sparkey.log.body``: every operation asks the body for blocks (``block_at``) and reads entries
from them, as libsparkey does, so an uncompressed log is read as one block and a compressed log
as many.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator, Sequence
from typing import Callable, NoReturn, Optional

import numpy as np

from sparkey.codec import codec_for
from sparkey.errors import ClosedError, IndexFormatError, LogFormatError
from sparkey.format import (
    LOG_HEADER_SIZE, Compression, EntryKind, LogHeader, delete_header, put_header)
from sparkey.log.blocks import BlockCursor, SpansBlocks, skip_in_block, vlq_in_block
from sparkey.log.body import BlockBody, BlockData, RawBody, check_position, delete_at_address
from sparkey.log.entries import EntryTable, LogEntry, decode_headers

SCAN_CHUNK_ENTRIES = 1 << 20
"""Entries per EntryTable produced by LogReader.scan."""

ValueReader = Callable[[int, int, bytes], Optional[bytes]]
"""``value_for(position, entry_index, key)``: the value of the PUT at that address if its key is
``key``, else None."""


def read_log_header(path: str | os.PathLike[str]) -> LogHeader:
    """The validated header of the log at ``path`` (reads 84 bytes)."""
    with open(path, "rb") as file:
        return LogHeader.unpack(file.read(LOG_HEADER_SIZE))


class LogReader:
    """Read-only access to a ``.spl`` log: ordered iteration, random access, bulk reads.

    The file is mapped read-only up to ``data_end`` as of opening; entries appended later are
    not seen. A reader may be shared by threads (every call keeps its state in locals); each
    iterator belongs to one thread. ``close()`` unmaps the file; later calls raise ClosedError.

    ``value_for(position, entry_index, key)`` is the lookup hot path: the value of the PUT at
    that address if its key is ``key``, else None; IndexFormatError if the address is outside
    the log or names a DELETE.
    """

    value_for: ValueReader

    def __init__(self, path: str | os.PathLike[str]) -> None:
        path = os.fspath(path)
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            header = LogHeader.unpack(os.pread(fd, LOG_HEADER_SIZE, 0))
            if header.data_end > size:
                raise LogFormatError(f"log {path!r} is truncated: data_end is {header.data_end} "
                                     f"but the file has {size} bytes", "data_end")
            mm = mmap.mmap(fd, header.data_end, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        self._mm: mmap.mmap | None = mm
        self.path = path
        self.header = header
        self.data_end = header.data_end
        self._body: RawBody | BlockBody
        if header.compression_type == Compression.NONE:
            self._body = RawBody(mm, self.data_end)
        else:
            self._body = BlockBody(mm, self.data_end, codec_for(header.compression_type),
                                   header.compression_block_size)
        self.value_for = _value_reader(self._body, self.data_end, self.value_across_blocks)
        self._releases: list[Callable[[], None]] = []

    # -- lifecycle

    def close(self) -> None:
        """Unmap the log. Idempotent."""
        mm = self._mm
        if mm is None:
            return
        self._mm = None
        self.value_for = self._closed
        for release in self._releases:
            release()
        self._releases.clear()
        try:
            mm.close()
        except BufferError:
            pass  # a scan's numpy view is still alive; the mapping goes away with it

    @property
    def closed(self) -> bool:
        return self._mm is None

    def hold_exports(self, release: Callable[[], None]) -> None:
        """Have ``close()`` call ``release`` before it unmaps the file: the release of an object
        that keeps buffer exports of ``mapping`` for its life (a ``_native.Lookup``)."""
        self._check_open()
        self._releases.append(release)

    def _closed(self, *args: object) -> NoReturn:
        raise ClosedError("the log reader is closed; open the file again")

    def _check_open(self) -> None:
        if self._mm is None:
            self._closed()

    @property
    def mapping(self) -> mmap.mmap:
        """The read-only mapping of the file up to ``data_end``, owned by this reader: it is
        unmapped by ``close()``, after which reads from it raise ValueError."""
        mm = self._mm
        if mm is None:
            self._closed()
        return mm

    def __enter__(self) -> LogReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._mm is None else "open"
        return (f"<sparkey.LogReader {self.path!r} {state} "
                f"{self.header.compression_type.name} puts={self.header.num_puts} "
                f"deletes={self.header.num_deletes}>")

    # -- sequential access

    def __iter__(self) -> Iterator[LogEntry]:
        """All entries (PUT and DELETE) in log order."""
        return self.entries()

    def entries(self, end: int | None = None) -> Iterator[LogEntry]:
        """Entries in log order, stopping at file offset ``end`` (default ``data_end``)."""
        self._check_open()
        return _entries(BlockCursor(self._body, self._end(end)))

    def _end(self, end: int | None) -> int:
        if end is None:
            return self.data_end
        if not LOG_HEADER_SIZE <= end <= self.data_end:
            raise IndexFormatError(f"data_end {end} lies outside the log body "
                                   f"[{LOG_HEADER_SIZE}, {self.data_end}]", "data_end")
        return end

    def scan(self, end: int | None = None,
             chunk_entries: int = SCAN_CHUNK_ENTRIES) -> Iterator[EntryTable]:
        """Entries up to ``end`` as EntryTable chunks of at most ``chunk_entries`` rows.

        At least one table is produced (an empty one for an empty log). For NONE logs the
        tables point into the mapping instead of copying keys; keep them only while the reader
        is open.
        """
        self._check_open()
        tables = _tables(BlockCursor(self._body, self._end(end)), chunk_entries)
        first = next(tables, None)
        yield EntryTable.empty() if first is None else first
        yield from tables

    # -- random access

    def entry_at(self, position: int, entry_index: int = 0) -> LogEntry:
        """The entry at an address's ``(position, entry_index)``: the block at ``position``,
        then ``entry_index`` entries on. The entry carries its own address (LogEntry)."""
        self._check_open()
        check_position(position, self.data_end)
        cursor = BlockCursor(self._body, self.data_end, position)
        cursor.skip_entries(entry_index)
        if not cursor.at_entry_start():
            raise IndexFormatError(f"no entry {entry_index} in the block at {position}")
        return cursor.read_entry()

    def value_across_blocks(self, position: int, entry_index: int,
                             key: bytes) -> bytes | None:
        """value_for through entry_at: also reads entries that continue into other blocks."""
        entry = self.entry_at(position, entry_index)
        if entry.kind != EntryKind.PUT:
            raise delete_at_address(position)
        return entry.value if entry.key == key else None

    def values_for_many(self, positions: np.ndarray | Sequence[int],
                        entry_indexes: np.ndarray | Sequence[int],
                        keys: Sequence[bytes]) -> list[bytes | None]:
        """value_for over arrays of addresses, as a list (bulk path of ``get_many``).

        The body locates every entry (numpy over the mapping of an uncompressed log; one
        decompression per distinct block of a compressed one); keys are compared and values
        sliced here. Entries that continue into other blocks are read one by one.
        """
        self._check_open()
        positions = np.asarray(positions, dtype=np.int64)
        outside = (positions < LOG_HEADER_SIZE) | (positions >= self.data_end)
        if outside.any():
            check_position(int(positions[outside][0]), self.data_end)
        entry_indexes = np.asarray(entry_indexes, dtype=np.int64)
        values: list[bytes | None] = [None] * len(keys)
        for spans in self._body.entry_spans(positions, entry_indexes):
            data = spans.data
            for row, start, stop, value_stop in zip(spans.rows, spans.key_starts,
                                                    spans.key_ends, spans.value_ends):
                if data[start:stop] == keys[row]:
                    values[row] = data[stop:value_stop]
            for row in spans.across_blocks:
                values[row] = self.value_across_blocks(
                    int(positions[row]), int(entry_indexes[row]), keys[row])
        return values


def _entries(cursor: BlockCursor) -> Iterator[LogEntry]:
    """The entries of the stream at ``cursor``: those inside a block are read in place, two
    byte reads per header; one that continues into the next block through the cursor."""
    put = EntryKind.PUT
    own_blocks = cursor.own_blocks
    while cursor.at_entry_start():
        block, pos, stop = cursor.block, cursor.offset, cursor.stop
        position, rank = cursor.block_position, cursor.started
        while pos + 1 < stop:
            a = block[pos]
            b = block[pos + 1]
            if a < 0x80 and b < 0x80:
                start = pos + 2
            else:
                try:
                    a, start = vlq_in_block(block, pos, stop)
                    b, start = vlq_in_block(block, start, stop)
                except SpansBlocks:
                    break
            if a:
                key_end = start + a - 1
                entry_end = key_end + b
                if entry_end > stop:
                    break
                yield LogEntry(put, block[start:key_end], block[key_end:entry_end],
                               pos if own_blocks else position, 0 if own_blocks else rank)
            else:
                entry_end = start + b
                if entry_end > stop:
                    break
                yield LogEntry(EntryKind.DELETE, block[start:entry_end], None,
                               pos if own_blocks else position, 0 if own_blocks else rank)
            rank += 1
            pos = entry_end
        cursor.advance(pos, rank - cursor.started)
        if cursor.inside_block():  # the next entry continues into the following blocks
            yield cursor.read_entry()


def _tables(cursor: BlockCursor, chunk_entries: int) -> Iterator[EntryTable]:
    """The stream at ``cursor`` as EntryTables: entries within a block are located by
    ``walk_block`` and their headers decoded with numpy from the blocks joined (a single block,
    such as a raw body's mapping, is used in place); an entry spanning blocks is read by the
    cursor and its header and key re-encoded into the same buffer."""
    own_blocks = cursor.own_blocks
    while cursor.at_entry_start():
        pieces: list[bytes | mmap.mmap] = []
        headers, positions, indexes = [], [], []
        stream_size = count = 0
        while count < chunk_entries and cursor.at_entry_start():
            position, first_index, block = cursor.block_position, cursor.started, cursor.block
            offsets = np.frombuffer(cursor.walk_block(chunk_entries - count), dtype=np.int64)
            if len(offsets):
                pieces.append(block)
                headers.append(offsets + stream_size)
                if own_blocks:
                    positions.append(offsets)
                    indexes.append(np.zeros(len(offsets), dtype=np.int64))
                else:
                    positions.append(np.full(len(offsets), position, dtype=np.int64))
                    indexes.append(np.arange(first_index, first_index + len(offsets)))
                stream_size += len(block)
                count += len(offsets)
            if count < chunk_entries and cursor.inside_block():
                spanning_position, spanning_index = cursor.begin_entry()
                positions.append(np.array([spanning_position]))
                indexes.append(np.array([spanning_index]))
                kind, key_len, value_len = cursor.read_header()
                header = (put_header(key_len, value_len) if kind == EntryKind.PUT
                          else delete_header(key_len))
                pieces.append(header + cursor.read(key_len))
                cursor.skip(value_len)
                headers.append(np.array([stream_size]))
                stream_size += len(pieces[-1])
                count += 1
        stream = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        starts = np.concatenate(headers).astype(np.int64)
        first, second, key_offset = decode_headers(stream, starts)
        is_put = first != 0
        yield EntryTable(
            kind=np.where(is_put, EntryKind.PUT, EntryKind.DELETE).astype(np.uint8),
            position=np.concatenate(positions).astype(np.uint64),
            entry_index=np.concatenate(indexes).astype(np.uint64),
            key_offset=key_offset,
            key_len=np.where(is_put, first - 1, second),
            value_len=np.where(is_put, second, 0),
            key_buffer=stream)


def _value_reader(body: RawBody | BlockBody, data_end: int,
                  across_blocks: ValueReader) -> ValueReader:
    """``value_for`` of a log: the hot path of every lookup, as a closure over its body.

    The block at ``position`` is the body's resident buffer when it has one (a raw body: the
    mapping, read from ``position`` to ``data_end`` without a call), else ``body.block_at``,
    which also checks the position; the entry index is skipped inside the block and the entry
    read in place. An entry that continues past its block (or runs past the end of a raw body)
    takes ``across_blocks``, which reads across blocks or raises.
    """
    block_at = body.block_at
    resident = body.resident

    def value_for(position: int, entry_index: int, key: bytes) -> bytes | None:
        block: BlockData
        if resident is not None and LOG_HEADER_SIZE <= position < data_end:
            block, pos, stop = resident, position, data_end
        else:
            block, pos, stop, _ = block_at(position, data_end)
        try:
            if entry_index:
                pos = skip_in_block(block, pos, entry_index, stop)
            if pos < stop and (a := block[pos]) < 0x80:
                pos += 1
            else:
                a, pos = vlq_in_block(block, pos, stop)
            if not a:
                raise delete_at_address(position)
            if a - 1 != len(key):
                return None
            if pos < stop and (b := block[pos]) < 0x80:
                pos += 1
            else:
                b, pos = vlq_in_block(block, pos, stop)
            key_end = pos + a - 1
            value_end = key_end + b
            if value_end > stop:
                raise SpansBlocks
        except SpansBlocks:
            return across_blocks(position, entry_index, key)
        if block[pos:key_end] != key:
            return None
        return block[key_end:value_end]
    return value_for
