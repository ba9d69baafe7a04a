"""``Reader``: a Sparkey log + index pair as a read-only ``Mapping[bytes, bytes]`` (API layer).

File access goes through ``sparkey.log.LogReader`` and ``sparkey.index.HashIndex``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import cast

import numpy as np

from sparkey.checksums import verify_checksums
from sparkey.errors import ClosedError, IndexFormatError
from sparkey.format import (
    REBUILD_INDEX_HINT, BytesOrStr, EntryKind, IndexHeader, LogHeader, file_pair)
from sparkey.index import HashIndex
from sparkey.log import LogEntry, LogReader
from sparkey.lookup import LookupMapping

_LIVE_BATCH = 4096


class Reader(LookupMapping):
    """Read-only mapping over a Sparkey store: ``get``, ``[]``, ``in``, ``len``, iteration.

    Keys are ``bytes``; ``str`` keys are accepted and encoded as UTF-8. Values are returned as
    new ``bytes`` objects (never views of the mapped files). Iteration yields the live keys in
    log order (the order of their last PUT). ``len`` is O(1).

    Thread safety: lookups, ``get_many`` and iteration may run concurrently from many threads
    (each iterator belongs to one thread). ``close()`` releases both mappings; afterwards every
    call raises ClosedError. Entries appended to the log after opening are not visible.
    """

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = False) -> None:
        """Open the pair named by ``path``: a base name, or the ``.spl`` or ``.spi`` file.
        ``verify=True`` first checks both files against their checksum sidecar
        (``sparkey.checksums.verify_checksums``: O(store bytes), ChecksumError naming the
        damaged range, StaleChecksumsError for a store rewritten since, MissingChecksumsError
        without one)."""
        log_path, index_path = file_pair(path)
        if verify:
            verify_checksums(log_path, index_path)
        self._log = LogReader(log_path)
        try:
            self._index = HashIndex(index_path, self._log)
        except BaseException:
            self._log.close()
            raise
        self.path = index_path
        self._lookup = self._index.get
        if self._index.native is not None:  # one C call, which raises ClosedError once closed
            self.get = self._index.native.get  # type: ignore[method-assign]
            self._attach_lookup(self._index.native)

    # -- lookups

    def get_many(self, keys: Sequence[BytesOrStr] | np.ndarray,
                 default: bytes | None = None) -> list[bytes | None]:
        """Values for many keys at once, as a list aligned with ``keys`` (``default`` if absent).

        Hashing and slot probing run over the whole batch with numpy; for compressed logs each
        block is decompressed once per call. ``keys`` may also be a numpy ``S`` array.
        """
        self._check_open()
        values = self._index.get_many(keys)
        if default is not None:
            values = [default if value is None else value for value in values]
        return values

    def __len__(self) -> int:
        self._check_open()
        return self._index.header.num_entries

    # -- iteration

    def __iter__(self) -> Iterator[bytes]:
        return (entry.key for entry in self._live_entries())

    def _iter_items(self) -> Iterator[tuple[bytes, bytes]]:
        pairs = ((entry.key, entry.value) for entry in self._live_entries())
        return cast("Iterator[tuple[bytes, bytes]]", pairs)  # live entries are PUTs

    def _iter_values(self) -> Iterator[bytes]:
        values = (entry.value for entry in self._live_entries())
        return cast("Iterator[bytes]", values)  # live entries are PUTs

    def _live_entries(self) -> Iterator[LogEntry]:
        """Live PUT entries in log order: those whose address some slot holds.

        The log is read up to the index's ``data_end``. A damaged index shows as a slot address
        at or past it (raised before the first entry) or as a count of live entries other than
        ``num_entries`` (raised after the last): IndexFormatError either way, never a silently
        short iteration.
        """
        self._check_open()
        header = self._index.header
        live = self._index.live_addresses()
        bits = header.entry_block_bits
        if len(live) and int(live[-1]) >> bits >= header.data_end:
            raise IndexFormatError(
                f"index {self.path!r} has a slot addressing log offset {int(live[-1]) >> bits}, "
                f"at or past its data_end {header.data_end}: the index is damaged; "
                f"{REBUILD_INDEX_HINT}", "data_end")
        count = 0
        for batch in self._put_batches():
            for entry in _filter_live(batch, live, bits):
                if self._log.closed:
                    self._check_open()
                count += 1
                yield entry
        if count != header.num_entries:
            raise IndexFormatError(
                f"index {self.path!r} lists {header.num_entries} entries but {count} of its "
                f"slots address a PUT of the log: the index is damaged; "
                f"{REBUILD_INDEX_HINT}", "num_entries")

    def _put_batches(self) -> Iterator[list[LogEntry]]:
        """PUT entries of the indexed part of the log, in lists of up to _LIVE_BATCH."""
        batch = []
        try:
            for entry in self._log.entries(self._index.header.data_end):
                if entry.kind == EntryKind.PUT:
                    batch.append(entry)
                    if len(batch) == _LIVE_BATCH:
                        yield batch
                        batch = []
        except ValueError:
            self._check_open()  # the log was closed under the iterator
            raise
        yield batch

    def _check(self) -> None:
        """Assert the index invariants (see ``HashIndex._check``); for tests."""
        self._check_open()
        self._index._check()

    # -- headers and lifecycle

    @property
    def log_header(self) -> LogHeader:
        """The ``format.LogHeader`` of the log as of opening."""
        self._check_open()
        return self._log.header

    @property
    def index_header(self) -> IndexHeader:
        """The ``format.IndexHeader`` of the index."""
        self._check_open()
        return self._index.header

    def close(self) -> None:
        """Release both files. Idempotent."""
        self._lookup = self._closed_lookup
        self._index.close()
        self._log.close()

    @property
    def closed(self) -> bool:
        return self._log.closed

    def _closed_lookup(self, key: object) -> None:
        raise ClosedError("the reader is closed; open the store again with sparkey.open")

    def _check_open(self) -> None:
        if self._log.closed or self._index.closed:
            self._closed_lookup(None)

    def __repr__(self) -> str:
        if self.closed:
            return f"<sparkey.Reader {self.path!r} closed>"
        header = self._index.header
        return (f"<sparkey.Reader {self.path!r} entries={header.num_entries} "
                f"{self._log.header.compression_type.name} capacity={header.hash_capacity} "
                f"{'compiled' if self._index.compiled else 'pure-Python'}>")


def _filter_live(batch: list[LogEntry], live: np.ndarray, bits: int) -> list[LogEntry]:
    """The entries of ``batch`` whose address is in the sorted array ``live``."""
    if not batch:
        return []
    if bits:
        positions = [(entry.position << bits) | entry.entry_index for entry in batch]
    else:
        positions = [entry.position for entry in batch]
    addresses = np.array(positions, dtype=np.uint64)
    where = np.minimum(np.searchsorted(live, addresses), max(len(live) - 1, 0))
    is_live = (live[where] == addresses) if len(live) else np.zeros(len(batch), dtype=bool)
    return [entry for entry, keep in zip(batch, is_live.tolist()) if keep]


def open(path: str | os.PathLike[str], *, verify: bool = False) -> Reader:
    """Open a Sparkey store for reading: ``sparkey.open("data")`` reads data.spl + data.spi;
    ``verify=True`` checks them against their checksum sidecar first (see ``Reader``)."""
    return Reader(path, verify=verify)
