"""A commit never publishes a state that would not reopen.

The in-memory state is made inconsistent on purpose, the way a race between threads could
leave it: the entry count disagrees with the live bits, a live bit is cleared in the mapped
table, a TreeMap's metadata names a root node that does not exist. ``commit()`` and
``close()`` then raise CorruptionError instead of writing the state, and the file reopens at
its last commit.
"""

from __future__ import annotations

import pytest

from offheap import DB, LongHashMap, TreeMap
from offheap.errors import CorruptionError
from offheap.treemap.meta import TreeShape

REFUSED = "would not reopen: nothing was committed"


def _miscount(hash_map) -> None:
    hash_map._n += 1


def _clear_live_bits(hash_map) -> None:
    hash_map._table().live_chunks[0][0] = 0  # entries 0..7 no longer live; the count says so


def _lose_root(tree) -> None:
    shape = tree._tree.shape
    tree._tree.shape = TreeShape(10**9, shape.height, shape.n_leaves, shape.n_inner)


@pytest.mark.parametrize("corrupt", [_miscount, _clear_live_bits])
def test_a_long_hash_map_refuses_to_commit_a_table_that_would_not_reopen(tmp_path, corrupt):
    path = tmp_path / "map"
    with LongHashMap(path=path, value="int64") as hash_map:
        hash_map.update({i: i * 10 for i in range(100)})
        hash_map.commit()
        hash_map[1000] = 1
        corrupt(hash_map)
        with pytest.raises(CorruptionError, match=REFUSED):
            hash_map.commit()
        with pytest.raises(CorruptionError, match=REFUSED):
            hash_map.close()
    with LongHashMap(path=path) as reopened:
        assert dict(reopened) == {i: i * 10 for i in range(100)}
        reopened._check()


def test_a_tree_map_refuses_to_commit_metadata_naming_a_missing_root(tmp_path):
    path = tmp_path / "tree"
    with TreeMap(path=path, key="int64", value="int64") as tree:
        tree.update({i: -i for i in range(50)})
        tree.commit()
        tree[1000] = 1
        _lose_root(tree)
        with pytest.raises(CorruptionError, match=REFUSED):
            tree.commit()
        with pytest.raises(CorruptionError, match=REFUSED):
            tree.close()
    with TreeMap(path=path) as reopened:
        assert dict(reopened) == {i: -i for i in range(50)}


def test_a_db_refuses_to_commit_when_one_collection_would_not_reopen(tmp_path):
    path = tmp_path / "db"
    with DB.file(path) as db:
        db.tree_map("tree", key="int64", value="int64").update({1: 1, 2: 2})
        db.hash_map("hash", value="int64").update({3: 3})
        db.commit()
        db.tree_map("tree")[5] = 5
        hash_map = db.hash_map("hash")
        hash_map[4] = 4
        _miscount(hash_map)
        with pytest.raises(CorruptionError, match=REFUSED):
            db.commit()
        with pytest.raises(CorruptionError, match=REFUSED):
            db.close()
    with DB.file(path) as db:
        assert dict(db.tree_map("tree")) == {1: 1, 2: 2}
        assert dict(db.hash_map("hash")) == {3: 3}


def test_a_consistent_map_commits_and_closes_as_before(tmp_path):
    path = tmp_path / "map"
    with LongHashMap(path=path, value="int64") as hash_map:
        hash_map.update({i: i for i in range(70_000)})  # more than one chunk
        del hash_map[5]
        hash_map.commit()
        hash_map._check_stored()
    with LongHashMap(path=path) as reopened:
        assert len(reopened) == 69_999 and 5 not in reopened
