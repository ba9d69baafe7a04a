"""Lookups through ``sparkey._native``: ``HashIndex``'s get and get_many when compiled (IO layer).

Each function returns a closure over the two read-only mappings (the whole ``.spi`` file and the
``.spl`` file up to ``data_end``) and the table layout, answering and failing exactly as the
Python probe in ``sparkey.index.reader`` does. An uncompressed store is one C call per lookup
(``_native.get``) or per batch (``_native.get_many``). A compressed one is ``find_block`` (probe
to the next candidate block), the log's codec, then ``value_in_block``; an entry that continues
past its block is read across blocks by the LogReader, and a candidate holding another key
resumes the probe where it stopped.

The mappings are owned by the HashIndex and the LogReader; the closures never outlive them in
use: a call after either is closed fails in the buffer export, and is reported as ClosedError.
Thread safety: the C functions keep no state, so the closures may run in many threads at once.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from sparkey.codec import codec_for
from sparkey.errors import ClosedError
from sparkey.format import Compression, IndexHeader, entry_bytes
from sparkey.log import LogReader

Lookup = Callable[[Any], "bytes | None"]
ManyLookup = Callable[[Sequence[Any]], "list[bytes | None]"]


def probe_limit(header: IndexHeader) -> int:
    """The largest displacement a lookup visits: one turn of the table, ``hash_capacity - 1``.

    A valid table ends every probe earlier, by the Robin Hood early exit, within the header's
    ``max_displacement + 1`` slots; that field is not the bound because a damaged header could
    lower it and hide present keys (libsparkey does not read it either).
    """
    return header.hash_capacity - 1


def layout(header: IndexHeader, data_end: int) -> tuple[int, int, int, int, int, int, int]:
    """The ``layout`` tuple the C lookups take, from the validated index header."""
    return (header.hash_seed, header.hash_size, header.address_size, header.hash_capacity,
            probe_limit(header), header.entry_block_bits, data_end)


def compiled_get(native: ModuleType, index_mm: mmap.mmap, log: LogReader, header: IndexHeader,
                 closed: Callable[[], ClosedError | None]) -> Lookup:
    """``get(key)`` through the C lookups: the value stored for ``key``, or None.

    ``closed()`` returns the ClosedError to raise when the index or log was closed under a
    call, else None.
    """
    log_mm, table = log.mapping, layout(header, log.data_end)
    if log.header.compression_type == Compression.NONE:
        native_get = native.get

        def get(key: Any) -> bytes | None:
            try:
                return native_get(index_mm, log_mm, key, table)
            except ValueError:
                if (error := closed()) is not None:
                    raise error from None
                raise
        return get

    find_block, value_in_block, spans_blocks = (
        native.find_block, native.value_in_block, native.SpansBlocks)
    decompress = codec_for(log.header.compression_type).decompress
    block_size = log.header.compression_block_size
    across_blocks = log.value_across_blocks

    def get_compressed(key: Any) -> bytes | None:
        if key.__class__ is not bytes:
            key = entry_bytes(key, "key")
        try:
            displacement = 0
            while True:
                found = find_block(index_mm, log_mm, key, table, displacement)
                if found is None:
                    return None
                position, entry_index, start, stop, resume = found
                block = decompress(log_mm[start:stop], block_size)
                try:
                    value = value_in_block(block, position, entry_index, key)
                except spans_blocks:
                    value = across_blocks(position, entry_index, key)
                if value is not None or resume is None:
                    return value
                displacement = resume
        except ValueError:
            if (error := closed()) is not None:
                raise error from None
            raise
    return get_compressed


def compiled_get_many(native: ModuleType, index_mm: mmap.mmap, log: LogReader,
                      header: IndexHeader, closed: Callable[[], ClosedError | None]
                      ) -> ManyLookup | None:
    """``get_many(keys)`` of an uncompressed store through ``_native.get_many``, or None for a
    compressed one (whose batch path in Python decompresses each block once per call)."""
    if log.header.compression_type != Compression.NONE:
        return None
    log_mm, table = log.mapping, layout(header, log.data_end)
    native_get_many = native.get_many

    def get_many(keys: Sequence[Any]) -> list[bytes | None]:
        try:
            return native_get_many(index_mm, log_mm, keys, table)
        except ValueError:
            if (error := closed()) is not None:
                raise error from None
            raise
    return get_many
