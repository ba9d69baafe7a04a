"""What an arena opened with ``recover=True`` found wrong with its file (layer 3, pure: no IO).

The arena builds one :class:`FileDamage` while it opens a file in recover mode and keeps it as
``arena.damage``; salvage asks it which bytes it may trust and reports what it could not read.
Offsets here are file offsets; :meth:`FileDamage.items_touching` answers for whole arrays at
once, so a hash table's slots are sorted into trusted and untrusted in one numpy step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from offheap.arena.format import PAGE_BYTES


@dataclass(frozen=True)
class FileDamage:
    """Damage found when the file was opened (it is not updated afterwards).

    ``checked``: every live page was compared with its checksum. Not so for a file a writer
    without transactions left open (``left_open``), whose checksums describe its last clean
    close, nor when the open asked for ``verify=False``.
    ``table_intact``: the checksum extent matched the crc the header keeps of it; when it did
    not, some pages may be listed as failed because their entry, not the page, is damaged.
    ``failed_pages``: file offsets of the live pages whose checksum failed, ascending.
    ``root_failed``: the owner's root blob lies on a failed page.
    ``lost_ranges``: ``(offset, length)`` of the file ranges no intact extent tag covers, in
    file order. The walk over the tags skipped them, so whatever extents lay there are not part
    of the arena. The last range may be where the walk stopped; it then reaches the end of the
    file, or the end the header records if the file is shorter (truncated).
    """

    checked: bool = False
    left_open: bool = False
    table_intact: bool = True
    failed_pages: tuple[int, ...] = ()
    root_failed: bool = False
    lost_ranges: tuple[tuple[int, int], ...] = ()

    @property
    def lost_bytes(self) -> int:
        return sum(length for _, length in self.lost_ranges)

    @property
    def clean(self) -> bool:
        """Every live page was checked and passed, the checksum extent too, nothing was lost."""
        return (self.checked and self.table_intact and not self.failed_pages
                and not self.lost_ranges)

    @property
    def failed_ranges(self) -> tuple[tuple[int, int], ...]:
        """``failed_pages`` as ``(offset, length)`` runs of adjacent pages."""
        runs: list[list[int]] = []
        for page in self.failed_pages:
            if runs and runs[-1][0] + runs[-1][1] == page:
                runs[-1][1] += PAGE_BYTES
            else:
                runs.append([page, PAGE_BYTES])
        return tuple((offset, length) for offset, length in runs)

    def items_touching(self, start: int, itemsize: int, count: int) -> np.ndarray:
        """A bool per item of an array of ``count`` items of ``itemsize`` bytes at file offset
        ``start``: does the item share a byte with a page that failed its checksum?

        Item ``i`` spans ``[start + i * itemsize, start + (i + 1) * itemsize)``; for a failed
        page ``[p, p + PAGE_BYTES)`` the items from ``(p - start) // itemsize`` up to
        ``ceil((p + PAGE_BYTES - start) / itemsize)`` (exclusive) touch it. O(failed pages).
        """
        touched = np.zeros(count, bool)
        if not count or not itemsize:
            return touched
        stop = start + count * itemsize
        for page in self.failed_pages:
            if page >= stop or page + PAGE_BYTES <= start:
                continue
            first = max(0, (page - start) // itemsize)
            last = min(count, -(-(page + PAGE_BYTES - start) // itemsize))
            touched[first:last] = True
        return touched
