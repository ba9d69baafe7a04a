"""DB: named collections in one store, the catalog, reopening with the same options."""

from __future__ import annotations

import pytest

from offheap.db.database import DB
from offheap.errors import CapacityError, ClosedError, CorruptionError
from offheap.hashmap.longhashmap import LongHashMap
from offheap.treemap.treemap import TreeMap


def test_memory_db_holds_several_collections():
    with DB.memory() as db:
        prices = db.tree_map("prices", value="float64", node_size=8)
        names = db.tree_map("names", key="str")
        seen = db.hash_map("seen")
        for i in range(300):
            prices[i] = i / 4
            names[f"n{i}"] = i
            seen[i * 7] = True
        assert db.tree_map("prices") is prices
        assert db.names() == ["names", "prices", "seen"] and "seen" in db
        assert prices[10] == 2.5 and names["n3"] == 3 and seen[21] is True
        prices._check()
        assert "prices (tree_map)" in repr(db)
    assert db.closed and prices.closed and seen.closed
    with pytest.raises(ClosedError):
        db.tree_map("prices")


def test_file_db_reopens_collections_with_their_options(tmp_path):
    path = tmp_path / "db.offheap"
    with DB.file(path) as db:
        tree = db.tree_map("t", key="bytes", value="str", node_size=6, compression="zstd")
        hashed = db.hash_map("h", value="int64")
        for i in range(1000):
            tree[b"k%05d" % i] = "v" * (i % 7)
            hashed[i] = i * i
    with DB.file(path) as db:
        tree = db.tree_map("t")
        hashed = db.hash_map("h")
        assert isinstance(tree, TreeMap) and isinstance(hashed, LongHashMap)
        assert tree.options["node_size"] == 6 and tree.options["compression"] == "zstd"
        assert tree.options["key"] == "bytes" and tree.options["value"] == "str"
        assert len(tree) == 1000 and tree[b"k00013"] == "v" * 6
        assert len(hashed) == 1000 and hashed[31] == 961
        tree._check()
        del tree[b"k00000"]
        tree.delete_range(b"k00100", b"k00199")
    with DB.file(path) as db:
        tree = db.tree_map("t", write_cache=False)  # runtime options may change on reopen
        assert len(tree) == 899 and tree.first_key() == b"k00001"
        assert tree.options["write_cache"] is False
        tree._check()


def test_db_rejects_conflicting_options_and_kinds(tmp_path):
    with DB.file(tmp_path / "db.offheap") as db:
        db.tree_map("t", node_size=8)
        with pytest.raises(ValueError, match="node_size"):
            db.tree_map("t", node_size=16)
        with pytest.raises(ValueError, match="tree_map"):
            db.hash_map("t")
        with pytest.raises(TypeError, match="unknown"):
            db.tree_map("u", nodesize=8)
        with pytest.raises(TypeError):
            db.tree_map("")
    with DB.file(tmp_path / "db.offheap") as db:
        with pytest.raises(ValueError, match="key"):
            db.tree_map("t", key="str")


def test_db_commit_persists_without_close_and_flush_does_not(tmp_path):
    path = tmp_path / "db.offheap"
    db = DB.file(path)
    tree = db.tree_map("t")
    tree.update({i: str(i) for i in range(100)})
    db.commit()
    tree.update({i: "flushed only" for i in range(100, 200)})
    db.flush()
    db._store.arena.close()  # as if the process died after flush()
    with DB.file(path) as again:
        assert dict(again.tree_map("t").items()) == {i: str(i) for i in range(100)}


def test_closed_collection_is_reopened_on_request():
    with DB.memory() as db:
        tree = db.tree_map("t")
        tree[1] = "one"
        tree.close()
        again = db.tree_map("t")
        assert again is not tree and again[1] == "one"


def test_db_limit_raises_capacity_error():
    with DB.memory(limit=300_000) as db:
        tree = db.tree_map("t", value="bytes", write_cache=False)
        with pytest.raises(CapacityError):
            for i in range(100_000):
                tree[i] = bytes(64)
        tree._check()


def test_standalone_tree_file_is_not_a_db(tmp_path):
    path = tmp_path / "tree.offheap"
    TreeMap(path=path).close()
    with pytest.raises(CorruptionError):
        DB.file(path)


def test_trees_of_one_db_share_its_lock():
    with DB.memory() as db:
        a = db.tree_map("a", flush_delay=1)
        b = db.tree_map("b")
        assert a._lock is b._lock is db.lock
        for i in range(2000):
            a[i] = b[-i] = i
        db.flush()
        a._check()
        b._check()
