"""The writer of a file with transactions, ``durability="commit"`` (layer 3, private).

Extents are mapped ``MAP_PRIVATE``, so nothing reaches the file until :meth:`CommitWriter.commit`.
A commit finds the pages this process wrote (the pagemap where it works, else by comparing with
the file: :mod:`offheap.arena.dirtypages`), writes them with the new tags, checksums and header
as one record of ``PATH-wal`` and syncs it (the commit point, :mod:`offheap.arena.wal`), copies
them into the file under the checkpoint lock, syncs, empties the log and drops the private
copies. :meth:`CommitWriter.rollback` returns to the last commit, kept as a
:class:`~offheap.arena.filestate.FileState`.

Crash safety rests on one rule: before the commit point the file changes only where the
committed file is free. So space freed during a transaction stays untouched until the commit
that frees it (it is pending in :class:`~offheap.arena.freespace.FreeSpace`), the tags of
committed free extents inside a reused range stay in the file, and the ranges zeroed for reuse
are logged as zero ranges. A crash at any moment reopens as the last commit.

A commit whose record is durable but whose copy into the file failed leaves the writer broken:
every change is refused with a TransactionError until the arena is closed and the file opened
again, which applies the commit from the log.
"""

from __future__ import annotations

import contextlib
import mmap
import os

import numpy as np

from offheap.arena import locks, wal
from offheap.arena.arenafile import (
    ArenaFile,
    file_error,
    fsync_directory,
    names_file,
)
from offheap.arena.backing import LimitCheck
from offheap.arena.checksums import ZERO_PAGE_CRC, page_crcs, page_numbers
from offheap.arena.dirtypages import (
    Pagemap,
    address_of,
    differing_pages,
    open_working_pagemap,
    page_runs,
)
from offheap.arena.extents import Extent
from offheap.arena.filestate import FileState
from offheap.arena.filewriter import FileWriter
from offheap.arena.format import FREE, PAGE_BYTES, encode_tag
from offheap.arena.freespace import cut_tail
from offheap.arena.holes import punch_hole
from offheap.arena.recovery import log_path, mark_applying
from offheap.errors import LockedError, TransactionError

PageRun = tuple[int, int, int]
"""``(extent offset, first page, page count)`` of pages written since the last commit."""


class CommitWriter(FileWriter):
    """The writer of a file with transactions; see the module docstring.

    ``committed`` is the file as of the last commit; ``new`` the extents allocated since
    (their pages are checksummed as zeros unless written); ``zeroed`` the file ranges made
    zeros for reuse since; ``structure_changed`` whether extents, free space or the root
    changed since (a commit with no written page still has to write them).
    """

    durability = "commit"
    access = mmap.ACCESS_COPY

    def __init__(self, file: ArenaFile, state: FileState) -> None:
        super().__init__(file, state)
        self.committed = state
        self.new: set[int] = set()
        self.zeroed: list[tuple[int, int]] = []
        self.structure_changed = False
        self.broken: str | None = None
        self.pagemap: Pagemap | None = None
        self._log_fd: int | None = None

    @classmethod
    def exclude_readers(cls, file: ArenaFile, create: bool) -> None:
        if create and file.readers_present():
            raise LockedError(f"{file.path!r} is open read-only in another process; it cannot "
                              f"be created anew under them")

    def opened(self) -> None:
        self.pagemap = open_working_pagemap()
        self.committed = self.snapshot()

    def repair(self, lost: tuple[tuple[int, int], ...]) -> None:
        super().repair(lost)
        self.structure_changed = True

    def check_writable(self) -> None:
        if self.broken is not None:
            raise TransactionError(self.broken)

    # -- extents ------------------------------------------------------------------------------

    def map_extent(self, extent: Extent) -> mmap.mmap:
        """A private mapping, and its address for the pagemap."""
        mapping = super().map_extent(extent)
        extent.address = address_of(mapping)
        return mapping

    def allocate(self, size: int, payload_bytes: int, check_limit: LimitCheck) -> int:
        offset = super().allocate(size, payload_bytes, check_limit)
        self.new.add(offset)
        self.structure_changed = True
        return offset

    def release(self, offset: int, size: int) -> None:
        """The space stays live in the file until the next commit frees it there."""
        self.new.discard(offset)
        self.structure_changed = True
        self.space.defer(offset, size)

    def tags_to_keep(self, offset: int, stop: int) -> list[int]:
        return sorted(o for o in self.committed.free if offset < o < stop)

    def zeroed_in_file(self, offset: int, length: int) -> None:
        self.zeroed.append((offset, length))

    def table_moved(self, old_offset: int, old_bytes: int) -> None:
        self.space.defer(old_offset, old_bytes)

    def set_root(self, blob: bytes, offset: int) -> None:
        super().set_root(blob, offset)
        self.structure_changed = True

    # -- transactions -------------------------------------------------------------------------

    def flush(self) -> None:
        self.check_writable()
        self.commit()

    def commit(self) -> None:
        runs = self.written_page_runs()
        if not runs and not self.structure_changed:
            return
        writes: list[tuple[int, wal.Data]] = []
        try:
            self._commit(runs, writes)
        finally:
            for _, data in writes:
                if isinstance(data, memoryview):
                    data.release()

    def rollback(self) -> None:
        kept, all_unmapped = self.install(self.committed)
        for extent in kept:
            assert extent.mapping is not None
            extent.mapping.madvise(mmap.MADV_DONTNEED)
        if all_unmapped:  # no view of an extent made since the commit maps the file's growth
            self.file.trim(self.end)
        self._forget_transaction()

    def written_page_runs(self) -> list[PageRun]:
        """Every run of pages written since the last commit, from the pagemap where it works,
        else by comparing with the file. O(mapped bytes / 512) with the pagemap."""
        runs: list[PageRun] = []
        for extent in self.extents.mapped():
            assert extent.mapping is not None
            if self.pagemap is not None and extent.address is not None:
                mask = self.pagemap.written_pages(extent.address, extent.size // PAGE_BYTES)
            else:
                mask = differing_pages(extent.mapping, self.file.fd, extent.offset)
            runs.extend((extent.offset, first, count) for first, count in page_runs(mask))
        return runs

    def uncommitted_bytes(self) -> int:
        """Bytes of the pages written since the last commit whose content differs from the
        file's: what a rollback would drop. O(pages written): only those are read back."""
        total = 0
        for offset, first, count in self.written_page_runs():
            mapping = self.extents.get(offset).mapping
            assert mapping is not None
            with memoryview(mapping)[first * PAGE_BYTES: (first + count) * PAGE_BYTES] as pages:
                differing = differing_pages(pages, self.file.fd, offset + first * PAGE_BYTES)
            total += int(differing.sum()) * PAGE_BYTES
        return total

    def _commit(self, runs: list[PageRun], writes: list[tuple[int, wal.Data]]) -> None:
        """Log, then copy into the file, the written ``runs`` and everything else the commit
        changes; ``writes`` collects the views of mapped pages, which the caller releases."""
        free = self.space.settled()
        end = cut_tail(free, self.end)
        table = self.table.copy()
        for offset in self.new:
            pages = page_numbers(offset, self.extents.get(offset).size // PAGE_BYTES)
            table.set(pages, np.full(len(pages), ZERO_PAGE_CRC, np.uint32))
        numbers, crcs = [], []
        for offset, first, count in runs:
            mapping = self.extents.get(offset).mapping
            assert mapping is not None
            pages_view = memoryview(mapping)[first * PAGE_BYTES: (first + count) * PAGE_BYTES]
            writes.append((offset + first * PAGE_BYTES, pages_view))
            numbers.append(page_numbers(offset + first * PAGE_BYTES, count))
            crcs.append(page_crcs(pages_view))
        if runs:
            table.set(np.concatenate(numbers), np.concatenate(crcs))
        for offset, size in free.items():
            if self.committed.free.get(offset) != size:
                writes.append((offset, encode_tag(size, 0, FREE)))
        for page in table.take_changed_pages():
            writes.append((self.table_offset + page * PAGE_BYTES,
                           memoryview(table.image)[page * PAGE_BYTES: (page + 1) * PAGE_BYTES]))
        generation = self.generation + 1
        writes.append((0, self.header_bytes(generation, end, table, open_for_writing=False)))
        zeroed = [(o, min(n, end - o)) for o, n in self.zeroed if o < end]
        try:
            log_fd = self._open_log()
            wal.write_record(log_fd, file_id=self.file_id, base_generation=self.generation,
                             new_generation=generation, end=end, zero_ranges=zeroed,
                             writes=writes)
        except OSError as exc:
            self._empty_log()
            raise file_error(log_path(self.path), exc, "the commit could not be logged",
                             "the file is at its last commit and the changes are still here "
                             "to commit again") from None
        try:
            self._checkpoint(writes, end, free)
            os.ftruncate(log_fd, 0)
        except BaseException as exc:
            self.broken = (f"a commit of {self.path!r} is durable in {log_path(self.path)!r} "
                           f"but could not be copied into the file ({exc!r}); close the arena "
                           f"and open the file again to apply it")
            raise TransactionError(self.broken) from exc
        for offset, first, count in runs:
            mapping = self.extents.get(offset).mapping
            assert mapping is not None
            mapping.madvise(mmap.MADV_DONTNEED, first * PAGE_BYTES, count * PAGE_BYTES)
        self.space.free, self.space.pending = free, {}
        self.end, self.table, self._generation = end, table, generation
        self._forget_transaction()
        self.committed = self.snapshot()

    def _checkpoint(self, writes: list[tuple[int, wal.Data]], end: int,
                    free: dict[int, int]) -> None:
        """Copy a logged commit into the file under the checkpoint lock, punch out the space it
        freed, cut the file to ``end`` (or zero its tail while readers exist), fdatasync."""
        fd = self.file.fd
        locks.lock(fd, locks.CHECKPOINT, exclusive=True)
        try:
            mark_applying(fd, self.path)
            for offset, data in writes:
                wal.pwrite_all(fd, data, offset)
            for offset, size in self.space.pending.items():
                first = offset + PAGE_BYTES if offset in free else offset
                stop = min(offset + size, end)
                if stop > first:
                    punch_hole(fd, first, stop - first)
            self.file.cut(end)
            os.fdatasync(fd)
        finally:
            locks.unlock(fd, locks.CHECKPOINT)

    def _forget_transaction(self) -> None:
        self.new.clear()
        self.zeroed.clear()
        self.structure_changed = False

    # -- the log and lifetime -----------------------------------------------------------------

    def _open_log(self) -> int:
        """This writer's descriptor of ``PATH-wal``, created (and its name made durable) on the
        first commit."""
        if self._log_fd is None:
            self._log_fd = os.open(log_path(self.path), os.O_RDWR | os.O_CREAT, 0o644)
            fsync_directory(self.path)
        return self._log_fd

    def _empty_log(self) -> None:
        """After a record failed to be written or synced: empty the log if that still works.
        A record that is torn, or whose sync failed, must not be applied, and an empty log
        is never applied; if even this fails, the record left is torn (its crc fails) or whole
        but of a commit this writer still holds and will log again."""
        if self._log_fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._log_fd, 0)
                os.fdatasync(self._log_fd)

    def close_log(self) -> None:
        if self._log_fd is not None:
            os.close(self._log_fd)
            self._log_fd = None

    def _remove_own_log(self) -> None:
        """Remove ``PATH-wal`` if this writer opened it and the path still names that file
        (after a rename over another path the name belongs to the file renamed over ours)."""
        if self._log_fd is not None and names_file(log_path(self.path), self._log_fd):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(log_path(self.path))

    def close(self, clean: bool) -> None:
        """Uncommitted changes are dropped, as in a crash; the file is cut back to the last
        commit's end unless a view or a reader is in the way."""
        try:
            all_unmapped = self.extents.unmap_all()
            if self.broken is None:
                if all_unmapped:
                    self.end = self.committed.end
                    self.file.trim(self.end)
                self._remove_own_log()
        finally:
            self.release_file()

    def discard(self) -> None:
        self._remove_own_log()
        self.release_file()

    def release_file(self) -> None:
        self.file.release()
        self.close_log()
        if self.pagemap is not None:
            self.pagemap.close()
            self.pagemap = None
