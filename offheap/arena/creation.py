"""Creating an arena file so that its path never names a half-made one (layer 3, private).

A new file is built under a temporary name beside the path, ``PATH-new.<random hex>``, opened
with ``O_EXCL`` and locked for writing (:mod:`offheap.arena.locks`) before anything is written.
Once its header and checksum extent are durable it is put in place in one step:

- :func:`link_into_place` for a path that names nothing: ``link()`` fails when the path exists,
  so of two processes that both found it missing exactly one places its file, and the other
  opens that one instead of truncating it. The decision to create is the link itself, taken
  while holding the new file's writer lock, so no other opener can get in between;
- :func:`rename_into_place` over an existing file whose writer lock the caller holds
  (``replace=True``): ``rename()`` replaces it atomically.

Either way the path names the old file, nothing, or the new file whole: a crash during creation
leaves at most a temporary file beside the path, never an empty or half-written file at it.
:func:`remove_stale_temporaries` removes the temporaries of creators that died (nobody holds
their lock); a live creator's survives, since it holds its lock from the moment it looks.
"""

from __future__ import annotations

import errno
import glob
import os

from offheap.arena import locks
from offheap.arena.arenafile import ArenaFile, fsync_directory

_TEMPORARY_SUFFIX = "-new."


def temporary_file(path: str) -> ArenaFile:
    """A new, empty file beside ``path`` that this process alone knows and holds the writer
    lock of (``O_EXCL``; a name another creator's cleanup removed before the lock is given up
    and another one made)."""
    while True:
        name = f"{path}{_TEMPORARY_SUFFIX}{os.urandom(6).hex()}"
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        file = ArenaFile(name, fd)
        if locks.try_lock(fd, locks.WRITER, exclusive=True) and file.is_named_by_path():
            return file
        file.release()


def link_into_place(file: ArenaFile, path: str) -> bool:
    """Give the temporary ``file`` the name ``path`` if that names nothing; False (and the
    temporary removed, its lock released) when another file took the path first. On success
    the temporary name goes, the names are made durable and ``file.path`` becomes ``path``."""
    try:
        os.link(file.path, path)
    except FileExistsError:
        discard_temporary(file)
        return False
    os.unlink(file.path)
    fsync_directory(path)
    file.path = path
    return True


def rename_into_place(file: ArenaFile, path: str) -> None:
    """Rename the temporary ``file`` over ``path`` (whose file the caller holds locked) and
    make the rename durable; ``file.path`` becomes ``path``."""
    os.replace(file.path, path)
    fsync_directory(path)
    file.path = path


def discard_temporary(file: ArenaFile) -> None:
    """Remove a temporary file that was not put in place, and release it."""
    try:
        os.unlink(file.path)
    except FileNotFoundError:
        pass
    finally:
        file.release()


def remove_stale_temporaries(path: str) -> None:
    """Remove the temporaries beside ``path`` that no living creator holds. O(temporaries)."""
    for name in glob.glob(glob.escape(path) + _TEMPORARY_SUFFIX + "*"):
        try:
            fd = os.open(name, os.O_RDWR)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.EACCES, errno.EPERM):
                continue
            raise
        try:
            if locks.try_lock(fd, locks.WRITER, exclusive=True):
                os.unlink(name)
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)
