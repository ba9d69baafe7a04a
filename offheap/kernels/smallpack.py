"""Page-sized blocks of int64 keys in pure Python (layer 2: pure functions, lists in and out).

A B+tree page holds a few dozen keys and is decoded into a Python list on every cache miss and
encoded from one on every write. At that size numpy's fixed cost per call (about a microsecond,
a dozen calls per block) outweighs the arithmetic, while Python's integers pack or unpack a
whole bit stream with one ``int.to_bytes``/``int.from_bytes`` and one shift per value. The
functions here read and write exactly the bytes of :mod:`offheap.kernels.packing`'s layouts (int64
deltas, bit packing; tests hold the two equal); :mod:`offheap.treemap.page` uses them for blocks of at
most :data:`SMALL_BLOCK_VALUES` values and the numpy kernels above that.

Decoders raise :class:`~offheap.errors.CorruptionError` for a buffer that is too short or holds
an impossible width, like their numpy counterparts.
"""

from __future__ import annotations

from itertools import accumulate

from offheap.errors import CorruptionError
from offheap.kernels.packing import delta_base, varint_decode_one, varint_encode_one

SMALL_BLOCK_VALUES = 256
"""The largest block these functions are used for (measured crossover with numpy: ~300-500)."""

_MASK64 = (1 << 64) - 1
_SIGN64 = 1 << 63


def pack(values: list[int], width: int) -> bytes:
    """The bit-packed stream of non-negative ints below ``2**width`` (the packing layout)."""
    stream = 0
    for value in reversed(values):
        stream = (stream << width) | value
    return stream.to_bytes((len(values) * width + 7) // 8, "little")


def unpack(data, position: int, count: int, width: int) -> tuple[list[int], int]:
    """``count`` values of ``width`` bits at ``position`` of ``data``, and the end offset."""
    if not width:
        return [0] * count, position
    n_bytes = (count * width + 7) // 8
    chunk = bytes(data[position:position + n_bytes])
    if len(chunk) < n_bytes:
        raise CorruptionError(f"bit-packed block of {count} values at {width} bits needs "
                              f"{n_bytes} bytes at offset {position}: the data is truncated")
    stream = int.from_bytes(chunk, "little")
    mask = (1 << width) - 1
    return [(stream >> shift) & mask for shift in range(0, count * width, width)], position + n_bytes


def common_shift(keys: list[int], max_shift: int) -> int:
    """How many low bits are zero in every key, at most ``max_shift`` (which all-zero keys get)."""
    merged = 0
    for key in keys:
        merged |= key
    if merged == 0:
        return max_shift
    return min((merged & -merged).bit_length() - 1, max_shift)


def encode_int64_deltas(keys: list[int]) -> bytes:
    """:func:`offheap.kernels.packing.encode_int64_deltas` of a non-empty list of int64 keys."""
    first = keys[0]
    header = varint_encode_one((first << 1) ^ (first >> 63))
    if len(keys) == 1:
        return header
    gaps = [(right - left) & _MASK64 for left, right in zip(keys, keys[1:])]
    high = max(gaps)
    base = delta_base(min(gaps), high, len(gaps))
    width = (high - base).bit_length()
    packed = pack([gap - base for gap in gaps], width) if width else b""
    return header + bytes((width,)) + varint_encode_one(base) + packed


def decode_int64_deltas(data, count: int, offset: int,
                        first: int | None = None) -> tuple[list[int], int]:
    """:func:`offheap.kernels.packing.decode_int64_deltas` for ``count >= 1``, as a list of ints."""
    if first is None:
        code, position = varint_decode_one(data, offset)
        first = (code >> 1) ^ -(code & 1)
    else:
        position = offset
    if count == 1:
        return [first], position
    if position >= len(data) or data[position] > 64:
        raise CorruptionError(f"int64 delta block has no valid bit width at offset {position}: "
                              f"the data is corrupt or truncated")
    width = data[position]
    base, position = varint_decode_one(data, position + 1)
    if width:
        gaps, position = unpack(data, position, count - 1, width)
        steps = [gap + base for gap in gaps]
    else:
        steps = [base] * (count - 1)
    running = accumulate(steps, initial=first & _MASK64)
    return [((value & _MASK64) ^ _SIGN64) - _SIGN64 for value in running], position
