"""What a map that owns its file has beyond MutableMapping (layer 6), shared by LongHashMap and
TreeMap: ``commit()``, ``rollback()``, and ``with`` blocks that close (rolling back first when
the block raised).

A standalone file map (``LongHashMap(path=...)``, ``TreeMap(path=...)``) owns its record store
and so its transactions; a map in a DB shares the DB's store, and the DB commits for all of them.
A read-only open of such a file is not the map itself but a reader of it, made by the map's
``reader(path)`` classmethod (:mod:`offheap.collection.readers`).

A standalone file map that is garbage collected or still open at interpreter exit is closed as
``close()`` closes it, with a ``ResourceWarning`` (:mod:`offheap.collection.lifetime`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Protocol, TypeVar

from offheap.collection import lifetime
from offheap.collection.protocol import StoredCollection
from offheap.errors import CorruptionError, TransactionError
from offheap.store.records import RecordStore

_Map = TypeVar("_Map")


class _FileMapParts(StoredCollection, Protocol):
    """What the mixin's methods use of the map class they are mixed into."""

    _store: RecordStore
    _owns_store: bool
    _closed: bool

    @property
    def _lock(self) -> AbstractContextManager[object]:
        """Held around commit and rollback: the map's own lock (a ``nullcontext`` for a map
        that is not thread-safe)."""
        ...

    def _check_open(self) -> None:
        """ClosedError once closed."""
        ...

    def _write_back(self) -> None:
        """Write what the map holds in memory into the store (dirty nodes, metadata)."""
        ...

    def _discard(self) -> None:
        """Drop the views and caches that a rollback makes stale."""
        ...

    def rollback(self) -> None:
        ...

    def _abandon(self, when: str) -> None:
        """Close as a forgotten map is closed (:mod:`offheap.collection.lifetime`)."""
        ...


class StandaloneFileMap:
    """Mixin for a map class that implements :class:`_FileMapParts`. Every method runs under
    the map's ``_lock``, so it has the map's own thread safety."""

    def __enter__(self: _Map) -> _Map:
        return self

    def __del__(self: _FileMapParts) -> None:
        if lifetime.opened_here(self):
            self._abandon("garbage collection")

    def _track_file(self: _FileMapParts) -> None:
        """Register a map that has just opened its file for writing, so that the rule of
        :mod:`offheap.collection.lifetime` applies to it."""
        lifetime.track(self)

    def _abandon(self: _FileMapParts, when: str) -> None:
        """Close as :meth:`close` does (commit, or flush and close cleanly), warning that the
        program did not."""
        if self._closed or self._store.arena.closed:
            return
        saved = "committed" if self._store.durable else "flushed and closed cleanly"
        lifetime.warn_abandoned(
            f"{type(self).__name__} {self._store.arena.path!r} was not closed: {saved} at "
            f"{when}; call close() or use a with block", ResourceWarning)
        self.close()

    def __exit__(self: _FileMapParts, exc_type: type[BaseException] | None,
                 exc: BaseException | None, traceback: TracebackType | None) -> None:
        """Close; a standalone durable file map rolls back first when the block raised."""
        try:
            if exc_type is not None and not self._closed and self._owns_store \
                    and self._store.durable:
                self.rollback()
        finally:
            self.close()

    def commit(self: _FileMapParts) -> None:
        """Make every change up to now durable at once: the map writes what it holds in memory,
        then the file commits, and after a crash it reopens with the last commit, whole. With
        ``durability="none"`` this flushes to the file."""
        with self._lock:
            self._check_open()
            _check_standalone_file(self, "commit")
            self._write_back()
            check_reopenable(self, self._store)
            if self._store.durable:
                self._store.commit()
            else:
                self._store.flush()

    def rollback(self: _FileMapParts) -> None:
        """Drop every change since the last commit (``durability="commit"``); iterators in
        progress raise RuntimeError on their next step."""
        with self._lock:
            self._check_open()
            _check_standalone_file(self, "rollback")
            if not self._store.durable:
                raise TransactionError("rollback() needs durability='commit'; this file was "
                                       "opened with durability='none'")
            self._discard()
            self._store.rollback()
            self._reload()

    def _refuse_readonly(self, readonly: bool) -> None:
        """TypeError for ``Map(path=..., readonly=True)``: a read-only open makes a reader,
        which is another object than the map, so only the ``reader`` factory makes one."""
        if readonly:
            kind = type(self).__name__
            raise TypeError(f"{kind}(..., readonly=True) cannot make a {kind}: open a read-only "
                            f"reader of the file with {kind}.reader(path)")


def check_reopenable(collection: StoredCollection, store: RecordStore) -> None:
    """Refuse to commit ``collection`` in a file ``store`` when what it last wrote into the store
    would not reopen (its :meth:`~StoredCollection._check_stored`): a CorruptionError saying
    so, raised before anything is committed, so the file keeps its last commit. The callers run
    it between writing a collection back and committing; nothing for a store in memory."""
    check_stored_reopens(type(collection).__name__, store, collection._check_stored)


def check_stored_reopens(kind: str, store: RecordStore, check: Callable[[], object]) -> None:
    """Run ``check``, which raises CorruptionError when what a collection of class ``kind``
    last wrote into the file ``store`` would not reopen, and refuse the commit as
    :func:`check_reopenable` does; nothing for a store in memory."""
    if store.arena.path is None:
        return
    try:
        check()
    except CorruptionError as exc:
        raise CorruptionError(
            f"{kind} in {store.arena.path!r} is inconsistent in memory ({exc}) and would not "
            f"reopen: nothing was committed, the file keeps its last commit. Roll back (or "
            f"close and reopen) to return to it") from None


def _check_standalone_file(collection: _FileMapParts, operation: str) -> None:
    """ValueError unless ``collection`` owns a file store (so ``operation`` applies to it)."""
    kind = type(collection).__name__
    if not collection._owns_store:
        raise ValueError(f"this {kind} lives in a DB: call db.{operation}()")
    if collection._store.arena.path is None:
        raise ValueError(f"{operation}() applies to a file map (path=...); an in-memory "
                         f"map has no transactions")
