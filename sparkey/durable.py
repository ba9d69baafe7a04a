"""Making a written file durable: fsync of a file or directory (IO layer, no format knowledge).

A file written under a temporary name and renamed over its final name is durable only when its
data reached the disk before the rename did, and the rename itself only when its directory is
synced after it: :func:`fsync_path` then :func:`os.replace` then :func:`fsync_path` of the
directory. Without them a power loss can leave the final name pointing at a file whose blocks
were never written (zeros, or the old length), which a reader sees as a damaged index.
"""

from __future__ import annotations

import os


def fsync_path(path: str | os.PathLike[str]) -> None:
    """Flush a file or directory to stable storage (the file is only opened for reading)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_parent(path: str | os.PathLike[str]) -> None:
    """Flush the directory holding ``path``, so that a rename or creation there is durable."""
    fsync_path(os.path.dirname(os.path.abspath(path)) or ".")
