"""TreeMap (layer 6): a B+tree of encoded pages in the record store.

- :mod:`~offheap.treemap.treemap`: the map.
- :mod:`~offheap.treemap.page`: the page formats of leaves and inner nodes.
- :mod:`~offheap.treemap.nodecache`: decoded nodes, the write cache and node surgery.
- :mod:`~offheap.treemap.bulk`: bulk loads and merges of sorted runs.
- :mod:`~offheap.treemap.forkpool`: page encoding in forked workers for large bulk loads.
- :mod:`~offheap.treemap.views`: the sorted range API shared by the map and its reader.
- :mod:`~offheap.treemap.reader`: the read-only map over a file another process writes.

May import: layers 1-5 and :mod:`offheap.collection`; never :mod:`offheap.hashmap` or
:mod:`offheap.db`.
"""

from offheap.treemap.treemap import TreeMap, TreeStats

__all__ = ["TreeMap", "TreeStats"]
