"""The key sequences the capacity experiment inserts: sequential (0, 1, 2, ...) or random.

Random keys follow the blog's ``Random.nextLong()``: signed, uniform over the whole int64 range,
from a seeded generator so that every contender sees the same keys. A stream hands out numpy
chunks in order; :meth:`KeyStream.give_back` returns an unused tail, so a bulk insert rejected
by the budget can be retried with fewer keys without skipping or repeating any.
"""

from __future__ import annotations

import numpy as np

from offheap.kernels.bounds import INT64_MAX, INT64_MIN

KEY_ORDERS = ("sequential", "random")


class KeyStream:
    """An endless sequence of int64 keys in ``order``, drawn in chunks."""

    def __init__(self, order: str, seed: int = 42) -> None:
        if order not in KEY_ORDERS:
            raise ValueError(f"key order {order!r} is unknown; use one of {', '.join(KEY_ORDERS)}")
        self.order = order
        self._next = 0
        self._rng = np.random.default_rng(seed)
        self._returned = np.empty(0, np.int64)

    def take(self, n: int) -> np.ndarray:
        """The next ``n`` keys as an int64 array."""
        if self._returned.size:
            head, self._returned = self._returned[:n], self._returned[n:]
            if head.size == n:
                return head
            return np.concatenate([head, self._fresh(n - head.size)])
        return self._fresh(n)

    def give_back(self, keys: np.ndarray) -> None:
        """Put ``keys`` (the unused tail of the last chunk taken) back at the front of the stream."""
        self._returned = np.concatenate([keys, self._returned])

    def _fresh(self, n: int) -> np.ndarray:
        if self.order == "sequential":
            keys = np.arange(self._next, self._next + n, dtype=np.int64)
            self._next += n
            return keys
        return self._rng.integers(INT64_MIN, INT64_MAX, size=n, dtype=np.int64, endpoint=True)
