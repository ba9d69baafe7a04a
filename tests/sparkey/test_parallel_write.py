"""LogWriter.put_many / Writer.put_many: the same log as put, any parallelism, errors, golden."""

import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import sparkey
from sparkey.codec import codec_for
from sparkey.errors import ClosedError, EntryTypeError
from sparkey.log import bulk
from sparkey.packed import PackedBytes

from .golden import all_vectors, decompressed_blocks

COMPRESSIONS = ["none", "snappy", "zstd"]


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of a few entries, so that blocks and open blocks cross many chunk boundaries."""
    monkeypatch.setattr(bulk, "FIRST_CHUNK_ROWS", 3)
    monkeypatch.setattr(bulk, "TARGET_CHUNK_BYTES", 64)


def _entries(count, seed=0):
    """Keys and values of many sizes: empty, 1-byte, 2-byte VLQ headers, larger than a block."""
    entries = []
    for i in range(count):
        key = b"k%d" % (i * seed % 97) if i % 11 else b"K" * (i % 300)
        value = bytes((i * 7 + j) % 251 for j in range((i * 37 + seed) % [5, 140, 700][i % 3]))
        entries.append((key, value))
    return entries


def _by_put(path, entries, compression, block_size, before=(), after=()):
    with sparkey.LogWriter(path, compression, block_size, file_identifier=11) as writer:
        for key, value in [*before, *entries, *after]:
            writer.put(key, value)
    return path.read_bytes()


def _by_put_many(path, items, compression, block_size, before=(), after=(), **options):
    """The log of ``put_many(items)``, or ``put_many(keys, values)`` when ``items`` is a pair
    of columns (a ``Columns``)."""
    with sparkey.LogWriter(path, compression, block_size, file_identifier=11) as writer:
        for key, value in before:
            writer.put(key, value)
        writer.put_many(*items if isinstance(items, Columns) else (items,), **options)
        for key, value in after:
            writer.put(key, value)
    return path.read_bytes()


class Columns(tuple):
    """``(keys, values)`` passed to put_many as two arguments."""


def _forms(entries):
    keys, values = [k for k, _ in entries], [v for _, v in entries]
    return {
        "pairs": entries,
        "iterator": iter(entries),
        "lists": Columns((keys, values)),
        "packed": Columns((PackedBytes.from_sequence(keys), PackedBytes.from_sequence(values))),
        "mapping": dict(entries),
    }


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("block_size", [10, 64, 4096])
@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_log_is_byte_identical_to_put(tmp_path, small_chunks, compression, block_size,
                                      parallelism):
    """Compression is deterministic, so even compressed logs match byte for byte."""
    entries = _entries(400, seed=block_size)
    before, after = [(b"open", b"block")], [(b"after", b"x" * 30)]
    for form, items in _forms(entries).items():
        in_order = list(dict(entries).items()) if form == "mapping" else entries
        expected = _by_put(tmp_path / "a.spl", in_order, compression, block_size, before, after)
        actual = _by_put_many(tmp_path / "b.spl", items, compression, block_size, before, after,
                              parallelism=parallelism, threshold=0)
        assert actual == expected, form


@pytest.mark.parametrize("compression", ["snappy", "zstd"])
def test_compressed_logs_have_the_same_blocks_and_header(tmp_path, compression):
    entries = _entries(300, seed=5)
    _by_put(tmp_path / "a.spl", entries, compression, 256)
    _by_put_many(tmp_path / "b.spl", entries, compression, 256, parallelism=2, threshold=0)
    assert ([block for _, block in decompressed_blocks(tmp_path / "a.spl")]
            == [block for _, block in decompressed_blocks(tmp_path / "b.spl")])
    with sparkey.LogReader(tmp_path / "a.spl") as a, sparkey.LogReader(tmp_path / "b.spl") as b:
        assert a.header == b.header
        assert list(a) == list(b)


@settings(max_examples=60, deadline=None)
@given(entries=st.lists(st.tuples(st.binary(max_size=40), st.binary(max_size=200)), max_size=60),
       before=st.lists(st.tuples(st.binary(max_size=5), st.binary(max_size=30)), max_size=3),
       compression=st.sampled_from(COMPRESSIONS), block_size=st.sampled_from([10, 13, 32, 100]),
       parallelism=st.sampled_from([1, 2]), first_rows=st.integers(1, 8),
       target_bytes=st.sampled_from([1, 50, 1 << 20]))
def test_any_entries_and_chunking_give_the_put_log(tmp_path_factory, entries, before,
                                                   compression, block_size, parallelism,
                                                   first_rows, target_bytes):
    directory = tmp_path_factory.mktemp("prop")
    original = bulk.FIRST_CHUNK_ROWS, bulk.TARGET_CHUNK_BYTES
    bulk.FIRST_CHUNK_ROWS, bulk.TARGET_CHUNK_BYTES = first_rows, target_bytes
    try:
        actual = _by_put_many(directory / "b.spl", entries, compression, block_size, before,
                              parallelism=parallelism, threshold=0)
    finally:
        bulk.FIRST_CHUNK_ROWS, bulk.TARGET_CHUNK_BYTES = original
    assert actual == _by_put(directory / "a.spl", entries, compression, block_size, before)


class _RecordingColumn:
    """A lazy column that remembers which threads packed it (and can fail on one range)."""

    def __init__(self, items, fail_at=None):
        self._packed = PackedBytes.from_sequence(items)
        self._fail_at = fail_at
        self.threads = set()
        self._lock = threading.Lock()

    def __len__(self):
        return len(self._packed)

    def pack(self, start, stop):
        with self._lock:
            self.threads.add(threading.current_thread().name)
        if self._fail_at is not None and start <= self._fail_at < stop:
            raise RuntimeError(f"cannot encode row {self._fail_at}")
        return self._packed.pack(start, stop)


@pytest.mark.parametrize("count, pooled", [(99, False), (100, True)])
def test_threshold_decides_between_the_caller_and_a_pool(tmp_path, small_chunks, count, pooled):
    keys = [b"%d" % i for i in range(count)]
    values = _RecordingColumn([b"v"] * count)
    with sparkey.LogWriter(tmp_path / "log.spl") as writer:
        writer.put_many(keys, values, parallelism=2, threshold=100)
    assert any(name.startswith("sparkey-put-many") for name in values.threads) is pooled
    assert (threading.current_thread().name in values.threads) is not pooled


@pytest.mark.parametrize("count, pooled", [(99, False), (100, True)])
def test_threshold_of_an_iterator_is_found_by_reading_ahead(tmp_path, monkeypatch, count,
                                                            pooled):
    used = []
    original = bulk.BulkAppend.commits
    monkeypatch.setattr(bulk.BulkAppend, "commits",
                        lambda self, source, workers: used.append(workers) or original(
                            self, source, workers))
    entries = [(b"%d" % i, b"v") for i in range(count)]
    with sparkey.LogWriter(tmp_path / "log.spl", "zstd") as writer:
        writer.put_many(iter(entries), parallelism=4, threshold=100)
    assert used == [4 if pooled else 1]
    with sparkey.LogReader(tmp_path / "log.spl") as log:
        assert [(e.key, e.value) for e in log] == entries


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_duplicate_keys_last_write_wins(tmp_path, small_chunks, compression):
    entries = [(b"key_%d" % (i % 37), b"value_%d" % i) for i in range(2000)]
    with sparkey.Writer(tmp_path / "data", compression, block_size=128) as writer:
        writer.put_many(entries, parallelism=3, threshold=0)
    last_put = {}  # ordered like live iteration: by each key's last PUT
    for key, value in entries:
        last_put.pop(key, None)
        last_put[key] = value
    with sparkey.open(tmp_path / "data") as reader:
        reader._check()
        assert list(reader.items()) == list(last_put.items())
    with sparkey.LogReader(tmp_path / "data.spl") as log:
        assert [(e.key, e.value) for e in log] == entries


def _fail_compress_after(monkeypatch, calls):
    """Make block compression raise from its call number ``calls + 1`` on (one call per chunk)."""
    original = bulk.compress_blocks
    count = [0]

    def compress_blocks(codec, blocks):
        count[0] += 1
        if count[0] > calls:
            raise OSError("compressor failed")
        return original(codec, blocks)

    monkeypatch.setattr(bulk, "compress_blocks", compress_blocks)


@pytest.mark.parametrize("compression", ["snappy", "zstd"])
@pytest.mark.parametrize("parallelism", [1, 2])
def test_failing_compressor_leaves_a_valid_log_of_whole_blocks(
        tmp_path, small_chunks, monkeypatch, compression, parallelism):
    entries = _entries(500, seed=3)
    path = tmp_path / "log.spl"
    writer = sparkey.LogWriter(path, compression, 64, file_identifier=11)
    writer.put(b"before", b"put")
    _fail_compress_after(monkeypatch, 12)
    with pytest.raises(OSError, match="compressor failed"):
        writer.put_many(entries, parallelism=parallelism, threshold=0)
    monkeypatch.undo()
    with sparkey.LogReader(path) as log:  # flushed: a valid log of the whole blocks written
        kept = [(e.key, e.value) for e in log]
        header = log.header
    assert 1 < len(kept) < len(entries) and kept == [(b"before", b"put"), *entries[:len(kept) - 1]]
    assert header.num_puts == len(kept)
    assert path.read_bytes() == _by_put(tmp_path / "prefix.spl", kept, compression, 64)
    writer.put(b"after", b"failure")  # the writer goes on from what it kept
    writer.close()
    with sparkey.LogReader(path) as log:
        assert [(e.key, e.value) for e in log] == [*kept, (b"after", b"failure")]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_failure_before_any_block_keeps_the_open_block(tmp_path, monkeypatch, compression):
    path = tmp_path / "log.spl"
    writer = sparkey.LogWriter(path, compression, 4096)
    writer.put(b"a", b"1")
    with pytest.raises(RuntimeError, match="row 0"):
        writer.put_many([b"x"], _RecordingColumn([b"y"], fail_at=0), parallelism=2,
                        threshold=0)
    writer.put(b"b", b"2")
    writer.close()
    with sparkey.LogReader(path) as log:
        assert [(e.key, e.value) for e in log] == [(b"a", b"1"), (b"b", b"2")]
        assert log.header.num_puts == 2


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("bad, error, message", [
    ((b"bad", 5), EntryTypeError, "not int"),  # found by a worker
    ((b"bad", b"x", b"y"), ValueError, "pairs"),  # found by the caller, reading the pairs
])
def test_bad_entry_in_a_later_chunk_keeps_the_earlier_ones(tmp_path, small_chunks, compression,
                                                           bad, error, message):
    entries = [(b"k%d" % i, b"v" * 50) for i in range(200)] + [bad]
    path = tmp_path / "log.spl"
    with pytest.raises(error, match=message):
        with sparkey.LogWriter(path, compression, 64) as writer:
            writer.put_many(entries, parallelism=2, threshold=0)
    with sparkey.LogReader(path) as log:
        kept = [(e.key, e.value) for e in log]
    assert 0 < len(kept) <= 200 and kept == entries[:len(kept)]


def test_writer_put_many_builds_a_readable_store(tmp_path):
    keys = PackedBytes.from_sequence([b"key_%d" % i for i in range(5000)])
    values = [("value_%d" % i) for i in range(5000)]  # str values are stored as UTF-8
    with sparkey.Writer(tmp_path / "data", "snappy", block_size=512) as writer:
        writer.put_many(keys, values, parallelism=2, threshold=1000)
        writer.put_many({b"key_3": b"three"})
    with sparkey.open(tmp_path / "data") as reader:
        reader._check()
        assert len(reader) == 5000
        assert reader[b"key_3"] == b"three" and reader[b"key_4999"] == b"value_4999"
        assert reader.get_many([b"key_0", b"nope"]) == [b"value_0", None]


def test_append_then_put_many_continues_the_log(tmp_path):
    entries = _entries(200, seed=9)
    path = tmp_path / "log.spl"
    with sparkey.LogWriter(path, "zstd", 100, file_identifier=11) as writer:
        writer.put_many(entries[:50])
    with sparkey.LogWriter.append(path) as writer:
        writer.put_many(entries[50:], parallelism=2, threshold=0)
    expected = tmp_path / "expected.spl"
    with sparkey.LogWriter(expected, "zstd", 100, file_identifier=11) as writer:
        for key, value in entries[:50]:
            writer.put(key, value)
        writer.flush()
        for key, value in entries[50:]:
            writer.put(key, value)
    assert path.read_bytes() == expected.read_bytes()


def test_put_many_errors(tmp_path):
    writer = sparkey.LogWriter(tmp_path / "log.spl")
    with pytest.raises(ValueError, match="2 keys but 1 values"):
        writer.put_many([b"a", b"b"], [b"1"])
    with pytest.raises(ValueError, match="parallelism must be an int >= 1"):
        writer.put_many([], parallelism=0)
    with pytest.raises(ValueError, match="threshold must be an int >= 0"):
        writer.put_many([], threshold=-1)
    with pytest.raises(ValueError, match=r"\(key, value\) pairs"):
        writer.put_many([(b"a", b"1", b"x")])
    with pytest.raises(TypeError, match="keys must be a sequence of byte strings"):
        writer.put_many(5, [b"1"])
    with pytest.raises(TypeError, match=r"as two arguments, put_many\(keys, values\)"):
        writer.put_many(([b"a", b"b"], [b"1", b"2"]))
    with pytest.raises(TypeError, match="as two arguments"):
        writer.put_many((np.array([b"a"]), np.array([b"1"])))
    writer.put_many([])
    assert writer.header.num_puts == 0
    writer.close()
    with pytest.raises(ClosedError, match="closed LogWriter"):
        writer.put_many([(b"a", b"1")])


def _golden_operations_with_put_many(vector, log_path):
    """Replay a golden vector with put_many for every run of PUTs between flushes and deletes."""
    header = vector.log_header
    with sparkey.LogWriter(log_path, vector.compression,
                           block_size=header["compression_block_size"] or 4096,
                           file_identifier=header["file_identifier"]) as writer:
        run = []
        for op, key, value in [*vector.operations(), ("F", None, None)]:
            if op == "P":
                run.append((key, value))
                continue
            writer.put_many(run, parallelism=2, threshold=0)
            run = []
            if op == "D":
                writer.delete(key)
            else:
                writer.flush()


@pytest.mark.parametrize("vector", all_vectors(), ids=str)
def test_golden_vectors_replayed_with_put_many_match_put(vector, tmp_path):
    """The replay through put (test_golden_write) matches libsparkey's and sparkey-java's logs;
    put_many writes the same bytes, and its store reads back the golden contents."""
    ours = tmp_path / "data.spl"
    _golden_operations_with_put_many(vector, ours)
    with sparkey.LogReader(vector.log_path) as golden, sparkey.LogReader(ours) as log:
        puts = [(e.key, e.value) for e in golden if e.value is not None]
        assert [(e.key, e.value) for e in log if e.value is not None] == puts
    if vector.producer == "c" and not vector.name.startswith("c_deletes"):
        golden_bytes = vector.log_path.read_bytes()
        if vector.compression == sparkey.Compression.NONE:
            assert ours.read_bytes() == golden_bytes
        else:
            assert ([block for _, block in decompressed_blocks(ours)]
                    == [block for _, block in decompressed_blocks(vector.log_path)])


@pytest.mark.parametrize("compression", ["snappy", "zstd"])
def test_compress_blocks_equals_the_codec_block_by_block(compression):
    """zstd compresses a chunk's blocks in one call; each frame must still be the codec's."""
    codec = codec_for(sparkey.Compression.parse(compression))
    blocks = [bytes(range(i % 256)) * (1 + i % 40) for i in range(1, 300)]
    assert [bytes(payload) for payload in bulk.compress_blocks(codec, blocks)] == [
        codec.compress(block) for block in blocks]


def test_a_tuple_of_two_pairs_is_two_entries_and_two_lists_are_columns(tmp_path):
    with sparkey.LogWriter(tmp_path / "log.spl") as writer:
        writer.put_many(((b"k1", b"v1"), (b"k2", b"v2")))
        writer.put_many([b"k3", b"k4"], [b"v3", b"v4"])
    with sparkey.LogReader(tmp_path / "log.spl") as log:
        assert [(e.key, e.value) for e in log] == [(b"k1", b"v1"), (b"k2", b"v2"),
                                                   (b"k3", b"v3"), (b"k4", b"v4")]
