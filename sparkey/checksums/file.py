"""Writing and verifying the checksum sidecar ``<base>.spc`` of a store (IO layer).

Beside ``sparkey.log`` and ``sparkey.index``, the only code that opens Sparkey files: it reads
a log and its index whole, chunk by chunk, and writes or reads the sidecar
(:mod:`sparkey.checksums.format`). Each file is read once, in chunks of the sidecar's chunk size,
through one buffer of that size: O(file bytes), at about the speed of ``zlib.crc32`` (1.5 GB/s
on the project's machine) once the files are in the page cache. Nothing here holds a file open
past the call; thread safety is the file system's (a store being rewritten while it is verified
reads as stale or damaged).
"""

from __future__ import annotations

import mmap
import os
import secrets
from collections.abc import Callable

from sparkey.checksums.format import (
    CHECKSUM_SUFFIX, CHUNK_BYTES, FileIdentity, Sidecar, chunk_crcs, encode_sidecar,
    parse_sidecar)
from sparkey.durable import fsync_parent
from sparkey.errors import ChecksumError, MissingChecksumsError, StaleChecksumsError
from sparkey.format import (
    INDEX_HEADER_SIZE, INDEX_SUFFIX, LOG_HEADER_SIZE, IndexHeader, LogHeader, file_pair)


def checksum_path(path: str | os.PathLike[str]) -> str:
    """The sidecar's path for a store named by ``path`` (a base name, or either file)."""
    return file_pair(path)[1][:-len(INDEX_SUFFIX)] + CHECKSUM_SUFFIX


def write_checksums(log_path: str | os.PathLike[str], index_path: str | os.PathLike[str], *,
                    chunk_bytes: int = CHUNK_BYTES, fsync: bool = False) -> str:
    """Checksum the log and index as they are now into the sidecar beside them, written under
    a temporary name and renamed into place; return its path. ``chunk_bytes`` is recorded in
    the sidecar, so any size reads back (smaller chunks name a damaged range more closely and
    cost 4 bytes each). ``fsync=True`` syncs the sidecar before the rename and its directory
    after it."""
    if chunk_bytes < 1 or chunk_bytes >= 1 << 32:
        raise ValueError(f"chunk_bytes must be in 1..2**32-1, not {chunk_bytes}")
    log_path, index_path = os.fspath(log_path), os.fspath(index_path)
    log, log_crcs = _read_file(log_path, chunk_bytes, _log_identity)
    index, index_crcs = _read_file(index_path, chunk_bytes, _index_identity)
    data = encode_sidecar(Sidecar(chunk_bytes, log, index, tuple(log_crcs), tuple(index_crcs)))
    path = checksum_path(index_path)
    temp_path = f"{path}.tmp-{secrets.token_hex(8)}"
    try:
        with open(temp_path, "xb") as file:
            file.write(data)
            if fsync:
                file.flush()
                os.fsync(file.fileno())
        os.replace(temp_path, path)
        if fsync:
            fsync_parent(path)
    except BaseException:
        if os.path.exists(temp_path):
            os.unlink(temp_path)
        raise
    return path


def verify_checksums(log_path: str | os.PathLike[str],
                     index_path: str | os.PathLike[str]) -> Sidecar:
    """Check the log and index against their sidecar; return it when every chunk matches.

    Raises MissingChecksumsError without a sidecar, ChecksumError (naming the file and byte
    range) for a damaged sidecar or a chunk that differs, StaleChecksumsError when the log or
    index is not the one the sidecar describes (rewritten or appended to after it: not damage),
    and the format errors for a header that does not parse.
    """
    log_path, index_path = os.fspath(log_path), os.fspath(index_path)
    path = checksum_path(index_path)
    try:
        with open(path, "rb") as file:
            sidecar = parse_sidecar(file.read(), path)
    except FileNotFoundError:
        raise MissingChecksumsError(
            f"{path!r} does not exist: the store has no checksums to verify; write them with "
            f"sparkey.write_index(..., checksums=True) or sparkey.Writer(..., checksums=True)",
            path) from None
    read = [(log_path, sidecar.log, sidecar.log_crcs, _log_identity),
            (index_path, sidecar.index, sidecar.index_crcs, _index_identity)]
    found = [_read_file(file_path, sidecar.chunk_bytes, identify)
             for file_path, _, _, identify in read]
    for (file_path, recorded, _, _), (identity, _) in zip(read, found):
        if identity != recorded:
            changed = ", ".join(
                f"{name} {getattr(recorded, name)} then, {getattr(identity, name)} now"
                for name in FileIdentity.__dataclass_fields__
                if getattr(recorded, name) != getattr(identity, name))
            raise StaleChecksumsError(
                f"{path!r} is stale: {file_path!r} was rewritten or appended to after the "
                f"checksums were written ({changed}), so nothing was verified; write them "
                f"again (python -m sparkey write-index --checksums)", path)
    for (file_path, recorded, recorded_crcs, _), (_, crcs) in zip(read, found):
        for number, (expected, actual) in enumerate(zip(recorded_crcs, crcs)):
            if expected != actual:
                start = number * sidecar.chunk_bytes
                stop = min(start + sidecar.chunk_bytes, recorded.file_bytes)
                raise ChecksumError(
                    f"{file_path!r} is damaged in bytes {start}-{stop}: their crc32 is "
                    f"{actual:#010x}, the checksums in {path!r} say {expected:#010x}; restore "
                    f"the store from a good copy", file_path, start, stop)
    return sidecar


def _log_identity(header: bytes, file_bytes: int) -> FileIdentity:
    parsed = LogHeader.unpack(header)
    return FileIdentity(file_bytes, parsed.data_end, parsed.file_identifier)


def _index_identity(header: bytes, file_bytes: int) -> FileIdentity:
    parsed = IndexHeader.unpack(header)
    return FileIdentity(file_bytes, parsed.data_end, parsed.file_identifier, parsed.hash_seed)


def _read_file(path: str, chunk_bytes: int,
               identify: Callable[[bytes, int], FileIdentity]) -> tuple[FileIdentity, list[int]]:
    """The identity of the log or index at ``path`` (``identify`` parses its header) and the
    crc32 of each chunk, read through a read-only mapping of the file, released on return."""
    with open(path, "rb") as file:
        file_bytes = os.fstat(file.fileno()).st_size
        if not file_bytes:
            return identify(b"", 0), []  # the header parser says what is wrong
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            header = mapped[:max(LOG_HEADER_SIZE, INDEX_HEADER_SIZE)]
            return identify(header, file_bytes), chunk_crcs(mapped, chunk_bytes)
