"""DB (layer 7): named collections in one store, and the tools that work on whole files.

- :mod:`~offheap.db.database`: :class:`DB`: named collections, transactions, compaction.
- :mod:`~offheap.db.catalog`: the catalog's bytes in the store root (which collections, of which
  kind, with which options).
- :mod:`~offheap.db.kinds`: the registry of collection kinds the DB and salvage dispatch on.
- :mod:`~offheap.db.salvage`: copying what is readable out of a damaged DB or map file.

May import: every layer below it.
"""

from offheap.db.database import DB, CollectionStats, DBStats

__all__ = ["DB", "CollectionStats", "DBStats"]
