"""``python -m experiments capacity`` run for real, in a subprocess, on tiny budgets."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.contenders import CONTENDERS, MAPDB_BUDGET_BYTES

REPOSITORY = Path(__file__).resolve().parents[2]
BUDGET = 8 << 20


def run_capacity(out: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "experiments", "capacity", "--budget", "8MiB",
               "--max-seconds", "2", "--no-progress", "--out", str(out), *args]
    return subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True, timeout=120)


def check_record(record: dict, budget: int = BUDGET) -> None:
    assert "error" not in record and "skipped" not in record, record
    assert record["stop"] in ("budget", "time")
    assert record["entries"] > 0 and record["seconds"] > 0
    assert 0 < record["memory_bytes"] <= budget
    assert record["bytes_per_entry"] > 0
    assert math.isclose(record["entries"] * record["bytes_per_entry"], record["memory_bytes"])
    assert math.isclose(record["inserts_per_second"], record["entries"] / record["seconds"])
    assert record["budget_used"] == pytest.approx(record["memory_bytes"] / budget)
    if record["stop"] == "budget":
        assert record["entries_in_budget_measured"] and record["entries_in_budget"] == record["entries"]
        assert record["entries_in_15gib_extrapolated"] == int(
            record["entries"] * MAPDB_BUDGET_BYTES / budget)
    else:
        assert not record["entries_in_budget_measured"]
        assert record["entries_in_budget"] == int(budget / record["bytes_per_entry"])
        assert record["entries_in_15gib_extrapolated"] == int(
            MAPDB_BUDGET_BYTES / record["bytes_per_entry"])
    assert record["peak_rss_growth_bytes"] >= record["rss_growth_bytes"] > 0 or record["measured_by"] != "rss"
    if record["mapdb"] is not None:
        assert record["ratio_to_mapdb"] == pytest.approx(
            record["entries_in_15gib_extrapolated"] / record["mapdb"]["entries"])


@pytest.fixture(scope="module")
def scalar_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("capacity-scalar")
    done = run_capacity(out)
    return done, out


def test_every_contender_fills_within_the_budget(scalar_run):
    done, out = scalar_run
    assert done.returncode == 0, done.stderr
    document = json.loads((out / "results.json").read_text())
    names = [record["name"] for record in document["results"]]
    assert names == [name for name, c in CONTENDERS.items() if not (c.repeats and c.keys == "sequential")]
    for record in document["results"]:
        check_record(record)
        assert record["keys"] == CONTENDERS[record["name"]].key_order("sequential")


def test_results_carry_machine_versions_and_commit(scalar_run):
    _, out = scalar_run
    document = json.loads((out / "results.json").read_text())
    machine = document["machine"]
    assert machine["cores"] > 0 and machine["python"] and machine["versions"]["numpy"]
    assert len(machine["git_commit"]) == 40
    assert document["config"]["budget_bytes"] == BUDGET and document["config"]["mode"] == "scalar"


def test_table_is_printed_and_saved(scalar_run):
    done, out = scalar_run
    table = (out / "capacity.txt").read_text()
    assert table.strip() == done.stdout.strip()
    for record in json.loads((out / "results.json").read_text())["results"]:
        assert record["label"] in table


def test_plot_is_written(scalar_run):
    pytest.importorskip("matplotlib")
    _, out = scalar_run
    assert (out / "capacity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_batch_mode_uses_the_bulk_apis_within_the_budget(tmp_path):
    done = run_capacity(tmp_path, "--mode", "batch", "--keys", "random",
                        "--contenders", "dict", "longhashmap")
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "results.json").read_text())
    assert [r["mode"] for r in document["results"]] == ["batch", "batch"]
    for record in document["results"]:
        check_record(record)
        assert record["keys"] == "random"


def test_memray_reports_the_heap_peak_beside_rss(tmp_path):
    pytest.importorskip("memray")
    done = run_capacity(tmp_path, "--memray", "--contenders", "dict", "longhashmap")
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "results.json").read_text())
    dict_record, hashmap_record = document["results"]
    for record in document["results"]:
        check_record(record)
        assert record["memray"]["peak_bytes"] >= record["memray"]["heap_at_peak_bytes"] > 0
    # the dict lives on the heap; the LongHashMap's table lives in its arena
    assert dict_record["memray"]["arena_at_peak_bytes"] == 0
    assert hashmap_record["memray"]["arena_at_peak_bytes"] > 0
    assert "memray heap" in (tmp_path / "capacity.txt").read_text()


def _wait_for_child(parent_pid: int, timeout_seconds: float = 60) -> int:
    """The pid of ``parent_pid``'s first ``experiments.child`` process, once it has started."""
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                cmdline = (entry / "cmdline").read_bytes()
            except (OSError, ValueError, IndexError):
                continue
            if ppid == parent_pid and b"experiments.child" in cmdline:
                return int(entry.name)
        time.sleep(0.1)
    pytest.fail("the runner started no child")


def _wait_for_filling(pid: int, resident_bytes: int = 200 << 20,
                      timeout_seconds: float = 60) -> None:
    """Return once process ``pid`` holds ``resident_bytes``: far more than its imports, so its
    map is filling (on a loaded machine the imports alone can take seconds)."""
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        status = Path(f"/proc/{pid}/status").read_text()
        kib = int(next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1])
        if kib * 1024 >= resident_bytes:
            return
        time.sleep(0.05)
    pytest.fail(f"the child holds {kib} KiB after {timeout_seconds} s: it is not filling")


def test_ctrl_c_stops_cleanly_and_keeps_finished_results(tmp_path):
    command = [sys.executable, "-m", "experiments", "capacity", "--budget", "4GiB",
               "--max-seconds", "60", "--no-progress", "--out", str(tmp_path),
               "--contenders", "dict", "sorteddict", "dict"]
    # A shell running the tests in the background ignores SIGINT, and Python keeps an inherited
    # SIG_IGN; give the runner the default disposition, as a terminal would.
    parent = subprocess.Popen(command, cwd=REPOSITORY, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    _wait_for_filling(_wait_for_child(parent.pid))
    parent.send_signal(signal.SIGINT)
    stdout, stderr = parent.communicate(timeout=60)
    assert parent.returncode == 130, stderr
    document = json.loads((tmp_path / "results.json").read_text())
    assert document["interrupted"]
    assert len(document["results"]) == 1  # the contenders after the interrupted one never started
    (record,) = document["results"]
    assert record["stop"] == "interrupted" and record["entries"] > 0
    assert not record["entries_in_budget_measured"]
    assert "interrupted" in stdout


def test_bad_budget_is_refused_with_an_example(tmp_path):
    done = subprocess.run([sys.executable, "-m", "experiments", "capacity", "--budget", "lots"],
                          cwd=REPOSITORY, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "256MiB" in done.stderr
