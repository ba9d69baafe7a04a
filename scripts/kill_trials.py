"""Fault injection: kill a committing writer with SIGKILL at random moments, reopen, compare.

    python scripts/kill_trials.py --trials 100 --seed 1

A *child* process opens a commit-mode DB holding a TreeMap and a LongHashMap and runs
transactions in a loop: random sizes (one operation to thousands of entries), inserts, overwrites,
deletes, range deletes and bulk updates, values from empty strings to a few hundred bytes (so
the hash map's external value records move too), and now and then a ``db.compact()``. The parent
kills it with SIGKILL, reopens the file, and compares every entry with the model of the last
committed state. Half of the kills come after a random delay (while the child opens and
recovers the file, applies changes, commits or compacts), four in ten within a few
milliseconds of the child entering ``commit()``, one in ten inside ``compact()``.

How the check is exact. The DB holds its own transaction number (``txn[0]``), written in the same
transaction as the changes. The child appends to a side log ``("begin", T, operations)`` before
it applies transaction ``T``, ``("commit", T)`` just before it calls ``db.commit()`` and
``("committed", T)`` once the call has returned. A SIGKILL loses no byte that reached the kernel,
so the log is complete up to a torn last record at most, and its last record says where the kill
came: while applying (the reopened DB must be at ``T - 1``), inside ``commit()`` (``T - 1`` or
``T``: either is a correct outcome of a commit cut short), or after it (``T``). The reopened DB
names its transaction ``T_db``; it must be in that set, and its content must equal the model
replayed up to ``T_db``, entry for entry. Anything else is a loss: a wrong or missing entry, a
number outside the set, or a file that does not reopen.

Each trial continues from the state the previous one left (so recovery runs on files that were
themselves recovered); the parent verifies with its own model, then truncates the log.

``--durability none`` runs the same child without transactions (``commit()`` is a flush) and
checks the other promise: a file whose writer was killed must refuse to open with a
CorruptionError that names ``offheap.salvage``, and salvage must copy out only entries that are
right for some moment: every salvaged value must be one its key was given at some point (deleted
keys may come back from pages written before the delete; no value may be invented), and the
salvaged maps must pass their invariant checks. The salvaged file is where the next trial goes on.
"""

from __future__ import annotations

import argparse
import os
import pickle
import random
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
if str(REPOSITORY) not in sys.path:
    sys.path.insert(0, str(REPOSITORY))

from offheap import DB  # noqa: E402

KEY_SPACE = 20_000
_FRAME = struct.Struct("<II")  # payload length, crc32 of the payload
TREE_OPTIONS = dict(key="int64", value="object", node_size=16, cache_size=256)
HASH_OPTIONS = dict(value="object")


# -- the side log ---------------------------------------------------------------------------

def append_record(fd: int, record) -> None:
    """Append one framed record; a record torn by a kill fails its crc and ends the log."""
    payload = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
    os.write(fd, _FRAME.pack(len(payload), zlib.crc32(payload)) + payload)


def read_records(data: bytes) -> tuple[list, int]:
    """The complete records of a log, in order, and the bytes they take; a torn tail is left."""
    records, offset = [], 0
    while offset + _FRAME.size <= len(data):
        length, crc = _FRAME.unpack_from(data, offset)
        payload = data[offset + _FRAME.size: offset + _FRAME.size + length]
        if len(payload) < length or zlib.crc32(payload) != crc:
            break
        records.append(pickle.loads(payload))
        offset += _FRAME.size + length
    return records, offset


def wait_for_record(log_path: str, proc, stage: str, timeout: float) -> None:
    """Return as soon as the child logs a new record of ``stage`` ("commit": it is calling
    ``commit()``; "compact": ``compact()``), or it dies, or time runs out: the parent then
    kills it inside that call."""
    deadline = time.monotonic() + timeout
    with open(log_path, "rb") as log:
        pending = log.read()  # what was logged before: only a new "commit" counts
        pending = pending[read_records(pending)[1]:]
        while time.monotonic() < deadline and proc.poll() is None:
            pending += log.read()
            records, used = read_records(pending)
            pending = pending[used:]
            if records and records[-1][0] == stage:
                return
            time.sleep(0.0002)


# -- operations -----------------------------------------------------------------------------

def random_value(rng: random.Random):
    roll = rng.random()
    if roll < 0.3:
        return ""
    if roll < 0.5:
        return rng.randrange(-1000, 1000)
    if roll < 0.6:
        return None
    if roll < 0.8:
        return "v" * rng.randrange(1, 12)
    return rng.randbytes(rng.randrange(8, 300))


def random_transaction(rng: random.Random) -> list:
    """Operations of one transaction: mostly small, sometimes thousands of entries."""
    roll = rng.random()
    n_ops = 1 if roll < 0.3 else rng.randrange(2, 100) if roll < 0.85 else rng.randrange(100, 1000)
    ops = []
    for _ in range(n_ops):
        kind = rng.random()
        key = rng.randrange(KEY_SPACE)
        if kind < 0.35:
            ops.append(("tset", key, random_value(rng)))
        elif kind < 0.5:
            ops.append(("tdel", key))
        elif kind < 0.8:
            ops.append(("hset", key, random_value(rng)))
        elif kind < 0.95:
            ops.append(("hdel", key))
        elif kind < 0.97:
            ops.append(("tdelrange", key, key + rng.randrange(1, 300)))
        elif kind < 0.985:
            keys = sorted(rng.sample(range(KEY_SPACE), rng.randrange(100, 5000)))
            ops.append(("tupdate", keys, random_value(rng)))
        else:
            keys = rng.sample(range(KEY_SPACE), rng.randrange(100, 5000))
            ops.append(("hputmany", keys, [random_value(rng) for _ in keys]))
    return ops


def apply_ops(ops: list, tree, table) -> None:
    """Apply operations to a TreeMap and a LongHashMap, or to two dicts (the model)."""
    for op in ops:
        kind = op[0]
        if kind == "tset":
            tree[op[1]] = op[2]
        elif kind == "tdel":
            tree.pop(op[1], None)
        elif kind == "hset":
            table[op[1]] = op[2]
        elif kind == "hdel":
            table.pop(op[1], None)
        elif kind == "tdelrange":
            for key in range(op[1], op[2] + 1):
                tree.pop(key, None)
        elif kind == "tupdate":
            tree.update((key, op[2]) for key in op[1])
        elif kind == "hputmany":
            table.update(zip(op[1], op[2]))
        else:
            raise ValueError(f"unknown operation {kind!r}")


def apply_ops_to_db(ops: list, tree, table) -> None:
    """Like :func:`apply_ops`, through the maps' own bulk and range calls where they have one."""
    import numpy as np

    plain = []
    for op in ops:
        if op[0] == "tdelrange":
            apply_ops(plain, tree, table)
            plain = []
            tree.delete_range(op[1], op[2])
        elif op[0] == "tupdate":
            apply_ops(plain, tree, table)
            plain = []
            tree.put_many(np.array(op[1], np.int64), [op[2]] * len(op[1]))
        elif op[0] == "hputmany":
            apply_ops(plain, tree, table)
            plain = []
            table.put_many(op[1], op[2])
        else:
            plain.append(op)
    apply_ops(plain, tree, table)


# -- child ----------------------------------------------------------------------------------

def open_maps(db: DB):
    return db.tree_map("tree", **TREE_OPTIONS), db.hash_map("hash", **HASH_OPTIONS), \
        db.hash_map("txn", value="int64")


def child(db_path: str, log_path: str, seed: int, compact_every: int,
          durability: str = "commit") -> None:
    """Commit transactions until killed; announce on stdout once imports are done."""
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    rng = random.Random(seed)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    db = DB.file(db_path, durability=durability)
    append_record(log, ("opened", 0))
    tree, table, txn = open_maps(db)
    number = txn.get(0, 0)
    while True:
        number += 1
        ops = random_transaction(rng)
        append_record(log, ("begin", number, ops))
        apply_ops_to_db(ops, tree, table)
        txn[0] = number
        append_record(log, ("commit", number))
        db.commit()
        append_record(log, ("committed", number))
        if compact_every and rng.randrange(compact_every) == 0:
            append_record(log, ("compact", number))
            db.compact()
            append_record(log, ("compacted", number))


# -- parent ---------------------------------------------------------------------------------

@dataclass
class Outcome:
    trials: int = 0
    losses: int = 0
    transactions_checked: int = 0
    kills_inside_commit: int = 0  # of which the commit had landed:
    commits_landed: int = 0
    kills_inside_compact: int = 0
    salvaged_entries: int = 0  # durability="none": entries salvage copied, and skipped
    salvage_skips: int = 0
    salvage_refused: int = 0  # files salvage could not read at all (not a wrong answer)
    salvage_store_lost: int = 0  # files whose record store salvage could not read (0 copied)
    details: list = field(default_factory=list)


def allowed_numbers(records: list, start: int) -> tuple[set[int], dict[int, list], str]:
    """The transaction numbers the reopened DB may hold, the logged operations by number, and
    where the kill came ("apply", "commit", "compact" or "after")."""
    ops_of, last = {}, ("committed", start)
    for record in records:
        if record[0] == "begin":
            ops_of[record[1]] = record[2]
        if record[0] != "opened":
            last = record[:2]
    stage, number = last
    if stage == "begin":
        return {number - 1}, ops_of, "apply"
    if stage == "commit":
        return {number - 1, number}, ops_of, "commit"
    return {number}, ops_of, "compact" if stage == "compact" else "after"


def verify(db_path: str, model_tree: dict, model_table: dict, start: int, records: list,
           outcome: Outcome) -> int:
    """Reopen, check the transaction number and every entry; return the number found."""
    allowed, ops_of, stage = allowed_numbers(records, start)
    try:
        db = DB.file(db_path)
    except Exception as exc:  # any failure to reopen is a loss, whatever its type
        outcome.losses += 1
        outcome.details.append(f"trial {outcome.trials}: reopen failed: {exc!r}")
        return start
    with db:
        tree, table, txn = open_maps(db)
        found = txn.get(0, 0)
        if found not in allowed:
            outcome.losses += 1
            outcome.details.append(f"trial {outcome.trials}: transaction {found}, "
                                   f"expected one of {sorted(allowed)}")
        for number in range(start + 1, found + 1):
            apply_ops(ops_of.get(number, []), model_tree, model_table)
        if stage == "commit":
            outcome.kills_inside_commit += 1
            outcome.commits_landed += found == max(allowed)
        outcome.kills_inside_compact += stage == "compact"
        outcome.transactions_checked += found - start
        same_tree = list(tree.items()) == sorted(model_tree.items())
        same_table = len(table) == len(model_table) and dict(table.items()) == model_table
        if not (same_tree and same_table):
            outcome.losses += 1
            outcome.details.append(f"trial {outcome.trials}: content differs at transaction "
                                   f"{found} (tree equal: {same_tree}, hash equal: {same_table})")
        tree._check()
        table._check()
        db.rollback()  # the check changed nothing; leave the file exactly as recovered
    return found


def value_history(history: tuple[dict, dict], ops: list) -> None:
    """Add every value ``ops`` give a key to ``history`` (tree, hash): key -> set of values."""
    tree, table = history
    for op in ops:
        if op[0] == "tset":
            tree.setdefault(op[1], set()).add(op[2])
        elif op[0] == "hset":
            table.setdefault(op[1], set()).add(op[2])
        elif op[0] == "tupdate":
            for key in op[1]:
                tree.setdefault(key, set()).add(op[2])
        elif op[0] == "hputmany":
            for key, value in zip(op[1], op[2]):
                table.setdefault(key, set()).add(value)


def verify_unclean(db_path: str, history: tuple[dict, dict], records: list,
                   outcome: Outcome) -> None:
    """Without transactions: the file must refuse to open, and salvage must invent nothing.

    A file may open cleanly only if the writer never had it open (killed while opening) or was
    killed inside ``compact()`` after the compacted copy, closed cleanly, took its place.
    """
    from offheap import salvage
    from offheap.errors import CorruptionError

    for record in records:
        if record[0] == "begin":
            value_history(history, record[2])
    opened = any(record[0] == "opened" for record in records)
    compacting = bool(records) and records[-1][0] == "compact"
    try:
        DB.file(db_path, durability="none").close()
    except CorruptionError as exc:
        if "salvage" not in str(exc):
            outcome.losses += 1
            outcome.details.append(f"trial {outcome.trials}: unclear error: {exc}")
    else:
        if opened and not compacting:
            outcome.losses += 1
            outcome.details.append(f"trial {outcome.trials}: a file left open for writing "
                                   f"opened without complaint")
        _check_nothing_invented(db_path, history, outcome, durability="none")
        return
    rescued = db_path + ".rescued"
    try:
        report = salvage(db_path, rescued)
    except CorruptionError as exc:  # the arena could not even walk the file: nothing copied
        outcome.salvage_refused += 1
        outcome.details.append(f"trial {outcome.trials}: salvage could not read the file: {exc}")
        os.remove(db_path)  # the next trial starts from an empty file
        return
    outcome.salvaged_entries += report.recovered_entries
    if report.error is not None:
        outcome.salvage_store_lost += 1
        outcome.details.append(f"trial {outcome.trials}: salvage found no readable store: "
                               f"{report.error}")
    outcome.salvage_skips += sum(c.skipped_entries + c.skipped_records + c.damaged_entries
                                 + c.damaged_records for c in report.collections)
    _check_nothing_invented(rescued, history, outcome, durability="commit")
    os.replace(rescued, db_path)


def _check_nothing_invented(path: str, history: tuple[dict, dict], outcome: Outcome,
                            durability: str) -> None:
    """Every value in the file's maps is one its key was given at some point; invariants hold."""
    with DB.file(path, durability=durability) as db:
        tree, table, _ = open_maps(db)
        for name, mapping, seen in (("tree", tree, history[0]), ("hash", table, history[1])):
            invented = [(k, v) for k, v in mapping.items() if v not in seen.get(k, ())]
            if invented:
                outcome.losses += 1
                outcome.details.append(f"trial {outcome.trials}: {name} values no key ever had, "
                                       f"e.g. {invented[0]!r}")
        tree._check()
        table._check()


def run_trials(trials: int, seed: int, directory: str, max_delay: float = 1.0,
               compact_every: int = 40, progress: bool = True,
               durability: str = "commit") -> Outcome:
    rng = random.Random(seed)
    db_path, log_path = os.path.join(directory, "trial.offheap"), os.path.join(directory, "log")
    with DB.file(db_path, durability=durability) as db:
        open_maps(db)
    model_tree: dict = {}
    model_table: dict = {}
    history: tuple[dict, dict] = ({}, {})
    number = 0
    outcome = Outcome()
    for trial in range(trials):
        outcome.trials = trial + 1
        open(log_path, "wb").close()
        aim = rng.random()  # < 0.5 anywhere, < 0.9 inside commit(), else inside compact()
        proc = subprocess.Popen(
            [sys.executable, __file__, "--child", "--db", db_path, "--log", log_path,
             "--seed", str(rng.getrandbits(32)), "--durability", durability,
             "--compact-every", str(2 if aim >= 0.9 and compact_every else compact_every)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        if ready:
            proc.stdout.readline()
        if aim < 0.5:  # anywhere: while opening (recovering), applying, committing, compacting
            time.sleep(rng.uniform(0, max_delay) if aim < 0.4 else rng.uniform(0, 0.05))
        elif aim < 0.9:  # inside commit(): most commits take a few milliseconds
            time.sleep(rng.uniform(0, max_delay))
            wait_for_record(log_path, proc, "commit", timeout=10)
            time.sleep(rng.uniform(0, 0.003) if rng.random() < 0.7 else rng.uniform(0, 0.03))
        else:  # inside compact(): tens to hundreds of milliseconds
            wait_for_record(log_path, proc, "compact", timeout=10)
            time.sleep(rng.uniform(0, 0.3))
        proc.send_signal(signal.SIGKILL)
        _, stderr = proc.communicate()
        if proc.returncode != -signal.SIGKILL:
            outcome.losses += 1
            outcome.details.append(f"trial {trial + 1}: the child ended by itself "
                                   f"(code {proc.returncode}): {stderr.decode()[-2000:]}")
        with open(log_path, "rb") as log:
            records, _ = read_records(log.read())
        if durability == "none":
            verify_unclean(db_path, history, records, outcome)
            if progress:
                print(f"trial {trial + 1}/{trials}: {outcome.salvaged_entries} entries "
                      f"salvaged so far, losses {outcome.losses}", flush=True)
            continue
        number = verify(db_path, model_tree, model_table, number, records, outcome)
        if progress:
            print(f"trial {trial + 1}/{trials}: transaction {number}, "
                  f"{len(model_tree)} tree and {len(model_table)} hash entries, "
                  f"losses {outcome.losses}", flush=True)
    return outcome


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-delay", type=float, default=1.0,
                        help="seconds after the child is ready within which it is killed")
    parser.add_argument("--compact-every", type=int, default=40,
                        help="a compaction after about one commit in this many (0: never)")
    parser.add_argument("--durability", choices=("commit", "none"), default="commit")
    parser.add_argument("--dir", help="keep the files here instead of a temporary directory")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.db, args.log, args.seed, args.compact_every, args.durability)
        return 0
    directory = args.dir or tempfile.mkdtemp(prefix="kill-trials-")
    os.makedirs(directory, exist_ok=True)
    started = time.perf_counter()
    try:
        outcome = run_trials(args.trials, args.seed, directory, args.max_delay,
                             args.compact_every, durability=args.durability)
    finally:
        if not args.dir:
            shutil.rmtree(directory, ignore_errors=True)
    if args.durability == "none":
        print(f"{outcome.trials} trials without transactions: {outcome.salvaged_entries} "
              f"entries salvaged, {outcome.salvage_skips} entries or records skipped, "
              f"{outcome.salvage_refused} files salvage could not read, "
              f"{outcome.salvage_store_lost} whose record store it could not read, "
              f"losses: {outcome.losses} ({time.perf_counter() - started:.0f} s)")
    else:
        print(f"{outcome.trials} trials, {outcome.transactions_checked} committed transactions "
              f"checked, {outcome.kills_inside_commit} kills inside commit() "
              f"({outcome.commits_landed} of those commits had landed), "
              f"{outcome.kills_inside_compact} inside compact(), "
              f"losses: {outcome.losses} ({time.perf_counter() - started:.0f} s)")
    for line in outcome.details:
        print("  " + line)
    return 1 if outcome.losses else 0


if __name__ == "__main__":
    sys.exit(main())
