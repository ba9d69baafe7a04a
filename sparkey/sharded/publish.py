"""Atomic publication of a sharded store directory (IO layer of ``sparkey.sharded``).

A build writes every shard into a staging directory beside the target, ``.<name>.staging-<rand>``
in the same parent (so on the same filesystem, where a rename is atomic). ``Staging.publish``:

1. writes ``manifest.json``, the last file of a store, and fsyncs it and the staging directory
   (each shard's files were fsynced by the task that wrote them, see ``shard.seal_shard``);
2. renames the staging directory to the target path: a new store appears complete or not at all.
   Over an existing store (``overwrite=True``) Linux's ``renameat2(RENAME_EXCHANGE)`` swaps the
   two directories in one step, so the path always names one complete store. Where that call is
   missing (other systems, some filesystems) the old store is renamed aside first and the new one
   renamed in; between the two renames the path does not exist, and a reader opening it then gets
   ManifestNotFoundError. A reader never sees files of both stores: it checks every shard against
   the manifest it read (see ``sparkey.sharded.reader``);
3. fsyncs the parent directory, so that the rename is durable, then deletes the old store.

Readers that opened the old store keep reading it: deleted files stay mapped until closed.
One build per target path at a time. An empty directory is replaced freely; anything else only
with ``overwrite=True``, and only if it holds a ``manifest.json`` (a published store).
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import shutil
import sys
import tempfile

from sparkey.durable import fsync_path
from sparkey.sharded.errors import StoreExistsError
from sparkey.sharded.manifest import MANIFEST_NAME, Manifest

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


class Staging:
    """The staging directory of one build; used as a context manager, removed unless published.

    ``directory`` is where shard files go; it must be visible at the same path to every process
    that writes a shard (a shared filesystem on a real cluster).
    """

    def __init__(self, path: str | os.PathLike[str], overwrite: bool = False) -> None:
        """Check the target ``path`` and create the staging directory beside it."""
        self.target = os.path.abspath(os.fspath(path))
        self.overwrite = overwrite
        _check_target(self.target, overwrite)
        parent, name = os.path.split(self.target)
        self.directory = tempfile.mkdtemp(prefix=f".{name}.staging-", dir=parent)
        self.published = False

    def publish(self, manifest: Manifest) -> None:
        """Write ``manifest`` and move the staging directory to the target (see module doc)."""
        manifest_path = os.path.join(self.directory, MANIFEST_NAME)
        with open(manifest_path, "w", encoding="utf-8") as file:
            file.write(manifest.to_json())
            file.flush()
            os.fsync(file.fileno())
        fsync_path(self.directory)
        _check_target(self.target, self.overwrite)
        old_store = None
        if os.path.lexists(self.target):
            old_store = _swap_in(self.directory, self.target)
        else:
            try:
                os.rename(self.directory, self.target)
            except OSError as error:
                if error.errno in (errno.EEXIST, errno.ENOTEMPTY):
                    raise StoreExistsError(
                        f"{self.target!r} was created by someone else during the build; "
                        "publish to another path or pass overwrite=True") from None
                raise
        self.published = True
        fsync_path(os.path.dirname(self.target))
        if old_store is not None:
            shutil.rmtree(old_store, ignore_errors=True)

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if not self.published:
            shutil.rmtree(self.directory, ignore_errors=True)


def _check_target(target: str, overwrite: bool) -> None:
    """Raise StoreExistsError unless ``target`` may be (re)placed by a new store."""
    if not os.path.lexists(target):
        return
    if os.path.isdir(target) and not os.path.islink(target) and not os.listdir(target):
        return  # an empty directory is replaced like a missing one
    if not overwrite:
        raise StoreExistsError(f"{target!r} already exists; pass overwrite=True to replace the "
                               "store, or choose another path")
    if (os.path.islink(target) or not os.path.isdir(target)
            or not os.path.isfile(os.path.join(target, MANIFEST_NAME))):
        raise StoreExistsError(f"{target!r} exists and is not a sharded store (no "
                               f"{MANIFEST_NAME}); refusing to replace it: remove it yourself or "
                               "choose another path")


def _swap_in(staging: str, target: str) -> str:
    """Put ``staging`` at ``target``, which exists; return where the old store now is."""
    if _exchange(staging, target):
        return staging
    aside = os.path.join(os.path.dirname(target),
                         f".{os.path.basename(target)}.old-{secrets.token_hex(8)}")
    os.rename(target, aside)
    try:
        os.rename(staging, target)
    except BaseException:
        os.rename(aside, target)
        raise
    return aside


def _exchange(first: str, second: str) -> bool:
    """Swap two existing paths atomically (Linux renameat2); False where that is unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint)
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second),
                 _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), first, None, second)
