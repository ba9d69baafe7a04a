"""A TreeMap's metadata record and the tree shape it names (layer 6, under the tree's facade).

Pure: bytes in, values out. The record, integers little-endian::

    8s   magic b"OHTREE03" (format 3; b"OHTREE02" and b"OHTREE01" are formats 2 and 1)
    u64  root record id
    u32  height (levels; 1 when the root is a leaf)
    u64  entries
    u64  leaves
    u64  inner nodes
    u64  raw page bytes (the tree's pages as they would be without compression)
    u64  stored page bytes (as stored: the last written page of each node)
    ...  the fixed options as a JSON object: {"key": ..., "value": ..., "node_size": ...}

Versions. Format 2 inner pages carry the entries under each child (:mod:`offheap.treemap.page`);
format 1 ones do not. Format 3 int64 key blocks may store their first key as 8 bytes (flagged in
the shift byte), which format 2 never writes, so every format 2 page is a format 3 page.
Everything else, this record's fields included, is the same in all three, so :func:`parse_meta`
reads any and says which (:attr:`TreeMeta.version`). A reader reads a format 2 or 3 tree as it
is (:data:`READABLE_VERSIONS`); a writer converts a format 1 tree when it opens it, and labels
a format 2 tree format 3 (:mod:`offheap.treemap.upgrade`), so that an older version, which
would not read the pages it writes from then on, refuses it.

The fixed options are those a tree keeps for life (:data:`FIXED_OPTIONS`); the others
(compression, write cache, ...) may change from one opening to the next. A standalone TreeMap
file (``TreeMap(path=...)``) names its metadata record in the store root: b"OHTREEMP" + u64 recid.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

from offheap.errors import CorruptionError
from offheap.store.serializers import SERIALIZER_NAMES
from offheap.treemap.page import KEY_KINDS, MAX_NODE_SIZE, MIN_NODE_SIZE

FIXED_OPTIONS = ("key", "value", "node_size")
FORMAT_VERSION = 3
READABLE_VERSIONS = (2, 3)  # the formats whose pages this version reads as they are
_MAGICS = {b"OHTREE01": 1, b"OHTREE02": 2, b"OHTREE03": 3}
_MAGIC = b"OHTREE03"
_FIXED = struct.Struct("<8sQIQQQQQ")
_ROOT_MAGIC = b"OHTREEMP"
_ROOT = struct.Struct("<8sQ")


@dataclass(frozen=True, slots=True)
class TreeShape:
    """Where a tree starts and how many nodes it has: the root's record id, the height, the
    numbers of leaves and of inner nodes.

    Immutable: a structural change computes the next shape and the tree installs it once the
    change has stuck, so a change that fails leaves the old shape in place. The entry count is
    not part of it (it changes on every insert and delete, the shape only when nodes come or go).
    """

    root: int
    height: int
    n_leaves: int
    n_inner: int

    @classmethod
    def single_leaf(cls, root: int) -> TreeShape:
        """A tree of one leaf, the root."""
        return cls(root, 1, 1, 0)

    def grown(self, new_root: int) -> TreeShape:
        """A new inner root above the old one: one level more."""
        return TreeShape(new_root, self.height + 1, self.n_leaves, self.n_inner + 1)

    def shrunk(self, new_root: int) -> TreeShape:
        """The root's only child as the new root: one level less."""
        return TreeShape(new_root, self.height - 1, self.n_leaves, self.n_inner - 1)

    def with_nodes(self, leaves: int = 0, inner: int = 0) -> TreeShape:
        """The same root and height with ``leaves`` more leaves and ``inner`` more inner nodes."""
        return TreeShape(self.root, self.height, self.n_leaves + leaves, self.n_inner + inner)


@dataclass(frozen=True)
class TreeMeta:
    """The decoded metadata record: the shape, the counts, the fixed options and the format
    version of the tree's pages."""

    shape: TreeShape
    n_entries: int
    raw_bytes: int
    stored_bytes: int
    options: dict  # at least the FIXED_OPTIONS, unless the record is damaged
    version: int = FORMAT_VERSION

    @property
    def fixed_options(self) -> dict:
        """The fixed options, as ``TreeMap.in_store`` takes them."""
        return {name: self.options[name] for name in FIXED_OPTIONS}

    def check_fixed(self) -> None:
        """ValueError unless the fixed options are ones a tree can have (a damaged record's may
        not be)."""
        value = self.options.get("value")
        if not isinstance(value, str) or value not in SERIALIZER_NAMES:
            raise ValueError(f"unknown value serializer {value!r}")
        check_fixed_options(self.options.get("key"), self.options.get("node_size"))

    def check_matches(self, options: dict) -> None:
        """ValueError naming the first fixed option that ``options`` gives otherwise."""
        for name in FIXED_OPTIONS:
            if self.options.get(name) != options[name]:
                raise ValueError(f"this TreeMap was created with {name}={self.options.get(name)!r}; "
                                 f"open it with that, not {name}={options[name]!r}")


def check_fixed_options(key, node_size) -> None:
    """ValueError unless ``key`` is a key kind and ``node_size`` an int in the allowed range."""
    if key not in KEY_KINDS:
        raise ValueError(f"key must be one of {', '.join(KEY_KINDS)}; got {key!r}")
    if not isinstance(node_size, int) or not MIN_NODE_SIZE <= node_size <= MAX_NODE_SIZE:
        raise ValueError(f"node_size must be an int in [{MIN_NODE_SIZE}, {MAX_NODE_SIZE}], "
                         f"got {node_size!r}")


def encode_meta(shape: TreeShape, n_entries: int, raw_bytes: int, stored_bytes: int,
                fixed_options: dict) -> bytes:
    """The metadata record of a tree."""
    fixed = _FIXED.pack(_MAGIC, shape.root, shape.height, n_entries, shape.n_leaves,
                        shape.n_inner, raw_bytes, stored_bytes)
    return fixed + json.dumps({name: fixed_options[name] for name in FIXED_OPTIONS}).encode()


def parse_meta(meta: bytes) -> TreeMeta:
    """Decode a TreeMap metadata record; CorruptionError if it is not one."""
    version = _MAGICS.get(bytes(meta[:8]))
    if len(meta) < _FIXED.size or version is None:
        raise CorruptionError("TreeMap metadata is damaged (bad magic or size)")
    _, root, height, n_entries, n_leaves, n_inner, raw, stored = _FIXED.unpack_from(meta)
    try:
        options = json.loads(meta[_FIXED.size:])
    except ValueError:
        raise CorruptionError("TreeMap metadata options are damaged") from None
    if not isinstance(options, dict):
        raise CorruptionError("TreeMap metadata options are damaged")
    return TreeMeta(TreeShape(root, height, n_leaves, n_inner), n_entries, raw, stored, options,
                    version)


def standalone_root(meta_recid: int) -> bytes:
    """The store root of a standalone TreeMap file whose metadata is record ``meta_recid``."""
    return _ROOT.pack(_ROOT_MAGIC, meta_recid)


def standalone_meta_recid(root: bytes) -> int:
    """The metadata record named by the store root of a standalone TreeMap file."""
    if len(root) != _ROOT.size or root[:8] != _ROOT_MAGIC:
        raise CorruptionError("the file holds no TreeMap (another collection or a DB?)")
    return _ROOT.unpack(root)[1]
