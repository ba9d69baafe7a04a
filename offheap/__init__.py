"""offheap: off-heap collections for Python (layer 8, the public API)."""

from offheap.errors import (
    CapacityError,
    ClosedError,
    CodecUnavailableError,
    CorruptionError,
    OffheapError,
)
from offheap.db import DB
from offheap.hashmap import HashMapStats, LongHashMap
from offheap.treemap import TreeMap, TreeStats

__all__ = [
    "CapacityError",
    "ClosedError",
    "CodecUnavailableError",
    "CorruptionError",
    "DB",
    "HashMapStats",
    "LongHashMap",
    "OffheapError",
    "TreeMap",
    "TreeStats",
]
