"""Which shard holds a key, and what its files are called (pure layer of ``sparkey.sharded``).

A key's bytes (a ``str`` key is encoded as UTF-8, as ``sparkey.Writer`` stores it) go to shard::

    floor_mod(signed32(MurmurHash3_x86_32(key, seed)), num_shards)

where ``signed32`` reads the 32-bit hash as a two's-complement int and ``floor_mod`` is the
modulo with a non-negative result. This is the rule of Scio's sharded Sparkey reader (which uses
seed 1, our default). The seed is recorded in the manifest. It must differ from the index hash
seed of the shards: with equal seeds and 32-bit index hashes, every key of a shard would share its
index hash modulo ``num_shards``, and ``write`` refuses that combination. Python's ``hash()`` is
never used: it is randomized per process, so two workers would route the same key differently.

Shard ``i`` of ``n`` is stored as ``part-<i>-of-<n>.spl`` and ``.spi``, both numbers written
with five digits (``part-00003-of-00008``), which is why a store has at most 99,999 shards.
"""

from __future__ import annotations

from collections.abc import Sequence

import mmh3
import numpy as np

from sparkey.format import BytesOrStr, entry_bytes, key_list
from sparkey.murmur import hash_key_array, hash_keys

ROUTING_HASH = "murmur3_x86_32"
"""Name of the routing hash as the manifest records it."""

DEFAULT_ROUTING_SEED = 1
MAX_SHARDS = 99_999

routing_hash = mmh3.mmh3_32_sintdigest
"""``routing_hash(key_bytes, seed)``: MurmurHash3_x86_32 as a signed int; the shard is it modulo
``num_shards`` (Python's ``%`` is the floor modulo)."""


def check_num_shards(num_shards: object) -> int:
    """Return ``num_shards`` if it is an int from 1 to MAX_SHARDS, else raise ValueError."""
    if (not isinstance(num_shards, int) or isinstance(num_shards, bool)
            or not 1 <= num_shards <= MAX_SHARDS):
        raise ValueError(f"num_shards must be an int from 1 to {MAX_SHARDS}, not {num_shards!r}")
    return num_shards


def check_routing_seed(seed: object) -> int:
    """Return ``seed`` if it is an int in [0, 2**32), else raise ValueError."""
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**32:
        raise ValueError(f"routing_seed must be an int in [0, 2**32), not {seed!r}")
    return seed


def part_name(shard: int, num_shards: int) -> str:
    """Base name of the files of ``shard``: ``part-00003-of-00008``."""
    return f"part-{shard:05d}-of-{num_shards:05d}"


def shard_of(key: BytesOrStr, num_shards: int, seed: int = DEFAULT_ROUTING_SEED) -> int:
    """The shard of one key (``bytes``-like or ``str``)."""
    if key.__class__ is not bytes:
        key = entry_bytes(key, "key")
    return routing_hash(key, seed) % num_shards


def shards_of(keys: Sequence[BytesOrStr] | np.ndarray, num_shards: int,
              seed: int = DEFAULT_ROUTING_SEED) -> np.ndarray:
    """The shards of many keys as an int64 array aligned with ``keys``.

    ``keys`` is a sequence of ``bytes``-like or ``str`` keys (one ``mmh3`` call per key), or a
    one-dimensional numpy ``S`` array, hashed in place by the numpy kernel (numpy drops trailing
    NUL bytes from ``S`` elements, so such keys cannot end in NUL).
    """
    if isinstance(keys, np.ndarray):
        hashes = hash_key_array(keys, seed, 4)
    else:
        hashes = hash_keys(key_list(keys), seed, 4)
    signed = hashes.astype(np.int64) - ((hashes >> np.uint64(31)) << np.uint64(32)).astype(
        np.int64)
    return np.mod(signed, num_shards)

