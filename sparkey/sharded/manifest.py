"""``manifest.json`` of a sharded store: layout, encoding and validation (pure layer, no IO).

The manifest is the last file written into a store and the first one read. It records how keys
are routed and which files make up the store, so that a reader can refuse a store whose shards
are missing, damaged, or from another build (shown compactly; the file is indented JSON)::

    {
     "format": "sparkey-sharded",
     "format_version": 1,
     "num_shards": 2,
     "routing": {"hash": "murmur3_x86_32", "seed": 1},
     "num_entries": 5,
     "shards": [
      {"shard": 0, "log": "part-00000-of-00002.spl", "index": "part-00000-of-00002.spi",
       "file_identifier": 2271560481, "num_entries": 3, "log_bytes": 123, "index_bytes": 172},
      {"shard": 1, ...}
     ]
    }

``file_identifier`` is the shard log's random 32-bit identifier (its index carries the same one),
``num_entries`` the live keys of the shard, ``log_bytes``/``index_bytes`` the sizes of its files
(the log's ``data_end`` and the index's header plus slots: what the files hold when written).
Shard ``i`` is the ``i``-th element and its file names are fixed by ``routing.part_name``, so a
manifest cannot point outside its directory. A reader accepts ``format_version`` 1 only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from sparkey.format import INDEX_SUFFIX, LOG_SUFFIX
from sparkey.sharded.errors import ManifestError
from sparkey.sharded.routing import (
    ROUTING_HASH, check_num_shards, check_routing_seed, part_name)

MANIFEST_NAME = "manifest.json"
FORMAT_NAME = "sparkey-sharded"
FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True, slots=True)
class ShardInfo:
    """What the manifest records about one shard: its identity, live entries and file sizes."""

    shard: int
    file_identifier: int
    num_entries: int
    log_bytes: int
    index_bytes: int


@dataclasses.dataclass(frozen=True, slots=True)
class Manifest:
    """A parsed, validated manifest: routing parameters and one ShardInfo per shard, in order."""

    num_shards: int
    routing_seed: int
    shards: tuple[ShardInfo, ...]

    @property
    def num_entries(self) -> int:
        """Live entries of the whole store (keys are disjoint across shards)."""
        return sum(info.num_entries for info in self.shards)

    def file_names(self, shard: int) -> tuple[str, str]:
        """``(log_name, index_name)`` of ``shard`` inside the store directory."""
        base = part_name(shard, self.num_shards)
        return base + LOG_SUFFIX, base + INDEX_SUFFIX

    def to_json(self) -> str:
        """The manifest as JSON text, fields in a fixed order."""
        shards = []
        for info in self.shards:
            log_name, index_name = self.file_names(info.shard)
            fields = dataclasses.asdict(info)
            shards.append({"shard": fields.pop("shard"), "log": log_name, "index": index_name,
                           **fields})
        return json.dumps({
            "format": FORMAT_NAME, "format_version": FORMAT_VERSION,
            "num_shards": self.num_shards,
            "routing": {"hash": ROUTING_HASH, "seed": self.routing_seed},
            "num_entries": self.num_entries, "shards": shards}, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        """Parse and validate manifest text; ManifestError says which field is wrong."""
        try:
            document = json.loads(text)
        except ValueError as error:
            raise ManifestError(f"manifest is not valid JSON ({error}); the store was not "
                                "published completely: build it again") from None
        except RecursionError:
            raise ManifestError("manifest nests its JSON too deeply to be a manifest (which is "
                                "three levels deep); the file is damaged or not a manifest: "
                                "build the store again") from None
        _require(isinstance(document, dict), "is not a JSON object")
        _require(document.get("format") == FORMAT_NAME,
                 f"format is {document.get('format')!r}, not {FORMAT_NAME!r}")
        version = document.get("format_version")
        _require(_is_int(version), f"format_version is {version!r}, not an int")
        _require(version == FORMAT_VERSION, f"format_version is {version}; this version of "
                 f"sparkey reads version {FORMAT_VERSION}: upgrade sparkey to read this store")
        num_shards = _checked(check_num_shards, document.get("num_shards"))
        routing = document.get("routing")
        _require(isinstance(routing, dict) and routing.get("hash") == ROUTING_HASH,
                 f"routing is {routing!r}; the only routing hash is {ROUTING_HASH!r}")
        seed = _checked(check_routing_seed, routing.get("seed"))
        shards = document.get("shards")
        _require(isinstance(shards, list) and len(shards) == num_shards,
                 f"shards must be a list of num_shards = {num_shards} objects")
        manifest = cls(num_shards, seed, tuple(
            _parse_shard(number, fields, num_shards) for number, fields in enumerate(shards)))
        _require(document.get("num_entries") == manifest.num_entries,
                 f"num_entries is {document.get('num_entries')!r}, but the shards hold "
                 f"{manifest.num_entries}")
        return manifest


def _parse_shard(number: int, fields: Any, num_shards: int) -> ShardInfo:
    """The ShardInfo of element ``number`` of the ``shards`` list."""
    where = f"shards[{number}]"
    _require(isinstance(fields, dict), f"{where} is not a JSON object")
    base = part_name(number, num_shards)
    _require(fields.get("shard") == number, f"{where}.shard is {fields.get('shard')!r}, "
             f"not {number}")
    for role, suffix in (("log", LOG_SUFFIX), ("index", INDEX_SUFFIX)):
        _require(fields.get(role) == base + suffix,
                 f"{where}.{role} is {fields.get(role)!r}, not {base + suffix!r}")
    values: dict[str, int] = {}
    for field in dataclasses.fields(ShardInfo)[1:]:
        value = fields.get(field.name)
        _require(_is_int(value) and value >= 0,
                 f"{where}.{field.name} is {value!r}, not a non-negative int")
        values[field.name] = value
    _require(values["file_identifier"] < 2**32,
             f"{where}.file_identifier is {values['file_identifier']}, not a 32-bit value")
    return ShardInfo(shard=number, **values)


def _checked(check: Callable[[object], int], value: object) -> int:
    """``check(value)``, its ValueError raised as a ManifestError."""
    try:
        return check(value)
    except ValueError as error:
        raise ManifestError(f"manifest {error}") from None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ManifestError(f"manifest {message}")
