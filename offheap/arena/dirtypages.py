"""Finding the pages a process changed in a private file mapping (layer 3, beside memory).

A page of a ``MAP_PRIVATE`` file mapping reads through to the file until the process writes it;
the write gives the process its own anonymous copy. Linux reports that in
``/proc/self/pagemap``, one u64 per virtual page: bit 63 present, bit 62 swapped, bit 61 "file
page or shared anonymous". A written private page is present or swapped with bit 61 clear; a
page never written is absent or has bit 61 set. Reading the flags needs no privileges (the frame
numbers, which do, are not used). Cost: 8 bytes read per page of mapping, about 1 ms per GiB.

Where pagemap is missing or unreadable, :func:`differing_pages` compares the mapping with the
file instead, reading every mapped byte: O(mapping), correct, slower.
"""

from __future__ import annotations

import ctypes
import mmap
import os

import numpy as np

from offheap.arena.format import PAGE_BYTES

PAGEMAP_PATH = "/proc/self/pagemap"
_PRESENT = np.uint64(1 << 63)
_SWAPPED = np.uint64(1 << 62)
_FILE_OR_SHARED = np.uint64(1 << 61)
_COMPARE_CHUNK_PAGES = 1024


class Pagemap:
    """An open ``/proc/self/pagemap`` of the process that opened it (reopened after a fork)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pid = os.getpid()

    @classmethod
    def open(cls) -> Pagemap | None:
        """The pagemap of this process, or None when it cannot be read."""
        try:
            fd = os.open(PAGEMAP_PATH, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        return cls(fd)

    def entries(self, address: int, n_pages: int) -> np.ndarray:
        """The raw u64 entries of ``n_pages`` virtual pages from ``address`` (page-aligned)."""
        if os.getpid() != self._pid:
            os.close(self._fd)
            self._fd = os.open(PAGEMAP_PATH, os.O_RDONLY | os.O_CLOEXEC)
            self._pid = os.getpid()
        data = os.pread(self._fd, 8 * n_pages, address // PAGE_BYTES * 8)
        if len(data) != 8 * n_pages:
            raise OSError(f"{PAGEMAP_PATH} returned {len(data)} of {8 * n_pages} bytes")
        return np.frombuffer(data, np.uint64)

    def written_pages(self, address: int, n_pages: int) -> np.ndarray:
        """A bool per page of a private mapping at ``address``: has this process written it?"""
        entries = self.entries(address, n_pages)
        return ((entries & (_PRESENT | _SWAPPED)) != 0) & ((entries & _FILE_OR_SHARED) == 0)

    def close(self) -> None:
        os.close(self._fd)


def address_of(mapping: mmap.mmap) -> int:
    """The virtual address of a writable mapping (what :meth:`Pagemap.written_pages` takes)."""
    anchor = (ctypes.c_char * 1).from_buffer(mapping)
    try:
        return ctypes.addressof(anchor)
    finally:
        del anchor


def open_working_pagemap() -> Pagemap | None:
    """This process's pagemap if it reports written private pages correctly, else None.

    Checked on a two-page private anonymous mapping with only its first page written.
    """
    pagemap = Pagemap.open()
    if pagemap is None:
        return None
    probe = mmap.mmap(-1, 2 * PAGE_BYTES, flags=mmap.MAP_PRIVATE)
    try:
        probe[0] = 1
        works = pagemap.written_pages(address_of(probe), 2).tolist() == [True, False]
    except OSError:
        works = False
    finally:
        probe.close()
    if not works:
        pagemap.close()
        return None
    return pagemap


def page_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``(first, count)`` of every run of True in ``mask`` (a bool per page)."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.astype(np.int8), [0]))))
    return [(int(start), int(stop - start)) for start, stop in zip(edges[::2], edges[1::2])]


def differing_pages(mapping, fd: int, file_offset: int) -> np.ndarray:
    """A bool per page: does ``mapping`` (a whole number of pages) differ from the file bytes
    at ``file_offset``? Bytes past the end of the file count as zeros."""
    view = memoryview(mapping).cast("B")
    n_pages = len(view) // PAGE_BYTES
    result = np.zeros(n_pages, bool)
    for first in range(0, n_pages, _COMPARE_CHUNK_PAGES):
        count = min(_COMPARE_CHUNK_PAGES, n_pages - first)
        start = first * PAGE_BYTES
        on_file = os.pread(fd, count * PAGE_BYTES, file_offset + start).ljust(count * PAGE_BYTES,
                                                                              b"\0")
        in_memory = np.frombuffer(view[start: start + count * PAGE_BYTES], np.uint8)
        differs = in_memory.reshape(count, PAGE_BYTES) != np.frombuffer(
            on_file, np.uint8).reshape(count, PAGE_BYTES)
        result[first: first + count] = differs.any(axis=1)
    return result
