"""``LookupMapping``: the read-only Mapping methods shared by every Sparkey reader (API layer).

A reader sets ``self._lookup`` to a function ``key -> bytes | None`` (a closure over its mapped
files, swapped for one that raises ClosedError on close); ``get``, ``[]`` and ``in`` go through
it with no other attribute lookups on the hot path.
"""

import collections.abc


class LookupMapping(collections.abc.Mapping):
    """``get``, ``__getitem__`` and ``__contains__`` over ``self._lookup``."""

    def get(self, key, default=None):
        """Value of ``key``, or ``default``."""
        value = self._lookup(key)
        return default if value is None else value

    def __getitem__(self, key):
        value = self._lookup(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key):
        return self._lookup(key) is not None
