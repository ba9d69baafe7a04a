"""Arena transactions (durability="commit"): commit/rollback against a model, crashes of a forked
writer at random moments, the write-ahead log torn, stale, or applied twice, and both ways of
finding written pages (pagemap and comparison with the file)."""

from __future__ import annotations

import copy
import hashlib
import os
import random
import shutil
import signal
import struct
import tempfile
import time
import traceback
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from hypothesis.stateful import run_state_machine_as_test

from offheap.arena import dirtypages, wal
from offheap.errors import RecoveryPendingError, TransactionError
from offheap.arena.arena import HEADER_BYTES, PAGE_BYTES, Arena
from offheap.arena.commit import CommitWriter
from offheap.arena.dirtypages import open_working_pagemap
from tests.offheap.arena_fuzz import arena_content


@pytest.fixture(params=["pagemap", "compare"])
def written_pages(request, monkeypatch):
    """Run a test once with pagemap finding written pages and once comparing with the file."""
    if request.param == "pagemap":
        pagemap = open_working_pagemap()
        if pagemap is None:
            pytest.skip("/proc/self/pagemap does not report written private pages here")
        pagemap.close()
    else:
        monkeypatch.setattr(dirtypages, "PAGEMAP_PATH", "/nonexistent/pagemap")
    return request.param


def test_fixture_selects_the_way_written_pages_are_found(tmp_path, written_pages):
    with Arena.file(tmp_path / "a") as arena:
        assert (arena._backing.pagemap is not None) == (written_pages == "pagemap")


# -- commit and rollback against a model --------------------------------------------------------

class ArenaMachine(RuleBasedStateMachine):
    """A file arena beside a model: ``current`` (offset -> payload) and the committed copy.

    With ``durability="none"`` there is no rollback, and close() keeps everything.
    """

    durability = "commit"

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="arena-machine-")
        self.path = os.path.join(self.directory, "a")
        self.arena = Arena.file(self.path, durability=self.durability)
        self.current: dict[int, bytearray] = {}
        self.root = b""
        self.committed = ({}, b"")

    @rule(nbytes=st.integers(0, 3 * PAGE_BYTES + 100))
    def allocate(self, nbytes):
        offset = self.arena.allocate(nbytes)
        assert offset not in self.current
        self.current[offset] = bytearray(self.arena.payload_bytes(offset))

    @precondition(lambda self: self.current)
    @rule(data=st.data(), fill=st.integers(0, 255), length=st.integers(1, 2 * PAGE_BYTES))
    def write(self, data, fill, length):
        offset = data.draw(st.sampled_from(sorted(self.current)))
        payload = self.current[offset]
        start = data.draw(st.integers(0, len(payload) - 1))
        stop = min(len(payload), start + length)
        array = self.arena.array(offset, np.uint8, stop - start, start)
        array[:] = fill
        del array
        payload[start:stop] = bytes([fill]) * (stop - start)

    @precondition(lambda self: self.current)
    @rule(data=st.data())
    def free(self, data):
        offset = data.draw(st.sampled_from(sorted(self.current)))
        self.arena.free(offset)
        del self.current[offset]

    @rule(fill=st.integers(0, 255), length=st.sampled_from([0, 5, 4031, 4032, 4033, 9000]))
    def set_root(self, fill, length):
        self.root = bytes([fill]) * length
        self.arena.set_root(self.root)

    @rule()
    def commit(self):
        self.arena.commit()
        self.committed = (copy.deepcopy(self.current), self.root)

    @precondition(lambda self: self.durability == "commit")
    @rule()
    def rollback(self):
        self.arena.rollback()
        self.current, self.root = copy.deepcopy(self.committed[0]), self.committed[1]

    @rule()
    def reopen(self):
        generation = self.arena.generation
        self.arena.close()
        self.arena = Arena.file(self.path, durability=self.durability)
        if self.durability == "commit":
            assert self.arena.generation == generation
            self.current, self.root = copy.deepcopy(self.committed[0]), self.committed[1]

    @invariant()
    def content_matches(self):
        self.arena._check()
        root, payloads = arena_content(self.arena)
        assert root == self.root
        payloads.pop(self.arena._backing.root_offset, None)  # the arena's own extent for a root
        assert payloads == {offset: bytes(p) for offset, p in self.current.items()}

    def teardown(self):
        self.arena.close()
        shutil.rmtree(self.directory, ignore_errors=True)


MACHINE_SETTINGS = settings(max_examples=30, stateful_step_count=30, deadline=None,
                            suppress_health_check=[HealthCheck.too_slow])


def test_commit_and_rollback_against_a_model(written_pages):
    run_state_machine_as_test(ArenaMachine, settings=MACHINE_SETTINGS)


class NoneModeArenaMachine(ArenaMachine):
    durability = "none"


def test_arena_without_transactions_against_a_model():
    run_state_machine_as_test(NoneModeArenaMachine, settings=MACHINE_SETTINGS)


def test_commit_with_nothing_changed_writes_nothing(tmp_path, written_pages):
    path = tmp_path / "a"
    with Arena.file(path) as arena:
        offset = arena.allocate(3 * PAGE_BYTES)
        arena.array(offset, np.uint8, 10)[:] = 1
        arena.commit()
        assert arena.generation == 1
        data = path.read_bytes()
        assert arena.array(offset, np.uint8, 3 * PAGE_BYTES).sum() == 10  # reads are no change
        arena.set_root(b"")  # the same root
        arena.commit()
        assert arena.generation == 1 and path.read_bytes() == data
        assert os.path.getsize(f"{path}-wal") == 0  # emptied by the first commit, unused since
    assert not os.path.exists(f"{path}-wal")


def test_both_ways_find_the_same_written_pages(tmp_path):
    if open_working_pagemap() is None:
        pytest.skip("/proc/self/pagemap does not report written private pages here")
    with Arena.file(tmp_path / "a") as arena:
        first, second = arena.allocate(20 * PAGE_BYTES), arena.allocate(5 * PAGE_BYTES)
        arena.commit()
        for offset, page in ((first, 0), (first, 7), (first, 8), (first, 19), (second, 3)):
            arena.array(offset, np.uint8, 1, page * PAGE_BYTES)[0] = 1
        arena.array(first, np.uint8, 5 * PAGE_BYTES).sum()  # read, not written
        by_pagemap = arena._backing.written_page_runs()
        arena._backing.pagemap.close()
        arena._backing.pagemap = None
        by_comparison = arena._backing.written_page_runs()
        assert sorted(by_pagemap) == sorted(by_comparison) == sorted(
            [(first, 0, 1), (first, 7, 2), (first, 19, 1), (second, 3, 1)])


def test_written_pages_of_a_commit_fault_back_from_the_file(tmp_path, written_pages):
    with Arena.file(tmp_path / "a") as arena:
        offset = arena.allocate(4 * PAGE_BYTES)
        arena.array(offset, np.uint8, 2)[:] = 7
        arena.commit()
        assert arena._backing.written_page_runs() == []
        assert list(arena.array(offset, np.uint8, 3)) == [7, 7, 0]


def test_rollback_and_commit_across_a_moved_checksum_extent(tmp_path, written_pages):
    path = tmp_path / "a"
    with Arena.file(path) as arena:
        small = arena.allocate(100)
        arena.array(small, np.uint8, 100)[:] = 1
        arena.commit()
        committed = arena_content(arena), arena.stats()
        big = arena.allocate(6 << 20)  # past the first checksum extent: it moves
        arena.array(big, np.uint8, 6 << 20)[::PAGE_BYTES] = 2
        arena.rollback()
        arena._check()
        assert (arena_content(arena), arena.stats()) == committed
        big = arena.allocate(6 << 20)
        arena.array(big, np.uint8, 6 << 20)[::PAGE_BYTES] = 3
        arena.commit()
        arena._check()
        expected = arena_content(arena)
    with Arena.file(path) as arena:
        assert arena_content(arena) == expected
        arena.free(big)
        arena.commit()
        arena._check()


def test_capacity_error_inside_a_transaction_changes_nothing(tmp_path):
    with Arena.file(tmp_path / "a", limit_bytes=HEADER_BYTES + 6 * PAGE_BYTES) as arena:
        arena.allocate(PAGE_BYTES)
        arena.commit()
        arena.allocate(10)
        before = arena.stats()
        with pytest.raises(MemoryError):
            arena.allocate(3 * PAGE_BYTES)
        assert arena.stats() == before
        arena.commit()
        arena._check()


# -- the write-ahead log: pending, torn, stale, applied twice -----------------------------------

def _crash_in_checkpoint(self, *args):
    raise OSError("the process died while copying the commit into the file")


def _pending_commit(path, monkeypatch):
    """Leave ``path`` with a commit durable only in its log; (content before, content after)."""
    with Arena.file(path) as arena:
        kept, dropped = arena.allocate(3 * PAGE_BYTES), arena.allocate(PAGE_BYTES)
        arena.array(kept, np.uint8, 3 * PAGE_BYTES)[:] = 1
        arena.array(dropped, np.uint8, 10)[:] = 2
        arena.set_root(b"one")
        arena.commit()
        before = arena_content(arena)
        arena.array(kept, np.uint8, PAGE_BYTES, PAGE_BYTES)[:] = 3
        arena.free(dropped)
        arena.array(arena.allocate(6 * PAGE_BYTES), np.uint8, 100)[:] = 4
        arena.set_root(b"two" * 2000)
        after = arena_content(arena)
        with monkeypatch.context() as patch:
            patch.setattr(CommitWriter, "_checkpoint", _crash_in_checkpoint)
            with pytest.raises(TransactionError, match="durable"):
                arena.commit()
        with pytest.raises(TransactionError):
            arena.allocate(1)  # a broken arena refuses writes until reopened
    assert os.path.getsize(f"{path}-wal") > 0
    return before, after


def _open_content(path, **options):
    with Arena.file(path, **options) as arena:
        arena._check()
        return arena.generation, arena_content(arena)


def test_pending_commit_is_applied_on_open(tmp_path, monkeypatch):
    path = tmp_path / "a"
    before, after = _pending_commit(path, monkeypatch)
    assert _open_content(path) == (2, after)
    assert not os.path.exists(f"{path}-wal")
    assert _open_content(path) == (2, after)


def test_applying_the_log_twice_gives_the_same_file(tmp_path, monkeypatch):
    path = tmp_path / "a"
    _, after = _pending_commit(path, monkeypatch)
    file_bytes, log_bytes = path.read_bytes(), open(f"{path}-wal", "rb").read()
    assert _open_content(path) == (2, after)
    applied = path.read_bytes()
    with open(f"{path}-wal", "wb") as log:  # as if the log's truncation had been lost
        log.write(log_bytes)
    assert _open_content(path) == (2, after)
    assert path.read_bytes() == applied
    path.write_bytes(file_bytes)
    with open(f"{path}-wal", "wb") as log:
        log.write(log_bytes)
    assert _open_content(path) == (2, after)
    assert path.read_bytes() == applied


def test_log_applies_when_only_the_header_reached_the_file(tmp_path, monkeypatch):
    path = tmp_path / "a"
    _, after = _pending_commit(path, monkeypatch)
    fd = os.open(f"{path}-wal", os.O_RDONLY)
    record = wal.read_record(fd)
    header = next(e for e in record.entries if e.offset == 0)
    with open(path, "r+b") as f:
        f.write(os.pread(fd, header.length, header.position))
    os.close(fd)
    assert _open_content(path) == (2, after)


@pytest.mark.parametrize("damage", ["empty", "head", "half", "last_byte", "flipped"])
def test_torn_log_is_ignored_and_removed(tmp_path, monkeypatch, damage):
    path = tmp_path / "a"
    before, _ = _pending_commit(path, monkeypatch)
    log = bytearray(open(f"{path}-wal", "rb").read())
    cut = {"empty": 0, "head": 20, "half": len(log) // 2, "last_byte": len(log) - 1,
           "flipped": len(log)}[damage]
    log = log[:cut]
    if damage == "flipped":
        log[len(log) // 3] ^= 0x10
    with open(f"{path}-wal", "wb") as f:
        f.write(log)
    assert _open_content(path) == (1, before)
    assert not os.path.exists(f"{path}-wal")


def test_stale_log_is_ignored_and_removed(tmp_path, monkeypatch):
    path = tmp_path / "a"
    _, after = _pending_commit(path, monkeypatch)
    log_bytes = open(f"{path}-wal", "rb").read()
    with Arena.file(path) as arena:
        arena.set_root(b"three")
        arena.commit()
        latest = arena_content(arena)
    with open(f"{path}-wal", "wb") as log:
        log.write(log_bytes)
    assert _open_content(path) == (3, latest)
    assert not os.path.exists(f"{path}-wal")


def test_a_log_never_applies_to_another_file_at_its_path(tmp_path, monkeypatch):
    """A compaction renames a new file over the path; a log the old file left there (its
    truncation lost in a crash) names the old file's id, so it is not applied even when the
    new file's generation is the record's base generation."""
    path, other = tmp_path / "a", tmp_path / "b"
    _pending_commit(path, monkeypatch)  # a record of generation 1 -> 2
    log_bytes = open(f"{path}-wal", "rb").read()
    os.remove(f"{path}-wal")
    with Arena.file(other) as arena:
        arena.array(arena.allocate(100), np.uint8, 100)[:] = 9
        arena.set_root(b"other")
        arena.commit()
        assert arena.generation == 1
        content = arena_content(arena)
    os.replace(other, path)
    with open(f"{path}-wal", "wb") as log:
        log.write(log_bytes)
    assert _open_content(path, readonly=True) == (1, content)
    assert _open_content(path) == (1, content)  # a writer removes the stale log
    assert not os.path.exists(f"{path}-wal")


def test_reader_applies_a_pending_commit_when_no_writer_lives(tmp_path, monkeypatch):
    path = tmp_path / "a"
    _, after = _pending_commit(path, monkeypatch)
    assert _open_content(path, readonly=True) == (2, after)
    assert not os.path.exists(f"{path}-wal")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write a read-only file")
def test_reader_that_may_not_write_reports_the_pending_commit(tmp_path, monkeypatch):
    path = tmp_path / "a"
    _pending_commit(path, monkeypatch)
    os.chmod(path, 0o444)
    with pytest.raises(RecoveryPendingError, match="write access"):
        Arena.file(path, readonly=True)


def test_creating_a_file_anew_removes_its_log(tmp_path, monkeypatch):
    path = tmp_path / "a"
    _pending_commit(path, monkeypatch)
    with Arena.file(path, replace=True) as arena:
        assert arena.root == b"" and arena.generation == 0
    assert not os.path.exists(f"{path}-wal")


# -- crashes of a forked writer -----------------------------------------------------------------

def _digest(arena: Arena) -> str:
    root, payloads = arena_content(arena)
    digest = hashlib.sha256(root)
    for offset, payload in payloads.items():
        digest.update(struct.pack("<Q", offset) + payload)
    return digest.hexdigest()


def _install_crash(kind: str, rng: random.Random) -> None:
    """In the child: die by SIGKILL at a random fsync, mid-way through a random file write, or
    right after a record was logged, with the log then torn (as a power cut could leave it)."""
    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    countdown = [rng.randrange(1, 12)]

    def due() -> bool:
        countdown[0] -= 1
        return countdown[0] == 0

    if kind == "fsync":
        real_fsync = os.fsync
        os.fsync = lambda fd: die() if due() else real_fsync(fd)
    elif kind == "write":
        real_pwrite_all = wal.pwrite_all

        def torn_pwrite_all(fd, data, offset):
            if due():
                with memoryview(data) as view:
                    os.pwrite(fd, view[: rng.randrange(len(view) + 1)], offset)
                die()
            real_pwrite_all(fd, data, offset)

        wal.pwrite_all = torn_pwrite_all
    elif kind == "torn_log":
        real_write_record = wal.write_record

        def torn_write_record(fd, **fields):
            real_write_record(fd, **fields)
            if due():
                os.ftruncate(fd, rng.randrange(os.fstat(fd).st_size))
                die()

        wal.write_record = torn_write_record


def _offsets_in(root: bytes) -> list[int]:
    if not root:
        return []
    (count,) = struct.unpack_from("<Q", root)
    return list(struct.unpack_from(f"<{count}Q", root, 8))


def _writer_loop(path: str, seed: int, announce_fd: int, crash: str) -> None:
    """In the child: random transactions; before each commit it announces the generation and
    digest it is committing, after it that the commit returned."""
    rng = random.Random(seed)
    _install_crash(crash, rng)
    arena = Arena.file(path)
    offsets = _offsets_in(arena.root)
    for _ in range(200):
        for _ in range(rng.randrange(1, 6)):
            action = rng.random()
            if action < 0.3 or not offsets:
                offsets.append(arena.allocate(rng.randrange(1, 6 * PAGE_BYTES)))
            elif action < 0.45:
                arena.free(offsets.pop(rng.randrange(len(offsets))))
            else:
                offset = rng.choice(offsets)
                size = arena.payload_bytes(offset)
                start = rng.randrange(size)
                array = arena.array(offset, np.uint8, min(size - start, rng.randrange(1, 9000)),
                                    start)
                array[:] = rng.randrange(256)
                del array
        filler = b"r" * rng.choice((0, 10, 5000))
        arena.set_root(struct.pack(f"<Q{len(offsets)}Q", len(offsets), *offsets) + filler)
        if rng.random() < 0.1:
            arena.rollback()
            offsets = _offsets_in(arena.root)
            continue
        os.write(announce_fd, f"pending {arena.generation + 1} {_digest(arena)}\n".encode())
        arena.commit()
        os.write(announce_fd, f"done {arena.generation}\n".encode())


def _run_crashing_child(path: str, seed: int, crash: str) -> tuple[dict[int, str], int]:
    """Fork a writer that dies; return its announced digests by generation and the last
    generation whose commit returned."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        code = 0
        try:
            _writer_loop(path, seed, write_fd, crash)
        except BaseException:
            traceback.print_exc()
            code = 1
        os._exit(code)
    os.close(write_fd)
    if crash == "timer":
        time.sleep(random.Random(seed).uniform(0.01, 0.4))
        os.kill(pid, signal.SIGKILL)
    chunks = []
    while chunk := os.read(read_fd, 1 << 16):
        chunks.append(chunk)
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    assert not (os.WIFEXITED(status) and os.WEXITSTATUS(status)), "the child writer failed"
    announced, done = {}, 0
    for line in b"".join(chunks).decode().splitlines():
        words = line.split()
        if words[0] == "pending" and len(words) == 3:
            announced[int(words[1])] = words[2]
        elif words[0] == "done" and len(words) == 2:
            done = int(words[1])
    return announced, done


@pytest.mark.parametrize("crash", ["timer", "fsync", "write", "torn_log"])
def test_killed_writer_reopens_as_its_last_commit(tmp_path, crash):
    path = str(tmp_path / "a")
    with Arena.file(path) as arena:
        digests = {0: _digest(arena)}
    for trial in range(3):
        announced, done = _run_crashing_child(path, seed=zlib.crc32(f"{crash} {trial}".encode()),
                                              crash=crash)
        digests.update(announced)
        with Arena.file(path) as arena:
            arena._check()
            generation = arena.generation
            assert done <= generation <= max(digests), (done, generation)
            assert _digest(arena) == digests[generation], f"trial {trial}: generation {generation}"
        assert not os.path.exists(f"{path}-wal")
