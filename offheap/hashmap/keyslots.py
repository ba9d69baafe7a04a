"""How a keyed hash table turns a key into bytes, a seeded hash and a 16-byte key slot (layer 6).

A keyed table (``HashMap(key=...)``) takes keys of one *key type* and stores each as its
*key bytes*, the form equal keys share:

    "str"     the UTF-8 bytes, with ``surrogatepass``: every Python str is a key (a lone
              surrogate encodes as its 3 bytes; the encoding is one-to-one, so distinct strs
              never share bytes) and reads back unchanged
    "bytes"   the bytes as they are; ``bytes``, ``bytearray`` and ``memoryview`` are accepted
              and read back as ``bytes``
    "int64"   the 8 bytes of the int, little-endian two's complement (the int64 range;
              bools and numpy integers are stored as the int they equal)
    "object"  a type-tagged encoding of hashable keys (below)

The "object" encoding: one tag byte, then the body.

    0x00  None          no body
    0x01  int           the int in ``(bit_length + 8) // 8`` bytes of little-endian two's
                        complement (``0``: no body)
    0x02  float         8 bytes, IEEE 754 binary64 little-endian
    0x03  str           UTF-8 with ``surrogatepass``
    0x04  bytes         as they are
    0x05  tuple         per element: its length in 4 bytes little-endian, then its encoding

Dict equality decides what is one key: ``1 == 1.0 == True`` are one key of a dict, so a bool and
an integral float (numpy's included) are encoded as the int they equal (``-0.0`` as ``0``), and they read back as that
int: ``m[True] = x`` then ``list(m)`` gives ``[1]``, as a dict whose key 1 came first would. A
NaN equals nothing, not even itself: it is refused as a key. Other types (lists, sets, frozensets,
objects of other classes) are refused: their equality is not a function of any bytes we could
write. Inside a tuple the same rules apply to each element.

Keys in bulk (:func:`key_rows`): a list, or a numpy array of ``U`` / ``S`` / ``StringDType`` /
object / integer items, becomes a matrix of key bytes, one zero-padded row per key, and their
lengths: what :func:`~offheap.kernels.siphash.siphash_array` hashes. A numpy ``U`` or ``S`` item
has no trailing NULs (numpy strips them), so its key is the stripped str or bytes, as ``a[i]``.

Admission. A store of a key its table cannot hold raises TypeError (wrong type) or ValueError /
OverflowError (a NaN, an int outside int64 for "int64"); a lookup of such a key is a miss (``in``
is False, ``get`` gives the default, ``[]`` raises KeyError), as a dict's lookup of a key it does
not hold.

The hash: SipHash-1-3 (:mod:`offheap.kernels.siphash`, or its C twin in the compiled core
``offheap.hashmap._core.siphash``, 30x faster, the same hashes) of the key bytes under the table's
16-byte seed, drawn at random for each new table and kept in its metadata, so that keys crafted
to collide under one seed spread under another. A key's home is ``(hash & ~0xFF) * homes >>
64``: the hash's top 56 bits scaled to ``[0, homes)``, which a long key's slot keeps, so that the
home of every slot is known from the slot alone (no record read).

The key slot: 16 bytes per entry.

    inline  (key bytes of 0..15)   bytes 0..14  the key bytes, zero-padded
                                   byte 15      their length, 0..15
    long    (16 bytes and more)    bytes 0..7   the record id of the key bytes in the record
                                                store, little-endian
                                   bytes 8..14  the hash's top 56 bits (``hash >> 8``),
                                                little-endian: a probe compares them first
                                                and reads the record only when they match
                                   byte 15      ``LONG`` (0x80)

Every other byte 15, and non-zero padding in an inline slot, is a damaged slot. Since padding is
zero, two inline slots are equal exactly when their keys are; a long key is never inline, and an
inline key never long, so a probe compares slots first and key bytes only for long slots of an
equal tag. Example, the str key ``"ab"``: ``61 62 00 .. 00 02``.
"""

from __future__ import annotations

import math
import operator
import struct

import numpy as np

from offheap.errors import CorruptionError
from offheap.kernels.bounds import as_int64, lookup_key
from offheap.kernels.native import compiled_module
from offheap.kernels.siphash import siphash

KEY_TYPES = ("str", "bytes", "int64", "object")
SLOT_BYTES = 16
INLINE_MAX = 15
LONG = 0x80
_LONG_SLOT = struct.Struct("<Q7sB")
_INT64 = struct.Struct("<q")
_FLOAT = struct.Struct("<d")
_LENGTH = struct.Struct("<I")

_NONE, _INT, _FLOAT_TAG, _STR, _BYTES, _TUPLE = range(6)
_compiled = compiled_module("offheap.hashmap._core")
_siphash = siphash if _compiled is None else _compiled.siphash


class Unadmitted(Exception):
    """A key no table of this key type can hold: a lookup takes it as a miss; a store raises
    ``error``, the built-in-derived exception that says why."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _type_error(key_type: str, key) -> Unadmitted:
    return Unadmitted(TypeError(f'keys of a HashMap(key="{key_type}") are {_WHAT[key_type]}, '
                                f"not {type(key).__name__}"))


_WHAT = {"str": "str", "bytes": "bytes, bytearray or memoryview", "int64": "int64",
         "object": "None, int, float, str, bytes or tuples of these"}


def key_bytes(key_type: str, key) -> bytes:
    """The key bytes of ``key`` in a table of ``key_type``; Unadmitted if it cannot hold it."""
    if key_type == "str":
        if isinstance(key, str):
            return key.encode("utf-8", "surrogatepass")
        raise _type_error(key_type, key)
    if key_type == "bytes":
        if isinstance(key, bytes):
            return bytes(key)
        if isinstance(key, (bytearray, memoryview)):
            return memoryview(key).tobytes()
        raise _type_error(key_type, key)
    if key_type == "int64":
        try:
            return _INT64.pack(as_int64(key, f'keys of a HashMap(key="int64") are int64'))
        except (TypeError, OverflowError) as error:
            raise Unadmitted(error) from None
    return _object_bytes(key)


def lookup_bytes(key_type: str, key) -> bytes | None:
    """The key bytes a lookup of ``key`` searches for, None when no key of ``key_type`` can
    equal it (so the lookup is a miss). An "int64" lookup finds 1 for ``1.0`` and ``True``."""
    if key_type == "int64":
        admitted = lookup_key(key)
        return None if admitted is None else _INT64.pack(admitted)
    try:
        return key_bytes(key_type, key)
    except Unadmitted:
        return None


def _object_bytes(key) -> bytes:
    if isinstance(key, (np.bool_, np.floating)):
        key = key.item()  # the bool or float it equals (np.float64 is a float already)
    if key is None:
        return b"\x00"
    if isinstance(key, str):
        return b"\x03" + key.encode("utf-8", "surrogatepass")
    if isinstance(key, bytes):
        return b"\x04" + bytes(key)
    if isinstance(key, float):
        if key.is_integer():
            return _int_bytes(int(key))
        if math.isnan(key):
            raise Unadmitted(ValueError("NaN is not a HashMap key: it equals no key, not even "
                                        "itself; use None or a sentinel string instead"))
        return b"\x02" + _FLOAT.pack(key)
    if isinstance(key, tuple):
        parts = [b"\x05"]
        for element in key:
            body = _object_bytes(element)
            parts += (_LENGTH.pack(len(body)), body)
        return b"".join(parts)
    try:
        return _int_bytes(operator.index(key))  # int, bool, numpy integers
    except TypeError:
        raise _type_error("object", key) from None


def _int_bytes(value: int) -> bytes:
    if not value:
        return b"\x01"
    return b"\x01" + value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)


def key_of(key_type: str, data: bytes):
    """The key whose key bytes are ``data`` (the inverse of :func:`key_bytes` on what it
    returns); CorruptionError for bytes no key has."""
    try:
        if key_type == "str":
            return data.decode("utf-8", "surrogatepass")
        if key_type == "bytes":
            return bytes(data)
        if key_type == "int64":
            return _INT64.unpack(data)[0]
        key, end = _object_at(data, 0, len(data))
    except (UnicodeDecodeError, struct.error, IndexError, ValueError) as error:
        raise CorruptionError(f'damaged key bytes for a HashMap(key="{key_type}"): {error}') \
            from None
    if end != len(data):
        raise CorruptionError(f'damaged key bytes for a HashMap(key="object"): {len(data) - end} '
                              f"bytes past the key")
    return key


def _object_at(data: bytes, at: int, end: int) -> tuple[object, int]:
    tag = data[at]
    body = data[at + 1:end]
    if tag == _NONE and not body:
        return None, end
    if tag == _INT:
        return int.from_bytes(body, "little", signed=True), end
    if tag == _FLOAT_TAG and len(body) == _FLOAT.size:
        return _FLOAT.unpack(body)[0], end
    if tag == _STR:
        return body.decode("utf-8", "surrogatepass"), end
    if tag == _BYTES:
        return bytes(body), end
    if tag == _TUPLE:
        elements = []
        at += 1
        while at < end:
            (length,) = _LENGTH.unpack_from(data, at)
            at += _LENGTH.size
            if not length or at + length > end:
                raise ValueError(f"a tuple element of {length} bytes does not fit")
            element, at = _object_at(data, at, at + length)
            elements.append(element)
        return tuple(elements), end
    raise ValueError(f"tag {tag} with a body of {len(body)} bytes")


def key_hash(seed: bytes, data: bytes) -> int:
    """The seeded hash of key bytes: SipHash-1-3 under the table's seed, unsigned 64-bit."""
    return _siphash(seed, data)


def home_of(hash_value: int, homes: int) -> int:
    """The home of a key of this hash in a table of ``homes`` homes (its top 56 bits scaled)."""
    return (hash_value & ~0xFF) * homes >> 64


def inline_slot(data: bytes) -> bytes:
    """The slot of key bytes of at most ``INLINE_MAX`` bytes."""
    return data.ljust(INLINE_MAX, b"\0") + bytes((len(data),))


def long_slot(recid: int, hash_value: int) -> bytes:
    """The slot of a long key whose bytes are record ``recid``, of this hash."""
    return _LONG_SLOT.pack(recid, slot_tag(hash_value), LONG)


def slot_tag(hash_value: int) -> bytes:
    """Bytes 8..14 of a long key's slot: what a probe compares before reading the record."""
    return (hash_value >> 8).to_bytes(7, "little")


def parse_slot(slot: bytes) -> tuple[bytes | None, int]:
    """``(key bytes, 0)`` of an inline slot, ``(None, record id)`` of a long one;
    CorruptionError for a damaged slot."""
    marker = slot[INLINE_MAX]
    if marker <= INLINE_MAX:
        if any(slot[marker:INLINE_MAX]):
            raise CorruptionError(f"damaged HashMap key slot {slot.hex()}: non-zero padding "
                                  f"after an inline key of {marker} bytes")
        return bytes(slot[:marker]), 0
    if marker == LONG:
        return None, _LONG_SLOT.unpack(slot)[0]
    raise CorruptionError(f"damaged HashMap key slot {slot.hex()}: byte 15 is {marker}, neither "
                          f"an inline length (0..15) nor LONG (0x80)")


def check_key_type(key_type: str) -> str:
    """``key_type`` if it is one of :data:`KEY_TYPES`, else ValueError saying which are."""
    if key_type not in KEY_TYPES:
        raise ValueError(f"key={key_type!r} is not a HashMap key type; use one of "
                         f"{', '.join(map(repr, KEY_TYPES))}")
    return key_type


def key_rows(key_type: str, keys, *, lookup: bool = False
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The key bytes of many keys: ``(rows, lengths, admitted)``, a uint8 matrix whose row ``i``
    holds key ``i``'s bytes zero-padded, their int64 lengths, and a bool array.

    For a store (``lookup=False``) every key must be admitted: Unadmitted for the first that is
    not, and ``admitted`` is all True. For a lookup an unadmitted key is a miss: its row is
    zero, its length 0, and ``admitted`` False there.
    """
    array = keys if isinstance(keys, np.ndarray) else None
    if array is not None and array.ndim != 1:
        raise ValueError(f"keys must be one-dimensional, got shape {array.shape}")
    if array is not None and _fits_as_is(key_type, array.dtype):
        return _rows_of_array(key_type, array)
    items = keys.tolist() if array is not None else list(keys)
    if lookup:
        found = [lookup_bytes(key_type, key) for key in items]
        admitted = np.array([data is not None for data in found], bool)
        datas = [b"" if data is None else data for data in found]
    else:
        datas = [key_bytes(key_type, key) for key in items]
        admitted = np.ones(len(datas), bool)
    lengths = np.fromiter(map(len, datas), np.int64, len(datas))
    width = max(1, int(lengths.max(initial=0)))
    rows = np.array(datas, dtype=f"S{width}").view(np.uint8).reshape(len(datas), width)
    return rows, lengths, admitted


def _fits_as_is(key_type: str, dtype: np.dtype) -> bool:
    """Whether an array of ``dtype`` gives its keys' bytes without a Python object per key."""
    return ((key_type == "str" and dtype.kind == "U") or (key_type == "bytes" and dtype.kind == "S")
            or (key_type == "int64" and dtype.kind == "i"))


def _rows_of_array(key_type: str, array: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if key_type == "int64":
        words = array.astype("<i8")
        rows = words.view(np.uint8).reshape(len(array), 8)
        return rows, np.full(len(array), 8, np.int64), np.ones(len(array), bool)
    encoded = np.char.encode(array, "utf-8", "surrogatepass") if key_type == "str" else array
    if encoded.itemsize == 0:
        encoded = encoded.astype("S1")
    rows = np.ascontiguousarray(encoded).view(np.uint8).reshape(len(array), encoded.itemsize)
    return rows, np.char.str_len(encoded).astype(np.int64), np.ones(len(array), bool)
