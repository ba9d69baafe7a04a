"""Read-only collections over a file that one writer process may be changing (layer 6).

A reader opens the file with ``readonly=True``: its arena maps the pages shared and read-only, so
every reader process shares the page cache with the writer instead of copying. What keeps a
reader consistent is the arena's *read section* (:meth:`offheap.arena.Arena.read_section`): the
writer applies a commit to the file only while no read section is open, and a section that starts
after a commit reloads the arena's extent table first and reports the change. A
:class:`ReadSession` turns that report into a reload of everything built on the arena (the record
store, a DB catalog, each collection's metadata and caches).

The reader classes wrap one collection and run every operation inside a section, so an operation
sees the state of one commit, whole: the last commit applied when it started. Iteration takes one
section per chunk (a leaf of a TreeMap, 1,024 entries of a LongHashMap); if a commit lands between
two chunks the iterator raises RuntimeError instead of mixing two states, as a ``dict`` does when
it changes during iteration. ``snapshot()`` holds one section across a block of operations.
Writing through a reader raises :class:`~offheap.errors.ReadOnlyError` (a PermissionError). A
reader of a file a compaction replaced (renamed a new file over its path) raises ClosedError
instead of reading the old one.

Thread safety: a session's lock serializes the operations of all readers on one file in this
process, so readers may be shared between threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, ItemsView, Iterator, Mapping, Set, ValuesView
from typing import Any, Generic, TypeVar

from offheap.errors import ClosedError, ReadOnlyError
from offheap.arena.arena import Arena
from offheap.collection.protocol import CollectionT, StoredMapT
from offheap.kernels.sizes import ByteLimit
from offheap.store.records import RecordStore

ReaderT = TypeVar("ReaderT", bound="CollectionReader[Any]")
"""A reader class of one kind (:class:`~offheap.treemap.reader.TreeReader`, ...)."""


class ReadSession:
    """The reading side of one file: its read-only arena, a lock, and the reload to run when
    another process committed.

    ``reload`` re-reads everything built on the arena; ``close`` releases it all; ``lock`` (a
    re-entrant lock, by default a new one) is shared with the collections' own locks, so there
    is one lock order. ``epoch`` counts the commits this session has picked up, so an iterator
    can tell that one landed. The session is its own context manager (:meth:`section`): one
    object, no generator, since every operation of a reader enters it.
    """

    def __init__(self, arena: Arena, reload: Callable[[], None], close: Callable[[], None],
                 lock: threading.RLock | None = None) -> None:
        self.arena = arena
        self.lock = threading.RLock() if lock is None else lock
        self.epoch = 0
        self._reload = reload
        self._close = close
        self._depth = 0
        self._stale = False  # a reload failed: the next section tries again
        self.closed = False

    def section(self) -> ReadSession:
        """Hold the arena's read section (re-entrant), reloading first if the file changed:
        ``with session.section():``. A file a compaction replaced raises ClosedError."""
        return self

    def __enter__(self) -> None:
        self.lock.acquire()
        try:
            if self.closed:
                raise ClosedError(f"the reader of {self.arena.path!r} is closed")
            self._depth += 1
            if self._depth == 1:
                self._begin()
        except BaseException:
            self.lock.release()
            raise

    def _begin(self) -> None:
        """The outermost section: the arena's, and the reload when a commit landed."""
        try:
            changed = self.arena.begin_read()
        except BaseException:
            self._depth -= 1
            raise
        if changed or self._stale:
            self.epoch += 1
            self._stale = True
            try:
                self._reload()
            except BaseException:
                self._depth -= 1
                self.arena.end_read()
                raise
            self._stale = False

    def __exit__(self, *exc) -> None:
        try:
            self._depth -= 1
            if not self._depth:
                self.arena.end_read()
        finally:
            self.lock.release()

    def close(self) -> None:
        with self.lock:
            if not self.closed:
                self.closed = True
                self._close()


def open_file_reader(path: str | os.PathLike[str], build: Callable[[RecordStore], CollectionT],
                     wrapper: Callable[[CollectionT, ReadSession, bool], ReaderT], *,
                     limit_bytes: ByteLimit = None, verify: bool = True,
                     recover: bool = False, lock: threading.RLock | None = None) -> ReaderT:
    """A reader of a standalone map's file that owns the file: ``path`` is opened read-only,
    ``build(store)`` makes the map from the store inside the same read section (so both see
    one commit), and ``wrapper(map, session, owns_session=True)`` (a :class:`MapReader` class)
    wraps it. ``lock``: the map's own lock, if it has one, for the session to share."""
    arena = Arena.file(path, limit_bytes=limit_bytes, readonly=True, verify=verify,
                       recover=recover)
    try:
        with arena.read_section():
            store = RecordStore.open(arena)
            collection = build(store)
    except BaseException:
        arena.close()
        raise

    def reload() -> None:
        collection._release()
        store.reload()
        collection._reload()

    session = ReadSession(arena, reload, collection.close, lock=lock)
    return wrapper(collection, session, True)


def refuse_write(path: str | None) -> ReadOnlyError:
    """The error every write through a reader raises."""
    return ReadOnlyError(f"{path!r} was opened read-only: open it with readonly=False to change "
                           f"it (one writer process at a time)")


class CollectionReader(Generic[CollectionT]):
    """A read-only collection, every operation inside a read section: what the map and set
    readers share.

    ``owns_session``: closing this reader closes the session (a standalone file); readers
    handed out by a DB share the DB's session and are closed with it. The collection is only
    reached through :class:`~offheap.collection.protocol.StoredCollection` here; a subclass
    adds the reads of its own kind.
    """

    def __init__(self, collection: CollectionT, session: ReadSession, owns_session: bool) -> None:
        self._map = collection
        self._session = session
        self._owns_session = owns_session

    # -- reads --------------------------------------------------------------------------------

    def __contains__(self, key) -> bool:
        with self._session.section():
            return key in self._map

    def __len__(self) -> int:
        with self._session.section():
            return len(self._map)

    def stats(self):
        with self._session.section():
            return self._map.stats()

    def snapshot(self):
        """A context manager that holds one read section across several operations: they all
        see the same commit, iterations inside it never raise for a commit, and each operation
        skips the per-operation check (about 2 µs). The writer's next commit waits to be
        applied until the block ends, so keep it short."""
        return self._session.section()

    def _check(self) -> None:
        with self._session.section():
            self._map._check()

    def _guarded(self, make_chunks: Callable[[], Iterator]) -> Iterator:
        """Chunks of ``make_chunks()``, each fetched inside its own read section; RuntimeError
        when a commit was picked up since the first one."""
        session = self._session
        with session.section():
            epoch = session.epoch
            chunks = make_chunks()
        while True:
            with session.section():
                if session.epoch != epoch:
                    raise self._changed_error()
                try:
                    chunk = next(chunks)
                except StopIteration:
                    return
            yield chunk

    def _changed_error(self) -> RuntimeError:
        """What an iteration raises once this reader picked up a commit since it started."""
        return RuntimeError(f"{self._session.arena.path!r} changed during iteration: the "
                            f"writer committed; iterate again to read the new state")

    # -- writes are refused -------------------------------------------------------------------

    def _refuse(self, *args, **kwargs):
        raise refuse_write(self._session.arena.path)

    update = pop = clear = flush = commit = rollback = _refuse

    # -- lifetime -----------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._session.closed or self._map.closed

    def close(self) -> None:
        """Close this reader (and its file, when it opened the file itself). Idempotent."""
        if self._owns_session:
            self._session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        if self.closed:
            return f"<{type(self).__name__} (closed)>"
        with self._session.section():
            return f"<{type(self).__name__} of {self._map!r}, read-only>"

    def _repr_html_(self) -> str:
        with self._session.section():
            return self._map._repr_html_()


class MapReader(CollectionReader[StoredMapT], Mapping[Any, Any]):
    """A read-only ``Mapping`` over a map (:class:`CollectionReader`)."""

    def __getitem__(self, key):
        with self._session.section():
            return self._map[key]

    def get(self, key, default=None, /):
        with self._session.section():
            return self._map.get(key, default)

    __setitem__ = __delitem__ = popitem = setdefault = CollectionReader._refuse


class SetReader(CollectionReader[CollectionT], Set[Any]):
    """A read-only ``Set`` over a set (:class:`CollectionReader`); its algebra (``r & s``)
    gives Python sets. A subclass gives the iteration of its kind."""

    @classmethod
    def _from_iterable(cls, elements):
        return set(elements)

    add = discard = remove = add_many = discard_many = CollectionReader._refuse
    update = intersection_update = difference_update = CollectionReader._refuse
    symmetric_difference_update = CollectionReader._refuse

    def contains_many(self, elements):
        with self._session.section():
            return self._map.contains_many(elements)


class ChunkItemsView(ItemsView):
    """Items of a map that yields ``(keys, values)`` list chunks from ``_chunks(with_values)``."""

    def __iter__(self):
        for keys, values in self._mapping._chunks(with_values=True):
            yield from zip(keys, values)


class ChunkValuesView(ValuesView):
    """Values of a map that yields ``(keys, values)`` list chunks from ``_chunks(with_values)``."""

    def __iter__(self):
        for _, values in self._mapping._chunks(with_values=True):
            yield from values
