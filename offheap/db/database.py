"""DB: one record store holding named collections (layer 7), the analogue of MapDB's ``DBMaker``.

    with DB.file("data.offheap") as db:
        prices = db.tree_map("prices", key="int64", value="float64", compression="zstd")
        seen = db.hash_map("seen", value="object")
        users = db.hash_map("users", key="str", value="int64")
        prices[20240101] = 3.5
        db.commit()                      # durable and atomic from here on

The *catalog* (name -> kind, options, metadata record; :mod:`offheap.db.catalog`) is the store's
``root`` blob, written with every commit (and by :meth:`DB.flush`). What the DB knows of each
kind of collection is its record in :mod:`offheap.db.kinds`; the collections themselves it
reaches only through :class:`~offheap.collection.protocol.StoredCollection`. Reopening a file DB and asking for a
name returns that collection with the options it was created with; the options that only steer
the runtime behaviour (write cache, flush delay, cache size, compression of pages written from
now on) may be given anew, while a different key, value type or node size is an error.

Durability (``DB.file(path, durability=...)``; the design is in ``docs/durability.md``):

- ``"commit"`` (the default): changes live in private memory until :meth:`DB.commit` makes all of
  them durable at once through the arena's write-ahead log; after a crash the file reopens with
  exactly the last commit. :meth:`DB.rollback` drops everything since the last commit: the
  collections created since then are closed, every other open collection re-reads its committed
  state. :meth:`DB.close` commits; leaving a ``with`` block by an exception rolls back first.
- ``"none"``: changes go to the shared file mapping as they are made, as in MapDB without
  transactions. :meth:`DB.commit` is a flush; a crash leaves a file that refuses to open with a
  :class:`CorruptionError` naming the way out (:func:`offheap.salvage`).
- ``readonly=True``: a reader next to one writer process; collections come back as read-only
  readers (:mod:`offheap.collection.readers`) that pick up each commit of the writer between operations.

Pickle: the collections of a file DB read and write values stored with pickle only when the
opener passes ``allow_pickle=True`` (a file's author could make unpickling run any code;
:mod:`offheap.store.pickled`); a memory DB's always may.

Ownership: the DB owns its store and arena; collections it hands out share them and are closed
by :meth:`DB.close`. A file DB written to and then garbage collected, or still open at
interpreter exit, without :meth:`DB.close` rolls back what it had not committed, as sqlite3
does, and warns (:class:`~offheap.errors.UncommittedChangesWarning` naming the file and the
bytes dropped; :mod:`offheap.collection.lifetime`).

Thread safety: the DB has one re-entrant :attr:`DB.lock` (a map lock,
:func:`offheap.collection.locks.new_lock`), which every collection in it uses as its own lock,
so the collections of one DB never write to the store at the same time, and a TreeMap's
``flush_delay`` timer thread waits for the other collections' operations. Each operation of a
collection is atomic (a LongHashMap's compiled fast paths run without the lock only while it is
free: :mod:`offheap.hashmap.locking`). Commit, rollback, compact, open and close from one
thread (they take the lock as well).
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from offheap.errors import (
    ClosedError,
    LockedError,
    OffheapError,
    TransactionError,
    UncommittedChangesWarning,
)
from offheap.arena.arena import Arena, format_bytes
from offheap.collection import lifetime
from offheap.collection.display import html_table, setting_rows
from offheap.collection.filemap import check_reopenable, check_stored_reopens
from offheap.collection.protocol import CollectionT, StoredCollection
from offheap.collection.readers import CollectionReader, ReaderT, ReadSession, refuse_write
from offheap.db.catalog import Catalog, CatalogEntry, check_same, encode_catalog, parse_catalog
from offheap.db.kinds import (
    HASH_MAP,
    HASH_SET,
    KEYED_HASH_MAP,
    KEYED_HASH_SET,
    TREE_MAP,
    TREE_SET,
    CollectionKind,
    kind_named,
)
from offheap.hashmap.keyedmap import HashMap
from offheap.hashmap.keyedset import HashSet
from offheap.collection.locks import new_lock
from offheap.hashmap.longhashmap import LongHashMap
from offheap.hashmap.longhashset import LongHashSet
from offheap.hashmap.reader import HashReader, HashSetReader
from offheap.kernels.sizes import ByteLimit
from offheap.store.records import RecordStore
from offheap.treemap.reader import TreeReader
from offheap.treemap.treemap import TreeMap
from offheap.treemap.treeset import TreeSet, TreeSetReader

_DURABILITIES = ("commit", "none")
COMPACT_SUFFIX = ".compact"


@dataclass(frozen=True)
class CollectionStats:
    """One collection's share of a DB."""

    kind: str  # the catalog's name of its kind: "tree_map", "hash_map", "tree_set", "hash_set",
    #            "keyed_hash_map", "keyed_hash_set"
    n_entries: int
    live_bytes: int  # pages (TreeMap, as last written) or table arrays and value records


@dataclass(frozen=True)
class DBStats:
    """Where a DB's bytes go: ``live + free + overhead == total_bytes``, the file's size (the
    reserved memory of a memory DB).

    ``live_bytes`` are record contents and hash tables; ``free_bytes`` is what
    :meth:`DB.compact` can give back: free extents of the file plus free chunks inside the
    store's segments; the overhead is headers, the record index, checksums, size-class rounding.
    ``reserved_bytes`` is what the arena maps (live extents).
    """

    file_bytes: int  # 0 in memory
    reserved_bytes: int
    live_bytes: int
    free_bytes: int
    collections: dict[str, CollectionStats]

    @property
    def total_bytes(self) -> int:
        return self.file_bytes or self.reserved_bytes

    @property
    def overhead_bytes(self) -> int:
        return self.total_bytes - self.live_bytes - self.free_bytes


class DB:
    """Named collections in one store: build with :meth:`memory` or :meth:`file`."""

    def __init__(self, store: RecordStore, *, allow_pickle: bool, readonly: bool = False) -> None:
        self._store = store
        self._allow_pickle = allow_pickle
        self._catalog: Catalog = {}
        self._open: dict[str, StoredCollection] = {}
        self._open_options: dict[str, dict[str, Any]] = {}  # the options each was given
        self._readers: dict[str, CollectionReader[Any]] = {}
        self._closed = False
        self.lock = new_lock()
        self._session = ReadSession(store.arena, self._reload_all, self.close,
                                    lock=self.lock) if readonly else None
        if store.root:
            self._catalog = parse_catalog(store.root)

    @classmethod
    def memory(cls, limit: ByteLimit = None) -> DB:
        """A DB in anonymous memory, gone when closed; ``limit`` caps it in bytes.

        ``limit`` is an int or a size such as ``"1GiB"``.
        """
        return cls(RecordStore(Arena.anonymous(limit_bytes=limit)), allow_pickle=True)

    @classmethod
    def file(cls, path: str | os.PathLike, limit: ByteLimit = None, durability: str = "commit",
             readonly: bool = False, verify: bool = True, recover: bool = False, *,
             create: bool = True, allow_pickle: bool = False) -> DB:
        """The DB in file ``path``, created if missing (``create=False``: a
        :class:`~offheap.errors.MissingFileError` instead; never with ``readonly=True``).

        ``durability`` is ``"commit"`` or ``"none"`` (see the module docstring); it belongs to
        the writer's open, not to the file, so a file may be written in either mode at different
        times. ``verify`` checks every page's checksum on open (about half a second per GiB on
        the project's machine). ``recover=True`` opens a file that was not closed cleanly; copy
        it out with :func:`offheap.salvage`. A second writer process gets
        :class:`~offheap.errors.LockedError`; ``readonly=True`` openers may be many.
        ``allow_pickle=True`` lets the collections read and write values stored with pickle
        (else :class:`~offheap.errors.PickleNotAllowedError`); the file never remembers it.
        """
        if durability not in _DURABILITIES:
            raise ValueError(f"durability must be 'commit' or 'none', not {durability!r}")
        path = os.fspath(path)
        if readonly:
            arena = Arena.file(path, limit_bytes=limit, readonly=True, verify=verify,
                               recover=recover)
            try:
                with arena.read_section():
                    return cls(RecordStore.open(arena), readonly=True,
                               allow_pickle=allow_pickle)
            except BaseException:
                arena.close()
                raise
        store = RecordStore.file(path, limit_bytes=limit, durability=durability, verify=verify,
                                 recover=recover, create=create)
        try:
            _remove_stale_compaction(path)
            db = cls(store, allow_pickle=allow_pickle)
            if not store.root:
                db.commit()  # a new file is an empty DB from its first moment on disk
            lifetime.track(db)
            return db
        except BaseException:
            store.arena.close()
            raise

    # -- collections --------------------------------------------------------------------------

    def tree_map(self, name: str, **options: Any) -> TreeMap | TreeReader:
        """The :class:`TreeMap` called ``name``, created with ``options`` if it does not exist
        (in a read-only DB: a :class:`~offheap.treemap.reader.TreeReader` of an existing one)."""
        return self._collection(name, TREE_MAP, options)

    def hash_map(self, name: str, *, key: str | None = None,
                 **options: Any) -> LongHashMap | HashMap | HashReader:
        """The :class:`LongHashMap` called ``name``, created with ``options`` if it does not
        exist; with ``key=`` (``"str"``, ``"bytes"``, ``"int64"``, ``"object"``) the
        :class:`HashMap` of that key type. An existing collection opens as what it was created
        as, with or without ``key=`` (a keyed one's must name its key type; a LongHashMap's is
        refused). In a read-only DB: a :class:`~offheap.hashmap.reader.HashReader` of an
        existing one."""
        return self._collection(name, self._hash_kind(name, key, HASH_MAP, KEYED_HASH_MAP),
                                options if key is None else {**options, "key": key})

    def tree_set(self, name: str, **options: Any) -> TreeSet | TreeSetReader:
        """The :class:`TreeSet` called ``name``, created with ``options`` (``key``, and the
        tree options of :meth:`tree_map` but ``value``) if it does not exist (in a read-only
        DB: a :class:`~offheap.treemap.treeset.TreeSetReader` of an existing one)."""
        return self._collection(name, TREE_SET, options)

    def hash_set(self, name: str, *, key: str | None = None,
                 **options: Any) -> LongHashSet | HashSet | HashSetReader:
        """The :class:`LongHashSet` called ``name``, created if it does not exist; with ``key=``
        the :class:`HashSet` of that key type, as :meth:`hash_map` (in a read-only DB: a
        :class:`~offheap.hashmap.reader.HashSetReader` of an existing one). A set has no other
        options: any given is a TypeError naming it."""
        return self._collection(name, self._hash_kind(name, key, HASH_SET, KEYED_HASH_SET),
                                options if key is None else {**options, "key": key})

    def _hash_kind(self, name: str, key: str | None, int64_kind: CollectionKind[Any, Any],
                   keyed_kind: CollectionKind[Any, Any]) -> CollectionKind[Any, Any]:
        """The kind :meth:`hash_map` or :meth:`hash_set` opens ``name`` as: the keyed one when
        ``key`` is given or the catalog names it, else the int64 one. ValueError for ``key=``
        on a collection of the int64 kind."""
        self._check_open()
        with self._read_section():
            entry = self._catalog.get(name)
        stored = None if entry is None else entry["kind"]
        if key is None:
            return keyed_kind if stored == keyed_kind.name else int64_kind
        if stored == int64_kind.name:
            raise ValueError(f"{name!r} is a {int64_kind.class_name} (int64 keys, made without "
                             f"key=); open it without key=")
        return keyed_kind

    def _collection(self, name: str, kind: CollectionKind[CollectionT, ReaderT],
                    options: dict[str, Any]) -> CollectionT | ReaderT:
        """The collection ``name`` of ``kind``: the open one, else reopened from the catalog,
        else created with ``options``; in a read-only DB a reader of an existing one."""
        kind.check_option_names(options)
        self._check_open()
        if not isinstance(name, str) or not name:
            raise TypeError(f"a collection name is a non-empty str, not {name!r}")
        if self._session is not None:
            with self._session.section():
                return self._reader(self._session, name, kind, options)
        with self.lock:
            return self._writer_collection(name, kind, options)

    def _entry(self, name: str, kind: CollectionKind[Any, Any]) -> CatalogEntry | None:
        """The catalog entry of ``name``, if any; ValueError when it is of another kind."""
        entry = self._catalog.get(name)
        if entry is not None and entry["kind"] != kind.name:
            raise ValueError(f"{name!r} is a {entry['kind']}, not a {kind.name}")
        return entry

    def _writer_collection(self, name: str, kind: CollectionKind[CollectionT, Any],
                           options: dict[str, Any]) -> CollectionT:
        entry = self._entry(name, kind)
        existing = self._open.get(name)
        if isinstance(existing, kind.collection) and not existing.closed:
            check_same(name, self._open_options[name], options, tuple(kind.defaults))
            return existing
        if entry is None:
            merged = kind.new_options(options)
            collection = kind.in_store(self._store, merged, None, self.lock, self._allow_pickle)
            self._catalog[name] = {"kind": kind.name, "options": merged,
                                   "meta_recid": collection.meta_recid}
        else:
            check_same(name, entry["options"], options, kind.fixed)
            merged = {**entry["options"], **options}
            collection = kind.in_store(self._store, merged, entry["meta_recid"], self.lock,
                                       self._allow_pickle)
        self._open[name] = collection
        self._open_options[name] = merged
        return collection

    def _reader(self, session: ReadSession, name: str, kind: CollectionKind[Any, ReaderT],
                options: dict[str, Any]) -> ReaderT:
        entry = self._entry(name, kind)
        if entry is None:
            raise KeyError(f"{self._store.arena.path!r} holds no collection {name!r} (a "
                           f"read-only DB cannot create one); it holds {sorted(self._catalog)}")
        check_same(name, entry["options"], options, kind.fixed)
        reader = self._readers.get(name)
        if isinstance(reader, kind.reader) and not reader.closed:
            return reader
        collection = kind.in_store(self._store, {**entry["options"], **options},
                                   entry["meta_recid"], self.lock, self._allow_pickle)
        self._open[name] = collection
        self._readers[name] = new_reader = kind.reader(collection, session, False)
        return new_reader

    def _opened(self, name: str) -> tuple[CollectionKind[Any, Any], StoredCollection]:
        """The kind of catalog entry ``name`` and the collection itself (not a reader), opened
        with its stored options if it was not open."""
        kind = kind_named(self._catalog[name]["kind"])
        self._collection(name, kind, {})
        return kind, self._open[name]

    def names(self) -> list[str]:
        """Names of the collections in this DB, sorted."""
        self._check_open()
        with self._read_section():
            return sorted(self._catalog)

    def __contains__(self, name: str) -> bool:
        return name in self.names()

    def snapshot(self) -> ReadSession:
        """A read-only DB's context manager holding one read section across a block: every
        operation of every collection inside it sees the same commit, and none pays the
        per-operation check. The writer's next commit is applied only after the block."""
        self._check_open()
        if self._session is None:
            raise ValueError("snapshot() belongs to a read-only DB (DB.file(path, "
                             "readonly=True)); a writer sees its own changes")
        return self._session.section()

    def _read_section(self) -> AbstractContextManager[object]:
        """A read-only DB's read section (re-entrant), nothing for a writer."""
        return nullcontext() if self._session is None else self._session.section()

    # -- transactions -------------------------------------------------------------------------

    @property
    def durability(self) -> str | None:
        """``"commit"`` or ``"none"`` for a file DB, None in memory."""
        return self._store.arena.durability

    @property
    def readonly(self) -> bool:
        return self._session is not None

    def commit(self) -> None:
        """Make every change up to now durable, all at once (``durability="commit"``).

        Write caches are written into the store, the catalog into the store root, then the arena
        commits: after a crash at any moment the file reopens with either everything before this
        call or everything up to it. With ``durability="none"`` this is :meth:`flush`; in memory
        it only writes the caches.
        """
        with self.lock:
            self._check_writable()
            self._write_collections()
            if self.durability == "commit":
                self._store.commit()
            else:
                self._store.flush()
            self._forget_closed()

    def _forget_closed(self) -> None:
        """Drop the collections closed before a commit that published them: the next commit
        has nothing of theirs to check."""
        for name in [name for name, collection in self._open.items() if collection.closed]:
            del self._open[name]

    def rollback(self) -> None:
        """Drop every change since the last commit (``durability="commit"`` only).

        Collections created since the last commit are closed; every other open collection
        re-reads its committed state (iterators over it raise RuntimeError on their next step).
        """
        with self.lock:
            self._check_writable()
            if self.durability != "commit":
                raise TransactionError("rollback() needs a file DB opened with "
                                       f"durability='commit'; this one is "
                                       f"{'in memory' if self.durability is None else 'none'}")
            for collection in self._open.values():
                if not collection.closed:
                    collection._release()
            self._store.rollback()
            self._catalog = parse_catalog(self._store.root)
            for name, collection in list(self._open.items()):
                entry = self._catalog.get(name)
                if collection.closed:
                    del self._open[name]
                elif entry is None or entry["meta_recid"] != collection.meta_recid:
                    collection._invalidate()
                    del self._open[name]
                else:
                    collection._reload()

    def flush(self) -> None:
        """Write every collection's caches and the catalog into the store; with
        ``durability="none"`` push the pages to the file. Makes nothing durable in commit mode:
        :meth:`commit` does."""
        with self.lock:
            self._check_writable()
            self._write_collections()
            if self.durability != "commit":
                self._store.flush()

    def _write_collections(self) -> None:
        """Write every open collection into the store and check that it would reopen; check
        too that every collection closed since the last commit, whose last state this commit
        publishes as well, would reopen (:meth:`_check_closed`). Then the catalog."""
        for name, collection in self._open.items():
            if collection.closed:
                self._check_closed(name)
            else:
                collection.flush()
                check_reopenable(collection, self._store)
        self._store.root = encode_catalog(self._catalog)

    def _check_closed(self, name: str) -> None:
        """CorruptionError (nothing committed) unless the closed collection ``name`` reopens
        from what the store holds now: it is opened again from its catalog entry, with every
        check an open makes, then let go without writing. Costs what reopening it costs (for
        a LongHashMap O(chunks + capacity / 64) words, for a TreeMap one record)."""
        entry = self._catalog[name]
        kind = kind_named(entry["kind"])

        def reopen() -> None:
            kind.in_store(self._store, dict(entry["options"]), entry["meta_recid"],
                          self.lock, self._allow_pickle)._invalidate()

        check_stored_reopens(kind.class_name, self._store, reopen)

    # -- space --------------------------------------------------------------------------------

    def stats(self) -> DBStats:
        """File, live and free bytes, and each collection's entries and live bytes."""
        with self.lock:
            self._check_open()
            with self._read_section():
                return self._stats()

    def _stats(self) -> DBStats:
        collections = {}
        region_bytes = 0  # hash tables live in arena extents of their own, not in records
        for name in sorted(self._catalog):
            kind, collection = self._opened(name)
            collections[name] = CollectionStats(kind.name, len(collection),
                                                collection._live_bytes())
            region_bytes += kind.region_bytes(collection)
        store = self._store.stats()
        arena = self._store.arena
        return DBStats(
            file_bytes=os.path.getsize(arena.path) if arena.path else 0,
            reserved_bytes=arena.reserved_bytes,
            live_bytes=store.live_bytes + region_bytes,
            free_bytes=store.free_bytes + arena.stats().free_bytes,
            collections=collections)

    def compact(self) -> None:
        """Give free space back to the file system: commit, rewrite every collection into a new
        file (full leaves, hash tables sized to their entries), and rename it over this one.

        Atomic: a crash before the rename leaves this file as it was committed (a leftover
        ``PATH.compact`` is removed by the next writer), after it the compacted file. The new
        file is written, committed and renamed under its own writer lock, which this DB keeps
        (:meth:`Arena.replace`), so the path never names a file without its writer. Refused
        while readers hold the file; a reader that opens it before the rename gets ClosedError
        from its next operation. Open collections stay usable and re-read their state from the
        new file.
        """
        with self.lock:
            self._check_writable()
            arena, durability = self._store.arena, self.durability
            if arena.path is None or durability is None:
                raise ValueError("compact() applies to a file DB; a memory DB gives memory back "
                                 "as collections shrink")
            if arena.has_readers():
                raise LockedError(f"{arena.path!r} is open in read-only processes; compact() "
                                  f"would leave them on the old file: close them first")
            self.commit()
            path = arena.path
            _remove_stale_compaction(path)
            copy = RecordStore.file(path + COMPACT_SUFFIX, limit_bytes=arena.limit_bytes,
                                    durability=durability,
                                    index_capacity=len(self._store) + 16)
            target = DB(copy, allow_pickle=False)  # copies placeholders, never unpickles
            try:
                for name, entry in sorted(self._catalog.items()):
                    kind, source = self._opened(name)
                    kind.copy_compacted(source, target._collection(name, kind,
                                                                   dict(entry["options"])))
                target.commit()
            except BaseException:
                copy.close(save=False)
                _remove_stale_compaction(path)
                raise
            finally:
                for collection in target._open.values():
                    collection._invalidate()
            for collection in self._open.values():
                if not collection.closed:
                    collection._release()
            self._store.release_views()
            copy.release_views()
            copy.arena.replace(arena)
            self._store.switch_arena(copy.arena)
            self._catalog = parse_catalog(self._store.root)
            for name, collection in list(self._open.items()):
                if collection.closed:
                    del self._open[name]
                else:
                    collection._reload(self._catalog[name]["meta_recid"])

    # -- lifetime -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close every collection and the store; a file DB commits (``durability="commit"``) or
        flushes first. Idempotent. To close without committing, call :meth:`rollback` first. If
        writing a collection's caches fails (CapacityError), nothing is committed: the file
        keeps its last commit, and the error propagates."""
        with self.lock:
            if self._closed:
                return
            written = False
            try:
                if not self.readonly and self._store.arena.path is not None:
                    self._write_collections()
                written = True
            finally:
                self._close_store(save=written)  # never commit half of the collections' state

    def _close_store(self, save: bool) -> None:
        """Invalidate every collection and close the store, committing (or flushing) when
        ``save``; otherwise a commit-mode file keeps its last commit."""
        self._closed = True
        for collection in self._open.values():
            collection._invalidate()
        self._open.clear()
        self._readers.clear()
        self._store.close(save=save)
        if self._session is not None:
            self._session.closed = True

    def __del__(self) -> None:
        if lifetime.opened_here(self):
            self._abandon("garbage collection")

    def _abandon(self, when: str) -> None:
        """What a writer's DB that was not closed does when collected or at exit: roll back
        what is uncommitted and warn (see :mod:`offheap.collection.lifetime`). The caches are
        written into the store first, only to count the bytes a rollback drops."""
        with self.lock:
            if self._closed or self._store.arena.closed:
                return
            path = self._store.arena.path
            if self.durability != "commit":
                lifetime.warn_abandoned(f"DB {path!r} was not closed: flushed and closed "
                                        f"cleanly at {when}; call close() or use a with block",
                                        ResourceWarning)
                self.close()
                return
            try:
                self._write_collections()
                held = ""
            except OffheapError:
                held = " and changes its caches could not write"
            dropped = self._store.arena.uncommitted_bytes()
            self._close_store(save=False)
        advice = "call db.commit() and db.close(), or use a with block"
        if dropped or held:
            lifetime.warn_abandoned(
                f"DB {path!r} was not closed: {format_bytes(dropped)} of uncommitted changes"
                f"{held} rolled back at {when}; {advice}", UncommittedChangesWarning)
        else:
            lifetime.warn_abandoned(f"DB {path!r} was not closed (nothing uncommitted; closed "
                                    f"at {when}); {advice}", ResourceWarning)

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> DB:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        """Close; when the block raised, a commit-mode DB rolls back first, so a failed block
        leaves the file as of the last commit."""
        try:
            if exc_type is not None and not self._closed and not self.readonly \
                    and self.durability == "commit":
                self.rollback()
        finally:
            self.close()

    def __repr__(self) -> str:
        if self._closed:
            return "<DB (closed)>"
        arena = self._store.arena
        where = arena.path or "memory"
        mode = "" if arena.path is None else (
            ", read-only" if self.readonly else f", durability={self.durability}")
        listing = ", ".join(f"{n} ({e['kind']})" for n, e in sorted(self._catalog.items()))
        limit = "" if arena.limit_bytes is None else f", limit {format_bytes(arena.limit_bytes)}"
        return (f"<DB {where}{mode}{limit}: {format_bytes(arena.reserved_bytes)} reserved; "
                f"{listing or 'no collections'}>")

    def _repr_html_(self) -> str:
        """A table for notebooks: where the DB lives, its settings, bytes and each collection."""
        if self._closed:
            return "<p><b>DB</b> (closed)</p>"
        return _html_summary(self.stats(), self._store.arena,
                             "read-only" if self.readonly else self.durability or "in memory")

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the DB is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self.readonly:
            raise refuse_write(self._store.arena.path)

    # -- reader side --------------------------------------------------------------------------

    def _reload_all(self) -> None:
        """A read-only DB picked up a commit: re-read the store, the catalog and every open
        collection."""
        for collection in self._open.values():
            collection._release()
        self._store.reload()
        self._catalog = parse_catalog(self._store.root)
        for collection in self._open.values():
            collection._reload()


def _remove_stale_compaction(path: str) -> None:
    """Remove what a compaction interrupted before its rename left beside ``path``; only the
    writer (holding ``path``'s lock) calls this, so no compaction is running."""
    for leftover in (path + COMPACT_SUFFIX, path + COMPACT_SUFFIX + "-wal"):
        try:
            os.remove(leftover)
        except FileNotFoundError:
            pass


def _html_summary(stats: DBStats, arena: Arena, durability: str) -> str:
    """The ``_repr_html_`` table of an open DB: settings, bytes, one row per collection."""
    rows: list[tuple[str, object]] = [
        ("where", "memory" if arena.path is None else "file"), *setting_rows(arena),
        ("durability", durability), ("reserved", format_bytes(stats.reserved_bytes)),
        ("live / free", f"{format_bytes(stats.live_bytes)} / {format_bytes(stats.free_bytes)}")]
    rows += [(f"{name} ({collection.kind})",
              f"{collection.n_entries:,} entries, {format_bytes(collection.live_bytes)} live")
             for name, collection in stats.collections.items()]
    if not stats.collections:
        rows.append(("collections", "none"))
    return html_table("DB", rows)
