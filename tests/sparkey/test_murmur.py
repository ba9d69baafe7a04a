"""sparkey.murmur against the C library's vectors and against mmh3."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from sparkey.murmur import hash32, hash64, hash_buffer, hash_keys, scalar_hasher

from .golden import murmur_vectors

VECTORS = murmur_vectors()
FIELDS = {4: "murmur3_x86_32", 8: "murmur3_x64_128_low64"}


@pytest.mark.parametrize("hash_size", [4, 8])
def test_scalar_hashes_match_libsparkey(hash_size):
    hasher = scalar_hasher(hash_size)
    for vector in VECTORS:
        key = bytes.fromhex(vector["key_hex"])
        assert hasher(key, vector["seed"]) == int(vector[FIELDS[hash_size]], 16), vector


@pytest.mark.parametrize("hash_size", [4, 8])
def test_batch_hashes_match_libsparkey(hash_size):
    for seed in sorted({vector["seed"] for vector in VECTORS}):
        group = [vector for vector in VECTORS if vector["seed"] == seed]
        keys = [bytes.fromhex(vector["key_hex"]) for vector in group]
        expected = [int(vector[FIELDS[hash_size]], 16) for vector in group]
        lengths = [len(key) for key in keys]
        offsets = np.cumsum([0] + lengths[:-1])
        assert hash_buffer(b"".join(keys), offsets, lengths, seed, hash_size).tolist() == expected
        assert hash_keys(keys, seed, hash_size).tolist() == expected


@settings(max_examples=50, deadline=None)
@given(keys=st.lists(st.binary(max_size=70), max_size=40), seed=st.integers(0, 2**32 - 1),
       hash_size=st.sampled_from([4, 8]))
def test_numpy_kernel_agrees_with_mmh3(keys, seed, hash_size):
    lengths = [len(key) for key in keys]
    offsets = np.cumsum([0] + lengths[:-1]) + 3
    buffer = b"pad" + b"".join(keys)
    expected = [scalar_hasher(hash_size)(key, seed) for key in keys]
    assert hash_buffer(buffer, offsets[:len(keys)], lengths, seed, hash_size).tolist() == expected
    assert hash_keys(keys, seed, hash_size).tolist() == expected


def test_hash_kernels_chunk_large_groups(monkeypatch):
    import sparkey.murmur as murmur
    monkeypatch.setattr(murmur, "CHUNK_BYTES", 40)
    keys = [b"key_%d" % i for i in range(100)]
    lengths = [len(key) for key in keys]
    offsets = np.cumsum([0] + lengths[:-1])
    assert hash_buffer(b"".join(keys), offsets, lengths, 9, 8).tolist() == [
        hash64(key, 9) for key in keys]
    assert hash_buffer(b"".join(keys), offsets, lengths, 9, 4).tolist() == [
        hash32(key, 9) for key in keys]


def test_bad_hash_size():
    with pytest.raises(ValueError):
        scalar_hasher(2)
    with pytest.raises(ValueError):
        hash_keys([b"a"], 0, 16)
