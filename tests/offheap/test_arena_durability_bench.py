"""Timings of the durable arena (``-m bench``, off by default; run with ``-s`` to see them):
commit latency for 1 and 1,000 changed pages of a 64 MiB arena, written pages found by pagemap
or by comparison with the file, and the cost of verifying every checksum when a 256 MiB file
opens.

    python -m pytest tests/offheap/test_arena_durability_bench.py -m bench -s
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import pytest

from offheap.arena import dirtypages
from offheap.arena.arena import PAGE_BYTES, Arena

pytestmark = pytest.mark.bench


def _median_ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1e3:8.2f} ms (min {min(samples) * 1e3:.2f})"


@pytest.mark.parametrize("finder", ["pagemap", "compare"])
def test_commit_latency(tmp_path, monkeypatch, finder):
    if finder == "compare":
        monkeypatch.setattr(dirtypages, "PAGEMAP_PATH", "/nonexistent/pagemap")
    n_pages = (64 << 20) // PAGE_BYTES
    rng = np.random.default_rng(1)
    with Arena.file(tmp_path / "a") as arena:
        offset = arena.allocate(n_pages * PAGE_BYTES - 64)
        pages = arena.array(offset, np.uint8, n_pages * PAGE_BYTES - 64)
        pages[:] = rng.integers(0, 256, len(pages), dtype=np.uint8)
        arena.commit()
        for changed in (1, 1000):
            samples = []
            for round_ in range(15):
                for page in rng.choice(n_pages - 1, changed, replace=False).tolist():
                    pages[page * PAGE_BYTES] = round_ + 1
                started = time.perf_counter()
                arena.commit()
                samples.append(time.perf_counter() - started)
            print(f"\ncommit of {changed:5} changed pages in a 64 MiB arena ({finder}): "
                  f"{_median_ms(samples)}")
        samples = []
        for _ in range(15):
            started = time.perf_counter()
            arena.commit()
            samples.append(time.perf_counter() - started)
        print(f"commit with nothing changed ({finder}): {_median_ms(samples)}")
        del pages


def test_open_verify_cost(tmp_path):
    path = tmp_path / "a"
    size = 256 << 20
    with Arena.file(path) as arena:
        offset = arena.allocate(size - 64)
        pages = arena.array(offset, np.uint8, size - 64)
        pages[:] = np.random.default_rng(2).integers(0, 256, len(pages), dtype=np.uint8)
        del pages
        arena.commit()
    for verify in (False, True, False, True):
        started = time.perf_counter()
        Arena.file(path, readonly=True, verify=verify).close()
        elapsed = time.perf_counter() - started
        print(f"\nopen of a 256 MiB file, verify={verify}: {elapsed * 1e3:.0f} ms")
