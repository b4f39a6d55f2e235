"""Model-based test: the store against a plain dict through random histories.

Steps: put, delete, batch, snapshot (checked later against a frozen copy of
the model), get, scan with random bounds / prefix / reverse, and
close-and-reopen. Runs on the memory and local backends.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import kvstore
from kvstore.objstore.memory import MemoryStore

KEYS = st.sampled_from([b"a", b"aa", b"ab", b"b", b"ba", b"c", b"\x00", b"\xff", b"\xff\xff", b"k\x00z"])
VALUES = st.binary(max_size=12)
BOUNDS = st.one_of(st.none(), KEYS)


def _expected_scan(model: dict[bytes, bytes], start, end, prefix, reverse) -> list[tuple[bytes, bytes]]:
    items = sorted(
        (k, v)
        for k, v in model.items()
        if (start is None or k >= start) and (end is None or k < end) and (prefix is None or k.startswith(prefix))
    )
    return items[::-1] if reverse else items


class StoreModel(RuleBasedStateMachine):
    backend = "memory"

    def __init__(self) -> None:
        super().__init__()
        if self.backend == "memory":
            self.url = MemoryStore(f"memory://{uuid.uuid4().hex}")
            self.tmp = None
        else:
            self.tmp = tempfile.mkdtemp(prefix="lakekv-model-")
            self.url = self.tmp + "/store"
        # Small inline threshold so some commits use delta SSTs.
        self.options = {"poll_interval_s": 0, "inline_delta_bytes": 64}
        self.db = kvstore.open(self.url, **self.options)
        self.model: dict[bytes, bytes] = {}
        self.snapshots: list[tuple[kvstore.Snapshot, dict[bytes, bytes]]] = []

    def teardown(self) -> None:
        self.db.close()
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(key=KEYS, value=VALUES)
    def put(self, key: bytes, value: bytes) -> None:
        self.db.put(key, value)
        self.model[key] = value

    @rule(key=KEYS)
    def delete(self, key: bytes) -> None:
        self.db.delete(key)
        self.model.pop(key, None)

    @rule(ops=st.lists(st.tuples(KEYS, st.one_of(st.none(), VALUES)), min_size=1, max_size=8))
    def batch(self, ops) -> None:
        batch = kvstore.WriteBatch()
        for key, value in ops:
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        self.db.write(batch)
        for key, value in ops:
            if value is None:
                self.model.pop(key, None)
            else:
                self.model[key] = value

    @precondition(lambda self: len(self.snapshots) < 4)
    @rule()
    def take_snapshot(self) -> None:
        self.snapshots.append((self.db.snapshot(), dict(self.model)))

    @rule(key=KEYS)
    def get(self, key: bytes) -> None:
        assert self.db.get(key) == self.model.get(key)

    @rule(start=BOUNDS, end=BOUNDS, prefix=st.one_of(st.none(), st.sampled_from([b"a", b"\xff", b"b"])), reverse=st.booleans())
    def scan(self, start, end, prefix, reverse) -> None:
        got = list(self.db.scan(start=start, end=end, prefix=prefix, reverse=reverse))
        assert got == _expected_scan(self.model, start, end, prefix, reverse)

    @rule(key=KEYS, reverse=st.booleans())
    def check_snapshots(self, key: bytes, reverse: bool) -> None:
        for snap, frozen in self.snapshots:
            assert snap.get(key) == frozen.get(key)
            assert list(snap.scan(reverse=reverse)) == _expected_scan(frozen, None, None, None, reverse)

    @rule()
    def reopen(self) -> None:
        version = self.db.version
        self.db.close()
        self.snapshots.clear()
        self.db = kvstore.open(self.url, create=False, **self.options)
        assert self.db.version == version

    @invariant()
    def memtable_is_well_formed(self) -> None:
        self.db._state.layers.memtable.check_invariants()


class LocalStoreModel(StoreModel):
    backend = "local"


TestStoreModelMemory = StoreModel.TestCase
TestStoreModelMemory.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestStoreModelLocal = LocalStoreModel.TestCase
TestStoreModelLocal.settings = settings(max_examples=25, stateful_step_count=30, deadline=None)
