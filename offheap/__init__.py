"""offheap: off-heap collections for Python (layer 8, the public API)."""

__version__ = "0.1.0"
"""The version of the distribution (offheap, sparkey and experiments), read by its build."""

from offheap.errors import (
    CapacityError,
    ClosedError,
    CodecUnavailableError,
    CorruptionError,
    LockedError,
    MissingFileError,
    OffheapError,
    PickleNotAllowedError,
    ReadOnlyError,
    RecoveryPendingError,
    StorageError,
    TransactionError,
    UncommittedChangesWarning,
)
from offheap.db.database import DB, CollectionStats, DBStats
from offheap.hashmap.cache import Cache, CacheStats
from offheap.hashmap.keyedmap import HashMap
from offheap.hashmap.keyedset import HashSet
from offheap.hashmap.longhashmap import HashMapStats, LongHashMap
from offheap.hashmap.longhashset import HashSetStats, LongHashSet
from offheap.hashmap.reader import HashReader, HashSetReader
from offheap.treemap.reader import TreeReader
from offheap.db.salvage import SalvageReport, salvage
from offheap.treemap.treemap import TreeMap, TreeStats
from offheap.treemap.treeset import TreeSet, TreeSetReader
from offheap.kernels import native as _native

compiled: bool = _native.compiled()
"""Whether the compiled core runs (False: the pure-Python reference, by ``OFFHEAP_PURE_PYTHON=1``
or because the extension was not built; see :mod:`offheap.kernels.native`)."""

__all__ = [
    "__version__",
    "Cache",
    "CacheStats",
    "CapacityError",
    "ClosedError",
    "CodecUnavailableError",
    "CollectionStats",
    "CorruptionError",
    "DB",
    "DBStats",
    "HashMap",
    "HashMapStats",
    "HashReader",
    "HashSet",
    "HashSetReader",
    "HashSetStats",
    "LockedError",
    "LongHashMap",
    "LongHashSet",
    "MissingFileError",
    "OffheapError",
    "PickleNotAllowedError",
    "ReadOnlyError",
    "RecoveryPendingError",
    "SalvageReport",
    "StorageError",
    "TransactionError",
    "TreeMap",
    "TreeReader",
    "TreeSet",
    "TreeSetReader",
    "TreeStats",
    "UncommittedChangesWarning",
    "compiled",
    "salvage",
]
