"""The logical entry stream of compressed logs, read across block boundaries (IO layer).

An entry belongs to the block its header starts in; its key and value may continue into the
following blocks. ``BlockCursor`` follows the stream (``walk_block`` quickly, entry by entry
otherwise); ``vlq_in_block`` reads one decompressed block and signals with ``SpansBlocks`` when
an entry continues past it.
"""

import array

from sparkey.errors import LogFormatError
from sparkey.format import LOG_HEADER_SIZE, EntryKind, vlq_decode
from sparkey.log.entries import truncated_error


class SpansBlocks(Exception):
    """An entry read from one decompressed block continues in the next block."""


def vlq_in_block(block, pos, size):
    """VLQ at ``block[pos]``; raises SpansBlocks if the block ends first."""
    if pos < size:
        byte = block[pos]
        if byte < 0x80:
            return byte, pos + 1
    if pos >= size:
        raise SpansBlocks
    try:
        return vlq_decode(block, pos, size)
    except LogFormatError:
        if size - pos < 10:
            raise SpansBlocks from None
        raise


def skip_in_block(block, pos, count):
    """Offset in a decompressed block after the ``count`` entries starting at ``pos``.

    Raises SpansBlocks if they do not all end inside the block. The lookup path of compressed
    logs: two byte reads per skipped entry with one-byte headers.
    """
    size = len(block)
    for _ in range(count):
        if pos + 1 < size:
            a = block[pos]
            b = block[pos + 1]
            if a < 0x80 and b < 0x80:
                pos += 1 + a + b if a else 2 + b
                continue
        a, pos = vlq_in_block(block, pos, size)
        b, pos = vlq_in_block(block, pos, size)
        pos += a - 1 + b if a else b
    if pos > size:
        raise SpansBlocks
    return pos


class BlockCursor:
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
        self._block, self._next_block = self._log.block_at(self._mm, self._next_block)
        self._offset = 0
        self.started = 0
        return True

    def at_entry_start(self):
        """Move past exhausted blocks; False at the end of the stream."""
        while self._offset >= len(self._block):
            if not self._load_next():
                return False
        return True

    @property
    def block(self):
        """The loaded block (decompressed bytes)."""
        return self._block

    def inside_block(self):
        """Whether the next entry starts inside the loaded block (not at its end)."""
        return self._offset < len(self._block)

    def walk_block(self, limit):
        """Offsets in ``block`` of the next entries that lie wholly inside it (at most ``limit``).

        The cursor moves past them. The walk stops at the end of the block or at an entry that
        continues into the next block, which the caller then reads with ``read_header``,
        ``read`` and ``skip``. This is the fast path of scans: two byte reads per entry.
        """
        block = self._block
        size = len(block)
        pos = self._offset
        offsets = array.array("q")
        add = offsets.append
        while pos + 1 < size and limit:
            a = block[pos]
            b = block[pos + 1]
            if a < 0x80 and b < 0x80:
                stop = pos + 1 + a + b if a else pos + 2 + b
            else:
                try:
                    a, start = vlq_in_block(block, pos, size)
                    b, start = vlq_in_block(block, start, size)
                except SpansBlocks:
                    break
                stop = start + a - 1 + b if a else start + b
            if stop > size:
                break
            add(pos)
            pos = stop
            limit -= 1
        self._offset = pos
        self.started += len(offsets)
        return offsets

    def _byte(self):
        while self._offset >= len(self._block):
            if not self._load_next():
                raise truncated_error(self.block_position, self._end)
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
                raise truncated_error(self.block_position, self._end)
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
                raise truncated_error(self.block_position, self._end)

    def skip_entries(self, count):
        """Skip ``count`` whole entries."""
        for _ in range(count):
            if not self.at_entry_start():
                return
            self.started += 1
            kind, key_len, value_len = self.read_header()
            self.skip(key_len + value_len)
