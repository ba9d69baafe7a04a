"""Sharing an arena file: one writer, readers beside a committing writer in another process,
durability="none" with its open-for-writing flag, and files of format version 1."""

from __future__ import annotations

import os
import shutil
import signal
import struct
import traceback
from pathlib import Path

import numpy as np
import pytest

from offheap.arena import wal
from offheap.errors import (
    CapacityError,
    ClosedError,
    CorruptionError,
    LockedError,
    TransactionError,
)
from offheap.arena.arena import PAGE_BYTES, Arena
from offheap.arena.commit import CommitWriter
from tests.offheap.arena_fuzz import arena_content

GOLDEN = Path(__file__).parent / "golden"


def _fork(body) -> tuple[int, int]:
    """Run ``body(write_fd)`` in a child process; (pid, read end of its pipe)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        code = 0
        try:
            body(write_fd)
        except BaseException:
            traceback.print_exc()
            code = 1
        os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def _wait(pid: int) -> None:
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


# -- one writer ---------------------------------------------------------------------------------

@pytest.mark.parametrize("durability", ["commit", "none"])
def test_second_writer_in_this_process_is_refused(tmp_path, durability):
    path = tmp_path / "a"
    with Arena.file(path, durability=durability):
        with pytest.raises(LockedError, match="open for writing in another process") as info:
            Arena.file(path)
        assert str(path) in str(info.value) and isinstance(info.value, BlockingIOError)
    Arena.file(path).close()  # free again once closed


def test_second_writer_in_another_process_is_refused(tmp_path):
    path = tmp_path / "a"
    Arena.file(path).close()

    def hold(write_fd):
        with Arena.file(path):
            os.write(write_fd, b"open")
            os.read(release_read, 1)

    release_read, release_write = os.pipe()
    pid, ready = _fork(hold)
    os.close(release_read)
    assert os.read(ready, 4) == b"open"
    with pytest.raises(LockedError, match="open for writing in another process"):
        Arena.file(path)
    os.write(release_write, b"x")
    _wait(pid)
    Arena.file(path).close()


def test_killed_writer_leaves_no_lock_behind(tmp_path):
    path = tmp_path / "a"

    def die_holding(write_fd):
        Arena.file(path)
        os.write(write_fd, b"open")
        os.kill(os.getpid(), signal.SIGKILL)

    pid, ready = _fork(die_holding)
    assert os.read(ready, 4) == b"open"
    os.waitpid(pid, 0)
    with Arena.file(path) as arena:
        assert arena.generation == 0


# -- readers beside a writer --------------------------------------------------------------------

def test_reader_picks_up_commits_in_read_sections(tmp_path):
    path = tmp_path / "a"
    with Arena.file(path) as writer:
        offset = writer.allocate(PAGE_BYTES)
        writer.array(offset, np.int64, 1)[0] = 1
        writer.set_root(struct.pack("<Q", offset))
        writer.commit()
        with Arena.file(path, readonly=True) as reader:
            assert writer.has_readers() and not reader.has_readers()
            with reader.read_section() as changed:
                assert not changed and reader.array(offset, np.int64, 1)[0] == 1
            writer.array(offset, np.int64, 1)[0] = 2
            with reader.read_section() as changed:  # not committed: not seen
                assert not changed and reader.array(offset, np.int64, 1)[0] == 1
            writer.commit()
            with reader.read_section() as changed:
                assert changed and reader.generation == writer.generation
                assert reader.array(offset, np.int64, 1)[0] == 2
                with reader.read_section() as inner:
                    assert not inner
        assert not writer.has_readers()


def test_writer_does_not_shorten_the_file_under_readers(tmp_path):
    path = tmp_path / "a"
    with Arena.file(path) as writer:
        writer.allocate(100)
        tail = writer.allocate(1 << 20)
        writer.array(tail, np.uint8, 1 << 20)[:] = 1
        writer.commit()
        size = os.path.getsize(path)
        with Arena.file(path, readonly=True) as reader:
            view = reader.array(tail, np.uint8, 1 << 20)
            writer.free(tail)
            writer.commit()
            assert os.path.getsize(path) == size  # a reader's old view must not fault
            assert not view.any()  # the freed tail reads as zeros
            del view
            with reader.read_section() as changed:
                assert changed and reader.stats().n_extents == 1
        writer.commit()
    assert os.path.getsize(path) < size  # cut once the readers are gone


def test_readers_never_see_a_half_applied_commit(tmp_path):
    """A child commits 64 pages at a time, all holding the commit's number, and the root names
    it; this process reads in read sections and must always see one number throughout."""
    path = tmp_path / "a"
    n_items = 64 * PAGE_BYTES // 8
    with Arena.file(path) as writer:
        offset = writer.allocate(n_items * 8)
        writer.set_root(struct.pack("<QQ", offset, 0))
        writer.commit()

    def commit_numbers(write_fd):
        with Arena.file(path) as arena:
            for number in range(1, 200):
                arena.array(offset, np.int64, n_items)[:] = number
                arena.set_root(struct.pack("<QQ", offset, number))
                arena.commit()
                if number == 1:
                    os.write(write_fd, b"go")

    with Arena.file(path, readonly=True) as reader:
        pid, ready = _fork(commit_numbers)
        assert os.read(ready, 2) == b"go"
        seen = set()
        while True:
            with reader.read_section():
                _, number = struct.unpack("<QQ", reader.root)
                values = reader.array(offset, np.int64, n_items)
                assert (values == number).all(), (number, np.unique(values))
                del values
            seen.add(number)
            finished, status = os.waitpid(pid, os.WNOHANG)
            if finished:
                assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
                break
        os.close(ready)
        with reader.read_section():
            assert struct.unpack("<QQ", reader.root)[1] == 199
    assert len(seen) > 1


def test_reader_repairs_a_commit_its_dead_writer_left_half_copied(tmp_path):
    path = tmp_path / "a"
    n_pages = 64
    with Arena.file(path) as writer:
        offset = writer.allocate(n_pages * PAGE_BYTES)
        writer.set_root(struct.pack("<Q", 0))
        writer.commit()

    def die_while_copying(write_fd):
        real_pwrite_all, count = wal.pwrite_all, [0]

        def pwrite_all_then_die(fd, data, at):
            count[0] += 1
            if count[0] == 6:
                os.kill(os.getpid(), signal.SIGKILL)
            real_pwrite_all(fd, data, at)

        with Arena.file(path) as arena:
            os.write(write_fd, b"open")
            os.read(go_read, 1)
            values = arena.array(offset, np.int64, n_pages * PAGE_BYTES // 8)
            values.reshape(n_pages, -1)[::2, :8] = 1  # every other page: a run each
            del values
            arena.set_root(struct.pack("<Q", 1))
            wal.pwrite_all = pwrite_all_then_die
            arena.commit()

    go_read, go_write = os.pipe()
    with Arena.file(path, readonly=True) as reader:
        pid, ready = _fork(die_while_copying)
        os.close(go_read)
        assert os.read(ready, 4) == b"open"
        with reader.read_section() as changed:
            assert not changed
            values = reader.array(offset, np.int64, n_pages * PAGE_BYTES // 8).copy()
        os.write(go_write, b"x")
        os.waitpid(pid, 0)
        assert os.path.getsize(f"{path}-wal") > 0
        with reader.read_section() as changed:
            assert changed and struct.unpack("<Q", reader.root) == (1,)
            values = reader.array(offset, np.int64, n_pages * PAGE_BYTES // 8).reshape(n_pages, -1)
            assert (values[::2, :8] == 1).all() and not values[1::2].any()
            del values
    assert not os.path.exists(f"{path}-wal")


def test_a_commit_logged_by_a_writer_that_died_before_copying_waits_for_the_next_opener(
        tmp_path):
    """Read sections look only at the header: a commit whose copy never started leaves the
    file as the last commit, which an open reader goes on reading; the next opener applies it."""
    path = tmp_path / "a"
    with Arena.file(path) as writer:
        writer.set_root(b"one")
        writer.commit()

    def log_then_die(write_fd):
        arena = Arena.file(path)
        arena.set_root(b"two")
        CommitWriter._checkpoint = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
        arena.commit()

    with Arena.file(path, readonly=True) as reader:
        pid, ready = _fork(log_then_die)
        os.close(ready)
        os.waitpid(pid, 0)
        assert os.path.getsize(f"{path}-wal") > 0
        with reader.read_section() as changed:
            assert not changed and reader.root == b"one"
        with Arena.file(path, readonly=True) as opener:
            assert opener.root == b"two"
        with reader.read_section() as changed:
            assert changed and reader.root == b"two"


def _break_a_commit(writer: Arena, monkeypatch) -> None:
    """Make ``writer``'s commit fail half-way through copying it into the file."""
    real_pwrite_all, calls = wal.pwrite_all, []

    def fail_on_the_third(fd, data, offset):
        calls.append(offset)
        if len(calls) == 3:
            raise OSError(5, "Input/output error")
        real_pwrite_all(fd, data, offset)

    with monkeypatch.context() as patch:
        patch.setattr(wal, "pwrite_all", fail_on_the_third)
        with pytest.raises(TransactionError, match="durable"):
            writer.commit()


def test_a_reader_refuses_a_commit_its_live_writer_left_half_copied(tmp_path, monkeypatch):
    path = tmp_path / "a"
    writer = Arena.file(path)
    offset = writer.allocate(8 * PAGE_BYTES)
    writer.set_root(b"one")
    writer.commit()
    reader = Arena.file(path, readonly=True)
    writer.array(offset, np.uint8, 8 * PAGE_BYTES)[:] = 7
    writer.set_root(b"two")
    _break_a_commit(writer, monkeypatch)
    with pytest.raises(TransactionError, match="failed while copying a commit"):
        with reader.read_section():
            pass
    writer.close()  # the log stays: the next section applies it
    with reader.read_section() as changed:
        assert changed and reader.root == b"two"
        assert (reader.array(offset, np.uint8, 8 * PAGE_BYTES) == 7).all()
    reader.close()


def test_a_half_copied_commit_without_its_log_is_never_read(tmp_path, monkeypatch):
    path = tmp_path / "a"
    writer = Arena.file(path)
    writer.set_root(b"one")
    writer.commit()
    reader = Arena.file(path, readonly=True)
    writer.set_root(b"two" * 3000)
    _break_a_commit(writer, monkeypatch)
    writer.close()
    os.remove(f"{path}-wal")
    with pytest.raises(CorruptionError, match="half-way through copying a commit.*salvage"):
        with reader.read_section():
            pass
    reader.close()
    for options in ({}, {"readonly": True}):
        with pytest.raises(CorruptionError, match="half-way through copying a commit"):
            Arena.file(path, **options)


# -- replacing a file (compaction) --------------------------------------------------------------

@pytest.mark.parametrize("durability", ["commit", "none"])
def test_replace_renames_a_file_over_another_keeping_its_writer_lock(tmp_path, durability):
    path, copy_path = tmp_path / "a", tmp_path / "a.compact"
    old = Arena.file(path, durability=durability)
    old.set_root(b"old")
    old.commit()
    new = Arena.file(copy_path, durability=durability)
    new.set_root(b"new")
    new.commit()
    new.replace(old)
    assert old.closed and new.path == str(path) and not copy_path.exists()
    assert not os.path.exists(f"{copy_path}-wal") and not os.path.exists(f"{path}-wal")
    with pytest.raises(LockedError):
        Arena.file(path, durability=durability)  # another open file, as another process has

    def try_to_write(write_fd):
        try:
            Arena.file(path, durability=durability)
        except LockedError:
            os.write(write_fd, b"locked")
        else:
            os.write(write_fd, b"opened")

    pid, read_fd = _fork(try_to_write)
    assert os.read(read_fd, 10) == b"locked"
    os.close(read_fd)
    _wait(pid)
    new.set_root(b"newer")
    new.commit()
    new.close()
    assert not os.path.exists(f"{path}-wal")
    with Arena.file(path, readonly=True) as arena:
        assert arena.root == b"newer"


def test_a_reader_of_a_replaced_file_is_told_to_open_it_again(tmp_path):
    path = tmp_path / "a"
    old = Arena.file(path)
    old.set_root(b"old")
    old.commit()
    reader = Arena.file(path, readonly=True)  # opened before the rename, as a race allows
    with reader.read_section():
        assert reader.root == b"old"
    new = Arena.file(tmp_path / "copy")
    new.set_root(b"new")
    new.commit()
    new.replace(old)
    with pytest.raises(ClosedError, match="replaced by another file.*open it again"):
        with reader.read_section():
            pass
    reader.close()
    new.close()
    with Arena.file(path, readonly=True) as arena:
        assert arena.root == b"new"


# -- durability="none" --------------------------------------------------------------------------

def test_none_mode_shares_nothing(tmp_path):
    path = tmp_path / "a"
    Arena.file(path).close()
    with Arena.file(path, durability="none"):
        with pytest.raises(LockedError, match="durability='none'"):
            Arena.file(path, readonly=True)
    with Arena.file(path, readonly=True):
        with pytest.raises(LockedError, match="read-only in another process"):
            Arena.file(path, durability="none")


def test_none_mode_file_not_closed_cleanly_refuses_to_open(tmp_path):
    path = tmp_path / "a"

    def write_and_die(write_fd):
        arena = Arena.file(path, durability="none")
        offset = arena.allocate(3 * PAGE_BYTES)
        arena.array(offset, np.uint8, 3 * PAGE_BYTES)[:] = 6
        arena.set_root(struct.pack("<Q", offset))
        arena.flush()
        os._exit(0)  # no close: the flag stays set

    pid, ready = _fork(write_and_die)
    os.close(ready)
    _wait(pid)
    for options in ({}, {"readonly": True}, {"durability": "none"}):
        with pytest.raises(CorruptionError, match="not closed cleanly") as info:
            Arena.file(path, **options)
        assert "salvage" in str(info.value) and "recover=True" in str(info.value)
    with Arena.file(path, readonly=True, recover=True) as arena:
        (offset,) = struct.unpack("<Q", arena.root)
        assert (arena.array(offset, np.uint8, 3 * PAGE_BYTES) == 6).all()
    with Arena.file(path, recover=True) as arena:  # a writer rewrites every checksum
        arena.commit()
    with Arena.file(path, readonly=True) as arena:
        assert (arena.array(offset, np.uint8, 3 * PAGE_BYTES) == 6).all()


def test_none_mode_file_stays_walkable_when_its_checksum_extent_moves(tmp_path):
    path = tmp_path / "a"

    def grow_and_die(write_fd):
        arena = Arena.file(path, durability="none")
        offset = arena.allocate(5 << 20)  # past the first checksum extent: it moves
        arena.array(offset, np.uint8, 100)[:] = 4
        arena.set_root(struct.pack("<Q", offset))
        arena.flush()
        arena.free(arena.allocate(100))
        os._exit(0)

    pid, ready = _fork(grow_and_die)
    os.close(ready)
    _wait(pid)
    with Arena.file(path, readonly=True, recover=True) as arena:
        (offset,) = struct.unpack("<Q", arena.root)
        assert (arena.array(offset, np.uint8, 100) == 4).all()


def _crash_image(arena: Arena, path) -> None:
    """Copy what the file of a live none-mode ``arena`` holds now (its mapped writes included,
    as a SIGKILL would leave them) to ``path``."""
    shutil.copyfile(arena.path, path)


def test_recover_walks_extents_added_after_the_header_was_written(tmp_path):
    """Without transactions the header's end is rewritten only at flush: a crash image holds
    extents past it, and a free extent (merged after the flush) that reaches across it."""
    path, image = tmp_path / "a", tmp_path / "image"
    with Arena.file(path, durability="none") as arena:
        a, b, c = (arena.allocate(PAGE_BYTES) for _ in range(3))
        arena.array(a, np.uint8, 10)[:] = 1
        arena.set_root(struct.pack("<QQ", a, c))
        arena.flush()
        recorded_end = arena._backing.end
        d, e = arena.allocate(3 * PAGE_BYTES), arena.allocate(PAGE_BYTES)
        arena.array(e, np.uint8, 10)[:] = 5
        arena.free(c)
        arena.free(d)  # merges with c: one free extent from before the recorded end to past it
        assert arena._backing.space.free == {c: 2 * PAGE_BYTES + 4 * PAGE_BYTES} and e > recorded_end
        _crash_image(arena, image)
        with pytest.raises(CorruptionError, match="not closed cleanly"):
            Arena.file(image, readonly=True)
        with Arena.file(image, readonly=True, recover=True) as recovered:
            assert sorted(recovered._extents) == [a, b, e]
            assert recovered.damage.lost_ranges == () and recovered.damage.lost_bytes == 0
            assert (recovered.array(e, np.uint8, 10) == 5).all()
            assert recovered.stats().free_bytes == 6 * PAGE_BYTES
            recovered._check()


def test_recover_stops_at_the_first_bad_tag_past_the_recorded_end(tmp_path):
    path, image = tmp_path / "a", tmp_path / "image"
    with Arena.file(path, durability="none") as arena:
        a = arena.allocate(100)
        arena.set_root(b"root")
        arena.flush()
        b = arena.allocate(PAGE_BYTES)
        arena.array(b, np.uint8, 10)[:] = 2
        _crash_image(arena, image)
    with open(image, "ab") as f:  # grown for an extent whose tag never reached the file
        f.write(bytes(3 * PAGE_BYTES))
    with Arena.file(image, readonly=True, recover=True) as recovered:
        assert sorted(recovered._extents) == [a, b]
        assert recovered.damage.lost_ranges == ((b + 2 * PAGE_BYTES, 3 * PAGE_BYTES),)
        assert (recovered.array(b, np.uint8, 10) == 2).all()
    with Arena.file(image, durability="none", recover=True) as writer:  # cuts the lost tail
        assert writer._backing.end == b + 2 * PAGE_BYTES
        writer._check()
    assert os.path.getsize(image) == b + 2 * PAGE_BYTES
    with Arena.file(image, readonly=True) as arena:
        assert arena.root == b"root" and (arena.array(b, np.uint8, 10) == 2).all()


@pytest.mark.parametrize("durability", ["commit", "none"])
def test_recover_skips_a_damaged_tag_to_the_next_intact_one(tmp_path, durability):
    path = tmp_path / "a"
    with Arena.file(path, durability=durability) as arena:
        offsets = [arena.allocate(2 * PAGE_BYTES) for _ in range(4)]
        for i, offset in enumerate(offsets):
            arena.array(offset, np.uint8, 2 * PAGE_BYTES)[:] = i + 1
        arena.set_root(b"r" * 6000)  # an extent of its own, after the damaged one
        arena.commit()
    data = bytearray(path.read_bytes())
    data[offsets[1] + 3] ^= 0xFF  # the magic of the second extent's tag
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match=f"tag at offset {offsets[1]} is damaged"):
        Arena.file(path, readonly=True)
    with Arena.file(path, readonly=True, recover=True) as recovered:
        assert recovered.damage.lost_ranges == ((offsets[1], 3 * PAGE_BYTES),)
        assert sorted(set(recovered._extents) & set(offsets)) == [offsets[0], offsets[2],
                                                                 offsets[3]]
        assert recovered.root == b"r" * 6000
        assert (recovered.array(offsets[3], np.uint8, 2 * PAGE_BYTES) == 4).all()
    with Arena.file(path, durability=durability, recover=True) as writer:
        writer.commit()  # the lost range becomes free space
        assert writer.stats().free_bytes == 3 * PAGE_BYTES
        writer._check()
    with Arena.file(path, readonly=True) as arena:  # every check passes again
        assert offsets[1] not in arena._extents and arena.root == b"r" * 6000
        assert (arena.array(offsets[2], np.uint8, 2 * PAGE_BYTES) == 3).all()


def test_none_mode_close_after_a_failed_change_leaves_the_file_marked_open(tmp_path):
    path = tmp_path / "a"
    with Arena.file(path, durability="none", limit_bytes=64 * PAGE_BYTES) as arena:
        with pytest.raises(CapacityError):
            arena.allocate(100 * PAGE_BYTES)
        arena.flush()  # the owner wrote its state again: a clean close is allowed
    Arena.file(path, durability="none", limit_bytes=64 * PAGE_BYTES).close()
    with Arena.file(path, durability="none", limit_bytes=64 * PAGE_BYTES) as arena:
        with pytest.raises(CapacityError):
            arena.set_root(b"r" * (100 * PAGE_BYTES))
    with pytest.raises(CorruptionError, match="not closed cleanly"):
        Arena.file(path, durability="none")


def test_none_mode_close_checksums_every_page(tmp_path):
    path = tmp_path / "a"
    with Arena.file(path, durability="none") as arena:
        offset = arena.allocate(5 * PAGE_BYTES)
        arena.array(offset, np.uint8, 5 * PAGE_BYTES)[:] = 3
        arena.set_root(b"none")
    with Arena.file(path, readonly=True) as arena:
        assert arena.root == b"none" and (arena.array(offset, np.uint8, 10) == 3).all()
    data = bytearray(path.read_bytes())
    data[offset + 4 * PAGE_BYTES] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match=f"offset {offset + 4 * PAGE_BYTES}"):
        Arena.file(path, durability="none")


# -- format versions ----------------------------------------------------------------------------

@pytest.mark.parametrize("version", [1, 2])
def test_older_format_versions_are_refused_with_a_clear_message(tmp_path, version):
    path = tmp_path / "old.offheap"
    shutil.copy(GOLDEN / f"arena_v{version}.offheap", path)
    message = f"format version {version}; this offheap reads 3"
    with pytest.raises(CorruptionError, match=message):
        Arena.file(path)
    with pytest.raises(CorruptionError, match=message):
        Arena.file(path, readonly=True, recover=True)


def test_arena_content_survives_every_mode_switch(tmp_path):
    path = tmp_path / "a"
    with Arena.file(path) as arena:
        arena.array(arena.allocate(100), np.uint8, 100)[:] = 1
        arena.set_root(b"x" * 5000)
        arena.commit()
        content = arena_content(arena)
    for durability in ("none", "commit", "none"):
        with Arena.file(path, durability=durability) as arena:
            assert arena_content(arena) == content
