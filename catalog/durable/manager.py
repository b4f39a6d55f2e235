"""Entry points: :class:`TransactionManager` over a lakekv store, and the
:class:`DurableTransaction` and :class:`Lock` handles it returns.

Handles hold only ids: every property and method reads the store afresh
(catching up with other writers first), so two handles on the same
transaction — in one process or in many — always agree. Any process can
``attach`` to a transaction by id and use it exactly like its creator.

Waiting: :meth:`Lock.wait` polls the lock's record, starting after
``_POLL_MIN_S`` and doubling up to the manager's ``poll_max_s`` (default
0.1 s). A waiter therefore learns that its lock was granted — by another
process committing, aborting or unlocking — at most ``poll_max_s`` plus one
catch-up read after the commit that granted it. An expired holder is cleared
by a waiter within ``_FULL_CHECK_S`` (1 s) after its deadline.

Thread-safety: a manager and its handles may be shared by threads; each call
is its own lakekv transaction.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable

import kvstore

from catalog.arguments import checked
from catalog.durable import checks, keys, lifecycle, locks
from catalog.durable.errors import DurableTransactionExpiredError, LockConflictError
from catalog.durable.records import ACQUIRED, ACTIVE, EXPIRED, PENDING, DurableConfig, LockRecord, TxnRecord
from catalog.durable.work import Work, run, run_versioned, wall_clock_ms

_POLL_MIN_S = 0.005
DEFAULT_POLL_MAX_S = 0.1
# Most polls of a waiting lock read its one key; every this often a poll also
# reads the node's holders and finishes any that expired. Cheap polls keep many
# waiters from crowding the holders' commits; the period bounds how late an
# expired holder is noticed by its waiters.
_FULL_CHECK_S = 1.0


def _check_seconds(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{what} must be a positive number of seconds, got {value!r}")
    return float(value)


class TransactionManager:
    """Durable transactions and locks stored in one lakekv store.

    Args:
        store: the lakekv store (shared with the catalog).
        clock: wall-clock milliseconds; tests inject a fake one. Every process
            must use the real clock for cross-process expiry to agree (see
            :mod:`.records` for the skew assumption).
        poll_max_s: the longest pause between two polls of a waiting lock.
        apply_ops: applies a topmost transaction's staged catalog operations
            inside its commit (set by the catalog; None: staging is refused).
    """

    def __init__(
        self,
        store: kvstore.Store,
        *,
        clock: Callable[[], int] = wall_clock_ms,
        poll_max_s: float = DEFAULT_POLL_MAX_S,
        apply_ops: lifecycle.ApplyOps | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.poll_max_s = _check_seconds(poll_max_s, "poll_max_s")
        self.apply_ops = apply_ops

    @checked
    def run(self, operation: Callable[[Work], Any], keep_cleanup: bool = True) -> Any:
        """Run ``operation`` in one serializable lakekv transaction (see :func:`.work.run`).

        Raises:
            TypeError: ``operation`` is not callable (or ``keep_cleanup`` not a bool).
            LockConflictError / TransactionStateError / DurableTransactionExpiredError: what
                ``operation`` raised.
            ConflictError: still conflicting after every attempt.
        """
        return run(self.store, operation, self.clock, keep_cleanup=keep_cleanup)

    @checked
    def run_versioned(self, operation: Callable[[Work], Any]) -> tuple[Any, int]:
        """:meth:`run`, also returning the store version the commit made.

        Raises:
            TypeError: ``operation`` is not callable.
            LockConflictError / TransactionStateError / DurableTransactionExpiredError: what
                ``operation`` raised.
            ConflictError: still conflicting after every attempt.
        """
        return run_versioned(self.store, operation, self.clock)

    # -- configuration -------------------------------------------------------------

    @checked
    def config(self) -> DurableConfig:
        """The store-wide limits every process applies."""
        return self.run(lambda work: work.config)  # type: ignore[no-any-return]

    @checked
    def configure(
        self,
        *,
        max_timeout_s: float | None = None,
        default_timeout_s: float | None = None,
        max_locks_per_txn: int | None = None,
    ) -> DurableConfig:
        """Change the store-wide limits (for every process); return the new ones.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a timeout that is not a positive number of seconds, or
                ``max_locks_per_txn`` not a positive int.
        """
        changes: dict[str, int] = {}
        if max_timeout_s is not None:
            changes["max_timeout_ms"] = int(_check_seconds(max_timeout_s, "max_timeout_s") * 1000)
        if default_timeout_s is not None:
            changes["default_timeout_ms"] = int(_check_seconds(default_timeout_s, "default_timeout_s") * 1000)
        if max_locks_per_txn is not None:
            if isinstance(max_locks_per_txn, bool) or not isinstance(max_locks_per_txn, int) or max_locks_per_txn < 1:
                raise ValueError(f"max_locks_per_txn must be a positive int, got {max_locks_per_txn!r}")
            changes["max_locks_per_txn"] = max_locks_per_txn

        def change(work: Work) -> DurableConfig:
            config = replace(work.config, **changes)
            work.txn.put(keys.CONFIG_KEY, config.encode())
            return config

        return self.run(change)  # type: ignore[no-any-return]

    @checked
    def check(self) -> list[str]:
        """Violations of the stored invariants (see :func:`.checks.check_all`); empty when sound."""
        return self.run(checks.check_all)  # type: ignore[no-any-return]

    # -- transactions ----------------------------------------------------------------

    @checked
    def begin(
        self, timeout: float | None = None, parent: DurableTransaction | str | None = None, title: str | None = None
    ) -> DurableTransaction:
        """Start a durable transaction (nested under ``parent`` if given).

        Args:
            timeout: seconds without a ping before it expires; capped by the
                store-wide ``max_timeout``; default the store-wide default (60 s).
            parent: a transaction handle or id; the new one commits into it.
            title: free text shown by ``transactions()`` and the CLI.

        Raises:
            TransactionStateError / DurableTransactionExpiredError: the parent is not active.
        """
        if timeout is not None:
            timeout = _check_seconds(timeout, "timeout")
        if title is not None and not isinstance(title, str):
            raise TypeError(f"title must be a str, got {type(title).__name__}")
        parent_id = None
        if parent is not None:
            parent_id = parent.id if isinstance(parent, DurableTransaction) else keys.check_txid(parent)
        record: TxnRecord = self.run(lambda work: lifecycle.begin(work, parent_id, timeout, title))
        return DurableTransaction(self, record.id)

    @checked
    def attach(self, txid: str) -> DurableTransaction:
        """A handle on an existing transaction (from any process).

        Raises:
            TransactionStateError: no such transaction in this store.
        """
        keys.check_txid(txid)
        self.run(lambda work: work.require(txid))
        return DurableTransaction(self, txid)

    @checked
    def abort(self, txid: str) -> None:
        """Abort a transaction by id (and its descendants); see :meth:`DurableTransaction.abort`.

        Raises:
            TypeError / ValueError: ``txid`` is not 32 lowercase hex digits.
            TransactionStateError: no such transaction, or it is already committed.
        """
        self.run(lambda work: lifecycle.abort(work, keys.check_txid(txid)))

    @checked
    def transactions(self, include_finished: bool = False) -> list[TxnRecord]:
        """Transaction records (like ``//sys/transactions``), oldest first; ``state`` already reflects expiry.

        Raises:
            TypeError: ``include_finished`` is not a bool.
        """

        def read(work: Work) -> list[TxnRecord]:
            found = []
            for _, raw in work.txn.scan(prefix=keys.TXN_PREFIX):
                record = TxnRecord.decode(raw)
                work.remember(record)
            for txid in work.known():
                record = work.require(txid)
                state = work.effective(txid)[0] if record.state == ACTIVE else record.state
                if state == ACTIVE or include_finished:
                    found.append(replace(record, state=state))
            return sorted(found, key=lambda r: (r.start_ms, r.id))

        return self.run(read)  # type: ignore[no-any-return]

    @checked
    def locks(self, node: str) -> list[LockRecord]:
        """The locks on ``node`` in queue order (like ``//sys/locks``), after clearing expired holders.

        Raises:
            TypeError / ValueError: a bad node name.
        """
        keys.check_name(node, "node")

        def read(work: Work) -> list[LockRecord]:
            lifecycle.settle(work, {node})
            return locks.node_locks(work, node)

        return self.run(read)  # type: ignore[no-any-return]


class DurableTransaction:
    """A handle on one durable transaction (see the module docstring: it holds only the id)."""

    def __init__(self, manager: TransactionManager, txid: str) -> None:
        self.manager = manager
        self.id = txid

    def __repr__(self) -> str:
        return f"DurableTransaction({self.id!r})"

    @checked
    def record(self) -> TxnRecord:
        """The stored record, with ``state`` reflecting expiry."""

        def read(work: Work) -> TxnRecord:
            record = work.require(self.id)
            return replace(record, state=work.effective(self.id)[0])

        return self.manager.run(read)  # type: ignore[no-any-return]

    @property
    def state(self) -> str:
        """``"active"``, ``"committed"``, ``"aborted"`` or ``"expired"`` (also when an ancestor expired)."""
        return self.record().state

    @property
    def parent(self) -> str | None:
        """The id of the parent transaction, or None for a topmost one.

        Raises:
            TransactionStateError: the transaction is no longer in this store.
        """
        return self.record().parent

    @checked
    def ping(self, ancestors: bool = False) -> None:
        """Restart the timeout; with ``ancestors=True`` also every ancestor's (pinging a child alone does not keep its parent alive).

        Raises:
            DurableTransactionExpiredError: it (or an ancestor) already expired.
            TransactionStateError: it is committed or aborted.
        """
        self.manager.run(lambda work: lifecycle.ping(work, self.id, bool(ancestors)))

    @checked
    def commit(self) -> int | None:
        """Commit: into the parent (locks and staged operations move up) or, if topmost, into the store as one version.

        Returns:
            The store (lakehouse) version a topmost commit made; None for a commit into the parent.

        Raises:
            TransactionStateError: already committed or aborted, or a child is open.
            DurableTransactionExpiredError: it or an ancestor expired.
        """
        record, version = self.manager.run_versioned(lambda work: lifecycle.commit(work, self.id, self.manager.apply_ops))
        return None if record.parent is not None else int(version)

    @checked
    def abort(self) -> None:
        """Abort it and every descendant, releasing their locks. A no-op if already aborted or expired.

        Raises:
            TransactionStateError: it is already committed.
        """
        self.manager.abort(self.id)

    @checked
    def lock(
        self,
        node: str,
        mode: str = "exclusive",
        child_key: str | None = None,
        attribute_key: str | None = None,
        waitable: bool = False,
    ) -> Lock:
        """Take a lock on ``node``; with ``waitable`` queue it (``lock.state == "pending"``) instead of failing.

        Raises:
            LockConflictError: incompatible with an unrelated transaction's lock
                (and not waitable), or this transaction or an ancestor holds snapshot on it.
            TransactionStateError: not active, or the lock count limit is reached.
            DurableTransactionExpiredError: it expired.
            TypeError / ValueError: bad node, mode or key (keys only with mode="shared").
        """
        keys.check_name(node, "node")
        locks.check_request(mode, child_key, attribute_key)
        record: LockRecord = self.manager.run(
            lambda work: lifecycle.lock(work, self.id, node, mode, child_key, attribute_key, bool(waitable))
        )
        return Lock(self.manager, record)

    @checked
    def unlock(self, node: str) -> None:
        """Remove this transaction's explicit locks on ``node`` (acquired and pending).

        Raises:
            TransactionStateError: the node has a staged change in this transaction.
        """
        keys.check_name(node, "node")
        self.manager.run(lambda work: lifecycle.unlock(work, self.id, node))

    @checked
    def locks(self) -> list[LockRecord]:
        """This transaction's own locks (not its ancestors' or children's)."""
        return self.manager.run(lambda work: locks.txn_locks(work, self.id))  # type: ignore[no-any-return]


class Lock:
    """A handle on one lock. ``txn`` is the transaction that asked for it; after a child's commit the lock belongs to its parent."""

    def __init__(self, manager: TransactionManager, record: LockRecord) -> None:
        self.manager = manager
        self.id = record.id
        self.node = record.node
        self.seq = record.seq
        self.txn = record.txn
        self.mode = record.mode
        self.child_key = record.child_key
        self.attribute_key = record.attribute_key

    def __repr__(self) -> str:
        return f"Lock({self.node!r}, {self.mode!r}, id={self.id!r})"

    @checked
    def record(self) -> LockRecord | None:
        """The current record, or None once the lock is gone (released, unlocked, merged or dropped)."""
        return self.manager.run(lambda work: lifecycle.lock_status(work, self.node, self.seq, self.id))  # type: ignore[no-any-return]

    def _peek(self) -> LockRecord | None:
        """The lock's record as of a fresh snapshot: one key read, no clean-up (see wait)."""
        with self.manager.store.snapshot(fresh=True) as snapshot:
            raw = snapshot.get(keys.lock_key(self.node, self.seq))
        record = None if raw is None else LockRecord.decode(raw)
        return record if record is not None and record.id == self.id else None

    @property
    def state(self) -> str:
        """``"acquired"``, ``"pending"``, or ``"released"`` once the lock is gone."""
        record = self.record()
        return "released" if record is None else record.state

    @checked
    def wait(self, timeout: float | None = None) -> Lock:
        """Block until the lock is acquired; return self.

        Raises:
            TimeoutError: still pending after ``timeout`` seconds.
            LockConflictError: the lock is gone (its transaction finished or
                unlocked it, or the node was removed).
            DurableTransactionExpiredError: its transaction expired while waiting.
        """
        deadline = None if timeout is None else time.monotonic() + _check_seconds(timeout, "timeout")
        delay = _POLL_MIN_S
        last_full = float("-inf")
        while True:
            if time.monotonic() - last_full >= _FULL_CHECK_S:
                record = self.record()  # also clears holders that expired
                last_full = time.monotonic()
            else:
                record = self._peek()
            if record is None:
                record = self.record()  # gone at a glance: confirm with the full check
            if record is not None and record.state == ACQUIRED:
                return self
            if record is None:
                state = DurableTransaction(self.manager, self.txn).state
                if state == EXPIRED:
                    raise DurableTransactionExpiredError(f"transaction {self.txn} expired while waiting for {self!r}")
                raise LockConflictError(
                    f"lock {self.id} on {self.node!r} is gone while pending (transaction {self.txn} is {state})",
                    node=self.node,
                    mode=self.mode,
                    key=self.child_key if self.child_key is not None else self.attribute_key,
                    holder=None,
                )
            assert record.state == PENDING
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"{self!r} still pending after {timeout} s")
            pause = delay if deadline is None else min(delay, max(0.0, deadline - time.monotonic()))
            time.sleep(pause)
            delay = min(self.manager.poll_max_s, delay * 2)


__all__ = ["TransactionManager", "DurableTransaction", "Lock"]
