"""``LogWriter``: appends PUT and DELETE entries to a ``.spl`` log (IO layer).

Block splitting (compressed logs) follows the C library exactly, so that a log written here has
the block boundaries, entry indexes and header counters of a log written by libsparkey from the
same operations. With ``B`` the block size, ``used`` the bytes already in the current block and
``total`` the encoded entry size (header VLQs + key + value):

1. flush the current block first if the entry header does not fit in ``B - used``, or if the
   entry fits in a whole block (``total <= B``) but not in what is left of this one;
2. count the entry in the current block (its *entry index* is its rank among the entries that
   start there);
3. append header, key and value, flushing every time the block is full and bytes remain;
4. if step 3 flushed at least once, flush the tail block too, so the next entry starts a block.

Worked example, ``B = 16``: a 14-byte entry goes into an empty block (used 14); the next 14-byte
entry fits in a whole block but not in the 2 bytes left, so the first block is flushed and the
entry starts the second block. A 40-byte entry after the first one instead starts in the current
block (its 2-byte header fits in the 2 bytes left), fills it and the next two blocks, and its last
6 bytes go to a fourth block that is flushed at once (step 4).

sparkey-java splits differently (it moves an entry only if it is smaller than the data already in
the block); both layouts are readable by every reader.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from typing import Any

from sparkey.codec import Codec, codec_for
from sparkey.errors import ClosedError, LogFormatError
from sparkey.format import (
    LOG_HEADER_SIZE, MAX_ENTRY_PART_LEN, MIN_BLOCK_SIZE, BytesOrStr, Compression, LogHeader,
    delete_header, entry_bytes, put_header, vlq_encode)
from sparkey.log.bulk import (
    PARALLEL_THRESHOLD, BulkAppend, EntryItems, EntryStats, check_parallelism, entry_chunks)

WRITE_CHUNK_BYTES = 1 << 20
"""Pending output is written to the file once it reaches this size (and on flush/close)."""

_MAX_BLOCK_SIZE = 2**32 - 1


def random_u32() -> int:
    """A random 32-bit value, as C draws file identifiers and seeds from /dev/urandom."""
    return secrets.randbits(32)


class LogWriter:
    """Appends PUT and DELETE entries to a ``.spl`` log.

    One writer per log, used from one thread. The header on disk is rewritten on ``flush()`` and
    ``close()`` only, after the data it describes, so a crash or a failed write leaves the log as
    of the last flush. Keys and values are ``bytes``-like or ``str`` (stored as UTF-8).
    """

    def __init__(self, path: str | os.PathLike[str], compression: str | int = "none",
                 block_size: int = 4096, *, file_identifier: int | None = None,
                 fsync: bool = False, exclusive: bool = False) -> None:
        """Create a new log at ``path``, deleting any existing file first (as libsparkey does).

        ``exclusive=True`` instead raises ``FileExistsError`` if ``path`` exists (the file is
        created with ``O_EXCL``, so two writers never both create it). ``block_size`` is the
        largest uncompressed block of a compressed log (at least 10 bytes); it is ignored, and
        recorded as 0, for ``compression="none"``. ``file_identifier`` is random unless given.
        ``fsync=True`` syncs data and header to disk on every flush.
        """
        compression = Compression.parse(compression)
        if compression == Compression.NONE:
            block_size = 0
        elif (not isinstance(block_size, int) or isinstance(block_size, bool)
              or not MIN_BLOCK_SIZE <= block_size <= _MAX_BLOCK_SIZE):
            raise ValueError(f"block_size must be an int from {MIN_BLOCK_SIZE} to "
                             f"{_MAX_BLOCK_SIZE}, not {block_size!r}")
        if file_identifier is None:
            file_identifier = random_u32()
        elif not isinstance(file_identifier, int) or not 0 <= file_identifier < 2**32:
            raise ValueError(f"file_identifier must be an int in [0, 2**32), "
                             f"not {file_identifier!r}")
        header = LogHeader(file_identifier=file_identifier, compression_type=compression,
                           compression_block_size=block_size)
        path = os.fspath(path)
        if not exclusive:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.pwrite(fd, header.pack(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._start(path, fd, header, fsync)

    @classmethod
    def append(cls, path: str | os.PathLike[str], *, fsync: bool = False) -> LogWriter:
        """Open an existing log to add entries after its ``data_end``.

        Bytes past ``data_end`` (left by a writer that did not flush) are truncated away first;
        counters and the file identifier continue from the stored header.
        """
        log_path = os.fspath(path)
        fd = os.open(log_path, os.O_RDWR)
        try:
            header = LogHeader.unpack(os.pread(fd, LOG_HEADER_SIZE, 0))
            size = os.fstat(fd).st_size
            if header.data_end > size:
                raise LogFormatError(f"log {log_path!r} is truncated: data_end is "
                                     f"{header.data_end} but the file has {size} bytes",
                                     "data_end")
            os.ftruncate(fd, header.data_end)
        except BaseException:
            os.close(fd)
            raise
        writer = cls.__new__(cls)
        writer._start(log_path, fd, header, fsync)
        return writer

    def _start(self, path: str, fd: int, header: LogHeader, fsync: bool) -> None:
        self.path = path
        self._fd = fd
        self._fsync = fsync
        self._file_identifier = header.file_identifier
        self._compression = header.compression_type
        self._block_size = header.compression_block_size
        self._file_end = header.data_end
        self._pending = bytearray()
        self._num_puts = header.num_puts
        self._num_deletes = header.num_deletes
        self._max_key_len = header.max_key_len
        self._max_value_len = header.max_value_len
        self._put_size = header.put_size
        self._delete_size = header.delete_size
        self._max_entries_per_block = header.max_entries_per_block
        self._block = bytearray()
        self._block_entries = 0
        self._codec: Codec | None = (None if self._compression == Compression.NONE
                                     else codec_for(self._compression))

    # -- public API

    def put(self, key: BytesOrStr, value: BytesOrStr) -> None:
        """Append a PUT of ``key`` -> ``value``."""
        if key.__class__ is not bytes:
            key = entry_bytes(key, "key")
        if value.__class__ is not bytes:
            value = entry_bytes(value, "value")
        if self._fd < 0:
            raise ClosedError("put() on a closed LogWriter; open it again with LogWriter.append")
        key_len = len(key)
        value_len = len(value)
        if key_len < 0x7F and value_len < 0x80:
            size = key_len + value_len + 2
            if self._codec is None:
                pending = self._pending
                pending.append(key_len + 1)
                pending.append(value_len)
                pending += key
                pending += value
                if len(pending) >= WRITE_CHUNK_BYTES:
                    self._drain()
            else:
                self._append_to_blocks(bytes((key_len + 1, value_len)), key, value, size)
        else:
            if (key_len | value_len) > MAX_ENTRY_PART_LEN:
                entry_bytes(key if key_len > MAX_ENTRY_PART_LEN else value,
                            "key" if key_len > MAX_ENTRY_PART_LEN else "value")
            header = put_header(key_len, value_len)
            size = len(header) + key_len + value_len
            self._append_entry(header, key, value, size)
        self._num_puts += 1
        self._put_size += size
        if key_len > self._max_key_len:
            self._max_key_len = key_len
        if value_len > self._max_value_len:
            self._max_value_len = value_len

    def put_many(self, items: EntryItems, values: Any = None, *, parallelism: int = 1,
                 threshold: int = PARALLEL_THRESHOLD) -> None:
        """Append a PUT for each entry of ``items``, in order; the log is byte for byte the one
        ``put`` would write entry by entry (compressed: the same blocks, headers and bytes).

        ``put_many(keys, values)``: two columns (sequences of bytes-likes or str, numpy arrays
        of bytes, ``sparkey.packed.PackedBytes``, or lazy columns with ``pack(start, stop)``);
        ``put_many(items)``: a mapping or an iterable of ``(key, value)`` pairs (a lone tuple
        of two columns raises TypeError: it reads as two pairs, so pass two arguments). With
        ``parallelism`` > 1 and at least ``threshold`` entries, that many threads frame and
        compress chunks of the batch while the caller appends the results in order
        (``sparkey.log.bulk``); otherwise the same steps run in the calling thread. Unlike
        ``put``, entries are checked chunk by chunk: on an error (a bad key or value, or a
        failure in a worker) the blocks completed before the failing chunk are kept, nothing
        after them, the header is rewritten so the file is a valid log of what was kept, and the
        error propagates. Entries put before the call are kept whatever happens.
        """
        if self._fd < 0:
            raise ClosedError("put_many() on a closed LogWriter; open it again with "
                              "LogWriter.append")
        check_parallelism(parallelism, threshold)
        source, above_threshold = entry_chunks(items, values, threshold)
        bulk = BulkAppend(self._codec, self._block_size, self._block, self._block_entries)
        commits = bulk.commits(source, parallelism if above_threshold else 1)
        taken = False
        try:
            for commit in commits:
                if not taken:  # the first commit holds the open block, if there was one
                    self._block.clear()
                    self._block_entries = 0
                    taken = True
                self._commit(commit.data, commit.stats, commit.max_entries_per_block)
        except BaseException:
            commits.close()  # stops the workers before the header is rewritten
            with contextlib.suppress(OSError):  # the header on disk stays valid either way
                self.flush()
            raise
        tail = bulk.open_block
        assert tail is not None  # set once the commits are exhausted
        self._block[:] = tail.data
        self._block_entries = tail.started
        self._commit(b"", tail.stats, 0)

    def delete(self, key: BytesOrStr) -> None:
        """Append a DELETE of ``key``.

        A key longer than every key put so far (``max_key_len``) cannot be in the log, and is
        skipped without writing anything: sparkey-java cannot read logs holding such deletes.
        """
        if key.__class__ is not bytes:
            key = entry_bytes(key, "key")
        if self._fd < 0:
            raise ClosedError("delete() on a closed LogWriter; open it again with LogWriter.append")
        if len(key) > self._max_key_len:
            return
        header = delete_header(len(key))
        size = len(header) + len(key)
        self._append_entry(header, key, b"", size)
        self._num_deletes += 1
        self._delete_size += size

    def flush(self) -> None:
        """Close the current block, write pending data, then rewrite the header."""
        if self._fd < 0:
            raise ClosedError("flush() on a closed LogWriter")
        self._emit_block()
        self._drain()
        os.pwrite(self._fd, self.header.pack(), 0)
        if self._fsync:
            os.fsync(self._fd)

    def close(self) -> None:
        """Flush and close the file. Closing twice is allowed."""
        if self._fd < 0:
            return
        try:
            self.flush()
        finally:
            fd, self._fd = self._fd, -1
            os.close(fd)

    @property
    def closed(self) -> bool:
        return self._fd < 0

    @property
    def header(self) -> LogHeader:
        """The header describing everything written so far, excluding an unflushed block."""
        return LogHeader(
            file_identifier=self._file_identifier, compression_type=self._compression,
            compression_block_size=self._block_size, num_puts=self._num_puts,
            num_deletes=self._num_deletes, data_end=self._file_end + len(self._pending),
            max_key_len=self._max_key_len, max_value_len=self._max_value_len,
            delete_size=self._delete_size, put_size=self._put_size,
            max_entries_per_block=self._max_entries_per_block)

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._fd < 0 else "open"
        return (f"<sparkey.LogWriter {self.path!r} {state} {self._compression.name} "
                f"puts={self._num_puts} deletes={self._num_deletes}>")

    # -- internals

    def _append_entry(self, header: bytes, key: bytes, value: bytes, size: int) -> None:
        if self._codec is None:
            pending = self._pending
            pending += header
            pending += key
            pending += value
            if len(pending) >= WRITE_CHUNK_BYTES:
                self._drain()
        else:
            self._append_to_blocks(header, key, value, size)

    def _append_to_blocks(self, header: bytes, key: bytes, value: bytes, total: int) -> None:
        """Add one entry to the current block following the C rules (module docstring)."""
        block = self._block
        block_size = self._block_size
        room = block_size - len(block)
        if room < len(header) or room < total <= block_size:
            self._emit_block()
            room = block_size
        self._block_entries += 1
        if total <= room:
            block += header
            block += key
            block += value
            return
        data = memoryview(b"".join((header, key, value)))
        done = 0
        flushed = False
        while done < total:
            room = block_size - len(block)
            if room == 0:
                self._emit_block()
                flushed = True
                room = block_size
            take = min(room, total - done)
            block += data[done:done + take]
            done += take
        if flushed and block:
            self._emit_block()

    def _emit_block(self) -> None:
        """Compress the current block (if any) into pending output as ``VLQ(len) payload``."""
        block = self._block
        if not block:
            return
        assert self._codec is not None  # only compressed logs have blocks
        payload = self._codec.compress(block)
        pending = self._pending
        pending += vlq_encode(len(payload))
        pending += payload
        if self._block_entries > self._max_entries_per_block:
            self._max_entries_per_block = self._block_entries
        self._block_entries = 0
        block.clear()
        if len(pending) >= WRITE_CHUNK_BYTES:
            self._drain()

    def _commit(self, data: bytes | memoryview, stats: EntryStats,
                max_entries_per_block: int) -> None:
        """Append encoded output (whole entries or blocks) and count the entries it holds.

        The counters change only once the data is written or pending, so a failed write
        leaves them describing what the next flush will write.
        """
        if len(data) >= WRITE_CHUNK_BYTES:
            self._drain()
            self._write_at_end(data)
        else:
            self._pending += memoryview(data)
        self._num_puts += stats.puts
        self._put_size += stats.put_size
        self._max_key_len = max(self._max_key_len, stats.max_key_len)
        self._max_value_len = max(self._max_value_len, stats.max_value_len)
        self._max_entries_per_block = max(self._max_entries_per_block, max_entries_per_block)
        if len(self._pending) >= WRITE_CHUNK_BYTES:
            self._drain()

    def _drain(self) -> None:
        """Write pending output at the end of the file (past the header's data_end until flush)."""
        if self._pending:
            self._write_at_end(self._pending)
            self._pending.clear()

    def _write_at_end(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data).cast("B")
        written = 0
        while written < len(view):
            written += os.pwrite(self._fd, view[written:], self._file_end + written)
        view.release()
        self._file_end += written
