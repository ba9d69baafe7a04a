"""Durable DB figures: commit latency and compaction, with peers measured in the same run.

    python benchmarks/durability_bench.py commit --repeats 20
    python benchmarks/durability_bench.py compact --n 1000000
    python benchmarks/durability_bench.py readers --n 1000000
    python benchmarks/durability_bench.py open --n 10000000
    python benchmarks/durability_bench.py recheck --repeats 40

commit: the latency of ``db.commit()`` for a small transaction (10 entries, half in a TreeMap,
half in a LongHashMap) and for a 100,000-entry one, on a DB already holding 1M entries; the time
to apply the changes is reported apart. Peers on the same disk: one ``os.fsync`` of a 4 KiB
write (the floor for any durable commit), SQLite in WAL mode with ``synchronous=FULL`` (stdlib
``sqlite3``, the same entries as ``INSERT OR REPLACE``), and ``durability="none"``'s flush.

compact: ``n`` entries in each map (TreeMap int64 -> 16-byte bytes, LongHashMap int64 -> 24-byte
str), commit, delete every other key, commit; then file bytes, live and free bytes from
``db.stats()`` before and after ``db.compact()``, and its time. Peer: SQLite holding the same
rows, file bytes before and after ``VACUUM``.

readers: ``n`` entries in each map (int64 -> int64); random scalar gets through the writer's own
maps (the peer), through a read-only reader (each get in its own read section), and through the
reader inside one ``snapshot()``; then a full iteration of each.

recheck: what a commit's re-checks cost, the header read back by the arena's parser and the
reopen of a collection closed before the commit, against the same commit with them replaced by
no-ops, alternating round by round in one process: one changed entry in a DB of 1M + 1M entries,
first with both maps open, then with the LongHashMap closed before each commit.

open: a DB of ``n`` entries in each map, opened with ``verify=True`` (every page checksummed)
against ``verify=False``, file bytes and seconds.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from offheap import DB  # noqa: E402

BASE_ENTRIES = 1_000_000


def _median_ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1e3:8.2f} ms (min {min(samples) * 1e3:.2f}, " \
           f"max {max(samples) * 1e3:.2f})"


def fsync_floor(directory: str, repeats: int) -> list[float]:
    path = os.path.join(directory, "fsync-probe")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    samples = []
    try:
        for i in range(repeats):
            os.pwrite(fd, bytes([i % 256]) * 4096, 0)
            start = time.perf_counter()
            os.fsync(fd)
            samples.append(time.perf_counter() - start)
    finally:
        os.close(fd)
    return samples


def offheap_commits(directory: str, durability: str, n_entries: int, repeats: int,
                    rng: np.random.Generator) -> tuple[list[float], list[float]]:
    """(apply seconds, commit seconds) per transaction of ``n_entries`` random keys."""
    path = os.path.join(directory, f"bench-{durability}.offheap")
    apply_times, commit_times = [], []
    with DB.file(path, durability=durability) as db:
        tree, table = db.tree_map("t", value="bytes"), db.hash_map("h", value="str")
        keys = np.arange(BASE_ENTRIES, dtype=np.int64)
        tree.put_many(keys, [b"x" * 16] * BASE_ENTRIES)
        table.put_many(keys, ["y" * 24] * BASE_ENTRIES)
        db.commit()
        for _ in range(repeats):
            batch = rng.integers(0, 4 * BASE_ENTRIES, n_entries)
            half = n_entries // 2
            start = time.perf_counter()
            if n_entries <= 100:
                for key in batch[:half].tolist():
                    tree[key] = b"z" * 16
                for key in batch[half:].tolist():
                    table[key] = "w" * 24
            else:
                tree.put_many(batch[:half], [b"z" * 16] * half)
                table.put_many(batch[half:], ["w" * 24] * (n_entries - half))
            applied = time.perf_counter()
            db.commit()
            apply_times.append(applied - start)
            commit_times.append(time.perf_counter() - applied)
    os.remove(path)
    return apply_times, commit_times


def sqlite_commits(directory: str, n_entries: int, repeats: int,
                   rng: np.random.Generator) -> list[float]:
    path = os.path.join(directory, "bench.sqlite")
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES (?, ?)",
                    ((k, b"x" * 16) for k in range(2 * BASE_ENTRIES)))
    con.execute("COMMIT")
    samples = []
    for _ in range(repeats):
        batch = rng.integers(0, 4 * BASE_ENTRIES, n_entries).tolist()
        con.execute("BEGIN")
        con.executemany("INSERT OR REPLACE INTO t VALUES (?, ?)", ((k, b"z" * 16) for k in batch))
        start = time.perf_counter()
        con.execute("COMMIT")
        samples.append(time.perf_counter() - start)
    con.close()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    return samples


def run_commit(repeats: int, directory: str) -> None:
    rng = np.random.default_rng(1)
    print(f"commit latency, median of {repeats}, on a DB of {BASE_ENTRIES:,} + {BASE_ENTRIES:,} "
          f"entries ({directory})")
    print(f"  fsync of one 4 KiB write (floor):       {_median_ms(fsync_floor(directory, repeats))}")
    for n_entries in (10, 100_000):
        apply_times, commit_times = offheap_commits(directory, "commit", n_entries, repeats, rng)
        print(f"  {n_entries:>7,} entries  offheap commit():     {_median_ms(commit_times)}; "
              f"applying them {statistics.median(apply_times) * 1e3:.1f} ms")
        _, flush_times = offheap_commits(directory, "none", n_entries, repeats, rng)
        print(f"  {n_entries:>7,} entries  durability='none' flush: {_median_ms(flush_times)}")
        print(f"  {n_entries:>7,} entries  SQLite WAL COMMIT:    "
              f"{_median_ms(sqlite_commits(directory, n_entries, repeats, rng))}")


def run_compact(n: int, directory: str) -> None:
    path = os.path.join(directory, "compact.offheap")
    keys = np.arange(n, dtype=np.int64)
    with DB.file(path) as db:
        tree, table = db.tree_map("t", value="bytes"), db.hash_map("h", value="str")
        tree.put_many(keys, [b"x" * 16] * n)
        table.put_many(keys, ["y" * 24] * n)
        db.commit()
        full = db.stats()
        for key in keys[::2].tolist():
            del tree[key]
        table.delete_many(keys[::2])
        db.commit()
        before = db.stats()
        start = time.perf_counter()
        db.compact()
        seconds = time.perf_counter() - start
        after = db.stats()
        assert len(tree) == len(table) == n - (n + 1) // 2
    os.remove(path)
    mib = 1 << 20
    print(f"compact: {n:,} entries in a TreeMap and a LongHashMap, every other key deleted")
    for label, s in (("full", full), ("half deleted", before), ("compacted", after)):
        print(f"  {label:13} file {s.file_bytes / mib:8.1f} MiB  live {s.live_bytes / mib:7.1f}  "
              f"free {s.free_bytes / mib:7.1f}  overhead {s.overhead_bytes / mib:6.1f}")
    print(f"  compact() took {seconds:.2f} s")
    sqlite_path = os.path.join(directory, "compact.sqlite")
    con = sqlite3.connect(sqlite_path, isolation_level=None)
    con.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
    con.execute("CREATE TABLE h (k INTEGER PRIMARY KEY, v TEXT)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO t VALUES (?, ?)", ((k, b"x" * 16) for k in range(n)))
    con.executemany("INSERT INTO h VALUES (?, ?)", ((k, "y" * 24) for k in range(n)))
    con.execute("COMMIT")
    con.execute("DELETE FROM t WHERE k % 2 = 0")
    con.execute("DELETE FROM h WHERE k % 2 = 0")
    deleted = os.path.getsize(sqlite_path)
    start = time.perf_counter()
    con.execute("VACUUM")
    vacuum_seconds = time.perf_counter() - start
    con.close()
    print(f"  SQLite peer: file {deleted / mib:.1f} MiB after the deletes, "
          f"{os.path.getsize(sqlite_path) / mib:.1f} MiB after VACUUM ({vacuum_seconds:.2f} s)")
    os.remove(sqlite_path)


def _timed_gets(mapping, keys: list) -> float:
    start = time.perf_counter()
    for key in keys:
        mapping[key]
    return (time.perf_counter() - start) / len(keys) * 1e9


def _timed_iteration(mapping) -> float:
    start = time.perf_counter()
    for _ in mapping.items():
        pass
    return time.perf_counter() - start


def _filled_db(path: str, n: int) -> None:
    keys = np.arange(n, dtype=np.int64)
    with DB.file(path) as db:
        db.tree_map("t", value="int64").put_many(keys, keys)
        db.hash_map("h", value="int64").put_many(keys, keys)


def run_readers(n: int, directory: str) -> None:
    path = os.path.join(directory, "readers.offheap")
    _filled_db(path, n)
    keys = np.random.default_rng(3).integers(0, n, 20_000).tolist()
    print(f"readers: {n:,} entries in a TreeMap and a LongHashMap (int64 -> int64), "
          f"{len(keys):,} random gets, ns per get; full iteration in s")
    with DB.file(path) as writer, DB.file(path, readonly=True) as reader:
        for name in ("t", "h"):
            opener = "tree_map" if name == "t" else "hash_map"
            own, seen = getattr(writer, opener)(name), getattr(reader, opener)(name)
            own[0], seen[0]  # warm the root path
            direct, guarded = _timed_gets(own, keys), _timed_gets(seen, keys)
            with reader.snapshot():
                held = _timed_gets(seen, keys)
            print(f"  {type(own).__name__:12} writer {direct:8.0f}   reader {guarded:8.0f}   "
                  f"reader in snapshot() {held:8.0f}   iteration: writer "
                  f"{_timed_iteration(own):.2f} s, reader {_timed_iteration(seen):.2f} s")
        writer.rollback()
    os.remove(path)


def run_open(n: int, directory: str) -> None:
    path = os.path.join(directory, "open.offheap")
    _filled_db(path, n)
    size = os.path.getsize(path)
    print(f"open: a DB of {n:,} + {n:,} entries, {size / (1 << 20):.0f} MiB")
    for verify in (True, False, True, False):
        start = time.perf_counter()
        with DB.file(path, readonly=True, verify=verify):
            seconds = time.perf_counter() - start
        print(f"  verify={verify!s:5}  {seconds:.3f} s  ({seconds / (size / (1 << 30)):.2f} s/GiB)")
    os.remove(path)


def _commit_seconds(db: DB, change) -> float:
    change()
    start = time.perf_counter()
    db.commit()
    return time.perf_counter() - start


def run_recheck(repeats: int, directory: str) -> None:
    from offheap.arena.filewriter import FileWriter

    check_seconds: list[float] = []

    def timed(check):
        def run(*args) -> None:
            start = time.perf_counter()
            check(*args)
            check_seconds.append(time.perf_counter() - start)
        return run

    originals = FileWriter.check_reopens, DB._check_closed
    checks = {"checked": (timed(originals[0]), timed(originals[1])),
              "unchecked": (lambda *args: None, lambda *args: None)}
    path = os.path.join(directory, "recheck.offheap")
    rng = np.random.default_rng(5)
    print(f"commit of one changed entry, DB of {BASE_ENTRIES:,} + {BASE_ENTRIES:,} entries, "
          f"median of {repeats} each, the two alternating")
    with DB.file(path) as db:
        keys = np.arange(BASE_ENTRIES, dtype=np.int64)
        db.tree_map("t", value="int64").put_many(keys, keys)
        db.hash_map("h", value="int64").put_many(keys, keys)
        db.commit()

        def change_open() -> None:
            db.hash_map("h")[int(rng.integers(BASE_ENTRIES))] = 1

        def change_then_close() -> None:
            table = db.hash_map("h")
            table[int(rng.integers(BASE_ENTRIES))] = 1
            table.close()

        for label, change in (("both maps open", change_open),
                              ("LongHashMap closed before it", change_then_close)):
            samples: dict[str, list[float]] = {name: [] for name in checks}
            check_seconds.clear()
            for _ in range(repeats):
                for name, (header_check, closed_check) in checks.items():
                    FileWriter.check_reopens, DB._check_closed = header_check, closed_check
                    samples[name].append(_commit_seconds(db, change))
            FileWriter.check_reopens, DB._check_closed = originals
            ratio = statistics.median(samples["checked"]) / statistics.median(samples["unchecked"])
            print(f"  {label:30} checked {_median_ms(samples['checked'])}   unchecked "
                  f"{_median_ms(samples['unchecked'])}   ratio {ratio:.3f}; the new checks "
                  f"themselves {sum(check_seconds) / repeats * 1e3:.3f} ms per commit")
    os.remove(path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("commit", "compact", "readers", "open", "recheck"))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--dir", help="directory for the files (default: a temporary one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="durability-bench-", dir=args.dir) as directory:
        {"commit": lambda: run_commit(args.repeats, directory),
         "compact": lambda: run_compact(args.n, directory),
         "readers": lambda: run_readers(args.n, directory),
         "open": lambda: run_open(args.n, directory),
         "recheck": lambda: run_recheck(args.repeats, directory)}[args.what]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
