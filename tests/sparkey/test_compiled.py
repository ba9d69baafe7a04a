"""The compiled core against the pure-Python reference, through the public API.

Each store is opened twice in one process, once on ``sparkey._native`` and once on the reference
(``sparkey.native.module`` set to None while the reader opens, which is what
``OFFHEAP_PURE_PYTHON=1`` selects), and both readers must give the same answers and errors.
"""

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import sparkey
from sparkey import native
from sparkey.errors import ClosedError, EntryTypeError
from sparkey.format import INDEX_HEADER_SIZE, IndexHeader

pytestmark = pytest.mark.skipif(not native.compiled, reason="the compiled core is not running")


def _open_pure(base, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(native, "module", None)
        return sparkey.open(base)


@pytest.fixture(params=[("none", 4096, 4), ("none", 4096, 8), ("snappy", 64, 4),
                        ("zstd", 4096, 8), ("snappy", 16, 8)])
def base(request, tmp_path):
    """A store with overwrites, deletes, empty and large entries (some spanning blocks)."""
    compression, block_size, hash_size = request.param
    base = tmp_path / "data"
    with sparkey.Writer(base, compression, block_size, hash_size=hash_size) as writer:
        for i in range(2000):
            writer.put(b"key_%d" % i, b"value_%d" % i * (i % 7))
        writer.put(b"big", bytes(range(256)) * 40)
        writer.put(b"key_5", b"five")
        writer.delete(b"key_7")
        writer.put("clé", "été")
        writer.put(b"", b"")
    return base


def test_readers_give_the_same_answers(base, monkeypatch):
    keys = ([b"key_%d" % i for i in range(0, 2100, 3)]
            + [b"big", b"", "clé", b"key_7", b"absent", bytearray(b"key_1"), memoryview(b"key_2")])
    with sparkey.open(base) as fast, _open_pure(base, monkeypatch) as pure:
        assert "compiled" in repr(fast) and "pure-Python" in repr(pure)
        for key in keys:
            assert fast.get(key) == pure.get(key)
            assert (key in fast) == (key in pure)
        assert fast.get_many(keys) == pure.get_many(keys)
        assert fast.get_many(keys, default=b"-") == pure.get_many(keys, default=b"-")
        array = np.array([key for key in keys if isinstance(key, bytes) and key], dtype="S")
        assert fast.get_many(array) == pure.get_many(array)
        assert dict(fast.items()) == dict(pure.items())
        for reader in (fast, pure):
            with pytest.raises(EntryTypeError):
                reader.get(12)
            with pytest.raises(EntryTypeError):
                reader.get_many([b"a", 12])
            with pytest.raises(KeyError):
                reader[b"absent"]
    for reader in (fast, pure):
        with pytest.raises(ClosedError):
            reader.get(b"key_1")
        with pytest.raises(ClosedError):
            reader.get_many([b"key_1"])


def _answer(function, key):
    """What a lookup gives: ``("value", result)``, or the type of the ValueError it raises."""
    try:
        return "value", function(key)
    except ValueError as exc:
        return "error", type(exc)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), hash_size=st.sampled_from([4, 8]), count=st.integers(1, 14))
def test_probes_of_rearranged_slots_agree(tmp_path_factory, monkeypatch, data, hash_size, count):
    """The slots of a table in any order (so occupants sit at any distance from their home,
    across the wrap past the last slot, in clusters the build never makes): both cores read
    the same slots and give the same answers and errors."""
    base = tmp_path_factory.mktemp("slots") / "data"
    with sparkey.Writer(base, "none", hash_size=hash_size) as writer:
        for i in range(count):
            writer.put(b"key_%d" % i, b"value_%d" % i)
    index = base.with_suffix(".spi").read_bytes()
    header = IndexHeader.unpack(index)
    size = hash_size + header.address_size
    slots = [index[start:start + size]
             for start in range(INDEX_HEADER_SIZE, len(index), size)][:header.hash_capacity]
    shuffled = data.draw(st.permutations(slots))
    base.with_suffix(".spi").write_bytes(index[:INDEX_HEADER_SIZE] + b"".join(shuffled))
    keys = [b"key_%d" % i for i in range(count + 2)]
    with sparkey.open(base) as fast, _open_pure(base, monkeypatch) as pure:
        for key in keys:
            assert _answer(fast.get, key) == _answer(pure.get, key)
            assert _answer(fast.__contains__, key) == _answer(pure.__contains__, key)


def test_closed_log_under_an_open_index_raises_closed_error(base):
    with sparkey.open(base) as reader:
        reader._log.close()
        with pytest.raises(ClosedError):
            reader._index.get(b"key_1")
        with pytest.raises(ClosedError):
            reader._index.get_many([b"key_1"])


@pytest.mark.parametrize("closing", ["reader", "log"])
def test_closing_under_racing_lookups_raises_closed_error(base, closing):
    """Threads in get_many, get, [] and ``in`` while another closes the reader (or its log
    alone): each call answers as before or raises ClosedError, never anything else or a crash."""
    keys = [b"key_%d" % i for i in range(0, 2000, 7)] + [b"big"]
    with sparkey.open(base) as reader:
        expected = reader.get_many(keys)
    for _ in range(5):
        reader = sparkey.open(base)
        started, outcomes = threading.Barrier(4), []

        def work(call):
            started.wait()
            try:
                for _ in range(200):
                    call()
            except ClosedError:
                outcomes.append("closed")
            except BaseException as exc:  # reported below, in the main thread
                outcomes.append(exc)

        def many():
            assert reader.get_many(keys) == expected

        def single():
            assert [reader.get(key) for key in keys] == expected
            assert reader[b"big"] == expected[-1] and b"big" in reader

        threads = [threading.Thread(target=work, args=(call,)) for call in (many, many, single)]
        for thread in threads:
            thread.start()
        started.wait()
        (reader.close if closing == "reader" else reader._log.close)()
        for thread in threads:
            thread.join()
        assert outcomes == ["closed"] * 3
        reader.close()
        with pytest.raises(ClosedError):
            reader.get(b"key_1")
