"""Byte sizes for the experiment runners: parsing ``256MiB``-style options and printing sizes.

Pure functions, no IO; the bottom layer of the ``experiments`` package.
"""

from __future__ import annotations

import re

GIB = 1 << 30
_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
    "t": 1000**4, "tb": 1000**4,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_bytes(text: str) -> int:
    """``"256MiB"`` -> 268435456. Binary units (KiB, MiB, GiB) are powers of 1024, decimal ones
    (KB, MB, GB, or K, M, G) powers of 1000; a bare number is bytes. ValueError names the input."""
    match = _SIZE.match(str(text))
    unit = match.group(2).lower() if match else None
    if unit not in _UNITS:
        raise ValueError(f"cannot read {text!r} as a size; write e.g. 256MiB, 1GiB, 15GiB or 500MB")
    nbytes = int(float(match.group(1)) * _UNITS[unit])
    if nbytes <= 0:
        raise ValueError(f"size {text!r} must be positive")
    return nbytes


def format_bytes(nbytes: float) -> str:
    """A size for people: ``1.50 GiB``, ``256.0 MiB``, ``812 B``."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.{2 if scale >= GIB else 1}f} {unit}"
    return f"{nbytes:.0f} B"


def format_count(n: float) -> str:
    """An entry count for people: ``1,738 M``, ``3.2 M``, ``65,536``."""
    if n >= 100e6:
        return f"{n / 1e6:,.0f} M"
    if n >= 1e6:
        return f"{n / 1e6:,.1f} M"
    return f"{n:,.0f}"
