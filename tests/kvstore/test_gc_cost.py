"""GC on a long history: memory that follows the live files, and marks carried between passes.

Issue 38: a GC pass over a store with 100,000 retained versions held one
summary (and one future) per retained root and a listing of every root,
some 290 MB. A pass now finds the oldest root by probing instead of
listing, keeps transitions (where the tree changed, each delta SST), reads
the roots in chunks, and a handle's next pass reads only the roots
committed since.
These tests pin that without timing: traced memory against history, the
roots a second pass reads, the same deletions as a fresh handle's pass
whatever happened in between (random writes, flushes, compactions,
checkpoints, deletions by earlier passes), and passes that fail mid-mark.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
import tracemalloc

import pytest

import kvstore
from kvstore.errors import InjectedFaultError
from kvstore.gc import GCReport
from kvstore.format.root import parse_root_path
from kvstore.objstore.counting import CountingStore
from kvstore.objstore.faulty import FaultyStore
from kvstore.objstore.memory import MemoryStore

TEN_YEARS_S = 10 * 365 * 86400.0
# Handles with no thread: every object-store call is the test's.
QUIET = dict(background_threads=False, background_maintenance=False)
KEEP_ALL = dict(QUIET, retention_window_s=TEN_YEARS_S)
# Everything outside the window at once (once the storage clock has moved on).
KEEP_NOTHING = dict(QUIET, retention_window_s=0, gc_grace_s=0, gc_min_roots=1)


class FrozenStorageClock:
    """The storage's clock, stopped: every object the test writes is stamped ``DATA``.

    A handle measures the storage clock once (then for a minute derives it
    from the local clock). Measured while the clock reads ``FUTURE``
    (inside :meth:`future`), a handle sees everything stamped ``DATA`` as
    far outside the retention window and the grace period, however little
    time passes; GC passes run inside :meth:`future` too, so a handle that
    measures again then still does it at ``FUTURE``. Two handles' passes
    thus judge every file alike.
    """

    DATA = 1_000_000_000.5
    FUTURE = DATA + 10 * 86400.0

    def __init__(self) -> None:
        self.value = self.DATA

    def __call__(self) -> float:
        return self.value

    @contextlib.contextmanager
    def future(self) -> Iterator[None]:
        """The clock reads ``FUTURE`` inside (what is written then is stamped so), ``DATA`` after."""
        self.value = self.FUTURE
        try:
            yield
        finally:
            self.value = self.DATA


def history_store(versions: int) -> MemoryStore:
    """``versions`` retained one-put commits over 50 keys, flushed every 100."""
    objects = MemoryStore()
    with kvstore.open(objects, **KEEP_ALL) as db:
        for v in range(versions):
            db.put(b"key%03d" % (v % 50), b"w%d" % v)
            if v % 100 == 99:
                db.flush()
                db.compact()
    return objects


def gc_memory(objects: MemoryStore) -> tuple[int, int]:
    """Traced (peak, still held) bytes of one GC pass on a fresh handle."""
    with kvstore.open(objects, create=False, **KEEP_ALL) as db:
        tracemalloc.start()
        try:
            report = db.gc()
            held, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert report.deleted_roots == () and report.oldest_kept == 0  # every version retained
    return peak, held


def test_gc_memory_does_not_grow_with_the_history() -> None:
    short, long = history_store(20), history_store(2000)
    gc_memory(short)  # warm: imports and first-use caches are not the store's
    short_peak, short_held = gc_memory(short)
    long_peak, long_held = gc_memory(long)
    # 100x the history. A summary and a future per retained root came to
    # ~2 KB a version (+4 MB here); what is left grows with the listing the
    # backend returns and the live files, not with every version.
    assert long_peak < short_peak + 1024 * 1024, (short_peak, long_peak)
    assert long_held < short_held + 256 * 1024, (short_held, long_held)


def root_gets(counting: CountingStore) -> int:
    return sum(1 for op, path in counting.paths if op == "get" and parse_root_path(path) is not None)


def test_a_second_pass_reads_only_the_roots_committed_since() -> None:
    counting = CountingStore(history_store(600), record_paths=True)
    with kvstore.open(counting, create=False, **KEEP_ALL) as db:
        counting.reset()
        db.gc()
        assert root_gets(counting) >= 600  # the first pass of a handle reads every surviving root
        for i in range(3):
            db.put(b"new%d" % i, b"v")
        counting.reset()
        report = db.gc()
        # The three new roots, plus the floor's and the re-check after the head (cached or not).
        assert root_gets(counting) <= 3 + 2
        assert report.oldest_kept == 0 and report.deleted_roots == ()


def deletions(report: GCReport) -> tuple[tuple[int, ...], set[str], set[str]]:
    return report.deleted_roots, set(report.deleted_trees), set(report.deleted_ssts)


@pytest.mark.parametrize("seed", range(4))
def test_carried_marks_delete_what_a_fresh_pass_deletes(seed: int) -> None:
    rng = random.Random(seed)
    clock = FrozenStorageClock()
    objects = MemoryStore(clock=clock)
    model: dict[bytes, bytes] = {}
    deleted_roots = 0
    with kvstore.open(objects, **KEEP_NOTHING, inline_delta_bytes=512) as db:
        with clock.future():
            assert db.storage_now() >= clock.FUTURE  # measured now, at FUTURE
        for round_ in range(8):
            for _ in range(rng.randrange(1, 30)):
                key = b"k%02d" % rng.randrange(40)
                if rng.random() < 0.15:
                    db.delete(key)
                    model.pop(key, None)
                elif rng.random() < 0.1:  # a large commit: a delta SST, referenced by its root only
                    batch = kvstore.WriteBatch()
                    for i in range(20):
                        batch.put(b"big%02d" % i, b"x" * 64)
                        model[b"big%02d" % i] = b"x" * 64
                    db.write(batch)
                else:
                    model[key] = b"r%d" % round_
                    db.put(key, model[key])
                if rng.random() < 0.2:
                    db.flush()
                if rng.random() < 0.1:
                    db.compact(full=rng.random() < 0.5)
            if rng.random() < 0.3:  # a checkpoint pins its version for every handle
                db.checkpoint(f"c{round_}")
            if rng.random() < 0.3 and db.checkpoints():
                db.remove_checkpoint(rng.choice(db.checkpoints()).name)
            with clock.future():
                with kvstore.open(objects, create=False, **KEEP_NOTHING) as fresh:
                    expected = fresh.gc(dry_run=True)
                got = db.gc()
            assert deletions(got) == deletions(expected)
            assert got.oldest_kept == expected.oldest_kept and got.live_files == expected.live_files
            deleted_roots += len(got.deleted_roots)
            assert db.verify().ok
            assert dict(db.scan()) == model
    assert deleted_roots > 0  # the carried marks were cut below deleted roots
    with kvstore.open(objects, create=False, **KEEP_NOTHING) as db:
        assert db.verify().ok and dict(db.scan()) == model


@pytest.mark.parametrize("seed", range(4))
def test_passes_failing_mid_mark_leave_the_store_whole(seed: int) -> None:
    clock = FrozenStorageClock()
    inner = MemoryStore(clock=clock)
    faulty = FaultyStore(inner, seed=seed)
    model: dict[bytes, bytes] = {}
    with kvstore.open(faulty, **KEEP_NOTHING) as db:
        with clock.future():
            assert db.storage_now() >= clock.FUTURE  # measured now, at FUTURE
        failed = 0
        for round_ in range(6):
            for i in range(40):
                key = b"k%02d" % ((round_ * 7 + i) % 30)
                model[key] = b"r%d-%d" % (round_, i)
                db.put(key, model[key])
                if i % 15 == 14:
                    db.flush()
            db.compact()
            faulty.error_rate = 0.05  # reads of roots and trees fail now and then, mid-mark
            faulty.ops = frozenset({"get", "list"})
            try:
                with clock.future():
                    db.gc()
            except InjectedFaultError:
                failed += 1
            finally:
                faulty.error_rate = 0.0
            assert dict(db.scan()) == model
        with clock.future():
            db.gc()  # a clean pass after the failed ones: nothing it deletes was still needed
        assert db.history(limit=None)[-1].version > 0  # old roots were deleted
        assert dict(db.scan()) == model and db.verify().ok
    assert failed > 0  # the seeds make some passes fail
    with kvstore.open(inner, create=False, **KEEP_NOTHING) as db:
        assert dict(db.scan()) == model and db.verify().ok


def test_gc_with_open_parallelism_zero_reads_one_root_at_a_time() -> None:
    """open_parallelism=0 is a valid option (open reads one root at a time); GC raised ValueError from its thread pool."""
    objects = history_store(300)
    with kvstore.open(objects, create=False, **dict(KEEP_ALL, open_parallelism=0)) as db:
        report = db.gc()
        assert report.deleted_roots == () and report.live_files > 0
        assert db.verify().ok
