"""What every collection shares (layer 6, below the collections themselves).

- :mod:`~offheap.collection.protocol`: :class:`StoredCollection`, what the DB, readers,
  compaction and salvage ask of a collection.
- :mod:`~offheap.collection.filemap`: commit/rollback and the with-block of a map that owns its file.
- :mod:`~offheap.collection.readers`: read sessions and the read-only wrapper of a collection over a
  file another process writes.
- :mod:`~offheap.collection.locks`: the re-entrant lock of a collection (or of a DB), compiled
  as ``MapLock`` (``_lock.c``) beside ``threading.RLock`` for the pure core.

May import: :mod:`offheap.errors`, :mod:`offheap.kernels`, :mod:`offheap.arena`,
:mod:`offheap.store`.
"""
