"""What an arena file holds, read from its descriptor (layer 3, private to the arena).

:func:`read_file_state` reads and checks the header and the checksum extent, walks the extent
tags from the header to the file end and reads the root blob; it returns a :class:`FileState`
and keeps no descriptor or mapping. The arena calls it when it opens a file and when a reader
picks up another process's commit; a durable writer keeps the state of its last commit as a
:class:`FileState` to roll back to. The layouts it checks are specified in
:mod:`offheap.arena.format`.

Normally any damage raises :class:`CorruptionError` naming the file and the offset. In recover
mode nothing damaged raises: the walk skips what it cannot read, every live page is checked,
and the result's ``damage`` (:class:`~offheap.arena.damage.FileDamage`) says what was wrong.

Cost: O(extents) reads for the walk, plus O(live bytes) (about 0.5 s per GiB) when verifying
the page checksums.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from offheap.arena.checksums import ChecksumTable, page_crcs, page_numbers
from offheap.arena.damage import FileDamage
from offheap.arena.extents import ExtentShape
from offheap.arena.format import (
    CHECKSUMS,
    HEADER_BYTES,
    LIVE,
    PAGE_BYTES,
    TAG_BYTES,
    Tag,
    parse_header,
    parse_tag,
)
from offheap.arena.recovery import half_applied_error
from offheap.errors import CorruptionError

_VERIFY_CHUNK_BYTES = 8 << 20


@dataclass(frozen=True)
class FileState:
    """An arena file's extent table, free space, checksums and root, as of one generation.

    ``live`` maps the offset of every live extent to its shape; ``free`` maps free extents to
    their sizes; ``end`` is where the extents end. ``table`` is shared, not copied: whoever
    holds a state must not change its table in place. ``damage`` is set in recover mode only.
    """

    generation: int
    end: int
    live: dict[int, ExtentShape]
    free: dict[int, int]
    table: ChecksumTable
    table_offset: int
    root: bytes
    root_offset: int
    file_id: int
    damage: FileDamage | None = None

    @classmethod
    def new(cls, file_id: int) -> FileState:
        """The state of a new file: the header page and an empty one-page checksum extent."""
        return cls(generation=0, end=HEADER_BYTES + PAGE_BYTES, live={}, free={},
                   table=ChecksumTable.empty(PAGE_BYTES), table_offset=HEADER_BYTES, root=b"",
                   root_offset=0, file_id=file_id)


def empty_file_error(path: str) -> CorruptionError:
    """The error for a file of 0 bytes where an arena was expected: opening it as a new store
    would overwrite whatever the file was meant to be (offheap never leaves one behind)."""
    return CorruptionError(f"{path!r} is empty (0 bytes): it holds no offheap store, and it is "
                           f"not taken for a new one. To start a new store there, remove the "
                           f"file (or open it with replace=True, which replaces it)")


def read_file_state(fd: int, path: str, *, verify: bool, recover: bool) -> FileState:
    """Read and check the header and the checksum extent, walk the tags, read the root.

    ``verify`` checks every live page against its checksum (unless the file was left open
    for writing, whose checksums describe its last clean close). In recover mode the walk is
    not held to the header's recorded end: without transactions the header is rewritten only
    at flush and close while extents are added in between, so the walk goes on up to the
    file's size (as far as the checksum extent covers it). There a tag that fails its checks
    ends the walk (nothing was appended after it) and the rest of the file is lost; inside the
    recorded end the walk skips page by page to the next intact tag, and the skipped range is
    lost. Both are listed in the state's ``damage``, as is every live page that fails its
    checksum (all of them checked, none raised).
    """
    file_bytes = os.fstat(fd).st_size
    header = parse_header(os.pread(fd, HEADER_BYTES, 0), path)
    if header.open_for_writing and not recover:
        raise CorruptionError(
            f"{path!r} was not closed cleanly: a writer with durability='none' had it open "
            f"when its process ended, so its pages may be half-written. Copy out what is "
            f"there with offheap.salvage({path!r}, new_path), or open it with recover=True "
            f"to read it without checks")
    if header.applying and not recover:
        raise half_applied_error(fd, path)
    if header.end > file_bytes and not recover:
        raise CorruptionError(f"{path!r} is truncated: the header describes {header.end} "
                              f"bytes, the file has {file_bytes}")
    limit = file_bytes // PAGE_BYTES * PAGE_BYTES if recover else header.end
    table_at = header.checksum_offset
    table_tag = parse_tag(os.pread(fd, TAG_BYTES, table_at), table_at, limit, path)
    if table_tag.state != CHECKSUMS:
        raise CorruptionError(f"{path!r}: the checksum extent at offset {table_at} is "
                              f"missing")
    image = bytearray(os.pread(fd, table_tag.size, table_at))
    if zlib.crc32(image) != header.checksum_crc and not recover:
        raise CorruptionError(f"{path!r}: the checksum extent at offset {table_at} is "
                              f"damaged (crc mismatch)")
    table = ChecksumTable(image)
    if recover:
        limit = min(limit, table.capacity * PAGE_BYTES)
    elif table.capacity * PAGE_BYTES < header.end:
        raise CorruptionError(f"{path!r}: the checksum extent at offset {table_at} covers "
                              f"{table.capacity} pages, the file has "
                              f"{header.end // PAGE_BYTES}")
    walk = _TagWalk(fd, path, limit, table_at, table_tag.size)
    live, free, lost = walk.extents(header.end, recover)
    end = limit
    if lost and sum(lost[-1]) == limit:  # the walk stopped there
        end = lost.pop()[0]
    if end < max(limit, header.end):  # the rest is lost, up to the recorded end at least
        lost.append((end, max(limit, header.end) - end))
    root = header.inline_root
    if header.root_offset:
        if (header.root_offset not in live
                or header.root_length > live[header.root_offset].size - TAG_BYTES):
            raise CorruptionError(f"{path!r}: root extent at offset {header.root_offset} "
                                  f"is missing or too small")
        root = os.pread(fd, header.root_length, header.root_offset + TAG_BYTES)
    checked = verify and not header.open_for_writing
    failed = _failed_pages(fd, path, live, table, first_only=not recover) if checked else ()
    if failed and not recover:
        raise CorruptionError(f"{path!r}: the page at offset {failed[0]} fails its "
                              f"checksum (the file is damaged)")
    damage = None
    if recover:
        root_failed = bool(header.root_offset) and bool(FileDamage(
            failed_pages=failed).items_touching(header.root_offset + TAG_BYTES,
                                                header.root_length, 1)[0])
        damage = FileDamage(checked, header.open_for_writing,
                            zlib.crc32(image) == header.checksum_crc, failed, root_failed,
                            tuple(lost))
    return FileState(header.generation, end, live, free, table, table_at, root,
                     header.root_offset, header.file_id, damage)


@dataclass(frozen=True)
class _TagWalk:
    """The walk over the extent tags of one file, up to ``limit``, around the checksum
    extent of ``table_bytes`` at ``table_at``."""

    fd: int
    path: str
    limit: int
    table_at: int
    table_bytes: int

    def extents(self, recorded_end: int,
                recover: bool) -> tuple[dict[int, ExtentShape], dict[int, int],
                                        list[tuple[int, int]]]:
        """The live extents, free extents and lost ranges (recover mode only; a damaged
        tag raises otherwise) that the tags from the header up to ``limit`` describe."""
        live: dict[int, ExtentShape] = {}
        free: dict[int, int] = {}
        lost: list[tuple[int, int]] = []
        offset = HEADER_BYTES
        while offset < self.limit:
            if offset == self.table_at:
                offset += self.table_bytes
                continue
            try:
                tag = self.tag_at(offset)
            except CorruptionError:
                if not recover:
                    raise
                resume = self.limit if offset >= recorded_end else self.next_tag(offset)
                lost.append((offset, resume - offset))
                offset = resume
                continue
            if tag.state == LIVE:
                live[offset] = ExtentShape(tag.size, tag.payload)
            else:
                free[offset] = tag.size
            offset += tag.size
        return live, free, lost

    def tag_at(self, offset: int) -> Tag:
        """The intact tag of a live or free extent at ``offset`` that ends by ``limit`` and does
        not overlap the checksum extent; CorruptionError otherwise."""
        tag = parse_tag(os.pread(self.fd, TAG_BYTES, offset), offset, self.limit, self.path)
        if tag.state == CHECKSUMS:
            raise CorruptionError(f"{self.path!r}: extent tag at offset {offset} names a "
                                  f"checksum extent the header does not")
        if offset < self.table_at < offset + tag.size:
            raise CorruptionError(f"{self.path!r}: the extent at offset {offset} overlaps the "
                                  f"checksum extent at offset {self.table_at}")
        return tag

    def next_tag(self, offset: int) -> int:
        """The first page after ``offset`` where an intact tag (or the checksum extent) starts;
        ``limit`` when there is none. One read per page skipped."""
        for candidate in range(offset + PAGE_BYTES, self.limit, PAGE_BYTES):
            if candidate == self.table_at:
                return candidate
            try:
                self.tag_at(candidate)
            except CorruptionError:
                continue
            return candidate
        return self.limit


def file_page_crcs(fd: int, path: str, offset: int,
                   size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield ``(page numbers, crc32 of each)`` for the file's pages of one extent, reading
    it in chunks of ``_VERIFY_CHUNK_BYTES``."""
    buffer = bytearray(min(size, _VERIFY_CHUNK_BYTES))
    for start in range(offset, offset + size, len(buffer)):
        count = min(len(buffer), offset + size - start)
        with memoryview(buffer)[:count] as chunk:
            if os.preadv(fd, [chunk], start) != count:
                raise CorruptionError(f"{path!r} is truncated at offset {start}")
            yield page_numbers(start, count // PAGE_BYTES), page_crcs(chunk)


def _failed_pages(fd: int, path: str, live: dict[int, ExtentShape], table: ChecksumTable, *,
                  first_only: bool) -> tuple[int, ...]:
    """File offsets of the live pages whose crc differs from ``table`` (only the first one
    found when ``first_only``), ascending. O(live bytes)."""
    failed: list[int] = []
    for offset, shape in sorted(live.items()):
        for pages, crcs in file_page_crcs(fd, path, offset, shape.size):
            failed.extend(int(page) * PAGE_BYTES for page in table.mismatches(pages, crcs))
            if failed and first_only:
                return tuple(failed[:1])
    return tuple(failed)
