"""The live extents of an arena, one record each (layer 3, private to the arena).

An :class:`Extent` is one live allocation: where it starts, its size in whole pages (tag
included), the payload bytes its owner asked for, and its mapping once one exists (file arenas
map an extent on first use; anonymous memory maps it at allocation). The
:class:`ExtentTable` of an arena holds every live extent by offset; the arena's accounting is
its sums. The table unmaps, but only the modes map (see :mod:`offheap.arena.backing`), each in
its own way.

A mapping whose buffer is still exported (a numpy view a user kept) cannot be closed; the table
then forgets it and lets the view keep it alive, so a stale view never faults. Not thread-safe:
owned by one arena.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple


class ExtentShape(NamedTuple):
    """What a file says of one live extent: its size (whole pages, tag included) and the
    payload bytes its owner asked for."""

    size: int
    payload_bytes: int


@dataclass(slots=True)
class Extent:
    """One live extent and, once mapped, its mapping.

    ``address`` is the virtual address of a private file mapping (what the pagemap is asked
    about); None for other mappings and while unmapped.
    """

    offset: int
    size: int
    payload_bytes: int
    mapping: mmap.mmap | None = None
    address: int | None = None

    def unmap(self) -> bool:
        """Forget the mapping; False when an exported view keeps it mapped until it dies."""
        mapping, self.mapping, self.address = self.mapping, None, None
        if mapping is None:
            return True
        try:
            mapping.close()
        except BufferError:
            return False
        return True


class ExtentTable:
    """The live extents of one arena by offset, with their mappings."""

    def __init__(self) -> None:
        self._extents: dict[int, Extent] = {}

    def __contains__(self, offset: object) -> bool:
        return offset in self._extents

    def __iter__(self) -> Iterator[int]:
        """The offsets of the live extents."""
        return iter(self._extents)

    def __len__(self) -> int:
        return len(self._extents)

    def get(self, offset: int) -> Extent:
        """The live extent at ``offset``; KeyError when there is none."""
        extent = self._extents.get(offset)
        if extent is None:
            raise KeyError(f"no live extent at offset {offset}")
        return extent

    def add(self, extent: Extent) -> None:
        self._extents[extent.offset] = extent

    def remove(self, offset: int) -> Extent:
        """Unmap and forget the extent at ``offset``. KeyError when there is none; BufferError
        (and the table unchanged) while a view of its mapping is exported."""
        extent = self.get(offset)
        if extent.mapping is not None:
            extent.mapping.close()
        extent.mapping = extent.address = None
        del self._extents[offset]
        return extent

    def mapped(self) -> list[Extent]:
        """The live extents that have a mapping now."""
        return [extent for extent in self._extents.values() if extent.mapping is not None]

    def unmap_all(self) -> bool:
        """Unmap every extent (they stay live); False when a view keeps some mapping alive."""
        all_unmapped = True
        for extent in self._extents.values():
            all_unmapped &= extent.unmap()
        return all_unmapped

    def install(self, shapes: dict[int, ExtentShape]) -> tuple[list[Extent], bool]:
        """Make ``shapes`` the live extents. A mapping whose extent keeps its offset and size
        is kept; every other one is unmapped. Returns the extents that kept their mapping, and
        whether every other mapping could be closed."""
        extents = {offset: Extent(offset, shape.size, shape.payload_bytes)
                   for offset, shape in shapes.items()}
        kept, all_unmapped = [], True
        for old in self.mapped():
            new = extents.get(old.offset)
            if new is not None and new.size == old.size:
                new.mapping, new.address = old.mapping, old.address
                kept.append(new)
            else:
                all_unmapped &= old.unmap()
        self._extents = extents
        return kept, all_unmapped

    def shapes(self) -> dict[int, ExtentShape]:
        """Size and payload of every live extent, as a file would record them."""
        return {offset: ExtentShape(extent.size, extent.payload_bytes)
                for offset, extent in self._extents.items()}

    def sizes(self) -> dict[int, int]:
        """The size of every live extent by offset."""
        return {offset: extent.size for offset, extent in self._extents.items()}

    @property
    def reserved_bytes(self) -> int:
        """The mapped size of every live extent, tags included."""
        return sum(extent.size for extent in self._extents.values())

    @property
    def used_bytes(self) -> int:
        """The payload bytes the owners asked for."""
        return sum(extent.payload_bytes for extent in self._extents.values())
