"""Facts about the machine and the code a run measured: CPU, memory, OS, versions, git commit.

Every results file carries them, so a figure can be traced to the hardware and the exact source
that produced it. Reads /proc on Linux and falls back to ``platform`` elsewhere.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
_PACKAGES = ("offheap", "numpy", "sortedcontainers", "python-snappy", "zstandard", "mmh3",
             "memray", "tqdm", "matplotlib")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_bytes() -> int | None:
    """This machine's physical memory (MemTotal), or None where /proc/meminfo is missing."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=REPOSITORY, capture_output=True, text=True,
                              timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def package_versions() -> dict[str, str | None]:
    """Installed version of each package the experiments use (None when absent)."""
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit() -> str | None:
    """The commit checked out now (the code a child process about to start will import)."""
    return _git("rev-parse", "HEAD")


def describe_machine() -> dict:
    """A JSON-ready dict: date, host, CPU, cores, RAM, OS, Python, versions, git commit."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "hostname": platform.node(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_bytes": memory_bytes(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "versions": package_versions(),
        "git_commit": git_commit(),
        "git_dirty": None if status is None else bool(status),
        "offheap_compiled": _offheap_compiled(),
    }


def _offheap_compiled() -> bool:
    """Whether offheap's compiled core ran (False: its pure-Python reference)."""
    import offheap

    return offheap.compiled


def machine_line(machine: dict) -> str:
    """One line for tables and plots: ``2024-05-01, Intel Xeon ..., 2 cores, 23.4 GiB, Python 3.11``."""
    memory = machine.get("memory_bytes")
    memory_text = f", {memory / (1 << 30):.1f} GiB RAM" if memory else ""
    return (f"{machine['date'][:10]}, {machine['cpu']}, {machine['cores']} cores{memory_text}, "
            f"Python {machine['python']}, commit {(machine.get('git_commit') or 'unknown')[:10]}")
