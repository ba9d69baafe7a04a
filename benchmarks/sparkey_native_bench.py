"""sparkey._native against the pure-Python reader and writer, on 1M ``key_%d`` -> ``value_%d``.

Run from the repository root after ``python setup.py build_ext --inplace``:

    python benchmarks/sparkey_native_bench.py --n 1000000

Every figure is the minimum of --repeat runs (wall time, CPU time of the process in
parentheses), and the load average is printed before and after: the machine is shared.

* lookups: ns per lookup of existing keys in random order, ``reader.get(k)``, ``reader[k]``,
  ``k in reader`` and ``get_many`` per key, on the compiled core and on the reference opened
  side by side in the same run; ``get`` of keys in log order (the Lookup's last-block cache);
  compressed stores also time the codec alone on random blocks.
* the C floor of those lookups (sparkey_lookup_floor.c, compiled here with the C compiler
  Python was built with): the compiled Lookup called from a C loop for the same keys, free
  running and fenced (each lookup waits for the previous one, as between two Python calls),
  ``contains`` alike, and the hash alone; beside them ``reader.get(k)`` with the value dropped
  (a ``for`` loop), the Python figure that compares with them.
* write + index: ``Writer.put_many`` then ``close()`` (log, then the canonical index), on the
  compiled core and on the Python reference; both files are checked byte for byte.
* put_many on 1 and 2 threads of 300K pre-encoded ``bytes`` entries (pairs, and two list
  columns), zstd and snappy: the speed-up of framing with the GIL released.
"""

import argparse
import ctypes
import os
import pathlib
import random
import shlex
import subprocess
import sys
import sysconfig
import tempfile


sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sparkey  # noqa: E402  (after the path set-up for standalone runs)
from sparkey import native  # noqa: E402
from sparkey.codec import codec_for  # noqa: E402
from sparkey_bench import best_of  # noqa: E402  (beside this script)


def show(label, times, count=1, unit="ns"):
    scale = 1e9 / count if unit == "ns" else 1.0
    print(f"  {label:<44} {times[0] * scale:>10.{0 if unit == 'ns' else 3}f} {unit}"
          f"  ({times[1] * scale:.{0 if unit == 'ns' else 3}f})")


def bench_lookups(directory, compression, keys, values, lookups, repeat):
    """Reader lookups on the compiled core and on the reference, opened side by side."""
    base = pathlib.Path(directory) / f"native_{compression}"
    with sparkey.Writer(base, compression=compression) as writer:
        writer.put_many(keys, values)
    wanted = [b"key_%d" % random.randrange(len(keys)) for _ in range(lookups)]
    in_log_order = keys[:lookups]
    print(f"{compression.upper()}: {len(keys)} entries, {lookups} random lookups")
    with sparkey.open(base) as fast, on_reference(lambda: sparkey.open(base)) as pure:
        assert fast.get_many(wanted[:1000]) == pure.get_many(wanted[:1000])
        for label, reader in (("compiled", fast), ("reference", pure)):
            get = reader.get
            show(f"{label}: reader.get(k)", best_of(repeat, lambda: [get(k) for k in wanted]),
                 lookups)
            show(f"{label}: reader[k]", best_of(repeat, lambda: [reader[k] for k in wanted]),
                 lookups)
            show(f"{label}: k in reader", best_of(repeat, lambda: [k in reader for k in wanted]),
                 lookups)
            show(f"{label}: reader.get_many, per key",
                 best_of(repeat, lambda: reader.get_many(wanted)), lookups)
        get = fast.get
        show("compiled: reader.get(k), keys in log order",
             best_of(repeat, lambda: [get(k) for k in in_log_order]), len(in_log_order))
        show("the loop alone", best_of(repeat, lambda: [k for k in wanted]), lookups)
        bench_floor(directory, fast, wanted, repeat)
        if compression != "none":
            header = fast.log_header
            codec = codec_for(header.compression_type)
            with sparkey.LogReader(base.with_suffix(".spl")) as log:
                payloads = [log.mapping[start:stop] for start, stop in block_payloads(log)]
            chosen = [random.choice(payloads) for _ in range(lookups)]
            block_size = header.compression_block_size
            show("codec.decompress of a random block",
                 best_of(repeat, lambda: [codec.decompress(p, block_size) for p in chosen]),
                 lookups)
            if hasattr(codec, "raw_decompress"):
                raw = codec.raw_decompress
                show("codec.raw_decompress of a random block",
                     best_of(repeat, lambda: [raw(p) for p in chosen]), lookups)


def bench_floor(directory, reader, wanted, repeat):
    """The compiled Lookup of ``reader`` called from a C loop (sparkey_lookup_floor.c)."""
    floor = build_floor(directory)
    if floor is None:
        return
    core = ctypes.CDLL(native.module.__file__)  # the loaded extension: its own functions
    lookup_value = ctypes.cast(core.sparkey_lookup_value, ctypes.c_void_p)
    lookup, header = reader._index.native, reader.index_header

    def loop(found_only, fenced):
        return lambda: floor.lookup_loop(lookup_value, lookup, wanted, found_only, fenced)
    assert loop(0, 0)() == loop(1, 0)() == len(wanted)
    get = reader.get

    def dropped():
        for key in wanted:
            get(key)
    show("compiled: reader.get(k), value dropped", best_of(repeat, dropped), len(wanted))
    show("C loop: Lookup get, value dropped", best_of(repeat, loop(0, 0)), len(wanted))
    if floor.can_fence():
        show("C loop: Lookup get, fenced", best_of(repeat, loop(0, 1)), len(wanted))
    show("C loop: Lookup contains", best_of(repeat, loop(1, 0)), len(wanted))
    if floor.can_fence():
        show("C loop: Lookup contains, fenced", best_of(repeat, loop(1, 1)), len(wanted))
    hash_key = ctypes.cast(core.sparkey_hash, ctypes.c_void_p)
    show("C loop: the hash alone", best_of(repeat, lambda: floor.hash_loop(
        hash_key, wanted, header.hash_seed, header.hash_size)), len(wanted))


def build_floor(directory):
    """sparkey_lookup_floor.c as a loaded library, or None (saying why) without a compiler."""
    source = pathlib.Path(__file__).resolve().parent / "sparkey_lookup_floor.c"
    library = pathlib.Path(directory) / "sparkey_lookup_floor.so"
    if not library.exists():
        command = [*shlex.split(sysconfig.get_config_var("CC") or "cc"), "-O2", "-shared",
                   "-fPIC", f"-I{sysconfig.get_paths()['include']}", str(source),
                   "-o", str(library)]
        try:
            built = subprocess.run(command, capture_output=True, text=True)
            failure = built.stderr.strip() if built.returncode else None
        except OSError as exc:  # no compiler at all
            failure = str(exc)
        if failure is not None:
            print(f"  C loop: skipped, {shlex.join(command)} failed: {failure}")
            return None
    floor = ctypes.PyDLL(str(library))  # calls hold the GIL: the loops create Python objects
    floor.lookup_loop.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.py_object,
                                  ctypes.c_int, ctypes.c_int]
    floor.lookup_loop.restype = ctypes.c_ssize_t
    floor.hash_loop.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_uint32,
                                ctypes.c_uint]
    floor.hash_loop.restype = ctypes.c_uint64
    return floor


def block_payloads(log):
    """``(start, stop)`` of every compressed payload of a log, from its block length VLQs."""
    mapping, position, end = log.mapping, 84, log.data_end
    while position < end:
        length, shift, start = 0, 0, position
        while True:
            byte = mapping[start]
            length |= (byte & 0x7F) << shift
            start += 1
            shift += 7
            if byte < 0x80:
                break
        yield start, start + length
        position = start + length


def on_reference(function):
    """``function()`` with the pure-Python reference selected (what OFFHEAP_PURE_PYTHON=1 does)."""
    module, native.module = native.module, None
    try:
        return function()
    finally:
        native.module = module


def bench_write(directory, keys, values, repeat):
    print(f"write + index, NONE, {len(keys)} entries: Writer.put_many, then close()")
    bases = {label: pathlib.Path(directory) / f"write_{label}" for label in ("c", "python")}

    def write(base):
        with sparkey.Writer(base, mode="w", file_identifier=1, hash_seed=7) as writer:
            writer.put_many(keys, values)
    show("Writer (Python reference)",
         best_of(repeat, lambda: on_reference(lambda: write(bases["python"]))), unit="s")
    show("Writer (compiled core)", best_of(repeat, lambda: write(bases["c"])), unit="s")
    for suffix in (".spl", ".spi"):
        assert (bases["c"].with_suffix(suffix).read_bytes()
                == bases["python"].with_suffix(suffix).read_bytes()), suffix


def bench_parallel_put_many(directory, count, repeat, value_bytes=490):
    """put_many of pre-encoded bytes on 1 and 2 threads: pairs and two list columns."""
    keys = [b"key_%09d" % i for i in range(count)]
    values = [(b"%d|" % i + b"value," * (value_bytes // 6))[:value_bytes] for i in range(count)]
    pairs = list(zip(keys, values))
    print(f"put_many of {count} pre-encoded entries ({value_bytes}-byte values), p=2 vs p=1")
    path = pathlib.Path(directory) / "parallel.spl"
    for compression in ("zstd", "snappy"):
        for label, arguments in (("pairs", (pairs,)), ("columns", (keys, values))):
            results = {}
            for parallelism in (1, 2):
                def run():
                    with sparkey.LogWriter(path, compression, file_identifier=1) as writer:
                        writer.put_many(*arguments, parallelism=parallelism)
                results[parallelism] = best_of(repeat, run)
                show(f"{compression} {label}, p={parallelism}", results[parallelism], unit="s")
            print(f"  {compression} {label}: p=2 is {results[1][0] / results[2][0]:.2f}x p=1 "
                  f"(wall)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--lookups", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--parallel-entries", type=int, default=300_000)
    parser.add_argument("--compressions", default="none,snappy,zstd",
                        help="the stores whose lookups are timed (comma-separated)")
    parser.add_argument("--no-writes", action="store_true",
                        help="time the lookups only, not the writers")
    args = parser.parse_args(argv)
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    keys = [b"key_%d" % i for i in range(args.n)]
    values = [b"value_%d" % i for i in range(args.n)]
    with tempfile.TemporaryDirectory() as directory:
        for compression in args.compressions.split(","):
            lookups = args.lookups if compression == "none" else args.lookups // 10
            bench_lookups(directory, compression, keys, values, lookups, args.repeat)
        if not args.no_writes:
            bench_write(directory, keys, values, args.repeat)
            bench_parallel_put_many(directory, args.parallel_entries, args.repeat)
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"({os.cpu_count()} CPUs; figures are wall time, CPU time in parentheses)")


if __name__ == "__main__":
    main()
