"""The read slots of a TreeMap: ``m[k]``, ``k in m`` and ``m.get(k, default)`` (layer 6).

:class:`TreeReads` is the reference: each slot calls the map's ``_lookup``, which holds the
map's lock and answers by the compiled descent or the Python one. The compiled twin,
``offheap.treemap._pages.TreeReads``, is a base type whose slots do the same in C for keys of
exactly the map's key type (no Python frame, no attribute loads), and call ``_lookup`` for
everything else; :data:`TreeReadsBase` is whichever :mod:`offheap.kernels.native` selects, the
first base of :class:`~offheap.treemap.treemap.TreeMap`.

The contract with the map: ``_attach_reads(lock, descent, cache, key_type, scalar_types,
fresh)`` once the map is set up, ``_detach_reads()`` when it closes. The compiled slots run
only while attached; the reference has nothing to attach, as ``_lookup`` reads the map's
attributes at each call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from offheap.kernels import native
from offheap.treemap.tree import MISSING

_compiled = native.compiled_module("offheap.treemap._pages")


class TreeReads:
    """The reference read slots (module docstring)."""

    __slots__ = ()

    if TYPE_CHECKING:
        def _lookup(self, key, default, stored: bool = False) -> Any: ...

    def __getitem__(self, key):
        value = self._lookup(key, MISSING)
        if value is MISSING:
            raise KeyError(key)
        return value

    def get(self, key, default=None, /):
        return self._lookup(key, default)

    def __contains__(self, key) -> bool:
        return self._lookup(key, MISSING, True) is not MISSING  # a pickled value stays unread

    def _attach_reads(self, lock, descent, cache, key_type, scalar_types, fresh) -> None:
        """Nothing to attach: ``_lookup`` reads the map's attributes at each call."""

    def _detach_reads(self) -> None:
        """Nothing to detach (:meth:`_attach_reads`)."""


if TYPE_CHECKING:  # the compiled type has the reference's interface
    TreeReadsBase = TreeReads
else:
    TreeReadsBase = TreeReads if _compiled is None else _compiled.TreeReads
    """The read slots the TreeMap is built on: compiled when the core is, else the reference."""
