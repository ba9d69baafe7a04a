"""Atomic publication of sharded stores: replacing a store under readers, fallbacks, races."""

import os
import threading

import pytest

import sparkey
from sparkey import sharded
from sparkey.sharded import ManifestNotFoundError, MissingShardError, ShardMismatchError
from sparkey.sharded import publish, reader as sharded_reader


def entries(n, tag=b""):
    return {b"key_%d" % i: tag + b"value_%d" % i for i in range(n)}


def test_readers_of_the_old_store_keep_reading_it(tmp_path):
    path = tmp_path / "store"
    sharded.write(entries(200, b"old-"), path, 4)
    with sparkey.open_sharded(path) as old:
        sharded.write(entries(50, b"new-"), path, 3, overwrite=True)
        assert old == entries(200, b"old-")
        with sparkey.open_sharded(path) as new:
            assert new == entries(50, b"new-")
    assert os.listdir(tmp_path) == ["store"]


def test_overwrite_without_exchange(tmp_path, monkeypatch):
    monkeypatch.setattr(publish, "_exchange", lambda first, second: False)
    path = tmp_path / "store"
    sharded.write(entries(20, b"old-"), path, 2)
    with sparkey.open_sharded(path) as old:
        sharded.write(entries(30, b"new-"), path, 5, overwrite=True)
        assert old == entries(20, b"old-")
    with sparkey.open_sharded(path) as new:
        assert new == entries(30, b"new-")
    assert os.listdir(tmp_path) == ["store"]


def test_failed_rename_restores_the_old_store(tmp_path, monkeypatch):
    monkeypatch.setattr(publish, "_exchange", lambda first, second: False)
    path = tmp_path / "store"
    sharded.write(entries(20, b"old-"), path, 2)
    real_rename = os.rename

    def rename(source, target):
        if ".staging-" in os.fspath(source):
            raise OSError(28, "No space left on device")
        real_rename(source, target)

    monkeypatch.setattr(publish.os, "rename", rename)
    with pytest.raises(OSError, match="No space"):
        sharded.write(entries(30, b"new-"), path, 5, overwrite=True)
    monkeypatch.setattr(publish.os, "rename", real_rename)
    with sparkey.open_sharded(path) as store:
        assert store == entries(20, b"old-")
    assert os.listdir(tmp_path) == ["store"]


def test_exchange_swaps_directories(tmp_path):
    if not publish._exchange(tmp_path, tmp_path):
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available here")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one").write_text("1")
    (tmp_path / "b").mkdir()
    assert publish._exchange(tmp_path / "a", tmp_path / "b")
    assert os.listdir(tmp_path / "a") == [] and os.listdir(tmp_path / "b") == ["one"]
    with pytest.raises(FileNotFoundError):
        publish._exchange(tmp_path / "a", tmp_path / "missing")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to name fds")
def test_every_file_and_directory_is_fsynced(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    sharded.write(entries(10), tmp_path / "store", 2)
    names = {os.path.basename(path) for path in synced}
    assert {"manifest.json", "part-00000-of-00002.spl", "part-00000-of-00002.spi",
            "part-00001-of-00002.spl", "part-00001-of-00002.spi", tmp_path.name} <= names
    assert any(".store.staging-" in os.path.basename(path) for path in synced)


def test_store_replaced_while_opening_is_read_consistently(tmp_path, monkeypatch):
    path = tmp_path / "store"
    sharded.write(entries(100, b"old-"), path, 4)
    real_open_shards = sharded_reader._open_shards
    calls = []

    def open_shards(directory, manifest):
        if not calls:  # the manifest of the old store was read; replace the store now
            sharded.write(entries(60, b"new-"), path, 4, overwrite=True)
        calls.append(manifest)
        return real_open_shards(directory, manifest)

    monkeypatch.setattr(sharded_reader, "_open_shards", open_shards)
    with sparkey.open_sharded(path) as store:
        assert store == entries(60, b"new-")
        assert store.manifest == calls[-1] and len(calls) == 2


def test_a_mismatch_with_an_unchanged_manifest_is_not_retried(tmp_path, monkeypatch):
    path = tmp_path / "store"
    sharded.write(entries(100), path, 4)
    (path / "part-00001-of-00004.spl").unlink()
    calls = []
    real_open_shards = sharded_reader._open_shards
    monkeypatch.setattr(sharded_reader, "_open_shards",
                        lambda *args: calls.append(1) or real_open_shards(*args))
    with pytest.raises(MissingShardError):
        sparkey.open_sharded(path)
    assert len(calls) == 1


@pytest.mark.parametrize("exchange", [True, False])
def test_concurrent_replacement_never_shows_a_mix(tmp_path, monkeypatch, exchange):
    if not exchange:
        monkeypatch.setattr(publish, "_exchange", lambda first, second: False)
    path = tmp_path / "store"
    versions = [entries(40, b"a-"), entries(70, b"b-")]
    sharded.write(versions[0], path, 3)
    stop = threading.Event()

    def replace_repeatedly():
        turn = 1
        while not stop.is_set():
            sharded.write(versions[turn], path, 3 + turn, overwrite=True)
            turn = 1 - turn

    writer = threading.Thread(target=replace_repeatedly)
    writer.start()
    outcomes = set()
    try:
        for _ in range(150):
            try:
                with sparkey.open_sharded(path) as store:
                    contents = dict(store.items())
                    outcomes.add(versions.index(contents))
                    assert store.manifest.num_shards == 3 + versions.index(contents)
            except (ManifestNotFoundError, MissingShardError, ShardMismatchError) as error:
                outcomes.add(type(error).__name__)
    finally:
        stop.set()
        writer.join()
    assert outcomes & {0, 1}
    if exchange:
        assert "ManifestNotFoundError" not in outcomes
