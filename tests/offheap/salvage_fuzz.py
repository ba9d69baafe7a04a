"""Salvage of damaged files that were closed cleanly: whatever salvage copies must be exactly
what the source held (its checksums tell the damaged pages apart), and it must say so honestly.

``run_salvage_fuzz(trials, seed, workdir)`` is the core, shared by
``tests/offheap/test_salvage_fuzz.py`` and ``scripts/fuzz_files.py --mode salvage``. It damages
copies of the DB and map sources of :mod:`tests.offheap.db_fuzz` with one of
:data:`arena_fuzz.MUTATIONS` each and salvages them. A trial passes when salvage raises
CorruptionError (the header itself is unreadable), or copies a subset of the source's entries
with their values, reports ``complete`` only when it copied all of them, and ``verified`` only
when the file was undamaged where salvage looked. Anything else is a failure: another
exception, an entry with a value the source does not have, a claim the copy contradicts.
"""

from __future__ import annotations

import os
import random
from collections import Counter

from offheap import DB, salvage
from offheap.errors import CorruptionError
from tests.offheap.arena_fuzz import MUTATIONS, FuzzSummary, _write_sparse, mutate
from tests.offheap.db_fuzz import TREE_OPTIONS, _build, hash_items, tree_items


class SalvageSummary(FuzzSummary):
    """:class:`FuzzSummary` whose outcomes are "complete", "partial" and "corrupt"."""

    def __str__(self) -> str:
        lines = [f"{self.trials} damaged files salvaged, {len(self.failures)} failures"]
        for mutation in MUTATIONS:
            counts = {outcome: self.outcomes[mutation, outcome]
                      for outcome in ("complete", "partial", "corrupt")}
            lines.append(f"  {mutation:15} complete {counts['complete']:6}  partial "
                         f"{counts['partial']:6}  CorruptionError {counts['corrupt']:6}")
        return "\n".join(lines + self.failures[:20])


def _as_dicts(kind: str, content) -> dict[str, dict]:
    """A source's content as ``{collection name: {key: value}}``."""
    if kind == "db":
        return {name: dict(items) for name, items in content.items()}
    return {kind: dict(content)}


def _salvaged(kind: str, path: str, report) -> dict[str, dict]:
    """Every entry of the salvaged file, as :func:`_as_dicts` gives the source's (a standalone
    map whose metadata salvage could not read is an empty map of default options)."""
    if kind != "db" and (report.error or report.collections[0].error):
        return {kind: {}}
    if kind == "tree":
        return {kind: dict(tree_items(path))}
    if kind == "hash":
        return {kind: dict(hash_items(path))}
    with DB.file(path, readonly=True, allow_pickle=True) as db:
        return {name: dict((db.tree_map if name in TREE_OPTIONS else db.hash_map)(name).items())
                for name in db.names()}


def _problems(truth: dict[str, dict], copied: dict[str, dict], report) -> list[str]:
    """What is wrong with a salvage that returned ``report`` and copied ``copied``."""
    problems = []
    for name, entries in copied.items():
        wrong = [k for k, v in entries.items() if truth.get(name, {}).get(k, object()) != v]
        if wrong:
            problems.append(f"{name}: {len(wrong)} entries the source does not hold, e.g. "
                            f"{wrong[0]!r}")
    whole = all(copied.get(name) == entries for name, entries in truth.items())
    if report.complete and not whole:
        problems.append("reported complete, but entries are missing")
    if report.verified and not whole:
        problems.append("reported verified, but entries are missing")
    for collection in report.collections:
        if collection.skipped_entries or collection.skipped_records:
            problems.append(f"{collection.name}: structural checks rejected data from pages "
                            f"that passed their checksums")
    return problems


def run_salvage_fuzz(trials: int, seed: int, workdir: str) -> SalvageSummary:
    """Salvage ``trials`` damaged copies of the sources; see the module docstring."""
    sources = [(kind, source, _as_dicts(kind, source.content)) for kind, source in _build(workdir)]
    rng = random.Random(seed)
    summary = SalvageSummary(outcomes=Counter())
    path, rescued = os.path.join(workdir, "damaged"), os.path.join(workdir, "rescued")
    for trial in range(trials):
        kind, source, truth = rng.choice(sources)
        mutation = MUTATIONS[trial % len(MUTATIONS)]
        _write_sparse(path, mutate(source.data, source, mutation, rng))
        if os.path.exists(rescued):
            os.remove(rescued)
        summary.trials += 1
        where = f"trial {trial} ({kind}, {mutation})"
        try:
            report = salvage(path, rescued)
            copied = _salvaged(kind, rescued, report)
        except CorruptionError:
            summary.outcomes[mutation, "corrupt"] += 1
            continue
        except Exception as exc:  # the failure under test: anything but CorruptionError
            summary.failures.append(f"{where}: {type(exc).__name__}: {exc}")
            continue
        problems = _problems(truth, copied, report)
        if problems:
            summary.failures.append(f"{where}: " + "; ".join(problems))
        else:
            summary.outcomes[mutation, "complete" if report.complete else "partial"] += 1
    return summary
