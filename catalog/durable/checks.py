"""Structural invariants of the stored transactions and locks, for tests and ``lakekv`` verification.

Like sortedcontainers' ``_check``: every rule the other modules maintain,
checked over one consistent snapshot, returned as a list of violations.
"""

from __future__ import annotations

from catalog.durable import keys
from catalog.durable.locks import check_node
from catalog.durable.records import ACTIVE, LockRecord, TxnRecord
from catalog.durable.work import Work


def check_all(work: Work) -> list[str]:
    """Every violation found in the store's ``sys/txn/`` keys (empty when sound).

    Checked: each lock's transaction exists and is stored active; the
    transaction->locks index and the lock records mirror each other exactly;
    each child-index entry joins an existing parent to an active child that
    names it; and each node satisfies :func:`~.locks.check_node`.
    """
    problems: list[str] = []
    records = {}
    for _, raw in work.txn.scan(prefix=keys.TXN_PREFIX):
        record = TxnRecord.decode(raw)
        records[record.id] = record
    by_node: dict[str, list[LockRecord]] = {}
    lock_keys = set()
    for key, raw in work.txn.scan(prefix=keys.LOCK_PREFIX):
        lock = LockRecord.decode(raw)
        node, seq = keys.parse_lock_key(key)
        if (node, seq) != (lock.node, lock.seq):
            problems.append(f"lock stored under {node!r}#{seq} says {lock.node!r}#{lock.seq}")
        by_node.setdefault(node, []).append(lock)
        lock_keys.add((lock.txn, node, seq))
        holder = records.get(lock.txn)
        if holder is None or holder.state != ACTIVE:
            problems.append(f"lock {lock.id} on {node!r} belongs to {lock.txn}, which is {holder.state if holder else 'missing'}")
    held_keys = set()
    for key, _ in work.txn.scan(prefix=keys.HELD_PREFIX):
        txid, _, tail = key[len(keys.HELD_PREFIX) :].partition(b"/")
        node, seq = keys.parse_lock_key(tail)
        held_keys.add((txid.decode(), node, seq))
    for missing in sorted(lock_keys - held_keys):
        problems.append(f"lock {missing} has no held-index entry")
    for orphan in sorted(held_keys - lock_keys):
        problems.append(f"held-index entry {orphan} has no lock")
    for key, _ in work.txn.scan(prefix=keys.CHILD_PREFIX):
        parent, _, child = key[len(keys.CHILD_PREFIX) :].decode().partition("/")
        child_record = records.get(child)
        if parent not in records or child_record is None or child_record.parent != parent:
            problems.append(f"child index {parent}/{child} does not match the records")
        elif child_record.state != ACTIVE:
            problems.append(f"child index lists {child}, which is {child_record.state}")
    for node, node_locks in by_node.items():
        if all(lock.txn in records for lock in node_locks):
            related = {lock.txn: frozenset(records[lock.txn].ancestors) | {lock.txn} for lock in node_locks}
            problems.extend(check_node(node_locks, related))
    return problems
