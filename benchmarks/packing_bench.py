"""Speed and size of the packing kernels, serializers and codecs on B+tree-page-shaped data.

    python benchmarks/packing_bench.py            # about a minute
    python benchmarks/packing_bench.py --quick    # a few seconds, smaller samples

Reports, each against a peer measured in the same run:

* int64 delta blocks (``encode_int64_deltas``/``decode_int64_deltas``) of 32 and 120 sorted keys
  and of 1M keys: µs per page and ns per key, beside raw ``tobytes``/``frombuffer`` (the floor)
  and MapDB's delta varint (``varint_encode`` of the gaps, the format the seed experiment's
  successors use);
* bytes per key of sequential and uniformly random sorted keys cut into 32- and 120-key pages,
  for both encodings and after each codec (a codec is only worth it when it shrinks the page);
* the two bit-packing kernels around the size where one takes over from the other;
* front coding of 32- and 120-key pages of sorted byte keys;
* value columns of 120 entries (empty strings, small ints, short strings) per serializer;
* codec levels on delta-packed leaf bodies, to choose the default levels.

Timings are the best of several repeats of process CPU time (the machine is shared); read them
as orders of magnitude.
"""

from __future__ import annotations

import argparse
import time
import timeit

import numpy as np

from offheap.kernels import packing
from offheap.kernels.codecs import ZlibCodec, ZstdCodec, get_codec, names
from offheap.kernels.packing import (
    decode_int64_deltas,
    encode_int64_deltas,
    front_decode,
    front_encode,
    varint_decode,
    varint_encode,
)
from offheap.store.serializers import get_serializer


def best_seconds(function, number: int, repeat: int = 5) -> float:
    """Best CPU time per call: process time, so that other jobs on the machine count less."""
    return min(timeit.repeat(function, number=number, repeat=repeat, timer=time.process_time)) / number


def delta_varint_encode(keys: np.ndarray) -> bytes:
    """MapDB's LONG_DELTA layout (first key, then each gap as a varint): the size peer."""
    gaps = np.empty(keys.size, np.uint64)
    gaps[0] = packing.zigzag_encode(keys[:1])[0]
    gaps[1:] = np.diff(keys).view(np.uint64)
    return varint_encode(gaps)


def delta_varint_decode(buf: bytes, count: int) -> np.ndarray:
    gaps, _ = varint_decode(buf, count)
    keys = gaps.view(np.int64).copy()
    keys[0] = packing.zigzag_decode(gaps[:1])[0]
    return np.cumsum(keys)


def key_sets(rng, n_keys: int) -> dict[str, np.ndarray]:
    return {
        "sequential from 1e9": np.arange(10**9, 10**9 + n_keys, dtype=np.int64),
        "random sorted (2**63 range)": np.sort(rng.integers(0, 2**63 - 1, n_keys, dtype=np.int64)),
    }


def bench_page_speed(rng, quick: bool) -> None:
    print("\n## int64 delta blocks: time (best of 5)")
    print(f"{'keys':>9} {'pattern':<28} {'encode':>10} {'decode':>10} {'varint enc':>11} "
          f"{'varint dec':>11} {'raw enc':>9} {'raw dec':>9}")
    for n_keys in (32, 120, 100_000 if quick else 1_000_000):
        for pattern, keys in key_sets(rng, n_keys).items():
            number = 3 if n_keys > 1000 else 2000
            packed = encode_int64_deltas(keys)
            assert (decode_int64_deltas(packed, n_keys)[0] == keys).all()
            varint = delta_varint_encode(keys)
            assert (delta_varint_decode(varint, n_keys) == keys).all()
            raw = keys.tobytes()
            times = [
                best_seconds(lambda: encode_int64_deltas(keys), number),
                best_seconds(lambda: decode_int64_deltas(packed, n_keys), number),
                best_seconds(lambda: delta_varint_encode(keys), number),
                best_seconds(lambda: delta_varint_decode(varint, n_keys), number),
                best_seconds(lambda: keys.tobytes(), number),
                best_seconds(lambda: np.frombuffer(raw, np.int64).copy(), number),
            ]
            if n_keys > 1000:
                cells = [f"{t * 1e9 / n_keys:7.1f} ns/key"[:11] for t in times]
            else:
                cells = [f"{t * 1e6:7.2f} µs" for t in times]
            print(f"{n_keys:>9,} {pattern:<28} " + " ".join(f"{c:>10}" for c in cells))


def bench_page_sizes(rng, quick: bool) -> None:
    n_keys = 120_000 if quick else 1_000_000
    print(f"\n## bytes per key, {n_keys:,} keys cut into pages (keys only, no page header)")
    codecs = [get_codec(name) for name in names() if name != "none"]
    header = " ".join(f"{'+' + c.name:>9}" for c in codecs)
    print(f"{'pattern':<28} {'page':>5} {'FOR':>7} {'varint':>7} {header}")
    for pattern, keys in key_sets(rng, n_keys).items():
        for page_size in (32, 120):
            pages = [keys[i:i + page_size] for i in range(0, n_keys, page_size)]
            encoded = [encode_int64_deltas(p) for p in pages]
            for_bytes = sum(map(len, encoded))
            varint_bytes = sum(len(delta_varint_encode(p)) for p in pages)
            compressed = []
            for codec in codecs:
                compressed.append(sum(min(len(codec.compress(e)), len(e)) for e in encoded))
            cells = " ".join(f"{c / n_keys:9.3f}" for c in compressed)
            print(f"{pattern:<28} {page_size:>5} {for_bytes / n_keys:7.3f} {varint_bytes / n_keys:7.3f} {cells}")


def bench_bitpack_kernels(rng) -> None:
    print("\n## bit packing kernels: matrix vs word shifting, ns/value (width 37)")
    print(f"{'values':>8} {'matrix pack':>12} {'words pack':>11} {'matrix unpack':>14} {'words unpack':>13}")
    width = 37
    for count in (120, 256, 512, 1024, 2048, 4096, 16384):
        values = rng.integers(0, 1 << width, count, dtype=np.uint64)
        packed = packing._bitpack_words(values, width)
        assert packing._bitpack_matrix(values, width) == packed
        packed_array = np.frombuffer(packed, np.uint8)
        number = max(20, 200_000 // count)
        times = [
            best_seconds(lambda: packing._bitpack_matrix(values, width), number),
            best_seconds(lambda: packing._bitpack_words(values, width), number),
            best_seconds(lambda: packing._bitunpack_matrix(packed_array, count, width), number),
            best_seconds(lambda: packing._bitunpack_words(packed_array, count, width), number),
        ]
        print(f"{count:>8,} " + " ".join(f"{t * 1e9 / count:>12.1f}" for t in times))


def bench_front_coding() -> None:
    print("\n## front coding of sorted byte keys: bytes/key, encode µs, decode µs (peer: plain lengths + bytes)")
    for n_keys in (32, 120):
        for label, keys in (("user ids", [f"user{i:06d}".encode() for i in range(n_keys)]),
                            ("urls", [f"https://example.com/items/{i:08d}".encode() for i in range(n_keys)])):
            encoded = front_encode(keys)
            assert front_decode(encoded, n_keys)[0] == keys
            plain = len(varint_encode(np.array(list(map(len, keys))))) + sum(map(len, keys))
            encode = best_seconds(lambda: front_encode(keys), 1000)
            decode = best_seconds(lambda: front_decode(encoded, n_keys), 1000)
            print(f"{n_keys:>5} {label:<9} {len(encoded) / n_keys:6.2f} B (plain {plain / n_keys:5.2f}) "
                  f"{encode * 1e6:8.2f} {decode * 1e6:8.2f}")


def bench_value_columns() -> None:
    print("\n## value columns of 120 entries: bytes, pack µs, unpack µs")
    columns = {
        'all ""': [""] * 120,
        "small ints": list(range(120)),
        "short str": [f"user{i:04d}" for i in range(120)],
        "mixed": [None, 1, "a", 2.5, b"x", True] * 20,
    }
    for name in ("object", "str", "int64"):
        serializer = get_serializer(name)
        for label, values in columns.items():
            try:
                packed = serializer.pack_column(values)
            except TypeError:
                continue
            assert list(serializer.unpack_column(packed, len(values))[0]) == values
            pack = best_seconds(lambda: serializer.pack_column(values), 500)
            unpack = best_seconds(lambda: serializer.unpack_column(packed, len(values)), 500)
            print(f"{name:<7} {label:<11} {len(packed):>5} B {pack * 1e6:8.2f} {unpack * 1e6:8.2f}")


def bench_codec_levels(rng, quick: bool) -> None:
    n_keys = 120_000 if quick else 600_000
    keys = np.sort(rng.integers(0, 2**63 - 1, n_keys, dtype=np.int64))
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    value_kinds = {
        "small-int values": lambda page_keys: get_serializer("object").pack_column((page_keys % 1000).tolist()),
        "word values": lambda page_keys: get_serializer("str").pack_column(
            [words[k % 8] + str(k % 97) for k in page_keys.tolist()]),
    }
    for label, value_column in value_kinds.items():
        bodies = [encode_int64_deltas(keys[i:i + 120]) + value_column(keys[i:i + 120])
                  for i in range(0, n_keys, 120)]
        raw = sum(map(len, bodies))
        print(f"\n## codec levels on {len(bodies):,} leaf bodies: random sorted keys, {label}; "
              f"raw {raw / n_keys:.2f} B/key")
        print(f"{'codec':<22} {'B/key':>7} {'ratio':>6} {'compress MB/s':>14} {'decompress MB/s':>16}")
        candidates = [ZlibCodec(1), ZlibCodec(6), ZlibCodec(9)]
        if "zstd" in names():
            candidates += [ZstdCodec(1), ZstdCodec(3), ZstdCodec(9)]
        if "snappy" in names():
            candidates.append(get_codec("snappy"))
        for codec in candidates:
            packed = [codec.compress(b) for b in bodies]
            size = sum(min(len(p), len(b)) for p, b in zip(packed, bodies))
            compress = best_seconds(lambda: [codec.compress(b) for b in bodies], 1, 3)
            decompress = best_seconds(lambda: [codec.decompress(p, len(b)) for p, b in zip(packed, bodies)], 1, 3)
            print(f"{codec!r:<22} {size / n_keys:7.3f} {raw / size:6.2f} {raw / compress / 1e6:14.1f} "
                  f"{raw / decompress / 1e6:16.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller samples, a few seconds")
    args = parser.parse_args()
    rng = np.random.default_rng(20240601)
    bench_page_speed(rng, args.quick)
    bench_page_sizes(rng, args.quick)
    bench_bitpack_kernels(rng)
    bench_front_coding()
    bench_value_columns()
    bench_codec_levels(rng, args.quick)


if __name__ == "__main__":
    main()
