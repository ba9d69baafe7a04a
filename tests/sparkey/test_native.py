"""sparkey._native against the pure-Python reference: hashes, lookups, framing, the index build.

Every primitive is compared with the Python code it mirrors, on stores written by
sparkey.Writer, on the golden vectors and on damaged files: the answers are the same, and where
the Python reader raises, a Lookup raises a ValueError too (never a crash).
"""

import pathlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import sparkey
from sparkey import _native, murmur, robinhood
from sparkey.codec import codec_for
from sparkey.errors import ClosedError, EntryTypeError, IndexFormatError, LogFormatError
from sparkey.format import INDEX_HEADER_SIZE, Compression, EntryKind, IndexHeader, LogHeader
from sparkey.index.compiled import layout
from sparkey.log import EntryTable
from sparkey.packed import PackedBytes
from sparkey.table import slot_dtype

from .golden import all_vectors, murmur_vectors

VECTORS = all_vectors()
COMPRESSIONS = ["none", "snappy", "zstd"]
KEYS = st.binary(max_size=40)
SEEDS = st.integers(0, 2**32 - 1)


class NativeStore:
    """A store's two files as bytes, read through a ``_native.Lookup`` the way the reader reads."""

    def __init__(self, base, index=None, log=None):
        base = pathlib.Path(base)
        self.log_path, self.index_path = base.with_suffix(".spl"), base.with_suffix(".spi")
        self.index = self.index_path.read_bytes() if index is None else index
        log = self.log_path.read_bytes() if log is None else log
        index_header, log_header = IndexHeader.unpack(self.index), LogHeader.unpack(log)
        self.log = log[:log_header.data_end]
        self.log_header = log_header
        self.layout = layout(index_header, log_header.data_end)
        self.lookup = _native.Lookup(self.index, self.log, self.layout, **self.codec_options())

    def codec_options(self):
        compression = self.log_header.compression_type
        if compression == Compression.NONE:
            return {}
        codec = codec_for(compression)
        snappy = compression == Compression.SNAPPY
        return dict(block_size=self.log_header.compression_block_size, snappy=snappy,
                    decompress=codec.raw_decompress if snappy else codec.decompress,
                    across_blocks=self._value_across_blocks)

    def _value_across_blocks(self, position, entry_index, key):
        with sparkey.LogReader(self.log_path) as log:
            return log.value_across_blocks(position, entry_index, key)

    @property
    def compressed(self):
        return self.log_header.compression_type != Compression.NONE

    def get(self, key):
        return self.lookup.get(key)

    def get_many(self, keys):
        return self.lookup.get_many(keys)


def outcome(function, *args):
    """``("value", result)``, or ``("error", ValueError)`` for any ValueError raised."""
    try:
        return "value", function(*args)
    except ValueError:
        return "error", ValueError


# ------------------------------------------------------------------------------------ hashes

@pytest.mark.parametrize("hash_size", [4, 8])
def test_hash_key_matches_the_c_library_vectors(hash_size):
    field = {4: "murmur3_x86_32", 8: "murmur3_x64_128_low64"}[hash_size]
    for vector in murmur_vectors():
        key = bytes.fromhex(vector["key_hex"])
        assert _native.hash_key(key, vector["seed"], hash_size) == int(vector[field], 16)


@settings(max_examples=300, deadline=None)
@given(key=st.binary(max_size=100), seed=SEEDS, hash_size=st.sampled_from([4, 8]))
def test_hash_key_matches_murmur(key, seed, hash_size):
    assert _native.hash_key(key, seed, hash_size) == murmur.scalar_hasher(hash_size)(key, seed)


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(st.binary(max_size=70), max_size=50), seed=SEEDS,
       hash_size=st.sampled_from([4, 8]))
def test_hash_keys_and_hash_buffer_match_murmur(keys, seed, hash_size):
    expected = murmur.hash_keys(keys, seed, hash_size)
    hashes = np.frombuffer(_native.hash_keys(keys, seed, hash_size), dtype=np.uint64)
    assert hashes.tolist() == expected.tolist()
    assert _native.hash_keys(tuple(keys), seed, hash_size) == hashes.tobytes()
    lengths = np.array([len(key) for key in keys], dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    from_buffer = _native.hash_buffer(b"".join(keys), offsets, lengths, seed, hash_size)
    assert np.frombuffer(from_buffer, dtype=np.uint64).tolist() == expected.tolist()


def test_hash_inputs_are_checked():
    assert _native.hash_key("clé", 1, 4) == _native.hash_key("clé".encode(), 1, 4)
    assert _native.hash_key(bytearray(b"ab"), 1, 8) == _native.hash_key(memoryview(b"ab"), 1, 8)
    with pytest.raises(EntryTypeError):
        _native.hash_key(12, 1, 4)
    with pytest.raises(ValueError):
        _native.hash_key(b"", 2**32, 4)
    with pytest.raises(ValueError):
        _native.hash_keys([b""], 1, 5)
    offsets, lengths = np.array([2], dtype=np.int64), np.array([2], dtype=np.int64)
    with pytest.raises(ValueError):
        _native.hash_buffer(b"abc", offsets, lengths, 1, 4)
    with pytest.raises(TypeError):
        _native.hash_buffer(b"abc", offsets.astype(np.int32), lengths, 1, 4)


# ----------------------------------------------------------------------------------- lookups

OPERATIONS = st.lists(st.tuples(st.sampled_from("PPPD"), st.binary(max_size=6),
                                st.binary(max_size=300)), max_size=120)


def _write_store(base, operations, compression, block_size):
    with sparkey.Writer(base, compression, block_size=block_size, hash_seed=99) as writer:
        for op, key, value in operations:
            if op == "P":
                writer.put(key, value)
            else:
                writer.delete(key)


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS, compression=st.sampled_from(COMPRESSIONS),
       block_size=st.sampled_from([16, 64, 4096]), absent=st.lists(KEYS, max_size=10))
def test_lookups_answer_like_the_reader(tmp_path_factory, operations, compression, block_size,
                                        absent):
    base = tmp_path_factory.mktemp("store") / "data"
    _write_store(base, operations, compression, block_size)
    keys = [key for _, key, _ in operations] + absent
    store = NativeStore(base)
    with sparkey.open(base) as reader:
        expected = [reader.get(key) for key in keys]
    assert [store.get(key) for key in keys] == expected
    assert store.get_many(keys) == expected
    assert [store.lookup.contains(key) for key in keys] == [
        value is not None for value in expected]


@pytest.mark.parametrize("vector", VECTORS, ids=str)
def test_golden_vectors_read_like_the_reader(vector):
    store = NativeStore(vector.directory / "data")
    keys = list(vector.expected() or {}) + vector.absent_keys()
    with sparkey.open(vector.index_path) as reader:
        keys += list(reader)[:300]
        expected = [reader.get(key) for key in keys]
    assert [store.get(key) for key in keys] == expected
    assert store.get_many(keys) == expected
    assert [store.lookup.contains(key) for key in keys] == [
        value is not None for value in expected]


def test_get_many_takes_keys_like_the_reader(tmp_path):
    _write_store(tmp_path / "data", [("P", "clé".encode(), b"v"), ("P", b"k", b"w")], "none", 0)
    store = NativeStore(tmp_path / "data")
    assert store.get_many(["clé", bytearray(b"k"), memoryview(b"x"), b"k"]) == [
        b"v", b"w", None, b"w"]
    assert store.get_many((key for key in [b"k"])) == [b"w"]
    assert store.get_many((b"k",) * 5000 + ("clé",)) == [b"w"] * 5000 + [b"v"]
    with pytest.raises(EntryTypeError):
        store.get_many([b"k", 3])


def test_lookup_arguments_are_checked(tmp_path):
    _write_store(tmp_path / "data", [("P", b"k", b"v")], "none", 0)
    store = NativeStore(tmp_path / "data")
    seed, hash_size, address_size, capacity, displacement, bits, data_end = store.layout
    with pytest.raises(LogFormatError):
        _native.Lookup(store.index, store.log[:-1], store.layout)
    with pytest.raises(IndexFormatError):
        _native.Lookup(store.index[:-1], store.log, store.layout)
    bad_layouts = [(seed, 5, address_size, capacity, displacement, bits, data_end),
                   (seed, hash_size, address_size, 0, displacement, bits, data_end),
                   (seed, hash_size, address_size, capacity, displacement, 32, data_end),
                   (seed, hash_size, address_size, capacity, displacement, bits, 83)]
    for layout in bad_layouts:
        with pytest.raises(ValueError):
            _native.Lookup(store.index, store.log, layout)
    with pytest.raises(TypeError):
        _native.Lookup(store.index, store.log, list(store.layout))
    with pytest.raises(ValueError):
        _native.Lookup(store.index, store.log, (-1,) + store.layout[1:])
    with pytest.raises(TypeError):  # a codec without a reader of entries across blocks
        _native.Lookup(store.index, store.log, store.layout, decompress=len)
    with pytest.raises(TypeError):
        store.lookup.__init__(store.index, store.log, store.layout)
    with pytest.raises(TypeError):
        store.lookup.get()
    assert store.lookup.get(b"k", b"-") == b"v" and store.lookup.get(b"x", b"-") == b"-"
    assert store.lookup.getitem(b"k") == b"v" and store.lookup.contains("k")
    with pytest.raises(KeyError):
        store.lookup.getitem(b"x")


def test_a_released_lookup_raises_closed_error_and_frees_the_mapping(tmp_path):
    import mmap
    _write_store(tmp_path / "data", [("P", b"k", b"v")], "snappy", 64)
    store = NativeStore(tmp_path / "data")
    with open(store.log_path, "rb") as file:
        log_map = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    lookup = _native.Lookup(store.index, log_map, store.layout, **store.codec_options())
    assert lookup.get(b"k") == b"v" and not lookup.released
    with pytest.raises(BufferError):  # exported for the life of the lookup
        log_map.close()
    lookup.release()
    lookup.release()
    log_map.close()
    for call in (lambda: lookup.get(b"k"), lambda: lookup.getitem(b"k"),
                 lambda: lookup.contains(b"k"), lambda: lookup.get_many([b"k"])):
        with pytest.raises(ClosedError, match="the store is closed"):
            call()
    assert lookup.released


def test_a_probe_through_a_table_of_one_hash_stops_after_a_turn(tmp_path):
    """Every slot holds the key's hash but another key: at most one turn of the table is read,
    whatever probe_limit the layout claims."""
    for compression in COMPRESSIONS:
        _write_store(tmp_path / compression, [("P", b"k", b"v")], compression, 64)
        store = NativeStore(tmp_path / compression)
        seed, hash_size, address_size, capacity, _, bits, data_end = store.layout
        key_hash = _native.hash_key(b"other", seed, hash_size)
        slot = key_hash.to_bytes(hash_size, "little") + (84 << bits).to_bytes(address_size,
                                                                               "little")
        index = store.index[:INDEX_HEADER_SIZE] + slot * capacity
        layout = (seed, hash_size, address_size, capacity, 10**9, bits, data_end)
        lookup = _native.Lookup(index, store.log, layout, **store.codec_options())
        assert lookup.get(b"other") is None
        assert lookup.get_many([b"other", b"k"]) == [None, None]


def _damaged(data, flips, start):
    data = bytearray(data)
    for offset, byte in flips:
        if len(data) > start:
            data[start + offset % (len(data) - start)] = byte
    return bytes(data)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(compression=st.sampled_from(COMPRESSIONS),
       flips=st.lists(st.tuples(st.integers(0, 2**20), st.integers(0, 255)), min_size=1,
                      max_size=6),
       in_index=st.booleans())
def test_damaged_bodies_fail_like_the_reader(tmp_path_factory, compression, flips, in_index):
    """Bytes flipped in the slot table or the log body: the same value, or an error."""
    base = tmp_path_factory.mktemp("damaged") / "data"
    operations = [("P", b"key_%d" % i, b"value_%d" % i * (i % 7)) for i in range(60)]
    _write_store(base, operations + [("D", b"key_3", b""), ("P", b"big", b"B" * 200)],
                 compression, 32)
    store = NativeStore(base)
    if in_index:
        store.index_path.write_bytes(_damaged(store.index, flips, INDEX_HEADER_SIZE))
    else:
        store.log_path.write_bytes(_damaged(store.log, flips, 84))
    damaged = NativeStore(base)
    keys = [key for _, key, _ in operations] + [b"big", b"nope"]
    with sparkey.open(base) as reader:
        for key in keys:
            expected = outcome(reader.get, key)
            if expected[0] == "value" and damaged.compressed:
                assert outcome(damaged.get, key) in (expected, ("error", ValueError))
            else:
                assert outcome(damaged.get, key) == expected
        assert outcome(damaged.get_many, keys)[0] in ("value", "error")


@settings(max_examples=150, deadline=None)
@given(block=st.binary(max_size=200), entry_index=st.integers(0, 300), key=KEYS)
def test_a_compressed_lookup_never_reads_past_its_block(block, entry_index, key):
    """Whatever the codec hands back, the entry is read within it, or across blocks."""
    seed, bits = 7, 9
    log = bytes(84) + bytes([1, 0])  # one block of one payload byte
    slot = _native.hash_key(key, seed, 8).to_bytes(8, "little") + (
        (84 << bits) | entry_index).to_bytes(8, "little")
    across = []
    lookup = _native.Lookup(bytes(INDEX_HEADER_SIZE) + slot, log, (seed, 8, 8, 1, 0, bits, 86),
                            block_size=200, decompress=lambda payload, size: block,
                            across_blocks=lambda *address: across.append(address))
    try:
        value = lookup.get(key)
    except ValueError:
        return
    assert value is None or value in block
    assert not across or across == [(84, entry_index, key)]


# ----------------------------------------------------------------------------------- framing

ENTRIES = st.lists(st.tuples(st.binary(max_size=200), st.binary(max_size=300)), max_size=60)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=ENTRIES)
def test_frame_puts_equals_the_log_writer(tmp_path_factory, entries):
    path = tmp_path_factory.mktemp("framing") / "data.spl"
    with sparkey.LogWriter(path) as writer:
        for key, value in entries:
            writer.put(key, value)
    keys, values = [k for k, _ in entries], [v for _, v in entries]
    key_lengths = np.full(len(entries), -1, dtype=np.int64)
    value_lengths = np.full(len(entries), -1, dtype=np.int64)
    framed = _native.frame_puts(keys, values, key_lengths=key_lengths,
                                value_lengths=value_lengths)
    assert framed == path.read_bytes()[84:]
    assert key_lengths.tolist() == [len(k) for k in keys]
    assert value_lengths.tolist() == [len(v) for v in values]
    assert _native.frame_puts(tuple(keys), tuple(values)) == framed
    packed_keys, packed_values = PackedBytes.from_sequence(keys), PackedBytes.from_sequence(values)
    assert _native.frame_packed(packed_keys.data, packed_keys.offsets, packed_values.data,
                                packed_values.offsets) == framed


def test_frame_packed_reads_row_ranges_and_checks_offsets():
    keys, values = PackedBytes.from_sequence([b"a", b"bb", b"ccc"]), PackedBytes.from_sequence(
        [b"1", b"", b"333"])
    rows = keys.pack(1, 3), values.pack(1, 3)
    assert _native.frame_packed(rows[0].data, rows[0].offsets, rows[1].data,
                                rows[1].offsets) == _native.frame_puts(list(rows[0]),
                                                                       list(rows[1]))
    data = np.frombuffer(b"abc", dtype=np.uint8)
    for offsets in ([0, 2, 1], [0, 4], [-1, 1], []):
        with pytest.raises(ValueError):
            _native.frame_packed(data, np.array(offsets, dtype=np.int64), data,
                                 np.array([0, 1], dtype=np.int64))
    with pytest.raises(ValueError):  # two keys, one value
        _native.frame_packed(data, np.array([0, 1, 2], dtype=np.int64), data,
                             np.array([0, 1], dtype=np.int64))


@pytest.mark.parametrize("vector", [v for v in VECTORS if v.compression == Compression.NONE
                                    and {op for op, _, _ in v.operations()} == {"P"}], ids=str)
def test_frame_puts_equals_the_golden_logs(vector):
    operations = vector.operations()
    framed = _native.frame_puts([key for _, key, _ in operations],
                                [value for _, _, value in operations])
    assert framed == vector.log_path.read_bytes()[84:]


def test_frame_puts_takes_entries_like_the_writer():
    assert _native.frame_puts(["é", bytearray(b"k")], [memoryview(b"v"), ""]) == (
        b"\x03\x01\xc3\xa9v" + b"\x02\x00k")
    assert _native.frame_puts((), []) == b""
    with pytest.raises(EntryTypeError):
        _native.frame_puts([b"k"], [1])
    with pytest.raises(ValueError):
        _native.frame_puts([b"k"], [])
    with pytest.raises(ValueError):
        _native.frame_puts([b"k"], [b"v"], key_lengths=np.zeros(2, dtype=np.int64))
    with pytest.raises(TypeError):
        _native.frame_puts([b"k"], [b"v"], key_lengths=np.zeros(1, dtype=np.uint8))


# -------------------------------------------------------------------------------- index build

def _columns(log_path, seed, hash_size):
    """``(header, table, key_buffer, hashes)`` of every entry of a log, as write_index scans it
    (the key buffer copied out of the mapping)."""
    with sparkey.LogReader(log_path) as log:
        table = EntryTable.concat(list(log.scan()))
        key_buffer = bytes(table.key_buffer)
        header = log.header
    hashes = murmur.hash_buffer(key_buffer, table.key_offset, table.key_len, seed, hash_size)
    return header, table, key_buffer, hashes


def _fill(capacity, hash_size, address_size, hashes, addresses, rules, table=None,
          key_buffer=None):
    slots = bytearray(capacity * (hash_size + address_size))
    keys = {} if table is None else dict(
        kinds=table.kind.astype(np.uint8), key_buffer=key_buffer,
        key_offsets=table.key_offset.astype(np.int64), key_lengths=table.key_len.astype(np.int64),
        value_lengths=table.value_len.astype(np.int64))
    garbage = _native.fill_slots(slots, hash_size, address_size, hashes.astype(np.uint64),
                                 addresses.astype(np.uint64), rules, **keys)
    return bytes(slots), garbage


@pytest.mark.parametrize("vector", VECTORS, ids=str)
def test_fill_slots_rebuilds_the_golden_index(vector):
    golden = vector.index_path.read_bytes()
    index = IndexHeader.unpack(golden)
    header, table, key_buffer, hashes = _columns(vector.log_path, index.hash_seed,
                                                     index.hash_size)
    addresses = (table.position << np.uint64(index.entry_block_bits)) | table.entry_index
    slots, garbage = _fill(index.hash_capacity, index.hash_size, index.address_size, hashes,
                           addresses, vector.producer, table, key_buffer)
    assert slots == golden[INDEX_HEADER_SIZE:]
    assert garbage == index.garbage_size


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS, compression=st.sampled_from(COMPRESSIONS),
       rules=st.sampled_from(["c", "java"]), hash_size=st.sampled_from([4, 8]),
       capacity_extra=st.integers(0, 5))
def test_fill_slots_equals_the_python_replay(tmp_path_factory, operations, compression, rules,
                                             hash_size, capacity_extra):
    base = tmp_path_factory.mktemp("replay") / "data"
    _write_store(base, operations, compression, 16)
    header, table, key_buffer, hashes = _columns(base.with_suffix(".spl"), 5, hash_size)
    addresses = (table.position << np.uint64(6)) | table.entry_index
    capacity = header.num_puts + 1 + capacity_extra
    def key_of(i):
        start = int(table.key_offset[i])
        return key_buffer[start:start + int(table.key_len[i])]
    slot_hashes, slot_addresses, garbage = robinhood.replay(
        hashes, addresses, table.kind, table.key_len, table.value_len, key_of, capacity, rules)
    expected = np.zeros(capacity, dtype=slot_dtype(hash_size, 8))
    expected["hash"], expected["address"] = slot_hashes, slot_addresses
    assert _fill(capacity, hash_size, 8, hashes, addresses, rules, table, key_buffer) == (
        expected.tobytes(), garbage)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_fill_slots_over_live_entries_is_the_canonical_table(tmp_path, compression):
    """sparkey-java's rules over the live entries give write_index's canonical table."""
    operations = [("P", b"k%d" % (i % 700), b"v%d" % i) for i in range(1000)]
    operations += [("D", b"k%d" % i, b"") for i in range(0, 700, 3)]
    _write_store(tmp_path / "data", operations, compression, 64)
    golden = (tmp_path / "data.spi").read_bytes()
    index = IndexHeader.unpack(golden)
    with sparkey.open(tmp_path / "data") as reader:
        addresses = reader._index.live_addresses()
    _, table, _, hashes = _columns(tmp_path / "data.spl", index.hash_seed, index.hash_size)
    all_addresses = (table.position << np.uint64(index.entry_block_bits)) | table.entry_index
    live = np.isin(all_addresses, addresses)
    slots, garbage = _fill(index.hash_capacity, index.hash_size, index.address_size,
                           hashes[live], all_addresses[live], "java")
    assert slots == golden[INDEX_HEADER_SIZE:]
    assert garbage == 0


def test_fill_slots_inputs_are_checked():
    hashes, addresses = np.array([1, 2], dtype=np.uint64), np.array([84, 90], dtype=np.uint64)
    with pytest.raises(ValueError):  # more entries than slots
        _native.fill_slots(bytearray(8), 4, 4, hashes, addresses, "c")
    with pytest.raises(ValueError):
        _native.fill_slots(bytearray(24), 4, 4, hashes, addresses, "canonical")
    with pytest.raises(ValueError):  # address 0 marks an empty slot
        _native.fill_slots(bytearray(24), 4, 4, hashes, addresses * 0, "c")
    with pytest.raises(ValueError):  # a 33-bit hash in 4 bytes
        _native.fill_slots(bytearray(24), 4, 4, hashes << np.uint64(32), addresses, "c")
    with pytest.raises(ValueError):
        _native.fill_slots(bytearray(23), 4, 4, hashes, addresses, "c")
    with pytest.raises(BufferError):  # read-only slots
        _native.fill_slots(b"\0" * 24, 4, 4, hashes, addresses, "c")
    with pytest.raises(TypeError):
        _native.fill_slots(bytearray(24), 4, 4, hashes, addresses, "c", kinds=np.zeros(2))
    with pytest.raises(ValueError):  # a key outside the key buffer
        _native.fill_slots(bytearray(24), 4, 4, hashes, addresses, "c",
                           kinds=np.zeros(2, dtype=np.uint8), key_buffer=b"ab",
                           key_offsets=np.array([0, 1], dtype=np.int64),
                           key_lengths=np.array([1, 2], dtype=np.int64),
                           value_lengths=np.zeros(2, dtype=np.int64))
