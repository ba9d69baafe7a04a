"""Index headers damaged within their valid ranges: a lowered ``data_end`` or ``max_displacement``.

Both pass header validation; the readers must still find every key (lookups do not trust
``max_displacement``) and must not iterate silently short (a slot past ``data_end`` raises
IndexFormatError). Each case runs on the compiled lookups and on the Python reference.
"""

import struct

import numpy as np
import pytest

import sparkey
from sparkey import native
from sparkey.errors import IndexFormatError
from sparkey.format import IndexHeader

DATA_END_OFFSET, MAX_DISPLACEMENT_OFFSET = 20, 84
KEYS = [b"key_%d" % i for i in range(2000)]


@pytest.fixture(params=["compiled", "reference"])
def core(request, monkeypatch):
    """Which lookups the readers opened in the test run on."""
    if request.param == "compiled":
        if not native.compiled:
            pytest.skip("the compiled core is not built")
    else:
        monkeypatch.setattr(native, "module", None)
    return request.param


@pytest.fixture(params=["none", "zstd"])
def base(request, tmp_path):
    base = tmp_path / "data"
    with sparkey.Writer(base, request.param, 256, hash_seed=11) as writer:
        for key in KEYS:
            writer.put(key, key[::-1])
    return base


def _patch_index(base, offset, value):
    index = base.with_suffix(".spi")
    data = bytearray(index.read_bytes())
    struct.pack_into("<Q", data, offset, value)
    index.write_bytes(bytes(data))
    IndexHeader.unpack(bytes(data))  # still a valid header: the damage is not in its ranges


def _displacements(reader):
    header = reader.index_header
    with open(reader.path, "rb") as file:
        file.seek(112)
        raw = file.read()
    dtype = np.dtype([("hash", f"<u{header.hash_size}"), ("address", f"<u{header.address_size}")])
    slots = np.frombuffer(raw, dtype=dtype)
    capacity = header.hash_capacity
    occupied = slots["address"] != 0
    homes = slots["hash"][occupied].astype(np.uint64) % np.uint64(capacity)
    return (np.flatnonzero(occupied).astype(np.uint64) + capacity - homes) % np.uint64(capacity)


def test_a_lowered_max_displacement_hides_no_key(base, core):
    with sparkey.open(base) as reader:
        displacements = _displacements(reader)
        header = reader.index_header
    # the lowest max_displacement the header's own checks let through
    lowered = -(-header.total_displacement // header.num_entries)
    assert lowered < header.max_displacement and (displacements > lowered).any()
    _patch_index(base, MAX_DISPLACEMENT_OFFSET, lowered)
    with sparkey.open(base) as reader:
        assert reader.index_header.max_displacement == lowered
        assert reader._index.compiled == (core == "compiled")
        assert all(reader.get(key) == key[::-1] for key in KEYS)
        assert reader.get_many(KEYS) == [key[::-1] for key in KEYS]
        assert reader.get(b"absent") is None and b"key_2000" not in reader


def test_a_lowered_data_end_raises_instead_of_iterating_short(base, core):
    with sparkey.open(base) as reader:
        data_end = reader.index_header.data_end
    _patch_index(base, DATA_END_OFFSET, data_end // 2)
    with sparkey.open(base) as reader:
        assert len(reader) == len(KEYS)
        with pytest.raises(IndexFormatError, match="past its data_end") as info:
            next(iter(reader.items()))
        assert info.value.field == "data_end"
        with pytest.raises(IndexFormatError):
            list(reader)


def test_a_slot_naming_no_entry_raises_after_the_last_entry(tmp_path, core):
    base = tmp_path / "data"
    with sparkey.Writer(base, hash_seed=3) as writer:
        writer.put(b"a", b"1")
        writer.put(b"b", b"2")
    with sparkey.open(base) as reader:
        header = reader.index_header
        first = int(reader._index.live_addresses()[0])
    index = base.with_suffix(".spi")
    data = bytearray(index.read_bytes())
    slot_size = header.hash_size + header.address_size
    for slot in range(header.hash_capacity):
        start = 112 + slot * slot_size + header.hash_size
        if int.from_bytes(data[start:start + header.address_size], "little") == first:
            data[start:start + header.address_size] = (first + 1).to_bytes(
                header.address_size, "little")
    index.write_bytes(bytes(data))
    with sparkey.open(base) as reader:
        with pytest.raises(IndexFormatError, match="lists 2 entries but 1") as info:
            list(reader.items())
        assert info.value.field == "num_entries"
