"""Byte sizes for the experiment runners: ``256MiB``-style options and sizes for people.

Options are read by offheap's own parser (``offheap.kernels.sizes.parse_bytes``, which also
reads every ``limit=``), so a size means the same on every command line and in the API. Pure
functions, no IO; the bottom layer of the ``experiments`` package.
"""

from __future__ import annotations

from offheap.kernels.sizes import parse_bytes

GIB = 1 << 30

__all__ = ["GIB", "format_bytes", "format_count", "parse_bytes"]


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
