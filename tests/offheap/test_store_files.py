"""Record stores in files without transactions: what a crash image holds, and what a close that
could not save leaves behind; where a record lies (what salvage checks against failed pages).

A crash image is taken by copying the file while its writer has it open: the extents are mapped
``MAP_SHARED``, so the copy holds what a SIGKILL at that moment would leave on disk.
"""

import shutil

import numpy as np

import pytest

from offheap import DB
from offheap.errors import CorruptionError
from offheap.arena.arena import Arena
from offheap.store.records import LARGE_RECORD_BYTES, RecordStore
from offheap.treemap.treemap import TreeMap


def record(i: int) -> bytes:
    return bytes([i % 251]) * (3000 + i)


def test_a_crash_image_names_only_live_extents(tmp_path):
    """The index grows (its old extent freed) and segments come and go after the last flush;
    the metadata in the file follows every such change before the old extent is freed."""
    path, image = tmp_path / "store", tmp_path / "image"
    store = RecordStore.file(path, durability="none", index_capacity=4)
    store.root = b"owner"
    store.flush()
    recids = [store.put(record(i)) for i in range(200)]  # index 4 -> 256, a dozen segments
    large = store.put(b"L" * (LARGE_RECORD_BYTES + 1))  # a segment of its own ...
    store.update(recids[0], b"moved to a large segment" * 20_000)  # ... another ...
    store.delete(large)  # ... freed
    shutil.copyfile(path, image)
    with Arena.file(image, readonly=True, recover=True) as arena:
        crashed = RecordStore.open_damaged(arena)
        assert crashed.root == b"owner"
        assert crashed.get_checked(recids[0]) == b"moved to a large segment" * 20_000
        assert [crashed.get_checked(r) for r in recids[1:]] == [record(i) for i in range(1, 200)]
        with pytest.raises(KeyError):
            crashed.get_checked(large)
    store.close()
    reopened = RecordStore.file(path, durability="none")
    assert reopened.get(recids[-1]) == record(199)
    reopened._check()
    reopened.close()


def test_close_without_saving_leaves_the_file_marked_open(tmp_path):
    path = tmp_path / "store"
    store = RecordStore.file(path, durability="none")
    store.root = b"owner"
    store.put(b"kept")
    store.close(save=False)
    with pytest.raises(CorruptionError, match="not closed cleanly.*salvage"):
        RecordStore.file(path, durability="none")


def test_a_collection_failing_to_encode_at_close_leaves_the_file_marked_open(tmp_path,
                                                                            monkeypatch):
    """The failure happens in the tree's own code, never in the arena: the store must still
    tell the arena that the close is not clean."""
    path = tmp_path / "db"
    db = DB.file(path, durability="none")
    db.tree_map("t").update({i: str(i) for i in range(100)})

    def encoding_fails(self):
        raise ValueError("injected: a node cannot be encoded")

    monkeypatch.setattr(TreeMap, "_flush_nodes", encoding_fails)
    with pytest.raises(ValueError, match="injected"):
        db.close()
    monkeypatch.undo()
    with pytest.raises(CorruptionError, match="not closed cleanly.*salvage"):
        DB.file(path, durability="none")


def test_record_location_names_the_bytes_of_the_record_and_of_its_index_entry():
    store = RecordStore(Arena.anonymous())
    small, large = store.put(b"small record"), store.put(b"L" * (LARGE_RECORD_BYTES + 1))
    empty = store.put(b"")
    for recid, data in ((small, b"small record"), (large, b"L" * (LARGE_RECORD_BYTES + 1))):
        span = store.record_location(recid)
        assert bytes(store.arena.view(span.extent)[span.start: span.start + span.nbytes]) == data
        address, size = store.index_entry_location(recid)
        assert store.arena.array(size.extent, np.uint32, 1, size.start)[0] == len(data)
        assert store.arena.array(address.extent, np.uint64, 1, address.start)[0] == (
            span.start | store._segments.index(span.extent) << 32)
    assert store.record_location(empty) is None
    store.delete(small)
    with pytest.raises(KeyError):
        store.record_location(small)
    with pytest.raises(KeyError):
        store.index_entry_location(10**9)
