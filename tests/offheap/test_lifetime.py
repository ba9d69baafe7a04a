"""A forgotten close(): standalone file maps are saved at garbage collection and at interpreter
exit with a ResourceWarning; a file DB rolls back what it had not committed and warns
(:mod:`offheap.collection.lifetime`).

Every case runs in a fresh interpreter, so that interpreter exit is real and the warnings are
those the interpreter shows (``-X dev`` shows ResourceWarning; the default filters hide it).
Each child runs on the compiled and on the reference core.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from offheap import DB, LongHashMap, TreeMap

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MAKERS = {"TreeMap": "TreeMap(path=PATH)", "LongHashMap": "LongHashMap(path=PATH)"}


@pytest.fixture(params=["compiled", "reference"])
def core(request):
    return request.param


def run_child(code: str, path, core: str, *flags: str) -> subprocess.CompletedProcess:
    """Run ``code`` (with ``PATH`` bound to ``path``) in a fresh interpreter on ``core``."""
    env = dict(os.environ, PYTHONPATH=REPOSITORY)
    env.pop("PYTHONWARNINGS", None)
    env.pop("PYTHONDEVMODE", None)
    if core == "reference":
        env["OFFHEAP_PURE_PYTHON"] = "1"
    else:
        env.pop("OFFHEAP_PURE_PYTHON", None)
    source = f"from offheap import DB, LongHashMap, TreeMap\nPATH = {str(path)!r}\n"
    result = subprocess.run([sys.executable, *flags, "-c", source + textwrap.dedent(code)],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result


def reopened(kind: str, path):
    with (TreeMap if kind == "TreeMap" else LongHashMap)(path=path) as reopened_map:
        return dict(reopened_map.items())


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_a_file_map_dropped_without_close_is_committed_and_warns(tmp_path, core, kind):
    path = tmp_path / "map"
    result = run_child(f"""
        m = {MAKERS[kind]}
        m[1] = "one"
        m.commit()
        m[2] = "two"
        del m
        print("after del")
    """, path, core, "-X", "dev")
    assert result.stdout == "after del\n"  # saved at the del, not later
    assert f"ResourceWarning: {kind} '{path}' was not closed: committed at garbage " \
           f"collection" in result.stderr
    assert reopened(kind, path) == {1: "one", 2: "two"}


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_a_file_map_open_at_exit_is_committed(tmp_path, core, kind):
    path = tmp_path / "map"
    result = run_child(f"""
        m = {MAKERS[kind]}
        m.update({{i: str(i) for i in range(1000)}})
    """, path, core, "-X", "dev")
    assert f"{kind} '{path}' was not closed: committed at interpreter exit" in result.stderr
    assert reopened(kind, path) == {i: str(i) for i in range(1000)}


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_a_file_map_without_transactions_is_closed_cleanly_at_exit(tmp_path, core, kind):
    path = tmp_path / "map"
    result = run_child(f"""
        m = {MAKERS[kind].replace("PATH", "PATH, durability='none'")}
        m[7] = "seven"
    """, path, core)
    assert result.stderr == ""  # ResourceWarning is hidden by the default filters
    assert reopened(kind, path) == {7: "seven"}  # opens: it was marked closed cleanly


def test_a_closed_or_anonymous_map_says_nothing(tmp_path, core):
    result = run_child("""
        with TreeMap(path=PATH) as m:
            m[1] = 1
        LongHashMap()[1] = 1
        TreeMap()[2] = 2
        DB.memory().tree_map("t")[3] = 3
    """, tmp_path / "map", core, "-X", "dev")
    assert result.stderr == ""


@pytest.mark.parametrize("moment", ["gc", "exit"])
def test_a_db_dropped_with_uncommitted_changes_rolls_back_and_warns(tmp_path, core, moment):
    path = tmp_path / "db"
    result = run_child(f"""
        db = DB.file(PATH)
        db.tree_map("t")[1] = "committed"
        db.commit()
        db.tree_map("t")[2] = "lost"
        db.hash_map("h")[3] = "lost"
        {"del db" if moment == "gc" else "pass"}
    """, path, core)  # default filters: this warning is shown
    when = "garbage collection" if moment == "gc" else "interpreter exit"
    line, = [line for line in result.stderr.splitlines() if "Warning" in line]
    assert f"UncommittedChangesWarning: DB '{path}' was not closed: " in line
    assert f"KiB of uncommitted changes rolled back at {when}" in line
    with DB.file(path) as db:
        assert db.names() == ["t"]
        assert dict(db.tree_map("t").items()) == {1: "committed"}


def test_a_db_dropped_with_nothing_uncommitted_raises_a_resource_warning(tmp_path, core):
    path = tmp_path / "db"
    code = """
        db = DB.file(PATH)
        db.tree_map("t")[1] = "committed"
        db.commit()
        del db
    """
    assert run_child(code, path, core).stderr == ""
    warned = run_child(code, path, core, "-X", "dev").stderr
    assert f"ResourceWarning: DB '{path}' was not closed (nothing uncommitted" in warned
    with DB.file(path) as db:
        assert dict(db.tree_map("t").items()) == {1: "committed"}


def test_a_forked_child_never_saves_its_parents_map(tmp_path, core):
    path = tmp_path / "map"
    run_child("""
        import os, sys
        m = TreeMap(path=PATH)
        m[1] = "parent"
        m.commit()
        m[2] = "uncommitted"
        pid = os.fork()
        if pid == 0:
            m[3] = "child"
            sys.exit(0)  # runs the exit hooks, which must leave the parent's file alone
        os.waitpid(pid, 0)
        m.rollback()
        m.close()
    """, path, core)
    assert reopened("TreeMap", path) == {1: "parent"}
