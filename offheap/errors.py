"""Exceptions and warnings raised by offheap (layer 1: imports nothing from the package).

Each class also inherits the built-in exception a caller would catch for the same failure,
so ``except MemoryError`` still sees a :class:`CapacityError`.
"""

import errno


class OffheapError(Exception):
    """Base class of every error raised by offheap on purpose."""


class CapacityError(OffheapError, MemoryError):
    """An allocation would cross the arena's ``limit``; nothing was changed."""


class ClosedError(OffheapError, ValueError):
    """The collection, store or arena was closed."""


class CorruptionError(OffheapError, ValueError):
    """A file or page is not what offheap wrote: wrong magic, bad checksum, truncated."""


class CodecUnavailableError(OffheapError, ImportError):
    """An optional compression library is not installed."""


class PickleNotAllowedError(OffheapError, ValueError):
    """A value that needs pickle, in a map of a file opened without ``allow_pickle=True``:
    reading one stored with pickle (unpickling may run any code the file's author chose), or
    writing one that would be, which the map could not read back. A ValueError, as numpy's
    ``np.load(allow_pickle=False)`` raises; the message says how to allow it."""


class MissingFileError(OffheapError, FileNotFoundError):
    """The path names no file and this open may not make one: a read-only open, a reader, or
    an opener given ``create=False``. ``errno`` is ENOENT and ``filename`` the path;
    ``remedy`` says what to do instead."""

    def __init__(self, path: str, remedy: str) -> None:
        super().__init__(errno.ENOENT, f"does not exist: {remedy}", path)

    def __str__(self) -> str:
        return f"{self.filename!r} {self.strerror}"


class LockedError(OffheapError, BlockingIOError):
    """Another process holds the file in a way that excludes this open (a second writer,
    or readers and a writer without transactions)."""


class ReadOnlyError(OffheapError, PermissionError):
    """A write through something opened read-only: an arena, store, map or reader of a file
    opened with ``readonly=True``; open the file for writing (one writer process at a time)."""


class RecoveryPendingError(OffheapError, PermissionError):
    """A committed transaction waits in the write-ahead log and this process may not write the
    file to apply it; open the file once with write access."""


class TransactionError(OffheapError, RuntimeError):
    """A transaction operation the arena cannot perform: ``rollback()`` without
    ``durability="commit"``, or a commit that could not be applied to the file."""


class StorageError(OffheapError, OSError):
    """The file system failed a write, sync or allocation of a map's file (``EIO`` and the
    like; a full one is a :class:`CapacityError`). ``errno`` is the call's; the message says
    what failed and the state it left the file and the map in."""


class UncommittedChangesWarning(UserWarning):
    """A file DB was garbage collected or still open at interpreter exit with changes it had
    not committed: they were rolled back, as sqlite3 does. Shown by default (a forgotten
    ``close()`` that lost nothing is a ``ResourceWarning``, shown under ``-X dev``)."""
