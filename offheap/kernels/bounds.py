"""The int64 range (layer 2): the bounds every int64 key and value is checked against.

A key or value of an ``int64`` column is a Python int ``k`` with ``INT64_MIN <= k <= INT64_MAX``;
a larger int is an OverflowError for int64 keys, and goes to the object serializer's big-int
form for values. A lookup is more lenient than a store: :func:`lookup_key` turns what no int64
key can equal into a miss, as a dict does.
"""

import operator

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1


def as_int64(key, refusal: str) -> int:
    """``key`` as a Python int in the int64 range, or TypeError (``"{refusal}, not <type>"``) /
    OverflowError. Ints and what ``operator.index`` accepts (bools, numpy integers) qualify."""
    if type(key) is not int:
        try:
            key = operator.index(key)
        except TypeError:
            raise TypeError(f"{refusal}, not {type(key).__name__}") from None
    if not INT64_MIN <= key <= INT64_MAX:
        raise OverflowError(f"key {key} is outside the int64 range [-2**63, 2**63)")
    return key


def lookup_key(key) -> int | None:
    """``key`` as the int64 a lookup searches for, or None when no int64 key can equal it.

    As in a dict, ``1.0``, ``True`` and ``np.int64(1)`` find key 1; ``1.5``, ``'a'``, ``None``
    and ints outside int64 are misses, not errors.
    """
    if type(key) is not int:
        if isinstance(key, float):
            if not key.is_integer():
                return None
            key = int(key)
        else:
            try:
                key = operator.index(key)
            except TypeError:
                return None
    return key if INT64_MIN <= key <= INT64_MAX else None
