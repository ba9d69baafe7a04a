"""The keyed table's key format: key bytes per key type, the seeded hash, the 16-byte key slot."""

import os
import subprocess
import sys
from collections import Counter

import importlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from offheap.errors import CorruptionError
from offheap.hashmap.keyslots import (
    INLINE_MAX, LONG, KEY_TYPES, Unadmitted, check_key_type, home_of, inline_slot, key_bytes,
    key_hash, key_of, key_rows, long_slot, lookup_bytes, parse_slot, slot_tag)
from offheap.kernels import native
from offheap.kernels.siphash import siphash, siphash_array

ZERO_SEED = bytes(16)
PAPER_SEED = bytes(range(16))


# -- SipHash ----------------------------------------------------------------------------------

@pytest.mark.parametrize("n, expected", [
    (0, 0x726FDB47DD0E0E31), (1, 0x74F839C593DC67FD), (15, 0xA129CA6149BE45E5)])
def test_siphash24_matches_the_papers_vectors(n, expected):
    assert siphash(PAPER_SEED, bytes(range(n)), 2, 4) == expected


def test_siphash13_matches_cpythons_bytes_hash():
    """CPython hashes bytes with SipHash-1-3; PYTHONHASHSEED=0 makes its seed zero (it returns
    0 for b"" and never -1, so the messages here are non-empty and checked for that)."""
    messages = [bytes(range(n)) for n in range(1, 40)] + [b"user:12345", "h\xe9llo".encode()]
    script = (f"import sys; print(' '.join(str(hash(m) & (2**64 - 1)) for m in {messages!r}))")
    if sys.hash_info.algorithm != "siphash13":
        pytest.skip("this CPython hashes bytes with another algorithm")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONHASHSEED": "0"}).stdout
    expected = [int(word) for word in out.split()]
    assert [siphash(ZERO_SEED, m) for m in messages] == expected
    assert all(value != 2**64 - 1 for value in expected)


def test_siphash_refuses_a_seed_of_another_length():
    with pytest.raises(ValueError, match="16 bytes, got 8"):
        siphash(bytes(8), b"x")


def _compiled_siphash():
    if native.PURE_PYTHON:
        return pytest.importorskip("offheap.hashmap._core").siphash
    return importlib.import_module("offheap.hashmap._core").siphash


@given(st.binary(max_size=80), st.binary(min_size=16, max_size=16),
       st.sampled_from([(1, 3), (2, 4)]))
def test_the_compiled_siphash_is_the_references(message, seed, variant):
    compiled = _compiled_siphash()
    assert compiled(seed, message, *variant) == siphash(seed, message, *variant)
    assert compiled(seed, bytearray(message)) == key_hash(seed, message) == siphash(seed, message)


def test_the_compiled_siphash_refuses_a_seed_of_another_length():
    with pytest.raises(ValueError, match="16 bytes, got 15"):
        _compiled_siphash()(bytes(15), b"x")


def _rows(messages: list[bytes], width: int) -> tuple[np.ndarray, np.ndarray]:
    data = np.zeros((len(messages), width), np.uint8)
    for row, message in zip(data, messages):
        row[:len(message)] = np.frombuffer(message, np.uint8)
    return data, np.array([len(m) for m in messages], np.int64)


@given(st.lists(st.binary(max_size=40), max_size=30), st.binary(min_size=16, max_size=16),
       st.sampled_from([(1, 3), (2, 4)]), st.integers(0, 9))
def test_siphash_array_is_siphash_of_every_row(messages, seed, variant, spare):
    data, lengths = _rows(messages, max(map(len, messages), default=0) + spare)
    hashes = siphash_array(seed, data, lengths, *variant)
    assert hashes.dtype == np.uint64
    assert hashes.tolist() == [siphash(seed, m, *variant) for m in messages]


def test_siphash_array_takes_numpy_bytes_arrays_as_rows():
    keys = np.array([b"user:1", b"", b"a-key-longer-than-sixteen-bytes"])
    rows = keys.view(np.uint8).reshape(len(keys), -1)
    hashes = siphash_array(ZERO_SEED, rows, np.char.str_len(keys))
    assert hashes.tolist() == [siphash(ZERO_SEED, bytes(k)) for k in keys]


def test_siphash_array_refuses_rows_that_do_not_hold_their_messages():
    data, lengths = _rows([b"abc", b"de"], 4)
    with pytest.raises(ValueError, match="longer than its row"):
        siphash_array(ZERO_SEED, data, lengths + 2)
    with pytest.raises(ValueError, match="not zero past its message"):
        siphash_array(ZERO_SEED, data, lengths - 1)


def test_keys_crafted_to_collide_under_one_seed_spread_under_a_fresh_one():
    homes = 256
    crafted = [key for key in (f"k{i}".encode() for i in range(40 * homes))
               if home_of(key_hash(ZERO_SEED, key), homes) == 0][:32]
    assert len(crafted) == 32  # all in one home: a table of that seed probes them linearly
    fresh = os.urandom(16)
    crowd = Counter(home_of(key_hash(fresh, key), homes) for key in crafted)
    # 32 keys over 256 homes: 7 in one home has probability about 1e-8
    assert max(crowd.values()) <= 6


# -- key bytes --------------------------------------------------------------------------------

def test_str_keys_are_utf8_with_surrogates_passed():
    assert key_bytes("str", "ab") == b"ab"
    assert key_bytes("str", "") == b""
    assert key_bytes("str", "\u20ac") == b"\xe2\x82\xac"
    for key in ("\ud800", "a\udfffb", "\ud83d\ude00", "\U0001f600"):
        assert key_of("str", key_bytes("str", key)) == key
    assert key_bytes("str", "\ud83d\ude00") != key_bytes("str", "\U0001f600")


def test_bytes_keys_take_any_bytes_like_and_read_back_as_bytes():
    for key in (b"ab", bytearray(b"ab"), memoryview(b"xaby")[1:3], np.bytes_(b"ab")):
        assert key_bytes("bytes", key) == b"ab"
        assert type(key_of("bytes", key_bytes("bytes", key))) is bytes
    assert key_bytes("bytes", memoryview(np.array([1], np.int16))) == b"\x01\x00"


def test_int64_keys_are_8_bytes_little_endian():
    assert key_bytes("int64", -2) == b"\xfe" + b"\xff" * 7
    assert key_bytes("int64", True) == key_bytes("int64", 1) == key_bytes("int64", np.int64(1))
    assert key_of("int64", key_bytes("int64", -(2**63))) == -(2**63)
    assert lookup_bytes("int64", 1.0) == key_bytes("int64", 1)
    assert lookup_bytes("int64", 1.5) is None and lookup_bytes("int64", 2**63) is None
    with pytest.raises(Unadmitted) as refused:
        key_bytes("int64", 2**63)
    assert isinstance(refused.value.error, OverflowError)


@pytest.mark.parametrize("key_type, key", [
    ("str", b"ab"), ("str", 5), ("bytes", "ab"), ("int64", "5"), ("object", [1]),
    ("object", {1}), ("object", frozenset()), ("object", (1, [2])), ("object", object())])
def test_a_key_of_the_wrong_type_is_a_type_error_to_store_and_a_miss_to_look_up(key_type, key):
    with pytest.raises(Unadmitted) as refused:
        key_bytes(key_type, key)
    assert isinstance(refused.value.error, TypeError)
    assert f'HashMap(key="{key_type}")' in str(refused.value.error)
    assert lookup_bytes(key_type, key) is None


def test_object_keys_equal_in_a_dict_have_equal_bytes():
    assert key_bytes("object", 1) == key_bytes("object", 1.0) == key_bytes("object", True) \
        == key_bytes("object", np.int64(1)) == b"\x01\x01"
    assert key_bytes("object", 0) == key_bytes("object", -0.0) == key_bytes("object", False) \
        == b"\x01"
    assert key_bytes("object", (1, "a")) == key_bytes("object", (True, "a"))
    assert key_bytes("object", np.True_) == key_bytes("object", np.float32(1)) == b"\x01\x01"
    assert key_bytes("object", np.float32(1.5)) == key_bytes("object", 1.5)
    assert key_of("object", key_bytes("object", True)) == 1
    assert type(key_of("object", key_bytes("object", 2.0))) is int
    assert key_bytes("object", "a") != key_bytes("object", b"a")


def test_nan_is_refused_as_an_object_key():
    for key in (float("nan"), (1, float("nan"))):
        with pytest.raises(Unadmitted) as refused:
            key_bytes("object", key)
        assert isinstance(refused.value.error, ValueError) and "NaN" in str(refused.value)
        assert lookup_bytes("object", key) is None


_scalars = (st.none() | st.booleans() | st.integers() | st.text() | st.binary()
            | st.floats(allow_nan=False))
_object_keys = st.recursive(_scalars, lambda inner: st.tuples(inner, inner) | st.tuples(inner)
                            | st.just(()), max_leaves=8)


@given(_object_keys, _object_keys)
def test_object_key_bytes_are_equal_exactly_when_the_keys_are(a, b):
    assert (key_bytes("object", a) == key_bytes("object", b)) == (a == b)
    assert key_of("object", key_bytes("object", a)) == a


@given(st.text())
def test_str_keys_round_trip(key):
    assert key_of("str", key_bytes("str", key)) == key


@pytest.mark.parametrize("key_type, data", [
    ("str", b"\xff"), ("int64", b"\x01"), ("object", b"\x09"), ("object", b"\x00\x00"),
    ("object", b"\x02\x00"), ("object", b"\x05\x05\x00\x00\x00\x01"), ("object", b"")])
def test_damaged_key_bytes_are_corruption(key_type, data):
    with pytest.raises(CorruptionError, match=f'key="{key_type}"'):
        key_of(key_type, data)


def test_key_types_are_checked():
    assert [check_key_type(t) for t in KEY_TYPES] == list(KEY_TYPES)
    with pytest.raises(ValueError, match="'str', 'bytes', 'int64', 'object'"):
        check_key_type("float")


# -- keys in bulk ----------------------------------------------------------------------------

def _unpadded(rows: np.ndarray, lengths: np.ndarray) -> list[bytes]:
    assert all(not row[length:].any() for row, length in zip(rows, lengths))
    return [bytes(row[:length]) for row, length in zip(rows, lengths)]


_STRS = ["ab", "", "\u20ac", "\ud800x", "user:12345678901234567890"]


@pytest.mark.parametrize("key_type, keys", [
    ("str", _STRS), ("str", np.array(_STRS)), ("str", np.array(_STRS, object)),
    ("str", np.array(_STRS[:3] + _STRS[4:], np.dtypes.StringDType())),
    ("bytes", [b"a\x00b", b"", bytearray(b"xy")]), ("bytes", np.array([b"a\x00b", b"", b"xy"])),
    ("int64", np.array([1, -1, 2**40])), ("int64", np.array([1, 2], np.uint8)),
    ("int64", [True, 7]), ("object", [1, 1.0, "a", (None, b"b"), 2.5]), ("str", []),
    ("str", np.array([], "U"))])
def test_key_rows_hold_every_keys_bytes(key_type, keys):
    rows, lengths, admitted = key_rows(key_type, keys)
    assert rows.dtype == np.uint8 and lengths.dtype == np.int64 and admitted.all()
    assert _unpadded(rows, lengths) == [key_bytes(key_type, key) for key in keys]


def test_key_rows_of_a_lookup_mark_the_misses():
    rows, lengths, admitted = key_rows("str", ["ab", 5, b"x", "c"], lookup=True)
    assert admitted.tolist() == [True, False, False, True]
    assert _unpadded(rows, lengths) == [b"ab", b"", b"", b"c"]
    _, _, admitted = key_rows("int64", np.array([2**64 - 1, 3], np.uint64), lookup=True)
    assert admitted.tolist() == [False, True]


def test_key_rows_of_a_store_refuse_the_first_bad_key():
    with pytest.raises(Unadmitted, match="not int"):
        key_rows("str", ["ab", 5, b"x"])
    with pytest.raises(Unadmitted, match="not bytes"):
        key_rows("str", np.array([b"ab"]))
    with pytest.raises(ValueError, match="one-dimensional"):
        key_rows("str", np.array([["a"]]))


def test_key_rows_hash_as_the_scalar_keys_do():
    keys = [f"user:{i}" for i in range(100)] + ["x" * 100]
    rows, lengths, _ = key_rows("str", np.array(keys))
    assert siphash_array(ZERO_SEED, rows, lengths).tolist() == \
        [key_hash(ZERO_SEED, key_bytes("str", key)) for key in keys]


# -- slots ------------------------------------------------------------------------------------

def test_inline_slots_hold_the_key_bytes_and_their_length():
    assert inline_slot(b"ab").hex() == "6162" + "00" * 13 + "02"
    assert inline_slot(b"") == bytes(16)
    assert inline_slot(b"x" * INLINE_MAX) == b"x" * 15 + b"\x0f"
    for data in (b"", b"ab", "\u20ac".encode(), b"x" * INLINE_MAX):
        assert parse_slot(inline_slot(data)) == (data, 0)


def test_long_slots_hold_the_record_id_and_the_hash_tag():
    hash_value = 0x0123456789ABCDEF
    slot = long_slot(0x1122, hash_value)
    assert slot.hex() == "2211000000000000" + "cdab8967452301" + "80"
    assert slot[8:15] == slot_tag(hash_value) and slot[15] == LONG
    assert parse_slot(slot) == (None, 0x1122)


@pytest.mark.parametrize("slot", [
    b"a" * 15 + b"\x10", b"a" * 15 + b"\xff", b"ab\x00\x00x" + bytes(10) + b"\x02"])
def test_damaged_slots_are_corruption(slot):
    with pytest.raises(CorruptionError, match="damaged HashMap key slot"):
        parse_slot(slot)


def test_homes_are_the_hash_scaled_to_the_table():
    assert home_of(0, 752) == 0 and home_of(2**64 - 1, 752) == 751
    assert home_of(2**63, 1000) == 500
