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
from offheap.db import DB, CollectionStats, DBStats
from offheap.hashmap import HashMapStats, LongHashMap
from offheap.readers import HashReader, TreeReader
from offheap.salvage import SalvageReport, salvage
from offheap.treemap import TreeMap, TreeStats

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
