"""The compiled inner levels of a change's descent (``_pages.walk``, csrc/walk.c) against
``cursor._walk``, the Python loop it replaces.

Both are asked the same descents of the same tree and must return the same path (the same Inner
objects and child indices), range and leaf record id, and leave the node cache in the same
state: the same LRU order of inner nodes and the same over-capacity flag. Two trees changed
alike, one descending each way, must store the same pages. A damaged inner node raises
CorruptionError, a key of another type TypeError, on both.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings, strategies as st
from sortedcontainers import SortedDict

from offheap import TreeMap
from offheap.errors import CorruptionError
from offheap.treemap import cursor, page

pytestmark = pytest.mark.skipif(not page.COMPILED, reason="the compiled page codec is not loaded")

SMALL_INT_KEYS = st.integers(-300, 300)
STR_KEYS = st.text(alphabet="abcdé\U0001f600", max_size=5)
OPTIONS = st.fixed_dictionaries(dict(
    node_size=st.sampled_from([4, 5, 8]),
    write_cache=st.booleans(),
    cache_size=st.sampled_from([8, 2048]),
))


def _walks(tree: TreeMap, probes: list, compiled: bool) -> list:
    """Each probe's walk on one path, with the cache's inner LRU order and flag after it."""
    tree._tree.trim()
    inner = tree._tree.cache.inner
    nodes = tree._tree.cache._inner
    shape = tree._tree.shape
    answers = []
    for key in probes:
        if compiled:
            path, lo, hi, recid = cursor._compiled_pages.walk(nodes, inner, shape.root,
                                                              shape.height - 1, key)
        else:
            path, lo, hi, recid = cursor._walk(inner, shape.root, shape.height - 1, key)
        assert all(node is nodes[node.recid] for node, _ in path)
        answers.append(([(node.recid, i) for node, i in path], lo, hi, recid, list(nodes),
                        tree._tree.cache.over_capacity))
    return answers


def _walk_both(make, fill, probes: list) -> None:
    """The compiled walk and the Python one, each on its own tree filled alike, agree."""
    answers = []
    for compiled in (True, False):
        tree = make()
        fill(tree)
        answers.append(_walks(tree, probes, compiled))
        tree.close()
    assert answers[0] == answers[1]


@settings(max_examples=40, deadline=None)
@given(options=OPTIONS, inserts=st.lists(SMALL_INT_KEYS, min_size=20, max_size=150),
       probes=st.lists(SMALL_INT_KEYS, min_size=1, max_size=20))
@example(options=dict(node_size=4, write_cache=True, cache_size=8),
         inserts=list(range(-300, 300, 7)), probes=[5, -100, 200, 5])
def test_int64_walks_agree(options, inserts, probes):
    _walk_both(lambda: TreeMap(key="int64", value="object", **options),
               lambda tree: tree.update((key, key) for key in inserts),
               probes + [-(1 << 63), (1 << 63) - 1, 1 << 70])


@settings(max_examples=25, deadline=None)
@given(options=OPTIONS, inserts=st.lists(STR_KEYS, min_size=20, max_size=80),
       probes=st.lists(STR_KEYS, min_size=1, max_size=15))
def test_str_walks_agree(options, inserts, probes):
    _walk_both(lambda: TreeMap(key="str", value="object", **options),
               lambda tree: tree.update((key, len(key)) for key in inserts), probes + [""])


def _stored_pages(tree: TreeMap) -> dict:
    tree.flush()
    store = tree._tree.nodes.store
    return {recid: bytes(store.get(recid)) for recid in tree._tree.all_recids()}


@settings(max_examples=30, deadline=None)
@given(options=OPTIONS, inserts=st.lists(SMALL_INT_KEYS, max_size=150),
       deletes=st.lists(SMALL_INT_KEYS, max_size=80))
def test_changes_store_the_same_pages(options, inserts, deletes):
    """Inserts and deletes descending through the compiled walk and through the Python loop
    leave the same tree in the same pages, and the same entries as a SortedDict."""
    trees = []
    for compiled in (True, False):
        with pytest.MonkeyPatch.context() as patch:
            if not compiled:
                patch.setattr(cursor, "_compiled_pages", None)
            tree, oracle = TreeMap(key="int64", value="object", **options), SortedDict()
            for key in inserts:
                tree[key] = oracle[key] = key * 3
            for key in deletes:
                tree.pop(key, None)
                oracle.pop(key, None)
            tree._check()
            assert list(tree.items()) == list(oracle.items())
            trees.append(tree)
    assert trees[0]._tree.shape == trees[1]._tree.shape
    assert _stored_pages(trees[0]) == _stored_pages(trees[1])
    for tree in trees:
        tree.close()


@pytest.mark.parametrize("compiled", [True, False])
def test_damaged_inner_node_and_wrong_keys_fail_loud(monkeypatch, compiled):
    if not compiled:
        monkeypatch.setattr(cursor, "_compiled_pages", None)
    tree = TreeMap(key="int64", value="object", node_size=4)
    for key in range(100):
        tree[key] = key
    with pytest.raises(TypeError):
        tree["a string"] = 1
    root = tree._tree.cache.inner(tree._tree.shape.root)
    children = root.children
    root.children = children[:1]
    tree._hint.forget()
    with pytest.raises((CorruptionError, IndexError)) as raised:
        tree[1000] = 1
    if compiled:
        assert raised.type is CorruptionError
    root.children = children
    tree._hint.forget()
    tree[1000] = 1
    assert tree[1000] == 1
    tree.close()
