"""Exceptions of sharded Sparkey stores (bottom layer of ``sparkey.sharded``).

Each class derives from ``sparkey.SparkeyError`` and from the built-in a caller would catch for
the same failure: a missing file is a ``FileNotFoundError``, a damaged or foreign one a
``ValueError``. Messages name the file or shard at fault and what to do about it. The
``StoreExistsError`` of a builder refusing to replace a store is sparkey's own.
"""

from sparkey.errors import SparkeyError, StoreExistsError

__all__ = ["DaskUnavailableError", "DuplicateKeyError", "ManifestError", "ManifestNotFoundError",
           "MissingShardError", "ShardMismatchError", "StoreExistsError"]


class ManifestError(SparkeyError, ValueError):
    """``manifest.json`` is not a valid manifest of a sharded store (or of a known version)."""


class ManifestNotFoundError(SparkeyError, FileNotFoundError):
    """The directory holds no ``manifest.json``: it is not a published sharded store."""


class MissingShardError(SparkeyError, FileNotFoundError):
    """A shard file named by the manifest is absent."""


class ShardMismatchError(SparkeyError, ValueError):
    """A shard file is damaged, or is not the file the manifest describes."""


class DuplicateKeyError(SparkeyError, ValueError):
    """A key occurs twice in a distributed build with no sequence to order its versions."""


class DaskUnavailableError(SparkeyError, ImportError):
    """``write_dask`` needs the optional ``dask`` extra, which is not installed."""
