"""The capacity experiment's subprocess: fill one contender until the budget, report JSON lines.

Run as ``python -m experiments.child '<config JSON>'`` by :mod:`experiments.capacity`; each
contender gets a fresh interpreter so that no map inherits another's heap. The config holds
``contender``, ``budget_bytes``, ``keys``, ``mode`` (``scalar``/``batch``), ``max_seconds``,
``workdir``, ``seed``, ``memray`` (bool) and ``rss_guard_bytes`` (default: 4 GiB or twice the
budget, whichever is larger).

Protocol, one JSON object per stdout line:

- ``{"event": "progress", ...point}`` at most every 0.2 s while filling;
- ``{"event": "result", ...point, "stop": ..., ...}`` once at the end: the last point measured
  within the budget, and why the fill stopped: ``budget``, ``time`` (``max_seconds``),
  ``rss-guard`` (the child's RSS grew past ``rss_guard_bytes``, a safety stop for the machine)
  or ``interrupted`` (SIGINT: the current step completes, the map is finished and measured);
- ``{"event": "error", "type": ..., "message": ...}`` if the fill failed.

A point holds ``entries``, ``memory_bytes`` (the contender's own measure), ``rss_growth_bytes``
and ``peak_rss_growth_bytes`` (the child's RSS above its level when the fill began) and
``seconds`` (time spent filling).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

from experiments import rss
from experiments.contenders import CONTENDERS
from experiments.keys import KeyStream

HEAP_STEP_ENTRIES = 1 << 16  # how often a heap map's RSS is checked against the budget
BULK_STEP_ENTRIES = 1 << 20
MIN_STEP_ENTRIES = 256
STEP_SECONDS = 0.5
_PROGRESS_SECONDS = 0.2


def emit(event: str, **fields) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def step_entries(measured_by: str, batch: bool, budget_bytes: int) -> int:
    """Keys in the first insert step: small enough that the budget check of a heap map is
    fine-grained (at least ~1000 checks per budget), large enough that measuring costs nothing."""
    if measured_by == "rss":
        return max(1024, min(HEAP_STEP_ENTRIES, budget_bytes // 1024))
    if batch:  # a batch far beyond the budget would only fail: start near 1/32 of it
        return max(1024, min(BULK_STEP_ENTRIES, budget_bytes // 32))
    return HEAP_STEP_ENTRIES


def next_scalar_step(step: int, step_seconds: float, measured_by: str) -> int:
    """Keep scalar steps of maps that enforce their own budget near ``STEP_SECONDS``, so a slow
    map still reports progress and meets the time cap closely. A heap map keeps its step: that
    is how often its RSS is checked against the budget."""
    if measured_by == "rss" or step_seconds <= 0:
        return step
    wanted = int(step * STEP_SECONDS / step_seconds)
    return max(MIN_STEP_ENTRIES, min(HEAP_STEP_ENTRIES, wanted, 2 * step))


class Fill:
    """One contender filled from a key stream until the budget, the time cap or a stop request."""

    def __init__(self, target, keys: KeyStream, budget_bytes: int, batch: bool, max_seconds: float,
                 rss_guard_bytes: int | None = None):
        self.target = target
        self.rss_guard_bytes = rss_guard_bytes or max(4 << 30, 2 * budget_bytes)
        self.keys = keys
        self.budget_bytes = budget_bytes
        self.batch = batch
        self.max_seconds = max_seconds
        self.stop_requested = False
        self._rss_baseline = rss.rss_bytes()
        self._seconds = 0.0

    def measure(self) -> dict:
        rss_growth = rss.rss_bytes() - self._rss_baseline
        peak_growth = rss.peak_rss_bytes() - self._rss_baseline
        memory = self.target.memory_bytes()
        return {"entries": len(self.target),
                "memory_bytes": peak_growth if memory is None else memory,
                "rss_growth_bytes": rss_growth, "peak_rss_growth_bytes": peak_growth,
                "seconds": self._seconds}

    def run(self) -> dict:
        """Fill, finish and measure; return the result fields (the last point within budget).

        RSS is counted from here: under memray, its tracker has started by then."""
        rss.reset_peak()
        self._rss_baseline = rss.rss_bytes()
        step = step_entries(self.target.measured_by, self.batch, self.budget_bytes)
        within = self.measure()
        stop = None
        shrinking = False
        last_emit = 0.0
        while stop is None:
            if self.batch and not shrinking and hasattr(self.target, "bulk_step"):
                step = self.target.bulk_step(step)
            chunk = self.keys.take(step)
            started = time.perf_counter()
            inserted = self.target.insert(chunk, self.batch)
            step_seconds = time.perf_counter() - started
            self._seconds += step_seconds
            if not self.batch:
                step = next_scalar_step(step, step_seconds, self.target.measured_by)
            full = inserted < len(chunk)
            if full:
                self.keys.give_back(chunk[inserted:])
                if self.batch and step > 1:
                    step //= 2  # a bulk insert is all or nothing: retry with fewer keys
                    shrinking, full = True, False
            point = self.measure()
            if point["memory_bytes"] > self.budget_bytes:
                stop = "budget"
                break
            within = point
            if full:
                stop = "budget"
            elif self.stop_requested:
                stop = "interrupted"
            elif self._seconds >= self.max_seconds:
                stop = "time"
            elif point["peak_rss_growth_bytes"] > self.rss_guard_bytes:
                stop = "rss-guard"
            if time.monotonic() - last_emit >= _PROGRESS_SECONDS:
                emit("progress", **within)
                last_emit = time.monotonic()
        return self._finish(within, stop)

    def _finish(self, within: dict, stop: str) -> dict:
        started = time.perf_counter()
        self.target.finish()
        finish_seconds = time.perf_counter() - started
        if self.target.measured_by != "rss":
            # The finished structure is what counts: a flushed write cache, a written index.
            # Off-heap targets never cross the budget, so this is still within it.
            self._seconds += finish_seconds
            within = self.measure()
        within["finish_seconds"] = finish_seconds
        details = self.target.details() if hasattr(self.target, "details") else {}
        return {**within, "stop": stop, "measured_by": self.target.measured_by,
                "bulk_api": self.batch and self.target.bulk, "details": details}


def run_child(config: dict) -> dict:
    contender = CONTENDERS[config["contender"]]
    workdir = Path(config["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    target = contender.build(config["budget_bytes"], workdir)
    keys = KeyStream(contender.key_order(config["keys"]), seed=config.get("seed", 42))
    fill = Fill(target, keys, config["budget_bytes"], config["mode"] == "batch",
                config["max_seconds"], config.get("rss_guard_bytes"))
    signal.signal(signal.SIGINT, lambda signum, frame: setattr(fill, "stop_requested", True))
    try:
        if config.get("memray"):
            from experiments.heap_profile import profile_heap

            result, memray_figures = profile_heap(fill.run, workdir / "memray.bin")
            result["memray"] = memray_figures
        else:
            result = fill.run()
    finally:
        target.close()
    return result


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m experiments.child '<config JSON>'", file=sys.stderr)
        return 2
    try:
        result = run_child(json.loads(argv[0]))
    except Exception as error:  # noqa: BLE001 - reported to the parent, which shows it
        emit("error", type=type(error).__name__, message=str(error))
        raise
    emit("result", **result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
