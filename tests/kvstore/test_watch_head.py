"""A watch following the head while other threads commit (kvstore.watch).

A caught-up watch probes for root ``next``; a miss means "caught up" unless
the version is already below the head, when it means "deleted by retention"
(SnapshotTooOldError). A commit landing between the probe and the look at
the head must read as "caught up", never as "no longer retained": the root
was written after the probe, so it exists.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import kvstore
from kvstore import SnapshotTooOldError
from kvstore.errors import InjectedFaultError
from kvstore.format.root import root_path
from kvstore.objstore import ForwardingStore
from kvstore.objstore.base import ObjectStore
from kvstore.objstore.faulty import FaultyStore
from kvstore.objstore.memory import MemoryStore
from kvstore.watch import WatchEvent
from maintenance_util import QUIET

WAIT_S = 20.0  # liveness bound for events the test itself sets


class MissHook(ForwardingStore):
    """Delegates to ``inner``; a missing-object ``get`` of ``path`` in ``thread`` calls ``on_miss`` once,
    before the miss reaches the caller: it stands for the time between a watch's probe and what it does next."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self._lock = threading.Lock()
        self._armed: tuple[str, threading.Thread, Callable[[], None]] | None = None

    def arm(self, path: str, thread: threading.Thread, on_miss: Callable[[], None]) -> None:
        with self._lock:
            self._armed = (path, thread, on_miss)

    def get(self, path: str) -> bytes:
        try:
            return self.inner.get(path)
        except FileNotFoundError:
            with self._lock:
                armed = self._armed
                hit = armed is not None and armed[0] == path and armed[1] is threading.current_thread()
                if hit:
                    self._armed = None
            if hit and armed is not None:
                armed[2]()
            raise


def test_a_commit_between_the_probe_and_the_head_check_is_an_event_not_too_old() -> None:
    storage = MissHook(MemoryStore())
    with kvstore.open(storage, **QUIET) as db:
        db.put(b"cfg/seed", b"0")
        watch = db.watch(b"cfg/", poll_interval_s=3600)  # only the handle's own commit may wake it
        missed, committed = threading.Event(), threading.Event()
        seen: list[WatchEvent] = []
        failures: list[BaseException] = []

        def on_miss() -> None:  # the watch found no root: let the commit land before it goes on
            missed.set()
            assert committed.wait(WAIT_S), "the writer never committed"

        def follow() -> None:
            try:
                seen.append(next(iter(watch)))
            except BaseException as exc:  # reported by the test thread
                failures.append(exc)

        follower = threading.Thread(target=follow)
        storage.arm(root_path(watch.next_version), follower, on_miss)
        follower.start()
        assert missed.wait(WAIT_S), "the watch never probed for the next version"
        seq = db.put(b"cfg/a", b"1")
        committed.set()
        follower.join(WAIT_S)
        watch.close()
        assert not follower.is_alive()
        assert failures == []
        assert [(e.seq, e.key, e.value, e.kind) for e in seen] == [(seq, b"cfg/a", b"1", "put")]
        # The version the old code called "no longer retained" is there.
        with db.at(version=seen[0].version) as view:
            assert view.get(b"cfg/a") == b"1"


def test_a_watch_following_the_head_of_four_writers_sees_every_put_once(tmp_path: Path) -> None:
    # The reported load (4 writers, one watch on the head) on a local directory, where a
    # commit is slow enough that the race fails most runs of the old code.
    writers, puts_each = 4, 150
    with kvstore.open(str(tmp_path / "store"), **QUIET) as db:
        watch = db.watch(b"w/", poll_interval_s=3600)  # woken by the handle's commits only
        failures: list[BaseException] = []
        seen: list[WatchEvent] = []
        done = threading.Event()

        def follow() -> None:
            # Polls without pause, as an event loop woken by every commit would: each
            # poll probes the root the writers are about to publish.
            try:
                while len(seen) < writers * puts_each and not watch.closed:
                    seen.extend(watch.poll())
            except BaseException as exc:  # reported by the test thread
                failures.append(exc)
            done.set()

        def write(writer: int) -> None:
            for i in range(puts_each):
                db.put(b"w/%d/%03d" % (writer, i), b"v")

        follower = threading.Thread(target=follow)
        follower.start()
        threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        finished = done.wait(WAIT_S)
        watch.close()
        follower.join(WAIT_S)
        assert not [exc for exc in failures if isinstance(exc, SnapshotTooOldError)], failures
        assert failures == [] and finished
    assert sorted(e.key for e in seen) == sorted(b"w/%d/%03d" % (w, i) for w in range(writers) for i in range(puts_each))
    assert [e.seq for e in seen] == sorted(e.seq for e in seen)


def test_a_start_retention_really_deleted_is_still_too_old() -> None:
    # The fix must not turn a real gap into "caught up": a deleted start below the head still fails.
    options = dict(QUIET, retention_window_s=0, gc_grace_s=0, gc_min_roots=1)
    with kvstore.open(MemoryStore(), **options) as db:
        for i in range(4):
            db.put(b"k", b"%d" % i)
            db.flush()
        db.compact(full=True)
        gone = db.gc().deleted_roots
        assert gone
        with pytest.raises(SnapshotTooOldError, match=f"version {gone[-1]} is no longer retained"):
            db.watch(start=gone[-1]).poll()


def test_poll_returns_what_it_read_before_a_storage_fault_and_resumes_after_it() -> None:
    storage = FaultyStore(MemoryStore(), seed=0)
    with kvstore.open(storage, **QUIET) as db:
        first = db.version + 1
        seqs = [db.put(b"k%d" % i, b"v") for i in range(3)]
        watch = db.watch(start=first)
        storage.fail_next("get", path_prefix=root_path(first + 2), count=2)  # two polls meet it
        # The two versions read before the fault are reported, not lost with it.
        assert [e.seq for e in watch.poll()] == seqs[:2]
        with pytest.raises(InjectedFaultError):
            watch.poll()
        assert watch.next_version == first + 2  # where a resumed watch (or stream) goes on
        assert [e.seq for e in watch.poll()] == seqs[2:]
