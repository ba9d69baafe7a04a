"""A full file system: blocks are reserved before they are mapped, so running out of them is a
CapacityError at allocation (never SIGBUS), the map stays as it was, and the file reopens at its
last commit (``durability="commit"``) or as last closed (``"none"``).

Two ways: a real tmpfs of 2 MiB mounted by the test (skipped where mounting is not permitted),
and ENOSPC faked from ``posix_fallocate`` so that the case always runs. The real case runs in a
child process, so that a SIGBUS fails the test instead of killing the test run.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap

import pytest

from offheap import DB, LongHashMap, TreeMap
from offheap.errors import CapacityError

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KINDS = {"TreeMap": "TreeMap(path=path, value='bytes', write_cache=False, durability=mode)",
         "LongHashMap": "LongHashMap(value='bytes', path=path, durability=mode)"}


@pytest.fixture
def small_file_system(tmp_path):
    """A directory on a tmpfs of 2 MiB, unmounted after the test."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs",
                                  str(mount_point)], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("mount is not available here")
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {mounted.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, timeout=30)


@pytest.mark.parametrize("mode", ["commit", "none"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_full_tmpfs_raises_capacity_error_and_keeps_the_last_commit(small_file_system,
                                                                      kind, mode):
    path = str(small_file_system / "map")
    child = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import json, os
        from offheap import LongHashMap, TreeMap
        from offheap.errors import CapacityError
        path, mode = {path!r}, {mode!r}
        m = {KINDS[kind]}
        committed, n = 0, 0
        try:
            while True:
                batch = {{n + i: os.urandom(200) for i in range(200)}}
                before = len(m)
                m.update(batch)
                n += len(batch)
                m.commit()
                committed = n
        except CapacityError as exc:
            failed = str(exc)
        except OSError as exc:
            failed = "OSError: " + str(exc)
        after = len(m)
        if mode == "none":
            m.close()  # a file without transactions is whole only once closed cleanly
        print(json.dumps(dict(committed=committed, before=before, after=after, n=n,
                              failed=failed)))
        os._exit(0)  # commit mode: as if the process died here
    """)], env=dict(os.environ, PYTHONPATH=REPOSITORY), capture_output=True, text=True,
                           timeout=300)
    assert child.returncode == 0, f"the child ended with {child.returncode}: {child.stderr}"
    result = json.loads(child.stdout)
    assert result["committed"] > 0
    assert "is full" in result["failed"], result["failed"]
    opener = TreeMap if kind == "TreeMap" else LongHashMap
    with opener(path=path, value="bytes") as reopened:
        expected = result["n"] if mode == "none" else result["committed"]
        assert len(reopened) == expected


def _full_after(monkeypatch, n_calls: int) -> list[int]:
    """Make ``posix_fallocate`` fail with ENOSPC from its ``n_calls``-th call on; returns the
    list of calls made."""
    real = os.posix_fallocate
    calls: list[int] = []

    def fallocate(fd: int, offset: int, length: int) -> None:
        calls.append(length)
        if len(calls) >= n_calls:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd, offset, length)

    monkeypatch.setattr(os, "posix_fallocate", fallocate)
    return calls


@pytest.mark.parametrize("mode", ["commit", "none"])
def test_faked_enospc_at_allocation_leaves_the_map_and_file_as_they_were(tmp_path, monkeypatch,
                                                                        mode):
    path = tmp_path / "db"
    with DB.file(path, durability=mode) as db:
        tree = db.tree_map("t", value="bytes", write_cache=False)
        table = db.hash_map("h", value="bytes")
        tree.update({i: bytes(100) for i in range(100)})
        table.update({i: bytes(100) for i in range(100)})
        db.commit()
        calls = _full_after(monkeypatch, 1)
        with pytest.raises(CapacityError, match="is full"):
            tree.update({i: os.urandom(3000) for i in range(100, 2000)})
        with pytest.raises(CapacityError, match="is full"):
            table.put_many(list(range(100, 100_000)), [b"v" * 20] * 99_900)
        assert calls
        assert dict(tree.items()) == {i: bytes(100) for i in range(100)}
        assert dict(table.items()) == {i: bytes(100) for i in range(100)}
        tree._check()
        table._check()
        monkeypatch.undo()
        tree[5000] = b"after"  # the map goes on working once there is space
        db.commit()
    with DB.file(path) as db:
        assert len(db.tree_map("t")) == 101 and db.tree_map("t")[5000] == b"after"
        assert dict(db.hash_map("h").items()) == {i: bytes(100) for i in range(100)}


def test_other_allocation_errors_propagate_unchanged(tmp_path, monkeypatch):
    def failing(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    with TreeMap(path=tmp_path / "t", value="bytes", write_cache=False) as tree:
        tree[1] = b"x"
        tree.commit()
        monkeypatch.setattr(os, "posix_fallocate", failing)
        with pytest.raises(OSError) as raised:
            tree.update({i: os.urandom(3000) for i in range(2, 500)})
        assert raised.value.errno == errno.EIO
        assert dict(tree.items()) == {1: b"x"}
        monkeypatch.undo()
