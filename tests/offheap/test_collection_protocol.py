"""The collection protocol: every kind the DB registers implements StoredCollection, and the DB,
its readers, compaction and salvage work with each kind through the protocol and the registry
alone. The set kinds hold the keys of the entries the map kinds hold."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Set
from types import FunctionType

import pytest

from offheap import DB, salvage
from offheap.collection.protocol import StoredCollection
from offheap.db import salvage as salvage_module
from offheap.db.kinds import KINDS, CollectionKind
from offheap.errors import ClosedError, ReadOnlyError

ENTRIES = {key: f"value {key}" for key in range(0, 3000, 3)}
PROTOCOL_MEMBERS = sorted(name for name, member in vars(StoredCollection).items()
                          if isinstance(member, (property, FunctionType))
                          and name not in ("__init__", "__subclasshook__"))  # typing's own

kinds = pytest.mark.parametrize("kind", list(KINDS.values()), ids=list(KINDS))


def _is_set(collection) -> bool:
    return isinstance(collection, Set)


def _fill(collection, entries=ENTRIES) -> None:
    for key, value in entries.items():
        _put(collection, key, value)


def _put(collection, key, value) -> None:
    if _is_set(collection):
        collection.add(key)
    else:
        collection[key] = value


def _read(collection, key):
    """What the collection holds for ``key``: its value, or for a set the key itself (KeyError
    when absent)."""
    if _is_set(collection):
        if key not in collection:
            raise KeyError(key)
        return key
    return collection[key]


def _content(collection, entries=ENTRIES):
    if _is_set(collection):
        return set(collection)
    return {key: collection[key] for key in entries}


def _expected(collection, entries=ENTRIES):
    return set(entries) if _is_set(collection) else entries


@kinds
def test_the_class_has_every_member_of_the_protocol(kind: CollectionKind):
    for name in PROTOCOL_MEMBERS:
        declared = inspect.getattr_static(StoredCollection, name)
        implemented = inspect.getattr_static(kind.collection, name)
        if isinstance(declared, property):
            assert isinstance(implemented, property), name
            continue
        # a method of a compiled base type has no ``self`` in its signature
        expected = {p: spec for p, spec in inspect.signature(declared).parameters.items()
                    if p != "self"}
        actual = {p: spec for p, spec in inspect.signature(implemented).parameters.items()
                  if p != "self"}
        assert list(actual)[:len(expected)] == list(expected), name
        for parameter, spec in expected.items():
            assert actual[parameter].default == spec.default, (name, parameter)


@kinds
def test_db_works_through_the_protocol(tmp_path, kind: CollectionKind):
    path = tmp_path / "db"
    with DB.file(path) as db:
        collection = db._collection("c", kind, {})
        assert isinstance(collection, kind.collection)
        assert isinstance(collection, StoredCollection)
        _fill(collection)
        db.commit()
        stats = db.stats().collections["c"]
        assert stats.kind == kind.name and stats.n_entries == len(ENTRIES)
        assert stats.live_bytes > 0 and collection._live_bytes() == stats.live_bytes
        _put(collection, -1, "rolled back")
        db.rollback()
        assert -1 not in collection and len(collection) == len(ENTRIES)
        collection._check()
        assert db._collection("c", kind, {}) is collection
    assert collection.closed
    with pytest.raises(ClosedError):
        _read(collection, 0)
    with DB.file(path) as db:
        reopened = db._collection("c", kind, {})
        assert _content(reopened) == _expected(reopened)
        assert db._catalog["c"]["kind"] == kind.name
        other = next(k for k in KINDS.values() if k is not kind)
        with pytest.raises(ValueError, match=f"is a {kind.name}, not a {other.name}"):
            db._collection("c", other, {})


@kinds
def test_a_reader_follows_the_writer_through_the_protocol(tmp_path, kind: CollectionKind):
    path = tmp_path / "db"
    with DB.file(path) as writer:
        written = writer._collection("c", kind, {})
        _fill(written)
        writer.commit()
        with DB.file(path, readonly=True) as db:
            reader = db._collection("c", kind, {})
            assert isinstance(reader, kind.reader)
            assert len(reader) == len(ENTRIES) and _read(reader, 3) in ("value 3", 3)
            _put(written, -3, "new")
            writer.commit()
            assert _read(reader, -3) in ("new", -3) and -6 not in reader and -3 in reader
            reader._check()
            with pytest.raises(ReadOnlyError):
                _put(reader, 1, "refused")
        assert reader.closed


@kinds
def test_a_standalone_file_is_read_by_the_reader_factory(tmp_path, kind: CollectionKind):
    path = tmp_path / "map"
    with kind.collection(path=path) as collection:
        _fill(collection)
    with kind.collection.reader(path) as reader:
        assert isinstance(reader, kind.reader)
        assert _content(reader) == _expected(reader)
    assert reader.closed
    with pytest.raises(TypeError, match=rf"{kind.class_name}\.reader\(path\)"):
        kind.collection(path=path, readonly=True)


@kinds
def test_compaction_copies_each_kind(tmp_path, kind: CollectionKind):
    path = tmp_path / "db"
    kept = {key: value for key, value in ENTRIES.items() if key % 2}
    with DB.file(path) as db:
        collection = db._collection("c", kind, {})
        _fill(collection)
        db.commit()
        for key in ENTRIES.keys() - kept.keys():
            if _is_set(collection):
                collection.remove(key)
            else:
                del collection[key]
        db.compact()
        assert not collection.closed and len(collection) == len(kept)
        assert _content(collection, kept) == _expected(collection, kept)
        collection._check()
    with DB.file(path) as db:
        assert len(db._collection("c", kind, {})) == len(kept)


@kinds
def test_salvage_copies_each_kind_in_a_db_and_standalone(tmp_path, kind: CollectionKind):
    with DB.file(tmp_path / "db") as db:
        _fill(db._collection("c", kind, {}))
    report = salvage(tmp_path / "db", tmp_path / "db-copy")
    assert report.complete and report.kind == "db"
    assert [(c.name, c.kind) for c in report.collections] == [("c", kind.name)]
    with DB.file(tmp_path / "db-copy", readonly=True) as db:
        copy = db._collection("c", kind, {})
        assert _content(copy) == _expected(copy)

    with kind.collection(path=tmp_path / "map") as collection:
        _fill(collection)
    report = salvage(tmp_path / "map", tmp_path / "map-copy")
    # a standalone TreeSet file is a TreeMap file of b"" values: salvaged as one, read as a set
    assert report.complete and report.kind == ("tree_map" if kind.name == "tree_set" else kind.name)
    with kind.collection.reader(tmp_path / "map-copy") as copy:
        assert _content(copy) == _expected(copy)


def test_every_registered_kind_has_a_salvage_walker():
    assert set(salvage_module._SALVAGE) == set(KINDS)


def _db_method(db: DB, kind: CollectionKind):
    """The DB method that opens a collection of ``kind``: the one named after it, or for a
    keyed hash kind the int64 kind's method, given ``key=``."""
    if kind.name.startswith("keyed_"):
        return functools.partial(getattr(db, kind.name.removeprefix("keyed_")), key="object")
    return getattr(db, kind.name)


@kinds
def test_the_db_method_named_after_the_kind_opens_it(kind: CollectionKind):
    with DB.memory() as db:
        collection = _db_method(db, kind)("c")
        assert isinstance(collection, kind.collection)
        assert db._collection("c", kind, {}) is collection
        with pytest.raises(TypeError, match=f"unknown {kind.class_name} option"):
            _db_method(db, kind)("d", no_such_option=1)
