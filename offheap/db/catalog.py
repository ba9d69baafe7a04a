"""The DB catalog (layer 7): which collections a DB's store holds, as bytes in the store root.

Format: the magic ``OHDBCAT1`` then a JSON object, keys sorted, mapping each collection name to
one entry::

    {"kind": "tree_map", "meta_recid": 3,
     "options": {"cache_bytes": 8388608, "cache_size": null, "compression": null,
                 "flush_delay": null, "key": "int64", "node_size": 32, "value": "object",
                 "write_cache": true}}

``kind`` names a registered collection kind (:mod:`offheap.db.kinds`), ``options`` are every
option the collection was created with (the kind's defaults filled in, a serializer by its
name), ``meta_recid`` is the store record the collection reopens from. Pure functions: bytes
in, dict out and back.
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

from offheap.errors import CorruptionError

CATALOG_MAGIC = b"OHDBCAT1"


class CatalogEntry(TypedDict):
    """One collection of a DB, as the catalog keeps it."""

    kind: str
    options: dict[str, Any]
    meta_recid: int


Catalog = dict[str, CatalogEntry]


def encode_catalog(catalog: Catalog) -> bytes:
    """The store root of a DB holding ``catalog``; the same catalog always gives the same bytes."""
    return CATALOG_MAGIC + json.dumps(catalog, sort_keys=True).encode()


def parse_catalog(root: bytes) -> Catalog:
    """The catalog in a DB's store root; CorruptionError when the root holds none."""
    if not root.startswith(CATALOG_MAGIC):
        raise CorruptionError("this store holds no DB catalog (a standalone map's file?)")
    try:
        catalog = json.loads(root[len(CATALOG_MAGIC):])
    except ValueError:
        raise CorruptionError("the DB catalog is damaged (not JSON)") from None
    if not isinstance(catalog, dict) or not all(
            isinstance(e, dict) and {"kind", "options", "meta_recid"} <= set(e)
            and isinstance(e["options"], dict) and isinstance(e["meta_recid"], int)
            for e in catalog.values()):
        raise CorruptionError("the DB catalog is damaged (bad entries)")
    return catalog


def check_same(name: str, stored: dict[str, Any], given: dict[str, Any],
               fixed: tuple[str, ...]) -> None:
    """ValueError if ``given`` changes one of the ``fixed`` options of collection ``name``."""
    for option in fixed:
        if option in given and given[option] != stored.get(option):
            raise ValueError(f"{name!r} was created with {option}={stored.get(option)!r}; "
                             f"it cannot be reopened with {option}={given[option]!r}")
