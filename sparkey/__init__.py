"""sparkey: a pure-Python Sparkey store, byte-compatible with Spotify's C library and sparkey-java.

A store is a log ``<base>.spl`` of PUT/DELETE entries plus a hash index ``<base>.spi``::

    with sparkey.Writer("data", compression="zstd") as writer:
        writer.put(b"key", b"value")
    with sparkey.open("data") as reader:
        reader[b"key"]

Modules, bottom up: ``errors``; the pure layer ``format`` (byte layouts), ``murmur``, ``codec``,
``table``, ``robinhood``, ``canonical``; the file layer, the only code that opens Sparkey files:
the ``log`` and ``index`` packages; the API ``reader`` and ``writer``; the command line ``cli``.
"""

from sparkey.errors import (
    ClosedError, EntrySizeError, EntryTypeError, FileIdentifierMismatch, IndexFormatError,
    LogFormatError, SparkeyError)
from sparkey.format import Compression, EntryKind, IndexHeader, LogHeader
from sparkey.index import HashIndex, write_index
from sparkey.log import LogEntry, LogReader, LogWriter
from sparkey.reader import Reader, open
from sparkey.sharded import open_sharded
from sparkey.writer import Writer

__all__ = [
    "ClosedError", "Compression", "EntryKind", "EntrySizeError", "EntryTypeError",
    "FileIdentifierMismatch", "HashIndex", "IndexFormatError", "IndexHeader", "LogEntry",
    "LogFormatError", "LogHeader", "LogReader", "LogWriter", "Reader", "SparkeyError", "Writer",
    "open", "open_sharded", "write_index",
]
