"""salvage() writes its copy under a temporary name and gives it the destination's name only when
it is complete: a salvage that fails or is killed half-way leaves no complete-looking copy, and
a rerun after a kill removes the partial copy and succeeds."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from offheap import DB, salvage
from offheap.db import salvage as salvage_module

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def source(tmp_path):
    path = str(tmp_path / "src.offheap")
    with DB.file(path) as db:
        tree = db.tree_map("t")
        tree.update({k: str(k) for k in range(500)})
        db.commit()
    return path


def test_a_salvage_that_fails_leaves_no_destination(source, tmp_path, monkeypatch):
    dst = str(tmp_path / "dst.offheap")

    def fail(*args):
        raise RuntimeError("the copy broke off")

    monkeypatch.setattr(salvage_module, "_salvage_store", fail)
    with pytest.raises(RuntimeError, match="broke off"):
        salvage(source, dst)
    assert not os.path.exists(dst) and not os.path.exists(dst + salvage_module.PARTIAL_SUFFIX)


def test_a_killed_salvage_leaves_only_a_partial_copy_and_a_rerun_succeeds(source, tmp_path):
    dst = str(tmp_path / "dst.offheap")
    killed = subprocess.run(
        [sys.executable, "-c", f"""
import os, signal
from offheap import salvage
from offheap.db import salvage as module
module._publish = lambda partial, dst: os.kill(os.getpid(), signal.SIGKILL)
salvage({source!r}, {dst!r})
"""], cwd=REPOSITORY, capture_output=True)
    assert killed.returncode == -9
    assert not os.path.exists(dst) and os.path.exists(dst + salvage_module.PARTIAL_SUFFIX)
    report = salvage(source, dst)
    assert report.complete and report.recovered_entries == 500 and report.destination == dst
    assert not os.path.exists(dst + salvage_module.PARTIAL_SUFFIX)
    with DB.file(dst, readonly=True) as db:
        assert len(db.tree_map("t")) == 500


def test_an_existing_destination_is_never_replaced(source, tmp_path):
    dst = tmp_path / "dst.offheap"
    dst.write_bytes(b"someone else's file")
    with pytest.raises(FileExistsError):
        salvage(source, dst)
    assert dst.read_bytes() == b"someone else's file"
