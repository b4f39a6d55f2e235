"""The committer: group commit, one bad member never fails its group, inline mode.

A test of the committer's internals: it drives the store's committer
directly (``db._committer``) and watches the engine state it updates.
"""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import pytest

import kvstore
from full_disk_util import tmpfs
from kvstore.committer import PendingCommit
from kvstore.errors import CommitError, CommitNotLandedError, NotWrittenError, ObjectStoreError
from kvstore.format.rows import PUT
from kvstore.objstore.memory import MemoryStore


@pytest.fixture(params=[True, False], ids=["threaded", "inline"])
def db(request):
    store = kvstore.open(
        MemoryStore(f"memory://{uuid.uuid4().hex}"), poll_interval_s=0, background_threads=request.param
    )
    yield store
    store.close()


def _put(key: bytes, expire: object = None) -> PendingCommit:
    return PendingCommit({key: (PUT, b"v", expire)}, {"op": "write", "keys": 1})  # type: ignore[dict-item]


def test_a_member_that_cannot_be_encoded_fails_alone(db) -> None:
    group = [_put(b"a"), _put(b"bad", expire=2**70), _put(b"c"), _put(b"d", expire="soon")]
    db._committer._commit_group(group)  # internals: commit one hand-made group
    assert [p.error is None for p in group] == [True, False, True, False]
    assert all(p.finished for p in group)
    assert isinstance(group[1].error, CommitError) and "could not be encoded" in str(group[1].error)
    assert (db.get(b"a"), db.get(b"c"), db.get(b"bad"), db.get(b"d")) == (b"v", b"v", None, None)
    assert group[0].version == group[2].version == db.version
    assert db.stats()["memtable_rows"] == 2


def test_group_of_only_bad_members_writes_nothing(db) -> None:
    head = db.version
    group = [_put(b"bad", expire=2**70)]
    db._committer._commit_group(group)  # internals: commit one hand-made group
    assert isinstance(group[0].error, CommitError) and db.version == head


def test_many_threads_one_with_a_huge_ttl(db) -> None:
    errors: list[BaseException] = []
    done = threading.Barrier(16)

    def writer(n: int) -> None:
        done.wait()
        for i in range(20):
            try:
                db.put(b"t%02d-%02d" % (n, i), b"v", ttl=1e30 if n == 0 else None)
            except BaseException as exc:  # noqa: BLE001 - collected and checked below
                errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 20 and all(isinstance(e, ValueError) and "ttl" in str(e) for e in errors)
    assert len(list(db.scan())) == 15 * 20


@pytest.mark.parametrize("ttl", [float("inf"), float("nan"), 1e30, -1, 0])
def test_bad_ttls_raise_value_error_naming_ttl(db, ttl) -> None:
    with pytest.raises(ValueError, match="ttl"):
        db.put(b"k", b"v", ttl=ttl)
    with pytest.raises(ValueError, match="ttl"):
        kvstore.WriteBatch().put(b"k", b"v", ttl=ttl)
    txn = db.begin()
    with pytest.raises(ValueError, match="ttl"):
        txn.put(b"k", b"v", ttl=ttl)
    txn.rollback()


def test_group_commit_shares_one_root(db) -> None:
    group = [_put(b"k%d" % n) for n in range(10)]
    head = db.version
    db._committer._commit_group(group)  # internals: commit one hand-made group
    assert db.version == head + 1 and [p.seq for p in group] == list(range(group[0].seq, group[0].seq + 10))


def test_submit_after_close_raises(db) -> None:
    db.close()
    with pytest.raises(kvstore.StoreClosedError):
        db._committer.submit(_put(b"k"))  # internals: the committer refuses work once closed


# -- an idle committer lets the caller commit on its own thread (issue 15) -------------


@pytest.fixture
def threaded_db():
    store = kvstore.open(MemoryStore(f"memory://{uuid.uuid4().hex}"), poll_interval_s=0)
    yield store
    store.close()


def _block_first_publish(db) -> tuple[threading.Event, threading.Event]:
    """Make the next publish wait until released; return (entered, release)."""
    chain = db._committer._chain  # internals: the chain the committer publishes through
    publish = chain.publish
    entered, release = threading.Event(), threading.Event()

    def blocking_publish(data: bytes, version: int) -> bool:
        if not entered.is_set():
            entered.set()
            assert release.wait(60)
        return publish(data, version)

    chain.publish = blocking_publish
    return entered, release


def test_an_idle_committer_commits_on_the_callers_thread(threaded_db) -> None:
    committer = threaded_db._committer  # internals: its count of inline commits
    applied_in: list[str] = []
    threaded_db.subscribe(lambda version: applied_in.append(threading.current_thread().name))  # runs where applied
    before = committer.inline_commits
    threaded_db.put(b"k", b"v")
    assert committer.inline_commits == before + 1
    assert applied_in == [threading.current_thread().name]
    assert threaded_db.get(b"k") == b"v"


def test_callers_arriving_during_an_inline_commit_share_one_group(threaded_db) -> None:
    committer = threaded_db._committer  # internals: submit to it and watch its queue
    entered, release = _block_first_publish(threaded_db)
    first = _put(b"first")
    inline = threading.Thread(target=committer.submit, args=(first,))
    inline.start()
    assert entered.wait(60)  # the first caller is inside its own commit
    queued = [_put(b"q%d" % n) for n in range(8)]
    callers = [threading.Thread(target=committer.submit, args=(p,)) for p in queued]
    for caller in callers:
        caller.start()
    for _ in range(60_000):
        with committer._cond:  # internals: the queue's lock
            if len(committer._queue) == len(queued):  # internals: every caller queued
                break
        threading.Event().wait(0.001)
    assert len(committer._queue) == len(queued)  # internals: nobody committed beside the inline commit
    release.set()
    for thread in [inline, *callers]:
        thread.join(60)
    assert first.error is None and all(p.error is None for p in queued)
    assert {p.version for p in queued} == {first.version + 1}  # one group, one root
    seqs = sorted(p.seq for p in [first, *queued])
    assert seqs == list(range(seqs[0], seqs[0] + 9))
    assert all(threaded_db.get(key) == b"v" for p in [first, *queued] for key in p.mutations)


def test_close_waits_for_an_inline_commit_and_commits_the_queue(threaded_db) -> None:
    committer = threaded_db._committer  # internals: submit to it and watch its queue
    entered, release = _block_first_publish(threaded_db)
    first, second = _put(b"a"), _put(b"b")
    inline = threading.Thread(target=committer.submit, args=(first,))
    inline.start()
    assert entered.wait(60)
    queued = threading.Thread(target=committer.submit, args=(second,))
    queued.start()
    for _ in range(60_000):
        with committer._cond:  # internals: the queue's lock
            if committer._queue:  # internals: the second caller queued
                break
        threading.Event().wait(0.001)
    closer = threading.Thread(target=committer.close)
    closer.start()
    release.set()
    for thread in (inline, queued, closer):
        thread.join(60)
    assert first.error is None and second.error is None
    assert second.version == first.version + 1


def test_inline_and_group_commits_under_concurrency_lose_nothing(threaded_db) -> None:
    """Writers and read-modify-write transactions from 12 threads: every
    commit lands once, with a unique seq, and no increment is lost."""
    seqs: list[int] = []
    lock = threading.Lock()
    threaded_db.put(b"counter", b"0")

    def writer(n: int) -> None:
        for i in range(30):
            seq = threaded_db.put(b"w%02d-%02d" % (n, i), b"v")
            with lock:
                seqs.append(seq)

    def incrementer() -> None:
        for _ in range(15):
            threaded_db.run(lambda txn: txn.put(b"counter", b"%d" % (int(txn.get(b"counter")) + 1)), retries=1000)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    threads += [threading.Thread(target=incrementer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads)
    assert len(set(seqs)) == len(seqs) == 8 * 30
    assert len([k for k, _ in threaded_db.scan(prefix=b"w")]) == 8 * 30
    assert threaded_db.get(b"counter") == b"60"


def test_wait_settled_wakes_every_waiter_and_returns_at_once_after() -> None:
    pending = _put(b"k")
    assert pending.wait_settled(0.01) is False
    woke: list[bool] = []
    waiters = [threading.Thread(target=lambda: woke.append(pending.wait_settled(30))) for _ in range(3)]
    for thread in waiters:
        thread.start()
    pending.finish()
    for thread in waiters:
        thread.join(30)
    assert woke == [True, True, True]
    assert pending.wait_settled(0) is True
    pending.wait()  # the submitter's own wait is independent of the others


# -- commits the storage refused (a full disk; issue 35) ----------------------------------

QUIET = {"poll_interval_s": 0, "background_maintenance": False}


@pytest.mark.parametrize("value_bytes", [8_000, 300_000], ids=["inline", "delta-sst"])
def test_a_commit_refused_by_a_full_disk_says_it_did_not_land(tmp_path: Path, value_bytes: int) -> None:
    with tmpfs(tmp_path / "disk", size_mb=2) as disk:
        acknowledged: dict[bytes, bytes] = {}
        with kvstore.open(str(disk / "store"), **QUIET) as db:
            for n in range(1000):
                value = os.urandom(value_bytes)
                try:
                    db.put(b"k%d" % n, value)
                except CommitError as exc:
                    refused = exc
                    break
                acknowledged[b"k%d" % n] = value
            else:
                raise AssertionError("2 MiB never filled up")
            assert isinstance(refused, CommitNotLandedError), refused
            assert "did not land" in str(refused) and "if it landed" not in str(refused)
            version = db.version
        assert sorted(os.listdir(disk / "store" / ".tmp")) == []  # nothing half-written left behind
        with kvstore.open(str(disk / "store"), create=False, **QUIET) as db:
            assert db.version == version  # the refused commit made no version
            assert dict(db.scan()) == acknowledged


class _AmbiguousThenRefused(MemoryStore):
    """Root PUTs: the first fails ambiguously (it did not land, but the caller
    cannot know), every later one is refused."""

    def __init__(self) -> None:
        super().__init__(f"memory://{uuid.uuid4().hex}")
        self.root_puts = 0
        self.armed = False

    def put_if_absent(self, path: str, data: bytes) -> bool:
        if self.armed and path.startswith("_") and path.endswith(".ipc"):
            self.root_puts += 1
            if self.root_puts == 1:
                raise ObjectStoreError("timed out (did it land?)")
            raise NotWrittenError("refused: no space left")
        return super().put_if_absent(path, data)


def test_a_refusal_after_an_ambiguous_put_stays_uncertain() -> None:
    store = _AmbiguousThenRefused()
    with kvstore.open(store, backoff_max_s=0.001, **QUIET) as db:
        store.armed = True
        # The first PUT may still land late: the refusals after it prove nothing.
        with pytest.raises(CommitError, match="if it landed") as caught:
            db.put(b"k", b"v")
        assert not isinstance(caught.value, CommitNotLandedError)
        assert store.root_puts > 2  # it kept trying to settle
