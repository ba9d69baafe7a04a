"""``python -m experiments sparkey-bench``: the sparkey-java README's benchmark tables, in Python.

Three measurements, shaped like sparkey-java's JMH benchmarks and printed beside its published
figures (README, "Historical" tables: i7-7500U, JMH, one thread):

- lookups: a store of N entries ``key_<i> -> value_<i>`` (blocks of 1024 bytes when compressed),
  then random ``reader.get(key)`` calls, in ops/s, for N = 1K, 10K, ... up to ``max_n`` and
  compression NONE, SNAPPY, ZSTD. The keys are made before the clock starts (Java builds its
  string inside the timed call). Beside it, ``get_many`` over the same keys, which Java lacks.
- appends: ``put`` of a small (``key``/``value``) or medium (200-byte key and value) entry into
  an open log, in ops/s; the final flush is timed too.
- index build: ``write_index`` over an uncompressed log of N entries, ``method="memory"`` vs
  ``"sorting"``, in seconds per build (median of ``repeats``).

Each timed loop runs for at least ``seconds`` (default 1 s); the stores live in a temporary
directory that is removed afterwards.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from experiments.machine import describe_machine
from experiments.partial import keeping_partial

COMPRESSIONS = ("none", "snappy", "zstd")
INDEX_METHODS = ("memory", "sorting")
SIZES = (1_000, 10_000, 100_000, 1_000_000, 10_000_000)
BLOCK_SIZE = 1024
LOOKUP_KEYS = 100_000
MEDIUM_KEY = b" " * 197 + b"key"
MEDIUM_VALUE = b" " * 195 + b"value"
APPEND_ENTRIES = {"small": (b"key", b"value"), "medium": (MEDIUM_KEY, MEDIUM_VALUE)}

# sparkey-java README, historical JMH figures (ops/s; seconds per index build)
JAVA_LOOKUP_OPS = {
    ("none", 1_000): 4_768_851, ("none", 10_000): 4_404_571, ("none", 100_000): 3_892_022,
    ("none", 1_000_000): 2_748_649, ("none", 10_000_000): 1_921_539,
    ("snappy", 1_000): 776_223, ("snappy", 10_000): 707_242, ("snappy", 100_000): 651_858,
    ("snappy", 1_000_000): 791_849, ("snappy", 10_000_000): 700_438,
}
JAVA_APPEND_OPS = {("none", "medium"): 1_595_669, ("snappy", "medium"): 919_539,
                   ("none", "small"): 9_800_098, ("snappy", "small"): 20_227_223}
JAVA_INDEX_SECONDS = {
    ("memory", 1_000): 0.003, ("memory", 10_000): 0.009, ("memory", 100_000): 0.035,
    ("memory", 1_000_000): 0.273, ("memory", 10_000_000): 4.862,
    ("sorting", 1_000): 0.005, ("sorting", 10_000): 0.014, ("sorting", 100_000): 0.070,
    ("sorting", 1_000_000): 0.835, ("sorting", 10_000_000): 13.919,
}


def write_store(base: Path, n: int, compression: str, *, index: bool = True) -> float:
    """Write ``key_<i> -> value_<i>`` for i < n; return the seconds the puts took."""
    import sparkey

    log = sparkey.LogWriter(base.with_suffix(".spl"), compression=compression,
                            block_size=BLOCK_SIZE)
    started = time.perf_counter()
    put = log.put
    for i in range(n):
        put(b"key_%d" % i, b"value_%d" % i)
    log.close()
    seconds = time.perf_counter() - started
    if index:
        sparkey.write_index(base.with_suffix(".spi"), base.with_suffix(".spl"))
    return seconds


def _rate(run_once, count: int, min_seconds: float) -> float:
    """Operations per second of ``run_once()`` (``count`` operations), run for ``min_seconds``."""
    done, elapsed = 0, 0.0
    while elapsed < min_seconds:
        started = time.perf_counter()
        run_once()
        elapsed += time.perf_counter() - started
        done += count
    return done / elapsed


def bench_lookups(base: Path, n: int, min_seconds: float, seed: int = 891273791623) -> dict:
    """Random scalar ``get`` and batched ``get_many`` rates over the store at ``base``."""
    import sparkey

    rng = np.random.default_rng(seed)
    keys = [b"key_%d" % i for i in rng.integers(0, n, LOOKUP_KEYS).tolist()]
    with sparkey.open(base.with_suffix(".spi")) as reader:
        get = reader.get

        def scalar():
            for key in keys:
                get(key)

        expected = b"value_" + keys[0][4:]
        if get(keys[0]) != expected or reader.get_many(keys[:1]) != [expected]:
            raise RuntimeError(f"the store at {base} does not return {expected!r} for {keys[0]!r}")
        return {"get_ops": _rate(scalar, len(keys), min_seconds),
                "get_many_ops": _rate(lambda: reader.get_many(keys), len(keys), min_seconds)}


def bench_append(path: Path, size: str, compression: str, min_seconds: float) -> float:
    """Appends per second of one entry of ``size`` (``small``/``medium``), flush included."""
    import sparkey

    key, value = APPEND_ENTRIES[size]
    batch = 100_000
    log = sparkey.LogWriter(path, compression=compression, block_size=BLOCK_SIZE)
    try:
        put = log.put

        def append_batch():
            for _ in range(batch):
                put(key, value)
            log.flush()

        return _rate(append_batch, batch, min_seconds)
    finally:
        log.close()
        path.unlink()


def bench_index_build(base: Path, method: str, repeats: int) -> float:
    """Median seconds of ``write_index(method=...)`` over the log at ``base``."""
    import sparkey

    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        sparkey.write_index(base.with_suffix(".spi"), base.with_suffix(".spl"), method=method)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def run_sparkey_bench(max_n: int, min_seconds: float, repeats: int, *, progress=print) -> dict:
    """All three tables for N up to ``max_n``; returns the results document, with what was
    measured when a Ctrl-C or a failure ends the run (:mod:`experiments.partial`)."""
    sizes = [n for n in SIZES if n <= max_n]
    document = {"experiment": "sparkey-bench", "machine": describe_machine(),
                "config": {"max_n": max_n, "min_seconds": min_seconds, "repeats": repeats,
                           "block_size": BLOCK_SIZE, "lookup_keys": LOOKUP_KEYS},
                "lookups": [], "appends": [], "index_builds": []}
    with keeping_partial(document, progress) as progress:
        with tempfile.TemporaryDirectory(prefix="sparkey-bench-") as workdir:
            workdir = Path(workdir)
            for size in APPEND_ENTRIES:
                for compression in COMPRESSIONS:
                    progress(f"appends: {size} entries, {compression}")
                    ops = bench_append(workdir / "append.spl", size, compression, min_seconds)
                    document["appends"].append({
                        "size": size, "compression": compression, "ops_per_second": ops,
                        "java_ops_per_second": JAVA_APPEND_OPS.get((compression, size))})
            for n in sizes:
                for compression in COMPRESSIONS:
                    base = workdir / f"lookup-{compression}-{n}"
                    progress(f"lookups: N={n:,}, {compression}")
                    put_seconds = write_store(base, n, compression, index=compression != "none")
                    if compression == "none":  # the uncompressed log also serves the index builds
                        for method in INDEX_METHODS:
                            progress(f"index build: N={n:,}, {method}")
                            seconds = bench_index_build(base, method,
                                                        repeats if n < 10_000_000 else 1)
                            document["index_builds"].append({
                                "n": n, "method": method, "seconds": seconds,
                                "java_seconds": JAVA_INDEX_SECONDS.get((method, n))})
                    rates = bench_lookups(base, n, min_seconds)
                    document["lookups"].append({
                        "n": n, "compression": compression, "put_seconds": put_seconds,
                        "log_bytes": base.with_suffix(".spl").stat().st_size,
                        "index_bytes": base.with_suffix(".spi").stat().st_size,
                        "get_ops_per_second": rates["get_ops"],
                        "get_many_ops_per_second": rates["get_many_ops"],
                        "java_ops_per_second": JAVA_LOOKUP_OPS.get((compression, n))})
                    for path in (base.with_suffix(".spl"), base.with_suffix(".spi")):
                        path.unlink()
    return document
