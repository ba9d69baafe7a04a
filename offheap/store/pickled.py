"""Pickled ``object`` values and the rule that guards them (layer 5, under the serializers).

The ``object`` serializer stores a value it has no tag of its own for with pickle (tag 08,
:mod:`offheap.store.serializers`), and unpickling runs whatever code the bytes name. So decoding
never unpickles: a tag-08 payload becomes a :class:`PickledValue`, a placeholder holding the
payload bytes, which leaves and caches keep like any other value and pages encode again as the
same bytes. A placeholder is resolved only where a map hands a value to its user
(:func:`unpickled`), and only if the map may unpickle:

- an anonymous map (``LongHashMap()``, ``TreeMap()``, a ``DB.memory()`` collection) holds only
  what its own process put in, and always may;
- a map of a file may only when its opener passed ``allow_pickle=True``. The permission belongs
  to the open, never to the file: a file cannot grant it to itself. This is numpy's rule for
  ``np.load(allow_pickle=False)``. Without it, reading a pickled value raises
  :class:`~offheap.errors.PickleNotAllowedError`, and so does storing a value that would need
  pickle (:func:`check_storable`), since the map could not read it back.

Everything else keeps working without the permission: keys, lengths, the other values of a leaf,
compaction and salvage (which copy placeholders as bytes). A payload that does not unpickle (a
class that no longer exists, damaged bytes) fails the read of that one value, with
:class:`~offheap.errors.CorruptionError`.

Cost: a placeholder is one small object per pickled value; each read unpickles anew, so every
read returns an object of its own (values are stored by value). Thread safety: placeholders are
immutable; the functions hold no state.
"""

from __future__ import annotations

import pickle

from offheap.errors import CorruptionError, PickleNotAllowedError

PICKLE_PROTOCOL = 5
NATIVE_TYPES = frozenset((type(None), bool, int, float, str, bytes))
"""The exact types the ``object`` serializer stores without pickle."""


class PickledValue:
    """The pickle payload of one stored ``object`` value, not unpickled.

    Equal to another placeholder of the same payload bytes (so a tree's consistency check never
    calls a user's ``__eq__``), hashable, immutable.
    """

    __slots__ = ("payload",)

    def __init__(self, payload: bytes) -> None:
        self.payload = payload

    @classmethod
    def of(cls, value) -> PickledValue:
        """The placeholder of ``value`` pickled now; TypeError if it does not pickle."""
        try:
            return cls(pickle.dumps(value, protocol=PICKLE_PROTOCOL))
        except Exception as exc:  # pickling raises PicklingError, TypeError, AttributeError, ...
            raise TypeError(f"cannot store a {type(value).__name__} as an 'object' value: it does "
                            f"not pickle ({exc})") from exc

    def load(self):
        """The value, unpickled anew (a fresh object each call): runs the payload's code, so
        only :func:`unpickled` calls it, under the map's permission. CorruptionError when the
        payload does not unpickle."""
        try:
            return pickle.loads(self.payload)
        except Exception as exc:  # unpickling damaged bytes can raise almost any exception type
            raise CorruptionError(f"a pickled value does not load ({type(exc).__name__}: {exc}): "
                                  f"its class may be missing, or the data is corrupt") from None

    def __eq__(self, other) -> bool:
        if type(other) is not PickledValue:
            return NotImplemented
        return self.payload == other.payload

    def __hash__(self) -> int:
        return hash(self.payload)

    def __repr__(self) -> str:
        return f"<pickled value of {len(self.payload)} bytes>"


def unpickled(value, allow_pickle: bool):
    """``value`` as a map hands it out: a placeholder unpickled when ``allow_pickle``, else
    PickleNotAllowedError; any other value itself."""
    if type(value) is not PickledValue:
        return value
    if not allow_pickle:
        raise PickleNotAllowedError(
            "this value is stored with pickle, and unpickling data from a file can run any code "
            "its author chose; reopen the file with allow_pickle=True if you trust it")
    return value.load()


def check_storable(value, allow_pickle: bool) -> None:
    """PickleNotAllowedError unless ``value`` may go into a map with this permission: without
    it, only values stored without pickle (:data:`NATIVE_TYPES`) or placeholders copied from
    another map (their bytes, never unpickled)."""
    kind = type(value)
    if not allow_pickle and kind not in NATIVE_TYPES and kind is not PickledValue:
        numpy_hint = (" (a numpy scalar keeps its type only by pickle: pass array.tolist(), or "
                      "use value='int64' or 'float64')" if kind.__module__ == "numpy" else "")
        raise PickleNotAllowedError(
            f"values of type {kind.__name__} are stored with pickle; open the file with "
            f"allow_pickle=True if you trust it, or store str/bytes/int/float/None/bool"
            f"{numpy_hint}")
