"""The item slots of a TreeMap: ``m[k]``, ``k in m``, ``m.get(k, default)``, ``m[k] = v`` and
``del m[k]`` (layer 6).

:class:`TreeSlots` is the reference: each slot calls the map's Python method (``_lookup``,
``_put_item``, ``_delete_item``), which holds the map's lock and does the work. The compiled
twin, ``offheap.treemap._pages.TreeSlots``, is a base type whose slots do the common cases in C
(a lookup by the compiled descent; a store that only edits the leaf of the tree's hint, or
splits it for an ascending key: see ``offheap/treemap/csrc/slots.c``) and call those methods for
everything else;
:data:`TreeSlotsBase` is whichever :mod:`offheap.kernels.native` selects, the first base of
:class:`~offheap.treemap.treemap.TreeMap`.

The contract with the map: ``_attach_slots(lock, descent, cache, key_type, scalar_types, fresh,
tree, hint, node_size, stored_types, around)`` once the map is set up (``tree`` None: no store
runs in C; ``stored_types``: the value types a store keeps as they are, an ``int`` only within
int64, which the compiled slots check; ``around``: None, or the tree's NodeStore and the page
kinds of its keys and values when a store into a leaf the cache does not hold may also run in C,
as :meth:`~offheap.treemap.writearound.WriteAround.put`),
``_detach_slots()`` when it closes. The compiled slots run only while attached; the reference
has nothing to attach, as its methods read the map's attributes at each call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from offheap.kernels import native
from offheap.treemap.tree import MISSING

_compiled = native.compiled_module("offheap.treemap._pages")


class TreeSlots:
    """The reference item slots (module docstring)."""

    __slots__ = ()

    if TYPE_CHECKING:
        def _lookup(self, key, default, stored: bool = False) -> Any: ...

        def _put_item(self, key, value, keep: bool = False) -> None: ...

        def _delete_item(self, key) -> None: ...

    def __getitem__(self, key):
        value = self._lookup(key, MISSING)
        if value is MISSING:
            raise KeyError(key)
        return value

    def get(self, key, default=None, /):
        return self._lookup(key, default)

    def __contains__(self, key) -> bool:
        return self._lookup(key, MISSING, True) is not MISSING  # a pickled value stays unread

    def __setitem__(self, key, value) -> None:
        self._put_item(key, value)

    def __delitem__(self, key) -> None:
        self._delete_item(key)

    def _attach_slots(self, lock, descent, cache, key_type, scalar_types, fresh, tree, hint,
                      node_size, stored_types, around) -> None:
        """Nothing to attach: the map's methods read its attributes at each call."""

    def _detach_slots(self) -> None:
        """Nothing to detach (:meth:`_attach_slots`)."""


if TYPE_CHECKING:  # the compiled type has the reference's interface
    TreeSlotsBase = TreeSlots
else:
    TreeSlotsBase = TreeSlots if _compiled is None else _compiled.TreeSlots
    """The item slots the TreeMap is built on: compiled when the core is, else the reference."""
