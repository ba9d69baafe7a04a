"""``limit=`` as a size string, and the messages of user mistakes: each says what to do."""

import errno
import os
import subprocess
import sys

import numpy as np
import pytest

from offheap import DB, LongHashMap, MissingFileError, OffheapError, TreeMap
from offheap.kernels.sizes import byte_limit, parse_bytes

MAKERS = {
    "TreeMap": lambda limit: TreeMap(limit=limit),
    "LongHashMap": lambda limit: LongHashMap(limit=limit),
    "DB.memory": lambda limit: DB.memory(limit=limit),
}


@pytest.mark.parametrize("maker", MAKERS.values(), ids=MAKERS)
def test_limit_accepts_size_strings(maker):
    for limit in ("1MiB", "1 mib", 1 << 20, np.int64(1 << 20)):
        with maker(limit) as made:
            assert "limit 1.0 MiB" in repr(made)


@pytest.mark.parametrize("maker", MAKERS.values(), ids=MAKERS)
def test_limit_of_another_type_is_a_clear_type_error(maker):
    with pytest.raises(TypeError, match="limit= must be a number of bytes .* '256MiB'"):
        maker(1.5e9)
    with pytest.raises(ValueError, match="cannot read 'lots' as a size"):
        maker("lots")


@pytest.mark.parametrize("maker", MAKERS.values(), ids=MAKERS)
def test_a_small_limit_names_the_argument_users_pass(maker):
    with pytest.raises(ValueError, match=r"^limit= must be at least 4.0 KiB \(4096 bytes\), "
                                         r"got 100$"):
        maker(100)


def test_a_string_limit_bounds_like_the_int():
    with LongHashMap(limit="256KiB") as by_text, LongHashMap(limit=256 << 10) as by_int:
        for made in (by_text, by_int):
            with pytest.raises(MemoryError):
                made.put_many(np.arange(1_000_000, dtype=np.int64), [""] * 1_000_000)
        assert len(by_text) == len(by_int)


def test_byte_limit():
    assert byte_limit(None) is None
    assert byte_limit("1GiB") == parse_bytes("1 gib") == 1 << 30
    assert byte_limit(4096) == 4096
    with pytest.raises(TypeError, match="not a bool"):
        byte_limit(True)


@pytest.mark.parametrize("open_missing", [
    lambda path: TreeMap.reader(path), lambda path: LongHashMap.reader(path),
    lambda path: DB.file(path, readonly=True)], ids=["TreeMap", "LongHashMap", "DB"])
def test_a_missing_file_opened_read_only_is_file_not_found(tmp_path, open_missing):
    path = tmp_path / "missing.db"
    with pytest.raises(FileNotFoundError, match="does not exist: a read-only open never creates"):
        open_missing(path)
    assert not path.exists()


@pytest.mark.parametrize("durability", ["commit", "none"])
@pytest.mark.parametrize("open_file", [
    lambda path, **options: TreeMap(path=path, **options),
    lambda path, **options: LongHashMap(path=path, **options),
    lambda path, **options: DB.file(path, **options)], ids=["TreeMap", "LongHashMap", "DB"])
def test_create_false_opens_an_existing_file_only(tmp_path, open_file, durability):
    path = tmp_path / "missing.db"
    with pytest.raises(MissingFileError, match="missing.db' does not exist: create=False opens "
                       "an existing file only; create=True makes a new one") as raised:
        open_file(path, create=False, durability=durability)
    assert isinstance(raised.value, FileNotFoundError) and isinstance(raised.value, OffheapError)
    assert raised.value.errno == errno.ENOENT and raised.value.filename == str(path)
    assert os.listdir(tmp_path) == []
    open_file(path, durability=durability).close()
    open_file(path, create=False, durability=durability).close()


def test_salvaging_a_missing_file_is_file_not_found(tmp_path):
    from offheap import salvage
    with pytest.raises(FileNotFoundError, match="does not exist: a read-only open never creates"):
        salvage(tmp_path / "missing.db", tmp_path / "copy.db")


def test_an_empty_file_opened_read_only_says_it_is_empty(tmp_path):
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="is empty"):
        DB.file(path, readonly=True)


@pytest.mark.parametrize("n", ["-5", "0"])
def test_demo_refuses_a_count_below_one(n):
    done = subprocess.run([sys.executable, "-m", "offheap", "--n", n], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "--n must be at least 1 entry" in done.stderr and "Traceback" not in done.stderr


def test_reprs_show_the_settings_that_were_set(tmp_path):
    with TreeMap(compression="zlib", limit="2MiB") as tree:
        assert repr(tree).endswith(", limit 2.0 MiB, compression zlib>")
        assert "<th style='text-align:left'>limit</th><td>2.0 MiB</td>" in tree._repr_html_()
    with TreeMap() as tree, LongHashMap() as table:
        assert "limit" not in repr(tree) and "compression" not in repr(tree)
        assert "limit" not in repr(table) and "path" not in repr(table)
    path = tmp_path / "map.lhm"
    with LongHashMap(path=path, limit="1MiB") as table:
        assert f"limit 1.0 MiB, path {str(path)!r}>" in repr(table)
        assert "<th style='text-align:left'>path</th>" in table._repr_html_()


def test_db_repr_html_lists_its_collections(tmp_path):
    with DB.file(tmp_path / "x.db", limit="4MiB") as db:
        db.tree_map("<prices>")[1] = "one"
        db.hash_map("ids").put_many([1, 2, 3], ["", "", ""])
        shown = db._repr_html_()
        assert "<caption><b>DB</b></caption>" in shown
        assert "&lt;prices&gt; (tree_map)</th><td>1 entries" in shown  # escaped, not markup
        assert "ids (hash_map)</th><td>3 entries" in shown
        assert "<td>4.0 MiB</td>" in shown and "<td>commit</td>" in shown
        assert ", limit 4.0 MiB:" in repr(db)
    assert db._repr_html_() == "<p><b>DB</b> (closed)</p>"
    with DB.memory() as db:
        assert "<th style='text-align:left'>collections</th><td>none</td>" in db._repr_html_()


def test_the_version_is_the_distribution_s():
    import importlib.metadata
    import re

    import offheap
    assert re.fullmatch(r"\d+\.\d+\.\d+", offheap.__version__)
    try:
        installed = importlib.metadata.version("offheap")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("offheap is not installed, only importable")
    assert installed == offheap.__version__
