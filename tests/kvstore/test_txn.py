"""Transaction scenarios: isolation, conflicts, read-your-writes, lifecycle."""

from __future__ import annotations

import gc
import threading
import time
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvstore
from kvstore.errors import (
    ConflictError,
    LockTimeoutError,
    TransactionClosedError,
    TransactionExpiredError,
)
from kvstore.objstore.memory import MemoryStore


@pytest.fixture
def db():
    store = kvstore.open(MemoryStore(f"memory://{uuid.uuid4().hex}"), poll_interval_s=0)
    yield store
    store.close()


def test_read_your_writes_in_get_and_scan(db) -> None:
    db.put(b"a", b"base-a")
    db.put(b"c", b"base-c")
    db.put(b"d", b"base-d")
    with db.transaction() as txn:
        txn.put(b"b", b"mine-b")
        txn.put(b"c", b"mine-c")
        txn.delete(b"d")
        assert txn.get(b"b") == b"mine-b" and txn.get(b"c") == b"mine-c" and txn.get(b"d") is None
        assert list(txn.scan()) == [(b"a", b"base-a"), (b"b", b"mine-b"), (b"c", b"mine-c")]
        assert list(txn.scan(reverse=True, limit=2)) == [(b"c", b"mine-c"), (b"b", b"mine-b")]
        assert list(txn.scan(prefix=b"b")) == [(b"b", b"mine-b")]
        assert db.get(b"b") is None  # not visible outside before commit
    assert db.get(b"b") == b"mine-b" and db.get(b"d") is None


def test_delete_then_get_and_put_again(db) -> None:
    db.put(b"k", b"v")
    with db.transaction() as txn:
        txn.delete(b"k")
        assert txn.get(b"k") is None
        txn.put(b"k", b"again")
        assert txn.get(b"k") == b"again"
    assert db.get(b"k") == b"again"


def test_snapshot_reads_ignore_later_commits(db) -> None:
    db.put(b"k", b"old")
    txn = db.begin()
    db.put(b"k", b"new")
    db.put(b"other", b"x")
    assert txn.get(b"k") == b"old"
    assert list(txn.scan()) == [(b"k", b"old")]
    txn.rollback()


@pytest.mark.parametrize("isolation", ["snapshot", "serializable"])
def test_write_write_conflict_first_committer_wins(db, isolation) -> None:
    t1, t2 = db.begin(isolation), db.begin(isolation)
    t1.put(b"k", b"1")
    t2.put(b"k", b"2")
    t1.commit()
    with pytest.raises(ConflictError, match="write-write conflict on key b'k'"):
        t2.commit()
    assert db.get(b"k") == b"1"
    assert t2.state == "aborted"


def test_read_write_conflict_only_under_serializable(db) -> None:
    db.put(b"x", b"0")
    for isolation, should_conflict in (("snapshot", False), ("serializable", True)):
        txn = db.begin(isolation)
        txn.get(b"x")
        txn.put(b"y-" + isolation.encode(), b"1")
        db.put(b"x", b"changed")
        if should_conflict:
            with pytest.raises(ConflictError, match="read-write conflict on key b'x'"):
                txn.commit()
        else:
            txn.commit()


def test_read_of_missing_key_conflicts_with_its_insert(db) -> None:
    txn = db.begin("serializable")
    assert txn.get(b"ghost") is None
    txn.put(b"other", b"1")
    db.put(b"ghost", b"boo")
    with pytest.raises(ConflictError):
        txn.commit()


def test_phantom_via_range_scan(db) -> None:
    db.put(b"item:1", b"a")
    txn = db.begin("serializable")
    assert [k for k, _ in txn.scan(prefix=b"item:")] == [b"item:1"]
    txn.put(b"count", b"1")
    db.put(b"item:2", b"b")  # inserted inside the scanned range
    with pytest.raises(ConflictError, match="phantom"):
        txn.commit()


def test_empty_scan_range_still_protects(db) -> None:
    txn = db.begin("serializable")
    assert list(txn.scan(start=b"m", end=b"n")) == []
    txn.put(b"z", b"1")
    db.put(b"mm", b"inserted")
    with pytest.raises(ConflictError):
        txn.commit()


def test_write_outside_scanned_range_does_not_conflict(db) -> None:
    txn = db.begin("serializable")
    list(txn.scan(start=b"m", end=b"n"))
    txn.put(b"z", b"1")
    db.put(b"n", b"just outside")  # end bound is exclusive
    db.put(b"a", b"before")
    txn.commit()


def test_get_for_update_conflicts_even_under_snapshot(db) -> None:
    db.put(b"k", b"1")
    txn = db.begin("snapshot")
    assert txn.get_for_update(b"k") == b"1"
    txn.put(b"other", b"x")
    db.put(b"k", b"2")
    with pytest.raises(ConflictError, match="b'k'"):
        txn.commit()


def test_blind_writes_never_conflict_but_abort_others(db) -> None:
    txn = db.begin("snapshot")
    txn.put(b"k", b"txn")
    db.put(b"k", b"blind-1")  # a blind write commits regardless of the open txn
    db.put(b"k", b"blind-2")
    with pytest.raises(ConflictError):
        txn.commit()
    assert db.get(b"k") == b"blind-2"


def test_rollback_leaves_no_trace(db) -> None:
    version = db.version
    txn = db.begin()
    txn.put(b"k", b"v")
    txn.rollback()
    txn.rollback()  # idempotent
    assert db.get(b"k") is None and db.version == version
    assert db.stats()["running_transactions"] == 0 and len(db.watermark) == 0


def test_exception_in_context_manager_rolls_back(db) -> None:
    with pytest.raises(RuntimeError):
        with db.transaction() as txn:
            txn.put(b"k", b"v")
            raise RuntimeError("boom")
    assert db.get(b"k") is None


def test_use_after_commit_or_rollback_raises(db) -> None:
    txn = db.begin()
    txn.put(b"k", b"v")
    txn.commit()
    for call in (lambda: txn.get(b"k"), lambda: txn.put(b"k", b"v"), txn.commit, lambda: list(txn.scan())):
        with pytest.raises(TransactionClosedError, match="already committed"):
            call()
    other = db.begin()
    other.rollback()
    with pytest.raises(TransactionClosedError, match="rolled back"):
        other.put(b"k", b"v")


def test_read_only_transaction_commits_trivially(db) -> None:
    db.put(b"k", b"v")
    txn = db.begin()
    assert txn.get(b"k") == b"v"
    db.put(b"k", b"changed")
    assert txn.commit() == txn.start_seq  # consistent snapshot: nothing to validate or write


def test_expiry(db) -> None:
    txn = db.begin(ttl=0.05)
    txn.put(b"k", b"v")
    time.sleep(0.1)
    with pytest.raises(TransactionExpiredError):
        txn.get(b"k")
    with pytest.raises(TransactionExpiredError):
        txn.commit()
    assert db.get(b"k") is None
    assert db.stats()["running_transactions"] == 0 and len(db.watermark) == 0


def test_forgotten_transaction_stops_pinning_after_ttl(db) -> None:
    txn = db.begin(ttl=0.05)
    txn.get(b"k")
    assert len(db.watermark) == 1
    time.sleep(0.1)
    db.put(b"trigger", b"gc")  # any commit runs the oracle's collection
    assert db.stats()["running_transactions"] == 0 and len(db.watermark) == 0
    with pytest.raises(TransactionExpiredError):
        txn.put(b"k", b"v")


def test_conflicts_against_another_process_handle() -> None:
    objects = MemoryStore(f"memory://{uuid.uuid4().hex}")
    with kvstore.open(objects, poll_interval_s=0) as a, kvstore.open(objects, poll_interval_s=0) as b:
        a.put(b"k", b"0")
        b.refresh()
        txn = b.begin("serializable")
        assert txn.get(b"k") == b"0"
        txn.put(b"derived", b"from 0")
        a.put(b"k", b"1")  # b has not seen this version yet
        with pytest.raises(ConflictError, match="b'k'"):
            txn.commit()  # loses the race, catches up, re-validates: conflict
        assert b.get(b"derived") is None


def test_run_retries_conflicts(db) -> None:
    db.put(b"counter", b"0")
    attempts = []

    def increment(txn: kvstore.Transaction) -> int:
        value = int(txn.get(b"counter"))
        if not attempts:
            db.put(b"counter", b"100")  # interfere once
        attempts.append(value)
        txn.put(b"counter", b"%d" % (value + 1))
        return value + 1

    assert db.run(increment) == 101
    assert attempts == [0, 100] and db.get(b"counter") == b"101"


def test_run_gives_up_after_retries(db) -> None:
    def always_conflicts(txn: kvstore.Transaction) -> None:
        txn.get(b"k")
        db.put(b"k", b"interference")
        txn.put(b"k2", b"v")

    with pytest.raises(ConflictError):
        db.run(always_conflicts, retries=2)


def test_bad_arguments(db) -> None:
    with pytest.raises(ValueError, match="isolation"):
        db.begin("read committed")
    with pytest.raises(ValueError, match="ttl"):
        db.begin(ttl=0)
    with pytest.raises(ValueError, match="retries"):
        db.run(lambda txn: None, retries=-1)
    txn = db.begin()
    with pytest.raises(TypeError, match="key must be bytes"):
        txn.put("k", b"v")
    txn.rollback()


def test_group_commit_validates_against_earlier_members_of_the_group(db) -> None:
    # Two transactions from the same snapshot writing one key, submitted into
    # one group: the second must see the first as a conflict.
    from kvstore.committer import PendingCommit

    t1, t2 = db.begin("snapshot"), db.begin("snapshot")
    t1.put(b"k", b"1")
    t2.put(b"k", b"2")
    group = []  # two members of one commit group, validated directly
    for txn in (t1, t2):
        from kvstore.oracle import TxnValidation

        group.append(PendingCommit(dict(txn._writes), {}, validation=TxnValidation(  # internals: its commit, hand-made
            txn.id, txn.start_seq, txn.isolation, txn._deadline, frozenset(txn._writes))))
    accepted = db._oracle.validate_group(group)  # internals: the oracle validates one group directly
    assert accepted == [group[0]]
    assert isinstance(group[1].error, ConflictError) and "same group" in str(group[1].error)
    t1.rollback()
    t2.rollback()


def test_dropped_transaction_does_not_leak(db) -> None:
    txn = db.begin(ttl=0.01)
    del txn
    gc.collect()
    time.sleep(0.02)
    db.put(b"x", b"y")
    assert db.stats()["running_transactions"] == 0


# -- run() retries what its messages call retryable (issue 14, defect 13) -------------


def test_run_retries_snapshot_too_old_from_the_commit(db) -> None:
    attempts: list[int] = []

    def work(txn) -> str:
        attempts.append(txn.start_seq)
        if len(attempts) == 1:
            # What a handle that fell behind GC sees: versions after our start
            # could not be read, so this transaction cannot be validated.
            db.put(b"elsewhere", b"x")
            db._oracle.set_horizon(txn.start_seq + 1)  # internals: the oracle's horizon, as a reload moves it
        txn.put(b"k", b"v")
        return "done"

    assert db.run(work, retries=3) == "done"
    assert len(attempts) == 2 and db.get(b"k") == b"v"


def test_run_does_not_retry_snapshot_too_old_from_the_function(db) -> None:
    from kvstore.errors import SnapshotTooOldError

    calls: list[int] = []

    def work(txn) -> None:
        calls.append(1)
        raise SnapshotTooOldError("an old at(...) view inside fn")

    with pytest.raises(SnapshotTooOldError):
        db.run(work, retries=3)
    assert len(calls) == 1


# -- dropped transactions and views release what they pin (issue 14, defect 8) --------


def test_a_dropped_transaction_releases_its_pin_and_oracle_entry(db) -> None:
    db.put(b"k", b"v")
    txn = db.begin()
    txn.get(b"k")
    assert len(db.watermark) == 1 and db.stats()["running_transactions"] == 1
    del txn
    gc.collect()
    assert len(db.watermark) == 0 and db.stats()["running_transactions"] == 0


def test_a_dropped_view_releases_its_pin(db) -> None:
    db.put(b"k", b"v1")
    old = db.version
    db.put(b"k", b"v2")
    view = db.at(version=old)
    snap = db.snapshot()
    assert db.watermark.oldest() == view.seq
    del view, snap
    gc.collect()
    assert db.watermark.oldest() is None
    assert db.retention_floor().reason != "snapshot"


def test_closing_after_expiry_does_not_release_twice(db) -> None:
    txn = db.begin(ttl=0.01)
    time.sleep(0.06)
    db.stats()  # counting the running transactions sweeps out expired ones
    assert txn.state == "expired"  # the sweep ran past its deadline
    txn.rollback()
    del txn
    gc.collect()
    assert len(db.watermark) == 0


# -- get_for_update takes a key lock in this handle (issue 15, hot keys) ---------------


def test_get_for_update_makes_others_of_this_handle_wait(db) -> None:
    db.put(b"k", b"0")
    first, second = db.begin(), db.begin()
    assert first.get_for_update(b"k") == b"0"
    with pytest.raises(LockTimeoutError) as caught:
        second.get_for_update(b"k", timeout=0)
    assert caught.value.key == b"k" and isinstance(caught.value, ConflictError)
    assert second.state == "active"  # the caller decides: retry the lock or roll back
    first.put(b"k", b"1")
    first.commit()
    # The lock is free; second did nothing yet, so it moves to the head and
    # sees first's commit instead of aborting on it.
    assert second.get_for_update(b"k") == b"1"
    assert second.start_seq == db.seq
    second.put(b"k", b"2")
    second.commit()
    assert db.get(b"k") == b"2"
    assert db.stats()["key_locks"] == 0 and len(db.watermark) == 0 and db.stats()["running_transactions"] == 0


def test_a_transaction_that_already_read_keeps_its_snapshot(db) -> None:
    db.put(b"k", b"0")
    first, second = db.begin(), db.begin()
    first.get_for_update(b"k")
    second.get(b"other")  # a read: moving the snapshot now would mix two snapshots
    first.put(b"k", b"1")
    first.commit()
    start = second.start_seq
    assert second.get_for_update(b"k") == b"0"
    assert second.start_seq == start
    second.put(b"k", b"2")
    with pytest.raises(ConflictError, match="b'k'"):
        second.commit()
    assert db.stats()["key_locks"] == 0


def test_moving_to_the_head_moves_the_pin(db) -> None:
    db.put(b"k", b"0")
    txn = db.begin()
    held_back = db.begin()
    for i in range(3):
        db.put(b"other", b"%d" % i)
    assert db.watermark.oldest() == txn.start_seq
    held_back.rollback()
    txn.get_for_update(b"k")
    assert txn.start_seq == db.seq and db.watermark.oldest() == db.seq and len(db.watermark) == 1
    del txn
    gc.collect()  # the finalizer releases the moved pin, not the old one
    assert len(db.watermark) == 0 and db.stats()["key_locks"] == 0


def test_a_transaction_that_already_wrote_keeps_its_snapshot(db) -> None:
    """Moving it would let its write skip first-committer-wins against the
    commits between its start and the head."""
    txn = db.begin("snapshot")
    txn.put(b"k", b"txn")
    db.put(b"k", b"blind")
    start = txn.start_seq
    assert txn.get_for_update(b"j") is None
    assert txn.start_seq == start
    with pytest.raises(ConflictError, match="b'k'"):
        txn.commit()


def _exit_by_commit(db, txn) -> None:
    txn.put(b"k", b"mine")
    txn.commit()


def _exit_by_rollback(db, txn) -> None:
    txn.rollback()


def _exit_by_conflict(db, txn) -> None:
    txn.put(b"k", b"mine")
    db.put(b"k", b"blind")  # blind writes take no lock and still abort us
    with pytest.raises(ConflictError):
        txn.commit()
    assert txn.state == "aborted"


def _exit_by_expiry(db, txn) -> None:
    txn._deadline = 0.0  # internals: expire this transaction now, without waiting out a ttl
    with pytest.raises(TransactionExpiredError):
        txn.get(b"k")


def _exit_by_garbage_collection(db, txn) -> None:
    pass  # the caller drops its reference


@pytest.mark.parametrize(
    "exit_path",
    [_exit_by_commit, _exit_by_rollback, _exit_by_conflict, _exit_by_expiry, _exit_by_garbage_collection],
)
def test_the_lock_is_released_on_every_exit_path(db, exit_path) -> None:
    db.put(b"k", b"0")
    txn = db.begin()
    txn.get_for_update(b"k")
    exit_path(db, txn)
    del txn
    gc.collect()
    other = db.begin()
    other.get_for_update(b"k", timeout=0)  # free again: no LockTimeoutError
    other.rollback()
    assert db.stats()["key_locks"] == 0


def test_the_lock_is_released_by_an_exception_in_a_with_block(db) -> None:
    with pytest.raises(RuntimeError):
        with db.transaction() as txn:
            txn.get_for_update(b"k")
            raise RuntimeError("boom")
    assert db.stats()["key_locks"] == 0


def test_the_lock_is_released_when_the_oracle_expires_the_transaction(db) -> None:
    txn = db.begin(ttl=0.01)
    txn.get_for_update(b"k")
    time.sleep(0.06)
    db.stats()  # counting the running transactions sweeps out expired ones
    assert txn.state == "expired" and db.stats()["key_locks"] == 0


def test_lock_timeout_option_and_argument(tmp_path) -> None:
    with kvstore.open(str(tmp_path / "s"), poll_interval_s=0, lock_timeout_s=0.05) as store:
        holder, waiter = store.begin(), store.begin()
        holder.get_for_update(b"k")
        with pytest.raises(LockTimeoutError, match="0.05 s"):
            waiter.get_for_update(b"k")
        with pytest.raises(ValueError, match="timeout"):
            waiter.get_for_update(b"k", timeout=-1)
        holder.rollback()
        waiter.rollback()
    with pytest.raises(ValueError, match="lock_timeout_s"):
        kvstore.open(str(tmp_path / "t"), lock_timeout_s=-1.0)


def test_opposite_lock_order_does_not_hang(db) -> None:
    """Two transactions take a and b in opposite orders: one fails at once
    with DeadlockError (a ConflictError, so run() retries it); both finish."""
    db.put(b"a", b"0")
    db.put(b"b", b"0")
    both_hold_one = threading.Barrier(2)
    outcomes: list[str] = []

    def take(first: bytes, second: bytes) -> None:
        attempts = [0]

        def work(txn) -> None:
            attempts[0] += 1
            txn.get_for_update(first)
            if attempts[0] == 1:
                both_hold_one.wait(timeout=30)  # each holds one key before asking for the other
            value = txn.get_for_update(second)
            txn.put(second, b"%d" % (int(value) + 1))

        db.run(work, retries=50)
        outcomes.append("committed")

    threads = [threading.Thread(target=take, args=pair) for pair in ((b"a", b"b"), (b"b", b"a"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    assert outcomes == ["committed", "committed"]
    assert int(db.get(b"a")) + int(db.get(b"b")) == 2
    assert db.stats()["key_locks"] == 0


def test_a_lock_granted_after_expiry_is_released(db) -> None:
    holder, waiter = db.begin(), db.begin()
    holder.get_for_update(b"k")
    raised: list[BaseException] = []

    def wait_for_key() -> None:
        try:
            waiter.get_for_update(b"k", timeout=60)
        except BaseException as exc:  # noqa: BLE001 - checked below
            raised.append(exc)

    thread = threading.Thread(target=wait_for_key)
    thread.start()
    for _ in range(30_000):  # until the waiter (the only one) has queued for the key
        if db.stats()["key_lock_waiters"] == 1:
            break
        time.sleep(0.001)
    waiter._expired_by_oracle()  # internals: what the oracle's expiry sweep calls
    holder.rollback()  # hands the key to the expired waiter
    thread.join(60)
    assert len(raised) == 1 and isinstance(raised[0], TransactionExpiredError)
    assert db.stats()["key_locks"] == 0  # the lock granted to the expired waiter was released


# -- read-your-writes in scans, against a model (hypothesis) ----------------------

_KEYS = st.binary(min_size=1, max_size=2).filter(lambda k: k[0] < 0xFF)
_OPS = st.lists(st.tuples(_KEYS, st.one_of(st.none(), st.binary(max_size=3))), max_size=12)


def _apply(ops: list[tuple[bytes, bytes | None]], target, model: dict[bytes, bytes]) -> None:
    """Puts (value) and deletes (None) on a store or transaction, and on the model."""
    for key, value in ops:
        if value is None:
            target.delete(key)
            model.pop(key, None)
        else:
            target.put(key, value)
            model[key] = value


@settings(max_examples=60, deadline=None)
@given(
    base=_OPS, local=_OPS, lo=st.one_of(st.none(), _KEYS), hi=st.one_of(st.none(), _KEYS),
    reverse=st.booleans(), limit=st.one_of(st.none(), st.integers(0, 6)), later=_OPS,
)
def test_scans_merge_local_writes_like_a_model(base, local, lo, hi, reverse, limit, later) -> None:
    """Committed rows, then a transaction's puts and deletes (some written
    after a first scan): each scan equals the model's view in that range."""
    with kvstore.open(MemoryStore(f"memory://{uuid.uuid4().hex}"), poll_interval_s=0) as db:
        model: dict[bytes, bytes] = {}
        _apply(base, db, model)
        txn = db.begin()
        for ops in (local, later):
            _apply(ops, txn, model)
            expected = sorted(
                (k, v) for k, v in model.items() if (lo is None or k >= lo) and (hi is None or k < hi)
            )
            if reverse:
                expected.reverse()
            if limit is not None:
                expected = expected[:limit]
            assert list(txn.scan(start=lo, end=hi, reverse=reverse, limit=limit)) == expected
        txn.rollback()
