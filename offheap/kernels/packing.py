"""Integer and key packing kernels (layer 2: pure functions, bytes in, arrays out, no IO).

Everything here is vectorized with numpy: the work per element is a handful of array operations,
never a Python loop per element, except where a Python object must be built per element anyway
(the ``bytes`` keys of :func:`front_decode`). Decoders take any bytes-like buffer and an
``offset``, read exactly the bytes their layout names, return a fresh array or list (never a view
into the caller's buffer) and the offset just past what they read. A buffer that is too short or
holds an impossible value raises :class:`~offheap.errors.CorruptionError`; a bad argument from the
caller (a negative count, a width above 64, a value that does not fit) raises ``ValueError``,
``TypeError`` or ``OverflowError``.

Decoders allocate O(count) whatever the size of the data (a constant block is a few bytes for
any count), so ``count`` must come from a header the caller has checked. Every function is pure
and thread-safe; the numpy work releases the GIL only where numpy does.

Byte layouts
============

All multi-byte quantities are little-endian. Nothing here stores a count: the caller keeps it
(a page header does) and passes it back to the decoder.

**zigzag** maps int64 to uint64 so that small magnitudes stay small:
``0, -1, 1, -2, 2, ...  ->  0, 1, 2, 3, 4, ...``, i.e. ``(v << 1) ^ (v >> 63)``.

**varint** (unsigned LEB128): a uint64 is cut into 7-bit groups, least significant first; each
group is one byte, with bit 7 set on every byte but the last. 0..127 take one byte, 2**63 takes
ten. Example: 300 -> ``AC 02``. :func:`varint_encode` writes the varints of an array back to back.
The decoder accepts redundant zero groups (``80 00`` is 0) but rejects a varint longer than ten
bytes or one whose value does not fit in 64 bits.

**bit packing** of ``count`` values at ``width`` bits (0..64): value ``i`` occupies bits
``[i*width, (i+1)*width)`` of a little-endian bit stream, where stream bit ``k`` is bit ``k % 8``
of byte ``k // 8``. The stream takes ``ceil(count*width/8)`` bytes; the unused high bits of the last
byte are written as zero and ignored on reading. Width 0 takes no bytes and decodes to zeros.
Example: ``[1, 2, 3]`` at width 2 -> ``39`` (``0b00_11_10_01``).

**int64 deltas** (:func:`encode_int64_deltas`), frame-of-reference bit packing of the gaps::

    count == 0:  nothing (zero bytes)
    count >= 1:  varint  zigzag(keys[0])
    count >= 2:  u8      width w (0..64)
                 varint  base: min(d), or 0 where that makes the block shorter
                 bit-packed d - base at width w, count-1 values
                 where d[i] = keys[i+1] - keys[i] computed in uint64 (wrapping) arithmetic
                 and w = bit length of max(d) - base

The encoder picks the base (:func:`delta_base`); the decoder reads whatever base the block
names. ``min(d)`` makes equal gaps cost nothing; 0 costs one byte where ``min(d)`` costs a varint
of its size, and random keys, whose smallest gap is a fraction of the largest, lose no bit of
width by it (a page of 26 random int64 keys saves 5 of its 160 bytes).

Wrapping arithmetic makes every int64 sequence encodable, sorted or not, whatever its gaps; the
decoder undoes it with a wrapping running sum. Sorted keys give small gaps and so a small width;
keys with a constant gap (sequential ids) take width 0, so the whole block is its 3 to 21 header
bytes (7 for ids near 10**9). Example: ``[10, 11, 12, 14]`` -> ``14 01 01 04`` (zigzag(10) = 20; width 1; base 1; gaps 1, 1, 2
packed as ``0, 0, 1``).

**int64 frame** (:func:`encode_int64_frame`), frame-of-reference bit packing of the values
themselves, for unsorted columns whose gaps would wrap::

    count == 0:  nothing (zero bytes)
    count >= 1:  varint  zigzag(base), base = min(values)
                 u8      0x80 | w, where w (0..64) is the bit length of max(values) - base
                 bit-packed values - base at width w, count values

The high bit of the width byte tells the two int64 layouts apart: both start with a varint,
and for two or more values the byte after it is the width, below 0x80 only in a delta block.
Example: ``[7, 3, 5]`` -> ``06 83 84 00`` (base 3, zigzag 6; width 3; packed ``4, 0, 2``).

**front coding** (:func:`front_encode`) of ``count`` byte strings::

    count varints   p[i]  length of the prefix key i shares with key i-1 (p[0] == 0)
    count varints   s[i]  length of the rest (the suffix) of key i
    bytes           the suffixes, concatenated, sum(s) bytes

Key ``i`` is ``key[i-1][:p[i]] + suffix[i]``. Any order of keys is accepted; sorted keys share the
most. Example: ``[b"apple", b"apricot"]`` -> ``00 02 05 05`` + ``b"applericot"``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offheap.errors import CorruptionError

__all__ = [
    "FRAME_WIDTH_FLAG",
    "bitpack",
    "bitunpack",
    "decode_int64_deltas",
    "decode_int64_frame",
    "delta_base",
    "encode_int64_deltas",
    "encode_int64_frame",
    "front_decode",
    "front_encode",
    "varint_decode",
    "varint_decode_one",
    "varint_encode",
    "varint_encode_one",
    "zigzag_decode",
    "zigzag_encode",
]

_U64 = np.dtype(np.uint64)
_I64 = np.dtype(np.int64)
_LE_U64 = np.dtype("<u8")
_MAX_VARINT_BYTES = 10
FRAME_WIDTH_FLAG = 0x80
"""Set in the width byte of an int64 frame block, clear in a delta block."""
_UINT64_LIMIT = 1 << 64
# A value at or above 2**(7*k) needs more than k groups, so searchsorted over these thresholds
# gives the number of groups of every value at once.
_VARINT_THRESHOLDS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)
# Bit (un)packing through a 64-bytes-per-value bit matrix takes the fewest numpy calls, so it
# wins on page-sized inputs; above these many values the word-shifting kernels win, and their
# temporaries stay at a few words per value (benchmarks/packing_bench.py measures both: the
# crossover is near 512 values for unpacking and 1000-3000, growing with the width, for packing).
_PACK_MATRIX_MAX_VALUES = 2048
_UNPACK_MATRIX_MAX_VALUES = 512
# Larger inputs go through the word kernels in blocks of this many values (a multiple of 8, so
# every block starts on a byte boundary) whose temporaries stay in cache: 2-3x faster at 1M.
_WORD_BLOCK_VALUES = 16384


# -- argument checks ----------------------------------------------------------------------------

def _integer_array(values, dtype: np.dtype, what: str) -> np.ndarray:
    """``values`` as a 1-D array of ``dtype`` (int64 or uint64), without copying when it is one.

    Raises ``TypeError`` for non-integer input and ``OverflowError`` for values outside ``dtype``,
    rather than letting numpy wrap or truncate them silently.
    """
    array = values if isinstance(values, np.ndarray) else np.asarray(values)
    if array.ndim != 1 or not array.flags.c_contiguous:
        array = np.ascontiguousarray(array).reshape(-1)
    if array.dtype == dtype:
        return array
    if array.dtype.kind not in "iuO" and array.size:
        raise TypeError(f"{what} must be integers, got an array of {array.dtype}")
    if array.dtype.kind == "O" and not all(type(v) is int for v in array.tolist()):
        raise TypeError(f"{what} must be integers that fit in {dtype}")
    if array.size:
        info = np.iinfo(dtype)
        low, high = int(array.min()), int(array.max())
        if low < info.min or high > info.max:
            raise OverflowError(f"{what} must fit in {dtype}: got values in [{low}, {high}]")
    return array.astype(dtype)


def _check_count(count: int) -> int:
    count = int(count)
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    return count


def _check_width(width: int) -> int:
    width = int(width)
    if not 0 <= width <= 64:
        raise ValueError(f"bit width must be in 0..64, got {width}")
    return width


def _check_offset(offset: int) -> int:
    offset = int(offset)
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    return offset


def _byte_array(buf, offset: int, size: int, what: str) -> np.ndarray:
    """``size`` bytes of ``buf`` from ``offset`` as a uint8 view; CorruptionError if short."""
    available = memoryview(buf).nbytes - offset
    if size > available:
        raise CorruptionError(f"{what} needs {size} bytes at offset {offset}, but "
                              f"only {max(available, 0)} remain: the data is truncated or corrupt")
    return np.frombuffer(buf, np.uint8, size, offset)


# -- zigzag ---------------------------------------------------------------------------------------

def zigzag_encode(values) -> np.ndarray:
    """Zigzag codes (uint64) of an int64 array: ``0, -1, 1, -2 -> 0, 1, 2, 3``. Returns a new array."""
    signed = _integer_array(values, _I64, "zigzag_encode input")
    return (signed.view(_U64) << np.uint64(1)) ^ (signed >> np.int64(63)).view(_U64)


def zigzag_decode(codes) -> np.ndarray:
    """The int64 array whose zigzag codes are ``codes`` (uint64). Returns a new array."""
    unsigned = _integer_array(codes, _U64, "zigzag_decode input")
    return (unsigned >> np.uint64(1)).view(_I64) ^ -(unsigned & np.uint64(1)).view(_I64)


# -- varint ---------------------------------------------------------------------------------------

def varint_encode_one(value: int) -> bytes:
    """The LEB128 varint of one integer in 0..2**64-1 (a scalar fast path for headers)."""
    if 0 <= value < 0x80:
        return bytes((value,))
    if not 0 <= value < _UINT64_LIMIT:
        raise OverflowError(f"a varint holds 0..2**64-1, got {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_decode_one(buf, offset: int = 0) -> tuple[int, int]:
    """``(value, end_offset)`` of the varint at ``offset`` (a scalar fast path for headers)."""
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    if type(buf) is not bytes:
        buf = memoryview(buf).cast("B")
    try:
        byte = buf[offset]
        if byte < 0x80:
            return byte, offset + 1
        value = byte & 0x7F
        shift = 7
        position = offset + 1
        while byte >= 0x80:
            if shift >= 7 * _MAX_VARINT_BYTES:
                raise CorruptionError(f"varint at offset {offset} is longer than "
                                      f"{_MAX_VARINT_BYTES} bytes: the data is corrupt")
            byte = buf[position]
            position += 1
            value |= (byte & 0x7F) << shift
            shift += 7
    except IndexError:
        raise CorruptionError(f"varint at offset {offset} runs past the end of the "
                              f"{len(buf)}-byte buffer: the data is truncated") from None
    if value >= _UINT64_LIMIT:
        raise CorruptionError(f"varint at offset {offset} does not fit in 64 bits: the data is corrupt")
    return value, position


def varint_encode(values) -> bytes:
    """The varints of a uint64 array (or one non-negative integer), back to back.

    O(n) array work in as many passes as the longest varint has bytes; one pass when every value
    is below 128 (lengths, small counts).
    """
    if type(values) is int:
        return varint_encode_one(values)
    return _varints(_integer_array(values, _U64, "varint_encode input"))


def _varints(unsigned: np.ndarray) -> bytes:
    """:func:`varint_encode` of an array already known to hold values in 0..2**64-1."""
    if not unsigned.size:
        return b""
    if np.maximum.reduce(unsigned) < 0x80:
        return unsigned.astype(np.uint8).tobytes()
    unsigned = unsigned.astype(_U64, copy=False)
    groups = np.searchsorted(_VARINT_THRESHOLDS, unsigned, side="right") + 1
    ends = np.cumsum(groups)
    out = np.empty(int(ends[-1]), np.uint8)
    positions = ends - groups
    remaining = unsigned
    for group in range(int(groups.max())):
        if group:
            alive = groups > group
            positions, remaining, groups = positions[alive] + 1, remaining[alive], groups[alive]
        byte = (remaining & np.uint64(0x7F)).astype(np.uint8)
        byte[groups > group + 1] |= 0x80
        out[positions] = byte
        remaining = remaining >> np.uint64(7)
    return out.tobytes()


def varint_decode(buf, count: int, offset: int = 0) -> tuple[np.ndarray, int]:
    """``(values, end_offset)``: ``count`` varints from ``buf[offset:]`` as a new uint64 array."""
    count = _check_count(count)
    offset = _check_offset(offset)
    if not count:
        return np.zeros(0, _U64), offset
    available = memoryview(buf).nbytes - offset
    if available < count:
        raise CorruptionError(f"{count} varints need at least {count} bytes at offset {offset}, "
                              f"but only {max(available, 0)} remain: the data is truncated")
    window = np.frombuffer(buf, np.uint8, min(available, _MAX_VARINT_BYTES * count), offset)
    head = window[:count]
    if head.max() < 0x80:
        return head.astype(_U64), offset + count
    ends = np.flatnonzero(window < 0x80)
    if ends.size < count:
        if window.size < available:  # count varints of <= 10 bytes would have ended in the window
            raise CorruptionError(f"a varint after offset {offset} is longer than {_MAX_VARINT_BYTES} "
                                  f"bytes: the data is corrupt")
        raise CorruptionError(f"expected {count} varints at offset {offset}, found {ends.size} "
                              f"before the data ran out: it is truncated or corrupt")
    ends = ends[:count]
    starts = np.empty(count, np.intp)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts + 1
    if lengths.max() > _MAX_VARINT_BYTES:
        raise CorruptionError(f"a varint at offset {offset} is longer than {_MAX_VARINT_BYTES} "
                              f"bytes: the data is corrupt")
    last_bytes = window[ends[lengths == _MAX_VARINT_BYTES]]
    if last_bytes.size and last_bytes.max() > 1:
        raise CorruptionError(f"a varint at offset {offset} does not fit in 64 bits: the data is corrupt")
    total = int(ends[-1]) + 1
    group_index = np.arange(total, dtype=np.intp) - np.repeat(starts, lengths)
    shifted = (window[:total] & np.uint8(0x7F)).astype(_U64) << (group_index * 7).astype(_U64)
    return np.bitwise_or.reduceat(shifted, starts), offset + total


# -- bit packing ----------------------------------------------------------------------------------

def _bitpack_matrix(values: np.ndarray, width: int) -> bytes:
    """Bit packing through an (n, 64) bit matrix: few numpy calls, 64 bytes of scratch per value."""
    bits = np.unpackbits(values.astype(_LE_U64, copy=False).view(np.uint8).reshape(-1, 8),
                         axis=1, bitorder="little")
    return np.packbits(bits[:, :width], bitorder="little").tobytes()


def _bitpack_words(values: np.ndarray, width: int) -> bytes:
    """Bit packing by shifting each value into 64-bit words: O(n) with a few words of scratch.

    Value ``i`` starts in word ``i*width // 64`` at bit ``i*width % 64`` and spills into the next
    word when it crosses the boundary. Every word holds the start of at least one value (width
    <= 64), and values starting in a word are consecutive, so an OR-reduction over those runs
    builds each word; the spilled high parts are OR-reduced the same way into the following word.
    """
    count = values.size
    positions = np.arange(count, dtype=_U64) * np.uint64(width)
    shifts = positions & np.uint64(63)
    low_parts = values << shifts
    high_parts = (values >> np.uint64(1)) >> (np.uint64(63) - shifts)  # values >> (64 - shift), 0 if shift is 0
    n_words = (count - 1) * width // 64 + 1
    first_value_of_word = (np.arange(n_words, dtype=np.intp) * 64 + (width - 1)) // width
    words = np.zeros(n_words + 1, _U64)
    words[:n_words] = np.bitwise_or.reduceat(low_parts, first_value_of_word)
    words[1:] |= np.bitwise_or.reduceat(high_parts, first_value_of_word)
    return words.astype(_LE_U64, copy=False).tobytes()[: (count * width + 7) // 8]


def _bitpack_unchecked(values: np.ndarray, width: int) -> bytes:
    if not width or not values.size:
        return b""
    if width == 64:
        return values.astype(_LE_U64, copy=False).tobytes()
    if values.size <= _PACK_MATRIX_MAX_VALUES:
        return _bitpack_matrix(values, width)
    return b"".join(_bitpack_words(values[start:start + _WORD_BLOCK_VALUES], width)
                    for start in range(0, values.size, _WORD_BLOCK_VALUES))


def bitpack(values, width: int) -> bytes:
    """The bit-packed stream of a uint64 array at ``width`` bits per value (layout above).

    Raises ``ValueError`` if a value needs more than ``width`` bits. O(n).
    """
    width = _check_width(width)
    unsigned = _integer_array(values, _U64, "bitpack input")
    if width < 64 and unsigned.size and unsigned.max() >> np.uint64(width):
        raise ValueError(f"bitpack: value {int(unsigned.max())} does not fit in {width} bits; "
                         f"pass width={int(unsigned.max()).bit_length()}")
    return _bitpack_unchecked(unsigned, width)


def _bitunpack_matrix(packed: np.ndarray, count: int, width: int) -> np.ndarray:
    bits = np.unpackbits(packed, count=count * width, bitorder="little").reshape(count, width)
    padded = np.zeros((count, 64), np.uint8)
    padded[:, :width] = bits
    return np.packbits(padded, axis=1, bitorder="little").view(_LE_U64).reshape(count).astype(
        _U64, copy=False)


def _bitunpack_words(packed: np.ndarray, count: int, width: int) -> np.ndarray:
    """Gathers each value from the word it starts in and the next one (see :func:`_bitpack_words`)."""
    n_bytes = packed.size
    words = np.zeros((n_bytes + 7) // 8 + 1, _LE_U64)
    words.view(np.uint8)[:n_bytes] = packed
    words = words.astype(_U64, copy=False)
    positions = np.arange(count, dtype=_U64) * np.uint64(width)
    first_word = (positions >> np.uint64(6)).astype(np.intp)
    shifts = positions & np.uint64(63)
    values = words[first_word] >> shifts
    values |= (words[first_word + 1] << np.uint64(1)) << (np.uint64(63) - shifts)
    values &= np.uint64((1 << width) - 1)
    return values


def bitunpack(buf, count: int, width: int, offset: int = 0) -> np.ndarray:
    """``count`` values of ``width`` bits from ``buf[offset:]``, as a new uint64 array.

    Reads ``ceil(count*width/8)`` bytes; the caller computes the end offset the same way.
    """
    count = _check_count(count)
    width = _check_width(width)
    offset = _check_offset(offset)
    packed = _byte_array(buf, offset, (count * width + 7) // 8, "bit-packed data")
    return _bitunpack_unchecked(packed, count, width)


def _bitunpack_unchecked(packed: np.ndarray, count: int, width: int) -> np.ndarray:
    if not width or not count:
        return np.zeros(count, _U64)
    if width == 64:
        return packed.view(_LE_U64).astype(_U64)
    if count <= _UNPACK_MATRIX_MAX_VALUES:
        return _bitunpack_matrix(packed, count, width)
    values = np.empty(count, _U64)
    for start in range(0, count, _WORD_BLOCK_VALUES):
        stop = min(start + _WORD_BLOCK_VALUES, count)
        block = packed[start * width // 8:(stop * width + 7) // 8]
        values[start:stop] = _bitunpack_words(block, stop - start, width)
    return values


# -- int64 deltas ---------------------------------------------------------------------------------

def encode_int64_deltas(keys) -> bytes:
    """Frame-of-reference bit packing of the gaps between int64 keys (layout above).

    Any order and any values work; sorted keys with even gaps cost the least. O(n).
    """
    signed = _integer_array(keys, _I64, "int64 keys")
    count = signed.size
    if not count:
        return b""
    first = int(signed[0])
    header = varint_encode_one((first << 1) ^ (first >> 63))
    if count == 1:
        return header
    unsigned = signed.view(_U64)
    gaps = np.subtract(unsigned[1:], unsigned[:-1])
    high = int(np.maximum.reduce(gaps))
    base = delta_base(int(np.minimum.reduce(gaps)), high, count - 1)
    width = (high - base).bit_length()
    return header + bytes((width,)) + varint_encode_one(base) + _pack_above(gaps, np.uint64(base),
                                                                             width)


def delta_base(low: int, high: int, n_gaps: int) -> int:
    """The base of an int64 delta block whose ``n_gaps`` gaps lie in ``[low, high]``: ``low``,
    or 0 when that makes the block strictly shorter (the layout above)."""
    if not low:
        return 0
    kept = len(varint_encode_one(low)) + (n_gaps * (high - low).bit_length() + 7) // 8
    return 0 if 1 + (n_gaps * high.bit_length() + 7) // 8 < kept else low


def _pack_above(values: np.ndarray, base, width: int) -> bytes:
    """Bit-packs ``values - base`` (uint64, modified in place) at ``width`` bits."""
    if not width:
        return b""
    np.subtract(values, base, out=values)
    return _bitpack_unchecked(values, width)


def decode_int64_deltas(buf, count: int, offset: int = 0,
                        first: int | None = None) -> tuple[np.ndarray, int]:
    """``(keys, end_offset)``: ``count`` int64 keys written by :func:`encode_int64_deltas`;
    with ``first``, the first key that the caller stored apart, and the block without its first
    varint at ``offset``."""
    count = _check_count(count)
    offset = _check_offset(offset)
    if not count:
        return np.zeros(0, _I64), offset
    data = buf if type(buf) is bytes else memoryview(buf).cast("B")
    if first is None:
        code, position = varint_decode_one(data, offset)
        first = _unzigzag_bits(code)
    else:
        position, first = offset, first & (_UINT64_LIMIT - 1)
    if count == 1:
        return np.array([first], _U64).view(_I64), position
    width, position = _read_width(data, position, "int64 delta block")
    base, position = varint_decode_one(data, position)
    keys = np.empty(count, _U64)
    keys[0] = first
    position = _unpack_above(data, position, keys[1:], base, width)
    np.add.accumulate(keys, out=keys)
    return keys.view(_I64), position


def encode_int64_frame(values) -> bytes:
    """Frame-of-reference bit packing of int64 values, no deltas (layout above). O(n).

    The better layout for unsorted columns: the width follows the spread of the values, where
    the gaps of unsorted values wrap around and need all 64 bits.
    """
    signed = _integer_array(values, _I64, "int64 values")
    if not signed.size:
        return b""
    low = int(np.minimum.reduce(signed))
    width = (int(np.maximum.reduce(signed)) - low).bit_length()
    header = varint_encode_one((low << 1) ^ (low >> 63)) + bytes((FRAME_WIDTH_FLAG | width,))
    return header + _pack_above(signed.view(_U64).copy(), np.uint64(low & (_UINT64_LIMIT - 1)), width)


def decode_int64_frame(buf, count: int, offset: int = 0) -> tuple[np.ndarray, int]:
    """``(values, end_offset)``: ``count`` int64 values written by :func:`encode_int64_frame`."""
    count = _check_count(count)
    offset = _check_offset(offset)
    if not count:
        return np.zeros(0, _I64), offset
    data = buf if type(buf) is bytes else memoryview(buf).cast("B")
    code, position = varint_decode_one(data, offset)
    width, position = _read_width(data, position, "int64 frame block", FRAME_WIDTH_FLAG)
    values = np.empty(count, _U64)
    position = _unpack_above(data, position, values, _unzigzag_bits(code), width)
    return values.view(_I64), position


def _unzigzag_bits(code: int) -> int:
    """The int64 whose zigzag code is ``code``, as its 64-bit two's complement pattern."""
    return ((code >> 1) ^ -(code & 1)) & (_UINT64_LIMIT - 1)


def _read_width(data, position: int, what: str, flag: int = 0) -> tuple[int, int]:
    """The bit width in the byte at ``position`` (which must carry exactly ``flag``)."""
    if position >= len(data):
        raise CorruptionError(f"{what} ends before its bit width at offset {position}: "
                              f"the data is truncated")
    width = data[position] ^ flag
    if width > 64:
        raise CorruptionError(f"{what} has width byte {data[position]:#04x} at offset {position}, "
                              f"not {flag:#04x} + a bit width of 0..64: the data is corrupt")
    return width, position + 1


def _unpack_above(data, position: int, out: np.ndarray, base: int, width: int) -> int:
    """Fills ``out`` with ``base`` + the ``out.size`` packed values at ``position``; returns the end."""
    n_bytes = (out.size * width + 7) // 8
    if width:
        out[:] = _bitunpack_unchecked(_byte_array(data, position, n_bytes, "bit-packed block"),
                                      out.size, width)
        np.add(out, np.uint64(base), out=out)
    else:
        out[:] = base
    return position + n_bytes


# -- front coding ---------------------------------------------------------------------------------

# The shared-prefix search compares 8-byte words: its first round compares this many words of
# every adjacent pair (enough for most sorted keys), each further round twice as many, up to the
# maximum, in blocks of pairs small enough to keep the gathered words to a few MiB.
_PREFIX_FIRST_WORDS = 2
_PREFIX_MAX_WORDS = 16
_PREFIX_BLOCK_WORDS = 1 << 19
_BYTE_THRESHOLDS = np.array([1 << (8 * k) for k in range(1, 8)], dtype=np.uint64)


def _shared_prefix_lengths(joined: bytes, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """For each key after the first, the length of the prefix it shares with the key before it.

    Keys are slices ``joined[starts[i]:starts[i]+lengths[i]]``. A round reads, for both keys of
    every unresolved pair, ``n_words`` little-endian 8-byte words from the same column, through
    one fancy index into a view whose row ``i`` is the words at byte ``i`` (overlapping strides,
    no copy). The first differing byte is the lowest non-zero byte of the first non-zero XOR
    word. Pairs equal over the whole window, with both keys going on, move to the next round
    with a window twice as wide: a shared prefix of p bytes costs O(log p) rounds.
    """
    limits = np.minimum(lengths[:-1], lengths[1:])
    shared = np.empty_like(limits)
    padded = joined + bytes(8 * _PREFIX_MAX_WORDS)
    pending = np.arange(limits.size)
    column, n_words = 0, _PREFIX_FIRST_WORDS
    while pending.size:
        words = np.ndarray((len(joined) + 1, n_words), _LE_U64, padded, 0, (1, 8))
        unresolved = []
        block_pairs = _PREFIX_BLOCK_WORDS // n_words
        for block_start in range(0, pending.size, block_pairs):
            pairs = pending[block_start:block_start + block_pairs]
            left = starts[pairs] + column
            differ = words[left] ^ words[left + lengths[pairs]]
            first_word = (differ != 0).argmax(axis=1)
            first_differ = differ[np.arange(pairs.size), first_word]
            found = first_differ != 0
            first_byte = np.searchsorted(_BYTE_THRESHOLDS, first_differ & np.negative(first_differ),
                                         side="right")
            window_end = column + 8 * n_words
            pair_limits = limits[pairs]
            shared[pairs] = np.minimum(np.where(found, column + 8 * first_word + first_byte, window_end),
                                       pair_limits)
            unresolved.append(pairs[~found & (pair_limits > window_end)])
        pending = unresolved[0] if len(unresolved) == 1 else np.concatenate(unresolved)
        column += 8 * n_words
        n_words = min(2 * n_words, _PREFIX_MAX_WORDS)
    return shared


def front_encode(keys: Sequence[bytes]) -> bytes:
    """Front coding of byte strings (layout above); sorted keys compress best. O(total bytes)."""
    count = len(keys)
    if not count:
        return b""
    joined = b"".join(keys)
    if count == 1:
        return b"\x00" + varint_encode_one(len(joined)) + joined
    lengths = np.array(list(map(len, keys)), np.int64)
    starts = np.subtract(np.add.accumulate(lengths), lengths)
    prefixes = np.zeros(count, np.int64)
    prefixes[1:] = _shared_prefix_lengths(joined, starts, lengths)
    suffix_lengths = lengths - prefixes
    if prefixes.any():
        keep = np.ones(len(joined), bool)
        skipped_starts = np.repeat(starts - np.add.accumulate(prefixes) + prefixes, prefixes)
        keep[skipped_starts + np.arange(skipped_starts.size)] = False
        suffixes = np.frombuffer(joined, np.uint8)[keep].tobytes()
    else:
        suffixes = joined
    return _varints(np.concatenate([prefixes, suffix_lengths])) + suffixes


def front_decode(buf, count: int, offset: int = 0) -> tuple[list[bytes], int]:
    """``(keys, end_offset)``: ``count`` byte strings written by :func:`front_encode`."""
    count = _check_count(count)
    offset = _check_offset(offset)
    if not count:
        return [], offset
    lengths, position = varint_decode(buf, 2 * count, offset)
    prefixes, suffix_lengths = lengths[:count], lengths[count:]
    available = memoryview(buf).nbytes - position
    if suffix_lengths.max() > available:
        raise CorruptionError(f"a front-coded key at offset {offset} has a suffix longer than the "
                              f"{available} bytes left: the data is truncated or corrupt")
    # Suffix lengths are now small, so key lengths cannot wrap until a prefix is too long, and
    # the first too-long prefix is caught against the (still exact) length of the key before it.
    key_lengths = prefixes + suffix_lengths
    if prefixes[0] or (count > 1 and (prefixes[1:] > key_lengths[:-1]).any()):
        raise CorruptionError(f"front-coded keys at offset {offset} share a prefix longer than the "
                              f"key before them: the data is corrupt")
    total = int(suffix_lengths.sum())
    suffix_bytes = _byte_array(buf, position, total, "front-coded keys").tobytes()
    ends = np.add.accumulate(suffix_lengths).tolist()
    keys = []
    key = b""
    start = 0
    for prefix, end in zip(prefixes.tolist(), ends):
        key = key[:prefix] + suffix_bytes[start:end]
        keys.append(key)
        start = end
    return keys, position + total
