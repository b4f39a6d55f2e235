"""A store written by the format-2 engine (committed fixture ``data/store_v2``,
written by lakekv before issue 38: a flushed tree, then unflushed format-2
roots holding a DELETE, an expiry, a transaction and an empty value) opens,
reads, time-travels, exports its format-2 roots, takes new commits in
format-3 roots, flushes and verifies; its identity then says format 3, which
lakekv versions that only know root format 2 refuse."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import kvstore
from kvstore.errors import StoreError
from kvstore.format.root import decode_root, parse_root_path, root_path

FIXTURE = Path(__file__).resolve().parent / "data" / "store_v2"
OPTIONS = dict(poll_interval_s=0, background_maintenance=False)
EXPECTED = {
    b"k1": b"v1", b"k2": b"v2", b"k3": b"txn", b"lease:long": b"kept",
    **{b"user:%04d" % i: b"u%d" % i for i in range(50) if i != 7}, b"user:0001": b"",
}


def _copy(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    shutil.copytree(FIXTURE, store)
    return store


def test_the_fixture_holds_format_2_roots_with_deltas() -> None:
    roots = sorted(FIXTURE.glob("_*.ipc"))
    assert roots and all(path.read_bytes().startswith(b"LKVROOT2") for path in roots)
    assert json.loads((FIXTURE / "_lakekv_store").read_text())["format"] == 2
    rows = [row for path in roots for row in decode_root(path.read_bytes(), parse_root_path(path.name)).delta_rows()]
    assert any(row[4] is not None for row in rows) and any(row[3] is None for row in rows)


def test_a_format_2_store_keeps_working(tmp_path: Path) -> None:
    store = _copy(tmp_path)
    with kvstore.open(store, create=False, **OPTIONS) as db:
        assert dict(db.scan()) == EXPECTED
        with db.at(checkpoint="v2-fixture") as old:
            assert old.get(b"k0") == b"v0" and old.get(b"k3") is None
        old_head = db.version
        db.put(b"new", b"format 3")
        db.write(kvstore.WriteBatch().put_many([(b"user:%04d" % i, b"again") for i in range(3)]).delete(b"k1"))
        assert (store / root_path(db.version)).read_bytes().startswith(b"LKVROOT3")
        assert (store / root_path(old_head)).read_bytes().startswith(b"LKVROOT2")
        with db.at(version=old_head) as old:
            assert dict(old.scan()) == EXPECTED
        db.export(str(tmp_path / "copy"), old_head)  # copies the unflushed format-2 roots
        assert [info.version for info in db.history(limit=2)] == [db.version, db.version - 1]
        assert db.verify().ok
        db.flush()
        assert db.verify().ok
        latest = dict(db.scan())
    assert json.loads((store / "_lakekv_store").read_text())["format"] == 3
    with kvstore.open(store, create=False, **OPTIONS) as db:
        assert dict(db.scan()) == latest
        assert latest[b"new"] == b"format 3" and b"k1" not in latest and latest[b"user:0002"] == b"again"
    with kvstore.open(tmp_path / "copy", create=False, **OPTIONS) as copy:
        assert dict(copy.scan()) == EXPECTED and copy.verify().ok


def test_a_store_marked_with_a_newer_format_is_refused(tmp_path: Path) -> None:
    """What an older lakekv does with a store this version marked (format 3
    there): here, with a format this version does not know."""
    store = _copy(tmp_path)
    identity = json.loads((store / "_lakekv_store").read_text())
    (store / "_lakekv_store").write_text(json.dumps(dict(identity, format=4)))
    with pytest.raises(StoreError, match="unsupported store format 4"):
        kvstore.open(store, create=False, **OPTIONS)
