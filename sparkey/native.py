"""Which implementation of sparkey's hot paths runs: ``sparkey._native`` or the Python reference.

``sparkey._native`` (a C extension of pure functions over buffers, built by the package's own
install) mirrors the Python lookups, framing and index build, which stay the reference: same
answers, same errors, same bytes in every file. ``OFFHEAP_PURE_PYTHON=1`` in the environment (the
one switch for the whole distribution, read once at import) selects the reference; otherwise an
extension that does not import is reported once with a warning saying how to build it, and the
reference runs instead. :data:`module` is the extension or None; :data:`compiled` says which runs.
Pure layer: imports nothing from sparkey but what the extension itself imports (``errors``).
"""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType

PURE_PYTHON = os.environ.get("OFFHEAP_PURE_PYTHON", "").strip() not in ("", "0")


def _load() -> ModuleType | None:
    """``sparkey._native``, or None (with a warning unless the reference was asked for)."""
    if PURE_PYTHON:
        return None
    try:
        return importlib.import_module("sparkey._native")
    except ImportError as exc:
        warnings.warn(
            f"sparkey's compiled core is not built ({exc}); the pure-Python reference runs "
            f"instead, about 3x slower on lookups and 4x on writes. Build it with a C compiler and "
            f"the Python headers: pip install -e . (or python setup.py build_ext --inplace); set "
            f"OFFHEAP_PURE_PYTHON=1 to choose the reference and silence this.",
            RuntimeWarning, stacklevel=2)
        return None


module: ModuleType | None = _load()
"""The compiled functions (``sparkey._native``), or None when the reference runs."""

compiled: bool = module is not None
"""True when the compiled core runs."""
