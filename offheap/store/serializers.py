"""Key and value serializers: one value or a whole column to bytes and back (layer 5).

A :class:`Serializer` is a small stateless object, safe to share between threads, one per type:

========= ================== ===================================================================
name      Python values      one value (``dumps``)
========= ================== ===================================================================
int64     int in int64 range 8 bytes, two's complement little-endian
float64   float              8 bytes, IEEE 754 binary64 little-endian (every NaN payload and
                             the sign of zero survive)
str       str                UTF-8 with ``surrogatepass``, so every Python str round-trips
bytes     bytes-like         the bytes themselves
object    anything           one tag byte, then a payload (below)
========= ================== ===================================================================

:data:`EMPTY` is the value type of a set: every value is None and costs zero bytes (``dumps`` is
``b""``, a column of any count is zero bytes, the numpy dtype has no fields and an itemsize of 0).
It is not a name :func:`get_serializer` knows: maps do not take it; the sets built on a map's
table name it themselves.

``object`` tags and payloads (payloads run to the end of the data)::

    00 None      01 False     02 True        (no payload)
    03 int in int64          varint of zigzag(value)               5 -> 03 0A,  -1 -> 03 01
    04 int outside int64     two's complement little-endian, (bit_length + 8) // 8 bytes
    05 float                 8 bytes IEEE 754 little-endian
    06 str                   UTF-8 with surrogatepass              "" -> 06
    07 bytes                 the bytes                             b"" -> 07
    08 anything else         pickle protocol 5 (types are exact: a bool, an int subclass or a
                             numpy scalar is never taken for an int)

Decoding a tag-08 value never unpickles it: ``loads`` and ``unpack_column`` return a
:class:`~offheap.store.pickled.PickledValue` holding the payload, which ``dumps`` writes back as
the same bytes; the maps unpickle it only where they hand it to a user, and only when allowed
(:mod:`offheap.store.pickled`).

Columns (``pack_column``) hold ``count`` values; the count itself is the caller's to keep. An
empty column is zero bytes for every serializer. Layouts, with the kernels of
:mod:`offheap.kernels.packing`::

    int64     encode_int64_deltas(values) (sorted values, constant steps) or
              encode_int64_frame(values) (unsorted values of a narrow range), whichever is
              shorter, deltas on a tie; the width byte's high bit tells them apart. A constant
              column costs 2..11 bytes
    float64   the int64 column of the IEEE bit patterns (constant columns, runs of equal
              exponents; -0.0 and NaN payloads survive)
    str/bytes u8 form, then
              00 constant: varint length, the value's bytes once     ["", "", ...] -> 00 00
              01 plain:    count varint lengths, the values' bytes concatenated
              02 front:    front_encode of the values (shared prefixes stored once)
              form 00 when every value is equal, else the smaller of 01 and 02
    object    u8 form, then
              00 constant: varint length, dumps(value) once
              01 int:      the int64 column         (every value an int inside int64)
              02 float:    the float64 column       (every value a float)
              03 str:      the str column           (every value a str)
              04 bytes:    the bytes column         (every value bytes)
              05 mixed:    count varint lengths, the dumps() of the values concatenated
              forms 01..04 when the values are of that one type, else 00 when every dumps()
              is the same, else 05

A column of 120 empty strings is therefore ``00 00`` as str and ``03 00 00`` as object; 120
sequential ints cost 3 bytes as int64 (``00 00 01``), 120 random ints below 1000 about 152.

Decoding never trusts its input: truncated or malformed data raises
:class:`~offheap.errors.CorruptionError`. ``unpack_column`` returns a new ndarray for int64 and
float64 (never a view of the caller's buffer) and a new list otherwise.
"""

from __future__ import annotations

import abc
import struct

import numpy as np

from offheap.errors import CorruptionError
from offheap.store.pickled import PickledValue
from offheap.kernels.bounds import INT64_MAX, INT64_MIN
from offheap.kernels.packing import (
    FRAME_WIDTH_FLAG,
    decode_int64_deltas,
    decode_int64_frame,
    encode_int64_deltas,
    encode_int64_frame,
    front_decode,
    front_encode,
    varint_decode,
    varint_decode_one,
    varint_encode,
    varint_encode_one,
)

__all__ = ["BYTES", "EMPTY", "FLOAT64", "INT64", "OBJECT", "SERIALIZER_NAMES", "STR", "Serializer",
           "get_serializer"]

_FLOAT64 = struct.Struct("<d")


# -- column building blocks ----------------------------------------------------------------------

def _corrupt(what: str, data, detail: str) -> CorruptionError:
    return CorruptionError(f"{what}: {detail} (got {len(data)} bytes); the data is corrupt")


def _sized(payload: bytes) -> bytes:
    """One payload preceded by its varint length."""
    return varint_encode_one(len(payload)) + payload


def _sized_many(payloads: list[bytes]) -> bytes:
    """The varint lengths of all payloads, then the payloads concatenated."""
    return varint_encode(np.array(list(map(len, payloads)), np.uint64)) + b"".join(payloads)


def _read_sized(view: memoryview, offset: int, what: str) -> tuple[bytes, int]:
    """Inverse of :func:`_sized`: the payload at ``offset`` and the offset after it."""
    size, start = varint_decode_one(view, offset)
    if size > len(view) - start:
        raise _corrupt(what, view, f"a {size}-byte value at offset {start} runs past the end")
    return bytes(view[start:start + size]), start + size


def _read_sized_many(view: memoryview, count: int, offset: int, what: str) -> tuple[list[bytes], int]:
    """Inverse of :func:`_sized_many` for ``count`` payloads."""
    lengths, start = varint_decode(view, count, offset)
    room = len(view) - start
    if lengths.max() > room or int(lengths.sum()) > room:
        raise _corrupt(what, view, f"{count} values at offset {start} run past the end")
    bounds = [0] + np.cumsum(lengths).tolist()
    body = bytes(view[start:start + bounds[-1]])
    return [body[a:b] for a, b in zip(bounds, bounds[1:])], start + bounds[-1]


def _form_and_view(data, offset: int, what: str) -> tuple[int, memoryview]:
    view = memoryview(data).cast("B")
    if not 0 <= offset < len(view):
        raise _corrupt(what, view, f"no column form byte at offset {offset}")
    return view[offset], view


class Serializer(abc.ABC):
    """How one type of key or value becomes bytes, alone or as a column.

    ``validate`` normalises one value (numpy scalars to Python ones) or raises the ``TypeError``
    or ``OverflowError`` a dict-like container would; ``dumps``/``loads`` handle one value;
    ``pack_column``/``unpack_column`` a sequence of them (see the module docstring for bytes).
    ``dtype`` is the numpy dtype of a typed column (int64, float64), else ``None``.
    """

    name: str
    dtype: np.dtype | None = None

    @abc.abstractmethod
    def validate(self, value):
        """``value`` normalised, or ``TypeError``/``OverflowError`` naming the expected type."""

    @abc.abstractmethod
    def dumps(self, value) -> bytes:
        """One value as bytes (validated first)."""

    @abc.abstractmethod
    def loads(self, data):
        """The value ``dumps`` wrote into ``data`` (bytes-like); ``CorruptionError`` if malformed."""

    @abc.abstractmethod
    def pack_column(self, values) -> bytes:
        """A sequence of values as one column; zero bytes when it is empty."""

    @abc.abstractmethod
    def unpack_column(self, data, count: int, offset: int = 0):
        """``(values, end_offset)`` of the ``count``-value column at ``data[offset:]``."""

    def __repr__(self) -> str:
        return f"<serializer {self.name}>"

    def __reduce__(self):
        return get_serializer, (self.name,)


# -- typed: int64, float64 --------------------------------------------------------------------------

def _pack_int64_column(array: np.ndarray) -> bytes:
    """The int64 column layout: the shorter of the delta and the frame block."""
    if not array.size:
        return b""
    deltas = encode_int64_deltas(array)
    frame = encode_int64_frame(array)
    return frame if len(frame) < len(deltas) else deltas


def _unpack_int64_column(data, count: int, offset: int) -> tuple[np.ndarray, int]:
    """Reads either block, told apart by the flag in the byte after the first varint."""
    if count > 1:
        view = memoryview(data).cast("B")
        _, width_at = varint_decode_one(view, offset)
        if width_at < len(view) and view[width_at] & FRAME_WIDTH_FLAG:
            return decode_int64_frame(view, count, offset)
    return decode_int64_deltas(data, count, offset)


class _TypedSerializer(Serializer):
    """A fixed-size numpy type; columns are delta-packed 64-bit patterns (module docstring)."""

    dtype: np.dtype
    _struct: struct.Struct  # one value as its 8 little-endian bytes

    @abc.abstractmethod
    def _converts_in_bulk(self, array: np.ndarray) -> bool:
        """Whether ``array.astype(dtype)`` gives, for this non-empty array, what ``validate``
        would give value by value."""

    def as_array(self, values) -> np.ndarray:
        """``values`` as a 1-D array of ``dtype``, no copy when it already is one.

        Arrays and homogeneous sequences convert in bulk; anything else is validated value by
        value, so the error names the offending value's type. (A list mixing bools with ints
        becomes an int array in numpy, so its bools pass as 0 and 1.)
        """
        array = values if isinstance(values, np.ndarray) else np.asarray(values)
        if array.ndim == 1:
            if array.dtype == self.dtype:
                return array
            if not array.size:
                return np.zeros(0, self.dtype)
            if self._converts_in_bulk(array):
                return array.astype(self.dtype)
        return np.array([self.validate(v) for v in values], self.dtype)

    def loads(self, data):
        if len(data) != 8:
            raise _corrupt(f"{self.name} value", data, "expected 8 bytes")
        return self._struct.unpack(data)[0]

    def dumps(self, value) -> bytes:
        return self._struct.pack(self.validate(value))


class _Int64Serializer(_TypedSerializer):
    name = "int64"
    dtype = np.dtype(np.int64)
    _struct = struct.Struct("<q")

    def validate(self, value) -> int:
        if type(value) is not int:
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"int64 keys and values must be int, not {type(value).__name__}")
            value = int(value)
        if not INT64_MIN <= value <= INT64_MAX:
            raise OverflowError(f"{value} does not fit in int64 (-2**63 .. 2**63-1); "
                                f"use the 'object' serializer for bigger ints")
        return value

    def _converts_in_bulk(self, array: np.ndarray) -> bool:
        if array.dtype.kind == "i":
            return True
        return array.dtype.kind == "u" and int(array.max()) <= INT64_MAX

    def pack_column(self, values) -> bytes:
        return _pack_int64_column(self.as_array(values))

    def unpack_column(self, data, count: int, offset: int = 0) -> tuple[np.ndarray, int]:
        return _unpack_int64_column(data, count, offset)


class _Float64Serializer(_TypedSerializer):
    name = "float64"
    dtype = np.dtype(np.float64)
    _struct = struct.Struct("<d")

    def validate(self, value) -> float:
        if type(value) is float:
            return value
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"float64 values must be float or int, not {type(value).__name__}")
        return float(value)

    def _converts_in_bulk(self, array: np.ndarray) -> bool:
        return array.dtype.kind in "iuf"

    def pack_column(self, values) -> bytes:
        return _pack_int64_column(np.ascontiguousarray(self.as_array(values)).view(np.int64))

    def unpack_column(self, data, count: int, offset: int = 0) -> tuple[np.ndarray, int]:
        bits, end = _unpack_int64_column(data, count, offset)
        return bits.view(self.dtype), end


# -- variable size: str, bytes ------------------------------------------------------------------------

_CONSTANT, _PLAIN, _FRONT = 0, 1, 2


def _pack_byte_strings(encoded: list[bytes]) -> bytes:
    """The str/bytes column layout (form byte and body) of already-encoded values."""
    first = encoded[0]
    if encoded.count(first) == len(encoded):
        return bytes((_CONSTANT,)) + _sized(first)
    plain = _sized_many(encoded)
    front = front_encode(encoded)
    if len(front) < len(plain):
        return bytes((_FRONT,)) + front
    return bytes((_PLAIN,)) + plain


def _unpack_byte_strings(data, count: int, offset: int, what: str, convert=None) -> tuple[list, int]:
    """Inverse of :func:`_pack_byte_strings`: ``count`` values and the end offset.

    ``convert`` (bytes -> value) is applied to each value, and once for a constant column.
    """
    if not count:
        return [], offset
    what = f"{what} column"
    form, view = _form_and_view(data, offset, what)
    if form == _CONSTANT:
        value, end = _read_sized(view, offset + 1, what)
        return [value if convert is None else convert(value)] * count, end
    if form == _FRONT:
        values, end = front_decode(view, count, offset + 1)
    elif form == _PLAIN:
        values, end = _read_sized_many(view, count, offset + 1, what)
    else:
        raise _corrupt(what, view, f"unknown column form {form} at offset {offset}")
    return (values if convert is None else list(map(convert, values))), end


class _BytesSerializer(Serializer):
    name = "bytes"

    def validate(self, value) -> bytes:
        if type(value) is bytes:
            return value
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise TypeError(f"bytes keys and values must be bytes, bytearray or memoryview, "
                        f"not {type(value).__name__}")

    def dumps(self, value) -> bytes:
        return self.validate(value)

    def loads(self, data) -> bytes:
        return bytes(data)

    def pack_column(self, values) -> bytes:
        if not len(values):
            return b""
        return _pack_byte_strings([v if type(v) is bytes else self.validate(v) for v in values])

    def unpack_column(self, data, count: int, offset: int = 0) -> tuple[list[bytes], int]:
        return _unpack_byte_strings(data, count, offset, "bytes")


def _decode_text(data, what: str = "str value") -> str:
    try:
        return str(data, "utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise CorruptionError(f"{what} is not UTF-8 ({exc.reason} at byte {exc.start}): "
                              f"the data is corrupt") from None


class _StrSerializer(Serializer):
    name = "str"

    def validate(self, value) -> str:
        if type(value) is str:
            return value
        if isinstance(value, str):
            return str(value)
        raise TypeError(f"str keys and values must be str, not {type(value).__name__}")

    def dumps(self, value) -> bytes:
        return self.validate(value).encode("utf-8", "surrogatepass")

    def loads(self, data) -> str:
        return _decode_text(data)

    def pack_column(self, values) -> bytes:
        if not len(values):
            return b""
        try:
            encoded = [v.encode("utf-8", "surrogatepass") for v in values]
        except AttributeError:
            for value in values:
                self.validate(value)
            raise
        return _pack_byte_strings(encoded)

    def unpack_column(self, data, count: int, offset: int = 0) -> tuple[list[str], int]:
        return _unpack_byte_strings(data, count, offset, "str", _decode_text)


# -- object ---------------------------------------------------------------------------------------

_NONE, _FALSE, _TRUE, _INT, _BIG_INT, _FLOAT, _TEXT, _BYTES, _PICKLE = range(9)
_TAG = [bytes((tag,)) for tag in range(9)]
_SINGLETONS = {_NONE: None, _FALSE: False, _TRUE: True}
_FORM_CONSTANT, _FORM_INT, _FORM_FLOAT, _FORM_STR, _FORM_BYTES, _FORM_MIXED = range(6)
# A constant column of these may share one object (a placeholder is never handed out itself)
_IMMUTABLE = (type(None), bool, int, float, str, bytes, PickledValue)


def _dump_int(value: int) -> bytes:
    if INT64_MIN <= value <= INT64_MAX:
        return _TAG[_INT] + varint_encode_one((value << 1) ^ (value >> 63))
    size = (value.bit_length() + 8) // 8  # room for the sign bit
    return _TAG[_BIG_INT] + value.to_bytes(size, "little", signed=True)


_DUMPERS = {
    type(None): lambda value: _TAG[_NONE],
    bool: lambda value: _TAG[_TRUE] if value else _TAG[_FALSE],
    int: _dump_int,
    float: lambda value: _TAG[_FLOAT] + _FLOAT64.pack(value),
    str: lambda value: _TAG[_TEXT] + value.encode("utf-8", "surrogatepass"),
    bytes: lambda value: _TAG[_BYTES] + value,
    PickledValue: lambda value: _TAG[_PICKLE] + value.payload,
}


def _load_varint_int(payload) -> int:
    code, end = varint_decode_one(payload)
    if end != len(payload):
        raise _corrupt("object int", payload, "bytes left after the varint")
    return (code >> 1) ^ -(code & 1)


def _load_big_int(payload) -> int:
    if not len(payload):
        raise _corrupt("object big int", payload, "no digits")
    return int.from_bytes(payload, "little", signed=True)


def _load_float(payload) -> float:
    if len(payload) != 8:
        raise _corrupt("object float", payload, "expected 8 bytes")
    return _FLOAT64.unpack(payload)[0]


_LOADERS = {
    _INT: _load_varint_int,
    _BIG_INT: _load_big_int,
    _FLOAT: _load_float,
    _TEXT: lambda payload: _decode_text(payload, "object str"),
    _BYTES: bytes,
    _PICKLE: lambda payload: PickledValue(bytes(payload)),
}


class _ObjectSerializer(Serializer):
    name = "object"

    def validate(self, value):
        return value

    def dumps(self, value) -> bytes:
        dumper = _DUMPERS.get(type(value))
        if dumper is not None:
            return dumper(value)
        return _TAG[_PICKLE] + PickledValue.of(value).payload

    def loads(self, data):
        if not len(data):
            raise CorruptionError("object value of 0 bytes: there is no tag byte; the data is corrupt")
        view = memoryview(data).cast("B") if type(data) is not bytes else data
        tag = view[0]
        if tag in _SINGLETONS:
            if len(view) != 1:
                raise _corrupt("object None/bool", view, "expected the tag byte alone")
            return _SINGLETONS[tag]
        loader = _LOADERS.get(tag)
        if loader is None:
            raise _corrupt("object value", view, f"unknown tag byte {tag:#04x}")
        return loader(view[1:])

    def pack_column(self, values) -> bytes:
        if not len(values):
            return b""
        kinds = set(map(type, values))
        if len(kinds) == 1:
            kind = kinds.pop()
            if kind is int:
                try:
                    array = np.array(values, np.int64)
                except OverflowError:
                    pass
                else:
                    return bytes((_FORM_INT,)) + _pack_int64_column(array)
            elif kind is float:
                return bytes((_FORM_FLOAT,)) + FLOAT64.pack_column(np.array(values, np.float64))
            elif kind is str:
                return bytes((_FORM_STR,)) + STR.pack_column(values)
            elif kind is bytes:
                return bytes((_FORM_BYTES,)) + BYTES.pack_column(values)
        dumped = [self.dumps(v) for v in values]
        if dumped.count(dumped[0]) == len(dumped):
            return bytes((_FORM_CONSTANT,)) + _sized(dumped[0])
        return bytes((_FORM_MIXED,)) + _sized_many(dumped)

    def unpack_column(self, data, count: int, offset: int = 0) -> tuple[list, int]:
        if not count:
            return [], offset
        form, view = _form_and_view(data, offset, "object column")
        start = offset + 1
        if form == _FORM_INT:
            array, end = INT64.unpack_column(view, count, start)
            return array.tolist(), end
        if form == _FORM_FLOAT:
            array, end = FLOAT64.unpack_column(view, count, start)
            return array.tolist(), end
        if form == _FORM_STR:
            return STR.unpack_column(view, count, start)
        if form == _FORM_BYTES:
            return BYTES.unpack_column(view, count, start)
        if form == _FORM_CONSTANT:
            payload, end = _read_sized(view, start, "object column")
            value = self.loads(payload)
            if type(value) in _IMMUTABLE:
                return [value] * count, end
            return [value] + [self.loads(payload) for _ in range(count - 1)], end
        if form == _FORM_MIXED:
            payloads, end = _read_sized_many(view, count, start, "object column")
            return list(map(self.loads, payloads)), end
        raise _corrupt("object column", view, f"unknown column form {form} at offset {offset}")


class _EmptySerializer(Serializer):
    """The values of a set (module docstring): None only, zero bytes each."""

    name = "empty"
    dtype = np.dtype([])  # no fields: an itemsize of 0, so a column of any length is no memory

    def validate(self, value) -> None:
        if value is not None:
            raise TypeError(f"the values of a set are None, not {type(value).__name__}")
        return None

    def dumps(self, value) -> bytes:
        self.validate(value)
        return b""

    def loads(self, data) -> None:
        if len(data):
            raise _corrupt("empty value", data, "expected 0 bytes")
        return None

    def pack_column(self, values) -> bytes:
        for value in values:
            self.validate(value)
        return b""

    def unpack_column(self, data, count: int, offset: int = 0) -> tuple[list[None], int]:
        return [None] * count, offset

    def __reduce__(self):
        return "EMPTY"


INT64 = _Int64Serializer()
EMPTY = _EmptySerializer()
FLOAT64 = _Float64Serializer()
STR = _StrSerializer()
BYTES = _BytesSerializer()
OBJECT = _ObjectSerializer()
_BY_NAME = {s.name: s for s in (INT64, FLOAT64, STR, BYTES, OBJECT)}
SERIALIZER_NAMES = tuple(_BY_NAME)


def get_serializer(spec: str | Serializer) -> Serializer:
    """The serializer named ``spec`` (one of :data:`SERIALIZER_NAMES`), or ``spec`` itself."""
    if isinstance(spec, Serializer):
        return spec
    serializer = _BY_NAME.get(spec) if isinstance(spec, str) else None
    if serializer is None:
        raise ValueError(f"unknown serializer {spec!r}; known serializers: {', '.join(SERIALIZER_NAMES)}")
    return serializer
