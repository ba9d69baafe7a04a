"""The arena's binary formats against golden bytes and files (header, tag, checksum extent,
write-ahead log record), and the small modules beside the arena: free space, page checksums,
file locks, holes."""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from offheap.arena import filewriter, holes, locks, wal
from offheap.arena.format import (
    CHECKSUMS,
    FREE,
    HEADER_BYTES,
    LIVE,
    PAGE_BYTES,
    TAG_BYTES,
    Header,
    encode_header,
    encode_tag,
    parse_header,
    parse_tag,
    peek_generation_and_flags,
)
from offheap.errors import CorruptionError
from offheap.arena.damage import FileDamage
from offheap.arena.freespace import FreeSpace, cut_tail, merged
from offheap.arena.arena import Arena
from offheap.arena.checksums import ChecksumTable, page_crcs
from tests.offheap.arena_fuzz import arena_content

GOLDEN = Path(__file__).parent / "golden"
pytestmark = pytest.mark.skipif(PAGE_BYTES != 4096, reason="golden files use 4 KiB pages")


GOLDEN_FILE_ID = 0x0123456789ABCDEF


def build_golden_arena(path, monkeypatch) -> None:
    """The operations that made ``golden/arena_v3.offheap``; its file id is fixed."""
    monkeypatch.setattr(filewriter, "_new_file_id", lambda: GOLDEN_FILE_ID)
    with Arena.file(path, replace=True) as arena:
        first = arena.allocate(100)
        arena.array(first, np.uint8, 100)[:] = np.arange(100, dtype=np.uint8)
        second = arena.allocate(2 * PAGE_BYTES)
        arena.array(second, np.uint8, 2 * PAGE_BYTES)[:] = 0xAB
        third = arena.allocate(10)
        arena.set_root(b"golden root " * 400)  # 4800 bytes: a root extent
        arena.commit()
        arena.free(second)
        arena.array(third, np.uint8, 10)[:] = 7
        arena.set_root(b"inline root")
        arena.commit()


def test_golden_arena_file_is_reproduced_byte_for_byte(tmp_path, monkeypatch):
    build_golden_arena(tmp_path / "a", monkeypatch)
    assert (tmp_path / "a").read_bytes() == (GOLDEN / "arena_v3.offheap").read_bytes()


def test_golden_arena_file_opens_with_its_content(tmp_path):
    shutil.copy(GOLDEN / "arena_v3.offheap", tmp_path / "a")
    with Arena.file(tmp_path / "a", readonly=True) as arena:
        root, payloads = arena_content(arena)
        assert root == b"inline root" and arena.generation == 2
        assert sorted(payloads) == [8192, 24576]
        assert payloads[8192][:100] == bytes(range(100))
        assert payloads[24576][:11] == bytes([7] * 10 + [0])
        assert arena.stats().free_bytes == 3 * PAGE_BYTES


def test_golden_header_fields_sit_where_the_spec_says():
    data = (GOLDEN / "arena_v3.offheap").read_bytes()
    assert data[:8] == b"OFFHEAP\x01"
    version, crc, generation, end, checksum_at, checksum_crc, page_bytes = struct.unpack_from(
        "<IIQQQII", data, 8)
    assert (version, generation, end, checksum_at, page_bytes) == (3, 2, 28672, 4096, 4096)
    assert crc == zlib.crc32(data[16:HEADER_BYTES])
    assert checksum_crc == zlib.crc32(data[4096:8192])
    durability, flags, zero, root_length, root_offset, file_id = struct.unpack_from(
        "<BBHIQQ", data, 48)
    assert (durability, flags, zero, root_length, root_offset) == (1, 0, 0, 11, 0)
    assert file_id == GOLDEN_FILE_ID
    assert data[72:83] == b"inline root" and not any(data[83:HEADER_BYTES])
    magic, size, payload, state, tag_crc = struct.unpack_from("<8sQQII", data, 8192)
    assert (magic, size, payload, state) == (b"OHEXTENT", 4096, 100, LIVE)
    assert tag_crc == zlib.crc32(data[8192:8220])
    assert struct.unpack_from("<8sQQI", data, 12288) == (b"OHEXTENT", 3 * 4096, 0, FREE)
    assert struct.unpack_from("<8sQQI", data, 4096) == (b"OHEXTENT", 4096, 0, CHECKSUMS)
    assert struct.unpack_from("<I", data, 4096 + 64 + 4 * 2)[0] == zlib.crc32(data[8192:12288])


def test_header_and_tag_encode_to_golden_bytes():
    header = encode_header(Header(generation=5, end=3 * 4096, checksum_offset=4096,
                                  checksum_crc=0x01020304, durability="none",
                                  open_for_writing=True, root_offset=0, root_length=2,
                                  inline_root=b"hi", file_id=0x1122334455667788, replaced=True))
    assert header[:74].hex() == (
        "4f46464845415001" "03000000" + header[12:16].hex() + "0500000000000000"
        "0030000000000000" "0010000000000000" "04030201" "00100000" "00" "03" "0000"
        "02000000" "0000000000000000" "8877665544332211" "6869")
    assert header[12:16] == struct.pack("<I", zlib.crc32(header[16:]))
    assert parse_header(header, "x") == Header(5, 12288, 4096, 0x01020304, "none", True, 0, 2,
                                               b"hi", 0x1122334455667788, True)
    assert peek_generation_and_flags(header) == (5, 0b011)
    applying = encode_header(Header(9, 8192, 4096, 0, "commit", False, 0, 0, b"", 1,
                                    applying=True))
    assert applying[49] == 0b100 and parse_header(applying, "x").applying
    assert peek_generation_and_flags(memoryview(applying)) == (9, 0b100)
    assert encode_tag(8192, 100, LIVE).hex() == (
        "4f48455854454e54" "0020000000000000" "6400000000000000" "01000000" "8025d2f5"
        + "00" * 32)
    assert parse_tag(encode_tag(8192, 100, LIVE), 4096, 16384, "x").size == 8192


@pytest.mark.parametrize("field, value", [("page_bytes", 8192), ("end", 4097), ("durability", 9),
                                          ("checksum", 1 << 40), ("root", 8192 + 5),
                                          ("flags", 8), ("file_id", 0)])
def test_header_with_impossible_fields_is_corrupt(field, value):
    page = bytearray(encode_header(Header(1, 8192, 4096, 0, "commit", False, 0, 0, b"", 7)))
    position, fmt = {"page_bytes": (44, "<I"), "end": (24, "<Q"), "durability": (48, "<B"),
                     "checksum": (32, "<Q"), "root": (56, "<Q"), "flags": (49, "<B"),
                     "file_id": (64, "<Q")}[field]
    struct.pack_into(fmt, page, position, value)
    struct.pack_into("<I", page, 12, zlib.crc32(page[16:]))
    with pytest.raises(CorruptionError, match="bad header"):
        parse_header(bytes(page), "x")


def test_wal_record_encodes_to_the_golden_file_and_parses(tmp_path):
    fd = os.open(tmp_path / "log", os.O_RDWR | os.O_CREAT)
    try:
        wal.write_record(fd, file_id=0xF11E, base_generation=3, new_generation=4, end=5 * 4096,
                         zero_ranges=[(8192, 4096)],
                         writes=[(4096, b"page bytes"), (0, memoryview(b"head"))])
        data = os.pread(fd, 1 << 16, 0)
        assert data == (GOLDEN / "wal_record.bin").read_bytes()
        record = wal.read_record(fd)
    finally:
        os.close(fd)
    assert data[:8] == b"OFFHWAL1" and data[-4:] == b"OHWE"
    assert struct.unpack_from("<IIQQQQQ", data, 8) == (2, 3, 0xF11E, 3, 4, 5 * 4096,
                                                       len(data) - 64)
    assert (record.file_id, record.base_generation, record.new_generation, record.end) == (
        0xF11E, 3, 4, 5 * 4096)
    assert [(e.offset, e.length, e.kind) for e in record.entries] == [
        (8192, 4096, wal.ZEROS), (4096, 10, wal.BYTES), (0, 4, wal.BYTES)]
    assert data[record.entries[1].position: record.entries[1].position + 10] == b"page bytes"


@pytest.mark.parametrize("cut", [0, 7, 56, 68, -9, -1])
def test_wal_record_cut_short_reads_as_none(tmp_path, cut):
    data = (GOLDEN / "wal_record.bin").read_bytes()
    (tmp_path / "log").write_bytes(data[:cut])
    fd = os.open(tmp_path / "log", os.O_RDONLY)
    try:
        assert wal.read_record(fd) is None
    finally:
        os.close(fd)


def test_wal_record_applies_to_a_file(tmp_path):
    shutil.copy(GOLDEN / "wal_record.bin", tmp_path / "log")
    (tmp_path / "file").write_bytes(b"\xff" * 4 * 4096)
    log_fd, file_fd = os.open(tmp_path / "log", os.O_RDONLY), os.open(tmp_path / "file", os.O_RDWR)
    try:
        wal.apply_record(log_fd, file_fd, wal.read_record(log_fd))
    finally:
        os.close(log_fd)
        os.close(file_fd)
    data = (tmp_path / "file").read_bytes()
    assert data[:4] == b"head" and data[4096:4106] == b"page bytes"
    assert data[8192:12288] == bytes(4096) and data[12288:] == b"\xff" * 4096


# -- free space ---------------------------------------------------------------------------------

def test_free_space_merges_takes_first_fit_and_defers():
    assert merged({0: 10, 10: 5, 20: 5, 25: 1}) == {0: 15, 20: 6}
    space = FreeSpace({100: 50, 10: 20})
    assert space.first_fit(30) == 100 and space.first_fit(20) == 10 and space.first_fit(60) is None
    assert space.take(100, 30) == (130, 20)
    assert space.take(10, 20) is None
    assert space.release(150, 10) == (130, 30)
    space.defer(160, 40)
    assert space.first_fit(40) is None  # pending space is not reusable before the commit
    assert space.settled() == {130: 70} and space.total_bytes == 70
    free = {0: 10, 40: 60}
    assert cut_tail(free, 100) == 40 and free == {0: 10}
    assert cut_tail(free, 100) == 100


# -- page checksums -----------------------------------------------------------------------------

def test_page_crcs_and_the_checksum_table():
    data = bytes(range(256)) * 48  # three pages
    assert page_crcs(data).tolist() == [zlib.crc32(data[i: i + 4096]) for i in (0, 4096, 8192)]
    table = ChecksumTable.empty(2 * PAGE_BYTES)
    assert table.capacity == (2 * PAGE_BYTES - TAG_BYTES) // 4
    assert table.take_changed_pages() == [0, 1]
    table.set(np.array([5, 6]), np.array([1, 2], np.uint32))
    table.set(np.array([5, 6]), np.array([1, 2], np.uint32))
    assert table.take_changed_pages() == [0] and table.take_changed_pages() == []
    table.set(np.array([1007, 1008]), np.array([3, 4], np.uint32))  # two table pages
    assert table.take_changed_pages() == [0, 1]
    grown = table.grown(3 * PAGE_BYTES)
    assert grown.entries[5] == 1 and grown.entries[1008] == 4
    assert grown.image[:TAG_BYTES] == encode_tag(3 * PAGE_BYTES, 0, CHECKSUMS)
    assert grown.mismatches(np.array([5, 6]), np.array([1, 9], np.uint32)).tolist() == [6]
    assert grown.crc() == zlib.crc32(bytes(grown.image))


def test_file_damage_names_the_items_on_failed_pages():
    damage = FileDamage(checked=True, failed_pages=(3 * 4096, 4 * 4096, 9 * 4096))
    assert damage.failed_ranges == ((3 * 4096, 2 * 4096), (9 * 4096, 4096))
    assert not damage.clean and FileDamage(checked=True).clean and not FileDamage().clean
    # u64 items from offset 12288 - 16: items 0 and 1 lie before page 3, 2 .. 1025 on 3 and 4
    touched = damage.items_touching(3 * 4096 - 16, 8, 4000)
    assert np.flatnonzero(touched).tolist() == list(range(2, 1026)) + list(range(3074, 3586))
    # an item straddling a page edge touches both pages; a 3-byte item at 4095 touches page 0
    assert FileDamage(failed_pages=(4096,)).items_touching(4090, 10, 1).tolist() == [True]
    assert FileDamage(failed_pages=(4096,)).items_touching(4093, 3, 1).tolist() == [False]
    assert FileDamage(failed_pages=(4096,)).items_touching(4094, 3, 2).tolist() == [True, True]
    assert damage.items_touching(0, 0, 3).tolist() == [False] * 3
    assert FileDamage(lost_ranges=((8192, 4096), (20480, 8192))).lost_bytes == 12288


# -- locks and holes ----------------------------------------------------------------------------

def test_file_locks_exclude_other_open_files(tmp_path):
    (tmp_path / "f").write_bytes(b"x")
    first, second = os.open(tmp_path / "f", os.O_RDWR), os.open(tmp_path / "f", os.O_RDWR)
    try:
        assert locks.try_lock(first, locks.READERS, exclusive=False)
        assert locks.try_lock(second, locks.READERS, exclusive=False)
        assert locks.is_held(first, locks.READERS, exclusive=True)
        assert not locks.is_held(first, locks.READERS, exclusive=False)
        assert locks.try_lock(first, locks.WRITER, exclusive=True)
        assert not locks.try_lock(second, locks.WRITER, exclusive=False)
        assert locks.is_held(second, locks.WRITER, exclusive=False)
        locks.unlock(first, locks.WRITER)
        assert locks.try_lock(second, locks.WRITER, exclusive=True)
    finally:
        os.close(first)
        os.close(second)


def test_process_wide_locks_stand_in_where_open_file_locks_are_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(locks, "OPEN_FILE_LOCKS", False)
    (tmp_path / "f").write_bytes(b"x")
    fd = os.open(tmp_path / "f", os.O_RDWR)
    ready_read, ready_write = os.pipe()
    done_read, done_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        ok = locks.try_lock(fd, locks.WRITER, exclusive=True)
        os.write(ready_write, b"1" if ok else b"0")
        os.read(done_read, 1)
        os._exit(0)
    try:
        assert os.read(ready_read, 1) == b"1"
        assert not locks.try_lock(fd, locks.WRITER, exclusive=False)
        assert locks.is_held(fd, locks.WRITER, exclusive=False)
        assert not locks.is_held(fd, locks.READERS, exclusive=True)
    finally:
        os.write(done_write, b"x")
        os.waitpid(pid, 0)
    assert locks.try_lock(fd, locks.WRITER, exclusive=True)
    for end in (fd, ready_read, ready_write, done_read, done_write):
        os.close(end)


def test_holes_read_as_zeros_with_or_without_punching(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_bytes(b"\x01" * 16 * 4096)
    fd = os.open(path, os.O_RDWR)
    try:
        holes.zero_range(fd, 4096, 8192)
        monkeypatch.setattr(holes, "_fallocate", None)
        assert not holes.punch_hole(fd, 0, 4096)
        holes.zero_range(fd, 5 * 4096, 4096 + 10)
    finally:
        os.close(fd)
    data = path.read_bytes()
    assert len(data) == 16 * 4096
    assert data[4096: 3 * 4096] == bytes(8192) and data[5 * 4096: 6 * 4096 + 10] == bytes(4106)
    assert data[:4096] == b"\x01" * 4096 and data[6 * 4096 + 10:] == b"\x01" * (10 * 4096 - 10)
