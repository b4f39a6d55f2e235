"""What the catalog builds on: structured ConflictError, commit summaries,
history(), cheap handles (background_threads=False), close() releasing the
object store, and the storage clock."""

from __future__ import annotations

import os
import pickle
import threading
import time
import uuid
from pathlib import Path

import pytest

import kvstore
from kvstore.errors import ConflictError
from kvstore.objstore.memory import MemoryStore
from maintenance_util import wait_for


@pytest.fixture
def db():
    store = kvstore.open(MemoryStore(f"memory://{uuid.uuid4().hex}"), poll_interval_s=0)
    yield store
    store.close()


# -- ConflictError fields -------------------------------------------------------


def test_conflict_error_is_still_a_plain_message() -> None:
    error = ConflictError("msg")
    assert str(error) == "msg"
    assert (error.key, error.range, error.version, error.descriptor) == (None, None, None, None)


def test_conflict_error_pickles_with_its_fields() -> None:
    error = ConflictError("m", key=b"k", range=(b"a", None), version=3, descriptor={"op": "txn"})
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.key, copy.range, copy.version, copy.descriptor) == ("m", b"k", (b"a", None), 3, {"op": "txn"})


def test_write_write_conflict_names_key_version_and_winner_summary(db) -> None:
    loser, winner = db.begin(), db.begin()
    loser.put(b"k", b"2")
    winner.put(b"k", b"1")
    winner.set_summary({"op": "append", "rows": 7})
    winner.commit()
    winning_version = db.version
    with pytest.raises(ConflictError) as caught:
        loser.commit()
    error = caught.value
    assert error.key == b"k" and error.range is None
    assert error.version == winning_version
    assert error.descriptor is not None and error.descriptor["summary"] == {"op": "append", "rows": 7}
    assert error.descriptor["op"] == "txn"
    assert loser.state == "aborted"


def test_read_conflict_names_key(db) -> None:
    db.put(b"x", b"0")
    txn = db.begin("serializable")
    txn.get(b"x")
    txn.put(b"y", b"1")
    db.write(kvstore.WriteBatch().put(b"x", b"1"), summary={"who": "blind"})
    with pytest.raises(ConflictError) as caught:
        txn.commit()
    assert caught.value.key == b"x" and caught.value.version == db.version
    assert caught.value.descriptor == {"op": "write", "keys": 1, "summary": {"who": "blind"}, "seq": db.seq}


def test_phantom_conflict_names_the_range(db) -> None:
    txn = db.begin("serializable")
    list(txn.scan(start=b"a", end=b"m"))
    txn.put(b"z", b"1")
    db.put(b"c", b"inserted")
    with pytest.raises(ConflictError) as caught:
        txn.commit()
    assert caught.value.range == (b"a", b"m") and caught.value.key is None
    assert caught.value.version == db.version


def test_conflict_with_another_writer_carries_its_descriptor() -> None:
    store = MemoryStore(f"memory://{uuid.uuid4().hex}")
    with kvstore.open(store, poll_interval_s=0) as ours, kvstore.open(store, poll_interval_s=0) as theirs:
        txn = ours.begin()
        txn.get(b"k")
        txn.put(b"k", b"ours")
        with theirs.transaction() as other:
            other.put(b"k", b"theirs")
            other.set_summary({"writer": "theirs"})
        with pytest.raises(ConflictError) as caught:
            txn.commit()  # loses the race, catches up, re-validates
        assert caught.value.key == b"k"
        assert caught.value.version == theirs.version
        assert caught.value.descriptor is not None
        assert caught.value.descriptor["summary"] == {"writer": "theirs"}


def test_same_group_conflict_has_the_winner_descriptor(db) -> None:
    from kvstore.committer import PendingCommit
    from kvstore.oracle import TxnValidation

    txns = [db.begin(), db.begin()]
    group = []
    for n, txn in enumerate(txns):
        check = TxnValidation(txn.id, txn.start_seq, txn.isolation, float("inf"), frozenset({b"k"}))
        group.append(PendingCommit({b"k": (1, b"v", None)}, {"op": "txn", "n": n}, validation=check))
    accepted = db._oracle.validate_group(group)  # internals: two transactions validated in one commit group
    assert accepted == [group[0]]
    error = group[1].error
    assert isinstance(error, ConflictError) and error.key == b"k" and error.version is None
    assert error.descriptor == {"op": "txn", "n": 0}
    for txn in txns:
        txn.rollback()


# -- summaries ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "summary, error",
    [
        ([1, 2], TypeError),
        ({"x": object()}, TypeError),
        ({"x": b"bytes"}, TypeError),
        ({"x": float("nan")}, ValueError),
        ({"x": "y" * (64 * 1024)}, ValueError),
    ],
)
def test_bad_summaries_are_refused(db, summary, error) -> None:
    txn = db.begin()
    with pytest.raises(error, match="summary"):
        txn.set_summary(summary)
    txn.rollback()
    with pytest.raises(error, match="summary"):
        db.write(kvstore.WriteBatch().put(b"k", b"v"), summary=summary)


def test_summary_is_copied_at_set_time(db) -> None:
    summary = {"files": ["a"]}
    with db.transaction() as txn:
        txn.put(b"k", b"v")
        txn.set_summary(summary)
        summary["files"].append("b")
    assert db.history(limit=1)[0].commits[0]["summary"] == {"files": ["a"]}


# -- history ---------------------------------------------------------------------


def test_history_newest_first_with_summaries_and_writer(db) -> None:
    with db.transaction() as txn:
        txn.put(b"a", b"1")
        txn.set_summary({"n": 1})
    db.write(kvstore.WriteBatch().put(b"b", b"2"), summary={"n": 2})
    db.put(b"c", b"3")
    infos = db.history()
    assert [i.version for i in infos] == [3, 2, 1, 0]
    assert infos[0].commits[0].get("summary") is None
    assert infos[1].commits[0]["summary"] == {"n": 2}
    assert infos[2].commits[0]["summary"] == {"n": 1}
    assert infos[3].commits == []
    assert all(i.writer == db.writer_id for i in infos)
    assert [i.timestamp for i in infos] == sorted((i.timestamp for i in infos), reverse=True)
    assert isinstance(infos[0], kvstore.VersionInfo)
    with pytest.raises(AttributeError):
        infos[0].version = 9  # type: ignore[misc]


def test_history_limit_and_start(db) -> None:
    for n in range(5):
        db.put(b"k", b"%d" % n)
    assert [i.version for i in db.history(limit=2)] == [5, 4]
    assert [i.version for i in db.history(limit=2, start=2)] == [2, 1]
    assert [i.version for i in db.history(limit=None, start=1)] == [1, 0]
    assert db.history(limit=0) == []
    with pytest.raises(ValueError, match="does not exist yet"):
        db.history(start=6)
    with pytest.raises(ValueError, match="limit"):
        db.history(limit=-1)
    with pytest.raises(TypeError, match="limit"):
        db.history(limit="3")  # type: ignore[arg-type]


def test_history_stops_at_versions_gc_removed() -> None:
    from kvstore.chain import VersionChain

    store = MemoryStore(f"memory://{uuid.uuid4().hex}")
    with kvstore.open(
        store, poll_interval_s=0, retention_window_s=0, gc_grace_s=0, gc_min_roots=2, background_maintenance=False
    ) as db:
        for n in range(6):
            db.put(b"k", b"%d" % n)
        db.flush()
        db.put(b"k", b"after the flush")  # the floor moves past the flushed versions
        # GC counts an age only beyond the clock's resolution and probe round trip.
        wait_for(lambda: bool(db.gc().deleted_roots))
        versions = [i.version for i in db.history(limit=None)]
        remaining = VersionChain(store).list_versions()  # the root files left in storage
        assert versions == sorted(remaining, reverse=True)[: len(versions)]
        assert versions[0] == db.version and 0 not in versions


def test_history_returns_copies(db) -> None:
    db.write(kvstore.WriteBatch().put(b"k", b"v"), summary={"n": 1})
    db.history(limit=1)[0].commits[0]["summary"]["n"] = 99
    assert db.history(limit=1)[0].commits[0]["summary"] == {"n": 1}


# -- cheap handles and close ---------------------------------------------------------


def _thread_names() -> set[str]:
    return {t.name for t in threading.enumerate()}


def test_cheap_handle_starts_no_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with kvstore.open(str(tmp_path / "s")) as db:
        for n in range(3):
            db.put(b"k%d" % n, b"v")  # a few unflushed versions to load at open
    started: list[str] = []
    real_start = threading.Thread.start

    def counting_start(self: threading.Thread) -> None:
        started.append(self.name)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", counting_start)
    db = kvstore.open(str(tmp_path / "s"), background_threads=False)
    assert db.get(b"k1") == b"v"
    db.close()
    assert started == []


def test_cheap_handle_commits_in_the_calling_thread(tmp_path: Path) -> None:
    url = str(tmp_path / "s")
    with kvstore.open(url, background_threads=False, hint_interval_s=0) as db:
        before = _thread_names()
        db.put(b"a", b"1")
        with db.transaction() as txn:
            txn.put(b"b", b"2")
        assert _thread_names() == before
        assert db.stats()["hint_writes"] >= 1
    with kvstore.open(url, background_threads=False) as db:
        assert (db.get(b"a"), db.get(b"b")) == (b"1", b"2")
        with pytest.raises(kvstore.StoreClosedError):
            db.close()
            db.put(b"c", b"3")


def test_cheap_handle_concurrent_commits_all_land(tmp_path: Path) -> None:
    with kvstore.open(str(tmp_path / "s"), background_threads=False) as db:
        threads = [threading.Thread(target=lambda n=n: [db.put(b"k%d-%d" % (n, i), b"v") for i in range(20)]) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(list(db.scan())) == 80


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("commit_store", [False, True], ids=["local", "lmdb"])
def test_open_get_close_loop_leaks_no_threads_or_fds(tmp_path: Path, commit_store: bool) -> None:
    url = str(tmp_path / "s")
    options = {"commit_store": f"lmdb:{tmp_path / 'lmdb'}"} if commit_store else {}
    if commit_store:
        url = f"file://{url}?conditional_create=false"
    with kvstore.open(url, **options) as db:
        db.put(b"k", b"v")
    threads, fds = threading.active_count(), _open_fds()
    for _ in range(200):
        db = kvstore.open(url, background_threads=False, **options)
        assert db.get(b"k") == b"v"
        db.close()
    assert threading.active_count() == threads
    assert _open_fds() <= fds


def test_close_does_not_close_a_store_passed_in() -> None:
    closed: list[bool] = []

    class Tracking(MemoryStore):
        def close(self) -> None:
            closed.append(True)

    store = Tracking(f"memory://{uuid.uuid4().hex}")
    kvstore.open(store, poll_interval_s=0).close()
    assert closed == []


def test_failed_open_closes_the_store_it_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kvstore.objstore.local as local

    closed: list[bool] = []
    monkeypatch.setattr(local.LocalStore, "close", lambda self: closed.append(True))
    with pytest.raises(FileNotFoundError):
        kvstore.open(str(tmp_path / "absent"), create=False)
    assert closed == [True]


def test_background_threads_option_is_a_bool() -> None:
    with pytest.raises(TypeError, match="background_threads"):
        kvstore.open("memory://bg-type", background_threads="no")


# -- storage clock -------------------------------------------------------------


def test_storage_now_follows_the_storage_clock() -> None:
    skew = 3600.0

    class Skewed(MemoryStore):
        def head(self, path: str):  # the storage's clock is an hour ahead, whole seconds
            meta = super().head(path)
            return type(meta)(meta.path, meta.size, float(int(meta.mtime + skew)), meta.etag)

    import time

    with kvstore.open(Skewed(f"memory://{uuid.uuid4().hex}"), poll_interval_s=0) as db:
        now = db.storage_now()
        assert db.storage_clock_resolution == 1.0
        local = time.time()
        assert local + skew - 1.5 <= now <= local + skew + 0.01
        assert db.objects.head("_clock_probe").size > 0


def test_storage_now_resolution_on_a_fine_clock(db) -> None:
    import time

    assert abs(db.storage_now() - time.time()) < 1.0
    assert db.storage_clock_resolution == 0.001
