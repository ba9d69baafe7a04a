"""Salvage: copy what is still consistent out of a damaged file into a new one (layer 7).

``salvage(src, dst)`` is the way back from a file that will not open: one written with
``durability="none"`` that was not closed cleanly (the writer crashed or was killed), or one
whose pages fail their checksums. It opens ``src`` read-only with ``recover=True`` (``src`` is
never changed), which checks every page's checksum where the checksums mean something and notes
what fails instead of raising (:attr:`offheap.arena.Arena.damage`); the report says what was
checked (:attr:`SalvageReport.checksums`). It reads every collection *defensively*, inside one
read section (a writer's commit waits), and writes what passes into a fresh file at ``dst``
with ``durability="commit"``, of the same kind as ``src``: a DB, a standalone TreeMap, or a
standalone hash map or set (LongHashMap, LongHashSet, HashMap, HashSet). It returns a
:class:`SalvageReport`.

Nothing is copied wrong; what cannot be shown consistent is skipped and counted:

- Pages that failed their checksum: a record whose bytes, or whose entry in the record index,
  touch such a page is not read at all (a tree node is skipped with everything below it), nor
  is a hash slot whose key, distance or value word does; these are counted apart
  (``damaged_records``, ``damaged_entries``). Damaged store metadata (the arena's root) or a
  damaged collection metadata record means nothing of that store or collection is read.
- TreeMap: the tree is walked from the root its metadata names, each node checked for its
  place in the tree, and a node that fails is skipped with everything below it
  (:mod:`offheap.treemap.salvage` has the checks). The keys it copies rise.
- LongHashMap, HashMap and their sets: the checks of :mod:`offheap.hashmap.salvage` (an entry
  must be live, pointed at from an index slot, its key unique and found by a lookup, its key
  and value decodable: a long key's record too). A keyed copy hashes under a seed of its own.
- Pickled values are copied as their bytes (:mod:`offheap.store.pickled`): salvage never
  unpickles, so a crafted source runs no code, and reading them from the copy needs
  ``allow_pickle=True`` as from the source. A pickle that does not load is copied as it is and
  fails its own read later.

Every record is read through :meth:`RecordStore.get_checked`, and a decoder meeting damaged bytes
may raise anything, so one record's failure is caught as ``Exception`` around that record alone,
counted, and the walk goes on.

In a file written with ``durability="none"`` a crash leaves whatever the last flush wrote: changes
still in a write cache, and metadata newer than the last flush, are gone. Salvage recovers a
consistent subset of what reached the file, not the state at the moment of the crash.

What the checks cannot see: without checksums, a flipped bit inside a value that still decodes
(a digit of a number, a byte of a string) looks like any other value. A none-mode file left open
has checksums only as of its last clean close, so it is read with the structural checks alone,
and the report says so; every other file has each page it is read from verified.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


from offheap.db.catalog import CatalogEntry, parse_catalog
from offheap.db.database import DB
from offheap.db.kinds import (
    HASH_MAP,
    HASH_SET,
    KEYED_HASH_MAP,
    KEYED_HASH_SET,
    KINDS,
    TREE_MAP,
    TREE_SET,
    CollectionKind,
)
from offheap.errors import CorruptionError
from offheap.hashmap import salvage as hash_salvage
from offheap.hashmap.keyedlayout import KeyedMeta, parse_meta as parse_keyed_meta
from offheap.hashmap.layout import SET_VALUE_TYPE, meta_version, parse_meta as parse_table_meta
from offheap.hashmap.layout import TableMeta, TableMetaV1, parse_meta_v1
from offheap.hashmap.table import table_serializer
from offheap.arena.damage import FileDamage
from offheap.arena.arena import Arena
from offheap.arena.recovery import log_path
from offheap.store.records import RecordStore, Span
from offheap.treemap.salvage import RecordReading, copy_tree, tree_meta

_COMMIT_EVERY = 1 << 20  # entries copied between two commits of the destination


@dataclass
class CollectionReport:
    """What salvage did with one collection."""

    name: str
    kind: str  # "tree_map", "hash_map", "tree_set", "hash_set", "keyed_hash_map", "keyed_hash_set"
    expected_entries: int | None = None  # what the metadata claimed (None: unreadable)
    recovered_entries: int = 0
    skipped_entries: int = 0  # read but rejected: misplaced, duplicated, out of order, bad value
    skipped_records: int = 0  # nodes or value records that could not be read or failed checks
    damaged_entries: int = 0  # hash slots or value records on a page that failed its checksum
    damaged_records: int = 0  # tree nodes on such a page (skipped with their subtree)
    error: str | None = None  # why nothing at all could be read

    @property
    def complete(self) -> bool:
        """Every entry the metadata promised was recovered and nothing was skipped."""
        return (self.error is None and not self.skipped_entries and not self.skipped_records
                and not self.damaged_entries and not self.damaged_records
                and self.recovered_entries == self.expected_entries)


@dataclass
class SalvageReport:
    """The outcome of :func:`salvage`: one :class:`CollectionReport` per collection found."""

    source: str
    destination: str
    kind: str  # "db" or a collection kind (as CollectionReport.kind)
    checksums: str = "verified"  # else what failed, or why the pages were read without them
    failed_pages: int = 0  # live pages whose checksum failed (what touches them was skipped)
    lost_bytes: int = 0  # file bytes no intact extent tag covers (the extents there are lost)
    collections: list[CollectionReport] = field(default_factory=list)
    error: str | None = None  # why the source's store could not be read at all

    @property
    def verified(self) -> bool:
        """Every live page passed its checksum and every extent tag its checks (a file closed
        cleanly and undamaged)."""
        return self.checksums == "verified"

    @property
    def recovered_entries(self) -> int:
        return sum(c.recovered_entries for c in self.collections)

    @property
    def complete(self) -> bool:
        return self.error is None and all(c.complete for c in self.collections)

    def __str__(self) -> str:
        lines = [f"salvage {self.source} -> {self.destination} ({self.kind}): "
                 f"{self.recovered_entries:,} entries recovered"
                 + ("" if self.error is None else f"; {self.error}"),
                 f"  page checksums: {self.checksums}"]
        for c in self.collections:
            expected = "?" if c.expected_entries is None else f"{c.expected_entries:,}"
            line = (f"  {c.name} ({c.kind}): {c.recovered_entries:,} of {expected} entries, "
                    f"{c.skipped_entries:,} entries and {c.skipped_records:,} records skipped")
            if c.damaged_entries or c.damaged_records:
                line += (f", {c.damaged_entries:,} entries and {c.damaged_records:,} records on "
                         f"pages that failed their checksum")
            lines.append(line + ("" if c.error is None else f"; {c.error}"))
        return "\n".join(lines)


def salvage(src, dst) -> SalvageReport:
    """Copy every consistent entry of file ``src`` into a new file ``dst``; see the module doc.

    ``dst`` must not exist (FileExistsError). Raises :class:`CorruptionError` only when ``src``
    cannot be read as an arena at all (bad magic, unreadable header, checksum extent or root
    extent gone); any damage beyond that is reported, not raised.

    The copy is written under ``dst + PARTIAL_SUFFIX`` and gets its name ``dst`` only once it is
    complete and closed (a hard link, which never replaces a file that appeared meanwhile), so a
    salvage killed half-way leaves no complete-looking ``dst``; a rerun removes the partial
    copy a killed run left and starts again.
    """
    src, dst = os.fspath(src), os.fspath(dst)
    if os.path.exists(dst):
        raise FileExistsError(f"salvage writes a new file; {dst!r} already exists")
    partial = dst + PARTIAL_SUFFIX
    _remove_file_and_log(partial)  # what a killed salvage left
    try:
        report = _salvage_into(src, partial)
        report.destination = dst
        _publish(partial, dst)
    finally:
        _remove_file_and_log(partial)
    return report


def _salvage_into(src: str, dst: str) -> SalvageReport:
    """The work of :func:`salvage`, writing the copy at ``dst``."""
    arena = Arena.file(src, readonly=True, recover=True)
    try:
        with arena.read_section():
            damage = arena.damage
            assert damage is not None, "a recover=True open always notes what it found"
            report = SalvageReport(src, dst, "db", _describe_checksums(src, damage),
                                   len(damage.failed_pages), damage.lost_bytes)
            try:
                if damage.root_failed:
                    raise CorruptionError("its metadata (the arena's root) lies on a page that "
                                          "failed its checksum")
                store = RecordStore.open_damaged(arena)
            except CorruptionError as exc:
                report.error = f"the record store is unreadable: {exc}"
                DB.file(dst).close()
                return report
            _salvage_store(store, dst, report)
            return report
    finally:
        arena.close()


PARTIAL_SUFFIX = ".salvage-partial"
"""Where :func:`salvage` writes its copy until the copy is complete."""


def _remove_file_and_log(path: str) -> None:
    for name in (path, log_path(path)):
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass


def _publish(partial: str, dst: str) -> None:
    """Give the complete copy at ``partial`` the name ``dst``, durably; FileExistsError if a
    file took that name meanwhile (it is never replaced)."""
    os.link(partial, dst)
    directory = os.open(os.path.dirname(os.path.abspath(dst)), os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _describe_checksums(path: str, damage: FileDamage) -> str:
    """What :attr:`SalvageReport.checksums` says about the pages salvage reads."""
    if damage.clean:
        return "verified"
    if damage.left_open:
        notes = [f"not used ({path!r} was not closed cleanly: a writer with durability='none' "
                 f"had it open, so its checksums describe its last clean close; structural "
                 f"checks only)"]
    elif not damage.checked:
        notes = ["not checked"]
    elif damage.failed_pages:
        notes = [f"{len(damage.failed_pages):,} pages failed their checksum (at offsets "
                 + ", ".join(f"{o}+{n}" for o, n in damage.failed_ranges[:5])
                 + (", ..." if len(damage.failed_ranges) > 5 else "")
                 + "): every record and slot on them was skipped; every other page passed"]
    else:
        notes = ["every live page passed"]
    if damage.checked and not damage.table_intact:
        notes.append("the checksum extent fails its own crc, so some of the pages it fails may "
                     "be intact")
    if damage.lost_ranges:
        notes.append(f"{damage.lost_bytes:,} bytes lie where no intact extent tag is (from "
                     f"offset {damage.lost_ranges[0][0]}): the extents there are lost")
    return "; ".join(notes)


class _DamagedRecord(CorruptionError):
    """A record, or its entry in the record index, lies on a page that failed its checksum."""


def _read_record(store: RecordStore, recid: int) -> bytes:
    """Record ``recid`` through :meth:`RecordStore.get_checked`, refused with
    :class:`_DamagedRecord` when its bytes or its index entry touch a page that failed its
    checksum. The index entry is checked first: a damaged address may point anywhere.
    """
    arena = store.arena
    if arena.damage is None or not arena.damage.failed_pages:
        return store.get_checked(recid)
    if any(_touches_failed_page(arena, span) for span in store.index_entry_location(recid)):
        raise _DamagedRecord(f"record {recid}'s index entry lies on a page that failed its "
                             f"checksum")
    location = store.record_location(recid)
    if location is not None and _touches_failed_page(arena, location):
        raise _DamagedRecord(f"record {recid} lies on a page that failed its checksum")
    return store.get_checked(recid)


def _touches_failed_page(arena: Arena, span: Span) -> bool:
    return bool(arena.damaged_items(span.extent, span.nbytes, 1, span.start)[0])


_TREE_READING = RecordReading(_read_record, (_DamagedRecord,))


def _salvage_store(store: RecordStore, dst: str, report: SalvageReport) -> None:
    root = store.root
    try:
        catalog = parse_catalog(root)
    except CorruptionError:
        catalog = None
    if catalog is not None:
        with DB.file(dst) as target:
            for name, entry in sorted(catalog.items()):
                _copy_db_entry(store, name, entry, target, report)
        return
    for kind in KINDS.values():
        try:
            meta_recid = kind.standalone_meta_recid(root)
        except CorruptionError:
            continue
        kind = _standalone_kind(store, kind, meta_recid)
        report.kind = kind.name
        _copy_standalone(store, kind, meta_recid, dst, report)
        return
    report.error = "the store root names no DB catalog and no map"
    DB.file(dst).close()


# -- DB and standalone files ------------------------------------------------------------------

def _standalone_kind(store: RecordStore, kind: CollectionKind[Any, Any],
                     meta_recid: int) -> CollectionKind[Any, Any]:
    """The kind of a standalone file whose root ``kind`` reads: the root of every hash file is
    a LongHashMap's, told apart by its table's metadata: a keyed table's magic (HashMap,
    HashSet), and a set's value type. (A TreeSet's file is a TreeMap of ``b""`` values and is
    salvaged as one, which ``TreeSet(path=...)`` opens.)"""
    if kind is not HASH_MAP:
        return kind
    try:
        record = _read_record(store, meta_recid)
    except Exception:  # a damaged record: the map's walker reports it
        return kind
    try:
        keyed = parse_keyed_meta(record)
        return KEYED_HASH_SET if keyed.table.value == SET_VALUE_TYPE else KEYED_HASH_MAP
    except ValueError:  # not a keyed table's (CorruptionError is a ValueError)
        pass
    try:
        if meta_version(record) == 2 and parse_table_meta(record).value == SET_VALUE_TYPE:
            return HASH_SET
    except Exception:  # a damaged record: the map's walker reports it
        pass
    return kind


@dataclass(frozen=True)
class _KindSalvage:
    """How salvage reads one registered kind defensively (the walkers below)."""

    read_meta: Callable[[RecordStore, int, CollectionReport], Any]
    """``read_meta(store, meta_recid, report)``: the checked metadata, or None (and
    ``report.error`` set) when it cannot be trusted."""
    copy_options: Callable[[Any], dict[str, Any]]
    """The options the copy is created with, from the metadata: the fixed ones."""
    copy: Callable[[RecordStore, Any, Any, CollectionReport, Callable[[], None]], None]
    """``copy(store, meta, destination, report, commit)``: every entry that passes."""


def _copy_db_entry(store: RecordStore, name: str, entry: CatalogEntry, target: DB,
                   report: SalvageReport) -> None:
    collection = CollectionReport(name, entry["kind"])
    report.collections.append(collection)
    kind = KINDS.get(entry["kind"])
    if kind is None:
        collection.error = f"unknown collection kind {entry['kind']!r}"
    else:
        walker = _SALVAGE[kind.name]
        meta = walker.read_meta(store, entry["meta_recid"], collection)
        if meta is not None:
            fixed = walker.copy_options(meta)
            try:
                copy = target._collection(name, kind, {**entry["options"], **fixed})
            except (TypeError, ValueError):  # damaged runtime options: the fixed ones suffice
                copy = target._collection(name, kind, fixed)
            walker.copy(store, meta, copy, collection, target.commit)
    target.commit()


def _copy_standalone(store: RecordStore, kind: CollectionKind[Any, Any], meta_recid: int,
                     dst: str, report: SalvageReport) -> None:
    collection = CollectionReport(kind.name, kind.name)
    report.collections.append(collection)
    walker = _SALVAGE[kind.name]
    meta = walker.read_meta(store, meta_recid, collection)
    options = {} if meta is None else walker.copy_options(meta)
    with kind.collection(path=dst, **options) as copy:
        if meta is not None:
            walker.copy(store, meta, copy, collection, copy.commit)


# -- LongHashMap ------------------------------------------------------------------------------

def _table_meta(store: RecordStore, meta_recid: int, report: CollectionReport,
                keyed: bool = False):
    """The checked metadata of a LongHashMap's or LongHashSet's table (a
    :class:`~offheap.hashmap.keyedlayout.KeyedMeta` when ``keyed``: a HashMap's or HashSet's),
    or None with ``report.error`` set."""
    meta: KeyedMeta | TableMeta | TableMetaV1
    table: TableMeta | TableMetaV1
    try:
        record = _read_record(store, meta_recid)
        if keyed:
            meta = parse_keyed_meta(record)
            table = meta.table
        else:
            meta = table = parse_meta_v1(record) if meta_version(record) == 1 \
                else parse_table_meta(record)
        table_serializer(table.value)
    except Exception as exc:  # a damaged record may fail in any decoder
        report.error = f"metadata record {meta_recid} is unreadable: {exc}"
        return None
    report.expected_entries = table.n_entries
    return meta


def _copy_table(store: RecordStore, meta, table, report: CollectionReport, commit,
                key_column: hash_salvage.KeyColumn = hash_salvage.INT64_KEYS) -> None:
    copied_since_commit = 0
    for keys, values in hash_salvage.read_table(store, meta, report,
                                                lambda recid: _read_record(store, recid),
                                                _DamagedRecord, key_column):
        if len(keys):
            if meta.value == SET_VALUE_TYPE:
                table.add_many(keys)
            else:
                table.put_many(keys, values)
        report.recovered_entries += len(keys)
        copied_since_commit += len(keys)
        if copied_since_commit >= _COMMIT_EVERY:
            commit()
            copied_since_commit = 0


def _copy_keyed_table(store: RecordStore, meta: KeyedMeta, table, report: CollectionReport,
                      commit) -> None:
    _copy_table(store, meta.table, table, report, commit, hash_salvage.keyed_column(meta))


_SALVAGE: dict[str, _KindSalvage] = {  # the walkers of every kind in KINDS, by its name
    TREE_MAP.name: _KindSalvage(
        lambda store, recid, report: tree_meta(store, recid, report, _TREE_READING),
        lambda meta: meta.fixed_options,
        lambda store, meta, tree, report, commit: copy_tree(
            store, meta, tree, report, commit, _COMMIT_EVERY, _TREE_READING)),
    HASH_MAP.name: _KindSalvage(_table_meta, lambda meta: {"value": meta.value}, _copy_table),
    TREE_SET.name: _KindSalvage(
        lambda store, recid, report: tree_meta(store, recid, report, _TREE_READING),
        lambda meta: {k: v for k, v in meta.fixed_options.items() if k != "value"},
        lambda store, meta, treeset, report, commit: copy_tree(
            store, meta, treeset._tree, report, commit, _COMMIT_EVERY, _TREE_READING)),
    HASH_SET.name: _KindSalvage(_table_meta, lambda meta: {}, _copy_table),
    KEYED_HASH_MAP.name: _KindSalvage(
        functools.partial(_table_meta, keyed=True),
        lambda meta: {"key": meta.key, "value": meta.table.value}, _copy_keyed_table),
    KEYED_HASH_SET.name: _KindSalvage(functools.partial(_table_meta, keyed=True),
                                      lambda meta: {"key": meta.key}, _copy_keyed_table),
}
