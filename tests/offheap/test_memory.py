"""Arena: accounting, the hard limit, file persistence in both durability modes, damaged files."""

import os
import shutil

import numpy as np
import pytest

from offheap.errors import (
    CapacityError,
    ClosedError,
    CorruptionError,
    ReadOnlyError,
    TransactionError,
)
from offheap.arena.format import TAG_BYTES
from offheap.arena.arena import HEADER_BYTES, PAGE_BYTES, Arena

MODES = ["commit", "none"]


def test_anonymous_accounting_is_exact():
    arena = Arena.anonymous()
    assert arena.reserved_bytes == HEADER_BYTES and arena.used_bytes == 0
    a = arena.allocate(100)
    b = arena.allocate(PAGE_BYTES * 3)
    assert arena.used_bytes == 100 + PAGE_BYTES * 3
    assert arena.reserved_bytes == HEADER_BYTES + PAGE_BYTES + PAGE_BYTES * 4
    assert arena.payload_bytes(a) >= 100
    arena.free(b)
    assert arena.reserved_bytes == HEADER_BYTES + PAGE_BYTES and arena.used_bytes == 100
    arena.close()


def test_extents_start_zeroed_and_hold_data():
    with Arena.anonymous() as arena:
        offset = arena.allocate(8 * 1000)
        view = arena.array(offset, np.int64, 1000)
        assert not view.any()
        view[:] = np.arange(1000)
        assert arena.array(offset, np.int64, 1000).sum() == 499500
        del view


def test_limit_raises_before_crossing_and_changes_nothing():
    arena = Arena.anonymous(limit_bytes=HEADER_BYTES + 4 * PAGE_BYTES)
    arena.allocate(PAGE_BYTES)  # two pages with its tag
    before = arena.stats()
    with pytest.raises(CapacityError, match="limit"):
        arena.allocate(3 * PAGE_BYTES)
    assert arena.stats() == before
    assert isinstance(CapacityError("x"), MemoryError)
    arena.allocate(PAGE_BYTES)  # still usable up to the limit
    assert arena.reserved_bytes == HEADER_BYTES + 4 * PAGE_BYTES


@pytest.mark.parametrize("durability", MODES)
def test_file_limit_counts_the_checksum_extent_and_changes_nothing(tmp_path, durability):
    path = tmp_path / "a.offheap"
    limit = HEADER_BYTES + 4 * PAGE_BYTES
    with Arena.file(path, durability=durability, limit_bytes=limit) as arena:
        assert arena.reserved_bytes == HEADER_BYTES + PAGE_BYTES  # the checksum extent
        arena.allocate(PAGE_BYTES)
        before, size = arena.stats(), os.path.getsize(path)
        with pytest.raises(CapacityError, match="limit"):
            arena.allocate(PAGE_BYTES)
        assert arena.stats() == before and os.path.getsize(path) == size
        arena.allocate(100)
        arena._check()


@pytest.mark.parametrize("durability", MODES)
def test_reservation_bytes_says_what_allocations_add_to_reserved_bytes(tmp_path, durability):
    rng = np.random.default_rng(5)
    with Arena.file(tmp_path / "a.offheap", durability=durability) as arena:
        live = []
        for step in range(60):  # the file passes two checksum extents on the way
            sizes = rng.integers(0, 300_000, rng.integers(1, 4)).tolist()
            before, table_bytes = arena.reserved_bytes, arena._backing.table.extent_bytes
            predicted = arena.reservation_bytes(*sizes)
            assert predicted == arena.reservation_bytes(*sizes)  # asking changes nothing
            live += [arena.allocate(n) for n in sizes]
            grown = arena.reserved_bytes - before
            if len(sizes) == 1 or durability == "commit":
                assert grown == predicted
            else:  # a moved checksum extent's old space is free at once and may be reused
                assert predicted >= grown >= predicted - table_bytes
            if step % 3 == 0:
                arena.free(live.pop(int(rng.integers(len(live)))))
            if step % 10 == 0:
                arena.commit()
        assert arena._backing.table.extent_bytes > PAGE_BYTES
        arena._check()
    anonymous = Arena.anonymous(limit_bytes=HEADER_BYTES + 3 * PAGE_BYTES)
    assert anonymous.reservation_bytes(1, PAGE_BYTES) == 3 * PAGE_BYTES
    anonymous.allocate(1)
    anonymous.allocate(PAGE_BYTES)


@pytest.mark.parametrize("durability", MODES)
def test_file_arena_reopens_with_root_and_data(tmp_path, durability):
    path = tmp_path / "a.offheap"
    arena = Arena.file(path, durability=durability)
    keep = arena.allocate(800)
    gone = arena.allocate(5000)
    arena.array(keep, np.int64, 100)[:] = np.arange(100)
    arena.set_root(b"r" * 10_000)  # larger than the header: kept in an extent
    arena.free(gone)
    arena.commit()
    arena._check()
    arena.close()
    arena = Arena.file(path, durability=durability)
    assert arena.root == b"r" * 10_000
    assert list(arena.array(keep, np.int64, 100)) == list(range(100))
    reused = arena.allocate(4000)  # takes the freed range and reads as zeros
    assert reused == gone
    assert not arena.array(reused, np.uint8, 4000).any()
    arena._check()
    arena.close()


@pytest.mark.parametrize("durability", MODES)
def test_file_grows_past_the_first_checksum_extent(tmp_path, durability):
    path = tmp_path / "a.offheap"
    with Arena.file(path, durability=durability) as arena:
        offsets = [arena.allocate(1 << 20) for _ in range(6)]  # past 1008 pages of checksums
        for i, offset in enumerate(offsets):
            arena.array(offset, np.uint8, 1 << 20)[:] = i
        arena._check()
        arena.commit()
        arena._check()
    with Arena.file(path, durability=durability) as arena:
        for i, offset in enumerate(offsets):
            assert (arena.array(offset, np.uint8, 1 << 20) == i).all()


def test_free_extent_at_end_shrinks_the_file_at_once_without_transactions(tmp_path):
    path = tmp_path / "a.offheap"
    arena = Arena.file(path, durability="none")
    arena.allocate(100)
    last = arena.allocate(1 << 20)
    big = os.path.getsize(path)
    arena.free(last)
    assert os.path.getsize(path) < big
    arena.close()


def test_free_extent_at_end_shrinks_the_file_at_commit(tmp_path):
    path = tmp_path / "a.offheap"
    arena = Arena.file(path)
    arena.allocate(100)
    last = arena.allocate(1 << 20)
    arena.commit()
    big = os.path.getsize(path)
    arena.free(last)
    assert os.path.getsize(path) == big  # still live in the committed file
    arena.commit()
    assert os.path.getsize(path) < big
    arena.close()


def test_freed_space_is_reused_only_after_the_commit_that_frees_it(tmp_path):
    with Arena.file(tmp_path / "a.offheap") as arena:
        first = arena.allocate(10_000)
        arena.allocate(100)
        arena.commit()
        arena.free(first)
        assert arena.allocate(10_000) != first
        arena.commit()
        assert arena.allocate(10_000) == first


def test_punched_free_space_leaves_the_disk(tmp_path):
    path = tmp_path / "a.offheap"
    with Arena.file(path) as arena:
        big = arena.allocate(8 << 20)
        arena.array(big, np.uint8, 8 << 20)[:] = 1
        arena.allocate(100)  # keeps the big extent from being the tail
        arena.commit()
        on_disk = arena.stats().disk_bytes
        arena.free(big)
        arena.commit()
        stats = arena.stats()
        assert stats.disk_bytes < on_disk - (7 << 20)
        assert stats.free_bytes == stats.file_bytes - stats.reserved_bytes > 8 << 20
        assert stats.file_bytes == os.path.getsize(path)
        assert stats.live_bytes == PAGE_BYTES and stats.n_extents == 1


def test_closed_arena_raises():
    arena = Arena.anonymous()
    arena.close()
    arena.close()
    with pytest.raises(ClosedError):
        arena.allocate(10)
    with pytest.raises(ClosedError):
        _ = arena.root


def test_close_with_exported_view_does_not_fault():
    arena = Arena.anonymous()
    view = arena.array(arena.allocate(64), np.int64, 8)
    arena.close()
    view[0] = 7  # the mapping lives until the view dies
    assert view[0] == 7


@pytest.mark.parametrize("durability", MODES)
def test_close_with_exported_file_view_releases_the_file(tmp_path, durability):
    path = tmp_path / "a.offheap"
    arena = Arena.file(path, durability=durability)
    view = arena.array(arena.allocate(64), np.int64, 8)
    view[0] = 5
    arena.commit()
    arena.close()
    assert view[0] == 5
    with Arena.file(path, durability=durability) as again:  # the view keeps no lock
        assert again.stats().n_extents == 1
    del view


def test_free_of_an_extent_with_a_live_view_changes_nothing(tmp_path):
    with Arena.file(tmp_path / "a.offheap") as arena:
        offset = arena.allocate(64)
        view = arena.array(offset, np.int64, 8)
        with pytest.raises(BufferError):
            arena.free(offset)
        assert arena.payload_bytes(offset) >= 64
        del view
        arena.free(offset)
        arena._check()


def test_rollback_needs_transactions(tmp_path):
    with pytest.raises(TransactionError, match="durability='commit'"):
        Arena.anonymous().rollback()
    with Arena.file(tmp_path / "a.offheap", durability="none") as arena:
        with pytest.raises(TransactionError):
            arena.rollback()


def test_readonly_arena_refuses_writes(tmp_path):
    path = tmp_path / "a.offheap"
    Arena.file(path).close()
    with Arena.file(path, readonly=True) as arena:
        for call in (lambda: arena.allocate(1), arena.commit, lambda: arena.set_root(b"x"),
                     lambda: arena.free(HEADER_BYTES)):
            with pytest.raises(ReadOnlyError, match="read-only"):
                call()
    with pytest.raises(FileNotFoundError, match="does not exist: a read-only open never creates"):
        Arena.file(tmp_path / "missing", readonly=True)
    with pytest.raises(ValueError, match="cannot replace .* read-only: pass replace=False"):
        Arena.file(path, readonly=True, replace=True)


def test_stats_of_a_file_arena(tmp_path):
    path = tmp_path / "a.offheap"
    with Arena.file(path) as arena:
        arena.allocate(PAGE_BYTES)
        arena.commit()
        stats = arena.stats()
        assert stats.file_bytes == os.path.getsize(path) == arena.reserved_bytes
        assert stats.live_bytes == 2 * PAGE_BYTES and stats.free_bytes == 0
        assert 0 < stats.disk_bytes


@pytest.mark.parametrize("damage", ["magic", "header_byte", "truncate", "tag", "page",
                                    "checksums", "empty_garbage"])
@pytest.mark.parametrize("durability", MODES)
def test_damaged_files_raise_corruption(tmp_path, damage, durability):
    path = tmp_path / "a.offheap"
    arena = Arena.file(path, durability=durability)
    offset = arena.allocate(10_000)
    arena.array(offset, np.uint8, 10_000)[:] = 5
    arena.set_root(b"hello")
    arena.commit()
    arena.close()
    data = bytearray(path.read_bytes())
    if damage == "magic":
        data[0:8] = b"NOTOURS!"
    elif damage == "header_byte":
        data[40] ^= 0xFF
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "tag":
        data[offset + 9] ^= 0x01
    elif damage == "page":
        data[offset + 2 * PAGE_BYTES + 17] ^= 0x01
    elif damage == "checksums":
        data[HEADER_BYTES + 64 + 4 * (offset // PAGE_BYTES)] ^= 0x01
    else:
        data = bytearray(os.urandom(HEADER_BYTES * 2))
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptionError):
        Arena.file(path)
    if damage == "page":
        with pytest.raises(CorruptionError, match=f"offset {offset + 2 * PAGE_BYTES}"):
            Arena.file(path, readonly=True)
        with Arena.file(path, readonly=True, verify=False) as arena:
            assert arena.root == b"hello"


@pytest.mark.parametrize("durability", MODES)
def test_recover_reports_the_pages_that_fail_their_checksums(tmp_path, durability):
    path = tmp_path / "a.offheap"
    with Arena.file(path, durability=durability) as arena:
        offset = arena.allocate(10 * PAGE_BYTES)
        arena.array(offset, np.uint8, 10 * PAGE_BYTES)[:] = 5
        arena.set_root(b"r" * 5000)
        arena.commit()
        root_offset = arena._backing.root_offset
    clean = path.read_bytes()
    with Arena.file(path, readonly=True, recover=True) as arena:
        assert arena.damage.clean and arena.damage.checked and not arena.damage.left_open
    data = bytearray(clean)
    for page in (2, 3, 7):
        data[offset + page * PAGE_BYTES + 100] ^= 0x10
    path.write_bytes(bytes(data))
    with Arena.file(path, readonly=True, recover=True) as arena:
        damage = arena.damage
        failed = [offset + page * PAGE_BYTES for page in (2, 3, 7)]
        assert damage.failed_pages == tuple(failed) and damage.table_intact
        assert damage.failed_ranges == ((failed[0], 2 * PAGE_BYTES), (failed[2], PAGE_BYTES))
        assert not damage.root_failed and arena.root == b"r" * 5000
        # u32 items of the payload: the first page holds 1008 of them after the tag
        items = arena.damaged_items(offset, 4, 10 * PAGE_BYTES // 4 - 16)
        expected = np.zeros(len(items), bool)
        for page in (2, 3, 7):
            expected[page * 1024 - 16: (page + 1) * 1024 - 16] = True
        assert (items == expected).all()
        assert not arena.damaged_items(root_offset, 1, 5000).any()
    with Arena.file(path, readonly=True, recover=True, verify=False) as arena:
        assert not arena.damage.checked and not arena.damage.failed_pages
    data = bytearray(clean)
    data[root_offset + PAGE_BYTES] ^= 1  # the second page of the root extent
    data[HEADER_BYTES + TAG_BYTES + 4 * (offset // PAGE_BYTES + 9)] ^= 1  # one checksum entry
    path.write_bytes(bytes(data))
    with Arena.file(path, readonly=True, recover=True) as arena:
        damage = arena.damage
        assert damage.root_failed and not damage.table_intact
        assert damage.failed_pages == (offset + 9 * PAGE_BYTES, root_offset + PAGE_BYTES)


def test_recover_does_not_check_a_file_left_open_without_transactions(tmp_path):
    path, image = tmp_path / "a.offheap", tmp_path / "image"
    with Arena.file(path, durability="none") as arena:
        offset = arena.allocate(PAGE_BYTES)
        arena.flush()
        arena.array(offset, np.uint8, 10)[:] = 1  # differs from the checksum of the last close
        shutil.copyfile(path, image)
    with Arena.file(image, readonly=True, recover=True) as arena:
        assert arena.damage.left_open and not arena.damage.checked
        assert arena.damage.failed_pages == () and not arena.damage.clean
        assert not arena.damaged_items(offset, 1, 10).any()
