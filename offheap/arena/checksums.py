"""Page checksums of an arena file and the table that holds them (layer 3, pure: no IO).

A :class:`ChecksumTable` is the in-memory image of the checksum extent described in
:mod:`offheap.arena.format`: its tag, then one u32 ``crc32`` per file page. The arena updates the
entries of the pages a commit changed and writes back only the table pages whose bytes changed
(:meth:`ChecksumTable.take_changed_pages`); the header keeps the crc of the whole image.

Cost: ``zlib.crc32`` per page, about 0.5 s per GiB read from the page cache; a table costs 4 bytes
per 4 KiB page.
"""

from __future__ import annotations

import zlib

import numpy as np

from offheap.arena.format import CHECKSUMS, PAGE_BYTES, TAG_BYTES, encode_tag

ZERO_PAGE_CRC = zlib.crc32(bytes(PAGE_BYTES))


def page_crcs(data) -> np.ndarray:
    """``crc32`` of every ``PAGE_BYTES`` page of ``data`` (a whole number of pages) as u32."""
    view = memoryview(data).cast("B")
    return np.fromiter((zlib.crc32(view[start: start + PAGE_BYTES])
                        for start in range(0, len(view), PAGE_BYTES)),
                       np.uint32, len(view) // PAGE_BYTES)


def page_numbers(offset: int, n_pages: int) -> np.ndarray:
    """The file page numbers of ``n_pages`` pages from byte ``offset``."""
    return np.arange(offset // PAGE_BYTES, offset // PAGE_BYTES + n_pages)


def extent_bytes_for(n_pages: int) -> int:
    """Size of a checksum extent covering ``n_pages`` file pages, whole pages, tag included."""
    return -(-(TAG_BYTES + 4 * n_pages) // PAGE_BYTES) * PAGE_BYTES


def pages_covered(extent_bytes: int) -> int:
    """How many file pages a checksum extent of ``extent_bytes`` covers."""
    return (extent_bytes - TAG_BYTES) // 4


class ChecksumTable:
    """The checksum extent of one arena file: an owned bytearray image plus a u32 view.

    ``capacity`` pages are covered (the file may not end past ``capacity * PAGE_BYTES``).
    Not thread-safe; owned by one arena.
    """

    def __init__(self, image: bytearray) -> None:
        self.image = image
        self.capacity = pages_covered(len(image))
        self.entries = np.frombuffer(self.image, np.uint32, self.capacity, TAG_BYTES)
        self._changed_pages: set[int] = set()

    @classmethod
    def empty(cls, extent_bytes: int) -> ChecksumTable:
        """A zeroed table filling an extent of ``extent_bytes``, every page marked changed."""
        image = bytearray(extent_bytes)
        image[:TAG_BYTES] = encode_tag(extent_bytes, 0, CHECKSUMS)
        table = cls(image)
        table._changed_pages = set(range(extent_bytes // PAGE_BYTES))
        return table

    def grown(self, extent_bytes: int) -> ChecksumTable:
        """A copy of this table in a larger extent (all of whose pages are new)."""
        table = ChecksumTable.empty(extent_bytes)
        table.entries[: self.capacity] = self.entries
        return table

    def copy(self) -> ChecksumTable:
        table = ChecksumTable(bytearray(self.image))
        table._changed_pages = set(self._changed_pages)
        return table

    @property
    def extent_bytes(self) -> int:
        return len(self.image)

    def crc(self) -> int:
        """The crc32 of the whole image, as the header stores it."""
        return zlib.crc32(self.image)

    def set(self, pages: np.ndarray, crcs: np.ndarray) -> None:
        """Store ``crcs[i]`` for file page ``pages[i]``, noting the table pages that change."""
        changed = self.entries[pages] != crcs
        if not changed.any():
            return
        pages = pages[changed]
        self.entries[pages] = crcs[changed]
        self._changed_pages.update(np.unique((TAG_BYTES + 4 * pages) // PAGE_BYTES).tolist())

    def take_changed_pages(self) -> list[int]:
        """The table pages changed since the last call (sorted), forgetting them."""
        pages = sorted(self._changed_pages)
        self._changed_pages = set()
        return pages

    def mismatches(self, pages: np.ndarray, crcs: np.ndarray) -> np.ndarray:
        """The page numbers among ``pages`` whose ``crcs`` differ from the stored entries."""
        return pages[self.entries[pages] != crcs]
