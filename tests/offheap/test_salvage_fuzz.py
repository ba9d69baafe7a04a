"""Salvage of damaged copies of cleanly closed files copies only what the source held; the
script runs many more (``python scripts/fuzz_files.py --mode salvage``)."""

from tests.offheap.salvage_fuzz import run_salvage_fuzz


def test_salvage_of_damaged_files_copies_nothing_wrong(tmp_path):
    summary = run_salvage_fuzz(trials=135, seed=3, workdir=str(tmp_path))
    assert summary.trials == 135
    assert not summary.failures, str(summary)
    assert sum(n for (_, outcome), n in summary.outcomes.items() if outcome == "partial") > 10
