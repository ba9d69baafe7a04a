"""The compiled writer and index build against the pure-Python reference: the same files.

Every store is written twice from the same random operations, once on ``sparkey._native`` and
once on the reference (``sparkey.native.module`` set to None, which is what
``OFFHEAP_PURE_PYTHON=1`` selects), and both ``.spl`` and every ``.spi`` must be byte for byte
the same. The golden vectors are written by ``put_many`` on both paths and must equal their
replay by ``put`` (which tests/sparkey/test_golden_write.py compares with the golden files).
"""

import random

import numpy as np
import pytest

import sparkey
from sparkey import native
from sparkey.errors import LogFormatError
from sparkey.log.blocks import reference_walk_block, walk_block
from sparkey.log.entries import decode_headers, reference_decode_headers
from sparkey.log.framing import BlockCutter
from sparkey.packed import PackedBytes

from .golden import all_vectors, replay

pytestmark = pytest.mark.skipif(not native.compiled, reason="the compiled core is not running")

KEY_LENGTHS = (0, 1, 5, 126, 127, 128, 300)
VALUE_LENGTHS = (0, 1, 9, 127, 128, 129, 300)
LONG_LENGTHS = (16383, 16384, 20000)
"""Drawn one time in 50: a log of a few hundred KiB keeps 16-byte blocks fast to write."""
INDEX_OPTIONS = (dict(rules="canonical"), dict(rules="canonical", method="sorting"),
                 dict(rules="c"), dict(rules="java"), dict(rules="canonical", hash_size=8),
                 dict(rules="c", hash_size=8))


def _random_bytes(rng, length):
    return bytes(rng.getrandbits(8) for _ in range(min(length, 16))) * (length // 16) + bytes(
        rng.getrandbits(8) for _ in range(length % 16))


def _operations(seed, count=100):
    """Puts, deletes, flushes and put_many batches of every column kind, with keys that repeat
    and key and value lengths on both sides of the VLQ byte and block boundaries."""
    rng = random.Random(seed)

    def length(lengths):
        return rng.choice(LONG_LENGTHS if rng.random() < 0.02 else lengths)
    keys = [_random_bytes(rng, length(KEY_LENGTHS)) for _ in range(40)]
    keys += [b"key_%d" % i for i in range(60)]

    def entry():
        return rng.choice(keys), _random_bytes(rng, length(VALUE_LENGTHS))
    operations = []
    for _ in range(count):
        roll = rng.random()
        if roll < 0.4:
            operations.append(("put", entry()))
        elif roll < 0.55:
            operations.append(("delete", rng.choice(keys)))
        elif roll < 0.6:
            operations.append(("flush", None))
        else:
            batch = [entry() for _ in range(rng.randrange(1, 60))]
            operations.append(("many", (rng.choice(("lists", "pairs", "packed", "tuples", "str")),
                                        batch, rng.choice((1, 2)))))
    return operations


def _items(kind, batch):
    """The arguments of put_many for ``batch`` in the form ``kind``: two columns or one."""
    keys, values = [key for key, _ in batch], [value for _, value in batch]
    if kind == "lists":
        return keys, values
    if kind == "packed":
        return PackedBytes.from_sequence(keys), PackedBytes.from_sequence(values)
    if kind == "tuples":
        return (iter([(bytearray(key), memoryview(value)) for key, value in batch]),)
    if kind == "str":
        return [key.decode("latin-1") for key in keys], values
    return (batch,)


def _write(path, operations, compression, block_size):
    with sparkey.LogWriter(path, compression, block_size, file_identifier=77) as writer:
        for op, argument in operations:
            if op == "put":
                writer.put(*argument)
            elif op == "delete":
                writer.delete(argument)
            elif op == "flush":
                writer.flush()
            else:
                kind, batch, parallelism = argument
                writer.put_many(*_items(kind, batch), parallelism=parallelism, threshold=10)


def _on_reference(monkeypatch, function, *args, **kwargs):
    with monkeypatch.context() as patch:
        patch.setattr(native, "module", None)
        return function(*args, **kwargs)


@pytest.mark.parametrize("compression, block_size", [
    ("none", 4096), ("snappy", 16), ("snappy", 4096), ("zstd", 64), ("zstd", 4096)])
@pytest.mark.parametrize("seed", [1, 2])
def test_compiled_and_reference_writers_give_the_same_files(compression, block_size, seed,
                                                            tmp_path, monkeypatch):
    operations = _operations(seed)
    compiled, reference = tmp_path / "compiled.spl", tmp_path / "reference.spl"
    _write(compiled, operations, compression, block_size)
    _on_reference(monkeypatch, _write, reference, operations, compression, block_size)
    assert compiled.read_bytes() == reference.read_bytes()
    for number, options in enumerate(INDEX_OPTIONS):
        ours, theirs = tmp_path / f"compiled{number}.spi", tmp_path / f"reference{number}.spi"
        sparkey.write_index(ours, compiled, hash_seed=seed, **options)
        _on_reference(monkeypatch, sparkey.write_index, theirs, reference, hash_seed=seed,
                      **options)
        assert ours.read_bytes() == theirs.read_bytes(), options
    with sparkey.LogReader(compiled) as log:
        expected = {}
        for entry in log:
            if entry.kind == sparkey.EntryKind.PUT:
                expected[entry.key] = entry.value
            else:
                expected.pop(entry.key, None)
    sparkey.write_index(compiled.with_suffix(".spi"), compiled, hash_seed=seed)
    with sparkey.open(compiled) as reader:
        assert dict(reader.items()) == expected


def _replay_in_batches(vector, path):
    """The vector's operations with runs of PUTs given to put_many as two columns."""
    header = vector.log_header
    with sparkey.LogWriter(path, vector.compression,
                           block_size=header["compression_block_size"] or 4096,
                           file_identifier=header["file_identifier"]) as writer:
        run = []
        for op, key, value in [*vector.operations(), ("end", None, None)]:
            if op == "P":
                run.append((key, value))
                continue
            if run:
                writer.put_many([k for k, _ in run], [v for _, v in run], threshold=4,
                                parallelism=2)
                run = []
            if op == "D":
                writer.delete(key)
            elif op != "end":
                writer.flush()


@pytest.mark.parametrize("vector", all_vectors(), ids=str)
def test_golden_operations_in_batches_give_the_replayed_log(vector, tmp_path, monkeypatch):
    replayed, compiled, reference = (tmp_path / f"{name}.spl"
                                     for name in ("replayed", "compiled", "reference"))
    replay(vector, replayed)
    _replay_in_batches(vector, compiled)
    _on_reference(monkeypatch, _replay_in_batches, vector, reference)
    assert compiled.read_bytes() == replayed.read_bytes() == reference.read_bytes()


class _Calls:
    """A stand-in for sparkey._native that counts the calls of each of its functions."""

    def __init__(self, module):
        self._module = module
        self.counts = {}

    def __getattr__(self, name):
        function = getattr(self._module, name)

        def counted(*args, **kwargs):
            self.counts[name] = self.counts.get(name, 0) + 1
            return function(*args, **kwargs)
        return counted


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_writer_and_index_build_run_on_the_compiled_core(compression, tmp_path, monkeypatch):
    calls = _Calls(native.module)
    monkeypatch.setattr(native, "module", calls)
    keys = [b"key_%d" % i for i in range(500)]
    with sparkey.Writer(tmp_path / "data", compression, hash_seed=3) as writer:
        writer.put_many(keys, keys)
        writer.put_many(zip(keys, keys))
        writer.put_many(PackedBytes.from_sequence(keys), PackedBytes.from_sequence(keys))
    sparkey.write_index(tmp_path / "data.spi", tmp_path / "data.spl", rules="c")
    assert {name: calls.counts.get(name, 0) >= 1 for name in (
        "frame_puts", "frame_packed", "walk_block", "decode_headers", "fill_slots")} == {
        "frame_puts": True, "frame_packed": True, "walk_block": True, "decode_headers": True,
        "fill_slots": True}
    assert calls.counts["fill_slots"] >= 2  # the canonical build and the c replay


def _outcome(function, *args):
    try:
        result = function(*args)
    except LogFormatError as exc:
        return "LogFormatError", str(exc)
    return tuple(np.frombuffer(part, dtype=np.int64).tolist() if isinstance(part, bytes)
                 else np.asarray(part).tolist() for part in result)


def _damaged_streams(seed, count=300):
    rng = random.Random(seed)
    for _ in range(count):
        length = rng.randrange(1, 40)
        stream = bytearray(rng.choice((0x00, 0x05, 0x7F, 0x80, 0xFF, rng.getrandbits(8)))
                           for _ in range(length))
        yield bytes(stream), rng.randrange(0, length), rng.randrange(0, length + 1)


def test_walk_block_matches_the_reference_on_damaged_blocks():
    for block, pos, stop in _damaged_streams(5):
        for limit in (0, 1, 3, 100):
            assert (_outcome(walk_block, block, pos, stop, limit)
                    == _outcome(reference_walk_block, block, pos, stop, limit))


def test_decode_headers_matches_the_reference_on_damaged_streams():
    rng = random.Random(6)
    for stream, _, _ in _damaged_streams(7):
        starts = np.array(sorted(rng.randrange(0, len(stream) + 2) for _ in range(3)),
                          dtype=np.int64)
        assert (_outcome(decode_headers, stream, starts)
                == _outcome(reference_decode_headers, stream, starts))


@pytest.mark.parametrize("hash_size", [4, 8])
def test_canonical_index_of_distinct_keys_matches_the_reference(hash_size, tmp_path,
                                                                 monkeypatch):
    """A log of PUTs of distinct keys takes the compiled build's replay without resolving
    live entries; two keys share a 32-bit hash in the 4-byte case (seed 11 over 100K keys)."""
    log = tmp_path / "data.spl"
    keys = [b"key_%d" % i for i in range(100_000)]
    with sparkey.LogWriter(log, file_identifier=5) as writer:
        writer.put_many(keys, keys)
    ours, theirs = tmp_path / "compiled.spi", tmp_path / "reference.spi"
    sparkey.write_index(ours, log, hash_seed=11, hash_size=hash_size)
    _on_reference(monkeypatch, sparkey.write_index, theirs, log, hash_seed=11,
                  hash_size=hash_size)
    assert ours.read_bytes() == theirs.read_bytes()


@pytest.mark.parametrize("block_size", [10, 16, 64, 4096])
def test_block_cutter_matches_the_reference_chunk_after_chunk(block_size, monkeypatch):
    rng = np.random.default_rng(block_size)
    compiled, reference = BlockCutter(block_size), BlockCutter(block_size)
    for _ in range(30):
        count = int(rng.integers(0, 50))
        header_sizes = rng.integers(2, 6, count)
        sizes = header_sizes + rng.choice([0, 1, 7, 60, 300, 5000], count)
        cut = compiled.cut(sizes, header_sizes)
        assert cut == _on_reference(monkeypatch, reference.cut, sizes, header_sizes)
        assert (compiled.used, compiled.started) == (reference.used, reference.started)
