"""The Sparkey file formats: header layouts, entry and address encoding (pure layer, no IO).

Everything here works on ``bytes``/``memoryview`` and plain integers; ``sparkey.log`` and
``sparkey.index`` do the file IO on top. The layouts below are those of Spotify's C library and of
sparkey-java; every integer is unsigned little-endian.

Log file ``<base>.spl``
=======================
An 84-byte header, then the body from offset 84 up to ``data_end``::

    off size field                   rule checked by LogHeader.unpack
      0  u32 magic                   0x49B39C95 (bytes 95 9c b3 49)
      4  u32 major_version           1
      8  u32 minor_version           0
     12  u32 file_identifier         random, copied into every index of this log
     16  u64 num_puts                2 * num_puts <= put_size, num_puts <= data_end
     24  u64 num_deletes             2 * num_deletes <= delete_size, num_deletes <= data_end
     32  u64 data_end                >= 84; end of the last entry or block
     40  u64 max_key_len             longest PUT key (DELETE keys are not counted), <= put_size
     48  u64 max_value_len           longest PUT value, <= put_size
     56  u64 delete_size             sum of encoded DELETE sizes (0 when num_deletes == 0)
     64  u32 compression_type        0 NONE, 1 SNAPPY, 2 ZSTD
     68  u32 compression_block_size  largest uncompressed block; >= 10 when compressed
     72  u64 put_size                sum of encoded PUT sizes (0 when num_puts == 0)
     80  u32 max_entries_per_block   NONE: 0 (C) or 1 (Java); compressed: <= block_size // 2

For NONE logs the body is exactly the entries, so ``put_size + delete_size == data_end - 84``.

An entry is two VLQs ``A B`` then payload. VLQ: base-128, least significant group first, bit 7
set on every byte but the last; 300 encodes as ``ac 02``::

    PUT     A = len(key) + 1, B = len(value), key bytes, value bytes
    DELETE  A = 0,            B = len(key),   key bytes

Compressed bodies are blocks ``VLQ(compressed_len) payload``; each payload decompresses (raw
snappy, or one zstd frame) to at most ``compression_block_size`` bytes, and the concatenation of
the decompressed blocks is the entry stream. The two header VLQs of an entry always sit in one
block; key and value bytes may continue into following blocks.

Index file ``<base>.spi``
=========================
A 112-byte header, then ``hash_capacity`` slots of ``hash_size + address_size`` bytes::

    off size field               rule checked by IndexHeader.unpack
      0  u32 magic               0x9A11318F (bytes 8f 31 11 9a)
      4  u32 major_version       1
      8  u32 minor_version       0 or 1 (same layout; 1 is written)
     12  u32 file_identifier     equal to the log's
     16  u32 hash_seed           MurmurHash3 seed
     20  u64 data_end            >= 84, <= the log's data_end: entries past it are not indexed
     28  u64 max_key_len         <= the log's
     36  u64 max_value_len       <= the log's
     44  u64 num_puts            <= the log's
     52  u64 garbage_size        bytes of dead entries (statistic)
     60  u64 num_entries         live keys = occupied slots; <= num_puts, <= hash_capacity
     68  u32 address_size        4 or 8
     72  u32 hash_size           4 (MurmurHash3_x86_32) or 8 (first word of MurmurHash3_x64_128)
     76  u64 hash_capacity       >= 1
     84  u64 max_displacement    <= num_entries
     92  u32 entry_block_bits    < 8 * address_size
     96  u64 hash_collisions     <= num_entries (statistic)
    104  u64 total_displacement  <= num_entries * max_displacement (statistic)

A slot is ``hash`` then ``address``; address 0 marks an empty slot. An address is
``(position << entry_block_bits) | entry_index``: for NONE logs ``position`` is the entry's file
offset and ``entry_index`` 0; for compressed logs ``position`` is the offset of the block's length
prefix and ``entry_index`` the entry's rank among the entries that start in that block.
"""

from __future__ import annotations

import dataclasses
import enum
import mmap
import os
import struct
from collections.abc import Iterable
from typing import Union

from sparkey.errors import (
    EntrySizeError, EntryTypeError, FileIdentifierMismatch, IndexFormatError, LogFormatError)

LOG_MAGIC = 0x49B39C95
INDEX_MAGIC = 0x9A11318F
LOG_HEADER_SIZE = 84
INDEX_HEADER_SIZE = 112
LOG_MAJOR_VERSION = 1
LOG_MINOR_VERSION = 0
INDEX_MAJOR_VERSION = 1
INDEX_MINOR_VERSION = 1
MIN_BLOCK_SIZE = 10
MAX_ENTRY_PART_LEN = 2**31 - 1
"""Longest key or value we write or accept: sparkey-java reads both lengths into an ``int``."""

MAX_VLQ_BYTES = 10

Buffer = Union[bytes, bytearray, memoryview, mmap.mmap]
"""Bytes that the parsers read by index and slice: bytes-likes, or a mapped file."""

BytesOrStr = Union[bytes, bytearray, memoryview, str]
"""A key or value as callers pass it: bytes-like, or str (stored as UTF-8)."""

_LOG_STRUCT = struct.Struct("<IIIIQQQQQQIIQI")
_INDEX_STRUCT = struct.Struct("<IIIIIQQQQQQIIQQIQQ")
assert _LOG_STRUCT.size == LOG_HEADER_SIZE and _INDEX_STRUCT.size == INDEX_HEADER_SIZE


class Compression(enum.IntEnum):
    """Block compression of a log, with the numeric code stored in the header."""

    NONE = 0
    SNAPPY = 1
    ZSTD = 2

    @classmethod
    def parse(cls, value: object) -> Compression:
        """Accept a member, its code, or its name in any case (``"zstd"``)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                return cls[value.upper()]
            except KeyError:
                pass
        elif isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                pass
        raise ValueError(f"unknown compression {value!r}; use 'none', 'snappy' or 'zstd'")


class EntryKind(enum.IntEnum):
    """Type of a log entry (the codes of the C library's ``sparkey_entry_type``)."""

    PUT = 0
    DELETE = 1


# ----------------------------------------------------------------------------------- entries

def vlq_size(value: int) -> int:
    """Number of bytes of the shortest VLQ encoding of ``value`` (1 for 0)."""
    return max(1, (value.bit_length() + 6) // 7)


def vlq_encode(value: int) -> bytes:
    """Shortest VLQ encoding of a non-negative int."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def vlq_decode(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """Decode the VLQ at ``buf[pos]``; return ``(value, next_pos)``.

    Raises LogFormatError when the encoding runs past ``end`` or is longer than 10 bytes (a value
    that cannot be a u64 length).
    """
    value = 0
    shift = 0
    start = pos
    while pos < end:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if pos - start >= MAX_VLQ_BYTES:
            break
    raise LogFormatError(
        f"entry header at offset {start} is truncated or longer than {MAX_VLQ_BYTES} bytes; "
        "the log is corrupt")


def put_header(key_len: int, value_len: int) -> bytes:
    """The two header VLQs of a PUT."""
    if key_len < 0x7F and value_len < 0x80:
        return bytes((key_len + 1, value_len))
    return vlq_encode(key_len + 1) + vlq_encode(value_len)


def delete_header(key_len: int) -> bytes:
    """The two header VLQs of a DELETE."""
    return b"\x00" + vlq_encode(key_len)


def put_size(key_len: int, value_len: int) -> int:
    """Encoded size of a PUT entry, as counted in ``put_size`` and ``garbage_size``."""
    return vlq_size(key_len + 1) + vlq_size(value_len) + key_len + value_len


def delete_size(key_len: int) -> int:
    """Encoded size of a DELETE entry, as counted in ``delete_size``."""
    return 1 + vlq_size(key_len) + key_len


def entry_bytes(obj: object, role: str = "key") -> bytes:
    """Return ``obj`` as ``bytes`` for use as a key or value; ``str`` is encoded as UTF-8.

    Raises EntryTypeError for other types and EntrySizeError past MAX_ENTRY_PART_LEN bytes.
    """
    if obj.__class__ is bytes:
        data = obj
    elif isinstance(obj, str):
        data = obj.encode("utf-8")
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        if isinstance(obj, memoryview) and obj.nbytes > MAX_ENTRY_PART_LEN:
            raise _too_long(role, obj.nbytes)
        data = bytes(obj)
    else:
        raise EntryTypeError(
            f"a {role} must be bytes, bytearray, memoryview or str, not {type(obj).__name__}")
    if len(data) > MAX_ENTRY_PART_LEN:
        raise _too_long(role, len(data))
    return data


def key_list(keys: Iterable[object]) -> list[bytes]:
    """``keys`` as a list of ``bytes`` (``entry_bytes`` of each; a list of bytes as it is)."""
    if isinstance(keys, list) and not set(map(type, keys)) - {bytes}:
        return keys
    return [key if key.__class__ is bytes else entry_bytes(key, "key") for key in keys]


def _too_long(role: str, length: int) -> EntrySizeError:
    return EntrySizeError(
        f"{role} of {length} bytes is longer than {MAX_ENTRY_PART_LEN} bytes, the largest that "
        "sparkey-java can read; split it or store it elsewhere")


# --------------------------------------------------------------------------------- addresses

def encode_address(position: int, entry_index: int, entry_block_bits: int) -> int:
    """Slot address of the entry ``entry_index`` of the block (or NONE entry) at ``position``."""
    return (position << entry_block_bits) | entry_index


def decode_address(address: int, entry_block_bits: int) -> tuple[int, int]:
    """Inverse of encode_address: ``(position, entry_index)``."""
    return address >> entry_block_bits, address & ((1 << entry_block_bits) - 1)


# ----------------------------------------------------------------------------------- headers

REBUILD_INDEX_HINT = ("rebuild the index with python -m sparkey write-index FILE.spl "
                      "(sparkey.write_index in Python)")
"""The advice of every error about an index that does not fit its log or is damaged."""

def _check_magic_and_size(buf: Buffer, magic: int, header_size: int,
                          error: type[LogFormatError | IndexFormatError], what: str, suffix: str,
                          advice: str) -> None:
    """Raise ``error`` unless ``buf`` starts with ``magic`` and holds ``header_size`` bytes."""
    if len(buf) >= 4 and (found := int.from_bytes(buf[:4], "little")) != magic:
        raise error(f"magic is {found:#010x}, not {magic:#010x}: this is not a Sparkey {what} "
                    f"({suffix}) file", "magic")
    if len(buf) < header_size:
        raise error(f"{what} header is truncated: {len(buf)} bytes, need {header_size}; {advice}")


def _check(ok: bool, error: type[LogFormatError | IndexFormatError], field: str,
           message: str) -> None:
    if not ok:
        raise error(f"{field} {message}", field)


@dataclasses.dataclass(frozen=True, slots=True)
class LogHeader:
    """The 84-byte header of a ``.spl`` log (see the module docstring for the rules)."""

    file_identifier: int
    compression_type: Compression = Compression.NONE
    compression_block_size: int = 0
    num_puts: int = 0
    num_deletes: int = 0
    data_end: int = LOG_HEADER_SIZE
    max_key_len: int = 0
    max_value_len: int = 0
    delete_size: int = 0
    put_size: int = 0
    max_entries_per_block: int = 0
    major_version: int = LOG_MAJOR_VERSION
    minor_version: int = LOG_MINOR_VERSION

    def pack(self) -> bytes:
        """The header as 84 bytes."""
        return _LOG_STRUCT.pack(
            LOG_MAGIC, self.major_version, self.minor_version, self.file_identifier,
            self.num_puts, self.num_deletes, self.data_end, self.max_key_len, self.max_value_len,
            self.delete_size, int(self.compression_type), self.compression_block_size,
            self.put_size, self.max_entries_per_block)

    @classmethod
    def unpack(cls, buf: Buffer) -> LogHeader:
        """Parse and validate the first 84 bytes of ``buf`` (LogFormatError names the field)."""
        _check_magic_and_size(buf, LOG_MAGIC, LOG_HEADER_SIZE, LogFormatError, "log", ".spl",
                              "this is not a complete Sparkey log")
        (_magic, major, minor, file_identifier, num_puts, num_deletes, data_end, max_key_len,
         max_value_len, del_size, compression_type, block_size, p_size,
         max_entries_per_block) = _LOG_STRUCT.unpack_from(buf, 0)
        err = LogFormatError
        _check(major == LOG_MAJOR_VERSION, err, "major_version",
               f"is {major}; only version {LOG_MAJOR_VERSION} logs can be read")
        _check(minor <= LOG_MINOR_VERSION, err, "minor_version",
               f"is {minor}; only minor version {LOG_MINOR_VERSION} logs can be read")
        _check(data_end >= LOG_HEADER_SIZE, err, "data_end",
               f"is {data_end}, before the end of the {LOG_HEADER_SIZE}-byte header")
        _check(compression_type <= max(Compression), err, "compression_type",
               f"is {compression_type}; known types are 0 (none), 1 (snappy), 2 (zstd)")
        compression = Compression(compression_type)
        _check(num_puts <= data_end and 2 * num_puts <= p_size and (num_puts or not p_size),
               err, "num_puts", f"is {num_puts}, inconsistent with put_size {p_size} "
               f"and data_end {data_end}")
        _check(num_deletes <= data_end and 2 * num_deletes <= del_size
               and (num_deletes or not del_size), err, "num_deletes",
               f"is {num_deletes}, inconsistent with delete_size {del_size} "
               f"and data_end {data_end}")
        _check(max_key_len <= p_size, err, "max_key_len",
               f"is {max_key_len}, larger than put_size {p_size}")
        _check(max_value_len <= p_size, err, "max_value_len",
               f"is {max_value_len}, larger than put_size {p_size}")
        if compression == Compression.NONE:
            body = data_end - LOG_HEADER_SIZE
            _check(p_size + del_size == body, err, "put_size",
                   f"{p_size} + delete_size {del_size} != {body} body bytes of an uncompressed log")
            _check(max_entries_per_block <= 1, err, "max_entries_per_block",
                   f"is {max_entries_per_block}; an uncompressed log records 0 or 1")
        else:
            _check(block_size >= MIN_BLOCK_SIZE, err, "compression_block_size",
                   f"is {block_size}; a compressed log needs blocks of at least {MIN_BLOCK_SIZE} "
                   "bytes")
            _check(max_entries_per_block <= min(block_size // 2, num_puts + num_deletes)
                   and (max_entries_per_block or data_end == LOG_HEADER_SIZE), err,
                   "max_entries_per_block", f"is {max_entries_per_block}, impossible for "
                   f"{num_puts + num_deletes} entries in blocks of {block_size} bytes")
        return cls(
            file_identifier=file_identifier, compression_type=compression,
            compression_block_size=block_size, num_puts=num_puts, num_deletes=num_deletes,
            data_end=data_end, max_key_len=max_key_len, max_value_len=max_value_len,
            delete_size=del_size, put_size=p_size, max_entries_per_block=max_entries_per_block,
            major_version=major, minor_version=minor)


@dataclasses.dataclass(frozen=True, slots=True)
class IndexHeader:
    """The 112-byte header of a ``.spi`` index (see the module docstring for the rules)."""

    file_identifier: int
    hash_seed: int
    data_end: int
    max_key_len: int
    max_value_len: int
    num_puts: int
    garbage_size: int
    num_entries: int
    address_size: int
    hash_size: int
    hash_capacity: int
    max_displacement: int
    entry_block_bits: int
    hash_collisions: int
    total_displacement: int
    major_version: int = INDEX_MAJOR_VERSION
    minor_version: int = INDEX_MINOR_VERSION

    @property
    def slot_size(self) -> int:
        """Bytes per slot: hash then address."""
        return self.hash_size + self.address_size

    @property
    def file_size(self) -> int:
        """Exact size of a well-formed index file with this header."""
        return INDEX_HEADER_SIZE + self.hash_capacity * self.slot_size

    def pack(self) -> bytes:
        """The header as 112 bytes."""
        return _INDEX_STRUCT.pack(
            INDEX_MAGIC, self.major_version, self.minor_version, self.file_identifier,
            self.hash_seed, self.data_end, self.max_key_len, self.max_value_len, self.num_puts,
            self.garbage_size, self.num_entries, self.address_size, self.hash_size,
            self.hash_capacity, self.max_displacement, self.entry_block_bits,
            self.hash_collisions, self.total_displacement)

    @classmethod
    def unpack(cls, buf: Buffer) -> IndexHeader:
        """Parse and validate the first 112 bytes of ``buf`` (IndexFormatError names the field)."""
        _check_magic_and_size(buf, INDEX_MAGIC, INDEX_HEADER_SIZE, IndexFormatError, "index",
                              ".spi", REBUILD_INDEX_HINT)
        (_magic, major, minor, file_identifier, seed, data_end, max_key_len, max_value_len,
         num_puts, garbage_size, num_entries, address_size, hash_size, capacity,
         max_displacement, bits, collisions, total_displacement) = _INDEX_STRUCT.unpack_from(buf)
        err = IndexFormatError
        _check(major == INDEX_MAJOR_VERSION, err, "major_version",
               f"is {major}; only version {INDEX_MAJOR_VERSION} indexes can be read")
        _check(minor <= INDEX_MINOR_VERSION, err, "minor_version",
               f"is {minor}; only minor versions 0 and 1 can be read")
        _check(data_end >= LOG_HEADER_SIZE, err, "data_end",
               f"is {data_end}, before the end of the log header")
        _check(hash_size in (4, 8), err, "hash_size", f"is {hash_size}; must be 4 or 8")
        _check(address_size in (4, 8), err, "address_size", f"is {address_size}; must be 4 or 8")
        _check(capacity >= 1, err, "hash_capacity", "is 0; an index has at least one slot")
        _check(num_entries <= num_puts and num_entries <= capacity, err, "num_entries",
               f"is {num_entries}, more than num_puts {num_puts} or hash_capacity {capacity}")
        _check(max_displacement <= num_entries, err, "max_displacement",
               f"is {max_displacement}, more than num_entries {num_entries}")
        _check(bits < 8 * address_size, err, "entry_block_bits",
               f"is {bits}, leaving no room for positions in {address_size}-byte addresses")
        _check(((data_end - 1) >> (8 * address_size - bits)) == 0, err, "address_size",
               f"is {address_size}, too small for positions up to data_end {data_end} "
               f"shifted by {bits} bits")
        _check(collisions <= num_entries, err, "hash_collisions",
               f"is {collisions}, more than num_entries {num_entries}")
        _check(total_displacement <= num_entries * max_displacement, err, "total_displacement",
               f"is {total_displacement}, more than num_entries * max_displacement")
        return cls(
            file_identifier=file_identifier, hash_seed=seed, data_end=data_end,
            max_key_len=max_key_len, max_value_len=max_value_len, num_puts=num_puts,
            garbage_size=garbage_size, num_entries=num_entries, address_size=address_size,
            hash_size=hash_size, hash_capacity=capacity, max_displacement=max_displacement,
            entry_block_bits=bits, hash_collisions=collisions,
            total_displacement=total_displacement, major_version=major, minor_version=minor)

    def check_log(self, log: LogHeader) -> None:
        """Raise unless this index can describe the log whose header is ``log``."""
        if self.file_identifier != log.file_identifier:
            raise FileIdentifierMismatch(
                f"index file_identifier {self.file_identifier:#010x} differs from the log's "
                f"{log.file_identifier:#010x}: the index was built from another log; "
                f"{REBUILD_INDEX_HINT}")
        err = IndexFormatError
        _check(self.data_end <= log.data_end, err, "data_end",
               f"is {self.data_end}, past the log's data_end {log.data_end}")
        _check(self.max_key_len <= log.max_key_len, err, "max_key_len",
               f"is {self.max_key_len}, more than the log's {log.max_key_len}")
        _check(self.max_value_len <= log.max_value_len, err, "max_value_len",
               f"is {self.max_value_len}, more than the log's {log.max_value_len}")
        _check(self.num_puts <= log.num_puts, err, "num_puts",
               f"is {self.num_puts}, more than the log's {log.num_puts}")
        _check(self.garbage_size <= log.put_size + log.delete_size, err, "garbage_size",
               f"is {self.garbage_size}, more than all entries of the log")



# ------------------------------------------------------------------------------------- paths

LOG_SUFFIX = ".spl"
INDEX_SUFFIX = ".spi"


def file_pair(path: str | os.PathLike[str]) -> tuple[str, str]:
    """``(log_path, index_path)`` for a base name or either file of a pair.

    A ``.spl`` or ``.spi`` suffix is swapped for the other one; any other name gets both
    suffixes appended (sparkey-java's convention).
    """
    path = os.fspath(path)
    if path.endswith((LOG_SUFFIX, INDEX_SUFFIX)):
        base = path[:-len(LOG_SUFFIX)]
    else:
        base = path
    return base + LOG_SUFFIX, base + INDEX_SUFFIX
