"""Sizes, key streams and the fill loop's budget logic, without subprocesses."""

import numpy as np
import pytest

from experiments.child import Fill
from experiments.contenders import CONTENDERS, HeapTarget, user_keys
from experiments.keys import KeyStream
from experiments.sizes import format_bytes, format_count, parse_bytes


@pytest.mark.parametrize("text, expected", [
    ("256MiB", 256 << 20), ("1GiB", 1 << 30), ("15GiB", 15 << 30), ("8 MiB", 8 << 20),
    ("500MB", 500_000_000), ("1.5GiB", 3 << 29), ("4096", 4096), ("2k", 2000),
])
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "MiB", "12 parsecs", "-1MiB", "0"])
def test_parse_bytes_rejects_nonsense_with_an_example(text):
    with pytest.raises(ValueError, match="256MiB|positive"):
        parse_bytes(text)


def test_format_bytes_and_counts():
    assert format_bytes(256 << 20) == "256.0 MiB"
    assert format_bytes(15 << 30) == "15.00 GiB"
    assert format_bytes(812) == "812 B"
    assert format_count(1_738_000_000) == "1,738 M"
    assert format_count(3_200_000) == "3.2 M"
    assert format_count(65_536) == "65,536"


def test_sequential_keys_continue_after_give_back():
    stream = KeyStream("sequential")
    first = stream.take(10)
    stream.give_back(first[4:])
    assert stream.take(3).tolist() == [4, 5, 6]
    assert stream.take(6).tolist() == [7, 8, 9, 10, 11, 12]


def test_random_keys_are_seeded_full_range_int64():
    keys = KeyStream("random", seed=7).take(100_000)
    assert keys.dtype == np.int64
    assert keys.tolist() == KeyStream("random", seed=7).take(100_000).tolist()
    assert keys.min() < -(1 << 62) and keys.max() > 1 << 62  # signed, like Random.nextLong()


def test_unknown_key_order_is_rejected():
    with pytest.raises(ValueError, match="sequential, random"):
        KeyStream("zigzag")


class _AllOrNothingTarget:
    """An arena-like target holding at most ``capacity`` keys, 16 bytes each; a bulk insert
    that would not fit inserts nothing, a scalar insert stops at the capacity."""

    measured_by = "arena"
    bulk = True

    def __init__(self, capacity):
        self.capacity = capacity
        self.keys = []
        self.finished = False

    def __len__(self):
        return len(self.keys)

    def insert(self, keys, batch):
        room = self.capacity - len(self.keys)
        if batch and len(keys) > room:
            return 0
        taken = keys[:room].tolist()
        self.keys += taken
        return len(taken)

    def memory_bytes(self):
        return 16 * len(self.keys)

    def finish(self):
        self.finished = True


@pytest.mark.parametrize("batch", [False, True])
def test_fill_stops_exactly_at_the_capacity_without_losing_keys(batch):
    target = _AllOrNothingTarget(capacity=1_000_003)
    result = Fill(target, KeyStream("sequential"), budget_bytes=1 << 30, batch=batch,
                  max_seconds=60).run()
    assert result["stop"] == "budget"
    assert result["entries"] == 1_000_003 and result["memory_bytes"] == 16_000_048
    assert target.keys == list(range(1_000_003)) and target.finished


def test_fill_stops_by_time_and_says_so():
    target = _AllOrNothingTarget(capacity=10**12)
    result = Fill(target, KeyStream("sequential"), budget_bytes=1 << 60, batch=False,
                  max_seconds=0.05).run()
    assert result["stop"] == "time"
    assert result["entries"] > 0 and result["seconds"] >= 0.05


class _GrowingBatchTarget(_AllOrNothingTarget):
    """Asks for bulk batches as large as itself, as TreeMap's page-building update wants."""

    def __init__(self, capacity):
        super().__init__(capacity)
        self.batch_sizes = []

    def bulk_step(self, default):
        return max(default, len(self.keys))

    def insert(self, keys, batch):
        self.batch_sizes.append(len(keys))
        return super().insert(keys, batch)


def test_growing_batches_double_the_map_then_shrink_to_fit():
    target = _GrowingBatchTarget(capacity=5_000_000)
    result = Fill(target, KeyStream("sequential"), budget_bytes=1 << 40, batch=True,
                  max_seconds=60).run()
    assert result["entries"] == 5_000_000 and target.keys == list(range(5_000_000))
    million = 1 << 20
    assert target.batch_sizes[:3] == [million, million, 2 * million]  # doubling
    assert target.batch_sizes[3] == 4 * million  # refused: 8M would not fit in 5M
    assert target.batch_sizes[4] == 2 * million  # halved, and never grown again
    assert max(target.batch_sizes[5:]) <= 2 * million


def test_rss_guard_stops_a_heap_map_before_the_machine_runs_out():
    result = Fill(HeapTarget({}), KeyStream("sequential"), budget_bytes=1 << 40, batch=False,
                  max_seconds=60, rss_guard_bytes=32 << 20).run()
    assert result["stop"] == "rss-guard"
    assert result["peak_rss_growth_bytes"] > 32 << 20 and result["entries"] > 100_000


@pytest.mark.parametrize("batch", [False, True])
def test_a_long_hash_set_fills_its_limit_and_holds_exactly_the_keys_counted(batch):
    """The set contender stops at its arena's limit with every counted key stored (scalar:
    ``add`` up to the key that raised CapacityError; bulk: ``add_many`` all or nothing)."""
    target = CONTENDERS["longhashset"].build(1 << 20, None)
    result = Fill(target, KeyStream("random"), budget_bytes=1 << 20, batch=batch,
                  max_seconds=60).run()
    assert result["stop"] == "budget" and 0 < result["memory_bytes"] <= 1 << 20
    assert len(target.map) == result["entries"]
    assert target.map.contains_many(KeyStream("random").take(result["entries"])).all()
    target.close()


def test_user_keys_are_the_str_keys_of_a_typical_dict():
    assert user_keys(np.array([0, 1234567, -5])) == ["user:0", "user:1234567", "user:-5"]


@pytest.mark.parametrize("name", ["hashmap-str", "hashset-str"])
def test_the_str_keyed_contenders_fill_their_limit_with_the_user_keys_counted(name):
    """HashMap(key="str") and HashSet(key="str") stop at their arena's limit holding exactly the
    ``user:`` keys counted, in bulk (all or nothing) and key by key."""
    for batch in (False, True):
        target = CONTENDERS[name].build(1 << 20, None)
        result = Fill(target, KeyStream("random"), budget_bytes=1 << 20, batch=batch,
                      max_seconds=60).run()
        assert result["stop"] == "budget" and 0 < result["memory_bytes"] <= 1 << 20
        assert len(target.map) == result["entries"] > 1000
        expected = user_keys(KeyStream("random").take(result["entries"]))
        assert target.map.contains_many(expected).all()
        target.close()
