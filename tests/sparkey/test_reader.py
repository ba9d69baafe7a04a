"""sparkey.Reader as a Mapping, sparkey.Writer, thread safety and closing."""

import threading

import numpy as np
import pytest

import sparkey
from sparkey.errors import ClosedError, EntryTypeError, FileIdentifierMismatch


@pytest.fixture(params=["none", "snappy", "zstd"])
def store(request, tmp_path):
    """A store with overwrites and deletes: live order is the order of each key's last PUT."""
    base = tmp_path / "data"
    with sparkey.Writer(base, request.param, block_size=64) as writer:
        for i in range(300):
            writer.put(b"key_%d" % i, b"value_%d" % i)
        writer.put(b"key_5", b"five")
        writer.delete(b"key_7")
        writer.delete(b"absent")
        writer.put("clé", "été")
        writer.put(b"", b"")
    with sparkey.open(base) as reader:
        yield reader


def _expected():
    expected = {b"key_%d" % i: b"value_%d" % i for i in range(300) if i not in (5, 7)}
    expected[b"key_5"] = b"five"
    expected["clé".encode()] = "été".encode()
    expected[b""] = b""
    return expected


def test_mapping_interface(store):
    expected = _expected()
    assert len(store) == len(expected)
    assert dict(store.items()) == expected
    assert store == expected
    assert list(store) == list(expected)
    assert list(store.keys()) == list(expected)
    assert list(store.values()) == list(expected.values())
    assert b"key_7" not in store and b"key_1" in store and "clé" in store
    assert store[b"key_5"] == b"five" and store["clé"] == "été".encode()
    assert store.get(b"key_7") is None and store.get(b"key_7", b"d") == b"d"
    assert store[b""] == b""
    with pytest.raises(KeyError):
        store[b"key_7"]
    assert type(store[b"key_1"]) is bytes
    store._check()


def test_wrong_key_types(store):
    for bad in (1, None, 2.0):
        with pytest.raises(EntryTypeError):
            store.get(bad)
        with pytest.raises(TypeError):
            store[bad]
    with pytest.raises(EntryTypeError):
        store.get_many([b"a", 3])
    with pytest.raises(EntryTypeError):
        store.get_many(np.zeros(3, dtype=np.int64))


def test_get_many(store):
    keys = [b"key_1", b"key_7", "clé", b"", b"nope", b"key_5", b"key_1"]
    assert store.get_many(keys) == [store.get(key) for key in keys]
    assert store.get_many(keys, default=b"-")[1] == b"-"
    assert store.get_many([]) == []
    array = np.array([b"key_1", b"key_7", b"key_299", b"", b"key_5"], dtype="S")
    assert store.get_many(array) == [b"value_1", None, b"value_299", b"", b"five"]


def test_get_many_in_chunks(store, monkeypatch):
    import sparkey.index.reader
    import sparkey.log.body
    monkeypatch.setattr(sparkey.index.reader, "PROBE_CHUNK_KEYS", 7)
    monkeypatch.setattr(sparkey.log.body, "BULK_CHUNK_ENTRIES", 3)
    keys = [b"nope"] + list(_expected()) + [b"key_7"] * 5
    assert store.get_many(keys) == [_expected().get(key) for key in keys]


def test_headers(store):
    assert store.log_header.num_puts == 303
    assert store.index_header.num_entries == len(store)
    assert f"entries={len(_expected())}" in repr(store)


def test_close(store):
    items = iter(store.items())
    next(items)
    store.close()
    store.close()
    assert store.closed
    assert "closed" in repr(store)
    for call in (lambda: store[b"key_1"], lambda: store.get(b"key_1"), lambda: b"a" in store,
                 lambda: list(store), lambda: store.get_many([b"key_1"]), lambda: len(store),
                 lambda: store.index_header, store._check):
        with pytest.raises(ClosedError):
            call()
    with pytest.raises(ClosedError):
        list(items)


def test_concurrent_readers(store):
    expected = _expected()
    keys = list(expected)
    errors = []

    def work(offset):
        try:
            for round_ in range(20):
                key = keys[(offset * 31 + round_) % len(keys)]
                assert store[key] == expected[key]
                assert store.get_many(keys[offset:offset + 50]) == [
                    expected[k] for k in keys[offset:offset + 50]]
            assert dict(store.items()) == expected
        except Exception as exc:  # reported below, in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i * 40,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_open_by_any_name(tmp_path):
    with sparkey.Writer(tmp_path / "data.spl") as writer:
        writer.put(b"a", b"1")
    for name in ("data", "data.spl", "data.spi"):
        with sparkey.open(tmp_path / name) as reader:
            assert reader[b"a"] == b"1"
    with sparkey.Reader(str(tmp_path / "data")) as reader:
        assert dict(reader.items()) == {b"a": b"1"}


def test_index_of_another_log(tmp_path):
    for name in ("one", "two"):
        with sparkey.Writer(tmp_path / name) as writer:
            writer.put(b"a", name)
    (tmp_path / "one.spi").write_bytes((tmp_path / "two.spi").read_bytes())
    with pytest.raises(FileIdentifierMismatch, match="python -m sparkey write-index"):
        sparkey.open(tmp_path / "one")


def test_entries_appended_after_indexing_are_not_visible(tmp_path):
    with sparkey.Writer(tmp_path / "data", "zstd", 64) as writer:
        writer.put(b"a", b"1")
    with sparkey.LogWriter.append(tmp_path / "data.spl") as log:
        log.put(b"b", b"2")
        log.put(b"a", b"3")
    with sparkey.open(tmp_path / "data") as reader:
        assert dict(reader.items()) == {b"a": b"1"} and b"b" not in reader
    sparkey.write_index(tmp_path / "data.spi", tmp_path / "data.spl")
    with sparkey.open(tmp_path / "data") as reader:
        assert dict(reader.items()) == {b"b": b"2", b"a": b"3"}


def test_writer_context_builds_the_index_only_on_success(tmp_path):
    with pytest.raises(RuntimeError):
        with sparkey.Writer(tmp_path / "data") as writer:
            writer.put(b"a", b"1")
            raise RuntimeError("stop")
    assert writer.closed and not (tmp_path / "data.spi").exists()
    with sparkey.Writer(tmp_path / "data", mode="a", hash_seed=5) as writer:
        writer.put(b"b", b"2")
    with sparkey.open(tmp_path / "data") as reader:
        assert dict(reader.items()) == {b"a": b"1", b"b": b"2"}
        assert reader.index_header.hash_seed == 5


def test_writer_checks_index_options_before_writing(tmp_path):
    for options in (dict(rules="python"), dict(hash_size=2), dict(sparsity=1.0),
                    dict(method="disk"), dict(rules="c", sparsity=2.0), dict(hash_seed=-1),
                    dict(method="sorting", rules="java"), dict(max_memory_bytes=10)):
        with pytest.raises(ValueError):
            sparkey.Writer(tmp_path / "data", **options)
        assert not (tmp_path / "data.spl").exists()
    with pytest.raises(TypeError):
        sparkey.Writer(tmp_path / "data", unknown=1)


def _write(base, value, **options):
    with sparkey.Writer(base, **options) as writer:
        writer.put(b"k", value)


def _contents(base):
    with sparkey.open(base) as reader:
        return dict(reader.items())


def test_writer_refuses_an_existing_store_by_default(tmp_path):
    _write(tmp_path / "data", b"1")
    with pytest.raises(sparkey.StoreExistsError, match="mode='w'") as info:
        sparkey.Writer(tmp_path / "data")
    assert isinstance(info.value, FileExistsError)
    assert info.value.filename == str(tmp_path / "data.spi")
    (tmp_path / "data.spl").unlink()
    with pytest.raises(sparkey.StoreExistsError):  # a lone index is a store too
        sparkey.Writer(tmp_path / "data.spl")
    assert not (tmp_path / "data.spl").exists()


def test_writer_modes_replace_and_append(tmp_path):
    _write(tmp_path / "data", b"1", compression="zstd", block_size=64)
    _write(tmp_path / "data", b"2", mode="a")
    assert _contents(tmp_path / "data") == {b"k": b"2"}
    with sparkey.open(tmp_path / "data") as reader:
        assert reader.log_header.num_puts == 2
        assert reader.log_header.compression_type == sparkey.Compression.ZSTD
    _write(tmp_path / "data", b"3", mode="w")
    with sparkey.open(tmp_path / "data") as reader:
        assert reader.log_header.num_puts == 1 and reader[b"k"] == b"3"
    _write(tmp_path / "new", b"4", mode="a")  # "a" creates a missing store, as open() does
    assert _contents(tmp_path / "new") == {b"k": b"4"}


def test_writer_mode_checks(tmp_path):
    with pytest.raises(ValueError, match="mode must be one of"):
        sparkey.Writer(tmp_path / "data", mode="r")
    _write(tmp_path / "data", b"1", compression="snappy", block_size=64)
    for options in (dict(compression="zstd"), dict(block_size=32), dict(file_identifier=7)):
        with pytest.raises(ValueError, match="mode='a' continues the log"):
            sparkey.Writer(tmp_path / "data", mode="a", **options)
    _write(tmp_path / "data", b"2", mode="a", compression="snappy", block_size=64)
    assert _contents(tmp_path / "data") == {b"k": b"2"}
