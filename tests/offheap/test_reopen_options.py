"""A map file remembers what it was made with: ``TreeMap(path=...)`` and ``LongHashMap(path=...)``
alone reopen it (and so do their readers), an option given otherwise than the file's is refused
with the value to use, and a new map still gets the defaults."""

from __future__ import annotations

import pytest

from offheap import DB, LongHashMap, TreeMap, TreeSet


def test_a_tree_file_reopens_with_its_path_alone(tmp_path):
    path = tmp_path / "tree.offheap"
    with TreeMap(key="str", value="int64", node_size=16, path=path) as tree:
        tree.update({"a": 1, "b": 2})
    with TreeMap(path=path) as tree:
        assert dict(tree.items()) == {"a": 1, "b": 2}
        assert {k: tree.options[k] for k in ("key", "value", "node_size")} == \
            {"key": "str", "value": "int64", "node_size": 16}
        tree["c"] = 3
    reader = TreeMap.reader(path)
    assert reader["c"] == 3
    reader.close()
    with pytest.raises(ValueError, match="created with key='str'; open it with that"):
        TreeMap(path=path, key="int64")
    with pytest.raises(ValueError, match="created with node_size=16"):
        TreeMap(path=path, node_size=32)


def test_a_new_tree_gets_the_defaults(tmp_path):
    for tree in (TreeMap(), TreeMap(path=tmp_path / "new.offheap")):
        assert {k: tree.options[k] for k in ("key", "value", "node_size")} == \
            {"key": "int64", "value": "object", "node_size": 32}
        tree.close()


def test_a_hash_map_file_reopens_with_its_path_alone(tmp_path):
    path = tmp_path / "hash.offheap"
    with LongHashMap(value="int64", path=path) as m:
        m.update({1: 10, 2: 20})
    with LongHashMap(path=path) as m:
        assert dict(m.items()) == {1: 10, 2: 20} and m.get_many([1, 2]).dtype == "int64"
        m[3] = 30
    reader = LongHashMap.reader(path)
    assert reader[3] == 30
    reader.close()
    with pytest.raises(ValueError, match="open it with value='int64'"):
        LongHashMap(path=path, value="str")
    with LongHashMap(path=tmp_path / "new.offheap", allow_pickle=True) as m:
        m[1] = ["any", "object"]
        assert m[1] == ["any", "object"]


def test_a_new_int64_tree_set_has_leaves_of_64_and_an_existing_one_keeps_its_own(tmp_path):
    """A TreeSet's own default node size (``INT64_SET_NODE_SIZE`` for int64 elements, TreeMap's
    32 for str and bytes) applies to a new set only: in memory, in a new file, in a DB; a set
    file made with another node size reopens with it, from its path alone, as does its
    reader."""
    path = tmp_path / "set.offheap"
    with TreeSet([3, 1, 2], path=path, node_size=32) as made:
        assert made.options["node_size"] == 32
    with TreeSet(path=path) as reopened:
        assert reopened.options["node_size"] == 32 and list(reopened) == [1, 2, 3]
    reader = TreeSet.reader(path)
    assert list(reader) == [1, 2, 3]
    reader.close()
    with pytest.raises(ValueError, match="created with node_size=32"):
        TreeSet(path=path, node_size=64)
    with DB.memory() as db:
        new_sets = [TreeSet(), TreeSet(path=tmp_path / "new.offheap"), db.tree_set("s"),
                    TreeSet(key="int64"), TreeSet(key="str"), db.tree_set("b", key="bytes"),
                    db.tree_set("i", key="int64"), db.tree_set("n", key="str", node_size=64)]
        assert [s.options["node_size"] for s in new_sets] == [64, 64, 64, 64, 32, 32, 64, 64]
        assert db.tree_map("m").options["node_size"] == 32
        new_sets[1].close()
    assert TreeSet(node_size=8).options["node_size"] == 8
