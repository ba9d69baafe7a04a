"""Creating a file: two creators at once, an empty file at the path, a creator that dies.

The race is made deterministic with a barrier: the delayed process stops at its first attempt
to take a writer lock (after it has decided whether the file exists, before it holds a lock)
until the other process has created the file, committed to it and closed it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from offheap import DB, LongHashMap, TreeMap
from offheap.arena import Arena
from offheap.errors import CorruptionError

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_DELAYED_CREATOR = """
    import os, sys, time
    from offheap import DB
    from offheap.arena import locks
    path, ready, go = sys.argv[1:4]
    real_try_lock = locks.try_lock
    def delayed_try_lock(fd, byte, *, exclusive):
        if byte == locks.WRITER and not os.path.exists(ready):
            open(ready, "w").close()
            deadline = time.monotonic() + 60
            while not os.path.exists(go) and time.monotonic() < deadline:
                time.sleep(0.01)
        return real_try_lock(fd, byte, exclusive=exclusive)
    locks.try_lock = delayed_try_lock
    with DB.file(path) as db:
        db.tree_map("delayed", key="int64", value="int64")[2] = 20
        db.commit()
    print("ok")
"""

_PROMPT_CREATOR = """
    import os, sys, time
    from offheap import DB
    path, ready, go = sys.argv[1:4]
    deadline = time.monotonic() + 60
    while not os.path.exists(ready) and time.monotonic() < deadline:
        time.sleep(0.01)
    with DB.file(path) as db:
        db.tree_map("prompt", key="int64", value="int64")[1] = 10
        db.commit()
    open(go, "w").close()
    print("ok")
"""


def _start(script: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *args],
                            cwd=REPOSITORY, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_a_delayed_creator_opens_the_file_another_created_instead_of_truncating_it(tmp_path):
    path, ready, go = str(tmp_path / "db"), str(tmp_path / "ready"), str(tmp_path / "go")
    delayed = _start(_DELAYED_CREATOR, path, ready, go)
    prompt = _start(_PROMPT_CREATOR, path, ready, go)
    for child in (prompt, delayed):
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0 and out.strip() == "ok", err
    with DB.file(path, readonly=True) as db:
        assert sorted(db.names()) == ["delayed", "prompt"]
        assert dict(db.tree_map("prompt")) == {1: 10}
        assert dict(db.tree_map("delayed")) == {2: 20}
    assert sorted(os.listdir(tmp_path)) == ["db", "go", "ready"]  # no temporary file left


@pytest.mark.parametrize("open_for_writing", [
    lambda path: DB.file(path), lambda path: LongHashMap(path=path),
    lambda path: TreeMap(path=path), lambda path: Arena.file(path),
    lambda path: Arena.file(path, durability="none"),
    lambda path: DB.file(path, readonly=True)],
    ids=["DB", "LongHashMap", "TreeMap", "Arena", "Arena-none", "DB-readonly"])
def test_an_empty_file_is_corruption_and_stays_as_it_is(tmp_path, open_for_writing):
    path = tmp_path / "empty"
    path.write_bytes(b"")
    with pytest.raises(CorruptionError, match=r"is empty \(0 bytes\).*remove the file"):
        open_for_writing(path)
    assert path.read_bytes() == b""
    assert os.listdir(tmp_path) == ["empty"]


def test_replace_true_replaces_an_empty_file(tmp_path):
    path = tmp_path / "empty"
    path.write_bytes(b"")
    with Arena.file(path, replace=True) as arena:
        arena.set_root(b"new")
        arena.commit()
    with Arena.file(path) as arena:
        assert arena.root == b"new"
    assert os.listdir(tmp_path) == ["empty"]


def test_replace_true_replaces_a_file_and_stops_its_readers(tmp_path):
    path = tmp_path / "a"
    with Arena.file(path) as arena:
        arena.set_root(b"old")
        arena.commit()
    with Arena.file(path, replace=True) as arena:
        assert arena.root == b"" and arena.generation == 0
        arena.set_root(b"new")
        arena.commit()
    with Arena.file(path, readonly=True) as arena:
        assert arena.root == b"new"


def test_create_false_does_not_create_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        Arena.file(tmp_path / "missing", create=False)
    assert os.listdir(tmp_path) == []


def test_a_creation_that_fails_leaves_nothing_at_the_path(tmp_path, monkeypatch):
    from offheap.arena import filewriter

    def failing(self, *, open_for_writing):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(filewriter.FileWriter, "write_table_and_header", failing)
    with pytest.raises(OSError, match="Input/output"):
        DB.file(tmp_path / "db")
    assert os.listdir(tmp_path) == []


_DIES_WHILE_CREATING = """
    import os, signal, sys
    from offheap import DB
    def dying_fsync(fd):
        os.kill(os.getpid(), signal.SIGKILL)
    os.fsync = dying_fsync
    DB.file(sys.argv[1])
"""


def test_a_creator_killed_mid_way_leaves_no_file_and_the_next_creator_cleans_up(tmp_path):
    path = str(tmp_path / "db")
    child = subprocess.run([sys.executable, "-c", textwrap.dedent(_DIES_WHILE_CREATING), path],
                           cwd=REPOSITORY, capture_output=True, text=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert not os.path.exists(path)
    leftovers = os.listdir(tmp_path)
    assert len(leftovers) == 1 and leftovers[0].startswith("db-new.")
    with DB.file(path) as db:
        db.tree_map("t")[1] = 1
        db.commit()
    assert os.listdir(tmp_path) == ["db"]
    with DB.file(path, readonly=True) as db:
        assert dict(db.tree_map("t")) == {1: 1}


def test_a_live_creators_temporary_file_is_left_alone(tmp_path):
    from offheap.arena.creation import remove_stale_temporaries, temporary_file
    path = str(tmp_path / "db")
    held = temporary_file(path)
    try:
        remove_stale_temporaries(path)
        assert os.path.exists(held.path)
    finally:
        held.release()
    remove_stale_temporaries(path)
    assert os.listdir(tmp_path) == []
