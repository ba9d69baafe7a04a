"""``write``: build a sharded store from an in-process iterable (API layer of ``sparkey.sharded``).

All shard writers are open at once and each pair is routed to its shard as it arrives, so the
input is read once, streaming, with memory independent of its length (one write buffer per
shard). Shard logs keep the input order, and a key put twice keeps its last value, exactly as
in one ``sparkey.Writer``.
"""

from __future__ import annotations

import collections.abc
import contextlib
import os
from collections.abc import Iterable, Mapping
from typing import Any

from sparkey.format import BytesOrStr, entry_bytes
from sparkey.sharded.manifest import Manifest
from sparkey.sharded.publish import Staging
from sparkey.sharded.routing import DEFAULT_ROUTING_SEED, shard_of
from sparkey.sharded.shard import check_build, open_shard_writer, seal_shard


def write(items: Iterable[tuple[BytesOrStr, BytesOrStr]] | Mapping[Any, Any],
          path: str | os.PathLike[str], num_shards: int, *,
          routing_seed: int = DEFAULT_ROUTING_SEED, overwrite: bool = False,
          **writer_options: Any) -> Manifest:
    """Write ``(key, value)`` pairs (or a mapping) as a sharded store at ``path``; its Manifest.

    ``path`` becomes a directory of ``num_shards`` Sparkey stores ``part-<i>-of-<n>.spl/.spi``
    plus ``manifest.json``, published atomically (see ``sparkey.sharded.publish``); every shard
    is written, even an empty one. ``writer_options`` are ``compression``, ``block_size`` and the
    ``sparkey.write_index`` options, applied to every shard. An existing store at ``path`` is
    replaced only with ``overwrite=True``. If anything fails, nothing is published and the
    staging directory is removed.
    """
    options = check_build(num_shards, routing_seed, writer_options)
    if isinstance(items, collections.abc.Mapping):
        items = items.items()
    with Staging(path, overwrite) as staging, contextlib.ExitStack() as open_writers:
        writers = [open_writers.enter_context(
                       open_shard_writer(staging.directory, shard, num_shards, options))
                   for shard in range(num_shards)]
        puts = [writer.put for writer in writers]
        for key, value in items:
            if key.__class__ is not bytes:
                key = entry_bytes(key, "key")
            puts[shard_of(key, num_shards, routing_seed)](key, value)
        infos = []
        for shard, writer in enumerate(writers):
            writer.close()
            infos.append(seal_shard(writer, shard))
        manifest = Manifest(num_shards, routing_seed, tuple(infos))
        staging.publish(manifest)
    return manifest
