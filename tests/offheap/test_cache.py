"""Cache against a reference model (an OrderedDict in LRU order with the same rules and a fake
clock): inserts, hits, misses, overwrites, deletes, expiry after write or access, eviction
order, max_entries, max_bytes and limit; the MutableMapping contract; threads."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from offheap import Cache, CapacityError, ClosedError
from offheap.hashmap.cache import ReferenceCache
from tests.contracts import MutableMappingContract, run_racing_threads

LONG = "a key of more than fifteen bytes, kept in a record"
KEYS = [f"k{i}" for i in range(12)] + [LONG + str(i) for i in range(4)]


class FakeClock:
    """Seconds that pass only when a test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class CacheModel:
    """The cache's rules on an OrderedDict ``key -> [value, stamp, mark, seq]`` in entry order
    (LRU: least recently used first; CLOCK: insertion order, a write inserting again), the
    time read from the same clock. CLOCK's hand is a ``seq``: the next victim is the first
    entry of a ``seq`` at or past it, else the first entry."""

    def __init__(self, clock, max_entries=None, ttl=None, expire_after="write", policy="lru"):
        self.clock, self.max_entries, self.ttl = clock, max_entries, ttl
        self.by_access = expire_after == "access"
        self.clock_policy = policy == "clock"
        self.entries: OrderedDict = OrderedDict()
        self.hand = self.next_seq = 0
        self.hits = self.misses = self.size_evictions = self.expiry_evictions = 0

    def expired(self, key) -> bool:
        return self.ttl is not None and self.clock() - self.entries[key][1] >= self.ttl

    def expire_all(self) -> None:
        for key in [key for key in self.entries if self.expired(key)]:
            del self.entries[key]
            self.expiry_evictions += 1

    def live(self, key) -> bool:
        if key in self.entries and self.expired(key):
            del self.entries[key]
            self.expiry_evictions += 1
        return key in self.entries

    def get(self, key, default=None):
        if not self.live(key):
            self.misses += 1
            return default
        self.hits += 1
        entry = self.entries[key]
        if self.clock_policy:
            entry[2] = 1
        else:
            self.entries.move_to_end(key)
        if self.by_access:
            entry[1] = self.clock()
        return entry[0]

    def victim(self):
        """The key an eviction takes (the policy's), CLOCK's hand moved."""
        if not self.clock_policy:
            return next(iter(self.entries))
        while True:
            later = [key for key, entry in self.entries.items() if entry[3] >= self.hand]
            key = later[0] if later else next(iter(self.entries))
            entry = self.entries[key]
            self.hand = entry[3]
            if not entry[2]:
                return key
            entry[2] = 0
            self.hand = entry[3] + 1

    def set(self, key, value) -> None:
        self.expire_all()
        if key in self.entries:
            del self.entries[key]
        elif self.max_entries is not None:
            while len(self.entries) >= self.max_entries:
                del self.entries[self.victim()]
                self.size_evictions += 1
        if not any(entry[3] >= self.hand for entry in self.entries.values()):
            self.hand = 0  # past the last entry: back to the first before the new one
        self.entries[key] = [value, self.clock(), 0, self.next_seq]
        self.next_seq += 1

    def popitem(self):
        key = self.victim()
        return key, self.entries.pop(key)[0]

    def items(self) -> list:
        return [(key, entry[0]) for key, entry in self.entries.items()]


keys = st.sampled_from(KEYS)
short_values = st.one_of(st.none(), st.integers(), st.text(max_size=12))


def cache_machine(values=short_values, **options):
    """A state machine driving a Cache and a CacheModel with the same calls. Evictions the
    model cannot predict (by bytes: ``max_bytes``, ``limit``) are taken from the cache after
    each step, and must be the model's least recently used entries."""
    size_by_bytes = "max_bytes" in options or "limit" in options

    class CacheVersusModel(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.clock = FakeClock()
            self.cache = Cache(key="str", clock=self.clock, **options)
            self.model = CacheModel(self.clock, options.get("max_entries"), options.get("ttl"),
                                    options.get("expire_after", "write"),
                                    options.get("policy", "lru"))

        @rule(key=keys, value=values)
        def put(self, key, value):
            try:
                self.cache[key] = value
            except CapacityError:  # too large for the limit even alone: the cache is left empty
                assert "limit" in options and len(self.cache._table) == 0
                self.model.set(key, value)
                del self.model.entries[key]
                return
            self.model.set(key, value)

        @rule(key=keys)
        def get(self, key):
            assert self.cache.get(key, "<absent>") == self.model.get(key, "<absent>")

        @rule(key=keys)
        def getitem(self, key):
            expected = self.model.get(key, KeyError)
            if expected is KeyError:
                with pytest.raises(KeyError):
                    self.cache[key]
            else:
                assert self.cache[key] == expected

        @rule(key=keys)
        def contains(self, key):
            assert (key in self.cache) == self.model.live(key)

        @rule(key=keys)
        def delete(self, key):
            if self.model.live(key):
                del self.cache[key]
                del self.model.entries[key]
            else:
                with pytest.raises(KeyError):
                    del self.cache[key]

        @rule(key=keys)
        def pop(self, key):
            expected = self.model.entries.pop(key)[0] if self.model.live(key) else "<absent>"
            assert self.cache.pop(key, "<absent>") == expected

        @rule()
        def popitem(self):
            self.model.expire_all()
            if self.model.entries:
                assert self.cache.popitem() == self.model.popitem()
            else:
                with pytest.raises(KeyError):
                    self.cache.popitem()

        @rule()
        def iterate(self):
            self.model.expire_all()
            assert list(self.cache.items()) == self.model.items()

        @rule()
        def length(self):
            self.model.expire_all()
            assert len(self.cache) == len(self.model.entries)

        @rule(seconds=st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0, 7.0]))
        def tick(self, seconds):
            self.clock.now += seconds

        @rule()
        def counters(self):
            self.model.expire_all()
            s, m = self.cache.stats(), self.model
            assert (s.n_entries, s.hits, s.misses, s.size_evictions, s.expiry_evictions) == \
                (len(m.entries), m.hits, m.misses, m.size_evictions, m.expiry_evictions)

        @rule()
        def copy(self):
            self.model.expire_all()
            twin = self.cache.copy()
            try:
                copied = list(twin.items())
                expected = self.model.items()
                if size_by_bytes:  # grown entry by entry, it may hold fewer of the oldest
                    expected = expected[len(expected) - len(copied):] if copied else []
                assert copied == expected
                twin._check()
            finally:
                twin.close()

        @invariant()
        def agrees(self):
            table = self.cache._table
            held = list(table)  # the table itself: no expiry, no counting
            if size_by_bytes:
                gone = [key for key in self.model.entries if key not in table]
                assert gone == list(self.model.entries)[: len(gone)], "evicted out of LRU order"
                for key in gone:
                    del self.model.entries[key]
                self.model.size_evictions += len(gone)
            assert held == list(self.model.entries)
            assert self.cache._size_evictions == self.model.size_evictions
            assert self.cache._expiry_evictions == self.model.expiry_evictions
            self.cache._check()

        def teardown(self):
            self.cache.close()

    CacheVersusModel.TestCase.settings = settings(max_examples=40, stateful_step_count=50,
                                                  deadline=None)
    return CacheVersusModel


TestMaxEntries = cache_machine(max_entries=4).TestCase
TestExpireAfterWrite = cache_machine(ttl=5.0).TestCase
TestExpireAfterAccess = cache_machine(ttl=5.0, expire_after="access", max_entries=6).TestCase
TestExpireAfterWriteBounded = cache_machine(ttl=4.0, max_entries=5).TestCase
TestClock = cache_machine(max_entries=4, policy="clock").TestCase
TestClockExpireAfterAccess = cache_machine(ttl=5.0, expire_after="access", max_entries=6,
                                           policy="clock").TestCase
TestClockExpireAfterWrite = cache_machine(ttl=4.0, max_entries=5, policy="clock").TestCase
TestMaxBytes = cache_machine(st.text(max_size=600), max_bytes="12KiB", ttl=6.0).TestCase
TestLimit = cache_machine(st.binary(max_size=8000), value="bytes", limit="100KiB").TestCase


class TestCacheContract(MutableMappingContract):
    keys = ["", "a", "user:1234567", LONG] + [f"k{i}" for i in range(150)]

    def make(self):
        return Cache(key="str")


class TestBoundedCacheContract(MutableMappingContract):
    """The contract holds while the bounds are not reached."""

    keys = [f"k{i}" for i in range(150)] + [LONG]

    def make(self):
        return Cache(key="str", max_entries=1000, max_bytes="1MiB", ttl=3600.0,
                     expire_after="access")


def test_clock_gives_a_second_chance_to_entries_hit_since_the_hand_passed():
    cache = Cache(key="str", value="int64", max_entries=3, policy="clock")
    cache.update(a=1, b=2, c=3)
    assert cache["a"] == 1  # marked: the hand passes it once
    cache["d"] = 4  # a is unmarked and passed, b evicted
    assert list(cache) == ["a", "c", "d"]
    cache["e"] = 5  # the hand goes on from b's place: c evicted
    assert list(cache) == ["a", "d", "e"]
    assert "CLOCK" in repr(cache) and cache.stats().size_evictions == 2


def test_evicts_least_recently_used_first():
    cache = Cache(key="str", value="int64", max_entries=3)
    cache.update(a=1, b=2, c=3)
    assert cache["a"] == 1  # a is now the most recently used
    cache["d"] = 4
    assert list(cache) == ["c", "a", "d"]
    cache["c"] = 30  # a write moves c too
    cache["e"] = 5
    assert list(cache.items()) == [("d", 4), ("c", 30), ("e", 5)]
    assert "a" not in cache and cache.popitem() == ("d", 4)
    s = cache.stats()
    assert (s.hits, s.misses, s.size_evictions, s.expiry_evictions) == (1, 0, 2, 0)


@pytest.mark.parametrize("expire_after", ["write", "access"])
def test_expiry_on_a_fake_clock(expire_after):
    clock = FakeClock()
    cache = Cache(key="str", ttl=10.0, expire_after=expire_after, clock=clock)
    cache["a"] = "x"
    clock.now = 6.0
    assert cache["a"] == "x"  # read at 6: refreshes the stamp only after access
    clock.now = 10.0
    assert ("a" in cache) is (expire_after == "access")
    clock.now = 15.9
    assert cache.get("a") == (None if expire_after == "write" else "x")
    s = cache.stats()
    assert s.expiry_evictions == (1 if expire_after == "write" else 0)


@pytest.mark.parametrize("policy", ["lru", "clock"])
def test_stamps_marks_and_hand_follow_their_entries_through_compaction(policy):
    """Hits (LRU) and overwrites leave holes; growth compacts them and renumbers the entries,
    and each stamp and mark, and CLOCK's hand, must move with its entry."""
    clock = FakeClock()
    cache = Cache(key="str", ttl=100.0, max_entries=60, clock=clock, policy=policy)
    model = CacheModel(clock, max_entries=60, ttl=100.0, policy=policy)
    for i in range(400):
        clock.now = float(i)
        for key, value in ((f"k{i}", i), (f"k{i // 3}", -i)):  # a new key, an overwrite
            cache[key] = value
            model.set(key, value)
        for j in range(0, i, 7):  # hits: LRU deletes and inserts again, CLOCK marks
            assert cache.get(f"k{j}") == model.get(f"k{j}")
    cache._check()
    assert list(cache.items()) == model.items()
    clock.now = 420.0
    model.expire_all()
    assert list(cache.items()) == model.items() and len(cache) == len(model.entries)
    assert cache.stats().size_evictions == model.size_evictions > 0


def test_write_mode_finds_expired_entries_anywhere():
    """With expire_after="write" a hit moves an old entry to the newest end; it expires there
    all the same."""
    clock = FakeClock()
    cache = Cache(key="str", ttl=5.0, clock=clock)
    cache["old"] = 1
    clock.now = 3.0
    cache["new"] = 2
    assert cache["old"] == 1
    assert list(cache) == ["new", "old"]
    clock.now = 5.0
    assert list(cache) == ["new"] and len(cache) == 1
    assert cache.stats().expiry_evictions == 1


def test_max_bytes_bounds_the_table_and_its_records():
    cache = Cache(key="str", value="str", max_bytes="64KiB")
    for i in range(5000):
        cache[f"user:{i}"] = "v" * (i % 300)
        assert cache.stats().held_bytes <= 64 * 1024
    cache._check()
    s = cache.stats()
    assert 0 < s.n_entries < 5000 and s.size_evictions == 5000 - s.n_entries
    assert list(cache)[-1] == "user:4999"


def test_an_entry_larger_than_max_bytes_is_evicted_at_once():
    cache = Cache(key="str", value="bytes", max_bytes="32KiB")
    cache["small"] = b"x"
    cache["huge"] = b"y" * 100_000
    assert "huge" not in cache and "small" not in cache
    assert cache.stats().size_evictions == 2


def test_limit_evicts_instead_of_raising():
    cache = Cache(key="str", value="bytes", limit="512KiB")
    for i in range(3000):
        cache[f"k{i}"] = bytes(200)
    cache._check()
    s = cache.stats()
    assert s.reserved_bytes <= 512 * 1024 and s.size_evictions > 0
    assert cache["k2999"] == bytes(200)


def test_an_entry_too_large_for_the_limit_raises_and_empties_the_cache():
    cache = Cache(key="str", value="bytes", limit="192KiB")
    cache["a"] = b"1"
    with pytest.raises(CapacityError, match="even with every other entry evicted"):
        cache["big"] = bytes(1 << 20)
    assert len(cache) == 0
    cache._check()
    cache["b"] = b"2"
    assert dict(cache.items()) == {"b": b"2"}


@pytest.mark.parametrize("options, message", [
    (dict(max_entries=0), "max_entries"), (dict(max_entries=2.5), "max_entries"),
    (dict(ttl=0), "ttl"), (dict(ttl=math.inf), "ttl"), (dict(ttl="1s"), "ttl"),
    (dict(expire_after="read"), "expire_after"), (dict(max_bytes="lots"), "size"),
    (dict(policy="lfu"), "policy"),
])
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        Cache(**options)


def test_reprs_name_bounds_and_counters():
    clock = FakeClock()
    cache = Cache(key="str", value="str", max_entries=2, ttl=1.5, expire_after="access",
                  clock=clock, limit="1MiB")
    cache.update({"a": "1", "b": "2", "c": "3"})
    cache.get("c"), cache.get("zz")
    text = repr(cache)
    for part in ("Cache 2 entries", "key=str", "max_entries=2", "ttl=1.5",
                 "expire_after=access", "hits 50.0%", "1 evicted", "limit 1.0 MiB"):
        assert part in text
    html = cache._repr_html_()
    assert "<table" in html and "evicted by size" in html
    cache.close()
    assert repr(cache) == "<Cache (closed)>" and "closed" in cache._repr_html_()
    with pytest.raises(ClosedError):
        cache.get("a")


def test_a_refused_key_or_value_changes_nothing():
    cache = Cache(key="str", value="int64", max_entries=2)
    cache.update(a=1, b=2)
    for key, value in ((3, 3), (b"c", 3), ("c", "three"), ("a", "one")):
        with pytest.raises(TypeError):
            cache[key] = value
    assert list(cache.items()) == [("a", 1), ("b", 2)]
    assert cache.stats().size_evictions == 0


def test_a_cache_does_not_pickle():
    import pickle

    with pytest.raises(TypeError, match="does not pickle"):
        pickle.dumps(Cache())


@pytest.mark.parametrize("cls", [Cache, ReferenceCache])
@pytest.mark.parametrize("options", [dict(policy="lru"), dict(policy="clock"),
                                     dict(ttl=3600.0, policy="lru"),
                                     dict(ttl=3600.0, policy="clock", expire_after="access"),
                                     dict(ttl=3600.0, clock=lambda: 5.0)])
def test_threads_keep_the_cache_consistent(cls, options):
    """Hits, misses, writes (long keys and values in records too), probes and pops racing; the
    default clock is read by the compiled core without the lock, another clock with it."""
    cache = cls(key="str", value="object", max_entries=50, **options)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for i in range(3000):
                key = f"k{(i * 7 + seed) % 120}" if i % 11 else f"{LONG}{i % 40}"
                if i % 3:
                    cache[key] = i if i % 4 else "a value long enough for a record"
                elif i % 6:
                    cache.get(key)
                else:
                    key in cache  # noqa: B015  # the probe is the point
                if i % 97 == 0:
                    cache.pop(key, None)
                    try:
                        list(cache.items())
                    except RuntimeError:
                        pass  # another thread's write overtook the iteration, as with a dict
        except BaseException as exc:  # noqa: BLE001  # raised below, in the test's thread
            errors.append(exc)

    run_racing_threads(work, seeds=(1, 2, 3))
    assert not errors, errors
    cache._check()
    s = cache.stats()
    assert len(cache) == 50 and s.hits + s.misses == 3 * 500


def test_an_operation_waits_for_the_tables_lock():
    cache = Cache()
    assert cache._lock is cache._table._lock
    writer = threading.Thread(target=cache.__setitem__, args=("a", 1))
    with cache._lock:
        writer.start()
        writer.join(0.05)
        assert writer.is_alive() and len(cache._table) == 0  # it cannot run while held
    writer.join()
    assert cache["a"] == 1


@pytest.mark.parametrize("options", [{}, dict(ttl=3600.0), dict(ttl=3600.0, policy="clock")])
def test_a_lookup_waits_for_a_growth_that_detached_the_table(options):
    """A growth holds the lock while the table is detached (its parts being swapped); a lookup
    of another thread waits for it instead of finding the table closed."""
    cache = Cache({"a": 1}, key="str", max_entries=10, **options)
    table = cache._table
    answers: list = []
    reader = threading.Thread(target=lambda: answers.append((cache.get("a"), "a" in cache)))
    with cache._lock:
        table._swap(lambda regions: (reader.start(), reader.join(0.05)))
        assert reader.is_alive() and not answers  # it waits while the table is detached
    reader.join()
    assert answers == [(1, True)]
