"""Arena: accounting, the hard limit, file persistence and damaged files."""

import os

import numpy as np
import pytest

from offheap.errors import CapacityError, ClosedError, CorruptionError
from offheap.memory import HEADER_BYTES, PAGE_BYTES, Arena


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


def test_file_arena_reopens_with_root_and_data(tmp_path):
    path = tmp_path / "a.offheap"
    arena = Arena.file(path)
    keep = arena.allocate(800)
    gone = arena.allocate(5000)
    arena.array(keep, np.int64, 100)[:] = np.arange(100)
    arena.set_root(b"r" * 10_000)  # larger than the header: kept in an extent
    arena.free(gone)
    arena.close()
    arena = Arena.file(path)
    assert arena.root == b"r" * 10_000
    assert list(arena.array(keep, np.int64, 100)) == list(range(100))
    reused = arena.allocate(4000)  # takes the freed range and reads as zeros
    assert not arena.array(reused, np.uint8, 4000).any()
    arena.close()


def test_free_extent_at_end_shrinks_the_file(tmp_path):
    path = tmp_path / "a.offheap"
    arena = Arena.file(path)
    arena.allocate(100)
    last = arena.allocate(1 << 20)
    big = os.path.getsize(path)
    arena.free(last)
    assert os.path.getsize(path) < big
    arena.close()


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


@pytest.mark.parametrize("damage", ["magic", "header_byte", "truncate", "tag", "empty_garbage"])
def test_damaged_files_raise_corruption(tmp_path, damage):
    path = tmp_path / "a.offheap"
    arena = Arena.file(path)
    arena.allocate(10_000)
    arena.set_root(b"hello")
    arena.close()
    data = bytearray(path.read_bytes())
    if damage == "magic":
        data[0:8] = b"NOTOURS!"
    elif damage == "header_byte":
        data[40] ^= 0xFF
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "tag":
        data[HEADER_BYTES + 9] ^= 0x01
    else:
        data = bytearray(os.urandom(HEADER_BYTES * 2))
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptionError):
        Arena.file(path)
