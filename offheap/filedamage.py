"""What an arena opened with ``recover=True`` found wrong with its file (layer 3, pure: no IO).

The arena builds one :class:`FileDamage` while it opens a file in recover mode and keeps it as
``arena.damage``; salvage reads it to say what it could not read and why.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FileDamage:
    """Damage found when the file was opened (it is not updated afterwards).

    ``lost_ranges``: ``(offset, length)`` of the file ranges no intact extent tag covers, in
    file order. The walk over the tags skipped them, so whatever extents lay there are not part
    of the arena; a range that reaches the end of what the walk covers is where it stopped.
    """

    lost_ranges: tuple[tuple[int, int], ...] = ()

    @property
    def lost_bytes(self) -> int:
        return sum(length for _, length in self.lost_ranges)
