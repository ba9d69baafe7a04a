"""Power loss: what reaches the disk is only what was synced; the rest may be lost or torn.

A SIGKILL keeps the page cache, so the kill trials never see a write that was not synced go
missing. Here a recorder wraps ``os.fsync`` and ``os.fdatasync`` while a DB is created and
committed to: at every sync it notes what the file holds (by inode, so a file created under a
temporary name and linked into place keeps its history) as durable, and it keeps the moment as
a *crash point*. The crash image of a point is, for each file the path and its log name then,
the content last synced plus any subset of the 4 KiB blocks written since (in any order, so
reordered writes are covered) and either the synced or the current length; a file never synced
starts from nothing. The names are taken as they are at the point (creating, linking, renaming
and unlinking are followed by a directory sync in the code under test).

Every image must open, at the last commit made before the point or, when the point fell inside
a commit, at that commit, with every entry of it. CI samples a few subsets per point
(``_SUBSETS``); ``OFFHEAP_POWER_LOSS_FULL=1`` runs the full sweep of more subsets and commits.
"""

from __future__ import annotations

import os
import random
import stat
from dataclasses import dataclass, field

import pytest

from offheap import DB
from offheap.arena import PAGE_BYTES

FULL = os.environ.get("OFFHEAP_POWER_LOSS_FULL") == "1"
_SUBSETS = 60 if FULL else 10
_COMMITS = 16 if FULL else 6


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as file:
            return file.read()
    except FileNotFoundError:
        return None


def _inode(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


@dataclass
class CrashPoint:
    """The files at one moment: each name's current content and the content its inode last
    synced (b"" if never)."""

    current: dict[str, bytes | None]
    durable: dict[str, bytes]
    completed: int  # commits completed before it (0: the DB was not created yet)
    in_progress: bool  # inside a commit (or the creation)


@dataclass
class Recorder:
    """Wraps the sync calls; every sync on a regular file is a crash point of ``names``."""

    names: list[str]
    durable: dict[tuple[int, int], bytes] = field(default_factory=dict)
    points: list[CrashPoint] = field(default_factory=list)
    completed: int = 0
    in_progress: bool = False

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in ("fsync", "fdatasync"):
            monkeypatch.setattr(os, name, self._wrap(getattr(os, name)))

    def _wrap(self, real):
        def sync(fd: int) -> None:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                self.point()  # a crash before this sync completes
                real(fd)
                st = os.fstat(fd)
                self.durable[(st.st_dev, st.st_ino)] = os.pread(fd, st.st_size, 0)
            else:
                real(fd)
        return sync

    def point(self) -> None:
        current = {name: _read(name) for name in self.names}
        durable = {}
        for name in self.names:
            inode = _inode(name)
            durable[name] = self.durable.get(inode, b"") if inode else b""
        self.points.append(CrashPoint(current, durable, self.completed, self.in_progress))

    def committing(self, commit) -> None:
        """Run ``commit`` as a commit in progress, then count it completed."""
        self.in_progress = True
        commit()
        self.in_progress = False
        self.completed += 1


def _torn(durable: bytes, current: bytes, rng: random.Random, choice: str) -> bytes:
    """``durable`` with a subset of the blocks where ``current`` differs (all, none or a
    random subset), at either length."""
    length = len(current) if choice == "all" else len(durable) if choice == "none" \
        else rng.choice((len(durable), len(current)))
    image = bytearray(durable[:length].ljust(length, b"\0"))
    for start in range(0, length, PAGE_BYTES):
        new = current[start: start + PAGE_BYTES]
        if new == durable[start: start + PAGE_BYTES]:
            continue
        if choice == "all" or (choice == "random" and rng.random() < 0.5):
            image[start: start + len(new)] = new
    return bytes(image[:length])


def _write_image(point: CrashPoint, directory: str, rng: random.Random, choice: str) -> str:
    os.makedirs(directory)
    for name, current in point.current.items():
        if current is not None:
            with open(os.path.join(directory, os.path.basename(name)), "wb") as file:
                file.write(_torn(point.durable[name], current, rng, choice))
    return os.path.join(directory, "db")


def _contents(db: DB) -> dict:
    return {name: dict(db.tree_map(name) if name.startswith("tree") else db.hash_map(name))
            for name in db.names()}


def _workload(path: str, recorder: Recorder, rng: random.Random) -> list[dict]:
    """Create the DB and commit ``_COMMITS`` times; the states the commits made, in order
    (the first is the new DB's: empty)."""
    opened: list[DB] = []
    recorder.committing(lambda: opened.append(DB.file(path)))
    db = opened[0]
    states = [_contents(db)]
    tree = db.tree_map("tree", key="int64", value="bytes")
    hash_map = db.hash_map("hash")
    for number in range(1, _COMMITS + 1):
        keys = rng.sample(range(20_000), 600)
        tree.update({k: b"v%d-%d" % (k, number) for k in keys})
        hash_map.update({k: "w" * (k % 13) for k in keys[:300]})
        for k in rng.sample(sorted(tree), min(len(tree), 100)):
            del tree[k]
        for k in rng.sample(sorted(hash_map), min(len(hash_map), 50)):
            del hash_map[k]
        recorder.committing(db.commit)
        states.append(_contents(db))
    db.close()
    recorder.point()  # a crash after the last close, with what was never synced lost
    return states


def test_every_crash_image_opens_at_the_last_commit_or_the_one_in_progress(tmp_path,
                                                                          monkeypatch):
    path = str(tmp_path / "work" / "db")
    os.makedirs(os.path.dirname(path))
    recorder = Recorder([path, f"{path}-wal"])
    recorder.install(monkeypatch)
    rng = random.Random(1234)
    states = _workload(path, recorder, rng)
    monkeypatch.undo()  # the images open with the real calls
    assert len(recorder.points) > _COMMITS
    failures = []
    for number, point in enumerate(recorder.points):
        first = max(point.completed - 1, 0)  # before the creation: a missing or new DB
        allowed = states[first: point.completed + (1 if point.in_progress else 0)]
        for trial, choice in enumerate(["none", "all"] + ["random"] * _SUBSETS):
            image = _write_image(point, str(tmp_path / f"image-{number}-{trial}"), rng, choice)
            if not os.path.exists(image):
                assert point.completed == 0, f"point {number}: the file vanished"
                continue
            try:
                with DB.file(image) as db:
                    found = _contents(db)
            except Exception as exc:  # noqa: BLE001 - every failure is reported below
                failures.append(f"point {number} ({choice}): {exc!r}")
                continue
            if found not in allowed:
                failures.append(f"point {number} ({choice}): opened at another state "
                                f"({point.completed} commits done, in progress: "
                                f"{point.in_progress})")
    assert not failures, "\n".join(failures[:20])
