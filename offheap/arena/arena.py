"""The arena (layer 3): every byte offheap stores lives in memory handed out here.

An arena is a set of *extents*, each its own memory mapping: anonymous memory (``mmap(-1, n)``)
or a page-aligned range of one file. Extents are never resized in place, because a mapping whose
buffer is exported to numpy cannot be resized; a structure that grows allocates a larger extent,
copies, and frees the old one. The modules of this package are the only ones in offheap that
map memory or open a map's file.

Accounting is exact: ``reserved_bytes`` is the header, the checksum extent of a file arena and
the mapped size of every live extent; ``used_bytes`` the sum of the payload sizes callers asked
for. ``limit_bytes`` bounds ``reserved_bytes``: :meth:`Arena.allocate` raises
:class:`CapacityError` *before* mapping anything that would cross it, the analogue of Java's
``-XX:MaxDirectMemorySize``. :meth:`Arena.reservation_bytes` says beforehand what allocations
would add, so an owner can size a structure to the room left.

File arenas. The format (header, extent tags, page checksums) is specified in
:mod:`offheap.arena.format`; :mod:`offheap.arena.filestate` reads it. The *root blob* is a small
byte string owned by the layer directly above (the record store, or a standalone hash map):
where its own metadata lives. Free extents are found again on open by walking the tags; a free
extent at the end of the file is cut off. Two durability modes:

- ``durability="commit"`` (the default, :mod:`offheap.arena.commit`): private mappings, so
  nothing reaches the file until :meth:`Arena.commit`, which writes the changed pages through
  the write-ahead log (:mod:`offheap.arena.wal`); a crash at any moment reopens as the last
  commit. :meth:`Arena.rollback` returns to the last commit. :meth:`Arena.close` does not
  commit.
- ``durability="none"`` (:mod:`offheap.arena.writethrough`): shared mappings, every write
  reaches the file at the kernel's pace. The header's "open for writing" flag is set while a
  writer has the file and cleared, with every page checksum recomputed, by :meth:`Arena.close`
  (unless a change failed since the last successful flush); a file found with the flag set did
  not close cleanly and opens only with ``recover=True``.

Sharing between processes (:mod:`offheap.arena.locks`): one writer at a time; read-only openers
(:mod:`offheap.arena.reader`) do their reads inside :meth:`Arena.read_section`, which excludes a
commit being applied and picks up the commits made since. Readers and a writer share a file only
with ``durability="commit"``. While readers exist the writer never makes the file shorter: it
punches holes into space it frees instead (:mod:`offheap.arena.holes`). :meth:`Arena.replace`
renames a writer's file over another's path without releasing its lock (compaction); the file
it replaces is flagged so that its readers stop. Each file has a random id in its header that
every log record names, so a log is never applied to another file
(:mod:`offheap.arena.recovery`).

Structure: :class:`Arena` checks what every mode shares (closed, read-only, the limit, argument
values) and hands the rest to its *backing* (:mod:`offheap.arena.backing`), one class per mode,
chosen when the arena is opened; the live extents are one
:class:`~offheap.arena.extents.ExtentTable`.

Thread safety: none; the owner of an arena serializes access to it.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Concatenate, ParamSpec, TypeVar

import numpy as np
from numpy.typing import DTypeLike

from offheap.arena.anonymous import AnonymousMemory
from offheap.arena.backing import Backing
from offheap.arena.commit import CommitWriter
from offheap.arena.damage import FileDamage
from offheap.arena.filewriter import FileWriter
from offheap.arena.format import HEADER_BYTES, INLINE_ROOT_BYTES, PAGE_BYTES, TAG_BYTES
from offheap.arena.reader import FileReader
from offheap.arena.writethrough import WriteThroughWriter
from offheap.errors import CapacityError, ClosedError
from offheap.kernels.sizes import ByteLimit, byte_limit

WRITERS: dict[str, type[FileWriter]] = {writer.durability: writer
                                        for writer in (CommitWriter, WriteThroughWriter)}
"""The writer of each durability mode, by the name :meth:`Arena.file` takes."""

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _round_to_pages(nbytes: int) -> int:
    return -(-nbytes // PAGE_BYTES) * PAGE_BYTES


def format_bytes(nbytes: float) -> str:
    """Render a byte count for people: ``1.5 MiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(nbytes) < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    raise AssertionError("unreachable")


def _limit_argument(limit: ByteLimit) -> int | None:
    """The ``limit=`` a user gave (bytes or a size string, see ``byte_limit``), checked."""
    limit_bytes = byte_limit(limit)
    if limit_bytes is not None and limit_bytes < HEADER_BYTES:
        raise ValueError(f"limit= must be at least {format_bytes(HEADER_BYTES)} "
                         f"({HEADER_BYTES} bytes), got {limit!r}")
    return limit_bytes


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


def _notes_failure(method: Callable[Concatenate[Arena, _P], _R]
                   ) -> Callable[Concatenate[Arena, _P], _R]:
    """Mark an arena method whose failure may leave the owner's state half-written: without
    transactions the file then stays marked open for writing at :meth:`Arena.close`, unless a
    later :meth:`Arena.flush` succeeds (the owner wrote its state again)."""
    @functools.wraps(method)
    def noting(self: Arena, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            self._backing.note_failed_change()
            raise
    return noting


class Arena:
    """Extents of anonymous or file-backed memory under one hard limit.

    Build one with :meth:`anonymous` or :meth:`file`. An extent is named by its ``offset``
    (its position in the file, or a unique number for anonymous memory); owners keep offsets in
    their metadata and ask for views with :meth:`view` or :meth:`array`. Views returned here point
    into the mapping: the owner must drop them before :meth:`free` of that extent, and before
    :meth:`rollback` or a :meth:`read_section` that reports a change. :meth:`close` unmaps every
    extent whose buffer is no longer exported; one still exported (a zero-copy view a user asked
    for) stays mapped until its last view is gone, so a stale view never faults.

    ``readonly`` and ``durability`` (None for anonymous memory) are as opened; ``path`` is the
    file (None for anonymous memory), which :meth:`replace` changes.
    """

    def __init__(self, backing: Backing, *, limit_bytes: int | None, readonly: bool,
                 durability: str | None) -> None:
        self._backing = backing
        self._extents = backing.extents
        self.limit_bytes = limit_bytes
        self.readonly = readonly
        self.durability = durability
        self._closed = False

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def anonymous(cls, limit_bytes: ByteLimit = None) -> Arena:
        """An arena of anonymous memory, returned to the OS extent by extent on free/close.

        ``limit_bytes`` (every map's ``limit=``) is bytes or a size string such as ``"1GiB"``.
        """
        return cls(AnonymousMemory(), limit_bytes=_limit_argument(limit_bytes), readonly=False,
                   durability=None)

    @classmethod
    def file(cls, path: str | os.PathLike[str], *, limit_bytes: ByteLimit = None,
             readonly: bool = False, create: bool = True, replace: bool = False,
             durability: str = "commit", verify: bool = True, recover: bool = False) -> Arena:
        """Open the arena stored in ``path``, or create it: ``create`` makes a new file where
        the path names nothing (``False``: :class:`MissingFileError` instead), ``replace`` puts
        a new empty file in place of what is there. A read-only open never creates.

        Whether the file is missing is decided under its writer lock, and a new file appears
        at the path whole, never empty or half-written (:mod:`offheap.arena.creation`): of two
        processes creating the same path at once, one creates and the other opens that file.
        A file of 0 bytes is a :class:`CorruptionError` unless ``replace=True``.

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
        if durability not in WRITERS:
            raise ValueError(f"durability must be one of {tuple(WRITERS)}, got {durability!r}")
        if replace and readonly:
            raise ValueError(f"cannot replace {path!r} read-only: pass replace=False to open "
                             f"it")
        limit = _limit_argument(limit_bytes)
        backing: Backing
        if readonly:
            backing = FileReader.open(path, verify=verify, recover=recover)
        else:
            backing = WRITERS[durability].open(path, create=create, replace=replace,
                                               verify=verify, recover=recover)
        return cls(backing, limit_bytes=limit, readonly=readonly, durability=durability)

    @property
    def path(self) -> str | None:
        return self._backing.path

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
        return self._backing.allocate(_round_to_pages(nbytes + TAG_BYTES), nbytes,
                                      self._check_limit)

    @_notes_failure
    def free(self, offset: int) -> None:
        """Unmap extent ``offset`` and give its memory back (anonymous) or mark it free (file).

        With ``durability="commit"`` the space becomes reusable after the next commit. Raises
        KeyError for an offset that is not live, BufferError (and frees nothing) while a view
        of the extent is exported.
        """
        self._check_writable()
        extent = self._extents.remove(offset)
        self._backing.release(offset, extent.size)

    def reservation_bytes(self, *nbytes: int) -> int:
        """How much :attr:`reserved_bytes` grows if extents of these payload sizes are allocated
        one after another now: each extent's whole pages with its tag, plus, in a file, the
        growth of the checksum extent when they take the file past what it covers. This is what
        :meth:`allocate` holds against ``limit_bytes``, so an owner sizing a structure to a limit
        can ask before it allocates. O(free extents) per size; changes nothing.
        """
        return self._backing.reservation_bytes([_round_to_pages(n + TAG_BYTES) for n in nbytes])

    # -- access -------------------------------------------------------------------------------

    def view(self, offset: int) -> memoryview:
        """A writable memoryview of extent ``offset``'s payload (read-only for readonly arenas)."""
        self._check_open()
        extent = self._extents.get(offset)
        mapping = extent.mapping
        if mapping is None:
            mapping = self._backing.map_extent(extent)
        return memoryview(mapping)[TAG_BYTES:]

    def array(self, offset: int, dtype: DTypeLike | None, count: int,
              start: int = 0) -> np.ndarray:
        """A numpy view of ``count`` items of ``dtype`` at byte ``start`` of an extent's payload."""
        return np.frombuffer(self.view(offset), dtype=dtype, count=count, offset=start)

    def payload_bytes(self, offset: int) -> int:
        """Usable payload bytes of extent ``offset`` (at least what was asked for)."""
        return self._extents.get(offset).size - TAG_BYTES

    # -- root blob ----------------------------------------------------------------------------

    @property
    def root(self) -> bytes:
        """The owner's metadata blob (persisted by :meth:`commit`/:meth:`flush` in file arenas)."""
        self._check_open()
        return self._backing.root

    @_notes_failure
    def set_root(self, blob: bytes) -> None:
        """Replace the root blob; a large one is kept in an extent of its own."""
        self._check_writable()
        blob = bytes(blob)
        if blob == self._backing.root:
            return
        new_offset = 0
        if len(blob) > INLINE_ROOT_BYTES:
            new_offset = self.allocate(len(blob))
            with self.view(new_offset) as view:
                view[: len(blob)] = blob
        old_offset = self._backing.root_offset
        self._backing.set_root(blob, new_offset)
        if old_offset:
            self.free(old_offset)

    # -- transactions -------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """The file's generation as this arena last committed or loaded it (+1 per commit)."""
        return self._backing.generation

    @_notes_failure
    def commit(self) -> None:
        """Make every change since the last commit durable at once (``durability="commit"``).

        Cost: finding written pages, O(mapped bytes / 512); then the changed pages are written
        twice (log and file) with two fsyncs. Returns at once when nothing changed. Without
        transactions it is :meth:`flush`; on anonymous memory it does nothing.
        """
        self._check_writable()
        self._backing.commit()

    def uncommitted_bytes(self) -> int:
        """Bytes of pages changed since the last commit (``durability="commit"``), which
        :meth:`rollback` or :meth:`close` would drop; 0 without transactions. O(pages written
        since the commit)."""
        self._check_open()
        return self._backing.uncommitted_bytes()

    def rollback(self) -> None:
        """Drop every change since the last commit; the extents, root and file are as committed
        (the file is cut back to its committed size unless readers or views are in the way).

        Owners must drop their views first and re-read their state from :attr:`root` after.
        Without transactions (anonymous memory, ``durability="none"``) it raises
        :class:`TransactionError` and changes nothing.
        """
        self._check_writable()
        self._backing.rollback()

    @contextlib.contextmanager
    def read_section(self) -> Iterator[bool]:
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
        For a reader the common case costs a lock, a look at two header fields and an unlock
        (see :meth:`FileReader.begin_read <offheap.arena.reader.FileReader.begin_read>`).
        """
        self._check_open()
        return self._backing.begin_read()

    def end_read(self) -> None:
        """End the read section :meth:`begin_read` started."""
        self._backing.end_read()

    def has_readers(self) -> bool:
        """Whether read-only openers of this file exist now, in this or other processes."""
        self._check_open()
        return self._backing.has_readers()

    # -- damage found by recover=True -------------------------------------------------------

    @property
    def damage(self) -> FileDamage | None:
        """What an open with ``recover=True`` found wrong with the file (None otherwise)."""
        return self._backing.damage

    def damaged_items(self, offset: int, itemsize: int, count: int,
                      start: int = 0) -> np.ndarray:
        """A bool per item of an array of ``count`` items of ``itemsize`` bytes at byte ``start``
        of extent ``offset``'s payload: does it touch a page that failed its checksum when the
        file was opened with ``recover=True``? All False when nothing failed or nothing was
        checked (see :attr:`damage`). O(failed pages)."""
        damage = self.damage
        if damage is None or not damage.failed_pages:
            return np.zeros(count, bool)
        return damage.items_touching(offset + TAG_BYTES + start, itemsize, count)

    # -- accounting ---------------------------------------------------------------------------

    @property
    def reserved_bytes(self) -> int:
        return self._backing.overhead_bytes + self._extents.reserved_bytes

    @property
    def used_bytes(self) -> int:
        return self._extents.used_bytes

    def stats(self) -> ArenaStats:
        file_bytes, disk_bytes = self._backing.file_usage()
        return ArenaStats(self.reserved_bytes, self.used_bytes, self._backing.free_bytes,
                          len(self._extents), self.limit_bytes, file_bytes,
                          self._extents.reserved_bytes, disk_bytes)

    def _check(self) -> None:
        """Assert the invariants: extents tile the file, accounting matches."""
        assert self.used_bytes <= self.reserved_bytes
        self._backing.check()

    # -- lifetime -----------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @_notes_failure
    def flush(self) -> None:
        """Make the file arena's state durable: :meth:`commit` with transactions; without, write
        the header and checksum extent and sync the mapped pages. No-op if anonymous/readonly."""
        self._check_open()
        self._backing.flush()

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
            self._backing.close(clean)
        finally:
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
        mine, theirs = self._backing, other._backing
        if not isinstance(mine, FileWriter) or not isinstance(theirs, FileWriter):
            raise ValueError("replace() renames files: both arenas must be file arenas")
        mine.take_path_of(theirs)
        try:
            theirs.retire()
        finally:
            other._closed = True

    def __enter__(self) -> Arena:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self.path or "anonymous"
        limit = format_bytes(self.limit_bytes) if self.limit_bytes is not None else "none"
        state = "closed" if self._closed else f"{format_bytes(self.reserved_bytes)} reserved"
        return f"<Arena {where}: {state}, limit {limit}>"

    # -- checks -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the arena is closed")

    def _check_writable(self) -> None:
        self._check_open()
        self._backing.check_writable()

    def _check_limit(self, extra_bytes: int) -> None:
        reserved = self.reserved_bytes
        if self.limit_bytes is not None and reserved + extra_bytes > self.limit_bytes:
            raise CapacityError(
                f"arena limit of {format_bytes(self.limit_bytes)} reached: "
                f"{format_bytes(reserved)} reserved, {format_bytes(extra_bytes)} more needed; "
                f"pass a larger limit=, delete entries, or use compression")
