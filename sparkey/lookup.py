"""``LookupMapping``: the read-only Mapping methods shared by every Sparkey reader (API layer).

A reader sets ``self._lookup`` to a function ``key -> bytes | None`` (a closure over its mapped
files or a ``sparkey._native.Lookup`` method, either raising ClosedError once closed); ``get``,
``[]`` and ``in`` go through it with no other attribute lookups on the hot path. ``[]`` and
``in`` are the slots of :class:`LookupSlots`, or of its compiled twin
``sparkey._native.LookupSlots`` when the compiled core runs: a reader that calls
``_attach_lookup(lookup)`` with its ``sparkey._native.Lookup`` has them answered in C without a
Python frame (the reference has nothing to attach and always calls ``_lookup``). ``items()`` and ``values()`` are views
whose iteration the reader provides (``_iter_items``, ``_iter_values``), straight from its logs
rather than one lookup per key; ``with`` closes the reader.
"""

from __future__ import annotations

import abc
import collections.abc
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, overload

from sparkey import native

_Default = TypeVar("_Default")
_Reader = TypeVar("_Reader", bound="LookupMapping")


class LookupSlots:
    """The reference ``[]`` and ``in`` of a reader: through its ``_lookup`` (module docstring)."""

    __slots__ = ()
    _lookup: Callable[[Any], bytes | None]

    def __getitem__(self, key: Any) -> bytes:
        value = self._lookup(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return self._lookup(key) is not None

    def _attach_lookup(self, lookup: object) -> None:
        """Nothing to attach: every lookup goes through ``_lookup``."""


if TYPE_CHECKING:  # the compiled type has the reference's interface
    LookupSlotsBase = LookupSlots
else:
    LookupSlotsBase = LookupSlots if native.module is None else native.module.LookupSlots


class LookupMapping(LookupSlotsBase, collections.abc.Mapping[bytes, bytes]):
    """``get``, ``[]``, ``in``, ``items()``, ``values()`` and context-manager use."""

    _lookup: Callable[[Any], bytes | None]

    @overload
    def get(self, key: Any, /) -> bytes | None: ...

    @overload
    def get(self, key: Any, default: bytes, /) -> bytes: ...

    @overload
    def get(self, key: Any, default: _Default, /) -> bytes | _Default: ...

    def get(self, key: Any, default: object = None, /) -> object:
        """Value of ``key``, or ``default`` (positional, as for ``dict.get``). A reader on the
        compiled core binds ``get`` to its ``sparkey._native.Lookup`` instead."""
        value = self._lookup(key)
        return default if value is None else value

    def items(self) -> collections.abc.ItemsView[bytes, bytes]:
        """View of the ``(key, value)`` pairs, iterated in the reader's order."""
        return _ItemsView(self)

    def values(self) -> collections.abc.ValuesView[bytes]:
        """View of the values, in the order of ``items()``."""
        return _ValuesView(self)

    @abc.abstractmethod
    def _iter_items(self) -> Iterator[tuple[bytes, bytes]]:
        """The live ``(key, value)`` pairs, in iteration order."""

    @abc.abstractmethod
    def _iter_values(self) -> Iterator[bytes]:
        """The live values, in iteration order."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the reader's files. Idempotent."""

    def __enter__(self: _Reader) -> _Reader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _ItemsView(collections.abc.ItemsView[bytes, bytes]):
    _mapping: LookupMapping

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        return self._mapping._iter_items()


class _ValuesView(collections.abc.ValuesView[bytes]):
    _mapping: LookupMapping

    def __iter__(self) -> Iterator[bytes]:
        return self._mapping._iter_values()
