"""Applying a commit that a writer left in ``PATH-wal`` (layer 3, private to the arena).

A commit is durable once its record is synced to the log (:mod:`offheap.arena.wal`); copying it
into the file comes after. A writer that dies in between leaves the record behind, and whoever
opens the file next applies it before reading anything: a writer on open, a reader on its
behalf when no writer is alive (it reopens the file for writing to do so). While the copy runs
the header is flagged "applying" (:func:`mark_applying`), so a reader that finds the flag knows
a copy was cut short without reading the log.

A record applies only to the file whose id it names, at the generation it starts from or the
one it leads to (a copy cut short may have written the new header already): a leftover log of a
file that a compaction replaced never touches the new one. Every function here works on a file
descriptor and a path; none keeps state.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os

from offheap.arena import locks, wal
from offheap.arena.format import HEADER_BYTES, encode_header, parse_header
from offheap.arena.holes import zero_range
from offheap.errors import CorruptionError, OffheapError, RecoveryPendingError, TransactionError


def log_path(path: str) -> str:
    """The write-ahead log of the arena file ``path``."""
    return path + "-wal"


def mark_applying(fd: int, path: str) -> None:
    """Flag the header "applying" before a commit is copied into the file (checkpoint lock
    held exclusive), so that a reader who gets the lock after the copier died mid-way knows
    without reading the log; the header the copy writes last clears the flag. A header too
    torn to parse is left alone: no reader can read it, and the log rewrites it."""
    try:
        header = parse_header(os.pread(fd, HEADER_BYTES, 0), path)
    except CorruptionError:
        return
    if not header.applying:
        wal.pwrite_all(fd, encode_header(dataclasses.replace(header, applying=True)), 0)


def half_applied_error(fd: int, path: str) -> OffheapError:
    """The error for a file flagged "applying" that recovery could not repair: the writer that
    was copying is still alive (TransactionError), or the log is gone (CorruptionError)."""
    if locks.is_held(fd, locks.WRITER, exclusive=False):
        return TransactionError(
            f"the writer of {path!r} failed while copying a commit into the file; it "
            f"can be read again once that writer is closed and the file opened for writing")
    return CorruptionError(
        f"{path!r} was left half-way through copying a commit into it, and the log "
        f"{log_path(path)!r} that holds the commit is gone or damaged: the file may be "
        f"half-written. Copy out what is there with offheap.salvage({path!r}, new_path)")


def record_applies(fd: int, path: str, record: wal.Record) -> bool:
    """A record applies when it names this file's id and the file is at its base
    generation, or at its new one (the copy into the file may have been cut short), or when
    the header is too torn to read and the record rewrites it: only a checkpoint writes the
    header, right after syncing its own record, so such a log is the file's own."""
    try:
        header = parse_header(os.pread(fd, HEADER_BYTES, 0), path)
    except CorruptionError:
        return any(e.offset == 0 and e.kind == wal.BYTES and e.length >= HEADER_BYTES
                   for e in record.entries)
    return (header.file_id == record.file_id
            and header.generation in (record.base_generation, record.new_generation))


def apply_pending_commit(fd: int, path: str) -> None:
    """Apply a complete commit record found in ``PATH-wal`` to the file and remove the log;
    a torn or stale one is removed unapplied. ``fd`` is a writer's descriptor of ``path``.

    The copy runs under the checkpoint lock (exclusive) and ends with the file at the
    record's end (cut, or its tail zeroed while readers may map it) and an fsync.
    """
    try:
        log_fd = os.open(log_path(path), os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        record = wal.read_record(log_fd)
        if record is not None and record_applies(fd, path, record):
            locks.lock(fd, locks.CHECKPOINT, exclusive=True)
            try:
                mark_applying(fd, path)
                wal.apply_record(log_fd, fd, record)
                size = os.fstat(fd).st_size
                if size < record.end:
                    os.ftruncate(fd, record.end)
                elif size > record.end:
                    if locks.is_held(fd, locks.READERS, exclusive=True):
                        zero_range(fd, record.end, size - record.end)
                    else:
                        os.ftruncate(fd, record.end)
                os.fsync(fd)
            finally:
                locks.unlock(fd, locks.CHECKPOINT)
        os.ftruncate(log_fd, 0)
    finally:
        os.close(log_fd)
    with contextlib.suppress(OSError):
        os.unlink(log_path(path))


def commit_left_pending(fd: int, path: str) -> bool:
    """Whether ``PATH-wal`` holds a commit for this file that no living writer will apply."""
    if locks.is_held(fd, locks.WRITER, exclusive=False):
        return False
    try:
        log_fd = os.open(log_path(path), os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        record = wal.read_record(log_fd)
        return record is not None and record_applies(fd, path, record)
    finally:
        os.close(log_fd)


def apply_for_reader(path: str) -> None:
    """Apply a pending commit on a reader's behalf, as a writer would on open: through a
    descriptor of its own, and only if no writer holds the file meanwhile.

    Raises :class:`RecoveryPendingError` when this process may not write the file.
    """
    try:
        fd = os.open(path, os.O_RDWR)
    except PermissionError:
        raise RecoveryPendingError(
            f"{path!r} has a committed transaction in {log_path(path)!r} that is not "
            f"applied yet, and this process may not write the file: open it once with write "
            f"access to apply it") from None
    try:
        if locks.try_lock(fd, locks.WRITER, exclusive=True):
            apply_pending_commit(fd, path)
    finally:
        os.close(fd)
