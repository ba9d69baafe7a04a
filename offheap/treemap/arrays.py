"""numpy arrays out of a TreeMap: key ranges as arrays and the values of a batch of keys (layer 6,
shared by :class:`~offheap.treemap.treemap.TreeMap` and
:class:`~offheap.treemap.reader.TreeReader`).

Arrays are new and owned by the caller (nothing points into the map's memory). Keys come out as
``int64`` for int64 keys and as ``object`` arrays of str or bytes otherwise; values as ``int64``
or ``float64`` for the typed value serializers and as ``object`` arrays otherwise.

Cost: a range is one scan (:mod:`offheap.treemap.scan`) that gathers Python lists leaf by leaf
and converts them once at the end, so a range of n entries holds n Python objects while it is
built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np


def as_array(items: list, dtype: np.dtype) -> np.ndarray:
    """A one-dimensional array of ``items``; an object array holds each item as it is (a tuple or
    bytes does not become a row of its own)."""
    if dtype != object:
        return np.array(items, dtype)
    array = np.empty(len(items), object)
    array[:] = items
    return array


def values_out(values: list, missing: object, default, dtype: np.dtype | None):
    """The values of a batch lookup as :meth:`ArrayAPI.get_many` returns them: ``missing`` marks
    an absent key, which becomes ``default``; an array of ``dtype`` for a typed value
    serializer (KeyError for an absent key when ``default`` is None, since None has no int64 or
    float64 form), else a list."""
    absent = [i for i, value in enumerate(values) if value is missing]
    if dtype is not None and absent and default is None:
        raise KeyError(f"{len(absent)} keys are missing (first at position {absent[0]}); "
                       f"pass default= to fill them")
    for i in absent:
        values[i] = default
    return values if dtype is None else np.array(values, dtype)


class ArrayAPI:
    """``keys_array`` and ``items_array`` for a class that provides ``_chunks`` (as
    :class:`~offheap.treemap.views.SortedRangeAPI` describes it) and ``_array_dtypes()``, the
    dtypes of its key and value arrays."""

    _chunks: Callable[..., Iterator[tuple[list, list | None]]]
    _array_dtypes: Callable[[], tuple[np.dtype, np.dtype]]

    def keys_array(self, lo=None, hi=None, inclusive=(True, True),
                   reverse: bool = False) -> np.ndarray:
        """The keys of a range (bounds as in ``irange``) as a new array, in key order or
        descending with ``reverse``."""
        key_dtype, _ = self._array_dtypes()
        keys: list = []
        for chunk, _ in self._chunks(lo, hi, inclusive, reverse, False):
            keys += chunk
        return as_array(keys, key_dtype)

    def items_array(self, lo=None, hi=None, inclusive=(True, True),
                    reverse: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The keys and the values of a range as two new arrays of equal length."""
        key_dtype, value_dtype = self._array_dtypes()
        keys: list = []
        values: list = []
        for key_chunk, value_chunk in self._chunks(lo, hi, inclusive, reverse, True):
            keys += key_chunk
            values += value_chunk or ()
        return as_array(keys, key_dtype), as_array(values, value_dtype)
