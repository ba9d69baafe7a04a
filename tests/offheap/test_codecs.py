"""offheap.kernels.codecs: golden streams, round trips, threads, missing libraries, damaged input."""

from __future__ import annotations

import sys
import threading
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offheap.kernels import codecs
from offheap.kernels.codecs import CODEC_NAMES, Codec, SnappyCodec, ZlibCodec, ZstdCodec, get_codec, names
from offheap.errors import CodecUnavailableError, CorruptionError, OffheapError

TEXT = b"offheap offheap offheap pages"
# Streams as each codec writes them (raw DEFLATE, a raw Snappy block, a magicless zstd frame
# without content size): decoding them pins the stream formats pages are stored in.
GOLDEN_STREAMS = {
    "none": TEXT.hex(),
    "zlib": "cb4f4bcb484d2c50c847a30b12d3538b01",
    "snappy": "1d1c6f666668656170203e0800107061676573",
    "zstd": "00009d0000686f6666686561702070616765730100430a17",
}


@pytest.mark.parametrize("name", CODEC_NAMES)
def test_golden_streams_decode(name):
    assert get_codec(name).decompress(bytes.fromhex(GOLDEN_STREAMS[name]), len(TEXT)) == TEXT


def test_streams_carry_no_framing():
    assert not get_codec("zstd").compress(TEXT).startswith(bytes.fromhex("28b52ffd"))  # zstd magic
    assert get_codec("zlib").compress(TEXT)[0] != 0x78  # zlib header byte


@pytest.mark.parametrize("name", CODEC_NAMES)
@settings(max_examples=60)
@given(data=st.binary(max_size=2000) | st.binary(max_size=20).map(lambda b: b * 50))
def test_roundtrip(name, data):
    codec = get_codec(name)
    packed = codec.compress(data)
    assert type(packed) is bytes
    assert codec.decompress(packed, len(data)) == data


@pytest.mark.parametrize("name", CODEC_NAMES)
def test_bytes_like_input(name):
    codec = get_codec(name)
    for data in (bytearray(TEXT), memoryview(TEXT)):
        packed = codec.compress(data)
        assert codec.decompress(memoryview(packed), len(TEXT)) == TEXT


@pytest.mark.parametrize("level", [1, 9])
def test_levels(level):
    for codec in (ZlibCodec(level), ZstdCodec(level), get_codec("zlib", level=level)):
        assert codec.level == level
        assert codec.decompress(codec.compress(TEXT * 9), len(TEXT) * 9) == TEXT * 9
        assert get_codec(codec.name).decompress(codec.compress(TEXT), len(TEXT)) == TEXT


def test_get_codec():
    assert get_codec(None).name == get_codec("none").name == "none"
    assert get_codec("zstd") is get_codec("zstd")  # shared, so per-thread contexts are reused
    custom = ZlibCodec(1)
    assert get_codec(custom) is custom
    assert set(names()) == set(CODEC_NAMES)  # every library is a dependency of the project
    assert repr(get_codec("zlib")) == "<codec zlib level=6>"


def test_get_codec_rejects_bad_arguments():
    with pytest.raises(ValueError, match="none, zlib, snappy, zstd"):
        get_codec("lzma")
    with pytest.raises(ValueError, match="no compression level"):
        get_codec("snappy", level=3)
    with pytest.raises(ValueError, match="codec name"):
        get_codec(ZlibCodec(), level=3)
    with pytest.raises(ValueError, match="0..9"):
        ZlibCodec(10)
    with pytest.raises(ValueError, match="zstd level"):
        ZstdCodec(23)


@pytest.mark.parametrize("name, module, package, cls", [
    ("snappy", "snappy", "python-snappy", SnappyCodec),
    ("zstd", "zstandard", "zstandard", ZstdCodec),
])
def test_missing_library_names_the_package(monkeypatch, name, module, package, cls):
    monkeypatch.setitem(sys.modules, module, None)  # makes ``import module`` fail
    monkeypatch.setattr(codecs, "_shared", {})
    with pytest.raises(CodecUnavailableError, match=f"pip install {package}") as info:
        get_codec(name)
    assert isinstance(info.value, ImportError) and isinstance(info.value, OffheapError)
    with pytest.raises(CodecUnavailableError):
        cls()
    assert name not in names()
    assert get_codec("zlib").name == "zlib"


def test_zstd_is_safe_across_threads():
    codec = get_codec("zstd")
    payloads = [bytes([i]) * (100 + i) + TEXT * (i % 7) for i in range(200)]
    failures = []

    def work():
        for payload in payloads:
            if codec.decompress(codec.compress(payload), len(payload)) != payload:
                failures.append(payload)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


@pytest.mark.parametrize("name", CODEC_NAMES)
def test_wrong_raw_size_is_corruption(name):
    codec = get_codec(name)
    packed = codec.compress(TEXT)
    for size in (0, len(TEXT) - 1, len(TEXT) + 1, 2**40):  # the claimed size is never allocated
        with pytest.raises(CorruptionError, match="corrupt"):
            codec.decompress(packed, size)


@pytest.mark.parametrize("name", ["zlib", "snappy", "zstd"])
def test_truncated_streams_are_corruption(name):
    codec = get_codec(name)
    packed = codec.compress(TEXT * 3)
    for cut in range(len(packed)):
        with pytest.raises(CorruptionError):
            codec.decompress(packed[:cut], len(TEXT) * 3)


@pytest.mark.parametrize("name", CODEC_NAMES)
@settings(max_examples=200)
@given(data=st.binary(max_size=80), raw_size=st.integers(0, 300))
def test_random_bytes_raise_only_corruption_error(name, data, raw_size):
    try:
        output = get_codec(name).decompress(data, raw_size)
    except CorruptionError:
        return
    assert len(output) == raw_size


def test_codec_is_the_identity_interface():
    assert isinstance(get_codec("zstd"), Codec) and Codec().compress(memoryview(TEXT)) == TEXT


def test_a_zstd_frame_never_allocates_more_than_the_size_asked_for():
    """Neither the size a frame declares in its header nor what it really holds is allocated
    beyond ``raw_size``: both frames hold 64 MiB, one of them says so."""
    pytest.importorskip("zstandard")
    import zstandard

    codec = get_codec("zstd")
    silent = codec.compress(bytes(64 << 20))
    declaring = zstandard.ZstdCompressor(compression_params=zstandard.ZstdCompressionParameters.from_level(
        3, format=zstandard.FORMAT_ZSTD1_MAGICLESS, write_content_size=True)).compress(bytes(64 << 20))
    for frame in (silent, declaring):
        tracemalloc.start()
        try:
            with pytest.raises(CorruptionError, match="corrupt"):
                codec.decompress(frame, 1000)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 1 << 20
