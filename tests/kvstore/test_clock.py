"""The storage clock: offset to the local clock, resolution, conservative ages."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pytest

from full_disk_util import tmpfs
from kvstore.clock import PROBE_PATH, StorageClock
from kvstore.errors import InjectedFaultError, NotWrittenError, ObjectStoreError
from kvstore.objstore import LocalStore
from kvstore.objstore.base import ObjectMeta
from kvstore.objstore.faulty import FaultyStore
from kvstore.objstore.memory import MemoryStore


class ShiftedClockStore(MemoryStore):
    """A memory store whose timestamps are ``skew`` seconds off the local
    clock and, with ``whole_seconds``, truncated like S3's LastModified."""

    def __init__(self, skew: float = 0.0, whole_seconds: bool = False) -> None:
        super().__init__()
        self.skew, self.whole_seconds = skew, whole_seconds

    def _stamp(self, meta: ObjectMeta) -> ObjectMeta:
        mtime = meta.mtime + self.skew
        if self.whole_seconds:
            mtime = float(math.floor(mtime))
        return ObjectMeta(meta.path, meta.size, mtime, meta.etag)

    def head(self, path: str) -> ObjectMeta:
        return self._stamp(super().head(path))

    def list(self, prefix: str = ""):  # type: ignore[override]
        return (self._stamp(meta) for meta in super().list(prefix))


def test_now_never_runs_ahead_of_a_coarse_skewed_storage_clock() -> None:
    store = ShiftedClockStore(skew=-500.0, whole_seconds=True)
    clock = StorageClock(store)
    for _ in range(5):
        store.put("x", b"")
        stamp = store.head("x").mtime  # a truncated storage stamp taken just now
        now = clock.now()
        assert stamp - 1.0 <= now <= time.time() - 500.0 + 0.01
        assert clock.resolution == 1.0
        time.sleep(0.13)


def test_age_is_a_lower_bound_on_a_coarse_clock() -> None:
    store = ShiftedClockStore(whole_seconds=True)
    clock = StorageClock(store)
    store.put("fresh", b"")
    # The truncated stamp makes the object look up to 1 s older than it is;
    # age() must not report more than the real age (about 0 here).
    assert clock.age(store.head("fresh").mtime) <= 0.0
    assert clock.cutoff(0.0) <= time.time() - 2.0


def test_fine_clock_has_millisecond_resolution_and_is_measured_once() -> None:
    store = MemoryStore()
    clock = StorageClock(store, refresh_s=3600)
    assert abs(clock.now() - time.time()) < 0.5
    first = store.head(PROBE_PATH).mtime
    time.sleep(0.01)
    clock.now()
    assert store.head(PROBE_PATH).mtime == first  # cached offset: no second probe
    assert clock.resolution == 0.001


def test_refresh_re_measures() -> None:
    store = MemoryStore()
    clock = StorageClock(store, refresh_s=0.0)
    clock.now()
    first = store.head(PROBE_PATH).mtime
    time.sleep(0.01)
    clock.now()
    assert store.head(PROBE_PATH).mtime > first


class StallingStore(MemoryStore):
    """Stalls ``stalls`` times right after stamping the probe, like a thread
    descheduled between the PUT and reading the local clock."""

    def __init__(self, stalls: int, stall_s: float = 0.3) -> None:
        super().__init__()
        self.stalls, self.stall_s, self.heads = stalls, stall_s, 0

    def head(self, path: str) -> ObjectMeta:
        meta = super().head(path)
        self.heads += 1
        if self.stalls > 0:
            self.stalls -= 1
            time.sleep(self.stall_s)
        return meta


def test_a_stalled_probe_is_retried_and_the_tight_one_kept() -> None:
    store = StallingStore(stalls=1)
    offset = StorageClock(store).measure()
    assert store.heads == 2
    assert -0.1 < offset <= 0.0  # the stalled probe alone gives about -0.3


def test_a_probe_stalled_every_time_still_gives_a_safe_bound() -> None:
    store = StallingStore(stalls=10, stall_s=0.05)
    clock = StorageClock(store)
    offset = clock.measure()
    assert store.heads == 3  # gives up after three probes
    assert offset <= -0.05 + 0.01  # every probe was loose: a safe (never ahead) bound, not a tight one


class OnceWholeStore(MemoryStore):
    """A fine clock whose first ``whole`` stamps land exactly on a second, as
    a local file system's coarse kernel tick now and then does."""

    def __init__(self, whole: int) -> None:
        super().__init__()
        self.whole, self.heads = whole, 0

    def head(self, path: str) -> ObjectMeta:
        meta = super().head(path)
        self.heads += 1
        if self.heads <= self.whole:
            return ObjectMeta(meta.path, meta.size, float(math.floor(meta.mtime)), meta.etag)
        return meta


def test_one_whole_second_stamp_from_a_fine_clock_keeps_millisecond_resolution() -> None:
    store = OnceWholeStore(whole=2)
    clock = StorageClock(store)
    clock.measure()
    assert clock.resolution == 0.001 and store.heads == 3  # probed until a stamp disagreed
    assert clock.cutoff(0.0) > time.time() - 0.5  # a zero window does not trail by two seconds


def test_a_whole_second_clock_is_confirmed_once_then_probed_once() -> None:
    store = ShiftedClockStore(whole_seconds=True)
    heads = 0
    original_head = store.head

    def counting_head(path: str) -> ObjectMeta:
        nonlocal heads
        heads += 1
        return original_head(path)

    store.head = counting_head  # type: ignore[method-assign]
    clock = StorageClock(store)
    clock.measure()
    assert clock.resolution == 1.0 and heads == 3
    clock.measure()
    assert clock.resolution == 1.0 and heads == 4


# -- a storage that refuses the probe's PUT (a full disk; issue 35) -----------------------


def test_a_refused_probe_gives_deletions_a_lower_bound_and_now_an_error() -> None:
    inner = ShiftedClockStore(skew=-500.0)
    inner.put("_latest_hint", b"7")  # any stamp under "_" the storage made
    written = inner.head("_latest_hint").mtime
    store = FaultyStore(inner, seed=0)
    store.fail_next("put", path_prefix=PROBE_PATH, count=3)  # refresh_s=0: one per reading below
    clock = StorageClock(store, refresh_s=0.0)
    # GC's cutoff: from the newest stamp, so never later than the storage's
    # clock allows (no touch through this wrapper: the listing was the reading).
    cutoff = clock.cutoff(0.0)
    assert written - 3600.0 < cutoff <= written - 2 * clock.resolution
    assert clock.age(written) <= 0.0
    # now() must not lag more than a step (a writer's freshness check relies
    # on it): with only a lower bound it refuses.
    with pytest.raises(ObjectStoreError, match="probe could not be written"):
        clock.now()
    # The PUT works again: an exact reading.
    assert written <= clock.now() <= time.time() - 500.0


def test_a_refused_probe_with_no_stamp_to_read_raises_the_probes_error() -> None:
    store = FaultyStore(MemoryStore(), seed=0)
    store.fail_next("put", path_prefix=PROBE_PATH)
    with pytest.raises(InjectedFaultError):
        StorageClock(store).now()


def test_a_full_disk_is_measured_by_touching_the_probe(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", size_mb=1) as disk:
        store = LocalStore(disk / "store")
        StorageClock(store).measure()  # the probe exists from an earlier measurement
        probe = store.root / PROBE_PATH
        st = probe.stat()
        os.utime(probe, (st.st_atime - 3600, st.st_mtime - 3600))  # ... made an hour ago
        fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)  # then the disk filled up
        try:
            with pytest.raises(OSError, match="No space left"):
                while True:
                    os.write(fd, os.urandom(1 << 16))
        finally:
            os.close(fd)
        with pytest.raises(NotWrittenError):
            store.put(PROBE_PATH, b"x")
        clock = StorageClock(store)
        now = clock.now()
        # The touch re-stamped the probe now: not an hour behind, never ahead.
        assert st.st_mtime - 60 < now <= time.time()
        assert store.head(PROBE_PATH).mtime > st.st_mtime - 60
