"""Free space inside a record store's segments (layer 4, private to :mod:`offheap.store.records`).

A *piece* is a run of free bytes at an address (``segment << 32 | position``) of a segment. Pieces
never touch: :meth:`FreeSpace.add` merges a freed run with the pieces just before and after it,
so the chunks a B-tree frees as its leaves grow and split come back together into runs that any
later record fits, instead of staying behind as holes of the one size they had. Example, chunks
A B C D of 96 bytes each at positions 0, 96, 192, 288: freeing B gives the piece (96, 96); freeing
C merges it into (96, 192), where a record of 160 bytes fits (leaving (256, 32)); freeing A and D
merges the rest into (0, 384) less whatever took the middle.

:meth:`FreeSpace.take` finds a piece of exactly the requested size first (O(1)), else splits the
smallest piece larger than it (best fit, O(log n) to find: the sizes of the non-empty buckets are
kept sorted); the rest of a split piece stays free. Addresses of one size come back last in,
first out. :meth:`FreeSpace.take_at` takes the front of the piece at a given address, for a
record that grows in place.

Nothing here is persisted: the store rebuilds its free space from the gaps between live records
when it opens. Thread safety: none; owned by one store.

Compiled twin: ``FreeSpace`` of ``offheap/store/_space.c``, with the same pieces and the same
choices (its :meth:`pieces` lists them by address); this class is its reference.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator


class FreeSpace:
    """The free pieces of one store: by address, by end address and by size."""

    def __init__(self) -> None:
        self._size_at: dict[int, int] = {}  # start address -> size of the piece there
        self._start_before: dict[int, int] = {}  # address just past a piece -> its start
        self._by_size: dict[int, dict[int, None]] = {}  # size -> start addresses, in order freed
        self._sizes: list[int] = []  # the keys of _by_size, ascending
        self.nbytes = 0

    def add(self, addr: int, nbytes: int) -> tuple[int, int]:
        """Free ``nbytes`` (> 0) at ``addr``, merged with the pieces around it; return the
        start and size of the piece that now holds them."""
        before = self._start_before.get(addr)
        if before is not None:
            nbytes += self.remove(before)
            addr = before
        if addr + nbytes in self._size_at:
            nbytes += self.remove(addr + nbytes)
        self._insert(addr, nbytes)
        return addr, nbytes

    def take(self, nbytes: int, split: bool = True) -> int | None:
        """The address of ``nbytes`` taken from free space: a piece of that size, else (when
        ``split``) the front of the smallest larger piece; None if there is none."""
        bucket = self._by_size.get(nbytes)
        if bucket:
            addr = next(reversed(bucket))
            self.remove(addr)
            return addr
        if not split:
            return None
        i = bisect_left(self._sizes, nbytes)
        if i == len(self._sizes):
            return None
        addr = next(reversed(self._by_size[self._sizes[i]]))
        self.take_at(addr, nbytes)
        return addr

    def take_at(self, addr: int, nbytes: int) -> bool:
        """Take ``nbytes`` at ``addr`` if a piece of at least that size starts there (a record
        that grows into the free bytes after it); whether it did."""
        size = self._size_at.get(addr, 0)
        if size < nbytes:
            return False
        self.remove(addr)
        if size > nbytes:
            self._insert(addr + nbytes, size - nbytes)
        return True

    def remove(self, addr: int) -> int:
        """Take the whole piece at ``addr`` out of free space; its size."""
        size = self._size_at.pop(addr)
        del self._start_before[addr + size]
        bucket = self._by_size[size]
        del bucket[addr]
        if not bucket:
            del self._by_size[size]
            del self._sizes[bisect_left(self._sizes, size)]
        self.nbytes -= size
        return size

    def pieces(self) -> Iterator[tuple[int, int]]:
        """(start address, size) of every piece."""
        return iter(self._size_at.items())

    def _check(self) -> None:
        """Assert the invariants: the three indexes agree, no two pieces touch, the total."""
        assert len(self._start_before) == len(self._size_at)
        assert self._sizes == sorted(self._by_size) and all(self._by_size.values())
        assert sum(len(bucket) for bucket in self._by_size.values()) == len(self._size_at)
        for addr, size in self._size_at.items():
            assert size > 0 and addr in self._by_size[size] and self._start_before[addr + size] == addr
            assert addr not in self._start_before, f"free pieces touch at {addr:#x}"
        assert self.nbytes == sum(self._size_at.values())

    def _insert(self, addr: int, nbytes: int) -> None:
        self._size_at[addr] = nbytes
        self._start_before[addr + nbytes] = addr
        bucket = self._by_size.get(nbytes)
        if bucket is None:
            bucket = self._by_size[nbytes] = {}
            insort(self._sizes, nbytes)
        bucket[addr] = None
        self.nbytes += nbytes
