"""The compiled leaf codec (offheap.treemap._pages) against the reference in page.py: same bytes
for every key and value kind, same entries back, CorruptionError on both for damaged pages, and
crafted pages that would allocate far more than they hold.

Each test drives :mod:`offheap.treemap.page` on the reference (its compiled module set aside)
and on the compiled codec. Without the compiled module these tests fail, unless
``OFFHEAP_PURE_PYTHON`` is set: then the compiled half is skipped and the reference runs alone.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import struct
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offheap.errors import CorruptionError
from offheap.kernels import native
from offheap.kernels.bounds import INT64_MAX, INT64_MIN
from offheap.kernels.codecs import get_codec
from offheap.store.serializers import get_serializer
from offheap.treemap import page
from tests.offheap.test_pages import GOLDEN_LEAVES

PATHS = ["reference", "compiled"]


def compiled_pages():
    """The compiled codec; a skip only when it is missing and the reference was chosen."""
    if native.PURE_PYTHON:
        return pytest.importorskip("offheap.treemap._pages")
    return importlib.import_module("offheap.treemap._pages")


@contextlib.contextmanager
def on_path(path: str):
    """page.py running on one codec: the reference alone, or the compiled leaf bodies."""
    chosen = None if path == "reference" else compiled_pages()
    saved = page._compiled_pages
    page._compiled_pages = chosen
    try:
        yield
    finally:
        page._compiled_pages = saved


def encode_on(path: str, keys, values, key_kind: str, value: str, codec=None) -> bytes:
    with on_path(path):
        return page.encode_leaf(keys, values, key_kind, get_serializer(value), codec)


def decode_on(path: str, data: bytes, key_kind: str, value: str):
    """The entries of a page on one path, or the CorruptionError it raised."""
    with on_path(path):
        try:
            return page.decode_leaf(data, key_kind, get_serializer(value))
        except CorruptionError as exc:
            return exc


def same_items(left: list, right: list) -> bool:
    """Equal values of equal types, floats by their bit patterns (NaN payloads, -0.0)."""
    def normal(item):
        if type(item) is float:
            return ("float", struct.pack("<d", item))
        return (type(item), item)
    return list(map(normal, left)) == list(map(normal, right))


INT64S = st.integers(INT64_MIN, INT64_MAX)
FLOATS = st.one_of(st.floats(), st.integers(0, 2**64 - 1).map(
    lambda bits: struct.unpack("<d", bits.to_bytes(8, "little"))[0]))
# text with lone surrogates too, which the compiled codec declines
TEXT = st.text(st.characters(exclude_categories=()), max_size=12)
BINARY = st.binary(max_size=12)
KEYS = {
    "int64": st.one_of(
        st.lists(INT64S, min_size=1, max_size=300, unique=True),
        st.lists(st.integers(-1000, 1000), min_size=1, max_size=64, unique=True),
        st.builds(lambda start, step, n, shift: [(start + step * i) << shift for i in range(n)],
                  st.integers(-1000, 1000), st.integers(1, 9), st.integers(1, 300),
                  st.integers(0, 40))).map(sorted),
    "str": st.lists(TEXT, min_size=1, max_size=60, unique=True).map(sorted),
    "bytes": st.lists(BINARY, min_size=1, max_size=60, unique=True).map(sorted),
}
SCALARS = {"int64": INT64S, "float64": FLOATS, "str": TEXT, "bytes": BINARY}
MIXED = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), FLOATS, TEXT, BINARY)


def value_lists(value: str, n: int):
    """Columns of n values of a serializer: any, a few distinct ones, or one repeated."""
    def sized(element):
        return st.lists(element, min_size=n, max_size=n)
    if value == "object":
        one_kind = st.sampled_from(sorted(SCALARS)).flatmap(lambda kind: sized(SCALARS[kind]))
        column = st.one_of(one_kind, sized(MIXED))
    else:
        column = sized(SCALARS[value])
    repeated = (SCALARS["str"] if value == "object" else SCALARS[value]).map(lambda v: [v] * n)
    return st.one_of(column, repeated)


@st.composite
def leaves(draw):
    key_kind = draw(st.sampled_from(sorted(KEYS)))
    value = draw(st.sampled_from(["int64", "float64", "str", "bytes", "object"]))
    keys = draw(KEYS[key_kind])
    return key_kind, value, keys, draw(value_lists(value, len(keys)))


@settings(max_examples=400, deadline=None)
@given(leaf=leaves(), codec=st.sampled_from([None, "zlib"]))
def test_random_leaves_encode_alike_and_decode_to_their_entries(leaf, codec):
    key_kind, value, keys, values = leaf
    chosen = None if codec is None else get_codec(codec)
    data = encode_on("reference", keys, values, key_kind, value, chosen)
    assert encode_on("compiled", keys, values, key_kind, value, chosen) == data
    for path in PATHS:
        got_keys, got_values = decode_on(path, data, key_kind, value)
        assert got_keys == page.key_column(key_kind, keys) and same_items(got_values, values)
        assert type(got_keys) is type(page.key_column(key_kind)) and type(got_values) is list


def damaged(data: bytes, draw) -> bytes:
    """A page with bytes changed, cut off, inserted or dropped."""
    edit = draw(st.sampled_from(["flip", "set", "truncate", "insert", "drop"]))
    at = draw(st.integers(0, len(data) - 1))
    if edit == "flip":
        return data[:at] + bytes((data[at] ^ 1 << draw(st.integers(0, 7)),)) + data[at + 1:]
    if edit == "set":
        return data[:at] + bytes((draw(st.integers(0, 255)),)) + data[at + 1:]
    if edit == "truncate":
        return data[:at]
    if edit == "insert":
        return data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
    return data[:at] + data[at + 1:]


@settings(max_examples=600, deadline=None)
@given(leaf=leaves(), data=st.data())
def test_damaged_leaves_fail_alike_on_both_paths(leaf, data):
    key_kind, value, keys, values = leaf
    page_bytes = encode_on("reference", keys, values, key_kind, value)
    for _ in range(3):
        page_bytes = damaged(page_bytes, data.draw) or b"\x00"
    outcomes = [decode_on(path, page_bytes, key_kind, value) for path in PATHS]
    if isinstance(outcomes[0], CorruptionError) or isinstance(outcomes[1], CorruptionError):
        assert all(isinstance(outcome, CorruptionError) for outcome in outcomes), outcomes
    else:
        (keys_a, values_a), (keys_b, values_b) = outcomes
        assert keys_a == keys_b and same_items(values_a, values_b)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("hex_page,keys,values,key_kind,value", GOLDEN_LEAVES)
def test_golden_leaves_on_both_paths(path, hex_page, keys, values, key_kind, value):
    assert encode_on(path, keys, values, key_kind, value).hex() == hex_page
    assert decode_on(path, bytes.fromhex(hex_page), key_kind, value) == (page.key_column(key_kind, keys), values)


# 00 leaf | 80 80 80 80 01 (2**28 entries) | 00 shift | 00 first key 0 | 00 width | 01 base:
# eleven bytes that decode, without the bound on the count, to 2**28 keys 0, 1, 2, ...
ALLOCATION_BOMB = bytes.fromhex("00808080800100000001") + b"\x00"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("crafted,key_kind,value", [
    (ALLOCATION_BOMB, "int64", "object"),
    (bytes.fromhex("00818001") + b"\x00\x00\x00\x01" + b"\x03\x00\x00", "int64", "object"),
    (bytes.fromhex("00ffffffff0f") + b"\x00" * 8, "str", "bytes"),
    (bytes.fromhex("00ffff03") + b"\x00\x00\x00\x01" + b"\x00\x00", "int64", "str"),
])
def test_crafted_counts_above_a_page_raise_before_allocating(path, crafted, key_kind, value):
    outcome = decode_on(path, crafted, key_kind, value)
    assert isinstance(outcome, CorruptionError) and "more than a page holds" in str(outcome)


@pytest.mark.parametrize("path", PATHS)
def test_a_leaf_of_max_node_size_entries_still_decodes(path):
    keys = list(range(page.MAX_NODE_SIZE))
    data = encode_on(path, keys, [""] * len(keys), "int64", "object")
    assert len(data) < 16
    assert decode_on(path, data, "int64", "object") == (page.key_column("int64", keys), [""] * len(keys))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("key_block", [
    "4000",                    # shift 64
    "ff00",                    # shift 255
    "01feffffffffffffffff01",  # INT64_MAX << 1
    "3f02",                    # 1 << 63
])
def test_int64_key_shifts_that_leave_int64_are_corrupt(path, key_block):
    data = bytes.fromhex("0001" + key_block + "030000")  # one key, the object column ""
    assert isinstance(decode_on(path, data, "int64", "object"), CorruptionError)


def test_the_compiled_bound_is_the_page_bound():
    pages = compiled_pages()
    assert pages.MAX_ENTRIES == page.MAX_NODE_SIZE
    with pytest.raises(CorruptionError, match="more than a page holds"):
        pages.decode_leaf_body(b"\x00\x00", 0, page.MAX_NODE_SIZE + 1, 0, 4)


@pytest.mark.parametrize("keys,values,value", [
    ([np.int64(1), np.int64(2)], ["", ""], "object"),         # numpy keys
    ([1, 2], [np.float64(1.5), 2.0], "float64"),              # a numpy value
    ([1, 2], [True, 1], "object"),                            # mixed object column
    ([1, 2], [2**70, 1], "object"),                           # an int outside int64
    ([1, 2], ["\udc80", "x"], "str"),                         # a lone surrogate
])
def test_what_the_compiled_codec_declines_the_reference_encodes(keys, values, value):
    pages = compiled_pages()
    assert pages.encode_leaf(list(keys), list(values), 0,
                                  ["int64", "float64", "str", "bytes", "object"].index(value)) is None
    data = encode_on("reference", keys, values, "int64", value)
    assert encode_on("compiled", keys, values, "int64", value) == data
    got_keys, got_values = decode_on("compiled", data, "int64", value)
    assert got_keys == page.key_column("int64", [int(k) for k in keys])
    assert all(a == b or (isinstance(a, float) and math.isnan(a)) for a, b in zip(got_values, values))


def test_compiled_bodies_follow_the_active_choice():
    assert page.COMPILED == (not native.PURE_PYTHON)


def zstd_page(body_size: int, frame: bytes) -> bytes:
    """A compressed leaf page of 2 entries declaring ``body_size``, with ``frame`` as its body."""
    flags = page.CODEC_IDS["zstd"] << 1 | page.LEAF
    return bytes([flags]) + page.varint_encode_one(2) + page.varint_encode_one(body_size) + frame


def peak_bytes_of(call) -> int:
    """The most memory the Python allocators held at once while ``call()`` ran (bytes objects
    included, which is what a codec returns)."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("codec", ["zlib", "snappy", "zstd"])
def test_a_compressed_page_claiming_more_than_its_ratio_allows_is_corrupt(path, codec):
    pytest.importorskip({"zlib": "zlib", "snappy": "snappy", "zstd": "zstandard"}[codec])
    flags = page.CODEC_IDS[codec] << 1 | page.LEAF
    for body_size in (page.max_body_bytes(8) + 1, 2**63 + 1):
        damaged_page = bytes([flags]) + page.varint_encode_one(2) + page.varint_encode_one(body_size) + b"\x00" * 8
        outcome = decode_on(path, damaged_page, "int64", "int64")  # the error, not raised
        assert isinstance(outcome, CorruptionError) and "more than a page is ever written" in str(outcome)


@pytest.mark.parametrize("path", PATHS)
def test_a_zstd_bomb_is_refused_before_it_is_decompressed(path):
    """A real frame of 64 MiB of zeros is 2 KiB: far more than 1,032 times its size."""
    pytest.importorskip("zstandard")
    body_size = 64 << 20
    frame = get_codec("zstd").compress(bytes(body_size))
    bomb = zstd_page(body_size, frame)
    outcome = []
    peak = peak_bytes_of(lambda: outcome.append(decode_on(path, bomb, "int64", "bytes")))
    assert isinstance(outcome[0], CorruptionError) and "more than a page is ever written" in str(outcome[0])
    assert peak < 1 << 20


@pytest.mark.parametrize("path", PATHS)
def test_a_zstd_frame_holding_more_than_its_page_declares_stops_at_the_declaration(path):
    pytest.importorskip("zstandard")
    frame = get_codec("zstd").compress(bytes(64 << 20))
    outcome = []
    peak = peak_bytes_of(lambda: outcome.append(decode_on(path, zstd_page(1000, frame), "int64", "bytes")))
    assert isinstance(outcome[0], CorruptionError)
    assert peak < 1 << 20


@pytest.mark.parametrize("path", PATHS)
def test_a_zstd_leaf_beyond_the_ratio_bound_is_written_raw(path):
    """The writer keeps to the bound the reader enforces: a leaf body of 20 MiB that zstd packs
    into a few KiB is stored uncompressed (and reads back); one of 8 MiB stays compressed."""
    pytest.importorskip("zstandard")
    codec = get_codec("zstd")
    for n_values, compressed in ((20, False), (8, True)):
        keys, values = list(range(n_values)), [bytes([i]) * (1 << 20) for i in range(n_values)]
        data = encode_on(path, keys, values, "int64", "bytes", codec)
        assert (data[0] >> 1 == page.CODEC_IDS["zstd"]) is compressed
        assert decode_on(path, data, "int64", "bytes") == (page.key_column("int64", keys), values)

@st.composite
def inner_nodes(draw):
    """An inner node's key kind, sorted distinct separators, child record ids and entry counts."""
    key_kind = draw(st.sampled_from(sorted(KEYS)))
    separators = draw(KEYS[key_kind].filter(lambda keys: len(keys) >= 1))
    n = len(separators) + 1
    big = st.integers(0, (1 << 63) - 1)
    children = draw(st.lists(st.one_of(st.integers(1, 5000), big), min_size=n, max_size=n))
    counts = draw(st.lists(st.one_of(st.integers(0, 64), big), min_size=n, max_size=n))
    return key_kind, separators, children, counts


def decode_inner_on(path: str, data: bytes, key_kind: str):
    """The lists of an inner page on one path, or the CorruptionError it raised."""
    with on_path(path):
        try:
            return page.decode_inner(data, key_kind)
        except CorruptionError as exc:
            return exc


@settings(max_examples=300, deadline=None)
@given(node=inner_nodes(), codec=st.sampled_from([None, "zlib"]), data=st.data())
def test_inner_nodes_decode_alike_and_damaged_ones_fail_alike(node, codec, data):
    key_kind, separators, children, counts = node
    chosen = None if codec is None else get_codec(codec)
    with on_path("reference"):
        encoded = page.encode_inner(separators, children, counts, key_kind, chosen)
    with on_path("compiled"):
        assert page.encode_inner(separators, children, counts, key_kind, chosen) == encoded
    for path in PATHS:
        assert decode_inner_on(path, encoded, key_kind) == (separators, children, counts)
    damaged_page = encoded
    for _ in range(3):
        damaged_page = damaged(damaged_page, data.draw) or b"\x01"
    outcomes = [decode_inner_on(path, damaged_page, key_kind) for path in PATHS]
    if any(isinstance(outcome, CorruptionError) for outcome in outcomes):
        assert all(isinstance(outcome, CorruptionError) for outcome in outcomes), outcomes
    else:
        assert outcomes[0] == outcomes[1]


@settings(max_examples=300, deadline=None)
@given(numbers=st.lists(st.one_of(st.integers(0, 64), st.integers(0, (1 << 64) - 1),
                                  st.integers(1 << 64, 1 << 70), st.integers(-5, -1)),
                        min_size=1, max_size=300))
def test_columns_pack_alike_on_both_paths(numbers):
    """The compiled pack_column writes the reference's bytes, and declines (None) what only the
    reference packs: ints outside [0, 2**64) (a negative one is a ValueError there)."""
    compiled = compiled_pages().pack_column(numbers)
    with on_path("reference"):
        try:
            expected = page._pack_column(numbers)
        except (ValueError, OverflowError):
            expected = None
    if all(0 <= n < 1 << 64 for n in numbers):
        assert compiled == expected
    else:
        assert compiled is None
