"""Record store: a dict of recid -> bytes as the oracle, reuse of free space, reopening."""

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from offheap.errors import CapacityError
from offheap.arena.arena import Arena
from offheap.store.records import LARGE_RECORD_BYTES, RecordStore, chunk_bytes

payloads = st.one_of(
    st.binary(max_size=300),
    st.builds(lambda n, byte: bytes([byte]) * n, st.integers(4000, 6000), st.integers(0, 255)),
    st.just(b""))


class StoreVersusDict(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.store = RecordStore(Arena.anonymous())
        self.model = {}

    @rule(data=payloads)
    def put(self, data):
        recid = self.store.put(data)
        assert recid not in self.model and recid > 0
        self.model[recid] = data

    @precondition(lambda self: self.model)
    @rule(data=payloads, pick=st.integers(0, 10**6))
    def update(self, data, pick):
        recid = sorted(self.model)[pick % len(self.model)]
        self.store.update(recid, data)
        self.model[recid] = data

    @precondition(lambda self: self.model)
    @rule(pick=st.integers(0, 10**6))
    def delete(self, pick):
        recid = sorted(self.model)[pick % len(self.model)]
        self.store.delete(recid)
        del self.model[recid]

    @invariant()
    def agrees(self):
        for recid, data in self.model.items():
            assert self.store.get(recid) == data
        assert len(self.store) == len(self.model)
        self.store._check()


TestStoreVersusDict = StoreVersusDict.TestCase
TestStoreVersusDict.settings = settings(max_examples=40, stateful_step_count=40, deadline=None)


def test_size_classes():
    assert [chunk_bytes(n) for n in (0, 1, 4, 5, 8, 9, 4096)] == [0, 4, 4, 8, 8, 12, 4096]
    assert chunk_bytes(4097) >= 4097 and chunk_bytes(5000) % 256 == 0


def test_growing_leaf_rewrites_reuse_chunks():
    """A record grown a hundred times, then a second one grown the same way, reuses chunks."""
    store = RecordStore(Arena.anonymous())
    first = store.put(b"")
    for size in range(8, 808, 8):
        store.update(first, b"x" * size)
    segment_bytes = store.stats().segment_bytes
    second = store.put(b"")
    for size in range(8, 800, 8):
        store.update(second, b"y" * size)
    stats = store.stats()
    assert stats.segment_bytes == segment_bytes  # no new memory was needed
    assert stats.free_bytes < segment_bytes
    store._check()


def test_large_records_get_their_own_extent_and_give_it_back():
    store = RecordStore(Arena.anonymous())
    before = store.arena.reserved_bytes
    recid = store.put(b"z" * (LARGE_RECORD_BYTES + 1))
    assert store.arena.reserved_bytes > before + LARGE_RECORD_BYTES
    store.delete(recid)
    assert store.arena.reserved_bytes == before


def test_capacity_error_leaves_store_unchanged():
    store = RecordStore(Arena.anonymous(limit_bytes=256 * 1024))
    kept = {}
    with pytest.raises(CapacityError):
        for i in range(100_000):
            kept[store.put(b"%d" % i * 20)] = b"%d" % i * 20
    store._check()
    assert all(store.get(r) == d for r, d in kept.items())
    recid = next(iter(kept))
    store.delete(recid)
    store.put(b"fits again")


def test_reopen_rebuilds_free_space(tmp_path):
    path = tmp_path / "s.offheap"
    store = RecordStore(Arena.file(path))
    recids = [store.put(bytes([i % 256]) * (i % 200)) for i in range(2000)]
    for recid in recids[::2]:
        store.delete(recid)
    store.root = b"owner metadata"
    free_before = store.stats().free_bytes
    store.close()
    store = RecordStore.open(Arena.file(path))
    assert store.root == b"owner metadata"
    assert store.stats().free_bytes == free_before
    for i, recid in enumerate(recids):
        if i % 2:
            assert store.get(recid) == bytes([i % 256]) * (i % 200)
        else:
            assert recid not in store
    store._check()
    new = store.put(b"q" * 50)
    assert new in recids[::2]  # ids are reused too
    store.close()


def test_a_growing_record_takes_the_free_bytes_after_it_without_moving():
    store = RecordStore(Arena.anonymous())
    grower, neighbour, last = store.put(b"a" * 100), store.put(b"b" * 100), store.put(b"c" * 8)
    address = store._addr[grower]
    store.delete(neighbour)
    store.update(grower, b"a" * 160)  # into the 100 free bytes after it
    assert store._addr[grower] == address and store.get(grower) == b"a" * 160
    assert store.stats().free_bytes - _bump_tail(store) == 40
    store.update(grower, b"a" * 260)  # 40 free bytes are not enough: it moves
    assert store._addr[grower] != address and store.get(last) == b"c" * 8
    store._check()


def test_freed_neighbours_merge_into_a_run_a_larger_record_fits():
    """Chunks freed one by one merge, so a record larger than any of them takes their place
    once the bump segment has no room."""
    store = RecordStore(Arena.anonymous())
    recids = [store.put(bytes([i]) * 96) for i in range(10)]
    kept = store.put(b"k" * 8)  # keeps the freed run away from the bump pointer
    for recid in recids[2:6]:
        store.delete(recid)
    assert [size for _, size in store._free.pieces()] == [4 * 96]
    while _bump_tail(store):  # fill the bump segment with records of 4 KiB and less
        store.put(b"f" * min(_bump_tail(store), 4096))
    big = store.put(b"B" * 300)
    assert [size for _, size in store._free.pieces()] == [4 * 96 - 300]
    assert store.get(big) == b"B" * 300 and store.get(kept) == b"k" * 8
    store._check()


def test_a_freed_run_at_the_bump_pointer_moves_it_back():
    store = RecordStore(Arena.anonymous())
    store.put(b"a" * 40)
    tail = _bump_tail(store)
    second, third = store.put(b"b" * 40), store.put(b"c" * 40)
    store.delete(second)
    store.delete(third)  # merges with the second's chunk, then with the bump space
    assert _bump_tail(store) == tail and store.stats().free_bytes == tail
    store._check()


def _bump_tail(store: RecordStore) -> int:
    """The unused bytes of the store's bump segment."""
    return len(store._views[store._bump_seg]) - store._bump_pos
