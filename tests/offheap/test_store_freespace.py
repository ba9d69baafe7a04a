"""Free space of the record store: merging, exact and best fit, growth in place, against a model
of free bytes; the reference and its compiled twin (offheap/store/_space.c) alike."""

import importlib

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from offheap.store import freespace


def _compiled_free_space():
    try:
        return importlib.import_module("offheap.store._space").FreeSpace
    except ImportError:
        return None


COMPILED = _compiled_free_space()
IMPLEMENTATIONS = [pytest.param(freespace.FreeSpace, id="reference"),
                   pytest.param(COMPILED, id="compiled", marks=pytest.mark.skipif(
                       COMPILED is None, reason="offheap.store._space is not built"))]


@pytest.mark.parametrize("FreeSpace", IMPLEMENTATIONS)
def test_neighbours_merge(FreeSpace):
    free = FreeSpace()
    assert free.add(96, 96) == (96, 96)
    assert free.add(192, 96) == (96, 192)  # after it
    assert free.add(0, 96) == (0, 288)  # before it
    assert free.add(400, 8) == (400, 8)  # apart
    assert sorted(free.pieces()) == [(0, 288), (400, 8)] and free.nbytes == 296
    free._check()


@pytest.mark.parametrize("FreeSpace", IMPLEMENTATIONS)
def test_exact_size_first_then_the_smallest_larger_piece(FreeSpace):
    free = FreeSpace()
    for addr, size in [(0, 64), (100, 40), (200, 48), (300, 40)]:
        free.add(addr, size)
    assert free.take(40) == 300  # exact, the last freed of that size
    assert free.take(44) == 200  # best fit: the 48-byte piece, its last 4 bytes stay free
    assert sorted(free.pieces()) == [(0, 64), (100, 40), (244, 4)]
    assert free.take(40, split=False) == 100
    assert free.take(60, split=False) is None
    assert free.take(65) is None
    free._check()


@pytest.mark.parametrize("FreeSpace", IMPLEMENTATIONS)
def test_take_at_grows_into_the_piece_that_starts_there(FreeSpace):
    free = FreeSpace()
    free.add(100, 32)
    assert not free.take_at(100, 40) and not free.take_at(96, 8)
    assert free.take_at(100, 8)
    assert list(free.pieces()) == [(108, 24)]
    assert free.take_at(108, 24) and free.nbytes == 0
    free._check()


@pytest.mark.parametrize("FreeSpace", IMPLEMENTATIONS)
def test_remove_of_an_address_where_no_piece_starts_is_a_key_error(FreeSpace):
    free = FreeSpace()
    free.add(8, 8)
    with pytest.raises(KeyError):
        free.remove(12)
    assert free.remove(8) == 8 and free.nbytes == 0


class FreeSpaceVersusBytes(RuleBasedStateMachine):
    """Free space over 64 slots of 4 bytes against the set of free slots, and the compiled twin
    against the reference: the same answers to every call."""

    def __init__(self):
        super().__init__()
        self.free = freespace.FreeSpace()
        self.twin = COMPILED() if COMPILED is not None else None
        self.model = set()  # free byte addresses, multiples of 4

    def both(self, method, *args):
        """Call ``method`` on the reference and on the twin; the reference's answer, after
        checking that the twin's is the same."""
        answer = getattr(self.free, method)(*args)
        if self.twin is not None:
            assert getattr(self.twin, method)(*args) == answer, (method, args)
        return answer

    @rule(start=st.integers(0, 63), n=st.integers(1, 8))
    def add(self, start, n):
        slots = {4 * i for i in range(start, min(start + n, 64))}
        if slots & self.model:
            return  # only bytes in use are freed
        self.both("add", 4 * start, 4 * len(slots))
        self.model |= slots

    @rule(n=st.integers(1, 8), split=st.booleans())
    def take(self, n, split):
        addr = self.both("take", 4 * n, split)
        if addr is None:
            return
        slots = {addr + 4 * i for i in range(n)}
        assert slots <= self.model
        self.model -= slots

    @precondition(lambda self: self.model)
    @rule(pick=st.integers(0, 10**6), n=st.integers(1, 4))
    def take_at(self, pick, n):
        addr = sorted(self.model)[pick % len(self.model)]
        slots = {addr + 4 * i for i in range(n)}
        starts_a_piece = addr - 4 not in self.model
        assert self.both("take_at", addr, 4 * n) == (starts_a_piece and slots <= self.model)
        if starts_a_piece and slots <= self.model:
            self.model -= slots

    @invariant()
    def agrees(self):
        self.free._check()
        covered = {a + i for a, size in self.free.pieces() for i in range(0, size, 4)}
        assert covered == self.model and self.free.nbytes == 4 * len(self.model)
        if self.twin is not None:
            self.twin._check()
            assert list(self.twin.pieces()) == sorted(self.free.pieces())
            assert self.twin.nbytes == self.free.nbytes


TestFreeSpaceVersusBytes = FreeSpaceVersusBytes.TestCase
TestFreeSpaceVersusBytes.settings = settings(max_examples=60, stateful_step_count=50, deadline=None)
