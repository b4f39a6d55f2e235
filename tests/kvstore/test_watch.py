"""Store.watch: the version chain as events, replayed and followed, across processes (kvstore.watch)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvstore
from kvstore import SnapshotTooOldError, WriteBatch
from kvstore.objstore.counting import CountingStore
from kvstore.objstore.memory import MemoryStore
from kvstore.watch import WatchEvent
from maintenance_util import QUIET

KEYS = [b"cfg/a", b"cfg/b", b"job/x"]
# One commit: (key, value or None for a delete) pairs, applied as one batch.
commits = st.lists(st.lists(st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(max_size=4))), min_size=1, max_size=3), min_size=1, max_size=8)


@settings(max_examples=30, deadline=None)
@given(commits=commits, prefix=st.sampled_from([b"", b"cfg/", b"job/", b"none/"]))
def test_a_replay_reports_every_change_under_the_prefix_in_commit_order(commits: list, prefix: bytes) -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        first = db.version + 1
        expected: list[tuple[int, bytes, bytes | None, str]] = []
        for ops in commits:
            batch = WriteBatch()
            last: dict[bytes, bytes | None] = {}
            for key, value in ops:
                if value is None:
                    batch.delete(key)
                else:
                    batch.put(key, value)
                last[key] = value  # last write per key wins in a batch
            seq = db.write(batch)
            expected += [(seq, k, v, "delete" if v is None else "put") for k, v in sorted(last.items()) if k.startswith(prefix)]
        events = list(db.watch(prefix, start=first, end=db.version))
    assert [(e.seq, e.key, e.value, e.kind) for e in events] == expected
    assert [e.version for e in events] == sorted(e.version for e in events)


def test_a_live_watch_sees_another_process_commits_in_order_and_resumes_without_gaps(tmp_path: Path) -> None:
    url = str(tmp_path / "store")
    with kvstore.open(url, **QUIET) as db:
        db.put(b"cfg/seed", b"0")
        watch = db.watch(b"cfg/", poll_interval_s=0.01)
        writer = textwrap.dedent(
            f"""
            import kvstore
            with kvstore.open({url!r}, poll_interval_s=0, background_maintenance=False) as db:
                for i in range(40):
                    db.put(b"cfg/%02d" % i, b"%d" % i)
                    if i % 10 == 0:
                        db.delete(b"cfg/seed")
            """
        )
        proc = subprocess.Popen([sys.executable, "-c", writer])
        seen: list[WatchEvent] = []
        for event in watch:
            seen.append(event)
            if event.key == b"cfg/19":
                resume = watch.next_version
                watch.close()
        assert proc.wait(timeout=120) == 0
        # A second watch resumes where the first stopped: together they miss and repeat nothing.
        rest = list(db.watch(b"cfg/", start=resume, end=db.refresh()))
    puts = [e.key for e in seen + rest if e.kind == "put"]
    assert puts == [b"cfg/%02d" % i for i in range(40)]
    versions = [e.version for e in seen + rest]
    assert versions == sorted(versions) and len({(e.seq, e.key) for e in seen + rest}) == len(seen + rest)


def test_expiry_of_a_ttl_put_is_an_event_unless_the_key_was_written_again() -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        db.put(b"lease/live", b"1", ttl=0.2)  # live before the watch starts
        watch = db.watch(b"lease/", poll_interval_s=0.01)
        db.put(b"lease/b", b"1", ttl=0.2)
        db.put(b"lease/b", b"2")  # rewritten without a TTL before it expired: no expiry
        db.put(b"lease/a", b"1", ttl=0.2)  # expires last: when it is reported, b's expiry has been judged
        events = []
        for event in watch:
            events.append((event.key, event.kind))
            if (event.key, event.kind) == (b"lease/a", "expire"):
                watch.close()
    assert events == [
        (b"lease/b", "put"), (b"lease/b", "put"), (b"lease/a", "put"), (b"lease/live", "expire"), (b"lease/a", "expire"),
    ]


def test_a_version_retention_deleted_cannot_be_replayed() -> None:
    options = dict(QUIET, retention_window_s=0, gc_grace_s=0, gc_min_roots=1)
    with kvstore.open(MemoryStore(), **options) as db:
        for i in range(5):
            db.put(b"k", b"%d" % i)
            db.flush()
        db.compact(full=True)
        report = db.gc()
        assert report.deleted_roots
        with pytest.raises(SnapshotTooOldError, match="no longer retained"):
            next(iter(db.watch(start=report.deleted_roots[0])))
        assert [e.value for e in db.watch(start=report.oldest_kept, end=db.version) if e.kind == "put"] != []


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"prefix": "cfg/"}, TypeError),
        ({"start": -1}, TypeError),
        ({"start": True}, TypeError),
        ({"end": "3"}, TypeError),
        ({"start": 5, "end": 4}, ValueError),
        ({"poll_interval_s": 0}, ValueError),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict, error: type) -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        with pytest.raises(error):
            db.watch(**kwargs)


def test_close_ends_a_waiting_watch_promptly() -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        watch = db.watch(poll_interval_s=3600)  # were close not to wake it, this would hang
        threading.Timer(0.2, watch.close).start()
        assert list(watch) == []


def test_poll_applied_reports_the_handles_own_commits_without_reading_storage() -> None:
    storage = CountingStore(MemoryStore())
    with kvstore.open(storage, **QUIET) as db:
        watch = db.watch(b"cfg/")
        assert watch.poll() == []  # caught up
        db.put(b"cfg/a", b"1")
        db.put(b"job/x", b"1")  # another prefix: the version is passed, no event
        db.put(b"cfg/a", b"2")
        storage.reset()
        events = watch.poll_applied()
        assert sum(storage.counts.values()) == 0  # no storage call at all
        assert [(e.key, e.value, e.kind) for e in events or []] == [(b"cfg/a", b"1", "put"), (b"cfg/a", b"2", "put")]
        assert watch.next_version == db.version + 1
        assert watch.poll_applied() is None  # nothing newer held: the caller decides whether to probe storage


def test_poll_applied_leaves_replays_and_other_processes_commits_to_poll() -> None:
    storage = MemoryStore()
    with kvstore.open(storage, **QUIET) as db, kvstore.open(storage, **QUIET) as other:
        db.put(b"cfg/a", b"1")
        replay = db.watch(b"cfg/", start=db.version)
        assert replay.poll_applied() is None  # a replay reads the chain until it has caught up
        assert [e.value for e in replay.poll()] == [b"1"]
        other.put(b"cfg/a", b"2")  # a commit this handle has not applied
        assert replay.poll_applied() is None
        assert [e.value for e in replay.poll()] == [b"2"]


def test_revision_through_names_each_versions_last_revision_across_a_long_replay() -> None:
    """A poll returning many versions (more than a handle keeps in memory) still knows, for each of
    them, the revision it is complete through: resuming after it misses and repeats nothing."""
    with kvstore.open(MemoryStore(), **QUIET) as db:
        start = db.refresh() + 1
        seqs = [db.put(b"w/%03d" % i, b"v") for i in range(100)]  # one version each
        with db.watch(b"w/", start=start, end=db.refresh()) as watch:
            events = watch.poll()
            assert [e.seq for e in events] == seqs
            assert [watch.revision_through(e.version) for e in events] == seqs
