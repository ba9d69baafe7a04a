"""StockQuote records (the fast-avro-write benchmark's record) and their encoding for Sparkey.

A batch of quotes is a numpy structured array, one packed record per quote, with the seed's
78 fields in its order: ``symbol``, 17 numbers (``timestamp`` ... ``yearLow``) and 60 strings
``f1``..``f60`` that default to ``"value"``. Strings are numpy ``U`` fields (Python ``str``
semantics), so turning them into UTF-8 is part of the encoding, as it is for the Avro writer.

Value layout (a compact struct plus length-prefixed strings), fields in QUOTE_DTYPE order::

    u8 n, n bytes     symbol, UTF-8 (string fields hold at most 31 characters: n < 128)
    124 bytes         timestamp ... yearLow, little-endian i8 / f8 / i4, back to back
    u8 n, n bytes     f1, then f2 ... f60 the same way ("value": 05 76 61 6c 75 65)

Key: the symbol's UTF-8 bytes then the timestamp as a big-endian i8, so keys sort by symbol
and time. ``QuoteKeys`` and ``QuoteValues`` are lazy columns for ``sparkey.Writer.put_many``:
``pack(start, stop)`` encodes a row range with numpy (a few dozen calls per range, none per
record, GIL released in the copies). ``encode_quote`` is the one-record-at-a-time Python
reference that the tests hold the vectorized encoder to, and the "Python objects" baseline.
"""

from __future__ import annotations

import struct

import numpy as np

from sparkey.packed import PackedBytes, copy_rows

NUMERIC_FIELDS = [
    ("timestamp", "<i8"), ("ask", "<f8"), ("askSize", "<i4"), ("bid", "<f8"), ("bidSize", "<i4"),
    ("dayHigh", "<f8"), ("dayLow", "<f8"), ("lastTradeSize", "<i4"), ("lastTradeTime", "<i8"),
    ("open", "<f8"), ("previousClose", "<f8"), ("price", "<f8"), ("priceAvg50", "<f8"),
    ("priceAvg200", "<f8"), ("volume", "<i8"), ("yearHigh", "<f8"), ("yearLow", "<f8")]
EXTRA_STRINGS = [f"f{i}" for i in range(1, 61)]
QUOTE_DTYPE = np.dtype([("symbol", "<U8"), *NUMERIC_FIELDS,
                        *[(name, "<U5") for name in EXTRA_STRINGS]])
SYMBOLS = ("T", "GE", "IBM", "AAPL", "MSFT", "GOOGL", "AMZN", "NVDA")
_MAX_STRING_CHARS = 31
_STRUCT_CODES = {"<i4": "i", "<i8": "q", "<f8": "d"}
_NUMBERS = struct.Struct("<" + "".join(_STRUCT_CODES[code] for _, code in NUMERIC_FIELDS))
_TIMESTAMP_BASE = 1_490_000_000_000


def make_quotes(n: int, seed: int = 7) -> np.ndarray:
    """``n`` quotes with random symbols, prices and sizes, unique timestamps, f1..f60 ``"value"``."""
    rng = np.random.default_rng(seed)
    quotes = np.zeros(n, dtype=QUOTE_DTYPE)
    quotes["symbol"] = np.array(SYMBOLS)[rng.integers(0, len(SYMBOLS), n)]
    quotes["timestamp"] = _TIMESTAMP_BASE + np.arange(n)
    quotes["lastTradeTime"] = quotes["timestamp"] - rng.integers(0, 1000, n)
    price = np.round(100 + rng.standard_normal(n).cumsum() * 0.01, 2)
    for name, spread in (("price", 0), ("ask", 0.01), ("bid", -0.01), ("dayHigh", 1.5),
                         ("dayLow", -1.5), ("open", 0.5), ("previousClose", -0.5),
                         ("priceAvg50", 0.2), ("priceAvg200", -0.2), ("yearHigh", 20),
                         ("yearLow", -20)):
        quotes[name] = price + spread
    for name in ("askSize", "bidSize", "lastTradeSize"):
        quotes[name] = rng.integers(1, 1000, n)
    quotes["volume"] = rng.integers(0, 10**9, n)
    first = QUOTE_DTYPE.fields[EXTRA_STRINGS[0]][1]  # the 60 U5 fields are contiguous
    text = np.array(["value"] * len(EXTRA_STRINGS), dtype="<U5").view("<u4")
    quotes.view(np.uint8).reshape(n, -1)[:, first:first + 4 * len(text)].view("<u4")[:] = text
    return quotes


def encode_quote(quote) -> bytes:
    """The value of one quote (a record or a tuple in QUOTE_DTYPE order), in plain Python."""
    fields = tuple(quote)
    parts = []
    for text in (fields[0],):
        data = text.encode("utf-8")
        parts += [bytes((len(data),)), data]
    parts.append(_NUMBERS.pack(*fields[1:1 + len(NUMERIC_FIELDS)]))
    for text in fields[1 + len(NUMERIC_FIELDS):]:
        data = text.encode("utf-8")
        parts += [bytes((len(data),)), data]
    return b"".join(parts)


def quote_key(quote) -> bytes:
    """The key of one quote, in plain Python."""
    return quote[0].encode("utf-8") + struct.pack(">q", quote[1])


def _field_runs(dtype: np.dtype) -> list[tuple[str, int, int, int]]:
    """Consecutive fields grouped as ``(kind, byte offset, count, width)``: ``"bytes"`` runs of
    numbers (width = their total size) and ``"str"`` runs of U fields of one width (in chars)."""
    runs = []
    for name in dtype.names:
        field, offset = dtype.fields[name][:2]
        if field.kind == "U":
            width = field.itemsize // 4
            if width > _MAX_STRING_CHARS:
                raise ValueError(f"string field {name!r} holds up to {width} characters; the "
                                 f"quote encoding stores at most {_MAX_STRING_CHARS}")
            last = runs[-1] if runs else None
            if last and last[0] == "str" and last[3] == width and last[1] + 4 * width * last[2] == offset:
                runs[-1] = ("str", last[1], last[2] + 1, width)
            else:
                runs.append(("str", offset, 1, width))
        else:
            last = runs[-1] if runs else None
            if last and last[0] == "bytes" and last[1] + last[3] == offset:
                runs[-1] = ("bytes", last[1], 1, last[3] + field.itemsize)
            else:
                runs.append(("bytes", offset, 1, field.itemsize))
    return runs


_RUNS = _field_runs(QUOTE_DTYPE)


def _string_segments(raw: np.ndarray, offset: int, count: int, width: int) -> list:
    """Length-prefixed UTF-8 of a run of ``count`` U fields of ``width`` characters, as
    ``(cells, lengths)`` segments: cell ``[length, bytes...]`` per row and field. A run whose
    strings all fill their field (``"value"`` in U5) is one fixed-width segment, found by
    looking at the last character only."""
    rows = len(raw)
    codes = raw[:, offset:offset + 4 * width * count].view("<u4").reshape(rows, count, width)
    if rows and int(codes.max()) >= 0x80:
        strings = raw[:, offset:offset + 4 * width * count].copy().view(f"<U{width}")
        encoded = np.strings.encode(strings, "utf-8")
        codes = encoded.view(np.uint8).reshape(rows, count, encoded.dtype.itemsize)
        lengths = np.strings.str_len(encoded).astype(np.int64)
    elif rows and codes[:, :, -1].all():
        cells = np.empty((rows, count, width + 1), dtype=np.uint8)
        cells[:, :, 0] = width
        np.copyto(cells[:, :, 1:], codes, casting="unsafe")
        return [(cells.reshape(rows, count * (width + 1)), None)]
    else:  # numpy drops trailing NULs: a string ends after its last non-NUL character
        positions = np.arange(1, width + 1, dtype=np.uint32)
        lengths = (np.minimum(codes, 1) * positions).max(axis=2).astype(np.int64)
    cells = np.empty((rows, count, codes.shape[2] + 1), dtype=np.uint8)
    cells[:, :, 0] = lengths
    np.copyto(cells[:, :, 1:], codes, casting="unsafe")
    return [(cells[:, j, :], lengths[:, j] + 1) for j in range(count)]


def _assemble(segments, rows: int) -> PackedBytes:
    """Rows made of segments ``(cells, lengths)`` (lengths None: the full cell width)."""
    lengths = [np.full(rows, cells.shape[1], dtype=np.int64) if used is None else used
               for cells, used in segments]
    offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(sum(lengths), out=offsets[1:])
    out = np.empty(int(offsets[-1]), dtype=np.uint8)
    position = offsets[:-1].copy()
    for (cells, _), used in zip(segments, lengths):
        copy_rows(out, position, cells, None, used)
        position += used
    return PackedBytes(out, offsets)


class QuoteValues:
    """The values of a batch of quotes, encoded range by range (a lazy put_many column)."""

    def __init__(self, quotes: np.ndarray):
        if quotes.dtype != QUOTE_DTYPE:
            raise TypeError(f"quotes must have QUOTE_DTYPE, not {quotes.dtype}")
        self._raw = np.ascontiguousarray(quotes).view(np.uint8).reshape(len(quotes), -1)

    def __len__(self) -> int:
        return len(self._raw)

    def pack(self, start: int, stop: int) -> PackedBytes:
        raw = self._raw[start:stop]
        segments = []
        for kind, offset, count, width in _RUNS:
            if kind == "bytes":
                segments.append((raw[:, offset:offset + width], None))
            else:
                segments += _string_segments(raw, offset, count, width)
        return _assemble(segments, len(raw))


class QuoteKeys:
    """The keys (symbol + big-endian timestamp) of a batch of quotes, as a lazy column."""

    def __init__(self, quotes: np.ndarray):
        if quotes.dtype != QUOTE_DTYPE:
            raise TypeError(f"quotes must have QUOTE_DTYPE, not {quotes.dtype}")
        self._raw = np.ascontiguousarray(quotes).view(np.uint8).reshape(len(quotes), -1)
        self._timestamps = np.ascontiguousarray(quotes)["timestamp"]

    def __len__(self) -> int:
        return len(self._raw)

    def pack(self, start: int, stop: int) -> PackedBytes:
        raw = self._raw[start:stop]
        _, offset, _, width = _RUNS[0]
        (cells, lengths), = _string_segments(raw, offset, 1, width)
        if lengths is None:
            lengths = np.full(len(raw), cells.shape[1], dtype=np.int64)
        stamps = self._timestamps[start:stop].astype(">i8").view(np.uint8).reshape(-1, 8)
        return _assemble([(cells[:, 1:], lengths - 1), (stamps, None)], len(raw))
