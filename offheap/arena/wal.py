"""The write-ahead log of a durable arena: one commit record, written, synced, applied (layer 3).

``PATH-wal`` holds at most one record: the byte ranges one commit changes in ``PATH``. Writing
and syncing it is the commit point; the arena then copies the ranges into ``PATH`` and empties
the log. A record that is torn (a crash while writing it) fails its crc and is ignored: that
commit never happened. Applying a record twice gives the same file, so a crash while applying is
repaired by applying it again on the next open.

Record layout (integers little-endian)::

    0   8s  magic b"OFFHWAL1"
    8   u32 format version (2)
    12  u32 number of entries
    16  u64 file id: the id in the header of the file the record belongs to
    24  u64 base generation: the file generation the record applies to
    32  u64 new generation: the file generation once it is applied
    40  u64 new file end
    48  u64 body bytes (every entry with its data)
    56  entries, each a 24-byte head then its data:
        0   u64 file offset
        8   u64 length
        16  u32 kind: 1 the length bytes follow, 2 the range becomes zeros (nothing follows)
        20  u32 zero
    then an 8-byte trailer: u32 crc32 of every byte before it, 4s b"OHWE"

Entries apply in order: the arena puts zero ranges first, so later bytes land on them. The file
id keeps a log from being applied to another file that took the path (a compaction renames a new
file over it; a leftover log of the old one must not touch it). Version 1 had no file id; such a
record is ignored like a torn one.
Parsing reads headers and entry heads only; data is copied in chunks, so a record may be larger
than memory.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass

from offheap.arena.holes import zero_range

MAGIC = b"OFFHWAL1"
VERSION = 2
BYTES, ZEROS = 1, 2
_HEAD = struct.Struct("<8sIIQQQQQ")
_ENTRY = struct.Struct("<QQII")
_TRAILER_MAGIC = b"OHWE"
_TRAILER_BYTES = 8
_CHUNK_BYTES = 1 << 20
_MAX_FILE_OFFSET = 2**62  # file offsets past this are where the locks live: never data

Data = bytes | bytearray | memoryview
"""The bytes of one write: a buffer whose ``len`` is its byte count."""


@dataclass(frozen=True)
class Entry:
    """One byte range of a record; ``position`` is where its data starts in the log file."""

    offset: int
    length: int
    kind: int
    position: int


@dataclass(frozen=True)
class Record:
    """A complete, crc-checked record."""

    file_id: int
    base_generation: int
    new_generation: int
    end: int
    entries: tuple[Entry, ...]


def encode_head(file_id: int, base_generation: int, new_generation: int, end: int,
                n_entries: int, body_bytes: int) -> bytes:
    return _HEAD.pack(MAGIC, VERSION, n_entries, file_id, base_generation, new_generation, end,
                      body_bytes)


def encode_entry_head(offset: int, length: int, kind: int) -> bytes:
    return _ENTRY.pack(offset, length, kind, 0)


def encode_trailer(crc: int) -> bytes:
    return struct.pack("<I", crc) + _TRAILER_MAGIC


def write_record(fd: int, *, file_id: int, base_generation: int, new_generation: int,
                 end: int, zero_ranges: list[tuple[int, int]],
                 writes: list[tuple[int, Data]]) -> None:
    """Replace the log's content with one record and sync it (fdatasync): the commit point.

    ``zero_ranges`` are ``(offset, length)``; ``writes`` are ``(offset, buffer)`` of bytes
    (``len`` is the byte count) and are not copied when large: memoryviews into mapped pages
    are fine. Small pieces are gathered into writes of up to 1 MiB; every write is an
    ``os.pwrite`` (:func:`pwrite_all`), as every other write of an arena file is.
    """
    pieces: list[Data] = []
    for offset, length in zero_ranges:
        pieces.append(encode_entry_head(offset, length, ZEROS))
    for offset, data in writes:
        pieces.append(encode_entry_head(offset, len(data), BYTES))
        pieces.append(data)
    body_bytes = sum(len(piece) for piece in pieces)
    head = encode_head(file_id, base_generation, new_generation, end,
                       len(zero_ranges) + len(writes), body_bytes)
    crc = zlib.crc32(head)
    for piece in pieces:
        crc = zlib.crc32(piece, crc)
    if os.fstat(fd).st_size:
        os.ftruncate(fd, 0)
    position = 0
    batch = bytearray()
    for piece in [head, *pieces, encode_trailer(crc)]:
        if len(batch) + len(piece) > _CHUNK_BYTES and batch:
            pwrite_all(fd, batch, position)
            position += len(batch)
            batch.clear()
        if len(piece) >= _CHUNK_BYTES:
            pwrite_all(fd, piece, position)
            position += len(piece)
        else:
            batch += piece
    pwrite_all(fd, batch, position)
    os.fdatasync(fd)


def read_record(fd: int) -> Record | None:
    """The record in the log, or None when the log is empty, torn or damaged."""
    size = os.fstat(fd).st_size
    head = os.pread(fd, _HEAD.size, 0)
    if len(head) < _HEAD.size:
        return None
    magic, version, n_entries, file_id, base, new, end, body_bytes = _HEAD.unpack(head)
    total = _HEAD.size + body_bytes
    if magic != MAGIC or version != VERSION or total + _TRAILER_BYTES > size:
        return None
    crc = 0
    for start in range(0, total, _CHUNK_BYTES):
        crc = zlib.crc32(os.pread(fd, min(_CHUNK_BYTES, total - start), start), crc)
    trailer = os.pread(fd, _TRAILER_BYTES, total)
    if trailer != encode_trailer(crc):
        return None
    entries = []
    position = _HEAD.size
    for _ in range(n_entries):
        if position + _ENTRY.size > total:
            return None
        offset, length, kind, zero = _ENTRY.unpack(os.pread(fd, _ENTRY.size, position))
        position += _ENTRY.size
        if kind not in (BYTES, ZEROS) or zero or offset + length > _MAX_FILE_OFFSET:
            return None
        entries.append(Entry(offset, length, kind, position))
        if kind == BYTES:
            position += length
    if position != total or end > _MAX_FILE_OFFSET:
        return None
    return Record(file_id, base, new, end, tuple(entries))


def apply_record(log_fd: int, file_fd: int, record: Record) -> None:
    """Copy every entry of ``record`` into the file (no fsync; the caller syncs once)."""
    for entry in record.entries:
        if entry.kind == ZEROS:
            zero_range(file_fd, entry.offset, entry.length)
            continue
        for start in range(0, entry.length, _CHUNK_BYTES):
            chunk = os.pread(log_fd, min(_CHUNK_BYTES, entry.length - start),
                             entry.position + start)
            pwrite_all(file_fd, chunk, entry.offset + start)


def pwrite_all(fd: int, data: Data, offset: int) -> None:
    """``os.pwrite`` until every byte is written."""
    with memoryview(data) as view:
        done = 0
        while done < len(view):
            done += os.pwrite(fd, view[done:], offset + done)
