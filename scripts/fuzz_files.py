"""Open many damaged files: each must open to its original content or raise CorruptionError.

    python scripts/fuzz_files.py --trials 10000 --seed 1                 # arena files
    python scripts/fuzz_files.py --mode db --trials 10000 --seed 1       # DBs and file maps
    python scripts/fuzz_files.py --mode salvage --trials 10000 --seed 1  # salvage of those

``--mode arena`` runs :func:`tests.offheap.arena_fuzz.run_fuzz` (raw arena files, content =
root and extent payloads); ``--mode db`` runs :func:`tests.offheap.db_fuzz.run_db_fuzz` (DBs and
standalone maps, content = every entry of every collection); ``--mode salvage`` runs
:func:`tests.offheap.salvage_fuzz.run_salvage_fuzz` (salvage of damaged DBs and maps must copy
only entries the source held); ``--mode all`` the three. Each runs in a temporary directory,
prints how each kind of damage ended, and the script exits 1 when any file opened with other
content, was salvaged wrong, or raised anything else.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.offheap.arena_fuzz import run_fuzz  # noqa: E402
from tests.offheap.db_fuzz import run_db_fuzz  # noqa: E402
from tests.offheap.salvage_fuzz import run_salvage_fuzz  # noqa: E402

RUNNERS = {"arena": run_fuzz, "db": run_db_fuzz, "salvage": run_salvage_fuzz}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mode", choices=(*RUNNERS, "all"), default="arena")
    args = parser.parse_args(argv)
    failed = False
    for mode in RUNNERS if args.mode == "all" else (args.mode,):
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="offheap-fuzz-") as workdir:
            summary = RUNNERS[mode](args.trials, args.seed, workdir)
        print(f"{mode}: {summary}")
        print(f"{time.perf_counter() - started:.1f} s")
        failed |= bool(summary.failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
