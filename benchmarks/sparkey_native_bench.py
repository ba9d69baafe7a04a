"""sparkey._native against the pure-Python reader and writer, on 1M ``key_%d`` -> ``value_%d``.

Run from the repository root after ``python setup.py build_ext --inplace``:

    python benchmarks/sparkey_native_bench.py --n 1000000

Every figure is the minimum of --repeat runs (wall time, CPU time of the process in
parentheses), and the load average is printed before and after: the machine is shared.

* get: ns per lookup of existing keys in random order: ``Reader.get`` (Python), the C
  primitives called directly, and through a closure over the mappings (the way the reader
  calls them). Compressed stores: ``find_block``, the codec's ``decompress``, ``value_in_block``.
* get_many: ns per key of one batch (NONE).
* write + index: ``Writer.put_many`` then ``close()`` (log, then the canonical index), on the
  compiled core and on the Python reference; both files are checked byte for byte.
* put_many on 1 and 2 threads of 300K pre-encoded ``bytes`` entries (pairs, and two list
  columns), zstd and snappy: the speed-up of framing with the GIL released.
"""

import argparse
import os
import pathlib
import random
import subprocess
import sys
import tempfile


sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sparkey  # noqa: E402  (after the path set-up for standalone runs)
from sparkey import _native, native  # noqa: E402
from sparkey.codec import codec_for  # noqa: E402
from sparkey_bench import best_of  # noqa: E402  (beside this script)


def show(label, times, count=1, unit="ns"):
    scale = 1e9 / count if unit == "ns" else 1.0
    print(f"  {label:<44} {times[0] * scale:>10.{0 if unit == 'ns' else 3}f} {unit}"
          f"  ({times[1] * scale:.{0 if unit == 'ns' else 3}f})")


def layout_of(reader):
    """The layout tuple of the C lookups for an open Reader."""
    index, log = reader.index_header, reader.log_header
    return (index.hash_seed, index.hash_size, index.address_size, index.hash_capacity,
            index.max_displacement, index.entry_block_bits, log.data_end)


def uncompressed_getter(reader):
    """``get(key)`` over the C lookup, as the reader's closure would call it."""
    index_map, log_map, layout = reader._index._mm, reader._log._mm, layout_of(reader)
    native_get = _native.get

    def get(key):
        return native_get(index_map, log_map, key, layout)
    return get


def compressed_getter(reader):
    """``get(key)`` over find_block, the codec and value_in_block."""
    index_map, log_map, layout = reader._index._mm, reader._log._mm, layout_of(reader)
    header = reader.log_header
    decompress, block_size = codec_for(header.compression_type).decompress, \
        header.compression_block_size
    find_block, value_in_block = _native.find_block, _native.value_in_block

    def get(key):
        displacement = 0
        while True:
            found = find_block(index_map, log_map, key, layout, displacement)
            if found is None:
                return None
            position, entry_index, start, stop, displacement = found
            value = value_in_block(decompress(log_map[start:stop], block_size), position,
                                   entry_index, key)
            if value is not None or displacement is None:
                return value
    return get


def bench_lookups(directory, compression, keys, values, lookups, repeat):
    base = pathlib.Path(directory) / f"native_{compression}"
    with sparkey.Writer(base, compression=compression) as writer:
        writer.put_many((keys, values))
    wanted = [b"key_%d" % random.randrange(len(keys)) for _ in range(lookups)]
    print(f"{compression.upper()}: {len(keys)} entries, {lookups} random lookups")
    with sparkey.open(base) as reader:
        get = uncompressed_getter(reader) if compression == "none" else compressed_getter(reader)
        assert [get(key) for key in wanted[:1000]] == reader.get_many(wanted[:1000])

        def python_get():
            for key in wanted:
                reader.get(key)

        def closure_get():
            for key in wanted:
                get(key)
        show("Reader.get (Python)", best_of(repeat, python_get), lookups)
        if compression == "none":
            index_map, log_map, layout = reader._index._mm, reader._log._mm, layout_of(reader)
            native_get = _native.get

            def direct_get():
                for key in wanted:
                    native_get(index_map, log_map, key, layout)
            show("_native.get, called directly", best_of(repeat, direct_get), lookups)
            show("_native.get through a closure", best_of(repeat, closure_get), lookups)
            show("Reader.get_many (Python), per key",
                 best_of(repeat, lambda: reader.get_many(wanted)), lookups)
            show("_native.get_many, per key", best_of(repeat, lambda: _native.get_many(
                index_map, log_map, wanted, layout)), lookups)
        else:
            show("find_block + decompress + value_in_block", best_of(repeat, closure_get),
                 lookups)
            index_map, log_map, layout = reader._index._mm, reader._log._mm, layout_of(reader)
            found = [_native.find_block(index_map, log_map, key, layout) for key in wanted]
            header = reader.log_header
            decompress = codec_for(header.compression_type).decompress
            block_size = header.compression_block_size

            def decompress_only():
                for f in found:
                    decompress(log_map[f[2]:f[3]], block_size)

            def decompress_and_read():
                for f, key in zip(found, wanted):
                    _native.value_in_block(decompress(log_map[f[2]:f[3]], block_size), f[0],
                                           f[1], key)
            decompressing = best_of(repeat, decompress_only)
            reading = best_of(repeat, decompress_and_read)
            show("  of which decompress (codec)", decompressing, lookups)
            show("  of which value_in_block, block in cache",
                 tuple(b - a for a, b in zip(decompressing, reading)), lookups)


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
        with sparkey.Writer(base, file_identifier=1, hash_seed=7) as writer:
            writer.put_many((keys, values))
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
        for label, items in (("pairs", lambda: pairs), ("columns", lambda: (keys, values))):
            results = {}
            for parallelism in (1, 2):
                def run():
                    with sparkey.LogWriter(path, compression, file_identifier=1) as writer:
                        writer.put_many(items(), parallelism=parallelism)
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
    args = parser.parse_args(argv)
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    keys = [b"key_%d" % i for i in range(args.n)]
    values = [b"value_%d" % i for i in range(args.n)]
    with tempfile.TemporaryDirectory() as directory:
        bench_lookups(directory, "none", keys, values, args.lookups, args.repeat)
        for compression in ("snappy", "zstd"):
            bench_lookups(directory, compression, keys, values, args.lookups // 10, args.repeat)
        bench_write(directory, keys, values, args.repeat)
        bench_parallel_put_many(directory, args.parallel_entries, args.repeat)
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"({os.cpu_count()} CPUs; figures are wall time, CPU time in parentheses)")


if __name__ == "__main__":
    main()
