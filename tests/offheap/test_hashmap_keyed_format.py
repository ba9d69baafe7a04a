"""The keyed hash table's format: its metadata record, chunks of key slots, the homes of key slots.

Golden files pin it whole. ``golden/keyed_hashmap_str_table.bin`` and
``golden/keyed_hashset_object_table.bin`` hold the bytes a fixed sequence of operations on a
``HashMap(key="str")`` and a ``HashSet(key="object")`` under a fixed seed leaves in the metadata,
the chunk list, the index, the chunks and the records of long keys: what a writer makes.
``golden/keyed_hashmap_str_v1.offheap.gz`` and ``golden/keyed_hashset_object_v1.offheap.gz``
are those two tables' files as first written: what a reader must go on opening.
"""

import dataclasses
import gzip
import os
import shutil
import struct
import types
from pathlib import Path

import numpy as np
import pytest

from offheap import HashMap, HashSet
from offheap.errors import CorruptionError
from offheap.hashmap import keyedtable
from offheap.hashmap.keyedlayout import KeyedMeta, homes_of_slots, pack_meta, parse_meta
from offheap.hashmap.keyslots import home_of, inline_slot, key_bytes, key_hash, long_slot
from offheap.hashmap.layout import SMALL_REGION_BYTES, TableMeta, chunk_bytes, initial_capacity
from offheap.hashmap.regions import Regions
from offheap.hashmap.table import own_store

SEED = bytes(range(16))
META = KeyedMeta("str", SEED, TableMeta("object", 752, 2, 3, 4, 128, 4096, 7))


def test_the_metadata_record_is_pinned_byte_for_byte():
    record = pack_meta(META)
    assert len(record) == 104
    assert record[:8] == b"OHKHMAP1" and record[8:16] == b"str\0\0\0\0\0"
    assert record[16:32] == b"object".ljust(16, b"\0") and record[32:48] == SEED
    assert record[48:].hex() == (
        "f002000000000000" "0200000000000000" "0300000000000000" "0400000000000000"
        "8000000000000000" "0010000000000000" "0700000000000000")
    assert parse_meta(record) == META


@pytest.mark.parametrize("damage, message", [
    (lambda r: b"OHXXMAP1" + r[8:], "bad magic"), (lambda r: r[:-1], "bad magic or size"),
    (lambda r: r[:8] + b"float\0\0\0" + r[16:], "key type 'float'"),
    (lambda r: r[:48] + (8).to_bytes(8, "little") + r[56:], "out of range")])
def test_a_damaged_metadata_record_is_corruption(damage, message):
    with pytest.raises(CorruptionError, match=message):
        parse_meta(damage(pack_meta(META)))


def test_a_long_hash_maps_record_is_another_kind_not_damage():
    with pytest.raises(ValueError, match="open it as a LongHashMap"):
        parse_meta(b"OHLHMAP2" + pack_meta(META)[8:])


def test_a_new_keyed_tables_chunk_0_fills_one_small_region():
    for width in (0, 2, 4, 8):
        capacity = initial_capacity(width, 16)
        assert capacity == 128
        assert chunk_bytes(capacity, width, 16) <= SMALL_REGION_BYTES \
            < chunk_bytes(2 * capacity, width, 16)
    assert chunk_bytes(128, 2, 16) == 128 * 18 + 16
    assert [initial_capacity(width) for width in (0, 2, 4, 8)] == [256, 256, 256, 128]


def test_homes_of_slots_are_the_keys_homes_inline_and_long():
    seed = os.urandom(16)
    keys = ["", "a", "user:1234567890", "\u20ac" * 5, "a key of more than fifteen bytes",
            "x" * 1024]
    records = {}
    slots = []
    for key in keys:
        data = key_bytes("str", key)
        if len(data) <= 15:
            slots.append(inline_slot(data))
        else:
            records[100 + len(records)] = data
            slots.append(long_slot(99 + len(records), key_hash(seed, data)))
    matrix = np.frombuffer(b"".join(slots), np.uint8).reshape(-1, 16)
    homes = homes_of_slots(matrix, seed, 3008)
    assert homes.dtype == np.int64
    assert homes.tolist() == [home_of(key_hash(seed, key_bytes("str", k)), 3008) for k in keys]
    assert homes_of_slots(matrix[:0], seed, 3008).tolist() == []


@pytest.mark.parametrize("slot, message", [
    (b"a" * 15 + b"\x10", "byte 15 is 16"), (b"ab\0x" + bytes(11) + b"\x02", "padding")])
def test_homes_of_damaged_slots_are_corruption(slot, message):
    with pytest.raises(CorruptionError, match=message):
        homes_of_slots(np.frombuffer(slot, np.uint8), SEED, 752)


def test_a_table_of_16_byte_key_slots_lays_its_chunk_out_as_the_format_says():
    store = own_store(None)
    regions = Regions.allocate(store, 752, 2, np.uint16, 128, np.dtype("V16"))
    (chunk,) = regions.chunk_offsets
    raw = store.region_array(chunk, np.uint8, chunk_bytes(128, 2, 16))
    assert not raw.any()
    regions.keys.put(np.array([1]), np.frombuffer(inline_slot(b"ab"), "V16"))
    regions.values.put(np.array([1]), np.array([0x0302], np.uint16))
    regions.live_chunks[0][0] = 0b10
    assert bytes(raw[16:32]) == inline_slot(b"ab")
    assert raw[128 * 16 + 2: 128 * 16 + 4].tolist() == [2, 3]
    assert raw[128 * 18] == 0b10 and len(raw) == 128 * 18 + 16
    assert regions.keys.take(np.array([0, 1])).tolist() == [bytes(16), inline_slot(b"ab")]
    del raw  # no view of a region outlives it
    regions.free(store)


GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture
def fixed_seed(monkeypatch):
    """New keyed tables draw ``SEED`` instead of a random seed (the module's ``os`` replaced
    for this test alone: no knob of the library fixes a seed)."""
    monkeypatch.setattr(keyedtable, "os", types.SimpleNamespace(urandom=lambda n: SEED[:n]))


def _golden_map(path=None) -> HashMap:
    m = HashMap(key="str", value="object", path=path)
    for i in range(-40, 120):
        m[f"user:{i}"] = i % 7 if i % 3 else ""
    for i in range(-40, 120, 4):
        del m[f"user:{i}"]
    m["a key of more than fifteen bytes"] = "a value long enough to live in its own record"
    m.put_many([f"\u20ac{i}" * (i % 6) for i in range(60)], [b"x"] * 60)
    del m["\u20ac1"]
    m.popitem()
    m[""] = None
    return m


def _golden_set(path=None) -> HashSet:
    s = HashSet(key="object", path=path)
    s.update([None, 0, 1, -1, 2**70, 2.5, "s", b"s", (1, "a"), (), ("x" * 40,), True, 1.0])
    s.add_many(list(range(100, 300)))
    s.discard_many(list(range(100, 300, 3)))
    s.pop()
    s.add("a str element of more than fifteen bytes")
    return s


def _table_parts(table) -> list[bytes]:
    """The metadata record, the chunk list, the index, each chunk and each long key's record
    (in entry order)."""
    meta = table._store.get(table.meta_recid)
    r = table._regions
    parts = [meta, table._store.get(parse_meta(meta).table.chunk_list_recid), r.index.tobytes()]
    parts += [table._store.arena.view(offset).tobytes() for offset in r.chunk_offsets]
    return parts + [table._store.get(int(recid)) for recid in table._long_key_records()]


def _table_bytes(table) -> bytes:
    """:func:`_table_parts`, each after its length."""
    return b"".join(struct.pack("<Q", len(part)) + part for part in _table_parts(table))


def _parts_of(table_bytes: bytes) -> list[bytes]:
    parts, at = [], 0
    while at < len(table_bytes):
        (n,), at = struct.unpack_from("<Q", table_bytes, at), at + 8
        parts.append(table_bytes[at: at + n])
        at += n
    return parts


GOLDEN_TABLES = {"keyed_hashmap_str": _golden_map, "keyed_hashset_object": _golden_set}


@pytest.mark.parametrize("name", list(GOLDEN_TABLES))
def test_table_bytes_match_the_golden_file(name, fixed_seed):
    table = GOLDEN_TABLES[name]()
    table.flush()
    assert table._keycodec.seed == SEED
    assert _table_bytes(table) == (GOLDEN / f"{name}_table.bin").read_bytes()


@pytest.mark.parametrize("name", list(GOLDEN_TABLES))
def test_a_golden_file_opens_reads_and_grows(name, fixed_seed, tmp_path):
    path = tmp_path / name
    with gzip.open(GOLDEN / f"{name}_v1.offheap.gz") as packed, open(path, "wb") as file:
        shutil.copyfileobj(packed, file)
    expected = GOLDEN_TABLES[name]()
    cls = type(expected)
    with cls.reader(path) as reader:
        assert list(reader) == list(expected)
        if cls is HashMap:
            assert dict(reader.items()) == dict(expected.items())
        # the same table, at other offsets of the arena (a file's regions are placed after
        # the ones its first commit wrote)
        stored, golden = _table_parts(reader._map), _parts_of(
            (GOLDEN / f"{name}_table.bin").read_bytes())
        assert stored[2:] == golden[2:]
        file_meta, golden_meta = parse_meta(stored[0]), parse_meta(golden[0])
        assert (file_meta.key, file_meta.seed) == (golden_meta.key, golden_meta.seed)
        assert dataclasses.replace(file_meta.table, index_region=0, chunk_list_recid=0) == \
            dataclasses.replace(golden_meta.table, index_region=0, chunk_list_recid=0)
    with cls(path=path) as table:  # a writer of today goes on from it
        table._check()
        more = [f"more {i}" for i in range(3000)]
        table.update(dict.fromkeys(more, 1) if cls is HashMap else more)
        table._check()
    with cls(path=path) as table:
        assert len(table) == len(expected) + 3000
