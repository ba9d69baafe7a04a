"""A map file remembers what it was made with: ``TreeMap(path=...)`` and ``LongHashMap(path=...)``
alone reopen it (and so do their readers), an option given otherwise than the file's is refused
with the value to use, and a new map still gets the defaults."""

from __future__ import annotations

import pytest

from offheap import LongHashMap, TreeMap


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
