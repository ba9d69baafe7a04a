"""The non-capacity runners keep what they measured when a Ctrl-C or a failure cuts them short.

Each runner runs in this process through ``python -m experiments``'s ``main`` with one of its
steps replaced by one that runs for real the first time and then raises; results.json and the
table hold the finished steps, say what happened, and the exit status says it too.
"""

from __future__ import annotations

import json

import pytest

from experiments import __main__ as cli
from experiments import maps_bench, parallel_write, sparkey_bench

FAULTS = {"interrupted": (KeyboardInterrupt, cli.EXIT_INTERRUPTED),
          "failed": (RuntimeError, cli.EXIT_FAILED)}


def _once_then(fault: type[BaseException], real):
    """``real`` for the first call, then ``fault`` raised."""
    calls = []

    def step(*args, **kwargs):
        calls.append(args)
        if len(calls) > 1:
            raise fault("the step broke")
        return real(*args, **kwargs)
    return step


def _run(tmp_path, capsys, *argv) -> tuple[int, dict, str]:
    code = cli.main([*argv, "--out", str(tmp_path)])
    capsys.readouterr()
    document = json.loads((tmp_path / "results.json").read_text())
    return code, document, (tmp_path / f"{argv[0]}.txt").read_text()


def _check_marked(document: dict, table: str, outcome: str, during: str) -> None:
    if outcome == "interrupted":
        assert document["interrupted"] and during in document["interrupted_during"]
        assert "interrupted by Ctrl-C during: " in table
    else:
        assert during in document["failed"]["during"]
        assert document["failed"]["type"] == "RuntimeError"
        assert "the step broke" in document["failed"]["traceback"]
        assert "the runner failed during: " in table and "RuntimeError: the step broke" in table
    assert document["wall_seconds"] > 0


@pytest.mark.parametrize("outcome", sorted(FAULTS))
def test_maps_bench_keeps_the_maps_it_timed(tmp_path, capsys, monkeypatch, outcome):
    fault, status = FAULTS[outcome]
    monkeypatch.setattr(maps_bench, "bench_map", _once_then(fault, maps_bench.bench_map))
    code, document, table = _run(tmp_path, capsys, "maps-bench", "--n", "300", "--repeat", "1",
                                 "--no-goals")
    assert code == status
    assert list(document["results"]) == ["dict"]
    assert list(document["results"]["dict"]) == document["operations"]
    assert "dict ns/op" in table
    _check_marked(document, table, outcome, "SortedDict")


@pytest.mark.parametrize("outcome", sorted(FAULTS))
def test_sparkey_bench_keeps_the_rows_it_measured(tmp_path, capsys, monkeypatch, outcome):
    fault, status = FAULTS[outcome]
    monkeypatch.setattr(sparkey_bench, "APPEND_ENTRIES", {"small": (b"key", b"value")})
    monkeypatch.setattr(sparkey_bench, "bench_lookups",
                        _once_then(fault, sparkey_bench.bench_lookups))
    code, document, table = _run(tmp_path, capsys, "sparkey-bench", "--max-n", "1000",
                                 "--seconds", "0.01", "--repeats", "1")
    assert code == status
    assert len(document["appends"]) == 3
    assert [(r["n"], r["compression"]) for r in document["lookups"]] == [(1000, "none")]
    assert "Random lookups" in table
    _check_marked(document, table, outcome, "lookups: N=1,000, snappy")


@pytest.mark.parametrize("outcome", sorted(FAULTS))
def test_parallel_write_keeps_the_cells_it_timed(tmp_path, capsys, monkeypatch, outcome):
    fault, status = FAULTS[outcome]
    monkeypatch.setattr(parallel_write, "_time_variants",
                        _once_then(fault, parallel_write._time_variants))
    code, document, table = _run(tmp_path, capsys, "parallel-write", "--sizes", "600",
                                 "--codecs", "none", "snappy", "--runs", "1", "--parallelism",
                                 "2", "--no-probes", "--no-treemap")
    assert code == status
    assert {r["codec"] for r in document["writes"]} == {"none"}
    assert "none:" in table
    _check_marked(document, table, outcome, "writing 600 quotes, snappy")
