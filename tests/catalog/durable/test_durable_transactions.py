"""YTsaurus transaction scenarios (yt/tests/integration/master/test_transactions.py, adapted).

Expiry runs on the injected FakeClock here; test_durable_multiprocess.py
checks the same with real time across processes.
"""

from __future__ import annotations

import pytest

import kvstore
from catalog.durable import (
    DurableTransactionExpiredError,
    LockConflictError,
    TransactionManager,
    TransactionStateError,
)
from catalog.durable import lifecycle
from durable_workers import FakeClock

N = "sales.eu.orders"


def test_simple(manager: TransactionManager) -> None:
    tx = manager.begin(timeout=10, title="nightly load")
    record = tx.record()
    assert (record.state, record.title, record.parent, record.timeout_ms) == ("active", "nightly load", None, 10_000)
    assert len(tx.id) == 32
    tx.commit()
    assert tx.state == "committed"
    assert manager.attach(tx.id).state == "committed"


def test_begin_arguments(manager: TransactionManager) -> None:
    with pytest.raises(ValueError, match="timeout"):
        manager.begin(timeout=0)
    with pytest.raises(TypeError, match="timeout must be a finite number or None, not bool"):
        manager.begin(timeout=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="title"):
        manager.begin(title=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="32 lowercase hex"):
        manager.attach("nope")
    with pytest.raises(TransactionStateError, match="no transaction"):
        manager.attach("0" * 32)
    with pytest.raises(TransactionStateError, match="no transaction"):
        manager.begin(parent="0" * 32)


def test_timeout_capped_by_store_wide_maximum(manager: TransactionManager) -> None:
    assert manager.begin(timeout=7200).record().timeout_ms == 3_600_000
    assert manager.begin().record().timeout_ms == 60_000
    manager.configure(max_timeout_s=30, default_timeout_s=5)
    assert manager.begin(timeout=7200).record().timeout_ms == 30_000
    assert manager.begin().record().timeout_ms == 5_000
    manager.configure(max_timeout_s=2)
    assert manager.begin().record().timeout_ms == 2_000  # the default is capped too
    assert manager.begin(timeout=0.0001).record().timeout_ms == 1
    with pytest.raises(ValueError, match="max_locks_per_txn"):
        manager.configure(max_locks_per_txn=0)


def test_timeout_expires(manager: TransactionManager, clock: FakeClock) -> None:
    tx = manager.begin(timeout=10)
    tx.lock(N, "exclusive")
    clock.advance(9.9)
    assert tx.state == "active"
    clock.advance(0.2)
    assert tx.state == "expired"
    # expired counts as aborted for everyone: its lock no longer blocks
    other = manager.begin()
    assert other.lock(N, "exclusive").state == "acquired"
    assert [lock.txn for lock in manager.locks(N)] == [other.id]
    with pytest.raises(DurableTransactionExpiredError):
        tx.commit()
    with pytest.raises(DurableTransactionExpiredError):
        tx.ping()
    with pytest.raises(DurableTransactionExpiredError):
        tx.lock("another")


def test_ping(manager: TransactionManager, clock: FakeClock) -> None:
    tx = manager.begin(timeout=10)
    for _ in range(5):
        clock.advance(8)
        tx.ping()
    assert tx.state == "active"
    clock.advance(10)
    assert tx.state == "expired"


def test_expire_outer_while_inner_pinged(manager: TransactionManager, clock: FakeClock) -> None:
    outer = manager.begin(timeout=10)
    inner = manager.begin(timeout=10, parent=outer)
    inner.lock(N, "exclusive")
    clock.advance(6)
    inner.ping()
    clock.advance(6)
    assert outer.state == "expired"
    assert inner.state == "expired"
    with pytest.raises(DurableTransactionExpiredError, match=f"ancestor {outer.id}"):
        inner.ping()
    assert manager.locks(N) == []
    assert manager.transactions() == []


def test_ping_ancestors(manager: TransactionManager, clock: FakeClock) -> None:
    outer = manager.begin(timeout=10)
    inner = manager.begin(timeout=10, parent=outer)
    for _ in range(4):
        clock.advance(6)
        inner.ping(ancestors=True)
    assert (outer.state, inner.state) == ("active", "active")
    inner.commit()
    outer.commit()
    assert outer.state == "committed"


def test_abort_parent_aborts_descendants(manager: TransactionManager) -> None:
    outer = manager.begin()
    inner = manager.begin(parent=outer)
    deepest = manager.begin(parent=inner)
    deepest.lock(N, "exclusive")
    outer.abort()
    assert [tx.state for tx in (outer, inner, deepest)] == ["aborted"] * 3
    assert manager.locks(N) == []
    with pytest.raises(TransactionStateError, match="already aborted"):
        manager.begin(parent=inner)


def test_commit_parent_with_open_child_fails(manager: TransactionManager) -> None:
    outer = manager.begin()
    inner = manager.begin(parent=outer)
    with pytest.raises(TransactionStateError, match=f"child {inner.id} is still open"):
        outer.commit()
    assert outer.state == "active"
    inner.commit()
    outer.commit()


def test_commit_parent_after_child_expired(manager: TransactionManager, clock: FakeClock) -> None:
    outer = manager.begin(timeout=100)
    inner = manager.begin(timeout=1, parent=outer)
    inner.lock(N, "exclusive")
    clock.advance(2)
    outer.commit()  # the expired child counts as aborted: it does not block, its lock is gone
    assert inner.state == "expired"
    assert manager.locks(N) == []


def test_double_commit_and_commit_after_abort_fail(manager: TransactionManager) -> None:
    tx = manager.begin()
    tx.commit()
    with pytest.raises(TransactionStateError, match="already committed"):
        tx.commit()
    with pytest.raises(TransactionStateError, match="already committed"):
        tx.abort()
    aborted = manager.begin()
    aborted.abort()
    aborted.abort()  # idempotent
    with pytest.raises(TransactionStateError, match="already aborted"):
        aborted.commit()
    with pytest.raises(TransactionStateError):
        aborted.ping()


def test_holder_expiry_promotes_waiter(manager: TransactionManager, clock: FakeClock) -> None:
    holder = manager.begin(timeout=5)
    holder.lock(N, "exclusive")
    waiter = manager.begin(timeout=60)
    waiting = waiter.lock(N, "exclusive", waitable=True)
    assert waiting.state == "pending"
    clock.advance(6)
    assert waiting.wait(timeout=10) is waiting
    assert waiting.state == "acquired"


def test_waiter_expiry_unblocks_queue(manager: TransactionManager, clock: FakeClock) -> None:
    holder = manager.begin(timeout=60)
    holder.lock(N, "shared")
    blocked_writer = manager.begin(timeout=5)
    writer_lock = blocked_writer.lock(N, "exclusive", waitable=True)
    reader = manager.begin(timeout=60)
    reader_lock = reader.lock(N, "shared", waitable=True)
    assert reader_lock.state == "pending"  # queued behind the pending exclusive
    clock.advance(6)
    assert reader_lock.wait(timeout=10).state == "acquired"
    with pytest.raises(DurableTransactionExpiredError):
        writer_lock.wait(timeout=1)


def test_lock_count_limit(manager: TransactionManager) -> None:
    manager.configure(max_locks_per_txn=3)
    tx = manager.begin()
    for node in ("a", "b", "c"):
        tx.lock(node, "shared")
    tx.lock("a", "shared")  # redundant: no new lock, no error
    with pytest.raises(TransactionStateError, match="limit"):
        tx.lock("d", "shared")
    tx.unlock("a")
    tx.lock("d", "shared")


def test_unlock_implicit_lock_refused(manager: TransactionManager) -> None:
    tx = manager.begin()
    manager.run(lambda work: lifecycle.lock(work, tx.id, N, "shared", None, None, False, implicit=True))
    with pytest.raises(TransactionStateError, match="staged change"):
        tx.unlock(N)
    # an explicit lock that an operation then used becomes implicit too
    tx.lock("other", "exclusive")
    manager.run(lambda work: lifecycle.lock(work, tx.id, "other", "shared", None, None, False, implicit=True))
    with pytest.raises(TransactionStateError, match="staged change"):
        tx.unlock("other")
    tx.lock("free", "snapshot")
    tx.unlock("free")
    assert manager.locks("free") == []


def test_transactions_listing(manager: TransactionManager, clock: FakeClock) -> None:
    a = manager.begin(title="a")
    b = manager.begin(title="b", timeout=1)
    c = manager.begin(title="c")
    c.commit()
    clock.advance(2)
    assert [r.id for r in manager.transactions()] == [a.id]
    everything = {r.id: r.state for r in manager.transactions(include_finished=True)}
    assert everything == {a.id: "active", b.id: "expired", c.id: "committed"}


def test_staged_ops_move_to_parent_and_need_a_catalog(manager: TransactionManager) -> None:
    outer = manager.begin()
    inner = manager.begin(parent=outer)
    manager.run(lambda work: lifecycle.stage_op(work, outer.id, {"kind": "first"}))
    manager.run(lambda work: lifecycle.stage_op(work, inner.id, {"kind": "second"}))
    inner.commit()
    assert manager.run(lambda work: lifecycle.staged_ops(work, outer.id)) == [{"kind": "first"}, {"kind": "second"}]
    with pytest.raises(TransactionStateError, match="no catalog"):
        outer.commit()
    applied = []
    manager.apply_ops = lambda work, record, ops: applied.append((record.id, ops))
    outer.commit()
    assert applied == [(outer.id, [{"kind": "first"}, {"kind": "second"}])]
    assert manager.run(lambda work: lifecycle.staged_ops(work, outer.id)) == []


def test_two_handles_agree(store_url: str, manager: TransactionManager) -> None:
    tx = manager.begin()
    with kvstore.open(store_url, poll_interval_s=0, background_maintenance=False) as other_store:
        other = TransactionManager(other_store, clock=manager.clock)
        other.attach(tx.id).lock(N, "exclusive")
        with pytest.raises(LockConflictError):
            manager.begin().lock(N, "shared")
        tx.abort()
        assert other.attach(tx.id).state == "aborted"


def test_child_expired_before_parent_abort_stays_expired(manager: TransactionManager, clock: FakeClock) -> None:
    outer = manager.begin(timeout=100)
    inner = manager.begin(timeout=1, parent=outer)
    clock.advance(2)  # inner's deadline passes; nobody looks
    outer.abort()
    assert (outer.state, inner.state) == ("aborted", "expired")
