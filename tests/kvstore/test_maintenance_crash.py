"""Crashes and errors at every step of flush, compaction and GC, then reopen.

Maintenance never changes what the store holds, so after any crash and a
reopen the contents equal the model, every version still inside retention
reads as it did, and verify is clean. Leftovers of the interrupted operation
are unreferenced files that a later GC removes.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import kvstore
from kvstore.errors import StoreError
from kvstore.objstore.faulty import FaultyStore
from kvstore.objstore.memory import MemoryStore
from maintenance_util import QUIET

# Fast failure instead of long retry schedules once the store has "crashed";
# no hint thread racing the operation's calls.
BASE = dict(QUIET, max_commit_attempts=3, backoff_min_s=0.0001, backoff_max_s=0.001, hint_interval_s=3600.0)
# GC only collects outside the window and grace period.
COLLECTING = dict(BASE, retention_window_s=0.0, gc_grace_s=0.0, gc_min_roots=1)

History = dict[int, dict[bytes, bytes]]


def _prepare(inner: MemoryStore) -> History:
    """A store with L0s, runs, old trees, delta SSTs and unflushed versions; its model per version."""
    model: dict[bytes, bytes] = {}
    history: History = {}
    with kvstore.open(inner, inline_delta_bytes=128, **BASE) as db:
        for round_ in range(5):
            batch = kvstore.WriteBatch()
            for i in range(round_, 24, 2):
                batch.put(b"k%02d" % i, b"r%d" % round_ * (1 + i % 9))
                model[b"k%02d" % i] = b"r%d" % round_ * (1 + i % 9)
            if round_:
                batch.delete(b"k%02d" % (round_ * 3))
                model.pop(b"k%02d" % (round_ * 3), None)
            db.write(batch)
            history[db.version] = dict(model)
            db.put(b"single", b"%d" % round_)
            model[b"single"] = b"%d" % round_
            history[db.version] = dict(model)
            if round_ in (1, 3):
                db.flush()
                history[db.version] = dict(model)
            if round_ == 2:
                db.flush()
                db.compact(full=True)
                history[db.version] = dict(model)
        db.put(b"unflushed", b"1")
        model[b"unflushed"] = b"1"
        history[db.version] = dict(model)
    return _fill_gaps(history)


def _fill_gaps(history: History) -> History:
    filled: History = {}
    current: dict[bytes, bytes] = {}
    for version in range(max(history) + 1):
        current = history.get(version, current)
        filled[version] = current
    return filled


OPERATIONS: dict[str, tuple[Callable[[kvstore.Store], object], dict]] = {
    "flush": (lambda db: db.flush(), BASE),
    "compact": (lambda db: db.compact(full=True), BASE),
    "gc": (lambda db: db.gc(), COLLECTING),
}


def _calls_needed(operation: str) -> int:
    run, options = OPERATIONS[operation]
    inner = MemoryStore()
    _prepare(inner)
    faulty = FaultyStore(inner, seed=0)
    with kvstore.open(faulty, **options) as db:
        before = len(faulty.log)
        run(db)
        return len(faulty.log) - before


def _check_after_reopen(inner: MemoryStore, history: History, context: str) -> None:
    latest = history[max(history)]
    with kvstore.open(inner, create=False, **COLLECTING) as db:
        assert dict(db.scan()) == latest, context
        report = db.verify()
        assert report.ok, f"{context}: {report.problems}"
        for version in range(db.version + 1):
            expected = history.get(version, latest)
            try:
                with db.at(version=version) as view:
                    assert dict(view.scan()) == expected, f"{context}: version {version}"
            except kvstore.SnapshotTooOldError:
                pass  # GC may have collected it: only wrong data would be a failure
        db.flush()
        db.compact(full=True)
        db.gc()  # leftovers of the crashed operation go now
        report = db.verify()
        assert report.ok and report.unreferenced == (), f"{context}: {report}"
        assert dict(db.scan()) == latest, context


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_crash_at_every_step(operation: str) -> None:
    run, options = OPERATIONS[operation]
    needed = _calls_needed(operation)
    assert needed >= 3
    for crash_at in range(needed + 1):
        inner = MemoryStore()
        history = _prepare(inner)
        faulty = FaultyStore(inner, seed=crash_at)
        with kvstore.open(faulty, **options) as db:
            faulty.crash_after(crash_at)
            try:
                run(db)
            except StoreError:
                assert faulty.crashed, f"{operation} failed at call {crash_at} without a crash"
        _check_after_reopen(inner, history, f"{operation} crashed after {crash_at} calls")


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_random_errors_before_and_after_calls(operation: str, seed: int) -> None:
    run, options = OPERATIONS[operation]
    inner = MemoryStore()
    history = _prepare(inner)
    faulty = FaultyStore(inner, seed=seed)
    with kvstore.open(faulty, **options) as db:
        faulty.error_rate = faulty.after_rate = 0.15
        for _ in range(3):
            try:
                run(db)
            except StoreError:
                continue  # an injected fault: the operation may fail, never corrupt
        faulty.error_rate = faulty.after_rate = 0.0
    _check_after_reopen(inner, history, f"{operation} with faults, seed {seed}")
