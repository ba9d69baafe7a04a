"""Records and their bytes (layers 4-5): the record store on an arena, and the serializers.

- :mod:`~offheap.store.records`: :class:`RecordStore`, records addressed by a stable record id,
  free space reused by size class, large aligned regions for arrays.
- :mod:`~offheap.store.serializers`: key and value types, one value or a whole column at a time.

May import: :mod:`offheap.errors`, :mod:`offheap.kernels`, :mod:`offheap.arena`.
"""
