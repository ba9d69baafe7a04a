"""Byte-range locks that coordinate the processes sharing one arena file (layer 3, beside memory).

Each lock is one byte of the arena file far beyond any data (``2**62 + k``), so no lock file is
needed and the data itself is never locked:

- ``WRITER``: exclusive, held by the one process that writes the file, for its whole life;
- ``READERS``: shared, held by every read-only opener for its whole life (a writer tests it
  before cutting the file shorter; a writer without transactions holds it exclusive);
- ``CHECKPOINT``: readers hold it shared around each read section, the writer exclusive while
  it applies a commit to the file, so no reader sees a half-applied commit.

Linux open-file-description locks (``F_OFD_SETLK``) belong to the open file, not the process:
two opens of the same file in one process exclude each other, and closing one descriptor never
drops the locks of another. Where they are missing, process-wide POSIX locks (``fcntl.lockf``)
stand in: they exclude other processes only, and closing any descriptor of the file drops all
of the process's locks on it, so there a process should open a file once.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
import struct

WRITER = 2**62
READERS = 2**62 + 1
CHECKPOINT = 2**62 + 2

_FLOCK = struct.Struct("hhqqi4x")  # Linux struct flock: l_type, l_whence, l_start, l_len, l_pid
OPEN_FILE_LOCKS = hasattr(fcntl, "F_OFD_SETLK")


@functools.lru_cache(maxsize=None)
def _flock(lock_type: int, byte: int) -> bytes:
    """The packed ``struct flock`` for one byte (a handful exist; a reader's read section
    uses two of them every time)."""
    return _FLOCK.pack(lock_type, os.SEEK_SET, byte, 1, 0)


def _request(fd: int, command: int, lock_type: int, byte: int) -> bytes:
    return fcntl.fcntl(fd, command, _flock(lock_type, byte))


def try_lock(fd: int, byte: int, *, exclusive: bool) -> bool:
    """Take the lock on ``byte`` without waiting; False when another open file holds it."""
    try:
        if OPEN_FILE_LOCKS:
            _request(fd, fcntl.F_OFD_SETLK, fcntl.F_WRLCK if exclusive else fcntl.F_RDLCK, byte)
        else:
            fcntl.lockf(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB, 1,
                        byte)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def lock(fd: int, byte: int, *, exclusive: bool) -> None:
    """Take the lock on ``byte``, waiting for conflicting holders to release it."""
    if OPEN_FILE_LOCKS:
        _request(fd, fcntl.F_OFD_SETLKW, fcntl.F_WRLCK if exclusive else fcntl.F_RDLCK, byte)
    else:
        fcntl.lockf(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, 1, byte)


def unlock(fd: int, byte: int) -> None:
    if OPEN_FILE_LOCKS:
        _request(fd, fcntl.F_OFD_SETLK, fcntl.F_UNLCK, byte)
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, byte)


def is_held(fd: int, byte: int, *, exclusive: bool) -> bool:
    """Whether another open file holds ``byte`` in a way that would refuse this lock request.

    ``exclusive=True`` asks "does anyone hold it at all", ``False`` "does anyone hold it
    exclusive". Takes nothing with open-file-description locks (it asks with F_OFD_GETLK, which
    works on a read-only descriptor); with POSIX locks it takes the lock and releases it at once,
    so only a process that holds no lock on ``byte`` itself may ask.
    """
    if OPEN_FILE_LOCKS:
        answer = _request(fd, fcntl.F_OFD_GETLK,
                          fcntl.F_WRLCK if exclusive else fcntl.F_RDLCK, byte)
        return _FLOCK.unpack(answer)[0] != fcntl.F_UNLCK
    if not try_lock(fd, byte, exclusive=exclusive):
        return True
    unlock(fd, byte)
    return False
