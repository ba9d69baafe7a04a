"""The pure-Python core's slot homes (offheap.hashmap.core) and the bulk probe on them
(offheap.hashmap.placement.find_in_groups): always what a rebuild from the index gives, and
probing as find_many does, through scalar changes, the map's bulk steps, growth and compaction."""

from __future__ import annotations

import numpy as np
import pytest

from offheap.errors import ClosedError
from offheap.hashmap.layout import homes_of
from offheap.hashmap.longhashmap import ReferenceLongHashMap
from offheap.hashmap.placement import find_in_groups, find_many


def expected_slot_homes(m: ReferenceLongHashMap) -> np.ndarray:
    r = m._table()
    index = r.index.astype(np.int64)
    expected = np.arange(len(index) + 1)
    occupied = np.flatnonzero(index)
    expected[occupied] = homes_of(r.keys.take(index[occupied] - 1), r.homes)
    return expected


def assert_in_sync(m: ReferenceLongHashMap, probes: np.ndarray) -> None:
    """The slot homes the core probes with are the index's, and both bulk probes agree."""
    m.get(0)  # the first operation after a change the core did not make rebuilds them
    assert m._homes_mods == m._mods
    slot_homes = np.frombuffer(m._slot_homes, m._slot_home_array.dtype)
    assert np.array_equal(slot_homes, expected_slot_homes(m))
    assert np.all(np.diff(slot_homes) >= 0)  # what find_in_groups's binary search relies on
    r = m._table()
    assert np.array_equal(find_in_groups(r.index, m._slot_home_array, r.keys, r.homes, probes),
                          find_many(r.index, r.keys, r.homes, probes))


@pytest.mark.parametrize("n", [300, 70_000])  # one chunk of entries, and two
def test_slot_homes_follow_every_kind_of_change(n):
    rng = np.random.default_rng(n)
    keys = rng.integers(-(2**63), 2**63 - 1, 2 * n, dtype=np.int64)
    probes = np.concatenate([keys, rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)])
    m = ReferenceLongHashMap(value="int64")
    reference: dict[int, int] = {}
    for k in keys[: n // 2].tolist():  # one by one, growing the index and the entries
        m[k] = reference[k] = k
    assert_in_sync(m, probes)
    m.put_many(keys[n // 2: n], keys[n // 2: n])  # the map's bulk placement
    reference.update(zip(keys[n // 2: n].tolist(), keys[n // 2: n].tolist()))
    assert_in_sync(m, probes)
    for k in keys[: n: 3].tolist():  # backward shifts
        del m[k]
        del reference[k]
    assert_in_sync(m, probes)
    assert m.delete_many(keys[1: n: 3]) == len(keys[1: n: 3])  # the map's bulk removal
    for k in keys[1: n: 3].tolist():
        del reference[k]
    assert_in_sync(m, probes)
    for k in keys[n:].tolist():  # appends into holes' chunks: compaction on the way
        m[k] = reference[k] = -k
    assert_in_sync(m, probes)
    assert dict(m.items()) == reference
    hits = m.get_many(probes[: 2 * n], default=7)
    assert hits.tolist() == [reference.get(k, 7) for k in probes[: 2 * n].tolist()]


def test_slot_homes_are_rebuilt_after_a_detach_and_attach():
    m = ReferenceLongHashMap(value="int64")
    for k in range(1000):
        m[k] = k
    m._detach()
    with pytest.raises(ClosedError):
        m[5]
    m._attach_regions()
    assert m[5] == 5 and 1000 not in m
    assert_in_sync(m, np.arange(2000))
