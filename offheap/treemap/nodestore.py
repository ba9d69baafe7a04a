"""A tree's nodes as records of a record store (layer 6, between the node cache and the store).

Each node is one record holding its page (:mod:`offheap.treemap.page`). :class:`NodeStore` reads
and writes them and keeps the tree's page-byte totals: ``raw_bytes`` and ``stored_bytes`` are the
sums, over every node of the tree, of the sizes of the page last written for it, so they count a
dirty node at its old size until it is written again.

Ownership: the record store may be shared (a DB's); a NodeStore touches only the records of its
own tree's nodes, which the tree creates and frees through it. Thread safety: none; the tree's
lock covers every call.
"""

from __future__ import annotations

from offheap.errors import CorruptionError
from offheap.store.records import RecordStore
from offheap.treemap.node import Node, decode_node, encode_node
from offheap.treemap.page import raw_size

NodeSnapshot = tuple[bytes, int, int]  # a node's page as stored, and its raw and stored sizes


class NodeStore:
    """Encoding, decoding and storage of one tree's nodes, with its page-byte totals."""

    def __init__(self, store: RecordStore, key_kind: str, serializer, codec) -> None:
        self.store = store
        self.key_kind = key_kind
        self.serializer = serializer
        self.codec = codec
        self.raw_bytes = 0
        self.stored_bytes = 0

    @property
    def raw_pages(self) -> bool:
        """Whether the pages are written uncompressed (no codec, or the codec "none")."""
        return self.codec is None or self.codec.name == "none"

    def load(self, recid: int) -> Node:
        """Decode node ``recid`` from its record; CorruptionError for a damaged page."""
        page = self.store.view(recid)
        if not len(page):
            raise CorruptionError(f"TreeMap node record {recid} is empty")
        return decode_node(recid, page, self.key_kind, self.serializer)

    def write(self, node: Node) -> None:
        """Encode ``node`` and store it; on CapacityError nothing changes (it stays dirty)."""
        page = encode_node(node, self.key_kind, self.serializer, self.codec)
        self.store.update(node.recid, page)
        self._account(node, len(page) if self.codec is None else raw_size(page), len(page))
        node.dirty = False

    def rewrite(self, recid: int, page: bytes, old_size: int) -> None:
        """Store the raw (uncompressed) ``page`` of a leaf that is not cached as record
        ``recid``, whose raw page of ``old_size`` bytes it replaces (the compiled store around
        the cache, ``offheap/treemap/csrc/around.c``, where :meth:`write` takes a node, and
        which makes the same update and count itself when the compiled store can); on
        CapacityError nothing changes."""
        self.store.update(recid, page)
        self.raw_bytes += len(page) - old_size
        self.stored_bytes += len(page) - old_size

    def write_all(self, nodes: list[Node]) -> None:
        """Encode and store ``nodes``, all or none: every page goes into a fresh record first
        (a CapacityError there deletes them, which allocates nothing, and changes nothing
        else), then each fresh record is exchanged with its node's and deleted."""
        pages = [encode_node(node, self.key_kind, self.serializer, self.codec) for node in nodes]
        fresh: list[int] = []
        try:
            for page in pages:
                fresh.append(self.store.put(page))
        except BaseException:
            self.release(fresh)
            raise
        for node, page, recid in zip(nodes, pages, fresh):
            self.store.exchange(node.recid, recid)
            self.store.delete(recid)
            self._account(node, len(page) if self.codec is None else raw_size(page), len(page))
            node.dirty = False

    def snapshot(self, node: Node) -> NodeSnapshot:
        """What :meth:`restore` needs to put ``node``'s record back as it is now."""
        return self.store.get(node.recid), node.raw_bytes, node.stored_bytes

    def restore(self, node: Node, snapshot: NodeSnapshot) -> None:
        """Put back the record of ``node`` as :meth:`snapshot` saw it. Allocates nothing when the
        page goes back to the size class whose chunk its last write released."""
        page, raw, stored = snapshot
        self.store.update(node.recid, page)
        self._account(node, raw, stored)

    def _account(self, node: Node, raw: int, stored: int) -> None:
        self.raw_bytes += raw - node.raw_bytes
        self.stored_bytes += stored - node.stored_bytes
        node.raw_bytes, node.stored_bytes = raw, stored

    def reserve(self, count: int) -> list[int]:
        """``count`` empty records for nodes about to be created: all of them or none."""
        recids: list[int] = []
        try:
            for _ in range(count):
                recids.append(self.store.put(b""))
        except BaseException:
            self.release(recids)
            raise
        return recids

    def free(self, node: Node) -> None:
        """Delete the record of a node that left the tree, and its share of the totals."""
        self.raw_bytes -= node.raw_bytes
        self.stored_bytes -= node.stored_bytes
        self.store.delete(node.recid)

    def release(self, recids: list[int]) -> None:
        """Delete records that hold no counted page (reserved, or a whole tree being replaced
        whose totals the caller resets)."""
        for recid in recids:
            self.store.delete(recid)
