"""LongHashMap table format 2 against golden bytes, and files of format 1 from an older offheap.

``golden/longhashmap_v1.offheap`` (a standalone map) and ``golden/db_hashmap_v1.offheap`` (a DB
with an int64 map) were written in format 1; a writer converts them on open, a reader refuses
them with a message naming both formats. ``golden/hashmap_v2_table.bin`` pins the bytes a fixed
sequence of operations leaves in the metadata, the chunk list, the index and the chunks, built
by whichever core is active (the compiled and the pure-Python run produce the same file).
"""

import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from offheap import DB, LongHashMap
from offheap.errors import CorruptionError
from offheap.hashmap.layout import meta_version, parse_meta

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
