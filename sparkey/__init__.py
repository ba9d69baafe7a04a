"""sparkey: a Sparkey store for Python, byte-compatible with Spotify's C library and sparkey-java.

A store is a log ``<base>.spl`` of PUT/DELETE entries plus a hash index ``<base>.spi``::

    with sparkey.Writer("data", compression="zstd") as writer:
        writer.put(b"key", b"value")
    with sparkey.open("data") as reader:
        reader[b"key"]

Modules, bottom up: ``errors``; the pure layer ``format`` (byte layouts), ``murmur``, ``codec``,
``table``, ``robinhood``, ``canonical``, ``native`` (which of the compiled core and the
Python reference runs); the file layer, the only code that opens Sparkey files:
the ``log`` and ``index`` packages and ``checksums`` (the optional checksum sidecar); the API ``reader`` and ``writer``; the command line ``cli``.
``sparkey.compiled`` says whether the compiled core ``sparkey._native`` runs (False: the Python
reference, chosen by ``OFFHEAP_PURE_PYTHON=1`` or because the extension was not built).
"""

from sparkey.errors import (
    ChecksumError, ClosedError, EntrySizeError, EntryTypeError, FileIdentifierMismatch,
    IndexFormatError, LogFormatError, MissingChecksumsError, SparkeyError, StaleChecksumsError,
    StoreExistsError)
from sparkey.format import Compression, EntryKind, IndexHeader, LogHeader
from sparkey.checksums import verify_checksums, write_checksums
from sparkey.index import HashIndex, write_index
from sparkey.log import LogEntry, LogReader, LogWriter
from sparkey.native import compiled
from sparkey.reader import Reader, open
from sparkey.sharded import open_sharded
from sparkey.writer import Writer

__all__ = [
    "ChecksumError", "ClosedError", "Compression", "EntryKind", "EntrySizeError",
    "EntryTypeError", "FileIdentifierMismatch", "HashIndex", "IndexFormatError", "IndexHeader",
    "LogEntry", "LogFormatError", "LogHeader", "LogReader", "LogWriter", "MissingChecksumsError",
    "Reader", "SparkeyError", "StaleChecksumsError", "StoreExistsError", "Writer",
    "compiled", "open", "open_sharded", "verify_checksums", "write_checksums", "write_index",
]
