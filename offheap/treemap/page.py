"""B+tree pages (layer 6, used by :mod:`offheap.treemap.node` and the tree's salvage walker): pure
functions, bytes in and out.

A page is one record in the store: a leaf (sorted keys and their values) or an inner node
(separator keys and child record ids). Layout, integers little-endian, ``varint`` = LEB128::

    u8      flags: bit 0 kind (0 leaf, 1 inner); bits 1-2 codec (0 none, 1 zlib, 2 snappy, 3 zstd)
    varint  count: entries of a leaf, children of an inner node
    varint  raw body length                                   (only when the codec is not none)
    body, compressed with the codec when it has one:
      leaf:   key block of ``count`` keys, then the value column (the value serializer's
              ``pack_column``: a column of empty values costs a byte or two, not one per entry)
      inner:  key block of ``count - 1`` separators, then the child record ids, then the
              entries under each child (its subtree's entry count), each column of ``count``
              integers packed as varint base, u8 bit width, bit-packed ``value - base``

    key block, int64 keys:  u8 shift s, then ``encode_int64_deltas(keys >> s)``
              (s is the number of trailing zero bits every key shares, so ``keys >> s`` is
              exact; separators are chosen with many trailing zeros, see :func:`separator`).
              Where the first shifted key's varint would take 9 or 10 bytes (random keys
              of the whole int64 range), the shift byte is ``s | 0x40`` and that key follows
              as 8 bytes little-endian, then the delta block without its first varint
    key block, str/bytes:   ``front_encode`` of the keys as bytes (str as UTF-8)

Versions. This is page format 3 (tree format 3, :mod:`offheap.treemap.meta`). Format 2 never
sets 0x40 in a shift byte (its first keys are always varints), so its pages read as format 3
pages. Format 1 inner pages end after the child record ids: they carry no entry counts, and
:func:`decode_inner` reads them with ``with_counts=False`` (for the conversion of a format 1
tree, :mod:`offheap.treemap.upgrade`). Leaves are the same in formats 1 and 2.

An empty leaf (the root of an empty tree) is the two bytes ``00 00``. A codec is only kept when
it makes the page smaller; otherwise the page is written raw with codec 0, so decoding never
depends on a codec that did not help.

Sizes, sequential int64 keys with empty values: the deltas are all 1 and bit-pack to a few
bytes whatever the node size, so a leaf costs a dozen bytes for 32 or 120 entries.

A tree's ``node_size`` lies in ``[MIN_NODE_SIZE, MAX_NODE_SIZE]``, so a page it writes counts at
most ``MAX_NODE_SIZE`` entries or children.

Interface. The rest of the tree reaches pages only through :func:`encode_leaf`,
:func:`decode_leaf`, :func:`encode_inner`, :func:`decode_inner`, :func:`is_inner`,
:func:`header_count`, :func:`raw_size` and :func:`separator` and the module constants: a compiled codec stands in for
this module by providing the same functions, producing and accepting the same bytes. Keys and
values go in as sequences and come out as new columns that the caller owns: int64 keys as an
``array('q')`` (:func:`key_column`: 8 bytes a key, where a list holds a pointer and an int
object of 32 bytes), str and bytes keys and every value as Python lists.

Compiled leaves. When :mod:`offheap.kernels.native` loads ``offheap.treemap._pages``
(:data:`COMPILED`), :func:`encode_leaf` and :func:`decode_leaf` hand leaves of the built-in
serializers to it: raw pages whole (header and body), and the body alone of a page this module
compresses or decompresses. It writes and reads the same bytes as :func:`encode_leaf_body` and
:func:`decode_leaf_body`, the reference here, which also runs for what the compiled codec
declines (custom serializers, object columns of mixed types, keys or values that are not exact
int/float/str/bytes objects). It also reads the body of a format 2 inner page
(``decode_inner_body``: separators, child record ids and counts, byte for byte as
:func:`decode_inner`, which runs itself for int64 separator blocks above 256 keys and format 1
pages) and packs the child and count columns of inner pages (``pack_column``, as
:func:`_pack_column`). Codecs and the rest of inner-page encoding stay in Python.

Damaged pages. Decoding raises :class:`CorruptionError` for a page that does not follow this
layout, before allocating more than the page can hold: a count above :data:`MAX_NODE_SIZE`, a
key shift above 63 or shifted keys outside int64 are refused, and every length inside is
checked against the bytes left, so a decoded leaf costs O(``MAX_NODE_SIZE`` x page size) at most.
A compressed page may declare a body of at most :func:`max_body_bytes` of its compressed size
(1,032 times it, or 16 MiB), which every writer keeps to, and its codec never produces or
allocates more than the body declared: a crafted page of a few bytes cannot make a read allocate
gigabytes.
"""

from __future__ import annotations

from array import array

import numpy as np

from offheap.kernels.codecs import get_codec
from offheap.kernels import native, smallpack
from offheap.kernels.bounds import INT64_MAX, INT64_MIN
from offheap.errors import CorruptionError
from offheap.store.serializers import BYTES, FLOAT64, INT64, OBJECT, STR
from offheap.kernels.packing import (
    bitpack,
    bitunpack,
    decode_int64_deltas,
    encode_int64_deltas,
    front_decode,
    front_encode,
    varint_decode_one,
    varint_encode_one,
)

KEY_KINDS = ("int64", "str", "bytes")
CODEC_IDS = {"none": 0, "zlib": 1, "snappy": 2, "zstd": 3}
CODEC_NAMES = {number: name for name, number in CODEC_IDS.items()}
LEAF, INNER = 0, 1
MIN_NODE_SIZE, MAX_NODE_SIZE = 4, 4096
MAX_EXPANSION = 1032
"""How many times its compressed size a compressed page's body may be: DEFLATE's own limit (a
258-byte match coded in two bits); snappy's is about 21. Zstandard's format allows far more (an
RLE block of 4 bytes stands for 128 KiB), so the writer keeps a zstd page compressed only within
the bound (:func:`max_body_bytes`) and writes it raw otherwise."""
BODY_FLOOR_BYTES = 1 << 24
"""A compressed page may always declare a body of 16 MiB, whatever its ratio."""
_MAX_SHIFT = 63
_RAW_FIRST = 0x40
"""In the shift byte of an int64 key block (format 3): the first shifted key follows as 8 bytes,
little-endian, and the delta block after it has no first varint."""

_compiled_pages = native.compiled_module("offheap.treemap._pages")
COMPILED = _compiled_pages is not None
"""Whether leaf bodies go through the compiled codec (module docstring)."""
_KEY_KIND_NUMBERS = {kind: number for number, kind in enumerate(KEY_KINDS)}
_VALUE_KIND_NUMBERS = {serializer: number for number, serializer in
                       enumerate((INT64, FLOAT64, STR, BYTES, OBJECT))}


def compiled_kinds(key_kind: str, value_serializer) -> tuple[int, int] | None:
    """The key and value kind numbers of the compiled codec for a tree of ``key_kind`` keys and
    ``value_serializer`` values, or None when leaves of that tree are the reference's alone (the
    codec is not loaded, or the serializer is not one of the built-in ones)."""
    value_kind = _VALUE_KIND_NUMBERS.get(value_serializer)
    if _compiled_pages is None or value_kind is None:
        return None
    return _KEY_KIND_NUMBERS[key_kind], value_kind


# -- key blocks ---------------------------------------------------------------------------------

def key_column(key_kind: str, keys=()) -> array | list:
    """A new column of keys of ``key_kind`` as a decoded node keeps them: an ``array('q')`` of
    int64 keys (list-like: index, slice, insert, ``del``, ``+=``, ``==``, ``bisect``), else a
    list. ``keys`` must fit the kind (an int outside int64 raises OverflowError)."""
    return array("q", keys) if key_kind == "int64" else list(keys)


def key_list(column) -> list:
    """The keys of a key column, or of a slice of one, as a list: the list itself, or a new list
    of an array's keys."""
    return column.tolist() if type(column) is array else column


def _common_shift(keys: np.ndarray) -> int:
    """How many low bits are zero in every key (0 for an empty or odd-containing block)."""
    if not len(keys):
        return 0
    merged = int(np.bitwise_or.reduce(keys.view(np.uint64)))
    if merged == 0:
        return _MAX_SHIFT
    return min((merged & -merged).bit_length() - 1, _MAX_SHIFT)


def _fits_int64(keys) -> bool:
    """Whether a list holds only Python ints in the int64 range (else numpy checks and converts)."""
    return (all(type(key) is int for key in keys)
            and INT64_MIN <= min(keys) and max(keys) <= INT64_MAX)


def encode_keys(keys, key_kind: str) -> bytes:
    """The key block of a page for a sorted sequence of keys (a list, or a :func:`key_column`)."""
    if key_kind == "int64":
        small = 0 < len(keys) <= smallpack.SMALL_BLOCK_VALUES
        if small and type(keys) is array:  # int64 by construction
            keys = keys.tolist()
        if small and _fits_int64(keys):
            shift = smallpack.common_shift(keys, _MAX_SHIFT)
            shifted = [key >> shift for key in keys] if shift else list(keys)
            return _int64_key_block(shift, shifted[0], smallpack.encode_int64_deltas(shifted))
        words = np.array(keys, dtype=np.int64)
        shift = _common_shift(words)
        shifted_array = words >> shift
        return _int64_key_block(shift, int(shifted_array[0]) if len(shifted_array) else 0,
                                encode_int64_deltas(shifted_array))
    if key_kind == "str":
        return front_encode([k.encode("utf-8", "surrogatepass") for k in keys])
    return front_encode(list(keys))


def _int64_key_block(shift: int, first: int, deltas: bytes) -> bytes:
    """The int64 key block of shift ``shift`` whose shifted keys start with ``first`` and
    pack to the delta block ``deltas``: the first key as 8 bytes where its varint is longer."""
    head = len(varint_encode_one((first << 1) ^ (first >> 63))) if deltas else 0
    if head <= 8:
        return bytes((shift,)) + deltas
    return bytes((shift | _RAW_FIRST,)) + first.to_bytes(8, "little", signed=True) + deltas[head:]


def decode_keys(buf, count: int, key_kind: str, offset: int = 0) -> tuple[list, int]:
    """Keys of a key block as a Python list, and the offset after the block."""
    if key_kind == "int64":
        shift, first = buf[offset] & ~_RAW_FIRST, None
        if shift > _MAX_SHIFT:
            raise CorruptionError(f"int64 key block shift {shift} is above {_MAX_SHIFT}")
        offset += 1
        if buf[offset - 1] & _RAW_FIRST:
            if offset + 8 > len(buf):
                raise CorruptionError("int64 key block's first key is truncated")
            first = int.from_bytes(buf[offset:offset + 8], "little", signed=True)
            offset += 8
        if 0 < count <= smallpack.SMALL_BLOCK_VALUES:
            keys, end = smallpack.decode_int64_deltas(buf, count, offset, first)
            if shift and (min(keys) < INT64_MIN >> shift or max(keys) > INT64_MAX >> shift):
                raise CorruptionError(f"int64 keys << {shift} do not fit in int64")
            return ([key << shift for key in keys] if shift else keys), end
        words, end = decode_int64_deltas(buf, count, offset, first)
        if shift:
            shifted = words << shift
            if ((shifted >> shift) != words).any():
                raise CorruptionError(f"int64 keys << {shift} do not fit in int64")
            words = shifted
        return words.tolist(), end
    encoded, end = front_decode(buf, count, offset)
    if key_kind == "str":
        return [bytes(k).decode("utf-8", "surrogatepass") for k in encoded], end
    return [bytes(k) for k in encoded], end


def separator(left_max, right_min):
    """The key to put between two sibling nodes: ``left_max < s <= right_min``, the shortest.

    For int64 keys, the one with the most trailing zero bits (so a page of separators shares a
    large shift and packs small); for str/bytes, the shortest prefix of ``right_min``. Example:
    between 1000 and 1100 the int64 separator is 1024; between b"apple" and b"apricot", b"apr".
    """
    if isinstance(right_min, int):
        bits = (right_min - left_max).bit_length()
        while bits >= 0:
            candidate = (right_min >> bits) << bits
            if candidate > left_max:
                return candidate
            bits -= 1
        raise AssertionError("unreachable: right_min itself is > left_max")
    for length in range(1, len(right_min) + 1):
        prefix = right_min[:length]
        if prefix > left_max:
            return prefix
    return right_min


# -- pages --------------------------------------------------------------------------------------

def max_body_bytes(packed_bytes: int) -> int:
    """The largest body a compressed page of ``packed_bytes`` compressed bytes may declare: what
    a reader allocates for it at most, and the bound a writer keeps to (:data:`MAX_EXPANSION`)."""
    return max(BODY_FLOOR_BYTES, MAX_EXPANSION * packed_bytes)


def _seal(kind: int, count: int, body: bytes, codec) -> bytes:
    """Header and body; compressed only when that makes the page smaller."""
    if codec is not None and codec.name != "none" and body:
        packed = codec.compress(body)
        head = varint_encode_one(count) + varint_encode_one(len(body))
        if (1 + len(head) + len(packed) < 1 + len(varint_encode_one(count)) + len(body)
                and len(body) <= max_body_bytes(len(packed))):
            return bytes((kind | CODEC_IDS[codec.name] << 1,)) + head + packed
    return bytes((kind,)) + varint_encode_one(count) + body


def _open(page, kind: int) -> tuple[int, bytes | memoryview, int]:
    """(count, body buffer, body offset) of a page, decompressing it if needed."""
    if not len(page):
        raise CorruptionError("empty page record")
    flags = page[0]
    if flags & 1 != kind or flags >> 3:
        raise CorruptionError(f"page flags {flags:#04x} are not those of a "
                              f"{'leaf' if kind == LEAF else 'inner node'}")
    count, offset = varint_decode_one(page, 1)
    if count > MAX_NODE_SIZE:
        raise CorruptionError(f"page counts {count} entries, more than a page holds "
                              f"({MAX_NODE_SIZE}): the data is corrupt")
    codec_id = flags >> 1
    if codec_id == 0:
        return count, page, offset
    body_size, offset = varint_decode_one(page, offset)
    if body_size > max_body_bytes(len(page) - offset):
        raise CorruptionError(f"page body claims {body_size} bytes from {len(page) - offset} "
                              f"compressed bytes, more than a page is ever written with (at most "
                              f"{MAX_EXPANSION} times its compressed size, or 16 MiB): the data is "
                              f"corrupt")
    body = get_codec(CODEC_NAMES[codec_id]).decompress(bytes(page[offset:]), body_size)
    if len(body) != body_size:
        raise CorruptionError(f"page body decompressed to {len(body)} bytes, expected {body_size}")
    return count, body, 0


def is_inner(page) -> bool:
    """Whether a page (not empty) is an inner node's rather than a leaf's."""
    return page[0] & 1 == INNER


def header_count(page) -> int:
    """The count in a page's header, without decoding the body: the entries of a leaf, the
    children of an inner node."""
    if not len(page):
        raise CorruptionError("empty page record")
    return varint_decode_one(page, 1)[0]


def raw_size(page) -> int:
    """The size a page would have without compression (its own size when it is raw)."""
    if page[0] >> 1 == 0:
        return len(page)
    count, offset = varint_decode_one(page, 1)
    body_size, offset = varint_decode_one(page, offset)
    return 1 + len(varint_encode_one(count)) + body_size


def encode_leaf(keys, values, key_kind: str, value_serializer, codec=None) -> bytes:
    """A leaf page for sorted ``keys`` and their ``values`` (equal lengths)."""
    count = len(keys)
    if not count:
        return bytes((LEAF, 0))
    value_kind = _VALUE_KIND_NUMBERS.get(value_serializer)
    if (_compiled_pages is not None and value_kind is not None and type(values) is list
            and type(keys) in (list, array)):
        raw = _compiled_pages.encode_leaf(keys, values, _KEY_KIND_NUMBERS[key_kind], value_kind)
        if raw is not None:
            if codec is None or codec.name == "none":
                return raw
            return _seal(LEAF, count, raw[1 + len(varint_encode_one(count)):], codec)
    return _seal(LEAF, count, encode_leaf_body(keys, values, key_kind, value_serializer), codec)


def decode_leaf(page, key_kind: str, value_serializer) -> tuple[array | list, list]:
    """(keys, values) of a leaf page: a :func:`key_column` and a list (the caller owns them)."""
    value_kind = _VALUE_KIND_NUMBERS.get(value_serializer)
    compiled = _compiled_pages if value_kind is not None else None
    if compiled is not None:  # raw pages whole; None for a compressed one, or one it declines
        entries = compiled.decode_leaf(page, _KEY_KIND_NUMBERS[key_kind], value_kind)
        if entries is not None:
            return entries
    count, body, offset = _open(page, LEAF)
    if not count:
        return key_column(key_kind), []
    if compiled is not None and body is not page:
        entries = compiled.decode_leaf_body(body, offset, count, _KEY_KIND_NUMBERS[key_kind],
                                            value_kind)
        if entries is not None:
            return entries
    return decode_leaf_body(body, offset, count, key_kind, value_serializer)


def encode_leaf_body(keys, values, key_kind: str, value_serializer) -> bytes:
    """The body of a leaf page, the reference: key block, then the value column."""
    return encode_keys(keys, key_kind) + value_serializer.pack_column(values)


def decode_leaf_body(body, offset: int, count: int, key_kind: str,
                     value_serializer) -> tuple[array | list, list]:
    """(keys, values) of the ``count``-entry leaf body at ``body[offset:]``, the reference: the
    keys as a :func:`key_column`."""
    try:
        decoded, offset = decode_keys(body, count, key_kind, offset)
        keys = array("q", decoded) if key_kind == "int64" else decoded
        values, _ = value_serializer.unpack_column(body, count, offset)
    except (IndexError, ValueError) as exc:
        raise CorruptionError(f"leaf page of {count} entries is damaged: {exc}") from None
    if isinstance(values, np.ndarray):
        values = values.tolist()
    elif not isinstance(values, list):
        values = list(values)
    return keys, values


def _pack_column(numbers: list[int]) -> bytes:
    """A column of non-negative ints: varint base (the smallest), u8 width, bit-packed offsets
    (by the compiled codec when it is loaded and the numbers fit 64 bits)."""
    if _compiled_pages is not None:
        packed = _compiled_pages.pack_column(numbers)
        if packed is not None:
            return packed
    base = min(numbers)
    offsets = [number - base for number in numbers]
    width = max(offsets).bit_length()
    packed = (smallpack.pack(offsets, width) if len(offsets) <= smallpack.SMALL_BLOCK_VALUES
              else bitpack(np.array(offsets, dtype=np.uint64), width))
    return varint_encode_one(base) + bytes((width,)) + packed


def _unpack_column(body, offset: int, count: int) -> tuple[list[int], int]:
    """The ``count`` ints of a column written by :func:`_pack_column`, and the offset after it."""
    base, offset = varint_decode_one(body, offset)
    width = body[offset]
    if width > 64:
        raise ValueError(f"bit width {width} is over 64")
    if count <= smallpack.SMALL_BLOCK_VALUES:
        offsets, end = smallpack.unpack(body, offset + 1, count, width)
        return [number + base for number in offsets], end
    packed = bitunpack(body, count, width, offset + 1)
    return (packed.astype(np.int64) + base).tolist(), offset + 1 + (count * width + 7) // 8


def encode_inner_head(separators, children, key_kind: str) -> bytes:
    """The start of an inner page's body: the separators' key block and the child record ids
    (what follows is the counts column, which changes with every insert below the node)."""
    return encode_keys(separators, key_kind) + _pack_column(children)


def encode_inner(separators, children, counts, key_kind: str, codec=None,
                 head: bytes | None = None) -> bytes:
    """An inner page: ``len(children) == len(counts) == len(separators) + 1``; ``counts[i]`` is
    the number of entries under ``children[i]``. ``head``, when given, is
    :func:`encode_inner_head` of these separators and children, encoded earlier."""
    if head is None:
        head = encode_inner_head(separators, children, key_kind)
    return _seal(INNER, len(children), head + _pack_column(counts), codec)


def decode_inner(page, key_kind: str, with_counts: bool = True) -> tuple[list, list, list | None]:
    """(separators, children, counts) of an inner page, all Python lists; ``with_counts=False``
    reads a format 1 page, which has no counts (None then)."""
    count, body, offset = _open(page, INNER)
    if count < 1:
        raise CorruptionError("inner page without children")
    if _compiled_pages is not None and with_counts and count >= 2:
        decoded = _compiled_pages.decode_inner_body(body, offset, count,
                                                    _KEY_KIND_NUMBERS[key_kind])
        if decoded is not None:
            return decoded
    try:
        separators, offset = decode_keys(body, count - 1, key_kind, offset)
        children, offset = _unpack_column(body, offset, count)
        counts = _unpack_column(body, offset, count)[0] if with_counts else None
    except (IndexError, ValueError) as exc:
        raise CorruptionError(f"inner page of {count} children is damaged: {exc}") from None
    return separators, children, counts
