"""A commit never publishes a state that would not reopen.

The in-memory state is made inconsistent on purpose, the way a race between threads could
leave it: the entry count disagrees with the live bits, a live bit is cleared in the mapped
table, a TreeMap's metadata names a root node that does not exist, a collection closed before
the commit has its records damaged, the arena's header encoder writes a page that does not
parse back. ``commit()`` and ``close()`` then raise CorruptionError instead of writing the
state, and the file reopens at its last commit.
"""

from __future__ import annotations

import dataclasses

import pytest

from offheap import DB, LongHashMap, TreeMap
from offheap.arena import filewriter
from offheap.arena.arena import Arena
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


def _commit_and_close_are_refused(owner) -> None:
    for call in (owner.commit, owner.close):
        with pytest.raises(CorruptionError, match=REFUSED):
            call()


_STANDALONE = {
    "LongHashMap-miscount": (lambda path: LongHashMap(path=path, value="int64"), _miscount,
                             lambda path: LongHashMap(path=path)),
    "LongHashMap-live-bits": (lambda path: LongHashMap(path=path, value="int64"),
                              _clear_live_bits, lambda path: LongHashMap(path=path)),
    "TreeMap-missing-root": (lambda path: TreeMap(path=path, key="int64", value="int64"),
                             _lose_root, lambda path: TreeMap(path=path)),
}


@pytest.mark.parametrize("case", sorted(_STANDALONE))
def test_a_file_map_refuses_to_commit_a_state_that_would_not_reopen(tmp_path, case):
    make, corrupt, reopen = _STANDALONE[case]
    path = tmp_path / "map"
    committed = {i: i * 10 for i in range(100)}
    with make(path) as mapping:
        mapping.update(committed)
        mapping.commit()
        mapping[1000] = 1
        corrupt(mapping)
        _commit_and_close_are_refused(mapping)
    with reopen(path) as reopened:
        assert dict(reopened) == committed
        reopened._check()


def _a_db_refuses_to_commit(path, spoil) -> None:
    """Commit a tree and a hash map, ``spoil(db)`` them, check that the DB refuses to commit
    and close, and that the file reopens at the commit."""
    with DB.file(path) as db:
        db.tree_map("tree", key="int64", value="int64").update({1: 1, 2: 2})
        db.hash_map("hash", value="int64").update({3: 3})
        db.commit()
        spoil(db)
        _commit_and_close_are_refused(db)
    with DB.file(path) as db:
        assert dict(db.tree_map("tree")) == {1: 1, 2: 2}
        assert dict(db.hash_map("hash")) == {3: 3}


def test_a_db_refuses_to_commit_when_one_collection_would_not_reopen(tmp_path):
    def miscount_one(db) -> None:
        db.tree_map("tree")[5] = 5
        hash_map = db.hash_map("hash")
        hash_map[4] = 4
        _miscount(hash_map)

    _a_db_refuses_to_commit(tmp_path / "db", miscount_one)


def test_a_consistent_map_commits_and_closes_as_before(tmp_path):
    path = tmp_path / "map"
    with LongHashMap(path=path, value="int64") as hash_map:
        hash_map.update({i: i for i in range(70_000)})  # more than one chunk
        del hash_map[5]
        hash_map.commit()
        hash_map._check_stored()
    with LongHashMap(path=path) as reopened:
        assert len(reopened) == 69_999 and 5 not in reopened


_DAMAGE_CLOSED = {
    "TreeMap-meta-gone": ("tree", lambda store, recid: store.delete(recid)),
    "LongHashMap-meta-gone": ("hash", lambda store, recid: store.delete(recid)),
    "LongHashMap-meta-garbage": ("hash", lambda store, recid: store.update(recid, b"x" * 40)),
}


@pytest.mark.parametrize("case", sorted(_DAMAGE_CLOSED))
def test_a_db_refuses_to_commit_a_collection_closed_before_it_that_would_not_reopen(tmp_path,
                                                                                   case):
    name, damage = _DAMAGE_CLOSED[case]

    def close_and_damage(db) -> None:
        closed = db.tree_map("tree") if name == "tree" else db.hash_map("hash")
        closed[5] = 5
        closed.close()
        damage(db._store, closed.meta_recid)

    _a_db_refuses_to_commit(tmp_path / "db", close_and_damage)


def test_a_collection_closed_before_a_commit_is_published_and_checked_once(tmp_path):
    path = tmp_path / "db"
    with DB.file(path) as db:
        tree = db.tree_map("tree", key="int64", value="int64")
        tree.update({1: 1})
        tree.close()
        db.commit()
        db._store.delete(tree.meta_recid)  # after its commit: no longer this DB's to check
        db.rollback()
        assert dict(db.tree_map("tree")) == {1: 1}
    with DB.file(path) as db:
        assert dict(db.tree_map("tree")) == {1: 1}


def _misaligned_end(header):
    return dataclasses.replace(header, end=header.end + 1)  # refused by the header parser


def _stale_generation(header):
    return dataclasses.replace(header, generation=header.generation - 1)  # parses, but wrong


@pytest.mark.parametrize("miswrite", [_misaligned_end, _stale_generation])
def test_a_commit_refuses_a_header_that_does_not_parse_back(tmp_path, monkeypatch, miswrite):
    path = tmp_path / "arena"
    with Arena.file(path) as arena:
        arena.set_root(b"committed")
        arena.commit()
        arena.set_root(b"changed")
        encode = filewriter.encode_header
        monkeypatch.setattr(filewriter, "encode_header", lambda header: encode(miswrite(header)))
        with pytest.raises(CorruptionError, match="would not reopen .*it was not written"):
            arena.commit()
        with Arena.file(path, readonly=True) as reader:
            assert reader.root == b"committed"
        monkeypatch.undo()
        arena.commit()  # the changes stayed, to commit once the header is right
    with Arena.file(path) as arena:
        assert arena.root == b"changed"
