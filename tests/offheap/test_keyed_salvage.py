""":func:`offheap.salvage` of files holding HashMap(key=) and HashSet(key=) tables, standalone and
in a DB, damaged: what it copies is always right and keeps its kind, the rest is counted. (The
defensive reader of keyed tables on damaged key slots and long keys' records is tested in
``test_salvage_readers.py``.)"""

from __future__ import annotations

from offheap import DB, HashMap, HashSet, salvage
from tests.offheap.arena_fuzz import describe_source
from tests.offheap.test_durability import run_child, salvaged_collections

LONG = "a key of more than fifteen bytes"


def _key(i: int) -> str:
    return f"{LONG} {i}" if i % 4 == 0 else f"k{i}"


def test_salvage_of_a_standalone_keyed_file_keeps_its_kind(tmp_path):
    with HashMap(key="bytes", value="int64", path=tmp_path / "map") as m:
        m.update({b"k%d" % i * (i % 7): i for i in range(300)})
        truth = dict(m.items())
    with HashSet(key="object", path=tmp_path / "set") as s:
        s.update([1, "one", (1, "one"), None, b"x" * 30, 2.5])
    report = salvage(tmp_path / "map", tmp_path / "map-copy")
    assert report.kind == "keyed_hash_map" and report.complete
    assert report.recovered_entries == len(truth)
    with HashMap(path=tmp_path / "map-copy") as copy:
        assert copy.key_type == "bytes" and dict(copy.items()) == truth
    report = salvage(tmp_path / "set", tmp_path / "set-copy")
    assert report.kind == "keyed_hash_set" and report.complete
    with HashSet.reader(tmp_path / "set-copy") as copy:
        assert list(copy) == [1, "one", (1, "one"), None, b"x" * 30, 2.5]


def test_an_unclean_none_mode_keyed_file_salvages(tmp_path):
    path, rescued = tmp_path / "db", tmp_path / "rescued"
    child = run_child(f"""
        import os
        from offheap import DB
        db = DB.file({str(path)!r}, durability="none")
        db.hash_map("m", key="str").update({{f"{LONG} {{i}}": str(i) for i in range(2000)}})
        db.hash_set("s", key="int64").update(range(3000))
        db.flush()
        os._exit(0)
    """)
    assert child.returncode == 0, child.stderr
    report = salvage(path, rescued)
    assert report.complete and not report.verified, str(report)
    with DB.file(rescued) as db:
        assert dict(db.hash_map("m").items()) == {f"{LONG} {i}": str(i) for i in range(2000)}
        assert list(db.hash_set("s")) == list(range(3000))


def test_salvage_skips_only_what_lies_on_a_page_that_fails_its_checksum(tmp_path):
    """A DB closed cleanly, one live page damaged at a time: every entry copied is right, and
    what is lost is counted as damaged, never as read."""
    path = tmp_path / "db"
    with DB.file(path) as db:
        db.hash_map("m", key="str").put_many(
            [_key(i) for i in range(3000)], [f"value-{i}" * (i % 5) for i in range(3000)])
        db.hash_set("s", key="bytes").add_many([b"%d" % i * (i % 6) for i in range(2000)])
    step = 3
    pages = len(describe_source(str(path), None).live_pages[::step])
    damaged_somewhere = 0
    for collection, copied, truth in salvaged_collections(
            path, tmp_path, lambda db, name: dict(db.hash_map(name).items()) if name == "m"
            else dict.fromkeys(db.hash_set(name)), step):
        lost = len(copied) < len(truth)
        # an index slot on the failed page counts as damaged even when it was empty
        assert not lost or collection.damaged_entries or collection.error
        damaged_somewhere += lost
    assert damaged_somewhere >= pages // 3
