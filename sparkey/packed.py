"""``PackedBytes``: a column of byte strings as one buffer plus offsets (pure layer, no IO).

The bulk write path (``Writer.put_many``) works on columns rather than on one ``bytes`` object
per entry. String ``i`` of a column is ``data[offsets[i]:offsets[i + 1]]``, the layout of Apache
Arrow's binary arrays; ``offsets`` holds ``len + 1`` non-decreasing positions and need not start
at 0, so a row range of a column is a view, not a copy.

A column may also be *lazy*: any object with ``__len__`` and ``pack(start, stop)`` returning a
PackedBytes of its rows ``start`` to ``stop - 1``. ``put_many`` calls ``pack`` from its worker
threads, concurrently, on disjoint row ranges, so ``pack`` must not mutate shared state (a
function of the row range is). This is how records are encoded into values chunk by chunk, in
parallel, with numpy, instead of one Python call per record.

``copy_rows`` is the vectorized copy of variable-length rows to arbitrary offsets that framing
(``sparkey.log.framing``) and record encoders share.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, cast

import numpy as np
from numpy.lib.stride_tricks import as_strided

from sparkey.format import BytesOrStr, entry_bytes

_EXACT_GROUPS_LIMIT = 8
"""``copy_rows`` groups rows by exact length when a batch has at most this many distinct
lengths (a uniform column is one group); beyond that, by the bits of the length."""


class Column(Protocol):
    """A lazy column: its length, and a PackedBytes of any row range on demand."""

    def __len__(self) -> int: ...

    def pack(self, start: int, stop: int) -> PackedBytes:
        """Rows ``start`` to ``stop - 1`` as a PackedBytes (a pure function of the range)."""


class PackedBytes:
    """``len(offsets) - 1`` byte strings stored in ``data`` (a 1-D uint8 array).

    The column owns neither buffer exclusively: ``pack`` and ``from_rows`` return views, so do
    not write into a buffer while a PackedBytes of it is in use. Thread safety: read-only, so it
    can be shared between threads.
    """

    __slots__ = ("data", "offsets")

    def __init__(self, data: Any, offsets: Any) -> None:
        """Wrap ``data`` (bytes-like or uint8 array) and ``offsets`` (integers, len + 1)."""
        if isinstance(data, np.ndarray):
            if data.dtype != np.uint8 or data.ndim != 1:
                raise TypeError(f"PackedBytes data must be a 1-D uint8 array, not {data.dtype} "
                                f"with {data.ndim} dimensions")
        else:
            data = np.frombuffer(data, dtype=np.uint8)
        offsets = np.asarray(offsets)
        if offsets.ndim != 1 or not len(offsets) or offsets.dtype.kind not in "iu":
            raise ValueError("PackedBytes offsets must be a non-empty 1-D integer array "
                             "(len(column) + 1 positions)")
        offsets = offsets.astype(np.int64, copy=False)
        if offsets[0] < 0 or offsets[-1] > len(data) or np.any(offsets[1:] < offsets[:-1]):
            raise ValueError(f"PackedBytes offsets must be non-decreasing and within the "
                             f"{len(data)} bytes of data")
        self.data = data
        self.offsets = offsets

    @classmethod
    def from_sequence(cls, items: Sequence[BytesOrStr], role: str = "value") -> PackedBytes:
        """Pack a sequence of ``bytes``/``bytearray``/``memoryview``/``str`` (UTF-8).

        Raises EntryTypeError for other types, naming ``role`` (``"key"`` or ``"value"``).
        """
        kinds = set(map(type, items))
        parts: Sequence[bytes | bytearray]
        if kinds <= {bytes, bytearray}:
            parts = cast("Sequence[bytes | bytearray]", items)  # every item is bytes-like
        else:
            parts = [entry_bytes(item, role) for item in items]
        lengths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return cls(b"".join(parts), offsets)

    @classmethod
    def from_rows(cls, rows: np.ndarray) -> PackedBytes:
        """A column of the rows of a 2-D uint8 array, all ``rows.shape[1]`` bytes long."""
        rows = np.ascontiguousarray(rows, dtype=np.uint8)
        count, width = rows.shape
        return cls(rows.reshape(-1), np.arange(count + 1, dtype=np.int64) * width)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> bytes:
        """String ``i`` as ``bytes``."""
        if not -len(self) <= i < len(self):
            raise IndexError(f"row {i} of a column of {len(self)}")
        i %= len(self)
        return self.data[self.offsets[i]:self.offsets[i + 1]].tobytes()

    def __iter__(self) -> Iterator[bytes]:
        data = self.data
        bounds = self.offsets.tolist()
        return (data[a:b].tobytes() for a, b in zip(bounds, bounds[1:]))

    @property
    def lengths(self) -> np.ndarray:
        """Length of every string (int64 array)."""
        return np.diff(self.offsets)

    def pack(self, start: int, stop: int) -> PackedBytes:
        """Rows ``start`` to ``stop - 1`` as a PackedBytes sharing this one's data."""
        return PackedBytes(self.data, self.offsets[start:stop + 1])

    def __repr__(self) -> str:
        size = self.offsets[-1] - self.offsets[0]
        return f"<sparkey.PackedBytes {len(self)} strings, {size} bytes>"


class SequenceColumn:
    """Adapts a sequence of bytes-likes/str to the lazy column protocol (``pack`` per range)."""

    __slots__ = ("items", "role")

    def __init__(self, items: Sequence[BytesOrStr], role: str) -> None:
        self.items = items
        self.role = role

    def __len__(self) -> int:
        return len(self.items)

    def pack(self, start: int, stop: int) -> PackedBytes:
        """Rows ``start`` to ``stop - 1``, packed (validated and copied)."""
        return PackedBytes.from_sequence(self.items[start:stop], self.role)


def as_column(column: Any, role: str) -> Column:
    """``column`` as an object with ``__len__`` and ``pack``: lazy columns and PackedBytes as they
    are, numpy arrays of bytes/str and other sequences through SequenceColumn."""
    if hasattr(column, "pack") and hasattr(column, "__len__"):
        return column
    if isinstance(column, np.ndarray):
        column = column.tolist()
    if isinstance(column, (bytes, bytearray, memoryview, str)) or not hasattr(column, "__len__"):
        raise TypeError(f"{role}s must be a sequence of byte strings, a PackedBytes or an object "
                        f"with pack(start, stop), not {type(column).__name__}")
    return SequenceColumn(column, role)


def _windows(buffer: np.ndarray, width: int) -> np.ndarray:
    """Every ``width``-byte window of a 1-D uint8 array as the rows of an overlapping 2-D view
    (writable when ``buffer`` is: numpy's as_strided, without its Python-level overhead)."""
    if not buffer.flags.c_contiguous:
        return as_strided(buffer, shape=(len(buffer) - width + 1, width),
                          strides=(buffer.strides[0],) * 2)
    return np.ndarray((len(buffer) - width + 1, width), np.uint8, buffer, 0, (1, 1))


def copy_rows(out: np.ndarray, destinations: np.ndarray, source: np.ndarray,
              starts: np.ndarray | None, lengths: np.ndarray) -> None:
    """``out[destinations[i]:][:lengths[i]] = source[starts[i]:][:lengths[i]]`` for every ``i``.

    ``out`` is a 1-D uint8 array and the destination ranges must not overlap. ``source`` is a
    1-D uint8 array with ``starts`` the offset of each row, or a 2-D uint8 array whose row ``i``
    starts row ``i`` (``starts`` is then None). Rows of one length move in one fancy-indexed copy
    between overlapping window views, so the cost is a few numpy calls per distinct length, not
    per row; batches with many distinct lengths move by the bits of the length instead (one
    group per bit, at the offset of the higher bits), which bounds the calls by the bit length
    of the longest row. Example: rows of 5 and 7 bytes among many other lengths move as pieces
    of 4 (both), 2 (the 7) and 1 (both) bytes. numpy releases the GIL inside the copies.
    """
    if not len(lengths):
        return
    rows_2d = source if source.ndim == 2 else None
    shortest, longest = int(lengths.min()), int(lengths.max())
    distinct = [shortest] if shortest == longest else np.unique(lengths)
    if len(distinct) <= _EXACT_GROUPS_LIMIT:
        for width in list(distinct):
            rows = slice(None) if len(distinct) == 1 else lengths == width
            if not width:
                continue
            if rows_2d is None:
                assert starts is not None  # a 1-D source comes with its row starts
                pieces = _windows(source, width)[starts[rows]]
            else:
                pieces = rows_2d[rows, :width]
            _windows(out, width)[destinations[rows]] = pieces
        return
    if rows_2d is not None:
        source = np.ascontiguousarray(rows_2d).reshape(-1)
        starts = np.arange(len(rows_2d), dtype=np.int64) * rows_2d.shape[1]
    assert starts is not None  # a 1-D source comes with its row starts
    for bit in range(longest.bit_length()):
        width = 1 << bit
        rows = np.flatnonzero(lengths & width)
        if len(rows):
            offset = lengths[rows] & ~((width << 1) - 1)
            _windows(out, width)[destinations[rows] + offset] = (
                _windows(source, width)[starts[rows] + offset])
