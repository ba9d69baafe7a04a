"""TreeMap: a sorted map whose entries live in encoded B+tree pages in a record store (layer 6).

This module is the facade: the ``MutableMapping`` and sorted-map API, key admission, the lock,
the map's lifetime (creation, opening, flush, close, and the hooks of a DB, a reader and a file's
transactions), its metadata record and its flush timer. The B+tree under it, with its layout,
inserts, deletes and the hint, is :class:`offheap.treemap.tree.Tree`.

Memory. Decoded nodes (Python lists) are kept in a :class:`~offheap.treemap.nodecache.NodeCache`
within a heap budget of ``cache_bytes`` (inner nodes first, leaves in the rest; ``cache_size``
also caps the nodes of each kind). With ``write_cache=True`` a changed node
stays there, dirty, and is encoded once: when evicted, on :meth:`TreeMap.flush`/:meth:`TreeMap.close`,
or ``flush_delay`` milliseconds after the first insert (a daemon timer,
:mod:`offheap.treemap.timer`). With ``write_cache=False`` every change is encoded and written
through at once, as MapDB does without its write cache.

Failure atomicity. Record ids for the nodes a split will create are taken from the store before
anything changes. With the write cache, a change touches only cached nodes and cannot fail; the
store is written on eviction, before an operation starts, so a :class:`CapacityError` there
leaves the tree as it was (the unwritten node stays cached and dirty). Deletions and reads never
fail that way: when the store is full they let the cache grow past its budget instead, so a
full map can always be made smaller. Without the write cache, a failed write is undone
(:mod:`offheap.treemap.writethrough`).

Thread safety. Every public method holds the map's lock for its whole duration, so calls from
several threads, and the ``flush_delay`` timer thread, see whole operations. An iterator takes
the lock only while it fetches the next leaf; changing the map's size while iterating raises
RuntimeError, as with ``dict``.
"""

from __future__ import annotations

import os
import threading
from bisect import bisect_left
from collections.abc import Iterator, Mapping, MutableMapping
from types import MappingProxyType
from typing import Any

import numpy as np

from offheap.arena.arena import Arena
from offheap.collection.dictapi import DictAPI
from offheap.collection.filemap import StandaloneFileMap, check_reopenable
from offheap.collection.locks import new_lock
from offheap.collection.readers import open_file_reader
from offheap.errors import ClosedError, CorruptionError, ReadOnlyError
from offheap.kernels.bounds import INT64_MAX, INT64_MIN
from offheap.kernels import native
from offheap.kernels.codecs import get_codec
from offheap.kernels.sizes import ByteLimit
from offheap.store.records import RecordStore
from offheap.store.serializers import get_serializer
from offheap.treemap.admission import SCALAR_TYPES, Admission
from offheap.treemap.arrays import values_out
from offheap.treemap.meta import (
    FIXED_OPTIONS,
    FORMAT_VERSION,
    READABLE_VERSIONS,
    check_fixed_options,
    parse_meta,
    standalone_meta_recid,
    standalone_root,
)
from offheap.treemap.nodecache import DEFAULT_CACHE_BYTES
from offheap.treemap.nodestore import NodeStore
from offheap.treemap.page import compiled_kinds
from offheap.treemap.reader import TreeReader
from offheap.treemap.slots import TreeSlotsBase
from offheap.treemap.stats import TreeStats, describe, describe_html, tree_stats
from offheap.treemap.timer import FlushTimer
from offheap.treemap.tree import MISSING, Tree
from offheap.treemap.upgrade import upgrade
from offheap.treemap.positions import position_in
from offheap.treemap.views import SortedRangeAPI

_compiled_pages = native.compiled_module("offheap.treemap._pages")

_CLOSED = "the TreeMap is closed"


class TreeMap(TreeSlotsBase, StandaloneFileMap, SortedRangeAPI, DictAPI, MutableMapping):
    """A sorted ``MutableMapping`` stored off the Python heap in compressed B+tree pages.

    ``TreeMap(data, /, **options)``: ``data`` is what ``dict(data)`` takes (a mapping or
    ``(key, value)`` pairs), and for str keys further keyword arguments that are not options are
    entries, as in ``TreeMap(key="str", a=1)``. ``key`` is ``"int64"``, ``"str"`` or ``"bytes"``; ``value`` names the value serializer
    (``"object"``, ``"int64"``, ``"float64"``, ``"str"``, ``"bytes"``). Iteration is in key order.
    ``node_size`` bounds entries per leaf and children per inner node; ``compression`` is a codec
    name applied per page (kept only where it helps); ``write_cache``, ``flush_delay`` (ms) and
    ``cache_bytes`` (the heap budget of decoded nodes, 8 MiB by default) and ``cache_size``
    (None, or at most that many decoded nodes of each kind) are described in the module
    docstring. ``limit`` caps the memory in bytes (:class:`CapacityError` beyond it); with
    the write cache, changes not yet written into the store may hold an eighth of it more (at
    least 1 MiB) before they are written (:func:`~offheap.treemap.nodecache.unwritten_budget`).

    With ``path`` the map lives in that file and ``TreeMap(path=...)`` alone opens it again: the
    file remembers ``key``, ``value`` and ``node_size`` (one given otherwise is a ValueError). With
    ``durability="commit"`` (the default) :meth:`commit` makes every change durable at once,
    :meth:`rollback` drops the changes since, and :meth:`close` commits; ``durability="none"``
    writes through to the file, like MapDB without transactions (see ``docs/durability.md``).
    :meth:`reader` opens a read-only :class:`~offheap.treemap.reader.TreeReader` of the file,
    which follows the commits of the one writer process (``readonly=True`` here is a TypeError
    naming it). ``verify`` checks the page checksums on open; ``recover=True`` opens a file
    that was not closed cleanly (for :func:`offheap.salvage`); ``create=False`` opens an
    existing file only (:class:`~offheap.errors.MissingFileError` when the path names nothing).
    ``allow_pickle=True`` lets this open read and write values stored with pickle, which a
    file's author could make run any code: without it they raise
    :class:`~offheap.errors.PickleNotAllowedError` (:mod:`offheap.store.pickled`); an anonymous
    map always allows them.
    """

    # A new_lock() (a MapLock, which the compiled item slots take without a Python call, or an
    # RLock), or the store owner's; the hot paths acquire and release it without a with-block
    # (measurably cheaper than one).
    _lock: threading.RLock

    def __init__(self, data=(), /, *, key=None, value=None, node_size: int | None = None,
                 compression=None, write_cache: bool = True, flush_delay: float | None = None,
                 cache_bytes: int = DEFAULT_CACHE_BYTES, cache_size: int | None = None,
                 limit: ByteLimit = None, path=None,
                 durability: str = "commit", readonly: bool = False, verify: bool = True,
                 recover: bool = False, create: bool = True, allow_pickle: bool = False,
                 **entries) -> None:
        self._refuse_readonly(readonly)
        options = dict(key=key, value=value, node_size=node_size, compression=compression,
                       write_cache=write_cache, flush_delay=flush_delay, cache_bytes=cache_bytes,
                       cache_size=cache_size)
        self._build(options, NEW_MAP_DEFAULTS, limit=limit, path=path, durability=durability,
                    verify=verify, recover=recover, create=create, allow_pickle=allow_pickle)
        self.update(data, **entries)

    def _build(self, options: dict, new_defaults: Mapping[str, Any], *, limit: ByteLimit, path,
               durability: str, verify: bool, recover: bool, create: bool,
               allow_pickle: bool) -> None:
        """Set up the map of ``options`` (the constructor's; a fixed option None: the file's, or
        ``new_defaults``' for a new map), in memory or in the file at ``path``; the other
        arguments are the constructor's. A TreeSet builds its tree here with its own defaults."""
        if path is None:
            store = RecordStore(Arena.anonymous(limit_bytes=limit))
            self._setup(store, owns_store=True, meta_recid=None, allow_pickle=True,
                        **with_stored_options(options, new_defaults))
        else:
            store = RecordStore.file(path, limit_bytes=limit, durability=durability,
                                     verify=verify, recover=recover, create=create)
            self._open_file(store, options, new_defaults, allow_pickle)

    def _open_file(self, store: RecordStore, options: dict, new_defaults: Mapping[str, Any],
                   allow_pickle: bool) -> None:
        """Set up on the store of a map's own file: the map it holds, or a new empty one."""
        try:
            meta_recid = standalone_meta_recid(store.root) if store.root else None
            self._setup(store, owns_store=True, meta_recid=meta_recid, allow_pickle=allow_pickle,
                        **with_stored_options(options, new_defaults, store, meta_recid))
            if meta_recid is None:
                store.root = standalone_root(self._meta_recid)
                self.commit()  # a new file holds an empty TreeMap from its first moment on disk
        except BaseException:
            store.arena.close()
            raise
        self._track_file()

    @classmethod
    def reader(cls, path: str | os.PathLike[str], key=None, value=None, *,
               limit: ByteLimit = None, verify: bool = True, recover: bool = False,
               allow_pickle: bool = False, **options) -> TreeReader:
        """A read-only :class:`~offheap.treemap.reader.TreeReader` of the TreeMap file at
        ``path``, beside the one writer process (:mod:`offheap.collection.readers`). ``key``,
        ``value`` and the other options are the constructor's; ``limit``, ``verify``,
        ``recover`` and ``allow_pickle`` apply to this open."""
        lock = new_lock()

        def build(store: RecordStore) -> TreeMap:
            tree = cls.__new__(cls)
            meta_recid = standalone_meta_recid(store.root)
            given = dict(key=key, value=value, node_size=options.pop("node_size", None))
            tree._setup(store, owns_store=True, meta_recid=meta_recid, lock=lock,
                        allow_pickle=allow_pickle,
                        **with_stored_options(given, NEW_MAP_DEFAULTS, store, meta_recid),
                        **options)
            return tree

        reader = open_file_reader(path, build, TreeReader, limit_bytes=limit, verify=verify,
                                  recover=recover, lock=lock)
        assert isinstance(reader, TreeReader)  # open_file_reader builds the class it is given
        return reader

    @classmethod
    def in_store(cls, store: RecordStore, key="int64", value="object",
                 meta_recid: int | None = None, *, allow_pickle: bool, lock=None,
                 **options) -> TreeMap:
        """A map kept in a shared store (a :class:`~offheap.db.DB`); ``meta_recid`` reopens one.
        ``allow_pickle`` is the opener's (:class:`TreeMap`): a file DB passes its own.

        Its metadata (format, root, height, counts) is the record :attr:`meta_recid`, written by
        :meth:`flush` and :meth:`close`; the store itself stays open when the map closes.
        ``lock`` (from :func:`~offheap.collection.locks.new_lock`) is the lock of the store's
        owner: maps sharing a store share it, so one map's ``flush_delay`` timer never writes
        while another map does.
        """
        tree = cls.__new__(cls)
        tree._setup(store, owns_store=False, meta_recid=meta_recid, key=key, value=value,
                    lock=lock, allow_pickle=allow_pickle, **options)
        return tree

    def _setup(self, store: RecordStore, *, owns_store: bool, meta_recid: int | None, key, value,
               allow_pickle: bool, node_size: int = 32, compression=None,
               write_cache: bool = True, flush_delay: float | None = None,
               cache_bytes: int = DEFAULT_CACHE_BYTES, cache_size: int | None = None,
               lock=None) -> None:
        check_fixed_options(key, node_size)
        if flush_delay is not None and not flush_delay > 0:
            raise ValueError(f"flush_delay is in milliseconds and must be > 0, got {flush_delay!r}")
        self._closed = True  # until fully set up, so close() in an error path does nothing
        self._store = store
        self._owns_store = owns_store
        serializer = get_serializer(value)
        codec = None if compression in (None, "none") else get_codec(compression)
        self._admit = Admission(key, serializer, allow_pickle)
        self._flush_delay = flush_delay
        self._lock = new_lock() if lock is None else lock
        self._tree = Tree(NodeStore(store, key, serializer, codec), node_size, cache_bytes,
                          cache_size, bool(write_cache))
        self._hint = self._tree.hint
        self._budgeted = self._tree.cache.budget_bytes is not None  # limit and write cache
        self._timer = (FlushTimer(flush_delay, self._flush_if_open, self._lock)
                       if flush_delay is not None and write_cache else None)
        if meta_recid is None:
            self._meta_recid = store.put(b"")
            try:
                self._tree.create()
            except BaseException:
                store.delete(self._meta_recid)
                raise
            self._write_meta()
        else:
            self._meta_recid = meta_recid
            self._load_meta()
        self._closed = False
        self._bind_slots()

    # -- lookups ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._tree.n_entries

    def _bind_slots(self) -> None:
        """Attach the item slots (:mod:`offheap.treemap.slots`) to this open map's tree, when it
        has a compiled descent; else every read goes through :meth:`_lookup`."""
        tree, admit = self._tree, self._admit
        if tree.descent is not None:
            stores = (tree.write_cache and not self._budgeted and self._timer is None
                      and admit.stored_as_is)  # Tree.put's cases that need no Python
            nodes = tree.nodes
            kinds = compiled_kinds(nodes.key_kind, nodes.serializer)
            around = (nodes, *kinds) if (stores and tree.around is not None and kinds is not None
                                         and nodes.raw_pages) else None
            self._attach_slots(self._lock, tree.descent, tree.cache, admit.key_type,
                               tuple(SCALAR_TYPES), admit.fresh, tree if stores else None,
                               tree.hint, tree.node_size, admit.stored_as_is, around)

    def _lookup(self, key, default, stored: bool = False):
        """The value of ``key`` (a fresh object, :meth:`Admission.fresh`; with ``stored``, as
        the leaf holds it, which only a membership test may use), or ``default``: the
        hot read path, by the compiled descent when there is one, else through the leaf of the
        tree's hint when it holds ``key`` (a closed map's hint holds nothing), else the leaf a
        descent finds. A key that no key of the tree can equal is a miss."""
        lock = self._lock
        lock.acquire()
        try:
            admit = self._admit
            if type(key) is not admit.key_type:
                key = admit.lookup(key)
                if key is None:
                    self._check_open()
                    return default
            tree = self._tree
            descent = tree.descent
            if descent is not None:  # the compiled descent, which reads cached leaves too
                if self._closed:
                    raise ClosedError(_CLOSED)
                if tree.cache.over_capacity:
                    tree.trim(strict=False)
                shape = tree.shape
                value = descent.get(shape.root, shape.height, key, MISSING)
                if value is MISSING:
                    return default
                return value if stored or type(value) in SCALAR_TYPES else admit.fresh(value)
            hint = self._hint
            leaf = hint.leaf
            if (leaf is None or (hint.lo is not None and key < hint.lo)
                    or (hint.hi is not None and key >= hint.hi)):
                self._check_open()
                leaf = tree.leaf_for(key)
            keys = leaf.keys
            i = bisect_left(keys, key)
            if i < len(keys) and keys[i] == key:
                value = leaf.values[i]
                return value if stored or type(value) in SCALAR_TYPES else admit.fresh(value)
            return default
        finally:
            lock.release()

    def get_many(self, keys, default=None):
        """The values of many keys, in the order given: an ndarray for a typed value serializer
        (``"int64"``, ``"float64"``), else a list; an absent key gives ``default`` (with a typed
        serializer and ``default=None``, KeyError, as ``LongHashMap.get_many``). ``keys`` is
        any iterable of keys, an int64 array included. The keys are looked up in ascending
        order, so the keys of one leaf cost a single descent: O(k log k) for the sort and one
        descent per leaf reached. The lock is held throughout, so the values are one state of
        the map."""
        admit = self._admit
        admitted = [admit.key(key) for key in
                    (keys.tolist() if isinstance(keys, np.ndarray) else keys)]
        order = sorted(range(len(admitted)), key=admitted.__getitem__)
        with self._lock:
            self._check_open()
            found = self._tree.get_sorted([admitted[i] for i in order], MISSING)
        values = [MISSING] * len(admitted)
        fresh = admit.fresh if admit.copies_values else None
        for i, value in zip(order, found):
            values[i] = value if fresh is None or value is MISSING else fresh(value)
        return values_out(values, MISSING, default, self._tree.nodes.serializer.dtype)

    def _array_dtypes(self) -> tuple[np.dtype, np.dtype]:
        """The dtypes of this map's key and value arrays (:mod:`offheap.treemap.arrays`)."""
        dtype = self._tree.nodes.serializer.dtype
        return (np.dtype(np.int64) if self._admit.key_kind == "int64" else np.dtype(object),
                np.dtype(object) if dtype is None else dtype)

    # -- changes ------------------------------------------------------------------------------

    def _put_item(self, key, value, keep: bool = False) -> None:
        """``self[key] = value``: what the store slot (:mod:`offheap.treemap.slots`) does not
        do in C itself, and all of it on the reference path. With ``keep`` (a TreeSet's
        ``add``) a present key keeps its value and nothing is written; a key not exactly of the
        key type (``True`` or ``1.0`` for ``1``) or a map under a ``limit`` budget is looked up
        first, so an equal key present is no error and the budget counts only what is stored."""
        lock = self._lock
        lock.acquire()
        try:
            admit = self._admit
            normalized = type(key) is admit.key_type and (
                admit.key_type is not int or INT64_MIN <= key <= INT64_MAX)
            if (keep and (not normalized or self._budgeted)
                    and self._lookup(key, MISSING, True) is not MISSING):
                return
            if not normalized:
                key = admit.key(key)
            if not (admit.copies_values and type(value) in SCALAR_TYPES):
                value = admit.value(value)  # PickleNotAllowedError before anything changes
            if self._closed:
                raise ClosedError(_CLOSED)
            if self._budgeted:
                self._tree.cache.admit(admit.held_bytes(key, value))
            if self._tree.put(key, value, keep) and self._timer is not None:
                self._timer.arm()
        finally:
            lock.release()

    def _delete_item(self, key) -> None:
        """``del self[key]`` (the slot's :mod:`offheap.treemap.slots`)."""
        if self._pop(key, None) is MISSING:  # the value is not read: a pickled one goes too
            raise KeyError(key)

    def setdefault(self, key, default=None, /):
        """``self[key]`` if present, else store ``default`` and return it: one atomic step."""
        with self._lock:
            value = self._lookup(key, MISSING)
            if value is MISSING:
                self[key] = value = default
            return value

    def pop(self, key, *default):
        value = self._pop(key, self._admit.fresh)
        if value is MISSING:
            if default:
                return default[0]
            raise KeyError(key)
        return value

    def _pop(self, key, take):
        """Remove ``key`` and return ``take(value)`` (the value itself if ``take`` is None),
        or MISSING; nothing is removed if ``take`` raises."""
        with self._lock:
            self._check_open()
            found = self._admit.lookup(key)
            value = MISSING if found is None else self._tree.pop(found, take)
            if value is not MISSING:
                self._arm_timer()
            return value

    def popitem(self, index: int = -1, *, last: bool | None = None):
        """Remove and return the ``(key, value)`` at position ``index`` (negative: from the end),
        as ``SortedDict.popitem`` does; ``last=True`` is the largest key, ``last=False`` the
        smallest. KeyError when the map is empty, IndexError for a position outside it.
        O(height * node_size)."""
        if last is not None:
            index = -1 if last else 0
        elif isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"popitem's index must be an int, not {type(index).__name__} "
                            f"(last=True or last=False name an end)")
        with self._lock:
            self._check_open()
            n = self._tree.n_entries
            if not n:
                raise KeyError("popitem(): TreeMap is empty")
            item = self._tree.pop_at(position_in(index, n), self._admit.fresh)
            self._arm_timer()
            return item

    def clear(self) -> None:
        """Remove every entry; the tree's records are freed and an empty root leaf remains."""
        with self._lock:
            self._check_open()
            self._tree.clear()

    def delete_range(self, lo=None, hi=None, inclusive=(True, True)) -> int:
        """Remove every key in the range (bounds as in :meth:`irange`); return how many went.

        Works leaf by leaf, rebalancing as it goes. With the write cache it cannot fail; without
        it each leaf's removal is atomic, and a :class:`CapacityError` stops it between leaves.
        """
        with self._lock:
            self._check_open()
            admit = self._admit
            removed = self._tree.delete_range(admit.bound(lo), admit.bound(hi), inclusive)
            if removed:
                self._arm_timer()
            return removed

    def update(self, other=(), /, **kwargs) -> None:
        """As ``dict.update``: from a mapping (anything with ``keys()``) or ``(key, value)``
        pairs, then keyword arguments (str keys). Columns of keys and values are
        :meth:`put_many`; the batch goes in as :meth:`put_many` describes."""
        with self._lock:
            self._check_open()
            if isinstance(other, TreeMap):
                other = list(other.items())  # one scan, not one lookup per key
            self._merge(*self._admit.batch(other, kwargs), 1)

    def put_many(self, keys, values, *, parallelism: int = 1) -> None:
        """Insert or overwrite many entries from a column of keys and a column of values of the
        same length (``keys`` a numpy integer array or any sequence of keys, sorted or not; for
        a key given twice the last value wins), as ``LongHashMap.put_many`` and sparkey's.

        Into an empty map, or a batch at least as large as the map, the pages are built directly
        from the sorted entries, full leaves bottom-up (MapDB's data pump); all or nothing. A
        smaller batch is inserted key by key, in key order, and undone if one insert fails.
        ``parallelism`` > 1 encodes and compresses the leaves of a direct build in that many
        forked processes (:func:`offheap.treemap.bulk.leaf_pages`; same pages, same tree).
        """
        if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 1:
            raise ValueError(f"parallelism must be an int >= 1, not {parallelism!r}")
        with self._lock:
            self._check_open()
            self._merge(*self._admit.columns(keys, values), parallelism)

    def _merge(self, keys, values, parallelism: int) -> None:
        """Put an admitted batch (sorted unique keys) into the tree; the lock is held."""
        if len(keys):
            held = self._admit.batch_bytes(keys, values) if self._budgeted else 0
            self._tree.merge(keys, values, parallelism, held)
            self._arm_timer()

    # -- sorted-map API -----------------------------------------------------------------------

    def _edge_key(self, last: bool):
        with self._lock:
            self._check_open()
            if not self._tree.n_entries:
                raise KeyError("TreeMap is empty")
            return self._tree.edge_key(last)

    def _first_in(self, lo, hi, inclusive: tuple[bool, bool], reverse: bool,
                  with_value: bool = False):
        """The first key of a range in scan order (the last one with ``reverse``), or its
        ``(key, value)`` with ``with_value``; None if the range is empty."""
        with self._lock:
            self._check_open()
            admit = self._admit
            tree = self._tree
            if tree.descent is not None and (lo is None) != (hi is None) and reverse == (lo is None):
                above = lo is not None  # a one-sided range: a neighbour query
                key = admit.key(lo if above else hi)
                first = tree.neighbour(key, above, inclusive[0 if above else 1], with_value)
            else:
                scan = tree.scan(admit.bound(lo), admit.bound(hi), inclusive, reverse)
                first = scan.first(tree.shape, with_value)
        if with_value and first is not None:
            return first[0], admit.fresh(first[1])
        return first

    def _position(self, key, right: bool) -> int:
        """How many keys are below ``key`` (at or below it with ``right``)."""
        with self._lock:
            self._check_open()
            return self._tree.position(self._admit.key(key), right)

    def _index_of(self, key) -> int | None:
        """The position of ``key``, None when the map does not hold it."""
        with self._lock:
            self._check_open()
            return self._tree.index_of(self._admit.key(key))

    def _item_at(self, index: int) -> tuple:
        """The ``(key, value)`` at position ``index`` (negative: from the end); IndexError
        outside the map."""
        with self._lock:
            self._check_open()
            key, value = self._tree.item_at(position_in(index, self._tree.n_entries))
        return key, self._admit.fresh(value)

    def _chunks(self, lo, hi, inclusive, reverse: bool, with_values: bool) -> Iterator:
        """Yield ``(keys, values)`` list slices leaf by leaf over a range (``values`` None
        unless ``with_values``), the values as handed out (:meth:`Admission.fresh`).

        Leaves not already cached are decoded without entering the cache, so a long scan does
        not evict the working set. RuntimeError if the size of the map changes meanwhile.
        """
        fresh_many = self._admit.fresh_many
        for keys, values in self._stored_chunks(lo, hi, inclusive, reverse, with_values):
            yield keys, (None if values is None else fresh_many(values))

    def _stored_chunks(self, lo, hi, inclusive, reverse: bool, with_values: bool) -> Iterator:
        """:meth:`_chunks` with the values as the leaves hold them, pickled ones as
        placeholders: what compaction copies, as bytes."""
        tree = self._tree
        with self._lock:
            self._check_open()
            scan = tree.scan(self._admit.bound(lo), self._admit.bound(hi), inclusive, reverse)
            mods = tree.mods
        while not scan.done:
            with self._lock:
                self._check_open()
                if tree.mods != mods:
                    raise self._changed_error()
                keys, values = scan.next_chunk(tree.shape, with_values)
            if keys:
                yield keys, values
        with self._lock:
            if tree.mods != mods:
                raise self._changed_error()  # ClosedError once closed, as at any other step

    def _walk(self, what: int, lo, hi, inclusive, reverse: bool) -> Iterator | None:
        """The range walked leaf by leaf in C under the lock (:func:`offheap.treemap.views.each`),
        when the tree has a compiled descent and the map is open (a closed one raises at the
        first step, through :meth:`_chunks`)."""
        with self._lock:
            tree, admit = self._tree, self._admit
            if tree.descent is None or _compiled_pages is None or self._closed:
                return None
            copies = admit.copies_values
            return _compiled_pages.scan(tree.descent, self._lock, admit.bound(lo), admit.bound(hi),
                                        inclusive[0], inclusive[1], reverse, what, tree, "mods",
                                        self._changed_error, tuple(SCALAR_TYPES) if copies else (),
                                        admit.fresh if copies else None)

    def _version_source(self) -> tuple[object, str]:
        return self._tree, "mods"

    def _changed_error(self) -> RuntimeError | ClosedError:
        if self._closed:
            return ClosedError(_CLOSED)
        return RuntimeError("TreeMap changed size during iteration")

    # -- introspection ------------------------------------------------------------------------

    @property
    def meta_recid(self) -> int:
        """The store record holding this map's metadata (how a DB finds it again)."""
        return self._meta_recid

    @property
    def options(self) -> dict:
        """The options this map was built with, as ``TreeMap.in_store`` takes them."""
        tree, codec = self._tree, self._tree.nodes.codec
        return dict(key=self._admit.key_kind, value=tree.nodes.serializer.name,
                    node_size=tree.node_size, compression=None if codec is None else codec.name,
                    write_cache=tree.write_cache, flush_delay=self._flush_delay,
                    cache_bytes=tree.cache.cache_bytes, cache_size=tree.cache.cache_size)

    def stats(self) -> TreeStats:
        with self._lock:
            self._check_open()
            return tree_stats(self._tree, self._store.arena)

    def __repr__(self) -> str:
        return "<TreeMap (closed)>" if self._closed else describe(self.stats(), self.options,
                                                                        self._store.arena)

    def _repr_html_(self) -> str:
        if self._closed:
            return "<p><b>TreeMap</b> (closed)</p>"
        return describe_html(self.stats(), self.options, self._store.arena)

    def _check(self) -> None:
        """Assert the tree's invariants (:meth:`Tree.check`), and that the tree's records are
        exactly the live records of a store it owns."""
        with self._lock:
            self._check_open()
            recids = self._tree.check()
            if self._owns_store:
                assert len(self._store) == len(recids) + 1, \
                    f"store holds {len(self._store)} records, tree {len(recids)} + meta"
            self._store._check()

    # -- lifetime -----------------------------------------------------------------------------

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
        self._tree.cache.write_dirty()
        self._write_meta()

    def _flush_if_open(self) -> None:
        """What the flush timer does: a map closed in the meantime has nothing to write."""
        if not self._closed:
            self._flush_nodes()

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
                    check_reopenable(self, self._store)
                written = True
            finally:
                self._closed = True
                self._detach_slots()
                self._tree.release()
                if self._owns_store:
                    self._store.close(save=written)  # never commit a half-written tree

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(_CLOSED)

    def _arm_timer(self) -> None:
        if self._timer is not None:
            self._timer.arm()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    # -- hooks of a DB, a reader and a file's transactions ------------------------------------

    def _write_back(self) -> None:
        self._flush_nodes()

    def _discard(self) -> None:
        self._release()

    def _twin_options(self) -> dict:
        return dict(self.options, limit=self._store.arena.limit_bytes)

    def _column_serializers(self) -> tuple:
        nodes = self._tree.nodes
        return get_serializer(self._admit.key_kind), nodes.serializer

    def _export(self) -> tuple[list | np.ndarray, list]:
        """All keys and values in key order (:meth:`Tree.export`), for a copy: pickled values
        as placeholders, refused without ``allow_pickle`` (:meth:`Admission.exported`)."""
        with self._lock:
            keys, values = self._tree.export()
        return keys, self._admit.exported(values)

    def _release(self) -> None:
        """Drop every decoded node, dirty ones included, and stop the flush timer: before the
        store rolls back, so nothing written since the last commit is written again."""
        self._cancel_timer()
        self._tree.release()

    def _reload(self, meta_recid: int | None = None) -> None:
        """Re-read the tree from its metadata record (``meta_recid`` when it moved, as in a
        compacted file) with an empty node cache: after a rollback, or when a reader's arena
        picked up another process's commit. Iterators in progress raise RuntimeError on their
        next step."""
        with self._lock:
            self._release()
            if meta_recid is not None:
                self._meta_recid = meta_recid
            self._load_meta()

    def _live_bytes(self) -> int:
        """Bytes of this tree's pages as last written into the store."""
        return self._tree.nodes.stored_bytes

    def _invalidate(self) -> None:
        """Close without writing anything: the store no longer holds this tree (a rollback
        dropped it, having been created after the last commit)."""
        with self._lock:
            self._release()
            self._closed = True
            self._detach_slots()

    def _write_meta(self) -> None:
        self._store.update(self._meta_recid, self._tree.meta_record())

    def _check_stored(self) -> None:
        """CorruptionError unless the metadata record, as the last flush wrote it, passes the
        checks a reopen makes: it parses, names this tree's fixed options and entry count, and
        its root node record exists. What a commit runs before it publishes the tree; O(1),
        one record read and parsed."""
        with self._lock:
            self._check_open()
            try:
                meta = parse_meta(self._store.get(self._meta_recid))
                meta.check_matches(self._tree.fixed_options)
                if meta.n_entries != len(self) or meta.shape.root not in self._store:
                    raise ValueError(f"{meta.n_entries} entries (the tree has {len(self)}), "
                                     f"root node record {meta.shape.root}")
            except (KeyError, ValueError) as exc:  # CorruptionError is a ValueError
                raise CorruptionError(f"TreeMap metadata record {self._meta_recid} does not "
                                      f"describe the tree: {exc}") from None

    def _load_meta(self) -> None:
        """Install the tree the metadata record names; an older format is converted first
        (:mod:`offheap.treemap.upgrade`), except that a read-only store reads a format 2 tree as
        it is and refuses a format 1 tree with ReadOnlyError."""
        try:
            meta = parse_meta(self._store.get(self._meta_recid))
        except KeyError:
            raise CorruptionError(f"TreeMap metadata record {self._meta_recid} is missing") from None
        if meta.version != FORMAT_VERSION and not (self._store.arena.readonly
                                                   and meta.version in READABLE_VERSIONS):
            if self._store.arena.readonly:
                raise ReadOnlyError(
                    f"this TreeMap is in format {meta.version}, which this version reads only after "
                    f"converting it to format {FORMAT_VERSION}: open the file once for writing "
                    f"(TreeMap(path=...) or DB.file(...)) to convert it, then read it")
            meta.check_matches(self._tree.fixed_options)
            meta = upgrade(self._store, meta, self._tree.nodes.codec)
            self._tree.install(meta)
            self._write_meta()
            return
        self._tree.install(meta)


NEW_MAP_DEFAULTS: Mapping[str, Any] = MappingProxyType(dict(key="int64", value="object",
                                                             node_size=32))
"""The fixed options of a new TreeMap given none (a TreeSet's tree has its own)."""


def with_stored_options(options: dict, new_defaults: Mapping[str, Any],
                        store: RecordStore | None = None, meta_recid: int | None = None) -> dict:
    """``options`` with each fixed option given as None (``key``, ``value``, ``node_size``)
    filled in: from the tree whose metadata is record ``meta_recid`` of ``store`` (a file's, so
    that ``TreeMap(path=...)`` alone reopens it), else from ``new_defaults`` (a new map). A
    fixed option given explicitly is kept; ``_load_meta`` then checks it against the file's."""
    missing = [name for name in FIXED_OPTIONS if options.get(name) is None]
    stored: dict = {}
    if missing and store is not None and meta_recid is not None:
        try:
            meta = parse_meta(store.get(meta_recid))
        except KeyError:
            meta = None  # _load_meta reports the missing record
        if meta is not None:
            meta.check_fixed()
            stored = meta.fixed_options
    return {**options, **{name: stored.get(name, new_defaults[name]) for name in missing}}
