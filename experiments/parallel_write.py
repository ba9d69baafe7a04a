"""``python -m experiments parallel-write``: the fast-avro-write table for Sparkey, in Python.

The seed (fast-avro-write) wrote 100K-1M StockQuote records to an Avro file, sequentially and
with p worker threads, and published min and max of 10 runs. Here the same records
(:mod:`experiments.quotes`) are written to a Sparkey log, timed from the record batch to the
flushed log, for every codec:

- ``put loop``: the batch encoded with numpy into keys and values, then ``LogWriter.put`` per
  record (the scalar API);
- ``p=1``: ``LogWriter.put_many`` with lazy key/value columns and ``parallelism=1``, the best
  sequential path (same encoding and framing, in the calling thread);
- ``p=2``, ``p=4``: the same call with 2 or 4 worker threads;
- ``objects`` (smallest size only): records as Python tuples, encoded one by one in Python
  (struct + str.encode) and put one by one, which is what a plain Python port would do.

Runs are interleaved (round r times every variant once), so load changes on a shared machine
hit every variant alike; the machine's load average is recorded beside each figure. All
variants must write identical files (checked by hash). Speedup = min(p=1) / min(p=k).

Also measured, for docs/parallel-writes.md: whether each compressor releases the GIL (two
threads vs one on the same 4 KiB blocks, and how far a pure-Python thread gets during one long
call), the same chunk work on threads vs processes (pickled input, or input inherited by fork),
and ``TreeMap.update`` of sorted int64 arrays with ``parallelism`` 1, 2, 4.
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import multiprocessing
import os
import tempfile
import threading
import time
import zlib
from pathlib import Path

import numpy as np

from experiments.machine import describe_machine, machine_line
from experiments.partial import keeping_partial
from experiments.quotes import QuoteKeys, QuoteValues, encode_quote, make_quotes, quote_key

SIZES = (100_000, 200_000, 500_000, 1_000_000)
CODECS = ("none", "snappy", "zstd")
PARALLELISM = (2, 4)
BLOCK_SIZE = 4096
PROBE_BLOCKS = 2048
PROBE_CALL_BYTES = 256 << 20
MECHANISM_CHUNK_ROWS = 8192  # about put_many's 4 MiB chunks

# fast-avro-write README: ms, min and max of 10 runs, i7-4650U (2 cores, 4 threads), snappy
SEED_MS = {
    100_000: {"standard": (490, 530), "p4": (306, 562), "p6": (284, 316), "p8": (286, 365)},
    200_000: {"standard": (981, 1097), "p4": (545, 783), "p6": (586, 777), "p8": (570, 692)},
    500_000: {"standard": (2534, 2755), "p4": (1313, 1607), "p6": (1365, 1402),
              "p8": (1443, 1575)},
    1_000_000: {"standard": (5079, 5322), "p4": (2571, 2820), "p6": (2816, 2984),
                "p8": (2853, 2948)},
}


def _load() -> float:
    return os.getloadavg()[0]


def _busy_cpu_seconds() -> float | None:
    """CPU seconds all processors have spent busy since boot (None without /proc/stat)."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(field) for field in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # minus idle, iowait


def _own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


class _Timed:
    """Wall seconds of a block, and the cores other processes kept busy meanwhile.

    On a shared machine the second figure says whether a parallel run had the cores it asked
    for; the load average cannot, being a one-minute mean. ``others_cores`` is None where
    /proc/stat is missing, and has the kernel's tick resolution (10 ms of CPU).
    """

    def __enter__(self):
        self._busy, self._own = _busy_cpu_seconds(), _own_cpu_seconds()
        self._started = time.perf_counter()
        return self

    def __exit__(self, *exc_info):
        self.seconds = time.perf_counter() - self._started
        busy = _busy_cpu_seconds()
        self.others_cores = None
        if busy is not None and self._busy is not None:
            others = (busy - self._busy) - (_own_cpu_seconds() - self._own)
            self.others_cores = min(float(os.cpu_count() or 1), max(0.0, others / self.seconds))


def wait_for_idle(max_seconds: float, *, busy_cores: float = 0.3, sample: float = 0.5) -> None:
    """Wait (at most ``max_seconds``) until other processes use under ``busy_cores`` cores."""
    deadline = time.perf_counter() + max_seconds
    while time.perf_counter() < deadline:
        with _Timed() as idle:
            time.sleep(sample)
        if idle.others_cores is None or idle.others_cores < busy_cores:
            return


def _digest(path: Path) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def write_log(quotes: np.ndarray, path: Path, codec: str, variant: str,
              block_size: int = BLOCK_SIZE, objects: list | None = None,
              threshold: int | None = None) -> _Timed:
    """Write ``quotes`` as a flushed Sparkey log at ``path`` with ``variant``; its timing."""
    import sparkey

    with _Timed() as timed, sparkey.LogWriter(path, codec, block_size, file_identifier=1) as log:
        if variant == "objects":
            put = log.put
            for record in objects:
                put(quote_key(record), encode_quote(record))
        elif variant == "put loop":
            keys, values = QuoteKeys(quotes), QuoteValues(quotes)
            put = log.put
            for key, value in zip(keys.pack(0, len(keys)), values.pack(0, len(values))):
                put(key, value)
        else:
            options = {} if threshold is None else {"threshold": threshold}
            log.put_many(QuoteKeys(quotes), QuoteValues(quotes),
                         parallelism=int(variant.removeprefix("p=")), **options)
        log.flush()
    return timed


def _cell(runs: list[_Timed], loads: list[float]) -> dict:
    """min and max seconds of a cell, with the others' cores during its fastest run."""
    seconds = [run.seconds for run in runs]
    fastest = runs[seconds.index(min(seconds))]
    return {"seconds": seconds, "min_seconds": min(seconds), "max_seconds": max(seconds),
            "others_cores": [run.others_cores for run in runs],
            "others_cores_at_min": fastest.others_cores, "max_load": max(loads)}


def _time_variants(quotes, codec, variants, runs, workdir, objects, progress,
                   wait_idle=0.0, block_size=BLOCK_SIZE, threshold=None) -> list[dict]:
    """Interleaved runs of every variant on one batch; checks that the files are identical.
    Each run first waits up to ``wait_idle`` seconds for the other processes to go quiet."""
    cells = {variant: {"runs": [], "loads": []} for variant in variants}
    digests, log_bytes = {}, None
    for run in range(runs):
        for variant in variants:
            path = workdir / "quotes.spl"
            wait_for_idle(wait_idle)
            load = _load()
            cells[variant]["runs"].append(write_log(quotes, path, codec, variant, block_size,
                                                    objects=objects, threshold=threshold))
            cells[variant]["loads"].append(max(load, _load()))
            if run == 0:
                digests[variant] = _digest(path)
                log_bytes = path.stat().st_size
            path.unlink()
        progress(f"  {len(quotes):,} records, {codec}, run {run + 1}/{runs}")
    if len(set(digests.values())) != 1:
        raise RuntimeError(f"{codec} logs of {len(quotes):,} records differ between variants: "
                           f"{digests}")
    return [{"records": len(quotes), "codec": codec, "variant": variant, "log_bytes": log_bytes,
             **_cell(cell["runs"], cell["loads"])} for variant, cell in cells.items()]


def bench_treemap(quotes: np.ndarray, parallelisms, runs: int, wait_idle=0.0) -> list[dict]:
    """``TreeMap.put_many(timestamps, volumes, parallelism=p)`` into an empty zstd map."""
    from offheap.treemap.treemap import TreeMap

    keys, values = quotes["timestamp"].copy(), quotes["volume"].copy()
    cells = {p: {"runs": [], "loads": []} for p in parallelisms}
    for _ in range(runs):
        for parallelism in parallelisms:
            with TreeMap(key="int64", value="int64", compression="zstd") as tree:
                wait_for_idle(wait_idle)
                load = _load()
                with _Timed() as timed:
                    tree.put_many(keys, values, parallelism=parallelism)
                cells[parallelism]["runs"].append(timed)
                cells[parallelism]["loads"].append(max(load, _load()))
    return [{"records": len(keys), "parallelism": p, **_cell(cell["runs"], cell["loads"])}
            for p, cell in cells.items()]


# -- does the GIL get released? -----------------------------------------------------------------

def _compressors():
    import snappy
    import zstandard

    return {
        "snappy": lambda: snappy.compress,
        "zstd": lambda: zstandard.ZstdCompressor(level=3, write_content_size=True).compress,
        "zlib": lambda: (lambda block: zlib.compress(block, 1)),
    }


def _threads_seconds(make, parts, repeats=3) -> float:
    """Best wall time of one thread per part, each with its own compressor."""
    best = float("inf")
    for _ in range(repeats):
        def work(blocks):
            compress = make()
            for block in blocks:
                compress(block)
        threads = [threading.Thread(target=work, args=(part,)) for part in parts]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        best = min(best, time.perf_counter() - started)
    return best


def _progress_during(call) -> float:
    """Iterations per second a pure-Python thread makes while ``call()`` runs in this one."""
    stop = threading.Event()
    count = [0]

    def counter():
        while not stop.is_set():
            count[0] += 1

    thread = threading.Thread(target=counter)
    thread.start()
    while not count[0]:
        time.sleep(0.001)
    before, started = count[0], time.perf_counter()
    call()
    after, elapsed = count[0], time.perf_counter() - started
    stop.set()
    thread.join()
    return (after - before) / elapsed


def _best_progress(call, repeats=3) -> float:
    """The most progress of a Python thread over ``repeats`` calls (the least disturbed one)."""
    return max(_progress_during(call) for _ in range(repeats))


def gil_probe(stream: bytes, call_bytes: int = PROBE_CALL_BYTES) -> dict:
    """Per compressor: two threads vs one on 4 KiB blocks, and a Python thread's progress during
    one long call relative to its progress while this thread sleeps (~1: the GIL is released
    for the call; ~0: held). ``bytes.count`` is the control that holds the GIL."""
    blocks = [stream[i:i + BLOCK_SIZE] for i in range(0, len(stream), BLOCK_SIZE)][:PROBE_BLOCKS]
    large = stream * max(1, call_bytes // len(stream))  # calls long beside a 5 ms switch
    idle = _best_progress(lambda: time.sleep(0.1))
    results = {}
    calls = {}
    for name, make in _compressors().items():
        one = _threads_seconds(make, [blocks])
        two = _threads_seconds(make, [blocks[0::2], blocks[1::2]])
        compress = make()
        results[name] = {"one_thread_seconds": one, "two_threads_seconds": two,
                         "two_thread_speedup": one / two}
        calls[name] = functools.partial(compress, large)
    array = np.frombuffer(large, dtype=np.uint8)
    calls["numpy copy"] = array.copy
    calls["bytes.count (holds the GIL)"] = functools.partial(large.count, b"\xff\xfe\xfd")
    progress = {name: _best_progress(call) for name, call in calls.items()}
    idle = max(idle, _best_progress(lambda: time.sleep(0.1)))  # the steadier of two baselines
    for name, rate in progress.items():
        results.setdefault(name, {})["progress_during_call"] = rate / idle
    results["load"] = _load()
    return results


def _python_loop(iterations: int = 3_000_000) -> None:
    total = 0
    for i in range(iterations):
        total += i


def machine_ceiling(runs: int, wait_idle: float = 0.0) -> dict:
    """Throughput of two processes running a pure-Python loop, relative to one: what two
    workers can gain at most on this machine (about 2 on two idle cores)."""
    fork = multiprocessing.get_context("fork")
    best = {}
    for _ in range(runs):
        for processes in (1, 2):
            wait_for_idle(wait_idle)
            with _Timed() as timed:
                workers = [fork.Process(target=_python_loop) for _ in range(processes)]
                for worker in workers:
                    worker.start()
                for worker in workers:
                    worker.join()
            best[processes] = min(best.get(processes, float("inf")), timed.seconds)
    return {"one_process_seconds": best[1], "two_processes_seconds": best[2],
            "throughput_ratio": 2 * best[1] / best[2], "load": _load()}


# -- threads or processes? ----------------------------------------------------------------------

_MECHANISM_QUOTES: np.ndarray | None = None


def _encode_chunk(quotes: np.ndarray) -> bytes:
    """The per-chunk work of put_many (encode, frame, zstd 4 KiB blocks), self-contained."""
    from sparkey.codec import codec_for
    from sparkey.format import Compression
    from sparkey.log.bulk import compress_blocks
    from sparkey.log.framing import frame_puts

    stream = frame_puts(QuoteKeys(quotes).pack(0, len(quotes)),
                        QuoteValues(quotes).pack(0, len(quotes))).stream
    view = memoryview(stream)
    blocks = [view[i:i + BLOCK_SIZE] for i in range(0, len(view), BLOCK_SIZE)]
    return b"".join(compress_blocks(codec_for(Compression.ZSTD), blocks))


def _encode_inherited_chunk(i: int) -> bytes:
    rows = MECHANISM_CHUNK_ROWS
    return _encode_chunk(_MECHANISM_QUOTES[i * rows:(i + 1) * rows])


def bench_mechanisms(quotes: np.ndarray, workers: int, runs: int) -> dict:
    """The chunk work of put_many for ``quotes`` (zstd), serial and on ``workers`` threads,
    processes fed pickled chunks, and forked processes that inherit the batch."""
    global _MECHANISM_QUOTES
    from offheap.treemap.forkpool import encode_in_workers

    rows = MECHANISM_CHUNK_ROWS
    chunks = [quotes[i:i + rows] for i in range(0, len(quotes), rows)]
    fork = multiprocessing.get_context("fork")

    def serial():
        return [_encode_chunk(chunk) for chunk in chunks]

    def threads():
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            return list(pool.map(_encode_chunk, chunks))

    def pickled_processes():
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=fork) as pool:
            return list(pool.map(_encode_chunk, chunks))

    def forked_processes():
        return list(encode_in_workers(_encode_inherited_chunk, len(chunks), workers))

    _MECHANISM_QUOTES = quotes
    try:
        expected = serial()
        results = {}
        for name, run in (("serial", serial), ("threads", threads),
                          ("processes, pickled input", pickled_processes),
                          ("processes, input inherited by fork", forked_processes)):
            seconds = []
            for _ in range(runs):
                started = time.perf_counter()
                output = run()
                seconds.append(time.perf_counter() - started)
            if output != expected:
                raise RuntimeError(f"{name} produced other bytes than the serial run")
            results[name] = {"min_seconds": min(seconds), "max_seconds": max(seconds)}
    finally:
        _MECHANISM_QUOTES = None
    for cell in results.values():
        cell["speedup"] = results["serial"]["min_seconds"] / cell["min_seconds"]
    return {"records": len(quotes), "workers": workers, "codec": "zstd", "results": results,
            "load": _load()}


def bench_steps(quotes: np.ndarray, runs: int, wait_idle: float = 0.0) -> dict:
    """Each step of put_many's chunk work on one thread, then split between two threads.

    A step whose two-thread speedup stays near 1 holds the GIL (or hands it back and forth
    too often); the steps are timed apart so the table shows which one limits put_many.
    """
    from sparkey.codec import codec_for
    from sparkey.format import Compression
    from sparkey.log.bulk import compress_blocks
    from sparkey.log.framing import frame_puts

    rows = MECHANISM_CHUNK_ROWS
    bounds = [(start, min(len(quotes), start + rows)) for start in range(0, len(quotes), rows)]
    keys, values = QuoteKeys(quotes), QuoteValues(quotes)
    packed = [(keys.pack(a, b), values.pack(a, b)) for a, b in bounds]
    streams = [memoryview(frame_puts(*pair).stream) for pair in packed]
    blocks = [[view[i:i + BLOCK_SIZE] for i in range(0, len(view), BLOCK_SIZE)] for view in streams]
    snappy, zstd = codec_for(Compression.SNAPPY), codec_for(Compression.ZSTD)
    steps = {
        "encode records (pack keys and values)": (
            lambda part: [(keys.pack(a, b), values.pack(a, b)) for a, b in part], bounds),
        "frame entries": (lambda part: [frame_puts(*pair) for pair in part], packed),
        "snappy, one call per 4 KiB block": (
            lambda part: [compress_blocks(snappy, chunk) for chunk in part], blocks),
        "zstd, one call per chunk": (
            lambda part: [compress_blocks(zstd, chunk) for chunk in part], blocks),
    }
    results = {}
    for name, (work, items) in steps.items():
        seconds = {1: [], 2: []}
        for _ in range(runs):
            for threads in (1, 2):
                parts = [items[i::threads] for i in range(threads)]
                wait_for_idle(wait_idle)
                with _Timed() as timed:
                    workers = [threading.Thread(target=work, args=(part,)) for part in parts]
                    for worker in workers:
                        worker.start()
                    for worker in workers:
                        worker.join()
                seconds[threads].append(timed.seconds)
        results[name] = {"one_thread_seconds": min(seconds[1]),
                         "two_threads_seconds": min(seconds[2]),
                         "speedup": min(seconds[1]) / min(seconds[2])}
    return {"records": len(quotes), "chunk_rows": rows, "results": results, "load": _load()}


# -- the run ------------------------------------------------------------------------------------

def run_parallel_write(sizes, codecs, parallelisms, runs: int, *, treemap: bool = True,
                       probes: bool = True, wait_idle: float = 0.0,
                       block_size: int = BLOCK_SIZE, threshold: int | None = None,
                       chunk_bytes: int | None = None, progress=print) -> dict:
    """Every table for ``sizes``; returns the results document. ``wait_idle``: seconds each
    run may wait for other processes to leave the CPUs (0: do not wait); ``threshold`` is
    put_many's (None: its default); ``chunk_bytes`` replaces put_many's chunk size for the
    run (a tuning experiment; None: the default). A Ctrl-C or a failure ends the run with
    what was measured (:mod:`experiments.partial`)."""
    from sparkey.log import bulk

    default_chunk = bulk.TARGET_CHUNK_BYTES
    bulk.TARGET_CHUNK_BYTES = chunk_bytes or default_chunk
    document = {"experiment": "parallel-write", "machine": describe_machine(),
                "config": {"sizes": list(sizes), "codecs": list(codecs), "runs": runs,
                           "parallelism": list(parallelisms), "block_size": block_size,
                           "cpu_count": os.cpu_count(), "wait_idle_seconds": wait_idle,
                           "threshold": threshold, "chunk_bytes": bulk.TARGET_CHUNK_BYTES},
                "writes": [], "treemap": [], "seed_ms": SEED_MS}
    try:
        with keeping_partial(document, progress) as progress:
            _run(document, sizes, codecs, parallelisms, runs, treemap, probes, wait_idle,
                 block_size, threshold, progress)
    finally:
        bulk.TARGET_CHUNK_BYTES = default_chunk
    return document


def _run(document, sizes, codecs, parallelisms, runs, treemap, probes, wait_idle, block_size,
         threshold, progress) -> None:
    """Fill ``document`` with every table, in turn."""
    variants = ["put loop", "p=1", *[f"p={p}" for p in parallelisms]]
    largest = make_quotes(max(sizes))
    with tempfile.TemporaryDirectory(prefix="parallel-write-") as workdir:
        workdir = Path(workdir)
        for size in sorted(sizes):
            quotes = largest[:size]
            smallest = size == min(sizes)
            objects = quotes.tolist() if smallest else None  # built before the clock, as in the seed
            for codec in codecs:
                progress(f"writing {size:,} quotes, {codec}")
                document["writes"] += _time_variants(
                    quotes, codec, ["objects", *variants] if smallest else variants, runs,
                    workdir, objects, progress, wait_idle, block_size, threshold)
            del objects
            if treemap:
                progress(f"TreeMap.update of {size:,} timestamps")
                document["treemap"] += bench_treemap(quotes, [1, *parallelisms], runs, wait_idle)
        if probes:
            from sparkey.log.framing import frame_puts

            progress("machine ceiling")
            document["ceiling"] = machine_ceiling(runs, wait_idle)
            progress("GIL probe")
            sample = largest[:20_000]
            stream = frame_puts(QuoteKeys(sample).pack(0, len(sample)),
                                QuoteValues(sample).pack(0, len(sample))).stream.tobytes()
            document["gil"] = gil_probe(stream)
            progress("threads vs processes")
            document["mechanisms"] = bench_mechanisms(largest[:min(sizes)], 2, runs)
            progress("the steps of put_many on two threads")
            document["steps"] = bench_steps(largest[:min(sizes)], runs, wait_idle)


# -- tables -------------------------------------------------------------------------------------

def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f}"


def _others(cells: dict, variants: list[str]) -> str:
    """Cores other processes used during the fastest run of each of ``variants``."""
    figures = [cells[v]["others_cores_at_min"] for v in variants]
    return "/".join("-" if f is None else f"{f:.1f}" for f in figures)


def parallel_write_tables(document: dict, *, markdown: bool = False) -> str:
    """The write table per codec (ms, min and max), speedups, and the probes."""
    from experiments.report import format_table

    config = document["config"]
    writes = document["writes"]
    parallel = [f"p={p}" for p in config["parallelism"]]
    chunk = config.get("chunk_bytes")
    lines = [f"Sparkey log of N StockQuote records, block {config['block_size']} B, "
             + (f"put_many chunks of {chunk / (1 << 20):g} MiB, " if chunk else "")
             + (f"threshold {config['threshold']:,}, " if config.get("threshold") is not None
                else "")
             + f"min and max of {config['runs']} runs in ms ({machine_line(document['machine'])})",
             "others' cores: CPU other processes used during the fastest p=1, "
             + ", ".join(parallel) + " runs (of " + str(config.get("cpu_count")) + " cores)"]
    for codec in config["codecs"]:
        headers = ["records", "put loop", "p=1", *parallel, *[f"{v} speedup" for v in parallel],
                   "p=1 vs loop", "log MB", "others' cores", "max load"]
        rows = []
        for size in config["sizes"]:
            cells = {r["variant"]: r for r in writes if r["records"] == size and r["codec"] == codec}
            if not cells:
                continue
            base = cells["p=1"]["min_seconds"]
            row = [f"{size:,}"]
            row += [f"{_ms(cells[v]['min_seconds'])}-{_ms(cells[v]['max_seconds'])}"
                    for v in ["put loop", "p=1", *parallel]]
            row += [f"{base / cells[v]['min_seconds']:.2f}x" for v in parallel]
            row.append(f"{cells['put loop']['min_seconds'] / base:.2f}x")
            row.append(f"{cells['p=1']['log_bytes'] / 1e6:.1f}")
            row.append(_others(cells, ["p=1", *parallel]))
            row.append(f"{max(c['max_load'] for c in cells.values()):.1f}")
            rows.append(row)
        lines += ["", f"{codec}:", format_table(headers, rows, markdown=markdown)]
    objects = [r for r in writes if r["variant"] == "objects"]
    if objects:
        rows = [[r["codec"], f"{r['records']:,}", f"{_ms(r['min_seconds'])}-{_ms(r['max_seconds'])}",
                 f"{r['min_seconds'] / r['records'] * 1e6:.2f}"] for r in objects]
        lines += ["", "Python objects encoded and put one by one:",
                  format_table(["codec", "records", "ms", "us/record"], rows, markdown=markdown)]
    if document["treemap"]:
        base = {r["records"]: r["min_seconds"] for r in document["treemap"] if r["parallelism"] == 1}
        rows = [[f"{r['records']:,}", f"p={r['parallelism']}",
                 f"{_ms(r['min_seconds'])}-{_ms(r['max_seconds'])}",
                 f"{base[r['records']] / r['min_seconds']:.2f}x",
                 _others({"": r}, [""]), f"{r['max_load']:.1f}"]
                for r in document["treemap"]]
        lines += ["", "TreeMap.put_many(timestamps, volumes, parallelism=p), zstd pages, ms:",
                  format_table(["records", "p", "ms", "speedup", "others' cores", "max load"],
                               rows, markdown=markdown)]
    seed_rows = [[f"{size:,}", f"{v['standard'][0]}-{v['standard'][1]}",
                  f"{v['p4'][0]}-{v['p4'][1]}",
                  f"{v['standard'][0] / min(v[p][0] for p in ('p4', 'p6', 'p8')):.2f}x"]
                 for size, v in sorted((int(k), v) for k, v in document["seed_ms"].items())]
    lines += ["", "fast-avro-write (seed, Avro + snappy, i7-4650U), ms:",
              format_table(["records", "standard", "fast p=4", "best speedup"], seed_rows,
                           markdown=markdown)]
    if "ceiling" in document:
        ceiling = document["ceiling"]
        lines += ["", f"Machine ceiling: two processes running a Python loop get "
                      f"{ceiling['throughput_ratio']:.2f}x the throughput of one "
                      f"(load {ceiling['load']:.1f})"]
    if "gil" in document:
        rows = [[name, f"{cell['two_thread_speedup']:.2f}x" if "two_thread_speedup" in cell else "-",
                 f"{cell['progress_during_call']:.2f}"]
                for name, cell in document["gil"].items() if name != "load"]
        lines += ["", f"GIL probe (load {document['gil']['load']:.1f}): two threads vs one on "
                      f"4 KiB blocks; a Python thread's progress during one long call (1 = GIL "
                      f"released, 0 = held)",
                  format_table(["call", "2 threads", "progress"], rows, markdown=markdown)]
    if "mechanisms" in document:
        mechanisms = document["mechanisms"]
        rows = [[name, f"{_ms(cell['min_seconds'])}-{_ms(cell['max_seconds'])}",
                 f"{cell['speedup']:.2f}x"] for name, cell in mechanisms["results"].items()]
        lines += ["", f"put_many's chunk work for {mechanisms['records']:,} records (zstd) on "
                      f"{mechanisms['workers']} workers (load {mechanisms['load']:.1f}), ms:",
                  format_table(["mechanism", "ms", "speedup"], rows, markdown=markdown)]
    if "steps" in document:
        steps = document["steps"]
        rows = [[name, _ms(cell["one_thread_seconds"]), _ms(cell["two_threads_seconds"]),
                 f"{cell['speedup']:.2f}x"] for name, cell in steps["results"].items()]
        lines += ["", f"Each step of put_many for {steps['records']:,} records, chunks of "
                      f"{steps['chunk_rows']:,} rows, on 1 and 2 threads (load {steps['load']:.1f}), "
                      f"ms:",
                  format_table(["step", "1 thread", "2 threads", "speedup"], rows,
                               markdown=markdown)]
    return "\n".join(lines)
