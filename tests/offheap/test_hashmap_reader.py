"""LongHashMap.reader beside a writer in another process: lookups see each commit at once, and an
iteration notices a commit within READ_CHUNK_ENTRIES steps (RuntimeError, as a TreeReader does
at its next leaf) instead of at the next 65,536 entries."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from offheap import LongHashMap
from offheap.hashmap.reader import READ_CHUNK_ENTRIES

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N = 8 * READ_CHUNK_ENTRIES


class Writer:
    """A child process holding the map's file open for writing; each :meth:`commit` sets one
    key and commits, and returns once the commit is in the file."""

    def __init__(self, path) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
            import sys
            from offheap import LongHashMap
            with LongHashMap(path={str(path)!r}) as m:
                print("ready", flush=True)
                for line in sys.stdin:
                    key, value = line.split()
                    m[int(key)] = value
                    m.commit()
                    print("committed", flush=True)
        """)], env=dict(os.environ, PYTHONPATH=REPOSITORY), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True)
        assert self.process.stdout.readline().strip() == "ready"

    def commit(self, key: int, value: str) -> None:
        self.process.stdin.write(f"{key} {value}\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "committed"

    def close(self) -> None:
        self.process.stdin.close()
        assert self.process.wait(60) == 0


@pytest.fixture
def written(tmp_path):
    path = tmp_path / "map"
    with LongHashMap(path=path) as m:
        m.put_many(np.arange(N), [f"v{i}" for i in range(N)])
    writer = Writer(path)
    yield path, writer
    writer.close()


def test_lookups_see_each_commit_at_once(written):
    path, writer = written
    with LongHashMap.reader(path) as reader:
        assert reader[3] == "v3" and -1 not in reader
        for step in range(3):
            writer.commit(-1, f"new{step}")
            assert reader[-1] == f"new{step}" and reader.get(-1) == f"new{step}"
            assert -1 in reader and reader.get_many([-1, 3]) == [f"new{step}", "v3"]
            assert len(reader) == N + 1
        reader._check()


@pytest.mark.parametrize("view", ["keys", "values", "items"])
def test_iteration_notices_a_commit_within_a_read_chunk(written, view):
    path, writer = written
    with LongHashMap.reader(path) as reader:
        iterator = iter(getattr(reader, view)())
        for _ in range(3):
            next(iterator)
        writer.commit(5, "changed")
        steps = 0
        with pytest.raises(RuntimeError, match="committed"):
            for _ in iterator:
                steps += 1
        assert steps < READ_CHUNK_ENTRIES
        assert dict(reader.items())[5] == "changed"  # a new iteration reads the new commit


def test_iteration_reads_every_entry_chunk_by_chunk(written):
    path, _ = written
    with LongHashMap.reader(path) as reader:
        assert list(reader) == list(range(N))
        assert list(reader.values()) == [f"v{i}" for i in range(N)]
        with reader.snapshot():
            assert dict(reader.items()) == {i: f"v{i}" for i in range(N)}
