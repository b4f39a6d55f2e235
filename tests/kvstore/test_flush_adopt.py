"""Flush adopts a large commit's delta SST as an L0 SST instead of rewriting it.

The claims: the flush writes no second copy of a delta SST's bytes; reads,
time travel, compaction, GC and reopen see exactly what a model says, also
when small and large commits interleave (L0 keeps disjoint seq ranges); a
crash at every step of a flush that adopts, and of the compaction after it,
loses nothing; a flush that loses a race leaves the adopted file alone; and
another process reads the same data before and after.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvstore
from kvstore.errors import StoreError
from kvstore.objstore.base import ObjectStore
from kvstore.objstore.faulty import FaultyStore
from kvstore.objstore.forwarding import ForwardingStore
from kvstore.objstore.memory import MemoryStore
from maintenance_util import QUIET, sst_paths

# Every commit of more than a few rows goes to a delta SST.
SMALL_INLINE = dict(QUIET, inline_delta_bytes=128)
BASE = dict(SMALL_INLINE, max_commit_attempts=3, backoff_min_s=0.0001, backoff_max_s=0.001, hint_interval_s=3600.0)
COLLECTING = dict(BASE, retention_window_s=0.0, gc_grace_s=0.0, gc_min_roots=1)


class BytesWrittenStore(ForwardingStore):
    """Counts the bytes put under each top-level prefix (``sst``, ``tree``, ...)."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self._lock = threading.Lock()
        self.written: Counter[str] = Counter()

    def _note(self, path: str, data: bytes) -> None:
        with self._lock:
            self.written[path.split("/", 1)[0]] += len(data)

    def put(self, path: str, data: bytes) -> None:
        self._note(path, data)
        self.inner.put(path, data)

    def put_if_absent(self, path: str, data: bytes) -> bool:
        self._note(path, data)
        return self.inner.put_if_absent(path, data)


def _big_batch(prefix: bytes, count: int, value: bytes) -> kvstore.WriteBatch:
    batch = kvstore.WriteBatch()
    for i in range(count):
        batch.put(prefix + b"%06d" % i, value + b"%d" % i)
    return batch


def test_flush_writes_no_second_copy_of_a_delta_sst() -> None:
    counting = BytesWrittenStore(MemoryStore())
    with kvstore.open(counting, **QUIET) as db:
        db.write(_big_batch(b"k", 20_000, b"v" * 100))
        delta_bytes = counting.written["sst"]
        assert delta_bytes > db.options.inline_delta_bytes  # the commit wrote a delta SST
        [delta_path] = sst_paths(counting)
        result = db.flush()
        assert result is not None and result.written == ()
        assert [info.path for info in result.adopted] == [delta_path]
        stats = db.maintenance_stats()
        assert stats["flushed_bytes"] == 0 and stats["adopted_ssts"] == 1 and stats["adopted_bytes"] == delta_bytes
        assert counting.written["sst"] == delta_bytes  # the flush wrote no SST bytes
        assert counting.written["tree"] < delta_bytes / 100  # only a small manifest
        assert db.stats()["l0_files"] == 1 and db.stats()["memtable_keys"] == 0
        assert sst_paths(counting) == {delta_path}
        assert db.get(b"k000123") == b"v" * 100 + b"123"
        assert db.verify().ok
    with kvstore.open(counting.inner, create=False, **QUIET) as db:
        assert sum(1 for _ in db.scan()) == 20_000
        assert db.stats()["memtable_keys"] == 0  # opening reads the rows from the adopted L0 SST


def test_small_commits_around_delta_ssts_keep_l0_seq_ranges_disjoint() -> None:
    """A key rewritten by small commits before and after a large one reads its newest value."""
    inner = MemoryStore()
    with kvstore.open(inner, **SMALL_INLINE) as db:
        db.put(b"a", b"small-1")
        db.write(_big_batch(b"a", 50, b"big-2"))  # keys a000000.. next to a
        db.put(b"a000003", b"small-3")
        big = kvstore.WriteBatch()
        big.put(b"a", b"big-4")
        for i in range(40):
            big.put(b"b%03d" % i, b"x" * 20)
        db.write(big)
        db.put(b"b007", b"small-5")
        result = db.flush()
        assert result is not None and len(result.adopted) == 2 and len(result.written) == 3
        assert db.get(b"a") == b"big-4" and db.get(b"a000003") == b"small-3" and db.get(b"b007") == b"small-5"
        # newest first: seq ranges of consecutive L0 SSTs do not overlap
        infos = [*result.written, *result.adopted]
        ordered = sorted(infos, key=lambda info: info.min_seq)
        for older, newer in zip(ordered, ordered[1:]):
            assert older.max_seq < newer.min_seq
    with kvstore.open(inner, create=False, **SMALL_INLINE) as db:
        assert db.get(b"a") == b"big-4" and db.get(b"b007") == b"small-5"
        db.compact(full=True)
        assert db.get(b"a") == b"big-4" and db.get(b"a000003") == b"small-3"
        assert db.verify().ok


def test_a_flush_that_loses_the_race_leaves_the_adopted_delta_sst() -> None:
    inner = MemoryStore()
    with kvstore.open(inner, **SMALL_INLINE) as first, kvstore.open(inner, create=False, **SMALL_INLINE) as second:
        first.write(_big_batch(b"k", 200, b"v"))
        second.refresh()
        [delta_path] = sst_paths(inner)
        assert first.flush() is not None
        assert second.flush() is None  # the rival flushed these versions first
        assert delta_path in sst_paths(inner)
        for db in (first, second):
            db.refresh()
            assert db.get(b"k000199") == b"v199"
            assert db.verify().ok


# -- a model under random interleavings -----------------------------------------------------------

_KEYS = [b"k%02d" % i for i in range(12)]
_step = st.one_of(
    st.tuples(st.just("small"), st.sampled_from(_KEYS), st.one_of(st.none(), st.binary(max_size=4))),
    st.tuples(st.just("large"), st.lists(st.sampled_from(_KEYS), min_size=1, unique=True), st.binary(max_size=4)),
    st.tuples(st.just("flush"), st.none(), st.none()),
    st.tuples(st.just("compact"), st.none(), st.none()),
    st.tuples(st.just("reopen"), st.none(), st.none()),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_step, max_size=25))
def test_reads_equal_a_model_through_adopting_flushes(steps: list[tuple]) -> None:
    inner = MemoryStore()
    model: dict[bytes, bytes] = {}
    history: dict[int, dict[bytes, bytes]] = {}
    db = kvstore.open(inner, **SMALL_INLINE)
    try:
        for op, arg, value in steps:
            if op == "small":
                if value is None:
                    db.delete(arg)
                    model.pop(arg, None)
                else:
                    db.put(arg, value)
                    model[arg] = value
            elif op == "large":
                batch = kvstore.WriteBatch()
                for key in arg:
                    batch.put(key, value + b"-" * 40)  # > inline_delta_bytes with a few keys
                    model[key] = value + b"-" * 40
                db.write(batch)
            elif op == "flush":
                db.flush()
            elif op == "compact":
                db.compact(full=True)
            else:
                db.close()
                db = kvstore.open(inner, create=False, **SMALL_INLINE)
            history[db.version] = dict(model)
            assert dict(db.scan()) == model
            for key in _KEYS:
                assert db.get(key) == model.get(key)
        for version, expected in history.items():
            with db.at(version=version) as view:
                assert dict(view.scan()) == expected, version
        db.flush()
        db.compact(full=True)
        assert dict(db.scan()) == model
        assert db.verify().ok
    finally:
        db.close()


# -- crashes at every step of an adopting flush and the compaction after it ------------------------

def _prepare(inner: MemoryStore) -> dict[int, dict[bytes, bytes]]:
    """Unflushed versions: small commits between delta SSTs; the model per version."""
    model: dict[bytes, bytes] = {}
    history: dict[int, dict[bytes, bytes]] = {}
    with kvstore.open(inner, **BASE) as db:
        db.write(_big_batch(b"k", 30, b"flushed"))
        db.flush()
        for round_ in range(3):
            batch = _big_batch(b"k", 30 - 5 * round_, b"r%d-" % round_)
            db.write(batch)
            for i in range(30 - 5 * round_):
                model[b"k%06d" % i] = b"r%d-%d" % (round_, i)
            history[db.version] = dict(model)
            db.put(b"k%06d" % round_, b"small%d" % round_)
            model[b"k%06d" % round_] = b"small%d" % round_
            db.delete(b"k%06d" % (10 + round_))
            model.pop(b"k%06d" % (10 + round_), None)
            history[db.version] = dict(model)
    return history


def _flush_then_compact(db: kvstore.Store) -> None:
    db.flush()
    db.compact(full=True)


def _check_after_reopen(inner: MemoryStore, history: dict[int, dict[bytes, bytes]], context: str) -> None:
    latest = history[max(history)]
    with kvstore.open(inner, create=False, **COLLECTING) as db:
        assert dict(db.scan()) == latest, context
        report = db.verify()
        assert report.ok, f"{context}: {report.problems}"
        for version, expected in history.items():
            with db.at(version=version) as view:
                assert dict(view.scan()) == expected, f"{context}: version {version}"
        _flush_then_compact(db)
        db.gc()
        report = db.verify()
        assert report.ok and report.unreferenced == (), f"{context}: {report}"
        assert dict(db.scan()) == latest, context


def test_crash_at_every_step_of_an_adopting_flush_and_compaction() -> None:
    probe = MemoryStore()
    _prepare(probe)
    faulty = FaultyStore(probe, seed=0)
    with kvstore.open(faulty, **BASE) as db:
        before = len(faulty.log)
        result = db.flush()
        assert result is not None and len(result.adopted) == 3  # the scenario adopts
        db.compact(full=True)
        needed = len(faulty.log) - before
    assert needed >= 4
    for crash_at in range(needed + 1):
        inner = MemoryStore()
        history = _prepare(inner)
        faulty = FaultyStore(inner, seed=crash_at)
        with kvstore.open(faulty, **BASE) as db:
            faulty.crash_after(crash_at)
            try:
                _flush_then_compact(db)
            except StoreError:
                assert faulty.crashed, f"failed at call {crash_at} without a crash"
        _check_after_reopen(inner, history, f"crashed after {crash_at} calls")


class _AheadClock:
    """A storage clock the test moves an hour ahead: what was written before is
    then certainly outside a zero retention window and grace period."""

    def __init__(self) -> None:
        self.skew = 0.0

    def __call__(self) -> float:
        return time.time() + self.skew


@pytest.mark.parametrize("seed", range(4))
def test_random_errors_around_an_adopting_flush_and_compaction(seed: int) -> None:
    inner = MemoryStore()
    history = _prepare(inner)
    faulty = FaultyStore(inner, seed=seed)
    with kvstore.open(faulty, **BASE) as db:
        faulty.error_rate = faulty.after_rate = 0.15
        for _ in range(3):
            try:
                _flush_then_compact(db)
            except StoreError:
                continue  # an injected fault: the operation may fail, never corrupt
        faulty.error_rate = faulty.after_rate = 0.0
    _check_after_reopen(inner, history, f"faults, seed {seed}")


def test_gc_after_the_roots_go_keeps_the_adopted_sst() -> None:
    clock = _AheadClock()
    inner = MemoryStore(clock=clock)
    with kvstore.open(inner, **COLLECTING) as db:
        db.write(_big_batch(b"k", 100, b"v"))
        [delta_path] = sst_paths(inner)
        delta_version = db.version
        db.flush()
        for i in range(3):
            db.put(b"later%d" % i, b"x")
    clock.skew += 3600.0
    with kvstore.open(inner, create=False, **COLLECTING) as db:  # measures the storage clock anew
        report = db.gc()
        assert delta_version in report.deleted_roots  # the root that wrote it is gone
        assert delta_path in sst_paths(inner) and delta_path not in report.deleted_ssts
    with kvstore.open(inner, create=False, **COLLECTING) as db:
        assert db.get(b"k000042") == b"v42"
        assert db.verify().ok


# -- another process ----------------------------------------------------------------------------

_READER = textwrap.dedent(
    """
    import hashlib, sys
    import kvstore

    def digest(reader):
        h = hashlib.sha256()
        for key, value in reader.scan():
            h.update(key + b"=" + value + b";")
        return h.hexdigest()

    with kvstore.open(sys.argv[1], create=False, poll_interval_s=0, background_maintenance=False) as db:
        version = db.version
        print(version, digest(db), flush=True)
        with db.at(version=version) as snapshot:
            sys.stdin.readline()  # the writer flushed and compacted meanwhile
            print(digest(snapshot), flush=True)
            db.refresh()
            print(db.version, digest(db), db.stats()["flushed_upto"], flush=True)
    """
)


def test_another_process_reads_the_same_before_and_after_adoption(tmp_path: Path) -> None:
    import hashlib

    def digest(items: dict[bytes, bytes]) -> str:
        h = hashlib.sha256()
        for key in sorted(items):
            h.update(key + b"=" + items[key] + b";")
        return h.hexdigest()

    url = str(tmp_path / "store")
    model = {b"k%06d" % i: b"v%d" % i for i in range(5000)}
    with kvstore.open(url, **SMALL_INLINE) as db:
        db.write(_big_batch(b"k", 5000, b"v"))
        reader = subprocess.Popen(
            [sys.executable, "-c", _READER, url],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        try:
            version, before = reader.stdout.readline().split()
            assert int(version) == db.version and before == digest(model)
            result = db.flush()
            assert result is not None and len(result.adopted) == 1 and result.written == ()
            db.compact(full=True)
            db.put(b"after", b"1")
            reader.stdin.write("go\n")
            reader.stdin.flush()
            snapshot_digest = reader.stdout.readline().split()[0]
            latest_version, latest, flushed_upto = reader.stdout.readline().split()
            assert reader.wait(timeout=120) == 0
        finally:
            if reader.poll() is None:
                reader.kill()
                reader.wait()
        assert snapshot_digest == digest(model)
        model[b"after"] = b"1"
        assert int(latest_version) == db.version and latest == digest(model)
        assert int(flushed_upto) >= int(version)


def test_background_flush_and_compaction_adopt_while_large_commits_land() -> None:
    """The maintenance threads flush (adopting) and compact while a writer commits large batches."""
    inner = MemoryStore()
    model: dict[bytes, bytes] = {}
    options = dict(
        inline_delta_bytes=128, poll_interval_s=0, maintenance_interval_s=0.01,
        flush_max_versions=3, l0_compaction_trigger=3,
    )
    with kvstore.open(inner, **options) as db:
        for round_ in range(40):
            batch = kvstore.WriteBatch()
            for i in range(round_ % 7, 60, 3):
                batch.put(b"k%03d" % i, b"r%d" % round_)
                model[b"k%03d" % i] = b"r%d" % round_
            db.write(batch)
            db.put(b"single", b"%d" % round_)
            model[b"single"] = b"%d" % round_
            assert db.get(b"single") == b"%d" % round_
        db.flush()
        stats = db.maintenance_stats()
        assert stats["flushes"] >= 1 and stats["adopted_ssts"] >= 1 and stats["background_errors"] == 0
        assert dict(db.scan()) == model
        assert db.verify().ok
    with kvstore.open(inner, create=False, **SMALL_INLINE) as db:
        assert dict(db.scan()) == model
        db.compact(full=True)
        assert dict(db.scan()) == model and db.verify().ok
