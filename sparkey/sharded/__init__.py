"""Sharded Sparkey stores: one log + index pair per shard, a manifest, and a routing reader.

A sharded store is a directory::

    store/
      manifest.json                 format version, routing hash and seed, per-shard identity
      part-00000-of-00008.spl/.spi  shard 0: an ordinary Sparkey store
      ...
      part-00007-of-00008.spl/.spi  every shard exists, even an empty one

Keys are routed by MurmurHash3 with a seed of its own (``routing``); shards are built
independently, in-process (``write``) or by Dask workers (``write_dask``, optional ``dask``
extra), under a staging name, then published by renaming the directory (``publish``).
``open_sharded`` returns a read-only Mapping that checks every shard against the manifest.

Modules, bottom up: ``errors``; the pure layer ``routing``, ``manifest``; the IO layer
``publish``, ``shard``; the API ``build`` (``write``), ``dask_build`` (``write_dask``, imported on
first use so that this package does not need Dask), ``reader``.
"""

from typing import Any

from sparkey.sharded.build import write
from sparkey.sharded.errors import (
    DaskUnavailableError, DuplicateKeyError, ManifestError, ManifestNotFoundError,
    MissingShardError, ShardMismatchError, StoreExistsError)
from sparkey.sharded.manifest import MANIFEST_NAME, Manifest, ShardInfo
from sparkey.sharded.reader import ShardedReader, open_sharded
from sparkey.sharded.routing import DEFAULT_ROUTING_SEED, part_name, shard_of, shards_of

__all__ = [
    "DEFAULT_ROUTING_SEED", "DaskUnavailableError", "DuplicateKeyError", "MANIFEST_NAME",
    "Manifest", "ManifestError", "ManifestNotFoundError", "MissingShardError", "ShardInfo",
    "ShardMismatchError", "ShardedReader", "StoreExistsError", "open_sharded", "part_name",
    "shard_of", "shards_of", "write",
]
# write_dask is left out of __all__: a star import must not need the optional Dask extra.


def __getattr__(name: str) -> Any:
    """Import ``write_dask`` on first use: Dask is an optional dependency."""
    if name == "write_dask":
        try:
            from sparkey.sharded.dask_build import write_dask
        except ImportError as error:
            if (error.name or "").partition(".")[0] not in ("dask", "distributed", "pandas"):
                raise
            raise DaskUnavailableError(
                f"write_dask needs Dask ({error}); install it with pip install 'offheap[dask]', "
                "or build in-process with sparkey.sharded.write") from error
        return write_dask
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
