"""offheap: off-heap collections for Python (layer 8, the public API)."""

from offheap.errors import (
    CapacityError,
    ClosedError,
    CodecUnavailableError,
    CorruptionError,
    LockedError,
    OffheapError,
    ReadOnlyError,
    RecoveryPendingError,
    TransactionError,
)
from offheap.db.database import DB, CollectionStats, DBStats
from offheap.hashmap.longhashmap import HashMapStats, LongHashMap
from offheap.hashmap.reader import HashReader
from offheap.treemap.reader import TreeReader
from offheap.db.salvage import SalvageReport, salvage
from offheap.treemap.treemap import TreeMap, TreeStats

__all__ = [
    "CapacityError",
    "ClosedError",
    "CodecUnavailableError",
    "CollectionStats",
    "CorruptionError",
    "DB",
    "DBStats",
    "HashMapStats",
    "HashReader",
    "LockedError",
    "LongHashMap",
    "OffheapError",
    "ReadOnlyError",
    "RecoveryPendingError",
    "SalvageReport",
    "TransactionError",
    "TreeMap",
    "TreeReader",
    "TreeStats",
    "salvage",
]
