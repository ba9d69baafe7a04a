"""``python -m experiments capacity``: how many ``int64 -> ""`` entries fit in a memory budget.

The blog experiment (DESIGN.md) on a budget that fits this machine. Each contender runs in a
fresh child process (:mod:`experiments.child`) that fills it until the budget or the time cap;
this module starts the children one after another, drives a progress bar per contender from
their JSON lines (each bar shows the share of the nearer stop, the budget or the time cap,
and says which), derives the figures (bytes/entry, inserts/s, the linear extrapolation to 15 GiB
beside MapDB's published number) and hands the document to :mod:`experiments.report`.

Ctrl-C: the running child is asked to stop (SIGINT; it finishes its current step and reports
what it has), no further contender starts, and the results gathered so far are written. A
fault of the runner itself (not of a child, whose errors become its record) does the same and
is recorded as ``failed``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

from experiments.contenders import MAPDB_BUDGET_BYTES, Contender
from experiments.machine import REPOSITORY, describe_machine, git_commit
from experiments.sizes import format_bytes

_STDERR_TAIL_CHARS = 2000
_STOP_GRACE_SECONDS = 60


@dataclass(frozen=True)
class CapacityConfig:
    """What one capacity run measures."""

    budget_bytes: int
    keys: str
    mode: str
    max_seconds: float
    memray: bool = False
    seed: int = 42
    rss_guard_bytes: int | None = None


def derive_figures(record: dict, budget_bytes: int, contender: Contender) -> dict:
    """Add bytes/entry, inserts/s, the budget-sized and 15 GiB extrapolations and MapDB's figure.

    A fill stopped by the budget *measured* how many entries fit; its 15 GiB figure scales that
    count by ``15 GiB / budget`` (``extrapolation: "scaled count"``), so memory the map could
    not use (a hash table that cannot double within the budget) counts against it, as in the
    blog. A fill stopped by time, the RSS guard or Ctrl-C only measured bytes/entry: its
    ``entries_in_budget`` and 15 GiB figures divide the budget by that (``"bytes/entry"``) and
    are flagged (``entries_in_budget_measured`` False).
    """
    entries, memory = record["entries"], record["memory_bytes"]
    bytes_per_entry = memory / entries if entries else None
    measured = record["stop"] == "budget"
    if measured:
        in_budget, in_15gib = entries, int(entries * MAPDB_BUDGET_BYTES / budget_bytes)
    elif bytes_per_entry:
        in_budget = int(budget_bytes / bytes_per_entry)
        in_15gib = int(MAPDB_BUDGET_BYTES / bytes_per_entry)
    else:
        in_budget = in_15gib = None
    figure = contender.mapdb_figure(record["keys"])
    mapdb = None
    if figure is not None:
        mapdb = {**asdict(figure), "bytes_per_entry": MAPDB_BUDGET_BYTES / figure.entries,
                 "entries_scaled_to_budget": figure.entries * budget_bytes / MAPDB_BUDGET_BYTES}
    return {
        **record,
        "bytes_per_entry": bytes_per_entry,
        "budget_used": memory / budget_bytes,
        "inserts_per_second": entries / record["seconds"] if record["seconds"] > 0 else None,
        "entries_in_budget": in_budget,
        "entries_in_budget_measured": measured,
        "entries_in_15gib_extrapolated": in_15gib,
        "extrapolation": "scaled count" if measured else "bytes/entry",
        "mapdb": mapdb,
        "ratio_to_mapdb": in_15gib / figure.entries if figure is not None and in_15gib else None,
    }


class ChildRun:
    """One contender's child process and the bar its progress lines drive."""

    def __init__(self, contender: Contender, config: CapacityConfig, workdir: Path, bar) -> None:
        self.contender = contender
        self.config = config
        self.bar = bar
        self.result: dict | None = None
        self.error: dict | None = None
        self.interrupted = False
        self.stderr_tail = ""
        child_config = {
            "contender": contender.name, "budget_bytes": config.budget_bytes,
            "keys": contender.key_order(config.keys), "mode": config.mode,
            "max_seconds": config.max_seconds, "workdir": str(workdir), "seed": config.seed,
            "memray": config.memray, "rss_guard_bytes": config.rss_guard_bytes,
        }
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPOSITORY), env.get("PYTHONPATH")]))
        self._stderr_path = workdir / "stderr.txt"
        workdir.mkdir(parents=True, exist_ok=True)
        with open(self._stderr_path, "w") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "experiments.child", json.dumps(child_config)],
                stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
                start_new_session=True)  # Ctrl-C reaches only the parent, which forwards it

    def follow(self) -> None:
        """Read the child's lines until it exits; forward one Ctrl-C, kill on a second."""
        try:
            self._read_lines()
        except KeyboardInterrupt:
            self.interrupted = True
            self.process.send_signal(signal.SIGINT)
            try:
                self._read_lines()
            except KeyboardInterrupt:
                self.process.kill()
        self.process.wait()
        if self.result is None and self.error is None:
            self.error = {"type": "ChildExited",
                          "message": f"the child exited with code {self.process.returncode} "
                                     f"without a result"}
        self.stderr_tail = self._stderr_path.read_text()[-_STDERR_TAIL_CHARS:]
        if self.error is not None:
            self.error["stderr_tail"] = self.stderr_tail

    def kill_if_running(self) -> None:
        """Kill the child if it still runs (the parent is leaving on an error or a second Ctrl-C)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def _read_lines(self) -> None:
        for line in self.process.stdout:
            if not line.startswith("{"):
                continue
            message = json.loads(line)
            event = message.pop("event")
            if event == "progress":
                self._show(message)
            elif event == "result":
                self._show(message)
                self.result = message
            elif event == "error":
                self.error = message

    def _show(self, point: dict) -> None:
        if self.bar is None:
            return
        limit, share = nearest_stop(point, self.config)
        self.bar.n = 100 * share
        self.bar.unit = progress_text(point, self.config, limit)  # the text after the bar
        self.bar.refresh()


def nearest_stop(point: dict, config: CapacityConfig) -> tuple[str, float]:
    """Which stop a fill is closest to, ``"budget"`` or ``"time"``, and how far along (0..1)."""
    memory_share = min(point["memory_bytes"] / config.budget_bytes, 1.0)
    time_share = min(point["seconds"] / config.max_seconds, 1.0)
    return ("budget", memory_share) if memory_share >= time_share else ("time", time_share)


def progress_text(point: dict, config: CapacityConfig, limit: str) -> str:
    """The text beside a bar: the stop it is heading for first, then both measures."""
    return (f"to {limit}: {format_bytes(point['memory_bytes'])}/"
            f"{format_bytes(config.budget_bytes)}, {point['seconds']:.0f}/"
            f"{config.max_seconds:g} s, {point['entries']:,} entries")


def _progress_bar(label: str, enabled: bool):
    """A bar of the share of the nearer stop (budget or time cap) the fill has reached."""
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=100, desc=f"{label:<24}", unit="starting",
                bar_format="{desc} {n:3.0f}%|{bar:12}| {unit}", file=sys.stderr, leave=True)


def run_contender(contender: Contender, config: CapacityConfig, progress: bool) -> tuple[dict, bool]:
    """Fill one contender in a child; return its record and whether Ctrl-C stopped it."""
    keys = contender.key_order(config.keys)
    base = {"name": contender.name, "label": contender.label, "keys": keys, "mode": config.mode,
            "git_commit": git_commit()}  # the code under test may change between contenders
    reason = contender.unavailable_reason()
    if reason is not None:
        return {**base, "skipped": reason}, False
    bar = _progress_bar(contender.label, progress)
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix=f"capacity-{contender.name}-") as workdir:
            run = ChildRun(contender, config, Path(workdir), bar)
            try:
                run.follow()
            finally:
                run.kill_if_running()
    finally:
        if bar is not None:
            bar.close()
    base["wall_seconds"] = time.perf_counter() - started
    if run.error is not None:
        return {**base, "error": run.error}, run.interrupted
    record = derive_figures({**base, **run.result}, config.budget_bytes, contender)
    if run.stderr_tail:  # warnings, or errors in a map's background threads
        record["stderr_tail"] = run.stderr_tail
    return record, run.interrupted


def run_capacity(contenders: list[Contender], config: CapacityConfig, *, progress: bool = True) -> dict:
    """Run every contender in turn; return the results document (see :mod:`experiments.report`)."""
    document = {
        "experiment": "capacity",
        "machine": describe_machine(),
        "config": {**asdict(config), "contenders": [c.name for c in contenders],
                   "mapdb_budget_bytes": MAPDB_BUDGET_BYTES},
        "results": [],
        "interrupted": False,
    }
    started = time.perf_counter()
    for contender in contenders:
        try:
            record, interrupted = run_contender(contender, config, progress)
        except KeyboardInterrupt:  # between children, or a second Ctrl-C: keep what is done
            document["interrupted"] = True
            break
        except Exception as error:  # a fault of the runner itself: keep what is done
            document["failed"] = {"contender": contender.name, "type": type(error).__name__,
                                  "message": str(error), "traceback": traceback.format_exc()}
            break
        document["results"].append(record)
        if interrupted:
            document["interrupted"] = True
            break
    document["wall_seconds"] = time.perf_counter() - started
    return document
