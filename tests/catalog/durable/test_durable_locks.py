"""YTsaurus lock scenarios (yt/tests/integration/cypress/test_locks.py, adapted to node names).

Each test is named after its YTsaurus counterpart. ``me`` is a transaction
owner in this process; ``peer`` is the other party, run in this process and
again in a second process (the ``peer`` fixture's two parameters).
"""

from __future__ import annotations

import pytest

from catalog.durable import LockConflictError, TransactionStateError
from durable_workers import Driver

N = "sales.eu.orders"


def test_invalid_cases(me: Driver) -> None:
    tx = me.begin()
    with pytest.raises(ValueError, match="mode must be one of"):
        me.lock(tx, N, "none")
    with pytest.raises(ValueError, match="only allowed with mode='shared'"):
        me.lock(tx, N, "exclusive", child_key="a")
    with pytest.raises(ValueError, match="only allowed with mode='shared'"):
        me.lock(tx, N, "snapshot", attribute_key="a")
    with pytest.raises(ValueError, match="not both"):
        me.lock(tx, N, "shared", child_key="a", attribute_key="b")
    with pytest.raises(ValueError, match="forbidden character"):
        me.lock(tx, "a/b")
    with pytest.raises(ValueError, match="must not be empty"):
        me.lock(tx, "")
    with pytest.raises(TypeError, match="node must be a str"):
        me.lock(tx, 5)  # type: ignore[arg-type]


def test_lock_mode_exclusive_conflict(me: Driver, peer: Driver) -> None:
    tx1 = me.begin()
    tx2 = peer.begin()
    me.lock(tx1, N, "exclusive")
    with pytest.raises(LockConflictError) as caught:
        peer.lock(tx2, N, "exclusive")
    message = str(caught.value)
    assert N in message and "exclusive" in message and tx1 in message
    with pytest.raises(LockConflictError):
        peer.lock(tx2, N, "shared")
    me.commit(tx1)
    assert peer.lock(tx2, N, "exclusive").state == "acquired"


def test_conflict_error_fields(me: Driver) -> None:
    from catalog.durable.errors import LockConflictError as Error

    tx1, tx2 = me.begin(), me.begin()
    me.lock(tx1, N, "shared", child_key="k")
    with pytest.raises(Error) as caught:
        me.lock(tx2, N, "shared", child_key="k")
    assert (caught.value.node, caught.value.mode, caught.value.key, caught.value.holder) == (N, "shared", "k", tx1)


def test_shared_lock_compatible(me: Driver, peer: Driver) -> None:
    tx1, tx2, tx3 = me.begin(), peer.begin(), peer.begin()
    me.lock(tx1, N, "shared")
    assert peer.lock(tx2, N, "shared").state == "acquired"
    with pytest.raises(LockConflictError):
        peer.lock(tx3, N, "exclusive")


def test_snapshot_lock_coexists_with_exclusive(me: Driver, peer: Driver) -> None:
    tx1, tx2, tx3 = me.begin(), peer.begin(), peer.begin()
    me.lock(tx1, N, "snapshot")
    assert peer.lock(tx2, N, "exclusive").state == "acquired"
    assert peer.lock(tx3, N, "snapshot").state == "acquired"


def test_snapshot_lock_forbids_own_write(me: Driver) -> None:
    tx = me.begin()
    me.lock(tx, N, "snapshot")
    with pytest.raises(LockConflictError, match="snapshot"):
        me.lock(tx, N, "exclusive")
    with pytest.raises(LockConflictError):
        me.lock(tx, N, "shared", waitable=True)  # never queued: only an unlock can clear it
    child = me.begin(parent=tx)
    with pytest.raises(LockConflictError):
        me.lock(child, N, "shared")


def test_nested_tx_ancestor_lock_does_not_block(me: Driver, peer: Driver) -> None:
    outer = me.begin()
    me.lock(outer, N, "exclusive")
    inner = peer.begin(parent=outer)
    assert peer.lock(inner, N, "exclusive").state == "acquired"
    deeper = peer.begin(parent=inner)
    assert peer.lock(deeper, N, "shared", child_key="x").state == "acquired"


def test_parent_cannot_lock_after_child(me: Driver, peer: Driver) -> None:
    outer = me.begin()
    inner = peer.begin(parent=outer)
    peer.lock(inner, N, "exclusive")
    with pytest.raises(LockConflictError, match=inner):
        me.lock(outer, N, "exclusive")
    with pytest.raises(LockConflictError):
        me.lock(outer, N, "shared")
    assert me.lock(outer, N, "snapshot").state == "acquired"


def test_lock_propagation_on_commit(me: Driver, peer: Driver) -> None:
    outer = me.begin()
    inner = peer.begin(parent=outer)
    peer.lock(inner, N, "exclusive")
    peer.commit(inner)
    assert me.holders(N) == [(outer, "exclusive", None, "acquired")]
    other = peer.begin()
    with pytest.raises(LockConflictError, match=outer):
        peer.lock(other, N, "shared")
    me.commit(outer)
    assert me.holders(N) == []


def test_no_lock_propagation_on_abort(me: Driver, peer: Driver) -> None:
    outer = me.begin()
    inner = peer.begin(parent=outer)
    peer.lock(inner, N, "exclusive")
    peer.abort(inner)
    assert me.holders(N) == []
    assert peer.lock(peer.begin(), N, "exclusive").state == "acquired"


def test_snapshot_lock_not_propagated(me: Driver) -> None:
    outer = me.begin()
    inner = me.begin(parent=outer)
    me.lock(inner, N, "snapshot")
    me.commit(inner)
    assert me.holders(N) == []


def test_acquired_and_pending_promotion_on_child_commit(me: Driver, peer: Driver) -> None:
    blocker = peer.begin()
    peer.lock(blocker, "n2", "exclusive")
    outer = me.begin()
    inner = me.begin(parent=outer)
    me.lock(inner, "n1", "exclusive")
    pending = me.lock(inner, "n2", "exclusive", waitable=True)
    assert pending.state == "pending"
    me.commit(inner)
    assert me.holders("n1") == [(outer, "exclusive", None, "acquired")]
    assert me.holders("n2") == [(blocker, "exclusive", None, "acquired"), (outer, "exclusive", None, "pending")]
    peer.commit(blocker)
    assert me.wait(pending, timeout=30) == "acquired"
    assert me.holders("n2") == [(outer, "exclusive", None, "acquired")]


def test_waitable_lock_handoff_on_commit(me: Driver, peer: Driver) -> None:
    tx1, tx2 = me.begin(), peer.begin()
    me.lock(tx1, N, "exclusive")
    waiting = peer.lock(tx2, N, "exclusive", waitable=True)
    assert waiting.state == "pending"
    assert peer.lock_state(waiting) == "pending"
    me.commit(tx1)
    assert peer.wait(waiting, timeout=30) == "acquired"


def test_waitable_lock_handoff_on_abort(me: Driver, peer: Driver) -> None:
    tx1, tx2 = me.begin(), peer.begin()
    me.lock(tx1, N, "shared")
    waiting = peer.lock(tx2, N, "exclusive", waitable=True)
    me.abort(tx1)
    assert peer.wait(waiting, timeout=30) == "acquired"


def test_waitable_lock_fifo_exclusive_behind_shared(me: Driver, peer: Driver) -> None:
    tx1, tx2, tx3, tx4 = me.begin(), peer.begin(), peer.begin(), me.begin()
    me.lock(tx1, N, "exclusive")
    shared = peer.lock(tx2, N, "shared", waitable=True)
    exclusive = peer.lock(tx3, N, "exclusive", waitable=True)
    late_shared = me.lock(tx4, N, "shared", waitable=True)
    assert [shared.state, exclusive.state, late_shared.state] == ["pending"] * 3
    me.commit(tx1)
    # tx2's shared goes; tx3 waits for it; tx4 is compatible with tx2 but queued behind tx3.
    assert [me.lock_state(shared), me.lock_state(exclusive), me.lock_state(late_shared)] == ["acquired", "pending", "pending"]
    with pytest.raises(LockConflictError, match=tx3):
        me.lock(me.begin(), N, "shared")  # a non-waitable request respects the queue too
    peer.commit(tx2)
    assert me.lock_state(exclusive) == "acquired"
    assert me.lock_state(late_shared) == "pending"
    peer.abort(tx3)
    assert me.wait(late_shared, timeout=30) == "acquired"


def test_snapshot_lock_bypasses_queue(me: Driver, peer: Driver) -> None:
    tx1, tx2, tx3 = me.begin(), peer.begin(), peer.begin()
    me.lock(tx1, N, "exclusive")
    assert peer.lock(tx2, N, "exclusive", waitable=True).state == "pending"
    assert peer.lock(tx3, N, "snapshot", waitable=True).state == "acquired"


def test_independent_child_key_queues(me: Driver, peer: Driver) -> None:
    tx1, tx2, tx3, tx4 = me.begin(), peer.begin(), peer.begin(), me.begin()
    me.lock(tx1, N, "shared", child_key="a")
    waiting = peer.lock(tx2, N, "shared", child_key="a", waitable=True)
    assert waiting.state == "pending"
    assert peer.lock(tx3, N, "shared", child_key="b", waitable=True).state == "acquired"
    assert me.lock(tx4, N, "shared", attribute_key="a").state == "acquired"
    me.commit(tx1)
    assert peer.wait(waiting, timeout=30) == "acquired"


def test_pending_lock_moves_to_parent(me: Driver, peer: Driver) -> None:
    holder = peer.begin()
    peer.lock(holder, N, "exclusive")
    outer = me.begin()
    inner = me.begin(parent=outer)
    waiting = me.lock(inner, N, "exclusive", waitable=True)
    me.commit(inner)
    assert me.holders(N) == [(holder, "exclusive", None, "acquired"), (outer, "exclusive", None, "pending")]
    peer.abort(holder)
    assert me.wait(waiting, timeout=30) == "acquired"
    assert me.holders(N) == [(outer, "exclusive", None, "acquired")]


def test_pending_lock_dropped_with_waiting_transaction(me: Driver, peer: Driver) -> None:
    holder, waiter = me.begin(), peer.begin()
    me.lock(holder, N, "exclusive")
    waiting = peer.lock(waiter, N, "exclusive", waitable=True)
    peer.abort(waiter)
    assert me.lock_state(waiting) == "released"
    with pytest.raises(LockConflictError, match="gone while pending"):
        me.wait(waiting, timeout=5)
    assert me.holders(N) == [(holder, "exclusive", None, "acquired")]


def test_map_locks_same_child_key_conflict(me: Driver, peer: Driver) -> None:
    tx1, tx2 = me.begin(), peer.begin()
    me.lock(tx1, N, "shared", child_key="a")
    with pytest.raises(LockConflictError, match="child_key='a'"):
        peer.lock(tx2, N, "shared", child_key="a")
    assert peer.lock(tx2, N, "shared", child_key="b").state == "acquired"
    assert peer.lock(tx2, N, "shared").state == "acquired"  # keyless shared is compatible with keyed shared


def test_map_locks_different_keys_merge_on_commit(me: Driver, peer: Driver) -> None:
    outer = me.begin()
    inner1, inner2 = me.begin(parent=outer), peer.begin(parent=outer)
    me.lock(inner1, N, "shared", child_key="a")
    peer.lock(inner2, N, "shared", child_key="b")
    me.commit(inner1)
    peer.commit(inner2)
    assert sorted(me.holders(N)) == [(outer, "shared", "a", "acquired"), (outer, "shared", "b", "acquired")]
    with pytest.raises(LockConflictError):
        peer.lock(peer.begin(), N, "shared", child_key="b")


def test_attr_locks(me: Driver, peer: Driver) -> None:
    tx1, tx2 = me.begin(), peer.begin()
    me.lock(tx1, N, "shared", attribute_key="owner")
    with pytest.raises(LockConflictError, match="attribute_key='owner'"):
        peer.lock(tx2, N, "shared", attribute_key="owner")
    assert peer.lock(tx2, N, "shared", attribute_key="comment").state == "acquired"
    with pytest.raises(LockConflictError):
        peer.lock(peer.begin(), N, "exclusive")


def test_redundant_locks(me: Driver) -> None:
    tx = me.begin()
    first = me.lock(tx, N, "exclusive")
    assert me.lock(tx, N, "shared").id == first.id
    assert me.lock(tx, N, "shared", child_key="k").id == first.id
    assert me.lock(tx, N, "exclusive").id == first.id
    snap = me.lock(tx, "other", "snapshot")
    assert me.lock(tx, "other", "snapshot").id == snap.id
    shared = me.lock(tx, "third", "shared")
    assert me.lock(tx, "third", "shared").id == shared.id
    upgraded = me.lock(tx, "third", "exclusive")  # stronger: a new lock
    assert upgraded.id != shared.id
    assert len(me.holders(N)) == 1 and len(me.holders("third")) == 2


def test_unlock_explicit_promotes_waiter(me: Driver, peer: Driver) -> None:
    tx1, tx2 = me.begin(), peer.begin()
    me.lock(tx1, N, "exclusive")
    waiting = peer.lock(tx2, N, "exclusive", waitable=True)
    me.unlock(tx1, N)
    assert peer.wait(waiting, timeout=30) == "acquired"
    me.unlock(tx1, N)  # nothing left: a no-op
    assert me.state(tx1) == "active"


def test_unlock_pending_lock(me: Driver, peer: Driver) -> None:
    tx1, tx2 = me.begin(), peer.begin()
    me.lock(tx1, N, "exclusive")
    waiting = peer.lock(tx2, N, "exclusive", waitable=True)
    peer.unlock(tx2, N)
    assert me.lock_state(waiting) == "released"


def test_unlock_does_not_touch_ancestor_locks(me: Driver) -> None:
    outer = me.begin()
    me.lock(outer, N, "exclusive")
    inner = me.begin(parent=outer)
    me.unlock(inner, N)
    assert me.holders(N) == [(outer, "exclusive", None, "acquired")]


def test_lock_on_finished_transaction_fails(me: Driver, peer: Driver) -> None:
    tx = me.begin()
    me.commit(tx)
    with pytest.raises(TransactionStateError, match="already committed"):
        peer.lock(tx, N)
