"""sparkey.index, sparkey.canonical, sparkey.robinhood: table builds, options, file handling."""

import dataclasses
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import sparkey
import sparkey.index.writer
from sparkey import canonical, robinhood
from sparkey.errors import LogFormatError
from sparkey.format import EntryKind
from sparkey.murmur import hash32

from .golden import VECTORS_DIR, slot_table


def test_robinhood_worked_example():
    """The docstring example of sparkey.robinhood: x, y (home 2), z (home 3), then w (home 2)."""
    hashes = np.array([2, 9, 3, 16], dtype=np.uint64)
    addresses = np.array([100, 101, 102, 103], dtype=np.uint64)
    zeros = np.zeros(4, dtype=np.int64)
    for rules in ("c", "java"):
        slot_hashes, slot_addresses, garbage = robinhood.replay(
            hashes, addresses, np.zeros(4, dtype=np.uint8), zeros + 1, zeros,
            lambda i: b"xyzw"[i:i + 1], 7, rules)
        assert slot_addresses.tolist() == [0, 0, 100, 101, 103, 102, 0]
        assert garbage == 0


def test_robinhood_overwrite_and_delete_garbage():
    hashes = np.array([5, 5, 5], dtype=np.uint64)
    kinds = np.array([EntryKind.PUT, EntryKind.PUT, EntryKind.DELETE], dtype=np.uint8)
    key_lens, value_lens = np.array([1, 1, 1]), np.array([3, 4, 0])
    for rules, expected in (("c", 6 + 7 + 3), ("java", 6 + 7)):  # both PUTs (+ the DELETE)
        slot_hashes, slot_addresses, garbage = robinhood.replay(
            hashes, np.array([90, 95, 101], dtype=np.uint64), kinds, key_lens, value_lens,
            lambda i: b"k", 3, rules)
        assert not slot_addresses.any() and garbage == expected


def test_canonical_worked_example():
    assert canonical.place_wrapped(np.array([0, 3, 4, 4], dtype=np.uint64), 5).tolist() == [
        1, 3, 4, 0]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_canonical_placement_equals_java_insertion_of_unique_keys(data):
    capacity = data.draw(st.integers(1, 40))
    homes = data.draw(st.lists(st.integers(0, capacity - 1), max_size=capacity))
    hashes = np.array(homes, dtype=np.uint64)
    count = len(homes)
    addresses = np.arange(100, 100 + count, dtype=np.uint64)
    _, java_addresses, _ = robinhood.replay(
        hashes, addresses, np.zeros(count, dtype=np.uint8), np.full(count, 2),
        np.zeros(count), lambda i: i.to_bytes(2, "little"), capacity, "java")
    order = canonical.order_by_home(hashes)
    slots = canonical.place_wrapped(hashes[order], capacity)
    table = np.zeros(capacity, dtype=np.uint64)
    table[slots] = addresses[order]
    assert table.tolist() == java_addresses.tolist()


def test_live_entries_resolves_hash_collisions_by_key():
    hashes = np.array([1, 2, 1, 1, 3, 2], dtype=np.uint64)
    kinds = np.array([0, 0, 0, 1, 0, 0], dtype=np.uint8)
    keys = [b"a", b"b", b"c", b"a", b"d", b"b"]
    assert canonical.live_entries(hashes, kinds, keys.__getitem__).tolist() == [2, 4, 5]
    assert canonical.live_entries(hashes[:0], kinds[:0], keys.__getitem__).tolist() == []


def _write_log(path, operations, compression="none", block_size=4096):
    with sparkey.LogWriter(path, compression, block_size, file_identifier=1) as writer:
        for key, value in operations:
            if value is None:
                writer.delete(key)
            else:
                writer.put(key, value)


def _keys_homed_near_the_end(count, capacity, seed, span):
    keys, i = [], 0
    while len(keys) < count:
        key = b"w%d" % i
        if hash32(key, seed) % capacity >= capacity - span:
            keys.append(key)
        i += 1
    return keys


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_sorting_build_equals_memory_build_across_partitions(tmp_path, monkeypatch, compression):
    """Small partitions (~16 entries), a cluster wrapping past partition 0, overwrites, deletes."""
    monkeypatch.setattr(sparkey.index.writer, "SORTING_BYTES_PER_ENTRY", 1 << 16)
    seed = 77
    rng = np.random.default_rng(1)
    operations = [(b"key_%d" % i, b"v%d" % i) for i in range(200)]
    operations += [(b"key_%d" % i, None) for i in rng.integers(0, 200, 20).tolist()]
    operations += [(b"key_%d" % i, b"again") for i in rng.integers(0, 200, 20).tolist()]
    capacity = 1 | int((len(operations) - 20 + 60) * 1.3)
    operations += [(key, b"end") for key in _keys_homed_near_the_end(60, capacity, seed, 8)]
    _write_log(tmp_path / "data.spl", operations, compression, 64)
    sparkey.write_index(tmp_path / "memory.spi", tmp_path / "data.spl", hash_seed=seed)
    sparkey.write_index(tmp_path / "sorting.spi", tmp_path / "data.spl", hash_seed=seed,
                        method="sorting", max_memory_bytes=1 << 20)
    assert (tmp_path / "sorting.spi").read_bytes() == (tmp_path / "memory.spi").read_bytes()
    header, hashes, addresses = slot_table(tmp_path / "memory.spi")
    assert header.hash_capacity == capacity
    assert (addresses[:40] != 0).all()  # the wrapped cluster spans several partitions
    os.replace(tmp_path / "memory.spi", tmp_path / "data.spi")
    with sparkey.open(tmp_path / "data") as reader:
        reader._check()
        expected = {}
        for key, value in operations:
            expected.pop(key, None)
            if value is not None:
                expected[key] = value
        assert dict(reader.items()) == expected


@pytest.mark.parametrize("rules", ["c", "java", "canonical"])
def test_eight_byte_addresses(tmp_path, rules):
    """Many entries per block need many entry bits, leaving too few for 4-byte addresses."""
    rng = np.random.default_rng(2)
    operations = [(b"%05d" % i, rng.bytes(8)) for i in range(20000)]
    _write_log(tmp_path / "data.spl", operations, "snappy", 1 << 20)
    header = sparkey.write_index(tmp_path / "data.spi", tmp_path / "data.spl", rules=rules)
    assert header.address_size == 8 and header.entry_block_bits >= 12
    with sparkey.open(tmp_path / "data") as reader:
        sample = [key for key, _ in operations[::997]]
        assert reader.get_many(sample) == [dict(operations)[key] for key in sample]
        assert len(reader) == 20000


@pytest.mark.parametrize("rules", ["c", "java", "canonical"])
def test_hash_size_and_sparsity_options(tmp_path, rules):
    _write_log(tmp_path / "data.spl", [(b"k%d" % i, b"v") for i in range(100)])
    sparsity = 1.3 if rules == "c" else 2.5
    header = sparkey.write_index(tmp_path / "data.spi", tmp_path / "data.spl", rules=rules,
                                 hash_size=8, sparsity=sparsity, hash_seed=3)
    assert (header.hash_size, header.hash_capacity, header.hash_seed) == (
        8, 1 | int(100 * sparsity), 3)
    with sparkey.open(tmp_path / "data") as reader:
        reader._check()
        assert reader[b"k42"] == b"v"


def test_index_is_replaced_atomically(tmp_path):
    _write_log(tmp_path / "data.spl", [(b"a", b"1")])
    sparkey.write_index(tmp_path / "data.spi", tmp_path / "data.spl")
    with sparkey.open(tmp_path / "data") as old:
        with sparkey.LogWriter.append(tmp_path / "data.spl") as writer:
            writer.put(b"a", b"2")
        sparkey.write_index(tmp_path / "data.spi", tmp_path / "data.spl")
        assert old[b"a"] == b"1"
    with sparkey.open(tmp_path / "data") as new:
        assert new[b"a"] == b"2"
    assert sorted(os.listdir(tmp_path)) == ["data.spi", "data.spl"]


def test_failed_build_leaves_no_files(tmp_path):
    _write_log(tmp_path / "data.spl", [(b"a", b"1"), (b"b", b"2")])
    data = bytearray((tmp_path / "data.spl").read_bytes())
    data[88] = 0x7F  # the second entry's key length now runs past data_end
    (tmp_path / "data.spl").write_bytes(bytes(data))
    for method in ("memory", "sorting"):
        with pytest.raises(LogFormatError):
            sparkey.write_index(tmp_path / "data.spi", tmp_path / "data.spl", method=method)
    assert os.listdir(tmp_path) == ["data.spl"]


def test_entry_index_beyond_the_header_bound_is_refused(tmp_path):
    _write_log(tmp_path / "data.spl", [(b"k%d" % i, b"v") for i in range(10)], "zstd", 1024)
    data = bytearray((tmp_path / "data.spl").read_bytes())
    data[80:84] = (5).to_bytes(4, "little")  # the block really holds 10 entries
    (tmp_path / "data.spl").write_bytes(bytes(data))
    with pytest.raises(LogFormatError) as info:
        sparkey.write_index(tmp_path / "data.spi", tmp_path / "data.spl", rules="java")
    assert info.value.field == "max_entries_per_block"


def test_reads_an_index_with_entry_bits_over_an_uncompressed_log(tmp_path):
    """libsparkey derives entry_block_bits 1 from a sparkey-java NONE log (pitfall P1)."""
    vector = VECTORS_DIR / "j_kv1000_none"
    (tmp_path / "data.spl").write_bytes((vector / "data.spl").read_bytes())
    header, hashes, addresses = slot_table(vector / "data.spi")
    header = dataclasses.replace(header, entry_block_bits=1)
    slots = np.zeros(len(hashes), dtype=[("hash", "<u4"), ("address", "<u4")])
    slots["hash"], slots["address"] = hashes, addresses << np.uint64(1)
    (tmp_path / "data.spi").write_bytes(header.pack() + slots.tobytes())
    with sparkey.open(tmp_path / "data") as reader:
        reader._check()
        keys = [b"key_%d" % i for i in range(1000)]
        assert reader.get_many(keys) == [b"value_%d" % i for i in range(1000)]
        assert reader[b"key_7"] == b"value_7"
        assert list(reader) == keys
