"""Compression codecs for pages and records (layer 2: pure, no IO).

A codec is a small object with a ``name`` and two functions, ``compress(data) -> bytes`` and
``decompress(data, raw_size) -> bytes``. The caller stores ``raw_size`` next to the compressed
bytes (a page header does), so codecs write the leanest stream their library offers and spend
no bytes on framing: on pages of a few hundred bytes, 4 to 6 bytes of magic number, content size
or checksum are a visible share of every page. Streams:

``none``
    the data itself.
``zlib``
    a raw DEFLATE stream (``wbits=-15``): no zlib header, no Adler-32 trailer.
``snappy``
    the raw Snappy block format (python-snappy's ``compress``), which starts with the varint of
    the raw length.
``zstd``
    a Zstandard frame without magic number, content size or checksum
    (``FORMAT_ZSTD1_MAGICLESS``).

Integrity is the store's concern, not the codec's: a stream that fails to decode, or decodes to
a size other than ``raw_size``, raises :class:`~offheap.errors.CorruptionError`; a damaged stream
that still decodes to the right size is not detected here. A codec allocates at most ``raw_size``
bytes (snappy and zstd allocate it up front) and never a size written inside a damaged stream, so
the caller bounds what a corrupt record can make a read allocate by bounding ``raw_size``
(pages: :func:`offheap.treemap.page.max_body_bytes`).

Thread safety: every codec may be shared between threads. zlib and snappy keep no state; the
zstd codec keeps one compressor and one decompressor per thread, because a zstandard context
must never be used by two threads at once. All four libraries release the GIL while they work.

Default levels, measured by ``benchmarks/packing_bench.py`` on 5,000 delta-packed 120-key leaf
bodies (random sorted int64 keys, short word values; 13.6 bytes per entry raw):

========== ============ =============== ===================================================
codec      size ratio   compress MB/s   verdict
========== ============ =============== ===================================================
zlib 1     1.34         35              fastest zlib, 1.2% larger pages
zlib 6     1.36         29              default: level 9 gains nothing more
zstd 1     1.17         187             small pages defeat its fast strategy
zstd 3     1.31         140             default: level 9 gains 1% for half the speed
snappy     1.07         690             when speed matters more than size
========== ============ =============== ===================================================

Leaves whose keys and values are already bit-packed at their entropy (random keys, small-int
values) do not compress at all, so a page writer keeps the raw body when a codec does not help.
"""

from __future__ import annotations

import importlib
import threading
import zlib

from offheap.errors import CodecUnavailableError, CorruptionError
from offheap.kernels.packing import varint_decode_one

__all__ = ["CODEC_NAMES", "DEFAULT_LEVELS", "Codec", "SnappyCodec", "ZlibCodec", "ZstdCodec",
           "get_codec", "names"]

CODEC_NAMES = ("none", "zlib", "snappy", "zstd")
"""Every codec name offheap knows, whether or not its library is installed (see :func:`names`)."""

DEFAULT_LEVELS = {"zlib": 6, "zstd": 3}
"""Compression levels used when none is given (measured choice: see the module docstring)."""

_LIBRARIES = {"snappy": ("snappy", "python-snappy"), "zstd": ("zstandard", "zstandard")}
"""codec name -> (module it imports, pip package that provides the module)."""
_MIN_ZSTD_LEVEL = -(1 << 17)
_ZSTD_MAX_EXPANSION = 1 << 15
"""The most a zstd frame expands: a block of at most 128 KiB costs at least 4 bytes (an RLE block)."""


def _import_library(codec: str):
    module, package = _LIBRARIES[codec]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise CodecUnavailableError(
            f"the {codec!r} codec needs the {package!r} package, which is not installed: "
            f"pip install {package}, or choose another codec (installed: {', '.join(names())})"
        ) from exc


def _check_size(name: str, output: bytes, raw_size: int) -> bytes:
    if len(output) != raw_size:
        raise CorruptionError(f"{name} data decompressed to {len(output)} bytes, expected "
                              f"{raw_size}: the compressed data is corrupt")
    return output


class Codec:
    """The identity codec (``none``), and the interface every codec follows.

    ``compress`` takes any bytes-like object and returns ``bytes``; ``decompress`` takes the
    compressed bytes and the size they must decompress to, and returns ``bytes`` of exactly
    that size or raises :class:`~offheap.errors.CorruptionError`.
    """

    name = "none"

    def compress(self, data) -> bytes:
        return bytes(data)

    def decompress(self, data, raw_size: int) -> bytes:
        return _check_size(self.name, bytes(data), raw_size)

    def __repr__(self) -> str:
        return f"<codec {self.name}>"


class ZlibCodec(Codec):
    """Raw DEFLATE at ``level`` 0..9 (the level only matters to ``compress``)."""

    name = "zlib"

    def __init__(self, level: int = DEFAULT_LEVELS["zlib"]) -> None:
        if not 0 <= level <= 9:
            raise ValueError(f"zlib level must be in 0..9, got {level}")
        self.level = level

    def compress(self, data) -> bytes:
        compressor = zlib.compressobj(self.level, zlib.DEFLATED, -15)
        return compressor.compress(data) + compressor.flush()

    def decompress(self, data, raw_size: int) -> bytes:
        decompressor = zlib.decompressobj(-15)
        try:
            output = decompressor.decompress(data, raw_size + 1)  # bounded: damage cannot balloon
        except zlib.error as exc:
            raise CorruptionError(f"zlib data does not decompress ({exc}): it is corrupt") from None
        if not decompressor.eof:
            raise CorruptionError(f"zlib data ends early or decompresses to more than {raw_size} "
                                  f"bytes: it is corrupt")
        return _check_size(self.name, output, raw_size)

    def __repr__(self) -> str:
        return f"<codec zlib level={self.level}>"


class SnappyCodec(Codec):
    """Snappy raw blocks through python-snappy."""

    name = "snappy"

    def __init__(self) -> None:
        self._snappy = _import_library(self.name)

    def compress(self, data) -> bytes:
        return self._snappy.compress(data)

    def decompress(self, data, raw_size: int) -> bytes:
        try:  # the block starts with the varint of its raw size: check it before allocating
            declared, _ = varint_decode_one(data)
        except CorruptionError:
            declared = None
        if declared != raw_size:
            raise CorruptionError(f"snappy data declares {declared} raw bytes, expected {raw_size}: "
                                  f"it is corrupt")
        try:
            output = self._snappy.uncompress(data)
        except Exception as exc:  # python-snappy raises its own UncompressError or cramjam's errors
            raise CorruptionError(f"snappy data does not decompress ({type(exc).__name__}: {exc}): "
                                  f"it is corrupt") from None
        return _check_size(self.name, output, raw_size)


class ZstdCodec(Codec):
    """Magicless Zstandard frames at ``level`` (1..22, negative for the fast levels)."""

    name = "zstd"

    def __init__(self, level: int = DEFAULT_LEVELS["zstd"]) -> None:
        self._zstd = _import_library(self.name)
        if not _MIN_ZSTD_LEVEL <= level <= self._zstd.MAX_COMPRESSION_LEVEL:
            raise ValueError(f"zstd level must be in {_MIN_ZSTD_LEVEL}..{self._zstd.MAX_COMPRESSION_LEVEL}, "
                             f"got {level}")
        self.level = level
        self._parameters = self._zstd.ZstdCompressionParameters.from_level(
            level, format=self._zstd.FORMAT_ZSTD1_MAGICLESS, write_content_size=False,
            write_checksum=False)
        self._per_thread = threading.local()

    def _contexts(self):
        contexts = self._per_thread
        if not hasattr(contexts, "compressor"):
            contexts.compressor = self._zstd.ZstdCompressor(compression_params=self._parameters)
            contexts.decompressor = self._zstd.ZstdDecompressor(format=self._zstd.FORMAT_ZSTD1_MAGICLESS)
        return contexts

    def compress(self, data) -> bytes:
        return self._contexts().compressor.compress(data)

    def decompress(self, data, raw_size: int) -> bytes:
        # The output buffer is raw_size bytes: a frame that declares another size is refused
        # before anything is allocated, and one that omits it (as compress writes them) stops
        # with an error at raw_size, so damage cannot make zstandard allocate what it claims.
        zstd = self._zstd
        try:
            declared = zstd.get_frame_parameters(data, format=zstd.FORMAT_ZSTD1_MAGICLESS).content_size
        except zstd.ZstdError as exc:
            raise CorruptionError(f"zstd data has no valid frame header ({exc}): it is corrupt") from None
        if declared not in (zstd.CONTENTSIZE_UNKNOWN, raw_size):
            raise CorruptionError(f"zstd frame declares {declared} raw bytes, expected {raw_size}: "
                                  f"it is corrupt")
        if raw_size > _ZSTD_MAX_EXPANSION * len(data):
            raise CorruptionError(f"a zstd frame of {len(data)} bytes cannot hold {raw_size} raw "
                                  f"bytes: it is corrupt")
        try:  # max_output_size=0 would mean "unbounded"
            output = self._contexts().decompressor.decompress(data, max_output_size=max(raw_size, 1))
        except zstd.ZstdError as exc:
            raise CorruptionError(f"zstd data does not decompress to {raw_size} bytes ({exc}): "
                                  f"it is corrupt") from None
        return _check_size(self.name, output, raw_size)

    def __repr__(self) -> str:
        return f"<codec zstd level={self.level}>"


_CLASSES: dict[str, type[Codec]] = {"none": Codec, "zlib": ZlibCodec, "snappy": SnappyCodec,
                                     "zstd": ZstdCodec}
_LEVELED_CLASSES: dict[str, type[ZlibCodec | ZstdCodec]] = {"zlib": ZlibCodec, "zstd": ZstdCodec}
_shared: dict[str, Codec] = {}  # one default-level instance per name, created on first use


def get_codec(spec: str | Codec | None, *, level: int | None = None) -> Codec:
    """The codec for a name (``None`` means ``"none"``), or ``spec`` itself if it is a codec.

    Named codecs at their default level are shared instances. ``level`` picks another level
    for zlib and zstd and returns a new instance. Raises ``ValueError`` for an unknown name and
    :class:`~offheap.errors.CodecUnavailableError` when the codec's library is not installed.
    """
    if isinstance(spec, Codec):
        if level is not None:
            raise ValueError("pass level= with a codec name, not with a codec instance")
        return spec
    name = "none" if spec is None else spec
    if name not in _CLASSES:
        raise ValueError(f"unknown codec {spec!r}; known codecs: {', '.join(CODEC_NAMES)}")
    if level is not None:
        leveled = _LEVELED_CLASSES.get(name)
        if leveled is None:
            raise ValueError(f"the {name!r} codec has no compression level")
        return leveled(level)
    codec = _shared.get(name)
    if codec is None:
        codec = _shared.setdefault(name, _CLASSES[name]())
    return codec


def names() -> tuple[str, ...]:
    """Names of the codecs whose library is installed, in :data:`CODEC_NAMES` order."""
    available = []
    for name in CODEC_NAMES:
        if name in _LIBRARIES:
            try:
                importlib.import_module(_LIBRARIES[name][0])
            except ImportError:
                continue
        available.append(name)
    return tuple(available)
