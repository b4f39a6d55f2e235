"""Plain catalog commits respect durable locks.

A commit outside any durable transaction (``table.append()``,
``lake.transaction()``) is treated as a momentary transaction asking for its
operations' implicit locks (:mod:`.implicit`) without queueing: if a live
durable transaction holds an incompatible *acquired* lock on one of those
nodes, the commit fails with :class:`~catalog.errors.LockConflictError`
naming the holder. A durable exclusive lock therefore keeps every writer out,
not only other durable transactions.

The lock keys are read inside the commit's own SERIALIZABLE lakekv
transaction, so a lock acquired concurrently makes one of the two commits
conflict and retry: there is no window in which both proceed. Holders past
their deadline are ignored (they count as aborted); cleaning them up is left
to the lock protocol.
"""

from __future__ import annotations

from typing import Sequence

from catalog.access import CatalogWriter
from catalog.durable import keys
from catalog.durable.compat import conflicts
from catalog.durable.implicit import implicit_locks
from catalog.durable.records import ACQUIRED, ACTIVE, LockRecord, TxnRecord
from catalog.durable.work import wall_clock_ms
from catalog.errors import LockConflictError
from catalog.ops import Op


def check_plain_commit(writer: CatalogWriter, ops: Sequence[Op]) -> None:
    """Raise LockConflictError if a live durable lock forbids ``ops``; read through ``writer``'s transaction.

    Raises:
        LockConflictError: a live lock of a durable transaction forbids one of ``ops``.
    """
    txn = writer.kv
    now = wall_clock_ms()
    alive: dict[str, bool] = {}

    def is_alive(txid: str) -> bool:
        if txid not in alive:
            raw = txn.get(keys.txn_key(txid))
            record = None if raw is None else TxnRecord.decode(raw)
            alive[txid] = record is not None and all(
                _active(txn, ancestor, now) for ancestor in (*record.ancestors, txid)
            )
        return alive[txid]

    for op in ops:
        for request in implicit_locks(op):
            for _, raw in txn.scan(prefix=keys.node_lock_prefix(request.node)):
                lock = LockRecord.decode(raw)
                if lock.state != ACQUIRED:
                    continue
                if not conflicts(request.mode, request.child_key, request.attribute_key, lock.mode, lock.child_key, lock.attribute_key):
                    continue
                if is_alive(lock.txn):
                    key = request.child_key if request.child_key is not None else request.attribute_key
                    raise LockConflictError(
                        f"{op.kind} of {op.object_name!r} needs {request.mode} on {request.node!r}: "
                        f"durable transaction {lock.txn} holds {lock.describe()}",
                        node=request.node,
                        mode=request.mode,
                        key=key,
                        holder=lock.txn,
                    )


def _active(txn: object, txid: str, now: int) -> bool:
    raw = txn.get(keys.txn_key(txid))  # type: ignore[attr-defined]
    return raw is not None and TxnRecord.decode(raw).state_at(now) == ACTIVE
