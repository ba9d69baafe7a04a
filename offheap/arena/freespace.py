"""Bookkeeping of the free extents of a file arena (layer 3, pure: offsets and sizes, no IO).

Free space is a set of extents ``offset -> size``, kept merged (no two adjacent). With
transactions, space freed since the last commit is *pending*: it is still live in the committed
file, so a crash must find it intact, and it becomes reusable only once a commit has made it
free there (:meth:`FreeSpace.settled`). Allocation is first fit by offset: O(free extents).
"""

from __future__ import annotations


def merged(extents: dict[int, int]) -> dict[int, int]:
    """``extents`` with every run of adjacent extents joined into one."""
    result: dict[int, int] = {}
    last = None
    for offset, size in sorted(extents.items()):
        if last is not None and last + result[last] == offset:
            result[last] += size
        else:
            result[offset] = size
            last = offset
    return result


class FreeSpace:
    """Reusable free extents plus pending ones; owned by one arena, not thread-safe."""

    def __init__(self, free: dict[int, int] | None = None) -> None:
        self.free = merged(free or {})
        self.pending: dict[int, int] = {}

    @property
    def total_bytes(self) -> int:
        return sum(self.free.values()) + sum(self.pending.values())

    def first_fit(self, size: int) -> int | None:
        """The lowest reusable free offset with room for ``size`` bytes, or None."""
        return min((offset for offset, free in self.free.items() if free >= size), default=None)

    def take(self, offset: int, size: int) -> tuple[int, int] | None:
        """Use the first ``size`` bytes of the free extent at ``offset``; the remainder, if any,
        stays free and is returned as ``(offset, size)``."""
        free = self.free.pop(offset)
        if free == size:
            return None
        self.free[offset + size] = free - size
        return offset + size, free - size

    def release(self, offset: int, size: int) -> tuple[int, int]:
        """Make ``size`` bytes at ``offset`` reusable now; the merged extent that holds them."""
        self.free[offset] = size
        self.free = merged(self.free)
        start = max(o for o in self.free if o <= offset)
        return start, self.free[start]

    def defer(self, offset: int, size: int) -> None:
        """Free ``size`` bytes at ``offset`` at the next commit (see :meth:`settled`)."""
        self.pending[offset] = size

    def settled(self) -> dict[int, int]:
        """What the free extents become when the pending ones are committed (a new dict)."""
        return merged({**self.free, **self.pending})


def cut_tail(free: dict[int, int], end: int) -> int:
    """Remove the free extent that ends at ``end`` (if any) from ``free``; the new end."""
    for offset, size in free.items():
        if offset + size == end:
            del free[offset]
            return offset
    return end
