"""``write_dask``: build a sharded store from a Dask bag or dataframe (API layer, needs Dask).

The build is one Dask graph, run by whatever scheduler is active (a ``distributed.Client``
connected to a cluster, or Dask's local schedulers):

1. each input partition gets a ``shard`` column (``routing.shards_of``; keys and values become
   ``bytes``, ``str`` encoded as UTF-8) on the worker that holds it;
2. ``set_index("shard", divisions=[0, 1, ..., n])`` shuffles rows so that output partition ``i``
   holds exactly the rows of shard ``i`` (an empty partition for an empty shard);
3. one task per partition resolves duplicate keys (below), writes ``part-<i>-of-<n>`` into the
   staging directory with ``sparkey.Writer``, fsyncs it and returns its ShardInfo;
4. the client writes the manifest and publishes the directory (``publish``).

Duplicates: a shuffle does not keep input order, so "the last value wins" has no meaning. With
``sequence=None`` a key that occurs twice raises DuplicateKeyError. With ``sequence=<column>``
the row with the largest sequence value wins; two rows of one key with the same sequence value
(or a missing one) are an error too. Either way the result does not depend on how the shuffle
ordered rows. Entries inside a shard follow the shuffle's output order, which may differ between
runs; the stored mapping does not.

Shard tasks catch their own exceptions and return them, so the client sees every task finished
before it removes the staging directory, and reports the failure of the lowest shard number
(with the worker's traceback as its cause) rather than whichever failed first.
"""

from __future__ import annotations

import os
import traceback
from typing import Any, NoReturn

import dask
import pandas as pd

from sparkey.format import entry_bytes
from sparkey.sharded.errors import DuplicateKeyError
from sparkey.sharded.manifest import Manifest, ShardInfo
from sparkey.sharded.publish import Staging
from sparkey.sharded.routing import DEFAULT_ROUTING_SEED, shards_of
from sparkey.sharded.shard import check_build, write_shard

SHARD_COLUMN = "shard"


def write_dask(collection: Any, path: str | os.PathLike[str], num_shards: int, *,
               key: str = "key", value: str = "value", sequence: str | None = None,
               routing_seed: int = DEFAULT_ROUTING_SEED, overwrite: bool = False,
               **writer_options: Any) -> Manifest:
    """Build a sharded store at ``path`` from a Dask collection of (key, value); its Manifest.

    ``collection`` is a ``dask.dataframe.DataFrame`` with columns named by ``key``, ``value``
    and optionally ``sequence``, or a ``dask.bag.Bag`` of ``(key, value)`` tuples, or of
    ``(key, value, sequence)`` tuples when ``sequence`` is given. Keys and values are ``bytes``
    or ``str``. ``sequence`` decides between duplicate keys (see the module docstring).
    ``path`` must be on a filesystem that every worker and this process see at the same path.
    Options and publication are those of ``sparkey.sharded.write``.

    Build the collection with ``dask.config.set({"dataframe.convert-string": False})``: with
    the default, Dask turns object columns into Arrow strings, which cannot hold arbitrary bytes.
    """
    options = check_build(num_shards, routing_seed, writer_options)
    columns = [key, value] + ([sequence] if sequence is not None else [])
    with dask.config.set({"dataframe.convert-string": False}):
        frame = _as_frame(collection, columns)
        meta = _routed_meta(frame, columns)
        routed = frame.map_partitions(_route_partition, columns, num_shards, routing_seed,
                                      meta=meta)
        by_shard = routed.set_index(SHARD_COLUMN, divisions=list(range(num_shards + 1)))
        with Staging(path, overwrite) as staging:
            build = dask.delayed(_build_shard, pure=False)
            tasks = [build(partition, staging.directory, shard, num_shards,
                           sequence is not None, options)
                     for shard, partition in enumerate(by_shard.to_delayed())]
            outcomes = dask.compute(*tasks)
            for outcome in outcomes:
                if isinstance(outcome, _Failure):
                    outcome.reraise()
            manifest = Manifest(num_shards, routing_seed, tuple(outcomes))
            staging.publish(manifest)
    return manifest


def _as_frame(collection: Any, columns: list[str]) -> Any:
    """The collection as a dataframe holding ``columns`` (bags become dataframes)."""
    import dask.bag
    import dask.dataframe
    if isinstance(collection, dask.bag.Bag):
        return collection.to_dataframe(meta=pd.DataFrame({name: pd.Series(dtype=object)
                                                          for name in columns}))
    if isinstance(collection, dask.dataframe.DataFrame):
        missing = [name for name in columns if name not in collection.columns]
        if missing:
            raise KeyError(f"the dataframe has no column(s) {', '.join(map(repr, missing))}; "
                           f"it has {list(collection.columns)}: pass key=, value= or sequence= "
                           "with the right names")
        return collection[columns]
    raise TypeError(f"write_dask takes a dask.bag.Bag or dask.dataframe.DataFrame, not "
                    f"{type(collection).__name__}; use sparkey.sharded.write for an in-process "
                    "iterable")


def _routed_meta(frame: Any, columns: list[str]) -> pd.DataFrame:
    """Empty pandas frame describing a routed partition: key, value, [sequence], shard."""
    meta = {"key": pd.Series(dtype=object), "value": pd.Series(dtype=object)}
    if len(columns) == 3:
        meta["sequence"] = pd.Series(dtype=frame.dtypes[columns[2]])
    meta[SHARD_COLUMN] = pd.Series(dtype="int64")
    return pd.DataFrame(meta)


def _route_partition(partition: pd.DataFrame, columns: list[str], num_shards: int,
                     routing_seed: int) -> pd.DataFrame:
    """One input partition with canonical columns, ``bytes`` keys/values and its shard column."""
    keys = _as_bytes(partition[columns[0]], "key")
    routed = pd.DataFrame({"key": pd.Series(keys, dtype=object),
                           "value": pd.Series(_as_bytes(partition[columns[1]], "value"),
                                              dtype=object)})
    if len(columns) == 3:
        routed["sequence"] = partition[columns[2]].to_numpy()
    routed[SHARD_COLUMN] = shards_of(keys, num_shards, routing_seed)
    return routed


def _as_bytes(column: pd.Series, role: str) -> list[bytes]:
    """The items of a pandas column as a list of ``bytes`` (``str`` encoded as UTF-8)."""
    items = column.tolist()
    if set(map(type, items)) <= {bytes}:
        return items
    return [item if item.__class__ is bytes else entry_bytes(item, role) for item in items]


def _build_shard(partition: pd.DataFrame, directory: str, shard: int, num_shards: int,
                 has_sequence: bool, options: dict[str, Any]) -> ShardInfo | _Failure:
    """Write one shard from its partition; its ShardInfo, or a _Failure (never raises).

    Without a sequence, duplicates are found for free after the build: the index keeps one
    entry per key, so fewer entries than rows means a key came twice (the shard is then
    discarded with the staging directory).
    """
    try:
        if has_sequence:
            partition = _latest_versions(partition, shard)
        items = zip(partition["key"].tolist(), partition["value"].tolist())
        info = write_shard(directory, shard, num_shards, items, options)
        if info.num_entries < len(partition):
            duplicated = partition["key"].duplicated()
            raise DuplicateKeyError(
                f"key {partition['key'][duplicated].iloc[0]!r} (shard {shard}) occurs more "
                "than once; a shuffled collection has no order to pick the last value by: "
                "deduplicate the input, or pass sequence=<column> so that the row with the "
                "largest sequence value wins")
        return info
    except Exception as error:
        return _Failure(error, traceback.format_exc())


def _latest_versions(partition: pd.DataFrame, shard: int) -> pd.DataFrame:
    """The row with the largest sequence value of each key (ties and missing values raise)."""
    missing = partition["sequence"].isna()
    if missing.any():
        key = partition["key"][missing].iloc[0]
        raise ValueError(f"key {key!r} (shard {shard}) has no sequence value; every row needs "
                         "one to decide which version of a key wins")
    ordered = partition.sort_values("sequence", kind="stable")
    tied = ordered.duplicated(["key", "sequence"])
    if tied.any():
        row = ordered[tied].iloc[0]
        raise DuplicateKeyError(
            f"key {row['key']!r} (shard {shard}) has several rows with sequence "
            f"{row['sequence']!r}; sequence values must be unique per key to pick a winner")
    return ordered.drop_duplicates("key", keep="last")


class _Failure:
    """An exception raised by a shard task, returned as a value with its formatted traceback."""

    def __init__(self, error: Exception, formatted_traceback: str) -> None:
        self.error = error
        self.formatted_traceback = formatted_traceback

    def reraise(self) -> NoReturn:
        raise self.error from _WorkerTraceback(self.formatted_traceback)


class _WorkerTraceback(Exception):
    """The traceback of a shard task, shown as the cause of the exception it raised."""

    def __str__(self) -> str:
        return "\n" + self.args[0]
