"""A thousand damaged arena files: each opens to its original content or raises CorruptionError.

The core is :mod:`tests.offheap.arena_fuzz`; ``scripts/fuzz_files.py --trials 10000`` runs more.
"""

import random

from tests.offheap.arena_fuzz import MUTATIONS, build_sources, mutate, run_fuzz


def test_damaged_files_open_unchanged_or_raise_corruption(tmp_path):
    summary = run_fuzz(1000, seed=20240611, workdir=str(tmp_path))
    assert not summary.failures, str(summary)
    assert summary.trials == 1000
    for mutation in ("header_bits", "live_page_bits", "checksum_bits", "truncate"):
        assert summary.outcomes[mutation, "corrupt"] > 0, str(summary)
        assert summary.outcomes[mutation, "same"] == 0, str(summary)  # every such flip is caught
    assert summary.outcomes["append_garbage", "same"] > 0, str(summary)  # past the end: ignored


def test_every_mutation_changes_the_bytes(tmp_path):
    source = build_sources(str(tmp_path))[0]
    rng = random.Random(1)
    for mutation in MUTATIONS:
        if mutation != "zero_range":  # zeros over zeros change nothing, by chance
            assert bytes(mutate(source.data, source, mutation, rng)) != source.data, mutation
