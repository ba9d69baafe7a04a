"""LongHashMap.reader and HashMap.reader beside a writer in another process: lookups see each
commit at once, and an iteration notices a commit within READ_CHUNK_ENTRIES steps (RuntimeError,
as a TreeReader does at its next leaf) instead of at the next 65,536 entries. A HashMap's keys
are str, every third one long (a record of the store)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from offheap import HashMap, LongHashMap
from offheap.hashmap.reader import READ_CHUNK_ENTRIES

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N = 8 * READ_CHUNK_ENTRIES


MAPS = {"LongHashMap": (LongHashMap, {}, lambda i: i),
        "HashMap": (HashMap, {"key": "str"},
                    lambda i: f"user:{i}" if i % 3 else f"a key long enough for a record {i}")}
"""Each map class read: the class, its options, the key of number ``i``."""


class Writer:
    """A child process holding the map's file open for writing; each :meth:`commit` sets the
    key of one number and commits, and returns once the commit is in the file."""

    def __init__(self, path, name: str) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
            import sys
            from tests.offheap.test_hashmap_reader import MAPS
            cls, options, key = MAPS[{name!r}]
            with cls(path={str(path)!r}, **options) as m:
                print("ready", flush=True)
                for line in sys.stdin:
                    number, value = line.split()
                    m[key(int(number))] = value
                    m.commit()
                    print("committed", flush=True)
        """)], env=dict(os.environ, PYTHONPATH=REPOSITORY), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, cwd=REPOSITORY)
        assert self.process.stdout.readline().strip() == "ready"

    def commit(self, number: int, value: str) -> None:
        self.process.stdin.write(f"{number} {value}\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "committed"

    def close(self) -> None:
        self.process.stdin.close()
        assert self.process.wait(60) == 0


@pytest.fixture(params=list(MAPS))
def written(tmp_path, request):
    """The path of a map file of N entries, its writer process, the class and the key of a
    number."""
    path = tmp_path / "map"
    cls, options, key = MAPS[request.param]
    with cls(path=path, **options) as m:
        m.put_many([key(i) for i in range(N)], [f"v{i}" for i in range(N)])
    writer = Writer(path, request.param)
    yield path, writer, cls, key
    writer.close()


def test_lookups_see_each_commit_at_once(written):
    path, writer, cls, key = written
    with cls.reader(path) as reader:
        assert reader[key(3)] == "v3" and key(-1) not in reader
        for step in range(3):
            writer.commit(-1, f"new{step}")
            assert reader[key(-1)] == f"new{step}" and reader.get(key(-1)) == f"new{step}"
            assert key(-1) in reader
            assert reader.get_many([key(-1), key(3)]) == [f"new{step}", "v3"]
            assert len(reader) == N + 1
        reader._check()


@pytest.mark.parametrize("view", ["keys", "values", "items"])
def test_iteration_notices_a_commit_within_a_read_chunk(written, view):
    path, writer, cls, key = written
    with cls.reader(path) as reader:
        iterator = iter(getattr(reader, view)())
        for _ in range(3):
            next(iterator)
        writer.commit(5, "changed")
        steps = 0
        with pytest.raises(RuntimeError, match="committed"):
            for _ in iterator:
                steps += 1
        assert steps < READ_CHUNK_ENTRIES
        assert dict(reader.items())[key(5)] == "changed"  # a new iteration reads the new commit


def test_iteration_reads_every_entry_chunk_by_chunk(written):
    path, _, cls, key = written
    with cls.reader(path) as reader:
        assert list(reader) == [key(i) for i in range(N)]
        assert list(reader.values()) == [f"v{i}" for i in range(N)]
        with reader.snapshot():
            assert dict(reader.items()) == {key(i): f"v{i}" for i in range(N)}
