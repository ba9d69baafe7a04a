"""sparkey.sharded: routing and manifest against golden values, in-process builds, the reader."""

import json
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparkey
from sparkey import sharded
from sparkey.errors import ClosedError, EntryTypeError
from sparkey.sharded import (
    DuplicateKeyError, Manifest, ManifestError, ManifestNotFoundError, MissingShardError,
    ShardInfo, ShardMismatchError, StoreExistsError)
from sparkey.sharded.routing import part_name, shard_of, shards_of

# MurmurHash3_x86_32 with seed 1, read as a signed int, floor-modulo the shard count (the rule of
# Scio's sharded Sparkey reader). Hashes from a separate implementation of the reference
# algorithm; b"" with seed 1 is SMHasher's published 0x514E28B7.
ROUTING_GOLDEN = {
    # key: (unsigned hash, shards for num_shards 1, 2, 3, 8, 10, 64, 1000)
    b"": (0x514E28B7, [0, 1, 1, 7, 7, 55, 727]),
    b"a": (0x588ADCE8, [0, 0, 0, 0, 8, 40, 528]),
    b"key_0": (0x67982792, [0, 0, 2, 2, 0, 18, 850]),
    b"hello": (0xBB4ABCAD, [0, 1, 0, 5, 1, 45, 61]),
    b"\x00\xff": (0xF295BBE2, [0, 0, 2, 2, 8, 34, 938]),
    "clé".encode(): (0x936EE13C, [0, 0, 1, 4, 6, 60, 76]),
    b"The quick brown fox jumps over the lazy dog": (0x78E69E27, [0, 1, 1, 7, 7, 39, 687]),
}
SHARD_COUNTS = (1, 2, 3, 8, 10, 64, 1000)

MANIFEST_GOLDEN = """{
 "format": "sparkey-sharded",
 "format_version": 1,
 "num_shards": 2,
 "routing": {
  "hash": "murmur3_x86_32",
  "seed": 1
 },
 "num_entries": 3,
 "shards": [
  {
   "shard": 0,
   "log": "part-00000-of-00002.spl",
   "index": "part-00000-of-00002.spi",
   "file_identifier": 3735928559,
   "num_entries": 3,
   "log_bytes": 120,
   "index_bytes": 160
  },
  {
   "shard": 1,
   "log": "part-00001-of-00002.spl",
   "index": "part-00001-of-00002.spi",
   "file_identifier": 7,
   "num_entries": 0,
   "log_bytes": 84,
   "index_bytes": 121
  }
 ]
}
"""
GOLDEN_MANIFEST = Manifest(num_shards=2, routing_seed=1, shards=(
    ShardInfo(0, 0xDEADBEEF, 3, 120, 160), ShardInfo(1, 7, 0, 84, 121)))


def entries(n):
    return {b"key_%d" % i: b"value_%d" % i for i in range(n)}


# -- routing

@pytest.mark.parametrize("key", list(ROUTING_GOLDEN))
def test_routing_golden(key):
    _, expected = ROUTING_GOLDEN[key]
    assert [shard_of(key, count) for count in SHARD_COUNTS] == expected
    for count, shard in zip(SHARD_COUNTS, expected):
        assert shards_of([key], count).tolist() == [shard]
        assert shards_of(np.array([key], dtype="S50"), count).tolist() == [shard]


def test_routing_is_signed_floor_modulo():
    # hashes at or above 2**31 are negative as Java ints; unsigned modulo would differ for
    # shard counts that are not powers of two
    unsigned, shards = ROUTING_GOLDEN[b"hello"]
    assert unsigned >= 2**31
    assert unsigned % 3 != shards[SHARD_COUNTS.index(3)]


def test_routing_seed_and_str_keys():
    assert shard_of("clé", 1000) == shard_of("clé".encode(), 1000)
    assert shards_of([b"hello"], 1000, seed=2).tolist() == [shard_of(b"hello", 1000, 2)]
    with pytest.raises(EntryTypeError):
        shard_of(5, 8)
    with pytest.raises(EntryTypeError):
        shards_of(np.zeros((2, 2), dtype="S3"), 8)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40).filter(lambda key: not key.endswith(b"\x00"))),
       st.integers(1, 99_999), st.integers(0, 2**32 - 1))
def test_bulk_routing_matches_scalar(keys, num_shards, seed):
    expected = [shard_of(key, num_shards, seed) for key in keys]
    assert shards_of(keys, num_shards, seed).tolist() == expected
    array = np.array(keys, dtype=f"S{max(map(len, keys), default=0) or 1}")
    assert shards_of(array, num_shards, seed).tolist() == expected


def test_part_names():
    assert part_name(3, 8) == "part-00003-of-00008"
    assert part_name(99_998, 99_999) == "part-99998-of-99999"


# -- manifest

def test_manifest_golden():
    assert GOLDEN_MANIFEST.to_json() == MANIFEST_GOLDEN
    assert Manifest.from_json(MANIFEST_GOLDEN) == GOLDEN_MANIFEST
    assert GOLDEN_MANIFEST.num_entries == 3
    assert GOLDEN_MANIFEST.file_names(1) == ("part-00001-of-00002.spl", "part-00001-of-00002.spi")


def _edited(edit):
    document = json.loads(MANIFEST_GOLDEN)
    edit(document)
    return json.dumps(document)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(format="other"), "format is 'other'"),
    (lambda d: d.update(format_version=2), "upgrade sparkey"),
    (lambda d: d.update(format_version="1"), "format_version is '1'"),
    (lambda d: d.update(num_shards=0), "num_shards must be an int"),
    (lambda d: d.update(num_shards=3), "shards must be a list of num_shards = 3"),
    (lambda d: d["routing"].update(hash="xxhash"), "the only routing hash"),
    (lambda d: d["routing"].update(seed=-1), "routing_seed must be an int"),
    (lambda d: d.update(num_entries=4), "num_entries is 4, but the shards hold 3"),
    (lambda d: d["shards"][1].update(shard=0), "shards[1].shard is 0"),
    (lambda d: d["shards"][0].update(log="../../etc/passwd"), "shards[0].log is '../../etc"),
    (lambda d: d["shards"][0].update(index="part-00001-of-00002.spi"), "shards[0].index"),
    (lambda d: d["shards"][0].update(num_entries=True), "shards[0].num_entries is True"),
    (lambda d: d["shards"][0].update(log_bytes=-1), "shards[0].log_bytes is -1"),
    (lambda d: d["shards"][0].pop("index_bytes"), "shards[0].index_bytes is None"),
    (lambda d: d["shards"][0].update(file_identifier=2**32), "not a 32-bit value"),
    (lambda d: d["shards"].__setitem__(0, []), "shards[0] is not a JSON object"),
])
def test_manifest_validation(edit, message):
    with pytest.raises(ManifestError, match=message.replace("[", r"\[").replace("(", r"\(")):
        Manifest.from_json(_edited(edit))


@pytest.mark.parametrize("text", ["", "{", "[]", "null", "{\"format\": 1}"])
def test_manifest_not_json_or_not_an_object(text):
    with pytest.raises(ManifestError) as info:
        Manifest.from_json(text)
    assert isinstance(info.value, ValueError)


def test_a_deeply_nested_manifest_is_a_manifest_error():
    with pytest.raises(ManifestError, match="nests its JSON too deeply"):
        Manifest.from_json("[" * 200_000 + "]" * 200_000)


# -- building in-process and reading

@pytest.mark.parametrize("compression", ["none", "snappy", "zstd"])
def test_write_and_read(tmp_path, compression):
    expected = entries(2000)
    manifest = sharded.write(expected.items(), tmp_path / "store", 8, compression=compression,
                             block_size=256)
    assert manifest.num_entries == 2000 and manifest.num_shards == 8
    assert sorted(os.listdir(tmp_path)) == ["store"]
    assert sorted(os.listdir(tmp_path / "store")) == ["manifest.json"] + sorted(
        part_name(shard, 8) + suffix for shard in range(8) for suffix in (".spi", ".spl"))
    with sparkey.open_sharded(tmp_path / "store") as reader:
        reader._check()
        assert len(reader) == 2000
        assert reader == expected
        assert reader[b"key_17"] == b"value_17" and reader.get("key_18") == b"value_18"
        assert b"key_2000" not in reader and reader.get(b"key_2000", b"-") == b"-"
        with pytest.raises(KeyError):
            reader[b"key_2000"]
        assert reader.manifest == manifest
        assert [len(shard) for shard in reader.shards] == [
            info.num_entries for info in manifest.shards]


def test_each_shard_is_a_plain_store_holding_its_routed_keys(tmp_path):
    expected = entries(500)
    sharded.write(expected, tmp_path / "store", 5)
    seen = {}
    for shard in range(5):
        with sparkey.open(tmp_path / "store" / part_name(shard, 5)) as store:
            assert all(shard_of(key, 5) == shard for key in store)
            seen.update(store.items())
    assert seen == expected


def test_iteration_goes_shard_by_shard_in_log_order(tmp_path):
    keys = [b"k%d" % i for i in range(300)]
    sharded.write(((key, key.upper()) for key in keys), tmp_path / "store", 4)
    expected = [key for shard in range(4) for key in keys if shard_of(key, 4) == shard]
    with sparkey.open_sharded(tmp_path / "store") as reader:
        assert list(reader) == expected
        assert list(reader.keys()) == expected
        assert list(reader.items()) == [(key, key.upper()) for key in expected]
        assert list(reader.values()) == [key.upper() for key in expected]


def test_empty_shards_are_written(tmp_path):
    manifest = sharded.write([(b"only", b"one")], tmp_path / "store", 16)
    assert [info.num_entries for info in manifest.shards].count(0) == 15
    manifest = sharded.write([], tmp_path / "empty", 3)
    assert manifest.num_entries == 0
    with sparkey.open_sharded(tmp_path / "empty") as reader:
        assert len(reader) == 0 and list(reader) == [] and reader.get(b"x") is None
        assert reader.get_many([b"x", b"y"]) == [None, None]


def test_last_put_wins_in_process(tmp_path):
    items = [(b"a", b"1"), (b"b", b"2"), ("a", "3"), (b"c", b""), (b"b", b"4")]
    manifest = sharded.write(items, tmp_path / "store", 2)
    with sparkey.open_sharded(tmp_path / "store") as reader:
        assert dict(reader.items()) == {b"a": b"3", b"b": b"4", b"c": b""}
        assert manifest.num_entries == len(reader) == 3


def test_get_many(tmp_path):
    expected = entries(1000)
    sharded.write(expected, tmp_path / "store", 7)
    rng = np.random.default_rng(5)
    keys = [b"key_%d" % i for i in rng.integers(0, 1500, 3000)]
    with sparkey.open_sharded(tmp_path / "store") as reader:
        assert reader.get_many(keys) == [expected.get(key) for key in keys]
        assert reader.get_many(keys, b"?") == [expected.get(key, b"?") for key in keys]
        assert reader.get_many(np.array(keys)) == [expected.get(key) for key in keys]
        assert reader.get_many(["key_3", bytearray(b"key_4")]) == [b"value_3", b"value_4"]
        assert reader.get_many([]) == []
        with pytest.raises(EntryTypeError):
            reader.get_many([b"key_1", 2])


def test_shard_of_and_repr(tmp_path):
    sharded.write(entries(10), tmp_path / "store", 3)
    with sparkey.open_sharded(tmp_path / "store") as reader:
        assert reader.shard_of(b"key_0") == shard_of(b"key_0", 3)
        assert "shards=3 entries=10" in repr(reader)
    assert "closed" in repr(reader)


def test_closed_reader(tmp_path):
    sharded.write(entries(10), tmp_path / "store", 3)
    reader = sparkey.open_sharded(tmp_path / "store")
    iterator = iter(reader.items())
    next(iterator)
    reader.close()
    reader.close()
    assert reader.closed
    for call in (lambda: reader.get(b"key_1"), lambda: reader[b"key_1"], lambda: len(reader),
                 lambda: b"key_1" in reader, lambda: reader.get_many([b"key_1"]),
                 lambda: list(reader), lambda: list(reader.items()), lambda: list(iterator)):
        with pytest.raises(ClosedError):
            call()


def test_wrong_key_types(tmp_path):
    sharded.write(entries(10), tmp_path / "store", 3)
    with sparkey.open_sharded(tmp_path / "store") as reader:
        for bad in (1, None, 2.5):
            with pytest.raises(EntryTypeError):
                reader.get(bad)
            with pytest.raises(TypeError):
                reader[bad]


def test_custom_routing_seed(tmp_path):
    expected = entries(200)
    manifest = sharded.write(expected, tmp_path / "store", 4, routing_seed=99, hash_seed=1)
    assert manifest.routing_seed == 99
    with sparkey.open_sharded(tmp_path / "store") as reader:
        reader._check()
        assert reader == expected
        assert reader.shard_of(b"key_1") == shard_of(b"key_1", 4, 99)


@pytest.mark.parametrize("options, error, message", [
    ({"num_shards": 0}, ValueError, "num_shards must be an int from 1"),
    ({"num_shards": 100_000}, ValueError, "num_shards must be an int from 1"),
    ({"num_shards": 2.0}, ValueError, "num_shards must be an int"),
    ({"routing_seed": 2**32}, ValueError, "routing_seed must be an int"),
    ({"compression": "lz4"}, ValueError, "unknown compression 'lz4'"),
    ({"hash_size": 5}, ValueError, "hash_size"),
    ({"file_identifier": 5}, TypeError, "unexpected writer option"),
    ({"fsync": True}, TypeError, "unexpected writer option"),
    ({"hash_seed": 1}, ValueError, "equals the routing seed"),
])
def test_bad_options_write_nothing(tmp_path, options, error, message):
    arguments = {"num_shards": 4, **options}
    with pytest.raises(error, match=message):
        sharded.write(entries(5), tmp_path / "store", **arguments)
    assert os.listdir(tmp_path) == []


def test_equal_seeds_allowed_with_64_bit_index_hashes(tmp_path):
    sharded.write(entries(5), tmp_path / "store", 2, hash_seed=1, hash_size=8)
    with sparkey.open_sharded(tmp_path / "store") as reader:
        assert reader.shards[0].index_header.hash_size == 8


def test_failed_build_publishes_nothing(tmp_path):
    def failing():
        yield b"a", b"1"
        yield b"b", 2  # not a value

    with pytest.raises(EntryTypeError):
        sharded.write(failing(), tmp_path / "store", 3)
    assert os.listdir(tmp_path) == []


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=12), st.binary(max_size=20)), max_size=60),
       st.integers(1, 6), st.sampled_from(["none", "zstd"]))
def test_matches_dict(tmp_path_factory, items, num_shards, compression):
    path = tmp_path_factory.mktemp("prop") / "store"
    oracle = dict(items)
    manifest = sharded.write(items, path, num_shards, compression=compression, block_size=32)
    assert manifest.num_entries == len(oracle)
    with sparkey.open_sharded(path) as reader:
        reader._check()
        assert dict(reader.items()) == oracle and len(reader) == len(oracle)
        probes = [key for key, _ in items] + [b"absent", b""]
        assert reader.get_many(probes) == [oracle.get(key) for key in probes]
        assert all(reader.get(key) == oracle.get(key) for key in probes)


# -- opening damaged or incomplete stores

@pytest.fixture
def store(tmp_path):
    sharded.write(entries(300), tmp_path / "store", 4)
    return tmp_path / "store"


def test_missing_manifest(tmp_path, store):
    os.unlink(store / "manifest.json")
    with pytest.raises(ManifestNotFoundError, match="holds no manifest.json") as info:
        sparkey.open_sharded(store)
    assert isinstance(info.value, FileNotFoundError)
    with pytest.raises(ManifestNotFoundError):
        sparkey.open_sharded(tmp_path / "nowhere")


@pytest.mark.parametrize("suffix", [".spl", ".spi"])
def test_missing_shard_file(store, suffix):
    os.unlink(store / (part_name(2, 4) + suffix))
    with pytest.raises(MissingShardError, match=f"shard 2 of 4 .*{part_name(2, 4)}") as info:
        sparkey.open_sharded(store)
    assert isinstance(info.value, FileNotFoundError)


@pytest.mark.parametrize("name", [part_name(1, 4) + ".spl", part_name(1, 4) + ".spi",
                                  "manifest.json"])
def test_links_out_of_the_store_are_refused_unread(tmp_path, store, name):
    secret = tmp_path / "secret"
    secret.write_bytes(b"SECRET-BYTES" * 20)
    os.unlink(store / name)
    os.symlink(secret, store / name)
    error = ManifestError if name == "manifest.json" else ShardMismatchError
    with pytest.raises(error, match="link to a file outside the store") as info:
        sparkey.open_sharded(store)
    message = str(info.value)
    assert "SECRET" not in message and b"SECRET".hex() not in message
    assert "0x" not in message  # no magic number read from the linked file


def test_links_inside_the_store_are_followed(store):
    name = part_name(0, 4) + ".spl"
    os.replace(store / name, store / "moved.spl")
    os.symlink("moved.spl", store / name)
    with sparkey.open_sharded(store) as reader:
        assert len(reader) == 300


def test_shard_from_another_build(tmp_path, store):
    sharded.write(entries(300), tmp_path / "other", 4)
    for suffix in (".spl", ".spi"):
        os.replace(tmp_path / "other" / (part_name(1, 4) + suffix),
                   store / (part_name(1, 4) + suffix))
    with pytest.raises(ShardMismatchError, match="shard 1 of 4.*file_identifier .*another build"):
        sparkey.open_sharded(store)


def test_shards_swapped(store):
    for suffix in (".spl", ".spi"):
        os.replace(store / (part_name(0, 4) + suffix), store / ("swap" + suffix))
        os.replace(store / (part_name(3, 4) + suffix), store / (part_name(0, 4) + suffix))
        os.replace(store / ("swap" + suffix), store / (part_name(3, 4) + suffix))
    with pytest.raises(ShardMismatchError, match="shard 0 of 4"):
        sparkey.open_sharded(store)


def test_index_from_another_log(tmp_path, store):
    sharded.write(entries(300), tmp_path / "other", 4)
    os.replace(tmp_path / "other" / (part_name(1, 4) + ".spi"), store / (part_name(1, 4) + ".spi"))
    with pytest.raises(ShardMismatchError, match="shard 1 of 4 .* is damaged"):
        sparkey.open_sharded(store)


def test_truncated_shard(store):
    log = store / (part_name(3, 4) + ".spl")
    os.truncate(log, os.path.getsize(log) - 1)
    with pytest.raises(ShardMismatchError, match="shard 3 of 4 .* is damaged"):
        sparkey.open_sharded(store)


def test_shard_with_other_entry_count(store):
    manifest = json.loads((store / "manifest.json").read_text())
    manifest["shards"][2]["num_entries"] += 1
    manifest["num_entries"] += 1
    (store / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ShardMismatchError, match="shard 2 of 4.*num_entries"):
        sparkey.open_sharded(store)


def test_damaged_manifest(store):
    (store / "manifest.json").write_text("{\"format\": \"sparkey-sharded\", ")
    with pytest.raises(ManifestError, match="not valid JSON"):
        sparkey.open_sharded(store)


# -- publishing over existing paths

def test_existing_store_needs_overwrite(tmp_path, store):
    with pytest.raises(StoreExistsError, match="overwrite=True") as info:
        sharded.write(entries(5), store, 2)
    assert isinstance(info.value, FileExistsError)
    with sparkey.open_sharded(store) as reader:
        assert len(reader) == 300
    sharded.write(entries(5), store, 2, overwrite=True)
    with sparkey.open_sharded(store) as reader:
        assert reader == entries(5) and reader.manifest.num_shards == 2
    assert os.listdir(tmp_path) == ["store"]


def test_overwrite_refuses_other_data(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "precious.txt").write_text("keep me")
    (tmp_path / "file").write_text("keep me too")
    for target in ("data", "file"):
        with pytest.raises(StoreExistsError, match="not a sharded store"):
            sharded.write(entries(5), tmp_path / target, 2, overwrite=True)
    assert (tmp_path / "data" / "precious.txt").read_text() == "keep me"
    assert sorted(os.listdir(tmp_path)) == ["data", "file"]


def test_empty_directory_is_replaced(tmp_path):
    (tmp_path / "store").mkdir()
    sharded.write(entries(5), tmp_path / "store", 2)
    with sparkey.open_sharded(tmp_path / "store") as reader:
        assert len(reader) == 5


def test_open_sharded_is_exported():
    assert sparkey.open_sharded is sharded.open_sharded


def test_write_dask_without_dask(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask", None)
    monkeypatch.delitem(sys.modules, "sparkey.sharded.dask_build", raising=False)
    with pytest.raises(sharded.DaskUnavailableError,
                       match=r"pip install 'offheap\[dask\]'") as info:
        sharded.write_dask
    assert isinstance(info.value, ImportError)
    with pytest.raises(AttributeError):
        sharded.no_such_name


def test_duplicate_key_error_is_a_value_error():
    assert issubclass(DuplicateKeyError, ValueError)
    assert issubclass(DuplicateKeyError, sparkey.SparkeyError)
