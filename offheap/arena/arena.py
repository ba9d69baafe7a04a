"""The arena (layer 3): every byte offheap stores lives in memory handed out here.

An arena is a set of *extents*, each its own memory mapping: anonymous memory (``mmap(-1, n)``)
or a page-aligned range of one file. Extents are never resized in place, because a mapping whose
buffer is exported to numpy cannot be resized; a structure that grows allocates a larger extent,
copies, and frees the old one. This module is the only one in offheap that maps memory.

Accounting is exact: ``reserved_bytes`` is the header, the checksum extent of a file arena and
the mapped size of every live extent; ``used_bytes`` the sum of the payload sizes callers asked
for. ``limit_bytes`` bounds ``reserved_bytes``: :meth:`Arena.allocate` raises
:class:`CapacityError` *before* mapping anything that would cross it, the analogue of Java's
``-XX:MaxDirectMemorySize``. :meth:`Arena.reservation_bytes` says beforehand what allocations
would add, so an owner can size a structure to the room left.

File arenas. The format (header, extent tags, page checksums) is specified in
:mod:`offheap.arena.format`. The *root blob* is a small byte string owned by the layer directly
above (the record store, or a standalone hash map): where its own metadata lives. Free extents
are found again on open by walking the tags; a free extent at the end of the file is cut off.
Two durability modes:

- ``durability="commit"`` (the default): extents are mapped ``MAP_PRIVATE``, so nothing reaches
  the file until :meth:`Arena.commit`. A commit finds the pages this process wrote (see
  :mod:`offheap.arena.dirtypages`), writes them with the new tags, checksums and header as one record of
  ``PATH-wal`` and syncs it (the commit point, :mod:`offheap.arena.wal`), copies them into the file
  under the checkpoint lock, syncs, empties the log and drops the private copies. Space freed
  during a transaction stays untouched until the commit that frees it (it is live in the
  committed file), and every file change made before the commit point touches only space free
  in the committed file, so a crash at any moment reopens as the last commit.
  :meth:`Arena.rollback` returns to the last commit. :meth:`Arena.close` does not commit.
- ``durability="none"``: extents are mapped ``MAP_SHARED`` and every write reaches the file at
  the kernel's pace. The header's "open for writing" flag is set while a writer has the file and
  cleared, with every page checksum recomputed, by :meth:`Arena.close` (unless a change failed
  since the last successful flush); a file found with the flag set did not close cleanly and
  opens only with ``recover=True``.

Sharing between processes (:mod:`offheap.arena.locks`): one writer at a time; read-only openers map
``MAP_SHARED`` read-only and do their reads inside :meth:`Arena.read_section`, which excludes a
commit being applied and picks up the commits made since. Readers and a writer share a file only
with ``durability="commit"``. While readers exist the writer never makes the file shorter: it
punches holes into space it frees instead (:mod:`offheap.arena.holes`). :meth:`Arena.replace`
renames a writer's file over another's path without releasing its lock (compaction); the file
it replaces is flagged so that its readers stop. Each file has a random id in its header that
every log record names, so a log is never applied to another file.

Thread safety: none; the owner of an arena serializes access to it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import mmap
import os
from dataclasses import dataclass

import numpy as np

from offheap.arena import locks, wal
from offheap.arena.format import (
    FLAG_APPLYING,
    FLAG_REPLACED,
    FREE,
    HEADER_BYTES,
    INLINE_ROOT_BYTES,
    LIVE,
    PAGE_BYTES,
    TAG_BYTES,
    Header,
    encode_header,
    encode_tag,
    parse_header,
    peek_generation_and_flags,
)
from offheap.arena.dirtypages import (
    Pagemap,
    address_of,
    differing_pages,
    open_working_pagemap,
    page_runs,
)
from offheap.arena.extents import ExtentShape
from offheap.arena.filestate import FileState, file_page_crcs, read_file_state
from offheap.arena.recovery import (
    apply_for_reader,
    apply_pending_commit,
    commit_left_pending,
    half_applied_error,
    log_path,
    mark_applying,
)
from offheap.errors import (
    CapacityError,
    ClosedError,
    CorruptionError,
    LockedError,
    ReadOnlyError,
    TransactionError,
)
from offheap.arena.damage import FileDamage
from offheap.arena.holes import punch_hole, zero_range
from offheap.arena.freespace import FreeSpace, cut_tail
from offheap.arena.checksums import (
    ZERO_PAGE_CRC,
    page_numbers,
    ChecksumTable,
    extent_bytes_for,
    page_crcs,
    pages_covered,
)

DURABILITIES = ("commit", "none")
_VERIFY_CHUNK_BYTES = 8 << 20
_ZERO_PAGE = bytes(PAGE_BYTES)


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
    """A snapshot of an arena's accounting.

    ``free_bytes``: free extents of a file (including space freed since the last commit);
    ``live_bytes``: live extents, tags included; ``file_bytes``: the file's size;
    ``disk_bytes``: the blocks it occupies on disk (less than ``file_bytes`` where holes are).
    """

    reserved_bytes: int
    used_bytes: int
    free_bytes: int
    n_extents: int
    limit_bytes: int | None
    file_bytes: int = 0
    live_bytes: int = 0
    disk_bytes: int = 0


def _notes_failure(method):
    """Mark an arena method whose failure may leave the owner's state half-written: without
    transactions the file then stays marked open for writing at :meth:`Arena.close`, unless a
    later :meth:`Arena.flush` succeeds (the owner wrote its state again)."""
    @functools.wraps(method)
    def noting(self, *args):
        try:
            return method(self, *args)
        except BaseException:
            self._failed_since_flush = True
            raise
    return noting


def _placement(space: FreeSpace, end: int, capacity_pages: int,
               size: int) -> tuple[int | None, int, int]:
    """Where :meth:`Arena.allocate` puts an extent of ``size`` bytes in a file that ends at
    ``end`` and whose checksum extent covers ``capacity_pages`` pages: the free offset it reuses
    (None: it is appended at ``end``), the file's end after it, and the size of the larger
    checksum extent the file then needs (appended after it), or 0 when the current one covers it.
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


def _new_file_id() -> int:
    """A random non-zero u64 for the header of a new file."""
    return int.from_bytes(os.urandom(8), "little") or 1


def _fsync_directory(path: str) -> None:
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Arena:
    """Extents of anonymous or file-backed memory under one hard limit.

    Build one with :meth:`anonymous` or :meth:`file`. An extent is named by its ``offset``
    (its position in the file, or a unique number for anonymous memory); owners keep offsets in
    their metadata and ask for views with :meth:`view` or :meth:`array`. Views returned here point
    into the mapping: the owner must drop them before :meth:`free` of that extent, and before
    :meth:`rollback` or a :meth:`read_section` that reports a change. :meth:`close` unmaps every
    extent whose buffer is no longer exported; one still exported (a zero-copy view a user asked
    for) stays mapped until its last view is gone, so a stale view never faults.
    """

    def __init__(self, *, path: str | None, limit_bytes: int | None, readonly: bool,
                 durability: str | None = None) -> None:
        if limit_bytes is not None and limit_bytes < HEADER_BYTES:
            raise ValueError(f"limit_bytes must be at least {HEADER_BYTES}, got {limit_bytes}")
        self.path = path
        self.limit_bytes = limit_bytes
        self.readonly = readonly
        self.durability = durability  # None for anonymous memory
        self._fd: int | None = None
        self._log_fd: int | None = None
        self._pagemap: Pagemap | None = None
        self._header_map: mmap.mmap | None = None  # readers: the header page, shared
        self._maps: dict[int, mmap.mmap] = {}
        self._addresses: dict[int, int] = {}  # extent offset -> address of its private mapping
        self._sizes: dict[int, int] = {}  # live extent offset -> extent size
        self._payload: dict[int, int] = {}  # live extent offset -> payload bytes requested
        self._space = FreeSpace()
        self._end = HEADER_BYTES  # next offset to hand out (where the file's extents end)
        self._file_bytes = 0  # the file's size; past _end it reads as zeros
        self._table: ChecksumTable | None = None
        self._table_offset = 0
        self._root = b""
        self._root_offset = 0
        self._generation = 0
        self._file_id = 0  # see arenaformat: chosen at creation, named by every log record
        self._recover = False
        self._damage: FileDamage | None = None
        self._committed: FileState | None = None  # commit mode: what rollback returns to
        self._new: set[int] = set()  # extents allocated since the last commit
        self._zeroed: list[tuple[int, int]] = []  # file ranges zeroed since the last commit
        self._structure_changed = False  # allocations, frees or root since the last commit
        self._broken: str | None = None
        self._failed_since_flush = False  # see _notes_failure
        self._read_depth = 0
        self._closed = False

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def anonymous(cls, limit_bytes: int | None = None) -> Arena:
        """An arena of anonymous memory, returned to the OS extent by extent on free/close."""
        return cls(path=None, limit_bytes=limit_bytes, readonly=False)

    @classmethod
    def file(cls, path: str | os.PathLike, *, limit_bytes: int | None = None,
             readonly: bool = False, create: bool | None = None, durability: str = "commit",
             verify: bool = True, recover: bool = False) -> Arena:
        """Open the arena stored in ``path``, or create it (``create=None``: if it is missing).

        ``durability`` is ``"commit"`` (transactions, see :meth:`commit`) or ``"none"`` (see the
        module docstring); ``readonly`` opens a reader that may share the file with a commit-mode
        writer. A commit left in ``PATH-wal`` by a writer that died is applied first.
        ``verify`` checks every live page against its checksum: O(file), about 0.5 s per GiB.
        ``recover`` opens a file that was not closed cleanly or is damaged, to read what is
        there: a page failing its checksum, a damaged extent tag, extents past the header's
        recorded end are not errors but noted in :attr:`damage` (pages are checked only when the
        checksums describe them: not in a file a writer without transactions left open); a
        writer opened so rewrites every checksum and frees what the walk lost. Raises
        :class:`CorruptionError` when the file is not an offheap arena or is damaged,
        :class:`LockedError` when another open excludes this one (a second writer; readers and
        a writer without transactions), :class:`RecoveryPendingError` when a reader finds a
        commit to apply and may not write the file.
        """
        path = os.fspath(path)
        if durability not in DURABILITIES:
            raise ValueError(f"durability must be one of {DURABILITIES}, got {durability!r}")
        exists = os.path.exists(path) and os.path.getsize(path) > 0
        if create is None:
            create = not exists
        if create and readonly:
            raise ValueError(f"cannot create {path!r} read-only")
        arena = cls(path=path, limit_bytes=limit_bytes, readonly=readonly, durability=durability)
        arena._recover = recover
        try:
            if readonly:
                arena._open_reader(verify)
            else:
                arena._open_writer(create, verify)
        except BaseException:
            arena._release_files()
            raise
        return arena

    # -- allocation ---------------------------------------------------------------------------

    @_notes_failure
    def allocate(self, nbytes: int) -> int:
        """Map a new extent with at least ``nbytes`` of zeroed payload; return its offset.

        Raises :class:`CapacityError` (and changes nothing) when the extent would take
        ``reserved_bytes`` past ``limit_bytes``.
        """
        self._check_writable()
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        size = _round_to_pages(nbytes + TAG_BYTES)
        if self._fd is None:
            self._check_limit(size)
            offset = self._end
            self._register(offset, size, nbytes, mmap.mmap(-1, size))
            self._end += size
            return offset
        offset, end, table_bytes = _placement(self._space, self._end, self._table.capacity, size)
        self._check_limit(size + (table_bytes - self._table.extent_bytes if table_bytes else 0))
        self._grow_file(end + table_bytes)
        if offset is None:
            offset = self._end
            mm = self._map(offset, size)
            self._end = end
        else:
            mm = self._map(offset, size)
            try:
                self._zero_reused(offset, size, mm)
            except BaseException:
                self._unmap(offset, mm)
                raise
            remainder = self._space.take(offset, size)
            if remainder and self.durability == "none":
                self._write_free_tag(*remainder)
        mm[:TAG_BYTES] = encode_tag(size, nbytes, LIVE)
        self._register(offset, size, nbytes, mm)
        if table_bytes:
            self._move_table(table_bytes)
        if self.durability == "commit":
            self._new.add(offset)
        self._structure_changed = True
        return offset

    @_notes_failure
    def free(self, offset: int) -> None:
        """Unmap extent ``offset`` and give its memory back (anonymous) or mark it free (file).

        With ``durability="commit"`` the space becomes reusable after the next commit.
        """
        self._check_writable()
        if offset not in self._sizes:
            raise KeyError(f"no live extent at offset {offset}")
        mm = self._maps.pop(offset, None)
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                self._maps[offset] = mm
                raise
        self._addresses.pop(offset, None)
        size = self._sizes.pop(offset)
        del self._payload[offset]
        self._new.discard(offset)
        self._structure_changed = True
        if self._fd is None:
            return
        if self.durability == "commit":
            self._space.defer(offset, size)
        else:
            self._release_now(offset, size)

    def reservation_bytes(self, *nbytes: int) -> int:
        """How much :attr:`reserved_bytes` grows if extents of these payload sizes are allocated
        one after another now: each extent's whole pages with its tag, plus, in a file, the
        growth of the checksum extent when they take the file past what it covers. This is what
        :meth:`allocate` holds against ``limit_bytes``, so an owner sizing a structure to a limit
        can ask before it allocates. O(free extents) per size; changes nothing.
        """
        sizes = [_round_to_pages(n + TAG_BYTES) for n in nbytes]
        if self._fd is None:
            return sum(sizes)
        space = FreeSpace(self._space.free)
        end, capacity, table_bytes = self._end, self._table.capacity, self._table.extent_bytes
        total = 0
        for size in sizes:
            offset, end, grown = _placement(space, end, capacity, size)
            if offset is not None:
                space.take(offset, size)
            total += size
            if grown:
                total += grown - table_bytes
                end, capacity, table_bytes = end + grown, pages_covered(grown), grown
        return total

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
        """The owner's metadata blob (persisted by :meth:`commit`/:meth:`flush` in file arenas)."""
        self._check_open()
        return self._root

    @_notes_failure
    def set_root(self, blob: bytes) -> None:
        """Replace the root blob; a large one is kept in an extent of its own."""
        self._check_writable()
        blob = bytes(blob)
        if blob == self._root:
            return
        new_offset = 0
        if len(blob) > INLINE_ROOT_BYTES:
            new_offset = self.allocate(len(blob))
            with self.view(new_offset) as view:
                view[: len(blob)] = blob
        old_offset = self._root_offset
        self._root, self._root_offset = blob, new_offset
        self._structure_changed = True
        if old_offset:
            self.free(old_offset)

    # -- transactions -------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """The file's generation as this arena last committed or loaded it (+1 per commit)."""
        return self._generation

    def commit(self) -> None:
        """Make every change since the last commit durable at once (``durability="commit"``).

        Cost: finding written pages, O(mapped bytes / 512); then the changed pages are written
        twice (log and file) with two fsyncs. Returns at once when nothing changed. Without
        transactions it is :meth:`flush`; on anonymous memory it does nothing.
        """
        self._check_writable()
        if self._fd is None:
            return
        if self.durability == "none":
            self.flush()
            return
        runs = self._written_page_runs()
        if not runs and not self._structure_changed:
            return
        writes: list[tuple[int, object]] = []
        try:
            self._commit(runs, writes)
        finally:
            for _, data in writes:
                if isinstance(data, memoryview):
                    data.release()

    def rollback(self) -> None:
        """Drop every change since the last commit; the extents, root and file are as committed
        (the file is cut back to its committed size unless readers or views are in the way).

        Owners must drop their views first and re-read their state from :attr:`root` after.
        """
        self._check_writable()
        if self.durability != "commit":
            raise TransactionError(
                f"rollback() needs durability='commit'; this arena "
                f"({self.path or 'anonymous memory'}) has no transactions")
        committed = self._committed
        all_unmapped = True
        for offset, mm in list(self._maps.items()):
            if getattr(committed.live.get(offset), 'size', None) == len(mm):
                mm.madvise(mmap.MADV_DONTNEED)
            else:
                all_unmapped &= self._unmap(offset, mm)
        self._install(committed)
        if all_unmapped:  # no view of an extent made since the commit maps the file's growth
            self._trim_file()
        self._new.clear()
        self._zeroed.clear()
        self._structure_changed = False

    @contextlib.contextmanager
    def read_section(self):
        """Context manager around a reader's operations; yields True when the file changed.

        A read-only file arena takes the checkpoint lock shared, so no commit is applied while
        the section runs, and reloads the extent table when another process committed since
        the last section: then it yields True and the owner must drop its views and reload
        its own state. Sections nest; elsewhere (writers, anonymous memory) it yields False.
        :meth:`begin_read` and :meth:`end_read` are the same without a generator.
        """
        changed = self.begin_read()
        try:
            yield changed
        finally:
            self.end_read()

    def begin_read(self) -> bool:
        """Start a read section (see :meth:`read_section`); True when the file changed since
        the last one. Every call is paired with one :meth:`end_read`, also after an error.

        The common case costs a lock, a look at two header fields through a shared read-only
        mapping of the header page, and (in end_read) an unlock: the generation says whether
        a commit was applied since, and the flags whether one is being applied by a writer
        that died ("applying": the section applies it from the log first) or whether the file
        was replaced by a compaction (ClosedError). No commit is copied into the file while
        the lock is held, so a section never sees half of one.
        """
        self._check_open()
        self._read_depth += 1
        if not self.readonly or self._read_depth > 1:
            return False
        try:
            locks.lock(self._fd, locks.CHECKPOINT, exclusive=False)
            try:
                generation, flags = peek_generation_and_flags(self._header_map)
                if flags & (FLAG_APPLYING | FLAG_REPLACED):
                    generation = self._settle_flags(flags)
                return generation != self._generation and self._reload()
            except BaseException:
                locks.unlock(self._fd, locks.CHECKPOINT)
                raise
        except BaseException:
            self._read_depth -= 1
            raise

    def end_read(self) -> None:
        """End the read section :meth:`begin_read` started."""
        self._read_depth -= 1
        if self.readonly and not self._read_depth and not self._closed:
            locks.unlock(self._fd, locks.CHECKPOINT)

    def has_readers(self) -> bool:
        """Whether read-only openers of this file exist now, in this or other processes."""
        self._check_open()
        return self._fd is not None and self._readers_present()

    # -- damage found by recover=True -------------------------------------------------------

    @property
    def damage(self) -> FileDamage | None:
        """What an open with ``recover=True`` found wrong with the file (None otherwise)."""
        return self._damage

    def damaged_items(self, offset: int, itemsize: int, count: int,
                      start: int = 0) -> np.ndarray:
        """A bool per item of an array of ``count`` items of ``itemsize`` bytes at byte ``start``
        of extent ``offset``'s payload: does it touch a page that failed its checksum when the
        file was opened with ``recover=True``? All False when nothing failed or nothing was
        checked (see :attr:`damage`). O(failed pages)."""
        if self._damage is None or not self._damage.failed_pages:
            return np.zeros(count, bool)
        return self._damage.items_touching(offset + TAG_BYTES + start, itemsize, count)

    # -- accounting ---------------------------------------------------------------------------

    @property
    def reserved_bytes(self) -> int:
        table = self._table.extent_bytes if self._table is not None else 0
        return HEADER_BYTES + table + sum(self._sizes.values())

    @property
    def used_bytes(self) -> int:
        return sum(self._payload.values())

    def stats(self) -> ArenaStats:
        file_bytes = disk_bytes = 0
        if self._fd is not None:
            st = os.fstat(self._fd)
            file_bytes, disk_bytes = st.st_size, st.st_blocks * 512
        return ArenaStats(self.reserved_bytes, self.used_bytes, self._space.total_bytes,
                          len(self._sizes), self.limit_bytes, file_bytes,
                          sum(self._sizes.values()), disk_bytes)

    def _check(self) -> None:
        """Assert the invariants: extents tile the file, accounting matches."""
        assert self.used_bytes <= self.reserved_bytes
        if self._fd is None:
            return
        extents = [(o, s) for o, s in self._sizes.items()]
        extents += list(self._space.free.items()) + list(self._space.pending.items())
        extents.append((self._table_offset, self._table.extent_bytes))
        cursor = HEADER_BYTES
        for offset, size in sorted(extents):
            assert offset == cursor, f"extents do not tile the file at {cursor} (next {offset})"
            cursor += size
        assert cursor == self._end, (cursor, self._end)
        assert self._table.capacity * PAGE_BYTES >= self._end
        if not self.readonly:
            assert os.fstat(self._fd).st_size == self._file_bytes >= self._end

    # -- lifetime -----------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @_notes_failure
    def flush(self) -> None:
        """Make the file arena's state durable: :meth:`commit` with transactions; without, write
        the header and checksum extent and sync the mapped pages. No-op if anonymous/readonly."""
        self._check_open()
        if self._fd is None or self.readonly:
            return
        if self.durability == "commit":
            self.commit()
            return
        for mm in self._maps.values():
            mm.flush()
        self._write_table_and_header(open_for_writing=True)
        self._failed_since_flush = False

    def close(self, clean: bool = True) -> None:
        """Unmap and release the file; idempotent.

        With ``durability="commit"`` uncommitted changes are dropped, as in a crash; without,
        every page checksum is recomputed (O(file)) and the file is marked closed cleanly (so a
        zero-copy view kept past close must not be written to: it maps the file) -- unless an
        allocation, free, root change or flush failed since the last successful :meth:`flush`,
        or the owner passes ``clean=False`` (it failed to write its state in a way the arena
        cannot see): the file then stays marked open for writing and the next opener is told to
        salvage it, as after a crash.
        """
        if self._closed:
            return
        try:
            if (clean and self._fd is not None and not self.readonly
                    and self.durability == "none" and not self._failed_since_flush):
                self._close_cleanly()
        finally:
            all_unmapped = True
            for offset, mm in list(self._maps.items()):
                all_unmapped &= self._unmap(offset, mm)
            if (self._fd is not None and not self.readonly and self.durability == "commit"
                    and self._broken is None):
                if all_unmapped and self._committed is not None:
                    self._end = self._committed.end
                    self._trim_file()
                self._remove_own_log()
            self._release_files()
            self._closed = True

    def replace(self, other: Arena) -> None:
        """Rename this arena's file over ``other``'s path and close ``other``: a compaction's
        last step, with no moment in which the path names a file without its writer.

        Both are writers in this process. This arena holds its file's writer lock from creation,
        and the lock belongs to the open file, so it holds through the rename: any other
        process opening the path finds either file locked. From here on this arena uses
        ``other``'s path (and its ``PATH-wal`` at the next commit); its own empty log goes.
        ``other``'s file is flagged "replaced" under the checkpoint lock, so a reader still on
        it raises ClosedError at its next read section instead of reading a file nobody
        writes; ``other`` is closed without committing and without the clean-close work meant
        for a file that is opened again. Call between commits of both.
        """
        self._check_writable()
        other._check_writable()
        if self._fd is None or other._fd is None:
            raise ValueError("replace() renames files: both arenas must be file arenas")
        if self._log_fd is not None:
            os.close(self._log_fd)
            self._log_fd = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._log_path)
        os.replace(self.path, other.path)
        _fsync_directory(other.path)
        self.path = other.path
        other._retire()

    def _retire(self) -> None:
        """Flag this writer's file "replaced" for its readers and release it (see replace)."""
        try:
            locks.lock(self._fd, locks.CHECKPOINT, exclusive=True)
            try:
                header = parse_header(os.pread(self._fd, HEADER_BYTES, 0), self.path)
                wal.pwrite_all(self._fd, encode_header(dataclasses.replace(header,
                                                                           replaced=True)), 0)
            finally:
                locks.unlock(self._fd, locks.CHECKPOINT)
        finally:
            for offset, mm in list(self._maps.items()):
                self._unmap(offset, mm)
            self._remove_own_log()
            self._release_files()
            self._closed = True

    def _remove_own_log(self) -> None:
        """Remove ``PATH-wal`` if this arena opened it and the path still names that file
        (after :meth:`replace` the name belongs to the file renamed over ours)."""
        if self._log_fd is None:
            return
        mine = os.fstat(self._log_fd)
        with contextlib.suppress(FileNotFoundError):
            named = os.stat(self._log_path)
            if (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino):
                os.unlink(self._log_path)

    def __enter__(self) -> Arena:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self.path or "anonymous"
        limit = format_bytes(self.limit_bytes) if self.limit_bytes is not None else "none"
        state = "closed" if self._closed else f"{format_bytes(self.reserved_bytes)} reserved"
        return f"<Arena {where}: {state}, limit {limit}>"

    # -- internals: checks and mappings -------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the arena is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self.readonly:
            raise ReadOnlyError(f"arena {self.path!r} was opened read-only: open it with "
                                f"readonly=False to change it (one writer process at a time)")
        if self._broken is not None:
            raise TransactionError(self._broken)

    def _check_limit(self, extra_bytes: int) -> None:
        reserved = self.reserved_bytes
        if self.limit_bytes is not None and reserved + extra_bytes > self.limit_bytes:
            raise CapacityError(
                f"arena limit of {format_bytes(self.limit_bytes)} reached: "
                f"{format_bytes(reserved)} reserved, {format_bytes(extra_bytes)} more needed; "
                f"pass a larger limit=, delete entries, or use compression")

    @property
    def _log_path(self) -> str:
        return log_path(self.path)

    def _map(self, offset: int, size: int) -> mmap.mmap:
        if self.readonly:
            return mmap.mmap(self._fd, size, offset=offset, access=mmap.ACCESS_READ)
        if self.durability == "none":
            return mmap.mmap(self._fd, size, offset=offset, access=mmap.ACCESS_WRITE)
        mm = mmap.mmap(self._fd, size, offset=offset, access=mmap.ACCESS_COPY)
        self._addresses[offset] = address_of(mm)
        return mm

    def _unmap(self, offset: int, mm: mmap.mmap) -> bool:
        """Forget the mapping of ``offset``; False when a view keeps it mapped until it dies."""
        self._maps.pop(offset, None)
        self._addresses.pop(offset, None)
        try:
            mm.close()
        except BufferError:
            return False
        return True

    def _register(self, offset: int, size: int, nbytes: int, mm: mmap.mmap) -> None:
        self._sizes[offset] = size
        self._payload[offset] = nbytes
        self._maps[offset] = mm

    # -- internals: file space ----------------------------------------------------------------

    def _grow_file(self, nbytes: int) -> None:
        """Make the file at least ``nbytes`` long (the new bytes read as zeros)."""
        if nbytes > self._file_bytes:
            os.ftruncate(self._fd, nbytes)
            self._file_bytes = nbytes

    def _readers_present(self) -> bool:
        return locks.is_held(self._fd, locks.READERS, exclusive=True)

    def _cut_file(self, end: int) -> None:
        """Drop the file's bytes past ``end``: truncate, or zero them while readers may map them."""
        if self._file_bytes <= end:
            return
        if self._readers_present():
            zero_range(self._fd, end, self._file_bytes - end)
        else:
            os.ftruncate(self._fd, end)
            self._file_bytes = end

    def _trim_file(self) -> None:
        """Truncate the file to ``_end`` when no reader exists; otherwise leave it."""
        if self._file_bytes > self._end and not self._readers_present():
            os.ftruncate(self._fd, self._end)
            self._file_bytes = self._end

    def _zero_reused(self, offset: int, size: int, mm: mmap.mmap) -> None:
        """Make a reused free range read as zeros through ``mm``, its new mapping.

        Its pages are punched out of the file, except the first and, with transactions, the
        tags of committed free extents (a crash must still find those): these are zeroed in
        the mapping instead, so the commit writes them.
        """
        stop = offset + size
        keep = [offset]
        if self.durability == "commit":
            keep += sorted(o for o in self._committed.free if offset < o < stop)
        for page, following in zip(keep, keep[1:] + [stop]):
            mm[page - offset: page - offset + PAGE_BYTES] = _ZERO_PAGE
            if following > page + PAGE_BYTES:
                zero_range(self._fd, page + PAGE_BYTES, following - page - PAGE_BYTES)
                if self.durability == "commit":
                    self._zeroed.append((page + PAGE_BYTES, following - page - PAGE_BYTES))

    def _release_now(self, offset: int, size: int) -> None:
        """Without transactions: mark a range free in the file at once, merging neighbours, and
        cut the file short if the free space ends it."""
        start, merged_size = self._space.release(offset, size)
        if start + merged_size == self._end:
            del self._space.free[start]
            self._end = start
            self._cut_file(start)
            self._write_header(open_for_writing=True)
            return
        self._write_free_tag(start, merged_size)
        first = offset + PAGE_BYTES if start == offset else offset
        punch_hole(self._fd, first, offset + size - first)

    def _write_free_tag(self, offset: int, size: int) -> None:
        wal.pwrite_all(self._fd, encode_tag(size, 0, FREE), offset)

    def _move_table(self, extent_bytes: int) -> None:
        """Append a larger checksum extent at the end and free the old one. Without
        transactions both are written at once, so the tags stay walkable for ``recover=True``."""
        old_offset, old_bytes = self._table_offset, self._table.extent_bytes
        self._table = self._table.grown(extent_bytes)
        self._table_offset = self._end
        self._end += extent_bytes
        if self.durability == "commit":
            self._space.defer(old_offset, old_bytes)
            return
        wal.pwrite_all(self._fd, self._table.image, self._table_offset)
        self._release_now(old_offset, old_bytes)
        self._write_header(open_for_writing=True)

    # -- internals: opening -------------------------------------------------------------------

    def _open_writer(self, create: bool, verify: bool) -> None:
        path = self.path
        self._fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
        if not locks.try_lock(self._fd, locks.WRITER, exclusive=True):
            raise LockedError(f"{path!r} is open for writing in another process; a file has one "
                              f"writer at a time: close it there, or open with readonly=True")
        if self.durability == "none":
            if not locks.try_lock(self._fd, locks.READERS, exclusive=True):
                raise LockedError(f"{path!r} is open read-only in another process, and "
                                  f"durability='none' cannot share a file: close the readers "
                                  f"or open with durability='commit'")
        elif create and self._readers_present():
            raise LockedError(f"{path!r} is open read-only in another process; it cannot be "
                              f"created anew under them")
        if create:
            self._create_file()
        else:
            apply_pending_commit(self._fd, self.path)
            state = read_file_state(self._fd, self.path, verify=verify, recover=self._recover)
            self._install(state)
            if self._recover:
                self._damage = state.damage
                self._reclaim(state.damage.lost_ranges)
                self._recompute_checksums()
        self._cut_file(self._end)
        if self.durability == "none":
            self._generation += 1
            self._write_table_and_header(open_for_writing=True)
        else:
            self._pagemap = open_working_pagemap()
            self._committed = self._snapshot()

    def _open_reader(self, verify: bool) -> None:
        path = self.path
        self._fd = os.open(path, os.O_RDONLY)
        if not locks.try_lock(self._fd, locks.READERS, exclusive=False):
            raise LockedError(f"{path!r} is open for writing in another process with "
                              f"durability='none', which cannot share a file; open it when that "
                              f"writer has closed it (or let it use durability='commit')")
        if os.fstat(self._fd).st_size < HEADER_BYTES:
            raise CorruptionError(f"{path!r} is not an offheap file (shorter than its "
                                  f"{HEADER_BYTES}-byte header)")
        self._header_map = mmap.mmap(self._fd, HEADER_BYTES, access=mmap.ACCESS_READ)
        self._lock_checkpoint_shared()
        try:
            state = read_file_state(self._fd, self.path, verify=verify, recover=self._recover)
        finally:
            locks.unlock(self._fd, locks.CHECKPOINT)
        self._install(state)
        self._damage = state.damage

    def _reclaim(self, lost: tuple[tuple[int, int], ...]) -> None:
        """A writer in recover mode makes the lost ranges inside the file free space (at the
        next commit with transactions); the file is cut at the end of what the walk found."""
        for offset, length in lost:
            if offset >= self._end:
                continue
            if self.durability == "commit":
                self._space.defer(offset, length)
                self._structure_changed = True
            else:
                self._release_now(offset, length)

    def _lock_checkpoint_shared(self) -> None:
        """A reader opening the file takes the checkpoint lock shared; first it applies a commit
        that a writer which died (perhaps half-way through copying it into the file) left in
        the log. Later sections look only at the header's "applying" flag (begin_read): a
        commit logged by a writer that died before copying any of it is applied by the next
        opener."""
        while True:
            locks.lock(self._fd, locks.CHECKPOINT, exclusive=False)
            if not commit_left_pending(self._fd, self.path):
                return
            locks.unlock(self._fd, locks.CHECKPOINT)
            apply_for_reader(self.path)

    def _create_file(self) -> None:
        os.ftruncate(self._fd, 0)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._log_path)
        self._file_id = _new_file_id()
        self._table = ChecksumTable.empty(PAGE_BYTES)
        self._table_offset = HEADER_BYTES
        self._end = HEADER_BYTES + PAGE_BYTES
        self._file_bytes = 0
        self._grow_file(self._end)
        self._write_table_and_header(open_for_writing=False)
        os.fsync(self._fd)
        _fsync_directory(self.path)

    def _recompute_checksums(self) -> None:
        """Checksum every live page as the file holds it now (after ``recover=True``)."""
        for offset, size in self._sizes.items():
            for pages, crcs in file_page_crcs(self._fd, self.path, offset, size):
                self._table.set(pages, crcs)
        self._structure_changed = True

    def _install(self, state: FileState) -> None:
        self._generation = state.generation
        self._end = state.end
        self._sizes = {offset: shape.size for offset, shape in state.live.items()}
        self._payload = {offset: shape.payload_bytes for offset, shape in state.live.items()}
        self._space = FreeSpace(state.free)
        self._table, self._table_offset = state.table, state.table_offset
        self._root, self._root_offset = state.root, state.root_offset
        self._file_id = state.file_id
        self._file_bytes = os.fstat(self._fd).st_size

    def _snapshot(self) -> FileState:
        live = {offset: ExtentShape(size, self._payload[offset])
                for offset, size in self._sizes.items()}
        return FileState(self._generation, self._end, live, dict(self._space.free), self._table, self._table_offset, self._root,
                          self._root_offset, self._file_id)

    def _settle_flags(self, flags: int) -> int:
        """A read section found the header flagged (checkpoint lock held shared): raise for a
        replaced file; for a commit left half-copied, apply it from the log as a writer's open
        would (the lock is let go meanwhile) and return the generation the file has then."""
        if flags & FLAG_REPLACED:
            raise ClosedError(f"{self.path!r} was replaced by another file (a compaction renamed "
                              f"a new file over it) since this reader opened it: open it again")
        locks.unlock(self._fd, locks.CHECKPOINT)
        apply_for_reader(self.path)
        locks.lock(self._fd, locks.CHECKPOINT, exclusive=False)
        generation, flags = peek_generation_and_flags(self._header_map)
        if flags & (FLAG_APPLYING | FLAG_REPLACED):
            if flags & FLAG_APPLYING:
                raise half_applied_error(self._fd, self.path)
            return self._settle_flags(flags)
        return generation

    def _reload(self) -> bool:
        """A reader's reload of the extent table after another process committed (checkpoint
        lock held shared); mappings whose extent changed are dropped. Returns True."""
        state = read_file_state(self._fd, self.path, verify=False, recover=self._recover)
        for offset, mm in list(self._maps.items()):
            if getattr(state.live.get(offset), 'size', None) != len(mm):
                self._unmap(offset, mm)
        self._install(state)
        return True

    # -- internals: commit --------------------------------------------------------------------

    def _written_page_runs(self) -> list[tuple[int, int, int]]:
        """``(extent offset, first page, page count)`` of every run of pages written since the
        last commit, from the pagemap where it works, else by comparing with the file."""
        runs = []
        for offset, mm in self._maps.items():
            if self._pagemap is not None:
                mask = self._pagemap.written_pages(self._addresses[offset], len(mm) // PAGE_BYTES)
            else:
                mask = differing_pages(mm, self._fd, offset)
            runs.extend((offset, first, count) for first, count in page_runs(mask))
        return runs

    def _commit(self, runs: list[tuple[int, int, int]], writes: list) -> None:
        committed = self._committed
        free = self._space.settled()
        end = cut_tail(free, self._end)
        table = self._table.copy()
        for offset in self._new:
            pages = page_numbers(offset, self._sizes[offset] // PAGE_BYTES)
            table.set(pages, np.full(len(pages), ZERO_PAGE_CRC, np.uint32))
        numbers, crcs = [], []
        for offset, first, count in runs:
            pages = memoryview(self._maps[offset])[first * PAGE_BYTES: (first + count) * PAGE_BYTES]
            writes.append((offset + first * PAGE_BYTES, pages))
            numbers.append(page_numbers(offset + first * PAGE_BYTES, count))
            crcs.append(page_crcs(pages))
        if runs:
            table.set(np.concatenate(numbers), np.concatenate(crcs))
        for offset, size in free.items():
            if committed.free.get(offset) != size:
                writes.append((offset, encode_tag(size, 0, FREE)))
        for page in table.take_changed_pages():
            writes.append((self._table_offset + page * PAGE_BYTES,
                           memoryview(table.image)[page * PAGE_BYTES: (page + 1) * PAGE_BYTES]))
        generation = self._generation + 1
        writes.append((0, self._header_bytes(generation, end, table, open_for_writing=False)))
        zeroed = [(o, min(n, end - o)) for o, n in self._zeroed if o < end]
        if self._log_fd is None:
            self._log_fd = os.open(self._log_path, os.O_RDWR | os.O_CREAT, 0o644)
            _fsync_directory(self.path)
        wal.write_record(self._log_fd, file_id=self._file_id,
                         base_generation=self._generation, new_generation=generation, end=end,
                         zero_ranges=zeroed, writes=writes)
        try:
            self._checkpoint(writes, end, free)
            os.ftruncate(self._log_fd, 0)
        except BaseException as exc:
            self._broken = (f"a commit of {self.path!r} is durable in {self._log_path!r} but could "
                            f"not be copied into the file ({exc!r}); close the arena and open the "
                            f"file again to apply it")
            raise TransactionError(self._broken) from exc
        for offset, first, count in runs:
            self._maps[offset].madvise(mmap.MADV_DONTNEED, first * PAGE_BYTES, count * PAGE_BYTES)
        self._space.free, self._space.pending = free, {}
        self._end, self._table, self._generation = end, table, generation
        self._new.clear()
        self._zeroed.clear()
        self._structure_changed = False
        self._committed = self._snapshot()

    def _checkpoint(self, writes: list, end: int, free: dict[int, int]) -> None:
        """Copy a logged commit into the file under the checkpoint lock, punch out the space it
        freed, cut the file to ``end`` (or zero its tail while readers exist), fdatasync."""
        locks.lock(self._fd, locks.CHECKPOINT, exclusive=True)
        try:
            mark_applying(self._fd, self.path)
            for offset, data in writes:
                wal.pwrite_all(self._fd, data, offset)
            for offset, size in self._space.pending.items():
                first = offset + PAGE_BYTES if offset in free else offset
                stop = min(offset + size, end)
                if stop > first:
                    punch_hole(self._fd, first, stop - first)
            self._cut_file(end)
            os.fdatasync(self._fd)
        finally:
            locks.unlock(self._fd, locks.CHECKPOINT)

    def _header_bytes(self, generation: int, end: int, table: ChecksumTable, *,
                      open_for_writing: bool) -> bytes:
        inline = b"" if self._root_offset else self._root
        return encode_header(Header(generation, end, self._table_offset, table.crc(),
                                    self.durability, open_for_writing, self._root_offset,
                                    len(self._root), inline, self._file_id))

    # -- internals: durability="none" ---------------------------------------------------------

    def _write_header(self, *, open_for_writing: bool) -> None:
        wal.pwrite_all(self._fd, self._header_bytes(self._generation, self._end, self._table,
                                                    open_for_writing=open_for_writing), 0)

    def _write_table_and_header(self, *, open_for_writing: bool) -> None:
        """Write the checksum extent and the header, then fsync."""
        wal.pwrite_all(self._fd, self._table.image, self._table_offset)
        self._table.take_changed_pages()
        self._write_header(open_for_writing=open_for_writing)
        os.fsync(self._fd)

    def _close_cleanly(self) -> None:
        """Without transactions: checksum every live page, then clear the "open" flag."""
        for mm in self._maps.values():
            mm.flush()
        for offset, size in self._sizes.items():
            for pages, crcs in file_page_crcs(self._fd, self.path, offset, size):
                self._table.set(pages, crcs)
        self._write_table_and_header(open_for_writing=False)

    def _release_files(self) -> None:
        """Close the descriptors, unlocking first: a mapping still exported keeps a duplicate of
        the file descriptor (mmap holds one), and with it the locks, until its last view dies."""
        if self._fd is not None:
            for byte in (locks.WRITER, locks.READERS, locks.CHECKPOINT):
                locks.unlock(self._fd, byte)
        if self._header_map is not None:
            self._header_map.close()
            self._header_map = None
        for fd in (self._log_fd, self._fd):
            if fd is not None:
                os.close(fd)
        self._log_fd = self._fd = None
        if self._pagemap is not None:
            self._pagemap.close()
            self._pagemap = None
