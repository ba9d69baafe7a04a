"""ENOSPC and EIO injected at every write, sync and allocation call of an operation, in turn.

A DB file holds a TreeMap and a LongHashMap at a committed state. The operation changes both
(the hash map's table grows, tree nodes are written at the commit) and commits. For
N = 1, 2, ... the Nth call of ``os.pwrite``, ``os.fsync``, ``os.fdatasync``,
``os.posix_fallocate``, ``os.ftruncate`` or the hole-punching ``fallocate`` fails with the errno,
until the operation runs out of calls to fail. Each time:

- the operation raises one of ours (:class:`OffheapError`): CapacityError for ENOSPC where the
  file system is asked for space, StorageError or TransactionError for EIO;
- the maps in memory hold what they held before the failed step (the changes made so far
  when the commit failed);
- a copy of the files taken right after the failure (a process that ends there) opens at the
  last commit or at the one that failed, if it got past its commit point;
- the operation finishes once the failure is gone (committing again, or, when the writer
  refused to go on, closing and opening the file again) and nothing is lost.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil

import pytest

from offheap import DB
from offheap.arena import holes
from offheap.errors import CapacityError, OffheapError, StorageError, TransactionError

_CALLS = ("pwrite", "fsync", "fdatasync", "posix_fallocate", "ftruncate")
_ASKS_FOR_SPACE = ("posix_fallocate", "pwrite", "ftruncate", "punch")


class Injection:
    """Counts the calls made while :attr:`active` and fails call number :attr:`fail_at`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, code: int) -> None:
        self.code = code
        self.active = False
        self.fail_at = 0
        self.count = 0
        self.failed: str | None = None
        for name in _CALLS:
            monkeypatch.setattr(os, name, self._wrap(name, getattr(os, name)))
        if holes._fallocate is not None:
            monkeypatch.setattr(holes, "_fallocate", self._wrap_punch(holes._fallocate))

    def arm(self, fail_at: int) -> None:
        self.active, self.fail_at, self.count, self.failed = True, fail_at, 0, None

    def _fails_now(self, name: str) -> bool:
        if not self.active:
            return False
        self.count += 1
        if self.count != self.fail_at:
            return False
        self.failed = name
        return True

    def _wrap(self, name, real):
        def call(*args, **kwargs):
            if self._fails_now(name):
                raise OSError(self.code, os.strerror(self.code))
            return real(*args, **kwargs)
        return call

    def _wrap_punch(self, real):
        def call(fd, mode, offset, length):
            if self._fails_now("punch"):
                ctypes.set_errno(self.code)
                return -1
            return real(fd, mode, offset, length)
        return call


_BASE_TREE = {i: b"t%d" % i for i in range(0, 3000, 3)}
_BASE_HASH = {i: f"h{i}" for i in range(200)}


def _build(path: str) -> None:
    with DB.file(path) as db:
        db.tree_map("tree", key="int64", value="bytes").update(_BASE_TREE)
        db.hash_map("hash").update(_BASE_HASH)
        db.commit()


def _steps(db: DB, tree_model: dict, hash_model: dict):
    """The operation as steps, each a (name, change) that applies to the maps and models."""
    tree, hash_map = db.tree_map("tree"), db.hash_map("hash")

    def tree_changes():
        new = {i: b"n%d" % i for i in range(1, 3000, 3)}
        tree.update(new)
        tree_model.update(new)
        for key in range(0, 600, 3):
            del tree[key]
            del tree_model[key]

    def hash_growth():
        new = {i: ("x" * (i % 20)) for i in range(1000, 3000)}  # outgrows the table
        hash_map.update(new)
        hash_model.update(new)

    def hash_deletes():
        for key in range(0, 100):
            del hash_map[key]
            del hash_model[key]

    return [("tree", tree_changes), ("hash", hash_growth), ("hash", hash_deletes),
            ("commit", db.commit)]


def _contents(db: DB) -> tuple[dict, dict]:
    return dict(db.tree_map("tree")), dict(db.hash_map("hash"))


def _reopened(path: str) -> tuple[dict, dict]:
    with DB.file(path) as db:
        db.tree_map("tree")._check()
        db.hash_map("hash")._check()
        return _contents(db)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO], ids=["ENOSPC", "EIO"])
def test_a_failing_call_at_every_point_loses_nothing(tmp_path, monkeypatch, code):
    built = str(tmp_path / "built")
    _build(built)
    injection = Injection(monkeypatch, code)
    committed = (_BASE_TREE, _BASE_HASH)
    final = None
    for fail_at in range(1, 1000):
        path = str(tmp_path / f"db-{fail_at}")
        shutil.copyfile(built, path)
        db = DB.file(path)
        tree_model, hash_model = dict(_BASE_TREE), dict(_BASE_HASH)
        failure = None
        injection.arm(fail_at)
        try:
            for kind, step in _steps(db, tree_model, hash_model):
                before = _contents(db)
                try:
                    step()
                except BaseException as exc:
                    failure = (kind, exc, before)
                    break
        finally:
            injection.active = False
        where = f"call {fail_at} ({injection.failed})"
        if failure is None:
            assert injection.failed is None, f"{where} failed and nothing was raised"
            final = _contents(db)
            db.close()
            assert final == (tree_model, hash_model) == _reopened(path)
            break
        kind, exc, before = failure
        assert isinstance(exc, OffheapError), f"{where}: {exc!r} is not one of ours"
        if code == errno.ENOSPC and injection.failed in _ASKS_FOR_SPACE:
            assert isinstance(exc, (CapacityError, TransactionError)), f"{where}: {exc!r}"
        elif code == errno.EIO:
            assert isinstance(exc, (StorageError, TransactionError)), f"{where}: {exc!r}"
        intended = (tree_model, hash_model)
        if kind == "commit":
            assert _contents(db) == intended, f"{where}: the maps changed at the failed commit"
        else:
            assert _contents(db) == before, f"{where}: the failed {kind} step changed the map"
        ended_here = str(tmp_path / f"ended-{fail_at}")
        shutil.copyfile(path, ended_here)
        if os.path.exists(f"{path}-wal"):
            shutil.copyfile(f"{path}-wal", f"{ended_here}-wal")
        assert _reopened(ended_here) in (committed, intended), f"{where}: lost a commit"
        if kind != "commit":
            db.close()
            assert _reopened(path) == (tree_model, hash_model), where
            continue
        try:
            db.commit()
        except TransactionError:  # the commit is durable in the log; the writer stops
            db._close_store(save=False)
        else:
            db.close()
        assert _reopened(path) == intended, f"{where}: the retried commit lost data"
    assert final is not None, "the operation never ran out of calls to fail"
