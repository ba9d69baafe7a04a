"""TreeSet: a sorted set of int64, str or bytes elements on a TreeMap (layer 6).

A TreeSet holds a :class:`~offheap.TreeMap` whose keys are the elements and whose values are
all ``b""`` (value type ``"bytes"``): the page codec packs a column of equal values in its
constant form, ``00 00``, two bytes a leaf whatever its size, so a value costs nothing in the
store. Measured at 300,000 random int64 elements (node size 32): 6.64 stored page bytes an
element with ``bytes``, ``str`` or ``int64`` constant values alike, 6.68 with ``object`` None
(three bytes a leaf), whose leaves are also the slowest to encode; adds and lookups cost the
same with ``bytes``, ``str`` and ``int64`` within the noise. ``bytes`` is kept because its
empty value is what "no value" reads as, and its reads need no conversion. A TreeSet file is
therefore a TreeMap file of such values (``TreeMap(path=..., value="bytes")`` opens it).

The set's interface is ``MutableSet`` with SortedSet's sorted and positional API
(``irange``, ``islice``, ``index``, ``bisect_left``/``bisect_right``, ``s[i]`` and slices,
``floor``/``ceiling``/``lower``/``higher``, ``first``/``last``, ``pop(index=-1)``), the set
algebra of :mod:`offheap.collection.setapi`, the bulk paths ``add_many``, ``contains_many``,
``discard_many``, and the tree's files, options and DB integration. Costs are the tree's:
O(log n) for a scalar operation, ``contains_many`` one descent per leaf it reaches (sorted
lookups), ``add_many`` a direct build into an empty set.

The scalar operations ``x in s``, ``len(s)``, ``add``, ``discard`` and ``remove`` are the
set's first base, :mod:`offheap.treemap.setslots` (compiled: C calls into the tree's item
slots, no Python frame between); ``add`` is one store that keeps a present element (one
descent either way; an element already present is not stored again), and ``discard`` tests
membership first, as SortedSet does, so an absent element is not deleted.

Thread safety: the tree's lock; each method is one atomic operation of the tree (``discard``:
a lookup, then an idempotent removal).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, MutableSet
from types import MappingProxyType
from typing import Any

import numpy as np

from offheap.collection.filemap import StandaloneFileMap
from offheap.collection.readers import SetReader
from offheap.collection.setapi import SetAPI
from offheap.kernels.sizes import ByteLimit
from offheap.store.records import RecordStore
from offheap.store.serializers import Serializer, get_serializer
from offheap.treemap.nodecache import DEFAULT_CACHE_BYTES
from offheap.treemap.setslots import NO_VALUE, SetSlotsBase
from offheap.treemap.stats import TreeStats
from offheap.treemap.treemap import NEW_MAP_DEFAULTS, TreeMap

_ABSENT = object()
TREE_SET_VALUE = "bytes"
"""The value type of a TreeSet's tree (module docstring)."""

INT64_SET_NODE_SIZE = 64
"""The node size of a new TreeSet of int64 elements given none, where a TreeMap's leaves hold
32 entries. A set's leaf has no values to decode, copy or encode, and at 1M random int64
elements 64 made ``add`` of a new element 8-14% faster than 32 (with fewer splits and a tree
one level lower), ``irange`` faster, ``in`` no slower and the pages 4% smaller, at the cost of
some 6% on adding a present element. str and bytes elements keep 32: their leaves are searched
as key objects, and at 64 ``in`` took twice as long (docs/sets.md)."""


_INT64_SET_DEFAULTS: Mapping[str, Any] = MappingProxyType(dict(NEW_MAP_DEFAULTS,
                                                                node_size=INT64_SET_NODE_SIZE))


def new_set_defaults(key: str | None) -> Mapping[str, Any]:
    """The fixed options a new TreeSet of ``key`` elements (None: int64) takes when not given:
    TreeMap's, with :data:`INT64_SET_NODE_SIZE` for int64 elements."""
    return _INT64_SET_DEFAULTS if key is None or key == "int64" else NEW_MAP_DEFAULTS


class TreeSet(SetSlotsBase, SetAPI, MutableSet):
    """A sorted ``MutableSet`` of ``key`` elements (``"int64"``, ``"str"`` or ``"bytes"``),
    stored off the Python heap in a TreeMap's compressed pages.

    ``TreeSet(elements, /, *, key="int64", node_size=None, compression=None, write_cache=True,
    flush_delay=None, cache_bytes=8 << 20, cache_size=None, limit=None, path=None,
    durability="commit", verify=True, recover=False)``: the options are TreeMap's, but
    ``node_size`` None is the file's for a set that exists, else 64 for int64 elements
    (:data:`INT64_SET_NODE_SIZE`) and 32 for str and bytes. With ``path`` the set lives in that file, with TreeMap's durability rules, and
    ``TreeSet(path=...)`` alone reopens it.
    Iteration is in sorted order. An element that no element can equal (``"a" in s`` for int64
    elements) is a miss; adding one is a TypeError.
    """

    def __init__(self, elements: Iterable[Any] = (), /, *, key=None, node_size: int | None = None,
                 compression=None, write_cache: bool = True, flush_delay: float | None = None,
                 cache_bytes: int = DEFAULT_CACHE_BYTES, cache_size: int | None = None,
                 limit: ByteLimit = None, path=None,
                 durability: str = "commit", readonly: bool = False, verify: bool = True,
                 recover: bool = False, create: bool = True) -> None:
        StandaloneFileMap._refuse_readonly(self, readonly)  # type: ignore[arg-type]  # its name only
        tree = TreeMap.__new__(TreeMap)
        tree._build(dict(key=key, value=TREE_SET_VALUE, node_size=node_size,
                         compression=compression, write_cache=write_cache,
                         flush_delay=flush_delay, cache_bytes=cache_bytes, cache_size=cache_size),
                    new_set_defaults(key), limit=limit, path=path, durability=durability,
                    verify=verify, recover=recover, create=create, allow_pickle=False)
        self._tree = tree
        self.update(elements)

    @classmethod
    def in_store(cls, store: RecordStore, meta_recid: int | None = None, *, lock=None,
                 key="int64", **options) -> TreeSet:
        """A set kept in a shared store (a :class:`~offheap.db.DB`); ``meta_recid`` reopens one;
        ``lock`` and the options as for :meth:`TreeMap.in_store <offheap.TreeMap.in_store>`."""
        treeset = cls.__new__(cls)
        treeset._tree = TreeMap.in_store(store, key, TREE_SET_VALUE, meta_recid, lock=lock,
                                         allow_pickle=False, **options)  # b"" values only
        return treeset

    @classmethod
    def reader(cls, path: str | os.PathLike[str], *, limit: ByteLimit = None,
               verify: bool = True, recover: bool = False, **options) -> TreeSetReader:
        """A read-only :class:`TreeSetReader` of the TreeSet file at ``path``, beside the one
        writer process (:mod:`offheap.collection.readers`)."""
        tree_reader = TreeMap.reader(path, value=TREE_SET_VALUE, limit=limit, verify=verify,
                                     recover=recover, **options)
        treeset = cls.__new__(cls)
        treeset._tree = tree_reader._map
        return TreeSetReader(treeset, tree_reader._session, True)

    # -- the set ------------------------------------------------------------------------------

    def __iter__(self) -> Iterator:
        return self._tree.irange()

    def __reversed__(self) -> Iterator:
        return self._tree.irange(reverse=True)

    def pop(self, index: int = -1):
        """Remove and return the element at position ``index`` (default the largest); IndexError
        when empty or outside the set, as ``SortedSet.pop``."""
        try:
            return self._tree.popitem(index)[0]
        except KeyError:
            raise IndexError("pop from an empty TreeSet") from None

    def clear(self) -> None:
        self._tree.clear()

    # -- sorted and positional API (SortedSet's names) ----------------------------------------

    def irange(self, minimum=None, maximum=None, inclusive=(True, True),
               reverse: bool = False) -> Iterator:
        """Elements ``minimum <= e <= maximum`` (``inclusive`` says which bounds count; None is
        unbounded), ascending or descending with ``reverse``."""
        return self._tree.irange(minimum, maximum, inclusive, reverse)

    def islice(self, start: int | None = None, stop: int | None = None,
               reverse: bool = False) -> Iterator:
        """The elements at positions ``start:stop``, ascending or descending with ``reverse``."""
        return self._tree.islice(start, stop, reverse)

    def index(self, element, start: int | None = None, stop: int | None = None) -> int:
        """The position of ``element``; ValueError if it is absent (or outside ``start:stop``)."""
        try:
            return self._tree.index(element, start, stop)
        except ValueError:
            raise ValueError(f"{element!r} is not in the TreeSet") from None

    def bisect_left(self, element) -> int:
        return self._tree.bisect_left(element)

    def bisect_right(self, element) -> int:
        return self._tree.bisect_right(element)

    bisect = bisect_right

    def __getitem__(self, index):
        """The element at position ``index`` (negative: from the end), or a list for a slice."""
        if isinstance(index, slice):
            positions = range(*index.indices(len(self)))
            if not positions:
                return []
            if positions.step > 0:
                run = self._tree.islice(positions[0], positions[-1] + 1)
            else:
                run = self._tree.islice(positions[-1], positions[0] + 1, reverse=True)
            return list(run)[:: abs(positions.step)]
        return self._tree.peekitem(index)[0]

    def __delitem__(self, index) -> None:
        """Remove the element at position ``index``, or the elements of a slice."""
        if isinstance(index, slice):
            self.discard_many(self[index])
        else:
            self.pop(index)

    def first(self):
        """The smallest element; KeyError when empty."""
        return self._tree.first_key()

    def last(self):
        """The largest element; KeyError when empty."""
        return self._tree.last_key()

    def floor(self, element):
        """The largest element ``<= element``, or None."""
        return self._tree.floor_key(element)

    def ceiling(self, element):
        """The smallest element ``>= element``, or None."""
        return self._tree.ceiling_key(element)

    def lower(self, element):
        """The largest element ``< element``, or None."""
        return self._tree.lower_key(element)

    def higher(self, element):
        """The smallest element ``> element``, or None."""
        return self._tree.higher_key(element)

    # -- bulk paths ---------------------------------------------------------------------------

    def add_many(self, elements) -> None:
        """Add a column of elements (a numpy integer array or any sequence), all or nothing: a
        direct build of full leaves into an empty set or from a batch as large as the set."""
        count = len(elements)
        self._tree.put_many(elements, [NO_VALUE] * count)

    def contains_many(self, elements) -> np.ndarray:
        """A bool array: which elements of a column are in the set (sorted lookups, one descent
        per leaf reached; elements that cannot be present are misses)."""
        lookup = self._tree._admit.lookup
        items = elements.tolist() if isinstance(elements, np.ndarray) else list(elements)
        admitted = [lookup(item) for item in items]
        known = [i for i, item in enumerate(admitted) if item is not None]
        found = self._tree.get_many([admitted[i] for i in known], _ABSENT)
        out = np.zeros(len(items), bool)
        out[known] = [value is not _ABSENT for value in found]
        return out

    def discard_many(self, elements) -> int:
        """Remove the elements of a column that are present; return how many went (one atomic
        step under the tree's lock)."""
        tree = self._tree
        items = elements.tolist() if isinstance(elements, np.ndarray) else list(elements)
        with tree._lock:
            return sum(tree.pop(item, _ABSENT) is not _ABSENT for item in items)

    def _elements(self):
        """Every element in order: an int64 array, or a list of str/bytes."""
        if self._tree._admit.key_kind == "int64":
            return self._tree.keys_array()
        return list(self._tree.irange())

    def _column(self, elements):
        key = self._tree._admit.key
        items = elements.tolist() if isinstance(elements, np.ndarray) else elements
        admitted = [key(item) for item in items]
        if self._tree._admit.key_kind == "int64":
            return np.array(admitted, np.int64)
        return admitted

    def _twin_options(self) -> dict:
        options = dict(self._tree._twin_options())
        del options["value"]
        return options

    def _element_serializer(self) -> Serializer:
        return get_serializer(self._tree._admit.key_kind)

    # -- the stored collection: the tree's --------------------------------------------------

    @property
    def _store(self) -> RecordStore:
        return self._tree._store

    @property
    def options(self) -> dict:
        """The options this set was built with (the tree's, its value type aside)."""
        options = dict(self._tree.options)
        del options["value"]
        return options

    @property
    def closed(self) -> bool:
        return self._tree.closed

    @property
    def meta_recid(self) -> int:
        return self._tree.meta_recid

    def stats(self) -> TreeStats:
        return self._tree.stats()

    def __repr__(self) -> str:
        if self.closed:
            return "<TreeSet (closed)>"
        return repr(self._tree).replace("<TreeMap", "<TreeSet", 1)

    def _repr_html_(self) -> str:
        return self._tree._repr_html_().replace("TreeMap", "TreeSet", 1)

    def flush(self) -> None:
        self._tree.flush()

    def commit(self) -> None:
        self._tree.commit()

    def rollback(self) -> None:
        self._tree.rollback()

    def close(self) -> None:
        self._tree.close()

    def __enter__(self) -> TreeSet:
        return self

    def __exit__(self, *exc) -> None:
        self._tree.__exit__(*exc)

    def _check_open(self) -> None:
        self._tree._check_open()

    def _check(self) -> None:
        self._tree._check()

    def _check_stored(self) -> None:
        self._tree._check_stored()

    def _release(self) -> None:
        self._tree._release()

    def _reload(self, meta_recid: int | None = None) -> None:
        self._tree._reload(meta_recid)

    def _invalidate(self) -> None:
        self._tree._invalidate()

    def _live_bytes(self) -> int:
        return self._tree._live_bytes()

    def _copy_compacted(self, target: TreeSet) -> None:
        """Fill ``target`` (empty, in another store) in sorted order, full leaves each written
        once."""
        for keys, _ in self._tree._chunks(None, None, (True, True), False, False):
            target.add_many(keys)


class TreeSetReader(SetReader[TreeSet]):
    """A read-only TreeSet: ``in``, ``len``, sorted iteration (a leaf per read section, as a
    :class:`~offheap.treemap.reader.TreeReader`) and ``contains_many``."""

    def __iter__(self) -> Iterator:
        tree = self._map._tree
        chunks = self._guarded(lambda: tree._chunks(None, None, (True, True), False, False))
        for keys, _ in chunks:
            yield from keys
