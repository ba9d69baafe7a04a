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
        extent.mapping = mmap.mmap(-1, extent.size)
        return extent.mapping

    def close(self, clean: bool) -> None:
        self.extents.unmap_all()
