"""sparkey.sharded.write_dask on a two-worker dask.distributed LocalCluster (skipped without Dask).

Input partitions are generated on the workers (``from_map``, ``Bag.map``), never shipped from
the client. One cluster serves the whole module.
"""

import os

import pytest

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("dask.distributed")
pd = pytest.importorskip("pandas")

import dask.bag  # noqa: E402  (after the skip checks)
import dask.dataframe  # noqa: E402

import sparkey  # noqa: E402
from sparkey import sharded  # noqa: E402
from sparkey.errors import EntryTypeError  # noqa: E402
from sparkey.sharded import DuplicateKeyError  # noqa: E402

ROWS_PER_PARTITION = 400


@pytest.fixture(scope="module", autouse=True)
def client():
    """A LocalCluster of 2 single-threaded worker processes, with bytes kept as bytes.

    Processes rather than threads: every task, argument and result then crosses a pickle
    boundary as on a real cluster (the module takes about 9 s this way, 5 s with threads).
    """
    with dask.config.set({"dataframe.convert-string": False}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        yield client


def key_value_partition(number):
    """Partition ``number`` of the key_%d -> value_%d input, built where it runs."""
    keys = [b"key_%d" % i for i in range(number * ROWS_PER_PARTITION,
                                         (number + 1) * ROWS_PER_PARTITION)]
    return pd.DataFrame({"k": keys, "v": [b"value_" + key[4:] for key in keys]})


def versioned_partition(number):
    """Every key 0..99 in every partition; the winning version depends on the sequence only."""
    return pd.DataFrame({"key": [b"key_%d" % i for i in range(100)],
                         "value": [b"from %d" % number] * 100,
                         "seq": [(i + number) % 3 * 10 + number for i in range(100)]})


def expected_versions(partitions):
    best = {}
    for number in range(partitions):
        for row in versioned_partition(number).itertuples():
            if row.key not in best or row.seq > best[row.key][0]:
                best[row.key] = (row.seq, row.value)
    return {key: value for key, (_, value) in best.items()}


def pair_list(number):
    return [(b"b%d" % i, b"%d" % (i * i)) for i in range(number * 50, number * 50 + 50)]


def test_dataframe_build_matches_in_process_build(tmp_path):
    frame = dask.dataframe.from_map(key_value_partition, range(4))
    manifest = sharded.write_dask(frame, tmp_path / "store", 5, key="k", value="v",
                                  compression="zstd", block_size=512)
    expected = {key: value for number in range(4)
                for key, value in key_value_partition(number).itertuples(index=False)}
    local = sharded.write(expected, tmp_path / "local", 5)
    assert [info.num_entries for info in manifest.shards] == [
        info.num_entries for info in local.shards]
    assert sorted(os.listdir(tmp_path)) == ["local", "store"]
    with sparkey.open_sharded(tmp_path / "store") as reader:
        reader._check()
        assert reader == expected
        assert reader.shards[0].log_header.compression_type == sparkey.Compression.ZSTD


def test_bag_of_pairs(tmp_path):
    bag = dask.bag.from_sequence(range(3), npartitions=3).map(pair_list).flatten()
    sharded.write_dask(bag, tmp_path / "store", 3)
    with sparkey.open_sharded(tmp_path / "store") as reader:
        assert reader == {b"b%d" % i: b"%d" % (i * i) for i in range(150)}


def test_largest_sequence_wins_whatever_the_shuffle_order(tmp_path):
    frame = dask.dataframe.from_map(versioned_partition, range(3))
    manifest = sharded.write_dask(frame, tmp_path / "store", 4, sequence="seq")
    expected = expected_versions(3)
    assert set(expected.values()) == {b"from 0", b"from 1", b"from 2"}
    assert manifest.num_entries == 100
    with sparkey.open_sharded(tmp_path / "store") as reader:
        assert reader == expected
        assert sum(reader.shards[shard].index_header.num_puts for shard in range(4)) == 100


def test_bag_of_triples_with_sequence(tmp_path):
    bag = dask.bag.from_sequence(
        [(b"a", b"old", 1), (b"b", b"only", 7), (b"a", b"new", 2)], npartitions=3)
    sharded.write_dask(bag, tmp_path / "store", 2, sequence="seq")
    with sparkey.open_sharded(tmp_path / "store") as reader:
        assert dict(reader.items()) == {b"a": b"new", b"b": b"only"}


def _assert_nothing_published(tmp_path):
    assert os.listdir(tmp_path) == []


def test_duplicates_without_sequence_are_rejected(tmp_path):
    frame = dask.dataframe.from_map(versioned_partition, range(2))
    with pytest.raises(DuplicateKeyError, match=r"key b'key_\d+' \(shard \d\) occurs more than "
                                                r"once.*pass sequence=") as info:
        sharded.write_dask(frame, tmp_path / "store", 4)
    assert "Traceback" in str(info.value.__cause__)
    _assert_nothing_published(tmp_path)


def test_sequence_ties_are_rejected(tmp_path):
    bag = dask.bag.from_sequence([(b"a", b"1", 5), (b"a", b"2", 5)], npartitions=2)
    with pytest.raises(DuplicateKeyError, match="several rows with sequence 5"):
        sharded.write_dask(bag, tmp_path / "store", 2, sequence="seq")
    _assert_nothing_published(tmp_path)


def test_missing_sequence_values_are_rejected(tmp_path):
    frame = dask.dataframe.from_pandas(pd.DataFrame(
        {"key": [b"a", b"b"], "value": [b"1", b"2"], "seq": [1.0, float("nan")]}), npartitions=1)
    with pytest.raises(ValueError, match="key b'b' .* has no sequence value"):
        sharded.write_dask(frame, tmp_path / "store", 2, sequence="seq")
    _assert_nothing_published(tmp_path)


def test_empty_shards_and_empty_input(tmp_path):
    bag = dask.bag.from_sequence([(b"x", b"1"), (b"y", b"2")], npartitions=2)
    manifest = sharded.write_dask(bag, tmp_path / "store", 8)
    assert [info.num_entries for info in manifest.shards].count(0) >= 6
    assert len(os.listdir(tmp_path / "store")) == 17
    empty = dask.dataframe.from_pandas(pd.DataFrame(
        {"key": pd.Series([], dtype=object), "value": pd.Series([], dtype=object)}),
        npartitions=1)
    assert sharded.write_dask(empty, tmp_path / "empty", 3).num_entries == 0
    with sparkey.open_sharded(tmp_path / "empty") as reader:
        assert len(reader) == 0 and list(reader) == []


def test_arbitrary_bytes_and_str_survive(tmp_path):
    items = [(b"\xff\xfe\x00", b"\x80 not utf-8"), ("clé", "été"), (b"", b"")]
    bag = dask.bag.from_sequence(items, npartitions=2)
    sharded.write_dask(bag, tmp_path / "store", 2)
    with sparkey.open_sharded(tmp_path / "store") as reader:
        assert dict(reader.items()) == {b"\xff\xfe\x00": b"\x80 not utf-8",
                                        "clé".encode(): "été".encode(), b"": b""}


def test_overwrite(tmp_path):
    bag = dask.bag.from_sequence(range(3), npartitions=3).map(pair_list).flatten()
    sharded.write_dask(bag, tmp_path / "store", 3)
    with pytest.raises(sharded.StoreExistsError):
        sharded.write_dask(bag, tmp_path / "store", 3)
    sharded.write_dask(bag.filter(lambda pair: pair[0] < b"b3"), tmp_path / "store", 2,
                       overwrite=True)
    with sparkey.open_sharded(tmp_path / "store") as reader:
        assert reader.manifest.num_shards == 2 and all(key < b"b3" for key in reader)
    assert os.listdir(tmp_path) == ["store"]


def test_bad_entries_publish_nothing(tmp_path):
    bag = dask.bag.from_sequence([(b"a", b"1"), (b"b", 2)], npartitions=2)
    with pytest.raises(EntryTypeError, match="a value must be bytes"):
        sharded.write_dask(bag, tmp_path / "store", 2)
    _assert_nothing_published(tmp_path)


@pytest.mark.parametrize("arguments, error, message", [
    ({"key": "missing"}, KeyError, "no column.*'missing'"),
    ({"num_shards": 0}, ValueError, "num_shards"),
    ({"compression": "lz4"}, ValueError, "unknown compression"),
    ({"collection": [(b"a", b"1")]}, TypeError, "takes a dask.bag.Bag or dask.dataframe"),
])
def test_bad_arguments(tmp_path, arguments, error, message):
    call = {"collection": dask.dataframe.from_map(key_value_partition, range(1)),
            "path": tmp_path / "store", "num_shards": 2, "key": "k", "value": "v", **arguments}
    with pytest.raises(error, match=message):
        sharded.write_dask(**call)
    _assert_nothing_published(tmp_path)
