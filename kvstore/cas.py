"""Conditional batches: a WriteBatch with compares (``if_seq``/``if_absent``) or leased keys.

Such a batch commits as one SERIALIZABLE transaction on the newest version
(every commit acknowledged before the call, by any process, is seen): it
reads each compared key's revision and each lease's record, then writes
the batch. A commit racing it conflicts and the attempt is made again, so
exactly one of several racing compare-and-sets on a key wins.

A batch that meets a key of an ended lease (hidden from reads, not yet
deleted) revokes that lease first, in a commit of its own, then tries again:
as with etcd's lessor, a lease's keys are deleted (watchers see "delete")
before anyone else's put of them, so a new leader's put never follows the
old leader's put directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvstore import leases
from kvstore.batch import WriteBatch
from kvstore.errors import ConflictError, EndedLeaseError, PreconditionFailedError
from kvstore.format.rows import PUT


def write(run_on_newest: Callable[[Callable[[Any], int]], int], batch: WriteBatch, summary: dict[str, Any] | None) -> int:
    """Apply ``batch`` if every compare holds when it commits; return the commit's seq.

    Raises:
        PreconditionFailedError: a compare failed (nothing written).
        LeaseNotFoundError: a lease of the batch expired or was revoked (nothing written).
        ConflictError: still conflicting after the retries.
    """

    def attempt(txn: Any) -> int:
        apply(txn, batch)
        if summary is not None:
            txn.set_summary(summary)
        return int(txn.commit())

    for _ in range(_ENDED_LEASE_ROUNDS):
        try:
            return run_on_newest(attempt)
        except EndedLeaseError as ended:
            leases.revoke_if_expired(run_on_newest, ended.lease)  # False: reaped or kept alive meanwhile
    raise ConflictError(f"a lease of the batch's keys kept ending and coming back {_ENDED_LEASE_ROUNDS} times")


# Each round revokes one ended lease; a batch's keys name few.
_ENDED_LEASE_ROUNDS = 64


def apply(txn: Any, batch: WriteBatch) -> None:
    """Check ``batch``'s compares in ``txn`` and stage its writes there (the caller commits).

    ``txn`` must be SERIALIZABLE, so that a commit racing it on a compared key
    or a lease record conflicts.

    Raises:
        PreconditionFailedError: a compare failed (nothing staged).
        LeaseNotFoundError: a lease of the batch expired or was revoked.
        EndedLeaseError: a key of the batch belongs to an ended lease (revoke it, then try again).
    """
    for key in (*batch.conditions, *batch.mutations):
        ended = txn.ended_lease(key)
        if ended is not None:
            raise EndedLeaseError(ended)
    for key, expected in batch.conditions.items():
        _, actual = txn.get_with_revision(key)
        if actual != expected:
            want = "no value" if expected is None else f"revision {expected}"
            have = "no value" if actual is None else f"revision {actual}"
            raise PreconditionFailedError(
                f"compare-and-set of key {key!r:.80}: required {want}, found {have}; nothing was written",
                key=key, expected=expected, actual=actual,
            )
    for key, (kind, value, expire) in batch.mutations.items():
        lease = batch.leases.get(key)
        if lease is not None:
            assert kind == PUT and value is not None  # WriteBatch records a lease for puts only
            leases.attach_in(txn, key, value, lease)
        elif kind == PUT:
            txn.put(key, value, expire_at_ms=expire)
        else:
            txn.delete(key)
