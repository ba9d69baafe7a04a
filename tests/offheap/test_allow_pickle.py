"""Nothing is unpickled from a file unless its opener allows it (``allow_pickle=True``).

A file holds, in one leaf (or one table), plain values beside a value whose pickle runs code when
loaded (:class:`Payload`, whose ``__reduce__`` calls :func:`_ran`, which leaves a marker). Opened
without permission, every key-only read, every other value, the readers, ``compact()`` and
``salvage()`` work and never run it; reading that value raises PickleNotAllowedError, and with
``allow_pickle=True`` it loads. Anonymous maps always unpickle; a map of a file without permission
refuses to store what it could not read back; a value whose class is gone fails its own read only.
On both cores: the compiled TreeMap descent and the Python one, the compiled LongHashMap core and
the reference one (and the whole module again under ``OFFHEAP_PURE_PYTHON=1``, ``.ci/run``).
"""

from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest

from offheap import DB, LongHashMap, TreeMap, salvage
from offheap import PickleNotAllowedError
from offheap.errors import CorruptionError
from offheap.hashmap.longhashmap import ReferenceLongHashMap

RAN: list[str] = []


def _ran(tag: str) -> str:
    """What unpickling a :class:`Payload` calls: the code a crafted file would run."""
    RAN.append(tag)
    return f"ran {tag}"


class Payload:
    """A value whose pickle calls :func:`_ran` when it is loaded."""

    def __reduce__(self):
        return _ran, ("payload",)


class Vanishing:
    """A class the tests remove from the module, as a reader without the writer's code."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other) -> bool:
        return type(other) is Vanishing and other.n == self.n


PLAIN = {1: "one", 2: 2, 3: None, 5: b"five" * 4, 6: "a longer string than seven bytes", 7: 7.5}
BAD = 4  # the key of the payload, in the same leaf as the plain values


@pytest.fixture(autouse=True)
def _clear_marker():
    RAN.clear()
    yield
    RAN.clear()


def _key(kind: str, k: int):
    return k if kind == "int64" else f"k{k:03d}"


# -- the collections under test: how each is created, reopened and read ------------------------

TREE_VARIANTS = {
    "int, write cache": dict(key="int64"),
    "str, write cache": dict(key="str"),
    "int, write-through": dict(key="int64", write_cache=False),
    "str, zlib pages": dict(key="str", compression="zlib"),
}


def _write_tree(path, options: dict) -> None:
    kind = options["key"]
    with TreeMap(path=path, allow_pickle=True, **options) as tree:
        for k, v in PLAIN.items():
            tree[_key(kind, k)] = v
        tree[_key(kind, BAD)] = Payload()


@pytest.fixture(params=[True, False], ids=["compiled descent", "python descent"])
def descent(request):
    if request.param and not TreeMap()._tree.descent:
        pytest.skip("the compiled descent is not loaded")
    return request.param


def _open_tree(path, descent: bool, **options) -> TreeMap:
    tree = TreeMap(path=path, **options)
    if not descent:
        tree._tree.descent = None
        tree._detach_slots()  # the compiled item slots read through the descent
    return tree


@pytest.mark.parametrize("variant", TREE_VARIANTS)
def test_a_tree_file_without_permission_reads_everything_but_the_pickle(tmp_path, variant, descent):
    options = TREE_VARIANTS[variant]
    kind = options["key"]
    path = tmp_path / "t.offheap"
    _write_tree(path, options)
    RAN.clear()
    with _open_tree(path, descent) as tree:
        bad = _key(kind, BAD)
        assert bad in tree and len(tree) == len(PLAIN) + 1
        assert list(tree.keys()) == sorted(_key(kind, k) for k in [*PLAIN, BAD])
        assert tree.first_key() == _key(kind, 1) and tree.floor_key(bad) == bad
        for k, v in PLAIN.items():
            assert tree[_key(kind, k)] == v and tree.get(_key(kind, k)) == v
        assert tree.get_many([_key(kind, 1), _key(kind, 2)]) == ["one", 2]
        for read in (lambda: tree[bad], lambda: tree.get(bad), lambda: tree.pop(bad),
                     lambda: tree.floor_item(bad), lambda: tree.peekitem(3),
                     lambda: tree.popitem(3),
                     lambda: tree.get_many([bad]), lambda: list(tree.values()),
                     lambda: tree.setdefault(bad), tree.copy):
            with pytest.raises(PickleNotAllowedError, match="allow_pickle=True"):
                read()
        assert bad in tree and len(tree) == len(PLAIN) + 1  # the failed pops removed nothing
        tree._check()  # placeholders compare by their bytes
        del tree[bad]
        assert bad not in tree
    assert RAN == []
    _write_tree(tmp_path / "u.offheap", options)
    RAN.clear()
    with _open_tree(tmp_path / "u.offheap", descent, allow_pickle=True) as tree:
        assert tree[_key(kind, BAD)] == "ran payload" and RAN == ["payload"]
        assert tree.copy()[_key(kind, BAD)] == "ran payload"


def test_a_tree_reader_needs_the_permission_too(tmp_path):
    path = tmp_path / "t.offheap"
    _write_tree(path, dict(key="int64"))
    RAN.clear()
    with TreeMap.reader(path) as reader:
        assert BAD in reader and list(reader) == sorted([*PLAIN, BAD]) and reader[1] == "one"
        with pytest.raises(PickleNotAllowedError):
            reader[BAD]
        with pytest.raises(PickleNotAllowedError):
            dict(reader.items())
    assert RAN == []
    with TreeMap.reader(path, allow_pickle=True) as reader:
        assert reader[BAD] == "ran payload"


@pytest.fixture(params=[LongHashMap, ReferenceLongHashMap], ids=["compiled core", "reference core"])
def hash_class(request):
    return request.param


def _write_table(path) -> None:
    with LongHashMap(path=path, allow_pickle=True) as table:
        table.update(PLAIN)
        table[BAD] = Payload()
        table[8] = "after"


def test_a_hash_file_without_permission_reads_everything_but_the_pickle(tmp_path, hash_class):
    path = tmp_path / "h.offheap"
    _write_table(path)
    RAN.clear()
    with hash_class(path=path) as table:
        assert BAD in table and len(table) == len(PLAIN) + 2 and list(table) == [*PLAIN, BAD, 8]
        for k, v in PLAIN.items():
            assert table[k] == v
        assert list(table.get_many([1, 8])) == ["one", "after"]
        for read in (lambda: table[BAD], lambda: table.get(BAD), lambda: table.pop(BAD),
                     lambda: table.get_many([BAD]), lambda: table.setdefault(BAD), table.copy):
            with pytest.raises(PickleNotAllowedError, match="allow_pickle=True"):
                read()
        seen = []
        with pytest.raises(PickleNotAllowedError):
            for value in table.values():  # every value before it, then the error at its step
                seen.append(value)
        assert seen == list(PLAIN.values())
        assert table.popitem() == (8, "after")
        with pytest.raises(PickleNotAllowedError):
            table.popitem()  # the last entry now: refused, and left in place
        assert BAD in table and len(table) == len(PLAIN) + 1
        del table[BAD]
        table._check()
    assert RAN == []
    _write_table(tmp_path / "u.offheap")
    RAN.clear()
    with hash_class(path=tmp_path / "u.offheap", allow_pickle=True) as table:
        assert table[BAD] == "ran payload" and RAN == ["payload"]


def test_a_hash_reader_needs_the_permission_too(tmp_path):
    path = tmp_path / "h.offheap"
    _write_table(path)
    RAN.clear()
    with LongHashMap.reader(path) as reader:
        assert BAD in reader and reader[1] == "one" and len(reader) == len(PLAIN) + 2
        with pytest.raises(PickleNotAllowedError):
            reader[BAD]
    assert RAN == []
    with LongHashMap.reader(path, allow_pickle=True) as reader:
        assert reader[BAD] == "ran payload"


# -- DB files: collections, readers, compaction, salvage ------------------------------------------

def _write_db(path) -> None:
    with DB.file(path, allow_pickle=True) as db:
        tree, table = db.tree_map("tree"), db.hash_map("table")
        for m in (tree, table):
            m.update(PLAIN)
            m[BAD] = Payload()


def _check_db_collections(db: DB) -> None:
    for name in ("tree", "table"):
        m = db.tree_map(name) if name == "tree" else db.hash_map(name)
        assert BAD in m and len(m) == len(PLAIN) + 1
        assert all(m[k] == v for k, v in PLAIN.items())
        with pytest.raises(PickleNotAllowedError):
            m[BAD]


def test_a_db_file_its_readers_and_compaction_never_unpickle_without_permission(tmp_path):
    path = tmp_path / "db.offheap"
    _write_db(path)
    RAN.clear()
    with DB.file(path, readonly=True) as db:
        _check_db_collections(db)
    with DB.file(path) as db:
        _check_db_collections(db)
        db.compact()
        _check_db_collections(db)
    assert RAN == []
    with DB.file(path, allow_pickle=True) as db:  # compaction copied the payloads' bytes
        assert db.tree_map("tree")[BAD] == db.hash_map("table")[BAD] == "ran payload"
    assert RAN == ["payload"] * 2


@pytest.mark.parametrize("make", ["db", "tree", "table"])
def test_salvage_copies_pickled_values_as_bytes_and_never_unpickles(tmp_path, make):
    src, dst = tmp_path / "src.offheap", tmp_path / "dst.offheap"
    {"db": _write_db, "tree": lambda p: _write_tree(p, dict(key="int64")),
     "table": _write_table}[make](src)
    RAN.clear()
    report = salvage(src, dst)
    assert report.complete and RAN == []
    if make == "db":
        with DB.file(dst, allow_pickle=True) as db:
            assert db.tree_map("tree")[BAD] == db.hash_map("table")[BAD] == "ran payload"
    else:
        with (TreeMap if make == "tree" else LongHashMap)(path=dst, allow_pickle=True) as m:
            assert m[BAD] == "ran payload"


# -- writing, anonymous maps, missing classes -----------------------------------------------------

_OPEN_DBS: dict = {}  # a DB by its path, while the test uses its collection


def _any_key(m):
    return "a" if isinstance(m, TreeMap) and m.options["key"] == "str" else 1


@pytest.mark.parametrize("open_map", [
    lambda path: TreeMap(path=path), lambda path: TreeMap(path=path, key="str"),
    lambda path: LongHashMap(path=path), lambda path: ReferenceLongHashMap(path=path),
    lambda path: _OPEN_DBS.setdefault(path, DB.file(path)).tree_map("t"),
    lambda path: _OPEN_DBS.setdefault(path, DB.file(path)).hash_map("h")],
    ids=["tree", "str tree", "table", "reference table", "db tree", "db table"])
def test_a_file_map_without_permission_refuses_to_store_what_needs_pickle(tmp_path, open_map):
    m = open_map(tmp_path / "f.offheap")
    db = _OPEN_DBS.pop(tmp_path / "f.offheap", m)
    k = _any_key(m)
    for value in [(1, 2), {"born": 1815}, [1], 1j, Payload()]:
        with pytest.raises(PickleNotAllowedError, match=f"values of type {type(value).__name__} "
                                                        f"are stored with pickle"):
            m[k] = value
    with pytest.raises(PickleNotAllowedError):
        m.update({k: (1,)})
    with pytest.raises(PickleNotAllowedError):
        m.put_many([k], [(1,)])
    assert k not in m and len(m) == 0
    with pytest.raises(PickleNotAllowedError, match=r"numpy scalar .* array\.tolist\(\)"):
        m[k] = np.int64(1)  # an object value keeps a numpy scalar's type, by pickle
    m[k] = "plain values go in"
    assert m[k] == "plain values go in"
    assert RAN == []
    db.close()


@pytest.mark.parametrize("make", [TreeMap, lambda: TreeMap(key="str"), LongHashMap,
                                  ReferenceLongHashMap, lambda: DB.memory().tree_map("t"),
                                  lambda: DB.memory().hash_map("h")],
                         ids=["tree", "str tree", "table", "reference table", "memory db tree",
                              "memory db table"])
def test_anonymous_maps_store_and_unpickle_any_value(make):
    m = make()
    k = _any_key(m)
    m[k] = [1, (2, 3)]
    first = m[k]
    assert first == [1, (2, 3)] and m[k] is not first  # a fresh object for every read
    first.append("changed")
    assert m[k] == [1, (2, 3)]
    assert m.copy()[k] == [1, (2, 3)]
    assert pickle.loads(pickle.dumps(m))[k] == [1, (2, 3)]
    m[k] = Payload()
    assert m[k] == "ran payload" and RAN == ["payload"]


@pytest.mark.parametrize("make", ["tree", "table"])
def test_a_value_whose_class_is_missing_fails_only_its_own_read(tmp_path, make, monkeypatch):
    path = tmp_path / "m.offheap"
    cls = TreeMap if make == "tree" else LongHashMap
    with cls(path=path, allow_pickle=True) as m:
        m.update(PLAIN)
        m[BAD] = Vanishing(4)
    with cls(path=path, allow_pickle=True) as m:
        assert m[BAD] == Vanishing(4)
    monkeypatch.delattr(sys.modules[__name__], "Vanishing")
    with cls(path=path, allow_pickle=True) as m:
        with pytest.raises(CorruptionError, match="class may be missing"):
            m[BAD]
        assert all(m[k] == v for k, v in PLAIN.items())
        assert BAD in m and list(m) == ([*PLAIN, BAD] if make == "table" else sorted([*PLAIN, BAD]))


def test_a_damaged_pickle_fails_only_its_own_read(tmp_path, hash_class):
    path = tmp_path / "h.offheap"
    _write_table(path)
    with LongHashMap(path=path, allow_pickle=True) as table:
        word = int(table._live_words()[list(table).index(BAD)])
        assert word & 0xFF == 0xFF  # the payload's pickle is an external record
        table._store.update(word >> 8, b"\x08" + b"no pickle at all")
    with hash_class(path=path, allow_pickle=True) as table:
        with pytest.raises(CorruptionError, match="does not load"):
            table[BAD]
        assert all(table[k] == v for k, v in PLAIN.items()) and table[8] == "after"
    assert RAN == []
