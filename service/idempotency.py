"""Exactly-once commits with ``Idempotency-Key``.

A commit that carries a key also writes a *record* for it, in the same
transaction, so the record exists if and only if the commit does: after a
crash, a lost response or a retried request, the record alone says whether
the commit happened. A request whose key already has a record is answered
from it (the seq of the commit that wrote it) and commits nothing.

Two copies of one request racing each other both write the record key, so
the engine's write-write validation lets exactly one commit; the other finds
the record on its retry. Records expire after :data:`RECORD_TTL_S`, the
window in which a client may retry.

Thread-safety: functions here are called from worker threads; they share no
state beyond the store.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any, Final

from kvstore import SERIALIZABLE, SNAPSHOT, ConflictError, Store, Transaction, WriteBatch
from kvstore import cas
from kvstore.errors import EndedLeaseError
from kvstore.format.rows import PUT
from kvstore.reader import visible_value
from service.errors import ApiError

RECORD_PREFIX: Final = b"sys/idem/"
RECORD_TTL_S: Final = 24 * 3600.0
# Blind batches conflict only with concurrent writers of the same keys; each
# retry starts after them, so a few attempts suffice.
MAX_ATTEMPTS: Final = 32

def fingerprint(route: str, body: bytes) -> str:
    """What a replay must match: a reused key with a different request is a client bug."""
    return hashlib.sha256(route.encode() + b"\x00" + body).hexdigest()


def _record_key(idempotency_key: str) -> bytes:
    return RECORD_PREFIX + idempotency_key.encode("ascii")


def recorded_seq(store: Store, idempotency_key: str, expected_fingerprint: str | None) -> int | None:
    """The seq of the commit recorded under ``idempotency_key``, or None.

    Raises:
        ApiError: 422 if the record was written by a different request.
    """
    with store.snapshot() as snap:
        row = snap.get_row(_record_key(idempotency_key))
    value = visible_value(row)
    if row is None or value is None or row[2] != PUT:
        return None
    stored = json.loads(value).get("fingerprint")
    # Records from before transaction commits had fingerprints carry None:
    # they replay for any request, as they did.
    if expected_fingerprint is not None and stored is not None and stored != expected_fingerprint:
        raise ApiError(
            422, "IdempotencyKeyReusedError",
            f"Idempotency-Key {idempotency_key!r} was already used for a different request",
        )
    return int(row[1])


def recorded(store: Store, idempotency_key: str, expected_fingerprint: str) -> tuple[int, dict[str, Any]] | None:
    """``(seq, record)`` of the commit recorded under ``idempotency_key``, or None;
    ``record["answer"]`` is what :func:`write_record` was given.

    Raises:
        ApiError: 422 if the record was written by a different request.
    """
    seq = recorded_seq(store, idempotency_key, expected_fingerprint)
    if seq is None:
        return None
    with store.snapshot() as snap:
        row = snap.get_row(_record_key(idempotency_key))
    value = visible_value(row)
    assert value is not None, "recorded_seq found it"
    return seq, json.loads(value)


def write_record(
    txn: Transaction, idempotency_key: str, request_fingerprint: str | None, answer: Any = None
) -> bool:
    """Add the record (with ``answer``, JSON, replayed to a retry) to ``txn``;
    False (nothing added) if a duplicate's record is there already."""
    return _write_record(txn, idempotency_key, request_fingerprint, answer)


def _write_record(txn: Transaction, idempotency_key: str, request_fingerprint: str | None, answer: Any = None) -> bool:
    """Add the record to ``txn``; False (nothing added) if a duplicate's record is there already."""
    fields: dict[str, Any] = {"fingerprint": request_fingerprint, "at_ms": int(time.time() * 1000)}
    if answer is not None:
        fields["answer"] = answer
    record = json.dumps(fields).encode()
    key = _record_key(idempotency_key)
    # The key lock queues a concurrent duplicate of this request behind us; a
    # transaction that has done nothing before reads the latest commit once
    # it holds the lock, so a duplicate that committed first shows up here
    # (otherwise the record is in our write set and the commit conflicts).
    if txn.get_for_update(key) is not None:
        return False
    txn.put(key, record, ttl=RECORD_TTL_S)
    return True


def commit_batch(
    store: Store, batch: WriteBatch, idempotency_key: str | None, request_fingerprint: str | None
) -> tuple[int, bool]:
    """Commit ``batch`` atomically; return ``(seq, replayed)``.

    Without a key this is one ``Store.write`` (blind writes never conflict; a
    batch with compares or leases is a compare-and-set). With one, the batch
    and the record commit in one transaction: SNAPSHOT for blind writes,
    SERIALIZABLE when the batch compares revisions or attaches leases.

    Raises:
        PreconditionFailedError: a compare failed (nothing written, no record).
        LeaseNotFoundError: a lease of the batch is gone (nothing written).
        ConflictError: still conflicting after the retries.
    """
    if idempotency_key is None:
        return store.write(batch), False
    conditional = bool(batch.conditions or batch.leases)
    for attempt in range(MAX_ATTEMPTS):
        seq = recorded_seq(store, idempotency_key, request_fingerprint)
        if seq is not None:
            return seq, True
        txn = store.begin(SERIALIZABLE if conditional else SNAPSHOT, fresh=attempt > 0 or None)
        try:
            if not _write_record(txn, idempotency_key, request_fingerprint):
                # A duplicate recorded it; its commit may still be in flight
                # (the key lock is handed over once a commit is queued).
                # Committing our read-only view waits for it (ConflictError
                # if it did not land); then recorded_seq above finds it.
                txn.commit()
                continue
            cas.apply(txn, batch)
            return txn.commit(), False
        except ConflictError:
            txn.rollback()
        except EndedLeaseError:
            txn.rollback()
            store.reap_leases()  # its keys go first (a delete commit), as with etcd's lessor; then again
        except BaseException:
            txn.rollback()
            raise
    raise ConflictError(f"commit with Idempotency-Key {idempotency_key!r} kept conflicting; retry it")


def transaction_fingerprint(writes_digest: bytes) -> str:
    """A transaction commit's fingerprint: the keys it writes. A retry (the same
    transaction, or the client's re-run of it after a lost answer, which may
    write other values) matches; a PUT, or a transaction that writes other
    keys, with the same Idempotency-Key does not, and is refused with 422
    instead of being dropped as a replay."""
    return fingerprint("commit transaction", writes_digest)


def commit_transaction(
    store: Store, txn: Transaction, idempotency_key: str | None, writes_digest: bytes
) -> tuple[int, bool]:
    """Commit an interactive transaction, at most once per key; return ``(seq, replayed)``.

    Raises:
        ApiError: 422 if the key was already used by a different request (the transaction stays open).
    """
    if idempotency_key is None:
        return txn.commit(), False
    request_fingerprint = transaction_fingerprint(writes_digest)
    seq = recorded_seq(store, idempotency_key, request_fingerprint)
    if seq is not None:
        txn.rollback()
        return seq, True
    try:
        if not _write_record(txn, idempotency_key, request_fingerprint):
            raise ConflictError(f"Idempotency-Key {idempotency_key!r} was recorded by a concurrent duplicate")
        return txn.commit(), False
    except ConflictError:
        txn.rollback()  # a no-op after a failed commit
        # Lost to a duplicate of this very request? Then it did commit once.
        store.refresh()
        seq = recorded_seq(store, idempotency_key, request_fingerprint)
        if seq is not None:
            return seq, True
        raise


def commit_recorded_only(store: Store, idempotency_key: str | None) -> int | None:
    """For a commit of a transaction the server no longer knows (e.g. after a
    restart): the recorded seq if that commit happened, else None. Its writes
    are gone with it, so there is nothing to compare the record with."""
    return None if idempotency_key is None else recorded_seq(store, idempotency_key, None)
