"""Sharded Sparkey benchmark: build N ``key_%d`` -> ``value_%d`` entries three ways, then look up.

Run standalone from the repository root (needs the ``dask`` extra):

    python benchmarks/sparkey_sharded_bench.py --n 10000000 --shards 8

Builds, each timed from the first entry to a published, readable store:

* single: one ``sparkey.Writer`` in this process (log, then index), the peer;
* sharded-local: ``sparkey.sharded.write`` in this process, all shard writers open at once;
* sharded-dask: ``sparkey.sharded.write_dask`` on a ``LocalCluster`` of --workers processes
  with --threads-per-worker threads and --memory-limit each. The input is a dataframe of
  --partitions partitions generated on the workers (``dask.dataframe.from_map``); the cluster's
  start-up is timed separately and not included.

With --phases, the same cluster then runs the Dask graph up to each step and counts rows there:
input generation only, plus routing, plus the shuffle; the rest of the build is writing shards.

Lookups, best of --repeat: --lookups existing keys in random order with ``get`` (ns per lookup)
and with one ``get_many`` call (ns per key), on the single store (the peer) and on the sharded
store through ``open_sharded``, in the same run with the same keys. Peak resident memory during
each build is sampled every 50 ms (``psutil``): of this process for the in-process builds, of
each worker process for the Dask build.

On a single machine the engine's routing, shuffle and process hops cost more than they save;
Dask pays off when workers are separate machines writing to a shared filesystem.
"""

import argparse
import functools
import json
import os
import pathlib
import platform
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sparkey  # noqa: E402  (after the path set-up for standalone runs)
from sparkey import sharded  # noqa: E402


def entries(start, stop):
    """The benchmark's entries ``start`` to ``stop``, generated lazily."""
    return ((b"key_%d" % i, b"value_%d" % i) for i in range(start, stop))


def key_value_partition(number, rows, n):
    """Partition ``number`` of the input as a pandas frame; runs on a worker."""
    import pandas as pd
    start, stop = number * rows, min(n, (number + 1) * rows)
    return pd.DataFrame({"key": [b"key_%d" % i for i in range(start, stop)],
                         "value": [b"value_%d" % i for i in range(start, stop)]})


def timed(function):
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def best_of(repeat, function):
    return min(timed(function)[0] for _ in range(repeat))


class PeakRss:
    """Samples the resident memory of some processes in a thread; ``peaks_mib`` per process."""

    def __init__(self, pids, interval_s=0.05):
        import psutil
        self._processes = [psutil.Process(pid) for pid in pids]
        self.peaks_mib = [0.0] * len(pids)
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while True:
            for i, process in enumerate(self._processes):
                rss_mib = process.memory_info().rss / 2**20
                self.peaks_mib[i] = max(self.peaks_mib[i], rss_mib)
            if self._stop.wait(self._interval_s):
                return

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join()


def timed_with_peak(pids, function):
    """``(seconds, peak MiB of each pid, result)`` of calling ``function``."""
    with PeakRss(pids) as peak:
        seconds, result = timed(function)
    return seconds, peak.peaks_mib, result


def build_single(directory, n, compression):
    def build():
        with sparkey.Writer(directory / "single", compression) as writer:
            put = writer.put
            for key, value in entries(0, n):
                put(key, value)
    seconds, peaks, _ = timed_with_peak([os.getpid()], build)
    return {"build_s": seconds, "peak_rss_mib": peaks[0]}


def build_sharded_local(directory, n, shards, compression):
    seconds, peaks, _ = timed_with_peak([os.getpid()], lambda: sharded.write(
        entries(0, n), directory / "local", shards, compression=compression))
    return {"build_s": seconds, "peak_rss_mib": peaks[0]}


def build_sharded_dask(directory, args):
    import dask
    import dask.dataframe
    import distributed
    result = {}
    with dask.config.set({"dataframe.convert-string": False}):
        start = time.perf_counter()
        with distributed.LocalCluster(n_workers=args.workers,
                                      threads_per_worker=args.threads_per_worker,
                                      memory_limit=args.memory_limit, processes=True,
                                      dashboard_address=":0") as cluster, \
                distributed.Client(cluster) as client:
            result["cluster_start_s"] = time.perf_counter() - start
            rows = -(-args.n // args.partitions)
            frame = dask.dataframe.from_map(
                functools.partial(key_value_partition, rows=rows, n=args.n),
                range(args.partitions))
            worker_pids = sorted(client.run(os.getpid).values())
            result["build_s"], result["worker_peak_rss_mib"], manifest = timed_with_peak(
                worker_pids, lambda: sharded.write_dask(frame, directory / "dask", args.shards,
                                                        compression=args.compression))
            if args.phases:
                result["phases_s"] = dask_phases(frame, args.shards)
    result["shard_entries"] = [info.num_entries for info in manifest.shards]
    return result


def dask_phases(frame, shards):
    """Seconds to run the write_dask graph up to input, routing and shuffle (rows counted)."""
    from sparkey.sharded import dask_build
    columns = ["key", "value"]
    routed = frame.map_partitions(dask_build._route_partition, columns, shards, 1,
                                  meta=dask_build._routed_meta(frame, columns))
    by_shard = routed.set_index(dask_build.SHARD_COLUMN, divisions=list(range(shards + 1)))
    return {name: timed(lambda: collection.map_partitions(len).compute().sum())[0]
            for name, collection in (("input", frame), ("input+route", routed),
                                     ("input+route+shuffle", by_shard))}


def lookups(store, keys, repeat):
    get = store.get

    def scalar():
        for key in keys:
            get(key)

    return {"get_ns": best_of(repeat, scalar) / len(keys) * 1e9,
            "get_many_ns": best_of(repeat, lambda: store.get_many(keys)) / len(keys) * 1e9}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000, help="entries (default 10M)")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--partitions", type=int, default=16, help="input partitions (Dask)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads-per-worker", type=int, default=1)
    parser.add_argument("--memory-limit", default="2.5GiB", help="per worker")
    parser.add_argument("--compression", default="none")
    parser.add_argument("--lookups", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3, help="repeats of each lookup timing")
    parser.add_argument("--skip-dask", action="store_true")
    parser.add_argument("--phases", action="store_true",
                        help="also time the Dask graph up to each step")
    parser.add_argument("--dir", type=pathlib.Path, help="where to write (default: temp dir)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the results here")
    args = parser.parse_args(argv)

    results = {"n": args.n, "shards": args.shards, "partitions": args.partitions,
               "workers": args.workers, "threads_per_worker": args.threads_per_worker,
               "compression": args.compression, "python": platform.python_version(),
               "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d")}
    picks = np.random.default_rng(12345).integers(0, args.n, args.lookups).tolist()
    keys = [b"key_%d" % i for i in picks]
    with tempfile.TemporaryDirectory(prefix="sparkey-sharded-bench-", dir=args.dir) as directory:
        directory = pathlib.Path(directory)
        results["single"] = build_single(directory, args.n, args.compression)
        print(f"single writer: {results['single']['build_s']:.1f} s", flush=True)
        results["local"] = build_sharded_local(directory, args.n, args.shards, args.compression)
        print(f"sharded, in-process: {results['local']['build_s']:.1f} s", flush=True)
        if not args.skip_dask:
            results["dask"] = build_sharded_dask(directory, args)
            print(f"sharded, Dask: {results['dask']['build_s']:.1f} s", flush=True)
        with sparkey.open(directory / "single") as single:
            results["single_lookups"] = lookups(single, keys, args.repeat)
        results["open_sharded_s"], reader = timed(
            lambda: sparkey.open_sharded(directory / "local"))
        with reader:
            results["sharded_lookups"] = lookups(reader, keys, args.repeat)
            assert reader.get_many(keys[:1000]) == [b"value_" + key[4:] for key in keys[:1000]]
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


def report(results):
    print(f"\nsparkey sharded benchmark: n={results['n']:,} key_%d -> value_%d, "
          f"{results['shards']} shards, compression {results['compression']}, "
          f"Python {results['python']}, {results['cpus']} CPUs, {results['date']}")
    print(f"{'build':<44} {'seconds':>8} {'vs single':>9}  peak RSS MiB")
    single = results["single"]["build_s"]
    rows = [("single sparkey.Writer (peer)", results["single"]["build_s"],
             f"{results['single']['peak_rss_mib']:.0f}"),
            (f"sharded.write, in-process, S={results['shards']}", results["local"]["build_s"],
             f"{results['local']['peak_rss_mib']:.0f}")]
    if "dask" in results:
        dask_result = results["dask"]
        rows.append((f"write_dask, LocalCluster {results['workers']}x"
                     f"{results['threads_per_worker']} thread, S={results['shards']}",
                     dask_result["build_s"], " + ".join(
                         f"{mib:.0f}" for mib in dask_result["worker_peak_rss_mib"])))
    for name, seconds, peak in rows:
        print(f"{name:<44} {seconds:>8.1f} {seconds / single:>8.2f}x  {peak}")
    if "dask" in results:
        print(f"  (cluster start-up {dask_result['cluster_start_s']:.1f} s, not included; "
              f"{results['partitions']} input partitions; peak RSS per worker process)")
        for name, seconds in dask_result.get("phases_s", {}).items():
            print(f"  graph up to {name}: {seconds:.1f} s")
    print(f"{'lookups':<44} {'get ns':>8} {'get_many ns/key':>16}")
    for name, key in (("single store (peer)", "single_lookups"),
                      (f"open_sharded, S={results['shards']}", "sharded_lookups")):
        print(f"{name:<44} {results[key]['get_ns']:>8.0f} {results[key]['get_many_ns']:>16.0f}")
    print(f"open_sharded took {results['open_sharded_s'] * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
