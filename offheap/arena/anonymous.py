"""An arena of anonymous memory (layer 3, private to the arena).

Each extent is its own ``mmap(-1, size)``: zeroed by the kernel, given back to it whole when
the extent is freed. Offsets are unique numbers handed out in increasing order, as if the
extents lay one after another in a file; nothing is durable and no space is reused (the kernel
reuses the memory).
"""

from __future__ import annotations

import mmap

from offheap.arena.backing import Backing, LimitCheck
from offheap.arena.extents import Extent


class AnonymousMemory(Backing):
    """Extents of anonymous memory; see the module docstring."""

    def allocate(self, size: int, payload_bytes: int, check_limit: LimitCheck) -> int:
        check_limit(size)
        extent = Extent(self.end, size, payload_bytes)
        self.map_extent(extent)
        self.extents.add(extent)
        self.end += size
        return extent.offset

    def release(self, offset: int, size: int) -> None:
        """Nothing to do: unmapping the extent gave its memory back."""

    def map_extent(self, extent: Extent) -> mmap.mmap:
        """A private anonymous mapping: a forked child gets a copy-on-write copy, as it does of
        the Python heap, so neither process's changes reach the other's map (the default
        ``mmap(-1, n)`` mapping is shared, and a child's writes would corrupt its parent's)."""
        extent.mapping = mmap.mmap(-1, extent.size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        return extent.mapping

    def close(self, clean: bool) -> None:
        self.extents.unmap_all()
