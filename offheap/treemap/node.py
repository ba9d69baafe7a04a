"""Decoded B+tree nodes and the surgery on them (layer 6, under the tree's cursor and structure).

A node in memory is columns Python edits in place: a leaf's keys are a
:func:`~offheap.treemap.page.key_column` (an ``array('q')`` of int64 keys, 8 bytes a key, else a
list), its values and everything of an inner node are lists. So the scalar paths of the tree
are ``bisect`` and ``insert`` with no numpy call per operation; a page is encoded or decoded
(:mod:`offheap.treemap.page`) once per node write or read.

Fill. A leaf holds at most ``node_size`` entries and an inner node at most ``node_size``
children; a node below :func:`min_entries` entries (:func:`min_children` children) is rebalanced
with a sibling, by :func:`merge_into` when both fit in one node and by :func:`redistribute`
otherwise; :func:`split_off` cuts an overfull node in two (where, is the tree structure's choice:
:mod:`offheap.treemap.structure`).

Interface. The tree touches nodes only as :class:`Leaf` and :class:`Inner` objects (their slots;
``keys``, ``values`` and ``children`` behave as Python lists, which the tree bisects and edits in
place; an array column is joined only with arrays) and through the functions of this module. A
compiled implementation provides the same classes and functions: :func:`decode_node` and
:func:`encode_node` must read and write the bytes of :mod:`offheap.treemap.page`.

Ownership: a node's columns belong to the node; a caller that keeps a slice copies it (slicing
a list or an array does). Thread safety: none; the tree's lock covers every use.
"""

from __future__ import annotations

from offheap.treemap.page import (
    decode_inner,
    decode_leaf,
    encode_inner,
    encode_inner_head,
    encode_leaf,
    is_inner,
    raw_size,
    separator,
)


class Leaf:
    """A leaf: sorted ``keys`` (a :func:`~offheap.treemap.page.key_column`) and their ``values``
    (a list); ``recid`` is its record in the store.

    ``dirty``: changed since its page was last written. ``raw_bytes``/``stored_bytes``: the sizes
    of that page without and with compression (0 for a node never written).
    """

    __slots__ = ("recid", "keys", "values", "dirty", "raw_bytes", "stored_bytes")
    is_leaf = True

    def __init__(self, recid: int, keys, values: list) -> None:
        self.recid = recid
        self.keys = keys
        self.values = values
        self.dirty = False
        self.raw_bytes = 0
        self.stored_bytes = 0

    def __len__(self) -> int:
        return len(self.keys)


class Inner:
    """An inner node: ``children[i]`` holds the keys ``k`` with ``keys[i-1] <= k < keys[i]``,
    ``counts[i]`` of them (the entries of its whole subtree, exact whenever the tree's lock is
    free, which is what makes positions O(log n)); ``recid``, ``dirty`` and the byte sizes as in
    :class:`Leaf`.

    ``encoded_head``: None, or copies of ``keys`` and ``children`` as they were at the last
    encode and :func:`~offheap.treemap.page.encode_inner_head` of them, which
    :func:`encode_node` reuses while both lists still equal the copies (an insert below a node
    changes only its counts, so a write-through tree re-encodes just that column).
    """

    __slots__ = ("recid", "keys", "children", "counts", "dirty", "raw_bytes", "stored_bytes",
                 "encoded_head")
    is_leaf = False

    def __init__(self, recid: int, keys: list, children: list[int], counts: list[int]) -> None:
        self.recid = recid
        self.keys = keys
        self.children = children
        self.counts = counts
        self.dirty = False
        self.raw_bytes = 0
        self.stored_bytes = 0
        self.encoded_head: tuple[list, list[int], bytes] | None = None

    def __len__(self) -> int:
        return len(self.children)


Node = Leaf | Inner


def n_entries(node: Node) -> int:
    """The entries in a node's subtree: O(1) for a leaf, O(children) for an inner node."""
    return len(node.keys) if isinstance(node, Leaf) else sum(node.counts)


def min_entries(node_size: int) -> int:
    """Entries below which a leaf (other than the root) is rebalanced."""
    return max(1, node_size // 4)


def min_children(node_size: int) -> int:
    """Children below which an inner node (other than the root) is rebalanced."""
    return max(2, node_size // 4)


def decode_node(recid: int, page, key_kind: str, serializer) -> Node:
    """The node stored as ``page`` (not empty) in record ``recid``, with its page sizes set."""
    node: Node
    if is_inner(page):
        separators, children, counts = decode_inner(page, key_kind)
        assert counts is not None  # decode_inner reads the counts unless told otherwise
        node = Inner(recid, separators, children, counts)
    else:
        keys, values = decode_leaf(page, key_kind, serializer)
        node = Leaf(recid, keys, values)
    node.stored_bytes = len(page)
    node.raw_bytes = raw_size(page)
    return node


def encode_node(node: Node, key_kind: str, serializer, codec) -> bytes:
    """The page of ``node``; cannot fail for values the tree admitted."""
    if isinstance(node, Leaf):
        return encode_leaf(node.keys, node.values, key_kind, serializer, codec)
    cached = node.encoded_head
    if cached is not None and cached[0] == node.keys and cached[1] == node.children:
        head = cached[2]
    else:
        head = encode_inner_head(node.keys, node.children, key_kind)
        node.encoded_head = (node.keys.copy(), node.children.copy(), head)
    return encode_inner(node.keys, node.children, node.counts, key_kind, codec, head)


def split_off(node: Node, at: int, recid: int) -> tuple[Node, object]:
    """Move the entries (children) of ``node`` from position ``at`` on into a new node of record
    ``recid``; return it and the separator between the two, which the parent takes."""
    if isinstance(node, Leaf):
        right: Node = Leaf(recid, node.keys[at:], node.values[at:])
        del node.keys[at:], node.values[at:]
        return right, separator(node.keys[-1], right.keys[0])
    right = Inner(recid, node.keys[at:], node.children[at:], node.counts[at:])
    middle = node.keys[at - 1]
    del node.keys[at - 1:], node.children[at:], node.counts[at:]
    return right, middle


def merge_into(left: Node, right: Node, parent_separator) -> None:
    """Append ``right``'s entries (children) to ``left``, its sibling of the same kind; for inner
    nodes the parent's separator comes down between them."""
    if isinstance(left, Leaf):
        assert isinstance(right, Leaf)
        left.keys += right.keys
        left.values += right.values
    else:
        assert isinstance(right, Inner)
        left.keys += [parent_separator] + right.keys
        left.children += right.children
        left.counts += right.counts


def redistribute(left: Node, right: Node, parent_separator):
    """Even out two siblings of the same kind; return the new separator between them."""
    if isinstance(left, Leaf):
        assert isinstance(right, Leaf)
        keys, values = left.keys + right.keys, left.values + right.values
        half = len(keys) // 2
        left.keys[:], left.values[:] = keys[:half], values[:half]
        right.keys[:], right.values[:] = keys[half:], values[half:]
        return separator(left.keys[-1], right.keys[0])
    assert isinstance(right, Inner)
    keys = left.keys + [parent_separator] + right.keys
    children, counts = left.children + right.children, left.counts + right.counts
    half = len(children) // 2
    left.children[:], right.children[:] = children[:half], children[half:]
    left.counts[:], right.counts[:] = counts[:half], counts[half:]
    left.keys[:], right.keys[:] = keys[:half - 1], keys[half:]
    return keys[half - 1]
