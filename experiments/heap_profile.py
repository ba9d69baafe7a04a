"""Python-heap peak of a piece of work, recorded with memray (``capacity --memray``).

memray sees every allocation of the process: malloc, pymalloc's arenas (which it records as
mmaps) and the arena extents of offheap maps (also mmaps). At the moment of memray's high-water
mark, the allocations made from the modules of ``offheap/arena/`` are the off-heap arena; everything else is
charged to the Python heap. The figures are memray's, not RSS: they count bytes asked for, not
pages touched.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

_ARENA_PACKAGE = os.path.join("offheap", "arena") + os.sep


def _made_by_arena(record) -> bool:
    return any(_ARENA_PACKAGE in filename for _, filename, _ in record.stack_trace())


def profile_heap(work: Callable[[], object], capture_path: Path) -> tuple[object, dict]:
    """Run ``work()`` under memray; return its result and the peak figures.

    The figures: ``peak_bytes`` (memray's high-water mark of everything), ``heap_at_peak_bytes``
    and ``arena_at_peak_bytes`` (its split at that moment). The capture file is removed.
    """
    import memray

    capture_path = Path(capture_path)
    capture_path.unlink(missing_ok=True)
    with memray.Tracker(capture_path, file_format=memray.FileFormat.AGGREGATED_ALLOCATIONS):
        result = work()
    try:
        reader = memray.FileReader(capture_path)
        arena_bytes = heap_bytes = 0
        for record in reader.get_high_watermark_allocation_records(merge_threads=True):
            if _made_by_arena(record):
                arena_bytes += record.size
            else:
                heap_bytes += record.size
        figures = {"peak_bytes": reader.metadata.peak_memory,
                   "heap_at_peak_bytes": heap_bytes, "arena_at_peak_bytes": arena_bytes}
        reader.close()
    finally:
        capture_path.unlink(missing_ok=True)
    return result, figures
