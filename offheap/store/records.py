"""The record store (layer 4): variable-size byte records by record id, on an arena.

Layout. Records live in *segments*, arena extents carved by a bump pointer into *chunks*. A chunk
is the record rounded up to its *size class*: multiples of 4 bytes up to 4 KiB, then steps of
1/16 of a power of two. Records larger than ``LARGE_RECORD_BYTES`` get an extent of their own.

Indirection. A record id (recid) indexes two numpy arrays in one arena extent, ``addr`` (u64:
segment number << 32 | position) and ``size`` (u32), so a record can move when it grows without
its owner noticing. Recid 0 is never handed out (owners use it as "no record"); a free recid has
``addr == FREE_ADDR``. Index memory is 12 bytes per recid; the index grows by an eighth when it
is full (:data:`INDEX_GROWTH`), so it holds at most 12.5% unused ids (doubling would leave up to
100%: 0.3 B/entry of a TreeMap of random keys), still O(1) amortized copying per record.

Fragmentation. Freed chunks become free space (:mod:`offheap.store.freespace`), merged with the
free bytes on either side, and a freed run that ends at the bump pointer moves it back. A record
takes a free run of exactly its chunk size, else the bump segment's next bytes, else the front of
the smallest larger free run; only then is a new segment mapped. A record that grows takes the
free bytes right after its chunk when there are enough, without moving. A B-tree leaf that grows
by a few bytes per insert frees a chunk of class *c* and takes one of class *c+1*; the freed
chunks merge with their free neighbours instead of staying behind as holes of one size that only
a record of that class could reuse. 2M random keys into a TreeMap leave 0.12 B/entry free (1.9%
of the segments), where free lists by size class without merging left 0.20 with 8-byte classes.

Persistence. :meth:`RecordStore.flush` writes the store's metadata (segment table, bump pointer,
index location, the owner's ``root`` blob) as the arena's root blob. Free lists are not persisted:
:meth:`RecordStore.open` rebuilds them from the gaps between live records, which also makes them
immune to a stale free list. In a file arena without transactions, whose pages reach the file as
they are written, the metadata is also written whenever the index moves or a segment is added
or freed, after the change and before the old extent is freed: the metadata in the file never
names an extent that is free, so a crash image always holds a store that salvage can read.

Transactions. Every byte the store writes goes into arena memory (record chunks, the index
arrays) or into the arena's root blob, never around the arena, so a durable arena's commit sees
all of it and its rollback undoes all of it. :meth:`RecordStore.commit` writes the metadata and
commits the arena; :meth:`RecordStore.rollback` rolls the arena back and re-reads the metadata in
place, and :meth:`RecordStore.reload` re-reads it after another process committed. The store
object stays the same one, so the collections built on it keep their reference; they must drop
their own views first (:meth:`release_views` is the store's half of that).

Failure atomicity. Every method that may allocate does so before it changes any state, so a
:class:`CapacityError` leaves the store exactly as it was. The one exception is the metadata
write of a file without transactions, which follows the change it records: if it fails (a root
too large for the header that finds no room, a full disk), the store holds its records as before
and stays usable, an extent may stay allocated with nothing in it, and the arena keeps the file
marked open for writing until a later flush succeeds.

Compiled twin. ``offheap/store/_space.c`` holds the free space in C (its ``FreeSpace``, the
twin of :class:`offheap.store.freespace.FreeSpace`) and makes the common cases of :meth:`update`
(no large record and no empty contents, no new segment), also for the TreeMap's changes made
around its node cache; this module is their reference: the same addresses, the same bytes
and the same stats, and every other case.

Thread safety: none; the owning collection serializes access.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from offheap.errors import ClosedError, CorruptionError
from offheap.arena.arena import Arena
from offheap.store import freespace
from offheap.kernels.native import compiled_module
from offheap.kernels.sizes import ByteLimit

_space = compiled_module("offheap.store._space")

FREE_ADDR = 0xFFFF_FFFF_FFFF_FFFF
EMPTY_ADDR = FREE_ADDR - 1  # the address of every zero-length record: it occupies no chunk
LARGE_RECORD_BYTES = 256 * 1024
MIN_SEGMENT_BYTES = 64 * 1024
MAX_SEGMENT_BYTES = 64 * 1024 * 1024
SEGMENT_SHARE = 256  # a new segment is 1/256 of the arena (within the bounds above), so the
# unused tail of the last one is at most 0.4% of the arena (0.03 B/entry of a TreeMap of random keys)
INDEX_GROWTH = 8  # a full index grows by 1/INDEX_GROWTH of its capacity
_SMALL_CLASS_LIMIT = 4096
_SMALL_CLASS_BITS = 2
_SMALL_CLASS_STEP = 1 << _SMALL_CLASS_BITS  # small chunks and their addresses: multiples of 4
_CLOSED = "the store is closed"
_FREED_SEGMENT = "a live record address or the bump position names a freed segment"
_META_MAGIC = b"OHSTORE1"
_META = struct.Struct("<8sQQQQQ")  # magic, index extent, index capacity, bump seg, bump pos, n segs


def chunk_bytes(size: int) -> int:
    """The size class of a record of ``size`` bytes: the chunk it occupies in a segment."""
    if size <= _SMALL_CLASS_LIMIT:
        return (size + _SMALL_CLASS_STEP - 1) & -_SMALL_CLASS_STEP
    step = 1 << (size.bit_length() - 5)  # 16 classes per power of two
    return -(-size // step) * step


@dataclass(frozen=True)
class Span:
    """``nbytes`` bytes at byte ``start`` of the payload of arena extent ``extent``."""

    extent: int
    start: int
    nbytes: int


@dataclass(frozen=True)
class StoreStats:
    """Where a store's bytes go. ``reserved_bytes`` is the whole arena, limits included."""

    n_records: int
    live_bytes: int  # sum of record sizes
    chunk_bytes: int  # bytes of the chunks holding them (live + rounding)
    free_bytes: int  # free chunks plus the unused tail of the bump segment
    index_bytes: int
    segment_bytes: int  # payload bytes of all segments
    reserved_bytes: int
    used_bytes: int

    @property
    def overhead_bytes(self) -> int:
        """Bytes spent on anything but record contents and free space."""
        return self.reserved_bytes - self.live_bytes - self.free_bytes


class RecordStore:
    """Variable-size records by id on an :class:`~offheap.arena.Arena`.

    ``get`` returns a copy; :meth:`view` returns a zero-copy memoryview that is valid only until
    the next call that writes to this store.
    """

    _compiled = _space  # the compiled free space and update, or None for the reference

    def __init__(self, arena: Arena, index_capacity: int = 1024) -> None:
        """Start an empty store on ``arena`` (use :meth:`open` for an existing one) whose record
        index holds ``index_capacity`` records before it first grows."""
        self.arena = arena
        self._segments: list[int | None] = []  # seg no -> extent offset (None: reusable number)
        self._views: list[memoryview | None] = []
        self._large: set[int] = set()  # seg nos that hold one large record
        self._bump_seg = -1
        self._bump_pos = 0
        self._free = self._new_free_space()
        self._free_recids: list[int] = []
        self._next_recid = 1  # every recid at or above this is free and not in _free_recids
        self._live_bytes = 0
        self._chunk_bytes = 0
        self._n_records = 0
        self.root = b""
        self._index_extent = 0
        self._index_capacity = 0
        self._set_index(np.empty(0, np.uint64), np.empty(0, np.uint32))
        self._grow_index(max(index_capacity, 2))

    @classmethod
    def open(cls, arena: Arena) -> RecordStore:
        """Reopen the store whose metadata is ``arena.root``."""
        store = cls.__new__(cls)
        store.arena = arena
        store._load(arena.root)
        return store

    @classmethod
    def file(cls, path, *, limit_bytes: ByteLimit = None, durability: str = "commit",
             verify: bool = True, recover: bool = False, create: bool = True,
             index_capacity: int = 1024) -> RecordStore:
        """The writer's store in file ``path``: the one it holds, or a new empty one (whose
        ``root`` is ``b""``, with room for ``index_capacity`` records) when the file is new.
        Options as in :meth:`Arena.file`; the owner sets its root and commits (or flushes) a
        new store before handing it out."""
        arena = Arena.file(path, limit_bytes=limit_bytes, durability=durability, verify=verify,
                           recover=recover, create=create)
        try:
            return cls.open(arena) if arena.root else cls(arena, index_capacity)
        except BaseException:
            arena.close()
            raise

    @classmethod
    def open_damaged(cls, arena: Arena) -> RecordStore:
        """Open a store that may be damaged, for salvage: the metadata is read, but free space
        is not rebuilt (overlapping records are not an error here). Read it only with
        :meth:`get_checked`; never write to it."""
        store = cls.__new__(cls)
        store.arena = arena
        store._load(arena.root, rebuild_free_space=False)
        return store

    # -- records ------------------------------------------------------------------------------

    def put(self, data) -> int:
        """Store ``data`` (bytes-like) as a new record and return its recid."""
        self._check_open()
        size = len(data)
        if not self._free_recids and self._next_recid >= self._index_capacity:
            self._grow_index(self._index_capacity + max(self._index_capacity // INDEX_GROWTH, 2))
        addr = self._allocate_chunk(size)
        if self._free_recids:
            recid = self._free_recids.pop()
        else:
            recid = self._next_recid
            self._next_recid += 1
        self._write(addr, data)
        self._addr_at[recid] = addr
        self._size_at[recid] = size
        self._n_records += 1
        self._live_bytes += size
        return recid

    def get(self, recid: int) -> bytes:
        """A copy of record ``recid``."""
        return bytes(self.view(recid))

    def get_checked(self, recid: int) -> bytes:
        """A copy of record ``recid`` after checking that its address and size lie inside one
        live segment: :class:`CorruptionError` otherwise, KeyError for a free id. The read path
        of salvage, where the index itself may be wrong."""
        seg_no, pos, size = self._checked_address(recid)
        return b"" if seg_no is None else bytes(self._segment_view(seg_no)[pos: pos + size])

    def record_location(self, recid: int) -> Span | None:
        """Where the bytes of record ``recid`` lie in the arena (None for an empty record),
        checked as :meth:`get_checked` checks them. Salvage asks whether they touch a page
        that failed its checksum."""
        seg_no, pos, size = self._checked_address(recid)
        return None if seg_no is None else Span(self._segment_offset(seg_no), pos, size)

    def index_entry_location(self, recid: int) -> tuple[Span, Span]:
        """Where the index entry of ``recid`` lies: its u64 address and its u32 size (KeyError
        past the index). The entry itself is not read, so salvage can check its pages before
        trusting the address it holds."""
        self._check_open()
        if not 0 < recid < self._index_capacity:
            raise KeyError(f"record id {recid} does not exist")
        capacity = self._index_capacity
        return (Span(self._index_extent, 8 * recid, 8),
                Span(self._index_extent, 8 * capacity + 4 * recid, 4))

    def view(self, recid: int) -> memoryview:
        """Zero-copy view of record ``recid``, valid until the next write to this store."""
        if self.arena.closed:
            raise ClosedError(_CLOSED)
        addr = self._live_addr(recid)
        if addr == EMPTY_ADDR:
            return memoryview(b"")
        pos = addr & 0xFFFF_FFFF
        segment = self._views[addr >> 32]
        assert segment is not None, _FREED_SEGMENT
        return segment[pos: pos + self._size_at[recid]]

    def update(self, recid: int, data) -> None:
        """Replace record ``recid``. Its chunk stays where it is when the size class stays or when
        it grows into free bytes right after it; otherwise it moves."""
        if self.arena.closed:
            raise ClosedError(_CLOSED)
        if self._compiled is not None and self._compiled.update(self, recid, data):
            return
        old_addr = self._live_addr(recid)
        old_size = self._size_at[recid]
        size = len(data)
        step = _SMALL_CLASS_STEP - 1
        if 0 < size <= _SMALL_CLASS_LIMIT and \
                (size + step) >> _SMALL_CLASS_BITS == (old_size + step) >> _SMALL_CLASS_BITS:
            pos = old_addr & 0xFFFF_FFFF  # the same small size class: rewritten in place
            segment = self._views[old_addr >> 32]
            assert segment is not None, _FREED_SEGMENT
            segment[pos: pos + size] = data
            self._size_at[recid] = size
        else:
            chunk, old_chunk = chunk_bytes(size), chunk_bytes(old_size)
            if size <= LARGE_RECORD_BYTES and (chunk == old_chunk or (
                    chunk > old_chunk and 0 < old_size <= LARGE_RECORD_BYTES
                    and self._grow_in_place(old_addr, old_chunk, chunk))):
                self._write(old_addr, data)
                self._size_at[recid] = size
            else:
                new_addr = self._allocate_chunk(size)
                self._write(new_addr, data)
                self._addr_at[recid], self._size_at[recid] = new_addr, size
                self._release_chunk(old_addr, old_size)
        self._live_bytes += size - old_size

    def exchange(self, a: int, b: int) -> None:
        """Swap the contents of records ``a`` and ``b`` (their index entries): O(1), allocates
        and writes nothing, so a caller can write new contents into fresh records and make
        them those of existing ids only once every write succeeded."""
        self._check_open()
        self._live_addr(a), self._live_addr(b)  # KeyError for an id that is not live
        addr_at, size_at = self._addr_at, self._size_at
        addr_at[a], addr_at[b] = addr_at[b], addr_at[a]
        size_at[a], size_at[b] = size_at[b], size_at[a]

    def delete(self, recid: int) -> None:
        """Free record ``recid``; its chunk and its id are reused."""
        self._check_open()
        addr = self._live_addr(recid)
        size = self._size_at[recid]
        self._addr_at[recid] = FREE_ADDR
        self._size_at[recid] = 0
        self._free_recids.append(recid)
        self._n_records -= 1
        self._live_bytes -= size
        self._release_chunk(addr, size)

    def __contains__(self, recid: int) -> bool:
        return 0 < recid < self._index_capacity and self._addr_at[recid] != FREE_ADDR

    def __len__(self) -> int:
        return self._n_records

    # -- large arrays -------------------------------------------------------------------------

    def allocate_region(self, nbytes: int) -> int:
        """A zeroed arena extent of at least ``nbytes`` for an array (a hash table); its offset."""
        self._check_open()
        return self.arena.allocate(nbytes)

    def region_array(self, offset: int, dtype, count: int, start: int = 0) -> np.ndarray:
        """A numpy view into region ``offset``; drop it before :meth:`free_region`."""
        return self.arena.array(offset, dtype, count, start)

    def free_region(self, offset: int) -> None:
        self._check_open()
        self.arena.free(offset)

    # -- accounting and lifetime --------------------------------------------------------------

    def stats(self) -> StoreStats:
        self._check_open()
        free = self._free.nbytes
        segment_bytes = 0
        for seg_no, offset in enumerate(self._segments):
            if offset is not None:
                segment_bytes += self.arena.payload_bytes(offset)
                if seg_no == self._bump_seg:
                    free += self.arena.payload_bytes(offset) - self._bump_pos
        return StoreStats(
            n_records=self._n_records, live_bytes=self._live_bytes,
            chunk_bytes=self._chunk_bytes, free_bytes=free,
            index_bytes=self.arena.payload_bytes(self._index_extent),
            segment_bytes=segment_bytes, reserved_bytes=self.arena.reserved_bytes,
            used_bytes=self.arena.used_bytes)

    @property
    def durable(self) -> bool:
        """Whether this store lives in a file arena with ``durability="commit"``."""
        return self.arena.path is not None and self.arena.durability == "commit"

    def flush(self) -> None:
        """Write the store's metadata into the arena root; a file arena without transactions
        also pushes its pages to the file. In a durable arena nothing becomes durable before
        :meth:`commit`."""
        self._check_open()
        if self.arena.readonly:
            return
        self.arena.set_root(self._meta_bytes())
        if not self.durable:
            self.arena.flush()

    def commit(self) -> None:
        """Write the metadata into the arena root and commit the arena: every change up to now
        becomes durable at once (a durable file arena; see :mod:`offheap.arena.arena`)."""
        self._check_open()
        self.arena.set_root(self._meta_bytes())
        self.arena.commit()

    def rollback(self) -> None:
        """Drop every change since the last commit and re-read the committed metadata in place.

        The owners of views into this store (hash tables, decoded nodes) must drop them first and
        re-read their own metadata afterwards.
        """
        self._check_open()
        self.release_views()
        self.arena.rollback()
        self.reload()

    def reload(self) -> None:
        """Re-read the metadata from ``arena.root`` in place (after a rollback, or when the arena
        of a reader picked up another process's commit); the free lists are rebuilt."""
        self._check_open()
        self.release_views()
        self._load(self.arena.root)

    def switch_arena(self, arena: Arena) -> None:
        """Continue on ``arena``, which holds this store's data in another file (a compacted
        copy): drop the views into the old arena, which the caller closes, and read the new
        metadata in place."""
        self.release_views()
        self.arena = arena
        self._load(arena.root)

    def record_bytes(self, recids: np.ndarray) -> int:
        """Total size of the given live records (an int array of recids)."""
        return int(self._size[recids].sum()) if len(recids) else 0

    def release_views(self) -> None:
        """Drop every view this store holds into arena memory (before the arena remaps or rolls
        back); :meth:`reload` makes new ones."""
        self._views = []
        self._set_index(np.empty(0, np.uint64), np.empty(0, np.uint32))
        self._index_capacity = 0

    def close(self, save: bool = True) -> None:
        """Commit (a durable arena) or flush (a file arena without transactions), then close
        the arena; idempotent. ``save=False`` closes without either: the owner failed to
        write its state, so a durable arena keeps exactly its last commit, and a file without
        transactions stays marked open for writing (its next opener is sent to salvage)."""
        if self.arena.closed:
            return
        try:
            if save and self.arena.path is not None and not self.arena.readonly:
                if self.durable:
                    self.commit()
                else:
                    self.flush()
        finally:
            self.release_views()
            self.arena.close(clean=save)

    @property
    def closed(self) -> bool:
        return self.arena.closed

    def _check(self) -> None:
        """Assert the invariants: no two chunks overlap, counters match the index, free space
        is merged."""
        live = np.flatnonzero(self._addr[1:] != FREE_ADDR) + 1
        assert len(live) == self._n_records, (len(live), self._n_records)
        assert int(self._size[live].sum()) == self._live_bytes
        chunks = [(int(self._addr[r]), chunk_bytes(int(self._size[r])))
                  for r in live if int(self._addr[r]) != EMPTY_ADDR]
        self._free._check()
        bump = self._bump_seg << 32 | self._bump_pos
        assert self._bump_seg < 0 or all(a + size != bump for a, size in self._free.pieces()), \
            "a free run ends at the bump pointer"
        chunks += list(self._free.pieces())
        chunks.sort()
        for (a, size), (b, _) in zip(chunks, chunks[1:]):
            assert a + size <= b or (a >> 32) != (b >> 32), f"chunks overlap at {a:#x} and {b:#x}"

    # -- internals ----------------------------------------------------------------------------

    def _new_free_space(self) -> freespace.FreeSpace:
        return freespace.FreeSpace() if self._compiled is None else self._compiled.FreeSpace()

    def _check_open(self) -> None:
        if self.arena.closed:
            raise ClosedError(_CLOSED)

    def _set_index(self, addr: np.ndarray, size: np.ndarray) -> None:
        """Make ``addr``/``size`` the recid index. ``_addr_at``/``_size_at`` are memoryviews of
        the same memory for the scalar paths (an item of a memoryview is a Python int, several
        times cheaper to read or set than a numpy scalar); they are replaced, never kept,
        whenever the arrays are, so no view outlives the extent it names."""
        self._addr, self._size = addr, size
        self._addr_at, self._size_at = addr.data, size.data

    def _checked_address(self, recid: int) -> tuple[int | None, int, int]:
        """Segment number (None for an empty record), position and size of record ``recid``,
        checked to lie inside one live segment (see :meth:`get_checked`)."""
        self._check_open()
        addr = self._live_addr(recid)
        size = int(self._size[recid])
        if addr == EMPTY_ADDR:
            if size:
                raise CorruptionError(f"record {recid}: {size} bytes at the empty address")
            return None, 0, 0
        seg_no, pos = addr >> 32, addr & 0xFFFF_FFFF
        view = self._views[seg_no] if seg_no < len(self._views) else None
        if view is None or pos + size > len(view) or (seg_no in self._large and pos):
            raise CorruptionError(f"record {recid} points outside its segment "
                                  f"(segment {seg_no}, position {pos}, {size} bytes)")
        return seg_no, pos, size

    def _live_addr(self, recid: int) -> int:
        if not 0 < recid < self._index_capacity:
            raise KeyError(f"record id {recid} does not exist")
        addr = self._addr_at[recid]
        if addr == FREE_ADDR:
            raise KeyError(f"record id {recid} does not exist")
        return addr

    def _write(self, addr: int, data) -> None:
        if len(data):
            pos = addr & 0xFFFF_FFFF
            segment = self._views[addr >> 32]
            assert segment is not None, _FREED_SEGMENT
            segment[pos: pos + len(data)] = data

    def _allocate_chunk(self, size: int) -> int:
        """An address with room for ``size`` bytes; allocates before changing any state."""
        if size == 0:
            return EMPTY_ADDR
        if size > LARGE_RECORD_BYTES:
            offset = self.arena.allocate(size)
            seg_no = self._add_segment(offset)
            self._large.add(seg_no)
            self._chunk_bytes += size
            self._write_meta_unless_transactional()
            return seg_no << 32
        chunk = chunk_bytes(size)
        addr = self._free.take(chunk, split=False)
        if addr is None and self._bump_seg >= 0 and \
                self._bump_pos + chunk <= len(self._segment_view(self._bump_seg)):
            addr = self._bump_seg << 32 | self._bump_pos
            self._bump_pos += chunk
        if addr is None:
            addr = self._free.take(chunk)
        if addr is None:
            addr = self._new_bump_segment(chunk)
        self._chunk_bytes += chunk
        return addr

    def _grow_in_place(self, addr: int, old_chunk: int, chunk: int) -> bool:
        """Make the chunk at ``addr`` ``chunk`` (> ``old_chunk``) bytes long without moving it,
        from the free bytes or the bump space right after it if there are enough; whether it
        did. Allocates nothing from the arena."""
        end = addr + old_chunk
        grow = chunk - old_chunk
        if end == self._bump_seg << 32 | self._bump_pos and self._bump_seg >= 0 and \
                self._bump_pos + grow <= len(self._segment_view(self._bump_seg)):
            self._bump_pos += grow
        elif not self._free.take_at(end, grow):
            return False
        self._chunk_bytes += grow
        return True

    def _new_bump_segment(self, chunk: int) -> int:
        wanted = min(max(self.arena.reserved_bytes // SEGMENT_SHARE, MIN_SEGMENT_BYTES, chunk),
                     MAX_SEGMENT_BYTES)
        offset = self.arena.allocate(wanted)
        old_seg, old_pos = self._bump_seg, self._bump_pos
        self._bump_seg = self._add_segment(offset)
        self._bump_pos = chunk
        if old_seg >= 0:
            self._free_gap(old_seg << 32 | old_pos, len(self._segment_view(old_seg)) - old_pos)
        self._write_meta_unless_transactional()
        return self._bump_seg << 32

    def _segment_view(self, seg_no: int) -> memoryview:
        """The view of live segment ``seg_no``: every live address and the bump segment name
        one."""
        view = self._views[seg_no]
        assert view is not None, _FREED_SEGMENT
        return view

    def _segment_offset(self, seg_no: int) -> int:
        """The arena extent of live segment ``seg_no``."""
        offset = self._segments[seg_no]
        assert offset is not None, _FREED_SEGMENT
        return offset

    def _add_segment(self, offset: int) -> int:
        view = self.arena.view(offset)
        if None in self._segments:
            seg_no = self._segments.index(None)
            self._segments[seg_no], self._views[seg_no] = offset, view
        else:
            seg_no = len(self._segments)
            self._segments.append(offset)
            self._views.append(view)
        return seg_no

    def _release_chunk(self, addr: int, size: int) -> None:
        if addr == EMPTY_ADDR:
            return
        seg_no = addr >> 32
        if seg_no in self._large:
            self._large.discard(seg_no)
            offset = self._segment_offset(seg_no)
            self._segments[seg_no] = self._views[seg_no] = None
            self._chunk_bytes -= size
            self._write_meta_unless_transactional()
            self.arena.free(offset)
            return
        chunk = chunk_bytes(size)
        self._free_gap(addr, chunk)
        self._chunk_bytes -= chunk

    def _free_gap(self, addr: int, gap: int) -> None:
        """Make ``gap`` bytes at ``addr`` free space, merged with the free bytes around them; a
        run that ends at the bump pointer moves the pointer back instead."""
        if not gap:
            return
        start, nbytes = self._free.add(addr, gap)
        if self._bump_seg >= 0 and start + nbytes == self._bump_seg << 32 | self._bump_pos:
            self._free.remove(start)
            self._bump_pos = start & 0xFFFF_FFFF

    def _grow_index(self, capacity: int) -> None:
        """Move the recid index into a new extent of ``capacity`` entries."""
        offset = self.arena.allocate(capacity * 12)
        addr = self.arena.array(offset, np.uint64, capacity)
        size = self.arena.array(offset, np.uint32, capacity, start=capacity * 8)
        old = self._index_capacity
        addr[:old] = self._addr
        addr[old:] = FREE_ADDR
        size[:old] = self._size
        old_extent = self._index_extent
        self._set_index(addr, size)
        self._index_extent, self._index_capacity = offset, capacity
        if old_extent:
            self._write_meta_unless_transactional()
            self.arena.free(old_extent)

    def _write_meta_unless_transactional(self) -> None:
        """In a file arena without transactions, write the metadata into the file now (a
        :meth:`flush`), so that it names the current index and segments before an extent it
        named is freed. A durable arena's commit writes it with everything else, and a crash
        there leaves the last commit, so it needs nothing here.

        Called only when the index or the segment table changes: O(log n) index moves, and one
        segment per ``reserved_bytes / SEGMENT_SHARE`` of records (large records aside). If it fails, the
        arena notes the failure (the file stays marked open for writing at close) and the old
        extent stays allocated: the store is consistent, only that space is not reused."""
        if self.arena.path is not None and self.arena.durability == "none":
            self.flush()

    def _meta_bytes(self) -> bytes:
        segments = np.array([-1 if s is None else s for s in self._segments], np.int64)
        large = np.zeros(len(self._segments), np.uint8)
        large[list(self._large)] = 1
        head = _META.pack(_META_MAGIC, self._index_extent, self._index_capacity,
                          self._bump_seg & FREE_ADDR, self._bump_pos, len(self._segments))
        return head + segments.tobytes() + large.tobytes() + self.root

    def _load(self, meta: bytes, rebuild_free_space: bool = True) -> None:
        if len(meta) < _META.size or meta[:8] != _META_MAGIC:
            raise CorruptionError("the file holds no offheap record store (metadata missing)")
        _, index_extent, capacity, bump_seg, bump_pos, n_segs = _META.unpack_from(meta)
        end = _META.size + n_segs * 9
        if len(meta) < end:
            raise CorruptionError("the record store metadata is truncated")
        segments = np.frombuffer(meta, np.int64, n_segs, _META.size).tolist()
        large = np.frombuffer(meta, np.uint8, n_segs, _META.size + n_segs * 8)
        self.root = meta[end:]
        arena = self.arena
        try:
            self._segments = [None if s < 0 else s for s in segments]
            self._views = [None if s is None else arena.view(s) for s in self._segments]
            self._set_index(arena.array(index_extent, np.uint64, capacity),
                            arena.array(index_extent, np.uint32, capacity, start=capacity * 8))
        except (KeyError, ValueError) as exc:
            raise CorruptionError(f"the record store refers to a missing extent: {exc}") from None
        self._large = {i for i in np.flatnonzero(large).tolist()}
        self._index_extent, self._index_capacity = index_extent, capacity
        if bump_seg != FREE_ADDR and (bump_seg >= n_segs or self._views[bump_seg] is None
                                      or bump_pos > len(self._views[bump_seg])):
            raise CorruptionError(f"the record store's bump pointer (segment {bump_seg}, "
                                  f"position {bump_pos}) lies outside its segments")
        self._bump_seg = -1 if bump_seg == FREE_ADDR else bump_seg
        self._bump_pos = bump_pos
        self._free_recids = []
        self._free = self._new_free_space()
        if rebuild_free_space:
            self._rebuild_free_space()
        else:
            self._next_recid = capacity

    def _rebuild_free_space(self) -> None:
        """Recount live records and turn every gap between their chunks into free chunks."""
        live = np.flatnonzero(self._addr[1:] != FREE_ADDR) + 1
        self._next_recid = int(live[-1]) + 1 if len(live) else 1
        free = np.flatnonzero(self._addr[1: self._next_recid] == FREE_ADDR) + 1
        self._free_recids = free[::-1].tolist()
        self._n_records = len(live)
        self._live_bytes = int(self._size[live].sum())
        live = live[self._addr[live] != EMPTY_ADDR]
        sizes = self._size[live].astype(np.int64)
        addrs = self._addr[live]
        seg_of = (addrs >> np.uint64(32)).astype(np.int64)
        pos = (addrs & np.uint64(0xFFFF_FFFF)).astype(np.int64)
        known = [view is not None for view in self._views]
        if any(s >= len(known) or not known[s] for s in np.unique(seg_of).tolist()):
            raise CorruptionError("a record lies in a segment the store does not have")
        small = np.array([s not in self._large for s in seg_of.tolist()], bool)
        large_sizes = [len(self._views[s]) for s in seg_of[~small].tolist()]
        if np.any(pos[~small] != 0) or np.any(sizes[~small] > np.array(large_sizes, np.int64)):
            raise CorruptionError("a large record does not fit its segment")
        chunks = np.array([chunk_bytes(s) for s in sizes.tolist()], np.int64)
        self._chunk_bytes = int(chunks[small].sum() + sizes[~small].sum())
        for seg_no, view in enumerate(self._views):
            if view is None or seg_no in self._large:
                continue
            mine = small & (seg_of == seg_no)
            order = np.argsort(pos[mine])
            starts, lengths = pos[mine][order], chunks[mine][order]
            end = self._bump_pos if seg_no == self._bump_seg else len(view)
            cursor = 0
            for start, length in zip(starts.tolist(), lengths.tolist()):
                if start < cursor:
                    raise CorruptionError(f"records overlap in segment {seg_no} at {start}")
                self._free_gap(seg_no << 32 | cursor, start - cursor)
                cursor = start + length
            if cursor > end:
                raise CorruptionError(f"a record in segment {seg_no} lies past its end")
            self._free_gap(seg_no << 32 | cursor, end - cursor)
