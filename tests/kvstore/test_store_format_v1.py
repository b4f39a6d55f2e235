"""A store written by the format-1 engine (committed fixture) opens, reads,
time-travels, takes new commits (format-3 roots) and verifies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import kvstore
from kvstore.format.root import root_path

FIXTURE = Path(__file__).resolve().parent / "data" / "store_v1"


def test_a_format_1_store_keeps_working(tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(FIXTURE, store)
    options = dict(poll_interval_s=0, background_maintenance=False)
    with kvstore.open(store, create=False, **options) as db:
        assert dict(db.scan()) == {b"k1": b"v1", b"k2": b"v2", b"k3": b"v3", b"k4": b"v4", b"k9": b"txn"}
        with db.at(checkpoint="v1-fixture") as old:
            assert old.get(b"k9") == b"txn"
        with db.at(version=3) as old:
            assert old.get(b"k0") == b"v0"
        old_head = db.version
        db.put(b"new", b"format 3")
        assert (store / root_path(db.version)).read_bytes().startswith(b"LKVROOT3")
        assert (store / root_path(old_head)).read_bytes().startswith(b"ARROW1")
        db.flush()
        assert db.verify().ok
        assert [info.version for info in db.history(limit=3)] == [db.version, db.version - 1, db.version - 2]
    assert json.loads((store / "_lakekv_store").read_text())["format"] == 3
    with kvstore.open(store, create=False, **options) as db:
        assert db.get(b"new") == b"format 3" and db.get(b"k0") is None
