"""The element slots of a TreeSet: ``x in s``, ``len(s)``, ``s.add(x)``, ``s.discard(x)`` and
``s.remove(x)`` (layer 6).

A TreeSet keeps its elements as the keys of a TreeMap, its ``_tree``, whose values are all
``b""`` (:mod:`offheap.treemap.treeset`). :class:`SetSlots` is the reference: each operation is
the tree's (``in``, ``len``, a store, ``tree.pop(x, None)``, ``tree.pop(x)``).

``add`` is one store that keeps a present key (the tree's ``_put_item(x, b"", keep=True)``): an
element already present is not stored again (its leaf stays clean, its page unwritten), and an
absent one costs one descent, not a lookup and then a store's. Past the trim that begins every
store, adding a present element changes nothing: the tree looks for it as a lookup does (no node
cached or moved, the hint kept) before the store's descent (:meth:`Tree.put
<offheap.treemap.tree.Tree.put>` with ``keep``). ``discard`` tests membership first, as SortedSet does: an absent element costs a lookup,
not a deletion's descent. Between that test and the removal another thread may remove the
element; the removal that follows is idempotent, so each call still takes effect as one change.
The compiled twin, ``offheap.treemap._pages.SetSlots`` (``offheap/treemap/csrc/setslots.c``), does
the same by C calls into the tree's compiled item slots, without a Python frame between;
:data:`SetSlotsBase` is whichever :mod:`offheap.kernels.native` selects, the first base of
:class:`~offheap.treemap.treeset.TreeSet`. Both hold the tree in the one slot ``_tree``, which the
set assigns once it has built or opened its tree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from offheap.kernels import native

if TYPE_CHECKING:
    from offheap.treemap.treemap import TreeMap

_compiled = native.compiled_module("offheap.treemap._pages")

NO_VALUE = b""
"""The value of every element in the set's tree."""


class SetSlots:
    """The reference element slots (module docstring)."""

    __slots__ = ("_tree",)

    if TYPE_CHECKING:
        _tree: TreeMap

    def __len__(self) -> int:
        return len(self._tree)

    def __contains__(self, key) -> bool:  # the protocol's name for an element
        return key in self._tree

    def add(self, element, /) -> None:
        """Add ``element`` (a TypeError if no element of the set's type can equal it)."""
        self._tree._put_item(element, NO_VALUE, True)

    def discard(self, element, /) -> None:
        """Remove ``element`` if it is present."""
        if element in self._tree:
            self._tree.pop(element, None)

    def remove(self, element, /) -> None:
        """Remove ``element``; KeyError if it is not present."""
        self._tree.pop(element)


if TYPE_CHECKING:  # the compiled type has the reference's interface
    SetSlotsBase = SetSlots
else:
    SetSlotsBase = SetSlots if _compiled is None else _compiled.SetSlots
    """The element slots the TreeSet is built on: compiled when the core is, else the reference."""
