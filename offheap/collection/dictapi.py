"""dict's operators, alternate constructor, copies and pickles for every map (layer 6).

:class:`DictAPI` is a mixin of :class:`~offheap.LongHashMap` and :class:`~offheap.TreeMap`. What
it adds behaves as the ``dict`` method of the same name:

- ``fromkeys(keys, value=None, /, **options)``, ``m | other``, ``other | m``, ``m |= other``;
- ``m == other`` compares with any mapping, identity first: ``m == m`` is True even when a value
  is a NaN, as for a dict;
- ``copy()``, ``copy.copy(m)`` and ``copy.deepcopy(m)`` give a new anonymous map with the same
  entries and options: independent of the original, since a map stores its values by value;
- ``pickle`` keeps an anonymous map (standalone, or in a ``DB.memory()``) by value, compactly: the
  key column and the value column packed by their serializers (``pack_column``: raw int64 arrays,
  front-coded text, tagged object values), never a dict of Python objects. It loads as a new
  anonymous map of the same class and options, in any process, on either core.

A map that lives in a file does not pickle: ``TypeError`` says what to do instead. A file has one
writer process, and a map's state is its last commit plus the changes since; a reference that
reopened the file elsewhere would show other entries than the map it was taken from, and would
take the file's lock away from its writer. Pickle ``m.copy()`` to send the entries, or send the
path and open ``Map.reader(path)`` in the receiving process to follow the file's commits.

Cost: ``copy`` and ``pickle`` read every entry once (O(n), in key or insertion order); values are
decoded and encoded again, which is what makes the copy independent. The copy of a file map
opened without ``allow_pickle=True`` raises :class:`~offheap.errors.PickleNotAllowedError` if a
value is stored with pickle: the anonymous copy would unpickle it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from offheap.store.records import RecordStore
    from offheap.store.serializers import Serializer

_ABSENT = object()
_Map = TypeVar("_Map", bound="DictAPI")


class DictAPI:
    """The mixin (module docstring); the map class provides what the declarations name.
    Thread safety is the map's: each method is a few calls of the map's own operations."""

    if TYPE_CHECKING:
        _store: RecordStore

        def __len__(self) -> int: ...

        def _check_open(self) -> None: ...

        def items(self) -> Any: ...

        def get(self, key: Any, default: Any = None, /) -> Any: ...

        def update(self, other: Any = (), /, **kwargs: Any) -> None: ...

        def put_many(self, keys: Any, values: Any) -> None:
            """Insert or overwrite many entries: a column of keys, a column of values."""

        def _export(self) -> tuple[Any, Any]:
            """All keys and values, in the map's order: numpy arrays or lists."""

        def _twin_options(self) -> dict[str, Any]:
            """The keyword options that make an empty anonymous map like this one (its limit
            included)."""

        def _column_serializers(self) -> tuple[Serializer, Serializer]:
            """The serializers of the key column and of the value column."""

    # -- constructors and copies --------------------------------------------------------------

    @classmethod
    def fromkeys(cls: type[_Map], keys, value=None, /, **options) -> _Map:
        """A new map with every key of ``keys`` mapped to ``value``; ``options`` are the
        constructor's (``value=`` there names the value type)."""
        keys = list(keys)
        new = cls(**options)
        new.put_many(keys, [value] * len(keys))
        return new

    def copy(self: _Map) -> _Map:
        """A new anonymous map of the same class with the same entries and options."""
        self._check_open()
        twin = type(self)(**self._twin_options())
        keys, values = self._export()
        if len(keys):
            twin.put_many(keys, values)
        return twin

    def __copy__(self: _Map) -> _Map:
        return self.copy()

    def __deepcopy__(self: _Map, memo: dict[int, Any]) -> _Map:
        twin = memo[id(self)] = self.copy()  # values are copies already: stored by value
        return twin

    def __reduce__(self):
        """Pickle by value (module docstring); TypeError for a map in a file."""
        refuse_pickle_in_file(self, "m.copy() to send its entries",
                              f"open {type(self).__name__}.reader(path)")
        keys, values = self._export()
        key_serializer, value_serializer = self._column_serializers()
        return (_unpickle, (type(self), self._twin_options(), len(keys),
                            key_serializer.pack_column(keys), value_serializer.pack_column(values)))

    # -- operators ----------------------------------------------------------------------------

    def __or__(self: _Map, other) -> _Map:
        if not isinstance(other, Mapping):
            return NotImplemented
        new = self.copy()
        new.update(other)
        return new

    def __ror__(self: _Map, other) -> _Map:
        if not isinstance(other, Mapping):
            return NotImplemented
        new = type(self)(**self._twin_options())
        new.update(other)
        new.update(self)
        return new

    def __ior__(self: _Map, other) -> _Map:
        self.update(other)
        return self

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if not isinstance(other, Mapping):
            return NotImplemented
        if len(self) != len(other):
            return False
        for key, value in self.items():
            theirs = other.get(key, _ABSENT)
            if theirs is _ABSENT or not (theirs is value or theirs == value):
                return False
        return True

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dict


def refuse_pickle_in_file(collection, copy_hint: str, receiver_hint: str) -> None:
    """Check ``collection`` (a map or set) is open and anonymous, which is what pickles; a
    TypeError naming its file and what to send instead (``copy_hint``, ``receiver_hint``)."""
    collection._check_open()
    path = collection._store.arena.path
    if path is not None:
        raise TypeError(f"a {type(collection).__name__} in a file ({path!r}) does not pickle: "
                        f"pickle {copy_hint}, or send the path and {receiver_hint} in the receiver")


def _unpickle(cls: type[_Map], options: dict[str, Any], n_entries: int, keys: bytes,
              values: bytes) -> _Map:
    """The map :meth:`DictAPI.__reduce__` packed: a new anonymous one, bulk-loaded."""
    new = cls(**options)
    if n_entries:
        key_serializer, value_serializer = new._column_serializers()
        new.put_many(key_serializer.unpack_column(keys, n_entries)[0],
                     value_serializer.unpack_column(values, n_entries)[0])
    return new
