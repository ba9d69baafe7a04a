"""What the checksum sidecar costs: writing a store with and without it, and verifying it.

    python benchmarks/sparkey_checksums_bench.py --n 1000000 --repeat 3

For each compression, best of --repeat, alternating in one process: ``sparkey.Writer`` with
``put_many`` of ``n`` entries ``key_%d`` -> ``value_%d`` and close (the index built), with
``checksums=False`` against ``checksums=True``; then ``sparkey.open(path)`` against
``sparkey.open(path, verify=True)`` and, as the floor of any verification, one ``zlib.crc32``
over the bytes of both files already in memory. Files in the page cache (just written).
"""

import argparse
import os
import pathlib
import sys
import tempfile
import time
import zlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sparkey  # noqa: E402  (after the path set-up for standalone runs)


def _seconds(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def _write(base: str, compression: str, keys: list, values: list, checksums: bool) -> None:
    with sparkey.Writer(base, compression, mode="w", checksums=checksums) as writer:
        writer.put_many(keys, values)


def _open(base: str, verify: bool) -> None:
    sparkey.open(base, verify=verify).close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compressions", default="none,zstd")
    args = parser.parse_args(argv)
    keys = [b"key_%d" % i for i in range(args.n)]
    values = [b"value_%d" % i for i in range(args.n)]
    print(f"{args.n:,} entries, best of {args.repeat}, load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="sparkey-checksums-") as directory:
        for compression in args.compressions.split(","):
            base = os.path.join(directory, compression)
            write = {False: [], True: []}
            for _ in range(args.repeat):
                for checksums in (False, True):
                    write[checksums].append(_seconds(
                        lambda: _write(base, compression, keys, values, checksums)))
            store_bytes = sum(os.path.getsize(base + suffix) for suffix in (".spl", ".spi"))
            opened = {verify: min(_seconds(lambda: _open(base, verify))
                                  for _ in range(args.repeat)) for verify in (False, True)}
            data = b"".join(pathlib.Path(base + suffix).read_bytes()
                            for suffix in (".spl", ".spi"))
            crc = min(_seconds(lambda: zlib.crc32(data)) for _ in range(args.repeat))
            plain, checked = min(write[False]), min(write[True])
            print(f"  {compression:5} store {store_bytes / 2**20:6.1f} MiB, sidecar "
                  f"{os.path.getsize(base + '.spc'):,} B | write {plain:.3f} s, with checksums "
                  f"{checked:.3f} s (ratio {checked / plain:.3f}) | open {opened[False] * 1e3:.2f}"
                  f" ms, verify=True {opened[True] * 1e3:.1f} ms "
                  f"({store_bytes / opened[True] / 2**30:.2f} GiB/s; one crc32 of the bytes in "
                  f"memory {crc * 1e3:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
