"""The collection protocol (layer 6): what a DB, a reader, compaction and salvage ask of a map.

A collection (a :class:`~offheap.TreeMap`, a :class:`~offheap.LongHashMap`, a
:class:`~offheap.HashMap`, their sets :class:`~offheap.TreeSet`, :class:`~offheap.LongHashSet`
and :class:`~offheap.HashSet`) keeps its entries in a record store that it owns (a standalone
map) or shares with the other collections of a DB.
The code that holds collections without knowing their insides reaches them only through
:class:`StoredCollection`: the DB (layer 7: its catalog, commit, rollback, statistics,
compaction), the read-only readers of :mod:`offheap.collection.readers`, and salvage. The
underscored members belong to that contract between layers 6 and 7, not to the public API.

The protocol is structural: a class implements it by having these members. Every kind the DB
registers (:mod:`offheap.db.kinds`) is checked against it by mypy, through the bound of
:data:`CollectionT`, and by ``tests/offheap/test_collection_protocol.py`` at run time.

Thread safety is the collection's own (a TreeMap serializes on its lock, a LongHashMap not at
all); the callers below hold the DB's or the read session's lock around every call.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar, runtime_checkable


@runtime_checkable
class StoredCollection(Protocol):
    """A map whose whole state is its metadata record and the records and regions it names."""

    @property
    def closed(self) -> bool:
        """True once :meth:`close` or :meth:`_invalidate` ran: from then on reads and writes
        raise :class:`~offheap.errors.ClosedError`, and the DB drops it from its open ones."""
        ...

    @property
    def meta_recid(self) -> int:
        """The store record that holds the metadata. With the kind's name and its options it
        is all a DB's catalog keeps to reopen the collection; it stays the same while the
        collection lives, except across a compaction (see :meth:`_reload`)."""
        ...

    def __len__(self) -> int:
        """The number of entries, in O(1)."""
        ...

    def __contains__(self, key: object) -> bool:
        ...

    def stats(self) -> object:
        """A frozen dataclass of size figures, computed without touching the entries."""
        ...

    def flush(self) -> None:
        """Write everything held in memory (dirty nodes, the metadata) into the store, so that
        the store alone describes the collection: the DB calls it before every commit."""
        ...

    def _check_stored(self) -> None:
        """CorruptionError unless the metadata record and what it names, as :meth:`flush`
        last wrote them, pass the checks a reopen makes: a commit runs it before it publishes
        the collection (:func:`offheap.collection.filemap.check_reopenable`), so that a
        commit never writes a state that would not open. Cheap: O(1) to O(table / 8)."""
        ...

    def close(self) -> None:
        """Flush unless the store is read-only, then release the memory; idempotent. A
        standalone map closes its store too, a map in a DB leaves the shared store open."""
        ...

    def _release(self) -> None:
        """Drop every view into the store and every decoded cache, dirty state included,
        without writing anything. Called before the store rolls back or remaps its memory (a
        rollback, a reader picking up a commit, a compaction): a view that outlived the remap
        would read the old memory. Nothing but :meth:`_reload` or :meth:`_invalidate` may
        follow."""
        ...

    def _reload(self, meta_recid: int | None = None) -> None:
        """Re-read the whole state from the metadata record, ``meta_recid`` when it moved (a
        compacted file numbers its records anew). The collection object stays valid for its
        holders; iterators in progress raise RuntimeError on their next step."""
        ...

    def _invalidate(self) -> None:
        """Close without writing anything: the store no longer holds this collection (a
        rollback dropped one created after the last commit, the DB closed, or a compaction's
        copy was handed over)."""
        ...

    def _live_bytes(self) -> int:
        """Bytes of the store that this collection's entries take, as last written: what
        ``DB.stats()`` reports per collection."""
        ...

    def _check(self) -> None:
        """Assert every invariant of the structure (AssertionError); the tests call it."""
        ...

    def _repr_html_(self) -> str:
        """A small HTML table of :meth:`stats` for notebooks."""
        ...


@runtime_checkable
class StoredMap(StoredCollection, Protocol):
    """A stored collection that maps keys to values (the maps; the sets are collections of
    elements alone): what a :class:`~offheap.collection.readers.MapReader` reads."""

    def __getitem__(self, key: Any) -> Any:
        """The value stored under ``key`` (a fresh object), or KeyError."""
        ...

    def get(self, key: Any, default: Any = None, /) -> Any:
        ...


CollectionT = TypeVar("CollectionT", bound=StoredCollection)
"""A concrete collection class: what a reader wraps and a DB kind builds."""

StoredMapT = TypeVar("StoredMapT", bound=StoredMap)
"""A concrete map class: what a map reader wraps."""
