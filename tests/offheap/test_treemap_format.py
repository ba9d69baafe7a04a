"""TreeMap tree format 3 (raw first keys of int64 key blocks), files of format 2 (inner nodes
with entry counts) and files of format 1.

The golden files are gzipped TreeMap files: ``treemap_v1.offheap.gz`` (a standalone map) and
``db_treemap_v1.offheap.gz`` (a DB with one tree) were written by the format 1 code, the
``_v2`` ones by the format 2 code, from the same entries (:func:`_standalone_entries`,
:func:`_db_entries`), and the ``_v3`` ones by this format: the DB from the same entries, the
standalone map with random keys of the whole int64 range too (:func:`_v3_entries`), whose leaves
store their first key as 8 bytes. A writer converts a format 1 file on open and relabels a
format 2 file; a reader reads a format 2 file as it is and refuses a format 1 file with a
message naming both formats.
"""

from __future__ import annotations

import gzip
import random
import shutil
from pathlib import Path

import pytest

from offheap.db.database import DB
from offheap.errors import ReadOnlyError
from offheap.store.records import RecordStore
from offheap.treemap.meta import FORMAT_VERSION, parse_meta, standalone_meta_recid
from offheap.treemap.treemap import TreeMap

GOLDEN = Path(__file__).parent / "golden"


def _standalone_entries() -> dict:
    return {k: (f"v{k}" if k % 2 else "") for k in range(0, 300, 3)}


def _db_entries() -> dict:
    return {f"k{k:03}": k for k in range(50)}


def _v3_entries() -> dict:
    rnd = random.Random(3)
    entries = _standalone_entries()
    entries.update({rnd.getrandbits(64) - 2**63: "r" for _ in range(200)})
    return entries


def _unpack(name: str, tmp_path) -> str:
    path = tmp_path / name.removesuffix(".gz")
    with gzip.open(GOLDEN / name) as packed, open(path, "wb") as out:
        shutil.copyfileobj(packed, out)
    return str(path)


def _meta_version(path: str) -> int:
    """The format of the standalone TreeMap file at ``path`` (read without opening the map)."""
    store = RecordStore.file(path, durability="commit")
    try:
        return parse_meta(store.get(standalone_meta_recid(store.root))).version
    finally:
        store.arena.close()


def test_format_1_file_is_converted_by_a_writer(tmp_path):
    path = _unpack("treemap_v1.offheap.gz", tmp_path)
    assert _meta_version(path) == 1
    with TreeMap(path=path, node_size=4) as tree:
        tree._check()  # counts of every inner node equal the entries under it
        assert dict(tree.items()) == _standalone_entries()
        assert tree._tree.shape.height > 2
        assert tree.index(297) == 99 and tree.peekitem(50) == (150, "")
    assert _meta_version(path) == FORMAT_VERSION
    with TreeMap.reader(path, node_size=4) as reader:
        assert dict(reader.items()) == _standalone_entries()


def test_format_1_file_is_refused_by_a_reader_naming_both_formats(tmp_path):
    path = _unpack("treemap_v1.offheap.gz", tmp_path)
    with pytest.raises(ReadOnlyError, match="format 1.*format 3"):
        TreeMap.reader(path, node_size=4)


def test_format_1_db_is_converted_by_a_writer(tmp_path):
    path = _unpack("db_treemap_v1.offheap.gz", tmp_path)
    with DB.file(path) as db:
        tree = db.tree_map("t")
        tree._check()
        assert dict(tree.items()) == _db_entries()
    with DB.file(path) as db:
        assert dict(db.tree_map("t").items()) == _db_entries()


def test_conversion_rolled_back_converts_again(tmp_path):
    path = _unpack("treemap_v1.offheap.gz", tmp_path)
    tree = TreeMap(path=path, node_size=4)
    tree[1] = "new"
    tree.rollback()  # back to the file as committed: format 1, converted again on reload
    tree._check()
    assert dict(tree.items()) == _standalone_entries()
    tree.close()


@pytest.mark.parametrize("name,entries,open_tree", [
    ("treemap_v2.offheap.gz", _standalone_entries,
     lambda path: TreeMap.reader(path, node_size=4)),
    ("db_treemap_v2.offheap.gz", _db_entries,
     lambda path: DB.file(path, readonly=True).tree_map("t")),
])
def test_format_2_golden_files_read_as_they_are(tmp_path, name, entries, open_tree):
    path = _unpack(name, tmp_path)
    tree = open_tree(path)
    assert dict(tree.items()) == entries()
    tree._check()


@pytest.mark.parametrize("name,entries,open_tree", [
    ("treemap_v3.offheap.gz", _v3_entries, lambda path: TreeMap.reader(path, node_size=4)),
    ("db_treemap_v3.offheap.gz", _db_entries,
     lambda path: DB.file(path, readonly=True).tree_map("t")),
])
def test_format_3_golden_files_read_as_they_are(tmp_path, name, entries, open_tree):
    path = _unpack(name, tmp_path)
    if name.startswith("treemap"):
        assert _meta_version(path) == 3
    tree = open_tree(path)
    assert dict(tree.items()) == entries()
    tree._check()


def test_format_2_file_is_relabelled_by_a_writer_and_takes_raw_first_keys(tmp_path):
    path = _unpack("treemap_v2.offheap.gz", tmp_path)
    assert _meta_version(path) == 2
    with TreeMap(path=path, node_size=4) as tree:
        tree.update({k: "r" for k in (-2**63 + 1, 2**63 - 5)})  # first keys of 10-byte varints
        tree._check()
    assert _meta_version(path) == FORMAT_VERSION == 3
    with TreeMap.reader(path, node_size=4) as reader:
        assert dict(reader.items()) == {**_standalone_entries(), -2**63 + 1: "r", 2**63 - 5: "r"}
