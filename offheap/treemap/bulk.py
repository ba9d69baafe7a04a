"""Bulk loading of a TreeMap's B+tree, MapDB's data pump (layer 6, under the tree): sorted keys in,
packed pages out. Keys are numpy arrays for int64 keys and lists for str/bytes keys.

:func:`build_tree` cuts the sorted entries into runs of :func:`leaf_run_size` (:func:`runs`):
leaves keep room for later inserts, as B-tree builds leave a fill factor, unless no key can ever
go between theirs. It encodes one leaf per run (:func:`leaf_pages`, in forked workers when
asked), then builds each inner level the same way over the level below, with the separators
between neighbouring nodes computed all at once (:func:`separators`), and stores every page as
a new record. Merging a batch into an
existing map is one stable sort (:func:`merge_sorted`). Everything but :func:`build_tree` is
pure.
"""

from __future__ import annotations

import itertools

import numpy as np

from offheap.treemap.forkpool import encode_in_workers
from offheap.treemap.meta import TreeShape
from offheap.treemap.node import min_children, min_entries
from offheap.treemap.nodestore import NodeStore
from offheap.treemap.page import encode_inner, encode_leaf, raw_size, separator

PARALLEL_MIN_LEAVES = 2048
"""Fewer leaves than this are encoded in the calling process whatever ``parallelism`` says:
starting the workers would cost more than it saves."""


LEAF_ROOM_SHARE = 8
"""A bulk-built leaf leaves ``node_size // LEAF_ROOM_SHARE`` entries free (4 of 32, 15 of 120),
as B-tree builds leave a fill factor (PostgreSQL's is 90%). A random insert after a bulk load
then mostly finds room in its leaf instead of splitting a full one: the first 20,000 random
inserts into a bulk-loaded map of 1M random int64 keys (``maps-bench``) ran 1.46x SortedDict's
time with the room against 2.57x without it (load ~0.9), the room costing 0.8% more bytes per
entry (6.68 against 6.62); inner nodes are built full."""


def leaf_run_size(keys, node_size: int) -> int:
    """Entries of each bulk-built leaf but the last two (:func:`runs`): ``node_size`` less the
    room of :data:`LEAF_ROOM_SHARE`, or ``node_size`` when the keys are consecutive integers
    (a sequential load, whose leaves no insert can reach but at the ends: room there would only
    cost space, 15% more bytes per entry at node size 32)."""
    if isinstance(keys, np.ndarray) and int(keys[-1]) - int(keys[0]) == len(keys) - 1:
        return node_size
    return max(node_size - node_size // LEAF_ROOM_SHARE, min_entries(node_size))


def runs(n: int, size: int, minimum: int) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends of runs of ``size`` items covering ``n``; a short last run borrows from
    the one before so that no run has fewer than ``minimum`` items (unless there is one run)."""
    starts = np.arange(0, n, size, dtype=np.int64)
    ends = np.minimum(starts + size, n)
    if len(starts) > 1 and ends[-1] - starts[-1] < minimum:
        starts[-1] = (starts[-2] + n + 1) // 2
        ends[-2] = starts[-1]
    return starts, ends


def leaf_pages(keys, values, starts: np.ndarray, ends: np.ndarray, key_kind: str, serializer,
               codec, parallelism: int = 1):
    """The leaf page of each run ``keys[starts[i]:ends[i]]`` with its values, in order.

    With ``parallelism`` > 1 (and at least PARALLEL_MIN_LEAVES runs) the pages are encoded by
    that many forked processes (:mod:`offheap.treemap.forkpool`) while the caller consumes them; the
    pages are the same bytes either way. A generator: the caller stores each page as it comes.
    """
    objects = isinstance(values, np.ndarray) and values.dtype == object
    bounds = list(zip(starts.tolist(), ends.tolist()))

    def encode(i: int) -> bytes:
        a, b = bounds[i]
        return encode_leaf(keys[a:b], values[a:b].tolist() if objects else values[a:b],
                           key_kind, serializer, codec)

    if parallelism == 1 or len(bounds) < PARALLEL_MIN_LEAVES:
        return map(encode, range(len(bounds)))
    return encode_in_workers(encode, len(bounds), parallelism)


def take(seq, indices: np.ndarray):
    """``seq[i]`` for each index: a fancy index for arrays, a list otherwise."""
    if isinstance(seq, np.ndarray):
        return seq[indices]
    return [seq[i] for i in indices.tolist()]


def separators(left_max, right_min) -> list:
    """:func:`offheap.treemap.page.separator` for each neighbouring pair; vectorized for int64 arrays
    (in offset binary the answer is ``right_min`` with every bit below the highest bit where the
    two keys differ cleared)."""
    if not isinstance(right_min, np.ndarray):
        return [separator(a, b) for a, b in zip(left_max, right_min)]
    sign = np.uint64(1 << 63)
    a, b = left_max.view(np.uint64) ^ sign, right_min.view(np.uint64) ^ sign
    smeared = a ^ b
    for shift in (1, 2, 4, 8, 16, 32):
        smeared |= smeared >> np.uint64(shift)
    highest = smeared ^ (smeared >> np.uint64(1))
    return ((b & ~(highest - np.uint64(1))) ^ sign).view(np.int64).tolist()


def merge_sorted(old_keys, old_values: list, new_keys, new_values):
    """Merge two sorted unique key runs; a key in both takes the new value. int64 keys (either
    run an array) merge with one stable numpy sort."""
    if isinstance(old_keys, np.ndarray) or isinstance(new_keys, np.ndarray):
        keys = np.concatenate([np.asarray(old_keys, np.int64), np.asarray(new_keys, np.int64)])
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        keep = np.ones(keys.size, bool)
        keep[:-1] = keys[1:] != keys[:-1]
        order = order[keep]
        if isinstance(new_values, np.ndarray):
            new_values = new_values.tolist()
        combined = np.fromiter(itertools.chain(old_values, new_values), dtype=object,
                               count=len(old_values) + len(new_values))
        return keys[keep], combined[order]
    merged_keys, merged_values = [], []
    i = j = 0
    while i < len(old_keys) and j < len(new_keys):
        if old_keys[i] < new_keys[j]:
            merged_keys.append(old_keys[i])
            merged_values.append(old_values[i])
            i += 1
        else:
            if old_keys[i] == new_keys[j]:
                i += 1
            merged_keys.append(new_keys[j])
            merged_values.append(new_values[j])
            j += 1
    merged_keys += old_keys[i:] + list(new_keys[j:])
    merged_values += old_values[i:] + list(new_values[j:])
    return merged_keys, merged_values


def build_tree(nodes: NodeStore, keys, values, node_size: int,
               parallelism: int = 1) -> tuple[TreeShape, int, int]:
    """Store leaves (:func:`leaf_run_size`) and full inner levels bottom-up as new records;
    return the new tree's shape and its raw and stored page bytes.

    ``keys`` are sorted, unique and not empty (an int64 array or a list). Each level is four
    parallel sequences: node record ids, entries under each node, first keys, last keys. All or nothing: on
    CapacityError the new records are freed and the store holds what it held before.
    """
    created: list[int] = []
    raw_bytes = stored_bytes = 0

    def store(page: bytes) -> int:
        nonlocal raw_bytes, stored_bytes
        created.append(nodes.store.put(page))
        raw_bytes += raw_size(page)
        stored_bytes += len(page)
        return created[-1]

    kind, codec = nodes.key_kind, nodes.codec
    try:
        starts, ends = runs(len(keys), leaf_run_size(keys, node_size), min_entries(node_size))
        recids = [store(page) for page in leaf_pages(keys, values, starts, ends, kind,
                                                     nodes.serializer, codec, parallelism)]
        firsts, lasts = take(keys, starts), take(keys, ends - 1)
        entries = (ends - starts).tolist()
        n_leaves, n_inner, height = len(recids), 0, 1
        while len(recids) > 1:
            seps = separators(lasts[:-1], firsts[1:])
            starts, ends = runs(len(recids), node_size, min_children(node_size))
            bounds = list(zip(starts.tolist(), ends.tolist()))
            recids = [store(encode_inner(seps[a:b - 1], recids[a:b], entries[a:b], kind, codec))
                      for a, b in bounds]
            entries = [sum(entries[a:b]) for a, b in bounds]
            firsts, lasts = take(firsts, starts), take(lasts, ends - 1)
            n_inner += len(recids)
            height += 1
    except BaseException:
        nodes.release(created)
        raise
    return TreeShape(recids[0], height, n_leaves, n_inner), raw_bytes, stored_bytes
