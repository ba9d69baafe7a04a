"""What may enter a TreeMap, made ready to keep (layer 6, under the tree's facade).

Keys are checked against the tree's key kind and normalized (an ``int`` subclass or numpy integer
becomes an ``int``, a ``bytearray`` becomes ``bytes``, ...); a wrong type raises TypeError and an
int outside int64 OverflowError, as before anything changes. A lookup is a dict's: a key that no
key of the tree can equal (``'a'`` or ``2**63`` for int64 keys, ``1.5``, None) is a miss, and
``1.0`` finds key 1. Values are stored by value: an ``object`` value that is not a plain scalar
is pickled at once and kept as its :class:`~offheap.store.pickled.PickledValue` (what a
decoded page holds too), so later changes to the caller's object do not leak in, and every read
unpickles a copy of its own (:meth:`Admission.fresh`), so changing what a read returned never
changes the map. Without ``allow_pickle`` (a file opened without it) such a value is refused
and a pickled one is not handed out (:mod:`offheap.store.pickled`). Other values are validated
by the value serializer now, so that encoding a page later cannot fail. A batch becomes sorted unique keys
with their accepted values, the last value winning for a key given twice: from ``update``'s
arguments (a mapping or ``(key, value)`` pairs, as ``dict.update``) or from ``put_many``'s two
columns. :meth:`Admission.held_bytes` estimates what an entry takes in a decoded leaf, for the
write cache's budget under a limit (:mod:`offheap.treemap.nodecache`).

Thread safety: an :class:`Admission` holds no mutable state; its methods may run on any thread.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from offheap.kernels.bounds import INT64_MAX, as_int64, lookup_key
from offheap.store.pickled import NATIVE_TYPES, PickledValue, check_storable, unpickled

SCALAR_TYPES = NATIVE_TYPES
"""Types whose values are immutable, stored without pickle and kept as they are by an
``object`` tree."""


_AS_IS: dict[str, tuple[type, ...]] = {"int64": (int,), "float64": (float,), "str": (str,),
                                       "bytes": (bytes,)}
"""Typed serializers whose ``validate`` returns a value of exactly these types unchanged (an int
only within int64: a hot path taking ``int`` values checks their range, as it does for keys)."""


def _int64_key(key) -> int:
    return as_int64(key, "this TreeMap has int64 keys")


def _str_key(key) -> str:
    if type(key) is not str:
        if not isinstance(key, str):
            raise TypeError(f"this TreeMap has str keys, not {type(key).__name__}")
        key = str(key)
    return key


def _bytes_key(key) -> bytes:
    if type(key) is not bytes:
        if not isinstance(key, (bytes, bytearray, memoryview)):
            raise TypeError(f"this TreeMap has bytes keys, not {type(key).__name__}")
        key = bytes(key)
    return key


def _held_bytes(item) -> int:
    kind = type(item)
    if kind is str or kind is bytes:
        return len(item)
    if kind is PickledValue:
        return len(item.payload)
    if kind in SCALAR_TYPES:
        return 8
    return sys.getsizeof(item)


def _str_lookup(key) -> str | None:
    return key if type(key) is str else str(key) if isinstance(key, str) else None


def _bytes_lookup(key) -> bytes | None:
    if type(key) is bytes:
        return key
    return bytes(key) if isinstance(key, (bytes, bytearray, memoryview)) else None


_KEY_CHECKS: dict[str, Callable] = {"int64": _int64_key, "str": _str_key, "bytes": _bytes_key}
_KEY_LOOKUPS: dict[str, Callable] = {"int64": lookup_key, "str": _str_lookup,
                                     "bytes": _bytes_lookup}
_KEY_TYPES: dict[str, type] = {"int64": int, "str": str, "bytes": bytes}


class Admission:
    """Key and value checks of one tree.

    ``stored_as_is``: the value types :meth:`value` returns unchanged for every value of exactly
    that type, an ``int`` only within int64 (a hot path checks the range), so a hot path may skip
    it.
    ``key(k)`` is the checked, normalized key to store; ``lookup(k)`` the normalized key to
    search for, or None when no key of the tree can equal ``k``; ``key_type`` the type a
    normalized key has, so a hot path may skip the call when ``type(k) is key_type`` (for int64
    keys it must still check the range). ``copies_values``: values are ``object`` values, kept
    pickled unless their type is in :data:`SCALAR_TYPES`. ``allow_pickle``: whether pickled
    values may be handed out and stored (:mod:`offheap.store.pickled`).
    """

    __slots__ = ("key_kind", "key_type", "key", "lookup", "copies_values", "allow_pickle",
                 "stored_as_is", "_serializer")

    def __init__(self, key_kind: str, serializer, allow_pickle: bool) -> None:
        self.key_kind = key_kind
        self.key_type: type[Any] = _KEY_TYPES[key_kind]
        self.key: Callable = _KEY_CHECKS[key_kind]
        self.lookup: Callable = _KEY_LOOKUPS[key_kind]
        self.copies_values = serializer.name == "object"
        self.allow_pickle = allow_pickle
        self.stored_as_is: tuple[type, ...] = (
            tuple(SCALAR_TYPES) if self.copies_values else _AS_IS.get(serializer.name, ()))
        self._serializer = serializer

    def fresh(self, value):
        """A value to hand out: ``value`` itself when it is immutable (its type is in
        :data:`SCALAR_TYPES`, as every value of a typed tree is), else a placeholder unpickled
        into a copy of its own; PickleNotAllowedError without ``allow_pickle``."""
        return unpickled(value, self.allow_pickle)

    def fresh_many(self, values: list) -> list:
        """:meth:`fresh` of each value: the list itself when every value is immutable."""
        if not self.copies_values or all(type(v) in SCALAR_TYPES for v in values):
            return values
        return [self.fresh(v) for v in values]

    def value(self, value):
        """The value to keep in a decoded leaf: validated, or pickled into a placeholder (module
        docstring; PickleNotAllowedError for a value that needs pickle without
        ``allow_pickle``). A placeholder, as compaction and salvage copy, is kept as it is."""
        if not self.copies_values:
            return self._serializer.validate(value)
        kind = type(value)
        if kind in SCALAR_TYPES or kind is PickledValue:
            return value
        check_storable(value, self.allow_pickle)
        return PickledValue.of(value)

    def exported(self, values: list) -> list:
        """``values`` of a whole-map export for a copy (placeholders stay placeholders, copied as
        bytes): PickleNotAllowedError if one is a placeholder and pickled values may not be
        handed out, since the copy, anonymous, would unpickle it."""
        if not self.allow_pickle and self.copies_values:
            for value in values:
                unpickled(value, False)
        return values

    @staticmethod
    def held_bytes(key, value) -> int:
        """An estimate of the bytes ``key`` and ``value`` take in a decoded leaf: the length of
        a str or bytes, 8 for another scalar, the shallow ``sys.getsizeof`` of anything else."""
        return _held_bytes(key) + _held_bytes(value)

    def batch_bytes(self, keys, values) -> int:
        """:meth:`held_bytes` summed over a batch (``nbytes`` for arrays)."""
        if isinstance(keys, np.ndarray):
            total = keys.nbytes
        else:
            total = sum(map(_held_bytes, keys))
        if isinstance(values, np.ndarray) and values.dtype != object:
            return total + values.nbytes
        return total + sum(map(_held_bytes, values))

    def bound(self, key):
        """A range bound: None (unbounded) or a checked key."""
        return None if key is None else self.key(key)

    def batch(self, other, kwargs: dict) -> tuple[list, list]:
        """Keys (sorted, unique, checked) and their accepted values from the arguments of
        ``update``, read as ``dict.update`` reads them: ``other`` a mapping (anything with
        ``keys()``) or an iterable of ``(key, value)`` pairs, then keyword arguments (str
        keys). Columns of keys and values are :meth:`columns`."""
        if kwargs and self.key_kind != "str":
            raise TypeError("keyword arguments would be str keys; this TreeMap has "
                            f"{self.key_kind} keys")
        if isinstance(other, Mapping) or hasattr(other, "keys"):
            items = [(k, other[k]) for k in other.keys()]
        else:
            items = []
            for n, pair in enumerate(other):
                try:
                    key, value = pair
                except (TypeError, ValueError):
                    raise ValueError(f"update sequence element #{n} is not a (key, value) pair") from None
                items.append((key, value))
        return self._latest(items + list(kwargs.items()))

    def columns(self, keys, values) -> tuple[list | np.ndarray, list | np.ndarray]:
        """:meth:`batch` for ``put_many``: a column of keys (a numpy integer array for int64
        keys is sorted in one step) and a column of values of the same length."""
        if isinstance(keys, np.ndarray):
            return self._arrays(keys, values)
        keys = list(keys)
        if len(values) != len(keys):
            raise ValueError(f"{len(keys)} keys but {len(values)} values")
        return self._latest(list(zip(keys, values.tolist() if isinstance(values, np.ndarray)
                                     else values)))

    def _latest(self, items: list[tuple]) -> tuple[list, list]:
        """Sorted checked keys, each with the accepted value of its last pair."""
        as_key, accept = self.key, self.value
        latest = {}
        for key, value in items:
            latest[as_key(key)] = value
        keys = sorted(latest)
        return keys, [accept(latest[k]) for k in keys]

    def _arrays(self, keys: np.ndarray, values) -> tuple[np.ndarray, list | np.ndarray]:
        """:meth:`columns` for an array of keys: one sort, the last of equal keys kept."""
        if self.key_kind != "int64":
            raise TypeError(f"an array of keys needs int64 keys; this TreeMap has "
                            f"{self.key_kind} keys: pass a list of keys instead")
        if keys.ndim != 1:
            raise ValueError(f"keys must be one-dimensional, got shape {keys.shape}")
        if keys.dtype.kind not in "iu":
            raise TypeError(f"keys must be an integer array, got {keys.dtype}")
        if keys.dtype.kind == "u" and keys.size and int(keys.max()) > INT64_MAX:
            raise OverflowError(f"key {int(keys.max())} is outside the int64 range")
        if len(values) != len(keys):
            raise ValueError(f"{len(keys)} keys but {len(values)} values")
        keys = keys.astype(np.int64, copy=False)
        if keys.size > 1 and not bool(np.all(keys[1:] > keys[:-1])):
            order = np.argsort(keys, kind="stable")
            keys = keys[order]
            last = np.ones(keys.size, bool)
            last[:-1] = keys[1:] != keys[:-1]  # keep the last of each run of equal keys
            order = order[last]
            keys = keys[last]
            values = values[order] if isinstance(values, np.ndarray) else [values[i] for i in order.tolist()]
        if not (isinstance(values, np.ndarray) and values.dtype == self._serializer.dtype):
            accept = self.value
            values = [accept(v) for v in (values.tolist() if isinstance(values, np.ndarray) else values)]
        return keys, values
