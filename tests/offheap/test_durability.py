"""Durable DBs and file maps: commit, rollback, crashes, unclean shutdowns, readers beside a
writer, locking, compaction and stats.

Crashes are real: a child process writes and ends with ``os._exit`` (no close, no flush, as
SIGKILL would leave it), and this process reopens the file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from offheap import DB, LongHashMap, TreeMap, salvage
from offheap.arena.arena import Arena
from offheap.arena.writethrough import WriteThroughWriter
from tests.offheap.arena_fuzz import describe_source
from offheap.errors import (
    CapacityError,
    ClosedError,
    CorruptionError,
    LockedError,
    OffheapError,
    ReadOnlyError,
    TransactionError,
)

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_child(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter that imports offheap from this checkout."""
    env = dict(os.environ, PYTHONPATH=REPOSITORY)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)


# -- commit and rollback ----------------------------------------------------------------------

def test_commit_then_rollback_returns_to_the_commit(tmp_path):
    with DB.file(tmp_path / "db") as db:
        tree, table = db.tree_map("t", node_size=4), db.hash_map("h")
        tree.update({i: str(i) for i in range(300)})
        table.put_many(np.arange(300), ["x" * (i % 20) for i in range(300)])
        db.commit()
        for i in range(0, 300, 3):
            del tree[i]
            table[i] = "changed, and long enough to be an external record"
        tree[1000] = "new"
        db.rollback()
        assert dict(tree.items()) == {i: str(i) for i in range(300)}
        assert dict(table.items()) == {i: "x" * (i % 20) for i in range(300)}
        tree._check()
        table._check()
        tree[5000] = "after rollback"
    with DB.file(tmp_path / "db") as db:  # close committed
        assert db.tree_map("t")[5000] == "after rollback" and len(db.tree_map("t")) == 301


def test_rollback_closes_collections_created_since_the_commit(tmp_path):
    with DB.file(tmp_path / "db") as db:
        kept = db.tree_map("kept")
        kept[1] = 1
        db.commit()
        fresh, fresh_table = db.tree_map("fresh"), db.hash_map("fresh_h")
        fresh[1] = 1
        db.rollback()
        assert fresh.closed and fresh_table.closed and not kept.closed
        assert db.names() == ["kept"]
        with pytest.raises(ClosedError):
            fresh[2] = 2
        assert db.tree_map("fresh") is not fresh and len(db.tree_map("fresh")) == 0


def test_iteration_across_a_rollback_raises(tmp_path):
    with DB.file(tmp_path / "db") as db:
        tree = db.tree_map("t", node_size=4)
        tree.update({i: i for i in range(100)})
        db.commit()
        iterator = iter(tree)
        next(iterator)
        db.rollback()
        with pytest.raises(RuntimeError):
            list(iterator)


def test_a_failed_with_block_rolls_back(tmp_path):
    with DB.file(tmp_path / "db") as db:
        db.tree_map("t")[1] = "committed"
    with pytest.raises(KeyError):
        with DB.file(tmp_path / "db") as db:
            db.tree_map("t")[2] = "lost"
            raise KeyError("boom")
    with DB.file(tmp_path / "db") as db:
        assert dict(db.tree_map("t").items()) == {1: "committed"}


def test_a_close_that_cannot_write_its_caches_commits_nothing(tmp_path):
    path = tmp_path / "db"
    with DB.file(path, limit=2 << 20) as db:
        db.tree_map("t", cache_size=100_000).update({i: i for i in range(100)})
    db = DB.file(path, limit=2 << 20)
    tree = db.tree_map("t", cache_size=100_000)  # every node stays cached, dirty, until close
    with pytest.raises(CapacityError):  # the write cache's budget is spent, the store full
        for i in range(100, 100_000):
            tree[i] = os.urandom(50)  # pages that need about 5 MB
    with pytest.raises(CapacityError):
        db.close()
    assert db.closed and tree.closed
    with DB.file(path) as db:
        tree = db.tree_map("t")
        assert dict(tree.items()) == {i: i for i in range(100)}
        tree._check()
    with TreeMap(path=tmp_path / "tree", limit=2 << 20, cache_size=100_000) as tree:
        tree.update({i: i for i in range(100)})
    tree = TreeMap(path=tmp_path / "tree", limit=2 << 20, cache_size=100_000)
    with pytest.raises(CapacityError):  # dirty nodes past the budget that cannot be written
        for i in range(100, 100_000):
            tree[i] = os.urandom(50)
    with pytest.raises(CapacityError):
        tree.close()
    with TreeMap(path=tmp_path / "tree") as tree:
        assert len(tree) == 100


def test_a_failed_close_without_transactions_leaves_the_file_marked_open(tmp_path):
    path, rescued = tmp_path / "db", tmp_path / "rescued"
    with DB.file(path, limit=2 << 20, durability="none") as db:
        db.tree_map("t", cache_size=100_000).update({i: i for i in range(100)})
    db = DB.file(path, limit=2 << 20, durability="none")
    tree = db.tree_map("t", cache_size=100_000)
    with pytest.raises(CapacityError):  # dirty nodes past the budget that cannot be written
        for i in range(100, 100_000):
            tree[i] = os.urandom(50)
    with pytest.raises(CapacityError):
        db.close()  # the caches cannot be written: what the file holds is half of a flush
    with pytest.raises(CorruptionError, match="not closed cleanly.*salvage"):
        DB.file(path, durability="none")
    report = salvage(path, rescued)  # what the half flush left, checked entry by entry
    assert "not closed cleanly" in report.checksums and not report.complete


def test_a_failed_flush_at_close_leaves_the_file_marked_open(tmp_path, monkeypatch):
    path, rescued = tmp_path / "db", tmp_path / "rescued"
    db = DB.file(path, durability="none")
    table = db.hash_map("h")
    table.update({i: str(i) for i in range(1000)})
    db.flush()
    for i in range(10):
        table[i] = "new"
    write_table_and_header = WriteThroughWriter.write_table_and_header
    failures = []

    def disk_full_once(self, **options):
        if not failures:
            failures.append(options)
            raise OSError(28, "No space left on device")
        write_table_and_header(self, **options)

    monkeypatch.setattr(WriteThroughWriter, "write_table_and_header", disk_full_once)
    with pytest.raises(OSError, match="No space"):
        db.close()  # the flush fails; closing could have written the header, but must not
    assert failures == [{"open_for_writing": True}]
    with pytest.raises(CorruptionError, match="not closed cleanly"):
        DB.file(path, durability="none")
    report = salvage(path, rescued)
    assert report.recovered_entries == 1000 and "not closed cleanly" in report.checksums
    with DB.file(rescued) as db:
        assert all(db.hash_map("h")[i] in ("new", str(i)) for i in range(1000))


def test_a_failure_followed_by_a_successful_flush_closes_cleanly(tmp_path):
    path = tmp_path / "db"
    with DB.file(path, limit=1 << 20, durability="none") as db:
        table = db.hash_map("h")
        with pytest.raises(CapacityError):
            table.put_many(np.arange(200_000), ["x" * 10] * 200_000)
        table[1] = "kept"
    with DB.file(path, durability="none") as db:
        assert dict(db.hash_map("h").items()) == {1: "kept"}


@pytest.mark.parametrize("durability", ["commit", "none"])
def test_a_file_map_under_a_limit_fills_up_and_stays_whole(tmp_path, durability):
    """Filled batch by batch until CapacityError: the map is exactly as before the batch that
    failed, usable, and reopens so; its table grew to the largest size the limit allows, counted
    as the arena counts (the checksum extent grows with the file, and in commit mode the old
    table's space is reusable only after the commit)."""
    path, limit = tmp_path / "hash", 20 << 20
    model = {}
    with LongHashMap(value="int64", path=path, limit=limit, durability=durability) as table:
        with pytest.raises(CapacityError):
            for start in range(0, 10**7, 1000):
                keys = np.arange(start, start + 1000)
                table.put_many(keys, keys * 3)
                model.update(zip(keys.tolist(), (keys * 3).tolist()))
        assert len(table) == len(model) >= 0.45 * limit / (8 + 1 + 8)
        assert table[0] == 0 and table[len(model) - 1] == 3 * (len(model) - 1)
        table._check()
        del table[0]
        table[0] = 7
        model[0] = 7
        arena = table._store.arena
        assert arena.reserved_bytes <= limit
        arena._check()
    with LongHashMap(value="int64", path=path) as table:
        assert len(table) == len(model) and dict(table.items()) == model


def test_rollback_needs_commit_durability(tmp_path):
    with DB.file(tmp_path / "db", durability="none") as db:
        db.tree_map("t")[1] = 1
        db.commit()  # a flush without transactions
        with pytest.raises(TransactionError):
            db.rollback()
    with DB.memory() as db, pytest.raises(TransactionError):
        db.rollback()


def test_standalone_file_maps_commit_and_roll_back(tmp_path):
    with TreeMap(path=tmp_path / "tree", node_size=4) as tree:
        tree.update({i: i for i in range(100)})
        tree.commit()
        tree.delete_range(10, 90)
        tree.rollback()
        assert len(tree) == 100
        tree[500] = 500
    with TreeMap(path=tmp_path / "tree", node_size=4) as tree:
        assert len(tree) == 101 and tree[500] == 500
    with LongHashMap(path=tmp_path / "hash") as table:
        table.put_many(np.arange(1000), np.arange(1000).tolist())
        table.commit()
        table.clear()
        table.rollback()
        assert len(table) == 1000 and table[999] == 999
        table._check()
    with pytest.raises(ValueError, match="DB"):
        DB.memory().tree_map("t").commit()


# -- crashes ----------------------------------------------------------------------------------

def test_crash_after_commit_reopens_as_committed(tmp_path):
    path = tmp_path / "db"
    child = run_child(f"""
        import os
        from offheap import DB
        db = DB.file({str(path)!r})
        tree, table = db.tree_map("t", node_size=8), db.hash_map("h")
        tree.update({{i: "v" * (i % 30) for i in range(5000)}})
        table.update({{i: i * 2 for i in range(5000)}})
        db.commit()
        for i in range(5000):
            tree[i] = table[i] = "uncommitted"
        tree.flush()
        os._exit(0)
    """)
    assert child.returncode == 0, child.stderr
    with DB.file(path) as db:
        tree, table = db.tree_map("t"), db.hash_map("h")
        assert dict(tree.items()) == {i: "v" * (i % 30) for i in range(5000)}
        assert dict(table.items()) == {i: i * 2 for i in range(5000)}
        tree._check()


def test_unclean_none_mode_file_refuses_to_open_and_salvages(tmp_path):
    path, rescued = tmp_path / "db", tmp_path / "rescued"
    child = run_child(f"""
        import os
        from offheap import DB
        db = DB.file({str(path)!r}, durability="none")
        tree, table = db.tree_map("t", node_size=8), db.hash_map("h")
        tree.update({{i: str(i) for i in range(2000)}})
        table.update({{i: str(i) for i in range(2000)}})
        db.flush()
        os._exit(0)
    """)
    assert child.returncode == 0, child.stderr
    with pytest.raises(CorruptionError, match="salvage"):
        DB.file(path, durability="none")
    report = salvage(path, rescued)
    assert report.complete and not report.verified, str(report)
    assert "not closed cleanly" in report.checksums
    with DB.file(rescued) as db:
        assert dict(db.tree_map("t").items()) == {i: str(i) for i in range(2000)}
        assert dict(db.hash_map("h").items()) == {i: str(i) for i in range(2000)}


def test_salvage_skips_only_what_lies_on_a_page_that_fails_its_checksum(tmp_path):
    """A file closed cleanly, one live page damaged at a time: salvage copies every entry it
    can read from verified pages, exactly, and counts the rest as damaged, never as read."""
    path = tmp_path / "db"
    with DB.file(path) as db:
        db.tree_map("t", node_size=8).update({i: "v" * (i % 40) for i in range(3000)})
        db.hash_map("h").put_many(np.arange(3000), [f"value-{i}" * (i % 5) for i in range(3000)])
        db.hash_map("n", value="int64").put_many(np.arange(3000), np.arange(3000) * 2)
    step = 4  # a quarter of the 87 pages is enough to meet every structure
    pages = len(describe_source(str(path), None).live_pages[::step])
    damaged_somewhere = 0
    for collection, copied, truth in salvaged_collections(
            path, tmp_path, lambda db, name: dict(
                (db.tree_map if name == "t" else db.hash_map)(name).items()), step):
        lost = collection.damaged_entries + collection.damaged_records
        assert (len(copied) < len(truth)) == bool(lost or collection.error)
        damaged_somewhere += bool(lost)
    assert damaged_somewhere >= pages // 2


def salvaged_collections(path, workdir, read, step: int):
    """Flip one bit in every ``step``-th live page of the DB file ``path`` (closed cleanly), one
    page at a time, salvage it into ``workdir``, and yield ``(collection report, copied
    entries, entries of the clean file)`` for each collection of each copy, once the checks
    every copy passes hold: exactly that page failed its checksum, every entry copied is the
    clean file's, and nothing was skipped by the structural checks. ``read(db, name)`` is a
    collection's entries as a dict."""
    with DB.file(path, readonly=True) as db:
        truth = {name: read(db, name) for name in db.names()}
    clean = path.read_bytes()
    for number, page in enumerate(describe_source(str(path), None).live_pages[::step]):
        data = bytearray(clean)
        data[page + 77] ^= 0x04
        path.write_bytes(bytes(data))
        rescued = workdir / f"rescued-{number}"
        report = salvage(path, rescued)
        assert report.failed_pages == 1 and not report.verified, str(report)
        assert "1 pages failed their checksum" in report.checksums
        if report.error is not None:  # the store's index or metadata
            continue
        with DB.file(rescued, readonly=True) as db:
            for collection in report.collections:
                name = collection.name
                copied = read(db, name) if name in db else {}
                assert all(truth[name][k] == v for k, v in copied.items()), (page, name)
                assert collection.skipped_entries == collection.skipped_records == 0, str(report)
                yield collection, copied, truth[name]


def test_salvage_of_a_standalone_tree_keeps_its_kind(tmp_path):
    with TreeMap(key="str", value="int64", node_size=6, path=tmp_path / "tree") as tree:
        tree.update({f"k{i:04d}": i for i in range(500)})
    report = salvage(tmp_path / "tree", tmp_path / "copy")
    assert report.kind == "tree_map" and report.complete and report.recovered_entries == 500
    assert report.verified and "page checksums: verified" in str(report)
    with TreeMap(key="str", value="int64", node_size=6, path=tmp_path / "copy") as tree:
        assert tree["k0123"] == 123
    with pytest.raises(FileExistsError):
        salvage(tmp_path / "tree", tmp_path / "copy")


# -- readers and locks ------------------------------------------------------------------------

def test_second_writer_is_refused_in_another_process(tmp_path):
    path = tmp_path / "db"
    with DB.file(path) as db:
        db.tree_map("t")[1] = 1
        db.commit()
        child = run_child(f"""
            from offheap import DB
            from offheap.errors import LockedError
            try:
                DB.file({str(path)!r})
            except LockedError as exc:
                print("locked:", exc)
            reader = DB.file({str(path)!r}, readonly=True)
            print("reader sees", dict(reader.tree_map("t").items()))
        """)
        assert child.returncode == 0, child.stderr
        assert "locked:" in child.stdout and "reader sees {1: 1}" in child.stdout


def test_reader_follows_commits_between_operations(tmp_path):
    path = tmp_path / "db"
    with DB.file(path) as writer:
        tree, table = writer.tree_map("t", node_size=4), writer.hash_map("h")
        tree[1] = table[1] = "one"
        writer.commit()
        reader = DB.file(path, readonly=True)
        seen_tree, seen_table = reader.tree_map("t"), reader.hash_map("h")
        assert dict(seen_tree.items()) == {1: "one"} and seen_table[1] == "one"
        tree.update({i: i for i in range(2, 200)})
        table.put_many(np.arange(2, 5000), list(range(2, 5000)))
        assert len(seen_tree) == 1  # not committed yet
        writer.commit()
        assert len(seen_tree) == 199 and seen_tree.last_key() == 199
        assert len(seen_table) == 4999 and seen_table.get_many([1, 4999]) == ["one", 4999]
        seen_tree._check()
        writer.tree_map("later")[7] = 7
        writer.commit()
        assert reader.tree_map("later")[7] == 7
        reader.close()


def test_reader_iteration_spanning_a_commit_raises(tmp_path):
    path = tmp_path / "db"
    with DB.file(path) as writer:
        tree = writer.tree_map("t", node_size=4)
        tree.update({i: i for i in range(100)})
        writer.commit()
        with DB.file(path, readonly=True) as reader:
            iterator = iter(reader.tree_map("t"))
            assert next(iterator) == 0
            tree[1000] = 1000
            writer.commit()
            with pytest.raises(RuntimeError, match="committed"):
                list(iterator)
            assert list(reader.tree_map("t"))[-1] == 1000


def test_snapshot_holds_one_commit_across_operations(tmp_path):
    path = tmp_path / "db"
    with DB.file(path) as writer:
        tree = writer.tree_map("t", node_size=4)
        tree.update({i: i for i in range(100)})
        writer.commit()
        with DB.file(path, readonly=True) as reader:
            seen = reader.tree_map("t")
            with reader.snapshot():
                iterator = iter(seen)
                assert next(iterator) == 0
                tree[1000] = 1000
                committing = threading.Thread(target=writer.commit)
                committing.start()  # its checkpoint waits for the snapshot to end
                committing.join(0.3)
                assert committing.is_alive()
                assert list(iterator)[-1] == 99 and len(seen) == 100
            committing.join(30)
            assert not committing.is_alive() and len(seen) == 101
    with DB.file(path) as writer, pytest.raises(ValueError, match="read-only"):
        writer.snapshot()


def test_readers_never_see_half_a_commit(tmp_path):
    """A writer process moves amounts between accounts (the total stays 10,000) and keeps the
    TreeMap and the LongHashMap equal, committing each move; this process reads all the while."""
    path = tmp_path / "db"
    with DB.file(path) as db:
        db.tree_map("t", value="int64", node_size=4).update({i: 100 for i in range(100)})
        db.hash_map("h", value="int64").update({i: 100 for i in range(100)})
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import random, sys
        from offheap import DB
        rng = random.Random(5)
        with DB.file({str(path)!r}) as db:
            tree, table = db.tree_map("t"), db.hash_map("h")
            print("ready", flush=True)
            for _ in range(300):
                a, b = rng.sample(sorted(tree), 2)
                amount = rng.randrange(tree[a] + 1)
                emptied = amount == tree[a] and rng.random() < 0.5
                new_account = 1000 + rng.randrange(50) if rng.random() < 0.3 else None
                for mapping in (tree, table):
                    mapping[a] -= amount
                    if emptied:
                        del mapping[a]
                    mapping[b] = mapping.get(b, 0) + amount
                    if new_account is not None:
                        mapping.setdefault(new_account, 0)
                db.commit()
    """)], env=dict(os.environ, PYTHONPATH=REPOSITORY), stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "ready"
    reads = 0
    with DB.file(path, readonly=True) as reader:
        tree, table = reader.tree_map("t"), reader.hash_map("h")
        while writer.poll() is None or reads < 20:
            with reader.snapshot():
                items = dict(tree.items())
                assert sum(items.values()) == 10_000 and dict(table.items()) == items
            try:
                assert sum(tree.values()) == 10_000  # one section per leaf: may meet a commit
            except RuntimeError as exc:
                assert "committed" in str(exc)
            reads += 1
    assert writer.wait(60) == 0
    assert reads >= 20


def test_a_reader_keeps_the_file_it_opened_when_another_is_put_in_its_place(tmp_path):
    """Only a compaction flags the file it replaces (see the compaction tests); a file put at
    the path by other means leaves a reader on the file it opened, as any open file does."""
    path = tmp_path / "db"
    with DB.file(path) as db:
        db.tree_map("t")[1] = "old"
    with DB.file(tmp_path / "other") as db:
        db.tree_map("t")[1] = "new"
    with DB.file(path, readonly=True) as reader:
        tree = reader.tree_map("t")
        assert tree[1] == "old"
        os.replace(tmp_path / "other", path)
        assert tree[1] == "old"
    with DB.file(path, readonly=True) as reader:
        assert reader.tree_map("t")[1] == "new"


def test_writes_through_a_reader_are_refused(tmp_path):
    path = tmp_path / "db"
    with DB.file(path) as db:
        db.tree_map("t")[1] = 1
        db.hash_map("h")[1] = 1
    with DB.file(path, readonly=True) as reader:
        tree, table = reader.tree_map("t"), reader.hash_map("h")
        for write in (lambda: tree.__setitem__(2, 2), lambda: tree.__delitem__(1),
                      lambda: tree.update({3: 3}), lambda: tree.delete_range(0, 9),
                      lambda: table.put_many([1], [1]), lambda: table.pop(1),
                      reader.commit, reader.compact, reader.flush):
            with pytest.raises(ReadOnlyError, match="read-only") as refused:
                write()
            assert isinstance(refused.value, PermissionError)
            assert isinstance(refused.value, OffheapError)
        with pytest.raises(KeyError, match="cannot create"):
            reader.tree_map("new")
        assert dict(tree.items()) == {1: 1}


def test_standalone_readers(tmp_path):
    with TreeMap(path=tmp_path / "tree", value="int64") as tree:
        tree.update({i: i for i in range(50)})
    with LongHashMap(value="int64", path=tmp_path / "hash") as table:
        table.update({i: i for i in range(50)})
    with TreeMap.reader(tmp_path / "tree", value="int64") as tree, \
            LongHashMap.reader(tmp_path / "hash", "int64") as table:
        assert tree.floor_key(1000) == 49 and list(tree.irange(10, 12)) == [10, 11, 12]
        assert table[7] == 7 and sorted(table) == list(range(50))
        with pytest.raises(ReadOnlyError):
            table[1] = 2
        with pytest.raises(ReadOnlyError):
            tree.commit()
    assert tree.closed and table.closed


# -- space ------------------------------------------------------------------------------------

def test_compact_gives_space_back_and_keeps_everything(tmp_path):
    path = tmp_path / "db"
    with DB.file(path) as db:
        tree, table = db.tree_map("t", node_size=16), db.hash_map("h")
        tree.put_many(np.arange(100_000), [b"x" * 20] * 100_000)
        table.put_many(np.arange(100_000), ["y" * 30] * 100_000)
        db.commit()
        tree.delete_range(0, 49_999)
        table.delete_many(np.arange(50_000))
        db.commit()
        before = db.stats()
        db.compact()
        after = db.stats()
        assert after.file_bytes < before.file_bytes / 1.5
        assert after.free_bytes < before.free_bytes
        assert len(tree) == 50_000 and tree.first_key() == 50_000 and tree[99_999] == b"x" * 20
        assert len(table) == 50_000 and table[50_000] == "y" * 30
        tree._check()
        table._check()
        tree[1] = b"after compaction"
        assert not os.path.exists(str(path) + ".compact")
    with DB.file(path) as db:
        assert db.tree_map("t")[1] == b"after compaction" and len(db.hash_map("h")) == 50_000


def test_compact_is_refused_while_readers_hold_the_file(tmp_path):
    path = tmp_path / "db"
    with DB.file(path) as db:
        db.tree_map("t")[1] = 1
        db.commit()
        with DB.file(path, readonly=True):
            with pytest.raises(LockedError, match="read-only"):
                db.compact()
        db.compact()


def test_compaction_never_leaves_the_path_without_its_writer(tmp_path):
    """Another process tries to open the file for writing all through ten compactions (the
    old file, the new one renamed over it): every attempt finds it locked."""
    path, stop = tmp_path / "db", tmp_path / "stop"
    with DB.file(path) as db:
        db.tree_map("t").update({i: "x" * 30 for i in range(20_000)})
        db.hash_map("h").put_many(np.arange(20_000), ["y" * 30] * 20_000)
    prober = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os
        from offheap.errors import LockedError
        from offheap.arena.arena import Arena
        attempts = opened = 0
        print("ready", flush=True)
        while not os.path.exists({str(stop)!r}):
            attempts += 1
            try:
                Arena.file({str(path)!r}).close()
                opened += 1
            except LockedError:
                pass
        print(attempts, opened, flush=True)
    """)], env=dict(os.environ, PYTHONPATH=REPOSITORY), stdout=subprocess.PIPE, text=True)
    with DB.file(path) as db:
        assert prober.stdout.readline().strip() == "ready"
        tree, table = db.tree_map("t"), db.hash_map("h")
        for round_ in range(10):
            tree.delete_range(round_ * 1000, round_ * 1000 + 499)
            table.delete_many(np.arange(round_ * 1000, round_ * 1000 + 500))
            db.compact()
        stop.touch()
        attempts, opened = map(int, prober.stdout.readline().split())
        assert prober.wait(30) == 0
        assert len(tree) == len(table) == 15_000 and tree[999] == "x" * 30
    assert attempts > 10 and opened == 0


def test_a_reader_that_opens_before_the_rename_of_a_compaction_is_told(tmp_path, monkeypatch):
    path = tmp_path / "db"
    with DB.file(path) as db:
        db.tree_map("t")[1] = "old"
        db.commit()
        with DB.file(path, readonly=True) as reader:  # as if it opened after the check
            tree = reader.tree_map("t")
            assert tree[1] == "old"
            monkeypatch.setattr(Arena, "has_readers", lambda self: False)
            db.compact()
            with pytest.raises(ClosedError, match="replaced by another file"):
                tree[1]
        db.tree_map("t")[1] = "new"
    with DB.file(path, readonly=True) as reader:
        assert reader.tree_map("t")[1] == "new"


def test_stats_adds_up(tmp_path):
    with DB.file(tmp_path / "db") as db:
        db.tree_map("t").update({i: "v" for i in range(10_000)})
        db.hash_map("h").update({i: "w" * 40 for i in range(10_000)})
        db.commit()
        stats = db.stats()
        assert stats.collections["t"].n_entries == stats.collections["h"].n_entries == 10_000
        assert stats.collections["h"].live_bytes > 10_000 * 40
        assert stats.live_bytes >= sum(c.live_bytes for c in stats.collections.values())
        assert stats.reserved_bytes <= stats.file_bytes == stats.total_bytes
        assert stats.overhead_bytes >= 0
