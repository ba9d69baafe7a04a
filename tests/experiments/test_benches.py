"""``python -m experiments sparkey-bench`` and ``maps-bench`` run for real on small sizes."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.hashmap_goals import CORES, available_cores
from experiments.treemap_goals import GOALS

REPOSITORY = Path(__file__).resolve().parents[2]


def run_runner(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "experiments", *args], cwd=REPOSITORY,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def sparkey_document(tmp_path_factory):
    out = tmp_path_factory.mktemp("sparkey-bench")
    done = run_runner("sparkey-bench", "--max-n", "10000", "--seconds", "0.05", "--repeats", "1",
                      "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (out / "sparkey-bench.txt").read_text().strip()
    return json.loads((out / "results.json").read_text())


def test_sparkey_lookups_cover_every_size_and_compression(sparkey_document):
    lookups = sparkey_document["lookups"]
    assert [(r["n"], r["compression"]) for r in lookups] == [
        (n, c) for n in (1_000, 10_000) for c in ("none", "snappy", "zstd")]
    for record in lookups:
        assert record["get_ops_per_second"] > 0 and record["get_many_ops_per_second"] > 0
        assert record["log_bytes"] > 0 and record["index_bytes"] > 0
    java = {(r["n"], r["compression"]): r["java_ops_per_second"] for r in lookups}
    assert java[(1_000, "none")] == 4_768_851 and java[(10_000, "zstd")] is None


def test_sparkey_appends_and_index_builds(sparkey_document):
    appends = sparkey_document["appends"]
    assert {(r["size"], r["compression"]) for r in appends} == {
        (s, c) for s in ("small", "medium") for c in ("none", "snappy", "zstd")}
    assert all(r["ops_per_second"] > 0 for r in appends)
    builds = sparkey_document["index_builds"]
    assert [(r["n"], r["method"]) for r in builds] == [
        (n, m) for n in (1_000, 10_000) for m in ("memory", "sorting")]
    assert all(r["seconds"] > 0 and r["java_seconds"] > 0 for r in builds)
    assert len(sparkey_document["machine"]["git_commit"]) == 40


def test_maps_bench_times_every_operation_of_every_map(tmp_path):
    done = run_runner("maps-bench", "--n", "5000", "--repeat", "2", "--goals", "2K", "20K", "50K",
                      "--tree-goals", "5K", "500", "--tree-random-fill", "3K",
                      "--keyed-goals", "5K", "1K", "5K", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "results.json").read_text())
    results = document["results"]
    assert list(results) == ["dict", "SortedDict", "LongHashMap", "LongHashMap (pure)", "TreeMap"]
    assert document["config"]["repeat"] == 2
    assert document["machine"]["offheap_compiled"] == (available_cores() == CORES)
    for cells in results.values():
        assert list(cells) == document["operations"]
        assert all(cell["seconds"] > 0 and cell["ns_per_op"] > 0 for cell in cells.values())
    assert all(results["LongHashMap"][op]["bulk_api"] for op in ("bulk put", "bulk get", "bulk delete"))
    assert not results["dict"]["bulk get"]["bulk_api"]
    table = (tmp_path / "maps-bench.txt").read_text()
    assert "LongHashMap vs dict" in table and "TreeMap vs SortedDict" in table
    assert "LongHashMap (pure) vs dict" in table
    goals = document["hashmap_goals"]
    assert list(goals["seconds_per_op"]) == ["dict", *available_cores()]
    assert all(seconds > 0 for row in goals["seconds_per_op"].values() for seconds in row.values())
    assert goals["bytes_per_entry"]["n"] == 50_000 and goals["bytes_per_entry"]["value"] > 8
    assert "LongHashMap against dict" in table and "put_many vs a dict loop" in table
    assert all("get hit, random, another order" in row for row in goals["seconds_per_op"].values())
    tree = document["treemap_goals"]
    assert list(tree["paths"]) == (["compiled", "pure"] if available_cores() == CORES else ["pure"])
    for result in tree["paths"].values():
        assert set(result["seconds_per_op"]) == {"SortedDict", "TreeMap"}
        for cells in result["seconds_per_op"].values():
            assert list(cells) == [goal.name for goal in GOALS] and all(s > 0 for s in cells.values())
        assert list(result["bytes_per_entry"]) == ["sequential, node 32, write cache",
                                                   "random (3,000), node 32, write cache"]
        assert 0 < result["bytes_per_entry"]["sequential, node 32, write cache"] < 64
    assert "TreeMap against SortedDict" in table and "peekitem" in table
    keyed = document["keyed_goals"]
    assert list(keyed["seconds_per_op"]) == list(available_cores())
    for core, names in keyed["seconds_per_op"].items():
        assert set(names) == {"dict", core}
        assert all(len(cells) == 6 and min(cells.values()) > 0 for cells in names.values())
    sizes = keyed["bytes_per_entry"]
    assert sizes["n"] == 5000 and 0 < sizes["HashMap"] and 50 < sizes["dict"] < 400
    assert 'HashMap(key="str") against dict' in table and "bytes/entry at 5,000 keys" in table


def test_maps_bench_skips_the_tree_goals_when_told(tmp_path):
    done = run_runner("maps-bench", "--n", "2000", "--repeat", "1", "--no-goals", "--no-tree-goals",
                      "--no-keyed-goals", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "results.json").read_text())
    assert "treemap_goals" not in document and "hashmap_goals" not in document
    assert "keyed_goals" not in document


def test_sparkey_bench_refuses_a_tiny_max_n():
    done = run_runner("sparkey-bench", "--max-n", "10")
    assert done.returncode != 0 and "at least 1000" in done.stderr
