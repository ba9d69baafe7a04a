"""offheap.kernels.packing: golden bytes, round trips, and damaged input that must raise CorruptionError."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from offheap.kernels import packing
from offheap.errors import CorruptionError
from offheap.kernels.packing import (
    bitpack,
    bitunpack,
    decode_int64_deltas,
    decode_int64_frame,
    delta_base,
    encode_int64_deltas,
    encode_int64_frame,
    front_decode,
    front_encode,
    varint_decode,
    varint_decode_one,
    varint_encode,
    varint_encode_one,
    zigzag_decode,
    zigzag_encode,
)

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1
INT64_EDGES = [INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX - 1, INT64_MAX]

int64s = st.one_of(st.integers(INT64_MIN, INT64_MAX), st.sampled_from(INT64_EDGES), st.integers(-300, 300))
uint64s = st.one_of(st.integers(0, UINT64_MAX), st.integers(0, 300),
                    st.sampled_from([0, 127, 128, 2**63, UINT64_MAX]))
key_lists = st.one_of(
    st.lists(int64s, max_size=300),
    st.lists(int64s, max_size=300).map(sorted),
    # runs of equal gaps, the case frame-of-reference packing collapses to a header
    st.tuples(int64s, st.integers(-2**40, 2**40), st.integers(0, 200)).map(
        lambda t: [(t[0] + i * t[1] + 2**63) % 2**64 - 2**63 for i in range(t[2])]),
)


def i64(values) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def u64(values) -> np.ndarray:
    return np.array(values, dtype=np.uint64)


# -- golden bytes: these pin the formats documented in offheap.kernels.packing ---------------------------

@pytest.mark.parametrize("value, encoded", [
    (0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (16384, "808001"),
    (2**63, "80808080808080808001"), (UINT64_MAX, "ffffffffffffffffff01"),
])
def test_varint_golden(value, encoded):
    assert varint_encode_one(value).hex() == encoded
    assert varint_encode(u64([value])).hex() == encoded
    assert varint_decode_one(bytes.fromhex(encoded)) == (value, len(encoded) // 2)
    decoded, end = varint_decode(bytes.fromhex(encoded), 1)
    assert decoded.tolist() == [value] and end == len(encoded) // 2


def test_varint_golden_sequence():
    assert varint_encode(u64([1, 300, 0, 2**35])).hex() == "01" + "ac02" + "00" + "8080808080" + "01"


def test_zigzag_golden():
    assert zigzag_encode(i64([0, -1, 1, -2, 2, INT64_MAX, INT64_MIN])).tolist() == [
        0, 1, 2, 3, 4, UINT64_MAX - 1, UINT64_MAX]


@pytest.mark.parametrize("values, width, packed", [
    ([1, 2, 3], 2, "39"),
    ([1, 0, 1, 1, 0, 0, 0, 0, 1], 1, "0d01"),
    ([0x1FF, 0], 9, "ff0100"),
    ([5, 6, 7], 0 + 3, "f501"),
    ([0xDEADBEEF], 32, "efbeadde"),
    ([2**64 - 2], 64, "feffffffffffffff"),
    ([0, 0, 0], 0, ""),
])
def test_bitpack_golden(values, width, packed):
    assert bitpack(u64(values), width).hex() == packed
    assert bitunpack(bytes.fromhex(packed), len(values), width).tolist() == values


@pytest.mark.parametrize("keys, encoded", [
    ([], ""),
    ([5], "0a"),
    ([10, 11, 12, 14], "14" "01" "01" "04"),
    ([1000, 1000, 1000], "d00f" "00" "00"),
    (list(range(10**9, 10**9 + 120)), "80a8d6b907" "00" "01"),
    # one gap of 2**64-1: base 0 and 64 bits (9 bytes) beat width 0 and a base of 10 bytes
    ([INT64_MIN, INT64_MAX], "ffffffffffffffffff01" "40" "00" "ffffffffffffffff"),
    # unsorted: the gap -2 wraps to 2**64-2, so the spread needs all 64 bits
    ([3, 1, 2], "06" "40" "01" "fdffffffffffffff" "0000000000000000"),
])
def test_int64_deltas_golden(keys, encoded):
    assert encode_int64_deltas(i64(keys)).hex() == encoded
    decoded, end = decode_int64_deltas(bytes.fromhex(encoded), len(keys))
    assert decoded.tolist() == keys and end == len(encoded) // 2


def test_int64_deltas_base_is_read_as_written():
    """A block whose base is the smallest gap where 0 would be shorter (what writers before
    :func:`delta_base` chose, and any writer may) decodes to the same keys."""
    decoded, end = decode_int64_deltas(bytes.fromhex("ffffffffffffffffff01" "00"
                                                     "ffffffffffffffffff01"), 2)
    assert decoded.tolist() == [INT64_MIN, INT64_MAX] and end == 21


@pytest.mark.parametrize("low, high, n_gaps, base", [
    (1, 1, 30, 1),  # equal gaps: width 0
    (1, 2, 3, 1),  # a tie (2 bytes either way) keeps the smallest gap
    (0, 2**43, 25, 0),
    (2**38, 2**45, 25, 0),  # random keys: the base saves no bit of width, costs 6 bytes
    (2**44, 2**44 + 5, 25, 2**44),  # near-equal large gaps: the base saves 42 bits a gap
])
def test_delta_base(low, high, n_gaps, base):
    assert delta_base(low, high, n_gaps) == base


def test_int64_deltas_of_random_keys_are_no_longer_than_with_the_smallest_gap():
    rng = np.random.default_rng(5)
    for _ in range(200):
        keys = np.sort(rng.integers(INT64_MIN, INT64_MAX, int(rng.integers(2, 40)),
                                    dtype=np.int64, endpoint=True))
        block = encode_int64_deltas(keys)
        gaps = np.diff(keys.view(np.uint64))
        low = int(gaps.min())
        with_low = (len(varint_encode_one(low))
                    + (len(gaps) * (int(gaps.max()) - low).bit_length() + 7) // 8)
        assert len(block) <= len(varint_encode_one(int(keys[0]) << 1 ^ int(keys[0]) >> 63)) \
            + 1 + with_low
        assert decode_int64_deltas(block, len(keys))[0].tolist() == keys.tolist()


@pytest.mark.parametrize("values, encoded", [
    ([], ""),
    ([5], "0a" "80"),
    ([7, 3, 5], "06" "83" "8400"),
    ([3, 3, 3], "06" "80"),
    ([-1, 1], "01" "82" "08"),
    ([INT64_MAX, INT64_MIN], "ffffffffffffffffff01" "c0" "ffffffffffffffff" "0000000000000000"),
])
def test_int64_frame_golden(values, encoded):
    assert encode_int64_frame(i64(values)).hex() == encoded
    decoded, end = decode_int64_frame(bytes.fromhex(encoded), len(values))
    assert decoded.tolist() == values and end == len(encoded) // 2


def test_front_coding_golden():
    keys = [b"apple", b"applesauce", b"apricot", b"", b"b"]
    encoded = bytes.fromhex("00" "05" "02" "00" "00"    # shared prefix lengths
                            "05" "05" "05" "00" "01")   # suffix lengths
    encoded += b"apple" b"sauce" b"ricot" b"b"
    assert front_encode(keys) == encoded
    assert front_decode(encoded, len(keys)) == (keys, len(encoded))


# -- round trips -----------------------------------------------------------------------------------

@given(st.lists(int64s, max_size=200))
def test_zigzag_roundtrip(values):
    codes = zigzag_encode(i64(values))
    assert codes.dtype == np.uint64
    assert zigzag_decode(codes).tolist() == values
    assert codes.tolist() == [(2 * v if v >= 0 else -2 * v - 1) for v in values]


@given(st.lists(uint64s, max_size=200), st.binary(max_size=3), st.binary(max_size=3))
def test_varint_roundtrip(values, before, after):
    encoded = varint_encode(u64(values))
    assert encoded == b"".join(varint_encode_one(v) for v in values)
    decoded, end = varint_decode(before + encoded + after, len(values), len(before))
    assert decoded.dtype == np.uint64 and decoded.tolist() == values
    assert end == len(before) + len(encoded)


def test_varint_large_input_roundtrip():
    rng = np.random.default_rng(7)
    values = rng.integers(0, 2**63, 50_000, dtype=np.uint64) >> rng.integers(0, 64, 50_000).astype(np.uint64)
    encoded = varint_encode(values)
    decoded, end = varint_decode(encoded, values.size)
    assert np.array_equal(decoded, values) and end == len(encoded)


def test_varint_accepts_redundant_zero_groups():
    assert varint_decode_one(b"\x80\x00") == (0, 2)
    assert varint_decode(b"\x81\x80\x00", 1)[0].tolist() == [1]


@settings(max_examples=150)
@given(data=st.data(), width=st.integers(0, 64), count=st.integers(0, 150))
def test_bitpack_roundtrip_every_width(data, width, count):
    values = data.draw(st.lists(st.integers(0, (1 << width) - 1), min_size=count, max_size=count))
    prefix = data.draw(st.binary(max_size=2))
    packed = bitpack(u64(values), width)
    assert len(packed) == (count * width + 7) // 8
    assert bitunpack(prefix + packed + b"\xff", count, width, len(prefix)).tolist() == values


@pytest.mark.parametrize("width", range(1, 64))  # widths 0 and 64 never reach the kernels
def test_bitpack_kernels_agree_every_width(width):
    """Both kernels (matrix for pages, word shifting for bulk) give the same stream."""
    rng = np.random.default_rng(width)
    for count in (1, 7, 64, 65, 1000):
        values = rng.integers(0, 2**64 - 1, count, dtype=np.uint64, endpoint=True) & np.uint64((1 << width) - 1)
        packed = packing._bitpack_matrix(values, width)
        assert packing._bitpack_words(values, width) == packed
        array = np.frombuffer(packed, np.uint8)
        assert np.array_equal(packing._bitunpack_matrix(array, count, width), values)
        assert np.array_equal(packing._bitunpack_words(array, count, width), values)


@pytest.mark.parametrize("count", [packing._UNPACK_MATRIX_MAX_VALUES, packing._UNPACK_MATRIX_MAX_VALUES + 1,
                                   packing._PACK_MATRIX_MAX_VALUES, packing._PACK_MATRIX_MAX_VALUES + 1,
                                   2 * packing._WORD_BLOCK_VALUES + 3])
@pytest.mark.parametrize("width", [1, 13, 33, 63, 64])
def test_bitpack_bulk_roundtrip(count, width):
    rng = np.random.default_rng(count + width)
    values = rng.integers(0, 2**63, count, dtype=np.uint64) >> np.uint64(64 - width)
    values[::7] = (1 << width) - 1
    assert np.array_equal(bitunpack(bitpack(values, width), count, width), values)


@settings(max_examples=200)
@given(key_lists, st.binary(max_size=3), st.binary(max_size=3))
def test_int64_deltas_roundtrip(keys, before, after):
    encoded = encode_int64_deltas(i64(keys))
    decoded, end = decode_int64_deltas(before + encoded + after, len(keys), len(before))
    assert decoded.dtype == np.int64 and decoded.tolist() == keys
    assert end == len(before) + len(encoded)


@settings(max_examples=200)
@given(key_lists, st.binary(max_size=3), st.binary(max_size=3))
def test_int64_frame_roundtrip(values, before, after):
    encoded = encode_int64_frame(i64(values))
    decoded, end = decode_int64_frame(before + encoded + after, len(values), len(before))
    assert decoded.dtype == np.int64 and decoded.tolist() == values
    assert end == len(before) + len(encoded)
    if values:
        assert encoded[len(varint_encode_one(int(zigzag_encode(i64([min(values)]))[0])))] == (
            0x80 | (max(values) - min(values)).bit_length())


@given(int64s, st.integers(-2**40, 2**40), st.integers(2, 500))
def test_equal_gaps_cost_only_the_header(first, gap, count):
    keys = [(first + i * gap + 2**63) % 2**64 - 2**63 for i in range(count)]
    encoded = encode_int64_deltas(i64(keys))
    header = len(varint_encode_one(int(zigzag_encode(i64([first]))[0])))
    with_width_0 = header + 1 + len(varint_encode_one(gap % 2**64))
    assert len(encoded) <= with_width_0 <= 10 + 1 + 10
    if count > 2 or with_width_0 - header <= 10:  # one gap of 2**63 or more packs shorter at base 0
        assert encoded[header] == 0  # width 0


def test_int64_deltas_bulk_roundtrip():
    rng = np.random.default_rng(3)
    for keys in (np.sort(rng.integers(INT64_MIN, INT64_MAX, 100_000, dtype=np.int64)),
                 rng.integers(INT64_MIN, INT64_MAX, 10_000, dtype=np.int64),
                 np.arange(-50_000, 50_000, dtype=np.int64) * 3):
        decoded, end = decode_int64_deltas(encode_int64_deltas(keys), keys.size)
        assert np.array_equal(decoded, keys)


def test_sorted_keys_pack_at_the_width_of_their_gap_spread():
    keys = np.arange(0, 120 * 1000, 1000, dtype=np.int64)
    keys[-1] += 5  # one gap of 1005, the rest 1000: spread 5 needs 3 bits
    encoded = encode_int64_deltas(keys)
    assert encoded[1] == 3 and len(encoded) == 1 + 1 + 2 + (119 * 3 + 7) // 8


byte_keys = st.lists(st.binary(max_size=40) | st.sampled_from([b"", b"a", b"ab", b"abc", b"abd"]), max_size=60)


@settings(max_examples=200)
@given(byte_keys, st.booleans(), st.binary(max_size=3), st.binary(max_size=3))
def test_front_coding_roundtrip(keys, sort, before, after):
    if sort:
        keys = sorted(keys)
    encoded = front_encode(keys)
    assert front_decode(before + encoded + after, len(keys), len(before)) == (keys, len(before) + len(encoded))


def test_front_coding_long_shared_prefixes():
    """Prefixes longer than the first comparison windows, and keys that are prefixes of others."""
    base = bytes(range(256)) * 5
    keys = sorted([base[:n] for n in (0, 1, 15, 16, 17, 300, 1279, 1280)]
                  + [base[:700] + b"\xff", base[:700] + b"\xff\x00", base + b"x"])
    encoded = front_encode(keys)
    assert front_decode(encoded, len(keys)) == (keys, len(encoded))
    assert len(encoded) < 1400  # each shared prefix is stored once


@pytest.mark.parametrize("block_words", [packing._PREFIX_BLOCK_WORDS, 64])
def test_front_coding_many_keys_roundtrip(monkeypatch, block_words):
    monkeypatch.setattr(packing, "_PREFIX_BLOCK_WORDS", block_words)  # 64: many blocks per round
    keys = [f"https://example.com/users/{i:08d}".encode() for i in range(30_000)]
    encoded = front_encode(keys)
    assert front_decode(encoded, len(keys)) == (keys, len(encoded))
    assert len(encoded) < 5 * len(keys)  # 34-byte keys: ~1.1 suffix bytes and 2 length bytes each


def test_empty_inputs():
    empty = np.zeros(0, np.int64)
    assert encode_int64_deltas(empty) == b"" and varint_encode(empty) == b"" and front_encode([]) == b""
    assert bitpack(empty, 17) == b""
    assert decode_int64_deltas(b"xyz", 0, 2)[0].size == 0 and decode_int64_deltas(b"xyz", 0, 2)[1] == 2
    assert varint_decode(b"", 0)[1] == 0 and front_decode(b"", 0) == ([], 0)
    assert bitunpack(b"", 0, 64).size == 0 and bitunpack(b"", 5, 0).tolist() == [0] * 5


def test_inputs_are_not_modified_and_outputs_do_not_alias():
    keys = np.array([5, 3, 9], dtype=np.int64)
    encoded = bytearray(encode_int64_deltas(keys))
    assert keys.tolist() == [5, 3, 9]
    decoded, _ = decode_int64_deltas(encoded, 3)
    encoded[0] ^= 0xFF
    assert decoded.tolist() == [5, 3, 9]
    raw = bytearray(bitpack(u64([1, 2, 3]), 64))
    unpacked = bitunpack(raw, 3, 64)
    raw[0] = 99
    assert unpacked.tolist() == [1, 2, 3]


def test_lists_and_buffers_are_accepted():
    assert encode_int64_deltas([1, 2, 3]) == encode_int64_deltas(i64([1, 2, 3]))
    assert varint_encode(300) == b"\xac\x02"
    encoded = encode_int64_deltas([1, 2, 4])
    for buf in (bytearray(encoded), memoryview(encoded), np.frombuffer(encoded, np.uint8)):
        assert decode_int64_deltas(buf, 3)[0].tolist() == [1, 2, 4]


# -- caller errors -----------------------------------------------------------------------------------

def test_caller_errors_are_value_and_type_errors():
    with pytest.raises(ValueError, match="does not fit in 3 bits"):
        bitpack(u64([8]), 3)
    with pytest.raises(ValueError, match="0..64"):
        bitpack(u64([1]), 65)
    with pytest.raises(ValueError, match="0..64"):
        bitunpack(b"", 0, -1)
    with pytest.raises(ValueError, match="count"):
        varint_decode(b"\x00", -1)
    with pytest.raises(ValueError, match="offset"):
        decode_int64_deltas(b"\x00", 1, -1)
    with pytest.raises(TypeError, match="integers"):
        encode_int64_deltas(np.array([1.5]))
    with pytest.raises(TypeError, match="integers"):
        zigzag_encode(np.array([True]))
    with pytest.raises(OverflowError):
        encode_int64_deltas(u64([2**63]))
    with pytest.raises(OverflowError):
        varint_encode([-1])
    with pytest.raises(OverflowError):
        varint_encode_one(2**64)
    with pytest.raises(TypeError):
        front_encode(["text is not bytes"])


# -- damaged input --------------------------------------------------------------------------------

DECODERS = {  # each returns (number of values decoded, end offset)
    "varint_decode": lambda buf, n, o: (len(varint_decode(buf, n, o)[0]), varint_decode(buf, n, o)[1]),
    "varint_decode_one": lambda buf, n, o: (1, varint_decode_one(buf, o)[1]),
    "bitunpack": lambda buf, n, o: (len(bitunpack(buf, n, n % 65, o)), o + (n * (n % 65) + 7) // 8),
    "decode_int64_deltas": lambda buf, n, o: (len(decode_int64_deltas(buf, n, o)[0]),
                                              decode_int64_deltas(buf, n, o)[1]),
    "decode_int64_frame": lambda buf, n, o: (len(decode_int64_frame(buf, n, o)[0]),
                                             decode_int64_frame(buf, n, o)[1]),
    "front_decode": lambda buf, n, o: (len(front_decode(buf, n, o)[0]), front_decode(buf, n, o)[1]),
}


@pytest.mark.parametrize("decoder", sorted(DECODERS))
@settings(max_examples=150)
@given(buf=st.binary(max_size=64), count=st.integers(0, 40), offset=st.integers(0, 70))
def test_random_bytes_raise_only_corruption_error(decoder, buf, count, offset):
    try:
        n_values, end = DECODERS[decoder](buf, count, offset)
    except CorruptionError:
        return
    assert n_values == (1 if decoder == "varint_decode_one" else count)
    assert offset <= end <= max(len(buf), offset)


@pytest.mark.parametrize("encode, decode, values", [
    (lambda v: varint_encode(u64(v)), varint_decode, [0, 300, 2**64 - 1, 5]),
    (encode_int64_deltas, decode_int64_deltas, i64([INT64_MIN, 0, INT64_MAX, 17])),
    (encode_int64_frame, decode_int64_frame, i64([INT64_MIN, 0, INT64_MAX, 17])),
    (encode_int64_frame, decode_int64_frame, i64([5, 5, 5])),
    (front_encode, front_decode, [b"alpha", b"alphabet", b"beta"]),
])
def test_every_truncation_raises_corruption_error(encode, decode, values):
    encoded = encode(values)
    for cut in range(len(encoded)):
        with pytest.raises(CorruptionError):
            decode(encoded[:cut], len(values))


def test_impossible_values_raise_corruption_error():
    with pytest.raises(CorruptionError, match="longer than 10 bytes"):
        varint_decode_one(b"\x80" * 10 + b"\x00")
    with pytest.raises(CorruptionError, match="longer than 10 bytes"):
        varint_decode(b"\x80" * 10 + b"\x00", 1)
    with pytest.raises(CorruptionError, match="64 bits"):
        varint_decode_one(b"\xff" * 9 + b"\x02")
    with pytest.raises(CorruptionError, match="64 bits"):
        varint_decode(b"\xff" * 9 + b"\x02", 1)
    with pytest.raises(CorruptionError, match="width byte 0x41"):
        decode_int64_deltas(b"\x00\x41\x00" + bytes(16), 2)
    with pytest.raises(CorruptionError, match="width byte 0xc1"):
        decode_int64_frame(b"\x00\xc1" + bytes(16), 2)
    with pytest.raises(CorruptionError, match="width byte 0x03"):
        decode_int64_frame(b"\x00\x03" + bytes(16), 2)  # a delta block is not a frame block
    with pytest.raises(CorruptionError, match="prefix"):
        front_decode(b"\x01\x00\x00\x00", 2)  # the first key cannot share a prefix
    with pytest.raises(CorruptionError, match="prefix"):
        front_decode(b"\x00\x03\x01\x00ab", 2)  # 3 bytes shared with a 1-byte key
