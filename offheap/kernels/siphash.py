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
keys, whatever they hashed to under another seed. :func:`siphash_array` hashes many messages at
once with numpy (what growth and the bulk paths need); tests hold it to :func:`siphash`. SipHash-1-3 is the variant CPython hashes str
and bytes with (``sys.hash_info.algorithm``); SipHash-2-4 is the paper's. Tests pin both: 1-3
to CPython's ``hash(bytes)`` under a zero seed, 2-4 to the paper's published vectors.
"""

import struct

import numpy as np

MASK64 = (1 << 64) - 1
SEED_BYTES = 16
_WORD = struct.Struct("<Q")
_SEED = struct.Struct("<QQ")
_INIT = (0x736F6D6570736575, 0x646F72616E646F6D, 0x6C7967656E657261, 0x7465646279746573)


def siphash(seed: bytes, data: bytes, c_rounds: int = 1, d_rounds: int = 3) -> int:
    """SipHash-``c_rounds``-``d_rounds`` of ``data`` under the 16-byte ``seed``: an unsigned
    64-bit int. ``O(len(data))``; ValueError for a seed of another length."""
    v0, v1, v2, v3 = _initial_state(seed)
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


def _initial_state(seed: bytes) -> tuple[int, int, int, int]:
    if len(seed) != SEED_BYTES:
        raise ValueError(f"a SipHash seed is {SEED_BYTES} bytes, got {len(seed)}")
    k0, k1 = _SEED.unpack(seed)
    return k0 ^ _INIT[0], k1 ^ _INIT[1], k0 ^ _INIT[2], k1 ^ _INIT[3]


def siphash_array(seed: bytes, data: np.ndarray, lengths: np.ndarray, c_rounds: int = 1,
                  d_rounds: int = 3) -> np.ndarray:
    """:func:`siphash` of many messages: row ``i`` of the uint8 matrix ``data`` holds message
    ``i`` in its first ``lengths[i]`` bytes, zero after them; uint64 hashes, one per row.

    The rows are taken in order of decreasing word count, so the rows still absorbing words
    are a prefix at every step: ``O(total words)`` numpy work, no masks. ValueError when a row
    is shorter than its length or not zero past it.
    """
    n = len(lengths)
    if not n:
        return np.empty(0, np.uint64)
    lengths = np.asarray(lengths, np.int64)
    data = np.ascontiguousarray(data, np.uint8).reshape(n, -1)
    if int(lengths.max()) > data.shape[1]:
        raise ValueError("a message is longer than its row")
    n_words = (lengths >> 3) + 1  # the last word holds the tail and the length byte
    width = max(int(n_words.max()), -(-data.shape[1] // 8)) * 8
    padded = np.zeros((n, width), np.uint8)
    padded[:, :data.shape[1]] = data
    if (padded[np.arange(width) >= lengths[:, None]]).any():
        raise ValueError("a row is not zero past its message")
    order = np.argsort(-n_words, kind="stable")
    words = padded[order].view("<u8").astype(np.uint64)
    sorted_words = n_words[order]
    words[np.arange(n), sorted_words - 1] |= (lengths[order] & 0xFF).astype(np.uint64) << 56
    v = [np.full(n, word, np.uint64) for word in _initial_state(seed)]
    active_counts = np.searchsorted(-sorted_words, -np.arange(1, width // 8 + 1), "right")
    for j, active in enumerate(active_counts.tolist()):
        m = words[:active, j]
        state = [part[:active] for part in v]
        state[3] ^= m
        _rounds_array(state, c_rounds)
        state[0] ^= m
    v[2] ^= np.uint64(0xFF)
    _rounds_array(v, d_rounds)
    hashes = np.empty(n, np.uint64)
    hashes[order] = v[0] ^ v[1] ^ v[2] ^ v[3]
    return hashes


def _rotl(x: np.ndarray, bits: int) -> np.ndarray:
    return (x << np.uint64(bits)) | (x >> np.uint64(64 - bits))


def _rounds_array(v: list[np.ndarray], count: int) -> None:
    """SipRounds on the state arrays, in place (views into the full state are updated)."""
    v0, v1, v2, v3 = v
    for _ in range(count):
        v0 += v1
        v1[:] = _rotl(v1, 13)
        v1 ^= v0
        v0[:] = _rotl(v0, 32)
        v2 += v3
        v3[:] = _rotl(v3, 16)
        v3 ^= v2
        v0 += v3
        v3[:] = _rotl(v3, 21)
        v3 ^= v0
        v2 += v1
        v1[:] = _rotl(v1, 17)
        v1 ^= v2
        v2[:] = _rotl(v2, 32)
