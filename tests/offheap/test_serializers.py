"""offheap.store.serializers: golden bytes, exact round trips, O(1) constant columns, damaged input."""

from __future__ import annotations

import math
import pickle
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offheap.errors import CorruptionError
from offheap.store.pickled import PickledValue
from offheap.store.serializers import BYTES, FLOAT64, INT64, OBJECT, SERIALIZER_NAMES, STR, Serializer, get_serializer

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
ALL = {s.name: s for s in (INT64, FLOAT64, STR, BYTES, OBJECT)}


class Point(tuple):
    """A tuple subclass: must come back as itself, through the pickle fallback."""


def same(a, b) -> bool:
    """Equal with the same type; floats compared by bit pattern (NaN payloads, -0.0). A decoded
    placeholder ``a`` is unpickled first, unless ``b`` is one."""
    if type(a) is PickledValue and type(b) is not PickledValue:
        a = a.load()
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(same, a, b))
    return a == b


def same_column(got, expected) -> bool:
    """Typed columns come back as arrays: compare their elements as Python scalars."""
    got = got.tolist() if isinstance(got, np.ndarray) else got
    return len(got) == len(expected) and all(map(same, got, expected))


int64s = st.integers(INT64_MIN, INT64_MAX) | st.sampled_from([INT64_MIN, -1, 0, 1, INT64_MAX])
floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([-0.0, 0.0, math.nan, -math.nan])
texts = st.text() | st.text(st.characters(codec=None, categories=None), max_size=5) | st.just("")
objects = st.one_of(
    st.none(), st.booleans(), int64s, st.integers(-2**200, 2**200), floats, texts, st.binary(max_size=30),
    st.tuples(st.integers(), st.text(max_size=3)), st.lists(st.integers(), max_size=3),
    st.builds(Point, st.lists(st.integers(), max_size=2)),
    st.sampled_from([np.int64(7), np.float64(0.5), np.bool_(True), 2**63, -2**63 - 1, 2**64]),
)
VALUES = {"int64": int64s, "float64": floats, "str": texts, "bytes": st.binary(max_size=40), "object": objects}


# -- golden bytes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name, value, encoded", [
    ("int64", 1, "0100000000000000"),
    ("int64", -2, "feffffffffffffff"),
    ("float64", 1.0, "000000000000f03f"),
    ("float64", -0.0, "0000000000000080"),
    ("str", "é", "c3a9"),
    ("str", "\ud800", "eda080"),  # a lone surrogate survives (surrogatepass)
    ("bytes", b"\x00\xff", "00ff"),
    ("object", None, "00"),
    ("object", False, "01"),
    ("object", True, "02"),
    ("object", 0, "0300"),
    ("object", 5, "030a"),
    ("object", -1, "0301"),
    ("object", INT64_MAX, "03feffffffffffffffff01"),
    ("object", 2**63, "04000000000000008000"),
    ("object", -2**63 - 1, "04ffffffffffffff7fff"),
    ("object", 1.5, "05000000000000f83f"),
    ("object", "", "06"),
    ("object", "hi", "066869"),
    ("object", b"", "07"),
    ("object", b"\x00", "0700"),
    ("object", (1, 2), "08" "80059507000000000000004b014b0286942e"),
])
def test_dumps_golden(name, value, encoded):
    serializer = get_serializer(name)
    assert serializer.dumps(value).hex() == encoded
    assert same(serializer.loads(bytes.fromhex(encoded)), value)


@pytest.mark.parametrize("name, values, encoded", [
    ("str", [""] * 120, "00" "00"),
    ("object", [""] * 120, "03" "00" "00"),
    ("object", [None] * 5, "00" "01" "00"),
    ("bytes", [b"ab"] * 3, "00" "02" "6162"),
    ("int64", list(range(10**9, 10**9 + 120)), "80a8d6b907" "00" "01"),  # delta block
    ("int64", [7, 3, 5], "06" "83" "8400"),  # frame block: unsorted, narrow range
    ("object", [1, 2, 3], "01" "02" "00" "01"),
    ("float64", [1.0, 1.0], "80808080808080f07f" "80"),
    ("str", ["a", "bc"], "01" "0102" "616263"),
    ("str", ["applesauce", "applet"], "02" "0005" "0a01" + b"applesaucet".hex()),
    ("object", [None, 1, "a"], "05" "010202" "00" "0302" "0661"),
])
def test_columns_golden(name, values, encoded):
    serializer = get_serializer(name)
    assert serializer.pack_column(values).hex() == encoded
    got, end = serializer.unpack_column(bytes.fromhex(encoded), len(values))
    assert same_column(got, values) and end == len(encoded) // 2


# -- round trips -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ALL))
@settings(max_examples=150)
@given(data=st.data())
def test_dumps_roundtrip(name, data):
    serializer = ALL[name]
    value = serializer.validate(data.draw(VALUES[name]))
    dumped = serializer.dumps(value)
    assert type(dumped) is bytes
    assert same(serializer.loads(dumped), value)
    assert same(serializer.loads(memoryview(dumped)), value)


@pytest.mark.parametrize("name", sorted(ALL))
@settings(max_examples=120)
@given(data=st.data(), before=st.binary(max_size=3), after=st.binary(max_size=3))
def test_column_roundtrip(name, data, before, after):
    serializer = ALL[name]
    values = data.draw(st.one_of(
        st.lists(VALUES[name], max_size=130),
        st.tuples(VALUES[name], st.integers(1, 130)).map(lambda t: [t[0]] * t[1]),  # constant
        st.lists(VALUES[name], max_size=60).map(lambda v: sorted(v, key=repr)),
    ))
    values = [serializer.validate(v) for v in values]
    packed = serializer.pack_column(values)
    got, end = serializer.unpack_column(before + packed + after, len(values), len(before))
    assert same_column(got, values)
    assert end == len(before) + len(packed)
    if serializer.dtype is not None:
        assert isinstance(got, np.ndarray) and got.dtype == serializer.dtype
    else:
        assert type(got) is list


@given(st.lists(int64s, max_size=50), st.sampled_from(["int64", "float64"]))
def test_typed_columns_accept_arrays(values, name):
    serializer = ALL[name]
    array = np.array(values, dtype=np.int64)
    expected = [serializer.validate(v) for v in values]
    got, _ = serializer.unpack_column(serializer.pack_column(array), len(values))
    assert same_column(got, expected)


def test_typed_unpack_returns_a_copy():
    buf = bytearray(b"\x99" + INT64.pack_column([5, 3, 9]))
    got, _ = INT64.unpack_column(buf, 3, 1)
    buf[1:] = bytes(len(buf) - 1)
    assert got.tolist() == [5, 3, 9] and got.flags.writeable


@pytest.mark.parametrize("name, value", [
    ("int64", 7), ("float64", math.nan), ("str", ""), ("str", "some longer value"),
    ("bytes", b""), ("object", ""), ("object", None), ("object", True), ("object", 12345),
    ("object", 2.5), ("object", b"x"), ("object", (1, "a")), ("object", 2**80),
])
def test_constant_columns_cost_o1_bytes(name, value):
    serializer = ALL[name]
    small = serializer.pack_column([value] * 2)
    large = serializer.pack_column([value] * 5000)
    assert len(large) == len(small) <= 25
    got, _ = serializer.unpack_column(large, 5000)
    assert same_column(got, [value] * 5000)


def test_constant_column_of_mutable_objects_gives_distinct_objects():
    got, _ = OBJECT.unpack_column(OBJECT.pack_column([[1], [1], [1]]), 3)
    got = [placeholder.load() for placeholder in got]
    got[0].append(2)
    assert got == [[1, 2], [1], [1]]


def test_empty_columns_are_zero_bytes():
    for serializer in ALL.values():
        assert serializer.pack_column([]) == b""
        got, end = serializer.unpack_column(b"zz", 0, 1)
        assert len(got) == 0 and end == 1


def test_object_column_keeps_exact_types():
    values = [1, True, 1.0, "1", b"1", None, np.int64(1), Point((1,)), 2**70, False, 0]
    got, _ = OBJECT.unpack_column(OBJECT.pack_column(values), len(values))
    assert same_column(got, values)
    for homogeneous in ([1, 2, 2**64], [1.0, -0.0, math.inf], ["a", "\ud800"], [b"", b"\xff"], [True, False]):
        got, _ = OBJECT.unpack_column(OBJECT.pack_column(homogeneous), len(homogeneous))
        assert same_column(got, homogeneous)


def test_unsorted_int_columns_pack_at_the_width_of_their_range():
    values = np.random.default_rng(5).integers(0, 1000, 120).tolist()
    for serializer, overhead in ((INT64, 3), (OBJECT, 4)):
        packed = serializer.pack_column(values)
        assert len(packed) <= overhead + 120 * 10 // 8
        assert same_column(serializer.unpack_column(packed, 120)[0], values)


def test_sorted_str_keys_are_front_coded():
    keys = [f"https://example.com/item/{i:06d}" for i in range(120)]
    packed = STR.pack_column(keys)
    assert packed[0] == 2 and len(packed) < 6 * len(keys)
    assert STR.unpack_column(packed, len(keys))[0] == keys


# -- validation ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, value, expected", [
    ("int64", np.int32(-5), -5), ("int64", np.uint64(7), 7), ("int64", INT64_MIN, INT64_MIN),
    ("float64", 3, 3.0), ("float64", np.float32(0.5), 0.5), ("float64", np.int64(2), 2.0),
    ("str", np.str_("a"), "a"), ("bytes", bytearray(b"a"), b"a"), ("bytes", memoryview(b"ab"), b"ab"),
    ("object", True, True), ("object", np.int64(3), np.int64(3)),
])
def test_validate_normalises(name, value, expected):
    got = ALL[name].validate(value)
    assert same(got, expected)


@pytest.mark.parametrize("name, value, error, message", [
    ("int64", True, TypeError, "must be int, not bool"),
    ("int64", np.bool_(True), TypeError, "must be int"),
    ("int64", 1.0, TypeError, "must be int, not float"),
    ("int64", "1", TypeError, "must be int, not str"),
    ("int64", 2**63, OverflowError, "does not fit in int64"),
    ("int64", np.uint64(2**63), OverflowError, "does not fit in int64"),
    ("float64", False, TypeError, "must be float or int, not bool"),
    ("float64", "1.0", TypeError, "must be float or int, not str"),
    ("str", b"a", TypeError, "must be str, not bytes"),
    ("bytes", "a", TypeError, "must be bytes, bytearray or memoryview, not str"),
])
def test_validate_rejects(name, value, error, message):
    with pytest.raises(error, match=message):
        ALL[name].validate(value)
    with pytest.raises(error, match=message):
        ALL[name].dumps(value)
    with pytest.raises(error, match=message):
        ALL[name].pack_column([value])


def test_typed_columns_reject_bad_arrays():
    with pytest.raises(TypeError):
        INT64.pack_column(np.array([1.5]))
    with pytest.raises(TypeError):
        INT64.pack_column(np.array([True]))
    with pytest.raises(OverflowError):
        INT64.pack_column(np.array([2**63], dtype=np.uint64))
    with pytest.raises(TypeError):
        FLOAT64.pack_column(np.array(["x"]))


def test_unpicklable_object_is_a_type_error():
    with pytest.raises(TypeError, match="does not pickle"):
        OBJECT.dumps(lambda: None)


def test_get_serializer():
    assert SERIALIZER_NAMES == ("int64", "float64", "str", "bytes", "object")
    for name in SERIALIZER_NAMES:
        serializer = get_serializer(name)
        assert isinstance(serializer, Serializer) and serializer.name == name
        assert get_serializer(serializer) is serializer
        assert pickle.loads(pickle.dumps(serializer)) is serializer
    assert INT64.dtype == np.dtype(np.int64) and FLOAT64.dtype == np.dtype(np.float64)
    assert STR.dtype is None and OBJECT.dtype is None
    with pytest.raises(ValueError, match="int64, float64, str, bytes, object"):
        get_serializer("pickle")
    with pytest.raises(ValueError, match="known serializers"):
        get_serializer(int)


# -- damaged input --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ALL))
@settings(max_examples=150)
@given(data=st.binary(max_size=40))
def test_loads_of_random_bytes_raises_only_corruption_error(name, data):
    try:
        value = ALL[name].loads(data)
    except CorruptionError:
        return
    assert same(ALL[name].loads(ALL[name].dumps(value)), value)  # whatever loads is a valid value


@pytest.mark.parametrize("name", sorted(ALL))
@settings(max_examples=150)
@given(data=st.binary(max_size=60), count=st.integers(0, 30), offset=st.integers(0, 62))
def test_unpack_of_random_bytes_raises_only_corruption_error(name, data, count, offset):
    try:
        values, end = ALL[name].unpack_column(data, count, offset)
    except CorruptionError:
        return
    assert len(values) == count and offset <= end <= max(len(data), offset)


@pytest.mark.parametrize("name, values", [
    ("int64", [1, 5, -7]), ("float64", [0.5, math.nan]), ("str", ["ab", "abc", "x"]),
    ("bytes", [b"a", b"bb"]), ("object", [None, 1, "two", 3.0, (4,)]), ("object", ["", ""]),
    ("object", [1, 2, 300]), ("str", ["same", "same"]),
])
def test_every_truncated_column_raises_corruption_error(name, values):
    packed = ALL[name].pack_column(values)
    for cut in range(len(packed)):
        with pytest.raises(CorruptionError):
            ALL[name].unpack_column(packed[:cut], len(values))


@pytest.mark.parametrize("name, data", [
    ("int64", b"\x00" * 7), ("float64", b"\x00" * 9), ("str", b"\xff"), ("object", b""),
    ("object", b"\x09"), ("object", b"\x00\x00"), ("object", b"\x03\x80"), ("object", b"\x03\x01\x01"),
    ("object", b"\x04"), ("object", b"\x05\x00"), ("object", b"\x06\xc3")
])
def test_malformed_values_raise_corruption_error(name, data):
    with pytest.raises(CorruptionError):
        ALL[name].loads(data)


def test_decoding_never_unpickles_a_pickle_loads_only_when_asked():
    ran = PickledValue.of(Point((1,)))
    value = OBJECT.loads(OBJECT.dumps(ran))
    assert type(value) is PickledValue and value == ran and OBJECT.dumps(value) == b"\x08" + ran.payload
    assert value.load() == Point((1,)) and value.load() is not value.load()
    column, _ = OBJECT.unpack_column(OBJECT.pack_column([1, (2,), "x"]), 3)
    assert column[0] == 1 and type(column[1]) is PickledValue and column[2] == "x"
    bad = OBJECT.loads(b"\x08not a pickle")  # damage shows when the value is read
    with pytest.raises(CorruptionError, match="does not load"):
        bad.load()


def test_unknown_column_form_raises_corruption_error():
    for serializer in (STR, BYTES, OBJECT):
        with pytest.raises(CorruptionError, match="unknown column form"):
            serializer.unpack_column(b"\x77\x00", 1)
