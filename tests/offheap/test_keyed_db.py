"""HashMap(key=) and HashSet(key=) in a DB: ``db.hash_map(name, key=...)`` and
``db.hash_set(name, key=...)``, the catalog, reopening, rollback, compaction (long keys and
external values are records of the store), stats, read-only DBs in another process, and files
written before keyed maps existed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from offheap import DB, HashMap, HashSet, LongHashMap, LongHashSet
from offheap.errors import PickleNotAllowedError, ReadOnlyError

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = Path(__file__).parent / "golden"
LONG = "a key of more than fifteen bytes"
USERS = {f"user:{i}": i for i in range(500)} | {LONG + str(i): -i for i in range(50)}
VALUES = {f"k{i}": ("v" * (i % 40)) if i % 2 else i for i in range(300)} | \
    {LONG * 2 + str(i): "an external value, longer than a slot word" * 2 for i in range(30)}
ELEMENTS = [b"a", b"", b"x" * 15, b"y" * 16] + [b"e%d" % i * (i % 9) for i in range(200)]


@dataclass
class Point:
    """A value stored with pickle."""

    x: int
    y: int


def _fill(db: DB) -> None:
    db.hash_map("users", key="str", value="int64").update(USERS)
    db.hash_map("values", key="str").update(VALUES)
    db.hash_set("elements", key="bytes").update(ELEMENTS)
    db.hash_map("ints")[7] = "a LongHashMap beside them"
    db.hash_set("int_set").add(7)


def _check_filled(db: DB) -> None:
    assert dict(db.hash_map("users").items()) == USERS
    assert dict(db.hash_map("values").items()) == VALUES
    assert list(db.hash_set("elements")) == list(dict.fromkeys(ELEMENTS))
    assert dict(db.hash_map("ints").items()) == {7: "a LongHashMap beside them"}
    assert set(db.hash_set("int_set")) == {7}


def test_key_makes_a_hash_map_and_a_hash_set_of_that_key_type(tmp_path):
    path = tmp_path / "db"
    with DB.file(path) as db:
        _fill(db)
        users, elements = db.hash_map("users"), db.hash_set("elements")
        assert isinstance(users, HashMap) and users.key_type == "str"
        assert isinstance(elements, HashSet) and elements.key_type == "bytes"
        assert isinstance(db.hash_map("ints"), LongHashMap)
        assert isinstance(db.hash_set("int_set"), LongHashSet)
        assert db.hash_map("users", key="str", value="int64") is users
        assert db._catalog["users"] == {"kind": "keyed_hash_map", "meta_recid": users.meta_recid,
                                        "options": {"key": "str", "value": "int64"}}
        assert db._catalog["elements"]["kind"] == "keyed_hash_set"
        assert db._catalog["ints"]["options"] == {"value": "object"}  # as before keyed maps
        assert "users (keyed_hash_map)" in repr(db) and "ints (hash_map)" in repr(db)
    with DB.file(path) as db:
        _check_filled(db)
        assert db.hash_map("users", key="str").key_type == "str"  # or without key=
        for name in ("users", "values"):
            db.hash_map(name)._check()
        db.hash_set("elements")._check()


def test_reopening_with_another_key_type_or_kind_is_refused(tmp_path):
    with DB.file(tmp_path / "db") as db:
        _fill(db)
        with pytest.raises(ValueError, match="created with key='str'.*key='bytes'"):
            db.hash_map("users", key="bytes")
        with pytest.raises(ValueError, match="created with value='int64'"):
            db.hash_map("users", value="object")
        with pytest.raises(ValueError, match="'ints' is a LongHashMap.*without key="):
            db.hash_map("ints", key="int64")
        with pytest.raises(ValueError, match="'int_set' is a LongHashSet.*without key="):
            db.hash_set("int_set", key="object")
        with pytest.raises(ValueError, match="is a keyed_hash_map, not a hash_set"):
            db.hash_set("users")
        with pytest.raises(ValueError, match="is a keyed_hash_set, not a keyed_hash_map"):
            db.hash_map("elements", key="bytes")
        with pytest.raises(ValueError, match="key"):
            db.hash_map("new", key="float")
        with pytest.raises(TypeError, match="unknown HashSet option"):
            db.hash_set("new", key="str", value="int64")
        assert "new" not in db


def test_rollback_drops_keyed_changes_and_new_keyed_collections(tmp_path):
    with DB.file(tmp_path / "db") as db:
        _fill(db)
        db.commit()
        users, elements = db.hash_map("users"), db.hash_set("elements")
        users[LONG + "new"] = 1
        del users["user:3"]
        elements.add(b"z" * 40)
        fresh = db.hash_map("fresh", key="object")
        fresh[(1, "a")] = 2
        db.rollback()
        assert fresh.closed and "fresh" not in db
        assert dict(users.items()) == USERS and list(elements) == list(dict.fromkeys(ELEMENTS))
        users._check()
        elements._check()


def test_compaction_keeps_long_keys_external_values_and_order(tmp_path):
    path = tmp_path / "db"
    with DB.file(path) as db:
        _fill(db)
        values = db.hash_map("values")
        for key in list(VALUES)[::3]:
            del values[key]
        elements = db.hash_set("elements")
        elements.discard_many(ELEMENTS[::2])
        kept_values = {k: v for i, (k, v) in enumerate(VALUES.items()) if i % 3}
        kept_elements = [e for e in dict.fromkeys(ELEMENTS) if e not in set(ELEMENTS[::2])]
        size = os.path.getsize(path)
        db.compact()
        assert os.path.getsize(path) < size
        assert dict(values.items()) == kept_values and list(elements) == kept_elements
        values._check()
        elements._check()
        stats = db.stats().collections
        assert stats["values"].n_entries == len(kept_values) and stats["values"].live_bytes > 0
    with DB.file(path) as db:
        assert dict(db.hash_map("values").items()) == kept_values
        assert list(db.hash_set("elements")) == kept_elements
        assert dict(db.hash_map("users").items()) == USERS
        long_keys = db.hash_map("values")._long_key_records()
        assert len(long_keys) == sum(len(key) > 15 for key in kept_values)
        assert len(long_keys) > 10 and all(int(r) in db._store for r in long_keys)


def test_compaction_copies_pickled_values_without_unpickling(tmp_path):
    path = tmp_path / "db"
    with DB.file(path, allow_pickle=True) as db:
        db.hash_map("points", key="str")[LONG] = Point(1, 2)
    with DB.file(path) as db:  # no permission: the pickle crosses as its bytes
        points = db.hash_map("points")
        db.compact()
        with pytest.raises(PickleNotAllowedError):
            points[LONG]
    with DB.file(path, allow_pickle=True) as db:
        assert db.hash_map("points")[LONG] == Point(1, 2)


def test_stats_count_long_keys_records(tmp_path):
    with DB.memory() as db:
        short = db.hash_set("short", key="str")
        long = db.hash_set("long", key="str")
        short.add_many([f"{i}" for i in range(100)])
        long.add_many([LONG * 4 + f"{i}" for i in range(100)])
        stats = db.stats().collections
        assert stats["short"].kind == stats["long"].kind == "keyed_hash_set"
        assert stats["long"].live_bytes >= stats["short"].live_bytes + 100 * len(LONG * 4)


def test_a_read_only_db_in_another_process_follows_the_writer(tmp_path):
    path = tmp_path / "db"
    with DB.file(path) as db:
        _fill(db)
        db.commit()
        child = _child(path, """
            with DB.file(path, readonly=True) as db:
                users, elements = db.hash_map("users"), db.hash_set("elements")
                print(len(users), users["user:7"], users.get(LONG + "1"), LONG + "9" in users)
                print(len(elements), b"y" * 16 in elements, list(elements)[:2])
                print(users.contains_many(["user:1", "nope"]).tolist())
                try:
                    users["x"] = 1
                except ReadOnlyError:
                    print("refused")
                sys.stdout.flush()
                sys.stdin.readline()  # the parent commits meanwhile
                print(users.get("added"), len(elements), b"added" * 4 in elements)
        """)
        assert child.stdout.readline().split() == [str(len(USERS)), "7", "-1", "True"]
        assert child.stdout.readline().strip() == \
            f"{len(set(ELEMENTS))} True {list(dict.fromkeys(ELEMENTS))[:2]}"
        assert child.stdout.readline().strip() == "[True, False]"
        assert child.stdout.readline().strip() == "refused"
        db.hash_map("users")["added"] = 42
        db.hash_set("elements").add(b"added" * 4)
        db.commit()
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == f"42 {len(set(ELEMENTS)) + 1} True"
        assert child.wait(60) == 0, child.stderr.read()


def _child(path, code: str) -> subprocess.Popen:
    """A Python process running ``code`` with ``path``, ``LONG``, ``DB`` and ``ReadOnlyError``
    defined, talking through its stdin and stdout."""
    prelude = (f"import sys\nfrom offheap import DB\nfrom offheap.errors import ReadOnlyError\n"
               f"path, LONG = {str(path)!r}, {LONG!r}\n")
    return subprocess.Popen([sys.executable, "-c", prelude + textwrap.dedent(code)],
                            env=dict(os.environ, PYTHONPATH=REPOSITORY), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_db_file_from_before_keyed_maps_opens_unchanged(tmp_path):
    path = tmp_path / "db"
    shutil.copy(GOLDEN / "db_hashmap_v1.offheap", path)
    with DB.file(path) as db:
        counts = db.hash_map("counts")
        assert isinstance(counts, LongHashMap) and len(counts) == 1000
        assert db._catalog["counts"]["kind"] == "hash_map"
        with pytest.raises(ValueError, match="without key="):
            db.hash_map("counts", key="int64")
        tags = db.hash_map("tags", key="int64")  # a keyed map of int64 keys beside it
        tags.put_many(np.arange(10), np.arange(10) * 2)
    with DB.file(path, readonly=True) as db:
        assert isinstance(db.hash_map("counts")._map, LongHashMap)
        assert isinstance(db.hash_map("tags")._map, HashMap)
        assert db.hash_map("tags")[9] == 18 and db.hash_map("counts")[2997] == 999
        with pytest.raises(ReadOnlyError):
            db.hash_map("tags")[1] = 1


def test_a_read_only_db_opens_keyed_collections_made_after_it_opened(tmp_path):
    path = tmp_path / "db"
    with DB.file(path) as writer:
        writer.hash_map("ints")[1] = 1
        writer.commit()
        with DB.file(path, readonly=True) as db:
            assert db.names() == ["ints"]
            writer.hash_map("users", key="str")["ada"] = 1815
            writer.hash_set("tags", key="bytes").add(b"q" * 20)
            writer.commit()
            users, tags = db.hash_map("users"), db.hash_set("tags")  # the kind from the catalog
            assert isinstance(users._map, HashMap) and users["ada"] == 1815
            assert isinstance(tags._map, HashSet) and list(tags) == [b"q" * 20]
            with pytest.raises(ValueError, match="'ints' is a LongHashMap"):
                db.hash_map("ints", key="int64")
