"""A read-only opener of a file that another process may be writing (layer 3, private).

A :class:`FileReader` maps the file ``MAP_SHARED`` read-only and does its reads inside read
sections (:meth:`FileReader.begin_read`): each takes the checkpoint lock shared, so no commit is
copied into the file while it runs, and reloads the extent table when the generation in the
header moved. A reader shares a file only with a ``durability="commit"`` writer (it holds the
``READERS`` lock shared, which a writer without transactions holds exclusive); while readers
exist, that writer never makes the file shorter, so a reader's mappings never fault.

A commit that a writer which died left in the log is applied by the reader on opening (and by
a read section that finds the header flagged "applying"), through a descriptor opened for
writing (:mod:`offheap.arena.recovery`). A file a compaction replaced is flagged "replaced":
the next read section raises ClosedError.
"""

from __future__ import annotations

import mmap

from offheap.arena import locks
from offheap.arena.arenafile import ArenaFile
from offheap.arena.backing import LimitCheck
from offheap.arena.filebacking import FileBacking
from offheap.arena.filestate import FileState, empty_file_error, read_file_state
from offheap.arena.format import (
    FLAG_APPLYING,
    FLAG_REPLACED,
    HEADER_BYTES,
    peek_generation_and_flags,
)
from offheap.arena.recovery import apply_for_reader, commit_left_pending, half_applied_error
from offheap.errors import (
    ClosedError,
    CorruptionError,
    LockedError,
    MissingFileError,
    ReadOnlyError,
)


class FileReader(FileBacking):
    """A reader of an arena file; see the module docstring.

    ``header_map`` is a shared read-only mapping of the header page: the cheap look at the
    generation and flags that every read section takes. Sections nest; only the outermost
    takes the lock and may reload.
    """

    access = mmap.ACCESS_READ

    def __init__(self, file: ArenaFile, state: FileState, header_map: mmap.mmap, *,
                 recover: bool) -> None:
        super().__init__(file, state)
        self.header_map = header_map
        self.recover = recover
        self.read_depth = 0

    @classmethod
    def open(cls, path: str, *, verify: bool, recover: bool) -> FileReader:
        """Open ``path`` read-only, after applying a commit a dead writer left in its log.
        Options as in :meth:`Arena.file`."""
        try:
            file = ArenaFile.open(path, writable=False)
        except FileNotFoundError:
            raise MissingFileError(path, "a read-only open never creates a file; open it "
                                   "for writing to make a new one") from None
        header_map = None
        try:
            if not locks.try_lock(file.fd, locks.READERS, exclusive=False):
                raise LockedError(f"{path!r} is open for writing in another process with "
                                  f"durability='none', which cannot share a file; open it when "
                                  f"that writer has closed it (or let it use "
                                  f"durability='commit')")
            file.refresh_size()
            if file.size == 0:
                raise empty_file_error(path)
            if file.size < HEADER_BYTES:
                raise CorruptionError(f"{path!r} is not an offheap file (shorter than its "
                                      f"{HEADER_BYTES}-byte header)")
            header_map = mmap.mmap(file.fd, HEADER_BYTES, access=mmap.ACCESS_READ)
            _lock_checkpoint_applying_the_log(file)
            try:
                state = read_file_state(file.fd, path, verify=verify, recover=recover)
            finally:
                locks.unlock(file.fd, locks.CHECKPOINT)
            return cls(file, state, header_map, recover=recover)
        except BaseException:
            if header_map is not None:
                header_map.close()
            file.release()
            raise

    def _refusal(self) -> ReadOnlyError:
        return ReadOnlyError(f"arena {self.path!r} was opened read-only: open it with "
                             f"readonly=False to change it (one writer process at a time)")

    def check_writable(self) -> None:
        raise self._refusal()

    def allocate(self, size: int, payload_bytes: int, check_limit: LimitCheck) -> int:
        raise self._refusal()

    def release(self, offset: int, size: int) -> None:
        raise self._refusal()

    # -- read sections ------------------------------------------------------------------------

    def begin_read(self) -> bool:
        """Start a read section; True when another process committed since the last one (the
        extent table is reloaded then). Paired with one :meth:`end_read`, also after an error.

        The common case costs a lock, a look at two header fields through :attr:`header_map`,
        and (in end_read) an unlock: the generation says whether a commit was applied since,
        and the flags whether one is being applied by a writer that died ("applying": the
        section applies it from the log first) or whether the file was replaced by a
        compaction (ClosedError). No commit is copied into the file while the lock is held,
        so a section never sees half of one.
        """
        self.read_depth += 1
        if self.read_depth > 1:
            return False
        fd = self.file.fd
        try:
            locks.lock(fd, locks.CHECKPOINT, exclusive=False)
            try:
                generation, flags = peek_generation_and_flags(self.header_map)
                if flags & (FLAG_APPLYING | FLAG_REPLACED):
                    generation = self._settle_flags(flags)
                return generation != self.generation and self._reload()
            except BaseException:
                locks.unlock(fd, locks.CHECKPOINT)
                raise
        except BaseException:
            self.read_depth -= 1
            raise

    def end_read(self) -> None:
        self.read_depth -= 1
        if not self.read_depth and not self.file.closed:
            locks.unlock(self.file.fd, locks.CHECKPOINT)

    def _settle_flags(self, flags: int) -> int:
        """A read section found the header flagged (checkpoint lock held shared): raise for a
        replaced file; for a commit left half-copied, apply it from the log as a writer's open
        would (the lock is let go meanwhile) and return the generation the file has then."""
        if flags & FLAG_REPLACED:
            raise ClosedError(f"{self.path!r} was replaced by another file (a compaction renamed "
                              f"a new file over it) since this reader opened it: open it again")
        fd = self.file.fd
        locks.unlock(fd, locks.CHECKPOINT)
        apply_for_reader(self.path)
        locks.lock(fd, locks.CHECKPOINT, exclusive=False)
        generation, flags = peek_generation_and_flags(self.header_map)
        if flags & (FLAG_APPLYING | FLAG_REPLACED):
            if flags & FLAG_APPLYING:
                raise half_applied_error(fd, self.path)
            return self._settle_flags(flags)
        return generation

    def _reload(self) -> bool:
        """Reload the extent table after another process committed (checkpoint lock held
        shared); mappings whose extent changed are dropped. Returns True."""
        self.install(read_file_state(self.file.fd, self.path, verify=False,
                                     recover=self.recover))
        return True

    # -- lifetime -----------------------------------------------------------------------------

    def close(self, clean: bool) -> None:
        self.extents.unmap_all()
        self.release_file()

    def release_file(self) -> None:
        self.file.release()
        self.header_map.close()


def _lock_checkpoint_applying_the_log(file: ArenaFile) -> None:
    """Take the checkpoint lock shared for an opening reader; first apply a commit that a
    writer which died (perhaps half-way through copying it into the file) left in the log.
    Later sections look only at the header's "applying" flag (see
    :meth:`FileReader.begin_read`): a commit logged by a writer that died before copying any
    of it is applied by the next opener."""
    while True:
        locks.lock(file.fd, locks.CHECKPOINT, exclusive=False)
        if not commit_left_pending(file.fd, file.path):
            return
        locks.unlock(file.fd, locks.CHECKPOINT)
        apply_for_reader(file.path)
