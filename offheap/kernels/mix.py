"""The 64-bit mix that places int64 keys in hash tables (layer 2: pure).

MurmurHash3's finalizer ``fmix64``: xor-shift, multiply, xor-shift, multiply, xor-shift. Every
input bit affects every output bit with probability close to 1/2, so sequential keys, keys that
are multiples of a power of two and keys that differ only in high bits all spread evenly over the
top bits that a table of 2**b slots uses as the home slot. It is a bijection on 64-bit words.
The scalar and the vectorized form give identical results; tests hold them to each other.
"""

import numpy as np

MASK64 = (1 << 64) - 1
_C1 = 0xFF51AFD7ED558CCD
_C2 = 0xC4CEB9FE1A85EC53


def mix64(key: int) -> int:
    """Mix one int64 (any Python int in [-2**63, 2**63)) into an unsigned 64-bit hash."""
    h = key & MASK64
    h = ((h ^ (h >> 33)) * _C1) & MASK64
    h = ((h ^ (h >> 33)) * _C2) & MASK64
    return h ^ (h >> 33)


def mix64_array(keys: np.ndarray) -> np.ndarray:
    """:func:`mix64` of every element of an int64 array, as uint64 (wrapping multiplies)."""
    h = keys.astype(np.uint64, copy=True)
    shift = np.uint64(33)
    h ^= h >> shift
    h *= np.uint64(_C1)
    h ^= h >> shift
    h *= np.uint64(_C2)
    h ^= h >> shift
    return h
