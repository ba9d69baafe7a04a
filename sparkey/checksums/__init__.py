"""Checksum sidecars of Sparkey stores (IO layer, beside ``sparkey.log`` and ``sparkey.index``).

The Sparkey format has no checksums: damage that leaves its structure intact reads back wrong
values without an error, in libsparkey as here. A sidecar ``<base>.spc`` that the other
implementations ignore holds a crc32 of every chunk of the log and the index, with what tells
those files from later versions of them. Modules: ``format`` (the layout; pure) and ``file``
(writing one, verifying a store against it).
"""

from sparkey.checksums.file import checksum_path, verify_checksums, write_checksums
from sparkey.checksums.format import CHUNK_BYTES, Sidecar

__all__ = ["CHUNK_BYTES", "Sidecar", "checksum_path", "verify_checksums", "write_checksums"]
