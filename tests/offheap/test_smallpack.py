"""The pure-Python page-sized kernels write and read exactly the bytes of the numpy kernels."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from offheap.kernels import packing, smallpack
from offheap.errors import CorruptionError

INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
KEY_LISTS = st.lists(INT64, min_size=1, max_size=smallpack.SMALL_BLOCK_VALUES)


@given(KEY_LISTS)
def test_encode_int64_deltas_matches_numpy(keys):
    assert smallpack.encode_int64_deltas(keys) == packing.encode_int64_deltas(np.array(keys))


@given(KEY_LISTS.map(sorted))
def test_encode_sorted_keys_matches_numpy(keys):
    assert smallpack.encode_int64_deltas(keys) == packing.encode_int64_deltas(np.array(keys))


@given(KEY_LISTS, st.binary(max_size=3))
def test_decode_int64_deltas_matches_numpy(keys, prefix):
    data = prefix + packing.encode_int64_deltas(np.array(keys)) + b"tail"
    expected, end = packing.decode_int64_deltas(data, len(keys), len(prefix))
    assert smallpack.decode_int64_deltas(memoryview(data), len(keys), len(prefix)) == (
        expected.tolist(), end)
    assert expected.tolist() == keys


@given(st.integers(0, 64).flatmap(
    lambda width: st.tuples(st.just(width),
                            st.lists(st.integers(0, (1 << width) - 1), max_size=300))))
def test_pack_matches_bitpack(case):
    width, values = case
    packed = packing.bitpack(np.array(values, dtype=np.uint64), width)
    assert smallpack.pack(values, width) == packed
    assert smallpack.unpack(packed, 0, len(values), width) == (values, len(packed))


@given(st.lists(INT64, min_size=1, max_size=50))
def test_common_shift_is_the_shared_trailing_zero_bits(keys):
    shift = smallpack.common_shift(keys, 63)
    assert all(key % (1 << shift) == 0 for key in keys)
    if any(keys) and shift < 63:
        assert any(key % (1 << (shift + 1)) for key in keys)


def test_all_zero_keys_take_the_largest_shift():
    assert smallpack.common_shift([0, 0], 63) == 63


@pytest.mark.parametrize("cut", [1, 2, 3, 5])
def test_truncated_delta_block_raises_corruption(cut):
    data = packing.encode_int64_deltas(np.array([5, 1000, 70000, 123456789]))
    with pytest.raises(CorruptionError):
        smallpack.decode_int64_deltas(data[:-cut] if cut < len(data) else b"", 4, 0)


def test_width_above_64_raises_corruption():
    data = bytearray(packing.encode_int64_deltas(np.array([1, 5, 9])))
    data[1] = 65
    with pytest.raises(CorruptionError):
        smallpack.decode_int64_deltas(bytes(data), 3, 0)
