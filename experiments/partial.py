"""Keeping what a runner measured when it is interrupted or fails (the experiment runners).

A runner fills its results document step by step inside :func:`keeping_partial`, which hands
it a ``progress`` that also remembers the step. A Ctrl-C marks the document ``interrupted``
(``interrupted_during`` names the step), an exception of the runner itself ``failed`` (the
step, the type, message and traceback); either way the block ends normally and the runner
returns the document as it stands, so ``python -m experiments`` writes results.json and the
tables of the steps that finished, with :func:`partial_note` under them, and exits non-zero.
The capacity runner keeps its own record of the contender it was running (``failed`` names a
``contender`` there); :func:`partial_note` reads both.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable, Iterator


class _Steps:
    """A progress callback that remembers the last step it was told."""

    def __init__(self, progress: Callable[[str], None]) -> None:
        self.current = "the start"
        self._progress = progress

    def __call__(self, text: str) -> None:
        self.current = text
        self._progress(text)


@contextlib.contextmanager
def keeping_partial(document: dict,
                    progress: Callable[[str], None]) -> Iterator[Callable[[str], None]]:
    """Run the block that fills ``document``; record a Ctrl-C or a failure in it instead of
    raising, and its ``wall_seconds`` in any case. Yields the progress callback to use."""
    steps = _Steps(progress)
    started = time.perf_counter()
    try:
        yield steps
    except KeyboardInterrupt:
        document["interrupted"] = True
        document["interrupted_during"] = steps.current
    except Exception as error:  # a fault of the runner itself: keep what is done
        document["failed"] = {"during": steps.current, "type": type(error).__name__,
                              "message": str(error), "traceback": traceback.format_exc()}
    finally:
        document["wall_seconds"] = time.perf_counter() - started


def partial_note(document: dict) -> str:
    """The line a table of a partial run ends with ("" for a complete run)."""
    if document.get("interrupted"):
        during = document.get("interrupted_during")
        return ("\n\ninterrupted by Ctrl-C" + (f" during: {during}" if during else "")
                + "; what follows it did not run")
    failed = document.get("failed")
    if failed:
        during = failed.get("during") or failed.get("contender")
        return (f"\n\nthe runner failed during: {during} ({failed['type']}: "
                f"{failed['message']}); what follows it did not run (traceback in results.json)")
    return ""
