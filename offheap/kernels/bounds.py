"""The int64 range (layer 2): the bounds every int64 key and value is checked against.

A key or value of an ``int64`` column is a Python int ``k`` with ``INT64_MIN <= k <= INT64_MAX``;
a larger int is an OverflowError for int64 keys, and goes to the object serializer's big-int
form for values.
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
