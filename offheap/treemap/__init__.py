"""TreeMap (layer 6): a B+tree of encoded pages in the record store.

The facade and what it admits:

- :mod:`~offheap.treemap.treemap`: the map (``MutableMapping`` and sorted API, lock, lifetime).
- :mod:`~offheap.treemap.admission`: key checks, value copies, ``update`` batches.
- :mod:`~offheap.treemap.meta`: the metadata record and the tree's shape.
- :mod:`~offheap.treemap.timer`: the write cache's flush timer.
- :mod:`~offheap.treemap.stats`: ``stats()``, ``repr`` and the notebook table.
- :mod:`~offheap.treemap.views`: the sorted range API shared by the map and its reader.
- :mod:`~offheap.treemap.reader`: the read-only map over a file another process writes.
- :mod:`~offheap.treemap.treeset`: the sorted set on a TreeMap, and its reader.

The tree beneath it:

- :mod:`~offheap.treemap.tree`: lookups, changes, scans and bulk replacement.
- :mod:`~offheap.treemap.cursor`: a position in the tree and the descents that set it.
- :mod:`~offheap.treemap.scan`: range scans, leaf by leaf.
- :mod:`~offheap.treemap.structure`: splits, merges, rebalancing, root growth and shrink.
- :mod:`~offheap.treemap.writethrough`: how changes reach the store, and their undo.
- :mod:`~offheap.treemap.bulk`: bulk builds and merges of sorted runs.
- :mod:`~offheap.treemap.forkpool`: page encoding in forked workers for large bulk loads.
- :mod:`~offheap.treemap.nodecache`: decoded nodes and the write cache.
- :mod:`~offheap.treemap.nodestore`: nodes as records, and the page-byte totals.
- :mod:`~offheap.treemap.node`: decoded nodes and the surgery on them.
- :mod:`~offheap.treemap.page`: the page formats of leaves and inner nodes.
- :mod:`~offheap.treemap.salvage`: the defensive walk of a damaged tree, for salvage.

The page codec, node search, descent and cursor are the parts a compiled implementation may
replace; each of those modules states the interface it must keep.

May import: layers 1-5 and :mod:`offheap.collection`; never :mod:`offheap.hashmap` or
:mod:`offheap.db`.
"""

from offheap.treemap.stats import TreeStats
from offheap.treemap.treemap import TreeMap
from offheap.treemap.treeset import TreeSet

__all__ = ["TreeMap", "TreeSet", "TreeStats"]
