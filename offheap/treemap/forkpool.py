"""Encoding many records in forked worker processes (layer 6 helper, used by offheap.treemap.bulk).

CPython runs Python code one thread at a time, and encoding a B+tree page is a few dozen small
numpy and Python calls, so threads do not make a bulk load faster (docs/parallel-writes.md has
the measurements). Forked processes do, and cost little when nothing is pickled on the way in:
a worker inherits the caller's memory at fork time (the sorted arrays of the bulk load, shared
copy-on-write), is told only a range of item numbers, and sends back the encoded records of the
range as one ``bytes`` object and a length array, two buffers instead of one object per record.

Needs the ``fork`` start method (Linux, macOS); elsewhere ``parallelism`` > 1 raises ValueError.
The pool lives for one call and is shut down however the caller stops iterating.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator

import numpy as np

_RANGES_PER_WORKER = 4
"""Ranges per worker: enough to even out the load and to stream results, few enough to keep
the per-range overhead (a task message and two pickled buffers) negligible."""

_encode: Callable[[int], bytes] | None = None  # set in each worker by _install


def _install(encode: Callable[[int], bytes]) -> None:
    global _encode
    _encode = encode


def _encode_range(bounds: tuple[int, int]) -> tuple[bytes, np.ndarray]:
    encode = _encode
    if encode is None:
        raise RuntimeError("a worker runs _encode_range only after _install")
    records = [encode(i) for i in range(*bounds)]
    return b"".join(records), np.fromiter(map(len, records), np.int64, len(records))


def encode_in_workers(encode: Callable[[int], bytes], count: int,
                      parallelism: int) -> Iterator[bytes]:
    """``encode(0)``, ..., ``encode(count - 1)`` in order, computed by ``parallelism`` forked
    processes. ``encode`` may close over large arrays: the workers inherit them, unpickled.
    An exception in a worker is raised here, at the first item of its range."""
    try:
        context = multiprocessing.get_context("fork")
    except ValueError:
        raise ValueError("parallelism > 1 runs forked worker processes, and this platform "
                         "cannot fork; pass parallelism=1") from None
    step = max(1, -(-count // (parallelism * _RANGES_PER_WORKER)))
    ranges = [(start, min(count, start + step)) for start in range(0, count, step)]
    # initargs are not pickled under fork: each worker, restarted ones too, inherits ``encode``
    pool = context.Pool(parallelism, initializer=_install, initargs=(encode,))
    try:
        for joined, lengths in pool.imap(_encode_range, ranges):
            ends = np.cumsum(lengths).tolist()
            yield from (joined[a:b] for a, b in zip([0, *ends[:-1]], ends))
    finally:
        # close and join, never terminate: Pool.terminate() can hang joining its task handler
        # when it stops workers mid-task (seen under load after a worker raised); the ranges
        # left are few (_RANGES_PER_WORKER per worker), so letting them finish costs little
        pool.close()
        pool.join()
