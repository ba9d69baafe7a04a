"""The arena (layer 3): every byte offheap stores lives in memory mapped here.

:class:`Arena` (:mod:`~offheap.arena.arena`) is the facade the layers above use; every other
module of this package is private to it:

- the modes, one class each, behind :mod:`~offheap.arena.backing`: anonymous memory
  (:mod:`~offheap.arena.anonymous`), the writer with transactions (:mod:`~offheap.arena.commit`),
  the writer without (:mod:`~offheap.arena.writethrough`), what both writers share
  (:mod:`~offheap.arena.filewriter`), the reader beside a writer (:mod:`~offheap.arena.reader`),
  and what every file mode shares (:mod:`~offheap.arena.filebacking`);
- the live extents (:mod:`~offheap.arena.extents`) and the open file
  (:mod:`~offheap.arena.arenafile`);
- the file format (:mod:`~offheap.arena.format`), reading a file's state
  (:mod:`~offheap.arena.filestate`), the write-ahead log (:mod:`~offheap.arena.wal`) and applying
  what it holds (:mod:`~offheap.arena.recovery`), page checksums (:mod:`~offheap.arena.checksums`),
  free space (:mod:`~offheap.arena.freespace`), byte-range locks (:mod:`~offheap.arena.locks`),
  holes in sparse files (:mod:`~offheap.arena.holes`), the pages a private mapping changed
  (:mod:`~offheap.arena.dirtypages`) and what a recovering open found damaged
  (:mod:`~offheap.arena.damage`).

Nothing outside this package maps memory or opens a map's file.

May import: :mod:`offheap.errors`, :mod:`offheap.kernels`.
"""

from offheap.arena.arena import Arena, format_bytes
from offheap.arena.format import HEADER_BYTES, PAGE_BYTES

__all__ = ["HEADER_BYTES", "PAGE_BYTES", "Arena", "format_bytes"]
