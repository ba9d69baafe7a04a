"""The compiled record store (offheap/store/_space.c: free space and update) against the
reference: the same sequence of puts, updates that grow and shrink, and deletes leaves the same
record addresses, the same segment bytes, the same free pieces and the same stats; a
CapacityError leaves both as they were."""

import importlib

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from offheap.arena.arena import Arena
from offheap.errors import CapacityError
from offheap.store.records import LARGE_RECORD_BYTES, RecordStore


def _space_module():
    try:
        return importlib.import_module("offheap.store._space")
    except ImportError:
        return None


SPACE = _space_module()
pytestmark = pytest.mark.skipif(SPACE is None, reason="offheap.store._space is not built")


class CompiledStore(RecordStore):
    _compiled = SPACE


class ReferenceStore(RecordStore):
    _compiled = None


def state(store: RecordStore) -> tuple:
    """Everything a store holds: segment bytes, index entries, free pieces, counters, stats."""
    segments = [None if view is None else bytes(view) for view in store._views]
    return (segments, store._addr.tobytes(), store._size.tobytes(), sorted(store._free.pieces()),
            store._free.nbytes, store._bump_seg, store._bump_pos, list(store._free_recids),
            store._next_recid, store._live_bytes, store._chunk_bytes, store.stats())


# a few sizes often (free pieces of one size, apart: which one a record takes), any small size,
# sizes past the 4-byte classes, empty and large records
sizes = st.one_of(st.sampled_from([12, 40, 100, 200]), st.sampled_from([12, 40, 100, 200]),
                  st.integers(1, 700), st.integers(4000, 9000), st.just(0),
                  st.just(LARGE_RECORD_BYTES + 1))


class CompiledVersusReference(RuleBasedStateMachine):
    """Both stores on arenas of the same limit, fed the same calls."""

    def __init__(self):
        super().__init__()
        self.stores = [CompiledStore(Arena.anonymous(limit_bytes=768 * 1024)),
                       ReferenceStore(Arena.anonymous(limit_bytes=768 * 1024))]
        self.recids: list[int] = []
        self.serial = 0

    def payload(self, size: int) -> bytes:
        self.serial += 1
        return bytes((self.serial + i) % 251 for i in range(min(size, 64))) + b"x" * max(size - 64, 0)

    def both(self, method: str, *args):
        """Call ``method`` on both stores: the same result, or the same error with both
        unchanged."""
        outcomes = []
        for store in self.stores:
            before = state(store)
            try:
                outcomes.append(("ok", getattr(store, method)(*args)))
            except CapacityError:
                assert state(store) == before, f"{method} failed and changed the store"
                outcomes.append(("CapacityError", None))
        assert outcomes[0] == outcomes[1], (method, outcomes)
        return outcomes[0]

    @rule(size=sizes)
    def put(self, size):
        outcome, recid = self.both("put", self.payload(size))
        if outcome == "ok":
            self.recids.append(recid)

    @precondition(lambda self: self.recids)
    @rule(pick=st.integers(0, 10**6), size=sizes)
    def update(self, pick, size):
        self.both("update", self.recids[pick % len(self.recids)], self.payload(size))

    @precondition(lambda self: self.recids)
    @rule(pick=st.integers(0, 10**6), grow=st.integers(-16, 16))
    def update_by_a_little(self, pick, grow):
        """A B-tree leaf's rewrite: a few bytes more or less than it had."""
        recid = self.recids[pick % len(self.recids)]
        size = max(len(self.stores[1].view(recid)) + grow, 0)
        self.both("update", recid, self.payload(size))

    @precondition(lambda self: self.recids)
    @rule(pick=st.integers(0, 10**6))
    def delete(self, pick):
        self.both("delete", self.recids.pop(pick % len(self.recids)))

    @invariant()
    def same(self):
        compiled, reference = self.stores
        compiled._check()
        reference._check()
        assert state(compiled) == state(reference)


TestCompiledVersusReference = CompiledVersusReference.TestCase
TestCompiledVersusReference.settings = settings(max_examples=80, stateful_step_count=60,
                                                deadline=None)


def test_update_of_a_free_or_unknown_record_is_the_reference_key_error():
    store = CompiledStore(Arena.anonymous())
    recid = store.put(b"abc")
    store.delete(recid)
    for missing in (recid, 0, 10**6, 2**70, -1):
        with pytest.raises(KeyError):
            store.update(missing, b"abcd")
    store._check()


def test_update_that_needs_a_new_segment_fails_like_the_reference():
    stores = [CompiledStore(Arena.anonymous(limit_bytes=256 * 1024)),
              ReferenceStore(Arena.anonymous(limit_bytes=256 * 1024))]
    for store in stores:
        recids = []
        with pytest.raises(CapacityError):
            while True:
                recids.append(store.put(b"r" * 200))
        before = state(store)
        with pytest.raises(CapacityError):
            store.update(recids[0], b"g" * 3000)  # no free piece, no bump room, no new segment
        assert state(store) == before
        store.update(recids[0], b"s" * 100)  # shrinks into its own chunk's class: fits
    assert state(stores[0]) == state(stores[1])
