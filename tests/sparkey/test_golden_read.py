"""Reading every golden vector written by libsparkey and sparkey-java."""

import dataclasses

import pytest

import sparkey
from sparkey.format import EntryKind, IndexHeader, LogHeader, encode_address

from .golden import all_vectors, items_digest

VECTORS = all_vectors()


@pytest.fixture(params=VECTORS, ids=str)
def vector(request):
    return request.param


@pytest.fixture
def reader(vector):
    with sparkey.open(vector.index_path) as store:
        yield store


def test_headers_decode_to_the_manifest_values(vector):
    log = LogHeader.unpack(vector.log_path.read_bytes())
    index = IndexHeader.unpack(vector.index_path.read_bytes())
    assert {k: int(v) for k, v in dataclasses.asdict(log).items()} == vector.log_header
    assert dataclasses.asdict(index) == vector.manifest["hash_header"]
    assert log.pack() == vector.log_path.read_bytes()[:84]
    assert index.pack() == vector.index_path.read_bytes()[:112]


def test_expected_entries(vector, reader):
    expected = vector.expected()
    if expected is not None:
        assert {key: reader[key] for key in expected} == expected
    assert items_digest(reader.items()) == vector.manifest["expected_sha256"]
    assert len(reader) == vector.manifest["num_live_entries"]


def test_absent_keys(vector, reader):
    for key in vector.absent_keys():
        assert key not in reader
        assert reader.get(key) is None
        with pytest.raises(KeyError):
            reader[key]


def test_live_iteration_order(vector, reader):
    order = vector.live_order()
    if order is None:
        pytest.skip("the manifest records the order by digest only")
    assert list(reader) == order
    assert [key for key, _ in reader.items()] == order


def test_get_many_matches_single_lookups(vector, reader):
    keys = list(reader) + vector.absent_keys()
    assert reader.get_many(keys) == [reader.get(key) for key in keys]


def test_raw_log_entries_and_addresses(vector):
    bits = IndexHeader.unpack(vector.index_path.read_bytes()).entry_block_bits
    with sparkey.LogReader(vector.log_path) as log:
        entries = list(log)
    recorded = vector.manifest["log_entries"]
    assert len(entries) == len(recorded)
    for entry, expected in zip(entries, recorded):
        assert entry.kind == EntryKind[expected["type"]]
        assert entry.key.hex() == expected["key_hex"]
        if entry.kind == EntryKind.PUT:
            assert entry.value.hex() == expected["value_hex"]
        else:
            assert entry.value is None
        assert (entry.position, entry.entry_index) == (
            expected["block_position"], expected["entry_index"])
        assert encode_address(entry.position, entry.entry_index, bits) == expected["address"]


def test_random_access_by_address(vector):
    with sparkey.LogReader(vector.log_path) as log:
        for entry in log:
            assert log.entry_at(entry.position, entry.entry_index) == entry


def test_index_invariants(reader):
    reader._check()
