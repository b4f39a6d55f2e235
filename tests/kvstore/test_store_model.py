"""Model-based test: the store against a plain dict through random histories.

Steps: put, delete, batch, snapshot (checked later against a frozen copy of
the model), get, scan with random bounds / prefix / reverse, and
close-and-reopen. Runs on the memory and local backends.

Maintenance steps: flush, compact (planned or full), gc, at(version) against
the model's copy at that version, checkpoint / remove / at(checkpoint), and
verify. Each example draws a time-travel window: a day (every version must
stay readable) or zero (only pinned versions must: checkpoints, open
snapshots and the head; others may raise SnapshotTooOldError, never return
wrong data). GC runs without a grace period, so it deletes all it may.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import kvstore
from kvstore.errors import SnapshotTooOldError
from kvstore.objstore.memory import MemoryStore
from kvstore.testing.seams import check_memtable

KEYS = st.sampled_from([b"a", b"aa", b"ab", b"b", b"ba", b"c", b"\x00", b"\xff", b"\xff\xff", b"k\x00z"])
VALUES = st.binary(max_size=12)
BOUNDS = st.one_of(st.none(), KEYS)
CHECKPOINTS = st.sampled_from(["c1", "c2"])
DAY = 86400.0


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
        self.db: kvstore.Store | None = None
        self.model: dict[bytes, bytes] = {}
        self.snapshots: list[tuple[kvstore.Snapshot, dict[bytes, bytes]]] = []
        self.history: dict[int, dict[bytes, bytes]] = {}  # version -> model at that version
        self.pinned: dict[str, int] = {}  # checkpoint name -> version
        self.dropped: set[int] = set()  # versions whose root GC deleted

    @initialize(window=st.sampled_from([0.0, DAY]))
    def open_store(self, window: float) -> None:
        # Small inline threshold so some commits use delta SSTs; maintenance
        # only through the steps, so the model knows every version.
        self.options = {
            "poll_interval_s": 0,
            "inline_delta_bytes": 24,  # a batch of 2+ rows goes to a delta SST
            "background_maintenance": False,
            "retention_window_s": window,
            "gc_grace_s": 0.0,
            "gc_min_roots": 1,
            "l0_compaction_trigger": 2,
        }
        self.db = kvstore.open(self.url, **self.options)
        self._record()

    def _record(self) -> None:
        """Map every version created since the last step to the current model."""
        newest = max(self.history, default=-1)
        for version in range(newest + 1, self.db.version + 1):
            self.history[version] = dict(self.model)

    def _must_be_readable(self, version: int) -> bool:
        pinned = set(self.pinned.values()) | {snap.version for snap, _ in self.snapshots} | {self.db.version}
        return self.options["retention_window_s"] == DAY or version in pinned

    def teardown(self) -> None:
        if self.db is not None:
            self.db.close()
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(key=KEYS, value=VALUES)
    def put(self, key: bytes, value: bytes) -> None:
        self.db.put(key, value)
        self.model[key] = value
        self._record()

    @rule(key=KEYS)
    def delete(self, key: bytes) -> None:
        self.db.delete(key)
        self.model.pop(key, None)
        self._record()

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
        self._record()

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
        assert {c.name: c.version for c in self.db.checkpoints()} == self.pinned

    # -- maintenance -------------------------------------------------------------

    @rule()
    def flush(self) -> None:
        self.db.flush()
        self._record()
        assert self.db.stats()["memtable_keys"] == 0  # every row is in the tree now

    @rule(full=st.booleans())
    def compact(self, full: bool) -> None:
        self.db.compact(full=full)
        self._record()
        if full:
            assert self.db.stats()["l0_files"] == 0 and self.db.stats()["sorted_runs"] <= 1

    @rule()
    def gc(self) -> None:
        report = self.db.gc()
        for version in report.deleted_roots:
            assert not self._must_be_readable(version), f"GC deleted pinned version {version}"
        self.dropped.update(report.deleted_roots)
        event(f"gc deleted roots: {bool(report.deleted_roots)}, files: {bool(report.deleted_ssts)}")

    @rule(data=st.data(), reverse=st.booleans())
    def at_version(self, data: st.DataObject, reverse: bool) -> None:
        version = data.draw(st.sampled_from(sorted(self.history)), label="version")
        expected = self.history[version]
        try:
            view = self.db.at(version=version)
        except SnapshotTooOldError:
            assert not self._must_be_readable(version), f"version {version} must still be readable"
            event("at(version): too old")
            return
        event("at(version): read")
        assert version not in self.dropped, f"version {version} was garbage-collected, yet readable"
        with view:
            assert list(view.scan(reverse=reverse)) == _expected_scan(expected, None, None, None, reverse)
            for key in (b"a", b"b", b"\xff"):
                assert view.get(key) == expected.get(key)

    @rule(name=CHECKPOINTS)
    def checkpoint(self, name: str) -> None:
        self.pinned[name] = self.db.checkpoint(name).version
        self._record()

    @precondition(lambda self: bool(self.pinned))
    @rule(data=st.data())
    def remove_checkpoint(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.pinned)), label="name")
        self.db.remove_checkpoint(name)
        del self.pinned[name]
        self._record()

    @precondition(lambda self: bool(self.pinned))
    @rule(data=st.data())
    def at_checkpoint(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.pinned)), label="name")
        with self.db.at(checkpoint=name) as view:
            assert view.version == self.pinned[name]
            assert list(view.scan()) == _expected_scan(self.history[view.version], None, None, None, False)

    @rule()
    def verify(self) -> None:
        report = self.db.verify()
        assert report.ok, report.problems

    @invariant()
    def memtable_is_well_formed(self) -> None:
        check_memtable(self.db)


class LocalStoreModel(StoreModel):
    backend = "local"


TestStoreModelMemory = StoreModel.TestCase
TestStoreModelMemory.settings = settings(max_examples=150, stateful_step_count=50, deadline=None)
TestStoreModelLocal = LocalStoreModel.TestCase
TestStoreModelLocal.settings = settings(max_examples=40, stateful_step_count=40, deadline=None)
