"""The TreeMap side of salvage: a defensive walk of a tree in a store that may be damaged
(layer 6, used by the driver :mod:`offheap.db.salvage`).

The tree is walked from the root its metadata names (:func:`tree_meta`), depth first in key
order, so the keys it yields rise. An inner node must decode and its separators must rise
strictly inside the bounds its parent gives it; a leaf must decode, keys and every value (a
pickled one stays its placeholder, :mod:`offheap.store.pickled`, never unpickled), and its
keys must rise strictly inside its bounds ``[lo, hi)``. A node that fails is skipped with
everything below it; a node reached twice (a cycle, a shared child) is skipped the second time,
and so is a node deeper than the metadata's height (at most 64 levels), so no damage makes the
walk loop. What fails is counted in the caller's report, apart when the record lies on a page
that failed its checksum.

Records are read as the caller says (:class:`RecordReading`): by default
:meth:`RecordStore.get_checked`, which checks that a record lies inside the store. A decoder
meeting damaged bytes may raise anything, so one record's failure is caught as ``Exception``
around that record alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from offheap.errors import CorruptionError
from offheap.store.records import RecordStore
from offheap.store.serializers import get_serializer
from offheap.treemap.meta import TreeMeta, parse_meta
from offheap.treemap.page import decode_inner, decode_leaf, is_inner

_MAX_HEIGHT = 64  # no tree of int64, str or bytes keys gets near it; a damaged height may


class WalkReport(Protocol):
    """The counters a walk fills in (salvage's ``CollectionReport`` has them)."""

    error: str | None
    expected_entries: int | None
    recovered_entries: int
    skipped_records: int
    damaged_records: int


@dataclass(frozen=True)
class RecordReading:
    """How the walk reads a record: ``read(store, recid)`` returns its bytes or raises; an
    exception of a ``damaged`` type means the record lies on a page that failed its checksum."""

    read: Callable[[RecordStore, int], bytes] = RecordStore.get_checked
    damaged: tuple[type[Exception], ...] = ()


def tree_meta(store: RecordStore, meta_recid: int, report: WalkReport,
              reading: RecordReading = RecordReading()) -> TreeMeta | None:
    """The tree's metadata, checked, with the entries it promises noted in ``report``; None,
    with ``report.error`` saying why, when it is unreadable."""
    try:
        meta = parse_meta(reading.read(store, meta_recid))
        meta.check_fixed()
    except Exception as exc:  # a damaged record may fail in any decoder
        report.error = f"metadata record {meta_recid} is unreadable: {exc}"
        return None
    report.expected_entries = meta.n_entries
    return meta


def read_tree(store: RecordStore, meta: TreeMeta, report: WalkReport,
              reading: RecordReading = RecordReading()) -> Iterator[tuple[Sequence, list]]:
    """Yield ``(keys, values)`` of every leaf that passes the checks of the module docstring,
    in key order; count what fails in ``report``. Reads trees of either format (the entry
    counts of format 2 inner pages are not needed here)."""
    key_kind = meta.options["key"]
    serializer = get_serializer(meta.options["value"])
    height, with_counts = meta.shape.height, meta.version >= 2
    max_depth = height if 1 <= height <= _MAX_HEIGHT else _MAX_HEIGHT
    seen: set[int] = set()
    stack = [(meta.shape.root, 1, None, None)]  # (recid, depth, lo, hi): keys k with lo <= k < hi
    while stack:
        recid, depth, lo, hi = stack.pop()
        if recid in seen or depth > max_depth:
            report.skipped_records += 1
            continue
        seen.add(recid)
        try:
            page = reading.read(store, recid)
            if not page:
                raise CorruptionError("empty page")
            if is_inner(page):
                separators, children, _ = decode_inner(page, key_kind, with_counts)
                _check_rising(separators, lo, hi)
                bounds = [lo] + separators + [hi]
                stack.extend((child, depth + 1, bounds[i], bounds[i + 1])
                             for i, child in reversed(list(enumerate(children))))
                continue
            keys, values = decode_leaf(page, key_kind, serializer)
            _check_rising(keys, lo, hi)
            if len(values) != len(keys):
                raise CorruptionError("leaf keys and values differ in number")
        except reading.damaged:
            report.damaged_records += 1
            continue
        except Exception:  # a damaged record may fail in any decoder
            report.skipped_records += 1
            continue
        yield keys, values


def _check_rising(keys: Sequence, lo, hi) -> None:
    """CorruptionError unless ``keys`` rise strictly and lie in ``[lo, hi)``."""
    if any(a >= b for a, b in zip(keys, keys[1:])):
        raise CorruptionError("keys out of order")
    if keys and ((lo is not None and keys[0] < lo) or (hi is not None and keys[-1] >= hi)):
        raise CorruptionError("keys outside their separator bounds")


def copy_tree(store: RecordStore, meta: TreeMeta, tree, report: WalkReport,
              commit: Callable[[], None], commit_every: int,
              reading: RecordReading = RecordReading()) -> None:
    """Insert every entry :func:`read_tree` yields into ``tree`` (a TreeMap), counting them in
    ``report`` and calling ``commit()`` after each ``commit_every`` of them."""
    copied_since_commit = 0
    for keys, values in read_tree(store, meta, report, reading):
        for key, value in zip(keys, values):
            tree[key] = value
        report.recovered_entries += len(keys)
        copied_since_commit += len(keys)
        if copied_since_commit >= commit_every:
            commit()
            copied_since_commit = 0
