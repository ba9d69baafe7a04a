"""The two body formats of a ``.spl`` log, both read as blocks (IO layer): RawBody, BlockBody.

libsparkey reads every log as a sequence of blocks and has one code path above them; the body
format only decides what a block is. ``LogReader`` does the same:

- an uncompressed body (``RawBody``) is one block, the mapped file itself, that starts again at
  every entry: the block at ``position`` is the mapping from ``position`` to the end of what is
  read, and an entry's address is its own offset with entry index 0;
- a compressed body (``BlockBody``) is a sequence of ``VLQ(length) payload`` blocks: the block
  at ``position`` is the payload there, decompressed, and an entry's address is the position of
  the block its header starts in with its rank among the entries that start there.

Each body has two jobs. ``block_at(position, end)`` returns ``(data, start, stop, next)``: the
block's entry bytes are ``data[start:stop]`` and the following block starts at file offset
``next`` (a raw body's blocks all lie in one ``resident`` buffer, which a lookup reads without
asking for the block). ``entry_spans(positions, entry_indexes)`` locates the key and value of many PUT
entries at once for ``LogReader.values_for_many``: numpy over the mapping for a raw body, one
decompression per distinct block for a block body.

A body holds the reader's mapping without owning it (``LogReader.close`` unmaps it; later reads
raise ValueError, which the reader turns into ClosedError). Bodies are immutable, so they are
safe to share between threads; the codecs keep their contexts per thread.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from typing import NamedTuple, Union

import numpy as np

from sparkey.codec import Codec
from sparkey.errors import IndexFormatError, LogFormatError
from sparkey.format import LOG_HEADER_SIZE, vlq_decode
from sparkey.log.blocks import SpansBlocks, skip_in_block, vlq_in_block
from sparkey.log.entries import truncated_error, vlq_many

BlockData = Union[bytes, mmap.mmap]
"""The bytes of a block: the log's mapping (raw body) or a decompressed payload."""

BULK_CHUNK_ENTRIES = 1024
"""Entries of a raw body decoded together by entry_spans: small enough that the log cache lines
touched by the numpy header decode are still cached when the same entries are sliced (measured:
1024 halves the cost of one pass over 200k random entries of a 24 MB log)."""


class EntrySpans(NamedTuple):
    """Where the keys and values of some requested PUT entries lie, in lists aligned by row.

    Request row ``rows[i]`` names a PUT whose key is ``data[key_starts[i]:key_ends[i]]`` and
    whose value is ``data[key_ends[i]:value_ends[i]]``. ``across_blocks`` lists the request rows
    whose entry continues past its block: those are read entry by entry.
    """

    data: BlockData
    rows: list[int]
    key_starts: list[int]
    key_ends: list[int]
    value_ends: list[int]
    across_blocks: list[int]


def delete_at_address(position: int) -> IndexFormatError:
    """The error for an index slot that names a DELETE entry."""
    return IndexFormatError(f"index slot points at a DELETE entry at address position {position}")


def check_position(position: int, data_end: int) -> None:
    """Raise IndexFormatError unless ``position`` lies in the log body."""
    if not LOG_HEADER_SIZE <= position < data_end:
        raise IndexFormatError(f"address points at offset {position}, outside the log body "
                               f"[{LOG_HEADER_SIZE}, {data_end})")


class RawBody:
    """An uncompressed body: the mapping is one block that starts again at every entry."""

    own_blocks = True
    """Every entry is its own block: an address is the entry's offset and entry index 0."""

    resident: BlockData | None
    """The mapping: every block is it from the block's position on, so a lookup reads it
    without a block_at call."""

    def __init__(self, mm: mmap.mmap, data_end: int) -> None:
        self._mm = mm
        self._data_end = data_end
        self.resident = mm

    def block_at(self, position: int, end: int) -> tuple[BlockData, int, int, int]:
        """The mapping from ``position`` to ``end``; nothing follows it. O(1)."""
        check_position(position, self._data_end)
        return self._mm, position, end, end

    def entry_spans(self, positions: np.ndarray, entry_indexes: np.ndarray
                    ) -> Iterator[EntrySpans]:
        """Spans of the entries at ``positions`` (in range), BULK_CHUNK_ENTRIES rows at a time.

        Headers are decoded with numpy straight from the mapping; addresses with an entry index
        (an index written with entry bits over an uncompressed log) skip to it entry by entry.
        """
        mm, end = self._mm, self._data_end
        buf = np.frombuffer(mm, dtype=np.uint8)
        try:
            for lo in range(0, len(positions), BULK_CHUNK_ENTRIES):
                starts = positions[lo:lo + BULK_CHUNK_ENTRIES]
                skips = entry_indexes[lo:lo + BULK_CHUNK_ENTRIES]
                if skips.any():
                    starts = starts.copy()
                    for i in np.flatnonzero(skips).tolist():
                        starts[i] = self._skip(int(starts[i]), int(skips[i]))
                first, after_first = vlq_many(buf, starts, end)
                if len(first) and not first.all():
                    raise delete_at_address(int(starts[first == 0][0]))
                second, key_start = vlq_many(buf, after_first, end)
                key_end = key_start + first - 1
                value_end = key_end + second
                if len(value_end) and value_end.max() > end:
                    raise truncated_error(int(starts[value_end > end][0]), end)
                yield EntrySpans(mm, list(range(lo, lo + len(starts))), key_start.tolist(),
                                 key_end.tolist(), value_end.tolist(), [])
        finally:
            del buf

    def _skip(self, position: int, count: int) -> int:
        """Offset of the entry ``count`` entries after the one at ``position``."""
        try:
            return skip_in_block(self._mm, position, count, self._data_end)
        except SpansBlocks:
            raise truncated_error(position, self._data_end) from None


class BlockBody:
    """A compressed body: ``VLQ(length) payload`` blocks, each decompressed on demand."""

    own_blocks = False
    """An address is the block's position and the entry's rank among those starting in it."""

    resident: BlockData | None = None
    """Blocks are decompressed on demand: none is resident."""

    def __init__(self, mm: mmap.mmap, data_end: int, codec: Codec, block_size: int) -> None:
        self._mm = mm
        self._data_end = data_end
        self._codec = codec
        self._block_size = block_size

    def block_at(self, position: int, end: int) -> tuple[BlockData, int, int, int]:
        """The decompressed block at ``position`` (``end`` plays no part: blocks are whole).

        Costs one decompression of at most ``compression_block_size`` bytes.
        """
        data_end = self._data_end
        check_position(position, data_end)
        length, start = vlq_decode(self._mm, position, data_end)
        stop = start + length
        if stop > data_end:
            raise LogFormatError(f"block at offset {position} of {length} bytes runs past "
                                 f"data_end {data_end}; the log is truncated or corrupt")
        block = self._codec.decompress(self._mm[start:stop], self._block_size)
        return block, 0, len(block), stop

    def entry_spans(self, positions: np.ndarray, entry_indexes: np.ndarray
                    ) -> Iterator[EntrySpans]:
        """Spans of the entries at the given addresses (in range), one block at a time.

        Addresses are visited in ``(position, entry index)`` order, so each distinct block is
        decompressed once and walked once up to the last entry wanted from it.
        """
        order = np.lexsort((entry_indexes, positions))
        positions_sorted = positions[order].tolist()
        indexes_sorted = entry_indexes[order].tolist()
        rows_sorted = order.tolist()
        i = 0
        while i < len(rows_sorted):
            position = positions_sorted[i]
            block, pos, stop, _ = self.block_at(position, self._data_end)
            spans = EntrySpans(block, [], [], [], [], [])
            current = 0
            while i < len(rows_sorted) and positions_sorted[i] == position:
                wanted, row = indexes_sorted[i], rows_sorted[i]
                i += 1
                try:
                    pos = skip_in_block(block, pos, wanted - current, stop)
                    current = wanted
                    a, start = vlq_in_block(block, pos, stop)
                    b, start = vlq_in_block(block, start, stop)
                except SpansBlocks:
                    spans.across_blocks.append(row)
                    continue
                if not a:
                    raise delete_at_address(position)
                key_end = start + a - 1
                if key_end + b > stop:
                    spans.across_blocks.append(row)
                    continue
                spans.rows.append(row)
                spans.key_starts.append(start)
                spans.key_ends.append(key_end)
                spans.value_ends.append(key_end + b)
            yield spans
