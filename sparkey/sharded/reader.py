"""``ShardedReader``: one read-only Mapping over every shard of a store (API layer).

Opening reads ``manifest.json``, opens each shard with ``sparkey.open`` and checks it against the
manifest: file identifier (log and index carry the same one, and ``sparkey.Reader`` already
checks that they agree), live entries and the sizes of both files (as their headers state them;
opening fails if a file is shorter). A missing file raises MissingShardError, any difference
ShardMismatchError, each naming the shard and its file. Every file is read where it lies in the
store directory: a symbolic link resolving outside it is refused (ManifestError for the
manifest, ShardMismatchError for a shard) before anything is read through it, so no error
message ever quotes bytes of a file outside the store.

A store replaced while it is being opened (``overwrite=True`` publishes by renaming) can show a
manifest from one build and shards from the next. The checks catch that; the reader then reads
the manifest again and, if it changed, opens the new store (up to OPEN_ATTEMPTS times), so an
open either returns one consistent store or raises.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from sparkey.errors import ClosedError, SparkeyError
from sparkey.format import BytesOrStr, entry_bytes, key_list
from sparkey.lookup import LookupMapping
from sparkey.reader import Reader
from sparkey.sharded.errors import (
    ManifestError, ManifestNotFoundError, MissingShardError, ShardMismatchError)
from sparkey.sharded.manifest import MANIFEST_NAME, Manifest, ShardInfo
from sparkey.sharded.routing import routing_hash, shard_of, shards_of

OPEN_ATTEMPTS = 3


class ShardedReader(LookupMapping):
    """Read-only ``Mapping[bytes, bytes]`` over a sharded store, routing each key to its shard.

    ``get``, ``[]``, ``in`` and ``get_many`` cost one routing hash more than a single
    ``sparkey.Reader``. ``len`` is O(1) (the manifest's total, checked against the shards).
    Iteration, ``keys()``, ``values()`` and ``items()`` go shard by shard in shard order, each
    shard in its log order. Thread safety, value ownership and closing are those of
    ``sparkey.Reader``: lookups may run from many threads, values are new ``bytes`` objects, and
    after ``close()`` every call raises ClosedError. ``shards`` holds the shard Readers, owned by
    this object and closed with it.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Open the store directory ``path`` (see the module docstring for the checks)."""
        self.path = os.fspath(path)
        self.manifest, self.shards = _open_consistent(self.path)
        self._num_shards = self.manifest.num_shards
        self._seed = self.manifest.routing_seed
        self._lookups = [reader.get for reader in self.shards]
        self._lookup = self._routed_lookup()

    def _routed_lookup(self) -> Callable[[Any], bytes | None]:
        """``lookup(key)``: the value of ``key`` or None.

        A closure that routes inline (``routing.shard_of`` without its call): it runs for every
        lookup, and cell variables cost less than attribute loads and calls.
        """
        lookups, num_shards, seed = self._lookups, self._num_shards, self._seed

        def lookup(key: Any) -> bytes | None:  # any object: entry_bytes converts or rejects it
            if key.__class__ is not bytes:
                key = entry_bytes(key, "key")
            return lookups[routing_hash(key, seed) % num_shards](key)
        return lookup

    # -- lookups

    def shard_of(self, key: BytesOrStr) -> int:
        """Number of the shard that holds (or would hold) ``key``."""
        return shard_of(key, self._num_shards, self._seed)

    def get_many(self, keys: Sequence[BytesOrStr] | np.ndarray,
                 default: bytes | None = None) -> list[bytes | None]:
        """Values for many keys, as a list aligned with ``keys`` (``default`` where absent).

        Keys are routed in one pass, grouped by shard, and each group is one ``get_many`` call
        on its shard (bulk hashing and probing there). ``keys`` may be a numpy ``S`` array, as
        for ``sparkey.Reader.get_many``.
        """
        self._check_open()
        select: Callable[[np.ndarray], Sequence[bytes] | np.ndarray]
        if isinstance(keys, np.ndarray):
            shard_numbers = shards_of(keys, self._num_shards, self._seed)
            select = keys.__getitem__
        else:
            key_bytes = key_list(keys)
            shard_numbers = shards_of(key_bytes, self._num_shards, self._seed)
            key_array = _object_array(key_bytes)

            def select(positions: np.ndarray) -> list[bytes]:
                return key_array[positions].tolist()
        order = np.argsort(shard_numbers, kind="stable")
        bounds = np.searchsorted(shard_numbers[order], np.arange(self._num_shards + 1))
        values = np.full(len(shard_numbers), default, dtype=object)
        for shard, reader in enumerate(self.shards):
            positions = order[bounds[shard]:bounds[shard + 1]]
            if len(positions):
                values[positions] = _object_array(reader.get_many(select(positions), default))
        return values.tolist()

    def __len__(self) -> int:
        self._check_open()
        return self.manifest.num_entries

    # -- iteration

    def __iter__(self) -> Iterator[bytes]:
        self._check_open()
        return itertools.chain.from_iterable(self.shards)

    def _iter_items(self) -> Iterator[tuple[bytes, bytes]]:
        """Shard by shard, each read straight from its log."""
        self._check_open()
        return itertools.chain.from_iterable(reader.items() for reader in self.shards)

    def _iter_values(self) -> Iterator[bytes]:
        self._check_open()
        return itertools.chain.from_iterable(reader.values() for reader in self.shards)

    def _check(self) -> None:
        """Assert every shard's invariants and that each key lives in its routed shard (O(n))."""
        self._check_open()
        assert len(self.shards) == self._num_shards
        for shard, reader in enumerate(self.shards):
            reader._check()
            assert len(reader) == self.manifest.shards[shard].num_entries
            keys = list(reader)
            assert (shards_of(keys, self._num_shards, self._seed) == shard).all()

    # -- lifecycle

    def close(self) -> None:
        """Close every shard. Idempotent."""
        self._lookup = self._closed_lookup
        for reader in self.shards:
            reader.close()

    @property
    def closed(self) -> bool:
        return self.shards[0].closed

    def _closed_lookup(self, key: object) -> None:
        raise ClosedError("the sharded reader is closed; open the store again with "
                          "sparkey.open_sharded")

    def _check_open(self) -> None:
        if self.closed:
            self._closed_lookup(None)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"entries={self.manifest.num_entries}"
        return f"<sparkey.ShardedReader {self.path!r} shards={self._num_shards} {state}>"


def _object_array(items: Sequence[object]) -> np.ndarray:
    """A 1-d object array holding the elements of the list ``items`` (never a 2-d array)."""
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array


def open_sharded(path: str | os.PathLike[str]) -> ShardedReader:
    """Open the sharded store directory ``path`` for reading: a ShardedReader."""
    return ShardedReader(path)


def _path_in_store(directory: str, name: str, error: type[SparkeyError], where: str) -> str:
    """``directory/name``, unless it is a link resolving outside ``directory`` (``error``)."""
    path = os.path.join(directory, name)
    store = os.path.realpath(directory)
    if os.path.commonpath([store, os.path.realpath(path)]) != store:
        raise error(f"{where}: {name} is a link to a file outside the store directory; a "
                    "sharded store holds its own files (copy them in instead of linking)")
    return path


def _read_manifest_text(directory: str) -> str:
    path = _path_in_store(directory, MANIFEST_NAME, ManifestError, repr(directory))
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except FileNotFoundError:
        raise ManifestNotFoundError(
            f"{directory!r} holds no {MANIFEST_NAME}: it is not a published sharded store "
            "(build it with sparkey.sharded.write or write_dask, or copy the whole directory)"
        ) from None


def _open_consistent(directory: str) -> tuple[Manifest, tuple[Reader, ...]]:
    """``(manifest, shard readers)`` of one build, re-reading a manifest replaced meanwhile."""
    text = _read_manifest_text(directory)
    attempt = 1
    while True:
        manifest = Manifest.from_json(text)
        try:
            return manifest, _open_shards(directory, manifest)
        except (MissingShardError, ShardMismatchError):
            newer = _read_manifest_text(directory)
            if newer == text or attempt == OPEN_ATTEMPTS:
                raise
            text = newer
            attempt += 1


def _open_shards(directory: str, manifest: Manifest) -> tuple[Reader, ...]:
    """Open and check every shard named by ``manifest``; close them all if one fails."""
    readers = []
    try:
        for info in manifest.shards:
            readers.append(_open_shard(directory, manifest, info))
    except BaseException:
        for reader in readers:
            reader.close()
        raise
    return tuple(readers)


def _open_shard(directory: str, manifest: Manifest, info: ShardInfo) -> Reader:
    """The Reader of one shard, after checking it against its ShardInfo."""
    log_name, index_name = manifest.file_names(info.shard)
    where = f"shard {info.shard} of {manifest.num_shards} in {directory!r}"
    log_path = _path_in_store(directory, log_name, ShardMismatchError, where)
    _path_in_store(directory, index_name, ShardMismatchError, where)
    try:
        reader = Reader(log_path)
    except FileNotFoundError as error:
        raise MissingShardError(
            f"{where}: {os.path.basename(error.filename or log_name)} is missing; copy the "
            "whole store directory, or build the store again") from None
    except SparkeyError as error:
        raise ShardMismatchError(f"{where} is damaged ({error}); build the store again") \
            from error
    try:
        found = {"file_identifier": reader.log_header.file_identifier,
                 "num_entries": len(reader),
                 "log_bytes": reader.log_header.data_end,
                 "index_bytes": reader.index_header.file_size}
        for field, value in found.items():
            expected = getattr(info, field)
            if value != expected:
                raise ShardMismatchError(
                    f"{where}: {log_name} / {index_name} have {field} {value}, but the manifest "
                    f"records {expected}; the files belong to another build (copy the whole "
                    "store directory, never single shards)")
    except BaseException:
        reader.close()
        raise
    return reader
