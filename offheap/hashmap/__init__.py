"""LongHashMap (layer 6): int64 keys in a Robin Hood hash table of arena regions.

- :mod:`~offheap.hashmap.longhashmap`: the map.
- :mod:`~offheap.hashmap.longhashset`: the set, the same table with a value width of 0.
- :mod:`~offheap.hashmap.table`: the part of both above the core: files, metadata, protocol.
- :mod:`~offheap.hashmap.valueslots`: the value column (typed values or slot words).
- :mod:`~offheap.hashmap.reader`: the read-only map over a file another process writes.
- :mod:`~offheap.hashmap.cache`: the Cache, bounded and expiring, on a HashMap's table
  (:mod:`~offheap.hashmap.cachetable`).

May import: layers 1-5 and :mod:`offheap.collection`; never :mod:`offheap.treemap` or
:mod:`offheap.db`.
"""

from offheap.hashmap.longhashmap import HashMapStats, LongHashMap
from offheap.hashmap.longhashset import HashSetStats, LongHashSet

__all__ = ["HashMapStats", "HashSetStats", "LongHashMap", "LongHashSet"]
