"""sparkey._native against the pure-Python reader and writer, on 1M ``key_%d`` -> ``value_%d``.

Run from the repository root after ``python setup.py build_ext --inplace``:

    python benchmarks/sparkey_native_bench.py --n 1000000

Every figure is the minimum of --repeat runs (wall time, CPU time of the process in
parentheses), and the load average is printed before and after: the machine is shared.

* get: ns per lookup of existing keys in random order: ``Reader.get`` (Python), the C
  primitives called directly, and through a closure over the mappings (the way the reader
  calls them). Compressed stores: ``find_block``, the codec's ``decompress``, ``value_in_block``.
* get_many: ns per key of one batch (NONE).
* write + index: ``LogWriter.put_many`` + ``write_index`` against ``frame_puts`` written to the
  file, ``hash_buffer`` over the written log and ``fill_slots`` (sparkey-java's rules over
  distinct keys give the canonical table, checked byte for byte against ``write_index``).
* framing on 1 and 2 threads (frame_puts over tuples, frame_packed over PackedBytes): the
  speed-up of framing pre-encoded bytes with the GIL released.
"""

import argparse
import concurrent.futures
import os
import pathlib
import random
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sparkey  # noqa: E402  (after the path set-up for standalone runs)
from sparkey import _native  # noqa: E402
from sparkey.codec import codec_for  # noqa: E402
from sparkey.format import LOG_HEADER_SIZE, IndexHeader, LogHeader  # noqa: E402
from sparkey.packed import PackedBytes  # noqa: E402
from sparkey.table import TableStatistics, table_parameters  # noqa: E402
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


def native_write_and_index(base, keys, values, seed):
    """Log by frame_puts, canonical index by hash_buffer + fill_slots (distinct keys)."""
    log_path, index_path = base.with_suffix(".spl"), base.with_suffix(".spi")
    count = len(keys)
    key_lengths = np.empty(count, dtype=np.int64)
    value_lengths = np.empty(count, dtype=np.int64)
    body = _native.frame_puts(keys, values, key_lengths=key_lengths,
                              value_lengths=value_lengths)
    sizes = np.where(key_lengths < 127, 1, 2) + np.where(value_lengths < 128, 1, 2) \
        + key_lengths + value_lengths
    assert int(sizes.sum()) == len(body)  # the short-entry VLQ sizes hold for this data set
    positions = np.empty(count, dtype=np.int64)
    positions[0] = LOG_HEADER_SIZE
    np.cumsum(sizes[:-1], out=positions[1:])
    positions[1:] += LOG_HEADER_SIZE
    header = LogHeader(file_identifier=1, num_puts=count, data_end=LOG_HEADER_SIZE + len(body),
                       max_key_len=int(key_lengths.max()), max_value_len=int(value_lengths.max()),
                       put_size=len(body))
    with open(log_path, "wb") as file:
        file.write(header.pack())
        file.write(body)
    params = table_parameters(header, "canonical")
    hashes = np.frombuffer(_native.hash_buffer(
        body, positions - LOG_HEADER_SIZE + (sizes - key_lengths - value_lengths), key_lengths,
        seed, params.hash_size), dtype=np.uint64)
    slots = bytearray(params.capacity * params.slot_dtype.itemsize)
    _native.fill_slots(slots, params.hash_size, params.address_size, hashes,
                       positions.astype(np.uint64), "java")
    table = np.frombuffer(slots, dtype=params.slot_dtype)
    stats = TableStatistics(params.capacity)
    stats.add(table["hash"], table["address"])
    stats.finish()
    index = IndexHeader(
        file_identifier=1, hash_seed=seed, data_end=header.data_end,
        max_key_len=header.max_key_len, max_value_len=header.max_value_len, num_puts=count,
        garbage_size=0, num_entries=stats.num_entries, address_size=params.address_size,
        hash_size=params.hash_size, hash_capacity=params.capacity,
        max_displacement=stats.max_displacement, entry_block_bits=0,
        hash_collisions=stats.hash_collisions, total_displacement=stats.total_displacement)
    del table
    with open(index_path, "wb") as file:
        file.write(index.pack())
        file.write(slots)


def bench_write(directory, keys, values, repeat):
    print(f"write + index, NONE, {len(keys)} entries")
    python_base = pathlib.Path(directory) / "write_python"
    native_base = pathlib.Path(directory) / "write_native"

    def python_write():
        with sparkey.LogWriter(python_base.with_suffix(".spl"), file_identifier=1) as writer:
            writer.put_many((keys, values))
        sparkey.write_index(python_base.with_suffix(".spi"), python_base.with_suffix(".spl"),
                            hash_seed=7)
    show("put_many + write_index (Python)", best_of(repeat, python_write), unit="s")
    show("frame_puts + hash_buffer + fill_slots (C)", best_of(
        repeat, lambda: native_write_and_index(native_base, keys, values, 7)), unit="s")
    for suffix in (".spl", ".spi"):
        assert (python_base.with_suffix(suffix).read_bytes()
                == native_base.with_suffix(suffix).read_bytes()), suffix


def bench_parallel_framing(keys, values, repeat, chunk_rows=65536):
    """frame_puts over tuples and frame_packed over PackedBytes, chunk by chunk, on 1 and 2
    threads: the GIL is released for all the per-entry work, so the threads can overlap."""
    print(f"framing {len(keys)} pre-encoded entries in chunks of {chunk_rows}, 1 and 2 threads")
    tuples = [(tuple(keys[lo:lo + chunk_rows]), tuple(values[lo:lo + chunk_rows]))
              for lo in range(0, len(keys), chunk_rows)]
    packed = [(column.data, column.offsets) for column in
              (PackedBytes.from_sequence(keys), PackedBytes.from_sequence(values))]
    rows = [tuple(part for data, offsets in packed
                  for part in (data, offsets[lo:lo + chunk_rows + 1]))
            for lo in range(0, len(keys), chunk_rows)]
    for label, function, chunks in (("frame_puts over tuples", _native.frame_puts, tuples),
                                    ("frame_packed over PackedBytes", _native.frame_packed,
                                     rows)):
        results = {}
        for workers in (1, 2):
            with concurrent.futures.ThreadPoolExecutor(workers) as pool:
                def run():
                    list(pool.map(lambda chunk: function(*chunk), chunks))
                results[workers] = best_of(repeat, run)
            show(f"{label}, {workers} thread(s)", results[workers], unit="s")
        print(f"  speed-up on 2 threads: {results[1][0] / results[2][0]:.2f}x (wall)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--lookups", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    keys = [b"key_%d" % i for i in range(args.n)]
    values = [b"value_%d" % i for i in range(args.n)]
    with tempfile.TemporaryDirectory() as directory:
        bench_lookups(directory, "none", keys, values, args.lookups, args.repeat)
        for compression in ("snappy", "zstd"):
            bench_lookups(directory, compression, keys, values, args.lookups // 10, args.repeat)
        bench_write(directory, keys, values, args.repeat)
    bench_parallel_framing(keys, values, args.repeat)
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print(f"({os.cpu_count()} CPUs; figures are wall time, CPU time in parentheses)")


if __name__ == "__main__":
    main()
