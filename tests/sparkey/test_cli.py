"""python -m sparkey: every command, exit statuses, and a run through a real subprocess."""

import io
import subprocess
import sys

import pytest

import sparkey
from sparkey.cli import main

from .golden import VECTORS_DIR


def run(*argv, stdin=b""):
    out = io.BytesIO()
    status = main(list(map(str, argv)), stdin=io.BytesIO(stdin), stdout=out)
    return status, out.getvalue()


def test_create_append_index_get_dump(tmp_path):
    log = tmp_path / "data.spl"
    assert run("create", "-c", "zstd", "-b", "64", log) == (0, b"")
    assert run("append", log, stdin=b"a\t1\nb\tx\ty\n\t\nc\t3") == (0, b"")
    assert run("write-index", log, "--rules", "java", "--seed", "9") == (0, b"")
    assert run("get", tmp_path / "data", "b") == (0, b"x\ty\n")
    assert run("get", tmp_path / "data.spi", "616263", "--hex") == (2, b"")
    assert run("get", tmp_path / "data", "", ) == (0, b"\n")
    assert run("get", tmp_path / "data", "63", "--hex") == (0, b"33\n")
    assert run("dump", tmp_path / "data") == (0, b"a\t1\nb\tx\ty\n\t\nc\t3\n")
    assert run("dump", tmp_path / "data", "--hex") == (0, b"61\t31\n62\t780979\n\t\n63\t33\n")
    with sparkey.open(tmp_path / "data") as reader:
        assert reader.index_header.hash_seed == 9
        assert reader.log_header.compression_block_size == 64


def test_append_with_a_delimiter_and_a_bad_line(tmp_path, capsys):
    log = tmp_path / "data.spl"
    run("create", log)
    assert run("append", "-d", "=", log, stdin=b"k=v\n") == (0, b"")
    assert run("append", log, stdin=b"good\tline\nno delimiter\n")[0] == 1
    assert "line 2" in capsys.readouterr().err
    assert run("dump", "--log", tmp_path / "data") == (0, b"PUT\tk\tv\nPUT\tgood\tline\n")


def test_info(tmp_path):
    vector = VECTORS_DIR / "a_tiny3_none"
    status, out = run("info", vector / "data.spl", vector / "data.spi")
    assert status == 0
    text = out.decode()
    assert "Sparkey log file" in text and "Sparkey index file" in text
    assert "file_identifier: 2072907685" in text and "hash_seed: 3519107308" in text
    assert "compression_type: NONE" in text


def test_rewrite_drops_deleted_and_replaced_entries(tmp_path):
    with sparkey.Writer(tmp_path / "old") as writer:
        writer.put(b"a", b"1")
        writer.put(b"b", b"2")
        writer.put(b"a", b"3")
        writer.delete(b"b")
    assert run("rewrite", "-c", "snappy", "-b", "32", tmp_path / "old", tmp_path / "new",
               "--hash-size", "8") == (0, b"")
    with sparkey.open(tmp_path / "new") as reader:
        assert dict(reader.items()) == {b"a": b"3"}
        assert reader.log_header.num_puts == 1 and reader.log_header.num_deletes == 0
        assert reader.index_header.hash_size == 8
    assert run("dump", "--log", "--hex", tmp_path / "new") == (0, b"PUT\t61\t33\n")


def test_errors_exit_with_status_1(tmp_path, capsys):
    assert run("get", tmp_path / "missing", "a")[0] == 1
    assert "No such file" in capsys.readouterr().err
    (tmp_path / "bad.spl").write_bytes(b"not a sparkey file at all" * 4)
    assert run("info", tmp_path / "bad.spl")[0] == 1
    assert "magic" in capsys.readouterr().err
    assert run("create", "-c", "zstd", "-b", "5", tmp_path / "x.spl")[0] == 1


def test_usage_errors():
    with pytest.raises(SystemExit) as info:
        run("frobnicate")
    assert info.value.code == 2


def test_module_entry_point(tmp_path):
    with sparkey.Writer(tmp_path / "data") as writer:
        writer.put("clé", b"\x00\xff")
    result = subprocess.run([sys.executable, "-m", "sparkey", "get", str(tmp_path / "data"),
                             "clé"], capture_output=True, check=False)
    assert (result.returncode, result.stdout) == (0, b"\x00\xff\n")


def test_get_of_a_missing_key_says_so(tmp_path, capsys):
    run("create", tmp_path / "data.spl")
    assert run("get", tmp_path / "data", "absent") == (2, b"")
    assert "key 'absent' not found in" in capsys.readouterr().err


def test_create_refuses_an_existing_store_unless_forced(tmp_path, capsys):
    with sparkey.Writer(tmp_path / "data") as writer:
        writer.put(b"a", b"1")
    assert run("create", tmp_path / "data.spl")[0] == 1
    assert "--force" in capsys.readouterr().err
    with sparkey.open(tmp_path / "data") as reader:
        assert dict(reader) == {b"a": b"1"}
    assert run("create", "--force", tmp_path / "data.spl") == (0, b"")
    with sparkey.open(tmp_path / "data") as reader:
        assert len(reader) == 0


def test_rewrite_refuses_an_existing_target_unless_forced(tmp_path, capsys):
    for name, value in (("old", b"1"), ("new", b"2")):
        with sparkey.Writer(tmp_path / name) as writer:
            writer.put(b"a", value)
    assert run("rewrite", tmp_path / "old", tmp_path / "new")[0] == 1
    assert "--force" in capsys.readouterr().err
    with sparkey.open(tmp_path / "new") as reader:
        assert reader[b"a"] == b"2"
    assert run("rewrite", "-f", tmp_path / "old", tmp_path / "new") == (0, b"")
    with sparkey.open(tmp_path / "new") as reader:
        assert reader[b"a"] == b"1"
