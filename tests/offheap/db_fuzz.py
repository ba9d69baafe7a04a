"""Damaged DB and map files: each must open and read back exactly its original entries, or raise
CorruptionError (never another exception, a wrong entry, a hang or a crash).

``run_db_fuzz(trials, seed, workdir)`` is the core, shared by ``tests/offheap/test_db_fuzz.py``
and ``scripts/fuzz_files.py --mode db``. Source files: a commit-mode DB holding TreeMaps (int64
keys with object values and zlib pages, str keys with int64 values), LongHashMaps (object
values, many of them external records; int64 values) and a HashMap of str keys (a third of them
long keys' records) and object values, the same DB written with
``durability="none"`` and closed cleanly, and a standalone TreeMap and LongHashMap file. Each
trial damages a copy with one of :data:`arena_fuzz.MUTATIONS` (header, tags, live pages,
checksums, anywhere; truncation, zeroed ranges, garbage) and opens it read-only or as a writer,
reading every collection in full.
"""

from __future__ import annotations

import os
import random

import numpy as np

from offheap import DB, LongHashMap, TreeMap
from tests.offheap.arena_fuzz import (MUTATIONS, FuzzSummary, _write_sparse, count_outcome,
                                      describe_source, mutate)

N_ENTRIES = 1500
TREE_OPTIONS = {"objects": dict(key="int64", value="object", node_size=16, compression="zlib"),
                "names": dict(key="str", value="int64", node_size=8)}
HASH_OPTIONS = {"seen": dict(value="object"), "counts": dict(value="int64"),
                "users": dict(key="str", value="object")}


def _fill_db(db: DB, rng: np.random.Generator) -> None:
    keys = np.unique(rng.integers(-10**12, 10**12, N_ENTRIES))
    db.tree_map("objects", **TREE_OPTIONS["objects"]).put_many(
        keys, [("v", int(k) % 97) if k % 3 else "x" * int(k % 50) for k in keys.tolist()])
    db.tree_map("names", **TREE_OPTIONS["names"]).update(
        {f"name-{i:05d}": i * i for i in range(N_ENTRIES)})
    db.hash_map("seen", **HASH_OPTIONS["seen"]).put_many(
        keys, ["s" * int(k % 40) for k in keys.tolist()])
    db.hash_map("counts", **HASH_OPTIONS["counts"]).put_many(keys, keys * 3)
    db.hash_map("users", **HASH_OPTIONS["users"]).put_many(
        [f"user:{k}" if k % 3 else f"a user key of more than fifteen bytes {k}"
         for k in keys.tolist()], [int(k) % 1000 if k % 2 else "u" * int(k % 30)
                                   for k in keys.tolist()])


def db_content(db: DB) -> dict:
    """Every entry of every collection of a DB, in iteration order."""
    content = {}
    for name in db.names():
        opener = db.tree_map if name in TREE_OPTIONS else db.hash_map
        collection = opener(name)
        content[name] = sorted(collection.items(), key=repr) if name in HASH_OPTIONS \
            else list(collection.items())
    return content


def _build(workdir: str) -> list[tuple[str, object]]:
    """(kind, source file) pairs, kind in "db", "tree", "hash"."""
    rng = np.random.default_rng(11)
    sources = []
    for durability in ("commit", "none"):
        path = os.path.join(workdir, f"source-db-{durability}")
        with DB.file(path, durability=durability, allow_pickle=True) as db:
            _fill_db(db, rng)
        with DB.file(path, readonly=True, allow_pickle=True) as db:
            sources.append(("db", describe_source(path, db_content(db))))
    path = os.path.join(workdir, "source-tree")
    with TreeMap(path=path, allow_pickle=True, **TREE_OPTIONS["objects"]) as tree:
        tree.update({i * 7: ("t", i) for i in range(N_ENTRIES)})
    sources.append(("tree", describe_source(path, list(tree_items(path)))))
    path = os.path.join(workdir, "source-hash")
    with LongHashMap(path=path) as table:
        table.put_many(np.arange(N_ENTRIES) * 5, ["h" * (i % 30) for i in range(N_ENTRIES)])
    sources.append(("hash", describe_source(path, hash_items(path))))
    return sources


def tree_items(path: str, readonly: bool = True) -> list:
    options = TREE_OPTIONS["objects"]
    with TreeMap.reader(path, allow_pickle=True, **options) if readonly else \
            TreeMap(path=path, allow_pickle=True, **options) as tree:
        items = list(tree.items())
        if not readonly:
            tree._check()
            tree.rollback()
        return items


def hash_items(path: str, readonly: bool = True) -> list:
    with LongHashMap.reader(path) if readonly else LongHashMap(path=path) as table:
        items = sorted(table.items(), key=repr)
        if not readonly:
            table._check()
            table.rollback()
        return items


def _read(kind: str, path: str, readonly: bool):
    if kind == "tree":
        return tree_items(path, readonly)
    if kind == "hash":
        return hash_items(path, readonly)
    with DB.file(path, readonly=readonly, allow_pickle=True) as db:
        content = db_content(db)
        if not readonly and db.durability == "commit":
            db.rollback()
        return content


def run_db_fuzz(trials: int, seed: int, workdir: str) -> FuzzSummary:
    """Open ``trials`` damaged copies of the source files; see the module docstring."""
    sources = _build(workdir)
    rng = random.Random(seed)
    summary = FuzzSummary()
    path = os.path.join(workdir, "damaged")
    for trial in range(trials):
        kind, source = rng.choice(sources)
        mutation = MUTATIONS[trial % len(MUTATIONS)]
        _write_sparse(path, mutate(source.data, source, mutation, rng))
        readonly = rng.random() < 0.5
        summary.trials += 1
        count_outcome(summary, f"trial {trial} ({kind}, {mutation}, readonly={readonly})", mutation,
                      lambda: _read(kind, path, readonly), source.content)
    return summary
