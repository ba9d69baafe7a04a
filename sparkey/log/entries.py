"""Log entries as values (``LogEntry``) and columns (``EntryTable``); vectorized VLQs (pure).

``decode_headers`` runs in ``sparkey._native`` when it is built (``sparkey.native`` chooses).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence

import numpy as np

from sparkey import native
from sparkey.errors import LogFormatError
from sparkey.format import Buffer, EntryKind


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
    key_buffer: Buffer

    def __len__(self) -> int:
        return len(self.kind)

    def key(self, i: int) -> bytes:
        """The key of entry ``i`` as bytes."""
        start = int(self.key_offset[i])
        return bytes(self.key_buffer[start:start + int(self.key_len[i])])

    @property
    def entry_sizes(self) -> np.ndarray:
        """Encoded size of every entry (PUT: both VLQs, key, value; DELETE: 0, VLQ, key)."""
        put = self.kind == EntryKind.PUT
        first = np.where(put, self.key_len + 1, 0)
        second = np.where(put, self.value_len, self.key_len)
        return vlq_sizes(first) + vlq_sizes(second) + self.key_len + self.value_len

    @classmethod
    def empty(cls) -> EntryTable:
        """A table of no entries."""
        integers = np.zeros(0, dtype=np.int64)
        return cls(kind=np.zeros(0, dtype=np.uint8), position=np.zeros(0, dtype=np.uint64),
                   entry_index=np.zeros(0, dtype=np.uint64), key_offset=integers,
                   key_len=integers, value_len=integers, key_buffer=b"")

    @classmethod
    def concat(cls, tables: Sequence[EntryTable]) -> EntryTable:
        """One table holding the entries of ``tables`` in order."""
        if len(tables) == 1:
            return tables[0]
        shared_buffer = all(t.key_buffer is tables[0].key_buffer for t in tables)
        key_buffer: Buffer
        if shared_buffer:
            key_buffer, key_offset = tables[0].key_buffer, [t.key_offset for t in tables]
        else:
            starts = np.cumsum([0] + [len(t.key_buffer) for t in tables[:-1]])
            key_buffer = b"".join(bytes(t.key_buffer) for t in tables)
            key_offset = [t.key_offset + start for t, start in zip(tables, starts)]
        columns = {name: np.concatenate([getattr(t, name) for t in tables])
                   for name in ("kind", "position", "entry_index", "key_len", "value_len")}
        return cls(key_offset=np.concatenate(key_offset), key_buffer=key_buffer, **columns)


def vlq_sizes(values: np.ndarray) -> np.ndarray:
    """Vectorized format.vlq_size over a non-negative int64 array."""
    sizes = np.ones(len(values), dtype=np.int64)
    largest = int(values.max()) if len(values) else 0
    for groups in range(1, 9):
        if largest < 1 << (7 * groups):
            break
        sizes += values >= (1 << (7 * groups))
    return sizes


def vlq_many(buf: np.ndarray, positions: np.ndarray, end: int) -> tuple[np.ndarray, np.ndarray]:
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


def reference_decode_headers(stream: Buffer, starts: np.ndarray
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(first, second, payload)``: both header VLQs of the entries starting at the int64
    offsets ``starts`` in ``stream``, and the offset of each payload (its key)."""
    buf = np.frombuffer(stream, dtype=np.uint8)
    first, after_first = vlq_many(buf, starts, len(stream))
    second, payload = vlq_many(buf, after_first, len(stream))
    return first, second, payload


def decode_headers(stream: Buffer, starts: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``reference_decode_headers``, by the compiled core when it runs (in one pass)."""
    if native.module is None:
        return reference_decode_headers(stream, starts)
    columns = np.frombuffer(native.module.decode_headers(stream, starts), dtype=np.int64)
    first, second, payload = columns.reshape(3, len(starts))
    return first, second, payload


def truncated_error(position: int, end: int) -> LogFormatError:
    """The error for an entry running past the end of the log body."""
    return LogFormatError(f"entry at offset {position} runs past data_end {end}; "
                          "the log is truncated or corrupt")
