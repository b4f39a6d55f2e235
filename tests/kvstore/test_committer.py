"""The committer: group commit, one bad member never fails its group, inline mode."""

from __future__ import annotations

import threading
import uuid

import pytest

import kvstore
from kvstore.committer import PendingCommit
from kvstore.errors import CommitError
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
    db._committer._commit_group(group)
    assert [p.error is None for p in group] == [True, False, True, False]
    assert all(p.finished for p in group)
    assert isinstance(group[1].error, CommitError) and "could not be encoded" in str(group[1].error)
    assert (db.get(b"a"), db.get(b"c"), db.get(b"bad"), db.get(b"d")) == (b"v", b"v", None, None)
    assert group[0].version == group[2].version == db.version
    assert db._state.layers.memtable.row_count == 2


def test_group_of_only_bad_members_writes_nothing(db) -> None:
    head = db.version
    group = [_put(b"bad", expire=2**70)]
    db._committer._commit_group(group)
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
    db._committer._commit_group(group)
    assert db.version == head + 1 and [p.seq for p in group] == list(range(group[0].seq, group[0].seq + 10))


def test_submit_after_close_raises(db) -> None:
    db.close()
    with pytest.raises(kvstore.StoreClosedError):
        db._committer.submit(_put(b"k"))
