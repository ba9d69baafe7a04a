"""``Writer``: write a Sparkey store, log then index, in one object (API layer)."""

from __future__ import annotations

import os
from types import TracebackType
from typing import Any

from sparkey.format import BytesOrStr, file_pair
from sparkey.index import check_index_options, write_index
from sparkey.log import LogWriter
from sparkey.log.bulk import PARALLEL_THRESHOLD, EntryItems


class Writer:
    """Puts and deletes into ``<base>.spl``; ``close()`` then builds ``<base>.spi``.

    ``index_options`` are those of ``sparkey.write_index`` (``hash_size``, ``hash_seed``,
    ``rules``, ``sparsity``, ``method``, ``max_memory_bytes``) and are checked here, before
    anything is written. Used as a context manager, the index is built on a normal exit only:
    if the block raises, the log is flushed and closed (it stays a valid log that
    ``Writer.append`` can continue) but no index is written. One writer per store and thread.
    """

    def __init__(self, path: str | os.PathLike[str], compression: str | int = "none",
                 block_size: int = 4096, *, file_identifier: int | None = None,
                 fsync: bool = False, **index_options: Any) -> None:
        """Create the store at ``path`` (base name or either file), replacing an existing log."""
        log_path, self._index_path = file_pair(path)
        self._index_options = check_index_options(**index_options)
        self._log = LogWriter(log_path, compression, block_size, file_identifier=file_identifier,
                              fsync=fsync)

    @classmethod
    def append(cls, path: str | os.PathLike[str], *, fsync: bool = False,
               **index_options: Any) -> Writer:
        """Continue an existing store's log; ``close()`` rebuilds the index over all of it."""
        writer = cls.__new__(cls)
        log_path, writer._index_path = file_pair(path)
        writer._index_options = check_index_options(**index_options)
        writer._log = LogWriter.append(log_path, fsync=fsync)
        return writer

    @property
    def log_path(self) -> str:
        return self._log.path

    @property
    def index_path(self) -> str:
        return self._index_path

    def put(self, key: BytesOrStr, value: BytesOrStr) -> None:
        """Store ``key`` -> ``value`` (bytes-like or str)."""
        self._log.put(key, value)

    def put_many(self, items: EntryItems, *, parallelism: int = 1,
                 threshold: int = PARALLEL_THRESHOLD) -> None:
        """Store every ``(key, value)`` of ``items`` in order, as ``put`` would one by one.

        ``items`` is a tuple ``(keys, values)`` of two columns, a mapping or an iterable of
        pairs; ``parallelism`` threads frame and compress batches of at least ``threshold``
        entries. Error handling and the column types: ``LogWriter.put_many``; mechanism and
        figures: docs/parallel-writes.md.
        """
        self._log.put_many(items, parallelism=parallelism, threshold=threshold)

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
        write_index(self._index_path, self._log.path, **self._index_options)

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
