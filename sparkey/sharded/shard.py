"""One shard of a sharded build: argument checks, writing and sealing (IO layer).

Every builder, in-process or on a Dask worker, writes shard ``i`` of ``n`` through the same two
steps: ``open_shard_writer`` creates ``part-<i>-of-<n>`` in the staging directory with the
build's options, and ``seal_shard`` (after the writer is closed and the index built) fsyncs both
files and returns the ShardInfo the manifest records. The shard files themselves are ordinary
Sparkey stores, written by ``sparkey.Writer``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from sparkey.format import BytesOrStr, Compression
from sparkey.index import check_index_options, read_index_header
from sparkey.log import read_log_header
from sparkey.sharded.manifest import ShardInfo
from sparkey.durable import fsync_path
from sparkey.sharded.routing import check_num_shards, check_routing_seed, part_name
from sparkey.writer import Writer

LOG_OPTIONS = ("compression", "block_size")
INDEX_OPTIONS = ("hash_size", "hash_seed", "rules", "sparsity", "method", "max_memory_bytes")


def check_build(num_shards: int, routing_seed: int,
                writer_options: dict[str, Any]) -> dict[str, Any]:
    """Validate a build's arguments before any work starts; return the writer options to use.

    ``writer_options`` may hold ``compression``, ``block_size`` and the options of
    ``sparkey.write_index``. File identifiers are random per shard (they are how a reader tells
    shards apart) and durability is the publisher's job, so ``file_identifier`` and ``fsync``
    are not options here.
    """
    check_num_shards(num_shards)
    check_routing_seed(routing_seed)
    unknown = sorted(set(writer_options) - set(LOG_OPTIONS) - set(INDEX_OPTIONS))
    if unknown:
        raise TypeError(f"unexpected writer option(s) {', '.join(unknown)}; a sharded build "
                        f"accepts {', '.join(LOG_OPTIONS + INDEX_OPTIONS)}")
    Compression.parse(writer_options.get("compression", "none"))
    index_options = check_index_options(
        **{name: value for name, value in writer_options.items() if name in INDEX_OPTIONS})
    if index_options["hash_seed"] == routing_seed and index_options["hash_size"] != 8:
        raise ValueError(
            f"hash_seed {routing_seed} equals the routing seed: with 32-bit index hashes the "
            "index would hash with the routing hash, so a shard's keys would share their hash "
            "modulo num_shards and crowd into a fraction of the slots whenever the capacity "
            "shares a factor with num_shards; pick another hash_seed (or leave it random), or "
            "pass hash_size=8")
    return dict(writer_options)


def open_shard_writer(directory: str, shard: int, num_shards: int,
                      options: dict[str, Any]) -> Writer:
    """A new ``sparkey.Writer`` for ``shard`` in ``directory``; the caller closes it."""
    return Writer(os.path.join(directory, part_name(shard, num_shards)), **options)


def seal_shard(writer: Writer, shard: int) -> ShardInfo:
    """Fsync the files of a closed shard writer; return the shard's ShardInfo."""
    for path in (writer.log_path, writer.index_path):
        fsync_path(path)
    header = read_index_header(writer.index_path)
    return ShardInfo(shard=shard, file_identifier=header.file_identifier,
                     num_entries=header.num_entries,
                     log_bytes=read_log_header(writer.log_path).data_end,
                     index_bytes=header.file_size)


def write_shard(directory: str, shard: int, num_shards: int,
                items: Iterable[tuple[BytesOrStr, BytesOrStr]], options: dict[str, Any]
                ) -> ShardInfo:
    """Write the ``(key, value)`` pairs of one shard, build its index, seal it; its ShardInfo."""
    with open_shard_writer(directory, shard, num_shards, options) as writer:
        put = writer.put
        for key, value in items:
            put(key, value)
    return seal_shard(writer, shard)
