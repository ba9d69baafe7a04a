"""Resident set size of the current process, now and at its peak, read from /proc (Linux).

The capacity experiment charges Python-heap structures with the RSS growth of the child process
that fills them, and cross-checks off-heap ones with it. The peak (``VmHWM``) matters: a dict
that doubles its table needs the old and the new one at once, as a hard memory limit would see.
"""

from __future__ import annotations

_STATUS = "/proc/self/status"


def _status_kib(field: str) -> int:
    try:
        with open(_STATUS) as status:
            for line in status:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError as error:
        raise OSError(f"cannot read {_STATUS} ({error}); the memory experiments need Linux /proc") from None
    raise OSError(f"{_STATUS} has no {field} line; the memory experiments need Linux /proc")


def rss_bytes() -> int:
    """Resident set size of this process now, in bytes."""
    return _status_kib("VmRSS:") * 1024


def peak_rss_bytes() -> int:
    """The highest resident set size this process has had (since :func:`reset_peak`), in bytes."""
    return _status_kib("VmHWM:") * 1024


def reset_peak() -> bool:
    """Set the peak back to the current RSS, so that later peaks belong to what runs next.

    Returns False where the kernel does not offer it (``/proc/self/clear_refs`` mode 5, Linux
    4.0+); the peak then still counts earlier transients, such as those of imports.
    """
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError:
        return False
    return True
