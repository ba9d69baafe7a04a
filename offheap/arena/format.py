"""The arena file format, version 3 (layer 3, pure: bytes in, values out; no IO).

A file arena is one header page followed by *extents*, back to back, each a whole number of
pages. All integers are little-endian. ``PAGE_BYTES`` is the system page (4 KiB on x86-64 and
arm64 Linux); the header records it, and a file written with another page size does not open.

Header, the first ``HEADER_BYTES`` (4096) bytes::

    0   8s  magic b"OFFHEAP\\x01"
    8   u32 format version (3)
    12  u32 crc32 of header bytes 16..4095
    16  u64 generation: +1 per commit (and per writer open without transactions)
    24  u64 file end: the extents end here; bytes past it are not part of the arena
    32  u64 offset of the checksum extent
    40  u32 crc32 of the whole checksum extent (tag, entries, padding)
    44  u32 bytes covered by one page checksum (PAGE_BYTES)
    48  u8  durability of the last writer: 0 "none", 1 "commit"
    49  u8  flags: bit 0 "open for writing" (a writer without transactions has the file),
            bit 1 "replaced" (another file was renamed over this one's path: its readers
            must open the path again), bit 2 "applying" (a commit is being copied into the
            file; the header that copy writes last clears it)
    50  u16 zero
    52  u32 root blob length
    56  u64 root extent offset (0: the root blob is inline, below)
    64  u64 file id: random and non-zero, chosen when the file is created; every record of
            the write-ahead log names it, so a log never applies to another file
    72  ... root blob, inline when it fits (up to INLINE_ROOT_BYTES), then zeros

Version 2 had no file id (the inline root began at 64); it is refused, as version 1 is.

Extent tag, the first ``TAG_BYTES`` (64) bytes of every extent; the payload follows, so it is
64-byte aligned::

    0   8s  magic b"OHEXTENT"
    8   u64 extent size in bytes (tag included)
    16  u64 payload bytes requested by the owner (0 unless live)
    24  u32 state: 1 live, 2 free, 3 checksum extent
    28  u32 crc32 of tag bytes 0..27
    32  zeros

Checksum extent: after its tag, one u32 per page of the file, ``crc32`` of page ``i`` (file bytes
``i * PAGE_BYTES`` up to the next page) at payload position ``4 * i``, for every page of a live
extent. Entries of the header page, of free pages and of the checksum extent's own pages mean
nothing (a page keeps its last value until it is live again); the header's crc covers the
checksum extent itself.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from dataclasses import dataclass

from offheap.errors import CorruptionError

PAGE_BYTES = mmap.PAGESIZE
HEADER_BYTES = 4096
TAG_BYTES = 64
MAGIC = b"OFFHEAP\x01"
FORMAT_VERSION = 3
LIVE, FREE, CHECKSUMS = 1, 2, 3
DURABILITY_CODES = {"none": 0, "commit": 1}
FLAG_OPEN_FOR_WRITING = 1
FLAG_REPLACED = 2
FLAG_APPLYING = 4
_KNOWN_FLAGS = FLAG_OPEN_FOR_WRITING | FLAG_REPLACED | FLAG_APPLYING

_HEADER = struct.Struct("<8sIIQQQIIBBHIQQ")
_TAG = struct.Struct("<8sQQI")
_TAG_MAGIC = b"OHEXTENT"
INLINE_ROOT_BYTES = HEADER_BYTES - _HEADER.size
assert _HEADER.size == 72


@dataclass(frozen=True)
class Header:
    """The fields of a header page."""

    generation: int
    end: int
    checksum_offset: int
    checksum_crc: int
    durability: str
    open_for_writing: bool
    root_offset: int
    root_length: int
    inline_root: bytes  # the root blob when root_offset == 0, else b""
    file_id: int = 0
    replaced: bool = False
    applying: bool = False


@dataclass(frozen=True)
class Tag:
    """The fields of an extent tag."""

    size: int
    payload: int
    state: int


def encode_header(header: Header) -> bytes:
    """The ``HEADER_BYTES`` bytes of ``header``."""
    flags = ((FLAG_OPEN_FOR_WRITING if header.open_for_writing else 0)
             | (FLAG_REPLACED if header.replaced else 0)
             | (FLAG_APPLYING if header.applying else 0))
    fields = _HEADER.pack(MAGIC, FORMAT_VERSION, 0, header.generation, header.end,
                          header.checksum_offset, header.checksum_crc, PAGE_BYTES,
                          DURABILITY_CODES[header.durability], flags, 0, header.root_length,
                          header.root_offset, header.file_id)
    page = bytearray((fields + header.inline_root).ljust(HEADER_BYTES, b"\0"))
    struct.pack_into("<I", page, 12, zlib.crc32(memoryview(page)[16:]))
    return bytes(page)


def parse_header(page: bytes, path: str) -> Header:
    """The header in ``page`` (the file's first bytes); CorruptionError naming ``path`` if bad."""
    if len(page) < HEADER_BYTES or page[:8] != MAGIC:
        raise CorruptionError(f"{path!r} is not an offheap file (bad magic or shorter than its "
                              f"{HEADER_BYTES}-byte header)")
    version = struct.unpack_from("<I", page, 8)[0]
    if version != FORMAT_VERSION:
        raise CorruptionError(f"{path!r} has format version {version}; this offheap reads "
                              f"{FORMAT_VERSION}: rewrite it with the offheap that made it")
    (_, _, crc, generation, end, checksum_offset, checksum_crc, page_bytes, durability, flags,
     zero, root_length, root_offset, file_id) = _HEADER.unpack_from(page)
    if zlib.crc32(memoryview(page)[16:HEADER_BYTES]) != crc:
        raise CorruptionError(f"{path!r}: header checksum mismatch at offset 0 "
                              f"(the header is damaged)")
    codes = {code: name for name, code in DURABILITY_CODES.items()}
    problem = None
    if page_bytes != PAGE_BYTES:
        problem = f"it was written with {page_bytes}-byte pages, this system has {PAGE_BYTES}"
    elif durability not in codes or flags & ~_KNOWN_FLAGS or zero or not file_id:
        problem = "unknown durability or flags, or no file id"
    elif end < HEADER_BYTES or end % PAGE_BYTES:
        problem = f"file end {end} is not a whole number of pages after the header"
    elif not HEADER_BYTES <= checksum_offset < end or checksum_offset % PAGE_BYTES:
        problem = f"checksum extent offset {checksum_offset} lies outside the file end {end}"
    elif root_offset and (not HEADER_BYTES <= root_offset < end or root_offset % PAGE_BYTES):
        problem = f"root extent offset {root_offset} lies outside the file end {end}"
    elif not root_offset and root_length > INLINE_ROOT_BYTES:
        problem = f"inline root length {root_length} exceeds {INLINE_ROOT_BYTES}"
    if problem:
        raise CorruptionError(f"{path!r}: bad header at offset 0: {problem}")
    inline = b"" if root_offset else bytes(page[_HEADER.size: _HEADER.size + root_length])
    return Header(generation, end, checksum_offset, checksum_crc, codes[durability],
                  bool(flags & FLAG_OPEN_FOR_WRITING), root_offset, root_length, inline,
                  file_id, bool(flags & FLAG_REPLACED), bool(flags & FLAG_APPLYING))


_GENERATION_AND_FLAGS = struct.Struct("<16xQ25xB")


def peek_generation_and_flags(page) -> tuple[int, int]:
    """The generation and flags fields of a header page, unchecked: a reader's cheap test
    between commits (O(1), no crc), for a header it read whole and checked before."""
    return _GENERATION_AND_FLAGS.unpack_from(page)


def encode_tag(size: int, payload: int, state: int) -> bytes:
    """The ``TAG_BYTES`` bytes of an extent tag."""
    fields = _TAG.pack(_TAG_MAGIC, size, payload, state)
    return (fields + struct.pack("<I", zlib.crc32(fields))).ljust(TAG_BYTES, b"\0")


def parse_tag(data: bytes, offset: int, end: int, path: str) -> Tag:
    """The tag in ``data`` (read at file ``offset``); CorruptionError unless it is intact and
    its extent fits between ``offset`` and the file ``end``."""
    if len(data) < _TAG.size + 4:
        raise CorruptionError(f"{path!r}: extent tag at offset {offset} is truncated")
    magic, size, payload, state = _TAG.unpack_from(data)
    (crc,) = struct.unpack_from("<I", data, _TAG.size)
    if (magic != _TAG_MAGIC or zlib.crc32(memoryview(data)[: _TAG.size]) != crc
            or size < PAGE_BYTES or size % PAGE_BYTES or offset + size > end
            or state not in (LIVE, FREE, CHECKSUMS) or payload > size - TAG_BYTES
            or (state != LIVE and payload)):
        raise CorruptionError(f"{path!r}: extent tag at offset {offset} is damaged")
    return Tag(size, payload, state)
