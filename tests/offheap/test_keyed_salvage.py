"""Salvage of HashMap(key=) and HashSet(key=) tables: the defensive reader on damaged key slots
and long keys' records (what it returns is always right, the rest skipped and counted), and
:func:`offheap.salvage` of damaged files holding them, standalone and in a DB."""

from __future__ import annotations

import numpy as np
import pytest

from offheap import DB, HashMap, HashSet, salvage
from offheap.db.salvage import CollectionReport, _DamagedRecord
from offheap.hashmap.keyedlayout import parse_meta
from offheap.hashmap.salvage import keyed_column, read_table
from tests.offheap.arena_fuzz import describe_source
from tests.offheap.test_durability import run_child

N = 400
LONG = "a key of more than fifteen bytes"


def _key(i: int) -> str:
    return f"{LONG} {i}" if i % 4 == 0 else f"k{i}"


def _keyed_db(kind: str = "map"):
    db = DB.memory()
    if kind == "map":
        table = db.hash_map("h", key="str")
        table.put_many([_key(i) for i in range(N)],
                       [("x" * (i % 20)) if i % 3 else i for i in range(N)])
    else:
        table = db.hash_set("h", key="str")
        table.add_many([_key(i) for i in range(N)])
    db.flush()
    return db, table


def _read(db, table):
    store = db._store
    report = CollectionReport("h", "keyed_hash_map")
    meta = parse_meta(store.get(table.meta_recid))
    batches = list(read_table(store, meta.table, report, store.get_checked, _DamagedRecord,
                              keyed_column(meta)))
    if isinstance(table, HashSet):  # a set's values are empty items
        return {k: None for keys, _ in batches for k in keys}, report
    return {k: v for keys, values in batches for k, v in zip(keys, values)}, report


def _truth(table) -> dict:
    return dict(table.items()) if isinstance(table, HashMap) else dict.fromkeys(table)


def _assert_right(entries: dict, truth: dict) -> None:
    assert all(key in truth and truth[key] == value for key, value in entries.items())


def _slots(table) -> np.ndarray:
    """Chunk 0's key slots, in place, as a matrix of bytes."""
    return table._regions.key_chunks[0].view(np.uint8).reshape(-1, 16)


@pytest.mark.parametrize("kind", ["map", "set"])
def test_an_intact_keyed_table_reads_whole_in_order(kind):
    db, table = _keyed_db(kind)
    table.discard_many([_key(i) for i in range(0, N, 7)]) if kind == "set" else \
        table.delete_many([_key(i) for i in range(0, N, 7)])
    db.flush()
    entries, report = _read(db, table)
    assert entries == _truth(table) and list(entries) == list(table)
    assert report.skipped_entries == report.damaged_entries == 0 and report.error is None


def test_swapped_slots_are_skipped():
    db, table = _keyed_db()
    truth = _truth(table)
    slots = _slots(table)
    slots[[10, 201]] = slots[[201, 10]]  # each key now sits far from its home
    entries, report = _read(db, table)
    _assert_right(entries, truth)
    # a probe that meets a misplaced key of a later home stops there: its key is lost too
    assert 2 <= report.skipped_entries <= 4 and len(entries) == N - report.skipped_entries
    assert _key(10) not in entries and _key(201) not in entries


def test_a_duplicated_slot_is_skipped_both_times():
    db, table = _keyed_db()
    truth = _truth(table)
    slots = _slots(table)
    slots[30] = slots[20]  # two entries now claim one key (20 is a long key's slot)
    entries, report = _read(db, table)
    _assert_right(entries, truth)
    assert _key(20) not in entries and report.skipped_entries == 2 and len(entries) == N - 2


@pytest.mark.parametrize("damage", [
    lambda slot: slot.__setitem__(15, 0x42),  # neither an inline length nor LONG
    lambda slot: slot.__setitem__(14, 1),  # padding after an inline key
    lambda slot: slot.__setitem__(0, slot[0] ^ 1),  # another key's bytes: found nowhere
], ids=["marker", "padding", "key-bytes"])
def test_a_damaged_inline_slot_is_skipped(damage):
    db, table = _keyed_db()
    truth = _truth(table)
    damage(_slots(table)[5])
    entries, report = _read(db, table)
    _assert_right(entries, truth)
    assert report.skipped_entries == 1 and len(entries) == N - 1 and _key(5) not in entries


@pytest.mark.parametrize("record", [b"short", b"another key of more than fifteen bytes", None],
                         ids=["too-short", "other-key", "missing"])
def test_a_long_key_whose_record_is_not_its_key_is_skipped(record):
    db, table = _keyed_db()
    truth = _truth(table)
    recid = int(_slots(table)[8, :8].view("<i8")[0])
    assert db._store.get(recid) == _key(8).encode()
    if record is None:
        db._store.delete(recid)
    else:
        db._store.update(recid, record)
    entries, report = _read(db, table)
    _assert_right(entries, truth)
    assert report.skipped_entries == 1 and len(entries) == N - 1 and _key(8) not in entries


def test_a_bad_external_value_is_skipped():
    db, table = _keyed_db()
    truth = _truth(table)
    words = table._live_words().astype(np.uint64)
    recid = int(words[(words & np.uint64(0xFF)) == 0xFF][0]) >> 8
    db._store.update(recid, b"\x80\x05garbage that is no pickle")
    entries, report = _read(db, table)
    _assert_right(entries, truth)
    assert report.skipped_entries == 1 and len(entries) == N - 1


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
    with DB.file(path, readonly=True) as db:
        truth = {"m": dict(db.hash_map("m").items()), "s": dict.fromkeys(db.hash_set("s"))}
    source = describe_source(str(path), None)
    clean = path.read_bytes()
    damaged_somewhere = 0
    pages = source.live_pages[::3]
    for number, page in enumerate(pages):
        data = bytearray(clean)
        data[page + 77] ^= 0x04
        path.write_bytes(bytes(data))
        rescued = tmp_path / f"rescued-{number}"
        report = salvage(path, rescued)
        assert report.failed_pages == 1 and not report.verified, str(report)
        if report.error is not None:  # the store's index or metadata
            continue
        with DB.file(rescued, readonly=True) as db:
            for collection in report.collections:
                name = collection.name
                copied = {} if name not in db else (
                    dict(db.hash_map(name).items()) if name == "m"
                    else dict.fromkeys(db.hash_set(name)))
                _assert_right(copied, truth[name])
                assert collection.skipped_entries == collection.skipped_records == 0, str(report)
                lost = len(copied) < len(truth[name])
                # an index slot on the failed page counts as damaged even when it was empty
                assert not lost or collection.damaged_entries or collection.error, str(report)
                damaged_somewhere += lost
    assert damaged_somewhere >= len(pages) // 3
