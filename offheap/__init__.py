"""offheap: off-heap collections for Python (layer 8, the public API)."""

from offheap.errors import (
    CapacityError,
    ClosedError,
    CodecUnavailableError,
    CorruptionError,
    OffheapError,
)
from offheap.hashmap import HashMapStats, LongHashMap

__all__ = [
    "CapacityError",
    "ClosedError",
    "CodecUnavailableError",
    "CorruptionError",
    "HashMapStats",
    "LongHashMap",
    "OffheapError",
]
