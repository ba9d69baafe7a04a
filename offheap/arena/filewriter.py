"""What the two writers of an arena file share (layer 3, private to the arena).

A :class:`FileWriter` is the one process that writes a file (it holds the ``WRITER`` lock for
its whole life, :mod:`offheap.arena.locks`). It opens or creates the file, places extents in
it (first fit in free space, else appended at the end, the checksum extent moved to the end
when it no longer covers the file), writes headers, and renames its file over another path for
a compaction. What differs between the modes is left to the subclasses: how an extent is
mapped, what a free or a moved checksum extent writes to the file at once, and what happens
when the file is opened, flushed and closed.

- :class:`~offheap.arena.commit.CommitWriter` (``durability="commit"``);
- :class:`~offheap.arena.writethrough.WriteThroughWriter` (``durability="none"``).

A reused range reads as zeros to its new owner: its pages are punched out of the file, except
the first (and the tags a crash must still find, see :meth:`FileWriter.tags_to_keep`), which
are zeroed through the new mapping.
"""

from __future__ import annotations

import contextlib
import dataclasses
import mmap
import os
from abc import abstractmethod
from typing import ClassVar, Self

from offheap.arena import locks, wal
from offheap.arena.arenafile import ArenaFile, file_error, fsync_directory
from offheap.arena.backing import LimitCheck
from offheap.arena.checksums import ChecksumTable
from offheap.arena.creation import (
    discard_temporary,
    link_into_place,
    remove_stale_temporaries,
    rename_into_place,
    temporary_file,
)
from offheap.arena.extents import Extent
from offheap.arena.filebacking import FileBacking, placement
from offheap.arena.filestate import FileState, empty_file_error, file_page_crcs, read_file_state
from offheap.arena.format import (
    HEADER_BYTES,
    LIVE,
    PAGE_BYTES,
    TAG_BYTES,
    Header,
    encode_header,
    encode_tag,
    parse_header,
)
from offheap.arena.holes import zero_range
from offheap.arena.recovery import apply_pending_commit, log_path
from offheap.errors import CorruptionError, LockedError, MissingFileError

_ZERO_PAGE = bytes(PAGE_BYTES)


def _new_file_id() -> int:
    """A random non-zero u64 for the header of a new file."""
    return int.from_bytes(os.urandom(8), "little") or 1


def _lock_for_writing(path: str) -> ArenaFile | None:
    """Open the file ``path`` names and take its writer lock; None when the path names nothing.
    A file renamed away between the open and the lock (a compaction renamed a new file over the
    path, then let the old one go) is let go in turn and the path opened again, so the lock
    taken is always that of the file the path names. Raises LockedError when another writer
    has it."""
    while True:
        try:
            file = ArenaFile.open(path, writable=True)
        except FileNotFoundError:
            return None
        try:
            if not locks.try_lock(file.fd, locks.WRITER, exclusive=True):
                raise LockedError(f"{path!r} is open for writing in another process; a file has "
                                  f"one writer at a time: close it there, or open with "
                                  f"readonly=True")
            if file.is_named_by_path():
                return file
        except BaseException:
            file.release()
            raise
        file.release()


def flag_replaced(fd: int, path: str) -> None:
    """Flag the header of the file open as ``fd`` "replaced", under the checkpoint lock, so
    its readers stop at their next read section (another file was renamed over its path)."""
    locks.lock(fd, locks.CHECKPOINT, exclusive=True)
    try:
        header = parse_header(os.pread(fd, HEADER_BYTES, 0), path)
        wal.pwrite_all(fd, encode_header(dataclasses.replace(header, replaced=True)), 0)
    finally:
        locks.unlock(fd, locks.CHECKPOINT)


class FileWriter(FileBacking):
    """The writer of an arena file; see the module docstring."""

    durability: ClassVar[str]
    """The mode's name, as :meth:`Arena.file` takes it and the header records it."""

    @classmethod
    def open(cls, path: str, *, create: bool, replace: bool, verify: bool,
             recover: bool) -> Self:
        """Open ``path`` for writing, or create it anew; a commit left in its log is applied
        first. ``create`` makes a new file where the path names nothing (else MissingFileError
        when it is missing); ``replace`` puts a new empty file in place of what the path names.
        Whether the file exists is decided while holding a writer lock: of the
        file found at the path, or of the new file as it is linked there
        (:mod:`offheap.arena.creation`). Other options as in :meth:`Arena.file`. Raises
        LockedError when another writer (or a reader this mode cannot share with) has the
        file, CorruptionError for an empty file unless ``replace``."""
        while True:
            existing = _lock_for_writing(path)
            if existing is None and not create:
                raise MissingFileError(path, "create=False opens an existing file only; "
                                       "create=True makes a new one")
            if existing is None or replace:
                writer = cls._create(path, replacing=existing)
                if writer is None:  # another process created the file first: open that one
                    continue
            else:
                writer = cls._load(existing, verify=verify, recover=recover)
            return writer

    @classmethod
    def _load(cls, file: ArenaFile, *, verify: bool, recover: bool) -> Self:
        """The writer of the existing, locked ``file``: its pending commit applied, its state
        read, cut to its end."""
        try:
            cls.exclude_readers(file, False)
            if os.fstat(file.fd).st_size == 0:
                raise empty_file_error(file.path)
            apply_pending_commit(file.fd, file.path)
            state = read_file_state(file.fd, file.path, verify=verify, recover=recover)
            writer = cls(file, state)
            if recover and state.damage is not None:
                writer.repair(state.damage.lost_ranges)
            file.cut(writer.end)
            writer.opened()
        except BaseException:
            file.release()
            raise
        return writer

    @classmethod
    def _create(cls, path: str, replacing: ArenaFile | None) -> Self | None:
        """A new empty file with a durable header and checksum extent, put at ``path`` in one
        step: linked where the path names nothing (None when another process's file took it
        first), or renamed over ``replacing``, the locked file the path names (flagged
        "replaced" for its readers, then released). A stale ``PATH-wal`` goes."""
        remove_stale_temporaries(path)
        file = temporary_file(path)
        try:
            if replacing is not None:
                cls.exclude_readers(replacing, True)
            cls.exclude_readers(file, True)
            writer = cls(file, FileState.new(_new_file_id()))
            file.grow(writer.end)
            writer.write_table_and_header(open_for_writing=False)
        except BaseException:
            discard_temporary(file)
            if replacing is not None:
                replacing.release()
            raise
        if replacing is None:
            try:
                placed = link_into_place(file, path)
            except BaseException:
                discard_temporary(file)
                raise
            if not placed:
                return None
        else:
            try:
                rename_into_place(file, path)
            except BaseException:
                discard_temporary(file)
                replacing.release()
                raise
            try:
                with contextlib.suppress(CorruptionError):  # what it replaced may be no arena
                    flag_replaced(replacing.fd, path)
            finally:
                replacing.release()
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(log_path(path))
            writer.opened()
        except BaseException:
            writer.release_file()
            raise
        return writer

    @classmethod
    @abstractmethod
    def exclude_readers(cls, file: ArenaFile, create: bool) -> None:
        """Raise LockedError when readers of ``file`` exist that this writer cannot share the
        file with."""

    @abstractmethod
    def opened(self) -> None:
        """The file is loaded (or created) and cut to its end: take it over in this mode."""

    def repair(self, lost: tuple[tuple[int, int], ...]) -> None:
        """Opened with ``recover=True``: make the ranges the walk lost inside the file free
        space, and checksum every live page as the file holds it now."""
        for offset, length in lost:
            if offset < self.end:
                self.release(offset, length)
        self.checksum_live_pages()

    # -- extents ------------------------------------------------------------------------------

    def allocate(self, size: int, payload_bytes: int, check_limit: LimitCheck) -> int:
        """Place the extent (see :func:`~offheap.arena.filebacking.placement`), reserve its
        blocks and those of a grown checksum extent, then register it. A full file system
        raises CapacityError before anything is registered: the file keeps its length and
        what it holds (a reused range was free and reads as zeros either way); any other
        failing call is a StorageError, with the same outcome."""
        offset, end, table_bytes = placement(self.space, self.end, self.table.capacity, size)
        check_limit(size + (table_bytes - self.table.extent_bytes if table_bytes else 0))
        size_before = self.file.size
        self.file.grow(end + table_bytes)
        extent = Extent(self.end if offset is None else offset, size, payload_bytes)
        mapping = self.map_extent(extent)
        try:
            if offset is not None:
                try:
                    self._zero_reused(extent, mapping)
                except OSError as exc:
                    raise file_error(self.path, exc, "a reused range could not be zeroed",
                                     "nothing was changed") from None
            self.file.reserve(extent.offset, size)
            self.file.reserve(end, table_bytes)
        except BaseException:
            extent.unmap()
            self.file.cut(size_before)
            raise
        if offset is None:
            self.end = end
        else:
            remainder = self.space.take(offset, size)
            if remainder:
                self.remainder_left(*remainder)
        mapping[:TAG_BYTES] = encode_tag(size, payload_bytes, LIVE)
        self.extents.add(extent)
        if table_bytes:
            self._move_table(table_bytes)
        return extent.offset

    def tags_to_keep(self, offset: int, stop: int) -> list[int]:
        """Offsets inside a reused range ``[offset, stop)`` whose tags a crash must still find
        in the file (none unless committed free extents lie there)."""
        return []

    def zeroed_in_file(self, offset: int, length: int) -> None:
        """``length`` bytes at ``offset`` of the file were made zeros for a reused range."""

    def remainder_left(self, offset: int, size: int) -> None:
        """A reused free extent was split: ``size`` bytes at ``offset`` stay free."""

    @abstractmethod
    def table_moved(self, old_offset: int, old_bytes: int) -> None:
        """A larger checksum extent was appended at the end; the old one is to be freed."""

    def _zero_reused(self, extent: Extent, mapping: mmap.mmap) -> None:
        """Make a reused free range read as zeros through ``mapping``, its new mapping."""
        offset, stop = extent.offset, extent.offset + extent.size
        keep = [offset] + self.tags_to_keep(offset, stop)
        for page, following in zip(keep, keep[1:] + [stop]):
            mapping[page - offset: page - offset + PAGE_BYTES] = _ZERO_PAGE
            if following > page + PAGE_BYTES:
                zero_range(self.file.fd, page + PAGE_BYTES, following - page - PAGE_BYTES)
                self.zeroed_in_file(page + PAGE_BYTES, following - page - PAGE_BYTES)

    def _move_table(self, extent_bytes: int) -> None:
        """Append a larger checksum extent at the end (see :meth:`table_moved`)."""
        old_offset, old_bytes = self.table_offset, self.table.extent_bytes
        self.table = self.table.grown(extent_bytes)
        self.table_offset = self.end
        self.end += extent_bytes
        self.table_moved(old_offset, old_bytes)

    # -- file writes --------------------------------------------------------------------------

    def header_bytes(self, generation: int, end: int, table: ChecksumTable, *,
                     open_for_writing: bool) -> bytes:
        """The header page naming ``generation``, ``end`` and ``table`` with this writer's
        root, checksum extent offset and file id, read back before anything writes it
        (:meth:`check_reopens`), so that no commit, flush or close publishes a header that
        would not reopen. O(1): the crc of one page, twice."""
        inline = b"" if self.root_offset else self.root
        header = Header(generation, end, self.table_offset, table.crc(), self.durability,
                        open_for_writing, self.root_offset, len(self.root), inline, self.file_id)
        page = encode_header(header)
        self.check_reopens(page, header, table)
        return page

    def check_reopens(self, page: bytes, header: Header, table: ChecksumTable) -> None:
        """CorruptionError unless the header ``page``, made from ``header`` for the extents
        this writer holds and ``table``, reopens as it: :func:`parse_header` (the parser an
        open runs) accepts it and returns ``header`` field for field, the checksum extent
        covers the file end, and the root extent it names is live and holds the root. Raised
        before the page is written or logged, so the file keeps its previous header."""
        try:
            parsed: Header | str = parse_header(page, self.path)
        except CorruptionError as exc:
            parsed = str(exc)
        if isinstance(parsed, str):
            problem = parsed
        elif parsed != header:
            problem = f"it reads back as {parsed}, not {header}"
        elif table.capacity * PAGE_BYTES < header.end:
            problem = (f"the checksum extent covers {table.capacity} pages, the file has "
                       f"{header.end // PAGE_BYTES}")
        elif header.root_offset and (header.root_length + TAG_BYTES
                                     > self._live_extent_bytes(header.root_offset)):
            problem = f"root extent at offset {header.root_offset} is missing or too small"
        else:
            return
        raise CorruptionError(f"{self.path!r}: the header of generation {header.generation} "
                              f"would not reopen ({problem}); it was not written, and the "
                              f"file keeps its previous header")

    def _live_extent_bytes(self, offset: int) -> int:
        """The size of the live extent at ``offset``, 0 when there is none."""
        try:
            return self.extents.get(offset).size
        except KeyError:
            return 0

    def write_header(self, *, open_for_writing: bool) -> None:
        wal.pwrite_all(self.file.fd, self.header_bytes(self.generation, self.end, self.table,
                                                       open_for_writing=open_for_writing), 0)

    def write_table_and_header(self, *, open_for_writing: bool) -> None:
        """Write the checksum extent and the header, then fsync."""
        wal.pwrite_all(self.file.fd, self.table.image, self.table_offset)
        self.table.take_changed_pages()
        self.write_header(open_for_writing=open_for_writing)
        os.fsync(self.file.fd)

    def checksum_live_pages(self) -> None:
        """Checksum every live page as the file holds it now. O(live bytes)."""
        for offset, size in self.extents.sizes().items():
            for pages, crcs in file_page_crcs(self.file.fd, self.path, offset, size):
                self.table.set(pages, crcs)

    # -- compaction ---------------------------------------------------------------------------

    def take_path_of(self, other: FileWriter) -> None:
        """Rename this writer's file over ``other``'s path (see :meth:`Arena.replace`); this
        writer's empty log goes, and its next commit logs to the new ``PATH-wal``."""
        self.close_log()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(log_path(self.path))
        os.replace(self.path, other.path)
        fsync_directory(other.path)
        self.file.path = other.path

    def retire(self) -> None:
        """Flag this writer's file "replaced" for its readers, under the checkpoint lock, and
        release it without the work of a clean close."""
        try:
            flag_replaced(self.file.fd, self.path)
        finally:
            self.extents.unmap_all()
            self.discard()

    def close_log(self) -> None:
        """Close this writer's descriptor of ``PATH-wal``, if it has one."""

    def discard(self) -> None:
        """Release the file without a clean close's work (what :meth:`retire` ends with)."""
        self.release_file()

    def check(self) -> None:
        super().check()
        assert os.fstat(self.file.fd).st_size == self.file.size >= self.end
