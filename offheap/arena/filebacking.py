"""What the modes of a file arena share: the picture of the file's layout (layer 3, private).

A :class:`FileBacking` holds an open :class:`~offheap.arena.arenafile.ArenaFile` and the arena's
picture of it: the live extents, free space (:mod:`offheap.arena.freespace`), the checksum
table and where it lies, the root blob, the generation and the file id. It loads that picture
from a :class:`~offheap.arena.filestate.FileState` and takes one back (:meth:`snapshot`); the
writers change it, the reader reloads it.

The extents tile the file from the header to ``end``: every byte belongs to one live extent,
one free extent (reusable, or pending until a commit frees it in the file) or the checksum
extent, whose entries cover at least every page up to ``end`` (:meth:`FileBacking.check`).
"""

from __future__ import annotations

import mmap
import os
from typing import ClassVar

from offheap.arena.arenafile import ArenaFile
from offheap.arena.backing import Backing
from offheap.arena.checksums import ChecksumTable, extent_bytes_for, pages_covered
from offheap.arena.damage import FileDamage
from offheap.arena.extents import Extent
from offheap.arena.filestate import FileState
from offheap.arena.format import HEADER_BYTES, PAGE_BYTES
from offheap.arena.freespace import FreeSpace


def placement(space: FreeSpace, end: int, capacity_pages: int,
              size: int) -> tuple[int | None, int, int]:
    """Where an extent of ``size`` bytes goes in a file that ends at ``end`` and whose checksum
    extent covers ``capacity_pages`` pages: the free offset it reuses (None: it is appended at
    ``end``), the file's end after it, and the size of the larger checksum extent the file then
    needs (appended after it), or 0 when the current one covers it. First fit: O(free extents).
    """
    offset = space.first_fit(size)
    if offset is None:
        end += size
    if capacity_pages * PAGE_BYTES >= end:
        return offset, end, 0
    n_pages = 2 * (end // PAGE_BYTES)
    while n_pages * PAGE_BYTES < end + extent_bytes_for(n_pages):
        n_pages *= 2
    return offset, end, extent_bytes_for(n_pages)


class FileBacking(Backing):
    """An arena file's layout as this process sees it; see the module docstring.

    ``damage`` is what the open found (recover mode); reloads do not change it.
    """

    access: ClassVar[int]
    """How the mode maps the file's extents: ``mmap.ACCESS_READ``, ``_WRITE`` or ``_COPY``."""

    space: FreeSpace
    table: ChecksumTable
    table_offset: int
    file_id: int
    _generation: int

    def __init__(self, file: ArenaFile, state: FileState) -> None:
        super().__init__()
        self.file = file
        self._damage = state.damage
        self.install(state)

    def install(self, state: FileState) -> tuple[list[Extent], bool]:
        """Make the picture that of ``state``. Mappings of extents that keep their offset and
        size stay; the others are unmapped. Returns the extents that kept their mapping and
        whether every other mapping could be closed (a view may keep one alive)."""
        self._generation = state.generation
        self.end = state.end
        kept = self.extents.install(state.live)
        self.space = FreeSpace(state.free)
        self.table, self.table_offset = state.table, state.table_offset
        self.root, self.root_offset = state.root, state.root_offset
        self.file_id = state.file_id
        self.file.refresh_size()
        return kept

    def snapshot(self) -> FileState:
        """The picture as a state (sharing the checksum table, which must not change in place)."""
        return FileState(self._generation, self.end, self.extents.shapes(),
                         dict(self.space.free), self.table, self.table_offset, self.root,
                         self.root_offset, self.file_id)

    @property
    def path(self) -> str:
        return self.file.path

    @property
    def overhead_bytes(self) -> int:
        return HEADER_BYTES + self.table.extent_bytes

    @property
    def free_bytes(self) -> int:
        return self.space.total_bytes

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def damage(self) -> FileDamage | None:
        return self._damage

    def map_extent(self, extent: Extent) -> mmap.mmap:
        """Map the extent's range of the file with the mode's :attr:`access`."""
        extent.mapping = mmap.mmap(self.file.fd, extent.size, offset=extent.offset,
                                   access=self.access)
        return extent.mapping

    def reservation_bytes(self, sizes: list[int]) -> int:
        """Each extent's size, plus the growth of the checksum extent when the extents take the
        file past what it covers. O(free extents) per size; changes nothing."""
        space = FreeSpace(self.space.free)
        end, capacity, table_bytes = self.end, self.table.capacity, self.table.extent_bytes
        total = 0
        for size in sizes:
            offset, end, grown = placement(space, end, capacity, size)
            if offset is not None:
                space.take(offset, size)
            total += size
            if grown:
                total += grown - table_bytes
                end, capacity, table_bytes = end + grown, pages_covered(grown), grown
        return total

    def has_readers(self) -> bool:
        return self.file.readers_present()

    def file_usage(self) -> tuple[int, int]:
        st = os.fstat(self.file.fd)
        return st.st_size, st.st_blocks * 512

    def check(self) -> None:
        extents = list(self.extents.sizes().items())
        extents += list(self.space.free.items()) + list(self.space.pending.items())
        extents.append((self.table_offset, self.table.extent_bytes))
        cursor = HEADER_BYTES
        for offset, size in sorted(extents):
            assert offset == cursor, f"extents do not tile the file at {cursor} (next {offset})"
            cursor += size
        assert cursor == self.end, (cursor, self.end)
        assert self.table.capacity * PAGE_BYTES >= self.end

    def release_file(self) -> None:
        """Close the file (and, in a mode that opens more beside it, that too)."""
        self.file.release()
