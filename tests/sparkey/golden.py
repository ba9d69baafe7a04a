"""The golden Sparkey vectors in tests/sparkey/vectors, written by libsparkey and sparkey-java.

Each vector directory holds data.spl, data.spi, manifest.json and the operations that produced
them (ops.txt: ``P <hexkey> <hexvalue>``, ``D <hexkey>``, ``F`` for flush, ``-`` for empty).
"""

import hashlib
import json
import pathlib
import struct

import numpy as np

import sparkey
from sparkey.codec import codec_for
from sparkey.format import (
    INDEX_HEADER_SIZE, LOG_HEADER_SIZE, Compression, IndexHeader, LogHeader, vlq_decode)

VECTORS_DIR = pathlib.Path(__file__).parent / "vectors"
MURMUR_VECTORS = VECTORS_DIR / "murmur3_vectors.json"


class Vector:
    """One golden vector directory."""

    def __init__(self, directory):
        self.directory = directory
        self.name = directory.name
        self.manifest = json.loads((directory / "manifest.json").read_text())
        self.log_path = directory / "data.spl"
        self.index_path = directory / "data.spi"

    def __repr__(self):
        return self.name

    @property
    def producer(self):
        """``"java"`` or ``"c"``: whose insertion rules built data.spi."""
        return "java" if "sparkey-java" in self.manifest["producer"] else "c"

    @property
    def requested_hash_size(self):
        if self.producer == "c":
            return self.manifest["requested_hash_size"] or None
        return {"HASH_32_BITS": 4, "HASH_64_BITS": 8}.get(self.manifest["requested_hash_type"])

    @property
    def hash_seed(self):
        return self.manifest["hash_header"]["hash_seed"]

    @property
    def log_header(self):
        return self.manifest["log_header"]

    @property
    def compression(self):
        return Compression(self.log_header["compression_type"])

    def operations(self):
        """``(op, key, value)`` tuples from ops.txt; value is None for D and F."""
        ops = []
        for line in (self.directory / "ops.txt").read_text().splitlines():
            fields = line.split()
            if not fields:
                continue
            data = [b"" if field == "-" else bytes.fromhex(field) for field in fields[1:]]
            ops.append((fields[0], *data, *[None] * (2 - len(data))))
        return ops

    def expected(self):
        """``{key: value}`` of the live entries, or None when the manifest gives only a digest."""
        if "expected" not in self.manifest:
            return None
        return {decode(item["key"]): decode(item["value"]) for item in self.manifest["expected"]}

    def absent_keys(self):
        return [decode(item) for item in self.manifest["absent_keys"]]

    def live_order(self):
        keys = self.manifest.get("live_iteration_order_keys")
        return None if keys is None else [decode(item) for item in keys]


def decode(item):
    """A manifest key/value: ``{"utf8": ...}`` or ``{"hex": ...}``."""
    return bytes.fromhex(item["hex"]) if "hex" in item else item["utf8"].encode("utf-8")


def all_vectors():
    return [Vector(path) for path in sorted(VECTORS_DIR.iterdir()) if path.is_dir()]


def items_digest(items):
    """The manifests' expected_sha256: over sorted keys, u64le(len(k)) k u64le(len(v)) v."""
    digest = hashlib.sha256()
    for key, value in sorted(items):
        digest.update(struct.pack("<Q", len(key)) + key + struct.pack("<Q", len(value)) + value)
    return digest.hexdigest()


def decompressed_blocks(path):
    """``(block_offset, uncompressed bytes)`` of every block of a compressed log file.

    Parsed directly from the bytes so that log comparisons do not depend on sparkey.log.
    """
    data = pathlib.Path(path).read_bytes()
    header = LogHeader.unpack(data)
    codec = codec_for(header.compression_type)
    blocks = []
    position = LOG_HEADER_SIZE
    while position < header.data_end:
        length, start = vlq_decode(data, position, header.data_end)
        blocks.append((position, codec.decompress(data[start:start + length],
                                                  header.compression_block_size)))
        position = start + length
    return blocks


def slot_table(path):
    """``(hashes, addresses)`` of an index file as uint64 arrays, parsed from the bytes."""
    data = pathlib.Path(path).read_bytes()
    header = IndexHeader.unpack(data)
    slots = np.frombuffer(data, offset=INDEX_HEADER_SIZE, dtype=np.dtype(
        [("hash", f"<u{header.hash_size}"), ("address", f"<u{header.address_size}")]))
    return header, slots["hash"].astype(np.uint64), slots["address"].astype(np.uint64)


def murmur_vectors():
    return json.loads(MURMUR_VECTORS.read_text())["vectors"]


def replay(vector, log_path):
    """Write the vector's operations with sparkey.LogWriter, with its file identifier."""
    header = vector.log_header
    with sparkey.LogWriter(log_path, vector.compression,
                           block_size=header["compression_block_size"] or 4096,
                           file_identifier=header["file_identifier"]) as writer:
        for op, key, value in vector.operations():
            if op == "P":
                writer.put(key, value)
            elif op == "D":
                writer.delete(key)
            else:
                writer.flush()
