"""Sparkey log files (IO layer): ``LogWriter`` appends entries, ``LogReader`` reads them back.

Only this package and ``sparkey.index`` open Sparkey files. The byte layout is specified in
``sparkey.format``; block codecs live in ``sparkey.codec``. Modules: ``writer`` (LogWriter and
libsparkey's block-splitting rules), ``reader`` (LogReader, one code path per operation),
``body`` (the two body formats, raw and compressed, as blocks), ``blocks`` (the entry stream
across block boundaries), ``entries`` (LogEntry, EntryTable), and for bulk writes ``bulk`` and
``framing``.
"""

from sparkey.log.entries import EntryTable, LogEntry
from sparkey.log.reader import SCAN_CHUNK_ENTRIES, LogReader, read_log_header
from sparkey.log.writer import LogWriter, random_u32

__all__ = ["SCAN_CHUNK_ENTRIES", "EntryTable", "LogEntry", "LogReader", "LogWriter",
           "random_u32", "read_log_header"]
