"""The writer of a file without transactions, ``durability="none"`` (layer 3, private).

Extents are mapped ``MAP_SHARED``: every write reaches the file at the kernel's pace, and
nothing can be rolled back. The tags stay walkable at every moment: a freed range is tagged
free (merged with its free neighbours) at once, a split free extent gets its remainder's tag,
a moved checksum extent is written before the old one is freed, and a free range that ends the
file is cut off with the header rewritten. The header's "open for writing" flag is set while
this writer has the file; :meth:`WriteThroughWriter.close` recomputes every page checksum and
clears it, unless a change failed since the last successful flush (the owner's state may be
half-written). A file found with the flag set did not close cleanly and opens only with
``recover=True``.

Readers cannot share such a file: this writer holds the ``READERS`` lock exclusive.
"""

from __future__ import annotations

import mmap

from offheap.arena import locks, wal
from offheap.arena.arenafile import ArenaFile
from offheap.arena.filestate import FileState
from offheap.arena.filewriter import FileWriter
from offheap.arena.format import FREE, PAGE_BYTES, encode_tag
from offheap.arena.holes import punch_hole
from offheap.errors import LockedError


class WriteThroughWriter(FileWriter):
    """The writer of a file without transactions; see the module docstring.

    ``failed_since_flush``: an allocation, free, root change or flush raised since the last
    successful flush, so close leaves the file marked open for writing.
    """

    durability = "none"
    access = mmap.ACCESS_WRITE

    def __init__(self, file: ArenaFile, state: FileState) -> None:
        super().__init__(file, state)
        self.failed_since_flush = False

    @classmethod
    def exclude_readers(cls, file: ArenaFile, create: bool) -> None:
        if not locks.try_lock(file.fd, locks.READERS, exclusive=True):
            raise LockedError(f"{file.path!r} is open read-only in another process, and "
                              f"durability='none' cannot share a file: close the readers "
                              f"or open with durability='commit'")

    def opened(self) -> None:
        """Mark the file open for writing, at a new generation."""
        self._generation += 1
        self.write_table_and_header(open_for_writing=True)

    def note_failed_change(self) -> None:
        self.failed_since_flush = True

    # -- extents ------------------------------------------------------------------------------

    def release(self, offset: int, size: int) -> None:
        """Mark the range free in the file at once, merging neighbours, and cut the file
        short if the free space ends it."""
        start, merged_size = self.space.release(offset, size)
        if start + merged_size == self.end:
            del self.space.free[start]
            self.end = start
            self.file.cut(start)
            self.write_header(open_for_writing=True)
            return
        self._write_free_tag(start, merged_size)
        first = offset + PAGE_BYTES if start == offset else offset
        punch_hole(self.file.fd, first, offset + size - first)

    def remainder_left(self, offset: int, size: int) -> None:
        self._write_free_tag(offset, size)

    def table_moved(self, old_offset: int, old_bytes: int) -> None:
        """Write the new checksum extent before the old one is freed, so the tags stay
        walkable for ``recover=True``."""
        wal.pwrite_all(self.file.fd, self.table.image, self.table_offset)
        self.release(old_offset, old_bytes)
        self.write_header(open_for_writing=True)

    def _write_free_tag(self, offset: int, size: int) -> None:
        wal.pwrite_all(self.file.fd, encode_tag(size, 0, FREE), offset)

    # -- durability ---------------------------------------------------------------------------

    def commit(self) -> None:
        """Without transactions a commit is a :meth:`flush`."""
        self.flush()

    def flush(self) -> None:
        """Sync the mapped pages, write the checksum extent and the header (still marked open
        for writing), fsync. The checksums are those of the last clean close or repair."""
        self._sync_mappings()
        self.write_table_and_header(open_for_writing=True)
        self.failed_since_flush = False

    def _sync_mappings(self) -> None:
        for extent in self.extents.mapped():
            assert extent.mapping is not None
            extent.mapping.flush()

    def close(self, clean: bool) -> None:
        """Unless ``clean`` is False or a change failed since the last flush: checksum every
        live page (O(file)), then clear the "open for writing" flag."""
        try:
            if clean and not self.failed_since_flush:
                self._sync_mappings()
                self.checksum_live_pages()
                self.write_table_and_header(open_for_writing=False)
        finally:
            self.extents.unmap_all()
            self.release_file()
