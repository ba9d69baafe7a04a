"""Byte sizes written for people: ``"256MiB"`` -> 268435456, and ``limit=`` arguments (layer 2).

One parser for every place a size is given: the ``limit=`` of every map, DB and arena, and the
command lines of ``python -m offheap`` and ``python -m experiments``. Pure functions, no IO.
"""

from __future__ import annotations

import operator
import re
from typing import SupportsIndex

_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
    "t": 1000**4, "tb": 1000**4,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")

ByteLimit = int | str | None
"""What a ``limit=`` argument may be: bytes, a size string such as ``"1GiB"``, or no limit."""


def parse_bytes(text: str) -> int:
    """``"256MiB"`` -> 268435456. Binary units (KiB, MiB, GiB, TiB) are powers of 1024, decimal
    ones (KB, MB, GB, TB, or K, M, G, T) powers of 1000; a bare number is bytes. ValueError names
    the input and shows the form expected."""
    match = _SIZE.match(str(text))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(f"cannot read {text!r} as a size; write e.g. 256MiB, 1GiB, 15GiB or 500MB")
    nbytes = int(float(match.group(1)) * _UNITS[unit])
    if nbytes <= 0:
        raise ValueError(f"size {text!r} must be positive")
    return nbytes


def byte_limit(limit: object) -> int | None:
    """A ``limit=`` argument as bytes: None (no limit), an int, or a size string (``"1GiB"``).

    Any other type raises TypeError saying which forms are accepted; a string that is not a size
    raises ValueError (``parse_bytes``). The range is the caller's to check.
    """
    if limit is None:
        return None
    if isinstance(limit, str):
        return parse_bytes(limit)
    if isinstance(limit, bool):
        raise TypeError("limit= must be a number of bytes or a size such as '256MiB', not a bool")
    if not isinstance(limit, SupportsIndex):
        raise TypeError(f"limit= must be a number of bytes (an int) or a size such as '256MiB' "
                        f"or '1GiB', not {type(limit).__name__} {limit!r}")
    return operator.index(limit)
