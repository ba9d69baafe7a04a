"""Making byte ranges of a file read as zeros (layer 3, beside memory).

:func:`punch_hole` deallocates a range (``fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)``
through libc): the range reads as zeros, the file keeps its size, and the disk blocks go back to
the file system. Where the call or the file system lacks it, :func:`zero_range` writes zeros.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os

_PUNCH_HOLE = 0x02
_KEEP_SIZE = 0x01
_ZERO_CHUNK = bytes(1 << 20)


def _load_fallocate():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fallocate = libc.fallocate
    except (OSError, AttributeError):
        return None
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fallocate.restype = ctypes.c_int
    return fallocate


_fallocate = _load_fallocate()


def punch_hole(fd: int, offset: int, length: int) -> bool:
    """Deallocate ``length`` bytes at ``offset``; False (nothing done) where unsupported."""
    if length <= 0:
        return True
    if _fallocate is None:
        return False
    if _fallocate(fd, _PUNCH_HOLE | _KEEP_SIZE, offset, length) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
        return False
    raise OSError(err, f"fallocate(PUNCH_HOLE) failed: {os.strerror(err)}")


def zero_range(fd: int, offset: int, length: int) -> None:
    """Make ``length`` bytes at ``offset`` read as zeros: a hole where possible, else written."""
    if punch_hole(fd, offset, length):
        return
    end = offset + length
    while offset < end:
        offset += os.pwrite(fd, memoryview(_ZERO_CHUNK)[: min(len(_ZERO_CHUNK), end - offset)],
                            offset)
