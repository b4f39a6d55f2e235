"""Transaction life cycle inside one :class:`~.work.Work`: begin, ping, lock,
unlock, commit, abort, and the clean-up of expired transactions.

Expiry is noticed lazily: an expired transaction stays stored ``active`` until
some process touches it, a lock it holds, or a queue it blocks. That process
then *finishes* it in the same lakekv transaction as its own operation:
marks it and every descendant expired, deletes their locks and promotes the
waiters behind them (:func:`settle`). Until then, every reader already treats
it as expired, because :meth:`~.work.Work.effective` compares its deadline with
the reader's clock.

Staged operations (the catalog changes a transaction will apply) are kept as
JSON under ``sys/txn/op/<txid>/<seq>``; a child's commit appends them to its
parent's, a topmost commit hands them to the ``apply`` callback inside the same
lakekv transaction, so they become visible as one lakekv version.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Callable

from catalog.durable import keys, locks
from catalog.durable.errors import DurableTransactionExpiredError, TransactionStateError
from catalog.durable.records import ABORTED, ACTIVE, COMMITTED, EXPIRED, PENDING, LockRecord, TxnRecord
from catalog.durable.work import Work

ApplyOps = Callable[[Work, TxnRecord, list[dict[str, Any]]], None]


# -- reading state -------------------------------------------------------------


def require_active(work: Work, txid: str) -> TxnRecord:
    """The record of ``txid`` if it is active in effect.

    Raises:
        DurableTransactionExpiredError: it or an ancestor expired; the expired
            transaction is finished in this Work (see the module docstring).
        TransactionStateError: it is committed or aborted, or under an aborted ancestor.
    """
    record = work.require(txid)
    state, culprit = work.effective(txid)
    if state == ACTIVE:
        return record
    if state == EXPIRED:
        settle(work, finish(work, culprit, EXPIRED))
        which = "it" if culprit == txid else f"its ancestor {culprit}"
        raise DurableTransactionExpiredError(f"transaction {txid} is expired: {which} was not pinged before its deadline")
    which = "" if culprit == txid else f" (through its ancestor {culprit})"
    raise TransactionStateError(f"transaction {txid} is already {state}{which}")


def children(work: Work, txid: str) -> list[str]:
    """The ids of ``txid``'s child transactions."""
    prefix = keys.child_prefix(txid)
    return [key[len(prefix) :].decode() for key, _ in work.txn.scan(prefix=prefix)]


# -- begin / ping ----------------------------------------------------------------


def begin(work: Work, parent: str | None, timeout_s: float | None, title: str | None) -> TxnRecord:
    """Record a new active transaction (a child of ``parent`` if given) and return its record.

    ``timeout_s`` (default the store-wide default) is capped by the store-wide maximum.

    Raises:
        DurableTransactionExpiredError / TransactionStateError: ``parent`` is not active
            (see :func:`require_active`).
    """
    config = work.config
    requested_ms = config.default_timeout_ms if timeout_s is None else max(1, int(timeout_s * 1000))
    timeout_ms = min(requested_ms, config.max_timeout_ms)  # the cap applies to the default too
    ancestors: tuple[str, ...] = ()
    if parent is not None:
        ancestors = (*require_active(work, parent).ancestors, parent)
    record = TxnRecord(
        id=uuid.uuid4().hex,
        parent=parent,
        ancestors=ancestors,
        title=title,
        timeout_ms=timeout_ms,
        start_ms=work.now_ms,
        last_ping_ms=work.now_ms,
    )
    work.put_record(record)
    if parent is not None:
        work.txn.put(keys.child_key(parent, record.id), b"")
    return record


def ping(work: Work, txid: str, ancestors: bool) -> TxnRecord:
    """Restart the timeout of ``txid`` (and, with ``ancestors``, of every ancestor)."""
    record = require_active(work, txid)
    for pinged in ([*record.ancestors, txid] if ancestors else [txid]):
        work.put_record(work.require(pinged).pinged(work.now_ms))
    return work.require(txid)


# -- finishing -------------------------------------------------------------------


def finish(work: Work, txid: str, state: str) -> set[str]:
    """Mark ``txid`` and all its descendants ``state`` (aborted or expired) and drop their locks.

    Returns the nodes whose queues may move (pass them to :func:`settle`).
    Staged operations stay until gc deletes their files (``sys/txn/op/``).
    """
    nodes: set[str] = set()
    record = work.record(txid)
    if record is not None and record.parent is not None:
        work.txn.delete(keys.child_key(record.parent, txid))
    stack = [txid]
    while stack:
        current = stack.pop()
        for child in children(work, current):
            work.txn.delete(keys.child_key(current, child))
            stack.append(child)
        current_record = work.record(current)
        if current_record is not None and current_record.state == ACTIVE:
            # A descendant whose own deadline already passed ended then, as expired,
            # before whatever ends its ancestor now.
            own = EXPIRED if current_record.state_at(work.now_ms) == EXPIRED else state
            work.put_record(current_record.with_state(own, work.now_ms))
        nodes |= locks.release_all(work, current)
    return nodes


def finish_dead(work: Work, txid: str) -> set[str]:
    """Finish a transaction that is active in storage but dead in effect."""
    if work.record(txid) is None:
        return locks.release_all(work, txid)
    state, culprit = work.effective(txid)
    culprit_record = work.require(culprit)
    if culprit_record.state == ACTIVE:
        return finish(work, culprit, state)
    return finish(work, txid, state)


def settle(work: Work, nodes: set[str]) -> None:
    """Clear locks of dead transactions from ``nodes``, then promote their waiters (to a fixed point)."""
    todo = set(nodes)
    while todo:
        node = todo.pop()
        dead = {lock.txn for lock in locks.node_locks(work, node) if work.is_dead(lock.txn)}
        if dead:
            for txid in dead:
                todo |= finish_dead(work, txid)
            todo.add(node)
            continue
        locks.promote(work, node)


def abort(work: Work, txid: str) -> None:
    """Abort ``txid`` and its descendants. Aborting an aborted or expired transaction does nothing.

    Raises:
        TransactionStateError: it is already committed.
    """
    record = work.require(txid)
    state = work.effective(txid)[0]
    if state == COMMITTED:
        raise TransactionStateError(f"transaction {txid} is already committed")
    if state == ACTIVE:
        settle(work, finish(work, txid, ABORTED))
    elif record.state == ACTIVE:  # dead in effect: finish what is left
        settle(work, finish_dead(work, txid))


def commit(work: Work, txid: str, apply: ApplyOps | None) -> TxnRecord:
    """Commit ``txid``: into its parent (locks and staged operations move up) or, if topmost, into the store.

    Raises:
        TransactionStateError: already committed/aborted, or a child is still open.
        DurableTransactionExpiredError: it or an ancestor expired.
    """
    record = require_active(work, txid)
    for child in children(work, txid):
        if work.is_dead(child):
            settle(work, finish_dead(work, child))
        elif work.require(child).state == ACTIVE:
            raise TransactionStateError(f"transaction {txid} cannot commit: its child {child} is still open")
    if record.parent is not None:
        nodes = locks.hand_to_parent(work, txid, record.parent)
        _move_ops(work, txid, record.parent)
        work.txn.delete(keys.child_key(record.parent, txid))
    else:
        ops = staged_ops(work, txid)
        if apply is not None and ops:
            apply(work, record, ops)
        elif ops:
            raise TransactionStateError(f"transaction {txid} has staged catalog operations but no catalog to apply them")
        _delete_ops(work, txid)
        nodes = locks.release_all(work, txid)
    committed = record.with_state(COMMITTED, work.now_ms)
    work.put_record(committed)
    settle(work, nodes)
    return committed


# -- locks -----------------------------------------------------------------------


def lock(
    work: Work,
    txid: str,
    node: str,
    mode: str,
    child_key: str | None,
    attribute_key: str | None,
    waitable: bool,
    implicit: bool = False,
) -> LockRecord:
    """Take (or queue) a lock on ``node`` for ``txid`` and return the lock that covers the request.

    Raises:
        DurableTransactionExpiredError / TransactionStateError: ``txid`` is not active
            (see :func:`require_active`).
        TypeError / ValueError: a bad mode or key.
        LockConflictError, TransactionStateError: as for :func:`catalog.durable.locks.acquire`.
    """
    require_active(work, txid)
    settle(work, {node})
    return locks.acquire(work, txid, node, mode, child_key, attribute_key, waitable, implicit)


def unlock(work: Work, txid: str, node: str) -> None:
    """Remove ``txid``'s explicit locks on ``node`` and settle the node's queue.

    Raises:
        DurableTransactionExpiredError / TransactionStateError: ``txid`` is not active
            (see :func:`require_active`).
        TransactionStateError: ``txid`` has a staged change on ``node``.
    """
    require_active(work, txid)
    if locks.unlock(work, txid, node):
        settle(work, {node})


def lock_status(work: Work, node: str, seq: int, lock_id: str) -> LockRecord | None:
    """The current record of one lock (None once it is gone), after clearing dead blockers of its node."""
    raw = work.txn.get(keys.lock_key(node, seq))
    if raw is None or LockRecord.decode(raw).id != lock_id:
        return None
    current = LockRecord.decode(raw)
    if current.state == PENDING and any(work.is_dead(other.txn) for other in locks.node_locks(work, node)):
        settle(work, {node})
        raw = work.txn.get(keys.lock_key(node, seq))
        if raw is None or LockRecord.decode(raw).id != lock_id:
            return None
        current = LockRecord.decode(raw)
    return current


# -- staged operations -------------------------------------------------------------


def staged_ops(work: Work, txid: str) -> list[dict[str, Any]]:
    """``txid``'s staged operation records (JSON dicts), in the order they were staged."""
    return [json.loads(raw) for _, raw in work.txn.scan(prefix=keys.op_prefix(txid))]


def _last_op_seq(work: Work, txid: str) -> int:
    prefix = keys.op_prefix(txid)
    for key, _ in work.txn.scan(prefix=prefix, reverse=True, limit=1):
        return int(key[len(prefix) :], 16)
    return 0


def stage_op(work: Work, txid: str, op: dict[str, Any]) -> None:
    """Append one catalog operation (JSON-safe dict) to ``txid``'s staged operations."""
    require_active(work, txid)
    work.txn.put(keys.op_key(txid, _last_op_seq(work, txid) + 1), json.dumps(op, sort_keys=True).encode())


def _move_ops(work: Work, child: str, parent: str) -> None:
    seq = _last_op_seq(work, parent)
    for key, raw in list(work.txn.scan(prefix=keys.op_prefix(child))):
        seq += 1
        work.txn.put(keys.op_key(parent, seq), raw)
        work.txn.delete(key)


def _delete_ops(work: Work, txid: str) -> None:
    for key, _ in list(work.txn.scan(prefix=keys.op_prefix(txid))):
        work.txn.delete(key)
