"""The logical entry stream of a log, read block by block (IO layer): ``BlockCursor``.

A log body is a sequence of blocks (``sparkey.log.body``: the whole mapping for an uncompressed
log, decompressed payloads for a compressed one). An entry belongs to the block its header
starts in; its key and value may continue into the following blocks. ``BlockCursor`` follows
the stream (``walk_block`` quickly, entry by entry otherwise); ``vlq_in_block`` and
``skip_in_block`` read one block and signal with ``SpansBlocks`` when an entry continues past it.
"""

from __future__ import annotations

import array
from typing import TYPE_CHECKING

from sparkey import native
from sparkey.errors import LogFormatError
from sparkey.format import LOG_HEADER_SIZE, EntryKind, vlq_decode
from sparkey.log.entries import LogEntry, truncated_error

if TYPE_CHECKING:
    from sparkey.log.body import BlockBody, BlockData, RawBody


class SpansBlocks(Exception):
    """An entry read from one block continues in the next block."""


def vlq_in_block(block: BlockData, pos: int, stop: int) -> tuple[int, int]:
    """VLQ at ``block[pos]``, ``(value, next_pos)``; SpansBlocks if ``stop`` comes first."""
    if pos < stop:
        byte = block[pos]
        if byte < 0x80:
            return byte, pos + 1
    if pos >= stop:
        raise SpansBlocks
    try:
        return vlq_decode(block, pos, stop)
    except LogFormatError:
        if stop - pos < 10:
            raise SpansBlocks from None
        raise


def skip_in_block(block: BlockData, pos: int, count: int, stop: int) -> int:
    """Offset in ``block`` after the ``count`` entries starting at ``pos``.

    Raises SpansBlocks if they do not all end before ``stop``. The lookup path of compressed
    logs: two byte reads per skipped entry with one-byte headers.
    """
    for _ in range(count):
        if pos + 1 < stop:
            a = block[pos]
            b = block[pos + 1]
            if a < 0x80 and b < 0x80:
                pos += 1 + a + b if a else 2 + b
                continue
        a, pos = vlq_in_block(block, pos, stop)
        b, pos = vlq_in_block(block, pos, stop)
        pos += a - 1 + b if a else b
    if pos > stop:
        raise SpansBlocks
    return pos


def reference_walk_block(block: BlockData, pos: int, stop: int,
                         limit: int) -> tuple[bytes, int]:
    """``(offsets, next_pos)``: the offsets of the next entries (at most ``limit``) from ``pos``
    that lie wholly before ``stop`` (native int64 words), and the offset after them.

    The fast path of scans: two byte reads per entry with one-byte headers. A corrupt header
    raises LogFormatError; an entry that continues past ``stop`` ends the walk.
    """
    offsets = array.array("q")
    add = offsets.append
    for _ in range(limit):
        if pos + 1 >= stop:
            break
        a = block[pos]
        b = block[pos + 1]
        if a < 0x80 and b < 0x80:
            end = pos + 1 + a + b if a else pos + 2 + b
        else:
            try:
                a, start = vlq_in_block(block, pos, stop)
                b, start = vlq_in_block(block, start, stop)
            except SpansBlocks:
                break
            end = start + a - 1 + b if a else start + b
        if end > stop:
            break
        add(pos)
        pos = end
    return offsets.tobytes(), pos


def walk_block(block: BlockData, pos: int, stop: int, limit: int) -> tuple[bytes, int]:
    """``reference_walk_block``, by the compiled core when it runs."""
    if native.module is None:
        return reference_walk_block(block, pos, stop, limit)
    offsets: bytes
    offsets, pos = native.module.walk_block(block, pos, stop, limit)
    return offsets, pos


class BlockCursor:
    """Reads the logical entry stream of a log body across block boundaries, up to ``end``.

    ``block_position`` is the position of the loaded block and ``started`` the number of entries
    that started in it, which is the entry index of the next entry that starts there. A raw
    body's block starts again at every entry (``begin_entry``), as libsparkey's iterator does.
    One cursor belongs to one thread.
    """

    __slots__ = ("_body", "_end", "_block", "_offset", "_stop", "_next_block", "block_position",
                 "started")

    def __init__(self, body: RawBody | BlockBody, end: int,
                 position: int = LOG_HEADER_SIZE) -> None:
        self._body = body
        self._end = end
        self._block: BlockData = b""
        self._offset = 0
        self._stop = 0
        self._next_block = position
        self.block_position = position
        self.started = 0

    def _load_next(self) -> bool:
        if self._next_block >= self._end:
            return False
        self.block_position = self._next_block
        self._block, self._offset, self._stop, self._next_block = self._body.block_at(
            self._next_block, self._end)
        self.started = 0
        return True

    def at_entry_start(self) -> bool:
        """Move past exhausted blocks; False at the end of the stream."""
        while self._offset >= self._stop:
            if not self._load_next():
                return False
        return True

    @property
    def block(self) -> BlockData:
        """The loaded block's data (its entry bytes run from ``offset`` to ``stop``)."""
        return self._block

    @property
    def offset(self) -> int:
        """Offset in ``block`` of the next byte of the stream."""
        return self._offset

    @property
    def stop(self) -> int:
        """End of the loaded block's entry bytes in ``block``."""
        return self._stop

    @property
    def own_blocks(self) -> bool:
        """Whether every entry is a block of its own (a raw body): its address is its offset."""
        return self._body.own_blocks

    def inside_block(self) -> bool:
        """Whether the next entry starts inside the loaded block (not at its end)."""
        return self._offset < self._stop

    def advance(self, offset: int, entries: int) -> None:
        """Move to ``offset`` in the loaded block, past ``entries`` whole entries read there."""
        self._offset = offset
        self.started += entries

    def begin_entry(self) -> tuple[int, int]:
        """The address ``(position, entry_index)`` of the entry starting here; counts it."""
        if self._body.own_blocks:
            self.block_position, self.started = self._offset, 0
        address = self.block_position, self.started
        self.started += 1
        return address

    def walk_block(self, limit: int) -> bytes:
        """Offsets in ``block`` of the next entries that lie wholly inside it (at most ``limit``),
        as native int64 words (``walk_block``). The cursor moves past them.

        The walk stops at the end of the block or at an entry that continues into the next
        block, which the caller then reads with ``read_header``, ``read`` and ``skip``.
        """
        offsets, pos = walk_block(self._block, self._offset, self._stop, limit)
        self.advance(pos, len(offsets) // 8)
        return offsets

    def _byte(self) -> int:
        while self._offset >= self._stop:
            if not self._load_next():
                raise truncated_error(self.block_position, self._end)
        byte = self._block[self._offset]
        self._offset += 1
        return byte

    def _vlq(self) -> int:
        value = shift = 0
        for _ in range(10):
            byte = self._byte()
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
        raise LogFormatError(f"entry header in the block at {self.block_position} is longer "
                             "than 10 bytes; the log is corrupt")

    def read_header(self) -> tuple[EntryKind, int, int]:
        """``(kind, key_len, value_len)`` of the entry starting here."""
        a = self._vlq()
        b = self._vlq()
        if a:
            return EntryKind.PUT, a - 1, b
        return EntryKind.DELETE, b, 0

    def read(self, length: int) -> bytes:
        """The next ``length`` bytes of the stream."""
        stop = self._offset + length
        if stop <= self._stop:
            data = self._block[self._offset:stop]
            self._offset = stop
            return bytes(data)
        parts = []
        while length:
            if self._offset >= self._stop and not self._load_next():
                raise truncated_error(self.block_position, self._end)
            take = min(length, self._stop - self._offset)
            parts.append(self._block[self._offset:self._offset + take])
            self._offset += take
            length -= take
        return b"".join(parts)

    def skip(self, length: int) -> None:
        """Advance ``length`` bytes without copying them."""
        while True:
            available = self._stop - self._offset
            if length <= available:
                self._offset += length
                return
            length -= available
            self._offset = self._stop
            if not self._load_next():
                raise truncated_error(self.block_position, self._end)

    def read_entry(self) -> LogEntry:
        """The entry starting here, read across blocks."""
        position, entry_index = self.begin_entry()
        kind, key_len, value_len = self.read_header()
        key = self.read(key_len)
        value = self.read(value_len) if kind == EntryKind.PUT else None
        return LogEntry(kind, key, value, position, entry_index)

    def skip_entries(self, count: int) -> None:
        """Skip ``count`` whole entries (fewer if the stream ends first)."""
        for _ in range(count):
            if not self.at_entry_start():
                return
            self.begin_entry()
            kind, key_len, value_len = self.read_header()
            self.skip(key_len + value_len)
