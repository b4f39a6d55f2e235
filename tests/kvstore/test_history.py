"""Time travel (at version / timestamp / checkpoint) and checkpoints."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest

import kvstore
from kvstore.chain import VersionChain
from kvstore.errors import SnapshotTooOldError
from kvstore.history import RootIndex
from kvstore.search import last_true
from kvstore.objstore.memory import MemoryStore
from maintenance_util import QUIET


def _history(db: kvstore.Store, steps: int) -> dict[int, dict[bytes, bytes]]:
    """Random-ish writes with flushes and compactions; the model at every version."""
    model: dict[bytes, bytes] = {}
    versions = {db.version: {}}
    for step in range(steps):
        key = b"k%d" % (step * 7 % 11)
        if step % 5 == 4:
            db.delete(key)
            model.pop(key, None)
        else:
            db.put(key, b"s%d" % step)
            model[key] = b"s%d" % step
        versions[db.version] = dict(model)
        if step % 6 == 5:
            db.flush()
            versions[db.version] = dict(model)
        if step % 13 == 12:
            db.compact(full=True)
            versions[db.version] = dict(model)
    return versions


def _assert_view(db: kvstore.Store, version: int, expected: dict[bytes, bytes]) -> None:
    with db.at(version=version) as view:
        assert view.version == version
        assert dict(view.scan()) == expected
        assert list(view.scan(reverse=True)) == sorted(expected.items(), reverse=True)
        for key in (b"k0", b"k3", b"k10", b"absent"):
            assert view.get(key) == expected.get(key)


def test_every_version_inside_the_window_reads_exactly_what_it_held() -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        versions = _history(db, 40)
        assert db.stats()["sorted_runs"]  # some versions predate the compaction
        for version, expected in versions.items():
            _assert_view(db, version, expected)


def test_old_versions_below_the_floor_read_their_own_tree() -> None:
    with kvstore.open(MemoryStore(), retention_window_s=0, **QUIET) as db:
        versions = _history(db, 30)
        floor = db.stats()["floor_seq"]
        old = [v for v in versions if db._housekeeper.index.summary(v).last_seq < floor]  # internals: the root index
        assert old, "the compactions raised the floor past some versions"
        for version in old:  # no GC yet: their roots and trees still exist
            _assert_view(db, version, versions[version])


def test_versions_dropped_by_retention_raise_snapshot_too_old() -> None:
    options = dict(QUIET, retention_window_s=0, gc_grace_s=0, gc_min_roots=1)
    with kvstore.open(MemoryStore(), **options) as db:
        versions = _history(db, 30)
        db.flush()
        db.compact(full=True)
        report = db.gc()
        assert report.deleted_roots
        for version in report.deleted_roots:
            with pytest.raises(SnapshotTooOldError):
                db.at(version=version)
        _assert_view(db, db.version, versions[max(versions)])


def test_at_timestamp_finds_the_version_current_at_that_time() -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        marks: list[tuple[float, dict[bytes, bytes]]] = []
        model: dict[bytes, bytes] = {}
        for i in range(8):
            time.sleep(0.005)  # distinct storage timestamps
            db.put(b"k", b"%d" % i)
            model[b"k"] = b"%d" % i
            if i == 4:
                db.flush()
            time.sleep(0.005)
            marks.append((time.time(), dict(model)))
        for when, expected in marks:
            with db.at(timestamp=when) as view:
                assert dict(view.scan()) == expected
        when, expected = marks[2]
        with db.at(timestamp=datetime.fromtimestamp(when, tz=timezone.utc)) as view:
            assert dict(view.scan()) == expected
        with pytest.raises(ValueError, match="before the store"):
            db.at(timestamp=0.0)


def test_checkpoints_pin_durably_and_are_carried_by_every_root() -> None:
    inner = MemoryStore()
    with kvstore.open(inner, **QUIET) as db:
        db.put(b"k", b"pinned")
        pinned = db.checkpoint("release-1")
        assert pinned.version == db.version - 1
        db.put(b"k", b"later")
        db.flush()
        db.put(b"other", b"x")
        assert [c.name for c in db.checkpoints()] == ["release-1"]
    with kvstore.open(inner, **QUIET) as db:  # survives reopen: it is in the head root
        (found,) = db.checkpoints()
        assert found == pinned
        with db.at(checkpoint="release-1") as view:
            assert view.get(b"k") == b"pinned" and view.get(b"other") is None
        db.checkpoint("release-1")  # moving a name
        assert db.checkpoints()[0].version > pinned.version
        db.remove_checkpoint("release-1")
        assert db.checkpoints() == []
        with pytest.raises(ValueError, match="does not exist"):
            db.at(checkpoint="release-1")


def test_checkpoints_of_one_handle_are_seen_by_another() -> None:
    inner = MemoryStore()
    with kvstore.open(inner, **QUIET) as a, kvstore.open(inner, **QUIET) as b:
        a.checkpoint("from-a")
        b.put(b"k", b"v")  # b rebases over a's checkpoint commit and carries it on
        b.checkpoint("from-b")
        a.refresh()
        assert {c.name for c in a.checkpoints()} == {"from-a", "from-b"}


def test_checkpoint_ttl_lapses() -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        db.checkpoint("short", ttl=0.05)
        db.checkpoint("long")
        time.sleep(0.1)
        assert [c.name for c in db.checkpoints()] == ["long"]
        with pytest.raises(SnapshotTooOldError, match="expired"):
            db.at(checkpoint="short")
        db.checkpoint("another")  # any checkpoint change prunes expired entries
        assert "short" not in db._state.checkpoints  # internals: pruned from the stored map, not just hidden


def test_a_checkpoint_holds_the_retention_floor_across_gc() -> None:
    options = dict(QUIET, retention_window_s=0, gc_grace_s=0, gc_min_roots=1)
    with kvstore.open(MemoryStore(), **options) as db:
        db.put(b"k", b"pinned")
        pinned = db.checkpoint("keep")
        for i in range(5):
            db.put(b"k", b"%d" % i)
            db.flush()
        db.compact(full=True)
        db.gc()
        assert db.retention_floor().reason == "checkpoint keep"
        with db.at(checkpoint="keep") as view:
            assert view.get(b"k") == b"pinned"
        db.remove_checkpoint("keep")
        db.flush()
        db.compact(full=True)
        assert pinned.version in db.gc().deleted_roots
        with pytest.raises(SnapshotTooOldError):
            db.at(version=pinned.version)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({}, TypeError),
        ({"version": 1, "checkpoint": "c"}, TypeError),
        ({"version": "1"}, TypeError),
        ({"version": True}, TypeError),
        ({"version": -1}, ValueError),
        ({"version": 10**6}, ValueError),
        ({"timestamp": "now"}, TypeError),
        ({"checkpoint": ""}, ValueError),
        ({"checkpoint": 3}, TypeError),
    ],
)
def test_at_rejects_bad_arguments(kwargs: dict, error: type[Exception]) -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        with pytest.raises(error):
            db.at(**kwargs)


@pytest.mark.parametrize(
    ("name", "ttl", "error"),
    [("", None, ValueError), ("a\nb", None, ValueError), (7, None, TypeError), ("ok", -1, ValueError), ("ok", "1", TypeError)],
)
def test_checkpoint_rejects_bad_arguments(name: object, ttl: object, error: type[Exception]) -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        with pytest.raises(error):
            db.checkpoint(name, ttl=ttl)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="does not exist"):
            db.remove_checkpoint("never-made")


def test_root_index_searches() -> None:
    assert last_true(0, 9, lambda v: v <= 4) == 4
    assert last_true(0, 9, lambda v: False) == -1
    assert last_true(3, 9, lambda v: True) == 9
    with kvstore.open(MemoryStore(), **QUIET) as db:
        db.put(b"a", b"1")
        db.checkpoint("x")  # a version without a seq
        db.put(b"b", b"2")
        index = RootIndex(VersionChain(db.objects))  # a fresh index over the store's root files
        assert [index.summary(v).last_seq for v in range(4)] == [0, 1, 1, 2]
        assert index.oldest_reaching_seq(1, db.version) == 1
        assert index.oldest_reaching_seq(2, db.version) == 3
        assert index.newest_at_or_before(time.time() + 60, db.version) == 3
        assert index.summary(99) is None and index.mtime(99) is None
