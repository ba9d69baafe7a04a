"""A commit-mode DB holding a TreeMap and a LongHashMap against a SortedDict and a dict.

Two models are kept: the current state and the last committed one. Inserts, overwrites,
deletes, bulk and range calls change the current model; ``commit`` copies it to the committed
one; ``rollback`` copies back; closing commits; a *crash* copies the file as it is on disk at
that moment (between commits nothing reaches it) and opens the copy, which must hold exactly the
committed state; a reader opened beside the writer must see the committed state too; and
compaction must change nothing but the file size.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from sortedcontainers import SortedDict

from offheap.db.database import DB

KEYS = st.integers(-50, 50)
VALUES = st.one_of(st.none(), st.integers(-3, 3), st.text(max_size=3),
                   st.binary(min_size=8, max_size=40))
TREE_OPTIONS = dict(node_size=4, cache_size=8)


class DurableDBVersusModels(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="durable-state-")
        self.path = os.path.join(self.directory, "db.offheap")
        self.db = DB.file(self.path)
        self._open_collections()
        self.db.commit()
        self.tree_model, self.table_model = SortedDict(), {}
        self.committed = (SortedDict(), {})

    def _open_collections(self):
        self.tree = self.db.tree_map("t", **TREE_OPTIONS)
        self.table = self.db.hash_map("h")

    # -- changes ------------------------------------------------------------------------------

    @rule(k=KEYS, v=VALUES)
    def tree_put(self, k, v):
        self.tree[k] = v
        self.tree_model[k] = v

    @rule(k=KEYS)
    def tree_delete(self, k):
        assert self.tree.pop(k, "<absent>") == self.tree_model.pop(k, "<absent>")

    @rule(lo=KEYS, hi=KEYS)
    def tree_delete_range(self, lo, hi):
        doomed = list(self.tree_model.irange(lo, hi))
        assert self.tree.delete_range(lo, hi) == len(doomed)
        for k in doomed:
            del self.tree_model[k]

    @rule(keys=st.lists(KEYS, max_size=40), v=VALUES)
    def tree_bulk(self, keys, v):
        self.tree.put_many(np.array(keys, np.int64), [v] * len(keys))
        self.tree_model.update((k, v) for k in keys)

    @rule(k=KEYS, v=VALUES)
    def table_put(self, k, v):
        self.table[k] = v
        self.table_model[k] = v

    @rule(k=KEYS)
    def table_delete(self, k):
        assert self.table.pop(k, "<absent>") == self.table_model.pop(k, "<absent>")

    @rule(pairs=st.lists(st.tuples(KEYS, VALUES), max_size=40))
    def table_bulk(self, pairs):
        self.table.put_many([k for k, _ in pairs], [v for _, v in pairs])
        self.table_model.update(pairs)

    @rule(keys=st.lists(KEYS, max_size=20))
    def table_delete_many(self, keys):
        present = {k for k in keys if k in self.table_model}
        assert self.table.delete_many(keys) == len(present)
        for k in present:
            del self.table_model[k]

    # -- transactions and lifetime ------------------------------------------------------------

    @rule()
    def commit(self):
        self.db.commit()
        self.committed = (self.tree_model.copy(), dict(self.table_model))

    @rule()
    def rollback(self):
        self.db.rollback()
        self.tree_model, self.table_model = self.committed[0].copy(), dict(self.committed[1])

    @rule()
    def close_and_reopen(self):
        self.db.close()
        self.committed = (self.tree_model.copy(), dict(self.table_model))
        self.db = DB.file(self.path)
        self._open_collections()

    @rule()
    def crash_copy_holds_the_last_commit(self):
        copy = os.path.join(self.directory, "crash-copy")
        shutil.copyfile(self.path, copy)
        with DB.file(copy) as db:
            self._assert_committed(db.tree_map("t"), db.hash_map("h"))
            db.rollback()
        os.remove(copy)

    @rule()
    def reader_sees_the_last_commit(self):
        with DB.file(self.path, readonly=True) as reader:
            self._assert_committed(reader.tree_map("t"), reader.hash_map("h"))

    @rule()
    def compact(self):
        self.db.compact()
        self.committed = (self.tree_model.copy(), dict(self.table_model))

    def _assert_committed(self, tree, table):
        tree_model, table_model = self.committed
        assert list(tree.items()) == list(tree_model.items())
        assert dict(table.items()) == table_model
        tree._check()
        table._check()

    # -- checks -------------------------------------------------------------------------------

    @rule()
    def iterate(self):
        assert list(self.tree.items()) == list(self.tree_model.items())
        assert list(reversed(self.tree)) == list(reversed(self.tree_model))
        assert dict(self.table.items()) == self.table_model

    @invariant()
    def agrees(self):
        assert len(self.tree) == len(self.tree_model)
        assert len(self.table) == len(self.table_model)
        self.tree._check()
        self.table._check()

    def teardown(self):
        self.db.close()
        shutil.rmtree(self.directory, ignore_errors=True)


TestDurableDB = DurableDBVersusModels.TestCase
TestDurableDB.settings = settings(max_examples=30, stateful_step_count=30, deadline=None,
                                  suppress_health_check=[HealthCheck.too_slow])
