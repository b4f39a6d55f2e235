"""Running a transaction body: commit on success, roll back on failure, retry conflicts.

Shared by the embedded store (:class:`kvstore.txn.OptimisticTransactions`) and
the client of ``lakekv serve`` (:class:`kvclient.remote.RemoteStore`), so the
two APIs retry the same errors the same way. ``begin(fresh)`` starts a
transaction (``fresh``: catch up with other writers first, asked for on
every retry); the transaction has ``state``, ``commit()`` and ``rollback()``.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

from kvstore.backoff import backoff_delay
from kvstore.errors import ConflictError, SnapshotTooOldError

T = TypeVar("T")
Txn = TypeVar("Txn")


@contextmanager
def transaction_scope(txn: Any) -> Iterator[Any]:
    """Yield ``txn``; commit it on normal exit (if still active), roll it back on an exception."""
    try:
        yield txn
    except BaseException:
        txn.rollback()
        raise
    if txn.state == "active":
        txn.commit()


def run_with_retries(
    begin: Callable[[bool], Txn], fn: Callable[[Txn], T], retries: int, min_backoff_s: float, max_backoff_s: float
) -> T:
    """Run ``fn(txn)`` and commit, retrying up to ``retries`` times; return ``fn``'s result.

    Retried: ConflictError (from the commit or from ``fn``), and
    SnapshotTooOldError raised by the commit (the transaction is then
    ``"aborted"``; a fresh one starts after the versions it could not read).
    Each retry starts a fresh transaction after a jittered exponential
    backoff (:func:`kvstore.backoff.backoff_delay`).

    Raises:
        ConflictError / SnapshotTooOldError: still failing after ``retries`` retries.
        ValueError: a bad ``retries``; anything ``fn`` raises, unchanged.
    """
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be a non-negative int, got {retries!r}")
    for attempt in range(retries + 1):
        txn: Any = begin(attempt > 0)
        try:
            result = fn(txn)
            if txn.state == "active":
                txn.commit()
            return result
        except (ConflictError, SnapshotTooOldError) as exc:
            retryable = isinstance(exc, ConflictError) or txn.state == "aborted"
            txn.rollback()
            if attempt == retries or not retryable:
                raise
        except BaseException:
            txn.rollback()
            raise
        time.sleep(backoff_delay(attempt, min_backoff_s, max_backoff_s))
    raise AssertionError("unreachable")  # the loop returns or raises


__all__ = ["run_with_retries", "transaction_scope"]
