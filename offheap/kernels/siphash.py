"""SipHash, the seeded hash that places byte-string keys in hash tables (layer 2: pure).

SipHash-c-d (Aumasson and Bernstein, 2012) of a message under a 128-bit key, here called the
*seed*: four 64-bit words of state start as the seed's halves ``k0, k1`` (little-endian, bytes
0..7 and 8..15) xored with the constants of "somepseudorandomlygeneratedbytes"; the message is
taken as 8-byte little-endian words, the last one holding the remaining 0..7 bytes with the
message length mod 256 in its top byte; each word ``m`` is xored into ``v3``, followed by ``c``
SipRounds, then xored into ``v0``; finalization xors ``0xff`` into ``v2``, runs ``d`` SipRounds,
and the hash is ``v0 ^ v1 ^ v2 ^ v3``.

Without the seed an attacker cannot choose keys that collide (the point of a keyed hash): a
table whose seed is drawn at random for each map cannot be driven into long probes by crafted
keys, whatever they hashed to under another seed. SipHash-1-3 is the variant CPython hashes str
and bytes with (``sys.hash_info.algorithm``); SipHash-2-4 is the paper's. Tests pin both: 1-3
to CPython's ``hash(bytes)`` under a zero seed, 2-4 to the paper's published vectors.
"""

import struct

MASK64 = (1 << 64) - 1
SEED_BYTES = 16
_WORD = struct.Struct("<Q")
_SEED = struct.Struct("<QQ")


def siphash(seed: bytes, data: bytes, c_rounds: int = 1, d_rounds: int = 3) -> int:
    """SipHash-``c_rounds``-``d_rounds`` of ``data`` under the 16-byte ``seed``: an unsigned
    64-bit int. ``O(len(data))``; ValueError for a seed of another length."""
    if len(seed) != SEED_BYTES:
        raise ValueError(f"a SipHash seed is {SEED_BYTES} bytes, got {len(seed)}")
    k0, k1 = _SEED.unpack(seed)
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573
    n = len(data)
    tail = n & ~7
    words = list(struct.unpack_from(f"<{tail >> 3}Q", data)) if tail else []
    words.append(int.from_bytes(data[tail:], "little") | (n & 0xFF) << 56)

    def rounds(count: int) -> None:
        nonlocal v0, v1, v2, v3
        for _ in range(count):
            v0 = (v0 + v1) & MASK64
            v1 = ((v1 << 13) | (v1 >> 51)) & MASK64
            v1 ^= v0
            v0 = ((v0 << 32) | (v0 >> 32)) & MASK64
            v2 = (v2 + v3) & MASK64
            v3 = ((v3 << 16) | (v3 >> 48)) & MASK64
            v3 ^= v2
            v0 = (v0 + v3) & MASK64
            v3 = ((v3 << 21) | (v3 >> 43)) & MASK64
            v3 ^= v0
            v2 = (v2 + v1) & MASK64
            v1 = ((v1 << 17) | (v1 >> 47)) & MASK64
            v1 ^= v2
            v2 = ((v2 << 32) | (v2 >> 32)) & MASK64

    for m in words:
        v3 ^= m
        rounds(c_rounds)
        v0 ^= m
    v2 ^= 0xFF
    rounds(d_rounds)
    return v0 ^ v1 ^ v2 ^ v3
