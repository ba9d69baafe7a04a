"""The checksum sidecar: golden bytes, verification, damage and staleness, the CLI."""

from __future__ import annotations

import random
import shutil
import struct
import zlib

import pytest

import sparkey
from sparkey.checksums import checksum_path, verify_checksums, write_checksums
from sparkey.errors import (
    ChecksumError, MissingChecksumsError, SparkeyError, StaleChecksumsError)
from sparkey.format import IndexHeader, LogHeader

from .golden import VECTORS_DIR
from .test_cli import run

GOLDEN_DIR = VECTORS_DIR.parent / "checksum_golden"
GOLDENS = sorted(path.name for path in GOLDEN_DIR.glob("*.spc"))


def _spec_bytes(log: bytes, index: bytes, chunk_bytes: int) -> bytes:
    """A sidecar built from the layout in the format's docstring, without sparkey.checksums."""
    log_header, index_header = LogHeader.unpack(log), IndexHeader.unpack(index)
    crcs = [zlib.crc32(data[i: i + chunk_bytes])
            for data in (log, index) for i in range(0, len(data), chunk_bytes)]
    body = (struct.pack("<II", 1, chunk_bytes)
            + struct.pack("<QQII", len(log), log_header.data_end, log_header.file_identifier, 0)
            + struct.pack("<QQII", len(index), index_header.data_end,
                          index_header.file_identifier, index_header.hash_seed)
            + struct.pack(f"<{len(crcs)}I", *crcs))
    return b"SPKYSUMS" + struct.pack("<II", 1, zlib.crc32(body)) + body


def _copy_vector(name: str, directory) -> str:
    for suffix in (".spl", ".spi"):
        shutil.copy(VECTORS_DIR / name / f"data{suffix}", directory / f"data{suffix}")
    return str(directory / "data")


@pytest.mark.parametrize("golden", GOLDENS)
def test_golden_sidecars(tmp_path, golden):
    vector, chunk = golden[:-len(".spc")].rsplit(".chunk", 1)
    base = _copy_vector(vector, tmp_path)
    expected = (GOLDEN_DIR / golden).read_bytes()
    log, index = (tmp_path / "data.spl").read_bytes(), (tmp_path / "data.spi").read_bytes()
    assert _spec_bytes(log, index, int(chunk)) == expected
    path = write_checksums(base + ".spl", base + ".spi", chunk_bytes=int(chunk))
    assert path == base + ".spc" == checksum_path(base + ".spi")
    assert (tmp_path / "data.spc").read_bytes() == expected
    sidecar = verify_checksums(base + ".spl", base + ".spi")
    assert sidecar.chunk_bytes == int(chunk) and sidecar.log.file_bytes == len(log)
    with sparkey.open(base, verify=True) as reader:
        assert len(reader) == reader.index_header.num_entries


def test_the_writer_writes_checksums_and_leaves_the_store_bytes_as_they_were(tmp_path):
    for name, checksums in (("plain", False), ("checked", True)):
        with sparkey.Writer(tmp_path / name, "zstd", 64, file_identifier=7, hash_seed=9,
                            checksums=checksums) as writer:
            for i in range(2000):
                writer.put(b"k%d" % i, b"v%d" % i * 20)
    for suffix in (".spl", ".spi"):
        assert (tmp_path / f"plain{suffix}").read_bytes() == \
            (tmp_path / f"checked{suffix}").read_bytes()
    assert not (tmp_path / "plain.spc").exists()
    with sparkey.open(tmp_path / "checked", verify=True) as reader:
        assert reader[b"k5"] == b"v5" * 20
    with pytest.raises(MissingChecksumsError, match="plain.spc' does not exist") as raised:
        sparkey.open(tmp_path / "plain", verify=True)
    assert isinstance(raised.value, FileNotFoundError)
    assert raised.value.filename == str(tmp_path / "plain.spc")


def _store(tmp_path, n=20_000, compression="none"):
    base = tmp_path / "data"
    with sparkey.Writer(base, compression, 256, checksums=True) as writer:
        for i in range(n):
            writer.put(b"key-%d" % i, b"value-%d" % i)
    return base


def test_a_damaged_byte_is_named_by_file_and_range(tmp_path):
    base = _store(tmp_path)
    log = tmp_path / "data.spl"
    data = bytearray(log.read_bytes())
    assert len(data) > 3 * 65536
    data[150_000] ^= 0x10
    log.write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match=r"data.spl' is damaged in bytes 131072-196608") \
            as raised:
        sparkey.open(base, verify=True)
    assert (raised.value.filename, raised.value.start, raised.value.stop) == \
        (str(log), 131072, 196608)
    status, _ = run("verify", base)
    assert status == 1


def test_a_damaged_sidecar_is_a_checksum_error_naming_it(tmp_path):
    base = _store(tmp_path, 500)
    sidecar = tmp_path / "data.spc"
    data = bytearray(sidecar.read_bytes())
    data[-1] ^= 1
    sidecar.write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match="data.spc': the checksum sidecar is damaged"):
        sparkey.open(base, verify=True)
    sidecar.write_bytes(b"SPKYSUMS" + b"\2\0\0\0" + bytes(60))
    with pytest.raises(ChecksumError, match="version 2; this sparkey reads version 1"):
        sparkey.open(base, verify=True)


def test_a_stale_sidecar_is_reported_as_stale(tmp_path):
    base = _store(tmp_path, 500)
    sparkey.write_index(tmp_path / "data.spi", tmp_path / "data.spl", hash_seed=1)
    with pytest.raises(StaleChecksumsError, match=r"data.spc' is stale: .*data.spi' was "
                       r"rewritten or appended to .*\(hash_seed \d+ then, 1 now\)"):
        sparkey.open(base, verify=True)
    sparkey.write_index(tmp_path / "data.spi", tmp_path / "data.spl", checksums=True)
    sparkey.open(base, verify=True).close()
    with sparkey.Writer(base, mode="a") as writer:  # appended, the index rebuilt: both stale
        writer.put(b"more", b"entries")
    with pytest.raises(StaleChecksumsError, match=r"data.spl' was rewritten .*file_bytes"):
        verify_checksums(tmp_path / "data.spl", tmp_path / "data.spi")
    assert not issubclass(StaleChecksumsError, ChecksumError)


def test_every_random_bit_flip_is_detected(tmp_path):
    """300 single-bit flips over log and index: each raises a sparkey error at verification,
    while without it some read back wrong values without any error."""
    base = _store(tmp_path, 3000, "zstd")
    files = {suffix: (tmp_path / f"data{suffix}").read_bytes() for suffix in (".spl", ".spi")}
    with sparkey.open(base) as reader:
        expected = dict(reader.items())
    rng = random.Random(7)
    silent = 0
    for _ in range(300):
        suffix = rng.choice(sorted(files))
        data = bytearray(files[suffix])
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        (tmp_path / f"data{suffix}").write_bytes(bytes(data))
        with pytest.raises(SparkeyError):
            sparkey.open(base, verify=True)
        try:
            with sparkey.open(base) as reader:
                silent += dict(reader.items()) != expected or \
                    reader.get_many(list(expected)) != list(expected.values())
        except SparkeyError:
            pass
        (tmp_path / f"data{suffix}").write_bytes(files[suffix])
    assert silent > 0


def test_cli_writes_and_verifies_checksums(tmp_path):
    log = tmp_path / "data.spl"
    assert run("create", log, "--checksums") == (0, b"")
    assert run("append", log, stdin=b"a\t1\nb\t2\n") == (0, b"")
    assert run("verify", tmp_path / "data")[0] == 1  # appended after the checksums: stale
    assert run("write-index", log, "--checksums") == (0, b"")
    status, out = run("verify", tmp_path / "data.spi")
    assert status == 0 and out.endswith(b"2 chunks of 65536 bytes match " +
                                        str(tmp_path / "data.spc").encode() + b"\n")
    assert run("rewrite", tmp_path / "data", tmp_path / "copy", "--checksums") == (0, b"")
    assert run("verify", tmp_path / "copy")[0] == 0
    assert run("verify", tmp_path / "nothing")[0] == 1
