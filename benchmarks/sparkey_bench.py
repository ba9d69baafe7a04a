"""Sparkey benchmark: write, index, scalar get and get_many for 1M ``key_%d`` -> ``value_%d``.

Run standalone from the repository root:

    python benchmarks/sparkey_bench.py --n 1000000

For each compression (blocks of --block-size bytes) it measures, best of --repeat runs:

* log write: ``LogWriter.put`` for every entry, then ``close``;
* index build: ``write_index`` (canonical rules, in memory);
* scalar get: ``Reader.get`` of --lookups existing keys in random order, ns per lookup;
* get_many: ``Reader.get_many`` of the same keys in one batch, ns per key;
* items: iteration of all live ``(key, value)`` pairs, ns per entry;

and, as the peer in the same run, a ``dict`` holding the same entries, looked up with the same
keys (``get`` per key; a list comprehension of ``get`` for the batch). Lookup keys are fresh
``bytes`` objects (as a caller would build them), not the objects used for writing. Each figure
is reported as wall time and, in parentheses, CPU time of the process.
"""

import argparse
import collections
import json
import os
import pathlib
import platform
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sparkey  # noqa: E402  (after the path set-up for standalone runs)


def best_of(repeat, function):
    """Smallest wall time and smallest CPU time of ``repeat`` calls, in seconds.

    On a shared machine the CPU time (time.process_time) excludes the waits for a core; memory
    contention from other processes still shows in both.
    """
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        function()
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return min(walls), min(cpus)


def per_item_ns(times, count):
    return tuple(seconds / count * 1e9 for seconds in times)


def bench_compression(directory, compression, n, lookups, block_size, repeat, keys, values):
    base = pathlib.Path(directory) / f"bench_{compression}"
    log_path, index_path = base.with_suffix(".spl"), base.with_suffix(".spi")

    def write_log():
        writer = sparkey.LogWriter(log_path, compression, block_size)
        put = writer.put
        for key, value in zip(keys, values):
            put(key, value)
        writer.close()

    def build_index():
        sparkey.write_index(index_path, log_path)

    result = {"compression": compression, "log_write_s": best_of(repeat, write_log),
              "index_build_s": best_of(repeat, build_index),
              "log_bytes": os.path.getsize(log_path), "index_bytes": os.path.getsize(index_path)}
    result["write_total_s"] = tuple(
        log + index for log, index in zip(result["log_write_s"], result["index_build_s"]))
    with sparkey.open(base) as reader:
        get = reader.get

        def scalar():
            for key in lookups:
                get(key)

        result["get_ns"] = per_item_ns(best_of(repeat, scalar), len(lookups))
        result["get_many_ns"] = per_item_ns(
            best_of(repeat, lambda: reader.get_many(lookups)), len(lookups))
        result["items_ns"] = per_item_ns(
            best_of(repeat, lambda: collections.deque(reader.items(), maxlen=0)), n)
        expected = [b"value_" + key[4:] for key in lookups[:1000]]
        assert reader.get_many(lookups[:1000]) == expected
        assert [get(key) for key in lookups[:1000]] == expected
    return result


def bench_dict(keys, values, lookups, repeat):
    table = dict(zip(keys, values))
    get = table.get

    def scalar():
        for key in lookups:
            get(key)

    return {"get_ns": per_item_ns(best_of(repeat, scalar), len(lookups)),
            "get_many_ns": per_item_ns(best_of(repeat, lambda: [get(key) for key in lookups]),
                                       len(lookups))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="entries (default 1M)")
    parser.add_argument("--lookups", type=int, default=200_000,
                        help="random lookups per measurement (default 200k)")
    parser.add_argument("--compressed-lookups", type=int, default=20_000,
                        help="random lookups for snappy/zstd (default 20k)")
    parser.add_argument("--block-size", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compressions", default="none,snappy,zstd")
    parser.add_argument("--json", type=pathlib.Path, help="also write the results here")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(12345)
    keys = [b"key_%d" % i for i in range(args.n)]
    values = [b"value_%d" % i for i in range(args.n)]
    picks = rng.integers(0, args.n, args.lookups).tolist()
    lookups = [b"key_%d" % i for i in picks]
    results = {"n": args.n, "block_size": args.block_size, "repeat": args.repeat,
               "python": platform.python_version(), "machine": platform.machine(),
               "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
               "load_average": os.getloadavg()[0], "runs": []}
    results["dict"] = bench_dict(keys, values, lookups, args.repeat)
    with tempfile.TemporaryDirectory(prefix="sparkey-bench-") as directory:
        for compression in args.compressions.split(","):
            count = args.lookups if compression == "none" else args.compressed_lookups
            results["runs"].append(bench_compression(
                directory, compression, args.n, lookups[:count], args.block_size, args.repeat,
                keys, values))
    print(f"sparkey benchmark: n={args.n:,} key_%d -> value_%d, block size {args.block_size}, "
          f"best of {args.repeat}, Python {results['python']}, {results['cpus']} CPUs, "
          f"{results['date']}, load average {results['load_average']:.1f}")
    print("each figure: wall (CPU time)")
    print(f"{'store':<7} {'log write s':>15} {'index s':>15} {'total s':>15} "
          f"{'get ns/op':>15} {'get_many ns/key':>15} {'items ns/entry':>15} {'log MB':>7}")
    for run in results["runs"]:
        print(f"{run['compression']:<7} {_pair(run['log_write_s'], 3):>15} "
              f"{_pair(run['index_build_s'], 3):>15} {_pair(run['write_total_s'], 3):>15} "
              f"{_pair(run['get_ns']):>15} {_pair(run['get_many_ns']):>15} "
              f"{_pair(run['items_ns']):>15} {run['log_bytes'] / 1e6:>7.1f}")
    peer = results["dict"]
    print(f"{'dict':<7} {'':>15} {'':>15} {'':>15} {_pair(peer['get_ns']):>15} "
          f"{_pair(peer['get_many_ns']):>15}   (peer: same keys, same run)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


def _pair(values, decimals=0):
    wall, cpu = values
    return f"{wall:.{decimals}f} ({cpu:.{decimals}f})"


if __name__ == "__main__":
    main()
