"""``Writer``: write a Sparkey store, log then index, in one object (API layer)."""

from __future__ import annotations

import errno
import os
from types import TracebackType
from typing import Any

from sparkey.errors import StoreExistsError
from sparkey.format import BytesOrStr, Compression, LogHeader, file_pair
from sparkey.index import check_index_options, write_index
from sparkey.log import LogWriter, read_log_header
from sparkey.log.bulk import PARALLEL_THRESHOLD, EntryItems


WRITE_MODES = ("x", "w", "a")
"""``Writer`` modes, as ``open()`` names them: exclusive creation, truncate, append."""


class Writer:
    """Puts and deletes into ``<base>.spl``; ``close()`` then builds ``<base>.spi``.

    ``mode`` says what happens to a store already at ``path``, as for ``open()``:

    - ``"x"`` (the default): refuse it, raising ``StoreExistsError`` (a ``FileExistsError``) if
      the log or the index exists; the log is created with ``O_EXCL``.
    - ``"w"``: replace it (the log is deleted first, as libsparkey does).
    - ``"a"``: continue its log after ``data_end`` (a missing log is created); ``close()``
      rebuilds the index over the whole log. ``compression``, ``block_size`` and
      ``file_identifier`` are the log's own; given and different, they raise ``ValueError``.

    ``compression`` defaults to ``"none"`` and ``block_size`` to 4096 for a new log.
    ``index_options`` are those of ``sparkey.write_index`` (``hash_size``, ``hash_seed``,
    ``rules``, ``sparsity``, ``method``, ``max_memory_bytes``) and are checked here, before
    anything is written. Used as a context manager, the index is built on a normal exit only:
    if the block raises, the log is flushed and closed (it stays a valid log that mode ``"a"``
    can continue) but no index is written. ``checksums=True`` writes the checksum sidecar
    ``<base>.spc`` after the index (see ``sparkey.write_index``). ``fsync=True`` syncs the log
    on every flush and the index and sidecar (with their directory) as ``close()`` writes them,
    so a store a closed writer leaves survives a power loss. One writer per store and thread.
    """

    def __init__(self, path: str | os.PathLike[str], compression: str | int | None = None,
                 block_size: int | None = None, *, mode: str = "x",
                 file_identifier: int | None = None, fsync: bool = False,
                 checksums: bool = False, **index_options: Any) -> None:
        """Open the store at ``path`` (base name or either file) for writing in ``mode``."""
        if mode not in WRITE_MODES:
            raise ValueError(f"mode must be one of {', '.join(map(repr, WRITE_MODES))}, "
                             f"not {mode!r}")
        log_path, self._index_path = file_pair(path)
        self._index_options = check_index_options(**index_options)
        self._checksums = checksums
        self._fsync = fsync
        if mode == "a" and os.path.exists(log_path):
            _check_matches_log(read_log_header(log_path), compression, block_size,
                               file_identifier)
            self._log = LogWriter.append(log_path, fsync=fsync)
            return
        if mode == "x" and os.path.exists(self._index_path):
            raise _store_exists(self._index_path)
        try:
            self._log = LogWriter(log_path, "none" if compression is None else compression,
                                  4096 if block_size is None else block_size,
                                  file_identifier=file_identifier, fsync=fsync,
                                  exclusive=mode == "x")
        except FileExistsError:
            raise _store_exists(log_path) from None

    @property
    def log_path(self) -> str:
        return self._log.path

    @property
    def index_path(self) -> str:
        return self._index_path

    def put(self, key: BytesOrStr, value: BytesOrStr) -> None:
        """Store ``key`` -> ``value`` (bytes-like or str)."""
        self._log.put(key, value)

    def put_many(self, items: EntryItems, values: Any = None, *, parallelism: int = 1,
                 threshold: int = PARALLEL_THRESHOLD) -> None:
        """Store every entry in order, as ``put`` would one by one.

        ``put_many(keys, values)`` takes two columns; ``put_many(items)`` a mapping or an
        iterable of ``(key, value)`` pairs (not a tuple of two columns, which reads as two
        pairs: TypeError). ``parallelism`` threads frame and compress batches of at least ``threshold``
        entries. Error handling and the column types: ``LogWriter.put_many``; mechanism and
        figures: docs/parallel-writes.md.
        """
        self._log.put_many(items, values, parallelism=parallelism, threshold=threshold)

    def delete(self, key: BytesOrStr) -> None:
        """Remove ``key`` (a no-op for keys never stored)."""
        self._log.delete(key)

    def flush(self) -> None:
        """Make everything written so far durable in the log (the index waits for close)."""
        self._log.flush()

    def close(self) -> None:
        """Close the log and write the index. Closing twice is allowed."""
        if self._log.closed:
            return
        self._log.close()
        write_index(self._index_path, self._log.path, checksums=self._checksums,
                    fsync=self._fsync, **self._index_options)

    @property
    def closed(self) -> bool:
        return self._log.closed

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if exc_type is None:
            self.close()
        else:
            self._log.close()

    def __repr__(self) -> str:
        return f"<sparkey.Writer {self._index_path!r} log={self._log!r}>"


def _store_exists(path: str) -> StoreExistsError:
    """The error of mode ``"x"`` finding ``path``; ``filename`` is set as ``open()`` sets it."""
    return StoreExistsError(errno.EEXIST, "the store exists; pass mode='w' to replace it or "
                            "mode='a' to add to it", path)


def _check_matches_log(header: LogHeader, compression: str | int | None,
                       block_size: int | None, file_identifier: int | None) -> None:
    """Raise ``ValueError`` if an option given for appending differs from the log's header."""
    stored_compression = header.compression_type
    given = [("compression", None if compression is None else Compression.parse(compression),
              stored_compression),
             ("block_size", block_size, header.compression_block_size),
             ("file_identifier", file_identifier, header.file_identifier)]
    for name, value, stored in given:
        if name == "block_size" and stored_compression == Compression.NONE:
            continue  # an uncompressed log has no block size (recorded as 0)
        if value is not None and value != stored:
            raise ValueError(f"mode='a' continues the log as it is: its {name} is "
                             f"{stored!r}, not {value!r}")
