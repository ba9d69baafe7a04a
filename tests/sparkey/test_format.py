"""sparkey.format: VLQ, entries, addresses, header layouts and their validation."""

import dataclasses
import struct

import numpy as np
import pytest
from hypothesis import given, strategies as st

from sparkey.errors import (
    EntrySizeError, EntryTypeError, FileIdentifierMismatch, IndexFormatError, LogFormatError)
from sparkey.format import (
    Compression, IndexHeader, LogHeader, decode_address, delete_header, delete_size,
    encode_address, entry_bytes, file_pair, put_header, put_size, vlq_decode, vlq_encode,
    vlq_size)

from .golden import VECTORS_DIR


@pytest.mark.parametrize("value, encoded", [
    (0, "00"), (127, "7f"), (128, "8001"), (300, "ac02"), (16384, "808001"),
    (2**64 - 1, "ffffffffffffffffff01")])
def test_vlq_reference_encodings(value, encoded):
    assert vlq_encode(value).hex() == encoded
    assert vlq_size(value) == len(encoded) // 2
    assert vlq_decode(bytes.fromhex(encoded) + b"\xff", 0, len(encoded) // 2) == (
        value, len(encoded) // 2)


@given(st.integers(0, 2**64 - 1))
def test_vlq_round_trip(value):
    encoded = vlq_encode(value)
    assert len(encoded) == vlq_size(value)
    assert vlq_decode(b"\x00" + encoded, 1, 1 + len(encoded)) == (value, 1 + len(encoded))


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff", b"\x80" * 11 + b"\x01"])
def test_vlq_decode_rejects_truncated_and_overlong(data):
    with pytest.raises(LogFormatError):
        vlq_decode(data, 0, len(data))


def test_entry_encodings():
    assert put_header(0, 0) == b"\x01\x00"
    assert put_header(1, 1) == b"\x02\x01"
    assert put_header(127, 300) == b"\x80\x01\xac\x02"
    assert delete_header(300) == b"\x00\xac\x02"
    assert put_size(1, 1) == 4 and put_size(127, 300) == 4 + 127 + 300
    assert delete_size(9) == 11 and delete_size(128) == 1 + 2 + 128


def test_address_worked_example():
    """Vector a_tiny3_snappy_bs64: three entries of the block at 84, entry_block_bits 2."""
    assert [encode_address(84, i, 2) for i in range(3)] == [336, 337, 338]
    assert decode_address(338, 2) == (84, 2)
    assert encode_address(84, 0, 0) == 84


def test_compression_parse():
    assert Compression.parse("ZSTD") is Compression.ZSTD
    assert Compression.parse(1) is Compression.SNAPPY
    assert Compression.parse(Compression.NONE) is Compression.NONE
    for bad in ("lz4", 3, None, True):
        with pytest.raises(ValueError):
            Compression.parse(bad)


def test_file_pair_naming():
    assert file_pair("a/data") == ("a/data.spl", "a/data.spi")
    assert file_pair("data.spl") == ("data.spl", "data.spi")
    assert file_pair("data.spi") == ("data.spl", "data.spi")
    assert file_pair("data.txt") == ("data.txt.spl", "data.txt.spi")


def test_entry_bytes_accepts_bytes_like_and_str():
    assert entry_bytes(b"k") == b"k"
    assert entry_bytes("clé") == "clé".encode("utf-8")
    assert entry_bytes(bytearray(b"ab")) == b"ab"
    assert entry_bytes(memoryview(b"abc")[1:]) == b"bc"


@pytest.mark.parametrize("bad", [1, None, 2.5, ["a"], object()])
def test_entry_bytes_rejects_other_types(bad):
    with pytest.raises(EntryTypeError, match="must be bytes") as info:
        entry_bytes(bad, "value")
    assert isinstance(info.value, TypeError)


def test_entry_bytes_rejects_lengths_java_cannot_read():
    huge = memoryview(np.zeros(2**31, dtype=np.uint8))  # pages are never touched
    with pytest.raises(EntrySizeError, match="2147483647") as info:
        entry_bytes(huge, "key")
    assert isinstance(info.value, ValueError)


# ----------------------------------------------------------------------------- log header

NONE_LOG = (VECTORS_DIR / "c_deletes_none" / "data.spl").read_bytes()[:84]
SNAPPY_LOG = (VECTORS_DIR / "b_kv1000_snappy_bs64" / "data.spl").read_bytes()[:84]
LOG_FIELDS = {  # name: (offset, struct code)
    "magic": (0, "I"), "major_version": (4, "I"), "minor_version": (8, "I"),
    "num_puts": (16, "Q"), "num_deletes": (24, "Q"), "data_end": (32, "Q"),
    "max_key_len": (40, "Q"), "max_value_len": (48, "Q"), "delete_size": (56, "Q"),
    "compression_type": (64, "I"), "compression_block_size": (68, "I"), "put_size": (72, "Q"),
    "max_entries_per_block": (80, "I")}


def _patched(header, field, value, fields):
    offset, code = fields[field]
    data = bytearray(header)
    struct.pack_into("<" + code, data, offset, value)
    return bytes(data)


# (header, field, bad value, field the error names)
BAD_LOG_FIELDS = [
    (NONE_LOG, "magic", 0x49B39C96, "magic"),
    (NONE_LOG, "major_version", 2, "major_version"),
    (NONE_LOG, "major_version", 0, "major_version"),
    (NONE_LOG, "minor_version", 1, "minor_version"),
    (NONE_LOG, "data_end", 83, "data_end"),
    (NONE_LOG, "data_end", 5000, "put_size"),
    (NONE_LOG, "num_puts", 10**6, "num_puts"),
    (NONE_LOG, "num_deletes", 10**6, "num_deletes"),
    (NONE_LOG, "max_key_len", 10**6, "max_key_len"),
    (NONE_LOG, "max_value_len", 10**6, "max_value_len"),
    (NONE_LOG, "delete_size", 0, "num_deletes"),
    (NONE_LOG, "put_size", 10, "num_puts"),
    (NONE_LOG, "compression_type", 3, "compression_type"),
    (NONE_LOG, "max_entries_per_block", 2, "max_entries_per_block"),
    (SNAPPY_LOG, "compression_block_size", 9, "compression_block_size"),
    (SNAPPY_LOG, "max_entries_per_block", 33, "max_entries_per_block"),
    (SNAPPY_LOG, "max_entries_per_block", 0, "max_entries_per_block"),
    (SNAPPY_LOG, "put_size", 0, "num_puts"),
]


@pytest.mark.parametrize("header, field, value, named", BAD_LOG_FIELDS,
                         ids=[f"{f}={v}" for _, f, v, _ in BAD_LOG_FIELDS])
def test_log_header_field_out_of_range(header, field, value, named):
    LogHeader.unpack(header)
    with pytest.raises(LogFormatError) as info:
        LogHeader.unpack(_patched(header, field, value, LOG_FIELDS))
    assert info.value.field == named
    assert named in str(info.value)


@pytest.mark.parametrize("length", [0, 1, 4, 83])
def test_log_header_truncated(length):
    with pytest.raises(LogFormatError, match="truncated"):
        LogHeader.unpack(NONE_LOG[:length])


def test_log_header_round_trip():
    header = LogHeader.unpack(SNAPPY_LOG)
    assert header.pack() == SNAPPY_LOG
    assert header.compression_type is Compression.SNAPPY


# --------------------------------------------------------------------------- index header

INDEX = (VECTORS_DIR / "c_deletes_none" / "data.spi").read_bytes()[:112]
INDEX_FIELDS = {
    "magic": (0, "I"), "major_version": (4, "I"), "minor_version": (8, "I"),
    "file_identifier": (12, "I"), "hash_seed": (16, "I"), "data_end": (20, "Q"),
    "max_key_len": (28, "Q"), "max_value_len": (36, "Q"), "num_puts": (44, "Q"),
    "garbage_size": (52, "Q"), "num_entries": (60, "Q"), "address_size": (68, "I"),
    "hash_size": (72, "I"), "hash_capacity": (76, "Q"), "max_displacement": (84, "Q"),
    "entry_block_bits": (92, "I"), "hash_collisions": (96, "Q"),
    "total_displacement": (104, "Q")}
BAD_INDEX_FIELDS = [
    ("magic", 0, "magic"), ("major_version", 2, "major_version"),
    ("minor_version", 2, "minor_version"), ("data_end", 0, "data_end"),
    ("address_size", 6, "address_size"), ("hash_size", 16, "hash_size"),
    ("hash_capacity", 0, "hash_capacity"), ("num_entries", 300, "num_entries"),
    ("num_puts", 10, "num_entries"), ("max_displacement", 151, "max_displacement"),
    ("entry_block_bits", 32, "entry_block_bits"), ("entry_block_bits", 20, "address_size"),
    ("hash_collisions", 151, "hash_collisions"), ("total_displacement", 10**6,
                                                  "total_displacement")]


@pytest.mark.parametrize("field, value, named", BAD_INDEX_FIELDS,
                         ids=[f"{f}={v}" for f, v, _ in BAD_INDEX_FIELDS])
def test_index_header_field_out_of_range(field, value, named):
    IndexHeader.unpack(INDEX)
    with pytest.raises(IndexFormatError) as info:
        IndexHeader.unpack(_patched(INDEX, field, value, INDEX_FIELDS))
    assert info.value.field == named
    assert named in str(info.value)


LOG_OF_INDEX = LogHeader.unpack(NONE_LOG)
BAD_INDEX_FOR_LOG = [
    ("data_end", LOG_OF_INDEX.data_end + 1, "data_end"),
    ("max_key_len", LOG_OF_INDEX.max_key_len + 1, "max_key_len"),
    ("max_value_len", LOG_OF_INDEX.max_value_len + 1, "max_value_len"),
    ("num_puts", LOG_OF_INDEX.num_puts + 1, "num_puts"),
    ("garbage_size", LOG_OF_INDEX.put_size + LOG_OF_INDEX.delete_size + 1, "garbage_size")]


@pytest.mark.parametrize("field, value, named", BAD_INDEX_FOR_LOG,
                         ids=[f for f, _, _ in BAD_INDEX_FOR_LOG])
def test_index_header_inconsistent_with_its_log(field, value, named):
    header = IndexHeader.unpack(_patched(INDEX, field, value, INDEX_FIELDS))
    with pytest.raises(IndexFormatError) as info:
        header.check_log(LOG_OF_INDEX)
    assert info.value.field == named


def test_index_of_another_log():
    header = IndexHeader.unpack(INDEX)
    other = dataclasses.replace(LOG_OF_INDEX, file_identifier=header.file_identifier ^ 1)
    with pytest.raises(FileIdentifierMismatch, match="another log") as info:
        header.check_log(other)
    assert isinstance(info.value, ValueError)


def test_index_header_round_trip_and_sizes():
    header = IndexHeader.unpack(INDEX)
    assert header.pack() == INDEX
    assert header.file_size == 112 + header.hash_capacity * 8 == 2760
