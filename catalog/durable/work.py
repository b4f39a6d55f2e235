"""One attempt at a durable-transaction operation: a SERIALIZABLE lakekv
transaction plus the clock reading and record cache the operation uses.

Every change to transaction records and locks goes through a :class:`Work`,
and :func:`run` commits it with lakekv's optimistic validation: two processes
that read the same lock keys and both write cannot both commit, so they can
never both decide that incompatible locks are free. The loser retries from a
fresh snapshot.

Operations validate first and write afterwards. If an operation raises one of
our own errors (:data:`~.errors.DEFERRABLE_ERRORS`) after only cleaning
up expired transactions it noticed, :func:`run` still commits those clean-ups
and then re-raises, so noticing an expiry is never wasted work.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

import kvstore
from kvstore.backoff import backoff_delay
from kvstore.errors import ConflictError

from catalog.durable import keys
from catalog.durable.errors import DEFERRABLE_ERRORS, TransactionStateError
from catalog.durable.records import ACTIVE, EXPIRED, DurableConfig, TxnRecord

T = TypeVar("T")

# Each retry re-reads a fresh snapshot; lock operations touch a handful of keys,
# so conflicts come only from real contention on the same node or transaction.
MAX_ATTEMPTS = 200
_BACKOFF_MIN_S = 0.001
_BACKOFF_MAX_S = 0.05


class Work:
    """A lakekv SERIALIZABLE transaction seen as transaction records and locks.

    ``now_ms`` is read once per attempt, so every expiry decision inside one
    attempt uses the same instant.
    """

    def __init__(self, txn: kvstore.Transaction, now_ms: int) -> None:
        self.txn = txn
        self.now_ms = now_ms
        self._records: dict[str, TxnRecord | None] = {}
        self._config: DurableConfig | None = None

    @property
    def config(self) -> DurableConfig:
        """The store-wide limits (the defaults if none are stored), read once per Work."""
        if self._config is None:
            self._config = DurableConfig.decode(self.txn.get(keys.CONFIG_KEY))
        return self._config

    def record(self, txid: str) -> TxnRecord | None:
        """The record of ``txid``, or None if there is none (read once per Work, then cached)."""
        if txid not in self._records:
            raw = self.txn.get(keys.txn_key(txid))
            self._records[txid] = None if raw is None else TxnRecord.decode(raw)
        return self._records[txid]

    def require(self, txid: str) -> TxnRecord:
        """The record of ``txid``; TransactionStateError if there is none.

        Raises:
            TransactionStateError: no transaction ``txid`` in this store.
        """
        record = self.record(txid)
        if record is None:
            raise TransactionStateError(f"no transaction {txid} in this store")
        return record

    def remember(self, record: TxnRecord) -> None:
        """Cache a record this Work read by a scan (a later ``record()`` reuses it)."""
        self._records.setdefault(record.id, record)

    def known(self) -> list[str]:
        """Ids of every record this Work has read or written."""
        return list(self._records)

    def put_record(self, record: TxnRecord) -> None:
        """Write ``record`` in this Work's transaction (later reads in the Work see it)."""
        self._records[record.id] = record
        self.txn.put(keys.txn_key(record.id), record.encode())

    def related(self, txid: str) -> frozenset[str]:
        """``txid`` and all its ancestors: the transactions whose locks never block it."""
        return frozenset(self.require(txid).ancestors) | {txid}

    def effective(self, txid: str) -> tuple[str, str]:
        """``(state, culprit)``: how ``txid`` stands once deadlines are applied.

        A finished transaction reports its own stored state. An unfinished one is
        active only if it and every ancestor are stored active and before their
        deadlines; otherwise the state is that of the topmost ancestor (or
        itself) that is finished or expired, and ``culprit`` is that
        transaction: finishing the culprit finishes ``txid`` with it.
        """
        record = self.require(txid)
        if record.state != ACTIVE:  # finished for good: its own outcome wins over later ancestor outcomes
            return record.state, txid
        for ancestor in (*record.ancestors, txid):
            state = self.require(ancestor).state_at(self.now_ms)
            if state != ACTIVE:
                return state, ancestor
        return ACTIVE, txid

    def is_dead(self, txid: str) -> bool:
        """Whether ``txid`` is active in storage but finished in effect (expired, or under a finished ancestor)."""
        record = self.record(txid)
        if record is None:
            return True
        return record.state == ACTIVE and self.effective(txid)[0] != ACTIVE

    def expired_now(self, txid: str) -> bool:
        """Whether ``txid`` counts as expired now (it or an ancestor passed its deadline; see :meth:`effective`).

        Raises:
            TransactionStateError: no transaction ``txid`` (or an ancestor) in this store.
        """
        return self.effective(txid)[0] == EXPIRED


def run(
    store: kvstore.Store, operation: Callable[[Work], T], clock: Callable[[], int], *, keep_cleanup: bool = True
) -> T:
    """Run ``operation`` in a fresh SERIALIZABLE lakekv transaction and commit, retrying on conflict.

    See :func:`run_versioned`, which also returns the version committed.
    """
    return run_versioned(store, operation, clock, keep_cleanup=keep_cleanup)[0]


def run_versioned(
    store: kvstore.Store, operation: Callable[[Work], T], clock: Callable[[], int], *, keep_cleanup: bool = True
) -> tuple[T, int]:
    """Run ``operation`` in a fresh SERIALIZABLE lakekv transaction and commit, retrying on conflict;
    return its result and the store version the commit made (every durable operation that
    commits writes; for one that wrote nothing this is the seq its transaction started at).

    ``keep_cleanup=False`` is for operations that may raise after writing
    state of their own (several locks, then a staged operation): nothing of a
    failed attempt is committed then.

    Raises:
        LockConflictError / TransactionStateError / DurableTransactionExpiredError: what ``operation`` raised (after committing the
            expiry clean-ups it made, see the module docstring).
        ConflictError: still conflicting after ``MAX_ATTEMPTS`` attempts.
    """
    for attempt in range(MAX_ATTEMPTS):
        txn = store.begin(kvstore.SERIALIZABLE, fresh=True)
        deferred: Exception | None = None
        try:
            result = operation(Work(txn, clock()))
        except DEFERRABLE_ERRORS as exc:
            if not keep_cleanup:
                txn.rollback()
                raise
            deferred = exc
        except BaseException:
            txn.rollback()
            raise
        try:
            seq = txn.commit()
        except ConflictError:
            if attempt == MAX_ATTEMPTS - 1:
                raise
            time.sleep(backoff_delay(attempt, _BACKOFF_MIN_S, _BACKOFF_MAX_S))
            continue
        if deferred is not None:
            raise deferred
        # A group commit puts several commits (seqs) in one store version: the version is what readers see.
        return result, txn.commit_version if txn.commit_version is not None else seq
    raise AssertionError("unreachable")  # the loop returns or raises


def wall_clock_ms() -> int:
    """Wall-clock milliseconds: the clock every process compares deadlines with (see records)."""
    return int(time.time() * 1000)
