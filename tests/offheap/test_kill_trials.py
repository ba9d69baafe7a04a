"""The fault-injection script in small: a writer killed with SIGKILL at random moments (many of
them inside ``commit()``), and every reopened file exactly at its last commit; without
transactions, every killed writer's file refuses to open and salvage invents no value."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "kill_trials.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("kill_trials", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_ten_kill_trials_lose_nothing(tmp_path):
    kill_trials = _load_script()
    outcome = kill_trials.run_trials(10, seed=20261130, directory=str(tmp_path), max_delay=0.5,
                                     compact_every=10, progress=False)
    assert outcome.trials == 10
    assert outcome.losses == 0, "\n".join(outcome.details)
    assert outcome.transactions_checked > 0


def test_unclean_files_without_transactions_refuse_to_open_and_salvage_invents_nothing(tmp_path):
    kill_trials = _load_script()
    outcome = kill_trials.run_trials(5, seed=7, directory=str(tmp_path), max_delay=0.5,
                                     compact_every=10, progress=False, durability="none")
    assert outcome.trials == 5
    assert outcome.losses == 0, "\n".join(outcome.details)


def test_allowed_numbers_follow_the_last_log_record():
    kill_trials = _load_script()
    ops = [("tset", 1, "a")]
    assert kill_trials.allowed_numbers([], 7)[0] == {7}
    assert kill_trials.allowed_numbers([("begin", 8, ops)], 7)[0] == {7}
    assert kill_trials.allowed_numbers([("begin", 8, ops), ("commit", 8)], 7)[0] == {7, 8}
    assert kill_trials.allowed_numbers([("begin", 8, ops), ("commit", 8), ("committed", 8)],
                                       7)[0] == {8}


def test_log_records_survive_a_torn_tail(tmp_path):
    kill_trials = _load_script()
    path = tmp_path / "log"
    with open(path, "wb") as log:
        kill_trials.append_record(log.fileno(), ("begin", 1, [("hdel", 3)]))
        kill_trials.append_record(log.fileno(), ("commit", 1))
    data = path.read_bytes()
    records, used = kill_trials.read_records(data + data[:5])
    assert records == [("begin", 1, [("hdel", 3)]), ("commit", 1)] and used == len(data)
    assert kill_trials.read_records(data[:-1])[0] == [("begin", 1, [("hdel", 3)])]
