"""LongHashMap (layer 6): int64 keys in a Robin Hood hash table of arena regions.

- :mod:`~offheap.hashmap.longhashmap`: the map, its table and its metadata.
- :mod:`~offheap.hashmap.valueslots`: the value column (typed values or slot words).
- :mod:`~offheap.hashmap.reader`: the read-only map over a file another process writes.

May import: layers 1-5 and :mod:`offheap.collection`; never :mod:`offheap.treemap` or
:mod:`offheap.db`.
"""

from offheap.hashmap.longhashmap import HashMapStats, LongHashMap

__all__ = ["HashMapStats", "LongHashMap"]
