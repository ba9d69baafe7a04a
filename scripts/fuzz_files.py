"""Open many damaged arena files: each must open to its original content or raise CorruptionError.

    python scripts/fuzz_files.py --trials 10000 --seed 1

Runs :func:`tests.offheap.arena_fuzz.run_fuzz` in a temporary directory, prints how each kind of
damage ended, and exits 1 when any file opened with other content or raised anything else.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.offheap.arena_fuzz import run_fuzz  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="offheap-fuzz-") as workdir:
        summary = run_fuzz(args.trials, args.seed, workdir)
    print(summary)
    print(f"{time.perf_counter() - started:.1f} s")
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
