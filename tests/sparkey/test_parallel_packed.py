"""The pure parts of bulk writes: PackedBytes, copy_rows, frame_puts and BlockCutter."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from sparkey.errors import EntryTypeError
from sparkey.format import put_header
from sparkey.log.framing import BlockCutter, frame_puts
from sparkey.packed import PackedBytes, as_column, copy_rows


def test_packed_bytes_from_a_sequence():
    column = PackedBytes.from_sequence([b"ab", bytearray(b""), memoryview(b"xyz"), "é"])
    assert len(column) == 4 and list(column) == [b"ab", b"", b"xyz", "é".encode()]
    assert column[-1] == b"\xc3\xa9" and column.lengths.tolist() == [2, 0, 3, 2]
    part = column.pack(1, 3)
    assert list(part) == [b"", b"xyz"] and part.data is column.data
    assert repr(part) == "<sparkey.PackedBytes 2 strings, 3 bytes>"
    with pytest.raises(IndexError, match="row 4 of a column of 4"):
        column[4]
    with pytest.raises(EntryTypeError, match="a key must be bytes"):
        PackedBytes.from_sequence([b"a", 1], "key")


def test_packed_bytes_from_rows_and_checks():
    rows = np.arange(12, dtype=np.uint8).reshape(3, 4)
    assert list(PackedBytes.from_rows(rows)) == [bytes(row) for row in rows.tolist()]
    with pytest.raises(ValueError, match="non-decreasing"):
        PackedBytes(b"abc", [0, 2, 1])
    with pytest.raises(ValueError, match="within the 3 bytes"):
        PackedBytes(b"abc", [0, 4])
    with pytest.raises(ValueError, match="1-D integer array"):
        PackedBytes(b"abc", [])
    with pytest.raises(TypeError, match="1-D uint8 array"):
        PackedBytes(np.zeros(3, dtype=np.int32), [0, 1])


def test_as_column_accepts_sequences_arrays_and_lazy_columns():
    assert list(as_column(np.array([b"a", b"bc"]), "key").pack(0, 2)) == [b"a", b"bc"]
    packed = PackedBytes.from_sequence([b"a"])
    assert as_column(packed, "key") is packed
    with pytest.raises(TypeError, match="values must be a sequence of byte strings"):
        as_column(b"abc", "value")


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.binary(max_size=70), max_size=40), gap=st.integers(0, 3),
       two_d=st.booleans(), data=st.data())
def test_copy_rows_moves_every_row(rows, gap, two_d, data):
    """Both paths: few distinct lengths (one copy per length) and many (by bits)."""
    order = data.draw(st.permutations(range(len(rows))))
    lengths = np.array([len(row) for row in rows], dtype=np.int64)
    destinations, position = np.zeros(len(rows), dtype=np.int64), 0
    for i in order:  # rows land in another order, with gaps between them
        destinations[i] = position
        position += len(rows[i]) + gap
    out = np.full(position + 1, 0xEE, dtype=np.uint8)
    if two_d:
        width = max(lengths, default=0) + 1
        source = np.zeros((len(rows), width), dtype=np.uint8)
        for i, row in enumerate(rows):
            source[i, :len(row)] = list(row)
        copy_rows(out, destinations, source, None, lengths)
    else:
        packed = PackedBytes.from_sequence(rows)
        copy_rows(out, destinations, packed.data, packed.offsets[:-1], lengths)
    expected = bytearray(b"\xee" * (position + 1))
    for i, row in enumerate(rows):
        expected[destinations[i]:destinations[i] + len(row)] = row
    assert out.tobytes() == bytes(expected)


def test_frame_puts_writes_put_entries():
    keys = [b"", b"k", b"K" * 127, b"key"]
    values = [b"", b"v" * 200, b"w", b"x" * 16384]
    framed = frame_puts(PackedBytes.from_sequence(keys), PackedBytes.from_sequence(values))
    assert framed.stream.tobytes() == b"".join(
        put_header(len(k), len(v)) + k + v for k, v in zip(keys, values))
    assert framed.stream[:7].tobytes() == b"\x01\x00\x02\xc8\x01kv"
    assert framed.sizes.tolist() == [2, 204, 131, 4 + 3 + 16384]
    assert framed.header_sizes.tolist() == [2, 3, 3, 4]


def _cut(block_size, sizes, header_size=2, cutter=None):
    cutter = cutter or BlockCutter(block_size)
    sizes = np.array(sizes, dtype=np.int64)
    return cutter.cut(sizes, np.full(len(sizes), header_size)), cutter


def test_block_cutter_follows_the_writer_worked_example():
    """sparkey.log.writer, B = 16: two 14-byte entries, then a 14-byte and a 40-byte entry."""
    (ends, started), cutter = _cut(16, [14, 14])
    assert (ends, started, cutter.used, cutter.started) == ([14], [1], 14, 1)
    (ends, started), cutter = _cut(16, [14, 40, 3])
    assert (ends, started) == ([16, 32, 48, 54], [2, 0, 0, 0])
    assert (cutter.used, cutter.started) == (3, 1)


def test_block_cutter_carries_the_open_block_between_chunks():
    cutter = BlockCutter(16)
    assert cutter.cut(np.array([5, 5]), np.array([2, 2])) == ([], [])
    assert cutter.cut(np.array([5, 7]), np.array([2, 2])) == ([5], [3])  # 5+5+5 fit, 7 does not
    assert (cutter.used, cutter.started) == (7, 1)
    full = BlockCutter(16, used=16, started=2)  # a full open block closes before anything else
    assert full.cut(np.array([30]), np.array([3])) == ([0, 16, 30], [2, 1, 0])
