"""The arena (layer 3): every byte offheap stores lives in memory mapped here.

:class:`Arena` is the facade the layers above use; every other module of this package is private
to it: the file format (:mod:`~offheap.arena.format`), the write-ahead log
(:mod:`~offheap.arena.wal`), page checksums (:mod:`~offheap.arena.checksums`), free space
(:mod:`~offheap.arena.freespace`), byte-range locks (:mod:`~offheap.arena.locks`), holes in sparse
files (:mod:`~offheap.arena.holes`), the pages a private mapping changed
(:mod:`~offheap.arena.dirtypages`) and what a recovering open found damaged
(:mod:`~offheap.arena.damage`). Nothing outside this package maps memory or opens a map's file.

May import: :mod:`offheap.errors`, :mod:`offheap.kernels`.
"""

from offheap.arena.arena import Arena, format_bytes
from offheap.arena.format import HEADER_BYTES, PAGE_BYTES

__all__ = ["HEADER_BYTES", "PAGE_BYTES", "Arena", "format_bytes"]
