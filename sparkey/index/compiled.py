"""The ``sparkey._native.Lookup`` of a ``HashIndex`` when the compiled core runs (IO layer).

A Lookup answers ``get``, ``[]``, ``in`` and ``get_many`` in one C call each, answering and
failing exactly as the Python probe in ``sparkey.index.reader`` with ``LogReader.value_for``:
it probes the table, reads an uncompressed entry in place, or decompresses a candidate's block
through the log's codec (one Python call per block, the last block kept for the next lookup);
an entry that continues past its block is read across blocks by the LogReader.

Ownership: the Lookup holds buffer exports of the index mapping (owned by the HashIndex) and of
the log mapping (owned by the LogReader) until ``release()``, which both owners call before they
unmap (``HashIndex.close``, and ``LogReader.close`` through ``hold_exports``); afterwards every
call raises ClosedError. Thread safety: lookups may run in many threads at once, also while
another thread closes the store.
"""

from __future__ import annotations

import mmap
from types import ModuleType
from typing import Any

from sparkey.codec import SnappyCodec, codec_for
from sparkey.format import Compression, IndexHeader
from sparkey.log import LogReader


def probe_limit(header: IndexHeader) -> int:
    """The largest displacement a lookup visits: one turn of the table, ``hash_capacity - 1``.

    A valid table ends every probe earlier, by the Robin Hood early exit, within the header's
    ``max_displacement + 1`` slots; that field is not the bound because a damaged header could
    lower it and hide present keys (libsparkey does not read it either).
    """
    return header.hash_capacity - 1


def layout(header: IndexHeader, data_end: int) -> tuple[int, int, int, int, int, int, int]:
    """The ``layout`` tuple a Lookup takes, from the validated index header."""
    return (header.hash_seed, header.hash_size, header.address_size, header.hash_capacity,
            probe_limit(header), header.entry_block_bits, data_end)


def native_lookup(native: ModuleType, index_mm: mmap.mmap, log: LogReader, header: IndexHeader,
                  closed_message: str) -> Any:
    """A ``_native.Lookup`` over the index mapping and ``log``, released when ``log`` closes."""
    compression = log.header.compression_type
    options: dict[str, Any] = {"closed_message": closed_message}
    if compression != Compression.NONE:
        codec = codec_for(compression)
        snappy = isinstance(codec, SnappyCodec)
        options.update(block_size=log.header.compression_block_size, snappy=snappy,
                       decompress=SnappyCodec.raw_decompress if snappy else codec.decompress,
                       across_blocks=log.value_across_blocks)
    lookup = native.Lookup(index_mm, log.mapping, layout(header, log.data_end), **options)
    log.hold_exports(lookup.release)
    return lookup
