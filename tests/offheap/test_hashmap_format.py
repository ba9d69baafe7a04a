"""LongHashMap table format 2 against golden bytes, and files of format 1 from an older offheap.

``golden/longhashmap_v1.offheap`` (a standalone map) and ``golden/db_hashmap_v1.offheap`` (a DB
with an int64 map) were written in format 1; a writer converts them on open, a reader refuses
them with a message naming both formats. ``golden/hashmap_v2_table.bin`` pins the bytes a fixed
sequence of operations leaves in the metadata, the chunk list, the index and the chunks, built
by whichever core is active (the compiled and the pure-Python run produce the same file).
``golden/longhashmap_v2_small.offheap.gz`` is a small format-2 map written by the growth schedule
before today's (an index of 32 homes and a chunk 0 of 32 entries, each doubled when full): the
schedule is the writer's choice, so such a file reads the same and grows on by today's.
"""

import gzip
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from offheap import DB, LongHashMap
from offheap.errors import CorruptionError
from offheap.hashmap.layout import (
    CHUNK_ENTRIES,
    INITIAL_HOMES,
    SMALL_REGION_BYTES,
    chunk_bytes,
    initial_capacity,
    meta_version,
    parse_meta,
)
from offheap.hashmap.longhashmap import ReferenceLongHashMap

GOLDEN = Path(__file__).parent / "golden"
V1_CONTENT = {5: "v5", -3: "v-3", 2**40: f"v{2**40}", 0: "v0", 123456789: "v123456789",
              99: "a value long enough to live in its own record"}


def _copy(name: str, tmp_path) -> Path:
    path = tmp_path / name
    shutil.copyfile(GOLDEN / name, path)
    return path


def _stored_meta(m) -> bytes:
    return m._store.get(m.meta_recid)


def test_a_format_1_map_is_converted_by_its_first_writer(tmp_path):
    path = _copy("longhashmap_v1.offheap", tmp_path)
    with LongHashMap(path=path) as m:
        assert dict(m.items()) == V1_CONTENT
        assert meta_version(_stored_meta(m)) == 2
        m._check()
        m[7] = "back"
    with LongHashMap(path=path) as m:
        assert dict(m.items()) == {**V1_CONTENT, 7: "back"}
        assert list(m)[-1] == 7
        m._check()


def test_a_reader_of_a_format_1_map_says_how_to_convert_it(tmp_path):
    path = _copy("longhashmap_v1.offheap", tmp_path)
    with pytest.raises(CorruptionError, match="format 1.*format 2.*for writing"):
        LongHashMap.reader(path)


def test_a_format_1_map_in_a_db_is_converted(tmp_path):
    path = _copy("db_hashmap_v1.offheap", tmp_path)
    with DB.file(path) as db:
        counts = db.hash_map("counts", value="int64")
        assert len(counts) == 1000
        assert np.array_equal(counts.get_many(np.arange(1000) * 3), np.arange(1000))
        counts._check()
        db.commit()
    with DB.file(path, readonly=True) as db:
        assert db.hash_map("counts")[2997] == 999


OLD_SCHEDULE_CONTENT = {k * 1_000_003 - 7: k if k % 3 else f"value {k} long enough for a record"
                        for k in range(20)}


@pytest.mark.parametrize("cls", [LongHashMap, ReferenceLongHashMap], ids=["active", "reference"])
def test_a_table_of_the_old_growth_schedule_reads_the_same_and_grows(cls, tmp_path):
    path = tmp_path / "small.offheap"
    with gzip.open(GOLDEN / "longhashmap_v2_small.offheap.gz") as packed, open(path, "wb") as out:
        shutil.copyfileobj(packed, out)
    with LongHashMap.reader(path) as reader:
        assert dict(reader.items()) == OLD_SCHEDULE_CONTENT
    with cls(path=path) as m:
        assert (m._regions.homes, m._regions.first_capacity) == (32, 32)
        assert list(m.items()) == list(OLD_SCHEDULE_CONTENT.items())
        m._check()
        for k in range(70_000):  # chunk 0: 32, 128, ..., 32768, then 65536 (not 131072)
            m[k] = k
        m._check()
        assert m._regions.first_capacity == CHUNK_ENTRIES and len(m._regions.chunk_offsets) == 2
    with cls(path=path) as m:
        assert list(m)[:20] == list(OLD_SCHEDULE_CONTENT) and len(m) == 70_020
        assert m[69_999] == 69_999 and m[-7] == OLD_SCHEDULE_CONTENT[-7]
        m._check()


@pytest.mark.parametrize("value, capacity", [("object", 256), ("int64", 128), ("str", 256)])
def test_a_new_table_fills_one_page_for_its_index_and_one_for_its_entries(value, capacity):
    r = LongHashMap(value=value)._regions
    itemsize = r.value_dtype.itemsize
    assert (r.homes, r.first_capacity) == (INITIAL_HOMES, capacity) == (752, initial_capacity(itemsize))
    assert r.n_slots * 4 <= SMALL_REGION_BYTES < (r.n_slots + 1) * 4  # a 4 KiB page with its tag
    assert chunk_bytes(capacity, itemsize) <= SMALL_REGION_BYTES < chunk_bytes(2 * capacity, itemsize)


def _golden_sequence() -> LongHashMap:
    m = LongHashMap(value="object")
    for k in range(-50, 150):
        m[k * 1_000_003] = k % 7 if k % 3 else ""
    for k in range(-50, 150, 4):
        del m[k * 1_000_003]
    m[77] = "a value long enough to live in its own record"
    m.put_many(np.arange(10**6, 10**6 + 300), ["x"] * 300)
    m.popitem()
    m[1] = None
    return m


def _table_bytes(m) -> bytes:
    r = m._regions
    parts = [_stored_meta(m), m._store.get(parse_meta(_stored_meta(m)).chunk_list_recid),
             r.index.tobytes()]
    parts += [m._store.arena.view(offset).tobytes() for offset in r.chunk_offsets]
    return b"".join(struct.pack("<Q", len(part)) + part for part in parts)


def test_table_bytes_match_the_golden_file():
    m = _golden_sequence()
    m.flush()
    assert _table_bytes(m) == (GOLDEN / "hashmap_v2_table.bin").read_bytes()
