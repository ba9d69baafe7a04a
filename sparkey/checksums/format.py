"""The checksum sidecar format, version 1 (pure: bytes in, values out; no IO).

A store ``<base>.spl`` + ``<base>.spi`` may have a third file ``<base>.spc`` holding a CRC-32 of
every chunk of both. libsparkey and sparkey-java never open it, so a store with one is still an
ordinary Sparkey store. All integers are little-endian::

    0   8s  magic b"SPKYSUMS"
    8   u32 format version (1)
    12  u32 crc32 of every byte of the sidecar after this field (16 to the end)
    16  u32 checksum: 1 = CRC-32, zlib.crc32 (the IEEE polynomial of gzip and PNG)
    20  u32 chunk bytes: each file is checksummed in chunks of this size, the last one short
    24  log:   u64 file bytes, u64 data_end, u32 file_identifier, u32 zero
    48  index: u64 file bytes, u64 data_end, u32 file_identifier, u32 hash_seed
    72  u32 crc32 of each chunk of the log (ceil(log bytes / chunk bytes) of them), then
        u32 crc32 of each chunk of the index; nothing follows

The size and header fields at 24 and 48 are the *identity* of each file as the sidecar saw it:
a log or index rewritten since (a new log gets a new file identifier, an appended one a new
data_end, a new index a new hash seed, and almost any rewrite a new size) no longer matches,
and the sidecar is *stale*, which is not damage. With the identity matching, a chunk whose crc
differs is damage in that byte range. A damaged identity field therefore reads as stale: an
error either way, never a silent pass.

Worked example: a log of 17,864 bytes and an index of 10,520 bytes in chunks of 4,096 bytes
take 5 and 3 crcs; the sidecar is 72 + 4 * 8 = 104 bytes.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from sparkey.errors import ChecksumError
from sparkey.format import Buffer

MAGIC = b"SPKYSUMS"
FORMAT_VERSION = 1
CRC32 = 1
CHUNK_BYTES = 1 << 16
"""The chunk size a writer uses unless told otherwise: a damaged range is named to 64 KiB."""
CHECKSUM_SUFFIX = ".spc"

_HEADER = struct.Struct("<8sIIII")
_LOG_IDENTITY = struct.Struct("<QQII")
_INDEX_IDENTITY = struct.Struct("<QQII")
HEADER_BYTES = _HEADER.size + _LOG_IDENTITY.size + _INDEX_IDENTITY.size
assert HEADER_BYTES == 72


@dataclass(frozen=True)
class FileIdentity:
    """What tells one version of a log or index from another: its size and the header fields
    a rewrite changes (``hash_seed`` is 0 for a log)."""

    file_bytes: int
    data_end: int
    file_identifier: int
    hash_seed: int = 0


@dataclass(frozen=True)
class Sidecar:
    """The content of a checksum sidecar: the chunk size, each file's identity and the crc of
    each of its chunks."""

    chunk_bytes: int
    log: FileIdentity
    index: FileIdentity
    log_crcs: tuple[int, ...]
    index_crcs: tuple[int, ...]


def chunk_count(file_bytes: int, chunk_bytes: int) -> int:
    """How many chunks of ``chunk_bytes`` cover ``file_bytes`` (the last may be short)."""
    return -(-file_bytes // chunk_bytes)


def chunk_crcs(data: Buffer, chunk_bytes: int) -> list[int]:
    """The crc32 of each ``chunk_bytes`` chunk of ``data``. O(len(data)), about 1.5 GB/s."""
    with memoryview(data) as view:
        return [zlib.crc32(view[start: start + chunk_bytes])
                for start in range(0, len(view), chunk_bytes)]


def encode_sidecar(sidecar: Sidecar) -> bytes:
    """The bytes of ``sidecar``."""
    log, index = sidecar.log, sidecar.index
    for identity, crcs in ((log, sidecar.log_crcs), (index, sidecar.index_crcs)):
        if len(crcs) != chunk_count(identity.file_bytes, sidecar.chunk_bytes):
            raise ValueError(f"{len(crcs)} crcs for a file of {identity.file_bytes} bytes in "
                             f"chunks of {sidecar.chunk_bytes}")
    body = (struct.pack("<II", CRC32, sidecar.chunk_bytes)
            + _LOG_IDENTITY.pack(log.file_bytes, log.data_end, log.file_identifier, 0)
            + _INDEX_IDENTITY.pack(index.file_bytes, index.data_end, index.file_identifier,
                                   index.hash_seed)
            + struct.pack(f"<{len(sidecar.log_crcs) + len(sidecar.index_crcs)}I",
                          *sidecar.log_crcs, *sidecar.index_crcs))
    return MAGIC + struct.pack("<II", FORMAT_VERSION, zlib.crc32(body)) + body


def parse_sidecar(data: Buffer, path: str) -> Sidecar:
    """The sidecar in ``data``; ChecksumError naming ``path`` and the byte range when it is not
    a version 1 sidecar or is damaged (its own crc, a length that does not fit its sizes)."""
    data = bytes(data)
    if len(data) < HEADER_BYTES or data[:8] != MAGIC:
        raise ChecksumError(f"{path!r} is not a Sparkey checksum sidecar (bad magic or shorter "
                            f"than its {HEADER_BYTES}-byte header)", path, 0, len(data))
    _, version, crc, algorithm, chunk_bytes = _HEADER.unpack_from(data)
    if version != FORMAT_VERSION:
        raise ChecksumError(f"{path!r} is a checksum sidecar of version {version}; this sparkey "
                            f"reads version {FORMAT_VERSION}", path, 8, 12)
    if zlib.crc32(memoryview(data)[16:]) != crc:
        raise ChecksumError(f"{path!r}: the checksum sidecar is damaged (its own crc fails "
                            f"over bytes 16-{len(data)}); write it again from a good copy of "
                            f"the store", path, 16, len(data))
    log_bytes, log_end, log_id, zero = _LOG_IDENTITY.unpack_from(data, _HEADER.size)
    index_bytes, index_end, index_id, seed = _INDEX_IDENTITY.unpack_from(
        data, _HEADER.size + _LOG_IDENTITY.size)
    n_log = chunk_count(log_bytes, chunk_bytes) if chunk_bytes else -1
    n_index = chunk_count(index_bytes, chunk_bytes) if chunk_bytes else -1
    if algorithm != CRC32 or zero or n_log < 0 or \
            len(data) != HEADER_BYTES + 4 * (n_log + n_index):
        raise ChecksumError(f"{path!r}: bad checksum sidecar header (checksum {algorithm}, "
                            f"chunk bytes {chunk_bytes}, {len(data)} bytes for files of "
                            f"{log_bytes} and {index_bytes} bytes)", path, 16, HEADER_BYTES)
    crcs = struct.unpack_from(f"<{n_log + n_index}I", data, HEADER_BYTES)
    return Sidecar(chunk_bytes, FileIdentity(log_bytes, log_end, log_id),
                   FileIdentity(index_bytes, index_end, index_id, seed),
                   crcs[:n_log], crcs[n_log:])
