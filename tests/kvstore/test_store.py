"""Store API: reads, writes, batches, scans, snapshots, TTL, errors, reopen."""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pytest

import kvstore
from kvstore.errors import StoreClosedError
from kvstore.format.root import root_path
from kvstore.objstore.counting import CountingStore
from kvstore.objstore.memory import MemoryStore
from kvstore.options import MAX_KEY_BYTES


@pytest.fixture
def db():
    store = kvstore.open(MemoryStore(), poll_interval_s=0)
    yield store
    store.close()


def test_put_get_delete(db) -> None:
    assert db.get(b"k") is None
    seq1 = db.put(b"k", b"v1")
    assert db.get(b"k") == b"v1"
    seq2 = db.put(b"k", b"")
    assert seq2 > seq1 and db.get(b"k") == b""  # empty value is a value, not a delete
    db.delete(b"k")
    assert db.get(b"k") is None
    assert db.version == 3 and db.seq == 3


def test_write_batch_is_atomic_with_one_seq(db) -> None:
    batch = kvstore.WriteBatch().put(b"a", b"1").put(b"b", b"2").delete(b"c").put(b"a", b"last")
    seq = db.write(batch)
    assert db.get(b"a") == b"last" and db.get(b"b") == b"2"
    snap = db.snapshot()
    assert snap.get_row(b"a")[1] == snap.get_row(b"b")[1] == seq


def test_scan_bounds_prefix_reverse_limit(db) -> None:
    for key in [b"a", b"ab", b"abc", b"b", b"ba", b"c"]:
        db.put(key, key.upper())
    db.delete(b"ba")
    assert [k for k, _ in db.scan()] == [b"a", b"ab", b"abc", b"b", b"c"]
    assert list(db.scan(start=b"ab", end=b"b")) == [(b"ab", b"AB"), (b"abc", b"ABC")]
    assert [k for k, _ in db.scan(prefix=b"a")] == [b"a", b"ab", b"abc"]
    assert [k for k, _ in db.scan(prefix=b"a", start=b"ab")] == [b"ab", b"abc"]
    assert [k for k, _ in db.scan(reverse=True)] == [b"c", b"b", b"abc", b"ab", b"a"]
    assert [k for k, _ in db.scan(reverse=True, limit=2)] == [b"c", b"b"]
    assert list(db.scan(start=b"x", end=b"a")) == []
    assert list(db.scan(limit=0)) == []


def test_scan_batches(db) -> None:
    for i in range(10):
        db.put(b"k%02d" % i, b"v%d" % i)
    batches = list(db.scan_batches(prefix=b"k", batch_rows=4))
    assert [b.num_rows for b in batches] == [4, 4, 2]
    table = pa.Table.from_batches(batches)
    assert table.column("key").to_pylist() == [b"k%02d" % i for i in range(10)]
    assert table.column("value").to_pylist() == [b"v%d" % i for i in range(10)]


def test_snapshot_is_isolated_from_later_writes(db) -> None:
    db.put(b"k", b"old")
    with db.snapshot() as snap:
        db.put(b"k", b"new")
        db.put(b"k2", b"x")
        db.delete(b"k")
        assert snap.get(b"k") == b"old"
        assert list(snap.scan()) == [(b"k", b"old")]
    with pytest.raises(StoreClosedError):
        snap.get(b"k")


def test_ttl_expires_values(db) -> None:
    db.put(b"short", b"v", ttl=0.05)
    db.put(b"long", b"v", ttl=3600)
    assert db.get(b"short") == b"v"
    time.sleep(0.1)
    assert db.get(b"short") is None
    assert [k for k, _ in db.scan()] == [b"long"]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda db: db.put("k", b"v"), TypeError, "key must be bytes"),
        (lambda db: db.put(b"k", "v"), TypeError, "value must be bytes"),
        (lambda db: db.put(b"", b"v"), ValueError, "key must not be empty"),
        (lambda db: db.put(b"k" * (MAX_KEY_BYTES + 1), b"v"), ValueError, "limit"),
        (lambda db: db.put(b"k", b"v", ttl=-1), ValueError, "ttl"),
        (lambda db: db.put(b"k", b"v", ttl="1"), TypeError, "ttl"),
        (lambda db: db.get(None), TypeError, "key must be bytes"),
        (lambda db: db.write([]), TypeError, "WriteBatch"),
        (lambda db: db.write(kvstore.WriteBatch()), ValueError, "empty"),
        (lambda db: list(db.scan(start="a")), TypeError, "start must be bytes"),
        (lambda db: list(db.scan(limit=-1)), ValueError, "limit"),
    ],
)
def test_bad_arguments_raise_clear_errors(db, call, error, match) -> None:
    with pytest.raises(error, match=match):
        call(db)


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="unknown store option.*'fsynk'"):
        kvstore.open(MemoryStore(), fsynk=True)
    with pytest.raises(TypeError, match="poll_interval_s"):
        kvstore.open(MemoryStore(), poll_interval_s="fast")


def test_closed_store_raises(db) -> None:
    db.close()
    db.close()  # idempotent
    with pytest.raises(StoreClosedError):
        db.put(b"k", b"v")
    with pytest.raises(StoreClosedError):
        db.get(b"k")


def test_open_missing_store_without_create() -> None:
    with pytest.raises(FileNotFoundError):
        kvstore.open(MemoryStore(), create=False)


def test_reopen_rebuilds_the_memtable(tmp_path) -> None:
    url = str(tmp_path / "store")
    with kvstore.open(url, poll_interval_s=0) as db:
        for i in range(50):
            db.put(b"k%d" % i, b"v%d" % i)
        db.delete(b"k7")
        version = db.version
    with kvstore.open(url, create=False, poll_interval_s=0) as db:
        assert db.version == version
        assert db.get(b"k3") == b"v3" and db.get(b"k7") is None
        assert len(list(db.scan())) == 49


def test_layout_on_disk(tmp_path) -> None:
    root = tmp_path / "store"
    with kvstore.open(str(root), poll_interval_s=0, hint_interval_s=0) as db:
        for _ in range(100):
            db.put(b"k", b"v")
    names = {p.name for p in root.iterdir()}
    assert "_lakekv_store" in names and "_latest_hint" in names
    assert root_path(100) in names  # version 100 = the 100th commit after genesis
    assert (root / "_latest_hint").read_text() == "100"


def test_one_put_per_inline_commit_and_hint_rate_limited() -> None:
    objects = CountingStore(MemoryStore())
    with kvstore.open(objects, poll_interval_s=0, hint_interval_s=3600) as db:
        objects.reset()
        for i in range(200):
            db.put(b"k%d" % i, b"v")
        counts = objects.counts
    # 200 root files + at most one hint write during the run + one on close.
    assert counts["put_if_absent"] == 200
    assert counts["put"] <= 2
    assert counts["get"] == counts["get_range"] == 0


def test_large_delta_goes_to_a_delta_sst() -> None:
    objects = CountingStore(MemoryStore(), record_paths=True)
    with kvstore.open(objects, poll_interval_s=0, inline_delta_bytes=1024) as db:
        batch = kvstore.WriteBatch()
        for i in range(100):
            batch.put(b"key%03d" % i, b"x" * 100)
        db.write(batch)
        assert any(op == "put" and path.startswith("sst/") for op, path in objects.paths)
        assert db.get(b"key042") == b"x" * 100
    with kvstore.open(objects, poll_interval_s=0) as db:
        assert len(list(db.scan())) == 100


def test_two_handles_see_each_other_after_refresh() -> None:
    objects = MemoryStore(f"memory://{uuid.uuid4().hex}")
    with kvstore.open(objects, poll_interval_s=0) as a, kvstore.open(objects, poll_interval_s=0) as b:
        a.put(b"x", b"from a")
        b.put(b"y", b"from b")  # loses the race for version 1, catches up, commits version 2
        assert b.get(b"x") == b"from a"
        assert a.get(b"y", consistency="serializable") is None  # a's view: not caught up yet
        assert a.get(b"y") == b"from b"  # linearizable (the default): b's commit was acknowledged
        assert a.refresh() == 2
        assert b.snapshot(fresh=True).version == 2


def test_follower_picks_up_other_writers() -> None:
    objects = MemoryStore()
    with kvstore.open(objects, poll_interval_s=0.01) as a, kvstore.open(objects, poll_interval_s=0) as b:
        b.put(b"k", b"v")
        deadline = time.monotonic() + 10
        while a.get(b"k") is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert a.get(b"k") == b"v"


def test_submit_write_commits_without_blocking_and_settles_a_future() -> None:
    with kvstore.open(MemoryStore(f"memory://{uuid.uuid4().hex}"), poll_interval_s=0) as db:
        futures = [db.submit_write(kvstore.WriteBatch().put(b"k%d" % i, b"v")) for i in range(50)]
        seqs = [f.result(timeout=30) for f in futures if f is not None]
        assert len(seqs) == 50 and len(set(seqs)) == 50
        assert all(db.get(b"k%d" % i) == b"v" for i in range(50))
        assert db.submit_write(kvstore.WriteBatch().put(b"c", b"v", if_absent=True)) is None  # a compare: use write()
        with pytest.raises(ValueError):
            db.submit_write(kvstore.WriteBatch())
        with pytest.raises(TypeError):
            db.submit_write({b"k": b"v"})  # type: ignore[arg-type]
    with pytest.raises(kvstore.StoreClosedError):
        db.submit_write(kvstore.WriteBatch().put(b"k", b"v"))
    with kvstore.open(MemoryStore(f"memory://{uuid.uuid4().hex}"), background_threads=False) as quiet:
        assert quiet.submit_write(kvstore.WriteBatch().put(b"k", b"v")) is None  # no committer thread


def test_stats_report_the_tree_and_the_open_transactions() -> None:
    from kvstore.objstore.memory import MemoryStore

    with kvstore.open(MemoryStore(), poll_interval_s=0, background_maintenance=False) as db:
        fresh = db.stats()
        assert (fresh["tree"], fresh["flushed_upto"], fresh["l0_files"], fresh["sorted_runs"]) == (None, 0, 0, 0)
        db.put(b"a", b"1")
        db.put(b"b", b"2")
        assert db.stats()["memtable_keys"] == 2
        db.flush()
        flushed = db.stats()
        assert flushed["tree"] is not None and flushed["flushed_upto"] == db.version - 1
        assert flushed["flushed_seq"] == db.seq and flushed["memtable_keys"] == 0 and flushed["l0_files"] == 1
        txn = db.begin()
        txn.get_for_update(b"a")
        assert (db.stats()["running_transactions"], db.stats()["key_locks"]) == (1, 1)
        txn.rollback()
        assert (db.stats()["running_transactions"], db.stats()["key_locks"]) == (0, 0)
