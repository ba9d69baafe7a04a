"""The arena (layer 3): every byte offheap stores lives in memory handed out here.

An arena is a set of *extents*, each its own memory mapping: anonymous memory (``mmap(-1, n)``)
or a page-aligned range of one file. Extents are never resized in place, because a mapping whose
buffer is exported to numpy cannot be resized; a structure that grows allocates a larger extent,
copies, and frees the old one. This module is the only one in offheap that maps memory or opens a
file for a collection.

Accounting is exact: ``reserved_bytes`` is the header plus the mapped size of every live extent,
``used_bytes`` the sum of the payload sizes callers asked for. ``limit_bytes`` bounds
``reserved_bytes``: :meth:`Arena.allocate` raises :class:`CapacityError` *before* mapping anything
that would cross it, the analogue of Java's ``-XX:MaxDirectMemorySize``.

File layout (all integers little-endian)::

    offset 0, HEADER_BYTES (4096) bytes: the header
        0   8s  magic  b"OFFHEAP\\x01"
        8   u32 format version (1)
        12  u32 crc32 of bytes 16..4095 of the header
        16  u64 file size the header describes (extents end there)
        24  u64 root extent offset (0: the root blob is inline, below)
        32  u32 root blob length
        36  ... root blob, inline when it fits in the header
    then extents, back to back, each a multiple of PAGE_BYTES, each starting with a tag:
        0   8s  magic b"OHEXTENT"
        8   u64 extent size in bytes (tag included)
        16  u64 payload bytes requested by the caller (0 for a free extent)
        24  u32 state: 1 live, 2 free
        28  u32 crc32 of tag bytes 0..27
    the payload follows the tag at offset TAG_BYTES (64), so it is 64-byte aligned.

The *root blob* is a small byte string owned by the layer directly above the arena (the record
store, or a standalone hash map): where its own metadata lives. Free extents of a file arena are
found again on open by walking the tags; a free extent at the end of the file is cut off.

Thread safety: none; the owner of an arena serializes access to it.
"""

from __future__ import annotations

import mmap
import os
import struct
import zlib
from dataclasses import dataclass

import numpy as np

from offheap.errors import CapacityError, ClosedError, CorruptionError

PAGE_BYTES = mmap.PAGESIZE
HEADER_BYTES = 4096
TAG_BYTES = 64
MAGIC = b"OFFHEAP\x01"
FORMAT_VERSION = 1
_HEADER = struct.Struct("<8sIIQQI")
_TAG = struct.Struct("<8sQQI")
_TAG_MAGIC = b"OHEXTENT"
_LIVE, _FREE = 1, 2
_INLINE_ROOT_BYTES = HEADER_BYTES - _HEADER.size


def _round_to_pages(nbytes: int) -> int:
    return -(-nbytes // PAGE_BYTES) * PAGE_BYTES


def format_bytes(nbytes: float) -> str:
    """Render a byte count for people: ``1.5 MiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(nbytes) < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class ArenaStats:
    """A snapshot of an arena's accounting."""

    reserved_bytes: int
    used_bytes: int
    free_bytes: int
    n_extents: int
    limit_bytes: int | None


class Arena:
    """Extents of anonymous or file-backed memory under one hard limit.

    Build one with :meth:`anonymous` or :meth:`file`. An extent is named by its ``offset``
    (its position in the file, or a unique number for anonymous memory); owners keep offsets in
    their metadata and ask for views with :meth:`view` or :meth:`array`. Views returned here point
    into the mapping: the owner must drop them before :meth:`free` of that extent. :meth:`close`
    unmaps every extent whose buffer is no longer exported; one still exported (a zero-copy view a
    user asked for) stays mapped until its last view is gone, so a stale view never faults.
    """

    def __init__(self, *, path: str | None, limit_bytes: int | None, readonly: bool) -> None:
        if limit_bytes is not None and limit_bytes < HEADER_BYTES:
            raise ValueError(f"limit_bytes must be at least {HEADER_BYTES}, got {limit_bytes}")
        self.path = path
        self.limit_bytes = limit_bytes
        self.readonly = readonly
        self._fd: int | None = None
        self._maps: dict[int, mmap.mmap] = {}
        self._sizes: dict[int, int] = {}  # live extent offset -> extent size
        self._payload: dict[int, int] = {}  # live extent offset -> payload bytes requested
        self._free: dict[int, int] = {}  # free extent offset -> size (file arenas only)
        self._end = HEADER_BYTES  # next offset to hand out (the file size for file arenas)
        self._root = b""
        self._root_offset = 0
        self._closed = False

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def anonymous(cls, limit_bytes: int | None = None) -> Arena:
        """An arena of anonymous memory, returned to the OS extent by extent on free/close."""
        return cls(path=None, limit_bytes=limit_bytes, readonly=False)

    @classmethod
    def file(cls, path: str | os.PathLike, *, limit_bytes: int | None = None,
             readonly: bool = False, create: bool | None = None) -> Arena:
        """Open the arena stored in ``path``, or create it (``create=None``: if it is missing).

        Raises :class:`CorruptionError` when the file is not an offheap arena or is damaged.
        """
        path = os.fspath(path)
        exists = os.path.exists(path) and os.path.getsize(path) > 0
        if create is None:
            create = not exists
        if create and readonly:
            raise ValueError(f"cannot create {path!r} read-only")
        arena = cls(path=path, limit_bytes=limit_bytes, readonly=readonly)
        flags = os.O_RDONLY if readonly else os.O_RDWR | (os.O_CREAT | os.O_TRUNC if create else 0)
        arena._fd = os.open(path, flags, 0o644)
        try:
            if create:
                os.ftruncate(arena._fd, HEADER_BYTES)
                arena._write_header()
            else:
                arena._load()
        except BaseException:
            os.close(arena._fd)
            arena._fd = None
            raise
        return arena

    # -- allocation ---------------------------------------------------------------------------

    def allocate(self, nbytes: int) -> int:
        """Map a new extent with at least ``nbytes`` of zeroed payload; return its offset.

        Raises :class:`CapacityError` (and changes nothing) when the extent would take
        ``reserved_bytes`` past ``limit_bytes``.
        """
        self._check_writable()
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        size = _round_to_pages(nbytes + TAG_BYTES)
        reserved = self.reserved_bytes
        if self.limit_bytes is not None and reserved + size > self.limit_bytes:
            raise CapacityError(
                f"arena limit of {format_bytes(self.limit_bytes)} reached: "
                f"{format_bytes(reserved)} reserved, {format_bytes(size)} more needed; "
                f"pass a larger limit=, delete entries, or use compression")
        offset = self._take_free(size) if self._fd is not None else None
        if offset is None:
            offset = self._end
            if self._fd is not None:
                os.ftruncate(self._fd, offset + size)
            self._end += size
        mm = self._map(offset, size)
        self._sizes[offset] = size
        self._payload[offset] = nbytes
        self._maps[offset] = mm
        self._write_tag(offset, size, nbytes, _LIVE)
        return offset

    def free(self, offset: int) -> None:
        """Unmap extent ``offset`` and give its memory back (anonymous) or mark it free (file)."""
        self._check_writable()
        size = self._sizes.pop(offset)
        del self._payload[offset]
        mm = self._maps.pop(offset)
        if self._fd is None:
            mm.close()
            return
        self._write_tag_into(mm, size, 0, _FREE)
        mm.close()
        self._release_file_range(offset, size)

    # -- access -------------------------------------------------------------------------------

    def view(self, offset: int) -> memoryview:
        """A writable memoryview of extent ``offset``'s payload (read-only for readonly arenas)."""
        self._check_open()
        mm = self._maps.get(offset)
        if mm is None:
            if offset not in self._sizes:
                raise KeyError(f"no live extent at offset {offset}")
            mm = self._maps[offset] = self._map(offset, self._sizes[offset])
        return memoryview(mm)[TAG_BYTES:]

    def array(self, offset: int, dtype, count: int, start: int = 0) -> np.ndarray:
        """A numpy view of ``count`` items of ``dtype`` at byte ``start`` of an extent's payload."""
        return np.frombuffer(self.view(offset), dtype=dtype, count=count, offset=start)

    def payload_bytes(self, offset: int) -> int:
        """Usable payload bytes of extent ``offset`` (at least what was asked for)."""
        return self._sizes[offset] - TAG_BYTES

    # -- root blob ----------------------------------------------------------------------------

    @property
    def root(self) -> bytes:
        """The owner's metadata blob (persisted by :meth:`flush` in file arenas)."""
        self._check_open()
        return self._root

    def set_root(self, blob: bytes) -> None:
        """Replace the root blob; a large one is kept in an extent of its own."""
        self._check_writable()
        blob = bytes(blob)
        if self._root_offset:
            self.free(self._root_offset)
            self._root_offset = 0
        if len(blob) > _INLINE_ROOT_BYTES:
            self._root_offset = self.allocate(len(blob))
            self.view(self._root_offset)[: len(blob)] = blob
        self._root = blob

    # -- accounting ---------------------------------------------------------------------------

    @property
    def reserved_bytes(self) -> int:
        return HEADER_BYTES + sum(self._sizes.values())

    @property
    def used_bytes(self) -> int:
        return sum(self._payload.values())

    def stats(self) -> ArenaStats:
        return ArenaStats(self.reserved_bytes, self.used_bytes, sum(self._free.values()),
                          len(self._sizes), self.limit_bytes)

    # -- lifetime -----------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def flush(self) -> None:
        """Write the header and push dirty pages of a file arena to the file (no-op if anonymous)."""
        self._check_open()
        if self._fd is None or self.readonly:
            return
        self._write_header()
        for mm in self._maps.values():
            mm.flush()

    def close(self) -> None:
        """Flush (file arenas) and unmap; idempotent."""
        if self._closed:
            return
        try:
            if self._fd is not None and not self.readonly:
                self.flush()
        finally:
            for mm in self._maps.values():
                try:
                    mm.close()
                except BufferError:
                    pass  # a user still holds a zero-copy view: it unmaps when that view dies
            self._maps.clear()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self._closed = True

    def __enter__(self) -> Arena:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self.path or "anonymous"
        limit = format_bytes(self.limit_bytes) if self.limit_bytes is not None else "none"
        state = "closed" if self._closed else f"{format_bytes(self.reserved_bytes)} reserved"
        return f"<Arena {where}: {state}, limit {limit}>"

    # -- internals ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the arena is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self.readonly:
            raise PermissionError(f"arena {self.path!r} was opened read-only")

    def _map(self, offset: int, size: int) -> mmap.mmap:
        if self._fd is None:
            return mmap.mmap(-1, size)
        access = mmap.ACCESS_READ if self.readonly else mmap.ACCESS_WRITE
        return mmap.mmap(self._fd, size, offset=offset, access=access)

    def _take_free(self, size: int) -> int | None:
        """First fit among free file extents, splitting off the rest; None if nothing fits."""
        for offset, free_size in sorted(self._free.items()):
            if free_size >= size:
                del self._free[offset]
                if free_size > size:
                    self._free[offset + size] = free_size - size
                    self._write_free_tag(offset + size, free_size - size)
                self._zero_file_range(offset, size)
                return offset
        return None

    def _zero_file_range(self, offset: int, size: int) -> None:
        """Make a reused file range read as zeros, like a fresh extent."""
        os.pwrite(self._fd, bytes(TAG_BYTES), offset)
        chunk = bytes(min(size, 1 << 20))
        for start in range(offset, offset + size, len(chunk)):
            os.pwrite(self._fd, chunk[: min(len(chunk), offset + size - start)], start)

    def _release_file_range(self, offset: int, size: int) -> None:
        """Mark a file range free, merging neighbours; cut it off if it ends the file."""
        following = offset + size
        if following in self._free:
            size += self._free.pop(following)
        for prev_offset, prev_size in list(self._free.items()):
            if prev_offset + prev_size == offset:
                del self._free[prev_offset]
                offset, size = prev_offset, prev_size + size
                break
        if offset + size == self._end:
            self._end = offset
            os.ftruncate(self._fd, offset)
            self._write_header()
        else:
            self._free[offset] = size
            self._write_free_tag(offset, size)

    def _write_free_tag(self, offset: int, size: int) -> None:
        os.pwrite(self._fd, self._tag_bytes(size, 0, _FREE), offset)

    def _write_tag(self, offset: int, size: int, payload: int, state: int) -> None:
        self._write_tag_into(self._maps[offset], size, payload, state)

    def _write_tag_into(self, mm: mmap.mmap, size: int, payload: int, state: int) -> None:
        mm[:TAG_BYTES] = self._tag_bytes(size, payload, state)

    @staticmethod
    def _tag_bytes(size: int, payload: int, state: int) -> bytes:
        fields = _TAG.pack(_TAG_MAGIC, size, payload, state)
        return (fields + struct.pack("<I", zlib.crc32(fields))).ljust(TAG_BYTES, b"\0")

    def _header_bytes(self) -> bytes:
        inline = b"" if self._root_offset else self._root
        body = struct.pack("<QQI", self._end, self._root_offset, len(self._root)) + inline
        body = body.ljust(HEADER_BYTES - 16, b"\0")
        return MAGIC + struct.pack("<II", FORMAT_VERSION, zlib.crc32(body)) + body

    def _write_header(self) -> None:
        os.pwrite(self._fd, self._header_bytes(), 0)

    def _load(self) -> None:
        """Read the header and walk the extent tags of an existing file."""
        file_size = os.fstat(self._fd).st_size
        header = os.pread(self._fd, HEADER_BYTES, 0)
        if len(header) < HEADER_BYTES or header[:8] != MAGIC:
            raise CorruptionError(f"{self.path!r} is not an offheap file (bad magic or too short)")
        version, crc = struct.unpack_from("<II", header, 8)
        if version != FORMAT_VERSION:
            raise CorruptionError(f"{self.path!r} has format version {version}; "
                                  f"this offheap reads version {FORMAT_VERSION}")
        if zlib.crc32(header[16:]) != crc:
            raise CorruptionError(f"{self.path!r}: header checksum mismatch (the header is damaged)")
        end, root_offset, root_len = struct.unpack_from("<QQI", header, 16)
        if end > file_size:
            raise CorruptionError(f"{self.path!r} is truncated: the header describes {end} bytes, "
                                  f"the file has {file_size}")
        offset = HEADER_BYTES
        while offset < end:
            tag = os.pread(self._fd, _TAG.size + 4, offset)
            if len(tag) < _TAG.size + 4:
                raise CorruptionError(f"{self.path!r}: extent tag at offset {offset} is truncated")
            magic, size, payload, state = _TAG.unpack_from(tag)
            (crc,) = struct.unpack_from("<I", tag, _TAG.size)
            if (magic != _TAG_MAGIC or zlib.crc32(tag[: _TAG.size]) != crc
                    or size < PAGE_BYTES or size % PAGE_BYTES or offset + size > end
                    or state not in (_LIVE, _FREE)):
                raise CorruptionError(f"{self.path!r}: extent tag at offset {offset} is damaged")
            if state == _LIVE:
                self._sizes[offset] = size
                self._payload[offset] = payload
            else:
                self._free[offset] = size
            offset += size
        self._end = end
        self._root_offset = root_offset
        if root_offset:
            if root_offset not in self._sizes or root_len > self.payload_bytes(root_offset):
                raise CorruptionError(f"{self.path!r}: root extent {root_offset} is missing")
            self._root = bytes(self.view(root_offset)[:root_len])
        else:
            if root_len > _INLINE_ROOT_BYTES:
                raise CorruptionError(f"{self.path!r}: root length {root_len} is out of range")
            self._root = header[_HEADER.size: _HEADER.size + root_len]
