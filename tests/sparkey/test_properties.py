"""Hypothesis: random put/delete/flush/reopen sequences read back like a dict, for every codec."""

import pathlib
import tempfile

from hypothesis import given, settings, strategies as st

import sparkey
from sparkey.format import EntryKind

KEYS = st.one_of(st.binary(max_size=2), st.sampled_from([b"key", b"k" * 20, "clé"]))
OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("put"), KEYS, st.binary(max_size=60)),
    st.tuples(st.just("delete"), KEYS),
    st.just(("flush",)),
    st.just(("reopen",))), max_size=50)


def _as_bytes(key):
    return key.encode("utf-8") if isinstance(key, str) else key


def _check_store(base, oracle, probes):
    with sparkey.open(base) as reader:
        reader._check()
        assert list(reader.items()) == list(oracle.items())
        assert len(reader) == len(oracle)
        assert [reader.get(key) for key in probes] == [oracle.get(key) for key in probes]
        assert reader.get_many(probes) == [oracle.get(key) for key in probes]


@settings(max_examples=150, deadline=None)
@given(operations=OPERATIONS, compression=st.sampled_from(["none", "snappy", "zstd"]),
       block_size=st.sampled_from([10, 11, 16, 33, 64, 4096]),
       rules=st.sampled_from(["c", "java", "canonical"]))
def test_store_behaves_like_a_dict(operations, compression, block_size, rules):
    with tempfile.TemporaryDirectory() as directory:
        base = pathlib.Path(directory) / "data"
        oracle = {}  # ordered by each key's last PUT, as live iteration is
        raw, longest = [], 0
        probes = [b"absent", b""] + [_as_bytes(op[1]) for op in operations if len(op) > 1]
        writer = sparkey.Writer(base, compression, block_size, rules=rules)
        for op, *args in operations:
            if op == "put":
                key, value = _as_bytes(args[0]), args[1]
                writer.put(args[0], value)
                oracle.pop(key, None)
                oracle[key] = value
                longest = max(longest, len(key))
                raw.append((EntryKind.PUT, key, value))
            elif op == "delete":
                key = _as_bytes(args[0])
                writer.delete(args[0])
                oracle.pop(key, None)
                if len(key) <= longest:  # longer keys were never put: nothing is written
                    raw.append((EntryKind.DELETE, key, None))
            elif op == "flush":
                writer.flush()
            else:
                writer.close()
                _check_store(base, oracle, probes)
                writer = sparkey.Writer(base, rules=rules, mode="a")
        writer.close()
        _check_store(base, oracle, probes)
        with sparkey.LogReader(base.with_suffix(".spl")) as log:
            assert [(entry.kind, entry.key, entry.value) for entry in log] == raw


@settings(max_examples=60, deadline=None)
@given(operations=st.lists(st.tuples(st.binary(max_size=3), st.one_of(
           st.none(), st.binary(max_size=5))), max_size=80),
       compression=st.sampled_from(["none", "zstd"]))
def test_every_rule_set_indexes_the_same_mapping(operations, compression):
    with tempfile.TemporaryDirectory() as directory:
        base = pathlib.Path(directory) / "data"
        with sparkey.LogWriter(base.with_suffix(".spl"), compression, 16) as log:
            for key, value in operations:
                log.put(key, value) if value is not None else log.delete(key)
        contents = []
        for rules, method in (("c", "memory"), ("java", "memory"), ("canonical", "memory"),
                              ("canonical", "sorting")):
            header = sparkey.write_index(base.with_suffix(".spi"), base.with_suffix(".spl"),
                                         rules=rules, method=method, hash_seed=11)
            with sparkey.open(base) as reader:
                reader._check()
                contents.append((list(reader.items()), header.num_entries,
                                 header.max_displacement if rules != "c" else None))
        assert all(items == contents[0][0] for items, _, _ in contents)
        assert len({count for _, count, _ in contents}) == 1
