"""The engine of ``LogWriter.put_many``: PUTs framed and compressed chunk by chunk, on threads.

The entries arrive as chunks (row ranges of two columns, or runs of ``(key, value)`` pairs).
Each chunk goes through three steps::

    worker:  pack keys and values, frame the entries (sparkey.log.framing)
    caller:  cut the chunk's entry stream into blocks (BlockCutter), in chunk order
    worker:  compress the closed blocks and prefix each with VLQ(compressed length)

and the caller hands the results on as ``Commit`` objects in log order, each ending on an entry
boundary. Uncompressed logs skip the last two steps. Block boundaries depend only on entry
sizes, so the output is byte for byte the output of ``LogWriter.put`` called entry by entry,
whatever the number of workers and the chunking.

Why threads: numpy copies and the compressors release the GIL, and the remaining Python work
is per chunk and per block, never per entry. The GIL-free stretches must be long, or two
threads spend their time handing the GIL over: hence chunks of about ``TARGET_CHUNK_BYTES``
(the size of a core's L2 cache here) and zstd compressing a chunk's blocks in one call.
Measurements, and the process alternatives that lost, are in docs/parallel-writes.md. With one
worker the same steps run in the caller's thread, with no pool.

At most ``2 * workers + 1`` chunks are in flight, so memory stays a few chunks whatever the
batch size.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import functools
import itertools
import threading
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence, Sized
from typing import Any, Protocol, Union

import numpy as np
import zstandard

from sparkey.codec import ZSTD_LEVEL, Codec, ZstdCodec
from sparkey.format import vlq_encode
from sparkey.log.framing import BlockCutter, FramedPuts, frame_pairs, frame_puts, frame_sequences
from sparkey.packed import Column, SequenceColumn, as_column

EntryItems = Union[tuple[Any, Any], Mapping[Any, Any], Iterable[tuple[Any, Any]]]
"""What ``put_many`` takes: a tuple ``(keys, values)`` of two columns, a mapping, or an
iterable of ``(key, value)`` pairs (see ``entry_chunks``)."""

FramingJob = Callable[[], FramedPuts]
"""One chunk's packing and framing, run by a worker."""

_Encoding = tuple["concurrent.futures.Future[bytes]", "EntryStats", int]
"""Blocks being compressed: the future of their bytes, their counters, the most entries that
start in one of them."""

PARALLEL_THRESHOLD = 20_000
"""Default ``threshold`` of put_many: smaller batches are written without a thread pool."""
FIRST_CHUNK_ROWS = 1024
"""Entries in the first chunk; later chunks are sized from the entry sizes seen so far."""
TARGET_CHUNK_BYTES = 4 << 20
"""Log bytes per chunk: long GIL-free numpy and zstd calls, still within a core's L2 cache."""
MAX_CHUNK_ROWS = 1 << 16


@dataclasses.dataclass(frozen=True)
class EntryStats:
    """Header counters of a run of PUT entries."""

    puts: int = 0
    put_size: int = 0
    max_key_len: int = 0
    max_value_len: int = 0

    @classmethod
    def of(cls, framed: FramedPuts, start: int, stop: int) -> EntryStats:
        """The counters of entries ``start`` to ``stop - 1`` of a FramedPuts."""
        if start >= stop:
            return cls()
        sizes = framed.sizes[start:stop]
        return cls(stop - start, int(sizes.sum()), int(framed.key_lengths[start:stop].max()),
                   int(framed.value_lengths[start:stop].max()))

    def __add__(self, other: EntryStats) -> EntryStats:
        return EntryStats(self.puts + other.puts, self.put_size + other.put_size,
                          max(self.max_key_len, other.max_key_len),
                          max(self.max_value_len, other.max_value_len))


@dataclasses.dataclass(frozen=True)
class Commit:
    """Bytes to append to the log body and the counters of the entries they complete.

    ``data`` is whole blocks (compressed logs) or whole entries (NONE), so a log cut after any
    commit is valid. ``max_entries_per_block`` is 0 for NONE.
    """

    data: bytes | memoryview
    stats: EntryStats
    max_entries_per_block: int = 0


@dataclasses.dataclass(frozen=True)
class OpenBlock:
    """The block left open after the last entry: its bytes, the entries starting in it, and
    the counters of those of them that the bulk write added."""

    data: bytes
    started: int
    stats: EntryStats


def check_parallelism(parallelism: int, threshold: int) -> None:
    """ValueError unless ``parallelism`` is an int >= 1 and ``threshold`` an int >= 0."""
    for name, value, low in (("parallelism", parallelism, 1), ("threshold", threshold, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, not {value!r}")


class _ChunkSource(Protocol):
    """Hands out the entries of a bulk write as framing jobs of ``rows`` entries, in order."""

    def take(self, rows: int) -> FramingJob | None:
        """The job framing the next ``rows`` entries (fewer at the end); None when done."""


def entry_chunks(items: EntryItems, values: Any, threshold: int) -> tuple[_ChunkSource, bool]:
    """``(source, large)``: a chunk source for ``put_many``'s arguments and whether they hold
    ``threshold`` entries.

    With ``values`` (not None), ``items`` and ``values`` are two columns (lists or other
    sequences of byte strings, numpy arrays of bytes, PackedBytes or lazy columns, see
    ``sparkey.packed``). Alone, ``items`` is a mapping or an iterable of ``(key, value)`` pairs
    (read ``threshold`` pairs ahead to decide): a tuple holding pairs, such as
    ``((k1, v1), (k2, v2))``, means two entries, as it does for ``dict.update``. A lone 2-tuple
    of two columns is refused with TypeError, which says to pass them as two arguments.
    """
    if values is not None:
        keys, value_column = as_column(items, "key"), as_column(values, "value")
        if len(keys) != len(value_column):
            raise ValueError(f"put_many got {len(keys)} keys but {len(value_column)} values")
        return _ColumnChunks(keys, value_column), len(keys) >= threshold
    if isinstance(items, tuple) and len(items) == 2 and not any(
            isinstance(column, (tuple, bytes, bytearray, memoryview, str)) for column in items):
        raise TypeError("put_many((keys, values)) is ambiguous with a tuple of two pairs: pass "
                        "the two columns as two arguments, put_many(keys, values)")
    if isinstance(items, Mapping):
        items = items.items()
    if isinstance(items, Sized):
        return _PairChunks(iter(items)), len(items) >= threshold
    iterator = iter(items)
    head = list(itertools.islice(iterator, threshold))
    return _PairChunks(itertools.chain(head, iterator)), len(head) >= threshold


class _ColumnChunks:
    """Row ranges of two columns; packing runs in the worker."""

    def __init__(self, keys: Column, values: Column) -> None:
        self._keys, self._values = keys, values
        self._next = 0

    def take(self, rows: int) -> FramingJob | None:
        start = self._next
        if start >= len(self._keys):
            return None
        stop = self._next = min(len(self._keys), start + rows)
        keys, values = self._keys, self._values
        if isinstance(keys, SequenceColumn) and isinstance(values, SequenceColumn):
            key_items, value_items = keys.items, values.items
            return lambda: frame_sequences(key_items[start:stop], value_items[start:stop])
        return lambda: frame_puts(keys.pack(start, stop), values.pack(start, stop))


class _PairChunks:
    """Runs of ``(key, value)`` pairs read by the caller (a C-level slice of the iterator);
    splitting them into columns and framing run in the worker."""

    def __init__(self, iterator: Iterator[tuple[Any, Any]]) -> None:
        self._iterator = iterator

    def take(self, rows: int) -> FramingJob | None:
        batch = list(itertools.islice(self._iterator, rows))
        if not batch:
            return None
        return lambda: frame_pairs(batch)


def _raise(exc: BaseException) -> FramedPuts:
    raise exc


class _InlineExecutor:
    """Runs each task at once in the caller's thread (the one-worker path)."""

    @staticmethod
    def submit(function: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        """A future already holding ``function(*args)`` or its exception."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(function(*args))
        except BaseException as exc:  # delivered by result(), like a pool's future
            future.set_exception(exc)
        return future

    @staticmethod
    def shutdown(wait: bool = True, cancel_futures: bool = False) -> None:
        """Nothing to stop."""
        pass


_vlq_prefix = functools.lru_cache(maxsize=1 << 16)(vlq_encode)
_per_thread = threading.local()


def compress_blocks(codec: Codec, blocks: Sequence[bytes | memoryview]) -> list[bytes]:
    """The payloads of ``blocks`` (non-empty buffers), byte for byte ``codec.compress`` of each.

    zstd compresses the whole list in one call (``multi_compress_to_buffer``, with the
    parameters of ``ZstdCodec``), so the GIL is released once per chunk rather than once per
    4 KiB block: with short calls, two threads spend their time handing the GIL to each other
    (docs/parallel-writes.md). Other codecs compress block by block.
    """
    if isinstance(codec, ZstdCodec):
        try:
            compressor = _per_thread.zstd
        except AttributeError:
            compressor = _per_thread.zstd = zstandard.ZstdCompressor(
                level=ZSTD_LEVEL, write_content_size=True)
        return list(compressor.multi_compress_to_buffer(blocks, threads=0))
    return [codec.compress(block) for block in blocks]


def encode_blocks(codec: Codec, carry: bytes, stream: np.ndarray, ends: list[int]) -> bytes:
    """``VLQ(len) payload`` of each closed block; the first one starts with ``carry``.

    The Python work is a slice and a cached prefix per block.
    """
    view = stream.data
    blocks = [carry + view[:ends[0]] if carry else view[:ends[0]]]
    blocks += [view[start:end] for start, end in zip(ends, ends[1:])]
    payloads = compress_blocks(codec, blocks)
    parts = [b""] * (2 * len(payloads))
    parts[0::2] = map(_vlq_prefix, map(len, payloads))
    parts[1::2] = payloads
    return b"".join(parts)


class BulkAppend:
    """One bulk write: ``commits()`` yields Commit objects in log order, then ``open_block``
    holds the block left open (compressed logs) for the writer to continue."""

    def __init__(self, codec: Codec | None, block_size: int,
                 open_block: bytes | bytearray = b"", open_started: int = 0) -> None:
        self._codec = codec
        self._cutter = None if codec is None else BlockCutter(block_size, len(open_block),
                                                              open_started)
        self._carry = bytes(open_block)
        self._carry_stats = EntryStats()
        self.open_block: OpenBlock | None = None

    def commits(self, source: _ChunkSource, workers: int) -> Generator[Commit, None, None]:
        """Frame (and compress) every chunk of ``source`` on ``workers`` threads.

        A failure in any step propagates from here at its place in log order, after the
        commits before it; the pool is shut down (running tasks finish, queued ones are
        cancelled) however the iteration ends.
        """
        pool = (_InlineExecutor() if workers == 1
                else concurrent.futures.ThreadPoolExecutor(workers, "sparkey-put-many"))
        window = 2 * workers + 1
        framing: collections.deque[concurrent.futures.Future[FramedPuts]] = collections.deque()
        encoding: collections.deque[_Encoding] = collections.deque()
        rows = FIRST_CHUNK_ROWS
        exhausted = False
        try:
            while True:
                while not exhausted and len(framing) + len(encoding) < window:
                    try:
                        job = source.take(rows)
                    except Exception as exc:  # raised in its place, after the chunks before it
                        job = functools.partial(_raise, exc)
                        exhausted = True
                    if job is None:
                        exhausted = True
                    else:
                        framing.append(pool.submit(job))
                if not framing:
                    break
                framed = framing.popleft().result()
                if len(framed):
                    rows = min(MAX_CHUNK_ROWS, max(1, TARGET_CHUNK_BYTES * len(framed)
                                                   // max(1, len(framed.stream))))
                if self._codec is None:
                    yield Commit(framed.stream.data, EntryStats.of(framed, 0, len(framed)))
                    continue
                encoding.extend(self._cut(pool, framed))
                while encoding and (encoding[0][0].done() or len(encoding) >= window):
                    future, stats, most = encoding.popleft()
                    yield Commit(future.result(), stats, most)
            while encoding:
                future, stats, most = encoding.popleft()
                yield Commit(future.result(), stats, most)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        self.open_block = OpenBlock(self._carry, 0 if self._cutter is None else
                                    self._cutter.started, self._carry_stats)

    def _cut(self, pool: concurrent.futures.Executor | _InlineExecutor,
             framed: FramedPuts) -> list[_Encoding]:
        """Close the blocks ``framed`` completes; submit their compression; carry the rest."""
        cutter, codec = self._cutter, self._codec
        assert cutter is not None and codec is not None  # only compressed logs have blocks
        carried = cutter.started
        ends, started = cutter.cut(framed.sizes, framed.header_sizes)
        if not ends:
            self._carry += framed.stream.tobytes()
            self._carry_stats += EntryStats.of(framed, 0, len(framed))
            return []
        done = sum(started) - carried
        stats = self._carry_stats + EntryStats.of(framed, 0, done)
        future = pool.submit(encode_blocks, codec, self._carry, framed.stream, ends)
        self._carry = framed.stream[ends[-1]:].tobytes()
        self._carry_stats = EntryStats.of(framed, done, len(framed))
        return [(future, stats, max(started))]
