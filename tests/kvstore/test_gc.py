"""GC: what it deletes, what it must keep, and GC racing writers and readers."""

from __future__ import annotations

import math
import multiprocessing
import os
import random
import time
from pathlib import Path

import pytest

import kvstore
from kvstore.chain import HINT_PATH, VersionChain
from kvstore.errors import NotWrittenError
from kvstore.objstore.local import TEMP_DIR, LocalStore
from kvstore.objstore.memory import MemoryStore
from full_disk_util import WRITTEN_PATH, stalled_writer, writer_killed_mid_write
from maintenance_util import QUIET, sst_paths

SHORT = dict(QUIET, retention_window_s=0, gc_grace_s=0, gc_min_roots=1)
# GC deletes only names the engine generates (kvstore.format.names).
ORPHAN = "sst/" + "0" * 32 + ".sst"
IN_FLIGHT = "sst/" + "1" * 32 + ".sst"


class _StorageClock:
    """A storage clock the test runs ahead: what was written before :meth:`later` is
    certainly outside a zero retention window, even if the machine stalls between a
    commit and GC's clock probe (which would make a version written a moment ago young).

    With ``whole_seconds`` it stamps like S3 and SeaweedFS (LastModified truncated to
    the second): it runs with the local clock, ``skew`` seconds off, so a handle's
    :class:`~kvstore.clock.StorageClock` measures it as it would a real one."""

    def __init__(self, whole_seconds: bool = False) -> None:
        self.skew = 0.0
        self.whole_seconds = whole_seconds

    def exact(self) -> float:
        return time.time() + self.skew

    def __call__(self) -> float:
        return float(math.floor(self.exact())) if self.whole_seconds else self.exact()

    def later(self, seconds: float = 3600.0) -> None:
        self.skew += seconds

    def at_fraction(self, fraction: float) -> None:
        """Set the skew in (-1, 0] so that the storage is ``fraction`` into its current second."""
        self.skew = 0.0
        self.skew = -((self.exact() - fraction) % 1.0)


def _churn(db: kvstore.Store, rounds: int = 4) -> dict[bytes, bytes]:
    model: dict[bytes, bytes] = {}
    for round_ in range(rounds):
        for i in range(10):
            db.put(b"k%d" % i, b"r%d" % round_)
            model[b"k%d" % i] = b"r%d" % round_
        db.delete(b"k%d" % round_)
        model.pop(b"k%d" % round_)
        db.flush()
    db.compact(full=True)
    return model


def test_gc_inside_the_window_deletes_only_old_unreferenced_files() -> None:
    inner = MemoryStore()
    with kvstore.open(inner, **QUIET) as db:
        _churn(db)
        inner.put(ORPHAN, b"left by a crashed flush")
        report = db.gc()
        assert report.deleted_roots == () and report.deleted_ssts == () and report.deleted_trees == ()
        assert ORPHAN in sst_paths(inner)  # younger than the grace period
    with kvstore.open(inner, **dict(QUIET, gc_grace_s=0)) as db:
        report = db.gc()
        assert report.deleted_ssts == (ORPHAN,) and report.deleted_roots == ()
        assert db.verify().ok


def test_gc_outside_the_window_deletes_old_roots_trees_and_ssts() -> None:
    inner = MemoryStore()
    with kvstore.open(inner, **SHORT) as db:
        _churn(db)
        model = _churn(db)  # the first round's SSTs are now referenced by old roots only
        head = db.version
        report = db.gc()
        assert report.deleted_roots and report.deleted_roots[0] == 0
        assert report.deleted_trees and report.deleted_ssts and report.bytes_freed > 0
        versions = VersionChain(inner).list_versions()
        assert versions == list(range(report.oldest_kept, head + 1))  # still dense
        assert inner.get(HINT_PATH) == str(head).encode()
        verify = db.verify()
        assert verify.ok and verify.unreferenced == ()
        assert dict(db.scan()) == model
    with kvstore.open(inner, create=False, **QUIET) as db:  # version 0 is gone; open still works
        assert db.version == head and dict(db.scan()) == model


def test_dry_run_reports_without_deleting() -> None:
    clock = _StorageClock()
    inner = MemoryStore(clock=clock)
    with kvstore.open(inner, **SHORT) as db:
        _churn(db)
        _churn(db)
        clock.later()  # the dry run and the real one see the same old versions
        before = {meta.path for meta in inner.list()}
        dry = db.gc(dry_run=True)
        assert dry.dry_run and dry.deleted_roots and dry.deleted_ssts
        assert {meta.path for meta in inner.list()} == before
        real = db.gc()
        assert (real.deleted_roots, real.deleted_ssts, real.deleted_trees) == (
            dry.deleted_roots,
            dry.deleted_ssts,
            dry.deleted_trees,
        )


def test_gc_keeps_unflushed_roots_and_the_minimum_count() -> None:
    clock = _StorageClock()
    inner = MemoryStore(clock=clock)
    with kvstore.open(inner, **SHORT) as db:
        for i in range(20):
            db.put(b"k%d" % i, b"v")
        clock.later()
        assert db.gc().deleted_roots == ()  # all unflushed: opening needs every one
        db.flush()
        db.put(b"after", b"v")
    clock.later()  # every version is outside the window: only gc_min_roots keeps them
    with kvstore.open(inner, **dict(SHORT, gc_min_roots=5)) as db:
        report = db.gc()
        assert report.oldest_kept == db.version - 4
        assert len(VersionChain(inner).list_versions()) == 5
        assert db.get(b"k7") == b"v" and db.get(b"after") == b"v"


def test_an_open_snapshot_keeps_its_files_through_gc() -> None:
    with kvstore.open(MemoryStore(), **SHORT) as db:
        expected = _churn(db, rounds=2)
        with db.snapshot() as snap:
            _churn(db, rounds=3)
            report = db.gc()
            assert report.floor.reason == "snapshot"
            assert dict(snap.scan()) == expected
            with db.at(version=snap.version) as view:
                assert dict(view.scan()) == expected
        assert db.gc().deleted_roots  # released: now they go


def test_gc_never_deletes_young_files() -> None:
    inner = MemoryStore()
    with kvstore.open(inner, **dict(QUIET, retention_window_s=0, gc_min_roots=1)) as db:
        _churn(db)
        report = db.gc()  # default grace: an hour
        assert report.deleted_roots == () and report.deleted_ssts == () and report.deleted_trees == ()


def test_gc_argument_is_checked() -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        with pytest.raises(TypeError, match="dry_run"):
            db.gc(dry_run="yes")  # type: ignore[arg-type]


# -- GC against live writer and reader processes --------------------------------

WINDOW_S = 3.0  # readers hold snapshots (<= 0.6 s) well inside it
GRACE_S = 1.0
RUN_S = 6.0
SHARED = {
    "fsync": False,
    "retention_window_s": WINDOW_S,
    "gc_grace_s": GRACE_S,
    "gc_interval_s": 0.0,
    "poll_interval_s": 0.05,
    "maintenance_interval_s": 0.05,
    "flush_max_versions": 6,
    "l0_compaction_trigger": 2,
    "hint_interval_s": 0.05,
}


def _writer(url: str, writer: int, run_s: float) -> list[int]:
    acked = []
    with kvstore.open(url, **SHARED) as db:
        deadline = time.monotonic() + run_s
        batch_no = 0
        while time.monotonic() < deadline:
            batch = kvstore.WriteBatch()
            for j in range(10):
                batch.put(b"w%d-%05d-%d" % (writer, batch_no, j), b"x" * 50)
                batch.put(b"shared-%d" % j, b"w%d-%d" % (writer, batch_no))
            db.write(batch)
            acked.append(batch_no)
            batch_no += 1
            time.sleep(0.005)
    return acked


def _reader(url: str, seed: int, run_s: float) -> tuple[int, list[str]]:
    rng = random.Random(seed)
    reads, errors = 0, []
    with kvstore.open(url, create=False, **dict(SHARED, background_maintenance=False)) as db:
        deadline = time.monotonic() + run_s
        while time.monotonic() < deadline:
            try:
                with db.snapshot(fresh=True) as snap:
                    first = list(snap.scan())
                    hold_until = time.monotonic() + rng.uniform(0.1, 0.6)
                    while time.monotonic() < hold_until:
                        if first:
                            key, value = rng.choice(first)
                            if snap.get(key) != value:
                                errors.append(f"snapshot {snap.version}: {key!r} changed")
                        reads += 1
                    if list(snap.scan()) != first:
                        errors.append(f"snapshot {snap.version}: second scan differs")
            except Exception as exc:  # any failure is what this test looks for
                errors.append(repr(exc))
    return reads, errors


@pytest.mark.slow
def test_gc_with_concurrent_writer_and_reader_processes(tmp_path: Path) -> None:
    url = str(tmp_path / "store")
    kvstore.open(url, **SHARED).close()
    context = multiprocessing.get_context("spawn")
    with context.Pool(4) as pool:
        writers = [pool.apply_async(_writer, (url, w, RUN_S)) for w in range(2)]
        readers = [pool.apply_async(_reader, (url, r, RUN_S + 1)) for r in range(2)]
        deleted = {"roots": 0, "files": 0}
        with kvstore.open(url, **dict(SHARED, background_maintenance=False)) as gc_db:
            while not all(job.ready() for job in writers + readers):
                report = gc_db.gc()
                deleted["roots"] += len(report.deleted_roots)
                deleted["files"] += len(report.deleted_ssts) + len(report.deleted_trees)
                time.sleep(0.1)
        acked = [job.get() for job in writers]
        outcomes = [job.get() for job in readers]
    for reads, errors in outcomes:
        assert errors == [] and reads > 0
    assert deleted["roots"] > 0 and deleted["files"] > 0, "GC had nothing to do: the test proves nothing"
    with kvstore.open(url, create=False, **dict(SHARED, background_maintenance=False)) as db:
        for writer, batches in enumerate(acked):
            assert batches
            for batch_no in batches[:: max(1, len(batches) // 50)] + batches[-1:]:
                assert db.get(b"w%d-%05d-0" % (writer, batch_no)) == b"x" * 50
        report = db.verify()
        assert report.ok, report.problems


# -- defect 1: ages on the storage's clock ------------------------------------------


def test_gc_keeps_young_files_on_a_whole_second_storage_clock() -> None:
    clock = _StorageClock(whole_seconds=True)
    inner = MemoryStore(clock=clock)
    options = dict(QUIET, gc_grace_s=0.5, retention_window_s=0.5, gc_min_roots=1)
    # Late in the storage's second, where a truncated stamp looks oldest; set before
    # the handle measures the storage clock (the skew only moves forward after that).
    clock.at_fraction(0.75)
    with kvstore.open(inner, **options) as db:
        db.put(b"k", b"v")
        inner.put(IN_FLIGHT, b"a flush output not committed yet")
        # Its stamp is ~0.75 s in the past already (more than the grace by the
        # local clock); it is younger than the grace.
        assert IN_FLIGHT not in db.gc().deleted_ssts
        assert IN_FLIGHT in sst_paths(inner)
    # The storage's clock moves on by grace + two resolution steps (+ 0.1): certainly
    # old now. A new handle measures the storage clock afresh, as a handle's clock
    # does every minute (the first one still has the offset it measured before).
    clock.later(3.1)
    with kvstore.open(inner, **options) as db:
        assert IN_FLIGHT in db.gc().deleted_ssts


def test_gc_keeps_young_files_when_the_storage_clock_is_behind() -> None:
    from test_clock import ShiftedClockStore

    inner = ShiftedClockStore(skew=-120.0)
    with kvstore.open(inner, **dict(QUIET, gc_grace_s=60.0, retention_window_s=60.0, gc_min_roots=1)) as db:
        for n in range(5):
            db.put(b"k", b"%d" % n)
        db.flush()
        inner.put(IN_FLIGHT, b"a flush output not committed yet")
        report = db.gc()
        assert report.deleted_ssts == () and report.deleted_roots == ()
        with db.at(version=1) as old:  # inside the window on the storage's clock
            assert old.get(b"k") == b"0"


def test_tree_change_past_its_deadline_is_not_published() -> None:
    from kvstore.committer import PendingCommit, TreeChange
    from kvstore.errors import StaleOutputError

    with kvstore.open(MemoryStore(), **QUIET) as db:
        db.put(b"k", b"v")
        head = db.version
        # A flush's tree change that missed its deadline, submitted to the committer directly.
        change = TreeChange(db.stats()["tree"], "tree/never.ipc", 0, deadline=time.monotonic() - 1)
        committer = db._committer  # internals: no public path submits a late tree change
        with pytest.raises(StaleOutputError, match="deadline"):
            committer.submit(PendingCommit({}, {"op": "flush"}, tree_change=change))
        assert db.version == head


def test_gc_rechecks_versions_committed_while_it_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    inner = MemoryStore()
    with kvstore.open(inner, **SHORT) as db, kvstore.open(inner, **SHORT) as other:
        db.put(b"k", b"v")
        collector = db._housekeeper.collector  # internals: another flush lands while GC lists live files
        real_live = collector._live_files  # internals: the step after which the flush lands

        def live_then_flush_elsewhere(survivors):  # another handle commits a flush meanwhile
            live = real_live(survivors)
            other.refresh()
            other.put(b"j", b"w")
            assert other.flush() is not None
            return live

        monkeypatch.setattr(collector, "_live_files", live_then_flush_elsewhere)  # internals: as above
        db.gc()
        monkeypatch.undo()
    with kvstore.open(inner, **QUIET) as db:
        assert db.get(b"j") == b"w" and db.verify().ok


def test_gc_deletes_temp_files_of_writers_killed_mid_write_after_the_grace_period(tmp_path: Path) -> None:
    """Issue 35: 33 temp files after 36 kills were never removed."""
    store = LocalStore(tmp_path, fsync=False)
    temp_dir = tmp_path / TEMP_DIR
    with kvstore.open(store, **dict(QUIET, gc_min_roots=1)) as db:
        db.put(b"k", b"v")
        writer_killed_mid_write(tmp_path, 50_000)
        [dead] = list(temp_dir.iterdir())
        # Younger than the grace period (an hour, on the storage's clock): kept.
        assert db.gc().deleted_temp_files == ()
        assert dead.exists()
        _age(dead, 2 * 3600)
        report = db.gc(dry_run=True)
        assert report.deleted_temp_files == (f"{TEMP_DIR}/{dead.name}",) and report.bytes_freed >= 50_000
        assert dead.exists()
        assert db.gc().deleted_temp_files == (f"{TEMP_DIR}/{dead.name}",)
        assert list(temp_dir.iterdir()) == []
        assert db.get(b"k") == b"v"
    with pytest.raises(FileNotFoundError):
        store.head(WRITTEN_PATH)


def test_gc_never_deletes_a_live_writers_temp_file(tmp_path: Path) -> None:
    """A second process stopped mid-write keeps its temp file however old it
    looks, and publishes its object when it goes on."""
    store = LocalStore(tmp_path, fsync=False)
    with kvstore.open(store, **dict(QUIET, gc_min_roots=1)) as db:
        with stalled_writer(tmp_path, 50_000):
            [temp] = list((tmp_path / TEMP_DIR).iterdir())
            _age(temp, 2 * 3600)  # past the grace period on the storage's clock
            assert db.gc().deleted_temp_files == ()
            assert temp.exists()
        assert store.get(WRITTEN_PATH) == b"x" * 50_000
        assert db.gc().deleted_temp_files == ()


def _age(path: Path, seconds: float) -> None:
    st = path.stat()
    os.utime(path, (st.st_atime - seconds, st.st_mtime - seconds))


class _FullForNewBytes(MemoryStore):
    """Once ``full``, every write of new bytes is refused, as by a full disk
    (deleting still works)."""

    def __init__(self) -> None:
        super().__init__()
        self.full = False

    def put(self, path: str, data: bytes) -> None:
        if self.full:
            raise NotWrittenError(f"writing {path!r}: no space left on device")
        super().put(path, data)

    def put_if_absent(self, path: str, data: bytes) -> bool:
        if self.full:
            raise NotWrittenError(f"writing {path!r}: no space left on device")
        return super().put_if_absent(path, data)


def test_gc_on_a_full_store_deletes_the_hint_it_cannot_rewrite() -> None:
    """Issue 35: GC deletes roots only after pointing the hint past them; when
    the hint cannot be rewritten (no space), it is deleted instead, and GC goes on."""
    inner = _FullForNewBytes()
    with kvstore.open(inner, **SHORT) as db:
        _churn(db)
        model = _churn(db)
        head = db.version
        inner.full = True
        report = db.gc()
        assert report.deleted_roots and report.deleted_roots[0] == 0 and report.bytes_freed > 0
        with pytest.raises(FileNotFoundError):
            inner.head(HINT_PATH)  # no hint beats one naming a deleted root
        assert dict(db.scan()) == model
    inner.full = False
    with kvstore.open(inner, create=False, **QUIET) as db:  # finds the head by listing
        assert db.version == head and dict(db.scan()) == model
