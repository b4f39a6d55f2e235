"""The lock table: acquire, queue, promote, move and release locks inside one :class:`~.work.Work`.

Each node's locks are the keys under ``sys/txn/lock/<node>\\x00``, in queue
order; each transaction indexes its own under ``sys/txn/held/<txid>/``. Every
function here reads the node's whole lock range before it writes, so under
SERIALIZABLE validation any two concurrent changes to one node's locks
conflict and one of them retries: the decisions below are made on a state no
other process can change before we commit.

Invariants kept after every operation (checked by :func:`check_node`):

1. acquired locks of unrelated transactions are pairwise compatible;
2. every pending lock is blocked (by :func:`~.compat.blocker`): nothing waits
   behind a queue head it is compatible with.

Callers (:mod:`.lifecycle`) first clear locks of transactions that expired, so
the functions here treat every holder as alive.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from catalog.durable import keys
from catalog.durable.compat import blocker, is_redundant, locks_conflict
from catalog.durable.errors import LockConflictError, TransactionStateError
from catalog.durable.records import ACQUIRED, LOCK_MODES, PENDING, SHARED_LOCK, SNAPSHOT_LOCK, LockRecord
from catalog.durable.work import Work


def check_request(mode: object, child_key: object, attribute_key: object) -> None:
    """Validate a lock request's arguments (TypeError / ValueError naming the bad one).

    Raises:
        TypeError: a key is not a str.
        ValueError: an unknown mode, a bad key, a key with a mode other than
            shared, or both keys.
    """
    if mode not in LOCK_MODES:
        raise ValueError(f"mode must be one of {LOCK_MODES}, got {mode!r}")
    if child_key is not None:
        keys.check_name(child_key, "child_key")
    if attribute_key is not None:
        keys.check_name(attribute_key, "attribute_key")
    if (child_key is not None or attribute_key is not None) and mode != SHARED_LOCK:
        raise ValueError(f"child_key and attribute_key are only allowed with mode='shared', not {mode!r}")
    if child_key is not None and attribute_key is not None:
        raise ValueError("give child_key or attribute_key, not both")


def node_locks(work: Work, node: str) -> list[LockRecord]:
    """All locks of ``node`` in queue order (acquired and pending)."""
    return [LockRecord.decode(raw) for _, raw in work.txn.scan(prefix=keys.node_lock_prefix(node))]


def txn_locks(work: Work, txid: str) -> list[LockRecord]:
    """All locks of ``txid`` (acquired and pending), by node then queue order.

    Raises:
        AssertionError: the held index names a lock that is missing (a broken invariant).
    """
    found = []
    for key, _ in work.txn.scan(prefix=keys.held_prefix(txid)):
        node, seq = keys.parse_lock_key(key[len(keys.held_prefix(txid)) :])
        raw = work.txn.get(keys.lock_key(node, seq))
        if raw is None:
            raise AssertionError(f"held index of {txid} names a missing lock {node!r}#{seq}")
        found.append(LockRecord.decode(raw))
    return found


def _write(work: Work, lock: LockRecord) -> None:
    work.txn.put(keys.lock_key(lock.node, lock.seq), lock.encode())
    work.txn.put(keys.held_key(lock.txn, lock.node, lock.seq), b"")


def _delete(work: Work, lock: LockRecord) -> None:
    work.txn.delete(keys.lock_key(lock.node, lock.seq))
    work.txn.delete(keys.held_key(lock.txn, lock.node, lock.seq))


def _conflict_error(node: str, mode: str, child_key: str | None, attribute_key: str | None, holder: LockRecord) -> LockConflictError:
    key = child_key if child_key is not None else attribute_key
    requested = mode if key is None else f"{mode}({'child_key' if child_key is not None else 'attribute_key'}={key!r})"
    how = "holds" if holder.state == ACQUIRED else "is queued for"
    return LockConflictError(
        f"cannot take {requested} lock on {node!r}: transaction {holder.txn} {how} {holder.describe()}",
        node=node,
        mode=mode,
        key=key,
        holder=holder.txn,
    )


def acquire(
    work: Work,
    txid: str,
    node: str,
    mode: str,
    child_key: str | None = None,
    attribute_key: str | None = None,
    waitable: bool = False,
    implicit: bool = False,
) -> LockRecord:
    """Take (or queue) a lock for ``txid``; return the lock that now covers the request.

    A request the transaction already covers (:func:`~.compat.is_redundant`)
    returns the existing lock instead of piling up another one.

    Raises:
        LockConflictError: an unrelated transaction's lock blocks it and
            ``waitable`` is false; or ``txid`` or an ancestor holds snapshot on
            ``node`` (never queued: it can only clear by unlocking).
        TransactionStateError: the transaction reached its lock count limit.
    """
    check_request(mode, child_key, attribute_key)
    related = work.related(txid)
    existing = node_locks(work, node)
    for lock in existing:
        if lock.txn == txid and is_redundant(lock, mode, child_key, attribute_key):
            if implicit and not lock.implicit:
                lock = replace(lock, implicit=True)
                _write(work, lock)
            return lock
    if mode != SNAPSHOT_LOCK:
        for lock in existing:
            if lock.txn in related and lock.mode == SNAPSHOT_LOCK:
                raise _conflict_error(node, mode, child_key, attribute_key, lock)
    request = LockRecord(
        id=uuid.uuid4().hex,
        node=node,
        seq=_next_seq(work, existing),
        txn=txid,
        mode=mode,
        state=ACQUIRED,
        child_key=child_key,
        attribute_key=attribute_key,
        implicit=implicit,
        created_ms=work.now_ms,
        version=work.txn.version if mode == SNAPSHOT_LOCK else None,
    )
    holder = blocker(request, related, existing)
    if holder is not None:
        if not waitable:
            raise _conflict_error(node, mode, child_key, attribute_key, holder)
        request = replace(request, state=PENDING)
    _check_count(work, txid)
    _write(work, request)
    return request


def _next_seq(work: Work, existing: list[LockRecord]) -> int:
    # Behind everything queued (FIFO), and time-based so a released lock's seq
    # is practically never reused; lock ids disambiguate the rare reuse anyway.
    return max([work.now_ms * 1000] + [lock.seq + 1 for lock in existing])


def _check_count(work: Work, txid: str) -> None:
    limit = work.config.max_locks_per_txn
    count = sum(1 for _ in work.txn.scan(prefix=keys.held_prefix(txid), limit=limit))
    if count >= limit:
        raise TransactionStateError(f"transaction {txid} already holds {count} locks, the limit (max_locks_per_txn)")


def promote(work: Work, node: str) -> list[LockRecord]:
    """Acquire every pending lock of ``node`` that nothing blocks any more, in queue order; return them."""
    locks = node_locks(work, node)
    granted = []
    for index, lock in enumerate(locks):
        if lock.state != PENDING:
            continue
        ahead = locks[:index] + [other for other in locks[index + 1 :] if other.state == ACQUIRED]
        if blocker(lock, work.related(lock.txn), ahead) is None:
            lock = replace(lock, state=ACQUIRED)
            locks[index] = lock
            _write(work, lock)
            granted.append(lock)
    return granted


def release_all(work: Work, txid: str) -> set[str]:
    """Delete every lock of ``txid``; return the nodes whose queues may now move."""
    nodes = set()
    for lock in txn_locks(work, txid):
        _delete(work, lock)
        nodes.add(lock.node)
    return nodes


def hand_to_parent(work: Work, child: str, parent: str) -> set[str]:
    """On commit of ``child``: its shared and exclusive locks (acquired and pending) become ``parent``'s.

    A moved lock keeps its place in the queue. Snapshot locks end with the
    child (its frozen view is not the parent's). A lock the parent already
    covers is merged into the parent's (keeping the "implicit" mark). Returns
    the nodes whose queues may now move.
    """
    nodes = set()
    for lock in txn_locks(work, child):
        nodes.add(lock.node)
        _delete(work, lock)
        if lock.mode == SNAPSHOT_LOCK:
            continue
        covering = None
        for other in node_locks(work, lock.node):
            if other.txn == parent and other.state == ACQUIRED and is_redundant(other, lock.mode, lock.child_key, lock.attribute_key):
                covering = other
                break
        if covering is None:
            _write(work, replace(lock, txn=parent))
        elif lock.implicit and not covering.implicit:
            _write(work, replace(covering, implicit=True))
    return nodes


def unlock(work: Work, txid: str, node: str) -> list[LockRecord]:
    """Remove ``txid``'s explicit locks on ``node`` (acquired and pending); return them.

    Raises:
        TransactionStateError: ``txid`` has a staged change on ``node`` (an
            implicit lock); nothing is removed then.
    """
    mine = [lock for lock in node_locks(work, node) if lock.txn == txid]
    for lock in mine:
        if lock.implicit:
            raise TransactionStateError(
                f"cannot unlock {node!r}: transaction {txid} has a staged change on it ({lock.describe()} lock)"
            )
    for lock in mine:
        _delete(work, lock)
    return mine


def drop_pending(work: Work, node: str, except_txn: frozenset[str]) -> list[LockRecord]:
    """Remove the pending locks of ``node`` (the node was removed), except those of ``except_txn``."""
    dropped = [lock for lock in node_locks(work, node) if lock.state == PENDING and lock.txn not in except_txn]
    for lock in dropped:
        _delete(work, lock)
    return dropped


def check_node(locks: list[LockRecord], related: dict[str, frozenset[str]]) -> list[str]:
    """Violations of the module's invariants among one node's ``locks`` (empty when sound).

    Args:
        locks: the node's locks in queue order.
        related: for every holder, itself plus its ancestors.
    """
    problems = []
    acquired = [lock for lock in locks if lock.state == ACQUIRED]
    for i, a in enumerate(acquired):
        for b in acquired[i + 1 :]:
            if a.txn in related[b.txn] or b.txn in related[a.txn]:
                continue
            if locks_conflict(a, b):
                problems.append(f"{a.node}: {a.txn} {a.describe()} and {b.txn} {b.describe()} both acquired")
    for index, lock in enumerate(locks):
        if lock.state != PENDING:
            continue
        ahead = locks[:index] + [other for other in locks[index + 1 :] if other.state == ACQUIRED]
        if blocker(lock, related[lock.txn], ahead) is None:
            problems.append(f"{lock.node}: {lock.txn} {lock.describe()} pending behind nothing incompatible")
    return problems

