"""Power loss: what reaches the disk is only what was synced; the rest may be lost or torn.

A SIGKILL keeps the page cache, so the kill trials never see a write that was not synced go
missing. Here a recorder wraps ``os.fsync`` and ``os.fdatasync`` while a DB is created, committed
to and compacted, and it follows every file by inode (through a descriptor of its own, so a file
renamed away or unlinked can still be read). At a sync of a file it notes what the file holds as
durable; at a sync of the directory it notes the names as durable. Between them it records the
directory operations the code makes (creating a file, ``link``, ``rename``/``replace``,
``unlink``), each as one atomic change of the names, which a crash may lose: they become durable
only with the directory's sync. Every sync is a *crash point*.

The crash image of a point is a set of names and a content for each. The names are those of the
last directory sync with a prefix of the operations recorded since applied (none, each prefix, all
of them: a journaling file system keeps them in order) or, in the random trials, any subset of
them applied in order. Each name's content is what its inode last synced plus any subset of the
4 KiB blocks written since (in any order, so reordered writes are covered) at either the synced or
the current length; a file never synced starts from nothing.

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
from offheap.arena import PAGE_BYTES, commit, creation, filewriter

FULL = os.environ.get("OFFHEAP_POWER_LOSS_FULL") == "1"
_SUBSETS = 60 if FULL else 8
_COMMITS = 16 if FULL else 6
_COMPACT_AFTER = 3  # the commit after which the workload compacts the DB

Inode = tuple[int, int]
Names = dict[str, Inode]
"""A directory's names (base names) and the inode each names."""
Operation = tuple[tuple[str, Inode | None], ...]
"""One atomic directory change: each name set to an inode, or removed (None)."""


def _inode_of(st: os.stat_result) -> Inode:
    return st.st_dev, st.st_ino


def _applied(names: Names, operations: list[Operation]) -> Names:
    """``names`` after ``operations``, in order."""
    result = dict(names)
    for operation in operations:
        for name, inode in operation:
            if inode is None:
                result.pop(name, None)
            else:
                result[name] = inode
    return result


@dataclass
class CrashPoint:
    """The directory at one moment: its durable names, the operations since its last sync,
    and each inode's current content and the content it last synced (b"" if never)."""

    names: Names
    pending: list[Operation]
    current: dict[Inode, bytes]
    durable: dict[Inode, bytes]
    completed: int  # commits completed before it (0: the DB was not created yet)
    in_progress: bool  # inside a commit (or the creation)

    def trials(self, rng: random.Random, subsets: int) -> list[tuple[Names, str]]:
        """The images to try, as (names, content choice): the names after every prefix of
        the pending operations, each with no block and with every block written since the
        syncs; then ``subsets`` images of a random subset of the operations (applied in
        order) and a random subset of the blocks."""
        prefixes = [_applied(self.names, self.pending[:n]) for n in range(len(self.pending) + 1)]
        return ([(names, choice) for names in prefixes for choice in ("none", "all")]
                + [(_applied(self.names, [op for op in self.pending if rng.random() < 0.5]),
                    "random") for _ in range(subsets)])


@dataclass
class Recorder:
    """Wraps the sync calls and the directory operations on ``directory``; every sync on a
    regular file or on the directory is a crash point."""

    directory: str
    names: Names = field(default_factory=dict)
    pending: list[Operation] = field(default_factory=list)
    descriptors: dict[Inode, int] = field(default_factory=dict)
    durable: dict[Inode, bytes] = field(default_factory=dict)
    points: list[CrashPoint] = field(default_factory=list)
    completed: int = 0
    in_progress: bool = False

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in ("fsync", "fdatasync"):
            monkeypatch.setattr(os, name, self._wrap_sync(getattr(os, name)))
        real_open, real_link = os.open, os.link

        def open_(path, flags, mode=0o777, *, dir_fd=None):
            name = self._watched(path)
            created = name is not None and flags & os.O_CREAT and not os.path.lexists(path)
            fd = real_open(path, flags, mode, dir_fd=dir_fd)
            if created:
                self.pending.append(((name, self._follow(path)),))
            return fd

        def link(src, dst, **options):
            real_link(src, dst, **options)
            self._record(((self._watched(dst), self._follow(dst)),))

        monkeypatch.setattr(os, "open", open_)
        monkeypatch.setattr(os, "link", link)
        for name in ("rename", "replace"):
            monkeypatch.setattr(os, name, self._wrap_rename(getattr(os, name)))
        for name in ("unlink", "remove"):
            monkeypatch.setattr(os, name, self._wrap_unlink(getattr(os, name)))

    def _watched(self, path) -> str | None:
        """The base name of ``path`` when it lies in the watched directory."""
        path = os.path.abspath(os.fspath(path))
        return os.path.basename(path) if os.path.dirname(path) == self.directory else None

    def _follow(self, path) -> Inode:
        """The inode ``path`` names, read through a descriptor of the recorder's own from now
        on (an open file description: the code's locks are not the recorder's)."""
        inode = _inode_of(os.stat(path))
        if inode not in self.descriptors:
            self.descriptors[inode] = os.open(path, os.O_RDONLY)  # creates nothing
        return inode

    def _record(self, operation) -> None:
        operation = tuple((name, inode) for name, inode in operation if name is not None)
        if operation:
            self.pending.append(operation)

    def _wrap_rename(self, real):
        def rename(src, dst, **options):
            inode = _inode_of(os.stat(src)) if self._watched(src) else None
            real(src, dst, **options)
            self._record(((self._watched(src), None),
                          (self._watched(dst), inode or self._follow(dst))))
        return rename

    def _wrap_unlink(self, real):
        def unlink(path, **options):
            name = self._watched(path)
            if name is not None and os.path.exists(path):
                self._follow(path)  # its content stays readable for the images without this
            real(path, **options)
            self._record(((name, None),))
        return unlink

    def _wrap_sync(self, real):
        def sync(fd: int) -> None:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode) and os.path.samestat(st, os.stat(self.directory)):
                self.point()  # a crash before the directory's sync completes
                real(fd)
                self.names = _applied(self.names, self.pending)
                self.pending = []
            elif stat.S_ISREG(st.st_mode):
                self.point()  # a crash before this sync completes
                real(fd)
                self.durable[_inode_of(st)] = os.pread(fd, st.st_size, 0)
            else:
                real(fd)
        return sync

    def point(self) -> None:
        current = {inode: os.pread(fd, os.fstat(fd).st_size, 0)
                   for inode, fd in self.descriptors.items()}
        self.points.append(CrashPoint(dict(self.names), list(self.pending), current,
                                      dict(self.durable), self.completed, self.in_progress))

    def committing(self, commit) -> None:
        """Run ``commit`` as a commit in progress, then count it completed."""
        self.in_progress = True
        commit()
        self.in_progress = False
        self.completed += 1

    def close(self) -> None:
        for fd in self.descriptors.values():
            os.close(fd)
        self.descriptors.clear()


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


def _write_image(point: CrashPoint, names: Names, directory: str, rng: random.Random,
                 choice: str) -> str:
    os.makedirs(directory)
    for name, inode in names.items():
        with open(os.path.join(directory, name), "wb") as file:
            file.write(_torn(point.durable.get(inode, b""), point.current[inode], rng, choice))
    return os.path.join(directory, "db")


def _contents(db: DB) -> dict:
    return {name: dict(db.tree_map(name) if name.startswith("tree") else db.hash_map(name))
            for name in db.names()}


def _workload(path: str, recorder: Recorder, rng: random.Random) -> list[dict]:
    """Create the DB, commit ``_COMMITS`` times and compact once; the states the commits (and
    the compaction) made, in order (the first is the new DB's: empty)."""
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
        if number == _COMPACT_AFTER:  # a new file renamed over the path: same entries
            recorder.committing(db.compact)
            states.append(states[-1])
    db.close()
    recorder.point()  # a crash after the last close, with what was never synced lost
    return states


def _crash_failures(tmp_path, monkeypatch: pytest.MonkeyPatch, subsets: int,
                    stop_after: int | None = None) -> list[str]:
    """Run the workload under the recorder, then open the images of every crash point (with
    ``subsets`` random ones per point); what went wrong, up to ``stop_after`` failures."""
    directory = str(tmp_path / "work")
    os.makedirs(directory)
    path = os.path.join(directory, "db")
    recorder = Recorder(directory)
    with monkeypatch.context() as recording:
        recorder.install(recording)
        rng = random.Random(1234)
        try:
            states = _workload(path, recorder, rng)
        finally:
            recorder.close()
    assert len(recorder.points) > _COMMITS
    assert any(point.pending for point in recorder.points)
    failures: list[str] = []
    for number, point in enumerate(recorder.points):
        first = max(point.completed - 1, 0)  # before the creation: a missing or new DB
        allowed = states[first: point.completed + (1 if point.in_progress else 0)]
        for trial, (names, choice) in enumerate(point.trials(rng, subsets)):
            if stop_after is not None and len(failures) >= stop_after:
                return failures
            where = (f"point {number} ({choice}, names {sorted(names)}, "
                     f"{len(point.pending)} directory operations not synced)")
            image = _write_image(point, names, str(tmp_path / f"image-{number}-{trial}"), rng,
                                 choice)
            if not os.path.exists(image):
                if point.completed:
                    failures.append(f"{where}: the file vanished")
                continue
            try:
                with DB.file(image) as db:
                    found = _contents(db)
            except Exception as exc:  # noqa: BLE001 - every failure is reported below
                failures.append(f"{where}: {exc!r}")
                continue
            if found not in allowed:
                failures.append(f"{where}: opened at another state ({point.completed} commits "
                                f"done, in progress: {point.in_progress})")
    return failures


def test_every_crash_image_opens_at_the_last_commit_or_the_one_in_progress(tmp_path,
                                                                          monkeypatch):
    failures = _crash_failures(tmp_path, monkeypatch, _SUBSETS)
    assert not failures, "\n".join(failures[:20])


def test_the_model_loses_directory_operations_that_were_not_synced(tmp_path, monkeypatch):
    """The model's own check: without the directory syncs, a committed DB's name is lost."""
    for module in (creation, commit, filewriter):
        monkeypatch.setattr(module, "fsync_directory", lambda path: None)
    failures = _crash_failures(tmp_path, monkeypatch, 0, stop_after=1)
    assert failures and "the file vanished" in failures[0], failures
