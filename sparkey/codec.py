"""Block codecs of compressed logs (pure layer): raw snappy and zstd frames.

A codec turns one uncompressed block into the payload stored after its VLQ length, and back.
Decompression is bounded: a payload that declares or produces more than ``max_size`` bytes (the
log's ``compression_block_size``), or more than its codec can expand it to, is rejected before
memory is spent on it, and every codec failure surfaces as LogFormatError. Codecs are shared
module singletons and thread-safe: zstd contexts are kept per thread.

Compressed bytes are not portable across library versions (both C and Java use zstd level 3 with
the content size in the frame header, as we do); only the decompressed blocks are comparable.
"""

from __future__ import annotations

import threading
from typing import Protocol

import cramjam
import snappy
import zstandard

from sparkey.errors import LogFormatError
from sparkey.format import Compression

ZSTD_LEVEL = 3
SNAPPY_MAX_RATIO = 22
"""Snappy's densest element copies 64 bytes for a 3-byte tag."""
ZSTD_MAX_RATIO = 32768
"""zstd's densest block (RLE) regenerates 128 KiB from 4 bytes."""


class Codec(Protocol):
    """What a block codec provides: ``compress`` a block, ``decompress`` a bounded payload."""

    name: str

    def compress(self, block: bytes | bytearray | memoryview) -> bytes:
        """The payload stored for ``block``."""

    def decompress(self, payload: bytes, max_size: int) -> bytes:
        """The block of ``payload``; LogFormatError if it is corrupt or exceeds ``max_size``."""


def _corrupt(name: str, max_size: int, detail: str) -> LogFormatError:
    return LogFormatError(f"{name} block does not decompress to at most {max_size} bytes "
                          f"({detail}); the log is corrupt")


class SnappyCodec:
    """Raw snappy blocks (not the framing format); the payload starts with the output length."""

    name = "snappy"

    @staticmethod
    def compress(block: bytes | bytearray | memoryview) -> bytes:
        """The raw snappy encoding of ``block``: python-snappy's ``compress``, called at the
        cramjam function under it, which releases the GIL (the wrapper holds it, so two writer
        threads ran slower than one) and takes any buffer without a copy."""
        return bytes(cramjam.snappy.compress_raw(block))

    @staticmethod
    def decompress(payload: bytes, max_size: int) -> bytes:
        """The block of ``payload``, checked against its length preamble and ``max_size``."""
        declared, pos, shift = 0, 0, 0
        while True:
            if pos >= len(payload) or pos >= 5:
                raise _corrupt("snappy", max_size, "bad length preamble")
            byte = payload[pos]
            declared |= (byte & 0x7F) << shift
            pos += 1
            shift += 7
            if byte < 0x80:
                break
        if declared > max_size or declared > SNAPPY_MAX_RATIO * len(payload):
            raise _corrupt("snappy", max_size, f"declares {declared} bytes")
        try:
            block = snappy.uncompress(payload)
        except Exception as exc:  # cramjam raises its own DecompressionError family
            raise _corrupt("snappy", max_size, f"{type(exc).__name__}: {exc}") from exc
        return block

    raw_decompress = staticmethod(cramjam.snappy.decompress_raw)
    """The raw decoder under python-snappy, unchecked, returning a buffer (not bytes): what
    ``sparkey._native.Lookup`` calls once per block after checking the preamble itself (it
    saves the copy into bytes, about 10% of a snappy lookup)."""


class ZstdCodec:
    """One zstd frame per block, level 3, content size recorded in the frame header."""

    name = "zstd"

    def __init__(self) -> None:
        self._local = threading.local()

    def _contexts(self) -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
        local = self._local
        try:
            return local.compressor, local.decompressor
        except AttributeError:
            local.compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=True)
            local.decompressor = zstandard.ZstdDecompressor()
            return local.compressor, local.decompressor

    def compress(self, block: bytes | bytearray | memoryview) -> bytes:
        """One level-3 zstd frame holding ``block`` and its size."""
        return self._contexts()[0].compress(block)

    def decompress(self, payload: bytes, max_size: int) -> bytes:
        """The block of the frame ``payload``, bounded by ``max_size`` and the frame's ratio."""
        try:
            declared = zstandard.frame_content_size(payload)
        except zstandard.ZstdError as exc:
            raise _corrupt("zstd", max_size, f"bad frame header: {exc}") from exc
        if declared > max_size or declared > ZSTD_MAX_RATIO * len(payload):
            raise _corrupt("zstd", max_size, f"declares {declared} bytes")
        try:
            # declared == -1: the frame omits its size; max_output_size then bounds the output
            block = self._contexts()[1].decompress(payload, max_output_size=max_size)
        except zstandard.ZstdError as exc:
            raise _corrupt("zstd", max_size, str(exc)) from exc
        if len(block) > max_size:
            raise _corrupt("zstd", max_size, f"produced {len(block)} bytes")
        return block


_CODECS: dict[Compression, Codec] = {Compression.SNAPPY: SnappyCodec(),
                                     Compression.ZSTD: ZstdCodec()}


def codec_for(compression: int) -> Codec:
    """The shared codec of a compressed log type."""
    try:
        return _CODECS[Compression(compression)]
    except KeyError:
        raise ValueError(f"{Compression(compression).name} logs have no block codec") from None
