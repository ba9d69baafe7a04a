"""How a hash table keeps one value per slot (layer 6, used by :mod:`offheap.hashmap.longhashmap`).

Typed values (``int64``, ``float64``) sit raw in an array of that dtype; the ``empty`` values of
a set (:data:`~offheap.store.serializers.EMPTY`) have no bytes at all: a column of width 0, whose
words, where a bulk path passes them, are uint64 zeros.

Every other value type is serialized and kept as a *slot word* of 2, 4 or 8 bytes, little-endian:

    byte 0        L: 0..7 = the value is inline and its serialized form is L bytes long;
                  0xFF = the value is external (8-byte words only)
    bytes 1..L    the serialized bytes, when inline
    bytes 1..7    the record id in the record store, when external

A column starts 2 bytes wide, enough for one serialized byte (``""``, ``None``, ``True`` as
``object``; ``"x"`` as ``str``), and widens to 4 and then 8 bytes, vectorized, the first time a
value needs it: a map of empty strings costs 2 bytes a slot for its values, not 8. Widening keeps
every word's value because the layout is little-endian and the high bytes of a narrow word are 0.

Inline words are decoded through a small cache, since the word *is* the value's identity: a map
whose values repeat (flags, small ints, the empty string) decodes each distinct word once. Only
immutable values (:data:`_CACHEABLE_TYPES`) are cached or shared between entries: a mutable value
(``[]``, ``{}``, a tuple holding a list) is decoded anew for every read, so that changing what a
read returned never changes the map or another read.

Pickled values are decoded into placeholders (:class:`~offheap.store.pickled.PickledValue`)
and unpickled only by :meth:`ValueSlots.decode`, what the map hands out, and only with
``allow_pickle`` (:mod:`offheap.store.pickled`); :meth:`ValueSlots.encode` refuses a value
that needs pickle without it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from offheap.store.pickled import PickledValue, check_storable, unpickled
from offheap.store.serializers import Serializer
from offheap.store.records import RecordStore

EXTERNAL = 0xFF
_INLINE_MAX = 7
_WIDTH_DTYPES: dict[int, np.dtype] = {
    2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}
_CACHE_LIMIT = 4096
_CACHEABLE_TYPES = frozenset((str, bytes, int, bool, type(None)))

InlinePrefix = Callable[[Sequence, np.ndarray], int]
"""``(values, out) -> n``: the words of ``values[:n]`` written into ``out`` (see
:meth:`ValueSlots.encode_many`)."""


def width_for_word(word: int) -> int:
    """The narrowest slot width (2, 4 or 8 bytes) that holds ``word``."""
    length = word & 0xFF
    if length == EXTERNAL or length > 3:
        return 8
    return 4 if length > 1 else 2


class ValueSlots:
    """Encodes values into slot words and back, and owns the external records they point to.
    ``allow_pickle``: whether values stored with pickle may be handed out and stored."""

    def __init__(self, serializer: Serializer, store: RecordStore, allow_pickle: bool) -> None:
        self.serializer = serializer
        self.store = store
        self.allow_pickle = allow_pickle
        self.typed = serializer.dtype is not None
        self._encoded: dict[type, dict] = {}  # per type, so 1, 1.0 and True never share a word
        self._decoded: dict[int, object] = {}
        self.external_count: int | None = None
        """External records this owner holds, kept from the first count on (None: not counted
        yet, as after an open), so that a map's stats stay O(1)."""

    def dtype_for_width(self, width: int) -> np.dtype:
        """The numpy dtype of a slot array ``width`` bytes wide."""
        return self._typed_dtype if self.typed else _WIDTH_DTYPES[width]

    @property
    def initial_width(self) -> int:
        return self._typed_dtype.itemsize if self.typed else 2

    @property
    def _typed_dtype(self) -> np.dtype:
        """The dtype of typed values (asked only when :attr:`typed`, which says it has one)."""
        dtype = self.serializer.dtype
        if dtype is None:
            raise TypeError(f"{self.serializer.name} values are not typed: they have no dtype")
        return dtype

    # -- one value ----------------------------------------------------------------------------

    def encode(self, value):
        """The slot word for ``value``; stores it as a record first if it does not fit inline.

        The caller owns the returned word: it must :meth:`release` it if it is not kept.
        PickleNotAllowedError for a value that needs pickle without ``allow_pickle``.
        """
        if self.typed:
            return self.serializer.validate(value)
        cache = self._encoded.get(type(value))
        if cache is not None:
            word = cache.get(value)
            if word is not None:
                return word
        check_storable(value, self.allow_pickle)
        data = self.serializer.dumps(self.serializer.validate(value))
        if len(data) > _INLINE_MAX:
            word = EXTERNAL | self.store.put(data) << 8
            if self.external_count is not None:
                self.external_count += 1
            return word
        word = len(data) | int.from_bytes(data, "little") << 8
        if type(value) in _CACHEABLE_TYPES:
            cache = self._encoded.setdefault(type(value), {})
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            cache[value] = word
        return word

    def decode(self, word):
        """The value a slot word stands for, as the map hands it out: a pickled one unpickled
        (PickleNotAllowedError without ``allow_pickle``)."""
        value = self.load(word)
        return unpickled(value, self.allow_pickle) if type(value) is PickledValue else value

    def hand_out(self, value):
        """What :meth:`decode` makes of a value :meth:`load` gave."""
        return unpickled(value, self.allow_pickle)

    def load(self, word):
        """The value a slot word stands for as stored: a pickled one as its placeholder."""
        if self.typed:
            return word
        value = self._decoded.get(word, self)
        if value is not self:
            return value
        length = word & 0xFF
        if length == EXTERNAL:
            return self.serializer.loads(self.store.view(word >> 8))
        value = self.serializer.loads((word >> 8).to_bytes(length, "little"))
        if type(value) not in _CACHEABLE_TYPES:
            return value
        if len(self._decoded) >= _CACHE_LIMIT:
            self._decoded.clear()
        self._decoded[word] = value
        return value

    def release(self, word) -> None:
        """Free the record behind an external word (nothing to do for inline and typed words)."""
        if not self.typed and word & 0xFF == EXTERNAL:
            self.store.delete(word >> 8)
            if self.external_count is not None:
                self.external_count -= 1

    def width_of(self, word) -> int:
        return self.initial_width if self.typed else width_for_word(word)

    # -- columns ------------------------------------------------------------------------------

    def encode_many(self, values, inline_prefix: InlinePrefix | None = None) -> np.ndarray:
        """Slot words for a sequence of values, as an array (uint64 for serialized values).

        ``inline_prefix(values, out)``, when given, writes the words of a leading run of values
        into ``out`` and says how many (a compiled core's loop over the values it encodes
        inline, the same words as :meth:`encode`). When that run is every value, those words are
        the answer; otherwise all the values are encoded here, so that the records of the values
        that need one are made (and the store's bytes come out) exactly as without it.
        On any error the records already stored for earlier values are freed again.
        """
        if self.typed:
            return self._encode_typed(values)
        if inline_prefix is not None:
            words = np.empty(len(values), np.uint64)
            if inline_prefix(values, words) == len(values):
                return words
        return self._encode_serialized(values)

    def _encode_typed(self, values) -> np.ndarray:
        if not self._typed_dtype.itemsize:  # a set's: no value has any bytes
            for value in values:
                self.serializer.validate(value)
            return np.zeros(len(values), np.uint64)
        array = np.asarray(values)
        if array.size == 0:
            return np.empty(0, self.serializer.dtype)
        if array.dtype.kind not in self._accepted_kinds():
            array = np.array([self.serializer.validate(v) for v in values])
        return self._checked_typed_array(array)

    def _encode_serialized(self, values) -> np.ndarray:
        stored = []  # external words made so far, freed again if a later value fails

        def encode_one(value):
            word = self.encode(value)
            if word & 0xFF == EXTERNAL:
                stored.append(word)
            return word

        try:
            kinds = set(map(type, values))
            if len(kinds) == 1 and kinds <= _CACHEABLE_TYPES and isinstance(values, list) \
                    and values.count(values[0]) == len(values):
                word = encode_one(values[0])  # one value throughout, as in dict.fromkeys
                if not stored:
                    return np.full(len(values), word, np.uint64)
                self.release_many(np.array(stored, np.uint64))
                stored.clear()
            elif len(kinds) == 1 and kinds <= _CACHEABLE_TYPES:
                # one hashable type: equal values share an inline word, so encode each distinct
                # one once; an external word names a record of its own and is never shared
                word_of = {value: encode_one(value) for value in dict.fromkeys(values)}
                if not stored:
                    return np.fromiter(map(word_of.__getitem__, values), np.uint64, len(values))
                self.release_many(np.array(stored, np.uint64))
                stored.clear()
            return np.fromiter(map(encode_one, values), np.uint64, len(values))
        except BaseException:
            self.release_many(np.array(stored, np.uint64))
            raise

    def decode_many(self, words: np.ndarray):
        """:meth:`decode` of an array of slot words: an ndarray for typed values, else an object
        ndarray. Each distinct word is decoded once, except that every entry of a mutable value
        gets an object of its own."""
        return self._decode_many(words, self.decode)

    def load_many(self, words: np.ndarray):
        """:meth:`load` of an array of slot words, as :meth:`decode_many` decodes them."""
        return self._decode_many(words, self.load)

    def _decode_many(self, words: np.ndarray, decode):
        if self.typed:
            return words.astype(self.serializer.dtype, copy=True)
        if words.dtype == np.uint16:  # a table of all 2**16 words beats sorting for uniqueness
            seen = np.zeros(1 << 16, bool)
            seen[words] = True
            unique = np.flatnonzero(seen)
            table = np.empty(1 << 16, object)
            table[unique] = values = [decode(w) for w in unique.tolist()]
            out = table[words]
        else:
            unique, inverse = np.unique(words.astype(np.uint64), return_inverse=True)
            decoded = np.empty(len(unique), object)
            decoded[:] = values = [decode(w) for w in unique.tolist()]
            out = decoded[inverse.reshape(-1)]
        mutable = [w for w, v in zip(unique.tolist(), values) if type(v) not in _CACHEABLE_TYPES]
        if mutable:
            for at in np.flatnonzero(np.isin(words, mutable)).tolist():
                out[at] = decode(int(words[at]))
        return out

    def release_many(self, words: np.ndarray) -> None:
        if self.typed or not len(words):
            return
        words = words.astype(np.uint64)
        external = words[(words & np.uint64(0xFF)) == EXTERNAL]
        for word in external.tolist():
            self.store.delete(word >> 8)
            if self.external_count is not None:
                self.external_count -= 1

    def width_of_many(self, words: np.ndarray) -> int:
        if self.typed or not len(words):
            return self.initial_width
        lengths = words.astype(np.uint64) & np.uint64(0xFF)
        if np.any(lengths > 3):
            return 8
        return 4 if np.any(lengths > 1) else 2

    def _accepted_kinds(self) -> str:
        return "iu" if self._typed_dtype.kind == "i" else "iuf"

    def _checked_typed_array(self, array: np.ndarray) -> np.ndarray:
        target = self._typed_dtype
        if array.dtype.kind == "u" and array.size and int(array.max()) > np.iinfo(np.int64).max \
                and target.kind == "i":
            raise OverflowError("a value does not fit in int64")
        if array.dtype.kind == "f" and target.kind == "i":
            raise TypeError("int64 values expected, got a float array")
        return array.astype(target, copy=False)
