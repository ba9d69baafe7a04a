"""Writing: logs and indexes rebuilt from each golden vector's operations match the reference."""

import dataclasses

import numpy as np
import pytest

import sparkey
from sparkey.format import EntryKind, IndexHeader, LogHeader, decode_address, delete_size

from .golden import all_vectors, decompressed_blocks, items_digest, replay, slot_table

def _written_by_java_without_overwrites(vector):
    puts = [key for op, key, _ in vector.operations() if op == "P"]
    deletes = [key for op, key, _ in vector.operations() if op == "D"]
    return vector.producer == "java" and len(set(puts)) == len(puts) and not deletes


def _raw_entries(path):
    with sparkey.LogReader(path) as log:
        return [(entry.kind, entry.key, entry.value) for entry in log]


def _without_long_deletes(entries):
    """The entries a writer obeying pitfall P3 keeps: no DELETE longer than every PUT key so far."""
    kept, dropped, longest = [], [], 0
    for kind, key, value in entries:
        if kind == EntryKind.PUT:
            longest = max(longest, len(key))
        elif len(key) > longest:
            dropped.append(key)
            continue
        kept.append((kind, key, value))
    return kept, dropped


VECTORS = all_vectors()
JAVA_WITHOUT_OVERWRITES = [v for v in VECTORS if _written_by_java_without_overwrites(v)]
WITHOUT_LONG_DELETES = [v for v in VECTORS
                        if not _without_long_deletes(_raw_entries(v.log_path))[1]]


@pytest.fixture(params=VECTORS, ids=str)
def vector(request):
    return request.param


def _header_fields(data):
    return dataclasses.asdict(LogHeader.unpack(data))


def test_index_rebuilt_from_the_golden_log_is_byte_identical(vector, tmp_path):
    out = tmp_path / "data.spi"
    sparkey.write_index(out, vector.log_path, rules=vector.producer, hash_seed=vector.hash_seed,
                        hash_size=vector.requested_hash_size)
    assert out.read_bytes() == vector.index_path.read_bytes()


@pytest.mark.parametrize("method", ["memory", "sorting"])
@pytest.mark.parametrize("vector", JAVA_WITHOUT_OVERWRITES, ids=str)
def test_canonical_index_equals_java_for_logs_without_overwrites(vector, method, tmp_path):
    """sparkey-java's layout is canonical when no key is written twice (and no DELETEs)."""
    out = tmp_path / "data.spi"
    sparkey.write_index(out, vector.log_path, hash_seed=vector.hash_seed, method=method,
                        max_memory_bytes=1 << 20)
    assert out.read_bytes() == vector.index_path.read_bytes()


def test_canonical_index_reads_like_the_reference(vector, tmp_path):
    log = tmp_path / "data.spl"
    log.write_bytes(vector.log_path.read_bytes())
    sparkey.write_index(tmp_path / "data.spi", log, hash_seed=vector.hash_seed,
                        hash_size=vector.requested_hash_size)
    golden = IndexHeader.unpack(vector.index_path.read_bytes())
    with sparkey.open(tmp_path / "data.spi") as reader:
        reader._check()
        assert items_digest(reader.items()) == vector.manifest["expected_sha256"]
        assert list(reader) == (vector.live_order() or list(reader))
        header = reader.index_header
    assert (header.num_entries, header.hash_capacity, header.data_end) == (
        golden.num_entries, golden.hash_capacity, golden.data_end)
    if vector.producer == "c":  # a history-dependent layout, but the same displacements
        assert (header.max_displacement, header.total_displacement) == (
            golden.max_displacement, golden.total_displacement)


def test_replayed_log_matches_the_golden_log(vector, tmp_path):
    ours = tmp_path / "data.spl"
    replay(vector, ours)
    golden_bytes, our_bytes = vector.log_path.read_bytes(), ours.read_bytes()
    kept, dropped = _without_long_deletes(_raw_entries(vector.log_path))
    assert _raw_entries(ours) == kept
    expected_header = _header_fields(golden_bytes)
    actual_header = _header_fields(our_bytes)
    if dropped:  # libsparkey wrote DELETEs of keys longer than any PUT key (pitfall P3)
        assert vector.name.startswith("c_deletes")
        expected_header["num_deletes"] -= len(dropped)
        expected_header["delete_size"] -= sum(delete_size(len(key)) for key in dropped)
        expected_header["data_end"] = actual_header["data_end"]
        assert actual_header == expected_header
        return
    if vector.producer == "java" and vector.compression == sparkey.Compression.NONE:
        # sparkey-java records max_entries_per_block = 1 for uncompressed logs, libsparkey 0
        assert (expected_header.pop("max_entries_per_block"),
                actual_header.pop("max_entries_per_block")) == (1, 0)
    if vector.compression == sparkey.Compression.NONE:
        assert actual_header == expected_header
        assert our_bytes[84:] == golden_bytes[84:]
    else:  # compressed bytes depend on the codec build (pitfall P10): compare blocks
        expected_header.pop("data_end")
        actual_header.pop("data_end")
        assert actual_header == expected_header
        assert ([block for _, block in decompressed_blocks(ours)]
                == [block for _, block in decompressed_blocks(vector.log_path)])


@pytest.mark.parametrize("vector", WITHOUT_LONG_DELETES, ids=str)
def test_index_over_the_replayed_log_matches_the_golden_index(vector, tmp_path):
    """(The c_deletes logs hold DELETEs we never write, so their replayed logs differ.)"""
    ours = tmp_path / "data.spl"
    replay(vector, ours)
    sparkey.write_index(tmp_path / "data.spi", ours, rules=vector.producer,
                        hash_seed=vector.hash_seed, hash_size=vector.requested_hash_size)
    if ours.read_bytes() == vector.log_path.read_bytes():
        assert (tmp_path / "data.spi").read_bytes() == vector.index_path.read_bytes()
        return
    golden_header, golden_hashes, golden_addresses = slot_table(vector.index_path)
    header, hashes, addresses = slot_table(tmp_path / "data.spi")
    assert dataclasses.replace(header, data_end=golden_header.data_end) == golden_header
    assert np.array_equal(hashes, golden_hashes)
    assert _block_ordinals(addresses, header, ours) == _block_ordinals(
        golden_addresses, golden_header, vector.log_path)


def _block_ordinals(addresses, header, log_path):
    """Slot addresses rewritten as (block number, entry index): independent of block sizes."""
    if LogHeader.unpack(log_path.read_bytes()).compression_type == sparkey.Compression.NONE:
        return addresses.tolist()
    ordinal = {offset: i for i, (offset, _) in enumerate(decompressed_blocks(log_path))}
    result = []
    for address in addresses.tolist():
        position, index = decode_address(address, header.entry_block_bits)
        result.append((ordinal[position], index) if address else None)
    return result


def test_store_written_from_the_operations_reads_as_expected(vector, tmp_path):
    with sparkey.Writer(tmp_path / "data", vector.compression,
                        block_size=vector.log_header["compression_block_size"] or 4096) as writer:
        for op, key, value in vector.operations():
            if op == "P":
                writer.put(key, value)
            elif op == "D":
                writer.delete(key)
            else:
                writer.flush()
    with sparkey.open(tmp_path / "data") as reader:
        assert items_digest(reader.items()) == vector.manifest["expected_sha256"]
        if vector.live_order() is not None:
            assert list(reader) == vector.live_order()
        reader._check()
