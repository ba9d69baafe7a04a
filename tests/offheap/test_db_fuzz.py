"""A thousand damaged DB and map files: each reads back its exact entries or raises
CorruptionError. The core is :mod:`tests.offheap.db_fuzz`; ``scripts/fuzz_files.py --mode db
--trials 10000`` runs more."""

from tests.offheap.db_fuzz import run_db_fuzz


def test_damaged_db_files_read_back_unchanged_or_raise_corruption(tmp_path):
    summary = run_db_fuzz(1000, seed=20261130, workdir=str(tmp_path))
    assert not summary.failures, str(summary)
    assert summary.trials == 1000
    for mutation in ("header_bits", "live_page_bits", "checksum_bits", "truncate"):
        assert summary.outcomes[mutation, "corrupt"] > 0, str(summary)
        assert summary.outcomes[mutation, "same"] == 0, str(summary)  # every such flip is caught
    assert summary.outcomes["append_garbage", "same"] > 0, str(summary)
