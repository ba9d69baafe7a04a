"""Damaged arena files, made on purpose: every one must open to exactly its original content or
raise CorruptionError (never another exception, a hang or a crash).

``run_fuzz(trials, seed, workdir)`` is the core, shared by ``tests/offheap/test_arena_fuzz.py``
(a thousand files per run) and ``scripts/fuzz_files.py`` (as many as asked). A few source files
with different shapes (inline root, root extent, free extents, a grown checksum extent, either
durability) are built once; each trial copies one, applies one mutation chosen at random and
opens the copy, read-only or as a writer.

Mutations: flipped bits in the header, in an extent tag, in a live page, in the checksum extent
or anywhere; truncation; a zero-filled range; garbage appended; garbage over a whole page.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from offheap.arena.format import HEADER_BYTES, PAGE_BYTES, TAG_BYTES
from offheap.errors import CorruptionError
from offheap.arena.arena import Arena

MUTATIONS = ("header_bits", "tag_bits", "live_page_bits", "checksum_bits", "any_bits",
             "truncate", "zero_range", "append_garbage", "garbage_page")


def arena_content(arena: Arena) -> tuple[bytes, dict[int, bytes]]:
    """What an arena holds for its owner: the root blob and every live extent's payload."""
    return arena.root, {offset: bytes(arena.view(offset)) for offset in sorted(arena._extents)}


@dataclass
class SourceFile:
    """A well-formed arena file, its bytes, content and layout."""

    data: bytes
    content: object  # what a damaged copy must open to (arena: root and extent payloads)
    tags: list[int]  # offsets of every extent tag, the checksum extent's included
    live_pages: list[int]  # offsets of the pages of live extents
    checksum_extent: tuple[int, int]


@dataclass
class FuzzSummary:
    """Outcome of :func:`run_fuzz`: how each trial ended, per mutation."""

    trials: int = 0
    outcomes: Counter = field(default_factory=Counter)  # (mutation, "same" | "corrupt")
    failures: list[str] = field(default_factory=list)  # empty when every trial passed

    def __str__(self) -> str:
        lines = [f"{self.trials} damaged files, {len(self.failures)} failures"]
        for mutation in MUTATIONS:
            same = self.outcomes[mutation, "same"]
            corrupt = self.outcomes[mutation, "corrupt"]
            lines.append(f"  {mutation:15} opened unchanged {same:6}  CorruptionError {corrupt:6}")
        return "\n".join(lines + self.failures[:20])


def build_sources(workdir: str) -> list[SourceFile]:
    """A handful of arena files of different shapes, built deterministically."""
    rng = np.random.default_rng(7)
    shapes = [("commit", 3, 100, False), ("none", 4, 5000, False),
              ("commit", 6, 20_000, False), ("commit", 2, 200, True)]
    sources = []
    for number, (durability, n_extents, root_bytes, grow) in enumerate(shapes):
        path = os.path.join(workdir, f"source-{number}")
        with Arena.file(path, replace=True, durability=durability) as arena:
            offsets = []
            for i in range(n_extents):
                nbytes = int(rng.integers(1, 3 * PAGE_BYTES))
                offset = arena.allocate(nbytes)
                arena.array(offset, np.uint8, nbytes)[:] = rng.integers(0, 256, nbytes)
                offsets.append(offset)
            if grow:  # past the first checksum extent, which moves and leaves free space
                offsets.append(arena.allocate(5 << 20))
                arena.array(offsets[-1], np.uint8, 1000)[:] = 9
            arena.set_root(rng.integers(0, 256, root_bytes, dtype=np.uint8).tobytes())
            arena.commit()
            arena.free(offsets[1])
            arena.commit()
        with Arena.file(path, readonly=True) as arena:
            content = arena_content(arena)
        sources.append(describe_source(path, content))
    return sources


def describe_source(path: str, content) -> SourceFile:
    """A well-formed file's bytes and layout (extent tags, live pages, checksum extent), with
    the ``content`` a damaged copy must open to (the layers above pass their own)."""
    with Arena.file(path, readonly=True) as arena:
        tags, live_pages = [], []
        backing = arena._backing
        for offset, size in sorted({**arena._extents.sizes(), **backing.space.free,
                                    backing.table_offset: backing.table.extent_bytes}.items()):
            tags.append(offset)
            if offset in arena._extents:
                live_pages.extend(range(offset, offset + size, PAGE_BYTES))
        checksum_extent = (backing.table_offset, backing.table.extent_bytes)
    with open(path, "rb") as f:
        data = f.read()
    return SourceFile(data, content, tags, live_pages, checksum_extent)


def mutate(data: bytes, source: SourceFile, mutation: str, rng: random.Random) -> bytearray:
    """``data`` damaged by ``mutation``."""
    damaged = bytearray(data)

    def flip_in(start: int, stop: int) -> None:
        for _ in range(rng.choice((1, 1, 2, 8))):
            damaged[rng.randrange(start, stop)] ^= 1 << rng.randrange(8)

    if mutation == "header_bits":
        flip_in(0, HEADER_BYTES)
    elif mutation == "tag_bits":
        tag = rng.choice(source.tags)
        flip_in(tag, tag + TAG_BYTES)
    elif mutation == "live_page_bits":
        page = rng.choice(source.live_pages)
        flip_in(page, page + PAGE_BYTES)
    elif mutation == "checksum_bits":
        offset, size = source.checksum_extent
        flip_in(offset, offset + size)
    elif mutation == "any_bits":
        flip_in(0, len(damaged))
    elif mutation == "truncate":
        del damaged[rng.randrange(len(damaged)):]
    elif mutation == "zero_range":
        start = rng.randrange(len(damaged))
        stop = min(len(damaged), start + rng.choice((1, 8, 64, PAGE_BYTES, 5 * PAGE_BYTES)))
        damaged[start:stop] = bytes(stop - start)
    elif mutation == "append_garbage":
        damaged += rng.randbytes(rng.choice((1, 100, PAGE_BYTES, 3 * PAGE_BYTES)))
    elif mutation == "garbage_page":
        page = rng.randrange(len(damaged) // PAGE_BYTES) * PAGE_BYTES
        damaged[page: page + PAGE_BYTES] = rng.randbytes(PAGE_BYTES)
    else:
        raise ValueError(f"unknown mutation {mutation!r}")
    return damaged


def _write_sparse(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` leaving its all-zero pages as holes (fast for large files)."""
    whole = len(data) // PAGE_BYTES * PAGE_BYTES
    nonzero = np.frombuffer(data, np.uint8, whole).reshape(-1, PAGE_BYTES).any(axis=1)
    edges = np.flatnonzero(np.diff(np.concatenate(([0], nonzero.astype(np.int8), [0]))))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, len(data))
        for first, stop in zip(edges[::2].tolist(), edges[1::2].tolist()):
            os.pwrite(fd, data[first * PAGE_BYTES: stop * PAGE_BYTES], first * PAGE_BYTES)
        os.pwrite(fd, data[whole:], whole)
    finally:
        os.close(fd)


def count_outcome(summary: FuzzSummary, label: str, mutation: str, read, expected) -> None:
    """Read a damaged file with ``read()``: CorruptionError and the original content count as
    outcomes; any other exception, or different content, is a failure."""
    try:
        content = read()
    except CorruptionError:
        summary.outcomes[mutation, "corrupt"] += 1
        return
    except Exception as exc:  # the failure under test: anything but CorruptionError
        summary.failures.append(f"{label}: {type(exc).__name__}: {exc}")
        return
    if content == expected:
        summary.outcomes[mutation, "same"] += 1
    else:
        summary.failures.append(f"{label}: opened with different content")


def run_fuzz(trials: int, seed: int, workdir: str) -> FuzzSummary:
    """Open ``trials`` damaged copies of the source files; see the module docstring."""
    sources = build_sources(workdir)
    rng = random.Random(seed)
    summary = FuzzSummary()
    path = os.path.join(workdir, "damaged")
    for trial in range(trials):
        source = rng.choice(sources)
        mutation = MUTATIONS[trial % len(MUTATIONS)]
        damaged = mutate(source.data, source, mutation, rng)
        _write_sparse(path, damaged)
        readonly = rng.random() < 0.7
        summary.trials += 1

        def read(readonly=readonly):
            with Arena.file(path, readonly=readonly, create=False) as arena:
                content = arena_content(arena)
                if not readonly:
                    arena._check()
            return content

        count_outcome(summary, f"trial {trial} ({mutation}, readonly={readonly})", mutation, read,
                      source.content)
    return summary
