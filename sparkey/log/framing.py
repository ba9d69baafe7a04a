"""Vectorized framing of PUT entries and block cutting for bulk writes (pure layer, no IO).

``frame_puts`` turns a chunk of keys and values (two PackedBytes; ``frame_sequences``: two
sequences of byte strings) into the bytes of their PUT entries, exactly as ``LogWriter.put``
appends them one by one: ``VLQ(len(key) + 1) VLQ(len(value)) key value``. The numpy framing
(``reference_frame_puts``) is the reference; when the compiled core runs (``sparkey.native``
chooses), ``sparkey._native`` frames the chunk in one call with the GIL released. ``BlockCutter`` then places the entry stream of a compressed log
into blocks by libsparkey's rules (``sparkey.log.writer``), chunk after chunk, carrying the open
block from one chunk to the next; it only looks at entry sizes, so the bytes of the blocks can
be assembled and compressed elsewhere, in any order, and still equal the sequential writer's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from sparkey import native
from sparkey.errors import EntrySizeError
from sparkey.format import MAX_ENTRY_PART_LEN, BytesOrStr
from sparkey.log.entries import vlq_sizes
from sparkey.packed import PackedBytes, copy_rows


@dataclasses.dataclass(frozen=True)
class FramedPuts:
    """The entry bytes of a chunk of PUTs, with the size of each entry and its parts."""

    stream: np.ndarray
    """uint8: the entries back to back, as they appear in the log's entry stream."""
    sizes: np.ndarray
    """int64: encoded size of each entry (header VLQs + key + value)."""
    header_sizes: np.ndarray
    key_lengths: np.ndarray
    value_lengths: np.ndarray

    def __len__(self) -> int:
        return len(self.sizes)


def _check_lengths(lengths: np.ndarray, role: str) -> None:
    if len(lengths) and int(lengths.max()) > MAX_ENTRY_PART_LEN:
        raise EntrySizeError(
            f"a {role} of {int(lengths.max())} bytes is longer than {MAX_ENTRY_PART_LEN} bytes, "
            "the largest that sparkey-java can read; split it or store it elsewhere")


def _write_vlqs(out: np.ndarray, positions: np.ndarray, values: np.ndarray,
                sizes: np.ndarray) -> None:
    """VLQ of each of ``values`` at ``out[positions]``, ``sizes`` bytes each (vlq_sizes)."""
    if int(sizes.max()) == 1:
        out[positions] = values
        return
    for group in range(int(sizes.max())):
        rows = sizes > group
        byte = (values[rows] >> (7 * group)) & 0x7F
        byte |= np.where(sizes[rows] > group + 1, 0x80, 0)
        out[positions[rows] + group] = byte


def _framed(stream: bytes, key_lengths: np.ndarray, value_lengths: np.ndarray) -> FramedPuts:
    """A FramedPuts of a stream framed by the compiled core, sized from the lengths."""
    header_sizes = vlq_sizes(key_lengths + 1) + vlq_sizes(value_lengths)
    return FramedPuts(np.frombuffer(stream, dtype=np.uint8),
                      header_sizes + key_lengths + value_lengths, header_sizes, key_lengths,
                      value_lengths)


def frame_puts(keys: PackedBytes, values: PackedBytes) -> FramedPuts:
    """The PUT entries of ``keys[i] -> values[i]`` (two PackedBytes of equal length).

    Raises EntrySizeError for a key or value longer than MAX_ENTRY_PART_LEN. The stream is a new
    array owned by the caller. numpy releases the GIL for the copies, which dominate; the
    compiled core (``_native.frame_packed``) frames the whole chunk with the GIL released.
    """
    if native.module is not None and len(keys) == len(values):
        _check_lengths(keys.lengths, "key")
        _check_lengths(values.lengths, "value")
        stream = native.module.frame_packed(keys.data, keys.offsets, values.data, values.offsets)
        return _framed(stream, keys.lengths, values.lengths)
    return reference_frame_puts(keys, values)


def frame_sequences(keys: Sequence[BytesOrStr], values: Sequence[BytesOrStr]) -> FramedPuts:
    """frame_puts of two sequences of bytes-likes or str, packed as ``PackedBytes.from_sequence``
    packs them (EntryTypeError for other items).

    The compiled core (``_native.frame_puts``) frames the items in place, without packing them
    first, and with the GIL released once they are pinned (a tuple of ``bytes`` is read as it
    is; other sequences are copied into a private list first, holding the GIL).
    """
    if native.module is None or len(keys) != len(values):
        return frame_puts(PackedBytes.from_sequence(keys, "key"),
                          PackedBytes.from_sequence(values, "value"))
    key_lengths = np.empty(len(keys), dtype=np.int64)
    value_lengths = np.empty(len(values), dtype=np.int64)
    stream = native.module.frame_puts(keys, values, key_lengths, value_lengths)
    return _framed(stream, key_lengths, value_lengths)


def frame_pairs(pairs: list[Any]) -> FramedPuts:
    """frame_sequences of a list of ``(key, value)`` pairs; ValueError for an item that is not
    a pair. The compiled core splits a list of 2-tuples in one C pass (``_native.split_pairs``),
    so a worker, not the caller, does the per-entry work."""
    split = None if native.module is None else native.module.split_pairs(pairs)
    if split is None:
        try:
            split = zip(*pairs, strict=True)
            keys, values = split
        except (TypeError, ValueError):
            raise ValueError("put_many items must be (key, value) pairs") from None
    else:
        keys, values = split
    return frame_sequences(keys, values)


def reference_frame_puts(keys: PackedBytes, values: PackedBytes) -> FramedPuts:
    """frame_puts with numpy: VLQ bytes by assignments, keys and values by ``copy_rows``."""
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys but {len(values)} values")
    key_lengths, value_lengths = keys.lengths, values.lengths
    _check_lengths(key_lengths, "key")
    _check_lengths(value_lengths, "value")
    first_vlq = key_lengths + 1
    first_size, second_size = vlq_sizes(first_vlq), vlq_sizes(value_lengths)
    header_sizes = first_size + second_size
    sizes = header_sizes + key_lengths + value_lengths
    starts = np.zeros(len(sizes), dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    stream = np.empty(int(sizes.sum()), dtype=np.uint8)
    if len(sizes):
        _write_vlqs(stream, starts, first_vlq, first_size)
        _write_vlqs(stream, starts + first_size, value_lengths, second_size)
        key_starts = starts + header_sizes
        copy_rows(stream, key_starts, keys.data, keys.offsets[:-1], key_lengths)
        copy_rows(stream, key_starts + key_lengths, values.data, values.offsets[:-1],
                  value_lengths)
    return FramedPuts(stream, sizes, header_sizes, key_lengths, value_lengths)


class BlockCutter:
    """Where the blocks of a compressed log end, given the sizes of the entries appended.

    Follows ``LogWriter._append_to_blocks`` exactly (module docstring of ``sparkey.log.writer``).
    State between chunks: ``used`` bytes and ``started`` entries in the open block, which is
    never closed by the cutter itself: like the writer's current block, it stays open until an
    entry does not fit. A fresh block starting at entry ``i`` holds entries ``i`` to
    ``reach[i] - 1`` (one searchsorted for the chunk), so the Python loop runs once per block,
    not once per entry.
    """

    def __init__(self, block_size: int, used: int = 0, started: int = 0) -> None:
        self.block_size = block_size
        self.used = used
        self.started = started

    def cut(self, sizes: np.ndarray, header_sizes: np.ndarray) -> tuple[list[int], list[int]]:
        """Blocks closed by appending entries of ``sizes``: ``(ends, started)`` lists.

        ``ends`` are offsets in the chunk's entry stream (the open block's earlier bytes sit
        before offset 0, so the first block may start at ``-used``); ``started[k]`` counts the
        entries whose header is in block ``k``, the open block's earlier entries included.
        The compiled core, when it runs, walks the entries in C without the GIL
        (``_native.cut_blocks``).
        """
        if native.module is not None:
            ends, started, self.used, self.started = native.module.cut_blocks(
                sizes, header_sizes, self.block_size, self.used, self.started)
            return (np.frombuffer(ends, dtype=np.int64).tolist(),
                    np.frombuffer(started, dtype=np.int64).tolist())
        return self._reference_cut(sizes, header_sizes)

    def _reference_cut(self, sizes: np.ndarray, header_sizes: np.ndarray
                       ) -> tuple[list[int], list[int]]:
        """cut with numpy, one Python step per block."""
        size = self.block_size
        count = len(sizes)
        cumulative = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(sizes, out=cumulative[1:])
        bounds = cumulative.tolist()
        ends: list[int] = []
        started: list[int] = []
        used, in_block = self.used, self.started
        reach = None
        i = 0
        while i < count:
            if used:  # only the block carried over from the previous chunk is not fresh
                j = int(np.searchsorted(cumulative, bounds[i] + size - used, side="right")) - 1
            else:
                if reach is None:
                    reach = (np.searchsorted(cumulative, cumulative[:-1] + size, side="right")
                             - 1).tolist()
                j = reach[i]
            if j == count:  # the rest of the chunk fits in the open block
                used += bounds[count] - bounds[i]
                in_block += count - i
                break
            used += bounds[j] - bounds[i]
            in_block += j - i
            if bounds[j + 1] - bounds[j] > size and size - used >= int(header_sizes[j]):
                # entry j is larger than a block and starts in this one: it fills it and the
                # next ones, and the block holding its tail is closed after it
                end = bounds[j] + size - used
                ends.append(end)
                started.append(in_block + 1)
                while end + size < bounds[j + 1]:
                    end += size
                    ends.append(end)
                    started.append(0)
                ends.append(bounds[j + 1])
                started.append(0)
                i = j + 1
            else:
                ends.append(bounds[j])
                started.append(in_block)
                i = j
            used = in_block = 0
        self.used, self.started = used, in_block
        return ends, started
