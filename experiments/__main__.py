"""``python -m experiments <runner>``: the command line of the experiment runners.

Runners: ``capacity`` (the MapDB memory experiment, :mod:`experiments.capacity`),
``sparkey-bench`` (the sparkey-java README tables, :mod:`experiments.sparkey_bench`),
``maps-bench`` (offheap's maps against dict and SortedDict, :mod:`experiments.maps_bench`),
``parallel-write`` (the fast-avro-write table for Sparkey and TreeMap bulk loads,
:mod:`experiments.parallel_write`).
Each writes its results into ``--out``: a table on the terminal and in ``<runner>.txt``, all
figures with the machine, versions and git commit in ``results.json``, and a plot where the
runner has one. ``--out`` is checked before any work; a run cut short by Ctrl-C or a failure
writes what it measured so far, says so under the table, and exits 130 or 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from experiments import report
from experiments.keys import KEY_ORDERS
from experiments.machine import memory_bytes
from experiments.partial import partial_note
from experiments.sizes import format_bytes, parse_bytes

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130

MIN_BUDGET_BYTES = 1 << 20
"""The smallest --budget: every map reserves tens of KiB before its first entry."""
DEFAULT_BUDGET = "4MiB"
"""The capacity run's default budget: the slowest fill, TreeMap without a write cache (every
insert writes its leaf and path through, 25-50K inserts/s on the 2-core machine of
docs/experiments.md), reaches it in a few minutes, so every contender is measured to the budget
and the whole run stays under 10 minutes there. Larger budgets are flags (``--budget 1GiB``)."""
DEFAULT_MAX_SECONDS = 300.0
"""The default time cap per contender: a safety net above the default budget's slowest fill."""
RSS_GUARD_SHARE_OF_MEMORY = 0.9
"""The default RSS guard never exceeds this share of the machine's memory."""


def _size(text: str) -> int:
    try:
        return parse_bytes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _positive_seconds(text: str) -> float:
    """A duration option; argparse prefixes the message with the option's name."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"cannot read {text!r} as seconds; write e.g. 1 or "
                                         "2.5") from None
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return seconds


def _add_capacity(subparsers) -> None:
    from experiments.contenders import CONTENDERS

    parser = subparsers.add_parser(
        "capacity", help="how many int64 -> '' entries fit in a memory budget (the MapDB table)",
        description="Fill each contender in a fresh subprocess until its memory reaches the "
                    "budget (or the time cap), and compare with MapDB's 15 GB figures.")
    parser.add_argument("--budget", type=_size, default=parse_bytes(DEFAULT_BUDGET),
                        help=f"memory budget per contender, e.g. {DEFAULT_BUDGET} (default: every "
                             f"contender filled to it in under 10 minutes in all), 256MiB, 1GiB, "
                             f"15GiB")
    parser.add_argument("--keys", choices=KEY_ORDERS, default="sequential",
                        help="key order (default sequential; random = uniform signed int64)")
    parser.add_argument("--contenders", nargs="+", metavar="NAME", choices=list(CONTENDERS),
                        help=f"which to run (default all): {', '.join(CONTENDERS)}")
    parser.add_argument("--mode", choices=("scalar", "batch"), default="scalar",
                        help="scalar: the blog's one-put-at-a-time loop (default); "
                             "batch: the bulk APIs")
    parser.add_argument("--max-seconds", type=_positive_seconds, default=None,
                        help=f"time cap per contender's fill (default {DEFAULT_MAX_SECONDS:g}, "
                             f"which the default budget does not reach); a capped contender's "
                             f"capacity is extrapolated from its bytes/entry and marked ~")
    parser.add_argument("--memray", action="store_true",
                        help="record each child's Python-heap peak with memray (slower)")
    parser.add_argument("--seed", type=int, default=42, help="seed of the random keys")
    parser.add_argument("--rss-guard", type=_size, default=None,
                        help="stop a child whose RSS grows past this, to protect the machine "
                             "(default: 4GiB or twice the budget, whichever is larger)")
    parser.add_argument("--out", type=Path, default=Path("experiment-results/capacity"),
                        help="directory for results.json, capacity.txt and capacity.png")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(run=_run_capacity)


def _checked_rss_guard(budget_bytes: int, rss_guard_bytes: int | None) -> int:
    """The RSS guard for a budget, after refusing budgets this machine cannot run.

    SystemExit for a budget below MIN_BUDGET_BYTES (no contender would hold an entry) or above
    the machine's memory (the fills would swap or be killed before reaching it). The default
    guard, 4 GiB or twice the budget, is capped at RSS_GUARD_SHARE_OF_MEMORY of the memory,
    with a warning when that lowers it; a guard given explicitly is kept.
    """
    if budget_bytes < MIN_BUDGET_BYTES:
        raise SystemExit(f"--budget {format_bytes(budget_bytes)} is below "
                         f"{format_bytes(MIN_BUDGET_BYTES)}: every map reserves tens of KiB "
                         "before its first entry, so no contender would fill; try 256MiB")
    memory = memory_bytes()
    if memory is not None and budget_bytes > memory:
        raise SystemExit(f"--budget {format_bytes(budget_bytes)} is more than this machine's "
                         f"{format_bytes(memory)} of memory: the fills would swap or be killed "
                         f"before reaching it; pass at most --budget "
                         f"{format_bytes(memory // 2)} or so")
    if rss_guard_bytes is not None:
        return rss_guard_bytes
    guard = max(4 << 30, 2 * budget_bytes)
    if memory is not None and guard > memory * RSS_GUARD_SHARE_OF_MEMORY:
        guard = int(memory * RSS_GUARD_SHARE_OF_MEMORY)
        print(f"warning: the RSS guard is {format_bytes(guard)}, "
              f"{RSS_GUARD_SHARE_OF_MEMORY:.0%} of this machine's {format_bytes(memory)} of "
              f"memory, less than twice the budget: a contender that needs more stops at "
              f"'rss-guard'", file=sys.stderr)
    return guard


def _run_capacity(args) -> int:
    from experiments.capacity import CapacityConfig, run_capacity
    from experiments.contenders import default_contenders, resolve

    contenders = resolve(args.contenders) if args.contenders else default_contenders(args.keys)
    max_seconds = DEFAULT_MAX_SECONDS if args.max_seconds is None else args.max_seconds
    config = CapacityConfig(budget_bytes=args.budget, keys=args.keys, mode=args.mode,
                            max_seconds=max_seconds, memray=args.memray, seed=args.seed,
                            rss_guard_bytes=_checked_rss_guard(args.budget, args.rss_guard))
    document = run_capacity(contenders, config, progress=not args.no_progress)
    _write(args.out, "capacity", document, report.capacity_table)  # notes a partial run itself
    if args.max_seconds is None:
        _warn_of_default_cap(document)
    try:
        report.plot_capacity(document, args.out / "capacity.png")
    except ImportError:
        print("capacity.png not drawn: matplotlib is missing (pip install -e '.[plot]')",
              file=sys.stderr)
    print(f"results in {args.out}/", file=sys.stderr)
    return _exit_code(document)


def _warn_of_default_cap(document: dict) -> None:
    """Say so when the default time cap, not the user, cut a fill short: its capacity is then
    an extrapolation (~) the default run is meant to measure."""
    capped = [record["label"] for record in document.get("results", [])
              if record.get("stop") == "time"]
    if capped:
        print(f"warning: the default time cap ({DEFAULT_MAX_SECONDS:g} s) stopped "
              f"{', '.join(capped)} before the budget, so their capacity is extrapolated (~), "
              f"not measured: this machine fills slower than the default run expects; pass a "
              f"smaller --budget, or a larger --max-seconds, to measure every contender",
              file=sys.stderr)


def _add_sparkey_bench(subparsers) -> None:
    parser = subparsers.add_parser(
        "sparkey-bench", help="the sparkey-java README tables: lookups, appends, index builds",
        description="Random lookups by N x NONE/SNAPPY/ZSTD, small and medium appends, and index "
                    "builds in memory vs by sorting, beside sparkey-java's published figures.")
    parser.add_argument("--max-n", type=int, default=1_000_000,
                        help="largest store, from 1K up to 10M entries (default 1M)")
    parser.add_argument("--seconds", type=_positive_seconds, default=1.0,
                        help="minimum time of each timed loop (default 1)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="index builds per N and method; the median is reported (default 3)")
    parser.add_argument("--out", type=Path, default=Path("experiment-results/sparkey-bench"),
                        help="directory for results.json and sparkey-bench.txt")
    parser.set_defaults(run=_run_sparkey_bench)


def _run_sparkey_bench(args) -> int:
    from experiments.sparkey_bench import run_sparkey_bench

    if args.max_n < 1000:
        raise SystemExit("--max-n must be at least 1000, the smallest store measured")
    document = run_sparkey_bench(args.max_n, args.seconds, max(1, args.repeats),
                                 progress=lambda text: print(text, file=sys.stderr))
    _write(args.out, "sparkey-bench", document, _with_partial_note(report.sparkey_tables))
    return _exit_code(document)


def _add_maps_bench(subparsers) -> None:
    from experiments.maps_bench import VALUE_TYPES

    parser = subparsers.add_parser(
        "maps-bench", help="LongHashMap and TreeMap vs dict and SortedDict, as ratios",
        description="Scalar and bulk put/get/delete and iteration on the same keys for every "
                    "map, in one run.")
    parser.add_argument("--n", type=int, default=200_000, help="entries (default 200K)")
    parser.add_argument("--keys", choices=KEY_ORDERS, default="random",
                        help="key order (default random)")
    parser.add_argument("--value", choices=VALUE_TYPES, default="int64",
                        help="int64 values (the key) or object values ('')")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of every map; each figure is the fastest (default 3)")
    parser.add_argument("--goals", type=_count, nargs=3, metavar=("SMALL", "LARGE", "BYTES_N"),
                        default=(10_000, 1_000_000, 10_000_000),
                        help="the LongHashMap rows against dict: keys of the small and the "
                             "large map, entries of the bytes/entry row (default 10K 1M 10M)")
    parser.add_argument("--no-goals", action="store_true", help="skip the LongHashMap rows")
    parser.add_argument("--tree-goals", type=_count, nargs=2, metavar=("KEYS", "OPS"),
                        default=(1_000_000, 20_000),
                        help="the TreeMap rows against SortedDict, on both code paths: keys of "
                             "the maps and operations timed a row (default 1M 20K)")
    parser.add_argument("--tree-random-fill", type=_count, default=None, metavar="N",
                        help="also fill a TreeMap with N random keys one by one for its "
                             "bytes/entry (minutes at 2M; default: not run)")
    parser.add_argument("--no-tree-goals", action="store_true", help="skip the TreeMap rows")
    parser.add_argument("--keyed-goals", type=_count, nargs=3, metavar=("KEYS", "PURE_KEYS", "BYTES_N"),
                        default=(1_000_000, 100_000, 1_000_000),
                        help="the HashMap(key='str') rows against dict: keys of the compiled "
                             "core's rows, of the reference's, entries of the bytes/entry row "
                             "(default 1M 100K 1M)")
    parser.add_argument("--no-keyed-goals", action="store_true", help="skip the HashMap rows")
    parser.add_argument("--out", type=Path, default=Path("experiment-results/maps-bench"),
                        help="directory for results.json and maps-bench.txt")
    parser.set_defaults(run=_run_maps_bench)


def _run_maps_bench(args) -> int:
    from experiments.maps_bench import run_maps_bench

    if args.n < 1 or args.repeat < 1:
        raise SystemExit("--n and --repeat must be at least 1")
    document = run_maps_bench(args.n, args.keys, args.value, repeat=args.repeat,
                              goals=None if args.no_goals else tuple(args.goals),
                              tree_goals=None if args.no_tree_goals else (
                                  *args.tree_goals, args.tree_random_fill or 0),
                              keyed_goals=None if args.no_keyed_goals else tuple(args.keyed_goals),
                              progress=lambda text: print(text, file=sys.stderr))
    _write(args.out, "maps-bench", document, _with_partial_note(_maps_tables))
    return _exit_code(document)


def _maps_tables(document: dict) -> str:
    table = report.maps_table(document)
    if "hashmap_goals" in document:
        table += "\n\n" + report.hashmap_goals_table(document["hashmap_goals"])
    if "treemap_goals" in document:
        table += "\n\n" + report.treemap_goals_table(document["treemap_goals"])
    if "keyed_goals" in document:
        table += "\n\n" + report.keyed_goals_table(document["keyed_goals"])
    return table


def _count(text: str) -> int:
    """``100K`` / ``1M`` / ``2500`` -> an int >= 1."""
    scale = {"K": 1000, "M": 1_000_000}.get(text[-1:].upper(), 1)
    try:
        count = int(float(text[:-1] if scale > 1 else text) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(f"cannot read {text!r} as a count; write e.g. 100K, "
                                         "1M or 2500") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"count {text!r} must be at least 1")
    return count


def _add_parallel_write(subparsers) -> None:
    from experiments.parallel_write import CODECS, PARALLELISM, SIZES

    parser = subparsers.add_parser(
        "parallel-write", help="fast-avro-write's table: StockQuote records written to Sparkey "
                               "sequentially and in parallel",
        description="Write N StockQuote records to a Sparkey log with a put loop and with "
                    "put_many at parallelism 1, 2, 4, for every codec (min and max of --runs "
                    "interleaved runs); also TreeMap.update(parallelism=p), a GIL probe of the "
                    "compressors and threads vs processes.")
    parser.add_argument("--sizes", type=_count, nargs="+", default=list(SIZES),
                        help="record counts (default 100K 200K 500K 1M)")
    parser.add_argument("--codecs", nargs="+", choices=CODECS, default=list(CODECS),
                        help="log compressions (default all)")
    parser.add_argument("--parallelism", type=_count, nargs="+", default=list(PARALLELISM),
                        help="worker counts besides 1 (default 2 4)")
    parser.add_argument("--block-size", type=_size, default=4096,
                        help="largest uncompressed block of the compressed logs (default 4096, "
                             "Sparkey's; fast-avro-write's Avro blocks are 64,000 bytes)")
    parser.add_argument("--threshold", type=int, default=None,
                        help="put_many's threshold (default: its own, 20,000)")
    parser.add_argument("--chunk-mib", type=float, default=None,
                        help="put_many's chunk size in MiB for this run (default: its own, 4)")
    parser.add_argument("--runs", type=_count, default=3,
                        help="runs per cell; min and max are reported (default 3, the seed: 10)")
    parser.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS",
                        help="before each run, wait up to this long for other processes to "
                             "leave the CPUs (a shared machine; default 0: do not wait)")
    parser.add_argument("--no-treemap", action="store_true", help="skip TreeMap.update")
    parser.add_argument("--no-probes", action="store_true",
                        help="skip the GIL probe and the threads-vs-processes comparison")
    parser.add_argument("--out", type=Path, default=Path("experiment-results/parallel-write"),
                        help="directory for results.json and parallel-write.txt")
    parser.set_defaults(run=_run_parallel_write)


def _run_parallel_write(args) -> int:
    from experiments.parallel_write import parallel_write_tables, run_parallel_write

    if args.wait_idle < 0:
        raise SystemExit("--wait-idle must be 0 or more seconds")
    document = run_parallel_write(args.sizes, args.codecs, args.parallelism, args.runs,
                                  treemap=not args.no_treemap, probes=not args.no_probes,
                                  wait_idle=args.wait_idle, block_size=args.block_size,
                                  threshold=args.threshold,
                                  chunk_bytes=int(args.chunk_mib * (1 << 20))
                                  if args.chunk_mib else None,
                                  progress=lambda text: print(text, file=sys.stderr))
    _write(args.out, "parallel-write", document, _with_partial_note(parallel_write_tables))
    return _exit_code(document)


def _prepare_out(parser: argparse.ArgumentParser, out: Path) -> None:
    """Create the ``--out`` directory before any work, or stop with a usage error saying why.

    A runner measures for minutes; an output it cannot write must fail at once, not after.
    """
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        parser.error(f"--out {out} is not a directory (a file is in the way); pass a directory "
                     "to create or reuse")
    except OSError as error:
        parser.error(f"--out {out} cannot be created: {error.strerror}")
    if not os.access(out, os.W_OK | os.X_OK):
        parser.error(f"--out {out} is not writable")


def _write(out: Path, runner: str, document: dict, tables: Callable[[dict], str]) -> None:
    """Save results.json in ``out`` (made by _prepare_out), then render the tables, save them
    as <runner>.txt and print them: a partial document whose tables fail to render still
    leaves its figures on disk."""
    report.write_json(document, out / "results.json")
    table = tables(document)
    (out / f"{runner}.txt").write_text(table + "\n")
    print(table)


def _with_partial_note(tables: Callable[[dict], str]) -> Callable[[dict], str]:
    """``tables`` followed by what a partial run left out (:mod:`experiments.partial`)."""
    return lambda document: tables(document) + partial_note(document)


def _exit_code(document: dict) -> int:
    """130 for a run a Ctrl-C cut short, 1 for one that failed (or a capacity contender's
    error), else 0."""
    if document.get("interrupted"):
        return EXIT_INTERRUPTED
    if document.get("failed"):
        return EXIT_FAILED
    results = document.get("results")
    if isinstance(results, list) and any("error" in record for record in results):
        return EXIT_FAILED
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments",
                                     description="offheap experiment runners")
    subparsers = parser.add_subparsers(dest="runner", required=True)
    _add_capacity(subparsers)
    _add_sparkey_bench(subparsers)
    _add_maps_bench(subparsers)
    _add_parallel_write(subparsers)
    args = parser.parse_args(argv)
    _prepare_out(parser, args.out)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
