"""``python -m experiments parallel-write`` on tiny sizes, and the StockQuote encoding."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from experiments.parallel_write import bench_mechanisms, bench_steps, gil_probe, machine_ceiling
from experiments.quotes import (
    QUOTE_DTYPE, QuoteKeys, QuoteValues, encode_quote, make_quotes, quote_key)
from sparkey.packed import PackedBytes

REPOSITORY = Path(__file__).resolve().parents[2]


def test_vectorized_encoding_equals_the_per_record_encoding():
    quotes = make_quotes(500)
    quotes["symbol"][3] = "A\x00B"  # an inner NUL is part of the string, trailing ones are not
    quotes["f7"][5] = "vé"  # non-ASCII: UTF-8 encoded, 3 bytes
    quotes["f60"][9] = ""
    quotes["f1"][11] = "x"
    records = quotes.tolist()
    values, keys = QuoteValues(quotes), QuoteKeys(quotes)
    assert list(values.pack(0, 500)) == [encode_quote(r) for r in records]
    assert list(keys.pack(0, 500)) == [quote_key(r) for r in records]
    assert list(values.pack(100, 120)) == [encode_quote(r) for r in records[100:120]]
    assert values.pack(5, 6)[0].count("vé".encode()) == 1


def test_value_layout_golden_bytes():
    quote = np.zeros(1, dtype=QUOTE_DTYPE)
    quote["symbol"], quote["timestamp"], quote["askSize"] = "IBM", 258, 7
    value = QuoteValues(quote).pack(0, 1)[0]
    assert value[:4] == b"\x03IBM" and value[4:12] == (258).to_bytes(8, "little")
    assert value[4 + 8 + 8:4 + 8 + 8 + 4] == (7).to_bytes(4, "little")
    assert len(value) == 4 + 124 + 60 and value[128:] == b"\x00" * 60  # 60 empty strings
    assert QuoteKeys(quote).pack(0, 1)[0] == b"IBM" + (258).to_bytes(8, "big")
    assert len(encode_quote(make_quotes(1)[0])) == 1 + len(make_quotes(1)[0]["symbol"]) + 124 + 360


@pytest.fixture(scope="module")
def document(tmp_path_factory):
    out = tmp_path_factory.mktemp("parallel-write")
    done = subprocess.run([sys.executable, "-m", "experiments", "parallel-write", "--sizes",
                           "600", "1K", "--runs", "1", "--parallelism", "2", "--no-probes",
                           "--out", str(out)],
                          cwd=REPOSITORY, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (out / "parallel-write.txt").read_text().strip()
    return json.loads((out / "results.json").read_text())


def test_every_size_codec_and_variant_is_timed(document):
    cells = {(r["records"], r["codec"], r["variant"]) for r in document["writes"]}
    variants = ["put loop", "p=1", "p=2"]
    assert cells == ({(n, c, v) for n in (600, 1000) for c in ("none", "snappy", "zstd")
                      for v in variants} | {(600, c, "objects") for c in ("none", "snappy", "zstd")})
    for record in document["writes"]:
        assert record["min_seconds"] <= record["max_seconds"] and record["log_bytes"] > 84
    assert [(r["records"], r["parallelism"]) for r in document["treemap"]] == [
        (n, p) for n in (600, 1000) for p in (1, 2)]
    assert len(document["machine"]["git_commit"]) == 40


def test_gil_probe_covers_every_compressor_and_a_control():
    stream = PackedBytes.from_sequence(list(QuoteValues(make_quotes(300)).pack(0, 300)))
    probe = gil_probe(stream.data.tobytes(), call_bytes=1 << 20)
    assert set(probe) == {"snappy", "zstd", "zlib", "numpy copy", "bytes.count (holds the GIL)",
                          "load"}
    assert all(probe[name]["two_thread_speedup"] > 0 for name in ("snappy", "zstd", "zlib"))


def test_mechanisms_produce_the_serial_bytes():
    mechanisms = bench_mechanisms(make_quotes(3000), workers=2, runs=1)
    assert set(mechanisms["results"]) == {
        "serial", "threads", "processes, pickled input", "processes, input inherited by fork"}
    assert all(cell["speedup"] > 0 for cell in mechanisms["results"].values())


def test_steps_and_the_machine_ceiling_are_timed():
    steps = bench_steps(make_quotes(2000), runs=1)
    assert len(steps["results"]) == 4
    assert all(cell["speedup"] > 0 for cell in steps["results"].values())
    assert machine_ceiling(runs=1)["throughput_ratio"] > 0


def test_bad_sizes_are_refused():
    done = subprocess.run([sys.executable, "-m", "experiments", "parallel-write", "--sizes", "0"],
                          cwd=REPOSITORY, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "must be at least 1" in done.stderr
