"""Conversion of a format 1 or 2 tree to format 3 (layer 6, used by the facade when a writer
opens a tree; :mod:`offheap.treemap.meta` for the versions). A format 2 tree needs no page
rewritten (its pages are format 3 pages): it only takes the format 3 label. The rest of this
docstring is about format 1.

Format 2 inner pages carry the entries under each child; format 1 ones end after the child
record ids. :func:`upgrade` walks the tree from its root, depth first, and rewrites every inner
page with the counts of its children: a leaf's is the count in its page header (leaves are not
decoded, and keep their bytes), an inner node's the sum of its own counts. Each inner page is
rewritten in its record, so record ids and the shape stay as they were; the new pages are
compressed with the codec the tree is opened with.

Cost: one read of every inner page and of every leaf's header, one write per inner node; the
new inner pages are held in memory until they are written (a few bytes per leaf). A
tree of one leaf has nothing to convert. Durability: the rewritten pages are ordinary store
writes, durable at the file's next commit; a rollback before it brings back the format 1 tree,
which the next load converts again.
"""

from __future__ import annotations

from dataclasses import replace

from offheap.errors import CorruptionError
from offheap.store.records import RecordStore
from offheap.treemap.meta import FORMAT_VERSION, TreeMeta
from offheap.treemap.page import decode_inner, encode_inner, header_count, raw_size


def upgrade(store: RecordStore, meta: TreeMeta, codec) -> TreeMeta:
    """Rewrite the inner pages of the format 1 tree ``meta`` describes in format 2 (a format 2
    tree: nothing); return the metadata of the converted tree, in format 3 (its page-byte
    totals updated). All or nothing: the new pages
    are all encoded before the first is written, and if a write fails (CapacityError) the
    records written are given their old pages back. CorruptionError, with nothing written, if
    a page is damaged or the leaves do not hold the entries the metadata records."""
    if meta.version >= 2:
        return replace(meta, version=FORMAT_VERSION)
    key_kind, height = meta.options["key"], meta.shape.height
    rewrites: list[tuple[int, bytes, bytes]] = []  # record id, format 1 page, format 2 page

    def convert(recid: int, depth: int) -> int:
        page = store.get(recid)
        if depth == height:
            return header_count(page)
        separators, children, _ = decode_inner(page, key_kind, with_counts=False)
        counts = [convert(child, depth + 1) for child in children]
        rewrites.append((recid, page, encode_inner(separators, children, counts, key_kind, codec)))
        return sum(counts)

    n_entries = convert(meta.shape.root, 1)
    if n_entries != meta.n_entries:
        raise CorruptionError(f"the leaves of a format 1 TreeMap hold {n_entries} entries; its "
                              f"metadata records {meta.n_entries}")
    written: list[tuple[int, bytes, bytes]] = []
    try:
        for rewrite in rewrites:
            store.update(rewrite[0], rewrite[2])
            written.append(rewrite)
    except BaseException:
        for recid, old_page, _ in reversed(written):
            store.update(recid, old_page)
        raise
    return replace(meta, version=FORMAT_VERSION,
                   raw_bytes=meta.raw_bytes + sum(raw_size(new) - raw_size(old)
                                                  for _, old, new in rewrites),
                   stored_bytes=meta.stored_bytes + sum(len(new) - len(old)
                                                        for _, old, new in rewrites))
