"""One open arena file: its descriptor, its length, its locks (layer 3, private to the arena).

An :class:`ArenaFile` owns the descriptor through which an arena reads, writes, maps and locks
its file (:mod:`offheap.arena.locks`), and keeps the file's length as this process last set it.
Making the file shorter respects readers in other processes: while any may map the file, the
tail is zeroed (punched out) instead of cut, so no reader's mapping ever faults.

Blocks before mappings: a write into a mapped hole of a file system that has no block left
kills the process with SIGBUS. :meth:`ArenaFile.reserve` allocates the blocks of a range
(``posix_fallocate``) before the writer maps it, so a full disk is a
:class:`~offheap.errors.CapacityError` at allocation instead.
"""

from __future__ import annotations

import errno
import os

from offheap.arena import locks
from offheap.arena.holes import zero_range
from offheap.errors import CapacityError, StorageError

_FULL = (errno.ENOSPC, errno.EDQUOT)


class ArenaFile:
    """The descriptor of an arena file, owned by one arena; not thread-safe.

    ``size`` is the file's length as last set here or read by :meth:`refresh_size`; bytes
    past the arena's end read as zeros. After :meth:`release` the descriptor is closed.
    """

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.size = 0  # unknown until refresh_size: an opener takes its lock first
        self.closed = False

    @classmethod
    def open(cls, path: str, *, writable: bool, create: bool = False) -> ArenaFile:
        """Open ``path`` for reading and writing (creating it if ``create``) or read-only."""
        flags = os.O_RDWR | (os.O_CREAT if create else 0) if writable else os.O_RDONLY
        return cls(path, os.open(path, flags, 0o644))

    def is_named_by_path(self) -> bool:
        """Whether :attr:`path` still names this open file (no rename or removal since)."""
        return names_file(self.path, self.fd)

    def refresh_size(self) -> None:
        """Take the file's length from the file system."""
        self.size = os.fstat(self.fd).st_size

    def readers_present(self) -> bool:
        """Whether read-only openers of this file exist now, in this or other processes."""
        return locks.is_held(self.fd, locks.READERS, exclusive=True)

    def grow(self, nbytes: int) -> None:
        """Make the file at least ``nbytes`` long (the new bytes read as zeros); a failure is
        CapacityError or StorageError, the file's length unchanged."""
        if nbytes > self.size:
            try:
                os.ftruncate(self.fd, nbytes)
            except OSError as exc:
                raise file_error(self.path, exc, f"the file could not grow to {nbytes:,} bytes",
                                 "nothing was changed") from None
            self.size = nbytes

    def reserve(self, offset: int, length: int) -> None:
        """Allocate the file system's blocks for ``length`` bytes at ``offset``, inside the
        file (:meth:`grow` it first): holes become zeroed blocks, data stays, so writes through
        a mapping of the range never fault. CapacityError when the file system is full (blocks
        a failed call took inside the range hold zeros, as the holes read); other failures
        are StorageError. One ``fallocate`` call where the file system has it."""
        if length <= 0:
            return
        try:
            os.posix_fallocate(self.fd, offset, length)
        except OSError as exc:
            raise file_error(self.path, exc, f"{length:,} bytes could not be reserved",
                             "nothing was changed") from None

    def cut(self, end: int) -> None:
        """Drop the file's bytes past ``end``: truncate, or zero them while readers may map them."""
        if self.size <= end:
            return
        if self.readers_present():
            zero_range(self.fd, end, self.size - end)
        else:
            os.ftruncate(self.fd, end)
            self.size = end

    def trim(self, end: int) -> None:
        """Truncate the file to ``end`` when no reader exists; otherwise leave it."""
        if self.size > end and not self.readers_present():
            os.ftruncate(self.fd, end)
            self.size = end

    def release(self) -> None:
        """Unlock, then close the descriptor: a mapping still exported keeps a duplicate of the
        descriptor (mmap holds one), and with it the locks, until its last view dies."""
        for byte in (locks.WRITER, locks.READERS, locks.CHECKPOINT):
            locks.unlock(self.fd, byte)
        os.close(self.fd)
        self.closed = True


def is_full(exc: OSError) -> bool:
    """Whether ``exc`` says the file system (or the user's quota) has no block left."""
    return exc.errno in _FULL


def file_system_full(path: str, exc: OSError, what: str, outcome: str) -> CapacityError:
    """The CapacityError of a full file system under ``path``: ``what`` failed, ``outcome`` is
    the state it left."""
    return CapacityError(f"the file system holding {path!r} is full: {what} "
                         f"({os.strerror(exc.errno or 0)}); {outcome}: free disk space, or "
                         f"delete entries")


def file_error(path: str, exc: OSError, what: str, outcome: str) -> CapacityError | StorageError:
    """The error of a failed write, sync or allocation on ``path``: CapacityError when the file
    system is full, else StorageError with the call's errno; ``what`` failed, ``outcome`` is
    the state it left."""
    if is_full(exc):
        return file_system_full(path, exc, what, outcome)
    return StorageError(exc.errno, f"the file system failed on {path!r}: {what} "
                                   f"({os.strerror(exc.errno or 0)}); {outcome}")


def names_file(path: str, fd: int) -> bool:
    """Whether ``path`` names the file open as ``fd`` now."""
    mine = os.fstat(fd)
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    return (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino)


def fsync_directory(path: str) -> None:
    """Make a name created, removed or renamed in the directory of ``path`` durable."""
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
