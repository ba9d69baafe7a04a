"""sparkey.log: LogWriter block splitting, appends, flushes and errors; LogReader access paths."""

import os

import numpy as np
import pytest

import sparkey
from sparkey.errors import ClosedError, EntrySizeError, EntryTypeError, LogFormatError
from sparkey.format import EntryKind, LogHeader, put_size

from .golden import decompressed_blocks


def _blocks(path):
    return [block for _, block in decompressed_blocks(path)]


def _write(path, entries, compression="snappy", block_size=16):
    with sparkey.LogWriter(path, compression, block_size, file_identifier=7) as writer:
        for key, value in entries:
            if value is None:
                writer.delete(key)
            else:
                writer.put(key, value)


def test_c_block_rules_worked_example(tmp_path):
    """Module docstring: B = 16, two 14-byte entries, then a 40-byte entry that spans."""
    path = tmp_path / "log.spl"
    first, second = (b"k1", b"v" * 10), (b"k2", b"w" * 10)
    large = (b"big", b"x" * 35)  # 2 + 3 + 35 = 40 bytes
    _write(path, [first, second, (b"", b""), (b"k", b"")])
    assert _blocks(path) == [b"\x03\x0ak1" + b"v" * 10, b"\x03\x0ak2" + b"w" * 10 + b"\x01\x00",
                             b"\x02\x00k"]
    _write(path, [first, large, (b"k", b"")])
    data = b"\x03\x0ak1" + b"v" * 10 + b"\x04\x23big" + b"x" * 35
    assert _blocks(path) == [data[:16], data[16:32], data[32:48], data[48:], b"\x02\x00k"]
    with sparkey.LogReader(path) as log:
        assert log.header.max_entries_per_block == 2
        entries = list(log)
    assert [(e.position, e.entry_index) for e in entries] == [(84, 0), (84, 1), (
        decompressed_blocks(path)[4][0], 0)]
    assert entries[1].value == b"x" * 35


def test_entry_filling_a_block_exactly_stays_until_the_next_entry(tmp_path):
    path = tmp_path / "log.spl"
    _write(path, [(b"a", b"x" * 12), (b"b", b"y" * 12)])  # 2 + 1 + 13 = 16 = B... then 15
    assert [len(block) for block in _blocks(path)] == [15, 15]
    _write(path, [(b"a", b"x" * 13), (b"b", b"")])
    assert _blocks(path) == [b"\x02\x0da" + b"x" * 13, b"\x02\x00b"]


def test_header_that_does_not_fit_moves_to_a_new_block(tmp_path):
    path = tmp_path / "log.spl"
    _write(path, [(b"a", b"x" * 12), (b"k" * 200, b"v" * 300)], block_size=16)
    blocks = _blocks(path)
    assert blocks[0] == b"\x02\x0ca" + b"x" * 12
    assert blocks[1].startswith(b"\xc9\x01\xac\x02")
    with sparkey.LogReader(path) as log:
        assert [entry.value for entry in log] == [b"x" * 12, b"v" * 300]


@pytest.mark.parametrize("compression", ["none", "snappy", "zstd"])
def test_delete_of_a_key_longer_than_every_put_key_is_not_written(tmp_path, compression):
    path = tmp_path / "log.spl"
    _write(path, [(b"abc", b"1"), (b"abcd", None), (b"abc", None), (b"zz", None)], compression)
    with sparkey.LogReader(path) as log:
        assert [(e.kind, e.key) for e in log] == [
            (EntryKind.PUT, b"abc"), (EntryKind.DELETE, b"abc"), (EntryKind.DELETE, b"zz")]
        assert (log.header.num_deletes, log.header.delete_size) == (2, 5 + 4)


@pytest.mark.parametrize("compression", ["none", "snappy", "zstd"])
def test_counters_and_round_trip(tmp_path, compression):
    path = tmp_path / "log.spl"
    entries = [(b"", b""), (b"k" * 130, b""), (b"a", b"v" * 5000), (b"a", None), (b"b", b"2")]
    _write(path, entries, compression, block_size=64)
    with sparkey.LogReader(path) as log:
        header = log.header
        assert [(e.key, e.value) for e in log] == entries
        for entry in log:
            assert log.entry_at(entry.position, entry.entry_index) == entry
    assert (header.num_puts, header.num_deletes, header.max_key_len, header.max_value_len) == (
        4, 1, 130, 5000)
    assert header.put_size == sum(put_size(len(k), len(v)) for k, v in entries if v is not None)
    assert header.delete_size == 3
    assert header.compression_block_size == (0 if compression == "none" else 64)
    assert header.data_end == os.path.getsize(path)


def test_flush_publishes_data_and_header(tmp_path):
    path = tmp_path / "log.spl"
    writer = sparkey.LogWriter(path, "zstd", 1024)
    writer.put(b"a", b"1")
    assert LogHeader.unpack(path.read_bytes()).data_end == 84
    writer.flush()
    with sparkey.LogReader(path) as log:
        assert [e.key for e in log] == [b"a"]
    writer.put(b"b", b"2")
    writer.flush()
    writer.close()
    assert len(_blocks(path)) == 2  # flush closes the partial block, as libsparkey does
    writer.close()


def test_append_continues_counters_and_identifier(tmp_path):
    path = tmp_path / "log.spl"
    _write(path, [(b"a", b"1")], "snappy", 64)
    with open(path, "ab") as file:
        file.write(b"garbage past data_end")
    with sparkey.LogWriter.append(path) as writer:
        writer.put(b"bb", b"22")
        writer.delete(b"a")
    with sparkey.LogReader(path) as log:
        assert log.header.file_identifier == 7
        assert (log.header.num_puts, log.header.num_deletes, log.header.max_key_len) == (2, 1, 2)
        assert [(e.key, e.value) for e in log] == [(b"a", b"1"), (b"bb", b"22"), (b"a", None)]
        assert log.header.data_end == os.path.getsize(path)
    assert len(_blocks(path)) == 2


def test_create_replaces_the_file_without_disturbing_open_readers(tmp_path):
    path = tmp_path / "log.spl"
    _write(path, [(b"old", b"1")], "none")
    with sparkey.LogReader(path) as old:
        _write(path, [(b"new", b"2")], "none")
        assert [e.key for e in old] == [b"old"]
    with sparkey.LogReader(path) as new:
        assert [e.key for e in new] == [b"new"]


def test_writer_errors(tmp_path):
    path = tmp_path / "log.spl"
    writer = sparkey.LogWriter(path)
    with pytest.raises(EntryTypeError):
        writer.put(1, b"x")
    with pytest.raises(TypeError):
        writer.put(b"x", None)
    with pytest.raises(EntrySizeError):
        writer.put(b"k", memoryview(np.zeros(2**31, dtype=np.uint8)))
    writer.put("clé", "valeur")
    writer.close()
    for call in (lambda: writer.put(b"a", b"b"), lambda: writer.delete(b"a"), writer.flush):
        with pytest.raises(ClosedError):
            call()
    with sparkey.LogReader(path) as log:
        assert [(e.key, e.value) for e in log] == [("clé".encode(), b"valeur")]
        assert log.header.num_puts == 1


@pytest.mark.parametrize("kwargs", [
    dict(compression="lz4"), dict(compression="snappy", block_size=9),
    dict(compression="zstd", block_size=2**32), dict(compression="zstd", block_size="64"),
    dict(file_identifier=-1), dict(file_identifier=2**32)])
def test_writer_rejects_bad_options(tmp_path, kwargs):
    with pytest.raises(ValueError):
        sparkey.LogWriter(tmp_path / "log.spl", **kwargs)
    assert not (tmp_path / "log.spl").exists()


def test_reader_is_closed_cleanly(tmp_path):
    path = tmp_path / "log.spl"
    _write(path, [(b"a", b"1"), (b"b", b"2")], "none")
    log = sparkey.LogReader(path)
    entries = iter(log)
    next(entries)
    log.close()
    log.close()
    for call in (lambda: list(log), lambda: log.entry_at(84), lambda: list(log.scan())):
        with pytest.raises(ClosedError):
            call()
    with pytest.raises((ClosedError, ValueError)):
        next(entries)


def test_reader_rejects_truncated_file(tmp_path):
    path = tmp_path / "log.spl"
    _write(path, [(b"a", b"1" * 100)], "none")
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(LogFormatError, match="truncated") as info:
        sparkey.LogReader(path)
    assert info.value.field == "data_end"


def test_scan_columns(tmp_path):
    path = tmp_path / "log.spl"
    entries = [(b"a", b"1"), (b"k" * 200, b"v" * 200), (b"a", None)]
    for compression in ("none", "zstd"):
        _write(path, entries, compression, block_size=100)
        with sparkey.LogReader(path) as log:
            tables = list(log.scan(chunk_entries=2))
            assert [len(table) for table in tables] == [2, 1]
            keys = [table.key(i) for table in tables for i in range(len(table))]
            assert keys == [key for key, _ in entries]
            assert [int(n) for t in tables for n in t.value_len] == [1, 200, 0]
            assert [int(k) for t in tables for k in t.kind] == [0, 0, 1]
            table = sparkey.log.EntryTable.concat(tables)
            assert [table.key(i) for i in range(3)] == keys
            assert table.entry_sizes.tolist() == [4, 4 + 400, 3]


def test_fsync_on_flush_and_close(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(os, "fsync", synced.append)
    with sparkey.LogWriter(tmp_path / "a.spl", fsync=True) as writer:
        writer.put(b"a", b"1")
        writer.flush()
    assert len(synced) == 2
    with sparkey.LogWriter(tmp_path / "b.spl") as writer:
        writer.put(b"a", b"1")
    assert len(synced) == 2


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to name fds")
@pytest.mark.parametrize("fsync", [True, False])
def test_a_closing_writer_with_fsync_syncs_index_and_sidecar_before_their_renames(tmp_path, monkeypatch, fsync):
    """Each file's data is synced under its temporary name (before the rename publishes it),
    and the directory after the rename; with fsync=False nothing is synced."""
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("sync", os.readlink(f"/proc/self/fd/{fd}"))),
                                                 real_fsync(fd)))
    monkeypatch.setattr(os, "replace", lambda src, dst: (events.append(("rename", os.fspath(dst))),
                                                         real_replace(src, dst)))
    with sparkey.Writer(tmp_path / "s", fsync=fsync, checksums=True) as writer:
        writer.put(b"a", b"1")
    index, sidecar = str(tmp_path / "s.spi"), str(tmp_path / "s.spc")
    if not fsync:
        assert not [event for event in events if event[0] == "sync"]
        return
    for path in (index, sidecar):
        renamed = events.index(("rename", path))
        assert any(kind == "sync" and name.startswith(path + ".tmp-") for kind, name in events[:renamed])
        assert ("sync", str(tmp_path)) in events[renamed:]
    assert sparkey.open(tmp_path / "s", verify=True)[b"a"] == b"1"
