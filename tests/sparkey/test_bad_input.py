"""Bad input: truncated files, corrupt headers and bodies, random bytes.

Every failure must be a SparkeyError subclass (or a KeyError-free None for a missing key); no
other exception, no crash, no unbounded allocation.
"""

import pathlib
import struct
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import sparkey
from sparkey.errors import IndexFormatError, LogFormatError, SparkeyError
from sparkey.format import LogHeader

COMPRESSIONS = ["none", "snappy", "zstd"]


def _make_store(base, compression):
    with sparkey.Writer(base, compression, block_size=32, hash_seed=1) as writer:
        for i in range(40):
            writer.put(b"key_%d" % i, b"value_%d" % i * (i % 5))
        writer.put(b"big", b"B" * 100)
        writer.delete(b"key_3")
        writer.put(b"key_4", b"again")
    return sorted(set(b"key_%d" % i for i in range(40)) | {b"big", b"nope"})


def _read_everything(base, keys):
    """Exercise every read path; return normally or raise whatever the library raises."""
    with sparkey.open(base) as reader:
        list(reader.items())
        [reader.get(key) for key in keys]
        reader.get_many(keys)
        len(reader)
    with sparkey.LogReader(pathlib.Path(base).with_suffix(".spl")) as log:
        for entry in log:
            log.entry_at(entry.position, entry.entry_index)
        list(log.scan())


def _expect_sparkey_errors_only(base, keys):
    try:
        _read_everything(base, keys)
    except SparkeyError:
        pass
    try:
        sparkey.write_index(pathlib.Path(base).with_suffix(".spi"),
                            pathlib.Path(base).with_suffix(".spl"), rules="c")
        _read_everything(base, keys)
    except SparkeyError:
        pass


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_truncated_log(tmp_path, compression):
    """Every length through the header and first entries, then every 7th."""
    base = tmp_path / "data"
    _make_store(base, compression)
    log = base.with_suffix(".spl")
    data = log.read_bytes()
    for length in [*range(120), *range(120, len(data), 7)]:
        log.write_bytes(data[:length])
        with pytest.raises(LogFormatError):
            sparkey.open(base)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_truncated_or_padded_index(tmp_path, compression):
    base = tmp_path / "data"
    _make_store(base, compression)
    index = base.with_suffix(".spi")
    data = index.read_bytes()
    lengths = [*range(120), *range(120, len(data), 7)]
    for candidate in [data[:n] for n in lengths] + [data + b"\0", data + b"\0" * 12]:
        index.write_bytes(candidate)
        with pytest.raises(IndexFormatError):
            sparkey.open(base)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_log_body_shorter_than_data_end(tmp_path, compression):
    base = tmp_path / "data"
    _make_store(base, compression)
    log = base.with_suffix(".spl")
    data = bytearray(log.read_bytes())
    header = LogHeader.unpack(data)
    struct.pack_into("<Q", data, 32, header.data_end + 1)
    log.write_bytes(bytes(data))
    with pytest.raises(LogFormatError) as info:
        sparkey.LogReader(log)
    assert info.value.field in ("data_end", "put_size")


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("offset", range(0, 84, 4))
def test_every_log_header_word_corrupted(tmp_path, compression, offset):
    base = tmp_path / "data"
    keys = _make_store(base, compression)
    log = base.with_suffix(".spl")
    data = bytearray(log.read_bytes())
    for value in (0, 1, 0xFF, 0xFFFFFFFF, 0x7FFFFFFF):
        data[offset:offset + 4] = value.to_bytes(4, "little")
        log.write_bytes(bytes(data))
        _expect_sparkey_errors_only(base, keys)


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("offset", range(0, 112, 4))
def test_every_index_header_word_corrupted(tmp_path, compression, offset):
    base = tmp_path / "data"
    keys = _make_store(base, compression)
    index = base.with_suffix(".spi")
    data = bytearray(index.read_bytes())
    for value in (0, 1, 3, 0xFF, 0xFFFFFFFF):
        data[offset:offset + 4] = value.to_bytes(4, "little")
        index.write_bytes(bytes(data))
        try:
            _read_everything(base, keys)
        except SparkeyError:
            pass


STORES = {}


def _store_bytes(compression):
    if compression not in STORES:
        with tempfile.TemporaryDirectory() as directory:
            base = pathlib.Path(directory) / "data"
            keys = _make_store(base, compression)
            STORES[compression] = (base.with_suffix(".spl").read_bytes(),
                                   base.with_suffix(".spi").read_bytes(), keys)
    return STORES[compression]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(compression=st.sampled_from(COMPRESSIONS), in_log=st.booleans(),
       flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1,
                      max_size=6))
def test_random_corruption_of_a_valid_store(compression, in_log, flips):
    log_bytes, index_bytes, keys = _store_bytes(compression)
    target = bytearray(log_bytes if in_log else index_bytes)
    for position, value in flips:
        target[position % len(target)] = value
    with tempfile.TemporaryDirectory() as directory:
        base = pathlib.Path(directory) / "data"
        base.with_suffix(".spl").write_bytes(bytes(target) if in_log else log_bytes)
        base.with_suffix(".spi").write_bytes(index_bytes if in_log else bytes(target))
        _expect_sparkey_errors_only(base, keys)


@settings(max_examples=100, deadline=None)
@given(log_body=st.binary(max_size=300), index_body=st.binary(max_size=300),
       compression=st.sampled_from([0, 1, 2]))
def test_random_bytes_behind_plausible_headers(log_body, index_body, compression):
    log_header = LogHeader(file_identifier=5, compression_type=compression,
                           compression_block_size=64 if compression else 0,
                           num_puts=1, put_size=len(log_body) or 2,
                           data_end=84 + len(log_body), max_entries_per_block=1).pack()
    index_header = struct.pack("<IIIIIQQQQQQIIQQIQQ", 0x9A11318F, 1, 1, 5, 0, 84 + len(log_body),
                               0, 0, 1, 0, 1, 4, 4, max(1, len(index_body) // 8), 0, 0, 0, 0)
    with tempfile.TemporaryDirectory() as directory:
        base = pathlib.Path(directory) / "data"
        base.with_suffix(".spl").write_bytes(log_header + log_body)
        base.with_suffix(".spi").write_bytes(index_header + index_body)
        _expect_sparkey_errors_only(base, [b"", b"a", log_body[:4]])


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=400))
def test_random_files(data):
    with tempfile.TemporaryDirectory() as directory:
        base = pathlib.Path(directory) / "data"
        base.with_suffix(".spl").write_bytes(data)
        base.with_suffix(".spi").write_bytes(data)
        with pytest.raises(SparkeyError):
            sparkey.open(base)
        with pytest.raises(SparkeyError):
            sparkey.write_index(base.with_suffix(".spi"), base.with_suffix(".spl"))
