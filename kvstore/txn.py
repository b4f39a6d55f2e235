"""Optimistic transactions: local writes, read/write sets, commit through the
committer where the oracle validates them (see :mod:`kvstore.oracle`).

A transaction reads the snapshot taken at ``begin`` plus its own writes
(read-your-writes in ``get`` and ``scan``, deletes included). Nothing is
locked while it runs; at commit the committer validates it against every
transaction that committed after its start — in this process or, after
catching up with the version chain, in any other — and either makes its
writes durable in one root file or raises :class:`~kvstore.errors.ConflictError`.

``get_for_update(key)`` adds ``key`` to the write set for validation (a
concurrent write to it aborts us, even under SNAPSHOT) without writing it,
and takes the key's lock in this store handle (:mod:`kvstore.keylocks`):
transactions of this process that ask for the same key queue until we
commit, roll back, abort, expire or are garbage-collected, instead of
aborting each other. The lock is released as soon as our commit is queued
(early lock release, :mod:`kvstore.inflight`): a transaction that has
neither read nor written anything before its first ``get_for_update``
moves its snapshot to the head once it holds the lock and reads the writes
of the commits still in flight on top of it, so transactions queued on a hot
key share root files instead of each waiting for the previous one's fsync
(see :meth:`Transaction.get_for_update`). Transactions of other
processes do not see these locks; validation still decides between them.
A transaction with no writes commits trivially: its reads were a consistent
snapshot, which is serializable on its own.

Thread-safety: one transaction is used by one thread at a time. Using one
from two threads at once is detected where it could lose something: once
``commit()`` has begun (state ``"committing"``), a ``put``, ``delete`` or
any other call but ``rollback()`` (a no-op then) raises
:class:`~kvstore.errors.TransactionClosedError`, and a
write that raced the start of the commit either is in the commit (the call
returns) or raises; none is dropped silently. The writes' hot path takes no
lock for this: a write checks the state again after storing itself, and only
one that finds a commit started looks at what the commit took (see
:meth:`Transaction._late_write`).
"""

from __future__ import annotations

import operator
import threading
import time
import weakref
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Iterator, TypeVar

from kvstore.batch import (
    DELETE_MUTATION,
    Mutation,
    check_key,
    check_limit,
    check_summary,
    put_mutation,
    scan_bounds,
)
from kvstore.committer import Committer, PendingCommit
from kvstore.errors import (
    ConflictError,
    SnapshotTooOldError,
    TransactionClosedError,
    TransactionExpiredError,
)
from kvstore.format.rows import PUT, Row
from kvstore.inflight import InFlight, overlay_of
from kvstore.keylocks import KeyLocks
from kvstore.oracle import ISOLATION_LEVELS, SERIALIZABLE, Oracle, TxnValidation
from kvstore.reader import get_row, now_ms, scan_rows, visible_value
from kvstore.retrying import run_with_retries, transaction_scope
from kvstore.lease_reads import LeaseReads
from kvstore.leases import lease_of_expiry
from kvstore.options import StoreOptions
from kvstore.state import EngineState, Layers
from kvstore.watermark import Watermark

T = TypeVar("T")


@dataclass(frozen=True)
class TxnServices:
    """What a transaction uses of its store handle (never the Store itself)."""

    committer: Committer
    oracle: Oracle
    watermark: Watermark
    # Raises StoreClosedError once the handle is closed.
    check_open: Callable[[], None]
    locks: KeyLocks
    # The store's current (version, seq) and the layers to read it with.
    head: Callable[[], tuple[int, int, Layers]]
    lock_timeout_s: float
    # Hides the keys of ended leases from get/scan (kvstore.lease_reads).
    lease_reads: LeaseReads


class Transaction:
    """One optimistic transaction. Create with ``Store.begin``; see the module docstring."""

    def __init__(
        self,
        services: TxnServices,
        txn_id: int,
        version: int,
        start_seq: int,
        layers: Layers,
        isolation: str,
        ttl_s: float,
    ) -> None:
        self._services = services
        self.id = txn_id
        self.version = version
        self.start_seq = start_seq
        self.isolation = isolation
        self._layers = layers
        self._deadline = time.monotonic() + ttl_s
        # key -> Mutation. A plain dict: creating a SortedDict costs ~20 us,
        # a tenth of a small transaction; scans sort the keys once (below).
        self._writes: dict[bytes, Mutation] = {}
        self._sorted_writes: list[bytes] = []  # sorted keys of _writes, but for those in _unsorted_writes
        self._unsorted_writes: list[bytes] = []  # keys added to _writes since _sorted_writes was sorted
        self._read_keys: set[bytes] = set()
        self._read_ranges: list[tuple[bytes | None, bytes | None]] = []
        self._lock_keys: set[bytes] = set()
        # Commits in flight whose writes this transaction reads (see
        # kvstore.inflight), and those writes merged; empty / None if none.
        self._ancestors: tuple[PendingCommit, ...] = ()
        self._inherited: dict[bytes, Mutation] | None = None
        # Whether anything was read from the snapshot: then (or once it has
        # written) the snapshot can no longer move to the head (see get_for_update).
        self._has_read = False
        self._summary: dict[str, Any] | None = None
        self._publish_deadline: float | None = None  # see publish_by
        # active | committing | committed | aborted | failed | rolled back | expired
        self._state = "active"
        # Taken by commit() in one step with leaving "active" (see _late_write):
        # the state change and what it reads of the writes, read set and summary.
        self._commit_lock = threading.Lock()
        self._taken: dict[bytes, Mutation] | None = None  # the writes commit() took
        # The version whose root file holds our writes, once committed with writes.
        self.commit_version: int | None = None
        services.watermark.pin(start_seq)
        # The seq this transaction pins in the watermark; a list so that the
        # finalizer below sees it move (get_for_update can advance it).
        self._pinned = [start_seq]
        # Dropped without commit/rollback: release the pin, the oracle entry
        # and the key locks when garbage-collected, not at the handle's close or TTL.
        self._release = weakref.finalize(
            self, _release_abandoned, services.watermark, services.oracle, services.locks, self._pinned, txn_id
        )
        expired = weakref.WeakMethod(self._expired_by_oracle)  # the oracle must not keep us alive

        def on_expire() -> None:
            method = expired()
            if method is not None:
                method()

        services.oracle.on_expire(txn_id, on_expire)

    # -- lifecycle -----------------------------------------------------------

    def _check_active(self) -> None:
        if self._state != "active":
            raise self._closed_error()
        if time.monotonic() >= self._deadline:
            self._finish("expired")
            raise TransactionExpiredError(f"transaction {self.id} outlived its TTL")
        self._services.check_open()

    def _closed_error(self) -> Exception:
        """The error for a call on a transaction that is no longer active."""
        if self._state == "expired":
            return TransactionExpiredError(f"transaction {self.id} outlived its TTL")
        if self._state == "committing":
            return TransactionClosedError(
                f"transaction {self.id} is committing: commit() began (in another thread?) and takes "
                "nothing more; one transaction is used by one thread at a time"
            )
        return TransactionClosedError(f"transaction {self.id} is already {self._state}")

    def _late_write(self, key: bytes, mutation: Mutation) -> None:
        """A write that found the transaction no longer active right after storing itself.

        commit() leaves "active" and takes the writes in one step under
        ``_commit_lock``. A write stores itself, then reads the state: if it
        reads "active", it was stored before that step and is in the commit;
        if not, it may or may not have been stored before the step, and what
        the commit took says which. In the commit: returns, as a write before
        commit() does. Otherwise raises; the stored mutation is never read.
        """
        with self._commit_lock:  # held by commit() from leaving "active" until it has taken the writes
            taken = self._taken
        if taken is not None and taken.get(key) is mutation:
            return
        raise self._closed_error()

    def _finish(self, state: str) -> None:
        if self._state in ("active", "committing"):
            self._state = state
            if self._release.detach() is not None:  # not released by expiry meanwhile
                self._services.watermark.unpin(self._pinned[0])
                self._services.oracle.end(self.id)
            if self._lock_keys:
                # A commit with writes handed its keys over once it was
                # queued (see commit); this releases everything else.
                self._services.locks.release_all(self.id)

    def _expired_by_oracle(self) -> None:
        # Called by the oracle, under its lock: only release, never call back in.
        if self._state == "active":
            self._state = "expired"
            if self._release.detach() is not None:
                self._services.watermark.unpin(self._pinned[0])
            self._services.locks.release_all(self.id)

    @property
    def state(self) -> str:
        """Where the transaction is in its life.

        ``"active"``; ``"committing"`` (commit() is running); ``"committed"``; ``"aborted"`` (commit raised
        ConflictError or SnapshotTooOldError: nothing was written);
        ``"failed"`` (commit raised another error, e.g. CommitError, whose
        message says whether the outcome is known); ``"rolled back"``;
        ``"expired"``.
        """
        return self._state

    def set_summary(self, summary: dict[str, Any]) -> None:
        """Attach an operation summary to this transaction's commit.

        It is stored in the commit descriptor in the root file under
        ``"summary"`` and comes back from ``Store.history()`` and in
        ``ConflictError.descriptor`` of transactions this one beats. Calling
        it again replaces the summary.

        Raises:
            TypeError / ValueError: not a JSON-serialisable dict, or over 64 KiB encoded.
            TransactionClosedError / TransactionExpiredError: the transaction is not active.
        """
        summary = check_summary(summary)
        with self._commit_lock:  # before commit() takes the summary, or refused
            self._check_active()
            self._summary = summary

    def publish_by(self, deadline: float) -> None:
        """Refuse to publish this transaction's commit after ``deadline`` (``time.monotonic()``).

        For a commit that makes objects referenced which GC would delete
        once unreferenced past its grace period (the catalog's data files):
        the committer checks the deadline right before the root file's PUT,
        after any wait in its queue, and fails the commit with
        :class:`~kvstore.errors.StaleOutputError` instead. Calling it again
        keeps the earlier deadline.

        Raises:
            TypeError: ``deadline`` is not a number.
            TransactionClosedError / TransactionExpiredError: the transaction is not active.
        """
        self._check_active()
        if isinstance(deadline, bool) or not isinstance(deadline, (int, float)):
            raise TypeError(f"deadline must be a time.monotonic() value, got {type(deadline).__name__}")
        with self._commit_lock:  # before commit() takes the deadline, or refused
            self._check_active()
            previous = self._publish_deadline
            self._publish_deadline = float(deadline) if previous is None else min(previous, deadline)

    def commit(self) -> int:
        """Validate and make the writes durable; return the commit seq.

        A transaction without writes returns its start seq and writes
        nothing; if it read the writes of commits in flight (see
        :meth:`get_for_update`) it first waits for them and returns the seq
        of the last, or raises ConflictError if one did not commit.

        Raises:
            ConflictError: a transaction that committed after our start
                conflicts with us (retry the whole transaction).
            TransactionExpiredError / TransactionClosedError: as named
                (TransactionClosedError also when another thread's commit() began first).
        """
        with self._commit_lock:
            # One step: leave "active" and take everything the commit uses. A
            # call racing this from another thread either came before (and is
            # in the commit) or raises (see _late_write).
            self._check_active()
            self._state = "committing"
            writes = self._taken = dict(self._writes)
            lock_keys = frozenset(self._lock_keys)
            read_keys = frozenset(self._read_keys)
            read_ranges = tuple(self._read_ranges)
            summary, publish_deadline = self._summary, self._publish_deadline
        handover: InFlight | None = None
        try:
            if not writes and not self._ancestors:
                return self.start_seq
            validation = TxnValidation(
                txn_id=self.id,
                start_seq=self.start_seq,
                # Reads of in-flight writes are a snapshot only if nothing
                # else changed what was read: validated as SERIALIZABLE.
                isolation=SERIALIZABLE if self._ancestors else self.isolation,
                deadline=self._deadline,
                write_keys=frozenset(writes) | lock_keys,
                read_keys=read_keys,
                read_ranges=read_ranges,
                ancestors=self._ancestors,
            )
            if not writes:
                return self._commit_read_only(validation)
            descriptor: dict[str, Any] = {
                "op": "txn", "txn": self.id, "isolation": self.isolation, "keys": len(writes),
            }
            if summary is not None:
                descriptor["summary"] = summary
            locked_only = lock_keys.difference(writes)
            if locked_only:
                # Other processes learn our write set from the root file: keys
                # read with get_for_update conflict like written ones there too.
                descriptor["lock_keys"] = sorted(key.hex() for key in locked_only)
            pending = PendingCommit(writes, descriptor, validation=validation, deadline=publish_deadline)
            on_queued = None
            if lock_keys:
                handover = InFlight(self._ancestors + (pending,))
                locks, txn_id = self._services.locks, self.id

                def on_queued() -> None:
                    locks.release_all(txn_id, handover)

            done = self._services.committer.submit(pending, on_queued)
            self.commit_version = done.version
            return done.seq
        except TransactionExpiredError:
            self._finish("expired")
            raise
        except (ConflictError, SnapshotTooOldError):
            self._finish("aborted")
            raise
        except BaseException:
            self._finish("failed")
            raise
        finally:
            self._finish("committed")  # a no-op if an error above already finished it
            if handover is not None:
                self._services.locks.forget(lock_keys, handover)

    def _commit_read_only(self, validation: TxnValidation) -> int:
        """Commit without writes: trivially, unless it read commits in flight.

        Then it waits for them to settle and is validated (see
        kvstore.inflight): it must not return having read writes that never
        committed. Returns the seq of the view it read.
        """
        for ancestor in self._ancestors:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0 or not ancestor.wait_settled(remaining):
                raise TransactionExpiredError(
                    f"transaction {self.id} outlived its TTL waiting for the commits whose writes it read"
                )
        error = self._services.oracle.validate_read_only(validation)
        if error is not None:
            raise error
        return max(ancestor.seq for ancestor in self._ancestors)

    def rollback(self) -> None:
        """Discard the transaction. Idempotent; a no-op after commit, and once
        commit() has begun (in another thread: the commit decides, see :attr:`state`).

        Cleanup paths roll back whatever they hold (a server's sweep of expired
        transactions, ``__exit__`` after an error): they must never end a
        commit half-way (releasing its pin and oracle entry) nor fail on one.
        """
        with self._commit_lock:
            if self._state != "committing":
                self._finish("rolled back")

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: Any) -> None:
        if exc_type is None and self._state == "active":
            self.commit()
        else:
            self.rollback()

    # -- writes --------------------------------------------------------------

    def put(self, key: bytes, value: bytes, ttl: float | None = None, *, expire_at_ms: int | None = None) -> None:
        """Buffer ``key = value``; visible to this transaction's reads at once.

        ``ttl`` (seconds from now) or ``expire_at_ms`` (an absolute time, ms
        since the epoch, as :meth:`expires_at` returns) makes it expire.

        Raises:
            TransactionClosedError / TransactionExpiredError: the transaction is
                not active (also: commit() began in another thread).
        """
        # _check_active inlined: this is the transaction's hot path, and it
        # pays the check after the store below (see _late_write).
        if self._state != "active" or time.monotonic() >= self._deadline:
            self._check_active()  # raises
        self._services.check_open()
        key = check_key(key)
        mutation = put_mutation(value, ttl)
        if expire_at_ms is not None:
            if ttl is not None:
                raise ValueError("ttl and expire_at_ms exclude each other")
            if isinstance(expire_at_ms, bool) or not isinstance(expire_at_ms, int) or expire_at_ms < 0:
                raise TypeError(f"expire_at_ms must be an int >= 0 (ms since the epoch), not {expire_at_ms!r}")
            mutation = (mutation[0], mutation[1], expire_at_ms)
        writes = self._writes
        if key not in writes:
            self._unsorted_writes.append(key)
        writes[key] = mutation
        if self._state != "active":  # commit() began meanwhile, in another thread
            self._late_write(key, mutation)

    def delete(self, key: bytes) -> None:
        """Buffer a delete of ``key``."""
        self._check_active()
        key = check_key(key)
        writes = self._writes
        if key not in writes:
            self._unsorted_writes.append(key)
        writes[key] = DELETE_MUTATION
        if self._state != "active":  # commit() began meanwhile, in another thread
            self._late_write(key, DELETE_MUTATION)

    # -- reads ---------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` in this transaction: own writes, else the snapshot
        (without the keys of a lease that has ended, :mod:`kvstore.lease_reads`)."""
        value = self._get_unleased(key)
        if value is None or (key in self._writes) or not self._services.lease_reads.active(self._layers, self.start_seq):
            return value
        return self._services.lease_reads.value(key, value, self._layers, self.start_seq)

    def _get_unleased(self, key: bytes) -> bytes | None:
        """:meth:`get` with every row's value, leased or not (recorded as a read all the same)."""
        self._check_active()
        key = check_key(key)
        local = self._writes.get(key)
        if local is not None:
            return _local_value(local)
        if self.isolation == SERIALIZABLE or self._ancestors:
            self._read_keys.add(key)
            if self._state != "active":  # commit() began meanwhile: the read may be unvalidated
                raise self._closed_error()
        self._has_read = True
        if self._inherited is not None:
            inherited = self._inherited.get(key)
            if inherited is not None:
                return _local_value(inherited)
        return visible_value(get_row(self._layers, key, self.start_seq))

    def get_with_revision(self, key: bytes) -> tuple[bytes | None, int | None]:
        """:meth:`get`, with the seq of the commit that wrote the value (its revision).

        The revision is None when there is no value, and for a value this
        transaction wrote (it has no seq until the commit).
        """
        self._check_active()
        key = check_key(key)
        if key in self._writes or (self._inherited is not None and key in self._inherited):
            return self.get(key), None
        value = self.get(key)  # records the read like get
        if value is None:
            return None, None
        row = get_row(self._layers, key, self.start_seq)
        assert row is not None  # get saw its value
        return value, int(row[1])

    def ended_lease(self, key: bytes) -> int | None:
        """The lease ``key``'s value was put with, if that lease has ended and its keys are not yet
        deleted (hidden from reads, waiting for a revoke: :func:`kvstore.leases.reap`); else None.
        Recorded as a read of ``key``."""
        reads = self._services.lease_reads
        if not reads.active(self._layers, self.start_seq):
            return None  # no lease record in this view: no key names a lease
        lease_id = lease_of_expiry(self.expires_at(key))
        if lease_id is None or reads.alive(lease_id, self._layers, self.start_seq):
            return None
        return lease_id

    def expires_at(self, key: bytes) -> int | None:
        """When ``key``'s value (as :meth:`get` sees it) expires, in ms since the epoch; None: no value, or never."""
        self._check_active()
        key = check_key(key)
        local = self._writes.get(key)
        if local is None and self._inherited is not None:
            local = self._inherited.get(key)
        if local is not None:
            return local[2] if _local_value(local) is not None else None
        if self._get_unleased(key) is None:  # records the read like get; a leased key's marker is its expiry
            return None
        row = get_row(self._layers, key, self.start_seq)
        assert row is not None
        return row[4]

    def get_for_update(self, key: bytes, timeout: float | None = None) -> bytes | None:
        """Lock ``key`` in this store handle, then read it like :meth:`get`.

        The lock is held until the transaction ends (commit, rollback,
        abort, expiry, garbage collection); other transactions of this
        handle calling ``get_for_update(key)`` wait for it. At commit,
        ``key`` counts as written: a write to it committed after our start
        by anyone (another process, a blind write) aborts us, even under
        SNAPSHOT.

        If the transaction has neither read nor written anything yet, it
        first moves its snapshot to the latest version this handle has
        applied, and reads on top of it the writes of the commits still in
        flight that the previous holder of ``key`` handed over (it released
        the lock once its commit was queued; see :mod:`kvstore.inflight`).
        So a transaction that queued behind another one on a hot key reads
        that one's commit instead of aborting on it, without waiting for it
        to be durable; it is rejected at commit (a retryable ConflictError)
        if that commit fails. Otherwise it
        keeps its snapshot (moving it would mix two snapshots, or let a
        write skip the first-committer-wins check against commits between
        the two), and may abort at commit as without the lock.

        Args:
            timeout: seconds to wait for the lock; default the store's
                ``lock_timeout_s`` (never past the transaction's TTL).

        Raises:
            LockTimeoutError: the lock was not granted in time.
            DeadlockError: waiting would close a cycle of transactions
                waiting for each other's keys.
            Both are ConflictErrors: roll back and retry (``Store.run`` does).
            TransactionClosedError / TransactionExpiredError: as named.
        """
        self._check_active()
        key = check_key(key)
        if key not in self._lock_keys:
            if timeout is None:
                timeout = self._services.lock_timeout_s
            elif isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
                raise ValueError(f"timeout must be a non-negative number of seconds, got {timeout!r}")
            timeout = min(float(timeout), max(0.0, self._deadline - time.monotonic()))
            locks = self._services.locks
            locks.acquire(self.id, key, timeout)
            with self._commit_lock:  # not while commit() takes the lock keys and the snapshot
                self._lock_keys.add(key)
                if self._state != "active":
                    if self._state != "committing":
                        # Expired (or ended) while waiting: what ended it released
                        # our other locks before this one was granted, and nothing will again.
                        locks.release_all(self.id)
                    # committing: commit() releases every lock of ours when it ends.
                    raise self._closed_error()
                if not self._has_read and not self._writes:
                    # The note before the head: its commits settle meanwhile
                    # either way, and InFlight.ancestors_after needs the head first.
                    note = locks.handed_over(key)
                    self._move_to_head()
                    if isinstance(note, InFlight):
                        self._ancestors = note.ancestors_after(self.start_seq)
                        if self._ancestors:
                            self._inherited = overlay_of(self._ancestors)
        return self.get(key)

    def _move_to_head(self) -> None:
        """Start over at the head (nothing read or written yet: nothing to invalidate)."""
        services = self._services
        layers: list[Layers] = []

        def head() -> tuple[int, int]:
            version, seq, head_layers = services.head()
            layers.append(head_layers)
            return version, seq

        def moved(version: int, seq: int) -> None:
            # Under the oracle lock, like expiry: the pin moves atomically.
            if seq != self._pinned[0]:
                services.watermark.pin(seq)
                services.watermark.unpin(self._pinned[0])
                self._pinned[0] = seq
            self.version, self.start_seq, self._layers = version, seq, layers[0]

        services.oracle.advance(self.id, head, moved)

    def scan(
        self,
        start: bytes | None = None,
        end: bytes | None = None,
        prefix: bytes | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` pairs of this transaction's view in ``[start, end)`` / ``prefix``.

        Under SERIALIZABLE the whole requested range joins the read set, so a
        key another transaction inserts into it later aborts this one (no
        phantoms), whether or not any row came back.
        """
        self._check_active()
        lo, hi = scan_bounds(start, end, prefix)
        check_limit(limit)
        if self.isolation == SERIALIZABLE or self._ancestors:
            self._read_ranges.append((lo, hi))
            if self._state != "active":  # commit() began meanwhile: the range may be unvalidated
                raise self._closed_error()
        self._has_read = True
        # Copy the local writes in range now: the caller may keep writing while
        # it iterates.
        writes = self._writes
        if self._unsorted_writes:
            # Merged into the sorted keys, not all sorted again: timsort merges a
            # sorted run with a few new keys in about one pass, so a transaction
            # that scans between many writes stays linear, not quadratic.
            added, self._unsorted_writes = self._unsorted_writes, []
            merged = self._sorted_writes + added
            merged.sort()
            self._sorted_writes = merged if len(merged) == len(writes) else sorted(writes)
        keys = self._sorted_writes
        if self._inherited is not None:  # in-flight writes under our own
            writes = {**self._inherited, **writes}
            keys = sorted(writes)
        first = 0 if lo is None else bisect_left(keys, lo)
        last = len(keys) if hi is None else bisect_left(keys, hi)
        in_range = keys[first:last]
        if reverse:
            in_range.reverse()
        local = [(k, writes[k]) for k in in_range]
        base = scan_rows(self._layers, self.start_seq, lo, hi, bool(reverse))
        if self._services.lease_reads.active(self._layers, self.start_seq):
            shows = self._services.lease_reads.shows
            layers, seq = self._layers, self.start_seq
            base = (row for row in base if shows(row[4], layers, seq))
        return _overlay(base, local, bool(reverse), limit)


def _release_abandoned(
    watermark: Watermark, oracle: Oracle, locks: KeyLocks, pinned: list[int], txn_id: int
) -> None:
    """Finalizer of a transaction dropped while active: releases that never block."""
    watermark.release_later(pinned[0])
    oracle.end_later(txn_id)
    locks.release_later(txn_id)


def _local_value(mutation: Mutation) -> bytes | None:
    kind, value, expire = mutation
    if kind != PUT or (expire is not None and expire <= now_ms()):
        return None
    return value


def _overlay(
    base: Iterator[Row], local: list[tuple[bytes, Mutation]], reverse: bool, limit: int | None
) -> Iterator[tuple[bytes, bytes]]:
    """Merge snapshot rows with local writes (local wins; local deletes hide)."""
    if limit == 0:
        return
    emitted = 0
    before = operator.gt if reverse else operator.lt
    i = 0
    for row in base:
        key = row[0]
        while i < len(local) and before(local[i][0], key):
            value = _local_value(local[i][1])
            i += 1
            if value is not None:
                yield local[i - 1][0], value
                emitted += 1
                if limit is not None and emitted >= limit:
                    return
        if i < len(local) and local[i][0] == key:
            value = _local_value(local[i][1])
            i += 1
            if value is None:
                continue
            yield key, value
        else:
            yield key, row[3]  # type: ignore[misc]
        emitted += 1
        if limit is not None and emitted >= limit:
            return
    for key, mutation in local[i:]:
        value = _local_value(mutation)
        if value is not None:
            yield key, value
            emitted += 1
            if limit is not None and emitted >= limit:
                return


class OptimisticTransactions:
    """Begins the transactions of one store handle (``Store.begin``, ``transaction``, ``run``).

    Owns the wiring of the oracle: every version the engine state applies
    (ours or another writer's) feeds the oracle's committed history, and a
    state rebuilt after falling behind GC moves its horizon. Thread-safe.
    """

    def __init__(
        self,
        oracle: Oracle,
        state: EngineState,
        committer: Committer,
        watermark: Watermark,
        options: StoreOptions,
        check_open: Callable[[], None],
        sync: Callable[[], None] | None = None,
    ) -> None:
        """``sync``: brings the view up to every commit acknowledged so far
        (:class:`kvstore.freshness.ReadBarrier`); what ``begin(fresh=None)`` runs.
        None when reads are serializable (the handle's view)."""
        self.oracle = oracle
        self._sync = sync
        self._state = state
        self._options = options
        self.locks = KeyLocks()

        def head() -> tuple[int, int, Layers]:
            version, seq = state.head
            return version, seq, state.layers  # layers never older than the head read just before

        self.lease_reads = LeaseReads()
        self._services = TxnServices(
            committer, oracle, watermark, check_open, self.locks, head, options.lock_timeout_s, self.lease_reads
        )
        state.listeners.append(oracle.record_version)
        state.reload_listeners.append(oracle.set_horizon)

    def running_count(self) -> int:
        """Open transactions of this handle (begun, not yet committed, rolled back or expired)."""
        return self.oracle.running_count()

    def key_lock_count(self) -> int:
        """Keys locked by ``get_for_update`` right now."""
        return len(self.locks)

    def key_lock_waiter_count(self) -> int:
        """Transactions of this handle queued for a key's lock right now."""
        return self.locks.waiting_count()

    def begin(self, isolation: str = SERIALIZABLE, ttl: float | None = None, fresh: bool | None = None) -> Transaction:
        """Start a transaction at the current snapshot.

        Args:
            isolation: ``"serializable"`` (default: no anomalies, write skew
                included) or ``"snapshot"`` (only write-write conflicts abort).
            ttl: seconds before the transaction expires (default: the store's
                ``txn_ttl_s``, 1 h).
            fresh: True: first catch up with versions other writers
                committed; False: start at this handle's view; None: as the
                store's ``read_consistency`` says (linearizable by default:
                the snapshot holds every commit acknowledged before the call).
        """
        self._services.check_open()
        if isolation not in ISOLATION_LEVELS:
            raise ValueError(f"isolation must be one of {ISOLATION_LEVELS}, got {isolation!r}")
        if ttl is None:
            ttl = self._options.txn_ttl_s
        elif isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0:
            raise ValueError(f"ttl must be a positive number of seconds, got {ttl!r}")
        state = self._state
        if fresh:
            state.catch_up()
        elif fresh is None and self._sync is not None:
            self._sync()
        holder: list[Layers] = []

        def head() -> tuple[int, int]:
            version_seq = state.head
            holder.append(state.layers)  # never older than the head read just before
            return version_seq

        txn_id, version, start_seq = self.oracle.begin(head, float(ttl))
        return Transaction(self._services, txn_id, version, start_seq, holder[0], isolation, float(ttl))

    def transaction(
        self, isolation: str = SERIALIZABLE, ttl: float | None = None, fresh: bool | None = None
    ) -> ContextManager[Transaction]:
        """``with store.transaction() as txn:`` commits on normal exit, rolls back on exception."""
        return transaction_scope(self.begin(isolation, ttl, fresh))

    def run_on_newest(self, fn: Callable[[Transaction], T]) -> T:
        """:meth:`run` with every attempt on the newest version (fresh): what ``fn`` reads
        includes every commit acknowledged before the call, by any process."""
        options = self._options
        # Linearizable begins already start at every acknowledged commit, at the
        # price of a beacon read on a local directory instead of a root probe.
        fresh = None if self._sync is not None else True
        return run_with_retries(
            lambda _: self.begin(SERIALIZABLE, None, fresh=fresh), fn, 10, options.backoff_min_s, options.backoff_max_s
        )

    def run(
        self,
        fn: Callable[[Transaction], T],
        isolation: str = SERIALIZABLE,
        retries: int = 10,
        ttl: float | None = None,
    ) -> T:
        """Run ``fn(txn)`` and commit, retrying up to ``retries`` times.

        Retried: ConflictError (from the commit or from ``fn``), and
        SnapshotTooOldError raised by the commit (the transaction started
        before versions this handle could not read; a fresh one starts after
        them). Each retry starts a fresh transaction (catching up first)
        after a jittered exponential backoff. Returns ``fn``'s result.

        Raises:
            ConflictError / SnapshotTooOldError: still failing after ``retries`` retries.
            ValueError: a bad ``retries``; anything ``fn`` raises, unchanged.
        """
        options = self._options
        return run_with_retries(
            lambda fresh: self.begin(isolation, ttl, fresh=fresh or None), fn, retries, options.backoff_min_s, options.backoff_max_s
        )
