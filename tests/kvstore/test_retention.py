"""Retention: checkpoint entries and changes, name/ttl checks, the floor's reasons."""

from __future__ import annotations

import pytest

import kvstore
from kvstore.objstore.memory import MemoryStore
from kvstore.retention import Checkpoint, CheckpointChange, check_checkpoint_name, check_ttl, live_checkpoints
from maintenance_util import wait_for


def test_checkpoint_entries_round_trip_and_expire() -> None:
    cp = Checkpoint("nightly", 7, 70, 1_000, 2_000)
    assert Checkpoint.from_entry("nightly", cp.to_entry()) == cp
    assert not cp.expired(1_999) and cp.expired(2_000)
    assert not Checkpoint("forever", 1, 1, 0).expired(10**15)


def test_changes_set_remove_and_drop_expired_entries() -> None:
    live = Checkpoint("a", 1, 1, 0, None).to_entry()
    old = Checkpoint("b", 1, 1, 0, 50).to_entry()
    after = CheckpointChange("c", Checkpoint("c", 2, 2, 100).to_entry(), now_ms=100).apply({"a": live, "b": old})
    assert sorted(after) == ["a", "c"]
    assert sorted(CheckpointChange("a", None, now_ms=100).apply(after)) == ["c"]
    assert [c.name for c in live_checkpoints({"a": live, "b": old}, now_ms=100)] == ["a"]


@pytest.mark.parametrize("name", ["", "x" * 201, "tab\there", 5])
def test_bad_checkpoint_names(name) -> None:
    with pytest.raises((TypeError, ValueError), match="name"):
        check_checkpoint_name(name)


@pytest.mark.parametrize("ttl", [0, -1, float("inf"), float("nan"), "1"])
def test_bad_checkpoint_ttls(ttl) -> None:
    with pytest.raises((TypeError, ValueError), match="ttl"):
        check_ttl(ttl)


def test_floor_reasons_window_checkpoint_snapshot() -> None:
    with kvstore.open(MemoryStore(), poll_interval_s=0, background_maintenance=False) as db:
        db.put(b"k", b"1")
        assert db.retention_floor().reason == "window"  # a day-long window reaches back to the start
    options = dict(poll_interval_s=0, background_maintenance=False, retention_window_s=0)
    with kvstore.open(MemoryStore(), **options) as db:
        db.put(b"k", b"1")
        db.checkpoint("keep")
        db.put(b"k", b"2")
        # Versions leave a zero window only beyond the clock's resolution
        # and its probe's round trip: then the checkpoint is what holds the floor.
        wait_for(lambda: db.retention_floor().reason == "checkpoint keep")
        db.remove_checkpoint("keep")
        with db.snapshot():
            db.put(b"k", b"3")
            wait_for(lambda: db.retention_floor().reason == "snapshot")
