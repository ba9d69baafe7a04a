"""Pure kernels (layer 2): bytes and arrays in, bytes and arrays out; no IO, no state.

- :mod:`~offheap.kernels.bounds`: the int64 key range, stated once.
- :mod:`~offheap.kernels.mix`: the 64-bit hash mix of int64 keys, scalar and vectorized.
- :mod:`~offheap.kernels.packing`: zigzag, varints, frame-of-reference bit packing and front coding,
  vectorized with numpy.
- :mod:`~offheap.kernels.smallpack`: the same encodings for page-sized inputs in pure Python,
  byte-identical to :mod:`~offheap.kernels.packing`.
- :mod:`~offheap.kernels.codecs`: the block codecs (none, zlib, snappy, zstd).
- :mod:`~offheap.kernels.sizes`: sizes written for people (``"256MiB"``) and ``limit=``
  arguments.

May import: :mod:`offheap.errors` only.
"""
