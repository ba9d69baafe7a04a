"""TreeMap: a sorted map whose entries live in encoded B+tree pages in a record store (layer 6).

Layout. Every node is one store record (:mod:`offheap.treemap.page`): leaves hold up to ``node_size``
sorted keys with their values, inner nodes up to ``node_size`` children and the separators
between them. A separator ``s`` between two children satisfies ``max(left) < s <= min(right)``
and is chosen short (:func:`offheap.treemap.page.separator`). All leaves are at the same depth;
``height`` counts levels, 1 when the root is a leaf.

Memory. Decoded nodes (Python lists) are kept in a :class:`~offheap.treemap.nodecache.NodeCache` of up
to ``cache_size`` leaves and as many inner nodes. With ``write_cache=True`` a changed node stays
there, dirty, and is encoded once: when evicted, on :meth:`TreeMap.flush`/:meth:`TreeMap.close`, or ``flush_delay``
milliseconds after the first change (a daemon timer). With ``write_cache=False`` every change is
encoded and written through at once, as MapDB does without its write cache.

Insert. The scalar path is ``bisect`` and ``list.insert`` on the decoded leaf; the last leaf
used and its key bounds are remembered, so ascending keys skip the descent. A full leaf that
gets a new key is evened out with a sibling that has two free slots or more (as in a B*-tree, so
random inserts fill leaves to ~80%, not ~70%); otherwise it splits in half, except when the new
key is its largest (smallest), where the left (right) part keeps ``node_size`` entries, so
ascending inserts leave full leaves behind. Example, node_size 4, inserting 5 into the full
rightmost leaf ``[1 2 3 4]``: the append split gives ``[1 2 3 4] [5]`` with separator 5, where a
middle split would give ``[1 2] [3 4 5]`` and ascending keys would leave every leaf half full.
A split that overfills the parent splits it the same way, up to a new root.

Delete. A leaf that drops below ``node_size // 4`` entries (inner nodes: children) merges with a
sibling when both fit in one node, and otherwise takes entries from it until both are half full;
a root with one child is replaced by that child. So mass deletion leaves no empty leaves.

Failure atomicity. Record ids for the nodes a split will create are taken from the store before
anything changes. With the write cache, a change touches only cached nodes and cannot fail; the
store is written on eviction, before an operation starts, so a :class:`CapacityError` there
leaves the tree as it was (the unwritten node stays cached and dirty). Deletions and reads never
fail that way: when the store is full they let the cache grow past ``cache_size`` instead, so a
full map can always be made smaller. Without the write cache,
the nodes an operation changed are written with their old bytes kept; if a write fails, the
written ones get their old bytes back (into the chunk just freed, so without allocating) and the
changed nodes are dropped from the cache, to be read back as they were.

Thread safety. Every public method holds the map's lock for its whole duration, so calls from
several threads, and the ``flush_delay`` timer thread, see whole operations. An iterator takes
the lock only while it fetches the next leaf; changing the map's size while iterating raises
RuntimeError, as with ``dict``.
"""

from __future__ import annotations

import json
import operator
import os
import struct
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

import numpy as np

from offheap.kernels.codecs import get_codec
from offheap.errors import CapacityError, ClosedError, CorruptionError
from offheap.arena.arena import Arena, format_bytes
from offheap.treemap.nodecache import Inner, Leaf, NodeCache, merge_into, redistribute
from offheap.kernels.bounds import INT64_MAX, INT64_MIN
from offheap.treemap.page import (
    KEY_KINDS,
    decode_inner,
    decode_leaf,
    encode_inner,
    encode_leaf,
    raw_size,
    separator,
)
from offheap.collection.readers import open_file_reader
from offheap.treemap.reader import TreeReader
from offheap.store.serializers import get_serializer
from offheap.store.records import RecordStore
from offheap.collection.filemap import StandaloneFileMap
from offheap.treemap.bulk import leaf_pages, merge_sorted, runs, separators, take
from offheap.treemap.views import SortedRangeAPI

_META_MAGIC = b"OHTREE01"
_META = struct.Struct("<8sQIQQQQQ")  # magic, root, height, entries, leaves, inners, raw, stored
_ROOT_MAGIC = b"OHTREEMP"  # a standalone file's store root: magic + meta recid
_MIN_NODE_SIZE = 4
_MAX_NODE_SIZE = 4096
_SCALAR_TYPES = frozenset((type(None), bool, int, float, complex, str, bytes))
_EXPORT_RUN = 1 << 20  # keys gathered as Python ints before they are packed into an array


@dataclass(frozen=True)
class TreeStats:
    """Size and memory figures of a :class:`TreeMap`."""

    n_entries: int
    height: int
    n_leaves: int
    n_inner: int
    node_size: int
    cached_nodes: int
    dirty_nodes: int
    raw_page_bytes: int  # pages as they would be without compression
    stored_page_bytes: int  # pages as stored (the last written version of each node)
    reserved_bytes: int
    used_bytes: int

    @property
    def bytes_per_entry(self) -> float:
        return self.reserved_bytes / self.n_entries if self.n_entries else float("nan")

    @property
    def compression_ratio(self) -> float:
        return self.raw_page_bytes / self.stored_page_bytes if self.stored_page_bytes else 1.0

    @property
    def leaf_fill(self) -> float:
        """Mean entries per leaf as a fraction of ``node_size``."""
        return self.n_entries / (self.n_leaves * self.node_size) if self.n_leaves else 0.0


def _int64_key(key) -> int:
    if type(key) is not int:
        try:
            key = operator.index(key)
        except TypeError:
            raise TypeError(f"this TreeMap has int64 keys, not {type(key).__name__}") from None
    if not INT64_MIN <= key <= INT64_MAX:
        raise OverflowError(f"key {key} is outside the int64 range [-2**63, 2**63)")
    return key


def _str_key(key) -> str:
    if type(key) is not str:
        if not isinstance(key, str):
            raise TypeError(f"this TreeMap has str keys, not {type(key).__name__}")
        key = str(key)
    return key


def _bytes_key(key) -> bytes:
    if type(key) is not bytes:
        if not isinstance(key, (bytes, bytearray, memoryview)):
            raise TypeError(f"this TreeMap has bytes keys, not {type(key).__name__}")
        key = bytes(key)
    return key


_KEY_CHECKS = {"int64": _int64_key, "str": _str_key, "bytes": _bytes_key}
_KEY_TYPES = {"int64": int, "str": str, "bytes": bytes}


class TreeMap(StandaloneFileMap, SortedRangeAPI, MutableMapping):
    """A sorted ``MutableMapping`` stored off the Python heap in compressed B+tree pages.

    ``key`` is ``"int64"``, ``"str"`` or ``"bytes"``; ``value`` names the value serializer
    (``"object"``, ``"int64"``, ``"float64"``, ``"str"``, ``"bytes"``). Iteration is in key order.
    ``node_size`` bounds entries per leaf and children per inner node; ``compression`` is a codec
    name applied per page (kept only where it helps); ``write_cache``, ``flush_delay`` (ms) and
    ``cache_size`` (decoded leaves kept, and as many inner nodes) are described in the module
    docstring. ``limit`` caps the memory in bytes (:class:`CapacityError` beyond it).

    With ``path`` the map lives in that file and ``TreeMap(path=...)`` opens it again. With
    ``durability="commit"`` (the default) :meth:`commit` makes every change durable at once,
    :meth:`rollback` drops the changes since, and :meth:`close` commits; ``durability="none"``
    writes through to the file, like MapDB without transactions (see ``docs/durability.md``).
    :meth:`reader` opens a read-only :class:`~offheap.treemap.reader.TreeReader` of the file,
    which follows the commits of the one writer process (``readonly=True`` here is a TypeError
    naming it). ``verify`` checks the page checksums on open; ``recover=True`` opens a file
    that was not closed cleanly (for :func:`offheap.salvage`).
    """

    def __init__(self, key="int64", value="object", *, node_size: int = 32, compression=None,
                 write_cache: bool = True, flush_delay: float | None = None,
                 cache_size: int = 2048, limit: int | None = None, path=None,
                 durability: str = "commit", readonly: bool = False, verify: bool = True,
                 recover: bool = False) -> None:
        self._refuse_readonly(readonly)
        options = dict(key=key, value=value, node_size=node_size, compression=compression,
                       write_cache=write_cache, flush_delay=flush_delay, cache_size=cache_size)
        if path is None:
            store = RecordStore(Arena.anonymous(limit_bytes=limit))
            self._setup(store, owns_store=True, meta_recid=None, **options)
            return
        store = RecordStore.file(path, limit_bytes=limit, durability=durability, verify=verify,
                                 recover=recover)
        try:
            meta_recid = standalone_meta_recid(store.root) if store.root else None
            self._setup(store, owns_store=True, meta_recid=meta_recid, **options)
            if meta_recid is None:
                store.root = _ROOT_MAGIC + struct.pack("<Q", self._meta_recid)
                self.commit()  # a new file holds an empty TreeMap from its first moment on disk
        except BaseException:
            store.arena.close()
            raise

    @classmethod
    def reader(cls, path: str | os.PathLike[str], key="int64", value="object", *,
               limit: int | None = None, verify: bool = True, recover: bool = False,
               **options) -> TreeReader:
        """A read-only :class:`~offheap.treemap.reader.TreeReader` of the TreeMap file at
        ``path``, beside the one writer process (:mod:`offheap.collection.readers`). ``key``,
        ``value`` and the other options are the constructor's; ``limit``, ``verify`` and
        ``recover`` apply to this open."""
        lock = threading.RLock()

        def build(store: RecordStore) -> TreeMap:
            tree = cls.__new__(cls)
            tree._setup(store, owns_store=True, meta_recid=standalone_meta_recid(store.root),
                        key=key, value=value, lock=lock, **options)
            return tree

        return open_file_reader(path, build, TreeReader, limit_bytes=limit, verify=verify,
                                recover=recover, lock=lock)

    @classmethod
    def in_store(cls, store: RecordStore, key="int64", value="object",
                 meta_recid: int | None = None, *, lock=None, **options) -> TreeMap:
        """A map kept in a shared store (a :class:`~offheap.db.DB`); ``meta_recid`` reopens one.

        Its metadata (format, root, height, counts) is the record :attr:`meta_recid`, written by
        :meth:`flush` and :meth:`close`; the store itself stays open when the map closes.
        ``lock`` (a ``threading.RLock``) is the lock of the store's owner: maps sharing a store
        share it, so one map's ``flush_delay`` timer never writes while another map does.
        """
        tree = cls.__new__(cls)
        tree._setup(store, owns_store=False, meta_recid=meta_recid, key=key, value=value,
                    lock=lock, **options)
        return tree

    def _setup(self, store: RecordStore, *, owns_store: bool, meta_recid: int | None, key, value,
               node_size: int = 32, compression=None, write_cache: bool = True,
               flush_delay: float | None = None, cache_size: int = 2048, lock=None) -> None:
        if key not in KEY_KINDS:
            raise ValueError(f"key must be one of {', '.join(KEY_KINDS)}; got {key!r}")
        if not isinstance(node_size, int) or not _MIN_NODE_SIZE <= node_size <= _MAX_NODE_SIZE:
            raise ValueError(f"node_size must be an int in [{_MIN_NODE_SIZE}, {_MAX_NODE_SIZE}], "
                             f"got {node_size!r}")
        if flush_delay is not None and not flush_delay > 0:
            raise ValueError(f"flush_delay is in milliseconds and must be > 0, got {flush_delay!r}")
        self._closed = True  # until fully set up, so close() in an error path does nothing
        self._store = store
        self._owns_store = owns_store
        self._key_kind = key
        self._as_key = _KEY_CHECKS[key]
        self._key_type = _KEY_TYPES[key]
        self._serializer = get_serializer(value)
        self._codec = None if compression in (None, "none") else get_codec(compression)
        self._node_size = node_size
        self._min_fill = max(1, node_size // 4)
        self._min_children = max(2, node_size // 4)
        self._write_cache = bool(write_cache)
        self._flush_delay = flush_delay
        self._lock = threading.RLock() if lock is None else lock
        self._timer: threading.Timer | None = None
        self._copy_values = self._serializer.name == "object"
        self._cache = NodeCache(cache_size, self._load_node, self._write_node)
        self._hint: Leaf | None = None  # the last leaf reached, valid for hint_lo <= k < hint_hi
        self._hint_lo = self._hint_hi = None
        self._mods = 0
        if meta_recid is None:
            self._meta_recid = store.put(b"")
            try:
                root = Leaf(store.put(b""), [], [])
            except BaseException:
                store.delete(self._meta_recid)
                raise
            self._root, self._height, self._n = root.recid, 1, 0
            self._n_leaves, self._n_inner = 1, 0
            self._raw_total = self._stored_total = 0
            self._cache.add(root)
            self._write_node(root)
            self._write_meta()
        else:
            self._meta_recid = meta_recid
            self._load_meta()
        self._closed = False

    # -- keys and values ----------------------------------------------------------------------

    def _accept_value(self, value):
        """The value to keep in a decoded leaf: validated now, so writing the page later cannot
        fail; an object value that is not a plain scalar is kept as a private copy (what a
        serialized map returns), so later changes to the caller's object do not leak in."""
        if self._copy_values:
            if type(value) in _SCALAR_TYPES:
                return value
            serializer = self._serializer
            return serializer.loads(serializer.dumps(value))
        return self._serializer.validate(value)

    # -- lookups ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, key):
        leaf, i = self._find(key)
        if leaf is None:
            raise KeyError(key)
        return leaf.values[i]

    def get(self, key, default=None):
        leaf, i = self._find(key)
        return default if leaf is None else leaf.values[i]

    def __contains__(self, key) -> bool:
        return self._find(key)[0] is not None

    def _find(self, key) -> tuple[Leaf | None, int]:
        """``(leaf, index)`` of ``key``, or ``(None, -1)``: the hot read path (the remembered
        leaf, else a descent). A key of the wrong type raises TypeError."""
        lock = self._lock
        lock.acquire()
        try:
            if type(key) is not self._key_type:
                key = self._as_key(key)
            leaf = self._hint  # None when closed
            if (leaf is None or (self._hint_lo is not None and key < self._hint_lo)
                    or (self._hint_hi is not None and key >= self._hint_hi)):
                self._check_open()
                if self._cache.over_capacity():
                    self._trim(strict=False)
                leaf = self._descend(key)[1]
            keys = leaf.keys
            i = bisect_left(keys, key)
            if i < len(keys) and keys[i] == key:
                return leaf, i
            return None, -1
        finally:
            lock.release()

    # -- scalar changes -----------------------------------------------------------------------

    def __setitem__(self, key, value) -> None:
        lock = self._lock
        lock.acquire()
        try:
            if type(key) is not self._key_type or (
                    self._key_type is int and not INT64_MIN <= key <= INT64_MAX):
                key = self._as_key(key)
            if not (self._copy_values and type(value) in _SCALAR_TYPES):
                value = self._accept_value(value)
            if self._cache.over_capacity():
                self._trim()
            leaf = self._hint  # None when closed
            if (leaf is not None and (self._hint_lo is None or self._hint_lo <= key)
                    and (self._hint_hi is None or key < self._hint_hi)):
                path = None
            else:
                self._check_open()
                path, leaf = self._descend(key)
            keys = leaf.keys
            i = bisect_left(keys, key)
            if i < len(keys) and keys[i] == key:
                leaf.values[i] = value
                if self._write_cache:
                    leaf.dirty = True
                else:
                    self._commit_leaf(leaf)
                return
            if len(keys) < self._node_size:
                keys.insert(i, key)
                leaf.values.insert(i, value)
                if self._write_cache:
                    leaf.dirty = True
                else:
                    self._commit_leaf(leaf)
                self._n += 1
                self._mods += 1
            else:
                if path is None:
                    path, leaf = self._descend(key)
                self._overflow_insert(path, leaf, i, key, value)
            if self._flush_delay is not None:
                self._arm_timer()
        finally:
            lock.release()

    def __delitem__(self, key) -> None:
        self.pop(key)

    def pop(self, key, *default):
        with self._lock:
            if self._closed:
                raise ClosedError("the TreeMap is closed")
            key = self._as_key(key)
            if self._cache.over_capacity():
                self._trim(strict=False)
            path, leaf = self._descend(key)
            i = bisect_left(leaf.keys, key)
            if i == len(leaf.keys) or leaf.keys[i] != key:
                if default:
                    return default[0]
                raise KeyError(key)
            value = leaf.values[i]
            self._remove(path, leaf, i, i + 1)
            self._arm_timer()
            return value

    def popitem(self, last: bool = True):
        """Remove and return the ``(key, value)`` with the largest key (smallest: ``last=False``)."""
        with self._lock:
            self._check_open()
            if not self._n:
                raise KeyError("popitem(): TreeMap is empty")
            if self._cache.over_capacity():
                self._trim(strict=False)
            path, leaf = self._descend_edge(last)
            i = len(leaf.keys) - 1 if last else 0
            item = leaf.keys[i], leaf.values[i]
            self._remove(path, leaf, i, i + 1)
            self._arm_timer()
            return item

    def clear(self) -> None:
        """Remove every entry; the tree's records are freed and an empty root leaf remains."""
        with self._lock:
            self._check_open()
            new_root = self._store.put(b"")
            old = self._all_recids()
            self._replace_tree(new_root, 1, 0, 1, 0, old)
            root = Leaf(new_root, [], [])
            self._cache.add(root)
            self._write_node(root)

    def delete_range(self, lo=None, hi=None, inclusive=(True, True)) -> int:
        """Remove every key in the range (bounds as in :meth:`irange`); return how many went.

        Works leaf by leaf, rebalancing as it goes. With the write cache it cannot fail; without
        it each leaf's removal is atomic, and a :class:`CapacityError` stops it between leaves.
        """
        with self._lock:
            self._check_open()
            lo, hi = self._bound(lo), self._bound(hi)
            removed = 0
            seek, seek_inclusive = lo, inclusive[0]
            while self._n:
                if self._cache.over_capacity():
                    self._trim(strict=False)
                path, leaf = self._descend_edge(False) if seek is None else self._descend(seek)
                upper = self._hint_hi
                keys = leaf.keys
                start = 0 if seek is None else (bisect_left if seek_inclusive else bisect_right)(keys, seek)
                end = len(keys) if hi is None else (bisect_right if inclusive[1] else bisect_left)(keys, hi)
                range_ends_here = end < len(keys) or upper is None or (
                    hi is not None and (upper > hi or (upper == hi and not inclusive[1])))
                if start < end:
                    self._remove(path, leaf, start, end)
                    removed += end - start
                if range_ends_here:
                    break
                seek, seek_inclusive = upper, True
            if removed:
                self._arm_timer()
            return removed

    # -- sorted-map API -----------------------------------------------------------------------

    def first_key(self):
        """The smallest key; KeyError when empty."""
        return self._edge_key(last=False)

    def last_key(self):
        """The largest key; KeyError when empty."""
        return self._edge_key(last=True)

    def floor_key(self, key):
        """The largest key ``<= key``, or None."""
        return next(self.irange(None, key, reverse=True), None)

    def ceiling_key(self, key):
        """The smallest key ``>= key``, or None."""
        return next(self.irange(key, None), None)

    def lower_key(self, key):
        """The largest key ``< key``, or None."""
        return next(self.irange(None, key, (True, False), reverse=True), None)

    def higher_key(self, key):
        """The smallest key ``> key``, or None."""
        return next(self.irange(key, None, (False, True)), None)

    def _edge_key(self, last: bool):
        with self._lock:
            self._check_open()
            if not self._n:
                raise KeyError("TreeMap is empty")
            leaf = self._descend_edge(last)[1]
            return leaf.keys[-1 if last else 0]

    def _chunks(self, lo, hi, inclusive, reverse: bool, with_values: bool):
        """Yield ``(keys, values)`` list slices leaf by leaf over a range.

        Leaves not already cached are decoded without entering the cache, so a long scan does
        not evict the working set. RuntimeError if the size of the map changes meanwhile.
        """
        with self._lock:
            self._check_open()
            lo, hi = self._bound(lo), self._bound(hi)
            mods = self._mods
        lo_inclusive, hi_inclusive = inclusive
        seek = hi if reverse else lo
        seek_inclusive = hi_inclusive if reverse else lo_inclusive
        while True:
            with self._lock:
                self._check_open()
                if self._mods != mods:
                    raise RuntimeError("TreeMap changed size during iteration")
                leaf, lower, upper = self._scan_leaf(seek, seek_inclusive, reverse)
                keys = leaf.keys
                if reverse:
                    end = len(keys) if seek is None else (bisect_right if seek_inclusive else bisect_left)(keys, seek)
                    start = 0 if lo is None else (bisect_left if lo_inclusive else bisect_right)(keys, lo)
                    done = lower is None or start > 0 or (lo is not None and lower <= lo)
                    step = slice(end - 1, start - 1 if start else None, -1)
                    seek, seek_inclusive = lower, False
                else:
                    start = 0 if seek is None else (bisect_left if seek_inclusive else bisect_right)(keys, seek)
                    end = len(keys) if hi is None else (bisect_right if hi_inclusive else bisect_left)(keys, hi)
                    done = upper is None or end < len(keys) or (
                        hi is not None and (hi < upper or (hi == upper and not hi_inclusive)))
                    step = slice(start, end)
                    seek, seek_inclusive = upper, True
                chunk = keys[step] if start < end else []
                values = leaf.values[step] if with_values and start < end else None
            if chunk:
                yield chunk, values
            if done:
                break
        with self._lock:
            if self._mods != mods:
                raise RuntimeError("TreeMap changed size during iteration")

    def _scan_leaf(self, seek, inclusive: bool, reverse: bool):
        """(leaf, lower, upper) for a scan step: the leaf holding ``seek`` (forward, or reverse
        with ``inclusive``) or the last leaf with keys below ``seek`` (reverse, exclusive).
        A leaf that is not cached is decoded without entering the cache."""
        cache = self._cache
        node = cache.node(self._root)
        lower = upper = None
        below = reverse and not inclusive
        leaf_parent_level = self._height - 2
        for level in range(self._height - 1):
            seps = node.keys
            if seek is None:
                i = len(seps) if reverse else 0
            else:
                i = bisect_left(seps, seek) if below else bisect_right(seps, seek)
            if i:
                lower = seps[i - 1]
            if i < len(seps):
                upper = seps[i]
            recid = node.children[i]
            if level == leaf_parent_level:
                node = cache.read(recid)
            else:
                node = cache.node(recid)
        return node, lower, upper

    # -- bulk ---------------------------------------------------------------------------------

    def update(self, other=(), /, *, parallelism: int = 1, **kwargs) -> None:
        """Like ``dict.update``, from a mapping, ``(key, value)`` pairs, or a ``(keys, values)``
        pair of numpy arrays (``keys`` int64, sorted or not: it is sorted here, and for a key
        given twice the last value wins).

        Into an empty map, or a batch at least as large as the map, the pages are built directly
        from the sorted entries, full leaves bottom-up (MapDB's data pump); all or nothing. A
        smaller batch is inserted key by key, in key order, and undone if one insert fails.
        ``parallelism`` > 1 encodes and compresses the leaves of a direct build in that many
        forked processes (:func:`offheap.treemap.bulk.leaf_pages`; same pages, same tree). It is
        a keyword of this method, so it cannot be passed as a str key.
        """
        if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 1:
            raise ValueError(f"parallelism must be an int >= 1, not {parallelism!r}")
        with self._lock:
            self._check_open()
            if kwargs:
                if self._key_kind != "str":
                    raise TypeError("keyword arguments would be str keys; this TreeMap has "
                                    f"{self._key_kind} keys")
                other = list(dict(other).items()) + list(kwargs.items()) if other else kwargs
            keys, values = self._sorted_batch(other)
            if not len(keys):
                return
            if not self._n or len(keys) >= self._n:
                self._merge_rebuild(keys, values, parallelism)
            else:
                self._insert_sorted(keys, values)
            self._arm_timer()

    def _sorted_batch(self, other) -> tuple[list | np.ndarray, list | np.ndarray]:
        """Keys (sorted, unique, normalized) and their values from any ``update`` argument."""
        if (isinstance(other, tuple) and len(other) == 2
                and isinstance(other[0], np.ndarray)):
            return self._sorted_arrays(*other)
        if isinstance(other, TreeMap):
            items = list(other.items())
        elif isinstance(other, Mapping) or hasattr(other, "keys"):
            items = [(k, other[k]) for k in other.keys()]
        else:
            items = []
            for n, pair in enumerate(other):
                try:
                    key, value = pair
                except (TypeError, ValueError):
                    raise ValueError(f"update sequence element #{n} is not a (key, value) pair") from None
                items.append((key, value))
        as_key, accept = self._as_key, self._accept_value
        latest = {}
        for key, value in items:
            latest[as_key(key)] = value
        keys = sorted(latest)
        return keys, [accept(latest[k]) for k in keys]

    def _sorted_arrays(self, keys: np.ndarray, values) -> tuple[np.ndarray, list | np.ndarray]:
        if self._key_kind != "int64":
            raise TypeError(f"a (keys, values) array pair needs int64 keys; this TreeMap has "
                            f"{self._key_kind} keys: pass (key, value) pairs instead")
        if keys.ndim != 1:
            raise ValueError(f"keys must be one-dimensional, got shape {keys.shape}")
        if keys.dtype.kind not in "iu":
            raise TypeError(f"keys must be an integer array, got {keys.dtype}")
        if keys.dtype.kind == "u" and keys.size and int(keys.max()) > INT64_MAX:
            raise OverflowError(f"key {int(keys.max())} is outside the int64 range")
        if len(values) != len(keys):
            raise ValueError(f"{len(keys)} keys but {len(values)} values")
        keys = keys.astype(np.int64, copy=False)
        if keys.size > 1 and not bool(np.all(keys[1:] > keys[:-1])):
            order = np.argsort(keys, kind="stable")
            keys = keys[order]
            last = np.ones(keys.size, bool)
            last[:-1] = keys[1:] != keys[:-1]  # keep the last of each run of equal keys
            order = order[last]
            keys = keys[last]
            values = values[order] if isinstance(values, np.ndarray) else [values[i] for i in order.tolist()]
        if not (isinstance(values, np.ndarray) and values.dtype == self._serializer.dtype):
            accept = self._accept_value
            values = [accept(v) for v in (values.tolist() if isinstance(values, np.ndarray) else values)]
        return keys, values

    def _insert_sorted(self, keys, values) -> None:
        """Insert a sorted batch key by key; on failure, undo the keys already done."""
        undo = []  # (key, previous value or _MISSING)
        try:
            for key, value in zip(keys.tolist() if isinstance(keys, np.ndarray) else keys,
                                  values.tolist() if isinstance(values, np.ndarray) else values):
                previous = self.get(key, _MISSING)
                self[key] = value
                undo.append((key, previous))
        except BaseException:
            for key, previous in reversed(undo):
                if previous is _MISSING:
                    self._quiet_delete(key)
                else:
                    self[key] = previous
            raise

    def _quiet_delete(self, key) -> None:
        path, leaf = self._descend(key)
        i = bisect_left(leaf.keys, key)
        self._remove(path, leaf, i, i + 1)

    def _merge_rebuild(self, keys, values, parallelism: int = 1) -> None:
        """Replace the tree by one built from its entries merged with a sorted batch."""
        if self._n:
            old_keys, old_values = self._export()
            keys, values = merge_sorted(old_keys, old_values, keys, values)
        self._bulk_build(keys, values, parallelism)

    def _export(self) -> tuple[list | np.ndarray, list]:
        """All keys (an int64 array for int64 keys, built leaf run by leaf run so a large map
        never becomes one list of Python ints) and all values, in key order."""
        runs, keys, values = [], [], []
        for chunk_keys, chunk_values in self._chunks(None, None, (True, True), False, True):
            keys += chunk_keys
            values += chunk_values
            if self._key_kind == "int64" and len(keys) >= _EXPORT_RUN:
                runs.append(np.array(keys, np.int64))
                keys = []
        if self._key_kind != "int64":
            return keys, values
        runs.append(np.array(keys, np.int64))
        return np.concatenate(runs), values

    def _bulk_build(self, keys, values, parallelism: int = 1) -> None:
        """Build full leaves and inner levels bottom-up into new records, then swap trees.

        ``keys`` are sorted, unique and not empty (an int64 array or a list). Each level is
        three parallel sequences: node record ids, first keys, last keys. All or nothing: on
        CapacityError the new records are freed and the old tree is untouched.
        """
        created: list[int] = []
        totals = [0, 0]  # raw and stored page bytes

        def store(page: bytes) -> int:
            created.append(self._store.put(page))
            totals[0] += raw_size(page)
            totals[1] += len(page)
            return created[-1]

        kind, size = self._key_kind, self._node_size
        try:
            starts, ends = runs(len(keys), size, self._min_fill)
            recids = [store(page) for page in leaf_pages(keys, values, starts, ends, kind,
                                                         self._serializer, self._codec,
                                                         parallelism)]
            firsts, lasts = take(keys, starts), take(keys, ends - 1)
            n_leaves, n_inner, height = len(recids), 0, 1
            while len(recids) > 1:
                seps = separators(lasts[:-1], firsts[1:])
                starts, ends = runs(len(recids), size, self._min_children)
                recids = [store(encode_inner(seps[a:b - 1], recids[a:b], kind, self._codec))
                          for a, b in zip(starts.tolist(), ends.tolist())]
                firsts, lasts = take(firsts, starts), take(lasts, ends - 1)
                n_inner += len(recids)
                height += 1
        except BaseException:
            for recid in created:
                self._store.delete(recid)
            raise
        old = self._all_recids()
        self._replace_tree(recids[0], height, len(keys), n_leaves, n_inner, old)
        self._raw_total, self._stored_total = totals

    def _replace_tree(self, root: int, height: int, n: int, n_leaves: int, n_inner: int,
                      old: list[int]) -> None:
        """Install a new tree and free the records of the old one (which must not be shared)."""
        self._cache.clear()
        self._hint = None
        for recid in old:
            self._store.delete(recid)
        self._root, self._height, self._n = root, height, n
        self._n_leaves, self._n_inner = n_leaves, n_inner
        self._raw_total = self._stored_total = 0
        self._mods += 1

    def _all_recids(self) -> list[int]:
        """Record ids of every node, found by walking the inner nodes."""
        recids = [self._root]
        frontier = [self._root]
        for _ in range(self._height - 1):
            children = []
            for recid in frontier:
                node = self._cache.read(recid)
                children += node.children
            recids += children
            frontier = children
        return recids

    # -- descent ------------------------------------------------------------------------------

    def _descend(self, key) -> tuple[list, Leaf]:
        """``(path, leaf)``: the leaf whose range holds ``key`` and the ``(inner node, child
        index)`` pairs above it, root first. Remembers the leaf and its bounds as the hint."""
        cache = self._cache
        node = cache.node(self._root)
        path = []
        lo = hi = None
        for _ in range(self._height - 1):
            seps = node.keys
            i = bisect_right(seps, key)
            if i:
                lo = seps[i - 1]
            if i < len(seps):
                hi = seps[i]
            path.append((node, i))
            node = cache.node(node.children[i])
        self._hint, self._hint_lo, self._hint_hi = node, lo, hi
        return path, node

    def _descend_edge(self, last: bool) -> tuple[list, Leaf]:
        """``(path, leaf)`` of the last (or first) leaf."""
        cache = self._cache
        node = cache.node(self._root)
        path = []
        lo = hi = None
        for _ in range(self._height - 1):
            i = len(node.children) - 1 if last else 0
            if last and node.keys:
                lo = node.keys[-1]
            elif not last and node.keys:
                hi = node.keys[0]
            path.append((node, i))
            node = cache.node(node.children[i])
        self._hint, self._hint_lo, self._hint_hi = node, lo, hi
        return path, node

    def _bound(self, key):
        return None if key is None else self._as_key(key)

    # -- structural changes -------------------------------------------------------------------

    def _overflow_insert(self, path: list, leaf: Leaf, i: int, key, value) -> None:
        """Insert into a full leaf: into a sibling with room, else split."""
        if path and 0 < i < self._node_size and self._insert_via_sibling(path, leaf, i, key, value):
            return
        self._split_insert(path, leaf, i, key, value)

    def _insert_via_sibling(self, path: list, leaf: Leaf, i: int, key, value) -> bool:
        """Insert into a full leaf by evening it out with a sibling that has two free slots or
        more (as a B*-tree does), so random inserts fill leaves to ~80% rather than ~70%.
        False if neither sibling has room (nothing changed then)."""
        parent, ci = path[-1]
        for si in (ci - 1, ci + 1):
            if not 0 <= si < len(parent.children):
                continue
            sibling = self._cache.node(parent.children[si])
            if len(sibling) > self._node_size - 2:
                continue
            shape = self._shape()
            self._hint = None
            leaf.keys.insert(i, key)
            leaf.values.insert(i, value)
            left, right, sep_index = (sibling, leaf, si) if si < ci else (leaf, sibling, ci)
            parent.keys[sep_index] = redistribute(left, right, None)
            self._commit([leaf, sibling, parent], [], [], shape)
            self._n += 1
            self._mods += 1
            return True
        return False

    def _split_insert(self, path: list, leaf: Leaf, i: int, key, value) -> None:
        """Insert into a full leaf: split it, and every full ancestor, up to a new root."""
        size = self._node_size
        n_new = 1
        level = len(path) - 1
        while level >= 0 and len(path[level][0].children) >= size:
            n_new += 1
            level -= 1
        if level < 0:
            n_new += 1
        recids = self._new_recids(n_new)
        shape = self._shape()
        changed, created = [leaf], []
        self._hint = None
        keys, values = leaf.keys, leaf.values
        keys.insert(i, key)
        values.insert(i, value)
        m = size if i == size else 1 if i == 0 else (size + 1) // 2
        right = Leaf(recids.pop(), keys[m:], values[m:])
        del keys[m:], values[m:]
        created.append(right)
        self._n_leaves += 1
        sep, new_child = separator(keys[-1], right.keys[0]), right.recid
        for parent, ci in reversed(path):
            parent.keys.insert(ci, sep)
            parent.children.insert(ci + 1, new_child)
            changed.append(parent)
            n_children = len(parent.children)
            if n_children <= size:
                break
            m = n_children - 2 if ci + 1 == n_children - 1 else 2 if ci == 0 else n_children // 2
            sibling = Inner(recids.pop(), parent.keys[m:], parent.children[m:])
            sep = parent.keys[m - 1]
            del parent.keys[m - 1:], parent.children[m:]
            created.append(sibling)
            self._n_inner += 1
            new_child = sibling.recid
        else:
            root = Inner(recids.pop(), [sep], [self._root, new_child])
            created.append(root)
            self._root = root.recid
            self._height += 1
            self._n_inner += 1
        self._commit(changed, created, [], shape)
        self._n += 1
        self._mods += 1

    def _remove(self, path: list, leaf: Leaf, start: int, end: int) -> None:
        """Remove entries ``start:end`` of ``leaf`` and rebalance the nodes that underflow.

        Without the write cache, a full store may have no room for a merged node; the entries
        are then removed from their leaf alone (left under-full but not empty), so that a full
        map can still shrink.
        """
        keys, values = leaf.keys, leaf.values
        if len(keys) - (end - start) >= self._min_fill or not path:
            self._remove_in_leaf(leaf, start, end)
            return
        anchor, count, empties = keys[start], end - start, end - start == len(keys)
        try:
            self._remove_and_rebalance(path, leaf, start, end)
        except CapacityError:
            if self._write_cache or empties:
                raise
            leaf = self._descend(anchor)[1]  # the undone nodes are read back from the store
            start = bisect_left(leaf.keys, anchor)
            self._remove_in_leaf(leaf, start, start + count)

    def _remove_in_leaf(self, leaf: Leaf, start: int, end: int) -> None:
        keys, values = leaf.keys, leaf.values
        if self._write_cache:
            del keys[start:end], values[start:end]
            leaf.dirty = True
        else:
            removed_keys, removed_values = keys[start:end], values[start:end]
            del keys[start:end], values[start:end]
            try:
                self._write_through([leaf])
            except BaseException:
                keys[start:start] = removed_keys
                values[start:start] = removed_values
                raise
        self._n -= end - start
        self._mods += 1

    def _remove_and_rebalance(self, path: list, leaf: Leaf, start: int, end: int) -> None:
        keys, values = leaf.keys, leaf.values
        shape = self._shape()
        self._hint = None
        del keys[start:end], values[start:end]
        changed: dict[int, Leaf | Inner] = {leaf.recid: leaf}
        removed: list[Leaf | Inner] = []
        node = leaf
        level = len(path) - 1
        try:
            while level >= 0 and len(node) < (self._min_fill if node.is_leaf else self._min_children):
                parent, ci = path[level]
                changed[parent.recid] = parent
                si = ci - 1 if ci else ci + 1
                sibling = self._cache.node(parent.children[si])
                changed[sibling.recid] = sibling
                left, right, sep_index = (sibling, node, si) if si < ci else (node, sibling, ci)
                capacity = self._node_size
                if len(left) + len(right) <= capacity:
                    merge_into(left, right, parent.keys[sep_index])
                    del parent.keys[sep_index], parent.children[sep_index + 1]
                    removed.append(right)
                    del changed[right.recid]
                    if right.is_leaf:
                        self._n_leaves -= 1
                    else:
                        self._n_inner -= 1
                    node = parent
                    level -= 1
                else:
                    parent.keys[sep_index] = redistribute(left, right, parent.keys[sep_index])
                    break
            root = self._cache.node(self._root)
            if not root.is_leaf and len(root.children) == 1:
                removed.append(root)
                changed.pop(root.recid, None)
                self._root = root.children[0]
                self._height -= 1
                self._n_inner -= 1
        except BaseException:
            if not self._write_cache:  # dirty nodes would be lost: only clean ones are dropped
                self._undo(list(changed.values()) + removed, [], shape)
            raise
        self._commit(list(changed.values()), [], removed, shape)
        self._n -= end - start
        self._mods += 1

    def _new_recids(self, count: int) -> list[int]:
        """``count`` empty records for nodes about to be created: all of them or none."""
        recids = []
        try:
            for _ in range(count):
                recids.append(self._store.put(b""))
        except BaseException:
            for recid in recids:
                self._store.delete(recid)
            raise
        return recids

    def _shape(self) -> tuple:
        return (self._root, self._height, self._n_leaves, self._n_inner,
                self._raw_total, self._stored_total)

    def _commit(self, changed: list, created: list, removed: list, shape: tuple) -> None:
        """Make a structural change stick: mark dirty (write cache) or write through, then free
        the records of removed nodes. On a failed write-through everything is undone."""
        for node in created:
            self._cache.add(node)
        if self._write_cache:
            for node in changed:
                node.dirty = True
            for node in created:
                node.dirty = True
        else:
            try:
                self._write_through(changed + created)
            except BaseException:
                self._undo(changed + removed, created, shape)
                raise
        for node in removed:
            self._cache.discard(node.recid)
            self._raw_total -= node.raw_bytes
            self._stored_total -= node.stored_bytes
            self._store.delete(node.recid)

    def _undo(self, changed: list, created: list, shape: tuple) -> None:
        """Forget an in-memory change: its nodes are read back from the store, as they were."""
        for node in changed:
            self._cache.discard(node.recid)
        for node in created:
            self._cache.discard(node.recid)
            self._store.delete(node.recid)
        (self._root, self._height, self._n_leaves, self._n_inner,
         self._raw_total, self._stored_total) = shape
        self._hint = None

    def _commit_leaf(self, leaf: Leaf) -> None:
        """Write through a leaf changed in place (dropping it from the cache, so that it is read
        back unchanged, if the write fails)."""
        try:
            self._write_through([leaf])
        except BaseException:
            self._cache.discard(leaf.recid)
            self._hint = None
            raise

    # -- node IO ------------------------------------------------------------------------------

    def _load_node(self, recid: int) -> Leaf | Inner:
        page = self._store.view(recid)
        if not len(page):
            raise CorruptionError(f"TreeMap node record {recid} is empty")
        if page[0] & 1:
            keys, children = decode_inner(page, self._key_kind)
            node = Inner(recid, keys, children)
        else:
            keys, values = decode_leaf(page, self._key_kind, self._serializer)
            node = Leaf(recid, keys, values)
        node.stored_bytes = len(page)
        node.raw_bytes = len(page) if page[0] < 2 else raw_size(page)  # codec bits 0: raw
        return node

    def _encode(self, node: Leaf | Inner) -> bytes:
        if node.is_leaf:
            return encode_leaf(node.keys, node.values, self._key_kind, self._serializer, self._codec)
        return encode_inner(node.keys, node.children, self._key_kind, self._codec)

    def _write_node(self, node: Leaf | Inner) -> None:
        """Encode ``node`` and store it; on CapacityError nothing changes (it stays dirty)."""
        page = self._encode(node)
        self._store.update(node.recid, page)
        raw = len(page) if self._codec is None else raw_size(page)
        self._raw_total += raw - node.raw_bytes
        self._stored_total += len(page) - node.stored_bytes
        node.raw_bytes, node.stored_bytes = raw, len(page)
        node.dirty = False

    def _write_through(self, nodes: list) -> None:
        """Write nodes now; if one write fails, restore the old bytes of those already written.

        The restore cannot allocate: each record goes back to its old size class, whose free
        list holds the chunk its update just released.
        """
        done = []
        try:
            for node in nodes:
                old = (self._store.get(node.recid), node.raw_bytes, node.stored_bytes)
                self._write_node(node)
                done.append((node, old))
        except BaseException:
            for node, (page, raw, stored) in reversed(done):
                self._store.update(node.recid, page)
                self._raw_total += raw - node.raw_bytes
                self._stored_total += stored - node.stored_bytes
                node.raw_bytes, node.stored_bytes = raw, stored
            raise

    def _trim(self, strict: bool = True) -> None:
        self._cache.trim(strict)
        if self._hint is not None and self._hint.recid not in self._cache:
            self._hint = None

    # -- write cache timer --------------------------------------------------------------------

    def _arm_timer(self) -> None:
        """Schedule a flush of the dirty nodes ``flush_delay`` ms after the first change."""
        if self._flush_delay is None or self._timer is not None or not self._write_cache:
            return
        self._timer = threading.Timer(self._flush_delay / 1000, self._timed_flush)
        self._timer.daemon = True
        self._timer.start()

    def _timed_flush(self) -> None:
        with self._lock:
            self._timer = None
            if self._closed:
                return
            try:
                self._flush_nodes()
            except MemoryError:
                pass  # the nodes stay dirty; the next flush() or close() reports the error

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # -- introspection and lifetime -----------------------------------------------------------

    @property
    def meta_recid(self) -> int:
        """The store record holding this map's metadata (how a DB finds it again)."""
        return self._meta_recid

    @property
    def options(self) -> dict:
        """The options this map was built with, as ``TreeMap.in_store`` takes them."""
        return dict(key=self._key_kind, value=self._serializer.name, node_size=self._node_size,
                    compression=None if self._codec is None else self._codec.name,
                    write_cache=self._write_cache, flush_delay=self._flush_delay,
                    cache_size=self._cache.capacity)

    def stats(self) -> TreeStats:
        with self._lock:
            self._check_open()
            return TreeStats(
                n_entries=self._n, height=self._height, n_leaves=self._n_leaves,
                n_inner=self._n_inner, node_size=self._node_size, cached_nodes=len(self._cache),
                dirty_nodes=self._cache.n_dirty(), raw_page_bytes=self._raw_total,
                stored_page_bytes=self._stored_total,
                reserved_bytes=self._store.arena.reserved_bytes,
                used_bytes=self._store.arena.used_bytes)

    def __repr__(self) -> str:
        if self._closed:
            return "<TreeMap (closed)>"
        s = self.stats()
        per_entry = f"{s.bytes_per_entry:.2f} B/entry" if s.n_entries else "empty"
        return (f"<TreeMap {s.n_entries:,} entries, key={self._key_kind}, "
                f"value={self._serializer.name}, {format_bytes(s.reserved_bytes)} reserved, "
                f"{per_entry}, height {s.height}, {s.n_leaves:,} leaves>")

    def _repr_html_(self) -> str:
        if self._closed:
            return "<p><b>TreeMap</b> (closed)</p>"
        s = self.stats()
        codec = "none" if self._codec is None else self._codec.name
        rows = [("entries", f"{s.n_entries:,}"), ("key / value", f"{self._key_kind} / {self._serializer.name}"),
                ("reserved", format_bytes(s.reserved_bytes)),
                ("bytes/entry", f"{s.bytes_per_entry:.2f}" if s.n_entries else "-"),
                ("height", s.height), ("leaves / inner nodes", f"{s.n_leaves:,} / {s.n_inner:,}"),
                ("node size", s.node_size), ("leaf fill", f"{s.leaf_fill:.0%}"),
                ("compression", f"{codec}, ratio {s.compression_ratio:.2f}"),
                ("cached / dirty nodes", f"{s.cached_nodes:,} / {s.dirty_nodes:,}")]
        body = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{v}</td></tr>" for k, v in rows)
        return f"<table><caption><b>TreeMap</b></caption>{body}</table>"

    def flush(self) -> None:
        """Write every dirty node and the metadata into the store; a file map without
        transactions also pushes its pages to the file (with ``durability="commit"`` nothing is
        durable before :meth:`commit`)."""
        with self._lock:
            self._check_open()
            self._flush_nodes()
            if self._owns_store:
                self._store.flush()

    def _flush_nodes(self) -> None:
        self._cache.write_dirty()
        self._write_meta()

    def close(self) -> None:
        """Flush, then release the memory (a standalone map; a file is committed, or flushed
        with ``durability="none"``) or leave the shared store open. Later use raises
        ClosedError. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._cancel_timer()
            written = False
            try:
                if not self._store.arena.readonly and (
                        not self._owns_store or self._store.arena.path is not None):
                    self._flush_nodes()
                written = True
            finally:
                self._closed = True
                self._cache.clear()
                self._hint = None
                if self._owns_store:
                    self._store.close(save=written)  # never commit a half-written tree

    def _write_back(self) -> None:
        self._flush_nodes()

    def _discard(self) -> None:
        self._release()

    @property
    def closed(self) -> bool:
        return self._closed

    def copy(self) -> TreeMap:
        """A new anonymous TreeMap with the same entries and options (bulk-built)."""
        with self._lock:
            self._check_open()
            options = self.options
            twin = TreeMap(limit=self._store.arena.limit_bytes, **options)
            keys, values = self._export()
            if len(keys):
                twin._bulk_build(keys, values)
            return twin

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the TreeMap is closed")

    def _check(self) -> None:
        """Assert the tree's invariants: key order, separator bounds, node fill, equal depth,
        counts, that the tree's records are exactly the live records it accounts for, and that
        every clean cached node equals its stored page."""
        with self._lock:
            self._check_open()
            counts = {"entries": 0, "leaves": 0, "inner": 0}
            recids: list[int] = []

            def visit(recid, depth, lo, hi):
                recids.append(recid)
                node = self._cache.read(recid)
                keys = node.keys
                assert all(a < b for a, b in zip(keys, keys[1:])), f"node {recid}: keys out of order"
                if keys:
                    assert lo is None or lo <= keys[0], f"node {recid}: key below its separator"
                    assert hi is None or keys[-1] < hi, f"node {recid}: key at/above its separator"
                is_root = recid == self._root
                if node.is_leaf:
                    assert depth == self._height, f"leaf {recid} at depth {depth} of {self._height}"
                    assert len(keys) == len(node.values)
                    assert len(keys) <= self._node_size, f"leaf {recid} overfull"
                    assert is_root or keys, f"leaf {recid} is empty"
                    counts["entries"] += len(keys)
                    counts["leaves"] += 1
                    return
                assert len(node.children) == len(keys) + 1
                assert 2 <= len(node.children) <= self._node_size, \
                    f"inner node {recid} has {len(node.children)} children"
                counts["inner"] += 1
                bounds = [lo] + keys + [hi]
                for i, child in enumerate(node.children):
                    visit(child, depth + 1, bounds[i], bounds[i + 1])

            visit(self._root, 1, None, None)
            assert counts["entries"] == self._n, (counts["entries"], self._n)
            assert counts["leaves"] == self._n_leaves, (counts["leaves"], self._n_leaves)
            assert counts["inner"] == self._n_inner, (counts["inner"], self._n_inner)
            assert len(set(recids)) == len(recids), "a record is shared by two nodes"
            for recid in recids:
                assert recid in self._store, f"node record {recid} is missing"
            for node in self._cache:
                assert node.recid in recids, f"cached node {node.recid} is not in the tree"
                if not node.dirty:
                    stored = self._load_node(node.recid)
                    assert stored.keys == node.keys, f"clean node {node.recid} differs from its page"
                    assert getattr(stored, "children", None) == getattr(node, "children", None)
                    assert getattr(stored, "values", None) == getattr(node, "values", None)
            if self._owns_store:
                assert len(self._store) == len(recids) + 1, \
                    f"store holds {len(self._store)} records, tree {len(recids)} + meta"
            if not self._write_cache:
                assert not any(node.dirty for node in self._cache), "dirty node without write cache"
            self._store._check()

    # -- persistence --------------------------------------------------------------------------

    def _write_meta(self) -> None:
        fixed = _META.pack(_META_MAGIC, self._root, self._height, self._n, self._n_leaves,
                           self._n_inner, self._raw_total, self._stored_total)
        options = json.dumps({"key": self._key_kind, "value": self._serializer.name,
                              "node_size": self._node_size}).encode()
        self._store.update(self._meta_recid, fixed + options)

    def _release(self) -> None:
        """Drop every decoded node, dirty ones included, and stop the flush timer: before the
        store rolls back, so nothing written since the last commit is written again."""
        self._cancel_timer()
        self._cache.clear()
        self._hint = None

    def _reload(self, meta_recid: int | None = None) -> None:
        """Re-read the tree from its metadata record (``meta_recid`` when it moved, as in a
        compacted file) with an empty node cache: after a rollback, or when a reader's arena
        picked up another process's commit. Iterators in progress raise RuntimeError on their
        next step."""
        with self._lock:
            self._release()
            self._mods += 1
            if meta_recid is not None:
                self._meta_recid = meta_recid
            self._load_meta()

    def _live_bytes(self) -> int:
        """Bytes of this tree's pages as last written into the store."""
        return self._stored_total

    def _invalidate(self) -> None:
        """Close without writing anything: the store no longer holds this tree (a rollback
        dropped it, having been created after the last commit)."""
        with self._lock:
            self._release()
            self._closed = True

    def _load_meta(self) -> None:
        try:
            meta = parse_meta(self._store.get(self._meta_recid))
        except KeyError:
            raise CorruptionError(f"TreeMap metadata record {self._meta_recid} is missing") from None
        for name, mine in (("key", self._key_kind), ("value", self._serializer.name),
                           ("node_size", self._node_size)):
            if meta.options.get(name) != mine:
                raise ValueError(f"this TreeMap was created with {name}={meta.options.get(name)!r}; "
                                 f"open it with that, not {name}={mine!r}")
        (self._root, self._height, self._n, self._n_leaves, self._n_inner,
         self._raw_total, self._stored_total) = meta.shape


@dataclass(frozen=True)
class TreeMeta:
    """The metadata record of a TreeMap: its shape and its fixed options."""

    root: int
    height: int
    n_entries: int
    n_leaves: int
    n_inner: int
    raw_bytes: int
    stored_bytes: int
    options: dict  # key, value, node_size

    @property
    def shape(self) -> tuple:
        return (self.root, self.height, self.n_entries, self.n_leaves, self.n_inner,
                self.raw_bytes, self.stored_bytes)


def parse_meta(meta: bytes) -> TreeMeta:
    """Decode a TreeMap metadata record; CorruptionError if it is not one."""
    if len(meta) < _META.size or meta[:8] != _META_MAGIC:
        raise CorruptionError("TreeMap metadata is damaged (bad magic or size)")
    fields = _META.unpack_from(meta)[1:]
    try:
        options = json.loads(meta[_META.size:])
    except ValueError:
        raise CorruptionError("TreeMap metadata options are damaged") from None
    if not isinstance(options, dict):
        raise CorruptionError("TreeMap metadata options are damaged")
    return TreeMeta(*fields, options=options)


def standalone_meta_recid(root: bytes) -> int:
    """The metadata record named by the store root of a standalone TreeMap file."""
    if len(root) != 16 or root[:8] != _ROOT_MAGIC:
        raise CorruptionError("the file holds no TreeMap (another collection or a DB?)")
    return struct.unpack_from("<Q", root, 8)[0]


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()
