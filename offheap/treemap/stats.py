"""A TreeMap's size and memory figures, and their text and HTML renderings (layer 6, under the
tree's facade).

:class:`TreeStats` is what ``TreeMap.stats()`` returns (:func:`tree_stats` gathers it);
:func:`describe` and :func:`describe_html` render it for ``repr()`` and for notebooks.
"""

from __future__ import annotations

from dataclasses import dataclass

from offheap.arena.arena import Arena, format_bytes
from offheap.collection.display import html_table, setting_rows, settings_text
from offheap.treemap.tree import Tree


@dataclass(frozen=True)
class TreeStats:
    """Size and memory figures of a :class:`TreeMap`."""

    n_entries: int
    height: int
    n_leaves: int
    n_inner: int
    node_size: int
    cached_nodes: int
    dirty_nodes: int
    raw_page_bytes: int  # pages as they would be without compression
    stored_page_bytes: int  # pages as stored (the last written version of each node)
    reserved_bytes: int
    used_bytes: int

    @property
    def bytes_per_entry(self) -> float:
        return self.reserved_bytes / self.n_entries if self.n_entries else float("nan")

    @property
    def compression_ratio(self) -> float:
        return self.raw_page_bytes / self.stored_page_bytes if self.stored_page_bytes else 1.0

    @property
    def leaf_fill(self) -> float:
        """Mean entries per leaf as a fraction of ``node_size``."""
        return self.n_entries / (self.n_leaves * self.node_size) if self.n_leaves else 0.0


def tree_stats(tree: Tree, arena: Arena) -> TreeStats:
    """The figures of ``tree``, whose store lives in ``arena``."""
    shape, nodes = tree.shape, tree.nodes
    return TreeStats(n_entries=tree.n_entries, height=shape.height, n_leaves=shape.n_leaves,
                     n_inner=shape.n_inner, node_size=tree.node_size,
                     cached_nodes=len(tree.cache), dirty_nodes=tree.cache.n_dirty(),
                     raw_page_bytes=nodes.raw_bytes, stored_page_bytes=nodes.stored_bytes,
                     reserved_bytes=arena.reserved_bytes, used_bytes=arena.used_bytes)


def describe(stats: TreeStats, options: dict, arena: Arena) -> str:
    """The ``repr`` of an open TreeMap with these figures and options, in ``arena``."""
    per_entry = f"{stats.bytes_per_entry:.2f} B/entry" if stats.n_entries else "empty"
    return (f"<TreeMap {stats.n_entries:,} entries, key={options['key']}, "
            f"value={options['value']}, {format_bytes(stats.reserved_bytes)} reserved, "
            f"{per_entry}, height {stats.height}, {stats.n_leaves:,} leaves"
            f"{settings_text(arena, options['compression'])}>")


def describe_html(stats: TreeStats, options: dict, arena: Arena) -> str:
    """The ``_repr_html_`` of an open TreeMap: one table of its figures and settings."""
    s = stats
    rows = [("entries", f"{s.n_entries:,}"), ("key / value", f"{options['key']} / {options['value']}"),
            ("reserved", format_bytes(s.reserved_bytes)),
            ("bytes/entry", f"{s.bytes_per_entry:.2f}" if s.n_entries else "-"),
            ("height", s.height), ("leaves / inner nodes", f"{s.n_leaves:,} / {s.n_inner:,}"),
            ("node size", s.node_size), ("leaf fill", f"{s.leaf_fill:.0%}"),
            ("compression", f"{options['compression'] or 'none'}, ratio {s.compression_ratio:.2f}"),
            ("cached / dirty nodes", f"{s.cached_nodes:,} / {s.dirty_nodes:,}"),
            *[row for row in setting_rows(arena) if row[0] != "compression"]]
    return html_table("TreeMap", rows)
