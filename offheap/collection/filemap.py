"""What a map that owns its file has beyond MutableMapping (layer 6), shared by LongHashMap and
TreeMap: ``readonly=True`` opening a reader instead, ``commit()``, ``rollback()``, and ``with``
blocks that close (rolling back first when the block raised).

A standalone file map (``LongHashMap(path=...)``, ``TreeMap(path=...)``) owns its record store
and so its transactions; a map in a DB shares the DB's store, and the DB commits for all of them.
"""

from __future__ import annotations

from contextlib import nullcontext

from offheap.errors import TransactionError


class StandaloneFileMap:
    """Mixin for a map class. The map provides ``_open_reader(*args, **kwargs)`` (the read-only
    view of a file), ``_store``, ``_owns_store``, ``_check_open()``, ``_write_back()`` (write what
    it holds in memory into the store), ``_discard()`` (drop views and caches that a rollback makes
    stale), ``_reload()``, ``close()`` and ``_closed``; ``_lock`` serializes, if it has one.
    """

    _lock = nullcontext()

    def __new__(cls, *args, readonly: bool = False, **kwargs):
        if not readonly:
            return super().__new__(cls)
        return cls._open_reader(*args, **kwargs)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        """Close; a standalone durable file map rolls back first when the block raised."""
        try:
            if exc_type is not None and not self._closed and self._owns_store \
                    and self._store.durable:
                self.rollback()
        finally:
            self.close()

    def commit(self) -> None:
        """Make every change up to now durable at once: the map writes what it holds in memory,
        then the file commits, and after a crash it reopens with the last commit, whole. With
        ``durability="none"`` this flushes to the file."""
        with self._lock:
            self._check_open()
            self._check_standalone_file("commit")
            self._write_back()
            if self._store.durable:
                self._store.commit()
            else:
                self._store.flush()

    def rollback(self) -> None:
        """Drop every change since the last commit (``durability="commit"``); iterators in
        progress raise RuntimeError on their next step."""
        with self._lock:
            self._check_open()
            self._check_standalone_file("rollback")
            if not self._store.durable:
                raise TransactionError("rollback() needs durability='commit'; this file was "
                                       "opened with durability='none'")
            self._discard()
            self._store.rollback()
            self._reload()

    def _check_standalone_file(self, operation: str) -> None:
        kind = type(self).__name__
        if not self._owns_store:
            raise ValueError(f"this {kind} lives in a DB: call db.{operation}()")
        if self._store.arena.path is None:
            raise ValueError(f"{operation}() applies to a file map (path=...); an in-memory "
                             f"map has no transactions")
