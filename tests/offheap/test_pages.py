"""B+tree pages: round trips, separators, codec choice, damage, and golden bytes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offheap.kernels.codecs import get_codec
from offheap.errors import CorruptionError
from offheap.kernels.bounds import INT64_MAX, INT64_MIN
from offheap.treemap.node import Inner, encode_node
from offheap.treemap.page import (
    decode_inner,
    decode_leaf,
    key_column,
    encode_inner,
    encode_leaf,
    raw_size,
    separator,
)
from offheap.store.serializers import get_serializer

INT64 = st.integers(INT64_MIN, INT64_MAX)
OBJECTS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                    st.text(max_size=20), st.binary(max_size=20))
CODECS = st.sampled_from([None, "zlib", "snappy", "zstd"])
KEY_LISTS = {
    "int64": st.lists(INT64, max_size=150, unique=True).map(sorted),
    "str": st.lists(st.text(max_size=12), max_size=80, unique=True).map(sorted),
    "bytes": st.lists(st.binary(max_size=12), max_size=80, unique=True).map(sorted),
}


def _codec(name):
    return None if name is None else get_codec(name)


@pytest.mark.parametrize("key_kind", sorted(KEY_LISTS))
@settings(max_examples=60, deadline=None)
@given(data=st.data(), codec=CODECS)
def test_leaf_roundtrip(key_kind, data, codec):
    keys = data.draw(KEY_LISTS[key_kind])
    values = data.draw(st.lists(OBJECTS, min_size=len(keys), max_size=len(keys)))
    serializer = get_serializer("object")
    page = encode_leaf(keys, values, key_kind, serializer, _codec(codec))
    got_keys, got_values = decode_leaf(page, key_kind, serializer)
    assert got_keys == key_column(key_kind, keys) and got_values == values
    assert [type(v) for v in got_values] == [type(v) for v in values]
    assert raw_size(page) >= len(page) or page[0] >> 1 == 0


@settings(max_examples=60, deadline=None)
@given(keys=KEY_LISTS["int64"], codec=CODECS, value=st.sampled_from(["int64", "float64", "str", "bytes"]))
def test_leaf_roundtrip_typed_values(keys, codec, value):
    serializer = get_serializer(value)
    samples = {"int64": lambda k: k, "float64": lambda k: k / 3,
               "str": lambda k: str(k)[:5], "bytes": lambda k: str(k).encode()[:4]}
    values = [samples[value](k) for k in keys]
    page = encode_leaf(keys, values, "int64", serializer, _codec(codec))
    got_keys, got_values = decode_leaf(page, "int64", serializer)
    assert got_keys == key_column("int64", keys) and got_values == values


@pytest.mark.parametrize("key_kind", sorted(KEY_LISTS))
@settings(max_examples=60, deadline=None)
@given(data=st.data(), codec=CODECS)
def test_inner_roundtrip(key_kind, data, codec):
    separators = data.draw(KEY_LISTS[key_kind])
    children = data.draw(st.lists(st.integers(1, 2**40), min_size=len(separators) + 1,
                                  max_size=len(separators) + 1))
    counts = data.draw(st.lists(st.integers(1, 2**62), min_size=len(children),
                                max_size=len(children)))
    page = encode_inner(separators, children, counts, key_kind, _codec(codec))
    assert decode_inner(page, key_kind) == (separators, children, counts)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_inner_node_reencode_after_edits_matches_a_fresh_encode(data):
    """encode_node keeps an inner node's encoded separators and children across writes; after
    any edit of its lists (counts, children, separators) it writes what a fresh encode writes."""
    separators = data.draw(KEY_LISTS["int64"].filter(lambda keys: len(keys) < 60))
    children = list(range(7, 8 + len(separators)))
    node = Inner(3, separators, children, [5] * len(children))
    serializer = get_serializer("object")
    for _ in range(data.draw(st.integers(1, 6))):
        edit = data.draw(st.sampled_from(["count", "child", "separator", "none"]))
        i = data.draw(st.integers(0, len(node.children) - 1))
        if edit == "count":
            node.counts[i] += 1
        elif edit == "child":
            node.children[i] += 1000
        elif edit == "separator" and node.keys:
            node.keys[min(i, len(node.keys) - 1)] ^= 1
            node.keys.sort()
        page = encode_node(node, "int64", serializer, None)
        assert page == encode_inner(node.keys, node.children, node.counts, "int64")


@given(a=INT64, b=INT64)
def test_int_separator_is_between_and_round(a, b):
    if a == b:
        return
    left, right = min(a, b), max(a, b)
    s = separator(left, right)
    assert left < s <= right
    if s:  # no key in (left, right] is a multiple of a larger power of two than s
        step = 2 * (s & -s)
        assert right // step * step <= left
    assert separator(1000, 1100) == 1024 and separator(31, 32) == 32 and separator(-5, 3) == 0


@given(a=st.one_of(st.text(max_size=8), st.binary(max_size=8)), data=st.data())
def test_prefix_separator_is_between_and_short(a, data):
    b = data.draw(st.text(max_size=8) if isinstance(a, str) else st.binary(max_size=8))
    if a == b:
        return
    left, right = min(a, b), max(a, b)
    s = separator(left, right)
    assert left < s <= right and right.startswith(s)
    assert not any(left < right[:n] for n in range(len(s)))
    assert separator(b"apple", b"apricot") == b"apr" and separator("a", "b") == "b"


def test_sequential_keys_and_empty_values_pack_to_a_few_bytes():
    serializer = get_serializer("object")
    for size in (32, 120):
        page = encode_leaf(list(range(10**9, 10**9 + size)), [""] * size, "int64", serializer)
        assert len(page) <= 24, len(page)


def test_codec_is_dropped_when_it_does_not_help():
    serializer = get_serializer("bytes")
    keys = list(range(5))
    values = [bytes([i * 37 % 256, i * 91 % 256]) for i in range(5)]
    page = encode_leaf(keys, values, "int64", serializer, get_codec("zstd"))
    assert page[0] >> 1 == 0 and raw_size(page) == len(page)
    repetitive = [f"{i % 3} a long value that repeats " * 4 for i in range(50)]
    page = encode_leaf(list(range(50)), repetitive, "int64", get_serializer("str"), get_codec("zstd"))
    assert page[0] >> 1 == 3 and raw_size(page) > 5 * len(page)
    assert decode_leaf(page, "int64", get_serializer("str"))[1] == repetitive


def test_damaged_pages_raise_corruption_error():
    serializer = get_serializer("object")
    leaf = encode_leaf([1, 2, 3], ["a", "b", "c"], "int64", serializer)
    inner = encode_inner([10], [5, 6], [3, 4], "int64")
    with pytest.raises(CorruptionError):
        decode_leaf(inner, "int64", serializer)
    with pytest.raises(CorruptionError):
        decode_inner(leaf, "int64")
    with pytest.raises(CorruptionError):
        decode_leaf(b"", "int64", serializer)
    with pytest.raises(CorruptionError):
        decode_leaf(bytes([0xF0]) + leaf[1:], "int64", serializer)
    with pytest.raises(CorruptionError):
        decode_leaf(leaf[:4], "int64", serializer)


# Pages as this format writes them, byte for byte. A change here is a format change: existing
# files would no longer read. Annotated example, the first one:
#   00 leaf, raw | 05 entries | 00 key shift | d00f zigzag(1000) varint, 00 width, 01 base
#   (every gap is 1) | 03 00 00 object column: str form, constant "", length 0
GOLDEN_LEAVES = [
    ("000500d00f0001030000", list(range(1000, 1005)), [""] * 5, "int64", "object"),
    ("0004000928080000000000dd0300000010fcffffff050102020200030206780779",
     [-5, 3, 1000, 2**40], [None, 1, "x", b"y"], "int64", "object"),
    ("00030002000505066170706c657269636f7462616e616e61020001",
     ["apple", "apricot", "banana"], [1, 2, 3], "str", "int64"),
    ("000300010001010100016b01000102767676",
     [b"\x00", b"\x00\x01", b"k"], [b"", b"v", b"vv"], "bytes", "bytes"),
    ("0000", [], [], "int64", "object"),
    # format 3: 40 shift 0 with the first key as 8 bytes (its zigzag varint would take 10) |
    # 0500000000000080 -2**63 + 5 | 3f width 63, 00 base 0 | the two gaps at 63 bits
    ("00034005000000000000803f00fbfffffffffeffff0000000080000020030000",
     [-2**63 + 5, -2**40, 2**62 + 1], [""] * 3, "int64", "object"),
    # 43: shift 3 and a raw first key (2**59 + 3, whose varint would take 9 bytes) | 00 width 0,
    # 61 base 97: the one gap
    ("00024303000000000000080061030000", [2**62 + 24, 2**62 + 800], [""] * 2, "int64", "object"),
]
# 01 inner | 03 children | 0a shift 10 (1024 and 4096 share 10 zero bits) | 02 00 03 the keys
# 1 and 4 | 07 recid base | 02 width | 18 the offsets 0, 2, 1 at 2 bits | 11 count base 17 |
# 04 width | ff 00 the offsets 15, 15, 0 at 4 bits: 32, 32 and 17 entries under the children
GOLDEN_INNER = ("01030a020003070218" "1104ff00", [1024, 4096], [7, 9, 8], [32, 32, 17])
# the same node in format 1, which has no counts: read only by the conversion of a format 1 tree
GOLDEN_INNER_V1 = ("01030a020003070218", [1024, 4096], [7, 9, 8])
# a zstd page: only decoded here, since a compressor may pick other bytes in another version
GOLDEN_ZSTD_LEAF = ("0628e30900087501009801000005020006231d76616c756520303132330a0011dce107a000a8"
                    "e1800aa086032a801aae0a6382077f8011")


@pytest.mark.parametrize("hex_page,keys,values,key_kind,value", GOLDEN_LEAVES)
def test_golden_leaf_pages(hex_page, keys, values, key_kind, value):
    serializer = get_serializer(value)
    assert encode_leaf(keys, values, key_kind, serializer).hex() == hex_page
    got_keys, got_values = decode_leaf(bytes.fromhex(hex_page), key_kind, serializer)
    assert got_keys == key_column(key_kind, keys) and got_values == values


def test_golden_inner_page():
    hex_page, separators, children, counts = GOLDEN_INNER
    assert encode_inner(separators, children, counts, "int64").hex() == hex_page
    assert decode_inner(bytes.fromhex(hex_page), "int64") == (separators, children, counts)


def test_golden_format_1_inner_page_decodes_without_counts():
    hex_page, separators, children = GOLDEN_INNER_V1
    page = bytes.fromhex(hex_page)
    assert decode_inner(page, "int64", with_counts=False) == (separators, children, None)
    with pytest.raises(CorruptionError):
        decode_inner(page, "int64")  # format 2 expects the counts after the children


def test_golden_compressed_page_decodes():
    page = bytes.fromhex(GOLDEN_ZSTD_LEAF)
    assert page[0] == 0b110  # leaf, codec 3 (zstd)
    keys, values = decode_leaf(page, "int64", get_serializer("str"))
    assert keys == key_column("int64", range(0, 400, 10))
    assert values == [f"value {i % 4}" * 5 for i in range(40)]
    assert raw_size(page) > len(page)
