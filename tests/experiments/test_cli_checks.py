"""``python -m experiments``: options checked before any work, and results kept on a fault."""

import json

import pytest

from experiments import __main__ as cli
from experiments import capacity


def _usage_error(capsys, *argv):
    with pytest.raises(SystemExit) as info:
        cli.main(list(argv))
    return info.value.code, capsys.readouterr().err


@pytest.mark.parametrize("runner", ["capacity", "sparkey-bench", "maps-bench", "parallel-write"])
def test_an_out_that_is_a_file_is_refused_before_any_work(tmp_path, capsys, monkeypatch, runner):
    monkeypatch.setattr(cli, "_run_capacity", lambda args: pytest.fail("the run started"))
    target = tmp_path / "results"
    target.write_text("a file")
    code, err = _usage_error(capsys, runner, "--out", str(target))
    assert code == 2 and f"--out {target} is not a directory" in err
    assert target.read_text() == "a file"


@pytest.mark.parametrize("budget, message", [
    ("1KiB", "--budget 1.0 KiB is below 1.0 MiB"),
    ("1000TiB", "is more than this machine's"),
])
def test_absurd_budgets_are_refused_with_the_machine_figure(tmp_path, capsys, budget, message):
    code, _ = _usage_error(capsys, "capacity", "--budget", budget, "--out", str(tmp_path))
    assert message in str(code)  # SystemExit with the message: printed, exit status 1
    assert not (tmp_path / "results.json").exists()


def test_the_default_rss_guard_stays_below_the_machine_memory(monkeypatch, capsys):
    monkeypatch.setattr(cli, "memory_bytes", lambda: 16 << 30)
    assert cli._checked_rss_guard(12 << 30, None) == int(0.9 * (16 << 30))
    assert "the RSS guard is 14.40 GiB" in capsys.readouterr().err
    assert cli._checked_rss_guard(256 << 20, None) == 4 << 30
    assert cli._checked_rss_guard(12 << 30, 20 << 30) == 20 << 30  # given explicitly: kept


@pytest.mark.parametrize("argv, message", [
    (["sparkey-bench", "--seconds", "0"], "argument --seconds: must be a positive number"),
    (["capacity", "--max-seconds", "-1"], "argument --max-seconds: must be a positive number"),
    (["capacity", "--max-seconds", "soon"], "argument --max-seconds: cannot read 'soon' as"),
])
def test_duration_errors_name_the_option_given(capsys, argv, message):
    code, err = _usage_error(capsys, *argv)
    assert code == 2 and message in err
    assert "_positive_seconds" not in err and ("--max-seconds" in err) == ("--max-seconds" in argv)


def test_a_runner_fault_keeps_the_finished_results(tmp_path, monkeypatch, capsys):
    calls = []

    def run_contender(contender, config, progress):
        calls.append(contender.name)
        if len(calls) == 2:
            raise RuntimeError("the runner broke")
        return {"name": contender.name, "label": contender.label, "keys": "sequential",
                "mode": "scalar", "skipped": "not run by this test"}, False

    monkeypatch.setattr(capacity, "run_contender", run_contender)
    status = cli.main(["capacity", "--budget", "8MiB", "--no-progress", "--out", str(tmp_path),
                       "--contenders", "dict", "sorteddict", "longhashmap"])
    assert status == cli.EXIT_FAILED and calls == ["dict", "sorteddict"]
    document = json.loads((tmp_path / "results.json").read_text())
    assert [record["name"] for record in document["results"]] == ["dict"]
    assert document["failed"]["type"] == "RuntimeError"
    assert "the runner failed during sorteddict" in (tmp_path / "capacity.txt").read_text()


def _capped_run(monkeypatch, stop: str) -> list:
    """Run ``capacity`` with a runner that records its config and reports one fill stopped by
    ``stop``; nothing is filled or written."""
    configs = []

    def run_capacity(contenders, config, progress):
        configs.append(config)
        return {"results": [{"label": "TreeMap, no write cache", "stop": stop}]}

    monkeypatch.setattr(capacity, "run_capacity", run_capacity)
    monkeypatch.setattr(cli, "_write", lambda *args: None)
    monkeypatch.setattr(cli.report, "plot_capacity", lambda *args: None)
    return configs


@pytest.mark.parametrize("stop", ["time", "budget"])
def test_the_default_cap_cutting_a_fill_short_is_a_warning(tmp_path, capsys, monkeypatch, stop):
    configs = _capped_run(monkeypatch, stop)
    cli.main(["capacity", "--no-progress", "--out", str(tmp_path)])
    (config,) = configs
    assert config.budget_bytes == 4 << 20 and config.max_seconds == cli.DEFAULT_MAX_SECONDS
    warned = "the default time cap" in capsys.readouterr().err
    assert warned == (stop == "time")


def test_a_cap_the_user_chose_is_no_warning(tmp_path, capsys, monkeypatch):
    configs = _capped_run(monkeypatch, "time")
    cli.main(["capacity", "--max-seconds", "5", "--no-progress", "--out", str(tmp_path)])
    assert configs[0].max_seconds == 5
    assert "the default time cap" not in capsys.readouterr().err
