"""What becomes of a file that a program forgot to close (layer 6): the rule, and the registry
that applies it at interpreter exit.

The rule (``docs/durability.md``, "Forgetting close()"), for a writer of a file that is garbage
collected, or still open when the interpreter exits:

- a standalone file map (``TreeMap(path=...)``, ``LongHashMap(path=...)``) is closed as its
  ``close()`` would close it: committed (``durability="none"``: flushed and marked closed
  cleanly), as ``shelve`` and ``dbm`` save theirs; a ``ResourceWarning`` names the file;
- a file DB rolls back what it had not committed, as sqlite3 does, and says so with an
  :class:`~offheap.errors.UncommittedChangesWarning` (shown by default) naming the file and the
  bytes dropped; with nothing uncommitted (or ``durability="none"``, which has nothing to roll
  back and is closed cleanly) it is a ``ResourceWarning``.

An *owner* is such a writer: it has ``closed`` and ``_abandon(when)``, which applies the rule.
:func:`track` registers one when it opens its file; the registry holds weak references only,
so it keeps nothing alive. Garbage collection reaches owners through their ``__del__``, which
calls :func:`opened_here` first: an object inherited by a forked child is never saved by the
child (its file belongs to the parent's open). Thread safety: :func:`track` may be called from
any thread (a dict assignment under the GIL); the exit hook runs once, after every other thread
was joined.
"""

from __future__ import annotations

import atexit
import os
import warnings
import weakref
from typing import Protocol


class Owner(Protocol):
    """A writer of a file that applies the rule when abandoned."""

    @property
    def closed(self) -> bool:
        ...

    def _abandon(self, when: str) -> None:
        """Apply the rule of the module docstring; ``when`` names the moment for the warning
        (``"garbage collection"``, ``"interpreter exit"``)."""
        ...


_open_owners: dict[int, weakref.ref[Owner]] = {}
"""Every owner this process registered and that is alive, by ``id``."""

_PID_ATTRIBUTE = "_opened_in_pid"


def track(owner: Owner) -> None:
    """Register ``owner``, which has just opened its file in this process, so that the rule
    applies to it at interpreter exit and at garbage collection."""
    key = id(owner)

    def forget(_: weakref.ref[Owner]) -> None:
        _open_owners.pop(key, None)

    setattr(owner, _PID_ATTRIBUTE, os.getpid())
    _open_owners[key] = weakref.ref(owner, forget)


def opened_here(owner: object) -> bool:
    """Whether ``owner`` was registered by this process and is not closed yet: what its
    ``__del__`` checks before abandoning it. False for an object whose construction failed."""
    return getattr(owner, _PID_ATTRIBUTE, None) == os.getpid() \
        and not getattr(owner, "closed", True)


def warn_abandoned(message: str, category: type[Warning]) -> None:
    """Issue the warning of an abandoned owner, attributed to no caller's line (the moment is
    a collection or the exit, not a statement)."""
    warnings.warn(message, category, stacklevel=1)


def _abandon_all_at_exit() -> None:
    """Apply the rule to every owner still open at interpreter exit; an owner that cannot be
    saved is reported and does not stop the others."""
    for reference in list(_open_owners.values()):
        owner = reference()
        if owner is None or not opened_here(owner):
            continue
        try:
            owner._abandon("interpreter exit")
        except Exception as exc:  # noqa: BLE001 - reported, and the other owners still closed
            warn_abandoned(f"{owner!r} could not be closed at interpreter exit: {exc!r}",
                           RuntimeWarning)


atexit.register(_abandon_all_at_exit)
