"""What every mode of an arena provides (layer 3, private to the arena).

A :class:`Backing` is where an arena's extents live and how its changes become durable: one
subclass per mode, chosen when the arena is built, never switched.

- :class:`~offheap.arena.anonymous.AnonymousMemory`: anonymous memory, nothing durable;
- :class:`~offheap.arena.commit.CommitWriter`: a file with transactions (``"commit"``);
- :class:`~offheap.arena.writethrough.WriteThroughWriter`: a file written through
  (``"none"``);
- :class:`~offheap.arena.reader.FileReader`: a read-only opener beside a writer.

The :class:`~offheap.arena.arena.Arena` facade checks what is common (closed, limit, argument
values) and hands the rest to its backing. The defaults here are those of a mode without
transactions and without readers; a mode overrides what it has. A new durability mode is one
new subclass.

Every backing holds the arena's live extents (:class:`~offheap.arena.extents.ExtentTable`),
the owner's root blob and ``end``, the offset the next appended extent takes. Each maps
memory its own way (:meth:`Backing.map_extent`); mappings never leave the arena package.
Not thread-safe: owned by one arena.
"""

from __future__ import annotations

import mmap
from abc import ABC, abstractmethod
from collections.abc import Callable

from offheap.arena.damage import FileDamage
from offheap.arena.extents import Extent, ExtentTable
from offheap.arena.format import HEADER_BYTES
from offheap.errors import TransactionError

LimitCheck = Callable[[int], None]
"""Raises CapacityError when reserving this many more bytes would cross the arena's limit."""


class Backing(ABC):
    """The storage of one arena in one mode; see the module docstring."""

    def __init__(self) -> None:
        self.extents = ExtentTable()
        self.root = b""
        self.root_offset = 0  # the extent holding a large root blob, 0 while it is inline
        self.end = HEADER_BYTES

    # -- what the mode is -------------------------------------------------------------------

    @property
    def path(self) -> str | None:
        """The file, or None for anonymous memory."""
        return None

    @property
    def overhead_bytes(self) -> int:
        """Reserved bytes beside the extents: the header, and a file's checksum extent."""
        return HEADER_BYTES

    @property
    def free_bytes(self) -> int:
        """Bytes of free extents held for reuse."""
        return 0

    @property
    def generation(self) -> int:
        """The file's generation as last committed or loaded (0 without a file)."""
        return 0

    @property
    def damage(self) -> FileDamage | None:
        """What an open with ``recover=True`` found wrong with the file."""
        return None

    def check_writable(self) -> None:
        """Raise unless this backing takes changes now (ReadOnlyError, TransactionError)."""

    # -- extents ------------------------------------------------------------------------------

    @abstractmethod
    def allocate(self, size: int, payload_bytes: int, check_limit: LimitCheck) -> int:
        """Place, map and register a new extent of ``size`` bytes (whole pages, tag included)
        with zeroed payload; return its offset. ``check_limit`` is called with the bytes it
        would reserve before anything is mapped or written."""

    @abstractmethod
    def release(self, offset: int, size: int) -> None:
        """Make the space of an extent just removed from :attr:`extents` free."""

    @abstractmethod
    def map_extent(self, extent: Extent) -> mmap.mmap:
        """Give a live extent that has no mapping one; return it."""

    def reservation_bytes(self, sizes: list[int]) -> int:
        """How much the reserved bytes grow if extents of ``sizes`` are allocated in turn."""
        return sum(sizes)

    def set_root(self, blob: bytes, offset: int) -> None:
        """Make ``blob`` the root, kept in the extent at ``offset`` (0: inline)."""
        self.root, self.root_offset = blob, offset

    # -- durability ---------------------------------------------------------------------------

    def commit(self) -> None:
        """Make the changes durable; nothing to do without a file."""

    def rollback(self) -> None:
        """Return to the last commit; refused by every mode without transactions."""
        where = self.path or "anonymous memory"
        raise TransactionError(
            f"rollback() needs durability='commit'; this arena ({where}) has no transactions: "
            f"open a file with durability='commit' to roll back, or undo the changes yourself")

    def flush(self) -> None:
        """Make the state durable; nothing to do without a file."""

    def uncommitted_bytes(self) -> int:
        """Bytes of pages whose content differs from the last commit; 0 in every mode without
        transactions (their changes are the file's at once, or never anyone's)."""
        return 0

    def note_failed_change(self) -> None:
        """An allocation, free, root change or flush raised: the owner's state may be
        half-written. Only a mode that writes through needs to know."""

    # -- sharing ------------------------------------------------------------------------------

    def begin_read(self) -> bool:
        """Start a read section; True when the file changed since the last one. Only a
        reader's file changes under it."""
        return False

    def end_read(self) -> None:
        """End the read section :meth:`begin_read` started."""

    def has_readers(self) -> bool:
        """Whether read-only openers of this arena's file exist now."""
        return False

    # -- accounting and lifetime --------------------------------------------------------------

    def file_usage(self) -> tuple[int, int]:
        """The file's size and the bytes it occupies on disk; zeros without a file."""
        return 0, 0

    def check(self) -> None:
        """Assert the invariants of the mode's layout."""

    @abstractmethod
    def close(self, clean: bool) -> None:
        """Unmap every extent whose buffer is not exported and release the file; ``clean``
        is False when the owner failed to write its state (see :meth:`Arena.close`)."""
