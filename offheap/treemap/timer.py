"""The flush timer of a write cache, MapDB's ``asyncFlushDelay`` (layer 6, under the tree's facade).

A TreeMap with ``write_cache=True`` and ``flush_delay`` set writes its dirty nodes ``flush_delay``
milliseconds after the first change since the last flush. :class:`FlushTimer` is that one-shot
timer: :meth:`FlushTimer.arm` starts it unless it is already running, and when it fires it calls
the flush under the map's lock.

Thread safety: the timer runs on a daemon thread of its own; :meth:`arm` and :meth:`cancel` are
called with the map's lock held, and the firing thread takes the same lock, so a flush never
overlaps an operation. A flush that fails for lack of memory leaves the nodes dirty, and the
next ``flush()`` or ``close()`` reports it.

Ownership: the timer holds the map's flush method weakly (the map owns its timer, not the other
way round), so a map that nobody references any more is freed at once, without the cyclic
garbage collector, even while its timer is armed; the timer then fires into nothing.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable


class FlushTimer:
    """Calls ``flush()`` (a bound method, held weakly) under ``lock`` ``delay_ms`` milliseconds
    after :meth:`arm`."""

    def __init__(self, delay_ms: float, flush: Callable[[], None], lock) -> None:
        self._delay_seconds = delay_ms / 1000
        self._flush = weakref.WeakMethod(flush)  # a bound method
        self._lock = lock
        self._timer: threading.Timer | None = None

    def arm(self) -> None:
        """Start the timer unless it is running."""
        if self._timer is None:
            self._timer = threading.Timer(self._delay_seconds, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self) -> None:
        with self._lock:
            self._timer = None
            flush = self._flush()
            if flush is None:
                return  # the map is gone
            try:
                flush()
            except MemoryError:
                pass  # the nodes stay dirty; the next flush() or close() reports the error
