"""Which implementation of the hot paths runs: the compiled core or the pure-Python reference.

Each accelerated module has a pure-Python reference beside it (as CPython keeps ``pickle`` beside
``_pickle``) with the same behaviour and the same bytes in every file. The compiled modules are C
extensions built by the package's own install. ``OFFHEAP_PURE_PYTHON=1`` in the environment, read
once at import, selects the reference everywhere; otherwise a compiled module that does not import
is reported once with a warning saying how to build it, and its reference runs instead.
:data:`compiled` tells which is active (also shown by the maps' reprs).
"""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType

PURE_PYTHON = os.environ.get("OFFHEAP_PURE_PYTHON", "").strip() not in ("", "0")

_missing: list[str] = []


def compiled_module(name: str) -> ModuleType | None:
    """The compiled module ``name``, or None when the reference must run instead."""
    if PURE_PYTHON:
        return None
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if not _missing:
            warnings.warn(
                f"offheap's compiled core is not built ({name}: {exc}); the pure-Python reference "
                f"runs instead, 10-30x slower on single operations. Build it with a C compiler "
                f"and the Python headers: pip install -e . (or pip install --force-reinstall "
                f"offheap); set OFFHEAP_PURE_PYTHON=1 to choose the reference and silence this.",
                RuntimeWarning, stacklevel=3)
        _missing.append(name)
        return None


def compiled() -> bool:
    """True when every compiled module asked for so far was loaded."""
    return not PURE_PYTHON and not _missing
